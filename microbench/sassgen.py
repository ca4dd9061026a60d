"""Writing benchmark kernels as SASS text (the sassas/TuringAs dialect), from Python.

Every microbenchmark kernel shares one parameter block and one record layout, so that one
host-side runner can launch and read all of them, the SASS kernels and their CUDA-C
references alike:

    kernel(unsigned *out, const unsigned *inp, int iters, int flag, unsigned p0, unsigned p1)

    out[4*gid + 0]  start clock (low 32 bits of SR_CLOCKLO), read after a block barrier
    out[4*gid + 1]  end clock
    out[4*gid + 2]  SM the thread ran on (SR_VIRTUALSMID)
    out[4*gid + 3]  the kernel's result ("sink"): always written by latency chains (the host
                    checks it), written only when `flag` != 0 by throughput kernels (the
                    host passes 0; the store keeps the loaded values live in CUDA-C)

with gid = blockIdx.x * blockDim.x + threadIdx.x. `inp` is benchmark-specific input (shared
memory addresses, pointer-chase images), `iters` the loop count, `p0`/`p1` two raw 32-bit
words (a float's bits or an int).

Control codes are written out by the generators: the assembler checks their syntax, we are
responsible for hazards. The conventions used here (see also DESIGN.md):

- fixed-latency results (IADD3, IMAD, LOP3, MOV, ISETP...) are consumed at least 6 cycles
  later (stall counts, or enough instructions in between); predicates from ISETP at least
  13 cycles before a branch or a predicated store;
- variable-latency instructions (S2R, LDG, LDS, MUFU, LDC) set a write barrier that the
  consumer waits on; a barrier takes two cycles to be raised, so an instruction followed
  directly by a wait on its barrier gets a stall of 2 (Sass.op does this); no register is
  written by two loads in flight; no benchmark overwrites the source registers of a pending
  store, so stores set no read barriers, except the copy loop of the pointer chase;
- CS2R reads of SR_CLOCKLO are fixed latency in ptxas's own code (no barrier; a barrier on a
  fixed-latency instruction is not something ptxas does, so we do not rely on it); their
  results are read only dozens of cycles later.

`sassas check` (sassas.hazards) finds nothing in these kernels except the deliberately
short stalls of the inst.latency chains; the CPU tests hold them to that.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Optional, Sequence

# The parameter block every kernel declares (name, bytes), in this order.
PARAMS: tuple[tuple[str, int], ...] = (
    ("out", 8), ("inp", 8), ("iters", 4), ("flag", 4), ("p0", 4), ("p1", 4))

# The constant-bank slots the generated code reads directly (sm_90).
GLOBAL_DESCRIPTOR = "c[0x0][0x208]"     # 64-bit memory descriptor for LDG/STG
NTID_X = "c[0x0][0x0]"                  # blockDim.x

# On sm_90 the user's shared memory starts 1 KiB into the CTA's shared window: ptxas
# addresses it as 0x400 + (CgaCtaId << 24) (CgaCtaId is 0 without clusters); the first
# 1 KiB is reserved for the system. Earlier archs start at 0.
SHARED_BASE = {"sm_90": 0x400}

RECORD_WORDS = 4


def param_offsets(base: int = 0x210) -> dict[str, int]:
    """Byte address of each parameter in constant bank 0 (naturally aligned, in order)."""
    out, off = {}, 0
    for name, size in PARAMS:
        off = (off + size - 1) // size * size
        out[name] = base + off
        off += size
    return out


def expand_params(text: str, base: int = 0x210) -> str:
    """`name[i]` -> `c[0x0][0x...]` for the parameters of PARAMS."""
    import re
    offs = param_offsets(base)

    def sub(m):
        return f"c[0x0][{offs[m.group(1)] + 4 * int(m.group(2)):#x}]"
    return re.sub(r"\b(" + "|".join(offs) + r")\[(\d+)\]", sub, text)


def shared_base(arch: str) -> int:
    return SHARED_BASE.get(arch, 0)


def control(wait: int = 0, read: Optional[int] = None, write: Optional[int] = None,
            yield_: bool = False, stall: int = 1) -> str:
    """The control prefix `wait:read:write:yield:stall`, checked the way sassas checks it."""
    if not 0 <= wait < 64:
        raise ValueError(f"wait mask {wait:#x} names a barrier above 5")
    for b in (read, write):
        if b is not None and not 0 <= b <= 5:
            raise ValueError(f"scoreboard barrier {b} out of range 0..5")
    if not 0 <= stall <= 15:
        raise ValueError(f"stall {stall} out of range 0..15")
    if not yield_ and (stall == 0 or stall >= 12):
        raise ValueError(f"stall {stall} needs the yield flag")
    return wait_field(wait) + ":" + ("-" if read is None else str(read)) + ":" \
        + ("-" if write is None else str(write)) + ":" + ("Y" if yield_ else "-") + f":{stall:x}"


def wait_field(mask: int) -> str:
    """The wait field: '--' for none; two digits for masks 1..9, which read the same as
    decimal (TuringAs, sassas) and as hex; else the six-position form ('0---4-'), which no
    reading can take for another mask."""
    if not mask:
        return "--"
    if mask < 10:
        return f"{mask:02d}"
    return "".join(str(b) if mask >> b & 1 else "-" for b in range(6))


@dataclass
class Line:
    text: str                 # the instruction without ';' (+ comment), a label 'NAME:', a comment
    kind: str = "inst"        # 'inst' | 'label' | 'comment'
    wait: int = 0
    read: Optional[int] = None
    write: Optional[int] = None
    yield_: bool = False
    stall: int = 1

    @property
    def ctl(self) -> str:
        return control(self.wait, self.read, self.write, self.yield_, self.stall)

    @property
    def sets(self) -> int:
        """Mask of the barriers this instruction sets."""
        return sum(1 << b for b in (self.read, self.write) if b is not None)


@dataclass
class Sass:
    """A growing SASS source: instructions with their control codes, labels and comments.

    Two rules are applied as instructions are added: a barrier needs two cycles to be raised,
    so an instruction whose successor waits on a barrier it sets gets a stall of at least 2;
    and `pending` tracks the barriers set and not yet waited on (straight-line order), for
    waits that should cover exactly what is in flight.
    """
    name: str
    shared: int = 0
    registers: Optional[int] = None
    comment: str = ""
    lines: list[Line] = field(default_factory=list)
    pending: int = 0

    def op(self, text: str, *, wait: int = 0, read: Optional[int] = None,
           write: Optional[int] = None, y: bool = False, stall: int = 1,
           note: str = "") -> "Sass":
        text = text.strip().rstrip(";")
        control(wait, read, write, y, stall)            # validate now, with the caller's values
        prev = self._last_inst()
        if prev is not None and wait & prev.sets and prev.stall < 2:
            prev.stall = 2
        self.lines.append(Line(text + ";" + (f"   # {note}" if note else ""), "inst",
                               wait, read, write, y, stall))
        self.pending &= ~wait
        for b in (read, write):
            if b is not None:
                self.pending |= 1 << b
        return self

    def _last_inst(self) -> Optional[Line]:
        for ln in reversed(self.lines):
            if ln.kind == "inst":
                return ln
            if ln.kind == "label":      # a branch target: handled by the generator's stalls
                return None
        return None

    def label(self, name: str) -> "Sass":
        self.lines.append(Line(f"{name}:", "label"))
        return self

    def note(self, text: str) -> "Sass":
        self.lines.append(Line(f"# {text}", "comment"))
        return self

    def instructions(self, param_base: int = 0x210) -> list[tuple[str, str]]:
        """(control, instruction text) in order, parameters written as nvdisasm prints them
        (`c[0x0][0x218]`), no ';': what the cubin should decode to (branch targets are
        labels here, addresses there)."""
        out = []
        for ln in self.lines:
            if ln.kind == "inst":
                out.append((ln.ctl, expand_params(ln.text.split(";", 1)[0].strip(), param_base)))
        return out

    def text(self) -> str:
        head = []
        if self.comment:
            head += [f"# {c}" if c else "#" for c in self.comment.splitlines()]
        head.append(f".kernel {self.name}")
        if self.shared:
            head.append(f".shared {self.shared}")
        if self.registers:
            head.append(f".registers {self.registers}")
        head.append("")
        head.append("<params>")
        head += [f"{n}, {s}" for n, s in PARAMS]
        head.append("</params>")
        head.append("")
        head.append("# wait:read:write:yield:stall")
        body = []
        for ln in self.lines:
            if ln.kind == "inst":
                body.append(f"{ln.ctl:<16}{_indent(ln.text)}")
            else:
                body.append(ln.text)
        return "\n".join(head + body) + "\n"


def _indent(text: str) -> str:
    # Predicated instructions line up with unpredicated ones: `@P0 ` sticks out to the left.
    if text.startswith("@"):
        pred, rest = text.split(" ", 1)
        return f"{pred:>4} {rest}"
    return "    " + " " + text


def program(kernels: Iterable[Sass]) -> str:
    """Several kernels in one source (one cubin)."""
    return "\n".join(k.text() for k in kernels)


# --------------------------------------------------------------------------------------------
# Pieces every kernel uses
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Regs:
    """Register plan of the common prologue/epilogue."""
    tid: int = 0          # SR_TID.X
    ctaid: int = 1        # SR_CTAID.X
    smid: int = 3         # SR_VIRTUALSMID
    inp: int = 4          # R4:R5 = inp pointer
    counter: int = 6      # loop counter
    start: int = 40       # CS2R pair
    end: int = 42         # CS2R pair
    gid: int = 44
    sink: int = 45
    addr: int = 46        # R46:R47 record address


def prologue(k: Sass, r: Regs, *, flag_predicate: bool = True) -> None:
    """Thread/block/SM ids, the memory descriptor, ntid, iters, the flag predicate P0.

    Barriers 0..2 are set by the S2Rs, barrier 4 by the LDC of the inp pointer (R4:R5);
    later code waits on them (block_start waits on all).
    UR4:UR5 = memory descriptor, UR6 = blockDim.x, UR7 = iters, UR8 = flag.
    """
    k.op(f"S2R R{r.tid}, SR_TID.X", write=0, stall=1)
    k.op(f"S2R R{r.ctaid}, SR_CTAID.X", write=1, stall=1)
    k.op(f"S2R R{r.smid}, SR_VIRTUALSMID", write=2, stall=1)
    k.op(f"ULDC.64 UR4, {GLOBAL_DESCRIPTOR}", stall=1, note="global memory descriptor")
    k.op(f"ULDC UR6, {NTID_X}", stall=1, note="blockDim.x")
    k.op("ULDC UR7, iters[0]", stall=1)
    k.op("ULDC UR8, flag[0]", stall=1)
    k.op(f"LDC.64 R{r.inp}, inp[0]", write=4, stall=1, note="inp pointer (barrier 4)")
    k.op(f"MOV R{r.counter}, RZ", y=True, stall=6)
    if flag_predicate:
        # P0 = (flag != 0): guards the sink store; written here, read > 13 cycles later.
        k.op("ISETP.NE.AND P0, PT, RZ, UR8, PT", y=True, stall=6, note="P0 = flag != 0")


def block_start(k: Sass, r: Regs, also: int = 0) -> None:
    """Wait for the barriers still pending (in text order; `also`: more, e.g. those a
    skipped loop might leave pending), synchronize the block, read the start clock."""
    k.op("BAR.SYNC.DEFER_BLOCKING 0x0", wait=k.pending | also, y=True, stall=6)
    k.op(f"CS2R R{r.start}, SR_CLOCKLO", y=True, stall=6, note="start clock")


def loop_control(r: Regs, label: str, pred: str = "P2") -> tuple[str, str, str]:
    """The three loop-control instructions (counter += 1, compare with UR7, branch back)."""
    return (f"IADD3 R{r.counter}, R{r.counter}, 0x1, RZ",
            f"ISETP.LT.AND {pred}, PT, R{r.counter}, UR7, PT",
            f"@{pred} BRA {label}")


def epilogue(k: Sass, r: Regs, *, end_wait: int = 0, sink: Optional[int] = None,
             sink_always: bool = False, before_store=None, end_clock: bool = True) -> None:
    """Read the end clock (after waiting `end_wait`; not with `end_clock=False`, where the
    kernel has set R{r.end} itself), store the thread's record, exit.

    `sink`: register stored as word 3, under P0 (flag != 0) unless `sink_always`;
    `before_store(k)` emits code between the end clock and the stores (computing the sink).
    """
    if end_clock:
        k.op(f"CS2R R{r.end}, SR_CLOCKLO", wait=end_wait, y=True, stall=6, note="end clock")
    if before_store is not None:
        before_store(k)
    k.op(f"IMAD R{r.gid}, R{r.ctaid}, UR6, R{r.tid}", wait=k.pending & 0x07, y=True, stall=6,
         note="gid = ctaid * ntid + tid")
    k.op(f"LDC.64 R{r.addr}, out[0]", write=5, stall=1, note="out pointer (barrier 5)")
    k.op(f"IMAD.WIDE R{r.addr}, R{r.gid}, 0x10, R{r.addr}", wait=0x20, y=True, stall=6,
         note="&out[4 * gid]")
    k.op(f"STG.E desc[UR4][R{r.addr}.64], R{r.start}", stall=1)
    k.op(f"STG.E desc[UR4][R{r.addr}.64+0x4], R{r.end}", stall=1)
    k.op(f"STG.E desc[UR4][R{r.addr}.64+0x8], R{r.smid}", stall=1)
    if sink is not None:
        pred = "" if sink_always else "@P0 "
        k.op(f"{pred}STG.E desc[UR4][R{r.addr}.64+0xc], R{sink}", stall=1)
    k.op("EXIT", y=True, stall=5)
    k.label("END")
    k.op("BRA END", y=True, stall=0)


def unrolled_loop(k: Sass, r: Regs, unroll: int, body, label: str = "LOOP", tail=None) -> None:
    """The timed loop: `body(k, j)` for j < unroll, the counter's increment after the first
    and its compare after the 17th (far from the branch), `tail(k)` if given, the branch
    back at the end."""
    inc, cmp, bra = loop_control(r, label)
    k.label(label)
    for j in range(unroll):
        body(k, j)
        if j == 0:
            k.op(inc, stall=1)
        elif j == 16:
            k.op(cmp, stall=1)
    if tail is not None:
        tail(k)
    k.op(bra, stall=5)


def load_param(k: Sass, reg: int, param: str, barrier: int = 4, note: str = "") -> None:
    """R{reg} = a 32-bit parameter word (`p0[0]`), by LDC: the consumer waits on `barrier`."""
    k.op(f"LDC R{reg}, {param}", write=barrier, stall=1, note=note)


def xor_fold(k: Sass, dest: int, regs: Sequence[int], wait: int = 0) -> None:
    """dest = XOR of `regs` (LOP3 0x96 = a ^ b ^ c), a dependent chain with safe stalls."""
    regs = list(regs)
    if not regs:
        k.op(f"MOV R{dest}, RZ", y=True, stall=6)
        return
    first = regs[:3] + ["RZ"] * (3 - len(regs[:3]))
    ops = [f"R{x}" if isinstance(x, int) else x for x in first]
    k.op(f"LOP3.LUT R{dest}, {ops[0]}, {ops[1]}, {ops[2]}, 0x96, !PT", wait=wait, y=True, stall=6)
    rest = regs[3:]
    while rest:
        pair, rest = rest[:2], rest[2:]
        ops = [f"R{x}" for x in pair] + ["RZ"] * (2 - len(pair))
        k.op(f"LOP3.LUT R{dest}, R{dest}, {ops[0]}, {ops[1]}, 0x96, !PT", y=True, stall=6)


def fill_registers(k: Sass, first: int, count: int, tid: int = 0) -> None:
    """R{first}..R{first + count - 1} = tid + distinct constants: data that is not zero and
    differs between registers and threads (the values stores write, loads overwrite)."""
    for i in range(count):
        k.op(f"IADD3 R{first + i}, R{tid}, {(0x01010101 * (i + 1)) & 0x7fffffff:#x}, RZ", stall=1)


def rotating_slot(j: int, per_group: int, width: int, first: int = 8, sets: int = 4
                  ) -> tuple[int, int, int]:
    """Where load j of a stream writes: (register, barrier, wait mask). Loads go in groups of
    `per_group`, each `width` registers wide; group g writes register set g % sets and sets
    barrier g % sets, and its first load waits on that barrier, i.e. for group g - sets, the
    last to write the same registers."""
    g, slot = divmod(j, per_group)
    barrier = g % sets
    return first + ((g % sets) * per_group + slot) * width, barrier, (1 << barrier) if slot == 0 else 0
