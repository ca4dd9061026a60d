"""The cubin writer: a model of sections and symbols built from the image
(:func:`write_cubin`), laid out (:class:`Layout`), then serialised to bytes."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence, Union

from ..arch import Arch, ElfAbi, get_abi, get_arch
from ..image import (STB, ConstantBank, KernelImage, ModuleImage, Relocation, RelocType, align_up,
                     code_relocation_part, find_exit_offsets, place_globals)
from .format import (CALLGRAPH_SENTINELS, ELF_MAGIC, ELFCLASS64, ELFDATA2LSB, EM_CUDA, ET_EXEC, EV_CURRENT,
                     NOTE_OWNER, NOTE_VERSION, PF, PT, REL_ACTION, SHF, SHT, STO_CUDA_ENTRY, STT,
                     TEXT_BARRIERS_SHIFT, TEXT_REGCOUNT_SHIFT, CallgraphEntry, CuInfoDesc, Elf64_Ehdr,
                     Elf64_Nhdr, Elf64_Phdr, Elf64_Rel, Elf64_Rela, Elf64_Shdr, Elf64_Sym, NoteType, TkInfoDesc)
from .nvinfo import EICOMPAT, KParamInfo, NvInfoAttribute, ParamCbank, SymbolAttr, encode_nv_info


# --------------------------------------------------------------------------------------------
# Model
# --------------------------------------------------------------------------------------------

@dataclass(eq=False)
class Section:
    name: str
    type: SHT
    flags: int = 0
    # bytes, or a function of the finished Layout (for contents that name symbol indices)
    content: Union[bytes, Callable[["Layout"], bytes]] = b""
    nobits_size: int = 0
    link: Optional["Section"] = None
    info: Union[int, "Section", "Symbol"] = 0
    info_high: int = 0         # bits or'ed into sh_info (register count of .text)
    align: int = 1
    entsize: int = 0


@dataclass(eq=False)
class Symbol:
    name: str
    section: Optional[Section]
    value: int = 0
    size: int = 0
    bind: STB = STB.LOCAL
    type: STT = STT.NOTYPE
    other: int = 0


class Layout:
    """Indices, string offsets, file offsets: everything serialisation needs."""

    def __init__(self, sections: list[Section], symbols: list[Symbol]):
        self.sections = [Section("", SHT.NULL)] + sections
        self.symbols = [Symbol("", None)] + symbols
        self.section_index = {id(s): i for i, s in enumerate(self.sections)}
        self.symbol_index_of = {id(s): i for i, s in enumerate(self.symbols)}
        self.first_global = next((i for i, s in enumerate(self.symbols) if s.bind != STB.LOCAL),
                                 len(self.symbols))
        if any(s.bind == STB.LOCAL for s in self.symbols[self.first_global:]):
            raise AssertionError("ELF requires local symbols before global ones")

    def index(self, thing: Union[Section, Symbol, int, None]) -> int:
        if thing is None:
            return 0
        if isinstance(thing, int):
            return thing
        if isinstance(thing, Section):
            return self.section_index[id(thing)]
        return self.symbol_index_of[id(thing)]


class StringTable:
    def __init__(self) -> None:
        self.data = bytearray(b"\0")
        self.offsets: dict[str, int] = {"": 0}

    def add(self, name: str) -> int:
        if name not in self.offsets:
            self.offsets[name] = len(self.data)
            self.data += name.encode() + b"\0"
        return self.offsets[name]


def _note(note_type: NoteType, desc: bytes) -> bytes:
    head = Elf64_Nhdr.pack(n_namesz=len(NOTE_OWNER), n_descsz=len(desc), n_type=note_type)
    return head + NOTE_OWNER.ljust(align_up(len(NOTE_OWNER), 4), b"\0") + desc.ljust(align_up(len(desc), 4), b"\0")


def _tkinfo_desc(arch: Arch) -> bytes:
    strings = [b"", b"sassas", b"sassas cubin writer", b"sassas", f"-arch {arch.name}".encode()]
    offsets, blob = [], bytearray()
    for text in strings:
        offsets.append(len(blob))
        blob += text + b"\0"
    # Object name points at the empty string at offset 0, like ptxas writes it; nvdisasm
    # wants the descriptor size itself padded to 4 bytes.
    desc = TkInfoDesc.pack(version=NOTE_VERSION, object_name=offsets[0], tool_name=offsets[1],
                           tool_version=offsets[2], tool_branch=offsets[3], tool_options=offsets[4]) + bytes(blob)
    return desc.ljust(align_up(len(desc), 4), b"\0")


# --------------------------------------------------------------------------------------------
# Writer
# --------------------------------------------------------------------------------------------

def _dim3(value: Union[int, tuple[int, ...], None]) -> Optional[list[int]]:
    if value is None:
        return None
    dims = [value] if isinstance(value, int) else list(value)
    if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
        raise ValueError(f"thread-block bound {value!r}: expected 1..3 positive numbers")
    return dims + [1] * (3 - len(dims))


def _check_kernel(arch: Arch, k: KernelImage) -> None:
    where = f"kernel {k.name!r}"
    if not k.name or "\0" in k.name:
        raise ValueError(f"{where}: invalid name")
    if len(k.code) == 0 or len(k.code) % 16:
        raise ValueError(f"{where}: code is {len(k.code)} bytes, expected a positive multiple of 16")
    if not 1 <= k.registers <= arch.max_registers:
        raise ValueError(f"{where}: {k.registers} registers, {arch.name} allows 1..{arch.max_registers}")
    if k.param_bytes > arch.max_param_bytes:
        raise ValueError(f"{where}: {k.param_bytes} parameter bytes, {arch.name} allows {arch.max_param_bytes}")
    spans = sorted((p.offset, p.offset + p.size, i) for i, p in enumerate(k.params))
    for p in k.params:
        if p.size <= 0 or p.offset < 0:
            raise ValueError(f"{where}: parameter {p} has a bad offset or size")
    for (a0, a1, i), (b0, b1, j) in zip(spans, spans[1:]):
        if b0 < a1:
            raise ValueError(f"{where}: parameters {i} and {j} overlap")
    if k.shared_bytes < 0 or k.shared_bytes > arch.max_shared_per_block:
        raise ValueError(f"{where}: {k.shared_bytes} bytes of shared memory, "
                         f"{arch.name} allows {arch.max_shared_per_block}")
    if not 0 <= k.barriers <= 16:
        raise ValueError(f"{where}: {k.barriers} named barriers, hardware has 16")
    for off in (k.exit_offsets or []) + k.s2r_ctaid_offsets:
        if off % 16 or not 0 <= off < len(k.code):
            raise ValueError(f"{where}: instruction offset {off:#x} outside the code or unaligned")


def _max_registers(arch: Arch, k: KernelImage) -> int:
    if k.max_registers is not None:
        return k.max_registers
    threads = _dim3(k.max_threads)
    if threads and k.min_blocks:
        # ptxas's launch-bounds limit: the register file shared by min_blocks blocks, rounded
        # down to the allocation granule of 8 (256 threads x 2 blocks -> 128).
        per_thread = arch.register_file // (threads[0] * threads[1] * threads[2] * k.min_blocks)
        return max(8, min(arch.max_registers, per_thread // 8 * 8))
    return arch.max_registers


def write_cubin(arch: Union[str, Arch], kernels: Sequence[KernelImage],
                constants: Union[bytes, ConstantBank, None] = None, *, abi: Optional[str] = None,
                module: Optional[ModuleImage] = None) -> bytes:
    """Build a cubin for `arch` ('sm_70'..'sm_121') holding `kernels`, and `module`'s global
    variables, module constant banks and their relocations.

    `abi` picks the ELF dialect ('cuda12': ptxas 12.x, loads on CUDA 12 and 13 drivers;
    'cuda13': nvcc 13, CUDA 13 drivers only, read by nvdisasm 13 without warnings);
    the default is the arch's (:attr:`sassas.arch.Arch.default_abi`).
    """
    arch = get_arch(arch) if isinstance(arch, str) else arch
    elf_abi = get_abi(abi or arch.default_abi)
    if elf_abi.name not in arch.abis:
        raise ValueError(f"{arch.name} cubins are written in the {' or '.join(arch.abis)} dialect, "
                         f"not {elf_abi.name}")
    names = [k.name for k in kernels]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate kernel names: {names}")
    for k in kernels:
        _check_kernel(arch, k)
    if isinstance(constants, (bytes, bytearray)):
        constants = ConstantBank(bytes(constants))
    module = module or ModuleImage()
    if constants is not None and 3 in module.constant_banks:
        raise ValueError("constant bank 3 given twice: as `constants` and in the module's banks")
    return _serialise(*_build_model(arch, elf_abi, list(kernels), constants, module), arch=arch, abi=elf_abi)


def _relocation_section(arch: Arch, target: Section, relocations: Sequence[Relocation],
                        symtab: Section, symbol_of: Callable[[str], "Symbol"],
                        explicit: Optional[bool] = None) -> Section:
    """`.rel.<target>` (or `.rela.` on arches that write explicit addends, or where `explicit`)."""
    explicit = arch.rela if explicit is None else explicit
    record = Elf64_Rela if explicit else Elf64_Rel

    def content(L: "Layout") -> bytes:
        # ptxas lists a section's relocations from the highest offset down; so do we. Symbols
        # are looked up here, once every section's are made.
        out = []
        for r in sorted(relocations, key=lambda r: -r.offset):
            sym = symbol_of(r.symbol)
            fields = dict(r_offset=r.offset, r_info=(L.index(sym) << 32) | int(r.type))
            if explicit:
                fields["r_addend"] = r.addend
            out.append(record.pack(**fields))
        return b"".join(out)

    return Section(f".{'rela' if explicit else 'rel'}{target.name}", SHT.RELA if explicit else SHT.REL,
                   flags=SHF.INFO_LINK, link=symtab, info=target, align=8, entsize=record.size, content=content)


def _module_sections(arch: Arch, module: ModuleImage, symtab: Section, kernel_symbols: dict[str, "Symbol"],
                     external: Callable[[str], "Symbol"]):
    """Sections and symbols of the module's data: (data sections by name, relocation
    sections, module constant banks, local symbols, global symbols). `external(name)`: the
    undefined symbol of one of the module's externs."""
    data: dict[str, Section] = {}
    local_syms: list[Symbol] = []
    global_syms: list[Symbol] = []
    objects: dict[str, Symbol] = {}
    for section_name, (placed, size, align) in place_globals(module.globals).items():
        if section_name == ".nv.global.init":
            image = bytearray(size)
            for obj, at in placed:
                image[at:at + obj.size] = obj.initial
            sec = Section(section_name, SHT.PROGBITS, flags=SHF.WRITE | SHF.ALLOC, content=bytes(image), align=align)
        else:
            sec = Section(section_name, SHT.NOBITS, flags=SHF.WRITE | SHF.ALLOC, nobits_size=size, align=align)
        data[section_name] = sec
        local_syms.append(Symbol(sec.name, sec, type=STT.SECTION))
        for obj, at in placed:
            sym = Symbol(obj.name, sec, value=at, size=obj.size, bind=STB(obj.bind), type=STT.OBJECT)
            objects[obj.name] = sym
            (local_syms if sym.bind == STB.LOCAL else global_syms).append(sym)

    def symbol_of(name: str) -> Symbol:
        sym = objects.get(name) or kernel_symbols.get(name)
        if sym is None and name in module.externs:
            sym = external(name)
        if sym is None:
            raise ValueError(f"relocation against {name!r}: no global variable, kernel or extern of that name")
        return sym

    def with_addends(image: bytes, relocations: Sequence[Relocation], what: str) -> bytes:
        out = bytearray(image)
        for r in relocations:
            if r.type not in (RelocType.R_CUDA_64, RelocType.R_CUDA_G64):
                raise ValueError(f"{what}: relocation type {r.type} is not supported (R_CUDA_64, R_CUDA_G64 are)")
            if r.offset % 8 or r.offset + 8 > len(out):
                raise ValueError(f"{what}: relocation at {r.offset:#x} is unaligned or past the end ({len(out)} bytes)")
            # REL: the addend is the data at the relocated place; RELA: it is in the entry.
            out[r.offset:r.offset + 8] = (0 if arch.rela else r.addend).to_bytes(8, "little", signed=True)
        return bytes(out)

    relocs: list[Section] = []
    banks: list[Section] = []
    for bank, image in sorted(module.constant_banks.items()):
        if not 1 <= bank <= 17:
            raise ValueError(f"module constant bank {bank}: expected 1..17")
        bank_relocs = module.bank_relocations.get(bank, [])
        sec = Section(f".nv.constant{bank}", SHT.PROGBITS, flags=SHF.ALLOC, align=8 if bank_relocs else 4,
                      content=with_addends(bytes(image), bank_relocs, f".nv.constant{bank}"))
        banks.append(sec)
        local_syms.append(Symbol(sec.name, sec, type=STT.SECTION))
        for obj in module.bank_symbols.get(bank, []):
            if obj.name in objects or obj.offset is None or obj.offset + obj.size > len(image):
                raise ValueError(f"constant {obj.name!r}: defined twice, or outside bank {bank}'s {len(image)} bytes")
            sym = Symbol(obj.name, sec, value=obj.offset, size=obj.size, bind=STB(obj.bind), type=STT.OBJECT)
            objects[obj.name] = sym
            (local_syms if sym.bind == STB.LOCAL else global_syms).append(sym)
        if bank_relocs:
            relocs.append(_relocation_section(arch, sec, bank_relocs, symtab, symbol_of))
    for bank in set(module.bank_relocations) | set(module.bank_symbols):
        if bank not in module.constant_banks and (module.bank_relocations.get(bank) or module.bank_symbols.get(bank)):
            raise ValueError(f"relocations or symbols in module constant bank {bank}, which has no data")
    if module.global_relocations:
        init = data.get(".nv.global.init")
        if init is None:
            raise ValueError("relocations in .nv.global.init, which holds no initialised global")
        init.content = with_addends(init.content, module.global_relocations, ".nv.global.init")
        relocs.append(_relocation_section(arch, init, module.global_relocations, symtab, symbol_of))
    for r in [r for rs in module.bank_relocations.values() for r in rs] + module.global_relocations:
        symbol_of(r.symbol)          # every name known, before any byte is written
    return data, relocs, banks, local_syms, global_syms


