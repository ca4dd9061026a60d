"""Hazard checker: does a kernel's control code keep every data dependency safe?

On Volta and later the program, not the hardware, orders dependent instructions:
- a fixed-latency result (FFMA, IADD3, ISETP...) may be read only once enough cycles have
  passed: the stall counts of the instructions in between must add up to its latency;
- a variable-latency result (LDG, LDS, S2R, MUFU...) may be read or overwritten only after a
  wait on the write barrier its producer set (or on a barrier of a later instruction of the
  same in-order queue);
- a source of an instruction that reads its operands late (stores, loads) may be overwritten
  only after a wait on the read barrier the instruction set;
- a barrier waited on should have been set, and reuse flags should be able to hit.

The analysis is a forward dataflow over the control-flow graph: per block, the set of
in-flight barriers and pending register writes/reads, merged at joins (union, youngest age),
iterated to a fixed point so loops are followed. Timing is the lower bound the control codes
guarantee: an instruction issues at least max(stall, 1) cycles after the one before it.
Opcode facts come from sassas.semantics (data/semantics.toml, data/latency.toml).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Optional, Union

from .arch import get_arch
from .ast import BARRIER_COUNT, NO_BARRIER, ControlCode, Instruction, Kernel, Label, Loc, Program
from .errors import WARNINGS_PER_MESSAGE, Diagnostic, SassError
from .isa import get_isa
from .semantics import (MEMORY_ORDER, ZERO_REGISTER, ArchTiming, Effects, Reg, SemanticsError, arch_timing,
                        async_read_files, consumer_class, drained_scoreboard, effects, misaligned_group_message,
                        overwrite_class, register_groups)

# Ages (cycles since issue) are capped here: every fixed latency is far below, and capping
# keeps the dataflow finite around loops. In-order queues compare ages too (a result issued
# before the one waited for is in), so the cap is above the longest such span in ptxas's
# code (sm_100: an I2F.F16 read after a wait on a conversion issued 8 cycles later, 96 cycles on).
AGE_CAP = 256


@dataclass
class Hazard(Diagnostic):
    """A diagnostic of the checker; ``kind`` names the rule (see KINDS)."""
    kind: str = ""
    address: int = -1


# The rules, by the name tests and callers filter on, and whether breaking them is an error
# (the program can compute wrong results) or a warning (wasted or suspicious control bits).
ALL_BARRIERS = (1 << BARRIER_COUNT) - 1

KINDS = {
    "raw-fixed": "error",        # fixed-latency result read too early
    "waw-fixed": "error",        # a result of another pipe could land after this one
    "raw-variable": "error",     # variable-latency result read without waiting on its barrier
    "waw-variable": "error",     # register overwritten while a variable-latency write is pending
    "war": "error",              # source of an in-flight load/store overwritten before its read barrier
    "barrier-delay": "error",    # barrier waited on too soon after being set
    "reuse-stale": "warning",      # reuse-cached register written before the read that reuses it
    # Barrier set again while still in flight: legal (barriers count; a wait waits for all
    # setters) and common in ptxas code, but it makes the first result wait for the second.
    "rearm": "note",
    "wait-unset": "warning",  # wait on a barrier that nothing set
    # Wait on a barrier that was set and has been waited on since: harmless (ptxas writes it
    # after a drain of all six barriers), but the wait does nothing.
    "wait-redundant": "note",
    # Reuse flag that cannot hit. A note: the model (one cache per operand slot, kept until the
    # slot's next read) is simpler than the hardware, whose caches ptxas uses across
    # instructions of other pipes.
    "reuse-miss": "note",
    "no-control": "error",       # instruction without a control code
    # A register pair or quad that does not start where its width needs (CS2R R5: an
    # illegal-instruction fault on the GPU); nvdisasm prints such words without a word.
    "misaligned-group": "error",
    # LDGDEPBAR commits the LDGSTS copies before it as a group counted on the scoreboard in its
    # write-barrier field; without one no DEPBAR can wait for them, and a DEPBAR.LE SBn waits
    # for whatever else set barrier n (seen: copies landing after the BAR that published them)
    "async-untracked": "error",
}


@dataclass(frozen=True)
class Token:
    """Something in flight: an instruction's pending result/read, or a barrier it set."""
    producer: int                  # instruction index
    barrier: Optional[int]         # scoreboard barrier that completes it, None if none
    queue: Optional[str]           # in-order completion queue (semantics.toml `queue`)
    age: int                       # cycles since issue (youngest over the paths merged)
    max_age: int                   # cycles since issue (oldest over the paths merged)
    # A result ready when the sources are read (semantics `preds_at_read`): the instruction's
    # read barrier completes it too.
    read_barrier: Optional[int] = None


