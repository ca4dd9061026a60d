"""Winograd F(4x4,3x3), fused, in SASS for sm_90: x in NCHW and y in NCHW (or CHWN and KHWN:
`layout`), and no transformed tensor in global memory but the filters' U (a pre-pass:
winograd.cu's f4_filter_transform, U[e][c][k], 36 x Cp rows of Kp floats and PAD_ROWS more
that the last prefetch reads).

    text = generate(Shape(N, C, H, W, K), parts=1, layout="NCHW", aligned=True)   # kernel_name(...)
    f = fused(s, parts, layout); f.launch_grid(sms), THREADS, f.smem_bytes   # the launch: params x, u, y

Design (NOTES.md sections 15 and 16):
- 256 threads, a block tile of 32 filters x 32 output tiles (4x4 pixels each) x the 36
  positions; 8 channels an iteration. Positions 0..31: thread tid computes position
  e = tid / 8, rows k = 16 (sub / 4) + 0..15 and columns t = 8 (sub % 4) + 0..7 of that
  position's 32 x 32 product (sub = tid % 8): 16 x 8 accumulators, 4 + 2 LDS.128 a channel
  for 128 FFMA. Positions 32..35: 64 threads each, a 4 x 4 tile a thread (k = 4 (tid / 8 % 8),
  t = 4 sub), 2 LDS.128 for 16 FFMA. Every warp has the same work: 8 warps, 2 a scheduler.
- Inputs: thread tid loads the 6x6 window of channel c0 + tid / 32, tile tid % 32 (NCHW: of
  a row of tiles; CHWN: an image) with 36 predicated LDG (a 36-bit mask, one R2P a row:
  image borders, tiles past the last, channels past C; NCHW rows of W % 4 == 0 floats: a
  row's columns 1-4 by one LDG.128, W % 2 == 0 by two LDG.64, x 16-byte aligned), transforms
  it in registers (B^T d B, in place) and stores the 36 values into shared memory.
- Filters: thread tid copies chunk tid % 8 of the U rows (position tid / 8, channels 0..7;
  32 filters a row) and of row tid / 8 of the small positions' with 9 LDGSTS.128 (a warp's
  copy 4 whole rows), one group an iteration (LDGDEPBAR on scoreboard 3).
- Two shared buffers OTHER bytes apart (addresses toggle by XOR): iteration i computes the
  block in buffer i % 2; among its FFMAs, the copies and window loads of block i + 1 (channels
  0-1) and its transform and stores into the other buffer (channels TRANSFORM_FROM..7); one BAR.
- Epilogue: the accumulators as M[e][k][t] in shared memory, then thread tid takes the 4
  (k, t) pairs k = tid / 32 + 8r, t = tid % 32: 36 LDS, A^T m A, 16 predicated STG (or REDG, split;
  W % 4 == 0, y 16-byte aligned: 4 STG.128; W % 2 == 0: 8 STG.64).
- Persistent blocks (PERSISTENT; NOTES.md section 24): one block an SM takes the block tiles b,
  b + grid, ...; its next tile's set-up, copies and window loads go before this tile's staging, the
  next window's transform and stores among this tile's output transforms (the buffers at LOW and
  LOW ^ OTHER, the one written then past M), so that only the loop's first chunk waits.

The control codes come from sched.Seq (conservative latencies, scoreboards assigned) and the
operand reuse flags from sched.mark_reuse; the instructions are placed at FFMA slots of the
loop (as gemmgen's and sassgen's loops), not cycle-exact: a first version, correct before
fast. Every kernel is checked with sassas.hazards when built.
"""
from __future__ import annotations

from typing import Optional

from .cubins import build_text
from .f4fused_layout import (BC, BK, BT, COPY_SOURCES, E, LOW, Fused, M_E, M_EW, OTHER, ROW, SMEM_BYTES_PERSISTENT, THREADS,
                             U_E, V_E, V_OFF, check, exact_magic, m_skew)
from .f4fused_regs import (ACC, ACC2, CH, CNT, LDA, LDA2, LDB, LDB2, MHI, MLO, OUTPUT, OUTPUT_PERSISTENT, RA, RA2, RB,
                           RB2, RS, RT, SETUP, UOFF, UOFF2, UR_CUR, UR_NEXT, UR_STRIDE, USTS, USTS2, VSTS, WIN, WIN_WIDE,
                           WINDOW_POOL, XP, OutputRegs)
from .pieces import address, f43_at_ops, f43_bt_ops, kernel_head, kernel_text, mad, signed_hex
from .plan import Shape, Unsupported
from .sched import PRED_LATENCY, Op, Recorder, Seq, mark_reuse, replay, spread
from .target import DEFAULT_ARCH, target

COPY_GAP = 96              # the loop's FFMA slots from an LDGSTS to the next and to its LDGDEPBAR: the 9
                           # copies spread over 6 channels, not bunched among the LDS.128 (12: 4-9%
                           # slower on the N128 layers, 24: 1-4%, 96 to 124 alike; NOTES.md section 24)
PROLOGUE_COPY_GAP = 4      # cycles between the prologue's copies (as ptxas)
DEPBAR_LEAD = 8            # cycles from the DEPBAR to the BAR
ASYNC_SB = 3               # the copy groups' scoreboard (not in the Seq pools)
LDS_SB, LDG_SB, MISC_SB = (0, 1, 2), (5,), (4,)
COPY_SB = (2,)             # persistent: the next tile's copies' sources (off the epilogue's LDS, 0 and 1)
SLOTS = 128 + 16           # FFMAs a channel: the 16 x 8 tile's, then the 4 x 4 tile's
TRANSFORM_FROM = 7         # the loop's channel where the transform of the next block starts: its
                           # loads issued by slot ~184, ~830 FFMA slots of latency (5 and 6 measured
                           # 2-5% slower, NOTES.md section 16)
WINDOW_ROW0, WINDOW_ROW_GAP = 18, 28   # FFMA slots of the window rows' R2P: the loads by slot ~184
# The loop's shared loads of channel c + 1, during channel c: B on scoreboard 0, A's row quads
# 0 and 2 on 1, 1 and 3 (and the small tile's operands, loaded as channel c + 1 starts) on 2, so
# that the first FFMA of a quad never waits for the quad loaded just before it
B_SB, A_SB = (0,), ((1,), (2,))

PARAMS = (("x", 8), ("u", 8), ("y", 8))
P_X, P_U, P_Y = 0x0, 0x8, 0x10
U_UR = 6                   # U's base: the copies read [R.U32 + UR6]

