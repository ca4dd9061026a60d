"""Instruction semantics for scheduling: which registers an instruction reads and writes, and
how long its results take, read from the data tables ``data/semantics.toml`` (per opcode,
arch-independent) and ``data/latency.toml`` (per arch, each figure with its source).

No opcode facts live here: this module only interprets the tables.

Registers are ``(file, number)`` pairs: ``('R', 5)``, ``('P', 0)``, ``('UR', 4)``, ``('UP', 1)``.
The zero registers (RZ, URZ, PT, UPT) are never tracked.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from .ast import Instruction, Operand, Shape
from .cache import load_toml
from .kinds import value_pieces

Reg = tuple[str, int]

# The zero/true register of each register file: reads of it carry no dependency.
ZERO_REGISTER = {"R": 255, "UR": 255, "P": 7, "UP": 7}
PREDICATE_FILES = ("P", "UP")
PREDICATE_COUNT = 7   # P0..P6 (PT is 7)
# A register that carries a width suffix inside a larger operand: `desc[UR4][R2.64]` -> 'R.64';
# or a source of Blackwell's paired FP32 (`FFMA2 R0, R2.F32x2.HI_LO, R5.F32, ...`: a pair, where
# `.F32` is one register for both lanes).
_WIDE_SUFFIX = {".64": 2, ".128": 4, ".F32x2": 2}
# A memory descriptor `desc[UR4]` is a 64-bit value in a uniform register pair.
DESCRIPTOR_WIDTH = 2
# Type modifiers of conversions: which class (F or I) and how many registers.
_TYPE_MODIFIER = re.compile(r"^(F|S|U)(8|16|32|64)$")


class SemanticsError(Exception):
    """The data tables are malformed (a bug in sassas's data, not in the user's program)."""


@dataclass(frozen=True)
class OpcodeInfo:
    name: str
    cls: str
    dests: int = 1
    pred_follow: int = 0
    leading_preds: int = 2
    async_read: bool = False
    queue: Optional[str] = None
    widths: tuple = ()
    convert: tuple = ()
    branch: Optional[str] = None
    target: Optional[int] = None
    writes_all_preds: bool = False
    reads_all_preds: bool = False
    opaque: bool = False
    late_upper: tuple = ()
    preds_at_read: bool = False
    # Cycles after issue its write barrier is raised where that is not the arch's
    # barrier_set_delay (latency.toml); None: the arch's.
    barrier_delay: Optional[int] = None
    # Its write barrier is raised only once every fixed-latency result issued before it has
    # landed: a wait on that barrier completes those results too.
    drains: bool = False
    known: bool = True


@dataclass(frozen=True)
class Latency:
    """Timing of one latency class on one arch: fixed ``cycles`` or ``variable``."""
    cycles: Optional[int]
    variable: bool
    source: str


@dataclass
class Effects:
    """What one instruction does, in the terms the checker and scheduler use."""
    info: OpcodeInfo
    writes: list[Reg] = field(default_factory=list)
    reads: list[Reg] = field(default_factory=list)
    guard: list[Reg] = field(default_factory=list)      # the guard predicate, read at issue
    # Source registers by reuse slot (slot k = k-th source operand), None where not a register.
    slots: list[Optional[Reg]] = field(default_factory=list)
    reuse_slots: list[int] = field(default_factory=list)   # slots written with `.reuse`
    # Sources read later than at issue (semantics.toml `late_upper`): register -> cycles.
    read_delay: dict[Reg, int] = field(default_factory=dict)
    # Results ready once the sources are read (semantics.toml `preds_at_read`): a wait on the
    # instruction's read barrier releases them as well as one on its write barrier.
    at_read: list[Reg] = field(default_factory=list)
    target: Optional[int] = None     # branch target byte address, if known

    @property
    def cls(self) -> str:
        return self.info.cls


@functools.lru_cache(maxsize=None)
def _load(name: str) -> dict:
    return load_toml((Path(__file__).parent / "data" / name).read_bytes(), name.removesuffix(".toml"))


@functools.lru_cache(maxsize=None)
def opcode_table() -> dict[str, dict]:
    return _load("semantics.toml")["opcode"]


def _defaults() -> dict:
    return _load("semantics.toml")["defaults"]


def async_read_files() -> frozenset[str]:
    """Register files an instruction with `async_read` reads after issue."""
    return frozenset(_load("semantics.toml")["registers"]["async_read_files"])


def _data_width() -> dict[str, int]:
    return _load("semantics.toml")["data_width"]


_FIELDS = {"class": "cls", "dests": "dests", "pred_follow": "pred_follow",
           "leading_preds": "leading_preds", "async_read": "async_read", "queue": "queue",
           "widths": "widths", "convert": "convert", "branch": "branch", "target": "target",
           "writes_all_preds": "writes_all_preds", "reads_all_preds": "reads_all_preds",
           "opaque": "opaque", "late_upper": "late_upper", "preds_at_read": "preds_at_read",
           "barrier_delay": "barrier_delay", "drains": "drains"}


@functools.lru_cache(maxsize=4096)
def opcode_info(opcode: str, modifiers: tuple[str, ...]) -> OpcodeInfo:
    """The table's entry for an opcode, with the first matching form applied."""
    table = opcode_table()
    entry = table.get(opcode)
    merged = dict(_defaults())
    if entry is not None:
        merged.update({k: v for k, v in entry.items() if k not in ("forms", "note")})
        mods = "".join("." + m for m in modifiers) + "."
        for form in entry.get("forms", ()):
            if re.search(form["match"], mods):
                merged.update({k: v for k, v in form.items() if k != "match"})
                break
    kwargs = {}
    for key, value in merged.items():
        if key not in _FIELDS:
            raise SemanticsError(f"semantics.toml: unknown key {key!r} for {opcode}")
        kwargs[_FIELDS[key]] = tuple(value) if isinstance(value, list) else value
    return OpcodeInfo(name=opcode, known=entry is not None, **kwargs)


