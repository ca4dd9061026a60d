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
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .cubins import build_text
from .gemmgen import (ADDR_SB, ASYNC_SB, BC, BM, BN, COPY_GAP, DEPBAR_STALL, E, MIN_DIST, P_M, PARAMS, STAGES,
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
    unroll: int = UNROLL
    threads: int = THREADS

    def tag(self) -> str:
        return "".join(text for cond, text in (
            (self.cols != 64, f"-n{self.cols}"), (self.hmma_gap != HMMA_GAP, f"-hg{self.hmma_gap}"),
            (not self.reuse_across, "-nra"), (bool(self.skip), f"-skip{self.skip}")) if cond)

    def registers(self) -> int:
        return Regs(self.cols).count()

    def smem_bytes(self) -> int:
        return STAGES * Layout(self.cols).stage

    def blocks_per_sm(self) -> int:
        regs = -(-self.registers() // 8) * 8
        return min(65536 // (regs * self.threads), (228 << 10) // (0x400 + self.smem_bytes()))


OPTIONS = TcOptions()


class Layout:
    """A stage in shared memory: A [8][128 + ROW_PAD] floats, then B [8][cols + ROW_PAD]. With
    rows of 8 mod 32 floats a warp's fragment loads have no bank conflict (LDS.64: a half-warp's
    16 lanes at 8-byte slots 4 q + g mod 16; LDS.32: 32 lanes at banks 8 q + g)."""

    def __init__(self, cols: int):
        self.cols = cols
        self.row_a = (BM + ROW_PAD) * 4
        self.row_b = (cols + ROW_PAD) * 4
        self.b_off = BC * self.row_a
        self.stage = BC * (self.row_a + self.row_b)


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
    if g.iterations % UNROLL:
        raise Unsupported(f"C {g.C}: {g.iterations} iterations a block, not a multiple of {UNROLL}")
    if (49 * g.T * 4 + 256) >= 1 << 23:
        raise Unsupported(f"T {g.T}: the output offsets exceed 24 bits")


class Generator:
    def __init__(self, g: GemmShape, o: TcOptions = OPTIONS, arch: str = DEFAULT_ARCH):
        check_tc_gemm(g, o)
        if not 5 <= o.hmma_gap <= 15 or o.skip not in ("", "split", "lds", "copies", "all"):
            raise ValueError(f"hmma_gap {o.hmma_gap}, skip {o.skip!r}: 5..15, '' 'split' 'lds' 'copies' or 'all'")
        self.t = target(arch)
        fit(o, self.t)
        self.g, self.o = g, o
        self.r, self.l = Regs(o.cols), Layout(o.cols)
        self.tiles_n = o.cols // 16
        self.tiles = TILES_M * self.tiles_n            # mma tiles of a warp: HMMAs of a pass
        # the gaps (after HMMA n of an iteration) of the other instructions: the split (values
        # per gap so that A's lo are in before pass 1, B's before pass 2), then the copies
        # of iteration i + 3, the offsets' moves, the DEPBAR, the BAR, the next fragments
        self.per_gap = BN // o.cols
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
        out = q.lines()
        for it in range(STAGES - 1):
            out += [Op(c, rb=ADDR_SB, y=True, stall=COPY_GAP).line() for c in self.copy_ops(it * l.stage)]
            out.append(Op("LDGDEPBAR", wb=ASYNC_SB, y=True, stall=COPY_GAP).line())
            adv = self.advance_ops()
            out.append(Op(adv[0], wait=1 << ADDR_SB, y=True, stall=1).line())
            out.append(Op(adv[1], y=True, stall=MIN_DIST).line())
        out += [Op(f"CS2R R{a}, SRZ", y=True, stall=1).line() for a in range(0, r.acc_regs, 2)]
        out.append(Op(f"DEPBAR.LE SB{ASYNC_SB}, 0x{STAGES - 2:x}", y=True, stall=DEPBAR_STALL).line())
        out.append(Op("NOP", y=True, stall=8).line())
        out.append(Op("BAR.SYNC.DEFER_BLOCKING 0x0", y=True, stall=6).line())
        loads = self.frag_loads(0, 0)
        out += [Op(t, wb=FRAG_SB[0], y=True, stall=2 if n == len(loads) - 1 else 1).line() for n, t in enumerate(loads)]
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
            hmmas = self.hmma_list(buf)
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
                body.append(h)
                body += extra
            for n in gaps:
                if n >= len(hmmas):
                    raise AssertionError(f"gap {n} past the iteration's {len(hmmas)} HMMAs")
        body.append(Op("@P6 BRA LOOP", y=True, stall=5))
        return body

    # ---- epilogue: M, STG.E.64 of accumulator pairs -----------------------------------
    def epilogue(self) -> Seq:
        g, r, cols = self.g, self.r, self.o.cols
        q = self.seq()
        q.op(f"DEPBAR.LE SB{ASYNC_SB}, 0x0", wait=0x3f)
        # 4 * ((z*K + 128 cy + 64 wm + 2 g) * T + cols cx + cols / 2 wn + 2 q)
        tid, cx, cy, z, off, *rest = range(r.FRAG, r.FRAG + 12)
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
        mp, tmp = r.LDA, r.LO               # even pairs, free now
        q.op(f"LDC.64 R{tmp}, {self.t.param(P_M)}")
        q.op(f"IADD3 R{mp}, P0, R{off}, R{tmp}, RZ")
        q.op(f"IADD3.X R{mp + 1}, RZ, R{tmp + 1}, RZ, P0, !PT")
        for i in range(TILES_M):
            for h in range(2):
                for j in range(self.tiles_n):
                    o = (16 * i + h) * g.T * 4 + 32 * j
                    q.op(f"STG.E.64{self.t.scope} {self.t.global_address(mp, o)}, R{r.acc(i, j) + 2 * h}")
        q.op("EXIT")
        return q

    def text(self, name: Optional[str] = None) -> str:
        g = self.g
        name = name or kernel_name(g, self.o)
        out = kernel_head(name, [
            f"# Batched 3xTF32 GEMM of Winograd F(4x4,3x3) for {self.t.arch}, generated by "
            f"kernels_sass/winograd/tcgemm.py",
            f"# C={g.C} K={g.K} T={g.T} parts={g.parts}; grid {grid(g, self.o)}, {THREADS} threads, "
            f"{self.o.smem_bytes()} bytes of dynamic shared memory"], PARAMS)
        out += self.prologue()
        out.append("LOOP:")
        out += [op.line() for op in self.loop_body()]
        out += self.epilogue().lines()
        return kernel_text(self.t, out)


def kernel_name(g: GemmShape, o: TcOptions = OPTIONS) -> str:
    return f"wino4_tcgemm_c{g.C}_k{g.K}_t{g.T}_p{g.parts}{o.tag()}".replace("-", "_")


def generate(g: GemmShape, o: TcOptions = OPTIONS, arch: str = DEFAULT_ARCH) -> str:
    return Generator(g, o, arch).text()


def build(g: GemmShape, o: TcOptions = OPTIONS, *, arch: str = DEFAULT_ARCH, check_hazards: bool = True,
          cache: bool = True) -> bytes:
    """Assemble the kernel for `g` (cubin bytes), through the on-disk cache (cubins)."""
    return build_text(generate(g, o, arch), kernel_name(g, o), arch=arch, filename="winograd_tcgemm.sass",
                      check_hazards=check_hazards, cache=cache)
