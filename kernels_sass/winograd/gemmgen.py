"""The batched SGEMM of Winograd F(4x4,3x3) in SASS for sm_90, generated per problem size.

    M[p][e][k][t] = sum over c of part p:  U[e][c][k] * V[e][c][t]      (e < 36 positions)

The non-fused F(4x4,3x3) path (kernels_sass.winograd.f4) transforms filters and inputs in
CUDA-C kernels of their own (U, V in global memory), runs this kernel, and transforms M back
(A^T M A). It is the fix proposed for Conv5 in sessions 5 and 6: 36 products per 6x6 input
tile give 16 outputs, 2.25 multiplications an output against F(2x2,3x3)'s 4.

Design (sm_90, our own):
- 256 threads, a 128 (k) x 128 (t) tile of one position e, bc = 8 channels an iteration.
  Thread (ty, tx) = (4 * (warp >> 1) + lane / 8, 8 * (warp & 1) + lane % 8) holds an 8x8
  accumulator tile: rows k = 4ty + 0..3 and 64 + 4ty + 0..3, columns t = 4tx + 0..3 and
  64 + 4tx + 0..3, loaded with 2 + 2 LDS.128 a channel (64 FFMA). A warp's LDS.128 reads 4
  (A) or 8 (B) distinct 16-byte chunks, consecutive: one wavefront each, a quarter of sm_90's
  128 B/clk at full FFMA rate.
- No registers between global and shared memory: each thread copies one 16-byte chunk of U
  and one of V an iteration with LDGSTS.E.BYPASS.128, committed as one group (LDGDEPBAR on
  scoreboard 3). Four stages of 8 KiB, three iterations in flight: iteration i waits with
  `DEPBAR.LE SB3, 0x2` for group i+1 before the BAR that precedes its reads. The stages are
  visited in Gray-code order (0, 1, 3, 2), so every address moves on by an XOR with 0x2000 or
  0x4000, alternately: the loop body is two iterations.
- Two operand register sets (LDS of channel c+1 during channel c's FFMAs, 15 FFMA slots apart:
  their register writes, arriving together, held up the FFMAs' operand reads), accumulators
  and B operands in different register banks (columns swapped in pairs, ACC), A reused along
  a row and B at the zigzag's row turns (.reuse), as in the F(2x2,3x3) kernel. The loop issues
  FFMAs in 87.9% of its cycles (`python -m kernels_sass.winograd loop`, H100 and H200; the
  README says why an LDS-fed loop of this tile cannot reach 90% on sm_90).
- 32 registers of operands and 10 of addresses and counters next to 64 accumulators: 117
  registers as counted, two blocks an SM (2 x 33 KiB of shared memory with the reserved KiB).
  GemmOptions.tile_rows = 16 (128 threads, 16x8 accumulators, 198 registers) is measured
  slower on the H100 (README): two blocks of 4 warps an SM hide too little.
- U and V hold `operand_rows = E*C + 24` rows: the last three iterations' prefetches read the 24
  rows past the end, into stages nobody reads.
- Split-C: `parts` blocks share a tile's channels (grid z = parts * 36), each writes its own
  M[p]; the output transform adds them (f4.plan decides, by a model of the busiest SM).
- The copies 4 cycles apart and the DEPBAR 8 FFMA slots before the BAR: closer, the H100
  read stages before their copies had landed (COPY_GAP, DEPBAR_LEAD).

Control codes of the loop are placed by construction (slots of the FFMA stream); the
prologue and epilogue get theirs from kernels_sass.winograd.sched. Every kernel is checked
with sassas.hazards when built.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .sched import Op, Seq, mark_reuse
from .sassgen import Unsupported, _magic, build_text, mad

ARCH = "sm_90"
BM = BN = 128              # the block's tile: filters (k) x input tiles (t)
BC = 8                     # channels an iteration
E = 36                     # positions of the 6x6 transformed tiles
STAGES = 4
STAGE_BYTES = 0x2000       # A [8][128] floats, then B [8][128]
B_OFF = 0x1000
GRAY = (0x0000, 0x2000, 0x6000, 0x4000)    # stage offsets in the order the iterations use them
UNROLL = 2                 # iterations a loop body at least (GemmOptions.unroll)
PAD_ROWS = (STAGES - 1) * BC
SMEM_BASE = 0x400          # sm_90: user shared memory starts 1 KiB into the CTA window
SMEM_BYTES = STAGES * STAGE_BYTES
BLOCKS_PER_SM = 2          # resident at once: 117 registers x 256 threads (or ~200 x 128 with 16 rows)
MIN_DIST = 8               # slots from a fixed-latency result to its use
PRED_DIST = 14             # ... from a predicate result
ASYNC_SB = 3               # the LDGSTS groups (LDGDEPBAR's count)
ADDR_SB = 2                # the LDGSTS' late reads of their address registers
# Timing of the copy groups, as ptxas spaces them (cp.async): 4 cycles from an LDGSTS to the
# next one and to the LDGDEPBAR that commits it; a DEPBAR.LE yields and stalls 4. On the H100 a
# BAR 2 cycles after `DEPBAR.LE SB3, 0x2` let LDS read a stage before its copies had landed
# (up to 7% of the outputs wrong, in the channels read first): the DEPBAR now comes
# DEPBAR_LEAD FFMA slots before the BAR, as in the F(2x2,3x3) kernel.
COPY_GAP = 4
LDS_AHEAD = 16             # FFMA slots at least from the last LDS.128 of a channel to its first FFMA
DEPBAR_STALL = 4
DEPBAR_LEAD = 8

PARAMS = (("u", 8), ("v", 8), ("m", 8))
P_U, P_V, P_M = 0x210, 0x218, 0x220
DESC = "c[0x0][0x208]"


# ---- registers --------------------------------------------------------------------------
def ACC(i: int, j: int) -> int:
    """Accumulator of row i, column j (0..7); columns swapped in pairs so that an accumulator
    and the B operand it meets sit in different register banks."""
    return 8 * i + (j ^ 1)


class Regs:
    """The register map of a thread tile of `rows` x 8 accumulators: accumulators from R0,
    two operand sets (rows A values, 8 B values each), then addresses and temporaries. For
    8 rows it is R64.. operands, R96.. addresses."""

    def __init__(self, rows: int, stage_xor: bool = False):
        self.rows = rows
        self.acc = 8 * rows
        self.set_size = rows + 8
        base = self.acc + 2 * self.set_size
        self.LDA, self.LDB, self.ST = base, base + 1, base + 2   # shared: A and B reads, the copies' stage
        self.UP, self.VP = base + 4, base + 6                    # 64-bit global addresses of the next chunks
        self.CNT, self.MOFF = base + 8, base + 9                 # loop counter (bodies left), M offset (bytes)
        # unroll 1: the XOR that moves the reads to the next stage (0x2000 and 0x4000 in turn)
        self.XR = base + 10 if stage_xor else None
        self.TMP = base + 10 + 2 * stage_xor                     # prologue temporaries from here on (even:
                                                                 # the epilogue's LDC.64)

    def RA(self, buf: int, i: int) -> int:
        return self.acc + self.set_size * buf + i

    def RB(self, buf: int, j: int) -> int:
        return self.acc + self.set_size * buf + self.rows + j


@dataclass(frozen=True)
class GemmOptions:
    depbar_yield: bool = True     # the loop's DEPBAR yields (and ends the .reuse chains across it)
    wait_all: bool = False        # the loop waits for every copy group (one stage in flight)
    reuse: bool = True            # operand reuse flags
    tile_rows: int = 8            # accumulator rows of a thread (x 8 columns): 8 (256 threads, 4 LDS.128
                                  # a channel for 64 FFMA) or 16 (128 threads, 6 LDS.128 for 128 FFMA)
    unroll: int = 2               # iterations a loop body: 1 (stages by XOR with a register that alternates:
                                  # half the code, one instruction more an iteration), 2 (stages by XOR of
                                  # the address registers with immediates) or
                                  # 4 (each stage an immediate offset: no XOR; C a multiple of 32 x parts)
    depbar_stall: int = DEPBAR_STALL
    lane_map: str = "rows"        # a warp's 4 x 8 thread tiles: "rows" (ty = lane / 8, tx = lane % 8) or
                                  # "2x2" (lanes 4k..4k+3 a 2 x 2 block: every LDS.128 of A and B 2 cycles
                                  # of the shared-memory pipe instead of 2 (A) and 4 (B); microbench
                                  # smem.bandwidth, gemm-*-2x2; measured slower: README)
    lds_gap: int = 15             # FFMA slots between the LDS.128 of the next channel (from slot 2 of a channel;
                                  # after the BAR at most as far as leaves LDS_AHEAD slots to the first use)
    skip: str = ""                # measurement only, the results are wrong: "copies" drops the loop's
                                  # copies, pointer moves, DEPBAR and BAR; "lds" its shared loads; "both"

    @property
    def threads(self) -> int:
        return BM * BN // (8 * self.tile_rows)

    def tag(self) -> str:
        return (("" if self.depbar_yield else "-ndy") + ("-wa" if self.wait_all else "") + ("" if self.reuse else "-nr")
                + ("" if self.tile_rows == 8 else f"-r{self.tile_rows}") + ("" if self.unroll == 2 else f"-u{self.unroll}")
                + ("" if self.depbar_stall == DEPBAR_STALL else f"-ds{self.depbar_stall}")
                + ("" if self.lane_map == "rows" else f"-m{self.lane_map}")
                + ("" if self.lds_gap == 15 else f"-g{self.lds_gap}")
                + (f"-skip{self.skip}" if self.skip else ""))


OPTIONS = GemmOptions()           # what kernels_sass.winograd.f4 runs


@dataclass(frozen=True)
class GemmShape:
    C: int          # channels (rows of a position), a multiple of 16 * parts
    K: int          # filters, a multiple of 128
    T: int          # input tiles x images, a multiple of 128
    parts: int = 1  # split-C

    @property
    def operand_rows(self) -> int:
        """Rows of U and V: E*C and the 24 the last prefetches read."""
        return E * self.C + PAD_ROWS

    @property
    def iterations(self) -> int:      # of one block
        return self.C // self.parts // BC

    def grid(self) -> tuple[int, int, int]:
        return (self.T // BN, self.K // BM, E * self.parts)

    def blocks(self) -> int:
        x, y, z = self.grid()
        return x * y * z


def check_gemm(g: GemmShape) -> None:
    if g.K % BM or g.T % BN or g.K < BM or g.T < BN:
        raise Unsupported(f"K {g.K} and T {g.T} must be multiples of {BM}")
    if g.parts < 1 or g.C % (UNROLL * BC * g.parts) or g.C < UNROLL * BC * g.parts:
        raise Unsupported(f"C {g.C} must be a multiple of {UNROLL * BC} x parts ({g.parts})")
    lim = 1 << 31
    if g.operand_rows * max(g.K, g.T) * 4 >= lim or g.parts * E * g.K * g.T * 4 >= lim:
        raise Unsupported("operands of 2 GiB or more need 64-bit offsets")
    if E * g.parts >= 1 << 16:
        raise Unsupported(f"{g.parts} parts")
    if (35 * g.T * 4 + 256) >= 1 << 23:
        raise Unsupported(f"T {g.T}: the output offsets exceed 24 bits")


def seq() -> Seq:
    return Seq(ARCH)


class Generator:
    def __init__(self, g: GemmShape, o: GemmOptions = GemmOptions()):
        check_gemm(g)
        if o.tile_rows not in (8, 16) or o.unroll not in (1, 2, 4) or o.lane_map not in ("rows", "2x2") \
                or o.skip not in ("", "copies", "lds", "both") \
                or not 1 <= o.lds_gap <= (8 * o.tile_rows - 2 - LDS_AHEAD) // (o.tile_rows // 4 + 1):
            raise ValueError(f"tile_rows {o.tile_rows}, unroll {o.unroll}, lane_map {o.lane_map!r}, skip {o.skip!r}, "
                             f"lds_gap {o.lds_gap}: 8 or 16, 1 2 or 4, 'rows' or '2x2', '' 'copies' 'lds' or 'both', "
                             f"the LDS of a channel within it")
        if g.iterations % o.unroll:
            raise Unsupported(f"C {g.C}: {g.iterations} iterations a block, not a multiple of {o.unroll}")
        self.g = g
        self.o = o
        self.r = Regs(o.tile_rows, stage_xor=o.unroll == 1)
        self.quads = o.tile_rows // 4                  # LDS.128 of A a channel
        self.row_step = BM // self.quads          # k distance of a thread's row quads (64 or 32)
        self.per_row = o.threads // BC            # threads copying one channel row (32 or 16)
        self.slots_ch = 8 * o.tile_rows                # FFMAs a channel

    # ---- pieces -----------------------------------------------------------------------
    def stage(self, it: int) -> int:
        """The immediate offset of iteration it's stage (unroll 4; else the registers hold it)."""
        return (it % STAGES) * STAGE_BYTES if self.o.unroll == STAGES else 0

    def lds_ops(self, ch: int, buf: int, stage: int = 0) -> list[str]:
        """The operands of channel ch (0..7) of the current stage into register set buf: A's
        row quads and B's two column quads, interleaved."""
        r = self.r
        a = [f"LDS.128 R{r.RA(buf, 4 * q)}, [R{r.LDA}+{stage + ch * 512 + q * self.row_step * 4:#x}]"
             for q in range(self.quads)]
        b = [f"LDS.128 R{r.RB(buf, 4 * h)}, [R{r.LDB}+{stage + ch * 512 + h * 256:#x}]" for h in range(2)]
        out = []
        for n in range(max(len(a), len(b))):
            out += a[n:n + 1] + b[n:n + 1]
        return out

    def copy_ops(self, stage: int = 0) -> list[str]:
        """One iteration's chunks of U and V into the stage R_ST (+ stage) points at: a thread
        copies chunks p and p + per_row of its row (256 bytes apart)."""
        r = self.r
        out = []
        for reg, off in ((r.UP, stage), (r.VP, stage + B_OFF)):
            for m in range(32 // self.per_row):
                d = m * self.per_row * 16
                out.append(f"LDGSTS.E.BYPASS.128 [R{r.ST}{'+' + hex(off + d) if off + d else ''}], "
                           f"desc[UR4][R{reg}.64{'+' + hex(d) if d else ''}]")
        return out

    def advance_ops(self) -> list[tuple[str, int]]:
        """(text, slots after the previous one): U and V pointers to the next 8 channels."""
        g, r = self.g, self.r
        return [(f"IADD3 R{r.UP}, P0, R{r.UP}, {BC * g.K * 4:#x}, RZ", 0),
                (f"IADD3 R{r.VP}, P1, R{r.VP}, {BC * g.T * 4:#x}, RZ", 1),
                (f"IADD3.X R{r.UP + 1}, RZ, R{r.UP + 1}, RZ, P0, !PT", PRED_DIST),
                (f"IADD3.X R{r.VP + 1}, RZ, R{r.VP + 1}, RZ, P1, !PT", 1)]

    @staticmethod
    def xor_op(reg: int, value: int) -> str:
        return f"LOP3.LUT R{reg}, R{reg}, {value:#x}, RZ, 0x3c, !PT"

    @staticmethod
    def read_xor(it: int) -> int:
        """The XOR that moves the reads from iteration it's stage to the next one's."""
        return GRAY[it % 4] ^ GRAY[(it + 1) % 4]

    @staticmethod
    def write_xor(it: int) -> int:
        """... the copies from iteration it + 3's stage to it + 4's."""
        return GRAY[(it + 3) % 4] ^ GRAY[it % 4]

    # ---- prologue ---------------------------------------------------------------------
    def prologue(self) -> list[str]:
        g, r = self.g, self.r
        R_ST, R_UP, R_VP, R_LDA, R_LDB, R_CNT, R_MOFF = r.ST, r.UP, r.VP, r.LDA, r.LDB, r.CNT, r.MOFF
        q = seq()
        tid, lane, warp, ty, tx, z, t1, t2, off = range(r.TMP, r.TMP + 9)
        R_u, R_v, cx, cy = R_UP, R_VP, R_LDA, R_LDB      # (free until set below)
        q.op(f"S2R R{tid}, SR_TID.X")
        q.op(f"S2R R{cx}, SR_CTAID.X")
        q.op(f"S2R R{cy}, SR_CTAID.Y")
        q.op(f"S2R R{z}, SR_CTAID.Z")
        q.op(f"ULDC.64 UR4, {DESC}")
        q.op(f"LDC.64 R{R_u}, c[0x0][{P_U:#x}]")
        q.op(f"LDC.64 R{R_v}, c[0x0][{P_V:#x}]")
        q.op(f"LOP3.LUT R{lane}, R{tid}, 0x1f, RZ, 0xc0, !PT")
        q.op(f"SHF.R.U32.HI R{warp}, RZ, 0x5, R{tid}")
        # M offset (bytes), M[z][k][t] with z = part * E + e:
        #   4 * ((z*K + 128*cy + 4*ty) * T + 128*cx + 4*tx)
        # (ty, tx) = (4 * (warp >> 1), 8 * (warp & 1)) + the lane's place in the warp's 4 x 8
        q.op(f"SHF.R.U32.HI R{t1}, RZ, 0x1, R{warp}")
        if self.o.lane_map == "2x2":
            # lanes 4k..4k+3 a 2 x 2 block: ty += lane bits 2,1; tx += lane bits 4,3,0
            q.op(f"SHF.R.U32.HI R{t2}, RZ, 0x1, R{lane}")
            q.op(f"LOP3.LUT R{t2}, R{t2}, 0x3, RZ, 0xc0, !PT")
            mad(q, ty, t1, 4, t2, R_CNT)
            q.op(f"SHF.R.U32.HI R{t2}, RZ, 0x2, R{lane}")
            q.op(f"LOP3.LUT R{off}, R{lane}, 0x1, RZ, 0xc0, !PT")
            q.op(f"LOP3.LUT R{t2}, R{t2}, 0x6, R{off}, 0xea, !PT")     # (a & b) | c
        else:
            # rows: ty += lane / 8, tx += lane % 8
            q.op(f"SHF.R.U32.HI R{t2}, RZ, 0x3, R{lane}")
            mad(q, ty, t1, 4, t2, R_CNT)
            q.op(f"LOP3.LUT R{t2}, R{lane}, 0x7, RZ, 0xc0, !PT")
        q.op(f"LOP3.LUT R{t1}, R{warp}, 0x1, RZ, 0xc0, !PT")
        mad(q, tx, t1, 8, t2, R_CNT)
        mad(q, off, z, g.K, None, R_CNT)
        mad(q, off, cy, BM, off, R_CNT)
        mad(q, off, ty, 4, off, R_CNT)
        mad(q, off, off, g.T, None, R_CNT)
        mad(q, off, cx, BN, off, R_CNT)
        mad(q, off, tx, 4, off, R_CNT)
        q.op(f"SHF.L.U32 R{R_MOFF}, R{off}, 0x2, RZ")
        # the shared addresses: reads at 16*ty (A) and 16*tx (B) of stage 0; copies at row
        # tid / per_row, chunk tid % per_row of stage GRAY[0] (with 256 threads: warp, lane)
        crow, chunk = warp, lane
        if self.per_row != 32:
            crow, chunk = r.TMP + 9, r.TMP + 10
            q.op(f"SHF.R.U32.HI R{crow}, RZ, {self.per_row.bit_length() - 1:#x}, R{tid}")
            q.op(f"LOP3.LUT R{chunk}, R{tid}, {self.per_row - 1:#x}, RZ, 0xc0, !PT")
        mad(q, R_ST, crow, 512, None, R_CNT)
        mad(q, R_ST, chunk, 16, R_ST, R_CNT)
        q.op(f"IADD3 R{R_ST}, R{R_ST}, {SMEM_BASE:#x}, RZ")
        # this thread's first channel row: e*C + part*(C/parts) + crow, e = z % E, part = z / E
        if g.parts > 1:
            q.op(f"MOV R{t1}, {_magic(E):#x}")
            q.op(f"IMAD.HI.U32 R{t2}, R{z}, R{t1}, RZ")           # part
            mad(q, t1, t2, -E, z, R_CNT)                         # e
            mad(q, t1, t1, g.C, crow, R_CNT)
            mad(q, t1, t2, g.C // g.parts, t1, R_CNT)
        else:
            mad(q, t1, z, g.C, crow, R_CNT)
        # U address: u + 4 * (row*K + 128*cy + 4*chunk); V: v + 4 * (row*T + 128*cx + 4*chunk)
        for ptr, base, width, block, carry in ((R_UP, R_u, g.K, cy, 0), (R_VP, R_v, g.T, cx, 1)):
            mad(q, off, t1, width, None, R_CNT)
            mad(q, off, block, BM, off, R_CNT)
            mad(q, off, chunk, 4, off, R_CNT)
            q.op(f"SHF.L.U32 R{off}, R{off}, 0x2, RZ")
            q.op(f"IADD3 R{ptr}, P{carry}, R{off}, R{base}, RZ")
            q.op(f"IADD3.X R{ptr + 1}, RZ, R{base + 1}, RZ, P{carry}, !PT")
        mad(q, R_LDA, ty, 16, None, R_CNT)
        q.op(f"IADD3 R{R_LDA}, R{R_LDA}, {SMEM_BASE:#x}, RZ")
        mad(q, R_LDB, tx, 16, None, R_CNT)
        q.op(f"IADD3 R{R_LDB}, R{R_LDB}, {SMEM_BASE + B_OFF:#x}, RZ")
        q.op(f"MOV R{R_CNT}, {g.iterations // self.o.unroll:#x}")
        q.op("NOP", wait=q.wait_all(), y=True, stall=2)
        out = q.lines()
        # the first three iterations' copies, one group each, on a clean scoreboard
        for it in range(STAGES - 1):
            out += [Op(c, rb=ADDR_SB, y=True, stall=COPY_GAP).line() for c in self.copy_ops(self.stage(it))]
            out.append(Op("LDGDEPBAR", wb=ASYNC_SB, y=True, stall=COPY_GAP).line())
            adv = self.advance_ops()
            for n, (text, _) in enumerate(adv):
                stall = PRED_DIST if n == 1 else MIN_DIST if n == len(adv) - 1 else 1
                out.append(Op(text, wait=(1 << ADDR_SB) if n == 0 else 0, y=True, stall=stall).line())
            if self.o.unroll < STAGES:
                out.append(Op(self.xor_op(R_ST, GRAY[it] ^ GRAY[it + 1]), y=True, stall=MIN_DIST).line())
        if r.XR is not None:
            out.append(Op(f"MOV R{r.XR}, {self.read_xor(0):#x}", y=True, stall=MIN_DIST).line())
        # the accumulators, while the copies are in flight
        out += [Op(f"MOV R{a}, RZ", y=True, stall=1).line() for a in range(r.acc)]
        # group 0 landed (two may stay in flight), every thread's copies are visible; the
        # first channel's operands
        out.append(Op(f"DEPBAR.LE SB{ASYNC_SB}, 0x{STAGES - 2:x}", y=True, stall=self.o.depbar_stall).line())
        out.append(Op("NOP", y=True, stall=DEPBAR_LEAD).line())
        out.append(Op("BAR.SYNC.DEFER_BLOCKING 0x0", y=True, stall=6).line())
        for t in self.lds_ops(0, 0):
            out.append(Op(t, wb=0, y=True, stall=2).line())
        return out

    # ---- the loop body: UNROLL iterations of BC channels, slots_ch FFMA slots each ------
    def loop_body(self) -> list[Op]:
        r, ch_slots = self.r, self.slots_ch
        ins: dict[int, list[Op]] = {}

        def at(slot: int, text: str, **kw) -> Op:
            op = Op(text, **kw)
            ins.setdefault(slot, []).append(op)
            return op

        xor = self.o.unroll == 2
        xreg = r.XR is not None
        for it in range(self.o.unroll):
            base = it * BC * ch_slots
            # the copies of iteration i + 3 into the stage iteration i - 1 read (every warp's
            # reads of it ended before the last BAR), then the pointers and the stage move on
            copies = self.copy_ops(self.stage(it + STAGES - 1))
            for m, c in enumerate(copies):
                at(base + 1 + m * COPY_GAP, c, rb=ADDR_SB)
            at(base + 1 + len(copies) * COPY_GAP, "LDGDEPBAR", wb=ASYNC_SB)
            slot = base + 24
            for n, (text, gap) in enumerate(self.advance_ops()):
                slot += gap
                at(slot, text, wait=(1 << ADDR_SB) if n == 0 else 0)
            if xor:
                at(base + 26, self.xor_op(r.ST, self.write_xor(it)))
            if xreg:     # the copies' XOR is the other one of the pair: XR ^ 0x6000
                at(base + 26, f"LOP3.LUT R{r.ST}, R{r.ST}, {self.read_xor(0) ^ self.read_xor(1):#x}, R{r.XR}, 0x96, !PT")
            # channels 1..7's operands, during the channel before
            for ch in range(BC - 1):
                for m, t in enumerate(self.lds_ops(ch + 1, (ch + 1) % 2, self.stage(it))):
                    at(base + ch_slots * ch + 2 + self.o.lds_gap * m, t, wb=(ch + 1) % 2)
            # channel 7: the next stage's copies landed (group i + 1; i + 2 and i + 3 may be in
            # flight), every warp is done with this stage's reads up to channel 7 (barrier 1,
            # waited for by channel 7's first FFMA), the BAR; then the reads move on
            last = base + ch_slots * (BC - 1)
            at(last - DEPBAR_LEAD, f"DEPBAR.LE SB{ASYNC_SB}, 0x{0 if self.o.wait_all else STAGES - 2:x}",
               y=self.o.depbar_yield, stall=self.o.depbar_stall)
            at(last + 2, "BAR.SYNC.DEFER_BLOCKING 0x0", y=True, stall=6, wait=1 << 1)
            if xor:
                at(last + 3, self.xor_op(r.LDA, self.read_xor(it)))
                at(last + 3, self.xor_op(r.LDB, self.read_xor(it)))
            if xreg:
                at(last + 3, f"LOP3.LUT R{r.LDA}, R{r.LDA}, R{r.XR}, RZ, 0x3c, !PT")
                at(last + 3, f"LOP3.LUT R{r.LDB}, R{r.LDB}, R{r.XR}, RZ, 0x3c, !PT")
                at(last + 4, self.xor_op(r.XR, self.read_xor(0) ^ self.read_xor(1)))
            first = self.lds_ops(0, 0, self.stage(it + 1))
            gap = min(self.o.lds_gap, (ch_slots - 3 - MIN_DIST - LDS_AHEAD) // (len(first) - 1))
            for m, t in enumerate(first):
                at(last + 3 + MIN_DIST + gap * m, t, wb=0)
            if it == self.o.unroll - 1:
                at(last + 40, f"IADD3 R{r.CNT}, R{r.CNT}, -0x1, RZ")
                at(last + 40 + MIN_DIST, f"ISETP.NE.AND P6, PT, R{r.CNT}, RZ, PT")
        body: list[Op] = []
        for slot in range(self.o.unroll * BC * ch_slots):
            body += ins.get(slot, [])
            k = slot % ch_slots
            buf = slot // ch_slots % 2
            i, jj = divmod(k, 8)
            j = jj if i % 2 == 0 else 7 - jj        # zigzag: B is reused at the row turns
            a, b = r.RA(buf, i), r.RB(buf, j)
            op = Op(f"FFMA R{ACC(i, j)}, R{a}, R{b}, R{ACC(i, j)}", wait=(1 << buf) if k == 0 else 0)
            op.ffma = (a, b)
            body.append(op)
        body.append(Op("@P6 BRA LOOP", y=True, stall=5))
        if self.o.skip:
            body = [op for op in body if not self.skipped(op.text)]
        for op in body:
            op.y = op.text.startswith(("BAR", "@P6 BRA")) or (op.text.startswith("DEPBAR") and self.o.depbar_yield)
        if self.o.reuse:
            mark_reuse(body)
        return body

    def skipped(self, text: str) -> bool:
        """Whether GemmOptions.skip drops this loop instruction."""
        r = self.r
        copies = text.startswith(("LDGSTS", "LDGDEPBAR", "DEPBAR", "BAR")) or \
            any(text.startswith((f"IADD3 R{p},", f"IADD3.X R{p + 1},")) for p in (r.UP, r.VP)) or \
            text.startswith(f"LOP3.LUT R{r.ST},")
        return (copies and self.o.skip in ("copies", "both")) or \
            (text.startswith("LDS") and self.o.skip in ("lds", "both"))

    # ---- epilogue: M, 2 STG.128 a row of a thread --------------------------------------
    def epilogue(self) -> Seq:
        g, r = self.g, self.r
        q = seq()
        # the last body's reads of a stage past the end (barrier 0) and its copies
        q.op(f"DEPBAR.LE SB{ASYNC_SB}, 0x0", wait=0x3f)
        # rows 4ty + i + row_step*qd: the first half of the quads through mp, the second
        # (64 rows further) through mq
        mp, mq = r.UP, r.VP
        q.op(f"LDC.64 R{r.TMP}, c[0x0][{P_M:#x}]")
        q.op(f"IADD3 R{mp}, P0, R{r.MOFF}, R{r.TMP}, RZ")
        q.op(f"IADD3.X R{mp + 1}, RZ, R{r.TMP + 1}, RZ, P0, !PT")
        q.op(f"IADD3 R{mq}, P1, R{mp}, {64 * g.T * 4:#x}, RZ")
        q.op(f"IADD3.X R{mq + 1}, RZ, R{mp + 1}, RZ, P1, !PT")
        half = self.quads // 2
        n = 0
        for i in range(self.o.tile_rows):
            qd, ii = divmod(i, 4)
            for h in range(2):
                tmp = r.acc + 4 * (n % (r.set_size // 2))       # the operand registers, free now
                for j in range(4):
                    q.op(f"MOV R{tmp + j}, R{ACC(i, 4 * h + j)}")
                ptr = mp if qd < half else mq
                off = ((qd % half) * self.row_step + ii) * g.T * 4 + h * 256
                q.op(f"STG.E.128 desc[UR4][R{ptr}.64+{off:#x}], R{tmp}")
                n += 1
        q.op("EXIT")
        return q

    def text(self, name: Optional[str] = None) -> str:
        g = self.g
        name = name or kernel_name(g, self.o)
        out = [f"# Batched SGEMM of Winograd F(4x4,3x3) for {ARCH}, generated by kernels_sass/winograd/gemmgen.py",
               f"# C={g.C} K={g.K} T={g.T} parts={g.parts}; grid {g.grid()}, {self.o.threads} threads, "
               f"{SMEM_BYTES} bytes of dynamic shared memory",
               f".kernel {name}", "<params>"]
        out += [f"{n}, {b}" for n, b in PARAMS]
        out.append("</params>")
        # ptxas puts three never-executed shared loads before a kernel's first LDGSTS
        out += [Op("@!PT LDS RZ, [RZ]", y=False, stall=1).line() for _ in range(3)]
        out += self.prologue()
        out.append("LOOP:")
        out += [op.line() for op in self.loop_body()]
        out += self.epilogue().lines()
        out.append("END:")
        out.append("--:-:-:Y:0      BRA END;")
        return "\n".join(out) + "\n"


def kernel_name(g: GemmShape, o: GemmOptions = GemmOptions()) -> str:
    return f"wino4_gemm_c{g.C}_k{g.K}_t{g.T}_p{g.parts}{o.tag()}".replace("-", "_")


def generate(g: GemmShape, o: GemmOptions = GemmOptions()) -> str:
    return Generator(g, o).text()


def build(g: GemmShape, o: GemmOptions = GemmOptions(), *, check_hazards: bool = True, cache: bool = True) -> bytes:
    """Assemble the kernel for `g` (cubin bytes), through sassgen's on-disk cache."""
    return build_text(generate(g, o), kernel_name(g, o), filename="winograd_gemmgen.sass",
                      check_hazards=check_hazards, cache=cache)