# ---- latency tables ---------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def arch_timing(arch: str) -> "ArchTiming":
    data = _load("latency.toml")
    archs = data["arch"]
    if arch not in archs:
        raise SemanticsError(f"latency.toml has no entry for {arch}")
    chain = []
    name: Optional[str] = arch
    while name is not None:
        chain.append(archs[name])
        name = archs[name].get("base")
    classes: dict[str, Latency] = {}
    pairs: dict[tuple[str, str], Latency] = {}
    params: dict[str, int] = {}
    for level in reversed(chain):
        for cls, spec in level.get("class", {}).items():
            classes[cls] = _latency(spec, f"{arch} class {cls}")
        for key, spec in level.get("pair", {}).items():
            producer, consumer = key.split("->")
            pairs[(producer.strip(), consumer.strip())] = _latency(spec, f"{arch} pair {key}")
        for key, spec in level.get("param", {}).items():
            params[key] = spec["value"]
    return ArchTiming(arch, classes, pairs, params)


def _latency(spec: dict, what: str) -> Latency:
    if "source" not in spec:
        raise SemanticsError(f"latency.toml: {what} has no source")
    if spec.get("variable"):
        return Latency(None, True, spec["source"])
    return Latency(int(spec["cycles"]), False, spec["source"])


@dataclass(frozen=True)
class ArchTiming:
    arch: str
    classes: dict[str, Latency]
    pairs: dict[tuple[str, str], Latency]
    params: dict[str, int]

    def latency(self, cls: str) -> Latency:
        try:
            return self.classes[cls]
        except KeyError:
            raise SemanticsError(f"latency.toml: {self.arch} has no latency for class {cls!r}") from None

    def is_variable(self, cls: str) -> bool:
        return self.latency(cls).variable

    def fixed_latency(self, producer_cls: str, consumer_cls: str) -> int:
        """Cycles between the issue of a fixed-latency producer and of a consumer of its result."""
        pair = self.pairs.get((producer_cls, consumer_cls))
        if pair is not None:
            return pair.cycles
        return self.latency(producer_cls).cycles or 1

    def param(self, name: str) -> int:
        return self.params[name]


# A predicate read as an instruction's guard is read at issue, earlier than an operand: its
# producer needs the latency of the pair "X -> guard" in latency.toml.
GUARD_CLASS = "guard"
SETP_CLASS = "setp"


