"""The front end's last pass over each parsed kernel, before resolve: names to numbers, and the
checks that need the whole instruction.

- register names (``.reg``/``.regs``, from ``<regs>``) become registers, allocating those declared
  without numbers (:mod:`sassas.regalloc`); ``<consts>`` names become ``c[0x3][offset]``;
  ``<smem>`` names become byte offsets (immediates, or folded into ``[R+offset]``);
  parameters and labels are left to :mod:`sassas.resolve`; anything else is an error;
- checks: register groups (pairs, quads) aligned as their width needs (the widths come from
  the semantics table, :func:`sassas.semantics.register_groups`),
  immediates that fit 32 bits, write barriers on instructions without a result, a kernel
  without EXIT (warning);
- ``auto_reuse``: set ``.reuse`` where the next instruction reads the same register in the
  same operand slot and nothing in between can change it.

Errors are collected and reported together where one does not hide the others.
"""
from __future__ import annotations

import difflib
from dataclasses import replace
from operator import attrgetter
from typing import Optional

from .arch import CONSTANT_SLOTS, constant_slot, get_arch
from .ast import (DEFAULT_LATENCY, NO_BARRIER, Declarations, Instruction, Kernel, Label, Operand, Program, Shape, SymbolRef,
                  SELF_BOUND, names_nothing, new_operand, set_binding, shape_part)
from .dialect import apply_dialect, leaves_shape
from .errors import Diagnostics, SassError
from .isa import get_isa
from .isa.forms import URZ, uniform_field_zero
from .kinds import VALUE_PIECES, kind_pieces, uniform_slots
from .operands import LAUNCH_NAMES, REGISTER_ZERO
from .regalloc import ThreeSource, allocate
from .semantics import misaligned_group_message, register_groups

# ---- opcode classes (data, not code) ----------------------------------------------------

STORE_OPCODES = frozenset({"ST", "STG", "STS", "STL", "RED"})
BRANCH_OPCODES = frozenset({"BRA", "BRX", "JMP", "JMX", "EXIT", "RET", "CALL", "BREAK", "BSYNC", "KILL"})
# Instructions that write no register: a write barrier on them would never be released.
NO_RESULT_OPCODES = STORE_OPCODES | BRANCH_OPCODES
EXIT_OPCODES = frozenset({"EXIT"})

# Instructions whose register sources go through the operand reuse cache, with the index of
# their first source operand (the ones before it are results).
REUSE_SOURCES = {
    "FFMA": 1, "FADD": 1, "FMUL": 1, "FMNMX": 1, "FSEL": 1, "FSETP": 2,
    "IMAD": 1, "IADD3": 1, "IMNMX": 1, "ISETP": 2, "LOP3": 1, "LEA": 1, "SHF": 1, "PRMT": 1,
    "SEL": 1, "HFMA2": 1, "HADD2": 1, "HMUL2": 1,
}
# Modifiers that make an instruction read register pairs: no automatic reuse there.
WIDE_MODIFIERS = frozenset({"64", "128", "WIDE", "U64", "S64", "F64"})
# Instructions that read three registers in one issue: what the bank-aware allocator looks at.
THREE_SOURCE_OPCODES = frozenset({"FFMA", "IMAD", "IADD3", "LOP3", "HFMA2", "PRMT", "SHF", "LEA"})

INT_MIN, UINT_MAX = -(1 << 31), (1 << 32) - 1
MAX_CONSTANT_BANK, MAX_CONSTANT_OFFSET = 17, 0xFFFF
CONST_BANK = 3                 # TuringAs's <consts>: constant bank 3, from offset 0


def _aligned_registers(inst: Instruction):
    """(operand, register group, (piece, value)) for every register (or register name) that
    starts a group of registers."""
    ops = inst.operands
    for operand_index, group, piece, value_index, _align, _zero in _shape_checks(inst)[0]:
        op = ops[operand_index]
        yield op, group, (piece, op.values[value_index])