@dataclass
class State:
    # Fixed-latency results still on their way: register -> (age, producer index).
    fixed: dict[Reg, tuple[int, int]] = field(default_factory=dict)
    # Variable-latency results not yet waited for / sources not yet read.
    writes: dict[Reg, frozenset[Token]] = field(default_factory=dict)
    reads: dict[Reg, frozenset[Token]] = field(default_factory=dict)
    # Barriers that may be in flight: barrier -> the instructions that set it.
    barriers: dict[int, frozenset[Token]] = field(default_factory=dict)
    # Barriers set at some point on some path to here (in flight or waited on since): a wait
    # on one of these is redundant at worst; on any other it waits on nothing ever set.
    ever_set: frozenset[int] = frozenset()

    def copy(self) -> "State":
        return State(dict(self.fixed), dict(self.writes), dict(self.reads), dict(self.barriers),
                     self.ever_set)

    def key(self):
        return (frozenset(self.fixed.items()), frozenset(self.writes.items()),
                frozenset(self.reads.items()), frozenset(self.barriers.items()), self.ever_set)


def _merge_tokens(a: frozenset[Token], b: frozenset[Token]) -> frozenset[Token]:
    by_key: dict = {}
    for t in list(a) + list(b):
        k = (t.producer, t.barrier, t.queue, t.read_barrier)
        old = by_key.get(k)
        by_key[k] = t if old is None else Token(t.producer, t.barrier, t.queue,
                                                 min(t.age, old.age), max(t.max_age, old.max_age),
                                                 t.read_barrier)
    return frozenset(by_key.values())


def _merge(a: State, b: State) -> State:
    out = a.copy()
    for reg, (age, producer) in b.fixed.items():
        old = out.fixed.get(reg)
        out.fixed[reg] = (age, producer) if old is None or age < old[0] else old
    for name in ("writes", "reads", "barriers"):
        mine, theirs = getattr(out, name), getattr(b, name)
        for k, tokens in theirs.items():
            mine[k] = _merge_tokens(mine[k], tokens) if k in mine else tokens
    return out


# ---- control-flow graph -----------------------------------------------------------------

@dataclass
class Block:
    start: int
    end: int                      # exclusive
    successors: list[int] = field(default_factory=list)


def instruction_list(item: Union[Program, Kernel, list]) -> tuple[list[Instruction], dict[str, int]]:
    """The instructions of a kernel in order, and its labels -> instruction index."""
    body = item.body if isinstance(item, Kernel) else list(item)
    insts: list[Instruction] = []
    labels: dict[str, int] = {}
    for x in body:
        if isinstance(x, Label):
            labels[x.name] = len(insts)
        else:
            insts.append(x)
    return insts, labels


