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

Design (sm_90, our own):
- 128 threads, a 128 (k) x 128 (t) tile of one position e, 8 channels an iteration; warp w
  a 64 x 64 tile at k 64 (w >> 1), t 64 (w & 1): 4 x 8 mma tiles of 16 x 8, 96 HMMA an
  iteration. Lane (g, q) = (lane >> 2, lane & 3) holds, as the mma fragments want them,
  A rows g and g + 8 of m-tile i = filters 2 (g + 8 i) + (0, 1) (one LDS.64 a channel), at
  channels q and q + 4; B column g of n-tile j = tile 8 j + g (an LDS.32 a channel). Its
  accumulator pairs are 2 consecutive tiles of one filter: the epilogue stores them as they
  are (STG.E.64).
- Shared memory: a stage of A [8][ROW] and B [8][ROW] floats, rows of 136 floats (ROW_BYTES,
  128 and 4 of padding): the fragment loads of a warp are then without bank conflicts
  (LDS.64: a half-warp's 16 lanes (q, g < 4) at 8-byte slots 4 q + g mod 16; LDS.32: 32
  lanes at banks 8 q + g). Four stages, three copy groups in flight, as gemmgen:
  each thread copies two 16-byte chunks of U and two of V an iteration (LDGSTS [R.U32+UR]).
- The loop body is 4 iterations (a stage each, in immediate offsets); C a multiple of 32 x
  parts. An iteration is 96 HMMA slots of HMMA_GAP cycles (ptxas spaces dependent-free
  HMMA.1688.F32.TF32 6 cycles apart); the other instructions fill the gaps: the split of the
  iteration's 32 values during pass 0 (hi * hi, which needs none of it), then the copies of
  iteration i + 3, the DEPBAR and BAR, the next iteration's 24 fragment loads into the other
  register set. Pass 1 (lo_a * hi_b) and pass 2 (hi_a * lo_b) follow; an accumulator's HMMAs
  are 32 slots apart.
- Registers: 128 accumulators, two sets of 32 fragment values, 32 lo values, 6 for addresses
  and the counter: 232, two blocks an SM (8 warps).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .cubins import build_text
from .gemmgen import (ADDR_SB, ASYNC_SB, BC, BM, BN, COPY_GAP, DEPBAR_STALL, E, MIN_DIST, P_M, P_U, P_V, PARAMS,
                      STAGES, U_UR, V_UR, GemmShape, check_gemm)
from .pieces import address, magic, mad
from .plan import Unsupported
from .sched import Op, Seq
from .target import DEFAULT_ARCH, Target, target

THREADS = 128
ROW_BYTES = 136 * 4        # a channel row of A or B in shared memory (128 floats and 4 of padding)
B_OFF = BC * ROW_BYTES
STAGE_BYTES = 2 * BC * ROW_BYTES
SMEM_BYTES = STAGES * STAGE_BYTES
UNROLL = STAGES            # iterations a loop body: each stage an immediate offset
TILES_M, TILES_N = 4, 8    # mma tiles of a warp
TILES = TILES_M * TILES_N
HMMA_GAP = 6               # cycles from an HMMA.1688.F32.TF32 to the next of the warp (ptxas)
HI_MASK = 0xffffe000
FRAG_SB = (0, 1)           # the fragment loads of register set 0 and 1
# the gaps (after HMMA n of an iteration) of the other instructions
COPY_GAP_AT = 34           # the 4 LDGSTS, one a gap, then LDGDEPBAR
ADVANCE_AT = 40            # the 32-bit offsets into U and V
DEPBAR_AT = 44
BAR_AT = 46                # then the 24 fragment loads, one a gap
COUNT_AT = 80              # the loop counter (last iteration of a body)