def _shape_checks(inst: Instruction) -> tuple[tuple, tuple[int, ...], bool, bool]:
    """What the checks look at, which the instruction's shape decides: the registers that
    must be aligned (_find_aligned_slots), the operands whose values _check bounds
    (immediates, constant-bank addresses) by index, and whether the opcode writes no register
    and whether it branches (which barriers its control code may set). Cached per shape;
    _NOTHING_TO_CHECK for most shapes, which _check can skip."""
    shape = inst.shape
    checks = _checks.get(shape)
    if checks is None:
        bounded = tuple(i for i, op in enumerate(inst.operands) if op.kind == "I" or op.kind.startswith("C[I]["))
        checks = (tuple(_find_aligned_slots(inst)), bounded, inst.opcode in NO_RESULT_OPCODES,
                  inst.opcode in BRANCH_OPCODES)
        checks = _checks[shape] = _NOTHING_TO_CHECK if checks == _NOTHING_TO_CHECK else checks
    return checks


_checks: dict[Shape, tuple[tuple, tuple[int, ...], bool, bool]] = {}
_NOTHING_TO_CHECK = ((), (), False, False)


def _check_uniform_registers(inst: Instruction, slots: tuple, highest: int, arch: str, diags: Diagnostics) -> None:
    """A uniform register past the arch's last (UR63 on sm_90, whose URZ holds that number);
    `slots`: where the instruction's uniform registers stand (kinds.uniform_slots)."""
    for i, j in slots:
        v = inst.operands[i].values[j]
        if type(v) is int and highest < v < REGISTER_ZERO["UR"]:
            diags.error(SassError(f"register UR{v} out of range on {arch}: its uniform registers are "
                                  f"UR0..UR{highest} (and URZ)", inst.operand_loc(i)))


def _find_aligned_slots(inst: Instruction):
    """(operand index, register group, piece, value index, the group's alignment, the zero
    register of its file) for every register (or register name) of the instruction that starts
    a group of registers: the semantics table says which operands span how many registers (the
    widths the hazard checker reads and writes)."""
    for group in register_groups(inst):
        op = inst.operands[group.operand]
        piece = _value_piece(op.kind, group.value)
        if piece in ("R", "UR", "N"):
            yield group.operand, group, piece, group.value, group.alignment, REGISTER_ZERO.get(group.file)


def _value_piece(kind: str, value_index: int) -> Optional[str]:
    """The kind piece that holds value `value_index` of an operand of this kind."""
    vi = 0
    for p in kind_pieces(kind):
        if p in VALUE_PIECES:
            if vi == value_index:
                return p
            vi += 1
    return None


# ---- the pass ---------------------------------------------------------------------------

def finish_program(program: Program, diags: Diagnostics, auto_reuse: bool = False, dialect: str = "nvdisasm",
                   dialect_forced: bool = False, *, labels_elsewhere: frozenset = frozenset(),
                   whole: bool = True) -> None:
    """The front end over every kernel of a parsed program (finish_kernel, for the program's
    arch, with `labels_elsewhere` and `whole`), and the limits of the arch on what a kernel
    declares; every error goes to `diags`."""
    target = get_arch(program.arch)
    for kernel in program.kernels:
        try:
            finish_kernel(kernel, diags, auto_reuse=auto_reuse, arch=program.arch, dialect=dialect,
                          dialect_forced=dialect_forced, labels_elsewhere=labels_elsewhere, whole=whole)
        except SassError as e:
            diags.error(e)
        if kernel.shared_bytes > target.max_shared_per_block:
            diags.error(SassError(f"kernel '{kernel.name}' has {kernel.shared_bytes} bytes of shared memory; "
                                  f"{target.name} allows {target.max_shared_per_block}", kernel.loc))
        if kernel.registers is not None and not 1 <= kernel.registers <= target.max_registers:
            diags.error(SassError(f"kernel '{kernel.name}': .registers {kernel.registers} out of range "
                                  f"1..{target.max_registers}", kernel.loc))