def consumer_class(eff: "Effects", reg: Reg) -> str:
    """The latency class under which `eff` reads `reg`: 'guard' for its guard predicate."""
    return GUARD_CLASS if reg in eff.guard else eff.cls


def overwrite_class(eff: "Effects", producer_cls: str, reg: Reg) -> Optional[str]:
    """Writing `reg` while a fixed-latency result of `producer_cls` to it is in flight: results
    of one class come out in order, but another pipe may finish first and be overwritten by
    the older result (an ISETP to P1 landing after an R2P to P1, seen on an H100). Returns the
    consumer class whose latency the new writer must wait, or None when there is no hazard."""
    # Only what has been seen to go wrong: a comparison's predicate (its result comes late:
    # 12-13 cycles before a guard may read it) overwritten by R2P, which writes the whole
    # predicate file. ptxas overwrites predicates from other pipes sooner elsewhere
    # (PLOP3 after ISETP) without harm, so nothing else is flagged.
    if producer_cls != SETP_CLASS or not eff.info.writes_all_preds or reg[0] not in ("P", "UP"):
        return None
    return GUARD_CLASS


def drained_scoreboard(inst) -> Optional[int]:
    """n for `DEPBAR.LE SBn, 0x0`: it waits until no LDGSTS group that an LDGDEPBAR counted on
    scoreboard n (LDGDEPBAR's write-barrier field) is left; else None."""
    if inst.opcode != "DEPBAR" or len(inst.operands) < 2:
        return None
    sb, count = inst.operands[0], inst.operands[1]
    if sb.kind == "SB" and count.kind == "I" and count.values == (0,) and sb.values[0] < 6:
        return sb.values[0]
    return None


def async_group_scoreboard(insts, n: int) -> int:
    """The scoreboard for the LDGDEPBAR at insts[n]: the one the next DEPBAR.LE SBn names
    (0, ptxas's choice, where none follows)."""
    for inst in insts[n + 1:]:
        if inst.opcode == "DEPBAR" and inst.operands and inst.operands[0].kind == "SB":
            return inst.operands[0].values[0]
    return 0


# ---- operands -> registers --------------------------------------------------------------

def _registers(op: Operand) -> list[tuple[str, int, int]]:
    """(file, number, width) of every register an operand names, zero registers left out."""
    values = op.values
    return [(file, values[index], width) for index, file, width in _register_layout(op.kind, op.flags)
            if index < len(values) and isinstance(values[index], int) and values[index] != ZERO_REGISTER[file]]


@functools.lru_cache(maxsize=4096)
def _register_layout(kind: str, flags: frozenset) -> tuple[tuple[int, str, int], ...]:
    """(value index, file, width) of every register piece of an operand kind: the part of
    _registers that does not depend on the numbers (operands of one kind are many)."""
    out = []
    pieces = value_pieces(kind)
    # Suffixes written inside the kind (`R.64` of `desc[UR][R.64+I]`) widen that register.
    suffixes = re.findall(r"(?<![S\w])(UR|UP|R|P)(\.\w+)?", kind.replace("[", "[ ").replace("+", "+ "))
    widened = [(_WIDE_SUFFIX.get(s, 1)) for _, s in suffixes]
    if kind.startswith(("desc[UR]", "gdesc[UR]")):
        widened[0] = DESCRIPTOR_WIDTH
    k = 0
    for index, piece in enumerate(pieces):
        if piece in ZERO_REGISTER:
            width = widened[k] if k < len(widened) else 1
            if k == 0:
                for flag in flags:
                    width = max(width, _WIDE_SUFFIX.get(flag, 1))
            k += 1
            out.append((index, piece, width))
    return tuple(out)


def _is_predicate(op: Operand) -> bool:
    return op.kind in PREDICATE_FILES


def _span(file: str, number: int, width: int) -> list[Reg]:
    return [(file, number + i) for i in range(width) if number + i != ZERO_REGISTER[file]]


def _data_width_of(modifiers: tuple[str, ...]) -> int:
    table = _data_width()
    width = 1
    for m in modifiers:
        width = max(width, table.get(m, 1))
    return width