def _build_model(arch: Arch, abi: ElfAbi, kernels: list[KernelImage],
                 constants: Optional[ConstantBank],
                 module: Optional[ModuleImage] = None) -> tuple[list[Section], list[Symbol]]:
    shstrtab = Section(".shstrtab", SHT.STRTAB)
    strtab = Section(".strtab", SHT.STRTAB)
    symtab = Section(".symtab", SHT.SYMTAB, link=strtab, align=8, entsize=Elf64_Sym.size)
    head = [shstrtab, strtab, symtab]
    if abi.notes:
        tkinfo = Section(".note.nv.tkinfo", SHT.NOTE, flags=SHF.CUDA_TKINFO_NOTE, align=4,
                         content=_note(NoteType.CUDA_TKINFO, _tkinfo_desc(arch)))
        cuinfo_desc = CuInfoDesc.pack(version=NOTE_VERSION, virtual_sm=arch.sm, toolkit=abi.toolkit_version)
        cuinfo = Section(".note.nv.cuinfo", SHT.NOTE, flags=SHF.CUDA_CUINFO_NOTE, align=4, link=tkinfo,
                         content=_note(NoteType.CUDA_CUINFO, cuinfo_desc))
        head += [tkinfo, cuinfo]
        if arch.compat:
            compat_attrs = [NvInfoAttribute(EICOMPAT[name], value) for name, value in arch.compat]
            compat = Section(".nv.compat", SHT.CUDA_COMPAT_INFO, align=4,
                             content=encode_nv_info(compat_attrs, lambda x: x))
            # ptxas points the cuinfo note at the compat section.
            cuinfo.flags |= SHF.INFO_LINK
            cuinfo.info = compat
            head.append(compat)

    module_info_attrs: list[NvInfoAttribute] = []
    module_info = Section(".nv.info", SHT.CUDA_INFO, link=symtab, align=4,
                          content=lambda L: encode_nv_info(module_info_attrs, L.index))
    calls: list[tuple[Symbol, str]] = []      # (caller, callee's name): a CALL.ABS relocation each

    def callgraph_content(L: "Layout") -> bytes:
        # ptxas: the first sentinel, each caller/callee pair once, the other sentinels.
        edges = list(dict.fromkeys((L.index(caller), L.index(code_symbol(callee))) for caller, callee in calls))
        pairs = CALLGRAPH_SENTINELS[:1] + tuple(edges) + CALLGRAPH_SENTINELS[1:]
        return b"".join(CallgraphEntry.pack(caller=a, callee=b) for a, b in pairs)

    callgraph = Section(".nv.callgraph", SHT.CUDA_CALLGRAPH, link=symtab, align=4,
                        entsize=CallgraphEntry.size, content=callgraph_content)

    kernel_infos, texts, shareds, const0s = [], [], [], []
    local_syms: list[Symbol] = []
    global_syms: list[Symbol] = []
    functions: dict[str, Symbol] = {}
    code_relocations: list[tuple[Section, list[Relocation]]] = []
    for k in kernels:
        text_flags = SHF.ALLOC | SHF.EXECINSTR
        if abi.barriers_in_text_flags:
            text_flags |= k.barriers << TEXT_BARRIERS_SHIFT
        text = Section(f".text.{k.name}", SHT.PROGBITS, flags=text_flags, content=bytes(k.code),
                       link=symtab, align=128,
                       info_high=(k.registers << TEXT_REGCOUNT_SHIFT) if arch.regcount_in_text_info else 0)
        if k.entry:
            func = Symbol(k.name, text, size=len(k.code), bind=STB.GLOBAL, type=STT.FUNC, other=STO_CUDA_ENTRY)
            global_syms.append(func)
        else:
            func = Symbol(k.name, text, size=len(k.code), bind=STB.LOCAL, type=STT.FUNC)
            local_syms.append(func)
        functions[k.name] = func
        text.info = func
        texts.append(text)
        local_syms.append(Symbol(text.name, text, type=STT.SECTION))
        if k.relocations:
            code_relocations.append((text, k.relocations))
            calls.extend((func, r.symbol) for r in k.relocations if code_relocation_part(r.type) == "abs")

        if k.shared_bytes:
            shared = Section(f".nv.shared.{k.name}", SHT.NOBITS, flags=SHF.WRITE | SHF.ALLOC | SHF.INFO_LINK,
                             nobits_size=k.shared_bytes, info=text, align=k.shared_align)
            shareds.append(shared)
            local_syms.append(Symbol(shared.name, shared, type=STT.SECTION))

        module_info_attrs += [
            NvInfoAttribute.make("EIATTR_REGCOUNT", SymbolAttr(func, k.registers)),
            NvInfoAttribute.make("EIATTR_FRAME_SIZE", SymbolAttr(func, k.uses_local)),
            NvInfoAttribute.make("EIATTR_MIN_STACK_SIZE", SymbolAttr(func, k.uses_local)),
        ]
        if k.entry:
            const0 = Section(f".nv.constant0.{k.name}", SHT.PROGBITS, flags=SHF.ALLOC | SHF.INFO_LINK,
                             content=bytes(k.const0_size(arch)), info=text, align=4)
            const0s.append(const0)
        for bank, data in sorted(k.constant_banks.items()):
            cbank = Section(f".nv.constant{bank}.{k.name}", SHT.PROGBITS, flags=SHF.ALLOC | SHF.INFO_LINK,
                            content=bytes(data), info=text, align=4)
            const0s.append(cbank)
            local_syms.append(Symbol(cbank.name, cbank, type=STT.SECTION))
        if k.entry:
            const0_sym = Symbol(const0.name, const0, type=STT.SECTION)
            local_syms.append(const0_sym)
            attrs = _kernel_attributes(arch, abi, k, const0_sym)
        else:
            attrs = _function_attributes(arch, abi, k)     # (a device function has no bank 0)
        kernel_infos.append(Section(f".nv.info.{k.name}", SHT.CUDA_INFO, flags=SHF.INFO_LINK, link=symtab,
                                    info=text, align=4,
                                    content=lambda L, attrs=attrs: encode_nv_info(attrs, L.index)))

    extra: list[Section] = []
    if constants is not None:
        const3 = Section(".nv.constant3", SHT.PROGBITS, flags=SHF.ALLOC, content=constants.data, align=4)
        extra.append(const3)
        local_syms.append(Symbol(const3.name, const3, type=STT.SECTION))
        for name, (offset, size) in constants.symbols.items():
            if offset + size > len(constants.data):
                raise ValueError(f"constant {name!r} ({offset:#x}+{size}) outside the bank's {len(constants.data)} bytes")
            local_syms.append(Symbol(name, const3, value=offset, size=size, type=STT.OBJECT))
    local_syms.append(Symbol(callgraph.name, callgraph, type=STT.SECTION))

    undefined: dict[str, Symbol] = {}

    def external(name: str) -> Symbol:
        """A name the driver must find elsewhere: an undefined global symbol, as ptxas writes
        for `vprintf` (one per name, whether code or data refers to it)."""
        sym = undefined.get(name)
        if sym is None:
            sym = undefined[name] = Symbol(name, None, bind=STB.GLOBAL, type=STT.FUNC)
            global_syms.append(sym)
        return sym

    data, relocs, banks, module_locals, module_globals = _module_sections(
        arch, module or ModuleImage(), symtab, functions, external)
    local_syms += module_locals
    global_syms += module_globals
    objects = {s.name: s for s in module_locals + module_globals if s.type == STT.OBJECT}

    def code_symbol(name: str) -> Symbol:
        """A kernel, function or global variable of the module; else an undefined symbol."""
        return functions.get(name) or objects.get(name) or external(name)

    for text, rels in code_relocations:
        for r in rels:
            code_symbol(r.symbol)          # every symbol made before the layout numbers them
        # ptxas: entries with an addend in `.rela.text.<f>`, the others in `.rel.text.<f>`
        # (all in `.rela` on sm_90).
        groups = [(rels, True)] if arch.rela else [([r for r in rels if not r.addend], False),
                                                    ([r for r in rels if r.addend], True)]
        relocs += [_relocation_section(arch, text, group, symtab, code_symbol, explicit=explicit)
                   for group, explicit in groups if group]
    if relocs and not arch.rela:
        action = Section(".nv.rel.action", SHT.CUDA_RELOCINFO, content=REL_ACTION, align=8, entsize=8)
        relocs.insert(0, action)
        local_syms.append(Symbol(action.name, action, type=STT.SECTION))
    init = [data[".nv.global.init"]] if ".nv.global.init" in data else []
    bss = [data[".nv.global"]] if ".nv.global" in data else []

    # Section order follows ptxas: .shstrtab .strtab .symtab, then (ptxas's .debug_frame slot,
    # here .nv.callgraph) so that the notes land on indices 5 and 6: cuobjdump 13.5 calls an
    # sm_90 CUDA 13 cubin "Invalid ELF" unless a note sits at section index 6 (measured).
    notes, compat = head[3:5], head[5:]
    # Module data as ptxas places it: relocations after the .nv.info sections, initialised
    # globals after the code, the constant banks (module-wide first) at the end.
    sections = (head[:3] + [callgraph] + notes + [module_info] + compat + kernel_infos + relocs
                + extra + texts + init + shareds + bss + banks + const0s)
    return sections, local_syms + global_syms