def finish_kernel(kernel: Kernel, diags: Diagnostics, auto_reuse: bool = False, arch: Optional[str] = None,
                  dialect: str = "nvdisasm", dialect_forced: bool = False, *,
                  labels_elsewhere: frozenset = frozenset(), whole: bool = True) -> None:
    """Bind the names the kernel declared (Kernel.declarations), check, and (optionally) set
    reuse flags, in place. `arch`: whose names of operands (HGMMA's `gsb0`) stand as they are,
    and whose TuringAs spellings are rewritten to what they stand for in `dialect`
    (:mod:`sassas.dialect`). For a part of a kernel's body (sassas.ranges): `labels_elsewhere`,
    the labels of the rest, and `whole` False leaves the checks of the whole body to
    check_kernel_end."""
    decls = kernel.declarations
    labels = {item.name for item in kernel.body if item.__class__ is Label} | labels_elsewhere
    params = {p.name for p in kernel.params}
    for name in sorted(set(decls.locs) & (labels | params)):
        what = "a label" if name in labels else "a parameter"
        diags.error(SassError(f"'{name}' is declared as a register/constant/shared name and is also {what}",
                              decls.locs[name]))

    registers = {name: (cls, n) for name, (cls, n, _) in decls.registers.items()}
    registers.update(_allocate(kernel, decls, registers, diags))
    consts = _layout_consts(kernel, decls)
    smem = _layout_smem(kernel, decls)
    known = sorted(labels | params | set(registers) | set(consts) | set(smem))

    instructions = kernel.instructions
    checks_of = _checks
    # An arch with fewer uniform registers than sassas names (sm_75..sm_90: UR0..UR62).
    # (sm_70 has none: the ISA layer says so.)
    highest_uniform = None
    if arch is not None and uniform_field_zero(arch) != URZ:
        highest_uniform = uniform_field_zero(arch) - 1
    said = set()            # dialect warnings: once a spelling a kernel
    # An operand binds to the same operand wherever it stands (`acc12`, `[addr+0x10]`: TuringAs
    # code names most of its registers): bound once. (Keyed by its fields: a tuple hashes and
    # compares without calling the dataclass's methods.)
    bound: dict[tuple, tuple[object, Operand, int]] = {}
    bind = _LayoutBinder(registers, consts, smem, labels, params, known, arch)
    # This pass's mark on the operands it has bound (Operand._binding: (mark, bound operand,
    # its shape part)). The parser makes one Operand for all the instructions that write the
    # same operand (sassas.parse_tree); each of them reads the binding from the operand's slot,
    # an attribute read, where a dictionary by the operand's id cost about twice as much.
    # (An operand another pass bound carries that pass's mark: bound again here. One that
    # names nothing, which the parser marked SELF_BOUND, is its own binding in every pass.)
    mark = object()
    own = SELF_BOUND
    # The shape of an instruction with its operands bound, by its shape before and, for each
    # bound operand, its shape part (ast.shape_part: what a shape sees of it).
    bound_shapes: dict[tuple, Shape] = {}
    # What the dialect and the checks need of a shape that the dialect leaves as it is (most):
    # (its checks, the function that passes what they let pass, its uniform registers' slots
    # where the arch has fewer than sassas names).
    plain: dict[Shape, tuple] = {}
    for inst in instructions:
        shape = inst.shape
        if shape.symbolic:
            # Each operand's binding where this pass made it, without a loop for the usual
            # counts (a loop over an instruction's few operands cost as much as the rest of
            # the pass); where an operand is seen for the first time (another mark), the long way.
            ops = inst.operands
            n = len(ops)
            operands = None
            if n == 4:
                a, b, c, d = ops
                a, b, c, d = a._binding, b._binding, c._binding, d._binding
                if ((a[0] is mark or a[0] is own) and (b[0] is mark or b[0] is own)
                        and (c[0] is mark or c[0] is own) and (d[0] is mark or d[0] is own)):
                    operands, key = (a[1], b[1], c[1], d[1]), (shape, a[2], b[2], c[2], d[2])
            elif n == 3:
                a, b, c = ops
                a, b, c = a._binding, b._binding, c._binding
                if (a[0] is mark or a[0] is own) and (b[0] is mark or b[0] is own) and (c[0] is mark or c[0] is own):
                    operands, key = (a[1], b[1], c[1]), (shape, a[2], b[2], c[2])
            elif n == 5:
                a, b, c, d, e = ops
                a, b, c, d, e = a._binding, b._binding, c._binding, d._binding, e._binding
                if ((a[0] is mark or a[0] is own) and (b[0] is mark or b[0] is own) and (c[0] is mark or c[0] is own)
                        and (d[0] is mark or d[0] is own) and (e[0] is mark or e[0] is own)):
                    operands, key = (a[1], b[1], c[1], d[1], e[1]), (shape, a[2], b[2], c[2], d[2], e[2])
            elif n == 2:
                a, b = ops
                a, b = a._binding, b._binding
                if (a[0] is mark or a[0] is own) and (b[0] is mark or b[0] is own):
                    operands, key = (a[1], b[1]), (shape, a[2], b[2])
            if operands is None:
                new_ops = []
                key = [shape]
                for i, op in enumerate(ops):
                    entry = op._binding
                    if entry[0] is not mark and entry[0] is not own:
                        op_key = (op.kind, op.values, op.flags, op.symbol)
                        entry = bound.get(op_key)
                        if entry is None:
                            try:
                                new = bind(op)
                            except SassError as e:
                                diags.error(e.with_loc(inst.operand_loc(i)))
                                entry = (None, op, None)      # (tried again where it stands next)
                            else:
                                entry = bound[op_key] = (mark, new, shape_part(new.kind, new.flags,
                                                                               new.symbol is not None))
                        if entry[2] is not None:
                            set_binding(op, entry)
                    new_ops.append(entry[1])
                    key.append(entry[2])
                operands = tuple(new_ops)
                key = tuple(key)
            known_shape = bound_shapes.get(key)
            if known_shape is None:
                inst.operands = operands
                shape = inst.shape
                if None not in key:
                    bound_shapes[key] = shape
            else:
                # (Instruction.assign_operands, inline: the call cost more than its two assignments)
                inst.operands = operands
                inst._shape = (known_shape, operands, inst.predicate, inst.modifiers, inst.opcode)
                shape = known_shape
        plain_checks = plain.get(shape)
        if plain_checks is not None and (inst.control is None or inst.control.stall != DEFAULT_LATENCY):
            checks, passes, slots = plain_checks
        else:
            if arch is not None:
                # (after binding: the table knows spellings by their operands' kinds)
                try:
                    warning = apply_dialect(inst, arch, dialect, dialect_forced)
                except SassError as e:
                    diags.error(e)
                    continue
                if warning is not None and warning not in said:
                    said.add(warning)
                    diags.warn(warning, inst.loc)
                shape = inst.shape
            checks = checks_of.get(shape)
            if checks is None:
                checks = _shape_checks(inst)
            passes = _passes_of.get(shape)
            if passes is None:
                passes = _passes_of[shape] = _passes_function(checks)
            slots = uniform_slots(shape) if highest_uniform is not None else ()
            if arch is None or leaves_shape(arch, shape):
                plain[shape] = (checks, passes, slots)
        if checks is not _NOTHING_TO_CHECK and not passes(inst):
            _check(inst, checks, diags)
        if slots:
            _check_uniform_registers(inst, slots, highest_uniform, arch, diags)

    if whole:
        check_kernel_end(kernel, len(instructions), has_exit(instructions), diags)
    if auto_reuse:
        set_reuse_flags(kernel)


