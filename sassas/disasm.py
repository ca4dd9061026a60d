"""Disassemble a cubin into sassas source that `sassas asm` rebuilds.

The output carries what a loadable cubin needs: each kernel's name, parameters (sizes and
offsets), shared memory, register count and launch bounds; control codes in TuringAs form;
labels instead of branch offsets, so instructions can be inserted or deleted. A word the ISA
tables cannot decode is kept bit for bit with the `.raw` escape.
"""
from __future__ import annotations

import os
import re
from dataclasses import replace
from typing import Optional, Sequence, Union

from .ast import Instruction, Label, Operand, SymbolRef
from .elf import STB, code_relocation_part, read_cubin, read_module
from .elf.fatbin import EmbeddedCubin, embedded_cubins, is_container
from .errors import SassError
from .isa import get_isa
from .parse import parse_instruction
from .resolve import descriptor_registers

INSTRUCTION_BYTES = 16
ALL_BITS = (1 << 128) - 1


class UnsupportedCubin(SassError):
    pass


def disassemble(cubin: Union[bytes, "object"], kernel: Union[str, Sequence[str], None] = None,
                source_name: str = "") -> str:
    """Source text for every kernel and device function of the cubin, or only `kernel` (a
    name or several) and the device functions they call."""
    info = _read(cubin, source_name)
    isa = get_isa(info.arch)
    by_section = _relocations_by_section(info)
    kernels = _chosen(info, by_section, kernel, source_name)
    _refuse_what_cannot_be_carried(info, kernels)
    functions = sum(not k.entry for k in kernels)
    out = [f"# sassas disasm{' of ' + source_name if source_name else ''}: {info.target}, "
           f"{len(kernels) - functions} kernel(s)" + (f", {functions} device function(s)" if functions else ""),
           f".arch {info.target}", ""]
    out.extend(_module_source(info, {k.name for k in kernels}))
    for k in kernels:
        out.extend(_kernel_source(k, isa, _code_relocations(by_section, k.name)))
        out.append("")
    return "\n".join(out)


def resource_usage(cubin: Union[bytes, "object"], kernel: Union[str, Sequence[str], None] = None,
                   source_name: str = "") -> str:
    """A line a kernel (or device function) of what it asks of an SM, as `ptxas -v` and
    `cuobjdump -res-usage` report it: registers, shared memory, parameter bytes, named barriers,
    stack frame, instructions. `kernel`: as disassemble's."""
    info = _read(cubin, source_name)
    out = []
    for k in _chosen(info, _relocations_by_section(info), kernel, source_name):
        params = max((p.offset + p.size for p in k.params), default=0)
        out.append(f"{k.name}{'' if k.entry else ' (device function)'}: {k.registers} registers, "
                   f"{k.shared_bytes} bytes static shared memory, {params} bytes of parameters, "
                   f"{k.barriers} barrier{'s' * (k.barriers != 1)}, {k.frame_size} bytes stack frame, "
                   f"{len(k.code) // INSTRUCTION_BYTES} instructions\n")
    return "".join(out)


def _read(cubin, source_name: str):
    data = cubin if isinstance(cubin, (bytes, bytearray)) else getattr(cubin, "data", cubin)
    try:
        return read_cubin(bytes(data))
    except ValueError as e:
        raise SassError(f"{source_name or 'input'}: not a cubin sassas can read: {e}") from None


def _chosen(info, by_section: dict, kernel, source_name: str) -> list:
    """Every kernel and device function, or the named kernels and the functions they call."""
    if kernel is None:
        return info.kernels + info.functions
    try:
        chosen = [info.kernel(name) for name in ([kernel] if isinstance(kernel, str) else kernel)]
    except KeyError as e:
        raise SassError(f"{source_name or 'input'}: {e.args[0]}") from None
    return _with_callees(info, by_section, chosen)


def _code_relocations(by_section: dict, function: str) -> dict[int, SymbolRef]:
    """Instruction address -> the address the driver writes there, from `.rel(a).text.<f>`
    (`by_section`: _relocations_by_section's)."""
    out = {}
    for r in by_section.get(f".text.{function}", ()):
        part = code_relocation_part(r.type)
        if part is not None:
            out[r.offset] = SymbolRef(part, r.symbol, addend=r.addend)
    return out