def build_cfg(insts: list[Instruction], effs: list[Effects], labels: dict[str, int]) -> list[Block]:
    by_address = {inst.address: i for i, inst in enumerate(insts) if inst.address >= 0}

    def target_index(i: int) -> Optional[int]:
        eff = effs[i]
        if insts[i].relocation is not None:
            return None          # another function's address (CALL.ABS `(f)`): control comes back
        if eff.target is not None:
            return by_address.get(eff.target)
        info = eff.info
        if info.target is not None and insts[i].operands:
            value = insts[i].operands[info.target].values[:1]
            if value and isinstance(value[0], str):
                return labels.get(value[0])
        return None

    n = len(insts)
    leaders = {0} | set(labels.values())
    targets: dict[int, Optional[int]] = {}
    for i, eff in enumerate(effs):
        if eff.info.branch is not None:
            t = target_index(i)
            targets[i] = t
            if t is not None:
                leaders.add(t)
            leaders.add(i + 1)
    starts = sorted(x for x in leaders if x < n)
    blocks: list[Block] = []
    block_of = {}
    for j, s in enumerate(starts):
        e = starts[j + 1] if j + 1 < len(starts) else n
        block_of[s] = j
        blocks.append(Block(s, e))
    for j, blk in enumerate(blocks):
        last = blk.end - 1
        kind = effs[last].info.branch
        guard = insts[last].predicate
        guarded = guard is not None and guard.values[0] != 7
        never = guard is not None and guard.values[0] == 7 and guard.has("!")    # @!PT
        succ: list[int] = []
        target = targets.get(last)
        falls_through = (kind in (None, "conditional") or guarded or never
                         or (kind == "call" and target is None))
        if never:
            pass
        elif kind in ("always", "conditional", "call") and target is not None:
            succ.append(block_of[target])
        elif kind == "indirect":
            succ += [block_of[v] for v in labels.values() if v in block_of]
        if falls_through and blk.end < n:
            succ.append(j + 1)
        blk.successors = sorted(set(succ))
    # A subroutine's RET leads back to the instruction after each CALL of it, so what the
    # callee leaves in flight reaches its callers (and only them).
    for j, blk in enumerate(blocks):
        last = blk.end - 1
        if effs[last].info.branch != "call" or targets.get(last) is None or blk.end >= n:
            continue
        seen, todo = set(), [block_of[targets[last]]]
        while todo:
            k = todo.pop()
            if k in seen:
                continue
            seen.add(k)
            if effs[blocks[k].end - 1].info.branch == "return":
                blocks[k].successors = sorted(set(blocks[k].successors) | {j + 1})
            todo += [x for x in blocks[k].successors if x != j + 1]
    return blocks


# ---- the checker ------------------------------------------------------------------------

