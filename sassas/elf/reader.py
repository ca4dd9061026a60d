"""The cubin reader: sections, symbols, relocations and kernels with named attributes
(:func:`read_cubin`), and the module data as a :class:`~sassas.image.ModuleImage` (:func:`read_module`)."""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from ..arch import abi_from_header, arch_from_sm
from ..image import STB, GlobalObject, KernelImage, ModuleImage, ParamInfo, Relocation, RelocType
from .format import (ELF_MAGIC, ELFCLASS64, ELFDATA2LSB, EM_CUDA, FATBIN_MAGIC, SHT, STO_CUDA_ENTRY, STT,
                     TEXT_BARRIERS_MASK, TEXT_BARRIERS_SHIFT, TEXT_REGCOUNT_SHIFT, CubinFormatError, Elf64_Ehdr,
                     Elf64_Rel, Elf64_Rela, Elf64_Shdr, Elf64_Sym)
from .nvinfo import EICOMPAT_BY_CODE, KParamInfo, NvInfoAttribute, SymbolAttr, decode_nv_info


@dataclass
class SectionInfo:
    index: int
    name: str
    type: int
    flags: int
    offset: int
    size: int
    link: int
    info: int
    align: int
    entsize: int
    data: bytes               # b"" for NOBITS

    @property
    def type_name(self) -> str:
        try:
            return SHT(self.type).name
        except ValueError:
            return f"{self.type:#x}"


@dataclass
class SymbolInfo:
    index: int
    name: str
    value: int
    size: int
    bind: int
    type: int
    other: int
    section: int


# Per-kernel attributes write_cubin derives from KernelImage fields (the rest are carried
# through `extra_attributes`).
_WRITER_KERNEL_ATTRIBUTES = frozenset({
    "EIATTR_CUDA_API_VERSION", "EIATTR_KPARAM_INFO", "EIATTR_MAXREG_COUNT", "EIATTR_NUM_BARRIERS",
    "EIATTR_EXIT_INSTR_OFFSETS", "EIATTR_S2RCTAID_INSTR_OFFSETS", "EIATTR_MAX_THREADS",
    "EIATTR_REQNTID", "EIATTR_CBANK_PARAM_SIZE", "EIATTR_PARAM_CBANK", "EIATTR_SW_WAR"})


@dataclass
class KernelInfo:
    name: str
    code: bytes
    params: list[ParamInfo]
    registers: int
    shared_bytes: int
    max_threads: Optional[tuple[int, int, int]]
    req_threads: Optional[tuple[int, int, int]]
    exit_offsets: list[int]
    s2r_ctaid_offsets: list[int]
    barriers: int
    frame_size: int
    max_registers: Optional[int]
    param_base: Optional[int]
    attributes: list[NvInfoAttribute]           # from .nv.info.<k>
    module_attributes: list[NvInfoAttribute]    # this kernel's entries in .nv.info
    symbol_index: int = 0
    constant_banks: dict[int, bytes] = field(default_factory=dict)   # bank (not 0) -> data
    entry: bool = True                          # False: a device function (no STO_CUDA_ENTRY)

    def attribute(self, name: str) -> list[Any]:
        """Values of every attribute called `name` (per-kernel, then module-wide)."""
        return [a.value for a in self.attributes + self.module_attributes if a.name == name]

    def to_image(self) -> KernelImage:
        """A KernelImage writing the same launch-relevant attributes (for round trips)."""
        return KernelImage(
            name=self.name, code=self.code, params=list(self.params), registers=self.registers,
            shared_bytes=self.shared_bytes, max_threads=self.max_threads, exit_offsets=list(self.exit_offsets),
            s2r_ctaid_offsets=list(self.s2r_ctaid_offsets), barriers=self.barriers, uses_local=self.frame_size,
            req_threads=self.req_threads, max_registers=self.max_registers,
            constant_banks=dict(self.constant_banks), entry=self.entry,
            extra_attributes=[a for a in self.attributes if a.name not in _WRITER_KERNEL_ATTRIBUTES])