def _relocations_by_section(info) -> dict[str, list]:
    """The cubin's relocations by the section they patch, in one pass (a whole bitsandbytes
    cubin has ~9000 relocations of the code over 207 functions)."""
    by_section: dict[str, list] = {}
    for r in info.relocations:
        by_section.setdefault(r.section, []).append(r)
    return by_section


def _with_callees(info, by_section: dict, kernels: list) -> list:
    """`kernels` and the device functions they call (CALL.ABS relocations), transitively: the
    source must define them for the cubin to load."""
    chosen = []
    for k in kernels:
        if k not in chosen:
            chosen.append(k)
    for k in chosen:
        for ref in _code_relocations(by_section, k.name).values():
            callee = next((f for f in info.functions if f.name == ref.name), None)
            if ref.part == "abs" and callee is not None and callee not in chosen:
                chosen.append(callee)
    return chosen


def disassemble_file(path: Union[str, os.PathLike], kernel: Union[str, Sequence[str], None] = None,
                     arch: Optional[str] = None) -> str:
    """disassemble() of a cubin file; of a fatbin or host program, of each cubin inside (of `arch`
    only, if given), one after the other under a line naming it, as cuobjdump -xelf names it."""
    return _each_cubin(disassemble, path, kernel, arch)


def resource_usage_file(path: Union[str, os.PathLike], kernel: Union[str, Sequence[str], None] = None,
                        arch: Optional[str] = None) -> str:
    """resource_usage() of a cubin file, or of each cubin inside a fatbin or host program."""
    return _each_cubin(resource_usage, path, kernel, arch)


def file_cubins(path: Union[str, os.PathLike], arch: Optional[str] = None) -> list[EmbeddedCubin]:
    """The cubins of a file: the file itself where it is a cubin (of `arch`, if given), else those
    inside a fatbin or host program (of `arch`); SassError where there is none."""
    name = os.path.basename(str(path))
    with open(path, "rb") as f:
        data = f.read()
    try:
        if not is_container(data):
            own = read_cubin(data).target
            if arch is not None and own != arch:
                raise SassError(f"{name}: a cubin for {own}, not {arch}")
            return [EmbeddedCubin(name, own, data)]
        cubins = embedded_cubins(data, name)
    except ValueError as e:
        raise SassError(f"{name}: not a cubin sassas can read: {e}") from None
    chosen = [c for c in cubins if arch is None or c.arch == arch]
    if not chosen:
        raise SassError(f"{name}: no cubin for {arch}; it holds {', '.join(c.name for c in cubins)}")
    return chosen


def _each_cubin(show, path, kernel, arch) -> str:
    cubins = file_cubins(path, arch)
    if len(cubins) == 1 and cubins[0].name == os.path.basename(str(path)):
        return show(cubins[0].data, kernel, source_name=cubins[0].name)
    names = None if kernel is None else [kernel] if isinstance(kernel, str) else list(kernel)
    out = []
    found = False           # a cubin with one of `names` (or names None)
    for c in cubins:
        head = f"# ==== {c.name} (in {os.path.basename(str(path))})"
        if c.unread:
            out.append(f"{head}: {c.unread}\n")
            continue
        mine = names and [n for n in names if any(k.name == n for k in read_cubin(c.data).kernels)]
        if names is None or mine:
            found = True
            out.append(f"{head}\n{show(c.data, mine or None, source_name=c.name)}")
    if not found and names is not None:
        raise SassError(f"{os.path.basename(str(path))}: no kernel {', '.join(map(repr, names))} in its cubins")
    return "".join(out)