def has_exit(instructions: list[Instruction]) -> bool:
    return not EXIT_OPCODES.isdisjoint(map(attrgetter("opcode"), instructions))


def check_kernel_end(kernel: Kernel, count: int, exits: bool, diags: Diagnostics) -> None:
    """The checks of a kernel's whole body (finish_kernel): it has `count` instructions, and
    an EXIT among them where `exits`."""
    if not count:
        diags.error(SassError(f"kernel '{kernel.name}' has no instructions", kernel.loc))
    elif kernel.entry and not exits:
        diags.warn(f"kernel '{kernel.name}' has no EXIT: its threads run past the end of the code", kernel.loc)


def _allocate(kernel: Kernel, decls: Declarations, fixed: dict, diags: Diagnostics) -> dict:
    if not decls.autos:
        return {}
    by_name = {name: auto for auto in decls.autos for name in auto.names}
    reserved: set[int] = {n for cls, n in fixed.values() if cls == "R"}
    three_source: list[ThreeSource] = []
    for inst in kernel.instructions:
        for op, group, (piece, value) in _aligned_registers(inst):
            align, width = group.alignment, group.width
            if piece == "N" and value in by_name:
                auto = by_name[value]
                if len(auto.names) == 1:
                    auto.align = max(auto.align, align)
                    auto.width = max(auto.width, width)
                else:
                    k = auto.names.index(value)
                    auto.member_align[k] = max(auto.member_align.get(k, 1), align)
            elif piece == "R" and value != 255:
                reserved.update(range(value, value + width))
            elif piece == "N" and value in fixed and fixed[value][0] == "R":
                reserved.update(range(fixed[value][1], fixed[value][1] + width))
        for op in inst.operands:
            vi = 0
            for p in kind_pieces(op.kind):
                if p in VALUE_PIECES:
                    if p == "R" and op.values[vi] != 255:
                        reserved.add(op.values[vi])
                    vi += 1
        if inst.opcode in THREE_SOURCE_OPCODES and len(inst.operands) >= 4:
            srcs = []
            for op in inst.operands[1:4]:
                if op.kind == "N" and op.values[0] in by_name:
                    srcs.append(op.values[0])
                elif op.kind == "N" and op.values[0] in fixed:
                    srcs.append(fixed[op.values[0]][1])
                elif op.kind == "R" and "reuse" not in op.flags and op.values[0] != 255:
                    srcs.append(op.values[0])
            if len(srcs) == 3:
                three_source.append(ThreeSource(tuple(srcs)))
    for auto in decls.autos:
        if len(auto.names) > 1 and auto.align == 1:
            size = len(auto.names)
            auto.align = 4 if size >= 4 else 2 if size >= 2 else 1
    try:
        placed = allocate(decls.autos, reserved, three_source)
    except SassError as e:
        diags.error(e)
        return {}
    return {name: ("R", r) for name, r in placed.items()}


