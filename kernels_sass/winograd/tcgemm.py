"""The batched GEMM of Winograd F(4x4,3x3) on the tensor cores at FP32 accuracy (3xTF32), in
SASS for sm_90, generated per problem size: the same M[p][e][k][t] = sum_c U[e][c][k] V[e][c][t]
as gemmgen's FFMA kernel, same U, V and M layouts (f4.Plan with `tcgemm.OPTIONS`).

3xTF32: each operand x is split into hi (x with its low 13 mantissa bits cleared: TF32) and
lo = x - hi (exact in FP32; the tensor core keeps its top 11 significant bits), and a product
tile is hi*hi + lo_a*hi_b + hi_a*lo_b: three `HMMA.1688.F32.TF32` (mma.sync m16n8k8) into FP32
accumulators. The dropped lo*lo term and lo's truncation leave about 2^-21 of a product. The
tensor core reads a TF32 operand from the register's top 19 bits (ptxas passes an unmasked
FP32 register as hi: a CUDA-C 3xTF32 kernel's SASS has no AND before its hi*hi HMMAs), so hi
is x itself: a value costs LOP3 (lo = x & 0xffffe000) and FADD (lo = x - lo).

Design (sm_90, our own; TcOptions' defaults):
- 128 threads, a 128 (k) x 64 (t) tile of one position e, 8 channels an iteration; warp w a
  64 x 32 tile at k 64 (w >> 1), t 32 (w & 1): 4 x 4 mma tiles of 16 x 8, 48 HMMA an
  iteration (`cols=128`: 128 x 128 tiles, warps of 64 x 64, 96 HMMA). Lane (g, q) =
  (lane >> 2, lane & 3) holds, as the mma fragments want them, A rows g and g + 8 of m-tile i =
  filters 2 (g + 8 i) + (0, 1) (one LDS.64 a channel) at channels q and q + 4, and B column g
  of n-tile j = tile 8 j + g (an LDS.32 a channel). Its accumulator pairs are 2 consecutive
  tiles of one filter: the epilogue stores them as they are (STG.E.64).
- Shared memory: a stage of A [8][128 + 8] and B [8][cols + 8] floats (Layout): rows of 8 mod
  32 floats make a warp's fragment loads free of bank conflicts (LDS.64: a half-warp's 16
  lanes at 8-byte slots 4 q + g mod 16; LDS.32: 32 lanes at banks 8 q + g). Four stages,
  three copy groups in flight, as gemmgen: each thread copies two 16-byte chunks of U and
  cols / 64 of V an iteration (LDGSTS [R.U32+UR]).
- The loop body is 4 iterations (a stage each, in immediate offsets); C a multiple of 32 x
  parts. An iteration is its HMMAs hmma_gap cycles apart (ptxas spaces independent
  HMMA.1688.F32.TF32 6 cycles apart; the pipe takes one every 6.8 cycles a scheduler, H100);
  the other instructions fill the gaps: the split of the iteration's values during pass 0
  (hi * hi, which needs none of it), then the copies of iteration i + 3, the DEPBAR and BAR,
  the next iteration's fragment loads into the other register set. Pass 1 (lo_a * hi_b) and
  pass 2 (hi_a * lo_b) follow; an accumulator's HMMAs are a pass (16 HMMAs) apart. `.reuse`
  on A between the HMMAs of one m-tile, across the instructions between them, as ptxas does.
- Registers: 64 accumulators, two sets of 24 fragment values, 24 lo values, 7 for addresses
  and the counter: 145 (152 allocated), three blocks an SM (12 warps; `cols=128`: 232, two).
- Measured (H100, `gemm --options tc...`, the 128 x 128 design): the loop is bound by the
  tensor pipe; without the split, the loads and the copies (`skip=all`) it is 3.5% faster.

`TcOptions(split="f16")` (F16, F16Generator, below): the same tile, warps and pipeline with the
values in FP16 halves (three HMMA.16816 a tile, twice the multiply-adds an HMMA): FP32-accurate
at any magnitude through a power-of-two scale, but bound by its operands' traffic, 0.79-0.90x of
this kernel's time on Conv4/Conv5 at best (NOTES.md section 20): a switch of f4tc's ablation.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .cubins import build_text
from .gemmgen import (ADDR_SB, ASYNC_SB, BC, BM, BN, COPY_GAP, DEPBAR_STALL, E, MIN_DIST, P_M, PAD_ROWS, PARAMS, STAGES,
                      U_UR, V_UR, GemmShape, block_ids, block_start, check_gemm, copy_sources)
from .pieces import address, kernel_head, kernel_text, mad
from .plan import Unsupported
from .sched import Op, Seq
from .target import DEFAULT_ARCH, Target, target

THREADS = 128
ROW_PAD = 8                # floats after a channel row of A or B in shared memory: conflict-free fragment loads
UNROLL = STAGES            # iterations a loop body: each stage an immediate offset
TILES_M = 4                # m-tiles (16 filters) of a warp; its n-tiles (8 tiles): cols / 16
HMMA_GAP = 6               # cycles from an HMMA.1688.F32.TF32 to the next of the warp (ptxas)
HI_MASK = 0xffffe000
FRAG_SB = (0, 1)           # the fragment loads of register set 0 and 1
F16_STAGES = STAGES        # the FP16 split's stages and iterations a loop body (8: slower, NOTES.md section 20)


@dataclass(frozen=True)
class TcOptions:
    """The tensor-core GEMM's switches (f4.Plan.options): what f4 needs of a GEMM variant."""
    cols: int = 64                # t columns of a block: 64 (warps of 64 x 32, 152 registers, 3 blocks an
                                  # SM) or 128 (warps of 64 x 64, 232 registers, 2 blocks an SM)
    hmma_gap: int = HMMA_GAP      # cycles from an HMMA to the warp's next (5..15: the split's LOP3 -> FADD
                                  # are hmma_gap cycles apart or more, and alu -> fma takes 5)
    reuse_across: bool = True     # .reuse on A also across the other instructions between two HMMAs of
                                  # one A (as ptxas marks them); False: only where the next instruction is one
    skip: str = ""                # measurement only, the results are wrong: "split" drops the LOP3/FADD,
                                  # "lds" the fragment loads, "copies" the copies, DEPBAR and BAR,
                                  # "all" every instruction of the loop but the HMMAs, counter and branch
    split: str = "tf32"           # "tf32": 3xTF32 (HMMA.1688); "f16": values scaled by a power of two and
                                  # split into FP16 halves, three HMMA.16816 a tile (F16Generator)
    unroll: int = UNROLL
    threads: int = THREADS
    stages: int = STAGES          # shared-memory stages (the FP16 split: also its unroll)

    def tag(self) -> str:
        return "".join(text for cond, text in ((self.split != "tf32", f"-{self.split}"),
            (self.cols != 64, f"-n{self.cols}"), (self.hmma_gap != HMMA_GAP, f"-hg{self.hmma_gap}"),
            (not self.reuse_across, "-nra"), (bool(self.skip), f"-skip{self.skip}")) if cond)

    def registers(self) -> int:
        return (Regs16 if self.split == "f16" else Regs)(self.cols).count()

    def smem_bytes(self) -> int:
        return self.stages * (Layout16 if self.split == "f16" else Layout)(self.cols).stage

    @property
    def channels(self) -> int:
        """Channels an iteration (a stage)."""
        return F16_CH if self.split == "f16" else BC

    def blocks_per_sm(self) -> int:
        regs = -(-self.registers() // 8) * 8
        return min(65536 // (regs * self.threads), (228 << 10) // (0x400 + self.smem_bytes()))


OPTIONS = TcOptions()
F16 = TcOptions(split="f16", stages=F16_STAGES, unroll=F16_STAGES)


class Layout:
    """A stage in shared memory: A [8][128 + ROW_PAD] floats, then B [8][cols + ROW_PAD]. With
    rows of 8 mod 32 floats a warp's fragment loads have no bank conflict (LDS.64: a half-warp's
    16 lanes at 8-byte slots 4 q + g mod 16; LDS.32: 32 lanes at banks 8 q + g)."""

    ROWS, PAD = BC, ROW_PAD             # rows of A and of B a stage, floats past a row's values

    def __init__(self, cols: int):
        self.cols = cols
        self.row_a = (BM + self.PAD) * 4
        self.row_b = (cols + self.PAD) * 4
        self.b_off = self.ROWS * self.row_a
        self.stage = self.ROWS * (self.row_a + self.row_b)


class Regs:
    """Accumulators from R0 (tile (i, j) at 4 (tiles_n i + j)), two fragment sets of 16 A and
    2 tiles_n B values, the lo values, then the shared addresses (A and B reads, the A and B
    copies' stage), the copies' offsets into U and V, the loop counter."""

    def __init__(self, cols: int):
        self.tiles_n = cols // 16
        self.acc_regs = 4 * TILES_M * self.tiles_n
        self.set = 16 + 2 * self.tiles_n
        self.FRAG = self.acc_regs
        self.LO = self.FRAG + 2 * self.set
        self.LDA, self.LDB, self.ST, self.STB, self.UP, self.VP, self.CNT = range(self.LO + self.set, self.LO + self.set + 7)
        if cols == 128:     # A and B rows alike: one stage register for both copies
            self.STB = self.ST
            self.UP, self.VP, self.CNT = self.UP - 1, self.VP - 1, self.CNT - 1

    def acc(self, i: int, j: int) -> int:
        return 4 * (self.tiles_n * i + j)

    def a(self, buf: int, i: int) -> int:
        """m-tile i's A fragment (a0..a3: rows g, g + 8 at channel q, then at q + 4)."""
        return self.FRAG + self.set * buf + 4 * i

    def b(self, buf: int, j: int) -> int:
        """n-tile j's B fragment (b0, b1: channel q, q + 4)."""
        return self.FRAG + self.set * buf + 16 + 2 * j

    def lo_a(self, i: int) -> int:
        return self.LO + 4 * i

    def lo_b(self, j: int) -> int:
        return self.LO + 16 + 2 * j

    def count(self) -> int:
        return self.CNT + 3


def fit(o: TcOptions, t: Target) -> TcOptions:
    if t.arch != "sm_90":
        raise Unsupported(f"the tensor-core GEMM is generated for sm_90, not {t.arch}")
    return o


def grid(g: GemmShape, o: TcOptions = OPTIONS) -> tuple[int, int, int]:
    return (g.T // o.cols, g.K // BM, E * g.parts)


def check_tc_gemm(g: GemmShape, o: TcOptions = OPTIONS) -> None:
    check_gemm(g)
    if o.cols not in (64, 128):
        raise ValueError(f"cols {o.cols}: 64 or 128")
    if o.split not in ("tf32", "f16"):
        raise ValueError(f"split {o.split!r}: 'tf32' or 'f16'")
    per_block = g.C // g.parts
    if per_block % (o.channels * o.unroll):
        raise Unsupported(f"C {g.C}: {per_block} channels a block, not a multiple of {o.channels * o.unroll}")
    if o.split == "tf32" and (o.stages, o.unroll) != (STAGES, UNROLL) or o.split == "f16" and o.unroll != o.stages:
        raise ValueError(f"stages {o.stages}, unroll {o.unroll}: the 3xTF32 GEMM has {STAGES} of each, the FP16 "
                         "split as many iterations a loop body as stages")
    if o.split == "f16" and o.cols != 64:
        raise ValueError("the FP16 split is generated for cols=64 (a 128 x 128 tile on 8 warps, one block an "
                         "SM, measured slower: NOTES.md section 20)")
    if (49 * g.T * 4 + 256) >= 1 << 23:
        raise Unsupported(f"T {g.T}: the output offsets exceed 24 bits")


class Generator:
    WHAT = "3xTF32 GEMM"            # the kernel's first comment line
    PARAMS = PARAMS
    SKIPS = ("", "split", "lds", "copies", "all")     # TcOptions.skip's measurement variants
    REGS, LAYOUT = Regs, Layout                         # the registers' and shared memory's plans

    def __init__(self, g: GemmShape, o: TcOptions = OPTIONS, arch: str = DEFAULT_ARCH):
        check_tc_gemm(g, o)
        if not 5 <= o.hmma_gap <= 15 or o.skip not in self.SKIPS:
            raise ValueError(f"hmma_gap {o.hmma_gap}, skip {o.skip!r}: 5..15, "
                             f"{' '.join(map(repr, self.SKIPS[:-1]))} or {self.SKIPS[-1]!r}")
        self.t = target(arch)
        fit(o, self.t)
        self.g, self.o = g, o
        self.r, self.l = self.REGS(o.cols), self.LAYOUT(o.cols)
        self.tiles_n = self.r.tiles_n
        self.tiles = TILES_M * self.tiles_n            # mma tiles of a warp: HMMAs of a pass
        self.place_gaps()

    def place_gaps(self) -> None:
        # the gaps (after HMMA n of an iteration) of the other instructions: the split (values
        # per gap so that A's lo are in before pass 1, B's before pass 2), then the copies
        # of iteration i + 3, the offsets' moves, the DEPBAR, the BAR, the next fragments
        self.per_gap = BN // self.o.cols
        self.split_gaps = -(-(16 + 2 * self.tiles_n) // self.per_gap) + 1
        self.copy_at = self.split_gaps + 1
        self.advance_at = self.split_gaps + 7
        self.depbar_at = self.split_gaps + 11
        self.bar_at = self.split_gaps + 13
        self.count_at = 3 * self.tiles - 16

    def seq(self) -> Seq:
        return Seq(self.t.arch, spell=self.t.spell)

    # ---- pieces ---------------------------------------------------------------------
    def frag_loads(self, buf: int, stage: int) -> list[str]:
        """The fragments of a stage into register set buf: per channel half s (channels q,
        q + 4) A's 4 pairs (LDS.64) and B's tiles_n values (LDS.32)."""
        r, l = self.r, self.l
        out = []
        for s in range(2):
            out += [f"LDS.64 R{r.a(buf, i) + 2 * s}, [R{r.LDA}+{stage + 4 * s * l.row_a + 64 * i:#x}]"
                    for i in range(TILES_M)]
            out += [f"LDS R{r.b(buf, j) + s}, [R{r.LDB}+{stage + 4 * s * l.row_b + 32 * j:#x}]"
                    for j in range(self.tiles_n)]
        return out

    def copy_ops(self, stage: int) -> list[str]:
        """One iteration's copies into `stage`: chunks c and c + 16 of row tid / 16 of U, and
        of V's cols / 4 chunks a row (c alone with 64 columns)."""
        r, l = self.r, self.l
        out = []
        for reg, ur, st, off, n in ((r.UP, U_UR, r.ST, stage, 2), (r.VP, V_UR, r.STB, stage + l.b_off, self.o.cols // 64)):
            for m in range(n):
                d = m * 256
                dst = f"[R{st}{'+' + hex(off + d) if off + d else ''}]"
                out.append(f"LDGSTS.E.BYPASS.128 {dst}, [R{reg}.U32+UR{ur}{'+' + hex(d) if d else ''}]")
        return out

    def advance_ops(self) -> list[str]:
        g, r = self.g, self.r
        return [f"IADD3 R{r.UP}, R{r.UP}, {BC * g.K * 4:#x}, RZ", f"IADD3 R{r.VP}, R{r.VP}, {BC * g.T * 4:#x}, RZ"]

    @staticmethod
    def place(q: Seq, tid: int, t: list[int]) -> tuple[int, int, int, int]:
        """(g, q, warp >> 1, warp & 1) of thread R<tid> into registers t[0..3] (t[4] scratch)."""
        g, qq, wm, wn, s = t[:5]
        q.op(f"SHF.R.U32.HI R{s}, RZ, 0x5, R{tid}")
        q.op(f"SHF.R.U32.HI R{wm}, RZ, 0x1, R{s}")
        q.op(f"LOP3.LUT R{wn}, R{s}, 0x1, RZ, 0xc0, !PT")
        q.op(f"LOP3.LUT R{s}, R{tid}, 0x1f, RZ, 0xc0, !PT")
        q.op(f"SHF.R.U32.HI R{g}, RZ, 0x2, R{s}")
        q.op(f"LOP3.LUT R{qq}, R{s}, 0x3, RZ, 0xc0, !PT")
        return g, qq, wm, wn

    # ---- prologue -------------------------------------------------------------------
    def prologue(self) -> list[str]:
        g, r, l, cols = self.g, self.r, self.l, self.o.cols
        q = self.seq()
        tid, cx, cy, z, t1, t2, off, crow, chunk, *rest = range(r.LO, r.LO + 20)
        block_start(q, self.t, tid, cx, cy, z)
        gg, qq, wm, wn = self.place(q, tid, rest)
        # the copies: row tid / 16, chunk tid % 16 (and + 16)
        q.op(f"SHF.R.U32.HI R{crow}, RZ, 0x4, R{tid}")
        q.op(f"LOP3.LUT R{chunk}, R{tid}, 0xf, RZ, 0xc0, !PT")
        address(q, r.ST, ((crow, l.row_a), (chunk, 16)), self.t.smem_base, r.CNT)
        if r.STB != r.ST:
            address(q, r.STB, ((crow, l.row_b), (chunk, 16)), self.t.smem_base, r.CNT)
        copy_sources(q, g, r.UP, r.VP, cols, crow, chunk, (cx, cy, z), (t1, t2, off), r.CNT)
        # fragment reads: A at row q, filters 64 wm + 2 g; B at row q, tiles cols / 2 wn + g
        address(q, r.LDA, ((qq, l.row_a), (wm, 256), (gg, 8)), self.t.smem_base, r.CNT)
        address(q, r.LDB, ((qq, l.row_b), (wn, 2 * cols), (gg, 4)), self.t.smem_base + l.b_off, r.CNT)
        q.op(f"MOV R{r.CNT}, {g.iterations // UNROLL - 1:#x}")
        q.op("NOP", wait=q.wait_all(), y=True, stall=2)
        out = q.lines() + self.prefetch(STAGES)
        loads = self.frag_loads(0, 0)
        out += [Op(t, wb=FRAG_SB[0], y=True, stall=2 if n == len(loads) - 1 else 1).line() for n, t in enumerate(loads)]
        return out

    def prefetch(self, stages: int) -> list[str]:
        """The copies of the first stages - 1 iterations, the accumulators zeroed, the wait for
        the first stage and the BAR that publishes it."""
        out = []
        for it in range(stages - 1):
            out += [Op(c, rb=ADDR_SB, y=True, stall=COPY_GAP).line() for c in self.copy_ops(it * self.l.stage)]
            out.append(Op("LDGDEPBAR", wb=ASYNC_SB, y=True, stall=COPY_GAP).line())
            adv = self.advance_ops()
            out.append(Op(adv[0], wait=1 << ADDR_SB, y=True, stall=1).line())
            out.append(Op(adv[1], y=True, stall=MIN_DIST).line())
        out += [Op(f"CS2R R{a}, SRZ", y=True, stall=1).line() for a in range(0, self.r.acc_regs, 2)]
        out.append(Op(f"DEPBAR.LE SB{ASYNC_SB}, 0x{stages - 2:x}", y=True, stall=DEPBAR_STALL).line())
        out.append(Op("NOP", y=True, stall=8).line())
        out.append(Op("BAR.SYNC.DEFER_BLOCKING 0x0", y=True, stall=6).line())
        return out

    # ---- the loop body --------------------------------------------------------------
    def hmma_list(self, buf: int) -> list[tuple[str, int]]:
        """An iteration's HMMAs in order: (text, the A register whose reuse may carry): pass 0
        hi_a hi_b, pass 1 lo_a hi_b, pass 2 hi_a lo_b, each over the warp's tiles."""
        r = self.r
        out = []
        passes = [(lambda i: r.a(buf, i), lambda j: r.b(buf, j)), (r.lo_a, lambda j: r.b(buf, j)),
                  (lambda i: r.a(buf, i), r.lo_b)]
        for fa, fb in passes:
            for i in range(TILES_M):
                for j in range(self.tiles_n):
                    c = r.acc(i, j)
                    out.append((f"HMMA.1688.F32.TF32 R{c}, R{fa(i)}, R{fb(j)}, R{c}", fa(i)))
        return out

    def split_ops(self, buf: int) -> list[list[str]]:
        """Per gap: the LOP3 of per_gap values and the FADD of the gap before's (lo = x - hi),
        A's 16 values, then B's."""
        r = self.r
        n_b = 2 * self.tiles_n
        src = [r.a(buf, 0) + v for v in range(16)] + [r.b(buf, 0) + v for v in range(n_b)]
        lo = [r.LO + v for v in range(16 + n_b)]
        chunks = [range(v, min(v + self.per_gap, len(src))) for v in range(0, len(src), self.per_gap)]
        out = []
        for n in range(len(chunks) + 1):
            ops = []
            if n < len(chunks):
                ops += [f"LOP3.LUT R{lo[v]}, R{src[v]}, {HI_MASK:#x}, RZ, 0xc0, !PT" for v in chunks[n]]
            if n > 0:
                ops += [f"FADD R{lo[v]}, R{src[v]}, -R{lo[v]}" for v in chunks[n - 1]]
            out.append(ops)
        return out

    def loop_body(self) -> list[Op]:
        r, l = self.r, self.l
        body: list[Op] = []
        for it in range(UNROLL):
            buf = it % 2
            gaps: dict[int, list[Op]] = {}

            def at(n: int, text: str, **kw) -> None:
                gaps.setdefault(n, []).append(Op(text, **kw))

            skip = self.o.skip
            if skip not in ("split", "all"):
                for n, ops in enumerate(self.split_ops(buf)):
                    for text in ops:
                        at(n, text)
            if skip not in ("copies", "all"):
                copies = self.copy_ops(((it + STAGES - 1) % STAGES) * l.stage)
                for m, c in enumerate(copies):
                    at(self.copy_at + m, c, rb=ADDR_SB)
                at(self.copy_at + len(copies), "LDGDEPBAR", wb=ASYNC_SB)
                adv = self.advance_ops()
                at(self.advance_at, adv[0], wait=1 << ADDR_SB)
                at(self.advance_at + 1, adv[1])
                at(self.depbar_at, f"DEPBAR.LE SB{ASYNC_SB}, 0x{STAGES - 2:x}", y=True, stall=DEPBAR_STALL)
                at(self.bar_at, "BAR.SYNC.DEFER_BLOCKING 0x0", y=True, stall=6)
            if skip not in ("lds", "all"):
                for m, t in enumerate(self.frag_loads(1 - buf, ((it + 1) % STAGES) * l.stage)):
                    at(self.bar_at + 1 + m, t, wb=FRAG_SB[1 - buf])
            if it == UNROLL - 1:
                at(self.count_at, f"IADD3 R{r.CNT}, P6, R{r.CNT}, -0x1, RZ")
            body += self.interleave(self.hmma_list(buf), gaps, buf)
        body.append(Op("@P6 BRA LOOP", y=True, stall=5))
        return body

    def interleave(self, hmmas: list[tuple[str, int]], gaps: dict[int, list[Op]], buf: int) -> list[Op]:
        """An iteration: its HMMAs (the first waiting for the fragments of set buf), each followed
        by its gap's other instructions; a gap at least hmma_gap cycles; A's .reuse where the
        next HMMA has the same A (across the gap's instructions with reuse_across)."""
        out = []
        for n, (text, a_reg) in enumerate(hmmas):
            h = Op(text, wait=(1 << FRAG_SB[buf]) if n == 0 else 0)
            extra = gaps.get(n, [])
            # cycles to the next HMMA: at least hmma_gap, and what the gap's ops ask for
            h.stall = 1 if extra else self.o.hmma_gap
            used = h.stall
            for k, op in enumerate(extra):
                if k == len(extra) - 1:
                    op.stall = max(op.stall, self.o.hmma_gap - used)
                used += op.stall
            nxt = hmmas[n + 1][1] if n + 1 < len(hmmas) else None
            if (self.o.reuse_across or not extra) and nxt == a_reg:
                h.text = h.text.replace(f"R{a_reg},", f"R{a_reg}.reuse,", 1)
            out.append(h)
            out += extra
        for n in gaps:
            if n >= len(hmmas):
                raise AssertionError(f"gap {n} past the iteration's {len(hmmas)} HMMAs")
        return out

    # ---- epilogue: M, STG.E.64 of accumulator pairs -----------------------------------
    def epilogue(self) -> Seq:
        r = self.r
        q = self.seq()
        q.op(f"DEPBAR.LE SB{ASYNC_SB}, 0x0", wait=0x3f)
        self.store_m(q, range(r.FRAG, r.FRAG + 12), (r.LDA, r.LO))
        return q

    def store_m(self, q: Seq, scratch, pairs: tuple[int, int]) -> None:
        """The accumulators to M, STG.E.64 of pairs, then EXIT: the thread's offset
        4 ((z K + 128 cy + 64 wm + 2 g) T + cols cx + cols / 2 wn + 2 q) in registers from
        `scratch`; pairs: two even register pairs free now (M's address, the parameter)."""
        g, r, cols = self.g, self.r, self.o.cols
        tid, cx, cy, z, off, *rest = scratch
        block_ids(q, tid, cx, cy, z)
        gg, qq, wm, wn = self.place(q, tid, rest)
        mad(q, off, z, g.K, None, r.CNT)
        mad(q, off, cy, BM, off, r.CNT)
        mad(q, off, wm, 64, off, r.CNT)
        mad(q, off, gg, 2, off, r.CNT)
        mad(q, off, off, g.T, None, r.CNT)
        mad(q, off, cx, cols, off, r.CNT)
        mad(q, off, wn, cols // 2, off, r.CNT)
        mad(q, off, qq, 2, off, r.CNT)
        q.op(f"SHF.L.U32 R{off}, R{off}, 0x2, RZ")
        mp, tmp = pairs
        q.op(f"LDC.64 R{tmp}, {self.t.param(P_M)}")
        q.op(f"IADD3 R{mp}, P0, R{off}, R{tmp}, RZ")
        q.op(f"IADD3.X R{mp + 1}, RZ, R{tmp + 1}, RZ, P0, !PT")
        for i in range(TILES_M):
            for h in range(2):
                for j in range(self.tiles_n):
                    o = (16 * i + h) * g.T * 4 + 32 * j
                    q.op(f"STG.E.64{self.t.scope} {self.t.global_address(mp, o)}, R{r.acc(i, j) + 2 * h}")
        q.op("EXIT")

    def text(self, name: Optional[str] = None) -> str:
        g = self.g
        name = name or kernel_name(g, self.o)
        out = kernel_head(name, [
            f"# Batched {self.WHAT} of Winograd F(4x4,3x3) for {self.t.arch}, generated by "
            f"kernels_sass/winograd/tcgemm.py",
            f"# C={g.C} K={g.K} T={g.T} parts={g.parts}; grid {grid(g, self.o)}, {self.o.threads} threads, "
            f"{self.o.smem_bytes()} bytes of dynamic shared memory"], self.PARAMS)
        out += self.prologue()
        out.append("LOOP:")
        out += [op.line() for op in self.loop_body()]
        out += self.epilogue().lines()
        return kernel_text(self.t, out)


# ---- the FP16 split ------------------------------------------------------------------------
# The same tile, warps and pipeline with the tensor pipe's FP16 rate, twice TF32's (mma.sync
# m16n8k16: 2048 multiply-adds an HMMA at the m16n8k8 TF32 HMMA's 6.7 cycles a scheduler, H200,
# `mma-peak`): a value x is scaled by a power of two s (|x s| < 2^15, FP16's range) and split
# into hi = fp16(x s) and lo = fp16(x s - hi), 22 significant bits together; a tile is
# hi*hi + lo*hi + hi*lo, scaled back by 1 / (s_u s_v) in the epilogue. U comes split (the
# filter transform's f4_filter_transform_f16: rows of channel-pair words, hi then lo, its scale
# from max |w|); V's FP32 values are scaled and split here, in the HMMAs' gaps, for the next
# iteration (FMUL, F2FP, HADD2.F32, FADD, F2FP: five stages a gap apart), its scale from the
# input transform's running max |V|. Parameter `scales`: [max |w|, max |V|] as float bits.
F16_CH = 16                # channels an iteration: a k-step of HMMA.16816
F16_PAD = 4                # words after a shared row: rows 2q, 2q + 1, 2q + 8, 2q + 9 of 132 / 68 words
                           # put a warp's fragment loads in distinct banks
RAW_SB = 4                 # the loads of V's FP32 values, converted in the gaps
SCALE_SB = 5               # the scales' load
PARAMS_F16 = PARAMS + (("scales", 8),)
U8_UR, V8_UR = 10, 12      # U's and V's bases 8 rows on: the copies of rows crow + 8 (past LDGSTS's 12-bit offset)
P_SCALES = 0x18
SCALE_GAP = 6              # cycles from a fixed-latency ALU result to its use, in the scales' chain
SCALE_EXP = 268            # s = 2^(SCALE_EXP - 127 - e) for a largest |x| of biased exponent e: |x s| < 2^15
CONVERT_SPACING = 4        # gaps from a conversion stage to the next
def split_scale(bits: int) -> int:
    """The biased exponent a of the FP16 split's scale s = 2^(a - 127) for a largest |x| of float
    bits `bits` (winograd.cu's f4_split_scale, the kernel's scale_ops): |x s| < 2^15, a clamped
    to normal floats (zero, inf and NaN maxima included)."""
    return min(max(SCALE_EXP - (bits >> 23), 1), 254)


def f16_pad_rows(o: "TcOptions") -> int:
    """Rows past GemmShape.operand_rows that the FP16 split's last prefetches read."""
    return (o.stages - 1) * F16_CH - PAD_ROWS


class Layout16(Layout):
    """A stage: A [16][128 + F16_PAD] words (row 2p + h: channel pair p's hi (h 0) or lo (h 1)
    half2 of each filter), then B [16][cols + F16_PAD] floats (channel rows)."""
    ROWS, PAD = F16_CH, F16_PAD


class Regs16:
    """Accumulators from R0 (tile (i, j) at 4 (tiles_n i + j)); two sets of A fragments (per
    m-tile hi a0..a3, then lo); V's FP32 values (4 an n-tile: channels 2q, 2q + 1, 2q + 8,
    2q + 9 of column g); two sets of B fragments (hi b0 b1 per n-tile, then lo); V's scale; the
    shared addresses, the copies' offsets and the counter. V's scale s_v and 1 / (s_u s_v)
    (INV) are kept from the prologue."""

    def __init__(self, cols: int):
        self.tiles_n = cols // 16
        self.acc_regs = 4 * TILES_M * self.tiles_n
        self.A = self.acc_regs
        self.RAW = self.A + 2 * 8 * TILES_M
        self.B = self.RAW + 4 * self.tiles_n
        self.SV = self.B + 2 * 4 * self.tiles_n
        self.INV = self.SV + 1
        self.LDA, self.LDB, self.ST, self.STB, self.UP, self.VP, self.CNT = range(self.SV + 2, self.SV + 9)

    def acc(self, i: int, j: int) -> int:
        return 4 * (self.tiles_n * i + j)

    def a_hi(self, buf: int, i: int) -> int:
        return self.A + 8 * TILES_M * buf + 4 * i

    def a_lo(self, buf: int, i: int) -> int:
        return self.a_hi(buf, i) + 4 * TILES_M

    def raw(self, j: int) -> int:
        return self.RAW + 4 * j

    def b_hi(self, buf: int, j: int) -> int:
        return self.B + 4 * self.tiles_n * buf + 2 * j

    def b_lo(self, buf: int, j: int) -> int:
        return self.b_hi(buf, j) + 2 * self.tiles_n

    def count(self) -> int:
        """The kernel's register count: R0..R<CNT> and the two the ELF's count adds (Regs.count)."""
        return self.CNT + 3


class F16Generator(Generator):
    """The FP16 split's kernel (TcOptions.split "f16"): Generator's tile, warps, copies and
    pipeline; 16 channels an iteration."""
    WHAT = "GEMM in FP16 halves (3 HMMA.16816 a tile)"
    PARAMS = PARAMS_F16
    SKIPS = ("", "convert", "lds", "copies", "all")
    REGS, LAYOUT = Regs16, Layout16

    def __init__(self, g: GemmShape, o: TcOptions = F16, arch: str = DEFAULT_ARCH):
        super().__init__(g, o, arch)
        self.iterations = g.C // g.parts // F16_CH

    def place_gaps(self) -> None:
        # the gaps: copies of iteration i + 3, the offsets' moves, DEPBAR, BAR, V's values of
        # i + 1 (4 loads a gap), A's fragments of i + 1 (2 a gap); V's conversion from a gap
        # after its loads, a pair every other gap
        self.copy_at = 1
        self.advance_at = 9
        self.depbar_at = 13
        self.bar_at = 15
        self.raw_at = 16
        self.a_at = self.raw_at + self.tiles_n
        self.convert_at = self.a_at + 1
        self.count_at = 3 * self.tiles - 16

    # ---- pieces ---------------------------------------------------------------------
    def a_loads(self, buf: int, stage: int) -> list[str]:
        """Per m-tile: hi of pairs q and q + 4 (rows 2q, 2q + 8), lo (rows 2q + 1, 2q + 9): LDS.64
        of filters 2 (g + 8 i) and + 1 (fragment registers a0 a1, then a2 a3)."""
        r, l = self.r, self.l
        out = []
        for i in range(TILES_M):
            for reg, row in ((r.a_hi(buf, i), 0), (r.a_hi(buf, i) + 2, 8), (r.a_lo(buf, i), 1), (r.a_lo(buf, i) + 2, 9)):
                out.append(f"LDS.64 R{reg}, [R{r.LDA}+{stage + row * l.row_a + 64 * i:#x}]")
        return out

    def raw_loads(self, stage: int) -> list[str]:
        """V's values of n-tile j, column g: channels 2q, 2q + 1, 2q + 8, 2q + 9."""
        r, l = self.r, self.l
        return [f"LDS R{r.raw(j) + v}, [R{r.LDB}+{stage + row * l.row_b + 32 * j:#x}]"
                for j in range(self.tiles_n) for v, row in enumerate((0, 1, 8, 9))]

    def convert_stages(self, buf: int) -> list[list[list[str]]]:
        """Per pair (n-tile j, channels 2q + 8h and + 1: fragment b_h), its six stages'
        instructions: scale, hi = fp16x2, lo = (x - f32(hi)) as fp16x2 (lo's register takes
        f32(hi) half by half)."""
        r = self.r
        out = []
        for j in range(self.tiles_n):
            for h in range(2):
                x0, x1 = r.raw(j) + 2 * h, r.raw(j) + 2 * h + 1
                hi, lo = r.b_hi(buf, j) + h, r.b_lo(buf, j) + h
                out.append([[f"FMUL R{x0}, R{x0}, R{r.SV}", f"FMUL R{x1}, R{x1}, R{r.SV}"],
                            [f"F2FP.F16.F32.PACK_AB R{hi}, R{x1}, R{x0}"],
                            [f"HADD2.F32 R{lo}, -RZ, R{hi}.H0_H0"],
                            [f"FADD R{x0}, R{x0}, -R{lo}", f"HADD2.F32 R{lo}, -RZ, R{hi}.H1_H1"],
                            [f"FADD R{x1}, R{x1}, -R{lo}"],
                            [f"F2FP.F16.F32.PACK_AB R{lo}, R{x1}, R{x0}"]])
        return out

    def convert_gaps(self, buf: int) -> dict[int, list[str]]:
        """The conversion by gap from 0: pair p's stage k at CONVERT_SPACING k + p // 2, two
        pairs a gap (a stage's results are used CONVERT_SPACING gaps on: HADD2.F32 and F2FP
        take longer than an HMMA gap of 6 cycles, measured: NaN at 1 gap apart)."""
        gaps: dict[int, list[str]] = {}
        for p, stages in enumerate(self.convert_stages(buf)):
            for k, texts in enumerate(stages):
                gaps.setdefault(CONVERT_SPACING * k + p // 2, []).extend(texts)
        return gaps

    def copy_ops(self, stage: int) -> list[str]:
        """One iteration's copies into `stage`: rows crow and crow + 8 of U (chunks c and c + 16)
        and of V (chunk c)."""
        r, l = self.r, self.l
        out = []
        for reg, urs, st, off, row, chunks in ((r.UP, (U_UR, U8_UR), r.ST, stage, l.row_a, 2),
                                               (r.VP, (V_UR, V8_UR), r.STB, stage + l.b_off, l.row_b, 1)):
            for half in range(2):
                for m in range(chunks):
                    d = off + half * 8 * row + m * 256
                    out.append(f"LDGSTS.E.BYPASS.128 [R{st}{'+' + hex(d) if d else ''}], "
                               f"[R{reg}.U32+UR{urs[half]}{'+' + hex(m * 256) if m else ''}]")
        return out

    def advance_ops(self) -> list[str]:
        g, r = self.g, self.r
        return [f"IADD3 R{r.UP}, R{r.UP}, {F16_CH * g.K * 4:#x}, RZ", f"IADD3 R{r.VP}, R{r.VP}, {F16_CH * g.T * 4:#x}, RZ"]

    def scale_ops(self, su: int, sv: int) -> list[Op]:
        """From max |w| and max |V| (float bits in R<su>, R<sv>): s_v into SV and 1 / (s_u s_v)
        into INV, s = 2^(a - 127) with a = clamp(SCALE_EXP - e, 1, 254) (the filter
        transform's f4_split_scale), 1 / s = 2^(127 - a); the two chains interleaved, each
        result SCALE_GAP cycles before its use."""
        r = self.r
        texts = []
        for reg in (su, sv):
            texts.append([f"SHF.R.U32.HI R{reg}, RZ, 0x17, R{reg}", f"IADD3 R{reg}, -R{reg}, {SCALE_EXP:#x}, RZ",
                          f"VIMNMX R{reg}, R{reg}, 0x1, !PT", f"VIMNMX R{reg}, R{reg}, 0xfe, PT"])
        ops = []
        for a, b in zip(*texts):
            ops += [Op(a, stall=1), Op(b, stall=SCALE_GAP)]
        ops += [Op(f"SHF.L.U32 R{r.SV}, R{sv}, 0x17, RZ", stall=1),
                Op(f"IADD3 R{su}, -R{su}, 0xfe, RZ", stall=1), Op(f"IADD3 R{sv}, -R{sv}, 0xfe, RZ", stall=SCALE_GAP),
                Op(f"SHF.L.U32 R{su}, R{su}, 0x17, RZ", stall=1), Op(f"SHF.L.U32 R{sv}, R{sv}, 0x17, RZ", stall=SCALE_GAP),
                Op(f"FMUL R{r.INV}, R{su}, R{sv}", stall=SCALE_GAP)]
        ops[0].wait = 1 << SCALE_SB
        for op in ops:
            op.y = True
        return ops

    # ---- prologue -------------------------------------------------------------------
    def prologue(self) -> list[str]:
        g, r, l, cols = self.g, self.r, self.l, self.o.cols
        q = self.seq()
        sp, _, tid, cx, cy, z, t1, t2, off, crow, chunk, *rest = range(r.A, r.A + 24)     # sp: an even pair
        block_start(q, self.t, tid, cx, cy, z)
        for ur, base, width in ((U8_UR, U_UR, g.K), (V8_UR, V_UR, g.T)):
            q.op(f"UIADD3 UR{ur}, UP0, UR{base}, {8 * width * 4:#x}, URZ")
            q.op(f"UIADD3.X UR{ur + 1}, URZ, UR{base + 1}, URZ, UP0, !UPT")
        gg, qq, wm, wn = self.place(q, tid, rest)
        q.op(f"LDC.64 R{sp}, {self.t.param(P_SCALES)}")
        q.op(f"SHF.R.U32.HI R{crow}, RZ, 0x4, R{tid}")
        q.op(f"LOP3.LUT R{chunk}, R{tid}, 0xf, RZ, 0xc0, !PT")
        address(q, r.ST, ((crow, l.row_a), (chunk, 16)), self.t.smem_base, r.CNT)
        address(q, r.STB, ((crow, l.row_b), (chunk, 16)), self.t.smem_base, r.CNT)     # (copy_ops adds b_off)
        copy_sources(q, g, r.UP, r.VP, cols, crow, chunk, (cx, cy, z), (t1, t2, off), r.CNT)
        # fragment reads: A at row 2q, filters 64 wm + 2 g; B at row 2q, tiles cols / 2 wn + g
        address(q, r.LDA, ((qq, 2 * l.row_a), (wm, 256), (gg, 8)), self.t.smem_base, r.CNT)
        address(q, r.LDB, ((qq, 2 * l.row_b), (wn, 2 * cols), (gg, 4)), self.t.smem_base + l.b_off, r.CNT)
        q.op(f"MOV R{r.CNT}, {self.iterations // self.o.unroll - 1:#x}")
        q.op("NOP", wait=q.wait_all(), y=True, stall=2)
        out = q.lines()
        # the scales' load in flight behind the first copies
        su, sv = r.A + 4, r.A + 5
        out.append(Op(f"LDG.E.64{self.t.scope} R{su}, {self.t.global_address(sp, 0)}", wb=SCALE_SB, y=True,
                      stall=1).line())
        out += self.prefetch(self.o.stages)
        out += [op.line() for op in self.scale_ops(su, sv)]
        loads = self.raw_loads(0) + self.a_loads(0, 0)
        out += [Op(t, wb=RAW_SB if n < 4 * self.tiles_n else FRAG_SB[0], y=True, stall=1).line()
                for n, t in enumerate(loads)]
        gaps = self.convert_gaps(0)
        for n in range(max(gaps) + 1):
            texts = gaps.get(n, [])
            for k, text in enumerate(texts):
                stall = max(1, self.o.hmma_gap - len(texts) + 1) if k == len(texts) - 1 else 1
                out.append(Op(text, wait=(1 << RAW_SB) if n == 0 and k == 0 else 0, y=True, stall=stall).line())
        return out

    # ---- the loop body --------------------------------------------------------------
    def hmma_list(self, buf: int) -> list[tuple[str, int]]:
        """pass 0 hi_a hi_b, pass 1 lo_a hi_b, pass 2 hi_a lo_b, each over the warp's tiles."""
        r = self.r
        out = []
        for fa, fb in ((r.a_hi, r.b_hi), (r.a_lo, r.b_hi), (r.a_hi, r.b_lo)):
            for i in range(TILES_M):
                for j in range(self.tiles_n):
                    c = r.acc(i, j)
                    out.append((f"HMMA.16816.F32 R{c}, R{fa(buf, i)}, R{fb(buf, j)}, R{c}", fa(buf, i)))
        return out

    def loop_body(self) -> list[Op]:
        r, l = self.r, self.l
        body: list[Op] = []
        skip = self.o.skip
        for it in range(self.o.unroll):
            buf = it % 2
            gaps: dict[int, list[Op]] = {}

            def at(n: int, text: str, **kw) -> None:
                gaps.setdefault(n, []).append(Op(text, **kw))

            if skip not in ("copies", "all"):
                copies = self.copy_ops(((it + self.o.stages - 1) % self.o.stages) * l.stage)
                for m, c in enumerate(copies):
                    at(self.copy_at + m // 2, c, rb=ADDR_SB)
                at(self.copy_at + len(copies) // 2 + 1, "LDGDEPBAR", wb=ASYNC_SB)
                adv = self.advance_ops()
                at(self.advance_at, adv[0], wait=1 << ADDR_SB)
                at(self.advance_at + 1, adv[1])
                at(self.depbar_at, f"DEPBAR.LE SB{ASYNC_SB}, 0x{self.o.stages - 2:x}", y=True, stall=DEPBAR_STALL)
                at(self.bar_at, "BAR.SYNC.DEFER_BLOCKING 0x0", y=True, stall=6)
            nxt = ((it + 1) % self.o.stages) * l.stage
            if skip not in ("lds", "all"):
                for m, t in enumerate(self.raw_loads(nxt)):
                    at(self.raw_at + m // 4, t, wb=RAW_SB)
                for m, t in enumerate(self.a_loads(1 - buf, nxt)):
                    at(self.a_at + m // 2, t, wb=FRAG_SB[1 - buf])
            if skip not in ("convert", "all"):
                for n, texts in self.convert_gaps(1 - buf).items():
                    for k, text in enumerate(texts):
                        at(self.convert_at + n, text, wait=(1 << RAW_SB) if n == 0 and k == 0 else 0)
            if it == self.o.unroll - 1:
                at(self.count_at, f"IADD3 R{r.CNT}, P6, R{r.CNT}, -0x1, RZ")
            body += self.interleave(self.hmma_list(buf), gaps, buf)
        body.append(Op("@P6 BRA LOOP", y=True, stall=5))
        return body

    # ---- epilogue: the scales back, M by STG.E.64 of accumulator pairs ----------------------
    def epilogue(self) -> Seq:
        r = self.r
        q = self.seq()
        q.op(f"DEPBAR.LE SB{ASYNC_SB}, 0x0", wait=0x3f)
        for a in range(r.acc_regs):
            q.op(f"FMUL R{a}, R{a}, R{r.INV}")
        self.store_m(q, range(r.A, r.A + 16), (r.RAW, r.RAW + 2))
        return q



def kernel_name(g: GemmShape, o: TcOptions = OPTIONS) -> str:
    return f"wino4_tcgemm_c{g.C}_k{g.K}_t{g.T}_p{g.parts}{o.tag()}".replace("-", "_")


def generator(g: GemmShape, o: TcOptions = OPTIONS, arch: str = DEFAULT_ARCH) -> "Generator":
    """The generator of o's split (f4.plan asks it whether it takes a shape)."""
    return (F16Generator if o.split == "f16" else Generator)(g, o, arch)


def generate(g: GemmShape, o: TcOptions = OPTIONS, arch: str = DEFAULT_ARCH) -> str:
    return generator(g, o, arch).text()


def build(g: GemmShape, o: TcOptions = OPTIONS, *, arch: str = DEFAULT_ARCH, check_hazards: bool = True,
          cache: bool = True) -> bytes:
    """Assemble the kernel for `g` (cubin bytes), through the on-disk cache (cubins)."""
    return build_text(generate(g, o, arch), kernel_name(g, o), arch=arch, filename="winograd_tcgemm.sass",
                      check_hazards=check_hazards, cache=cache)