class Regs:
    """Accumulators R0..R127 (tile (i, j) at 4 (8 i + j)), two fragment sets of 16 A and 16 B
    values, the lo values, then the addresses (as gemmgen.Regs)."""
    ACC = 0
    FRAG = 128          # set b: A at FRAG + 32 b, B at FRAG + 32 b + 16
    LO = 192            # A's lo, then B's
    LDA, LDB, ST, UP, VP, CNT = range(224, 230)

    @staticmethod
    def acc(i: int, j: int) -> int:
        return 4 * (TILES_N * i + j)

    @classmethod
    def a(cls, buf: int, i: int) -> int:
        """m-tile i's A fragment (a0..a3: rows g, g + 8 at channel q, then at q + 4)."""
        return cls.FRAG + 32 * buf + 4 * i

    @classmethod
    def b(cls, buf: int, j: int) -> int:
        """n-tile j's B fragment (b0, b1: channel q, q + 4)."""
        return cls.FRAG + 32 * buf + 16 + 2 * j

    @staticmethod
    def count() -> int:
        return Regs.CNT + 3


@dataclass(frozen=True)
class TcOptions:
    """The tensor-core GEMM's switches (f4.Plan.options): what f4 needs of a GEMM variant."""
    hmma_gap: int = HMMA_GAP      # cycles from an HMMA to the warp's next (5..15: the split's LOP3 -> FADD
                                  # are hmma_gap cycles apart or more, and alu -> fma takes 5)
    reuse_across: bool = False    # .reuse on A also across the other instructions between two HMMAs of
                                  # one A (as ptxas marks them), not only where the next instruction is one
    skip: str = ""                # measurement only, the results are wrong: "split" drops the LOP3/FADD,
                                  # "lds" the fragment loads, "copies" the copies, DEPBAR and BAR,
                                  # "all" every instruction of the loop but the HMMAs, counter and branch
    unroll: int = UNROLL
    threads: int = THREADS

    def tag(self) -> str:
        return "".join(text for cond, text in (
            (self.hmma_gap != HMMA_GAP, f"-hg{self.hmma_gap}"), (self.reuse_across, "-ra"),
            (bool(self.skip), f"-skip{self.skip}")) if cond)

    def registers(self) -> int:
        return Regs.count()

    def blocks_per_sm(self) -> int:
        regs = -(-self.registers() // 8) * 8
        return min(65536 // (regs * self.threads), (228 << 10) // (0x400 + SMEM_BYTES))


OPTIONS = TcOptions()


def fit(o: TcOptions, t: Target) -> TcOptions:
    if t.arch != "sm_90":
        raise Unsupported(f"the tensor-core GEMM is generated for sm_90, not {t.arch}")
    return o


def check_tc_gemm(g: GemmShape) -> None:
    check_gemm(g)
    if g.iterations % UNROLL:
        raise Unsupported(f"C {g.C}: {g.iterations} iterations a block, not a multiple of {UNROLL}")
    if (49 * g.T * 4 + 256) >= 1 << 23:
        raise Unsupported(f"T {g.T}: the output offsets exceed 24 bits")


class Generator:
    def __init__(self, g: GemmShape, o: TcOptions = OPTIONS, arch: str = DEFAULT_ARCH):
        check_tc_gemm(g)
        if not 5 <= o.hmma_gap <= 15 or o.skip not in ("", "split", "lds", "copies", "all"):
            raise ValueError(f"hmma_gap {o.hmma_gap}, skip {o.skip!r}: 5..15, '' 'split' 'lds' 'copies' or 'all'")
        self.t = target(arch)
        fit(o, self.t)
        self.g, self.o = g, o

    def seq(self) -> Seq:
        return Seq(self.t.arch, spell=self.t.spell)

    # ---- pieces ---------------------------------------------------------------------
    @staticmethod
    def frag_loads(buf: int, stage: int) -> list[str]:
        """The fragments of a stage into register set buf: per channel half s (channels q,
        q + 4) A's 4 pairs (LDS.64) and B's 8 values (LDS.32)."""
        r = Regs
        out = []
        for s in range(2):
            off = stage + 4 * s * ROW_BYTES
            out += [f"LDS.64 R{r.a(buf, i) + 2 * s}, [R{r.LDA}+{off + 64 * i:#x}]" for i in range(TILES_M)]
            out += [f"LDS R{r.b(buf, j) + s}, [R{r.LDB}+{off + 32 * j:#x}]" for j in range(TILES_N)]
        return out

    def copy_ops(self, stage: int) -> list[str]:
        """One iteration's copies into `stage`: chunks c and c + 16 of row tid / 16 of U and V."""
        r = Regs
        out = []
        for reg, ur, off in ((r.UP, U_UR, stage), (r.VP, V_UR, stage + B_OFF)):
            for m in range(2):
                d = m * 256
                dst = f"[R{r.ST}{'+' + hex(off + d) if off + d else ''}]"
                out.append(f"LDGSTS.E.BYPASS.128 {dst}, [R{reg}.U32+UR{ur}{'+' + hex(d) if d else ''}]")
        return out

    def advance_ops(self) -> list[str]:
        g, r = self.g, Regs
        return [f"IADD3 R{r.UP}, R{r.UP}, {BC * g.K * 4:#x}, RZ", f"IADD3 R{r.VP}, R{r.VP}, {BC * g.T * 4:#x}, RZ"]

    def place(self, q: Seq, tid: int, t: list[int]) -> tuple[int, int, int, int]:
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
        g, r = self.g, Regs
        q = self.seq()
        tid, cx, cy, z, t1, t2, off, crow, chunk, *rest = range(r.LO, r.LO + 20)
        q.op(f"S2R R{tid}, SR_TID.X")
        q.op(f"S2R R{cx}, SR_CTAID.X")
        q.op(f"S2R R{cy}, SR_CTAID.Y")
        q.op(f"S2R R{z}, SR_CTAID.Z")
        for text in self.t.desc_load():
            q.op(text)
        q.op(f"ULDC.64 UR{U_UR}, {self.t.param(P_U)}")
        q.op(f"ULDC.64 UR{V_UR}, {self.t.param(P_V)}")
        gg, qq, wm, wn = self.place(q, tid, rest)
        # the copies: row tid / 16, chunk tid % 16 (and + 16)
        q.op(f"SHF.R.U32.HI R{crow}, RZ, 0x4, R{tid}")
        q.op(f"LOP3.LUT R{chunk}, R{tid}, 0xf, RZ, 0xc0, !PT")
        address(q, r.ST, ((crow, ROW_BYTES), (chunk, 16)), self.t.smem_base, r.CNT)
        # this thread's first channel row: e*C + part*(C/parts) + crow, e = z % E, part = z / E
        if g.parts > 1:
            q.op(f"MOV R{t1}, {magic(E):#x}")
            q.op(f"IMAD.HI.U32 R{t2}, R{z}, R{t1}, RZ")
            mad(q, t1, t2, -E, z, r.CNT)
            mad(q, t1, t1, g.C, crow, r.CNT)
            mad(q, t1, t2, g.C // g.parts, t1, r.CNT)
        else:
            mad(q, t1, z, g.C, crow, r.CNT)
        for ptr, width, block in ((r.UP, g.K, cy), (r.VP, g.T, cx)):
            mad(q, off, t1, width, None, r.CNT)
            mad(q, off, block, BM, off, r.CNT)
            mad(q, off, chunk, 4, off, r.CNT)
            q.op(f"SHF.L.U32 R{ptr}, R{off}, 0x2, RZ")
        # fragment reads: A at row q, filters 64 wm + 2 g; B at row q, tiles 64 wn + g
        address(q, r.LDA, ((qq, ROW_BYTES), (wm, 256), (gg, 8)), self.t.smem_base, r.CNT)
        address(q, r.LDB, ((qq, ROW_BYTES), (wn, 256), (gg, 4)), self.t.smem_base + B_OFF, r.CNT)
        q.op(f"MOV R{r.CNT}, {g.iterations // UNROLL - 1:#x}")
        q.op("NOP", wait=q.wait_all(), y=True, stall=2)
        out = q.lines()
        for it in range(STAGES - 1):
            out += [Op(c, rb=ADDR_SB, y=True, stall=COPY_GAP).line() for c in self.copy_ops(it * STAGE_BYTES)]
            out.append(Op("LDGDEPBAR", wb=ASYNC_SB, y=True, stall=COPY_GAP).line())
            adv = self.advance_ops()
            out.append(Op(adv[0], wait=1 << ADDR_SB, y=True, stall=1).line())
            out.append(Op(adv[1], y=True, stall=MIN_DIST).line())
        out += [Op(f"CS2R R{a}, SRZ", y=True, stall=1).line() for a in range(r.ACC, r.ACC + 128, 2)]
        out.append(Op(f"DEPBAR.LE SB{ASYNC_SB}, 0x{STAGES - 2:x}", y=True, stall=DEPBAR_STALL).line())
        out.append(Op("NOP", y=True, stall=8).line())
        out.append(Op("BAR.SYNC.DEFER_BLOCKING 0x0", y=True, stall=6).line())
        loads = self.frag_loads(0, 0)
        out += [Op(t, wb=FRAG_SB[0], y=True, stall=2 if n == len(loads) - 1 else 1).line() for n, t in enumerate(loads)]
        return out

    # ---- the loop body --------------------------------------------------------------
    def hmma_list(self, buf: int) -> list[tuple[str, int]]:
        """An iteration's HMMAs in order: (text, the A register whose reuse may carry)."""
        r = Regs
        out = []
        passes = [(r.a, r.b), (lambda b, i: r.LO + 4 * i, r.b), (r.a, lambda b, j: r.LO + 16 + 2 * j)]
        for fa, fb in passes:
            for i in range(TILES_M):
                for j in range(TILES_N):
                    c = r.acc(i, j)
                    out.append((f"HMMA.1688.F32.TF32 R{c}, R{fa(buf, i)}, R{fb(buf, j)}, R{c}", fa(buf, i)))
        return out

    def split_ops(self, buf: int) -> list[list[str]]:
        """Per gap n (0..32): the LOP3 of value n, the FADD of value n - 1 (lo = x - hi),
        A's 16 values, then B's."""
        r = Regs
        src = [r.a(buf, 0) + v for v in range(16)] + [r.b(buf, 0) + v for v in range(16)]
        out = []
        for n in range(33):
            ops = []
            if n < 32:
                ops.append(f"LOP3.LUT R{r.LO + n}, R{src[n]}, {HI_MASK:#x}, RZ, 0xc0, !PT")
            if n > 0:
                ops.append(f"FADD R{r.LO + n - 1}, R{src[n - 1]}, -R{r.LO + n - 1}")
            out.append(ops)
        return out

    def loop_body(self) -> list[Op]:
        r = Regs
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
                for m, c in enumerate(self.copy_ops(((it + STAGES - 1) % STAGES) * STAGE_BYTES)):
                    at(COPY_GAP_AT + m, c, rb=ADDR_SB)
                at(COPY_GAP_AT + 4, "LDGDEPBAR", wb=ASYNC_SB)
                adv = self.advance_ops()
                at(ADVANCE_AT, adv[0], wait=1 << ADDR_SB)
                at(ADVANCE_AT + 1, adv[1])
                at(DEPBAR_AT, f"DEPBAR.LE SB{ASYNC_SB}, 0x{STAGES - 2:x}", y=True, stall=DEPBAR_STALL)
                at(BAR_AT, "BAR.SYNC.DEFER_BLOCKING 0x0", y=True, stall=6)
            if skip not in ("lds", "all"):
                for m, t in enumerate(self.frag_loads(1 - buf, ((it + 1) % STAGES) * STAGE_BYTES)):
                    at(BAR_AT + 1 + m, t, wb=FRAG_SB[1 - buf])
            if it == UNROLL - 1:
                at(COUNT_AT, f"IADD3 R{r.CNT}, P6, R{r.CNT}, -0x1, RZ")
            hmmas = self.hmma_list(buf)
            for n, (text, a_reg) in enumerate(hmmas):
                h = Op(text, wait=(1 << FRAG_SB[buf]) if n == 0 else 0)
                extra = gaps.get(n, [])
                # cycles to the next HMMA: at least HMMA_GAP, and what the gap's ops ask for
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

    # ---- epilogue: M, 64 STG.E.64 of accumulator pairs --------------------------------
    def epilogue(self) -> Seq:
        g, r = self.g, Regs
        q = self.seq()
        q.op(f"DEPBAR.LE SB{ASYNC_SB}, 0x0", wait=0x3f)
        # 4 * ((z*K + 128 cy + 64 wm + 2 g) * T + 128 cx + 64 wn + 2 q)
        tid, cx, cy, z, off, *rest = range(r.FRAG, r.FRAG + 12)
        q.op(f"S2R R{tid}, SR_TID.X")
        q.op(f"S2R R{cx}, SR_CTAID.X")
        q.op(f"S2R R{cy}, SR_CTAID.Y")
        q.op(f"S2R R{z}, SR_CTAID.Z")
        gg, qq, wm, wn = self.place(q, tid, rest)
        mad(q, off, z, g.K, None, r.CNT)
        mad(q, off, cy, BM, off, r.CNT)
        mad(q, off, wm, 64, off, r.CNT)
        mad(q, off, gg, 2, off, r.CNT)
        mad(q, off, off, g.T, None, r.CNT)
        mad(q, off, cx, BN, off, r.CNT)
        mad(q, off, wn, 64, off, r.CNT)
        mad(q, off, qq, 2, off, r.CNT)
        q.op(f"SHF.L.U32 R{off}, R{off}, 0x2, RZ")
        mp, tmp = r.LDA, r.UP + 1           # even pairs of the address registers
        q.op(f"LDC.64 R{tmp}, {self.t.param(P_M)}")
        q.op(f"IADD3 R{mp}, P0, R{off}, R{tmp}, RZ")
        q.op(f"IADD3.X R{mp + 1}, RZ, R{tmp + 1}, RZ, P0, !PT")
        for i in range(TILES_M):
            for h in range(2):
                for j in range(TILES_N):
                    o = (16 * i + h) * g.T * 4 + 32 * j
                    q.op(f"STG.E.64{self.t.scope} {self.t.global_address(mp, o)}, R{r.acc(i, j) + 2 * h}")
        q.op("EXIT")
        return q

    def text(self, name: Optional[str] = None) -> str:
        g = self.g
        name = name or kernel_name(g, self.o)
        out = [f"# Batched 3xTF32 GEMM of Winograd F(4x4,3x3) for {self.t.arch}, generated by "
               f"kernels_sass/winograd/tcgemm.py",
               f"# C={g.C} K={g.K} T={g.T} parts={g.parts}; grid {g.grid()}, {THREADS} threads, "
               f"{SMEM_BYTES} bytes of dynamic shared memory",
               f".kernel {name}", "<params>"]
        out += [f"{n}, {b}" for n, b in PARAMS]
        out.append("</params>")
        out += [Op("@!PT LDS RZ, [RZ]", y=False, stall=1).line() for _ in range(3)]
        out += self.prologue()
        out.append("LOOP:")
        out += [op.line() for op in self.loop_body()]
        out += self.epilogue().lines()
        out.append("END:")
        out.append("--:-:-:Y:0      BRA END;")
        return "\n".join(self.t.spell_line(line) for line in out) + "\n"


def kernel_name(g: GemmShape, o: TcOptions = OPTIONS) -> str:
    return f"wino4_tcgemm_c{g.C}_k{g.K}_t{g.T}_p{g.parts}{o.tag()}".replace("-", "_")


def generate(g: GemmShape, o: TcOptions = OPTIONS, arch: str = DEFAULT_ARCH) -> str:
    return Generator(g, o, arch).text()


def build(g: GemmShape, o: TcOptions = OPTIONS, *, arch: str = DEFAULT_ARCH, check_hazards: bool = True,
          cache: bool = True) -> bytes:
    """Assemble the kernel for `g` (cubin bytes), through the on-disk cache (cubins)."""
    return build_text(generate(g, o, arch), kernel_name(g, o), arch=arch, filename="winograd_tcgemm.sass",
                      check_hazards=check_hazards, cache=cache)
