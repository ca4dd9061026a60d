"""Encode stage: resolved kernels -> code bytes and the facts the ELF writer needs."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional

from .arch import Arch
from .ast import Instruction, Kernel
from .errors import WARNINGS_PER_MESSAGE, SassError, SassErrors
from .isa.forms import CONTROL_SHIFT
from .kinds import value_pieces
from .semantics import SemanticsError, highest_register, register_slots, register_top_function
from .validity import control_problems, may_break_rules, may_refuse_zero_register, zero_register_problems
from .workers import map_ranges, ranges

ALL_BITS = (1 << 128) - 1

# Facts about a few opcodes that the *cubin* (not the encoding) needs.
EXIT_OPCODES = frozenset({"EXIT"})
BARRIER_OPCODES = frozenset({"BAR"})
# Register-width hints from modifiers, for the register count the driver allocates.
WIDE_MODIFIERS = {"128": 4, "64": 2, "WIDE": 2, "F64": 2, "U64": 2, "S64": 2}


@dataclass
class EncodedKernel:
    kernel: Kernel
    code: bytes
    registers: int
    exit_offsets: list[int] = field(default_factory=list)
    barriers: int = 0
    relocations: list = field(default_factory=list)      # elf.Relocation, one per SymbolRef
    # (message, Loc) of words nvdisasm reads otherwise than written (sassas.control.CONTROL_RULES)
    warnings: list = field(default_factory=list)


# ptxas reports two registers more than the highest one a kernel touches (+1), on every arch
# from sm_70 (compare its REGCOUNT with its code); the hardware needs them: on an H100 a kernel
# whose count omits them stops with CUDA_ERROR_ILLEGAL_INSTRUCTION.
RESERVED_REGISTERS = 2
MAX_REGISTER_COUNT = 255


def count_registers(kernel: Kernel) -> int:
    """The register count the driver allocates: the highest R the kernel reads or writes (with
    each operand's width, from the semantics table), plus one, plus the reserved two."""
    return _register_count(_highest_register(kernel.instructions, 0, len(kernel.instructions)))


def _register_count(top: int) -> int:
    return min(top + 1 + RESERVED_REGISTERS, MAX_REGISTER_COUNT)


def _highest_register(instructions: list[Instruction], start: int, stop: int) -> int:
    """The highest R register that instructions[start:stop] read or write, -1 for none."""
    top = -1
    for inst in instructions[start:stop]:
        try:
            highest = highest_register(inst)
            if highest > top:
                top = highest
        except (SemanticsError, KeyError):
            # An opcode the table does not know: count its registers from its modifiers.
            width = max((WIDE_MODIFIERS.get(m, 1) for m in inst.modifiers), default=1)
            for op in inst.operands:
                w = 2 if ".64" in op.flags else width
                for piece, value in zip(value_pieces(op.kind), op.values):
                    if piece == "R" and value != 255:
                        top = max(top, value + w - 1)
    return top


def _barrier_count(instructions: list[Instruction]) -> int:
    n = 0
    for inst in instructions:
        if inst.opcode in BARRIER_OPCODES and inst.operands and inst.operands[0].kind == "I":
            n = max(n, int(inst.operands[0].values[0]) + 1)
    return n


# A kernel is encoded in ranges of at least this many instructions a process (sassas.workers):
# below that, forking and sending the result back cost more than the range's encoding.
MIN_INSTRUCTIONS_A_WORKER = 10_000


@dataclass
class EncodedRange:
    """What one range of a kernel's instructions encodes to."""
    code: bytes
    # The errors, in order; None from a worker process where there were some (they are found
    # again in the asking one, whose instructions' locations they name).
    errors: Optional[list]
    # Warnings, per message (without the mnemonic): its first WARNINGS_PER_MESSAGE as
    # (instruction index in the kernel, order in the instruction, text, Loc), and how many
    # instructions gave it.
    warnings: dict
    counts: dict
    relocations: list
    top: int                    # the highest R register (_highest_register)


def encode_range(instructions: list[Instruction], arch: Arch, isa, find_top: bool, first_index: int) -> EncodedRange:
    """The instructions of a part of a kernel's body (sassas.ranges), the first of them the
    kernel's instruction `first_index`, encoded: join_ranges makes the kernel of such parts."""
    return _encode_range(instructions, 0, len(instructions), arch, isa, find_top, index_base=first_index)


def _encode_range(instructions: list[Instruction], start: int, stop: int, arch: Arch, isa,
                  find_top: bool, in_worker: bool = False, index_base: int = 0) -> EncodedRange:
    words = bytearray()
    errors: list[SassError] = []
    warnings: dict[str, list] = {}
    counts: dict[str, int] = {}          # message -> instructions it was found in
    relocations = []
    arch_name = arch.name
    encode = isa.encode
    top = [-1]              # the highest R register so far (the counting encoders raise it)
    tallies = []            # (problems, [count]): by_control's entries that count their instructions only
    looked_at = []          # instructions whose highest R register _highest_register finds
    # What is found per instruction shape, once a shape (a file repeats a few shapes thousands
    # of times): its compiled encoder (Isa.shape_encoder; where the registers are counted, one
    # that counts them where its shape's are known: then True), else the function of its
    # highest R register (semantics.register_top_function), and by control code (word >> 105)
    # what the validity rules find:
    # (control_problems, or () where may_break_rules says they find nothing; whether the
    # zero-register rules may refuse it; None, or the count of the instructions with these
    # warnings past their first ones).
    of_shape: dict = {}
    for index in range(start, stop):
        inst = instructions[index]
        # (Instruction.shape, inline: the property's call cost as much as its tests)
        seen = inst._shape
        if (seen is not None and seen[1] is inst.operands and seen[2] is inst.predicate
                and seen[3] is inst.modifiers and seen[4] is inst.opcode):
            shape = seen[0]
        else:
            shape = inst.shape
        known = of_shape.get(shape)
        if known is None:
            known = of_shape[shape] = _shape_encoding(inst, isa, find_top)
        fast, counting, top_of, by_control = known
        if counting:
            word = fast(inst, top)
            counted = word is not None
        else:
            word = fast(inst) if fast is not None else None
            counted = False
        if word is None:
            if inst.raw is not None and inst.raw[0] == ALL_BITS:
                word = inst.raw[1] & ALL_BITS      # every bit given: the text is only a placeholder
                by_control = None                  # (and no rule looks at it)
            else:
                try:
                    word = encode(inst)
                except SassError as e:
                    errors.append(e.with_loc(inst.loc))
                    continue
                if inst.raw is not None:
                    mask, value = inst.raw
                    word = (word & ~mask) | (value & mask)
        if by_control is not None:
            if inst.relocation is not None:
                try:
                    relocations.append(_relocation(inst, isa, arch))
                except SassError as e:
                    errors.append(e.with_loc(inst.loc))
            c = word >> CONTROL_SHIFT
            checks = by_control.get(c)
            if checks is None:
                checks = by_control[c] = (control_problems(inst, c, arch_name)
                                          if may_break_rules(c, inst.opcode, arch_name) else (),
                                          may_refuse_zero_register(inst.opcode, arch_name), None)
            problems, zero, tally = checks
            if tally is not None:
                tally[0] += 1
            elif problems:
                for order, (severity, message) in enumerate(problems):
                    if severity == "error":
                        errors.append(SassError(f"{inst.mnemonic}: {message}", inst.loc))
                        continue
                    n = counts.get(message, 0)
                    counts[message] = n + 1
                    if n < WARNINGS_PER_MESSAGE:
                        warnings.setdefault(message, []).append((index_base + index, order,
                                                                 f"{inst.mnemonic}: {message}", inst.loc))
                if all(severity != "error" and counts[message] >= WARNINGS_PER_MESSAGE
                       for severity, message in problems):
                    # Each of these warnings has its first ones: the next instructions of this
                    # shape and control code are counted only (a dense file writes the
                    # yield-reuse spelling on most of its FFMAs).
                    tally = [0]
                    tallies.append((problems, tally))
                    by_control[c] = (problems, zero, tally)
            if zero:
                errors.extend(SassError(f"{inst.mnemonic}: {message}", inst.loc)
                              for message in zero_register_problems(inst, arch_name))
        words += word.to_bytes(16, "little")
        if find_top and not counted:
            if top_of is not None:
                highest = top_of(inst.operands)
                if highest > top[0]:
                    top[0] = highest
            else:
                looked_at.append(index)
    top = top[0]
    for problems, tally in tallies:
        for _severity, message in problems:
            counts[message] += tally[0]
    if find_top and not errors:
        for index in looked_at:
            top = max(top, _highest_register(instructions, index, index + 1))
    return EncodedRange(bytes(words), None if errors and in_worker else errors, warnings, counts, relocations,
                         top if find_top and not errors else -1)


def _shape_encoding(inst: Instruction, isa, find_top: bool) -> tuple:
    """_encode_range's entry for the instruction's shape (see there), but the control codes'.
    (An instruction the counting encoder leaves to Isa.encode has its registers counted by
    _highest_register, as one of a shape without a top function.)"""
    if not find_top:
        return isa.shape_encoder(inst), False, None, {}
    try:
        slots = register_slots(inst)
        if slots:
            counting = isa.shape_encoder(inst, slots)
            if counting is not None:
                return counting, True, None, {}
        top_of = register_top_function(inst)
    except Exception:
        top_of = None       # (_highest_register looks at each such instruction: its error, if any)
    return isa.shape_encoder(inst), False, top_of, {}


def encode_kernel(kernel: Kernel, arch: Arch, isa, threads: int = 1) -> EncodedKernel:
    """The code of a resolved kernel whose every instruction has a control code (the assembler
    runs sassas.schedule first). `threads`: the processes that may encode it (sassas.workers),
    each a range of at least MIN_INSTRUCTIONS_A_WORKER instructions; the result is the same."""
    instructions = kernel.instructions
    if any(inst.control is None for inst in instructions):
        raise ValueError(f"kernel '{kernel.name}': instructions without a control code; "
                         f"schedule them first (sassas.schedule.schedule_kernel)")
    n = len(instructions)
    count = kernel.registers is None
    workers = max(1, min(threads, n // MIN_INSTRUCTIONS_A_WORKER))
    asker = os.getpid()
    parts = map_ranges(n, workers, lambda start, stop: _encode_range(instructions, start, stop, arch, isa, count,
                                                                     in_worker=os.getpid() != asker))
    for k, ((start, stop), part) in enumerate(zip(ranges(n, workers), parts)):
        if part.errors is None:
            parts[k] = _encode_range(instructions, start, stop, arch, isa, count)
    return join_ranges(kernel, parts, *exit_offsets_and_barriers(instructions))


def join_ranges(kernel: Kernel, parts: list[EncodedRange], exit_offsets: list[int], barriers: int) -> EncodedKernel:
    """The kernel whose consecutive ranges of instructions encoded to `parts` (in order), with
    the addresses of its EXITs and its barrier count; raises the parts' errors."""
    errors = [e for part in parts for e in part.errors]
    if errors:
        raise errors[0] if len(errors) == 1 else SassErrors(errors)
    # The warnings in the order of their instructions; the first WARNINGS_PER_MESSAGE of each
    # message in the kernel, then how many more.
    warned: dict[str, int] = {}
    kept = []
    for part in parts:
        for message, n_part in part.counts.items():
            before = warned.get(message, 0)
            kept.extend(part.warnings[message][:max(0, WARNINGS_PER_MESSAGE - before)])
            warned[message] = before + n_part
    warnings = [(text, loc) for _index, _order, text, loc in sorted(kept, key=lambda w: w[:3])]
    for message, count_of in warned.items():
        if count_of > WARNINGS_PER_MESSAGE:
            warnings.append((f"{count_of - WARNINGS_PER_MESSAGE} more instructions of kernel '{kernel.name}' with: "
                             f"{message}", None))
    count = kernel.registers is None
    return EncodedKernel(
        kernel=kernel, code=b"".join(part.code for part in parts),
        registers=kernel.registers if not count else _register_count(max(part.top for part in parts)),
        exit_offsets=exit_offsets, barriers=barriers, relocations=[r for part in parts for r in part.relocations],
        warnings=warnings)


def exit_offsets_and_barriers(instructions: list[Instruction]) -> tuple[list[int], int]:
    """What join_ranges takes of a kernel's instructions besides their encodings."""
    return [i.address for i in instructions if i.opcode in EXIT_OPCODES], _barrier_count(instructions)


# Where the driver writes `32@lo(x)` / `32@hi(x)`: the 32-bit immediate at bits 32..63.
_ADDRESS_HALF_FIELD = 0xFFFFFFFF << 32


def _relocation(inst: Instruction, isa, arch: Arch):
    """The image.Relocation of an instruction's SymbolRef. A `32@lo`/`32@hi` must sit in a
    32-bit immediate at bits 32..63, the field R_CUDA_ABS32_LO_32/HI_32 patch: checked by
    encoding the instruction with all ones there."""
    from dataclasses import replace
    from .image import Relocation, code_relocation_type
    r = inst.relocation
    if r.part in ("lo", "hi"):
        ones = replace(inst, operands=tuple(op if op.kind != "I" or op.values != (0,) else op.with_values(0xFFFFFFFF)
                                            for op in inst.operands), relocation=None)
        try:
            moved = isa.encode(ones) ^ isa.encode(replace(inst, relocation=None))
        except SassError:
            moved = 0
        if moved != _ADDRESS_HALF_FIELD:
            raise SassError(f"32@{r.part}({r.symbol}) needs a 32-bit immediate at bits 32..63, which the "
                            f"driver fills in; {inst.opcode} has none there")
    return Relocation(offset=inst.address, symbol=r.symbol, type=code_relocation_type(arch, r.part), addend=r.addend)