def _layout_consts(kernel: Kernel, decls: Declarations) -> dict[str, tuple[int, int]]:
    """name -> (offset, size) in constant bank 3, in declaration order (TuringAs: no gaps)."""
    out, offset = {}, 0
    for name, size, _ in decls.consts:
        out[name] = (offset, size)
        offset += (size + 3) & ~3
    if offset:
        # (module.build_module writes them as `.nv.constant3`, zeros of this size)
        kernel.attributes["constant_bank3_bytes"] = offset
        kernel.attributes["constant_bank3_objects"] = dict(out)
    return out


def _layout_smem(kernel: Kernel, decls: Declarations) -> dict[str, int]:
    """name -> byte offset in the kernel's static shared memory."""
    out, offset = {}, 0
    for name, size, align, loc in decls.smem:
        if align <= 0 or align & (align - 1):
            raise SassError(f"shared-memory alignment {align} of '{name}' is not a power of two", loc)
        offset = (offset + align - 1) & ~(align - 1)
        out[name] = offset
        offset += size
    if offset > kernel.shared_bytes:
        kernel.shared_bytes = offset
    return out


def _bind(op: Operand, registers, consts, smem, labels, params, known, arch: Optional[str] = None) -> Operand:
    """Replace the names in one operand that the front end owns. (Its errors have no location:
    the caller gives them the operand's.)"""
    if isinstance(op.symbol, SymbolRef):
        return op                  # `32@lo(name)`: resolve makes it a relocation
    if names_nothing(op):
        return op                  # no name in it (`RZ`, `0x10` beside a name in the instruction)
    if op.kind == "C[I][I]" and op.symbol in LAUNCH_NAMES:
        return op                  # `blockDim.x`: resolve adds the arch's base (0x360 on Blackwell)
    ps = kind_pieces(op.kind)
    if op.kind == "N[I]" and op.values[0] in consts:
        name, word = op.values
        offset, size = consts[name]
        if not 0 <= word * 4 < size:
            raise SassError(f"'{name}[{word}]': constant '{name}' has {(size + 3) // 4} 32-bit word(s)")
        return replace(op, kind="C[I][I]", values=(CONST_BANK, offset + 4 * word), symbol=None)
    new_pieces, values, vi, remaining = [], [], 0, None
    for p in ps:
        if p not in VALUE_PIECES:
            new_pieces.append(p)
            continue
        v = op.values[vi]
        vi += 1
        if p != "N":
            new_pieces.append(p)
            values.append(v)
            if p == "L" and isinstance(v, str):
                remaining = v          # a listing's `(.L_x_3)`: resolve binds it
            continue
        if v in registers:
            cls, n = registers[v]
            new_pieces.append(cls)
            values.append(n)
        elif v in smem:
            new_pieces.append("I")
            values.append(smem[v])
        elif v in consts and op.kind == "N":
            offset, _ = consts[v]
            new_pieces.append("C[I][I]")
            values.extend((CONST_BANK, offset))
        elif v in labels or v in params:
            new_pieces.append(p)
            values.append(v)
            remaining = v
        elif v in CONSTANT_SLOTS and arch is not None:
            try:
                offset = constant_slot(v, get_arch(arch))
            except ValueError as e:
                raise SassError(str(e)) from None
            new_pieces.append("C[I][I]")
            values.extend((0, offset))
        elif op.kind == "N" and arch is not None and v in _operand_names(arch):
            new_pieces.append(p)           # the instruction set's own name: the encoder maps it
            values.append(v)
        else:
            msg = f"undefined name '{v}'"
            close = difflib.get_close_matches(v, known, n=1)
            if close:
                msg += f"; did you mean '{close[0]}'?"
            raise SassError(msg)
    folded, values = _fold_offsets(new_pieces, values)
    return new_operand("".join(folded), tuple(values), op.flags, remaining)


