"""Resolve stage: parameters to constant-bank addresses, labels to addresses, names to registers.

After this stage every operand is numeric (no kind 'N' is left) and every instruction knows
its byte address in the kernel's code.
"""
from __future__ import annotations

import difflib
from dataclasses import replace
from typing import Optional

from .arch import Arch
from .ast import SELF_BOUND, CodeRelocation, Instruction, Kernel, Label, Operand, SymbolRef, set_binding
from .errors import SassError
from .isa import get_isa
from .isa.forms import form_key
from .kinds import VALUE_PIECES, kind_pieces
from .operands import LAUNCH_NAMES

INSTRUCTION_BYTES = 16
PARAM_BANK = 0

# A parameter word `name[i]` (TuringAs): the i-th 32-bit word of parameter `name`.
_PARAM_WORD = "N[I]"


def layout_params(kernel: Kernel, arch: Arch) -> int:
    """Give each parameter its offset (naturally aligned, in order); return the block size."""
    offset = 0
    for p in kernel.params:
        if p.size <= 0:
            raise SassError(f"parameter '{p.name}' has size {p.size}; sizes are positive byte counts", p.loc)
        if p.align & (p.align - 1):
            raise SassError(f"parameter '{p.name}' alignment {p.align} is not a power of two", p.loc)
        offset = (offset + p.align - 1) & ~(p.align - 1)
        p.offset = offset
        offset += p.size * p.count
    if offset > arch.max_param_bytes:
        raise SassError(f"kernel '{kernel.name}' has {offset} bytes of parameters; {arch.name} "
                        f"allows {arch.max_param_bytes}", kernel.loc)
    return offset


def assign_addresses(kernel: Kernel) -> dict[str, int]:
    """Number the instructions and bind each label to the address of what follows it."""
    labels: dict[str, int] = {}
    label_locs = {}
    address = 0
    for item in kernel.body:
        if isinstance(item, Label):
            if item.name in labels:
                raise SassError(f"label '{item.name}' defined twice (first at {label_locs[item.name]})", item.loc)
            labels[item.name] = address
            label_locs[item.name] = item.loc
        else:
            item.address = address
            address += INSTRUCTION_BYTES
    return labels


def resolve_kernel(kernel: Kernel, arch: Arch, registers: Optional[dict[str, Operand]] = None,
                   labels: Optional[dict[str, int]] = None) -> None:
    """Resolve every symbolic operand of the kernel in place. `labels`: for a part of a
    kernel's body (sassas.ranges) whose instructions have their addresses, every label's
    address (assign_addresses otherwise numbers the body)."""
    layout_params(kernel, arch)
    if labels is None:
        labels = assign_addresses(kernel)
    params = {p.name: p for p in kernel.params}
    registers = registers or {}
    # An operand resolves to the same operand wherever it stands (`n[0]`, a label): once.
    resolved: dict[tuple, Operand] = {}
    # This pass's mark on the operands it has resolved (Operand._binding: (mark, resolved
    # operand, None)): the parser and the front end share one Operand among the instructions
    # that write the same operand, and each of them reads what it resolved to from its slot
    # (an operand that names nothing, SELF_BOUND, resolves to itself).
    mark = object()
    # The shape of an instruction with its operands resolved, by its shape before and its
    # operands' objects (most are resolved's: shared), with those operands (held, so that no
    # other object takes their ids).
    shapes: dict[tuple, tuple] = {}
    for inst in kernel.instructions:
        shape = inst.shape
        if shape.symbolic:
            operands = []
            for i, op in enumerate(inst.operands):
                entry = op._binding
                if entry[0] is mark or entry[0] is SELF_BOUND:
                    operands.append(entry[1])
                    continue
                try:
                    ref = _symbol_ref(inst, op, labels)
                    if ref is not None:
                        if inst.relocation is not None:
                            raise SassError("a second address for the driver to fill in: an instruction "
                                            "holds at most one")
                        inst.relocation = _relocation(ref, kernel, labels)
                        op = Operand("I", (0,), op.flags)
                    key = (op.kind, op.values, op.flags, op.symbol)
                    new = resolved.get(key)
                    if new is None:
                        new = resolved[key] = _resolve_operand(op, labels, params, registers, arch)
                    if ref is None and "L" not in op.kind:
                        # (a label's operand may be an address to fill in: CALL.ABS)
                        set_binding(op, (mark, new, None))
                    operands.append(new)
                except SassError as e:
                    raise e.with_loc(inst.operand_loc(i))
            operands = tuple(operands)
            key = (shape, *map(id, operands))
            known = shapes.get(key)
            if known is None:
                inst.operands = operands
                shapes[key] = (inst.shape, operands)
            else:
                inst.assign_operands(operands, known[0])
    infer_descriptors(kernel.body, get_isa(arch.name))


