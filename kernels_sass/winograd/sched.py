"""Control codes for generated straight-line SASS: an in-order list scheduler.

`Seq.op(text)` appends one instruction and works out its control code from the registers it
reads and writes (sassas.semantics): the stall of the instruction before it is raised until
every fixed-latency result it reads is ready; a variable-latency instruction (S2R, LDC, LDG,
LDS, ...) gets a scoreboard barrier, and the first later instruction that reads its result,
or overwrites its result or a source it reads late, waits on that barrier. Barriers are
handed out from a pool, least recently used first; when all are busy, an instruction shares
one (a wait then waits for both).

The latencies are deliberately conservative (every fixed-latency result >= MIN_FIXED cycles,
predicate -> branch 13): this is for prologues and epilogues, where a cycle more costs little
and a hazard costs a wrong answer. Hot loops set their control codes by hand and are checked
with sassas.hazards.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from sassas.parse import parse_instruction
from sassas.semantics import arch_timing, effects

MIN_FIXED = 8          # cycles from a fixed-latency producer's issue to a consumer's issue
PRED_LATENCY = 14      # predicate producer (ISETP, LOP3/PLOP3 to P, carry out) -> any consumer
                       # (on an H100, LOP3 -> @P LDG 6 cycles apart read a stale predicate)
BARRIER_SET_DELAY = 2  # an instruction may wait on a barrier this many cycles after it is set
BARRIERS = 6


@dataclass
class Op:
    text: str                 # instruction text, guard included, no ';'
    wait: int = 0             # barrier mask waited on
    rb: Optional[int] = None  # read barrier set
    wb: Optional[int] = None  # write barrier set
    y: bool = False
    stall: int = 1
    comment: str = ""
    ffma: Optional[tuple] = None   # (A register, B register) of a main-loop FFMA

    def line(self) -> str:
        if not self.y and (self.stall == 0 or self.stall >= 12):
            self.y = True
        wait = "--" if not self.wait else "".join(str(b) if self.wait >> b & 1 else "-" for b in range(6))
        ctrl = f"{wait}:{'-' if self.rb is None else self.rb}:{'-' if self.wb is None else self.wb}:" \
               f"{'Y' if self.y else '-'}:{self.stall:x}"
        note = f"   # {self.comment}" if self.comment else ""
        return f"{ctrl:<16}{self.text};{note}"


def op_effects(text: str):
    inst = parse_instruction(text + " ;")
    return inst, effects(inst)


@dataclass
class _Pending:
    regs_w: set = field(default_factory=set)     # results not yet written
    regs_r: set = field(default_factory=set)     # sources not yet read
    set_at: int = -100


class Seq:
    """Straight-line code with automatic stalls and scoreboard barriers."""

    def __init__(self, arch: str = "sm_90", barriers=tuple(range(BARRIERS)), yield_all: bool = True,
                 min_fixed: int = MIN_FIXED, pred_latency: int = PRED_LATENCY, spell=None):
        self.min_fixed, self.pred_latency = min_fixed, pred_latency
        self.spell = spell or (lambda text: text)   # the arch's spelling of an instruction (Target.spell)
        self.timing = arch_timing(arch)
        self.ops: list[Op] = []
        self.issue: list[int] = []          # issue cycle of each op
        self.ready: dict = {}               # reg -> (cycle readable by ALU consumers, producer class)
        self.pend: dict[int, _Pending] = {b: _Pending() for b in barriers}
        self.lru = list(barriers)
        self.pool = tuple(barriers)         # barriers an op may take unless it names its own
        self.yield_all = yield_all

    # -- state --------------------------------------------------------------------------
    def _now(self) -> int:
        if not self.ops:
            return 0
        return self.issue[-1] + max(self.ops[-1].stall, 1)

    def _bump(self, cycles: int) -> None:
        """Delay the next instruction by `cycles` (raise the last op's stall, add NOPs past 15)."""
        while cycles > 0:
            if not self.ops:
                return
            last = self.ops[-1]
            room = 15 - last.stall
            if room > 0:
                add = min(room, cycles)
                last.stall += add
                cycles -= add
            if cycles > 0:
                self._append(Op("NOP", y=True, stall=1), [], [])

    def _append(self, op: Op, reads, writes) -> None:
        self.issue.append(self._now())
        self.ops.append(op)

    def _barriers_of(self, reg, which: str) -> int:
        """Mask of the barriers on which `reg` has a pending write ('w') or late read ('r')."""
        m = 0
        for b, p in self.pend.items():
            if reg in (p.regs_w if which == "w" else p.regs_r):
                m |= 1 << b
        return m

    def _take_barrier(self, pool) -> int:
        """A free barrier of `pool`, least recently used first; else the least recently used."""
        cands = [b for b in self.lru if b in pool]
        b = next((b for b in cands if not self.pend[b].regs_w and not self.pend[b].regs_r), cands[0])
        self.lru.remove(b)
        self.lru.append(b)
        return b

    # -- the one entry point ------------------------------------------------------------
    def op(self, text: str, *, y: Optional[bool] = None, comment: str = "", wait: int = 0,
           stall: int = 1, barriers: Optional[tuple] = None, read_only: bool = False) -> Op:
        """Append `text`; a variable-latency op takes a scoreboard barrier from `barriers`
        (default: self.pool), so that long loads can be kept off the barriers that short
        shared-memory work waits on. read_only: a load of memory nothing writes while the kernel
        runs, which later barriers and stores need not wait for."""
        text = self.spell(text)
        inst, eff = op_effects(text)
        cls = eff.cls
        lat = self.timing.latency(cls)
        variable = lat.variable
        reads = list(eff.reads) + list(eff.guard)
        writes = list(eff.writes)
        waits = 0
        for r in reads:
            waits |= self._barriers_of(r, "w")
        for r in writes:
            waits |= self._barriers_of(r, "w") | self._barriers_of(r, "r")
        waits |= wait
        # Earliest issue: fixed-latency producers, and barriers set too recently.
        need = 0
        for r in reads:
            if r in self.ready:
                cyc, pcls = self.ready[r]
                extra = self.pred_latency if r[0] == "P" else self.min_fixed
                need = max(need, cyc + max(extra, self.timing.fixed_latency(pcls, cls)))
        for b in range(BARRIERS):
            if waits >> b & 1 and b in self.pend:
                need = max(need, self.pend[b].set_at + BARRIER_SET_DELAY)
        now = self._now()
        if need > now:
            self._bump(need - now)
        # The wait releases everything pending on those barriers.
        for b in range(BARRIERS):
            if waits >> b & 1 and b in self.pend:
                self.pend[b] = _Pending(set_at=self.pend[b].set_at)
        # Some classes must stall a minimum whatever follows (BAR.SYNC: 6 on sm_90; with 1, an
        # LDS after the barrier read shared memory before the barrier had resolved on an H100).
        min_stall = getattr(self.timing, "min_stall", lambda c: 1)(cls)
        if cls == "sync" or inst.opcode == "BAR":
            min_stall = max(min_stall, 6)
        o = Op(text, wait=waits, y=self.yield_all if y is None else y, stall=max(stall, min_stall),
               comment=comment)
        self._append(o, reads, writes)
        t = self.issue[-1]
        for r in writes:
            self.ready.pop(r, None)
        if variable:
            if writes:
                b = self._take_barrier(barriers or self.pool)
                o.wb = b
                self.pend[b].regs_w |= set(writes)
                late = {r for r in eff.reads if not (read_only and r[0] == "MEM")}
                self.pend[b].regs_r |= late             # sources read late: free once written
                self.pend[b].set_at = t
            elif eff.reads and eff.info.async_read:
                b = self._take_barrier(barriers or self.pool)
                o.rb = b
                self.pend[b].regs_r |= {r for r in eff.reads if not (read_only and r[0] == "MEM")}
                self.pend[b].set_at = t
        else:
            for r in writes:
                self.ready[r] = (t, cls)
        return o

    def wait_all(self) -> int:
        """The mask of every barrier with something pending (for a final wait)."""
        m = 0
        for b, p in self.pend.items():
            if p.regs_w or p.regs_r:
                m |= 1 << b
        return m

    def lines(self) -> list[str]:
        return [o.line() for o in self.ops]


class Recorder:
    """Instructions with Seq.op's arguments, kept to be issued into a Seq later (`replay`), so
    that independent sequences written one after the other can be interleaved (`spread`): the
    Seq then sets the stalls and barriers of the merged order. Attributes set on what `op`
    returns (as `.wb`) are set on the Seq's Op at replay."""

    def __init__(self):
        self.items: list[tuple[str, dict, dict]] = []

    def op(self, text: str, **kw) -> "_Later":
        later: dict = {}
        self.items.append((text, kw, later))
        return _Later(later)


class _Later:
    def __init__(self, attrs: dict):
        object.__setattr__(self, "_attrs", attrs)

    def __setattr__(self, name, value) -> None:
        self._attrs[name] = value


def spread(base: list, extra: list, start: int = 0, end: Optional[int] = None) -> list:
    """base with extra's items spread evenly (in their order) before base's items start..end
    (end: len(base)); the two must not depend on each other there."""
    end = len(base) if end is None else end
    at: dict[int, list] = {}
    for n, item in enumerate(extra):
        at.setdefault(start + n * (end - start) // max(len(extra), 1), []).append(item)
    out = []
    for n, item in enumerate(base):
        out += at.pop(n, [])
        out.append(item)
    for rest in at.values():
        out += rest
    return out


def replay(q: Seq, items) -> None:
    """Issue Recorder items into q."""
    for text, kw, later in items:
        o = q.op(text, **kw)
        for name, value in later.items():
            setattr(o, name, value)


def mark_reuse(body: list[Op], across: bool = True) -> None:
    """Operand reuse flags on a hot loop's FFMAs (ops with `ffma` = (A register, B register)).

    A .reuse on source slot k keeps the register for the next instruction that reads slot k
    (sassas.semantics: memory addresses and the like read none), so with `across` it is set
    where that instruction is an FFMA reading the same register, with no write of it and no
    yield in between (the cache does not survive a switch; nvdisasm does not even print
    .reuse on a yielding instruction); else only where the very next instruction is that FFMA.
    """
    pending: list = [None, None]       # per slot: (FFMA op, register) whose cache may hit
    for op in body:
        if op.y and op.ffma is None:
            pending = [None, None]
            continue
        if op.ffma is None:
            if not across:
                pending = [None, None]
                continue
            _, eff = op_effects(op.text)
            for k in range(2):
                if pending[k] and ((k < len(eff.slots) and eff.slots[k] is not None)
                                   or ("R", pending[k][1]) in eff.writes):
                    pending[k] = None
            continue
        for k, reg in enumerate(op.ffma):
            if pending[k] and pending[k][1] == reg:
                prev = pending[k][0]
                prev.text = prev.text.replace(f"R{reg},", f"R{reg}.reuse,", 1)
            pending[k] = None if op.y else (op, reg)