# Numbers that stand in for an operand's own numbers when _LayoutBinder learns a layout: two
# sets, spaced unlike each other, so that a number the binding kept can be told from one it
# computed (an offset added to one lands on another of its set in one of them at most).
_PROBES = (tuple(0x5A5A0000 + 0x100 * i for i in range(8)), tuple(0x3C3C0000 + 0x1300 * i for i in range(8)))


# (_LayoutBinder's entry for a layout seen once and not learnt yet)
_SEEN_ONCE = object()


class _LayoutBinder:
    """_bind for the operands of one kernel, learnt once per layout: the operand's kind, flags
    and symbol, and the names among its values. Where binding keeps the operand's numbers as
    they are (`[addr+0x40]` -> `[R3+0x40]`: the usual case), an operand of a known layout is
    bound by putting its numbers into the learnt result, without _bind's walk over its pieces
    (TuringAs code writes thousands of offsets beside the same few names). Where it computes
    from them (a `<smem>` name folded into an offset, a constant's word) or raises, each
    operand goes through _bind."""
    __slots__ = ("args", "layouts")

    def __init__(self, *args):
        self.args = args
        self.layouts: dict = {}

    def __call__(self, op: Operand) -> Operand:
        values = op.values
        layout = (op.kind, op.flags, op.symbol, tuple([v if v.__class__ is str else None for v in values]))
        recipe = self.layouts.get(layout)
        if recipe is None:
            # (learnt at its second operand: most layouts of a small file have one)
            self.layouts[layout] = _SEEN_ONCE
            return _bind(op, *self.args)
        if recipe is _SEEN_ONCE:
            recipe = self.layouts[layout] = self._learn(op) or False
        if recipe is False:
            return _bind(op, *self.args)
        if recipe is True:
            return op
        kind, flags, symbol, template, picks = recipe
        out = list(template)
        for at, source in picks:
            out[at] = values[source]
        return new_operand(kind, tuple(out), flags, symbol)

    def _learn(self, op: Operand):
        """(kind, flags, symbol, values with the kept numbers left open, where each kept number
        comes from); True where binding returns the operand itself; None where _bind must see
        each operand."""
        numbers = [i for i, v in enumerate(op.values) if v.__class__ is not str]
        if len(numbers) > len(_PROBES[0]):
            return None
        results = []
        for probe_numbers in _PROBES:
            values = list(op.values)
            for i, n in zip(numbers, probe_numbers):
                values[i] = n
            probe = new_operand(op.kind, tuple(values), op.flags, op.symbol)
            try:
                new = _bind(probe, *self.args)
            except SassError:
                return None
            if new is probe:
                results.append(True)
                continue
            used = probe_numbers[:len(numbers)]
            picks, template = [], list(new.values)
            for at, v in enumerate(new.values):
                if v.__class__ is int and v in used:
                    picks.append((at, numbers[used.index(v)]))
                    template[at] = None
            results.append((new.kind, new.flags, new.symbol, tuple(template), tuple(picks)))
        first, second = results
        return first if first == second else None


def _operand_names(arch: str) -> frozenset:
    return get_isa(arch).operand_names