class Checker:
    def __init__(self, insts: list[Instruction], labels: dict[str, int], arch: str):
        self.insts = insts
        self.timing: ArchTiming = arch_timing(arch)
        self.effs = [effects(i) for i in insts]
        try:
            isa = get_isa(arch)
        except SassError:
            isa = None
        self.reuse = [_reuse_slots(inst, eff, isa) for inst, eff in zip(insts, self.effs)]
        self.blocks = build_cfg(insts, self.effs, labels)
        self.diagnostics: list[Hazard] = []
        # (producer, consumer, cycles, consumer's latency class): every fixed-latency result
        # read, for calibration.
        self.observed: list[tuple[int, int, int, str]] = []
        self._reported: set = set()
        self.barrier_set_delay = self.timing.param("barrier_set_delay")

    # -- reporting
    def report(self, kind: str, i: int, message: str, related: Optional[int] = None) -> None:
        key = (kind, i, message)
        if key in self._reported:
            return
        self._reported.add(key)
        inst = self.insts[i]
        notes = []
        if related is not None:
            other = self.insts[related]
            notes.append(Diagnostic("note", f"{_describe(other)} is here", other.loc))
        self.diagnostics.append(Hazard(KINDS[kind], message, inst.loc, notes, kind=kind,
                                       address=inst.address))

    # -- per instruction
    def step(self, i: int, state: State, emit: bool) -> None:
        inst, eff = self.insts[i], self.effs[i]
        ctrl = inst.control
        report = self.report if emit else (lambda *a, **k: None)
        if ctrl is None:
            report("no-control", i, "instruction has no control code (run the scheduler first)")
            ctrl = ControlCode(stall=1, yield_=False)
        # 1. waits (DEPBAR.LE SBn, 0x0 waits for every group counted on scoreboard n)
        for b in range(BARRIER_COUNT):
            if ctrl.wait_mask >> b & 1:
                self._wait(i, b, state, report)
        drained = drained_scoreboard(inst)
        if drained is not None and not ctrl.wait_mask >> drained & 1:
            # (no 2-cycle raise delay: ptxas writes LDGDEPBAR, stall 1, DEPBAR on its scoreboard)
            self._wait(i, drained, state, report, raise_delay=False)
        # 2. sources
        for reg in eff.reads + eff.guard:
            for t in state.writes.get(reg, ()):
                report("raw-variable", i, _raw_variable_message(reg, self.insts[t.producer], t), t.producer)
            if reg in state.fixed:
                issued_ago, producer = state.fixed[reg]
                # Cycles between the producer's issue and this instruction's read of reg.
                age = issued_ago + eff.read_delay.get(reg, 0)
                consumer_cls = consumer_class(eff, reg)
                need = self.timing.fixed_latency(self.effs[producer].cls, consumer_cls)
                if emit:
                    self.observed.append((producer, i, age, consumer_cls))
                if age < need:
                    report("raw-fixed", i, f"reads {_reg(reg)} {age} cycle(s) after {_describe(self.insts[producer])} "
                           f"wrote it; its result takes {need} (raise the stall counts in between)", producer)
        # 3. results
        variable = self.timing.is_variable(eff.cls)
        for reg in eff.writes:
            if reg in state.fixed:
                age, producer = state.fixed[reg]
                cls = overwrite_class(eff, self.effs[producer].cls, reg)
                need = self.timing.fixed_latency(self.effs[producer].cls, cls) if cls else 0
                if age < need:
                    report("waw-fixed", i, f"overwrites {_reg(reg)} {age} cycle(s) after {_describe(self.insts[producer])} "
                           f"wrote it on another pipe; that result lands up to {need} cycles after issue and "
                           f"could come last (raise the stall counts in between)", producer)
            for t in state.writes.get(reg, ()):
                report("waw-variable", i, f"overwrites {_reg(reg)} while {_describe(self.insts[t.producer])} "
                              f"may still write it: {_wait_hint(t)}", t.producer)
            for t in state.reads.get(reg, ()):
                if t.queue is not None and t.queue == eff.info.queue and variable:
                    # One in-order queue: this instruction is dispatched, and writes, only
                    # after the earlier one has read its sources (ptxas relies on it: DFMA
                    # then DMUL into a DFMA source on sm_75, no wait between).
                    continue
                if variable and eff.cls == "global" and self.effs[t.producer].cls == "global":
                    # Likewise two global-memory instructions: a later one's result comes back
                    # from memory after the earlier one has read its address (ptxas relies on
                    # it: `LDG.E.64 R6, desc[UR6][R10.64+0x30]` sets read barrier 1, and an
                    # ATOMG writes R11 with no wait on it, sm_90).
                    continue
                report("war", i, f"overwrites {_reg(reg)} while {_describe(self.insts[t.producer])} may still "
                       f"read it: {_wait_hint(t, 'read')}", t.producer)
            state.writes.pop(reg, None)
            state.reads.pop(reg, None)
            state.fixed.pop(reg, None)
        if inst.opcode == "LDGDEPBAR" and ctrl.write_barrier == NO_BARRIER:
            report("async-untracked", i, "LDGDEPBAR sets no scoreboard, so no DEPBAR can wait for "
                   "its copies: give it a write barrier n and wait with DEPBAR.LE SBn, 0x0")
        # 4. barriers this instruction sets, and what it leaves in flight
        for b, what in ((ctrl.write_barrier, "write"), (ctrl.read_barrier, "read")):
            if b == NO_BARRIER:
                continue
            if b in state.barriers:
                setter = min(state.barriers[b], key=lambda t: t.age).producer
                report("rearm", i, f"sets barrier {b} while {_describe(self.insts[setter])} may still hold it "
                       f"(a wait on {b} then waits for both)", setter)
            token = Token(i, b, eff.info.queue if what == "write" else None, 0, 0)
            state.barriers[b] = state.barriers.get(b, frozenset()) | {token}
            state.ever_set |= {b}
        if variable:
            b = ctrl.write_barrier if ctrl.write_barrier != NO_BARRIER else None
            token = Token(i, b, eff.info.queue, 0, 0)
            rb = ctrl.read_barrier if ctrl.read_barrier != NO_BARRIER else None
            at_read = Token(i, b, eff.info.queue, 0, 0, rb)
            for reg in eff.writes:
                state.writes[reg] = state.writes.get(reg, frozenset()) | {at_read if reg in eff.at_read else token}
        else:
            for reg in eff.writes:
                state.fixed[reg] = (0, i)
        # A read barrier says the sources are read after issue, whatever the opcode.
        if ctrl.read_barrier != NO_BARRIER:
            # The queue goes with the token so that a later instruction of the same in-order
            # queue may overwrite these sources (see the "war" rule).
            token = Token(i, ctrl.read_barrier, eff.info.queue if variable else None, 0, 0)
            late = async_read_files()
            for reg in eff.reads:
                if reg[0] not in late:
                    continue
                state.reads[reg] = state.reads.get(reg, frozenset()) | {token}
        # 5. time passes
        self._advance(state, max(ctrl.stall, 1))

    def _wait(self, i: int, b: int, state: State, report, raise_delay: bool = True) -> None:
        setters = state.barriers.pop(b, None)
        if not setters:
            if b in state.ever_set:
                report("wait-redundant", i, f"waits on barrier {b}, which has been waited on since it was last set")
            # Waiting on all six at once is the "drain everything" idiom (ptxas writes it at
            # memory fences, CCTL.IVALL): not a mistake even where some were never set.
            elif self.insts[i].control.wait_mask != ALL_BARRIERS:
                report("wait-unset", i, f"waits on barrier {b}, which no instruction before it sets")
            return
        young = min(setters, key=lambda t: t.age)
        delay = self.effs[young.producer].info.barrier_delay
        if delay is None:
            delay = self.barrier_set_delay
        if raise_delay and young.age < delay:
            report("barrier-delay", i, f"waits on barrier {b} {young.age} cycle(s) after "
                   f"{_describe(self.insts[young.producer])} set it; a barrier needs "
                   f"{delay} cycles to be raised", young.producer)

        def done(t: Token) -> bool:
            if b in (t.barrier, t.read_barrier):
                return True
            # In-order queues: a result issued before a waited-for one of its queue is in.
            return t.queue is not None and any(s.queue == t.queue and t.age > s.max_age for s in setters)

        # A setter that drains (semantics `drains`): every fixed-latency result issued before it,
        # on every path, has landed once its barrier is down.
        for t in setters:
            if self.effs[t.producer].info.drains:
                state.fixed = {r: v for r, v in state.fixed.items() if v[0] <= t.max_age}
        for table in (state.writes, state.reads):
            for reg in list(table):
                left = frozenset(t for t in table[reg] if not done(t))
                if left:
                    table[reg] = left
                else:
                    del table[reg]

    def _advance(self, state: State, cycles: int) -> None:
        def older(t: Token) -> Token:
            return Token(t.producer, t.barrier, t.queue, min(t.age + cycles, AGE_CAP),
                         min(t.max_age + cycles, AGE_CAP), t.read_barrier)
        state.fixed = {r: (age + cycles, p) for r, (age, p) in state.fixed.items() if age + cycles < AGE_CAP}
        for name in ("writes", "reads", "barriers"):
            table = getattr(state, name)
            setattr(state, name, {k: frozenset(older(t) for t in v) for k, v in table.items()})

    # -- the dataflow
    def run(self) -> list[Hazard]:
        if not self.insts:
            return []
        n_blocks = len(self.blocks)
        entry: list[Optional[State]] = [None] * n_blocks
        entry[0] = State()
        work = [0]
        while work:
            j = work.pop()
            state = entry[j].copy()
            blk = self.blocks[j]
            for i in range(blk.start, blk.end):
                self.step(i, state, emit=False)
            for s in blk.successors:
                merged = state if entry[s] is None else _merge(entry[s], state)
                if entry[s] is None or merged.key() != entry[s].key():
                    entry[s] = merged
                    if s not in work:
                        work.append(s)
        for j, blk in enumerate(self.blocks):
            if entry[j] is None:
                continue              # unreachable (the padding after EXIT)
            state = entry[j].copy()
            for i in range(blk.start, blk.end):
                self.step(i, state, emit=True)
            self._check_reuse(blk)
        return self.diagnostics

    def _check_reuse(self, blk: Block) -> None:
        """A `.reuse` on source slot k keeps the register for the next instruction that reads
        slot k; it pays only if that instruction reads the same register, unchanged."""
        for i in range(blk.start, blk.end):
            slots, marked = self.reuse[i]
            for slot in marked:
                reg = slots[slot]
                for j in range(i + 1, blk.end):
                    other = self.reuse[j][0]
                    if slot < len(other) and other[slot] is not None:
                        if other[slot] != reg:
                            self.report("reuse-miss", i, f"{_reg(reg)}.reuse in operand slot {slot} cannot hit: "
                                        f"the next read of that slot is {_reg(other[slot])}", j)
                        break
                    if reg in self.effs[j].writes:
                        self.report("reuse-stale", i, f"{_reg(reg)}.reuse caches a value that "
                                    f"{_describe(self.insts[j])} overwrites before it is reused", j)
                        break
                else:
                    self.report("reuse-miss", i, f"{_reg(reg)}.reuse in operand slot {slot} cannot hit: "
                                "no later instruction in this block reads that slot")