def descriptor_registers(body, load, targets=frozenset()) -> list[Optional[int]]:
    """Per instruction of `body` (instructions and labels in program order): the uniform
    register that its memory descriptor is in where the text does not show it (sm_80..sm_89:
    `LDG.E R3, [R2.64]`), or None (the description's default, UR4).

    ptxas loads the memory descriptor from the constant bank into a uniform pair
    (`ULDC.64 UR6, c[0x0][0x118]`, the load named by the description's [descriptor_load]) and
    encodes that pair in LDG, STG, LD, ATOMG, RED, LDGSTS. Rule: the most recent such load in
    the same basic block, where a label starts a new block only after a branch, return or exit
    (BRA, JMP, BRX, JMX, RET, EXIT, KILL, predicated or not; a label after any other
    instruction, e.g. a loop's head, goes on with the block before it); else
    the kernel's first such load in program order. ptxas loads the descriptor once at the top
    and sometimes again into another pair just before a use deep in the kernel, used only
    there, or just before a loop (torchvision's half-precision atomicAdd CAS loops: `ULDC.64
    UR8, c[0x0][0x118]`, then the loop's label, then `LD.E R21, [R4.64]` with UR8). On every
    bitsandbytes kernel (sm_80 6649, sm_86 5503, sm_89 4381 such instructions) and every
    torchvision/torchaudio kernel (sm_80, sm_86: 2490 each) this gives ptxas's register for
    all of them; the first load alone misses 24 on bitsandbytes sm_80, the most recent alone
    48, a label always starting a block 22 on torchvision sm_80 (a label after a conditional
    branch does start one: `ULDC.64 UR8` ... `@P0 BRA L2`, `L2:` uses the first load again). Without any load,
    ptxas's usual choice, the description's default (UR4), stands. `sassas disasm` keeps a
    register the rule does not give with `.raw`. `load`: the description's DescriptorLoad, or
    None (no hidden descriptor on the arch). `targets`: the addresses that branches name; an
    instruction there counts as labelled (`cuobjdump -sass` prints no labels, only `BRA 0x1230`)."""
    if load is None:
        return [None for item in body if isinstance(item, Instruction)]
    loaded = [load.register(item) if isinstance(item, Instruction) and item.opcode == load.opcode else None
              for item in body]
    first = next((r for r in loaded if r is not None), None)
    out: list[Optional[int]] = []
    in_block = None
    previous: Optional[Instruction] = None
    for item, register in zip(body, loaded):
        if not isinstance(item, Instruction) or item.address in targets:
            if previous is None or not _falls_through(previous):
                in_block = None
            if not isinstance(item, Instruction):
                continue
        if register is not None:
            in_block = register
        out.append(in_block if in_block is not None else first)
        previous = item
    return out


_BRANCHES = frozenset(("BRA", "JMP", "BRX", "JMX", "RET", "EXIT", "KILL"))


def _falls_through(inst: Instruction) -> bool:
    """Whether a label right after `inst` is reached only by falling through from it (as far
    as ptxas's register choice goes): `inst` is no branch, return or exit, predicated or not."""
    return inst.opcode not in _BRANCHES


def infer_descriptors(body, isa) -> None:
    """Give each memory instruction that carries a hidden descriptor and names none the
    register that descriptor_registers gives it."""
    if not isa.descriptor_opcodes:
        return
    instructions = [item for item in body if isinstance(item, Instruction)]
    targets = set()
    for inst in instructions:
        if inst.opcode in isa.branch_opcodes:
            encodings = isa.by_key.get(form_key(inst))
            if encodings:
                for (kind, _n), op in zip(encodings[0].operand_shape, inst.operands):
                    if kind == "L" and op.values and isinstance(op.values[0], int):
                        targets.add(op.values[0])
    for inst, register in zip(instructions, descriptor_registers(body, isa.descriptor_load, targets)):
        if register is not None and inst.descriptor is None and inst.opcode in isa.descriptor_opcodes:
            inst.descriptor = register