def _fold_offsets(ps: list[str], values: list) -> tuple[list[str], list]:
    """Inside brackets, add up the immediates a name turned into: `[R+I+I]` -> `[R+I]`,
    `[I+I]` -> `[I]` (the canonical shapes of :mod:`sassas.operands`)."""
    out_p, out_v = [], []
    vi = 0
    i = 0
    while i < len(ps):
        if ps[i] != "[":
            if ps[i] in VALUE_PIECES or ps[i] == "C[I][I]":
                n = 2 if ps[i] == "C[I][I]" else 1
                out_v.extend(values[vi:vi + n])
                vi += n
            out_p.append(ps[i])
            i += 1
            continue
        j = ps.index("]", i)
        group = ps[i + 1:j]
        group_values = []
        for p in group:
            if p in VALUE_PIECES:
                group_values.append(values[vi])
                vi += 1
        regs = [(p, v) for p, v in zip([p for p in group if p in VALUE_PIECES], group_values)
                if p not in ("I", "+I")]
        imms = [v for p, v in zip([p for p in group if p in VALUE_PIECES], group_values) if p in ("I", "+I")]
        if len(imms) <= 1:
            out_p.extend(["["] + group + ["]"])
            out_v.extend(group_values)
        else:
            # Rebuild: the registers as written (with their suffix pieces), then one offset.
            rebuilt = []
            for p in group:
                if p in ("I", "+I"):
                    continue
                if p == "+" and rebuilt and rebuilt[-1] == "+":
                    continue
                rebuilt.append(p)
            while rebuilt and rebuilt[-1] == "+":
                rebuilt.pop()
            while rebuilt and rebuilt[0] == "+":
                rebuilt.pop(0)
            total = sum(imms)
            rebuilt.append("+I" if regs else "I")
            out_p.extend(["["] + rebuilt + ["]"])
            out_v.extend([v for _, v in regs] + [total])
        i = j + 1
    return out_p, out_v


def _passes_function(checks: tuple):
    """passes(inst) -> whether _check finds nothing wrong with an instruction of the shape whose
    checks (_shape_checks) these are: the same tests written out for the shape, its operands'
    kinds known (looping over the checks' tuples cost as much as the rest of the pass on the
    instructions that have any). Where it says no, _check finds what is wrong, if anything."""
    aligned, bounded, no_result, branch = checks
    body = ["def passes(inst):", "    ops = inst.operands"]
    for operand_index, _group, piece, value_index, align, zero in aligned:
        if piece in ("R", "UR"):
            body += [f"    v = ops[{operand_index}].values[{value_index}]",
                     f"    if v.__class__ is int and v % {align} and v != {zero!r}: return False"]
        else:
            body.append("    return False")         # (a name: _check looks)
    for operand_index in bounded:
        body.append(f"    op = ops[{operand_index}]")
        body.append("    if op.kind == 'I':")
        body.append("        v = op.values[0]")
        body.append(f"        if v.__class__ is int and not {INT_MIN} <= v <= {UINT_MAX}: return False")
        body.append("    elif op.kind.startswith('C[I][') and op.values:")
        body.append("        v = op.values[0]")
        body.append(f"        if v.__class__ is int and not 0 <= v <= {MAX_CONSTANT_BANK}: return False")
        body.append("        if op.kind == 'C[I][I]':")
        body.append("            v = op.values[1]")
        body.append(f"            if v.__class__ is int and not 0 <= v <= {MAX_CONSTANT_OFFSET}: return False")
    if no_result or branch:
        body.append("    control = inst.control")
        if no_result:
            body.append(f"    if control is not None and control.write_barrier != {NO_BARRIER}: return False")
        if branch:
            body.append(f"    if control is not None and control.read_barrier != {NO_BARRIER}: return False")
    body.append("    return True")
    source = "\n".join(body)
    passes = _passes_by_source.get(source)
    if passes is None:
        scope: dict = {}
        exec(source, scope)
        passes = _passes_by_source[source] = scope["passes"]
    return passes


_passes_of: dict[Shape, object] = {}
# (the function of a layout of checks: many shapes share one, and compiling each cost a small
# file's assembly a few per cent)
_passes_by_source: dict[str, object] = {}


