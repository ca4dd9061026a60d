"""Automatic control codes, and yield strategies.

`schedule_kernel` gives every instruction written without a control code (``control is
None``) one: stall counts from the arch's latency table, scoreboard barriers for
variable-latency results and for late-read sources, waits before the instructions that need
them. Instructions with a written control code keep it; the scheduler only takes into
account what they leave in flight. Instruction order is never changed.

The pass is a forward walk in program order. At a label the state is the merge of the
fall-through and of every forward branch to it; a backward branch (a loop) scheduled here
drains: it waits for every barrier in flight and stalls out pending fixed-latency results,
so the loop head sees nothing from the back edge that the fall-through did not bring.
The result passes :func:`sassas.hazards.check` (the tests verify it).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Optional, Union

from .ast import BARRIER_COUNT, NO_BARRIER, ControlCode, Instruction, Kernel
from .hazards import instruction_list
from .semantics import (ArchTiming, Effects, Reg, arch_timing, async_group_scoreboard, async_read_files, consumer_class,
                        drained_scoreboard, effects, overwrite_class)

MAX_STALL = 15
# Stalls 1..11 are legal without the yield flag; longer ones need it (see sassas.control).
MAX_STALL_WITHOUT_YIELD = 11


@dataclass
class _State:
    fixed: dict[Reg, tuple[int, int]] = field(default_factory=dict)   # reg -> (age, producer)
    writes: dict[Reg, set[int]] = field(default_factory=dict)         # reg -> barriers
    reads: dict[Reg, set[int]] = field(default_factory=dict)          # reg -> barriers
    busy: dict[int, int] = field(default_factory=dict)                # barrier -> cycles since set

    def copy(self) -> "_State":
        return _State(dict(self.fixed), {k: set(v) for k, v in self.writes.items()},
                      {k: set(v) for k, v in self.reads.items()}, dict(self.busy))

    def merge(self, other: "_State") -> None:
        for reg, (age, p) in other.fixed.items():
            if reg not in self.fixed or age < self.fixed[reg][0]:
                self.fixed[reg] = (age, p)
        for mine, theirs in ((self.writes, other.writes), (self.reads, other.reads)):
            for reg, bs in theirs.items():
                mine.setdefault(reg, set()).update(bs)
        for b, age in other.busy.items():
            self.busy[b] = min(age, self.busy.get(b, age))

    def wait(self, b: int) -> None:
        self.busy.pop(b, None)
        for table in (self.writes, self.reads):
            for reg in list(table):
                table[reg].discard(b)
                if not table[reg]:
                    del table[reg]

    def advance(self, cycles: int) -> None:
        self.fixed = {r: (a + cycles, p) for r, (a, p) in self.fixed.items() if a + cycles < 64}
        self.busy = {b: a + cycles for b, a in self.busy.items()}


class _Scheduler:
    def __init__(self, insts: list[Instruction], labels: dict[str, int], timing: ArchTiming):
        self.insts = insts
        self.timing = timing
        self.effs: list[Effects] = [effects(i) for i in insts]
        self.auto = [i.control is None for i in insts]
        self.labels_at = set(labels.values())
        by_address = {inst.address: n for n, inst in enumerate(insts) if inst.address >= 0}
        self.target: dict[int, int] = {}
        for n, eff in enumerate(self.effs):
            t = None
            if eff.target is not None:
                t = by_address.get(eff.target)
            elif eff.info.target is not None and insts[n].operands:
                v = insts[n].operands[eff.info.target].values[:1]
                if v and isinstance(v[0], str):
                    t = labels.get(v[0])
            if t is not None:
                self.target[n] = t
        self.delay = timing.param("barrier_set_delay")
        self.branch_stall = timing.param("branch_stall")

    def _cycles_short(self, state: _State, n: int) -> int:
        """How many more cycles instruction `n` must wait for its fixed-latency inputs."""
        eff = self.effs[n]
        short = 0
        for reg in eff.reads + eff.guard:
            if reg in state.fixed:
                age, p = state.fixed[reg]
                short = max(short, self.timing.fixed_latency(self.effs[p].cls, consumer_class(eff, reg)) - age)
        for reg in eff.writes:
            if reg in state.fixed:
                age, p = state.fixed[reg]
                cls = overwrite_class(eff, self.effs[p].cls, reg)
                if cls is not None:
                    short = max(short, self.timing.fixed_latency(self.effs[p].cls, cls) - age)
        return short

    def _worst_latency(self, cls: str) -> int:
        """The longest a result of `cls` may take to reach any consumer."""
        pairs = [lat.cycles for (p, _), lat in self.timing.pairs.items() if p == cls]
        return max([self.timing.fixed_latency(cls, "alu")] + pairs)

    def _free_barrier(self, state: _State, wait: set[int], avoid: set[int]) -> int:
        for b in range(BARRIER_COUNT):
            if b not in state.busy and b not in avoid:
                return b
        # All in flight: wait for the one set longest ago, then reuse it.
        b = max((b for b in state.busy if b not in avoid), key=lambda b: state.busy[b])
        wait.add(b)
        state.wait(b)
        return b

    def _reads_overwritten_later(self, n: int) -> bool:
        """Does straight-line code after `n` overwrite one of its sources (or leave the block,
        where we cannot see)?"""
        sources = {r for r in self.effs[n].reads if r[0] in async_read_files()}
        for m in range(n + 1, len(self.insts)):
            if m in self.labels_at:
                return True
            if sources & set(self.effs[m].writes):
                return True
            if self.effs[m].info.branch is not None:
                return True
        return False

    def run(self) -> None:
        insts, effs = self.insts, self.effs
        state = _State()
        at_label: dict[int, _State] = {}
        reachable = True          # does control fall into the next instruction?
        previous: Optional[int] = None
        for n, inst in enumerate(insts):
            eff = effs[n]
            if n in self.labels_at or n in at_label:
                merged = at_label.pop(n, None)
                if reachable and merged is not None:
                    state.merge(merged)
                elif merged is not None:
                    state = merged
            # The stall of the instruction before: enough for this one's fixed-latency inputs.
            if previous is not None and self.auto[previous] and reachable:
                extra = self._cycles_short(state, n)
                if extra > 0:
                    prev = insts[previous]
                    stall = min(prev.control.stall + extra, MAX_STALL)
                    state.advance(stall - prev.control.stall)
                    prev.control = replace(prev.control, stall=stall,
                                           yield_=prev.control.yield_ or stall > MAX_STALL_WITHOUT_YIELD)
            ctrl = inst.control
            drained = drained_scoreboard(inst)
            if self.auto[n]:
                wait: set[int] = set()
                for reg in eff.reads + eff.guard:
                    wait |= state.writes.get(reg, set())
                for reg in eff.writes:
                    wait |= state.writes.get(reg, set()) | state.reads.get(reg, set())
                branch = eff.info.branch
                backward = n in self.target and self.target[n] <= n
                # A back edge, a call and a return (control the walk does not follow) drain the barriers.
                if backward or branch in ("return", "call"):
                    wait |= set(state.busy)
                # A barrier set too recently cannot be waited on yet: stall the previous one more.
                if wait and previous is not None and self.auto[previous]:
                    young = min(state.busy.get(b, 99) for b in wait)
                    if young < self.delay:
                        prev = insts[previous]
                        stall = min(prev.control.stall + self.delay - young, MAX_STALL)
                        prev.control = replace(prev.control, stall=stall,
                                               yield_=prev.control.yield_ or stall > MAX_STALL_WITHOUT_YIELD)
                        state.advance(self.delay - young)
                if drained is not None:
                    wait.discard(drained)     # the DEPBAR itself waits for it
                for b in wait:
                    state.wait(b)
                write_barrier = read_barrier = NO_BARRIER
                if self.timing.is_variable(eff.cls) and eff.writes:
                    write_barrier = self._free_barrier(state, wait, set())
                elif inst.opcode == "LDGDEPBAR":
                    # counts its copies on the scoreboard that the DEPBAR after it drains
                    write_barrier = async_group_scoreboard(insts, n)
                # Memory ops read their sources late, and so do variable-latency ops (ptxas gives
                # POPC, MUFU, F2I, SHFL read barriers).
                late_reader = eff.info.async_read or self.timing.is_variable(eff.cls)
                if late_reader and eff.reads and self._reads_overwritten_later(n):
                    read_barrier = self._free_barrier(state, wait, {write_barrier})
                stall = 1
                if branch is not None:
                    # Let pending fixed-latency results land before control moves: the code at
                    # the target (or the loop head) was scheduled without seeing them.
                    pending = [self._worst_latency(effs[p].cls) - age for age, p in state.fixed.values()]
                    stall = max([self.branch_stall] + pending)
                stall = min(stall, MAX_STALL)
                mask = 0
                for b in wait:
                    mask |= 1 << b
                ctrl = ControlCode(stall=stall, yield_=stall > MAX_STALL_WITHOUT_YIELD,
                                   write_barrier=write_barrier, read_barrier=read_barrier,
                                   wait_mask=mask)
                inst.control = ctrl
            else:
                for b in range(BARRIER_COUNT):
                    if ctrl.wait_mask >> b & 1:
                        state.wait(b)
            if drained is not None:
                state.wait(drained)
            # What this instruction leaves in flight.
            for reg in eff.writes:
                state.writes.pop(reg, None)
                state.reads.pop(reg, None)
                state.fixed.pop(reg, None)
            if self.timing.is_variable(eff.cls):
                if ctrl.write_barrier != NO_BARRIER:
                    for reg in eff.writes:
                        state.writes.setdefault(reg, set()).add(ctrl.write_barrier)
            else:
                for reg in eff.writes:
                    state.fixed[reg] = (0, n)
            if ctrl.read_barrier != NO_BARRIER:
                for reg in eff.reads:
                    if reg[0] in async_read_files():
                        state.reads.setdefault(reg, set()).add(ctrl.read_barrier)
            for b in (ctrl.write_barrier, ctrl.read_barrier):
                if b != NO_BARRIER:
                    state.busy[b] = 0
            # Control flow.
            branch = eff.info.branch
            if n in self.target and self.target[n] > n:
                t = self.target[n]
                if t in at_label:
                    at_label[t].merge(state)
                else:
                    at_label[t] = state.copy()
            guard = inst.predicate
            unconditional = guard is None or (guard.values[0] == 7 and not guard.has("!"))
            reachable = not (branch in ("always", "exit", "return", "indirect") and unconditional)
            state.advance(max(ctrl.stall, 1))
            previous = n


def schedule_kernel(kernel: Kernel, arch) -> Kernel:
    """Fill in the control code of every instruction of `kernel` that has none (in place;
    returns the kernel). `kernel` is resolved (sassas.resolve); `arch` an Arch or a name."""
    name = arch if isinstance(arch, str) else arch.name
    insts, labels = instruction_list(kernel)
    if not any(i.control is None for i in insts):
        return kernel
    for n, inst in enumerate(insts):
        if inst.address < 0:
            inst.address = 16 * n
    _Scheduler(insts, labels, arch_timing(name)).run()
    return kernel


# ---- yield strategies ---------------------------------------------------------------------

def apply_yield_strategy(item: Union[Kernel, list], strategy: Union[str, int], *,
                         only: Optional[set[int]] = None) -> None:
    """Set the yield flags of a kernel's instructions.

    strategy: "natural": no forced yields, the flag only where the stall needs it (stalls 0
    and 12..15); N (an int, or "every:N"): also on every N-th instruction, counted from the
    kernel's start. Yan et al. (PPoPP'20) saw N = 7 in cuDNN's and N = 8 in nvcc's code.
    only: instruction indexes to touch (default all; pass the automatically scheduled ones to
    leave hand-written codes alone).
    """
    every: Optional[int] = None
    if isinstance(strategy, int):
        every = strategy
    elif strategy != "natural":
        if not strategy.startswith("every:"):
            raise ValueError(f"unknown yield strategy {strategy!r}: 'natural' or 'every:N'")
        every = int(strategy.split(":", 1)[1])
    if every is not None and every < 1:
        raise ValueError("yield every N instructions needs N >= 1")
    insts, _ = instruction_list(item)
    for n, inst in enumerate(insts):
        if inst.control is None or (only is not None and n not in only):
            continue
        c = inst.control
        required = c.stall == 0 or c.stall > MAX_STALL_WITHOUT_YIELD
        forced = every is not None and (n + 1) % every == 0
        inst.control = replace(c, yield_=required or forced)
