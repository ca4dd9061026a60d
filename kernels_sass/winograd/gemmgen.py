"""The batched SGEMM of Winograd F(4x4,3x3) in SASS, designed for sm_90, generated per problem
size and arch.

    M[p][e][k][t] = sum over c of part p:  U[e][c][k] * V[e][c][t]      (e < 36 positions)

The non-fused F(4x4,3x3) path (kernels_sass.winograd.f4) transforms filters and inputs in
CUDA-C kernels of their own (U, V in global memory), runs this kernel, and transforms M back
(A^T M A). It is the fix NOTES.md section 11 proposes for Conv5: 36 products per 6x6 input
tile give 16 outputs, 2.25 multiplications an output against F(2x2,3x3)'s 4.

Design (sm_90, our own; GemmOptions' defaults):
- 128 threads, a 128 (k) x 128 (t) tile of one position e, bc = 8 channels an iteration.
  Thread (ty, tx) = (4 * (warp >> 1) + lane / 8, 8 * (warp & 1) + lane % 8) holds a 16x8
  accumulator tile: rows k = 4ty + 0..3 + 32q (row quads q = 0..3), columns t = 4tx + 0..3
  and 64 + 4tx + 0..3, loaded with 4 + 2 LDS.128 a channel for 128 FFMA. A warp's LDS.128
  reads 4 (A) or 8 (B) distinct 16-byte chunks: one wavefront each.
- No registers between global and shared memory: each thread copies two 16-byte chunks of U
  and two of V an iteration with LDGSTS.E.BYPASS.128 `[R.U32 + UR]` (32-bit offsets, the
  bases in UR6 and UR8), committed as one group (LDGDEPBAR on scoreboard 3). Four stages of
  8 KiB, three iterations in flight: iteration i waits with `DEPBAR.LE SB3, 0x2` for group
  i+1 before the BAR that precedes its reads. The stages are visited in Gray-code order
  (0, 1, 3, 2), so every address moves on by an XOR with 0x2000 or 0x4000, alternately: the
  reads' stage sits in a uniform register (LDS [R + UR + imm]), the XOR in another; the loop
  body is one iteration (17 KB: two missed the instruction cache).
- One A register set: row quad q of channel c + 1 is loaded right after quad q's FFMAs of
  channel c, 94 FFMA slots before its first use; B has two sets. Accumulators and B operands
  in different register banks (columns swapped in pairs, ACC), A reused along a row and B at
  the zigzag's row turns (.reuse), as in the F(2x2,3x3) kernel.
- 128 accumulators, 32 operand registers, 6 for addresses and the loop counter: 168 registers
  as counted, three blocks an SM (12 warps; 3 x 33 KiB of shared memory with the reserved
  KiB). The loop issues FFMAs in 89.7% of its cycles (`python -m kernels_sass.winograd loop`,
  H100 and H200; the README says what holds an LDS-fed loop below 90% on sm_90).
- GemmOptions keeps the alternatives measured on the way: the 8x8 tile
  (tile_rows=8, a_sets=2, unroll=2: 256 threads, 104 registers, two blocks an SM; 88.5%), two
  A sets, unrolled bodies, the 2x2 lane map, and measurement-only variants (skip).
- U and V hold `operand_rows = E*C + 24` rows: the last three iterations' prefetches read the 24
  rows past the end, into stages nobody reads.
- Split-C: `parts` blocks share a tile's channels (grid z = parts * 36), each writes its own
  M[p]; the output transform adds them (f4.plan decides parts and tile, by a model of the
  busiest SM).
- The copies 4 cycles apart and the DEPBAR 8 FFMA slots before the BAR: closer, the H100
  read stages before their copies had landed (COPY_GAP, DEPBAR_LEAD).

Other archs (target.Target): the shared-memory base and constant-bank offsets from sassas's
tables; where the arch has no LDGSTS (sm_75), GemmOptions.async_copy = False (`fit`): each
thread loads its chunks into 16 more registers (LDG.E.128 at the iteration's start) and stores
them into the stage (STS.128 four channels later); the BARs alone order the stages then. The
32 KiB of stages fit every arch. Only the sm_90 design was tuned and run on a GPU.

Control codes of the loop are placed by construction (slots of the FFMA stream); the
prologue and epilogue get theirs from kernels_sass.winograd.sched. Every kernel is checked
with sassas.hazards when built.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

from .cubins import build_text
from .pieces import address, kernel_head, kernel_text, magic, mad
from .plan import Unsupported
from .sched import Op, Seq, mark_reuse
from .target import DEFAULT_ARCH, Target, target

ARCH = DEFAULT_ARCH
BM = BN = 128              # the block's tile: filters (k) x input tiles (t)
BC = 8                     # channels an iteration
E = 36                     # positions of the 6x6 transformed tiles
STAGES = 4
STAGE_BYTES = 0x2000       # A [8][128] floats, then B [8][128]
B_OFF = 0x1000
GRAY = (0x0000, 0x2000, 0x6000, 0x4000)    # stage offsets in the order the iterations use them
PAD_ROWS = (STAGES - 1) * BC
SMEM_BASE = 0x400          # sm_90's shared-memory base (the occupancy model; Target.smem_base per arch)
SMEM_BYTES = STAGES * STAGE_BYTES
MIN_DIST = 8               # slots from a fixed-latency result to its use
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
P_U, P_V, P_M = 0x0, 0x8, 0x10     # offsets in the parameter block
U_UR, V_UR = 6, 8          # the 64-bit bases of U and V: the copies read [R.U32 + UR]
READ_UR = 10               # unroll 1 and 2: the stage the reads are at (its offset: LDS [R + UR + imm])
XOR_UR = 11                # unroll 1: the XOR that moves the reads to the next stage (0x2000 and
                           # 0x4000 in turn), and after its toggle the copies
# A single A register set (GemmOptions.a_sets = 1): row quad q of channel c + 1 is loaded once
# the FFMAs of quad q of channel c are done (32 FFMA slots a quad), 94 slots before its first
# use. Quads 0 and 1 on one scoreboard, 2 and 3 on the other: a quad's first FFMA waits for its
# load and for the one 32 slots after it, which has had 62 slots (with 16 rows; 30 with 8).
A_SB = (4, 5)
B_LDS_SLOTS = (12, 22)     # ... B of channel c + 1 at these slots of channel c (channel 7: after the BAR)
A1_BAR = 24                # ... and channel 7's BAR, once its last quad (loaded at slot 2) is in
COPY_SB = ASYNC_SB         # copies through registers (async_copy = False): the loads' results, then
                           # the stores' reads of them and of the stage address
STORE_CHANNEL = 4          # ... the stores in this channel of the iteration whose start loaded them


# ---- registers --------------------------------------------------------------------------
def ACC(i: int, j: int) -> int:
    """Accumulator of row i, column j (0..7); columns swapped in pairs so that an accumulator
    and the B operand it meets sit in different register banks."""
    return 8 * i + (j ^ 1)


class Regs:
    """The register map of a thread tile of `rows` x 8 accumulators: accumulators from R0, the
    operands (a_sets sets of `rows` A values, then two sets of 8 B values), then the shared
    addresses, the copies' 32-bit offsets into U and V (their bases in UR6 and UR8) and the loop
    counter. For 8 rows: R64.. operands, R96.. addresses, 104 registers as counted (with the
    two the hardware reserves); for 16 rows and one A set: R128.., R160.., 168 registers, so
    that three blocks of 128 threads share an SM. The operand registers, free before the first
    loads and after the last FFMA, hold the prologue's and the epilogue's temporaries."""

    def __init__(self, rows: int, a_sets: int = 2, staging: int = 0):
        self.rows = rows
        self.a_sets = a_sets
        self.acc = 8 * rows
        self.operands = rows * a_sets + 2 * 8
        base = self.acc + self.operands
        self.LDA, self.LDB, self.ST = base, base + 1, base + 2   # shared: A and B reads, the copies' stage
        self.UP, self.VP = base + 3, base + 4                    # byte offsets of the next chunks in U and V
        self.CNT = base + 5                                      # loop counter (bodies left after this one)
        self.TMP = self.acc
        self.top = base + 5                                      # the highest register
        # copies through registers: `staging` registers from the next multiple of 4
        self.STG = -(-(base + 6) // 4) * 4
        if staging:
            self.top = self.STG + staging - 1

    def RA(self, buf: int, i: int) -> int:
        return self.acc + self.rows * (buf % self.a_sets) + i

    def RB(self, buf: int, j: int) -> int:
        return self.acc + self.rows * self.a_sets + 8 * buf + j

    def count(self) -> int:
        """Registers a thread, as sassas counts them (the highest + 1 + the 2 reserved)."""
        return self.top + 3


@dataclass(frozen=True)
class GemmOptions:
    depbar_yield: bool = True     # the loop's DEPBAR yields (and ends the .reuse chains across it)
    wait_all: bool = False        # the loop waits for every copy group (one stage in flight)
    reuse: bool = True            # operand reuse flags
    tile_rows: int = 16           # accumulator rows of a thread (x 8 columns): 16 (128 threads, 6 LDS.128
                                  # a channel for 128 FFMA) or 8 (256 threads, 4 LDS.128 for 64 FFMA)
    unroll: int = 1               # iterations a loop body: 1 (the reads' stage by XOR with a UR that
                                  # alternates: one uniform instruction more an iteration; 16 rows: a body of
                                  # 17 KB, where 2 iterations missed the instruction cache), 2 (XOR with
                                  # immediates) or 4 (each stage an immediate offset; C a multiple of 32 x parts)
    depbar_stall: int = DEPBAR_STALL
    lane_map: str = "rows"        # a warp's 4 x 8 thread tiles: "rows" (ty = lane / 8, tx = lane % 8) or
                                  # "2x2" (lanes 4k..4k+3 a 2 x 2 block: every LDS.128 of A and B 2 cycles
                                  # of the shared-memory pipe instead of 2 (A) and 4 (B); microbench
                                  # smem.bandwidth, gemm-*-2x2; measured slower: README)
    lds_gap: int = 15             # FFMA slots between the LDS.128 of the next channel (from slot 2 of a channel;
                                  # after the BAR at most as far as leaves LDS_AHEAD slots to the first use)
    skip: str = ""                # measurement only, the results are wrong: "copies" drops the loop's
                                  # copies, pointer moves, DEPBAR and BAR; "lds" its shared loads; "both"
    a_sets: int = 1               # A operand register sets: 1 (each row quad reloaded as it falls free:
                                  # 16 rows in 168 registers, three blocks an SM) or 2
    async_copy: bool = True       # the copies by LDGSTS (sm_80 on); else through registers (LDG, STS)

    @property
    def threads(self) -> int:
        return BM * BN // (8 * self.tile_rows)

    def tag(self) -> str:
        """The fields that differ from the defaults, abbreviated ('' for the default kernel)."""
        d = GemmOptions()
        return "".join(text for name, text in (
            ("depbar_yield", "-ndy" if not self.depbar_yield else "-dy"), ("wait_all", "-wa" if self.wait_all else "-nwa"),
            ("reuse", "-nr" if not self.reuse else "-reuse"), ("tile_rows", f"-r{self.tile_rows}"),
            ("unroll", f"-u{self.unroll}"), ("depbar_stall", f"-ds{self.depbar_stall}"), ("lane_map", f"-m{self.lane_map}"),
            ("lds_gap", f"-g{self.lds_gap}"), ("skip", f"-skip{self.skip}"), ("a_sets", f"-a{self.a_sets}"),
            ("async_copy", "-nac"))
            if getattr(self, name) != getattr(d, name))

    @property
    def staging(self) -> int:
        """Registers a thread copies through (async_copy = False): 4 per 16-byte chunk."""
        return 0 if self.async_copy else 4 * 2 * (32 // (self.threads // BC))

    def registers(self) -> int:
        return Regs(self.tile_rows, self.a_sets, self.staging).count()

    def blocks_per_sm(self) -> int:
        """Blocks resident on an sm_90 SM: 64K registers (a thread's count rounded up to 8),
        228 KiB of shared memory (a block's stages and the reserved KiB)."""
        regs = -(-self.registers() // 8) * 8
        return min(65536 // (regs * self.threads), (228 << 10) // (SMEM_BASE + SMEM_BYTES), 64 * 32 // self.threads)


def fit(o: GemmOptions, t: Target) -> GemmOptions:
    """The options with the copies the arch has (through registers where it has no LDGSTS)."""
    return o if t.async_copy or not o.async_copy else replace(o, async_copy=False, unroll=1)


OPTIONS = GemmOptions()           # the default kernel
EIGHT_BY_EIGHT = GemmOptions(tile_rows=8, a_sets=2, unroll=2)    # the 8x8 tile; f4.plan picks between them


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
    if g.parts < 1 or g.C % (BC * g.parts) or g.C < BC * g.parts:
        raise Unsupported(f"C {g.C} must be a multiple of {BC} x parts ({g.parts})")
    lim = 1 << 31
    if g.operand_rows * max(g.K, g.T) * 4 >= lim or g.parts * E * g.K * g.T * 4 >= lim:
        raise Unsupported("operands of 2 GiB or more need 64-bit offsets")
    if E * g.parts >= 1 << 16:
        raise Unsupported(f"{g.parts} parts")
    if (35 * g.T * 4 + 256) >= 1 << 23:
        raise Unsupported(f"T {g.T}: the output offsets exceed 24 bits")


class Generator:
    def __init__(self, g: GemmShape, o: GemmOptions = GemmOptions(), arch: str = DEFAULT_ARCH):
        check_gemm(g)
        self.t = target(arch)
        if o.async_copy and not self.t.async_copy:
            raise ValueError(f"{self.t.arch} has no LDGSTS: GemmOptions(async_copy=False), or gemmgen.fit")
        if not o.async_copy and o.unroll != 1:
            raise ValueError("copies through registers (async_copy=False) need unroll=1: the stores go to the "
                             "stage R_ST points at until the stage turn")
        if o.tile_rows not in (8, 16) or o.unroll not in (1, 2, 4) or o.lane_map not in ("rows", "2x2") \
                or o.skip not in ("", "copies", "lds", "both") or o.a_sets not in (1, 2) \
                or not 1 <= o.lds_gap <= (8 * o.tile_rows - 2 - LDS_AHEAD) // (o.tile_rows // 4 + 1):
            raise ValueError(f"tile_rows {o.tile_rows}, unroll {o.unroll}, lane_map {o.lane_map!r}, skip {o.skip!r}, "
                             f"a_sets {o.a_sets}, lds_gap {o.lds_gap}: 8 or 16, 1 2 or 4, 'rows' or '2x2', "
                             f"'' 'copies' 'lds' or 'both', 1 or 2, the LDS of a channel within it")
        if g.iterations % o.unroll:
            raise Unsupported(f"C {g.C}: {g.iterations} iterations a block, not a multiple of {o.unroll}")
        self.g = g
        self.o = o
        self.r = Regs(o.tile_rows, o.a_sets, o.staging)
        self.quads = o.tile_rows // 4                  # LDS.128 of A a channel
        self.row_step = BM // self.quads          # k distance of a thread's row quads (64 or 32)
        self.per_row = o.threads // BC            # threads copying one channel row (32 or 16)
        self.slots_ch = 8 * o.tile_rows                # FFMAs a channel

    def seq(self) -> Seq:
        return Seq(self.t.arch, spell=self.t.spell)

    # ---- pieces -----------------------------------------------------------------------
    def stage(self, it: int) -> int:
        """The immediate offset of iteration it's stage (unroll 4; else the registers hold it)."""
        return (it % STAGES) * STAGE_BYTES if self.o.unroll == STAGES else 0

    def lds_a(self, ch: int, buf: int, q: int, stage: int = 0) -> str:
        """Row quad q of A, channel ch (0..7) of the current stage, into register set buf."""
        r = self.r
        return f"LDS.128 R{r.RA(buf, 4 * q)}, [R{r.LDA}{self.read_ur}+{stage + ch * 512 + q * self.row_step * 4:#x}]"

    def lds_b(self, ch: int, buf: int, h: int, stage: int = 0) -> str:
        """Column quad h (0, 1) of B, channel ch."""
        r = self.r
        return f"LDS.128 R{r.RB(buf, 4 * h)}, [R{r.LDB}{self.read_ur}+{stage + ch * 512 + h * 256:#x}]"

    @property
    def read_ur(self) -> str:
        """The reads' stage: in READ_UR, or (unroll 4) in their immediates."""
        return "" if self.o.unroll == STAGES else f"+UR{READ_UR}"

    def lds_ops(self, ch: int, buf: int, stage: int = 0) -> list[str]:
        """The operands of channel ch into register set buf: A's row quads and B's two column
        quads, interleaved."""
        a = [self.lds_a(ch, buf, q, stage) for q in range(self.quads)]
        b = [self.lds_b(ch, buf, h, stage) for h in range(2)]
        out = []
        for n in range(max(len(a), len(b))):
            out += a[n:n + 1] + b[n:n + 1]
        return out

    def copy_chunks(self, stage: int = 0) -> list[tuple[str, str]]:
        """(shared, global address) of one iteration's chunks of U and V, into the stage R_ST
        (+ stage) points at: a thread copies chunks p and p + per_row of its row (256 bytes
        apart)."""
        r = self.r
        out = []
        for reg, ur, off in ((r.UP, U_UR, stage), (r.VP, V_UR, stage + B_OFF)):
            for m in range(32 // self.per_row):
                d = m * self.per_row * 16
                out.append((f"[R{r.ST}{'+' + hex(off + d) if off + d else ''}]",
                            f"[R{reg}.U32+UR{ur}{'+' + hex(d) if d else ''}]"))
        return out

    def copy_ops(self, stage: int = 0) -> list[str]:
        """The copies of copy_chunks by LDGSTS."""
        return [f"LDGSTS.E.BYPASS.128 {dst}, {src}" for dst, src in self.copy_chunks(stage)]

    def copy_loads(self, stage: int = 0) -> list[str]:
        """async_copy = False: the chunks into the staging registers ..."""
        return [f"LDG.E.128{self.t.scope} R{self.r.STG + 4 * n}, {src}" for n, (_, src) in enumerate(self.copy_chunks(stage))]

    def copy_stores(self, stage: int = 0) -> list[str]:
        """... and from them into the stage."""
        return [f"STS.128 {dst}, R{self.r.STG + 4 * n}" for n, (dst, _) in enumerate(self.copy_chunks(stage))]

    def advance_ops(self) -> list[tuple[str, int]]:
        """(text, slots after the previous one): the offsets in U and V to the next 8 channels
        (32 bits: check_gemm keeps U and V under 2 GiB)."""
        g, r = self.g, self.r
        return [(f"IADD3 R{r.UP}, R{r.UP}, {BC * g.K * 4:#x}, RZ", 0),
                (f"IADD3 R{r.VP}, R{r.VP}, {BC * g.T * 4:#x}, RZ", 1)]

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
    def place(self, q: Seq, tid: int, t: list[int]) -> tuple[int, int, int, int]:
        """(lane, warp, ty, tx) of thread R<tid> into registers of t (4 of them, then 3 scratch):
        (ty, tx) = (4 * (warp >> 1), 8 * (warp & 1)) + the lane's place in the warp's 4 x 8."""
        lane, warp, ty, tx, t1, t2, t3 = t[:7]
        scratch = self.r.CNT
        q.op(f"LOP3.LUT R{lane}, R{tid}, 0x1f, RZ, 0xc0, !PT")
        q.op(f"SHF.R.U32.HI R{warp}, RZ, 0x5, R{tid}")
        q.op(f"SHF.R.U32.HI R{t1}, RZ, 0x1, R{warp}")
        if self.o.lane_map == "2x2":
            # lanes 4k..4k+3 a 2 x 2 block: ty += lane bits 2,1; tx += lane bits 4,3,0
            q.op(f"SHF.R.U32.HI R{t2}, RZ, 0x1, R{lane}")
            q.op(f"LOP3.LUT R{t2}, R{t2}, 0x3, RZ, 0xc0, !PT")
            mad(q, ty, t1, 4, t2, scratch)
            q.op(f"SHF.R.U32.HI R{t2}, RZ, 0x2, R{lane}")
            q.op(f"LOP3.LUT R{t3}, R{lane}, 0x1, RZ, 0xc0, !PT")
            q.op(f"LOP3.LUT R{t2}, R{t2}, 0x6, R{t3}, 0xea, !PT")     # (a & b) | c
        else:
            # rows: ty += lane / 8, tx += lane % 8
            q.op(f"SHF.R.U32.HI R{t2}, RZ, 0x3, R{lane}")
            mad(q, ty, t1, 4, t2, scratch)
            q.op(f"LOP3.LUT R{t2}, R{lane}, 0x7, RZ, 0xc0, !PT")
        q.op(f"LOP3.LUT R{t1}, R{warp}, 0x1, RZ, 0xc0, !PT")
        mad(q, tx, t1, 8, t2, scratch)
        return lane, warp, ty, tx

    def prologue(self) -> list[str]:
        g, r = self.g, self.r
        R_ST, R_UP, R_VP, R_LDA, R_LDB, R_CNT = r.ST, r.UP, r.VP, r.LDA, r.LDB, r.CNT
        q = self.seq()
        tid, cx, cy, z, t1, t2, off, *rest = range(r.TMP, r.TMP + 15)
        block_start(q, self.t, tid, cx, cy, z)
        lane, warp, ty, tx = self.place(q, tid, rest)
        # the shared addresses: reads at 16*ty (A) and 16*tx (B) of stage 0; copies at row
        # tid / per_row, chunk tid % per_row of stage GRAY[0] (with 256 threads: warp, lane)
        crow, chunk = warp, lane
        if self.per_row != 32:
            crow, chunk = rest[4:6]
            q.op(f"SHF.R.U32.HI R{crow}, RZ, {self.per_row.bit_length() - 1:#x}, R{tid}")
            q.op(f"LOP3.LUT R{chunk}, R{tid}, {self.per_row - 1:#x}, RZ, 0xc0, !PT")
        address(q, R_ST, ((crow, 512), (chunk, 16)), self.t.smem_base, R_CNT)
        copy_sources(q, g, R_UP, R_VP, BN, crow, chunk, (cx, cy, z), (t1, t2, off), R_CNT)
        address(q, R_LDA, ((ty, 16),), self.t.smem_base, R_CNT)
        address(q, R_LDB, ((tx, 16),), self.t.smem_base + B_OFF, R_CNT)
        q.op(f"MOV R{R_CNT}, {g.iterations // self.o.unroll - 1:#x}")     # bodies after the first
        q.op("NOP", wait=q.wait_all(), y=True, stall=2)
        out = q.lines()
        # the first three iterations' copies, one group each, on a clean scoreboard
        for it in range(STAGES - 1):
            if self.o.async_copy:
                out += [Op(c, rb=ADDR_SB, y=True, stall=COPY_GAP).line() for c in self.copy_ops(self.stage(it))]
                out.append(Op("LDGDEPBAR", wb=ASYNC_SB, y=True, stall=COPY_GAP).line())
            else:       # (the stores wait for the loads; they read the registers and R_ST late)
                loads = self.copy_loads(self.stage(it))
                out += [Op(c, rb=ADDR_SB, wb=COPY_SB, y=True, stall=2 if n == len(loads) - 1 else 1).line()
                        for n, c in enumerate(loads)]
                out += [Op(c, rb=COPY_SB, wait=(1 << COPY_SB) if n == 0 else 0, y=True, stall=1).line()
                        for n, c in enumerate(self.copy_stores(self.stage(it)))]
            adv = self.advance_ops()
            for n, (text, _) in enumerate(adv):
                stall = MIN_DIST if n == len(adv) - 1 else 1
                out.append(Op(text, wait=(1 << ADDR_SB) if n == 0 else 0, y=True, stall=stall).line())
            if self.o.unroll < STAGES:
                out.append(Op(self.xor_op(R_ST, GRAY[it] ^ GRAY[it + 1]), y=True, stall=MIN_DIST,
                              wait=0 if self.o.async_copy else 1 << COPY_SB).line())
        if self.o.unroll < STAGES:
            out.append(Op(f"UMOV UR{READ_UR}, {GRAY[0]:#x}", y=True, stall=1).line())
        if self.o.unroll == 1:
            out.append(Op(f"UMOV UR{XOR_UR}, {self.read_xor(0):#x}", y=True, stall=MIN_DIST).line())
        # the accumulators, while the copies are in flight
        out += [Op(f"MOV R{a}, RZ", y=True, stall=1).line() for a in range(r.acc)]
        # group 0 landed (two may stay in flight), every thread's copies are visible; the
        # first channel's operands
        if self.o.async_copy:
            out.append(Op(f"DEPBAR.LE SB{ASYNC_SB}, 0x{STAGES - 2:x}", y=True, stall=self.o.depbar_stall).line())
            out.append(Op("NOP", y=True, stall=DEPBAR_LEAD).line())
        out.append(Op("BAR.SYNC.DEFER_BLOCKING 0x0", y=True, stall=6).line())
        if self.o.a_sets == 1:      # the last row quad: the loop's first load (loop_body)
            first = [(self.lds_b(0, 0, h), 0) for h in range(2)] + \
                [(self.lds_a(0, 0, qd), self.a_sb(qd)) for qd in range(self.quads - 1)]
        else:
            first = [(t, 0) for t in self.lds_ops(0, 0)]
        out += [Op(t, wb=sb, y=True, stall=2).line() for t, sb in first]
        return out

    # ---- the loop body: `unroll` iterations of BC channels, slots_ch FFMA slots each -----
    def loop_body(self) -> list[Op]:
        r, ch_slots = self.r, self.slots_ch
        ins: dict[int, list[Op]] = {}

        def at(slot: int, text: str, **kw) -> Op:
            op = Op(text, **kw)
            ins.setdefault(slot, []).append(op)
            return op

        xor = self.o.unroll == 2
        for it in range(self.o.unroll):
            base = it * BC * ch_slots
            # the copies of iteration i + 3 into the stage iteration i - 1 read (every warp's
            # reads of it ended before the last BAR), then the pointers and the stage move on
            if self.o.async_copy:
                copies = self.copy_ops(self.stage(it + STAGES - 1))
                for m, c in enumerate(copies):
                    at(base + 1 + m * COPY_GAP, c, rb=ADDR_SB)
                at(base + 1 + len(copies) * COPY_GAP, "LDGDEPBAR", wb=ASYNC_SB)
            else:
                # through registers: the loads (after the last iteration's stores read the
                # registers), their stores STORE_CHANNEL channels later (before the BAR that
                # moves R_ST on)
                for m, c in enumerate(self.copy_loads()):
                    at(base + 1 + m * COPY_GAP, c, rb=ADDR_SB, wb=COPY_SB, wait=(1 << COPY_SB) if m == 0 else 0)
                for m, c in enumerate(self.copy_stores()):
                    at(base + STORE_CHANNEL * ch_slots + 4 + 4 * m, c, rb=COPY_SB, wait=(1 << COPY_SB) if m == 0 else 0)
            slot = base + 24
            for n, (text, gap) in enumerate(self.advance_ops()):
                slot += gap
                at(slot, text, wait=(1 << ADDR_SB) if n == 0 else 0)
            if xor:
                at(base + 26, self.xor_op(r.ST, self.write_xor(it)))
            last = base + ch_slots * (BC - 1)
            if self.o.a_sets == 1:
                self.one_set_loads(at, it, base)
            else:
                # channels 1..7's operands, during the channel before
                for ch in range(BC - 1):
                    for m, t in enumerate(self.lds_ops(ch + 1, (ch + 1) % 2, self.stage(it))):
                        at(base + ch_slots * ch + 2 + self.o.lds_gap * m, t, wb=(ch + 1) % 2)
                # channel 7: the next stage's copies landed (group i + 1; i + 2 and i + 3 may be in
                # flight), every warp is done with this stage's reads up to channel 7 (barrier 1,
                # waited for by channel 7's first FFMA), the BAR; then the reads move on
                self.stage_turn(at, it, last - DEPBAR_LEAD, last + 2, 1 << 1)
                first = self.lds_ops(0, 0, self.stage(it + 1))
                gap = min(self.o.lds_gap, (ch_slots - 3 - MIN_DIST - LDS_AHEAD) // (len(first) - 1))
                for m, t in enumerate(first):
                    at(last + 3 + MIN_DIST + gap * m, t, wb=0)
            if it == self.o.unroll - 1:
                # the carry of CNT + 0xffffffff: another body while CNT was not 0
                at(last + 40, f"IADD3 R{r.CNT}, P6, R{r.CNT}, -0x1, RZ")
        body: list[Op] = []
        for slot in range(self.o.unroll * BC * ch_slots):
            body += ins.get(slot, [])
            k = slot % ch_slots
            buf = slot // ch_slots % 2
            i, jj = divmod(k, 8)
            j = jj if i % 2 == 0 else 7 - jj        # zigzag: B is reused at the row turns
            a, b = r.RA(buf, i), r.RB(buf, j)
            if self.o.a_sets == 1:      # B and row quad 0, or a later row quad
                wait = (1 << buf | 1 << A_SB[0]) if k == 0 else (1 << self.a_sb(i // 4)) if k % 32 == 0 else 0
            else:
                wait = (1 << buf) if k == 0 else 0
            op = Op(f"FFMA R{ACC(i, j)}, R{a}, R{b}, R{ACC(i, j)}", wait=wait)
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

    def stage_turn(self, at, it: int, depbar: int, bar: int, bar_wait: int) -> None:
        """The end of iteration it's stage: the next stage's copies landed (group i + 1; i + 2
        and i + 3 may be in flight: the DEPBAR), every warp is done reading this stage (the
        BAR, after this warp's reads: bar_wait), then the reads move on to the next stage."""
        r, o = self.r, self.o
        if o.async_copy:
            at(depbar, f"DEPBAR.LE SB{ASYNC_SB}, 0x{0 if o.wait_all else STAGES - 2:x}",
               y=o.depbar_yield, stall=o.depbar_stall)
        at(bar, "BAR.SYNC.DEFER_BLOCKING 0x0", y=True, stall=6, wait=bar_wait)
        if o.unroll == 2:
            at(bar + 1, f"ULOP3.LUT UR{READ_UR}, UR{READ_UR}, {self.read_xor(it):#x}, URZ, 0x3c, !UPT")
        if o.unroll == 1:
            # the reads by this iteration's XOR; then the other one of the pair (0x2000 ^ 0x4000),
            # iteration i + 1's, which is also what moves the copies from stage i + 3 to i + 4
            at(bar + 1, f"ULOP3.LUT UR{READ_UR}, UR{READ_UR}, UR{XOR_UR}, URZ, 0x3c, !UPT")
            at(bar + 2, f"ULOP3.LUT UR{XOR_UR}, UR{XOR_UR}, {self.read_xor(0) ^ self.read_xor(1):#x}, URZ, 0x3c, !UPT")
            at(bar + 2 + MIN_DIST, f"LOP3.LUT R{r.ST}, R{r.ST}, UR{XOR_UR}, RZ, 0x3c, !PT",
               wait=0 if o.async_copy else 1 << COPY_SB)

    def one_set_loads(self, at, it: int, base: int) -> None:
        """The shared loads of iteration it with one A register set (a_sets = 1). In channel c:
        its own last row quad at slot 2 (the registers fell free at the end of channel c - 1),
        B of channel c + 1 at B_LDS_SLOTS, row quad q of channel c + 1 at slot 32 (q + 1) + 2,
        right after quad q's FFMAs of channel c. Channel 7 turns the stage: DEPBAR, the BAR
        at A1_BAR (waiting for the quads of channel 7 on A_SB), then the next stage's loads."""
        slots_ch, quads, stage = self.slots_ch, self.quads, self.stage(it)
        last = base + slots_ch * (BC - 1)
        bar = last + A1_BAR
        self.stage_turn(at, it, bar - DEPBAR_LEAD, bar, 1 << 1 | 1 << A_SB[0] | 1 << A_SB[1])
        for ch in range(BC):
            cb = base + slots_ch * ch
            at(cb + 2, self.lds_a(ch, 0, quads - 1, stage), wb=self.a_sb(quads - 1))
            if ch < BC - 1:
                nxt, nstage, b_slots = ch + 1, stage, B_LDS_SLOTS
            else:           # after the BAR and the address XORs
                nxt, nstage = 0, self.stage(it + 1)
                b_slots = (A1_BAR + 1 + MIN_DIST, A1_BAR + 1 + MIN_DIST + 10)
            for h, sl in enumerate(b_slots):
                at(cb + sl, self.lds_b(nxt, (ch + 1) % 2, h, nstage), wb=(ch + 1) % 2)
            for qd in range(quads - 1):
                at(cb + 32 * (qd + 1) + 2, self.lds_a(nxt, 0, qd, nstage), wb=self.a_sb(qd))

    def a_sb(self, q: int) -> int:
        """The scoreboard of row quad q's loads (a_sets = 1)."""
        return A_SB[q * 2 // self.quads]

    def skipped(self, text: str) -> bool:
        """Whether GemmOptions.skip drops this loop instruction."""
        r = self.r
        copies = text.startswith(("LDGSTS", "LDGDEPBAR", "DEPBAR", "BAR", "LDG.E.128", "STS.128")) or \
            any(text.startswith(f"IADD3 R{p},") for p in (r.UP, r.VP)) or \
            text.startswith(f"LOP3.LUT R{r.ST},")
        return (copies and self.o.skip in ("copies", "both")) or \
            (text.startswith("LDS") and self.o.skip in ("lds", "both"))

    # ---- epilogue: M, 2 STG.128 a row of a thread --------------------------------------
    def epilogue(self) -> Seq:
        g, r = self.g, self.r
        q = self.seq()
        # the last body's reads of a stage past the end (barrier 0) and its copies
        if self.o.async_copy:
            q.op(f"DEPBAR.LE SB{ASYNC_SB}, 0x0", wait=0x3f)
        else:
            q.op("NOP", wait=0x3f)
        # M offset (bytes), M[z][k][t] with z = part * E + e, recomputed here (no register for
        # it through the loop): 4 * ((z*K + 128*cy + 4*ty) * T + 128*cx + 4*tx)
        tid, cx, cy, z, off, *rest = range(r.TMP, r.TMP + 12)
        block_ids(q, tid, cx, cy, z)
        _, _, ty, tx = self.place(q, tid, rest)
        mad(q, off, z, g.K, None, r.CNT)
        mad(q, off, cy, BM, off, r.CNT)
        mad(q, off, ty, 4, off, r.CNT)
        mad(q, off, off, g.T, None, r.CNT)
        mad(q, off, cx, BN, off, r.CNT)
        mad(q, off, tx, 4, off, r.CNT)
        q.op(f"SHF.L.U32 R{off}, R{off}, 0x2, RZ")
        # rows 4ty + i + row_step*qd: the first half of the quads through mp, the second
        # (64 rows further) through mq (even pairs past the operands: the addresses' registers)
        mp, mq = r.LDA, r.LDA + 2
        q.op(f"LDC.64 R{mq}, {self.t.param(P_M)}")
        q.op(f"IADD3 R{mp}, P0, R{off}, R{mq}, RZ")
        q.op(f"IADD3.X R{mp + 1}, RZ, R{mq + 1}, RZ, P0, !PT")
        q.op(f"IADD3 R{mq}, P1, R{mp}, {64 * g.T * 4:#x}, RZ")
        q.op(f"IADD3.X R{mq + 1}, RZ, R{mp + 1}, RZ, P1, !PT")
        half = self.quads // 2
        n = 0
        for i in range(self.o.tile_rows):
            qd, ii = divmod(i, 4)
            for h in range(2):
                tmp = r.acc + 4 * (n % (r.operands // 4))     # the operand registers, free now
                for j in range(4):
                    q.op(f"MOV R{tmp + j}, R{ACC(i, 4 * h + j)}")
                ptr = mp if qd < half else mq
                off = ((qd % half) * self.row_step + ii) * g.T * 4 + h * 256
                q.op(f"STG.E.128{self.t.scope} {self.t.global_address(ptr, off)}, R{tmp}")
                n += 1
        q.op("EXIT")
        return q

    def text(self, name: Optional[str] = None) -> str:
        g = self.g
        name = name or kernel_name(g, self.o)
        out = kernel_head(name, [
            f"# Batched SGEMM of Winograd F(4x4,3x3) for {self.t.arch}, generated by kernels_sass/winograd/gemmgen.py",
            f"# C={g.C} K={g.K} T={g.T} parts={g.parts}; grid {g.grid()}, {self.o.threads} threads, "
            f"{SMEM_BYTES} bytes of dynamic shared memory"], PARAMS, self.o.async_copy)
        out += self.prologue()
        out.append("LOOP:")
        out += [op.line() for op in self.loop_body()]
        out += self.epilogue().lines()
        return kernel_text(self.t, out)


def block_ids(q: Seq, tid: int, cx: int, cy: int, z: int) -> None:
    """The thread's and the block's ids into R{tid}, R{cx}, R{cy}, R{z} (a GEMM kernel's start,
    and its epilogue, which reads them again rather than keep registers through the loop)."""
    q.op(f"S2R R{tid}, SR_TID.X")
    q.op(f"S2R R{cx}, SR_CTAID.X")
    q.op(f"S2R R{cy}, SR_CTAID.Y")
    q.op(f"S2R R{z}, SR_CTAID.Z")


def block_start(q: Seq, t: Target, tid: int, cx: int, cy: int, z: int) -> None:
    """A GEMM kernel's first instructions: the thread and block ids (block_ids), the memory
    descriptor, and U's and V's addresses into UR{U_UR} and UR{V_UR}."""
    block_ids(q, tid, cx, cy, z)
    for text in t.desc_load():
        q.op(text)
    q.op(f"ULDC.64 UR{U_UR}, {t.param(P_U)}")
    q.op(f"ULDC.64 UR{V_UR}, {t.param(P_V)}")


def copy_sources(q: Seq, g: GemmShape, up: int, vp: int, cols: int, crow: int, chunk: int,
                 block: tuple[int, int, int], tmp: tuple[int, int, int], spare: int) -> None:
    """R{up}, R{vp} = the byte offsets of a thread's first copy chunk in U and V: row
    e*C + part*(C/parts) + crow (block (cx, cy, z): e = z % E, part = z / E), column
    BM*cy + 4*chunk of U and cols*cx + 4*chunk of V."""
    cx, cy, z = block
    row, part, off = tmp
    if g.parts > 1:
        q.op(f"MOV R{row}, {magic(E):#x}")
        q.op(f"IMAD.HI.U32 R{part}, R{z}, R{row}, RZ")        # part
        mad(q, row, part, -E, z, spare)                      # e
        mad(q, row, row, g.C, crow, spare)
        mad(q, row, part, g.C // g.parts, row, spare)
    else:
        mad(q, row, z, g.C, crow, spare)
    for ptr, width, block_id, size in ((up, g.K, cy, BM), (vp, g.T, cx, cols)):
        mad(q, off, row, width, None, spare)
        mad(q, off, block_id, size, off, spare)
        mad(q, off, chunk, 4, off, spare)
        q.op(f"SHF.L.U32 R{ptr}, R{off}, 0x2, RZ")


def kernel_name(g: GemmShape, o: GemmOptions = GemmOptions()) -> str:
    return f"wino4_gemm_c{g.C}_k{g.K}_t{g.T}_p{g.parts}{o.tag()}".replace("-", "_")


def generate(g: GemmShape, o: GemmOptions = GemmOptions(), arch: str = DEFAULT_ARCH) -> str:
    """The GEMM's SASS for `arch` (o as given: `fit` adapts them to an arch)."""
    return Generator(g, o, arch).text()


def build(g: GemmShape, o: GemmOptions = GemmOptions(), *, arch: str = DEFAULT_ARCH, check_hazards: bool = True,
          cache: bool = True) -> bytes:
    """Assemble the kernel for `g` on `arch` (cubin bytes), through the on-disk cache (cubins)."""
    return build_text(generate(g, o, arch), kernel_name(g, o), arch=arch, filename="winograd_gemmgen.sass",
                      check_hazards=check_hazards, cache=cache)