def _conversion_widths(info: OpcodeInfo, modifiers: tuple[str, ...]) -> tuple[int, int]:
    """Register widths of a conversion's result and source from its type modifiers."""
    slots = [None, None]
    for m in modifiers:
        t = _TYPE_MODIFIER.match(m)
        if not t:
            continue
        type_class = "F" if t.group(1) == "F" else "I"
        for i, wanted in enumerate(info.convert):
            if wanted == type_class and slots[i] is None:
                slots[i] = 2 if t.group(2) == "64" else 1
                break
    return slots[0] or 1, slots[1] or 1


# Memory ordering after a block barrier, modelled as a register: BAR writes it with the
# barrier class's latency and every memory access reads it, so a load or store issued too
# soon after BAR.SYNC is a fixed-latency hazard (the scheduler stalls, the checker reports).
MEMORY_ORDER: Reg = ("MEM", 0)
BARRIER_CLASS = "barrier"
MEMORY_CLASSES = frozenset({"shared", "global"})


def effects(inst: Instruction) -> Effects:
    """Registers read and written by `inst`, from the semantics table."""
    info = opcode_info(inst.opcode, inst.modifiers)
    eff = Effects(info)
    if info.cls == BARRIER_CLASS:
        eff.writes.append(MEMORY_ORDER)
    elif info.cls in MEMORY_CLASSES:
        eff.reads.append(MEMORY_ORDER)
    if inst.predicate is not None:
        eff.guard += _span(inst.predicate.kind, inst.predicate.values[0], 1)
    if info.branch is not None and info.target is not None and inst.operands:
        t = inst.operands[info.target]
        if t.kind in ("I", "L") and isinstance(t.values[0], int):
            eff.target = t.values[0]
    if info.opaque:
        return eff
    data = _data_width_of(inst.modifiers)
    conversion = _conversion_widths(info, inst.modifiers) if info.convert else None

    ops = list(inst.operands)
    i = 0
    # Leading predicate operands are results.
    while i < len(ops) and _is_predicate(ops[i]) and i < info.leading_preds and (info.dests or info.leading_preds):
        eff.writes += _span(ops[i].kind, ops[i].values[0], 1)
        if info.preds_at_read:
            eff.at_read += _span(ops[i].kind, ops[i].values[0], 1)
        i += 1
    position = 0      # among non-predicate operands, for `widths`

    def width_at(pos: int) -> int:
        if conversion is not None and pos < 2:
            return conversion[pos]
        if pos < len(info.widths):
            w = info.widths[pos]
            return data if w == "data" else int(w)
        return 1

    dests_left = info.dests
    while i < len(ops) and dests_left > 0:
        op = ops[i]
        if not _is_predicate(op):
            for file, number, width in _registers(op):
                eff.writes += _span(file, number, max(width, width_at(position)))
            position += 1
            dests_left -= 1
        else:
            eff.writes += _span(op.kind, op.values[0], 1)
        i += 1
    follow = info.pred_follow
    while i < len(ops) and follow > 0 and _is_predicate(ops[i]):
        eff.writes += _span(ops[i].kind, ops[i].values[0], 1)
        i += 1
        follow -= 1
    slot = 0
    for op in ops[i:]:
        regs = _registers(op)
        if _is_predicate(op):
            eff.reads += [(f, n) for f, n, _ in regs]
            continue
        plain = op.kind in ("R", "UR")
        w = width_at(position)
        for j, (file, number, width) in enumerate(regs):
            span = _span(file, number, max(width, w) if plain else width)
            eff.reads += span
            if info.late_upper and info.late_upper[0] == position:
                eff.read_delay.update((reg, info.late_upper[1]) for reg in span if reg != (file, number))
        if plain:
            eff.slots.append(regs[0][:2] if regs else None)
            if "reuse" in op.flags:
                eff.reuse_slots.append(slot)
        else:
            eff.slots.append(None)
        slot += 1
        position += 1
    if info.writes_all_preds:
        eff.writes += [("P", n) for n in range(PREDICATE_COUNT)]
    if info.reads_all_preds:
        eff.reads += [("P", n) for n in range(PREDICATE_COUNT)]
    return eff