def _function_attributes(arch: Arch, abi: ElfAbi, k: KernelImage) -> list[NvInfoAttribute]:
    """`.nv.info.<f>` of a device function, as ptxas writes it (less its SPARSE_MMA_MASK)."""
    A = NvInfoAttribute.make
    attrs = [A("EIATTR_SW_WAR", arch.sw_war)] if arch.sw_war is not None else []
    return attrs + [A("EIATTR_CUDA_API_VERSION", abi.cuda_api_version)] + k.extra_attributes


def _kernel_attributes(arch: Arch, abi: ElfAbi, k: KernelImage, const0_sym: Symbol) -> list[NvInfoAttribute]:
    A = NvInfoAttribute.make
    attrs = [A("EIATTR_CUDA_API_VERSION", abi.cuda_api_version)]
    # ptxas lists parameters last ordinal first.
    for ordinal in reversed(range(len(k.params))):
        p = k.params[ordinal]
        attrs.append(A("EIATTR_KPARAM_INFO", KParamInfo(ordinal=ordinal, offset=p.offset, size=p.size)))
    attrs.append(A("EIATTR_MAXREG_COUNT", _max_registers(arch, k)))
    if k.barriers and not abi.barriers_in_text_flags:
        attrs.append(A("EIATTR_NUM_BARRIERS", k.barriers))
    exits = find_exit_offsets(arch, k.code) if k.exit_offsets is None else k.exit_offsets
    if exits:
        attrs.append(A("EIATTR_EXIT_INSTR_OFFSETS", list(exits)))
    if k.s2r_ctaid_offsets:
        attrs.append(A("EIATTR_S2RCTAID_INSTR_OFFSETS", list(k.s2r_ctaid_offsets)))
    if k.max_threads is not None:
        attrs.append(A("EIATTR_MAX_THREADS", _dim3(k.max_threads)))
    if k.req_threads is not None:
        attrs.append(A("EIATTR_REQNTID", _dim3(k.req_threads)))
    if k.params:  # ptxas leaves both out for a kernel without parameters
        attrs.append(A("EIATTR_CBANK_PARAM_SIZE", k.param_bytes))
        attrs.append(A("EIATTR_PARAM_CBANK", ParamCbank(const0_sym, arch.param_base, k.param_bytes)))
    if arch.sw_war is not None:
        attrs.append(A("EIATTR_SW_WAR", arch.sw_war))
    attrs += k.extra_attributes
    return attrs