def _reuse_slots(inst: Instruction, eff: Effects, isa) -> tuple[list, list]:
    """The register `inst` reads through each operand-reuse slot (None where it reads none)
    and the slots it marks `.reuse`: the slots its encoding places the operands in (HADD2's
    second source is slot 2 on sm_100: `HFMA2 R0, R0, 1, 1, R7.reuse` then `HADD2 R6, R6,
    R7.reuse` reuse R7), or, where the ISA has no encoding for it, the order of its sources."""
    by_operand = isa.reuse_slots(inst) if isa is not None else None
    if by_operand is None:
        return eff.slots, eff.reuse_slots
    slots: list = [None] * (max(by_operand.values(), default=-1) + 1)
    marked = []
    for index, slot in by_operand.items():
        op = inst.operands[index]
        number = op.values[0] if op.values else None
        if op.kind in ("R", "UR") and isinstance(number, int) and number != ZERO_REGISTER[op.kind]:
            slots[slot] = (op.kind, number)
            if "reuse" in op.flags:
                marked.append(slot)
    return slots, marked


def _reg(reg: Reg) -> str:
    if reg == MEMORY_ORDER:
        return "memory (ordered by the block barrier)"
    return f"{reg[0]}{reg[1]}"


def _describe(inst: Instruction) -> str:
    loc = inst.loc
    where = f"line {loc.line}" if loc is not None and loc.line > 0 else ""
    addr = f"/*{inst.address:04x}*/" if inst.address >= 0 else ""
    return f"{inst.mnemonic} ({', '.join(x for x in (where, addr) if x)})" if (where or addr) else inst.mnemonic