BIG = 32                   # positions of the 16 x 8 thread tiles (8 threads a position); the other
                           # 4 take a 4 x 4 tile of every thread (64 threads a position)

EPILOGUE_PIPELINE = True   # the epilogue's next (k, t) pair's 36 LDS before this pair's transforms and stores
WIDE_LOADS = True          # NCHW, W % 4 == 0 (W % 2 == 0): a window row's columns 1-4 by one LDG.128
                           # (two LDG.64), the window in WIN_WIDE
PERSISTENT = True          # blocks that take the tiles in turns, one an SM, the next tile's copies, window
                           # loads and transform inside this tile's epilogue (off: a block a tile)
INTERLEAVE_SETUP = True    # persistent: the next tile's set-up and start among this tile's staging, the
                           # store masks among the first M loads (off: one after the other)
FILTER_BLOCKS_FIRST = True  # persistent: the tile numbers run through the filter blocks first (the blocks
                           # that read the same windows at once: the second read from L2), then the tiles


def signed_offset(v: int) -> str:
    """` + 0x10` or ` - 0x10` (a negative offset spelled `-0x10` right after a register is read as
    a second operand by the parser: the spaces keep it an offset)."""
    return f" + {v:#x}" if v >= 0 else f" - {-v:#x}"



def wide_loads(s: Shape, layout: str) -> int:
    """Columns a window load reads (1, 2 or 4): NCHW rows of W % 4 == 0 (% 2) floats keep the
    window's columns 1-4 in aligned groups (of x 16-byte aligned: Generator's `aligned`; W % 4 == 0
    and y aligned too: a tile row of y by one STG.128, W % 2 == 0 two STG.64)."""
    if not WIDE_LOADS or layout != "NCHW":
        return 1
    return 4 if s.W % 4 == 0 else 2 if s.W % 2 == 0 else 1


def persistent(arch: str = DEFAULT_ARCH) -> bool:
    """Whether the kernel for arch has persistent blocks (PERSISTENT, where shared memory fits)."""
    return PERSISTENT and SMEM_BYTES_PERSISTENT <= target(arch).max_smem


def fused(s: Shape, parts: int = 1, layout: str = "NCHW", arch: str = DEFAULT_ARCH) -> Fused:
    """The geometry of the kernel generate() makes now (its launch: grid, shared memory);
    Unsupported where the kernel does not take s."""
    return check(s, parts, layout, persistent(arch))