@dataclass(frozen=True)
class RelocationInfo:
    section: str              # the relocated section: '.nv.constant4'
    offset: int
    symbol: str               # the symbol's name ('' for none)
    symbol_index: int
    type: int
    addend: int               # RELA: the entry's; REL: the 8 bytes at the place (R_CUDA_64/G64), else 0
    explicit: bool            # RELA


@dataclass
class CubinInfo:
    arch: str
    sm: int
    abi: str
    e_flags: int
    sections: list[SectionInfo]
    symbols: list[SymbolInfo]
    kernels: list[KernelInfo]
    module_attributes: list[NvInfoAttribute]
    constants: Optional[bytes] = None           # .nv.constant3
    compat_attributes: list[NvInfoAttribute] = field(default_factory=list)   # .nv.compat
    relocations: list[RelocationInfo] = field(default_factory=list)          # every .rel/.rela section's
    # Device functions: FUNC symbols without STO_CUDA_ENTRY that have their own `.text.<name>`
    # (ptxas's `__cuda_sm20_div_u64`).
    functions: list[KernelInfo] = field(default_factory=list)

    @property
    def target(self) -> str:
        """The arch, or its arch-specific target (`sm_90a`): .nv.compat's CUDA_ACCELERATOR_TARGET
        1 (nvcc 13), or e_flags bit 0x800 in the CUDA 12 header (ptxas 12.9)."""
        accelerated = any(a.name == "EICOMPAT_ATTR_CUDA_ACCELERATOR_TARGET" and a.value == 1
                          for a in self.compat_attributes)
        return self.arch + "a" if accelerated or (self.abi == "cuda12" and self.e_flags & 0x800) else self.arch

    def kernel(self, name: str) -> KernelInfo:
        """The kernel (or device function) called `name`."""
        for k in self.kernels + self.functions:
            if k.name == name:
                return k
        raise KeyError(f"no kernel {name!r} in this cubin; it has {', '.join(k.name for k in self.kernels)}")

    def section(self, name: str) -> Optional[SectionInfo]:
        return next((s for s in self.sections if s.name == name), None)


def _cstr(table: bytes, offset: int) -> str:
    end = table.find(b"\0", offset)
    return table[offset:end if end >= 0 else len(table)].decode(errors="replace")


def read_cubin(data: bytes) -> CubinInfo:
    """Parse a cubin (either dialect) into sections, symbols and kernels with named attributes.
    A file that is not one, or a damaged one, raises CubinFormatError saying what is wrong."""
    try:
        return _read_cubin(bytes(data))
    except (struct.error, IndexError, OverflowError) as e:
        # A record that the checks of the headers let through reaches past its section.
        raise CubinFormatError(f"damaged cubin: {e}") from None


EXTRACT_CUBINS = "`sassas disasm FILE` shows the cubins it holds, `cuobjdump -xelf all FILE` writes them out"


def _check_range(what: str, offset: int, size: int, total: int) -> None:
    if offset + size > total:
        raise CubinFormatError(f"damaged cubin: {what} (bytes {offset:#x}..{offset + size:#x}) runs past "
                               f"the end of the file ({total:#x} bytes)")