def _wait_hint(t: Token, what: str = "write") -> str:
    barrier = t.barrier if t.barrier is not None else t.read_barrier
    if barrier is None:
        return f"it sets no {what} barrier to wait on"
    return f"wait on barrier {barrier} first"


def _raw_variable_message(reg: Reg, producer: Instruction, t: Token) -> str:
    return f"reads {_reg(reg)} before {_describe(producer)} has written it: {_wait_hint(t)}"


def check(item: Union[Program, Kernel, Iterable], arch: Optional[str] = None) -> list[Hazard]:
    """Hazards in a program, a kernel, or a list of instructions/labels, for `arch`
    ('sm_90'; a Program's own arch if None). Instructions keep their order; branch targets
    are instruction byte addresses or label names."""
    if isinstance(item, Program):
        arch = arch or item.arch
        out: list[Hazard] = []
        for k in item.kernels:
            out += check(k, arch)
        return out
    if arch is None:
        raise ValueError("check() needs an arch for a kernel or instruction list")
    arch = get_arch(arch).name
    insts, labels = instruction_list(item)
    for n, inst in enumerate(insts):
        if inst.address < 0:
            inst.address = 16 * n
    checker = Checker(insts, labels, arch)
    hazards = checker.run() + misaligned_groups(insts)
    hazards.sort(key=lambda h: (h.address, h.kind))
    return hazards


def misaligned_groups(insts: list[Instruction]) -> list[Hazard]:
    """A hazard for every register group (pair, quad: semantics.register_groups) that starts
    at a register its width does not allow."""
    out = []
    for inst in insts:
        for group in register_groups(inst):
            number = inst.operands[group.operand].values[group.value]
            message = misaligned_group_message(inst, group, number) if isinstance(number, int) else None
            if message:
                out.append(Hazard(KINDS["misaligned-group"], message, inst.loc, kind="misaligned-group",
                                  address=inst.address))
    return out