# ---- register groups ----------------------------------------------------------------------

# Where a group of registers must start: a pair on an even register, three or four registers
# (and the eight of HMMA.884.F32's accumulator) on a multiple of 4 (ptxas never allocates
# them otherwise; the hardware raises an illegal-instruction error on CS2R R5).
MAX_GROUP_ALIGNMENT = 4
GROUP_FILES = ("R", "UR")


@dataclass(frozen=True)
class RegisterGroup:
    """An operand's register that starts a group of `width` registers."""
    operand: int          # index into the instruction's operands
    value: int            # index into that operand's values
    file: str             # 'R' or 'UR' (a name not yet bound counts as R)
    width: int
    written: bool         # the instruction writes the group (else reads it)

    @property
    def alignment(self) -> int:
        return min(1 << (self.width - 1).bit_length(), MAX_GROUP_ALIGNMENT)


def register_groups(inst: Instruction) -> tuple[RegisterGroup, ...]:
    """Every R or UR register of `inst` that starts a group of more than one register, with
    its width as the semantics table gives it (the same widths effects() reads and writes).
    Depends on the opcode, modifiers, operand kinds and flags only: cached per shape."""
    shape = inst.shape
    groups = _groups.get(shape)
    if groups is None:
        groups = _groups[shape] = _probe_groups(inst)
    return groups


def misaligned_group_message(inst: Instruction, group: RegisterGroup, number: int) -> Optional[str]:
    """Why register `number` cannot start `group` of `inst` (None where it can): "CS2R writes
    the register pair R5:R6; a pair must start at an even register"."""
    align = group.alignment
    if number % align == 0 or number == ZERO_REGISTER[group.file]:
        return None
    noun = {2: "pair", 4: "quad"}.get(group.width, f"group of {group.width} registers")
    start = "an even register" if align == 2 else f"a multiple of {align}"
    last = number + group.width - 1
    return (f"{inst.mnemonic} {'writes' if group.written else 'reads'} the register {noun} "
            f"{group.file}{number}:{group.file}{last}; a {noun.split(' of ')[0]} must start at {start}")


_groups: dict[Shape, tuple[RegisterGroup, ...]] = {}
# Probe numbers of one file, apart by the widest group (HMMA.884.F32's accumulator: 8), so
# that seven uniform registers fit below sm_90's URZ.
_GROUP_STRIDE = 8
# A name (register alias) in an operand kind, not a parameter word `a[0]` (kind N[I]).
_NAME_PIECE = re.compile(r"(?<![A-Za-z])N(?![A-Za-z\[])")


def _probe_groups(inst: Instruction) -> tuple[RegisterGroup, ...]:
    """register_groups found by running effects() on a copy whose R and UR registers (and
    names, as R) are probe numbers _GROUP_STRIDE apart, per file."""
    slots: list[tuple[int, int, str]] = []
    count = dict.fromkeys(GROUP_FILES, 0)
    operands = []
    for operand_index, op in enumerate(inst.operands):
        kind = _NAME_PIECE.sub("R", op.kind)
        values = list(op.values)
        for value_index, file, _ in _register_layout(kind, op.flags):
            if file in count and value_index < len(values):
                values[value_index] = _GROUP_STRIDE * count[file]
                count[file] += 1
                slots.append((operand_index, value_index, file))
        operands.append(Operand(kind, tuple(values), op.flags))
    if any(_GROUP_STRIDE * n > ZERO_REGISTER[file] for file, n in count.items()):
        return ()
    eff = effects(Instruction(inst.opcode, inst.modifiers, tuple(operands), inst.predicate))
    width: dict[tuple[str, int], int] = {}
    written: set[tuple[str, int]] = set()
    for is_write, regs in ((False, eff.reads), (True, eff.writes)):
        for file, number in regs:
            if file in count:
                k, offset = divmod(number, _GROUP_STRIDE)
                width[file, k] = max(width.get((file, k), 0), offset + 1)
                if is_write:
                    written.add((file, k))
    seen = dict.fromkeys(GROUP_FILES, 0)
    out = []
    for operand_index, value_index, file in slots:
        k = seen[file]
        seen[file] += 1
        if width.get((file, k), 0) > 1:
            out.append(RegisterGroup(operand_index, value_index, file, width[file, k], (file, k) in written))
    return tuple(out)