# Calls whose target is an absolute address: a target that is no label of the kernel is
# another function's address, for the driver to fill in (`CALL.ABS.NOINC `(vprintf)``).
_ABSOLUTE_CALLS = frozenset({"CALL"})


def _symbol_ref(inst: Instruction, op: Operand, labels) -> Optional[SymbolRef]:
    """The address the driver fills into this operand, if it names one."""
    if isinstance(op.symbol, SymbolRef):
        return op.symbol
    if (op.kind == "L" and op.symbol not in labels and inst.opcode in _ABSOLUTE_CALLS
            and "ABS" in inst.modifiers):
        return SymbolRef("abs", op.symbol)
    return None


def _relocation(ref: SymbolRef, kernel: Kernel, labels) -> CodeRelocation:
    addend = ref.addend
    if ref.label is not None:
        # `(name + label@srel)`: the label's offset in name's code; nvdisasm prints it for
        # return addresses, a label of the function that holds the instruction.
        if ref.name != kernel.name:
            raise SassError(f"'{ref.label}@srel' with '{ref.name}': the label must be in the same function "
                            f"('{kernel.name}')")
        if ref.label not in labels:
            raise _undefined(ref.label, list(labels), what="label")
        addend += labels[ref.label]
    return CodeRelocation(ref.part, ref.name, addend)


def _resolve_operand(op: Operand, labels, params, registers, arch: Arch) -> Operand:
    """The operand with its symbol resolved. (Its errors have no location: the caller gives them
    the operand's.)"""
    if op.symbol is None:
        return op
    name = op.symbol
    if op.kind == "C[I][I]" and name in LAUNCH_NAMES:
        return replace(op, values=(op.values[0], arch.launch_offset(name)), symbol=None)
    if op.kind == _PARAM_WORD:
        return _param_word(op, params, arch, name, op.values[1])
    if op.kind == "N":
        if name in labels:
            return replace(op, kind="L", values=(labels[name],), symbol=None)
        if name in params:
            return _param_word(op, params, arch, name, 0)
        if name in registers:
            reg = registers[name]
            return replace(op, kind=reg.kind, values=reg.values, symbol=None)
        raise _undefined(name, list(labels) + list(params) + list(registers))
    if op.kind == "L":
        if name in labels:
            return replace(op, values=(labels[name],), symbol=None)
        raise _undefined(name, list(labels), what="label")
    # Names inside a larger operand: `[idx+0x10]` with `idx` a register alias, or a listing's
    # `RET.REL.NODEC R20 `(fn)`` whose target is a label.
    values = list(op.values)
    kind_out = []
    vi = 0
    for piece in kind_pieces(op.kind):
        if piece in VALUE_PIECES:
            v = values[vi]
            if isinstance(v, str) and piece == "L":
                if v not in labels:
                    raise _undefined(v, list(labels), what="label")
                values[vi] = labels[v]
            elif isinstance(v, str) and piece == "N":
                if v not in registers:
                    raise _undefined(v, list(registers), what="register name")
                piece, values[vi] = registers[v].kind, registers[v].values[0]
            vi += 1
        kind_out.append(piece)
    return replace(op, kind="".join(kind_out), values=tuple(values), symbol=None)


def _param_word(op: Operand, params, arch: Arch, name: str, index: int) -> Operand:
    if name not in params:
        raise _undefined(name, list(params), what="parameter")
    p = params[name]
    words = (p.size * p.count + 3) // 4
    if not 0 <= index < words:
        raise SassError(f"'{name}[{index}]': parameter '{name}' has {words} 32-bit word(s), "
                        f"so the index must be 0..{words - 1}")
    return replace(op, kind="C[I][I]", values=(PARAM_BANK, arch.param_base + p.offset + 4 * index), symbol=None)


def _undefined(name: str, known: list[str], what: str = "name") -> SassError:
    msg = f"undefined {what} '{name}'"
    close = difflib.get_close_matches(name, known, n=1)
    if close:
        msg += f"; did you mean '{close[0]}'?"
    return SassError(msg)