@dataclass
class BarrierRaises:
    """What barrier_raise_warnings found in a kernel or a part of one: the first
    WARNINGS_PER_MESSAGE warnings, as (message, where) pairs in the order of their
    instructions, and how many it found. `a + b`: those of a part followed by the next part's."""
    first: list = field(default_factory=list)
    count: int = 0

    def __add__(self, other: "BarrierRaises") -> "BarrierRaises":
        room = WARNINGS_PER_MESSAGE - len(self.first)
        return BarrierRaises(self.first + other.first[:max(0, room)], self.count + other.count)

    def warnings(self, kernel_name: str) -> list[tuple[str, Optional[Loc]]]:
        """The warnings to give: the first ones, then a line that says how many more."""
        more = self.count - len(self.first)
        if not more:
            return list(self.first)
        return self.first + [(f"{more} more times in kernel '{kernel_name}', an instruction waits on a barrier one "
                              f"cycle after the instruction before it set it", None)]


def barrier_raise_warnings(kernel: Kernel, arch: str) -> BarrierRaises:
    """The hazard `sassas asm` always reports (as a warning; an error with -Werror), because
    it is local and cheap to find and its result is a fault, not a slow kernel: an instruction
    that waits on a barrier the instruction just before it set, one cycle after it issued (a
    barrier is raised `barrier_set_delay` cycles after issue: the wait passes and the register
    is read before the load has written it; on an H100 the stores went to wild addresses).
    The full checker (`sassas check`, `asm --check`) finds the rest."""
    delay = arch_timing(arch).param("barrier_set_delay")
    first: list = []
    count = 0
    # Whether an instruction of a shape ends its thread's path (a wait after it is reached from
    # elsewhere only), by shape: a file of such hazards repeats a few shapes.
    ends_path: dict = {}
    previous: Optional[Instruction] = None
    for item in kernel.body:
        if not isinstance(item, Instruction):
            continue
        prev, previous = previous, item
        control = item.control
        if prev is None or control is None or not control.wait_mask or prev.control is None \
                or max(prev.control.stall, 1) >= delay:
            continue
        # (the barriers the previous instruction set that this one waits on: almost always none,
        # and then its effects, the costly part, are not needed)
        waited = [b for b in sorted({prev.control.write_barrier, prev.control.read_barrier} - {NO_BARRIER})
                  if control.wait_mask >> b & 1]
        if not waited:
            continue
        if prev.predicate is None:
            shape = prev.shape
            ends = ends_path.get(shape)
            if ends is None:
                try:
                    ends = effects(prev).info.branch in ("always", "return", "exit")
                except SemanticsError:
                    ends = False
                ends_path[shape] = ends
            if ends:
                continue
        for b in waited:
            count += 1
            if len(first) < WARNINGS_PER_MESSAGE:
                first.append((f"waits on barrier {b} one cycle after {_describe(prev)} set it; a barrier needs "
                              f"{delay} cycles to be raised: give {prev.mnemonic} a stall of {delay} or more",
                              item.loc))
    return BarrierRaises(first, count)


# ---- calibration --------------------------------------------------------------------------

def calibrate(kernels: Iterable[Kernel], arch: str) -> dict[tuple[str, str], tuple[int, str, str]]:
    """The smallest distance (cycles) at which each (producer, consumer) pair of latency
    classes reads a fixed-latency result in `kernels` (compiler output: hazard-free), with an
    example producer and consumer mnemonic. An upper bound on the true latency; any table
    figure above it makes the checker flag that code."""
    found: dict[tuple[str, str], tuple[int, str, str]] = {}
    for kernel in kernels:
        insts, labels = instruction_list(kernel)
        checker = Checker(insts, labels, arch)
        checker.run()
        for producer, consumer, age, consumer_cls in checker.observed:
            key = (checker.effs[producer].cls, consumer_cls)
            if key not in found or age < found[key][0]:
                found[key] = (age, insts[producer].mnemonic, insts[consumer].mnemonic)
    return found