# ---- the register count ------------------------------------------------------------------

# Probe numbers for the R registers of an instruction, apart by more than any width.
_PROBE_STRIDE = 16


def highest_register(inst: Instruction) -> int:
    """The highest R register number `inst` reads or writes as effects() counts them (each
    operand with its width), -1 for none."""
    top = register_top_function(inst)
    if top is None:
        return max([-1] + [n for file, n in effects(inst).reads + effects(inst).writes if file == "R"])
    return top(inst.operands)


_r_slots: dict[Shape, Optional[tuple]] = {}


def _register_slots_of_shape(inst: Instruction) -> Optional[list]:
    """[the R register slots of the instruction's shape, their _top_function or None until
    asked for], or None where the probe cannot find them (effects() must look at the
    instruction itself)."""
    shape = inst.shape
    known = _r_slots.get(shape, False)
    if known is False:
        slots = _r_register_slots(inst)
        known = _r_slots[shape] = None if slots is None else [slots, None]
    return known


def register_slots(inst: Instruction) -> Optional[tuple[tuple[int, int, int], ...]]:
    """For the instruction's shape: its R registers as (operand index, value index, width),
    what highest_register counts of an instruction of that shape; None where highest_register
    must look at each instruction. Raises what highest_register raises for an opcode the table
    does not know."""
    known = _register_slots_of_shape(inst)
    return None if known is None else known[0]


def register_top_function(inst: Instruction):
    """For the instruction's shape: top(operands) -> highest_register of an instruction of that
    shape with these operands. None where highest_register must look at each instruction.
    Raises what highest_register raises for an opcode the table does not know."""
    known = _register_slots_of_shape(inst)
    if known is None:
        return None
    if known[1] is None:
        known[1] = _top_function(known[0])
    return known[1]


def _top_function(slots: tuple[tuple[int, int, int], ...]):
    """operands -> the highest R register the slots (operand index, value index, width) hold:
    number + width - 1 over the numbers (not names), RZ and a span's end at RZ left out (a
    span never includes RZ), -1 for none; written out for the slots (a loop over them took
    about twice as long on every instruction of a kernel)."""
    rz = ZERO_REGISTER["R"]
    body = ["def top(ops):", "    t = -1"]
    for o, v, w in slots:
        body += [f"    n = ops[{o}].values[{v}]", f"    if n.__class__ is int and n != {rz}:"]
        if w > 1:
            body += [f"        n += {w - 1}", f"        if n == {rz}: n -= 1"]
        body += ["        if n > t: t = n"]
    body.append("    return t")
    scope: dict = {}
    exec("\n".join(body), scope)
    return scope["top"]


def _r_register_slots(inst: Instruction) -> Optional[tuple[tuple[int, int, int], ...]]:
    """(operand index, value index, width) of each R register of the instruction, found by
    running effects() on a copy whose R registers are probe numbers: which registers effects()
    counts and how wide depends on the opcode, modifiers, operand kinds and flags only, so one
    probe serves every instruction of that shape."""
    slots, operands = [], []
    for operand_index, op in enumerate(inst.operands):
        values = list(op.values)
        for value_index, file, _ in _register_layout(op.kind, op.flags):
            if file == "R" and value_index < len(values):
                values[value_index] = _PROBE_STRIDE * len(slots)
                slots.append((operand_index, value_index))
        operands.append(Operand(op.kind, tuple(values), op.flags, symbol=op.symbol))
    if _PROBE_STRIDE * len(slots) > ZERO_REGISTER["R"]:
        return None
    probe = Instruction(inst.opcode, inst.modifiers, tuple(operands), inst.predicate)
    eff = effects(probe)
    widths = [0] * len(slots)
    for file, number in eff.reads + eff.writes:
        if file == "R":
            k, offset = divmod(number, _PROBE_STRIDE)
            widths[k] = max(widths[k], offset + 1)
    return tuple((o, v, w) for (o, v), w in zip(slots, widths) if w)