def _serialise(sections: list[Section], symbols: list[Symbol], *, arch: Arch, abi: ElfAbi) -> bytes:
    layout = Layout(sections, symbols)
    shstrtab, strtab, symtab = sections[0], sections[1], sections[2]

    names = StringTable()
    for s in layout.sections[1:]:
        names.add(s.name)
    shstrtab.content = bytes(names.data)
    strings = StringTable()
    for sym in layout.symbols[1:]:
        strings.add(sym.name)
    strtab.content = bytes(strings.data)
    symtab.info = layout.first_global
    symtab.content = b"".join(
        Elf64_Sym.pack(st_name=strings.offsets[s.name] if s.name else 0,
                       st_info=(s.bind << 4) | s.type, st_other=s.other,
                       st_shndx=layout.index(s.section), st_value=s.value, st_size=s.size)
        for s in layout.symbols)

    contents = [s.content(layout) if callable(s.content) else bytes(s.content) for s in layout.sections]

    # File offsets: header, sections in order, section headers, program headers.
    offsets, pos = [0], Elf64_Ehdr.size
    for s, data in zip(layout.sections[1:], contents[1:]):
        pos = align_up(pos, max(s.align, 1))
        offsets.append(pos)
        if s.type != SHT.NOBITS:
            pos += len(data)
    shoff = align_up(pos, 8)
    phoff = shoff + Elf64_Shdr.size * len(layout.sections)

    def size_of(i: int) -> int:
        s = layout.sections[i]
        return s.nobits_size if s.type == SHT.NOBITS else len(contents[i])

    # Segments as ptxas writes them: the header table, code, shared memory, constant banks.
    def span(kind: Callable[[Section], bool]) -> Optional[tuple[int, int, int]]:
        idx = [i for i, s in enumerate(layout.sections) if i and kind(s)]
        if not idx:
            return None
        start = min(offsets[i] for i in idx)
        file_end = max(offsets[i] + (0 if layout.sections[i].type == SHT.NOBITS else size_of(i)) for i in idx)
        mem = sum(size_of(i) for i in idx) if all(layout.sections[i].type == SHT.NOBITS for i in idx) \
            else file_end - start
        return start, max(file_end - start, 0), mem

    segments: list[tuple[PT, PF, tuple[int, int, int]]] = []
    code = span(lambda s: s.name.startswith(".text."))
    shared = span(lambda s: s.type == SHT.NOBITS and s.name.startswith(".nv.shared"))
    consts = span(lambda s: s.name.startswith(".nv.constant"))
    # Global variables: one read-write segment, the initialised bytes then the zeroed ones
    # (ptxas: file size = .nv.global.init, memory size up to the end of .nv.global).
    init_i = next((i for i, s in enumerate(layout.sections) if s.name == ".nv.global.init"), None)
    bss_i = next((i for i, s in enumerate(layout.sections) if s.name == ".nv.global"), None)
    data = None
    if init_i is not None or bss_i is not None:
        start = offsets[init_i if init_i is not None else bss_i]
        filesz = size_of(init_i) if init_i is not None else 0
        memsz = filesz
        if bss_i is not None:
            filesz = memsz = align_up(filesz, max(layout.sections[bss_i].align, 1)) if filesz else 0
            memsz += size_of(bss_i)
        data = (start, filesz, memsz)
    n_phdrs = 2 + sum(x is not None for x in (code, shared, data, consts))
    table = (phoff, Elf64_Phdr.size * n_phdrs, Elf64_Phdr.size * n_phdrs)
    segments.append((PT.PHDR, PF.R, table))
    segments.append((PT.LOAD, PF.R, table))
    if code:
        segments.append((PT.LOAD, PF.R | PF.X, code))
    if shared:
        segments.append((PT.LOAD, PF.R | PF.W, shared))
    if data:
        segments.append((PT.LOAD, PF.R | PF.W, data))
    if consts:
        segments.append((PT.LOAD, PF.R, consts))

    out = bytearray()
    ident = ELF_MAGIC + bytes([ELFCLASS64, ELFDATA2LSB, EV_CURRENT, abi.osabi, abi.abi_version])
    e_flags = abi.flag_bits if arch.flag_bits is None else arch.flag_bits
    for shift in abi.sm_shifts:
        e_flags |= arch.sm << shift
    if arch.features == "a":
        e_flags |= abi.accelerator_flag
    out += Elf64_Ehdr.pack(
        e_ident=ident.ljust(16, b"\0"), e_type=ET_EXEC, e_machine=EM_CUDA, e_version=abi.e_version,
        e_entry=0, e_phoff=phoff, e_shoff=shoff, e_flags=e_flags, e_ehsize=Elf64_Ehdr.size,
        e_phentsize=Elf64_Phdr.size, e_phnum=len(segments), e_shentsize=Elf64_Shdr.size,
        e_shnum=len(layout.sections), e_shstrndx=layout.index(shstrtab))
    for i, s in enumerate(layout.sections):
        if i == 0 or s.type == SHT.NOBITS:
            continue
        out += bytes(offsets[i] - len(out))
        out += contents[i]
    out += bytes(shoff - len(out))
    for i, s in enumerate(layout.sections):
        if i == 0:
            out += bytes(Elf64_Shdr.size)
            continue
        out += Elf64_Shdr.pack(
            sh_name=names.offsets[s.name], sh_type=s.type, sh_flags=int(s.flags), sh_addr=0,
            sh_offset=offsets[i], sh_size=size_of(i), sh_link=layout.index(s.link),
            sh_info=layout.index(s.info) | s.info_high, sh_addralign=s.align, sh_entsize=s.entsize)
    assert len(out) == phoff
    for p_type, p_flags, (offset, filesz, memsz) in segments:
        out += Elf64_Phdr.pack(p_type=p_type, p_flags=int(p_flags), p_offset=offset, p_vaddr=0, p_paddr=0,
                               p_filesz=filesz, p_memsz=memsz, p_align=8)
    return bytes(out)