def _refuse_what_cannot_be_carried(info, kernels) -> None:
    """Relocations that sassas source cannot say (of a kernel's own constant banks, or of
    the code other than `32@lo(x)`, `32@hi(x)` and CALL.ABS targets): refuse rather than
    drop them. Only the chosen kernels' own sections count. Relocations of module data
    (module constant banks `.nv.constant<b>`, `.nv.global.init`) are carried (_module_source);
    `.debug_frame` is not carried at all."""
    mine = {k.name for k in kernels}
    by_section = _relocations_by_section(info)
    for s in info.sections:
        if not s.name.startswith(".rel") or s.size == 0 or s.name.endswith("debug_frame"):
            continue
        target = s.name.split(".", 2)[-1]
        if re.fullmatch(r"nv\.constant\d+|nv\.global\.init", target):
            continue
        if target.startswith("text.") and target[len("text."):] not in mine:
            continue
        m = re.match(r"nv\.constant\d+\.(.+)$", target)
        if m and m.group(1) not in mine:
            continue
        mine_here = by_section.get("." + target, [])
        if target.startswith("text.") and mine_here and all(code_relocation_part(r.type) for r in mine_here):
            continue         # addresses in instructions: `32@lo(x)`, a CALL.ABS target
        if target.startswith(("text.", "nv.constant")):
            raise UnsupportedCubin(
                f"section {s.name}: {s.size // max(s.entsize, 1)} relocation(s) against "
                f"{'.' + target} (global addresses in the code, calls into other functions) "
                f"cannot be carried through sassas source yet")


_SOURCE_NAME = re.compile(r"[A-Za-z_$][\w$]*")