class Generator:
    def __init__(self, s: Shape, arch: str = DEFAULT_ARCH, parts: int = 1, layout: str = "NCHW", aligned: bool = True):
        self.persistent = persistent(arch)
        self.f = check(s, parts, layout, self.persistent)
        self.s = s
        self.t = target(arch)
        if not self.t.async_copy:
            raise Unsupported(f"{self.t.arch} has no LDGSTS: the fused F(4x4,3x3) kernel copies U by LDGSTS")
        if self.f.smem_bytes > self.t.max_smem:
            raise Unsupported(f"{self.t.arch}: the fused F(4x4,3x3) kernel takes {self.f.smem_bytes} bytes of shared "
                              f"memory a block, the arch {self.t.max_smem}")
        # the buffer the prologue's copies write (the read one: first ^ OTHER)
        self.first = LOW ^ OTHER if self.persistent else 0
        self.wide = wide_loads(s, layout) if aligned else 1
        self.win = WIN_WIDE if self.wide > 1 else WIN
        used = {r for row in self.win for r in row}
        self.copy_src = (UOFF,) + tuple(r for r in WINDOW_POOL if r not in used)[:COPY_SOURCES - 1]

    def seq(self, yield_all: bool = True) -> Seq:
        return Seq(self.t.arch, barriers=LDS_SB + MISC_SB + LDG_SB, yield_all=yield_all, spell=self.t.spell)

    # ---- index arithmetic -------------------------------------------------------------
    def divide(self, q: Seq, quot: int, rem: Optional[int], n: int, d: int, n_max: int, tmp: int) -> None:
        """R<quot> = R<n> / d, R<rem> = R<n> % d (rem None: not wanted); quot != n."""
        m = exact_magic(d, n_max)
        if m is None:
            q.op(f"MOV R{quot}, R{n}")
            if rem is not None:
                q.op(f"MOV R{rem}, RZ")
            return
        q.op(f"MOV R{tmp}, {m:#x}")
        q.op(f"IMAD.HI.U32 R{quot}, R{n}, R{tmp}, RZ")
        if rem is not None:
            mad(q, rem, quot, -d, n, tmp)

    def tile_of(self, q: Seq, tid: int, bx: int, r: list[int]) -> tuple[int, int, int, int]:
        """(t, n, th, tw) of thread tid's tile column t = tid % 32 in block bx; P0 = the tile
        exists (a tile past the last one is computed as tile 0, its loads and stores off).
        Uses r[0..6]."""
        f = self.f
        t, tg, q1, n, th, tw = r[:6]
        tmp = r[6]
        q.op(f"LOP3.LUT R{t}, R{tid}, 0x1f, RZ, 0xc0, !PT")
        mad(q, tg, bx, BT, t, tmp)
        q.op(f"ISETP.LT.U32.AND P0, PT, R{tg}, {f.tiles:#x}, PT")
        q.op(f"SEL R{tg}, R{tg}, RZ, P0")
        n_max = f.grid()[0] * BT
        if f.layout == "NCHW":          # tg = (n TH + th) TW + tw
            self.divide(q, q1, tw, tg, self.s.TW4, n_max, tmp)
            self.divide(q, n, th, q1, self.s.TH4, n_max // self.s.TW4 + 1, tmp)
        else:                           # tg = (th TW + tw) N + n
            self.divide(q, q1, n, tg, self.s.N, n_max, tmp)
            self.divide(q, th, tw, q1, self.s.TW4, n_max // self.s.N + 1, tmp)
        return t, n, th, tw

    def bound_mask(self, q: Seq, dst: int, first: int, count: int, limit: int, shift: int, tmp: list[int]) -> None:
        """R<dst> = sum over i < count of ((R<first> + i) <u limit) << (shift * i): which rows or
        columns of a window lie inside the image (first may be -1)."""
        a, b = tmp[:2]
        q.op(f"MOV R{dst}, RZ")
        for i in range(count):
            q.op(f"IADD3 R{a}, R{first}, {i:#x}, RZ")
            q.op(f"ISETP.LT.U32.AND P1, PT, R{a}, {limit:#x}, PT")
            q.op(f"SEL R{b}, RZ, {1 << (shift * i):#x}, !P1")
            q.op(f"IADD3 R{dst}, R{dst}, R{b}, RZ")

    def pointer(self, q: Seq, dst: int, off: int, param: int, tmp: int) -> None:
        """R<dst>:R<dst+1> = the parameter's pointer + 4 * R<off> (a signed 32-bit element
        offset; R<off> and R<tmp> pair free after)."""
        q.op(f"SHF.L.U32 R{off}, R{off}, 0x2, RZ")
        q.op(f"SHF.R.S32.HI R{off + 1}, RZ, 0x1f, R{off}")
        q.op(f"LDC.64 R{tmp}, {self.t.param(param)}")
        q.op(f"IADD3 R{dst}, P1, R{off}, R{tmp}, RZ")
        q.op(f"IADD3.X R{dst + 1}, R{off + 1}, R{tmp + 1}, RZ, P1, !PT")

    def offset(self, q: Seq, off: int, n: int, c: int, channels: int, h: int, w: int, tmp: int) -> None:
        """R<off> = the element offset of (image R<n>, channel R<c> of `channels`, row R<h>,
        column R<w>) in NCHW, or in CHWN (((c H + h) W + w) N + n)."""
        s = self.s
        if self.f.layout == "NCHW":
            mad(q, off, n, channels, c, tmp)
            mad(q, off, off, s.H, h, tmp)
            mad(q, off, off, s.W, w, tmp)
        else:
            mad(q, off, c, s.H, h, tmp)
            mad(q, off, off, s.W, w, tmp)
            mad(q, off, off, s.N, n, tmp)

    # ---- the pieces of an iteration ----------------------------------------------------
    def copy_ops(self) -> list[str]:
        """Block i + 1's U rows into the write buffer, every copy a warp's 4 whole rows (512
        bytes: 4 shared-memory wavefronts, 4 global lines): chunk tid % 8 of the rows (tid / 8,
        c) of the big positions, c = 0..7 (8 LDGSTS.128, offsets by immediates), and of row
        tid / 8 of the small positions' 32. (A row a thread, 8 chunks by 8 copies, put 32
        threads' 16 bytes in 32 lines and cost ~30 wavefronts a copy: NOTES.md section 16.)"""
        out = []
        for j in range(BC):
            b, imm = self.f.copy_source(j)
            out.append(f"LDGSTS.E.BYPASS.128 [R{USTS}+{ROW * j:#x}], [R{self.copy_src[b]}.U32+UR{U_UR}{signed_offset(imm)}]")
        return out + [f"LDGSTS.E.BYPASS.128 [R{USTS2}], [R{UOFF2}.U32+UR{U_UR}]"]

    def window_setup(self) -> list[str]:
        """Before the window loads: the masks, zero if the window's channel is past C, and
        the zeros of the window's registers (the transform overwrote them)."""
        out = [f"ISETP.LT.AND P6, PT, R{CH}, {self.s.C:#x}, PT",
               f"SEL R{RS}, R{MLO}, RZ, P6", f"SEL R{RS + 1}, R{MHI}, RZ, P6"]
        return out + [f"MOV R{self.win[i][j]}, RZ" for i in range(6) for j in range(6)]

    def window_row(self, i: int) -> list[str]:
        """Row i of the window: its predicates (R2P of mask byte i), 6 predicated loads."""
        reg, byte = (RS, i) if i < 4 else (RS + 1, i - 4)
        out = [f"R2P PR, R{reg}{'.B%d' % byte if byte else ''}, 0x3f"]
        # columns j .. j + width - 1 by one load, predicated on column j (the others are inside
        # the image with it: an aligned group of an even W)
        groups = [(0, 1)] + [(j, self.wide) for j in range(1, 5, self.wide)] + [(5, 1)] if self.wide > 1 else \
            [(j, 1) for j in range(6)]
        return out + [f"@P{j} LDG.E{'.%d' % (32 * w) if w > 1 else ''}{self.t.scope} R{self.win[i][j]}, "
                      f"{self.t.global_address(XP, 4 * (i * self.s.W + j) * self.f.px)}" for j, w in groups]

    @staticmethod
    def interleave(groups: list[list[str]]) -> list[str]:
        out = []
        for step in range(max(len(g) for g in groups)):
            out += [g[step] for g in groups if step < len(g)]
        return out

    def transform_and_store(self) -> list[str]:
        """B^T d B of the window in place, 3 columns (then 3 rows) at a time on 12 spares (RT),
        each half of the rows followed by the stores of its 18 positions (e = 6i + j)."""
        ops, cols = [], {}
        for half in range(2):
            group = []
            for n, j in enumerate(range(3 * half, 3 * half + 3)):
                o, where = f43_bt_ops([self.win[i][j] for i in range(6)], list(range(RT + 4 * n, RT + 4 * n + 4)))
                group.append(o)
                cols[j] = where
            ops += self.interleave(group)
        where = {}
        for half in range(2):
            group = []
            for n, i in enumerate(range(3 * half, 3 * half + 3)):
                o, w = f43_bt_ops([cols[j][i] for j in range(6)], list(range(RT + 4 * n, RT + 4 * n + 4)))
                group.append(o)
                for j in range(6):
                    where[6 * i + j] = w[j]
            ops += self.interleave(group)
            # the 18 values of these rows to V[e][cc][t] (the write buffer)
            ops += [f"STS [R{VSTS}+{e * V_E:#x}], R{where[e]}" for e in range(18 * half, 18 * half + 18)]
        return ops

    @staticmethod
    def store_barriers(text: str) -> Optional[tuple]:
        """The scoreboards of one of transform_and_store's instructions: its STS read their
        registers late (MISC_SB), the FADD/FFMA take none."""
        return MISC_SB if text.startswith("STS") else None

    def stage_end(self, q: Seq, inline: bool = False) -> None:
        """Block i + 1: transform and store the window, move the window on to the next
        channels, wait for the copies (unless the loop did all that among its FFMAs); BAR; the
        buffers swap."""
        if not inline:
            for text in self.transform_and_store():
                q.op(text, barriers=self.store_barriers(text))
            for text in self.window_advance():
                q.op(text)
            q.op(self.depbar(), y=True, stall=4)
            q.op("NOP", stall=DEPBAR_LEAD)
        q.op("BAR.SYNC.DEFER_BLOCKING 0x0", y=True, wait=q.wait_all())
        for reg in (LDA, LDB, LDA2, LDB2, USTS, USTS2, VSTS):
            q.op(f"LOP3.LUT R{reg}, R{reg}, {OTHER:#x}, RZ, 0x3c, !PT")

    def copies(self, q: Seq, sources=MISC_SB, advance: bool = True, read_only: bool = False) -> None:
        """The first chunk's copies, their sources' reads on a barrier of `sources`; then (advance)
        the sources on to the next chunk (that move waits until the copies have read them).
        read_only: as Seq.op's (U is not written while the kernel runs)."""
        for c in self.copy_ops():
            q.op(c, barriers=sources, stall=PROLOGUE_COPY_GAP, read_only=read_only)
        q.op("LDGDEPBAR", y=True, stall=PROLOGUE_COPY_GAP).wb = ASYNC_SB
        if advance:
            for text in self.copy_advance():
                q.op(text)

    def window_advance(self) -> list[str]:
        """The window pointer and channel to the next 8 channels (64-bit: the carry, then the
        high word)."""
        return [f"IADD3 R{XP}, P1, R{XP}, {BC * self.f.plane * 4:#x}, RZ",
                f"IADD3.X R{XP + 1}, RZ, R{XP + 1}, RZ, P1, !PT", f"IADD3 R{CH}, R{CH}, {BC:#x}, RZ"]

    @staticmethod
    def depbar() -> str:
        return f"DEPBAR.LE SB{ASYNC_SB}, 0x0"

    def copy_advance(self) -> list[str]:
        return [f"IADD3 R{reg}, R{reg}, {BC * self.f.Kp * 4:#x}, RZ"
                for reg in self.copy_src[:self.f.copy_sources] + (UOFF2,)]

    # ---- prologue -----------------------------------------------------------------------
    def thread_setup(self, q: Seq) -> None:
        """What a thread keeps for every tile: the shared addresses of its loads (the buffer the
        first chunk is read from), copies and stores (the buffer it is written to), U's base."""
        tid, e, sub, kq, tq, cc, e2, kq2, t, tmp = range(10)
        q.op(f"S2R R{tid}, SR_TID.X")
        for text in self.t.desc_load():
            q.op(text)
        q.op(f"ULDC.64 UR{U_UR}, {self.t.param(P_U)}")
        q.op(f"SHF.R.U32.HI R{e}, RZ, 0x3, R{tid}")
        q.op(f"LOP3.LUT R{sub}, R{tid}, 0x7, RZ, 0xc0, !PT")
        q.op(f"SHF.R.U32.HI R{kq}, RZ, 0x2, R{sub}")
        q.op(f"LOP3.LUT R{tq}, R{sub}, 0x3, RZ, 0xc0, !PT")
        q.op(f"SHF.R.U32.HI R{cc}, RZ, 0x5, R{tid}")
        write = self.t.smem_base + self.first
        read = self.t.smem_base + (self.first ^ OTHER)
        # reads: A at e*U_E + 64 kq, B at V_OFF + e*V_E + 32 tq; copies: chunk sub of U rows
        # (e, 0..7); V stores at (cc, t)
        address(q, LDA, ((e, U_E), (kq, 64)), read, tmp)
        address(q, LDB, ((e, V_E), (tq, 32)), read + V_OFF, tmp)
        address(q, USTS, ((e, U_E), (sub, 16)), write, tmp)
        # the small positions: e2 = 32 + tid / 64; kq2 = tid / 8 % 8 (also the channel of the
        # row this thread copies a chunk of), tq2 = sub (also the chunk)
        q.op(f"SHF.R.U32.HI R{e2}, RZ, 0x6, R{tid}")
        q.op(f"IADD3 R{e2}, R{e2}, {BIG:#x}, RZ")
        q.op(f"LOP3.LUT R{kq2}, R{e}, 0x7, RZ, 0xc0, !PT")
        address(q, LDA2, ((e2, U_E), (kq2, 16)), read, tmp)
        address(q, LDB2, ((e2, V_E), (sub, 16)), read + V_OFF, tmp)
        address(q, USTS2, ((e2, U_E), (kq2, ROW), (sub, 16)), write, tmp)
        q.op(f"LOP3.LUT R{t}, R{tid}, 0x1f, RZ, 0xc0, !PT")
        address(q, VSTS, ((cc, ROW), (t, 4)), write + V_OFF, tmp)

    def block_ids(self, q: Seq, bx: int, by: int, bz: Optional[int], r: list[int], block_ur: Optional[int]) -> None:
        """R<bx>, R<by> (and R<bz>) of the block tile: the CTA's ids, or of the persistent
        block's tile number in UR<block_ur> (y first where FILTER_BLOCKS_FIRST, else x; z last).
        Uses r[0..2]."""
        if block_ur is None:
            q.op(f"S2R R{bx}, SR_CTAID.X")
            q.op(f"S2R R{by}, SR_CTAID.Y")
            if bz is not None:
                q.op(f"S2R R{bz}, SR_CTAID.Z")
            return
        num, rest, tmp = r[:3]
        gx, gy, _ = self.f.grid()
        (first, d1), (second, d2) = ((by, gy), (bx, gx)) if FILTER_BLOCKS_FIRST else ((bx, gx), (by, gy))
        q.op(f"MOV R{num}, UR{block_ur}")
        self.divide(q, rest, first, num, d1, self.f.blocks, tmp)
        if bz is None:
            bz = num
        self.divide(q, bz, second, rest, d2, self.f.blocks, tmp)

    def tile_setup(self, q: Seq, block_ur: Optional[int]) -> None:
        """The block tile's U sources (UOFF, the other copy sources, UOFF2), window pointer (XP),
        channel (CH), window masks (MLO, MHI) and loop count (CNT); the tile from the CTA's ids or
        (persistent) from UR<block_ur>. Its scratch registers are the loop's operands (SETUP)."""
        s, f = self.s, self.f
        tid, e, sub, cc, e2, kq2, bx, by, bz, c0, tmp = SETUP[:11]
        r = SETUP[11:]
        q.op(f"S2R R{tid}, SR_TID.X")
        self.block_ids(q, bx, by, bz if f.parts > 1 else None, r, block_ur)
        q.op(f"SHF.R.U32.HI R{e}, RZ, 0x3, R{tid}")
        q.op(f"LOP3.LUT R{sub}, R{tid}, 0x7, RZ, 0xc0, !PT")
        q.op(f"SHF.R.U32.HI R{cc}, RZ, 0x5, R{tid}")
        if f.parts > 1:                 # part z: channels from z Cp / parts
            mad(q, c0, bz, f.Cp // f.parts, None, tmp)
        else:
            q.op(f"MOV R{c0}, RZ")
        mad(q, UOFF, e, f.Cp, c0, tmp)
        mad(q, UOFF, UOFF, f.Kp, None, tmp)
        mad(q, UOFF, by, BK, UOFF, tmp)
        mad(q, UOFF, sub, 4, UOFF, tmp)
        q.op(f"SHF.L.U32 R{UOFF}, R{UOFF}, 0x2, RZ")
        for b in reversed(range(f.copy_sources)):      # (copy_src[0] is UOFF: last)
            if f.copy_source_row(b):
                q.op(f"IADD3 R{self.copy_src[b]}, R{UOFF}, {f.copy_source_row(b) * f.Kp * 4:#x}, RZ")
        q.op(f"SHF.R.U32.HI R{e2}, RZ, 0x6, R{tid}")
        q.op(f"IADD3 R{e2}, R{e2}, {BIG:#x}, RZ")
        q.op(f"LOP3.LUT R{kq2}, R{e}, 0x7, RZ, 0xc0, !PT")
        mad(q, UOFF2, e2, f.Cp, kq2, tmp)
        q.op(f"IADD3 R{UOFF2}, R{UOFF2}, R{c0}, RZ")
        mad(q, UOFF2, UOFF2, f.Kp, None, tmp)
        mad(q, UOFF2, by, BK, UOFF2, tmp)
        mad(q, UOFF2, sub, 4, UOFF2, tmp)
        q.op(f"SHF.L.U32 R{UOFF2}, R{UOFF2}, 0x2, RZ")
        t, n, th, tw = self.tile_of(q, tid, bx, r)
        q.op(f"IADD3 R{CH}, R{cc}, R{c0}, RZ")
        # the window at (4 th - 1, 4 tw - 1): its rows and columns inside the image
        h0, w0, cm, lo, hi, t1, t2, t3 = r[7:15]
        off = r[17]                     # an even pair (R172) and the pair after it
        mad(q, h0, th, 4, None, tmp)
        q.op(f"IADD3 R{h0}, R{h0}, -0x1, RZ")
        mad(q, w0, tw, 4, None, tmp)
        q.op(f"IADD3 R{w0}, R{w0}, -0x1, RZ")
        self.bound_mask(q, cm, w0, 6, s.W, 1, [t1, t2])
        q.op(f"SEL R{cm}, R{cm}, RZ, P0")
        self.bound_mask(q, lo, h0, 4, s.H, 8, [t1, t2])
        q.op(f"IADD3 R{t3}, R{h0}, 0x4, RZ")
        self.bound_mask(q, hi, t3, 2, s.H, 8, [t1, t2])
        q.op(f"IMAD R{MLO}, R{cm}, R{lo}, RZ")
        q.op(f"IMAD R{MHI}, R{cm}, R{hi}, RZ")
        self.offset(q, off, n, CH, s.C, h0, w0, tmp)
        self.pointer(q, XP, off, P_X, off + 2)
        q.op(f"MOV R{CNT}, {f.iterations:#x}")

    def tile_start(self, q: Seq, sources=MISC_SB, advance: bool = True, read_only: bool = False) -> None:
        """The tile's first chunk in flight: its copies (as `copies`), the window's zeros and loads
        (read_only: as Seq.op's, x and U are not written while the kernel runs, so that later
        barriers and stores need not wait for these loads)."""
        self.copies(q, sources, advance, read_only)
        for text in self.window_setup():
            q.op(text)
        for i in range(6):
            for text in self.window_row(i):
                q.op(text, barriers=LDG_SB, read_only=read_only)

    def zero_accumulators(self, q: Seq) -> None:
        for a in range(0, 128 + 16, 2):
            q.op(f"CS2R R{a}, SRZ")

    def prologue(self) -> list[str]:
        """The thread's addresses; the first tile's set-up, copies and window; the accumulators
        while the loads fly; the window's transform and stores (stage_end)."""
        q = self.seq()
        if self.persistent:             # block b takes the tiles b, b + grid, b + 2 grid, ...
            q.op(f"S2UR UR{UR_CUR}, SR_CTAID.X")
            q.op(f"ULDC UR{UR_STRIDE}, c[0x0][{self.t.grid_dim_x:#x}]")      # gridDim.x
        self.thread_setup(q)
        self.tile_setup(q, UR_CUR if self.persistent else None)
        self.tile_start(q)
        self.zero_accumulators(q)
        self.stage_end(q)
        q.op("NOP", wait=q.wait_all())
        return q.lines()

    # ---- the loop body --------------------------------------------------------------
    def lds_a(self, ch: int, quad: int) -> str:
        return f"LDS.128 R{RA + 4 * quad}, [R{LDA}+{ch * ROW + 16 * quad:#x}]"

    def lds_b(self, ch: int, half: int) -> str:
        return f"LDS.128 R{RB + 8 * (ch % 2) + 4 * half}, [R{LDB}+{ch * ROW + 16 * half:#x}]"

    def lds_small(self, ch: int) -> list[str]:
        return [f"LDS.128 R{RA2}, [R{LDA2}+{ch * ROW:#x}]", f"LDS.128 R{RB2}, [R{LDB2}+{ch * ROW:#x}]"]

    def ffma_slots(self, ch: int) -> list[tuple[int, int, int]]:
        """A channel's FFMAs (accumulator, A, B): the 16 x 8 tile zigzag (B reused at the row
        turns), then the 4 x 4 tile's."""
        out = []
        for i in range(16):
            for jj in range(8):
                j = jj if i % 2 == 0 else 7 - jj
                out.append((ACC(i, j), RA + i, RB + 8 * (ch % 2) + j))
        for i in range(4):
            for jj in range(4):
                j = jj if i % 2 == 0 else 3 - jj
                out.append((ACC2(i, j), RA2 + i, RB2 + j))
        return out

    def loop_body(self) -> list[Op]:
        """One iteration: the GEMM of the 8 channels of the read buffer, with the next
        channel's operands loaded behind the FFMAs that free their registers, and among the
        FFMAs block i + 1's copies and window loads (channels 0-1), transform and stores
        (channels TRANSFORM_FROM..7), the window's move, the loop test, the copies' wait and
        their sources' move; then the BAR and the buffer swap (stage_end), the branch."""
        ins: dict[int, list[tuple[str, tuple]]] = {}
        slots = SLOTS

        def at(slot: int, text: str, barriers=()) -> None:
            ins.setdefault(slot, []).append((text, barriers))

        copies = self.copy_ops()                        # COPY_GAP FFMA slots apart
        for m, c in enumerate(copies):
            at(8 + COPY_GAP * m, c, MISC_SB)
        at(8 + COPY_GAP * len(copies), "LDGDEPBAR")
        # the window loads as early as the registers allow (the BAR before the loop's first
        # FFMA saw the stores that read them): the channel test, PRED_LATENCY slots later the
        # masks' SELs, the zeros, then row by row its R2P and, PRED_LATENCY slots after it, its
        # 6 loads 2 slots apart (each R2P after the loads of the row before): all in by slot
        # WINDOW_ROW0 + 6 WINDOW_ROW_GAP, ~TRANSFORM_FROM channels before the transform
        setup = self.window_setup()
        at(0, setup[0])
        at(PRED_LATENCY + 2, setup[1])
        at(PRED_LATENCY + 3, setup[2])
        for n, text in enumerate(setup[3:]):
            at(1 + n, text)
        for i in range(6):
            row = self.window_row(i)
            at(WINDOW_ROW0 + WINDOW_ROW_GAP * i, row[0])
            for n, text in enumerate(row[1:]):
                at(WINDOW_ROW0 + WINDOW_ROW_GAP * i + PRED_LATENCY + 2 + 2 * n, text, LDG_SB)
        # block i + 1's transform and stores spread over channels TRANSFORM_FROM..7
        work = self.transform_and_store()
        first, last = TRANSFORM_FROM * slots, BC * slots - 8
        for n, text in enumerate(work):
            at(first + n * (last - first) // len(work), text, self.store_barriers(text))
        # the window moves on once its loads are in (the transform waited for them), the high
        # word PRED_LATENCY slots after the carry; the loop test in channel 6 (P6: no R2P after
        # it); the copies' wait DEPBAR_LEAD slots before the BAR that follows the last FFMA
        adv = self.window_advance()
        at(first + 8, adv[0])
        at(first + 8 + PRED_LATENCY + 2, adv[1])
        at(first + 9, adv[2])
        at(6 * slots, f"IADD3 R{CNT}, R{CNT}, -0x1, RZ")
        at(6 * slots + 12, f"ISETP.NE.AND P6, PT, R{CNT}, RZ, PT")
        at(BC * slots - DEPBAR_LEAD, self.depbar())
        # the copies' sources move on after the DEPBAR: an IADD3 right after the copies waited
        # (long scoreboard) until the LDGSTS had read the register, ~7% of the stall samples
        for n, text in enumerate(self.copy_advance()):
            at(BC * slots - DEPBAR_LEAD + 1 + n, text)
        for ch in range(BC - 1):
            for h in range(2):
                at(ch * slots + 2 + 10 * h, self.lds_b(ch + 1, h), B_SB)
            # quad q after its last FFMA in channel ch; quad 3 and the small tile's operands
            # after channel ch's small FFMAs (whose operands share quad 3's scoreboard)
            for quad in range(3):
                at(ch * slots + 32 * (quad + 1), self.lds_a(ch + 1, quad), A_SB[quad % 2])
            for text in self.lds_small(ch + 1) + [self.lds_a(ch + 1, 3)]:
                at((ch + 1) * slots, text, A_SB[1])
        if max(ins) >= BC * slots:
            raise ValueError(f"loop placement past the last FFMA slot: {max(ins)} (TRANSFORM_FROM {TRANSFORM_FROM})")
        q = self.seq(yield_all=False)
        for quad in range(4):
            q.op(self.lds_a(0, quad), barriers=LDS_SB)
        for text in self.lds_b(0, 0), self.lds_b(0, 1), *self.lds_small(0):
            q.op(text, barriers=LDS_SB)
        for ch in range(BC):
            for k, (acc, a, b) in enumerate(self.ffma_slots(ch)):
                for text, bars in ins.get(ch * slots + k, []):
                    o = q.op(text, barriers=bars or None)
                    if text == "LDGDEPBAR":
                        o.wb, o.y = ASYNC_SB, True
                    if text.startswith("DEPBAR"):
                        o.y, o.stall = True, max(o.stall, 4)
                o = q.op(f"FFMA R{acc}, R{a}, R{b}, R{acc}")
                o.ffma = (a, b)
        self.stage_end(q, inline=True)
        q.op("NOP", wait=q.wait_all())
        body = list(q.ops)
        body.append(Op("@P6 BRA LOOP", y=True, stall=5))
        mark_reuse(body)
        return body

    # ---- epilogue ---------------------------------------------------------------------
    def stage_accumulators(self, q, temps=range(RA, RA + 7)) -> None:
        """The accumulators as M[e][k][t] (every warp is past the loop's last BAR, and nothing
        reads the buffers after it); the BAR that publishes them is the caller's. 7 scratch
        registers `temps`."""
        tid, e, sub, kq, tq, mb, tmp = temps
        q.op(f"S2R R{tid}, SR_TID.X")
        q.op(f"SHF.R.U32.HI R{e}, RZ, 0x3, R{tid}")
        q.op(f"LOP3.LUT R{sub}, R{tid}, 0x7, RZ, 0xc0, !PT")
        q.op(f"SHF.R.U32.HI R{kq}, RZ, 0x2, R{sub}")
        q.op(f"LOP3.LUT R{tq}, R{sub}, 0x3, RZ, 0xc0, !PT")
        mad(q, mb, e, M_EW, None, tmp)
        mad(q, mb, kq, 16 * BT + m_skew(16), mb, tmp)       # k = 16 kq + i: skew(16 kq) + skew(i)
        mad(q, mb, tq, 8, mb, tmp)
        q.op(f"SHF.L.U32 R{mb}, R{mb}, 0x2, RZ")
        q.op(f"IADD3 R{mb}, R{mb}, {self.t.smem_base:#x}, RZ")
        for i in range(16):
            for j in range(8):
                q.op(f"STS [R{mb}+{(i * BT + m_skew(i) + j) * 4:#x}], R{ACC(i, j)}", barriers=MISC_SB)
        # the small tile: M[32 + tid / 64][4 kq2 + i][4 sub + j], kq2 = tid / 8 % 8:
        # skew(4 kq2 + i) = 4 (kq2 / 4) + kq2 % 4 (i < 4)
        q.op(f"SHF.R.U32.HI R{kq}, RZ, 0x6, R{tid}")
        q.op(f"IADD3 R{kq}, R{kq}, {BIG:#x}, RZ")
        q.op(f"LOP3.LUT R{e}, R{e}, 0x7, RZ, 0xc0, !PT")
        mad(q, mb, kq, M_EW, None, tmp)
        mad(q, mb, e, 4 * BT, mb, tmp)
        q.op(f"LOP3.LUT R{tq}, R{e}, 0x3, RZ, 0xc0, !PT")
        q.op(f"IADD3 R{mb}, R{mb}, R{tq}, RZ")
        q.op(f"SHF.R.U32.HI R{tq}, RZ, 0x2, R{e}")
        mad(q, mb, tq, 4, mb, tmp)
        mad(q, mb, sub, 4, mb, tmp)
        q.op(f"SHF.L.U32 R{mb}, R{mb}, 0x2, RZ")
        q.op(f"IADD3 R{mb}, R{mb}, {self.t.smem_base:#x}, RZ")
        for i in range(4):
            for j in range(4):
                q.op(f"STS [R{mb}+{(i * BT + j) * 4:#x}], R{ACC2(i, j)}", barriers=MISC_SB)

    def output_address(self, q, g: "OutputRegs") -> None:
        """Thread tid's pairs (k, t) = (32 by + tid / 32 + 8 r, tid % 32), r < 4: R<g.tid>,
        R<g.kr> = tid / 32 and the M read address R<g.ro>: at word 32 k + skew(k) + t, k = kr + 8 pr:
        skew = kr / 4 + 2 (pr % 2) + 4 (pr / 2) (kr < 8: no carries), the pr part in the immediates."""
        t, tmp = g.tile[0], g.tmp
        q.op(f"S2R R{g.tid}, SR_TID.X")
        q.op(f"SHF.R.U32.HI R{g.kr}, RZ, 0x5, R{g.tid}")
        q.op(f"LOP3.LUT R{t}, R{g.tid}, 0x1f, RZ, 0xc0, !PT")
        mad(q, g.ro, g.kr, BT, t, tmp)
        q.op(f"SHF.R.U32.HI R{tmp}, RZ, 0x2, R{g.kr}")
        q.op(f"IADD3 R{g.ro}, R{g.ro}, R{tmp}, RZ")
        q.op(f"SHF.L.U32 R{g.ro}, R{g.ro}, 0x2, RZ")
        q.op(f"IADD3 R{g.ro}, R{g.ro}, {self.t.smem_base:#x}, RZ")

    def output_setup(self, q, g: "OutputRegs", block_ur: Optional[int]) -> None:
        """After output_address: the 4 pairs' store masks and output pointers (of the block
        tile in UR<block_ur>, persistent, or of the CTA)."""
        s, f = self.s, self.f
        tmp = g.tmp
        self.block_ids(q, g.bx, g.by, None, list(g.ids), block_ur)
        t, n, th, tw = self.tile_of(q, g.tid, g.bx, list(g.tile))
        mad(q, g.h0, th, 4, None, tmp)
        mad(q, g.w0, tw, 4, None, tmp)
        self.bound_mask(q, g.cm, g.w0, 4, s.W, 1, list(g.bound))
        q.op(f"SEL R{g.cm}, R{g.cm}, RZ, P0")
        self.bound_mask(q, g.rm, g.h0, 4, s.H, 8, list(g.bound))
        q.op(f"IMAD R{g.om}, R{g.cm}, R{g.rm}, RZ")
        mad(q, g.k0, g.by, BK, g.kr, tmp)
        # y + 4 (((n K + k0) H + 4 th) W + 4 tw)
        self.offset(q, g.off, n, g.k0, s.K, g.h0, g.w0, tmp)
        self.pointer(q, g.yps[0], g.off, P_Y, g.ldc)
        # the 4 pairs' output pointers (8 filters apart) up front: an IADD3 moving one pointer
        # after a pair's stores waited (long scoreboard) for the STG to read it
        for a, b in zip(g.yps, g.yps[1:]):
            q.op(f"IADD3 R{b}, P1, R{a}, {BC * f.plane * 4:#x}, RZ")
            q.op(f"IADD3.X R{b + 1}, RZ, R{a + 1}, RZ, P1, !PT")
        for pr in range(4):
            q.op(f"ISETP.LT.AND P1, PT, R{g.k0}, {signed_hex(s.K - 8 * pr)}, PT")
            q.op(f"SEL R{g.masks[pr]}, R{g.om}, RZ, P1")

    def output_ops(self, q, g: "OutputRegs") -> None:
        """The 4 pairs' M loads, A^T m A and stores (into q, a Seq or a Recorder): the next pair's loads
        before this pair's transforms and stores (EPILOGUE_PIPELINE; their registers differ: pair pr's
        m in g.pairs[pr % len(g.pairs)]), else one pair after another."""
        s, f = self.s, self.f
        store = f"{self.t.reduce}.E.ADD.F32.FTZ.RN.STRONG.GPU" if f.parts > 1 else f"STG.E{self.t.scope}"
        spares = g.spares
        # NCHW, W % 4 == 0 (W % 2 == 0), x and y 16-byte aligned, no split: a tile row of y by one
        # STG.128 (two STG.64; the columns of one store inside the image together: the mask's first)
        wide_out = self.wide > 1 and f.parts == 1
        def m_of(pr: int) -> tuple:
            return g.pairs[pr % len(g.pairs)]

        def load(pr: int) -> None:      # pair pr's 36 m, on a scoreboard of its own (pr % 2)
            for ee in range(E):
                q.op(f"LDS R{m_of(pr)[ee]}, [R{g.ro}+{ee * M_E + pr * 8 * ROW + 4 * m_skew(8 * pr):#x}]",
                     barriers=(LDS_SB[pr % 2],))

        def finish(pr: int) -> None:    # A^T m A and the stores of pair pr
            m = m_of(pr)
            # columns (6 -> 4 rows), then rows (6 -> 4)
            outs, group = {}, []
            for j in range(6):
                o, w = f43_at_ops([m[6 * i + j] for i in range(6)], spares[2 * j:2 * j + 2])
                group.append(o)
                outs[j] = w
            for text in self.interleave(group):
                q.op(text)
            res, group = {}, []
            for a in range(4):
                o, w = f43_at_ops([outs[j][a] for j in range(6)], spares[2 * a:2 * a + 2])
                group.append(o)
                res[a] = w
            for text in self.interleave(group):
                q.op(text)
            for a in range(4):
                q.op(f"R2P PR, R{g.masks[pr]}{'.B%d' % a if a else ''}, 0xf")
                if wide_out:            # the row's 4 outputs into an aligned quad (one a row), STG.128 or 2 STG.64
                    quad = g.quads + 4 * a
                    for b in range(4):
                        q.op(f"MOV R{quad + b}, R{res[a][b]}")
                    for b in range(0, 4, self.wide):
                        q.op(f"@P{b} STG.E.{32 * self.wide}{self.t.scope} "
                             f"{self.t.global_address(g.yps[pr], 4 * (a * s.W + b))}, R{quad + b}")
                    continue
                for b in range(4):
                    q.op(f"@P{b} {store} {self.t.global_address(g.yps[pr], 4 * (a * s.W + b) * f.px)}, R{res[a][b]}")

        if EPILOGUE_PIPELINE:
            load(0)
            for pr in range(4):
                if pr + 1 < 4:
                    load(pr + 1)
                finish(pr)
        else:
            for pr in range(4):
                load(pr)
                finish(pr)

    def epilogue(self) -> list[str]:
        """The block tile's outputs (M through shared memory, A^T m A, the stores), then EXIT."""
        q = self.seq()
        self.stage_accumulators(q)
        q.op("BAR.SYNC.DEFER_BLOCKING 0x0", wait=q.wait_all())
        g = OUTPUT_PERSISTENT if self.persistent else OUTPUT
        self.output_address(q, g)
        self.output_setup(q, g, UR_CUR if self.persistent else None)
        self.output_ops(q, g)
        q.op("EXIT")
        return q.lines()

    def next_tile(self) -> list[str]:
        """Persistent blocks, after the loop: to LAST (this tile's epilogue, EXIT) if this was the
        block's last tile; else the next tile's set-up, copies and window loads, this tile's
        epilogue with the next window's transform and stores among its output transforms, the
        next tile's accumulators zeroed, BAR, and back to the loop."""
        f = self.f
        q = self.seq()
        q.op(f"UIADD3 UR{UR_NEXT}, UR{UR_CUR}, UR{UR_STRIDE}, URZ")
        q.op(f"MOV R{SETUP[0]}, UR{UR_NEXT}")
        q.op(f"ISETP.GE.AND P0, PT, R{SETUP[0]}, {f.blocks:#x}, PT")
        q.ops[-1].stall = max(q.ops[-1].stall, PRED_LATENCY)
        out = q.lines() + [Op("@P0 BRA LAST", wait=q.wait_all(), y=True, stall=5).line()]
        q = self.seq()
        if f.iterations % 2 == 0:       # the first chunk into the high buffer (past M), as the prologue's
            for reg in (LDA, LDB, LDA2, LDB2, USTS, USTS2, VSTS):
                q.op(f"LOP3.LUT R{reg}, R{reg}, {OTHER:#x}, RZ, 0x3c, !PT")
        # independent streams written apart and issued interleaved (their ALU chains in the
        # memory instructions' shadow): the next tile's set-up, copies and window loads among this
        # tile's staging (its scratch in RT, free until the transform)
        start, staging = Recorder(), Recorder()
        self.tile_setup(start, UR_NEXT)
        self.tile_start(start, COPY_SB, advance=False, read_only=True)
        self.stage_accumulators(staging, range(RT, RT + 7))
        replay(q, spread(staging.items, start.items) if INTERLEAVE_SETUP else start.items + staging.items)
        # the staging's BAR need not wait for the window loads (nothing reads them before the
        # transform) nor for the copies to read their sources (COPY_SB: it waited ~17% of this
        # path's stall samples on them, Conv2/N128), whose move waits until the outputs are out
        q.op("BAR.SYNC.DEFER_BLOCKING 0x0", wait=q.wait_all() & ~(1 << LDG_SB[0]) & ~(1 << COPY_SB[0]))
        g = OUTPUT_PERSISTENT
        self.output_address(q, g)
        masks = Recorder()
        self.output_setup(masks, g, UR_CUR)
        recorded = Recorder()
        self.output_ops(recorded, g)
        outputs = recorded.items
        # this tile's store masks and pointers among pairs 0 and 1's loads, the next window's
        # transform and stores among the pairs from the first store on (its loads flew meanwhile)
        first = next(n for n, (text, _, _) in enumerate(outputs) if "STG" in text or "RED" in text)
        work = [(text, {"barriers": self.store_barriers(text)}, {}) for text in self.transform_and_store()]
        loads = next(n for n, (text, _, _) in enumerate(outputs) if not text.startswith("LDS"))
        if INTERLEAVE_SETUP:
            replay(q, spread(spread(outputs, masks.items, 0, loads), work, first + len(masks.items)))
        else:
            replay(q, masks.items + spread(outputs, work, first))
        for text in self.window_advance() + self.copy_advance():
            q.op(text)
        self.zero_accumulators(q)
        q.op(self.depbar(), y=True, stall=4)
        q.op("NOP", stall=DEPBAR_LEAD)
        self.stage_end(q, inline=True)
        q.op(f"UMOV UR{UR_CUR}, UR{UR_NEXT}")
        out += q.lines() + [Op("BRA LOOP", wait=q.wait_all(), y=True, stall=5).line()]
        return out + ["LAST:"] + self.epilogue()

    def text(self, name: Optional[str] = None) -> str:
        s, f = self.s, self.f
        name = name or kernel_name(s)
        out = kernel_head(name, [
            f"# Winograd F(4x4,3x3) fused, NCHW, for {self.t.arch}, generated by kernels_sass/winograd/f4fused.py",
            f"# N={s.N} C={s.C} H={s.H} W={s.W} K={s.K}; grid "
            f"{f'(min({f.blocks}, SMs), 1, 1): persistent over {f.blocks} block tiles' if f.persistent else f.grid()}, "
            f"{THREADS} threads, {f.smem_bytes} bytes of dynamic shared memory"], PARAMS)
        out += self.prologue()
        out.append("LOOP:")
        out += [op.line() for op in self.loop_body()]
        out += self.next_tile() if self.persistent else self.epilogue()
        return kernel_text(self.t, out)


def kernel_name(s: Shape, parts: int = 1, layout: str = "NCHW", aligned: bool = True) -> str:
    return f"wino4f_n{s.N}_c{s.C}_h{s.H}_w{s.W}_k{s.K}" + (f"_p{parts}" if parts > 1 else "") + \
        ("_chwn" if layout == "CHWN" else "") + ("" if aligned or wide_loads(s, layout) == 1 else "_unaligned")


def generate(s: Shape, arch: str = DEFAULT_ARCH, parts: int = 1, layout: str = "NCHW", aligned: bool = True) -> str:
    return Generator(s, arch, parts, layout, aligned).text(kernel_name(s, parts, layout, aligned))


def build(s: Shape, parts: int = 1, layout: str = "NCHW", *, aligned: bool = True, arch: str = DEFAULT_ARCH,
          check_hazards: bool = True, cache: bool = True) -> bytes:
    """Assemble the kernel for s (its channels in `parts`, x and y in `layout`; x and y 16-byte aligned
    or not) on arch (cubin bytes), through the on-disk cache (cubins)."""
    return build_text(generate(s, arch, parts, layout, aligned), kernel_name(s, parts, layout, aligned), arch=arch,
                      filename="winograd_f4fused.sass", check_hazards=check_hazards, cache=cache)
