"""The fused F(4x4,3x3) kernel's geometry, which its generator (f4fused) and its users share: the
block tile and its shared memory, the grid of a problem shape (`Fused`) and the shapes the
kernel takes (`check`). Its registers are f4fused_regs', its loop placement and switches the
generator's; the channel split is the cost model's (cost.f4fused_parts)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .plan import Shape, Unsupported, round_up

THREADS = 256
BK = BT = 32               # a block's filters and output tiles
BC = 8                     # channels an iteration
E = 36                     # positions of the 6x6 transformed tiles
ROW = 4 * BK               # bytes of a shared row (32 floats)
U_E = BC * ROW + 16        # U rows of position e: [e][c][k]; +16: a warp's 4 positions in other bank quads
V_E = BC * ROW + 16        # V rows [e][c][t]
V_OFF = E * U_E
BUF_BYTES = V_OFF + E * V_E
OTHER = 0x20000            # the second buffer, by XOR (every first-buffer address is below it)
SMEM_BYTES = OTHER + BUF_BYTES
# The epilogue's M[e][k][t] at word e M_EW + 32 k + skew(k) + t, skew(k) = 4 (k / 16 % 2) + k / 4
# % 4 and M_EW = 1 (mod 32): a warp's 32 STS of one accumulator hit 32 banks (the 16 x 8 tiles'
# 4 positions by M_EW, their 2 row halves by 4 (k / 16), their 4 column octets by 8; the 4 x 4
# tiles' 4 row quads by k / 4 % 4 and 8 column quads by 4); k and t plain, the banks repeated
# every 32 words, 8-way (4-way) conflicts
M_EW = 1057
M_E = 4 * M_EW


def m_skew(k: int) -> int:
    return 4 * (k // 16 % 2) + k // 4 % 4


# Persistent blocks (one an SM, taking the tiles in turns) write the next tile's first chunk while
# this tile's epilogue reads M: the buffers sit at LOW and LOW ^ OTHER, the high one past M
LOW = 0x5400
SMEM_BYTES_PERSISTENT = LOW + OTHER + BUF_BYTES
assert E * M_E <= LOW + OTHER and LOW + BUF_BYTES <= OTHER


PAD_ROWS = BC              # rows of U past 36 x Cp that the last iteration's prefetch reads
COPY_LO, COPY_HI = 0x800, 0x7ff   # an LDGSTS's 12-bit signed global offset: -0x800..0x7ff
COPY_SOURCES = 4           # registers of the copies' source offsets (rows 12 bits of immediate
                           # apart): UOFF and 3 that the window leaves free (Generator.copy_src)


@dataclass(frozen=True)
class Fused:
    """The geometry of the fused kernel for a problem shape, its channels split in `parts`
    (split-C: grid z; each part adds its sums into y with REDG, y zeroed before), x and y in
    `layout`: NCHW (y NKHW; tile t = (n TH + th) TW + tw) or CHWN (y KHWN; t = (th TW + tw) N + n,
    so that a warp's 32 tiles are 32 images: coalesced loads and stores)."""
    s: Shape
    parts: int = 1
    layout: str = "NCHW"
    persistent: bool = False    # blocks that take the tiles in turns (grid: min(blocks, SMs))

    @property
    def px(self) -> int:
        """Elements from a pixel to the next in a row, in x and y."""
        return 1 if self.layout == "NCHW" else self.s.N

    @property
    def plane(self) -> int:
        """Elements from a channel of x to the next (a filter of y to the next)."""
        return self.s.H * self.s.W * self.px

    @property
    def tiles(self) -> int:
        return self.s.N * self.s.TH4 * self.s.TW4

    @property
    def Cp(self) -> int:
        return round_up(self.s.C, BC * self.parts)

    @property
    def Kp(self) -> int:
        return round_up(self.s.K, BK)

    @property
    def iterations(self) -> int:
        """Of one block (one part)."""
        return self.Cp // BC // self.parts

    @property
    def u_rows(self) -> int:
        return E * self.Cp + PAD_ROWS

    # The copies of U rows (e, c), c = 0..7, Kp * 4 bytes apart: from copy_src[b] + an immediate
    # (12 bits, signed): ROWS_PER rows a register, the register at row ROWS_PER b + CENTER
    @property
    def rows_per_source(self) -> int:
        r = self.Kp * 4
        return min(BC, COPY_LO // r + COPY_HI // r + 1)

    @property
    def copy_center(self) -> int:
        r = self.Kp * 4
        return max(0, self.rows_per_source - 1 - COPY_HI // r)

    @property
    def copy_sources(self) -> int:
        return -(-BC // self.rows_per_source)

    def copy_source_row(self, b: int) -> int:
        return self.rows_per_source * b + self.copy_center

    def copy_source(self, j: int) -> tuple[int, int]:
        """(index in Generator.copy_src, byte immediate) of the copy of row (e, j)."""
        b = j // self.rows_per_source
        return b, (j - self.copy_source_row(b)) * self.Kp * 4

    def grid(self) -> tuple[int, int, int]:
        """The tiles as blocks: (output tiles, filters, parts)."""
        return (-(-self.tiles // BT), self.Kp // BK, self.parts)

    @property
    def blocks(self) -> int:
        """Block tiles of the problem (a persistent block's turn takes one: number L is
        (L % gx, L / gx % gy, L / (gx gy)) of grid())."""
        x, y, z = self.grid()
        return x * y * z

    def launch_grid(self, sms: int) -> tuple[int, int, int]:
        """The grid to launch with on a GPU of `sms` SMs."""
        return (min(self.blocks, sms), 1, 1) if self.persistent else self.grid()

    @property
    def smem_bytes(self) -> int:
        return SMEM_BYTES_PERSISTENT if self.persistent else SMEM_BYTES


MAX_PARTS = 4               # the channel split's parts (split-C; cost.f4fused_parts chooses)


def exact_magic(d: int, n_max: int) -> Optional[int]:
    """m with floor(n * m / 2^32) == n // d for 0 <= n <= n_max (None for d == 1): m =
    floor(2^32 / d) + 1 is exact while n_max * (m d - 2^32) < 2^32."""
    if d == 1:
        return None
    m = (1 << 32) // d + 1
    if n_max * (m * d - (1 << 32)) >= 1 << 32:
        raise Unsupported(f"tile index {n_max} / {d}: no exact 32-bit magic division")
    return m


def check(s: Shape, parts: int = 1, layout: str = "NCHW", persistent: bool = False) -> Fused:
    if layout not in ("NCHW", "CHWN"):
        raise ValueError(f"layout {layout!r}: NCHW or CHWN")
    if min(s.N, s.C, s.H, s.W, s.K) < 1:
        raise Unsupported(f"empty problem {s}")
    if not 1 <= parts < 1 << 16:
        raise Unsupported(f"{parts} parts")
    f = Fused(s, parts, layout, persistent)
    lim = 1 << 31
    # offsets (signed 32-bit) of the windows and output tiles, with the prefetch past the last
    # channel and the tiles past the last image
    if (s.N + 2) * (f.Cp + 2 * BC) * s.H * s.W * 4 >= lim or (s.N + 2) * (f.Kp + BK) * s.H * s.W * 4 >= lim:
        raise Unsupported("tensors of 2 GiB or more need 64-bit offsets")
    if f.copy_sources > COPY_SOURCES:
        raise Unsupported(f"K={s.K}: U rows of {f.Kp} filters, more than {COPY_SOURCES} registers of "
                          f"copy sources (12-bit offsets: at most 512 filters)")
    if f.u_rows * f.Kp * 4 >= lim:
        raise Unsupported("transformed filters of 2 GiB or more")
    if 4 * (5 * s.W + 5) * f.px >= 1 << 23:
        raise Unsupported("load offsets beyond the 24-bit immediate")
    if f.grid()[0] >= 1 << 31 or f.grid()[1] >= 1 << 16:
        raise Unsupported("grid too large")
    n_max = f.grid()[0] * BT
    first, second = (s.TW4, s.TH4) if layout == "NCHW" else (s.N, s.TW4)
    exact_magic(first, n_max)
    exact_magic(second, n_max // first + 1)
    if persistent:              # the block numbers' division into (x, y, z), either first
        gx, gy, _ = f.grid()
        exact_magic(gx, f.blocks)
        exact_magic(gy, f.blocks)
    return f