def _module_source(info, kernel_names: set[str]) -> list[str]:
    """The module's global variables, module constant banks and their relocations as
    `.global` / `.init` / `.visible` / `.weak` / `.moduleconst` lines (see sassas.module)."""
    try:
        module = read_module(info)
    except ValueError as e:
        raise UnsupportedCubin(f"module data cannot be carried through sassas source: {e}") from None
    if not module:
        return []
    functions = {k.name for k in info.kernels}
    for name in [o.name for o in module.globals] + [o.name for s in module.bank_symbols.values() for o in s] + module.externs:
        if not _SOURCE_NAME.fullmatch(name):
            raise UnsupportedCubin(f"global variable {name!r}: a name sassas source cannot spell")
    for r in [r for rs in module.bank_relocations.values() for r in rs] + module.global_relocations:
        if r.symbol in functions and r.symbol not in kernel_names:
            raise UnsupportedCubin(f"module data holds the address of kernel {r.symbol!r}, "
                                   f"which is not disassembled (--kernel)")

    def address(r) -> str:
        return f"&{r.symbol}" + (f"{r.addend:+#x}" if r.addend else "")

    lines = [f"# module data: {len(module.globals)} global variable(s)"
             + "".join(f", constant bank {b} ({len(d)} bytes, {len(module.bank_relocations.get(b, []))} address(es))"
                       for b, d in sorted(module.constant_banks.items()))]
    lines += [f".extern {name}" for name in module.externs]
    relocs_by_object: dict[str, list] = {}
    init_objects = sorted((o for o in module.globals if o.initial is not None), key=lambda o: o.offset)
    for r in module.global_relocations:
        owner = next((o for o in init_objects if o.offset <= r.offset and r.offset + 8 <= o.offset + o.size), None)
        if owner is None or (r.offset - owner.offset) % 8:
            raise UnsupportedCubin(f".nv.global.init: the address at 0x{r.offset:x} lies in no variable "
                                   f"(or not 8-byte aligned in it)")
        relocs_by_object.setdefault(owner.name, []).append(r)
    ends: dict[bool, int] = {}
    for o in sorted(module.globals, key=lambda o: (o.initial is None, o.offset)):
        natural = -(-ends.get(o.initial is None, 0) // o.align) * o.align
        lines.append(f".global {o.name} {o.size} {o.align}" + (f" 0x{o.offset:x}" if natural != o.offset else ""))
        ends[o.initial is None] = o.offset + o.size
        if o.bind != STB.LOCAL:
            lines.append(f".{'weak' if o.bind == STB.WEAK else 'visible'} {o.name}")
        if o.initial is None:
            continue
        covered = set()
        for r in relocs_by_object.get(o.name, []):
            at = r.offset - o.offset
            lines.append(f".init {o.name} 0x{at:x} {address(r)}")
            covered |= {at, at + 4}
        words = [(at, int.from_bytes(o.initial[at:at + 4].ljust(4, b"\0"), "little"))
                 for at in range(0, o.size, 4) if at not in covered]
        shown = [(at, w) for at, w in words if w]
        if not shown and not covered:
            shown = words[:1]            # all zeros, but initialised: one word says so
        lines += [f".init {o.name} 0x{at:x} 0x{w:08x}" for at, w in shown]
    for bank, data in sorted(module.constant_banks.items()):
        relocs = {r.offset: r for r in module.bank_relocations.get(bank, [])}
        padded = data + bytes(-len(data) % 4)
        last = len(padded) - 4
        for at in range(0, len(padded), 4):
            if at in relocs:
                lines.append(f".moduleconst {bank} 0x{at:x} {address(relocs[at])}")
            elif at - 4 in relocs:
                continue
            else:
                word = int.from_bytes(padded[at:at + 4], "little")
                if word or at == last:
                    lines.append(f".moduleconst {bank} 0x{at:x} 0x{word:08x}")
        for o in module.bank_symbols.get(bank, []):
            lines.append(f".constsym {bank} {o.name} 0x{o.offset:x} {o.size}")
            if o.bind != STB.LOCAL:
                lines.append(f".{'weak' if o.bind == STB.WEAK else 'visible'} {o.name}")
    lines.append("")
    return lines


def _decode_all(code: bytes, isa) -> list[tuple[int, int, Optional[Instruction]]]:
    out = []
    for addr in range(0, len(code), INSTRUCTION_BYTES):
        word = int.from_bytes(code[addr:addr + INSTRUCTION_BYTES], "little")
        try:
            inst = isa.decode(word, addr)
        except SassError:
            inst = None
        out.append((addr, word, inst))
    return out


def _branch_operands(isa, word: int, addr: int, inst: Instruction) -> set[int]:
    """Operand indexes that hold pc-relative targets: decoding the same word one
    instruction later moves exactly those values by 16."""
    moved = isa.decode(word, addr + INSTRUCTION_BYTES)
    return {i for i, (a, b) in enumerate(zip(inst.operands, moved.operands))
            if a.values != b.values and all(isinstance(v, int) for v in a.values)
            and [y - x for x, y in zip(a.values, b.values)] in ([INSTRUCTION_BYTES],)}


def _raw_difference(isa, inst: Instruction, word: int, branches: bool,
                    descriptor: Optional[int]) -> Optional[tuple[int, int]]:
    """(mask, value) of the bits where re-encoding the decoded text misses the original word,
    so an unedited round trip is byte-identical even where the text is lossy. The text is
    read back as `sassas asm` will read it (branches aside, whose labels resolve later), with
    the hidden descriptor register that `sassas asm` infers (`descriptor`, see
    resolve.descriptor_registers): a different one in the word shows as `.raw` bits."""
    try:
        again_inst = replace(inst) if branches else parse_instruction(isa.format(inst) + " ;")
        again_inst.control, again_inst.address, again_inst.descriptor = inst.control, inst.address, descriptor
        again = isa.encode(again_inst)
    except SassError:
        return ALL_BITS, word
    if again == word:
        return None
    mask = again ^ word
    return mask, word & mask


def _label(addr: int) -> str:
    return f"L_{addr:04x}"


def _kernel_source(k, isa, relocations: dict[int, SymbolRef]) -> list[str]:
    lines = [f".kernel {k.name}" if k.entry else f".func {k.name}"]
    if k.registers:
        lines.append(f".registers {k.registers}")
    if k.shared_bytes:
        lines.append(f".shared {k.shared_bytes}")
    if k.max_threads:
        lines.append(f".maxthreads {_threads(k.max_threads)}")
    for bank, data in sorted(k.constant_banks.items()):
        # Constant banks besides bank 0 (ptxas keeps 64-bit immediates in bank 2), word by word.
        padded = data + bytes(-len(data) % 4)
        for offset in range(0, len(padded), 4):
            lines.append(f".constbank {bank} 0x{offset:x} 0x{int.from_bytes(padded[offset:offset + 4], 'little'):08x}")
    if k.params:
        lines.append("<params>")
        end = 0
        for i, p in enumerate(sorted(k.params, key=lambda p: p.offset)):
            align = _alignment_reaching(end, p.offset, _natural(p.size))
            if align is None:    # a gap our layout would not leave: pad it explicitly
                lines.append(f"_pad{i}, {p.offset - end}, 1")
                end, align = p.offset, 1
            lines.append(f"p{i}, {p.size}" + (f", {align}" if align != _natural(p.size) else "")
                         + f"    # offset 0x{p.offset:x}")
            end = p.offset + p.size
        lines.append("</params>")

    decoded = _decode_all(k.code, isa)
    targets: dict[int, set[int]] = {}
    for addr, word, inst in decoded:
        if inst is not None:
            targets[addr] = _branch_operands(isa, word, addr, inst)
    labels = {inst.operands[i].values[0] for addr, _, inst in decoded if inst is not None
              for i in targets[addr]}
    # `32@lo((k + L@srel))`: an address in this function (a return address) gets a label.
    labels |= {ref.addend for ref in relocations.values()
               if ref.name == k.name and ref.part != "abs" and ref.addend % INSTRUCTION_BYTES == 0
               and 0 <= ref.addend <= len(k.code)}
    # The program as `sassas asm` will read it back (a word kept whole is a NOP there).
    body = []
    for addr, _word, inst in decoded:
        if addr in labels:
            body.append(Label(_label(addr)))
        body.append(inst or Instruction("NOP"))
    descriptors = iter(descriptor_registers(body, isa.descriptor_load))
    for addr, word, inst in decoded:
        descriptor = next(descriptors)
        if addr in labels:
            lines.append(f"{_label(addr)}:")
        if inst is None:
            lines.append(f".raw 0x{ALL_BITS:x} 0x{word:032x}   # not in the {isa.arch} tables")
            lines.append("--:-:-:Y:0      NOP;")
            continue
        raw = _raw_difference(isa, inst, word, bool(targets[addr]), descriptor)
        if raw is not None and raw[0] == ALL_BITS:
            # The text does not encode at all: keep the word whole, the text as a comment.
            lines.append(f".raw 0x{ALL_BITS:x} 0x{word:032x}   # {isa.format(inst)}: not re-encodable on {isa.arch}")
            lines.append("--:-:-:Y:0      NOP;")
            continue
        if raw is not None:
            lines.append(f".raw 0x{raw[0]:x} 0x{raw[1]:x}   # bits the {isa.arch} tables do not reproduce")
        ops = list(inst.operands)
        for i in targets[addr]:
            ops[i] = Operand("N", (_label(ops[i].values[0]),), symbol=_label(ops[i].values[0]))
        ref = relocations.get(addr)
        if ref is not None:
            ops = _relocated_operands(ops, ref, k.name, labels)
        text = isa.format(replace(inst, operands=tuple(ops)))
        pred, _, rest = text.partition(" ") if text.startswith("@") else ("", "", text)
        lines.append(f"{inst.control.to_text()}  {pred:>5} {rest};")
    end = len(k.code)
    if end in labels:
        lines.append(f"{_label(end)}:")
    return lines


def _relocated_operands(ops: list, ref: SymbolRef, function: str, labels) -> list:
    """The operands with the immediate the driver fills in written as its SymbolRef (the
    instruction's last immediate 0: a MOV's source, a CALL.ABS target)."""
    if ref.name == function and ref.addend in labels and ref.part != "abs":
        ref = SymbolRef(ref.part, ref.name, _label(ref.addend))
    i = max((i for i, op in enumerate(ops) if op.kind == "I" and op.values == (0,)), default=None)
    if i is None:
        raise UnsupportedCubin(f"{function}: a relocation ({ref}) on an instruction without an immediate 0")
    ops[i] = Operand("I", (0,), symbol=ref)
    return ops


def _natural(size: int) -> int:
    return min(size, 8) if size in (1, 2, 4, 8) else 4


def _alignment_reaching(end: int, offset: int, natural: int) -> Optional[int]:
    """The alignment that puts a parameter starting after `end` exactly at `offset`:
    its natural one where that works, else the smallest that does."""
    fits = [a for a in (1, 2, 4, 8, 16, 32, 64, 128, 256)
            if (end + a - 1) & ~(a - 1) == offset]
    if not fits:
        return None
    return natural if natural in fits else fits[0]


def _threads(t) -> int:
    n = 1
    for d in t:
        n *= max(d, 1)
    return n