def _read_cubin(data: bytes) -> CubinInfo:
    if data[:4] == FATBIN_MAGIC:
        raise CubinFormatError(f"a fatbin (nvcc's container of cubins and PTX); {EXTRACT_CUBINS}")
    if len(data) < Elf64_Ehdr.size or data[:4] != ELF_MAGIC:
        raise CubinFormatError("not an ELF file")
    hdr = Elf64_Ehdr.unpack(data)
    ident = hdr["e_ident"]
    if ident[4] == ELFCLASS64 and ident[5] == ELFDATA2LSB and hdr["e_machine"] != EM_CUDA:
        raise CubinFormatError(f"an ELF file for machine {hdr['e_machine']} (a host program or library?); "
                               f"{EXTRACT_CUBINS}")
    if ident[4] != ELFCLASS64 or ident[5] != ELFDATA2LSB or hdr["e_machine"] != EM_CUDA:
        raise CubinFormatError("not a 64-bit little-endian CUDA ELF (cubin)")
    try:
        abi = abi_from_header(ident[7], ident[8])
    except ValueError as e:
        raise CubinFormatError(str(e)) from None
    _check_range("the section header table", hdr["e_shoff"], hdr["e_shnum"] * Elf64_Shdr.size, len(data))
    if not hdr["e_shstrndx"] < hdr["e_shnum"]:
        raise CubinFormatError(f"damaged cubin: section-name table index {hdr['e_shstrndx']} of "
                               f"{hdr['e_shnum']} sections")
    sm = (hdr["e_flags"] >> abi.sm_shift_read) & 0xFF
    try:
        arch = arch_from_sm(sm)
        arch_name, default_param_base = arch.name, arch.param_base
    except ValueError:
        arch_name, default_param_base = f"sm_{sm}", None

    raw_headers = [Elf64_Shdr.unpack(data, hdr["e_shoff"] + i * Elf64_Shdr.size) for i in range(hdr["e_shnum"])]
    shstr = raw_headers[hdr["e_shstrndx"]]
    shstr_data = data[shstr["sh_offset"]:shstr["sh_offset"] + shstr["sh_size"]]
    sections = []
    for i, h in enumerate(raw_headers):
        if h["sh_type"] not in (SHT.NOBITS, SHT.NULL):
            _check_range(f"section {i}", h["sh_offset"], h["sh_size"], len(data))
        body = b"" if h["sh_type"] in (SHT.NOBITS, SHT.NULL) else data[h["sh_offset"]:h["sh_offset"] + h["sh_size"]]
        sections.append(SectionInfo(i, _cstr(shstr_data, h["sh_name"]), h["sh_type"], h["sh_flags"],
                                    h["sh_offset"], h["sh_size"], h["sh_link"], h["sh_info"],
                                    h["sh_addralign"], h["sh_entsize"], body))
    by_name = {s.name: s for s in sections}
    # A function's own constant banks (.nv.constant2.<name>): found once, not once a function.
    banks_of: dict[str, dict[int, bytes]] = {}
    for name, sec in by_name.items():
        if m := re.fullmatch(r"\.nv\.constant([1-9]\d*)\.(.+)", name, re.S):
            banks_of.setdefault(m.group(2), {})[int(m.group(1))] = sec.data

    symbols: list[SymbolInfo] = []
    symtab = next((s for s in sections if s.type == SHT.SYMTAB), None)
    if symtab is not None:
        if not symtab.link < len(sections):
            raise CubinFormatError(f"damaged cubin: the symbol table names string table {symtab.link} "
                                   f"of {len(sections)} sections")
        strtab = sections[symtab.link].data
        for i in range(len(symtab.data) // Elf64_Sym.size):
            r = Elf64_Sym.unpack(symtab.data, i * Elf64_Sym.size)
            symbols.append(SymbolInfo(i, _cstr(strtab, r["st_name"]), r["st_value"], r["st_size"],
                                      r["st_info"] >> 4, r["st_info"] & 0xF, r["st_other"], r["st_shndx"]))

    def sym_name(i: int) -> Any:
        return symbols[i].name if 0 <= i < len(symbols) else i

    info = by_name.get(".nv.info")
    module_attrs = decode_nv_info(info.data, sym_name) if info else []

    kernels, functions = [], []
    for sym in symbols:
        if sym.type != STT.FUNC or not 0 < sym.section < len(sections):
            continue
        if not sym.other & STO_CUDA_ENTRY and sections[sym.section].name != f".text.{sym.name}":
            continue    # a subroutine inside another function's code (`$__internal_0_$...`): part of it
        text = sections[sym.section]
        kinfo = by_name.get(f".nv.info.{sym.name}")
        attrs = decode_nv_info(kinfo.data, sym_name) if kinfo else []
        mine = [a for a in module_attrs if isinstance(a.value, SymbolAttr) and a.value.symbol == sym.name]

        def first(name: str, default: Any = None, pool: list = attrs) -> Any:
            return next((a.value for a in pool if a.name == name), default)

        kparams = sorted((a.value for a in attrs if isinstance(a.value, KParamInfo)), key=lambda p: p.ordinal)
        regcount = first("EIATTR_REGCOUNT", None, mine)
        registers = regcount.value if regcount else text.info >> TEXT_REGCOUNT_SHIFT
        frame = first("EIATTR_FRAME_SIZE", None, mine)
        barriers = first("EIATTR_NUM_BARRIERS")
        if barriers is None:
            barriers = (text.flags >> TEXT_BARRIERS_SHIFT) & TEXT_BARRIERS_MASK
        shared = by_name.get(f".nv.shared.{sym.name}")
        cbank = first("EIATTR_PARAM_CBANK")
        max_threads = first("EIATTR_MAX_THREADS")
        req = first("EIATTR_REQNTID")
        (kernels if sym.other & STO_CUDA_ENTRY else functions).append(KernelInfo(
            entry=bool(sym.other & STO_CUDA_ENTRY), name=sym.name, code=text.data[sym.value:sym.value + (sym.size or len(text.data))],
            params=[ParamInfo(p.offset, p.size) for p in kparams], registers=registers,
            shared_bytes=shared.size if shared else 0,
            max_threads=tuple(max_threads) if max_threads else None,
            req_threads=tuple(req) if req else None,
            exit_offsets=list(first("EIATTR_EXIT_INSTR_OFFSETS", [])),
            s2r_ctaid_offsets=list(first("EIATTR_S2RCTAID_INSTR_OFFSETS", [])),
            barriers=barriers, frame_size=frame.value if frame else 0,
            max_registers=first("EIATTR_MAXREG_COUNT"),
            param_base=cbank.offset if cbank else default_param_base,
            attributes=attrs, module_attributes=mine, symbol_index=sym.index,
            constant_banks=banks_of.get(sym.name, {})))

    relocations = []
    for sec in sections:
        if sec.type not in (SHT.REL, SHT.RELA) or not 0 < sec.info < len(sections) or sec.entsize <= 0:
            continue
        target = sections[sec.info]
        record = Elf64_Rela if sec.type == SHT.RELA else Elf64_Rel
        for i in range(sec.size // sec.entsize):
            r = record.unpack(sec.data, i * sec.entsize)
            index, rtype = r["r_info"] >> 32, r["r_info"] & 0xFFFFFFFF
            if sec.type == SHT.RELA:
                addend = r["r_addend"]
            elif rtype in (RelocType.R_CUDA_64, RelocType.R_CUDA_G64) and target.data:
                addend = int.from_bytes(target.data[r["r_offset"]:r["r_offset"] + 8], "little", signed=True)
            else:
                addend = 0
            relocations.append(RelocationInfo(target.name, r["r_offset"], sym_name(index) if index else "",
                                              index, rtype, addend, sec.type == SHT.RELA))

    const3 = by_name.get(".nv.constant3")
    compat = by_name.get(".nv.compat")
    return CubinInfo(arch=arch_name, sm=sm, abi=abi.name, e_flags=hdr["e_flags"], sections=sections,
                     symbols=symbols, kernels=kernels, functions=functions, module_attributes=module_attrs,
                     constants=const3.data if const3 else None, relocations=relocations,
                     compat_attributes=decode_nv_info(compat.data, kinds=EICOMPAT_BY_CODE, prefix="EICOMPAT_ATTR")
                     if compat else [])


MODULE_BANK = re.compile(r"\.nv\.constant(\d+)$")


def read_module(info: CubinInfo) -> ModuleImage:
    """The module-level data of a cubin: global variables (symbols of `.nv.global` /
    `.nv.global.init`), module constant banks (`.nv.constant<b>` without a kernel) and the
    relocations of both. Raises ValueError for what a ModuleImage cannot hold."""
    module = ModuleImage()
    data_sections = {s.index: s for s in info.sections if s.name in (".nv.global", ".nv.global.init")}
    for sec in data_sections.values():
        objects = sorted((y for y in info.symbols if y.section == sec.index and y.type == STT.OBJECT),
                         key=lambda y: (y.value, y.index))
        covered = 0
        for i, y in enumerate(objects):
            if y.size <= 0:
                raise ValueError(f"{sec.name}: symbol {y.name!r} has no size")
            if y.value < covered:
                raise ValueError(f"{sec.name}: symbol {y.name!r} overlaps the one before it")
            if sec.data and any(sec.data[covered:y.value]):
                raise ValueError(f"{sec.name}: bytes {covered:#x}..{y.value:#x} belong to no symbol")
            # The alignment is not recorded: the largest power of two the offset allows, up to
            # the section's (the first object carries the section's own).
            align = max(sec.align, 1)
            while y.value % align:
                align //= 2
            module.globals.append(GlobalObject(
                y.name, y.size, align, y.value,
                initial=sec.data[y.value:y.value + y.size] if sec.type != SHT.NOBITS else None,
                bind=STB(y.bind)))
            covered = y.value + y.size
        if covered != sec.size:
            raise ValueError(f"{sec.name}: {sec.size} bytes, but its symbols end at {covered:#x}")
    for sec in info.sections:
        m = MODULE_BANK.match(sec.name)
        if m and sec.type == SHT.PROGBITS:
            module.constant_banks[int(m.group(1))] = sec.data
            objects = sorted((y for y in info.symbols if y.section == sec.index and y.type == STT.OBJECT),
                             key=lambda y: (y.value, y.index))
            if objects:
                module.bank_symbols[int(m.group(1))] = [GlobalObject(y.name, y.size, 1, y.value, bind=STB(y.bind))
                                                        for y in objects]
    for r in info.relocations:
        if r.section.endswith("debug_frame"):
            continue
        m = MODULE_BANK.match(r.section)
        if not m and r.section != ".nv.global.init":
            continue
        sym = info.symbols[r.symbol_index] if 0 < r.symbol_index < len(info.symbols) else None
        external = sym is not None and sym.section == 0 and sym.bind != STB.LOCAL and sym.name
        if sym is None or sym.type not in (STT.OBJECT, STT.FUNC, STT.NOTYPE) or (sym.section == 0 and not external) \
                or (sym.type == STT.NOTYPE and not external):
            raise ValueError(f"{r.section}: relocation at {r.offset:#x} against "
                             f"{'a section or undefined local symbol' if sym else 'no symbol'} "
                             f"{sym.name if sym else ''!r}")
        if external and sym.name not in module.externs:
            module.externs.append(sym.name)
        if r.type not in (RelocType.R_CUDA_64, RelocType.R_CUDA_G64):
            raise ValueError(f"{r.section}: relocation type {r.type} at {r.offset:#x} is not supported "
                             f"(R_CUDA_64, R_CUDA_G64 are)")
        rel = Relocation(r.offset, r.symbol, r.type, r.addend)
        if m:
            module.bank_relocations.setdefault(int(m.group(1)), []).append(rel)
        else:
            module.global_relocations.append(rel)
    for rels in list(module.bank_relocations.values()) + [module.global_relocations]:
        rels.sort(key=lambda r: r.offset)
    # The addend lives in the Relocation: zero the relocated places (REL cubins keep the addend
    # there), so that the same module reads the same from a REL and a RELA cubin.
    for bank, rels in module.bank_relocations.items():
        module.constant_banks[bank] = _zero_places(module.constant_banks[bank], [r.offset for r in rels])
    for obj in module.globals:
        if obj.initial is not None:
            at = [r.offset - obj.offset for r in module.global_relocations if 0 <= r.offset - obj.offset < obj.size]
            obj.initial = _zero_places(obj.initial, at)
    return module


def _zero_places(data: bytes, offsets: Sequence[int], width: int = 8) -> bytes:
    out = bytearray(data)
    for at in offsets:
        out[at:at + width] = bytes(len(out[at:at + width]))
    return bytes(out)