def _check(inst: Instruction, checks: tuple, diags: Diagnostics) -> None:
    """Report what is wrong with the instruction; `checks`: what its shape says to look at
    (_shape_checks)."""
    ops = inst.operands
    aligned, bounded, no_result, branch = checks
    for operand_index, group, piece, value_index, align, zero in aligned:
        value = ops[operand_index].values[value_index]
        # (misaligned_group_message's test first: most groups are aligned)
        if piece in ("R", "UR") and isinstance(value, int) and value % align and value != zero:
            message = misaligned_group_message(inst, group, value)
            if message:
                diags.error(SassError(message, inst.operand_loc(operand_index)))
    for operand_index in bounded:
        op = ops[operand_index]
        if op.kind == "I":
            v = op.values[0]
            if isinstance(v, int) and not INT_MIN <= v <= UINT_MAX:
                diags.error(SassError(f"immediate {v:#x} does not fit in 32 bits", inst.operand_loc(operand_index)))
        elif op.kind.startswith("C[I][") and op.values:
            bank_no = op.values[0]
            if isinstance(bank_no, int) and not 0 <= bank_no <= MAX_CONSTANT_BANK:
                diags.error(SassError(f"constant bank {bank_no:#x} out of range 0..{MAX_CONSTANT_BANK:#x}",
                                      inst.operand_loc(operand_index)))
            if op.kind == "C[I][I]" and isinstance(op.values[1], int) and not 0 <= op.values[1] <= MAX_CONSTANT_OFFSET:
                diags.error(SassError(f"constant offset {op.values[1]:#x} out of range 0..{MAX_CONSTANT_OFFSET:#x}",
                                      inst.operand_loc(operand_index)))
    if no_result and inst.control is not None and inst.control.write_barrier != NO_BARRIER:
        diags.error(SassError(f"{inst.opcode} writes no register, so its write barrier "
                              f"{inst.control.write_barrier} would never be released; use the read "
                              "barrier (second field) to know when its operands were read", inst.loc))
    if branch and inst.control is not None and inst.control.read_barrier != NO_BARRIER:
        # nvdisasm rejects the encoding (BRA, EXIT, RET with a read barrier), so does the GPU.
        diags.error(SassError(f"{inst.opcode} takes no read barrier (the hardware rejects it); "
                              f"write '-' in the second control field", inst.loc))


# ---- automatic reuse flags --------------------------------------------------------------

def _signature(inst: Instruction):
    return (inst.opcode, tuple(op.kind for op in inst.operands),
            None if inst.predicate is None else (inst.predicate.kind, inst.predicate.values,
                                                 inst.predicate.flags))


def set_reuse_flags(kernel: Kernel) -> int:
    """Mark `.reuse` on a register source that the next instruction reads again in the same
    slot; return how many flags were set. Safe because: the two instructions are adjacent with
    no label between (nothing branches in), have the same opcode, operand shapes and predicate
    (same slots, same execution), the first does not write the register, and only plain 32-bit
    register operands are marked. An instruction written with the yield flag gets none: there
    the reuse bits are no reuse flags to nvdisasm."""
    count = 0
    body = kernel.body
    for a, b in zip(body, body[1:]):
        if not (isinstance(a, Instruction) and isinstance(b, Instruction)):
            continue
        first_source = REUSE_SOURCES.get(a.opcode)
        if first_source is None or _signature(a) != _signature(b):
            continue
        if a.control is not None and a.control.yield_:
            continue        # under the yield flag those bits are no reuse flags (sassas.control)
        if WIDE_MODIFIERS & set(a.modifiers) or WIDE_MODIFIERS & set(b.modifiers):
            continue
        written = {op.values[0] for op in a.operands[:first_source] if op.kind == "R"}
        ops = list(a.operands)
        for k in range(first_source, len(ops)):
            mine, theirs = ops[k], b.operands[k]
            if (mine.kind == "R" and theirs.kind == "R" and mine.values == theirs.values
                    and mine.values[0] != 255 and mine.values[0] not in written
                    and not any(f.startswith(".") for f in mine.flags) and "reuse" not in mine.flags):
                ops[k] = replace(mine, flags=mine.flags | {"reuse"})
                count += 1
        a.operands = tuple(ops)
    return count
