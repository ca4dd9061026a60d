"""What the F(2x2,3x3) kernel is generated for: the problem shape, the SASS-level options, and
the split-C plan (which tiles' channel loops are split, chosen by a cost model per shape and GPU).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

BK, BN, BC = 64, 32, 8     # a block's filters, tile columns (images) and channels an iteration


def round_up(v: int, m: int) -> int:
    """v rounded up to a multiple of m."""
    return -(-v // m) * m


@dataclass(frozen=True)
class Shape:
    N: int
    C: int
    H: int
    W: int
    K: int

    @property
    def TH(self) -> int:
        return (self.H + 1) // 2

    @property
    def TW(self) -> int:
        return (self.W + 1) // 2

    # F(4x4,3x3)'s output tiles (4x4 pixels) a column and a row
    @property
    def TH4(self) -> int:
        return -(-self.H // 4)

    @property
    def TW4(self) -> int:
        return -(-self.W // 4)

    @property
    def NB(self) -> int:
        return -(-self.N // BN)

    @property
    def KB(self) -> int:
        return -(-self.K // BK)

    @property
    def Kpad(self) -> int:
        return self.KB * BK

    @property
    def Cpad(self) -> int:
        return -(-self.C // BC) * BC

    @property
    def U_ROWS(self) -> int:
        """Filter-transform rows: Cpad and one zero block, so that the main loop's prefetch of
        the next block's filters stays in bounds in the last iteration."""
        return self.Cpad + BC

    @property
    def HWN(self) -> int:
        return self.H * self.W * self.N

    @property
    def tiles(self) -> int:
        return self.KB * self.NB * self.TH * self.TW

    def grid(self) -> tuple[int, int, int]:
        return (self.KB, self.NB, self.TH * self.TW)


@dataclass(frozen=True)
class Options:
    yield_mode: str = "none"      # none (only BAR and BRA yield), natural (memory/ALU ops yield,
                                  # FFMAs don't), every7, every8
    ldg_spacing: int = 8          # FFMAs between consecutive global loads (>= 3: see PRED_DIST)
    ldgu_spacing: int = 24        # ... between the filter loads (LDG.128) at the iteration start:
                                  # spread, their returns delay the k-steps' LDS less
    sts_spacing: int = 6          # FFMAs between consecutive clusters of shared stores
    transform_step: int = 4       # k-step in which the loaded input is transformed and stored
    cluster: int = 1              # non-FFMA instructions placed back to back (1: spread one by one)
    persistent: bool = True       # one block an SM looping over tiles (no block launch a tile)
    reuse_slots: bool = True      # main loop: .reuse kept across inserted instructions that
                                  # read no register in that operand slot
    bank_slots: bool = True       # transform registers placed so that each FADD reads both
                                  # register banks (X_SLOTS, T_SLOTS, M_SLOTS); else in order
    ldgsts: bool = True           # main loop: the filters go from global to shared memory by
                                  # LDGSTS (no registers); else LDG.128 + STS.128 through RF
    overlap: bool = True          # tile loop: the next tile's global loads issued inside this
                                  # tile's epilogue (else at the start of the next tile)
    safe: bool = False            # diagnosis: every latency far above need (slow, same results)
    split: int = 0                # split-C: the channel loop of the last `tail` tiles in `split` parts,
                                  # their sums added in y (REDG), y's part zeroed first. 0: chosen per
                                  # shape and GPU (split_plan, in api), 1: off
    tail: int = 0                 # tiles split (the last ones); 0 with split > 1: chosen by split_plan
    buffers: int = 2              # shared-memory buffers of the main loop: 2 (the next block stored while
                                  # this one is read; 128 KiB) or 1 (stored after a BAR once every warp has
                                  # read it, a second BAR before the reads: for archs with less than
                                  # 128 KiB a block; no LDGSTS)

    def tag(self) -> str:
        return (f"y{self.yield_mode}-l{self.ldg_spacing}-s{self.sts_spacing}-t{self.transform_step}"
                + (f"-u{self.ldgu_spacing}" if self.ldgu_spacing != 24 else "")
                + (f"-g{self.cluster}" if self.cluster != 1 else "") + ("" if self.persistent else "-np")
                + ("" if self.overlap else "-nov") + ("" if self.reuse_slots else "-nors")
                + ("" if self.bank_slots else "-nobank") + ("" if self.ldgsts else "-noldgsts")
                + ("-safe" if self.safe else "")
                + (f"-sp{self.split}x{self.tail}" if self.split > 1 else "")
                + (f"-b{self.buffers}" if self.buffers != 2 else ""))


# ---- split-C ----------------------------------------------------------------------------------
# The persistent blocks take the units of work in turns. Where the last turn is only partly
# filled (Conv4/N32: 196 tiles on 132 SMs, 64 of them in the second turn), the channel loops of
# the last tiles are split in parts that run on SMs of their own and add their sums into y
# with REDG.E.ADD.F32 (y's part zeroed before the main kernel). Unit u < whole is tile u;
# unit whole + parts*q + p is part p (channel blocks p*chunk ...) of tile whole + q.
# The cost model behind the choice, in loop iterations (H100: about 1.33 us an iteration):
FIXED_ITERS = 2.3      # a unit's work outside the loop (2.9..3.2 us a tile, C vs 2C)
REDG_ITERS = 0.3       # a split unit's extra: its 32 KiB of outputs added in L2, not stored
ZERO_ITERS = 1.0       # zeroing the split tiles' outputs (extra blocks of the filter-transform launch)
MIN_GAIN = 0.03        # a split is chosen when the model saves more than this fraction
MAX_PARTS = 8


@dataclass(frozen=True)
class Split:
    tiles: int
    iters: int          # channel blocks (loop iterations) of a whole tile
    parts: int = 1      # parts of a split tile (1: no split)
    tail: int = 0       # tiles split, the last ones

    @property
    def chunk(self) -> int:          # iterations of a part (the last one may have fewer)
        return -(-self.iters // self.parts)

    @property
    def whole(self) -> int:
        return self.tiles - self.tail

    @property
    def units(self) -> int:
        return self.whole + self.tail * self.parts

    @property
    def active(self) -> bool:
        return self.parts > 1 and self.tail > 0

    def part_iters(self) -> list[int]:
        j = self.chunk
        return [j] * (self.parts - 1) + [self.iters - (self.parts - 1) * j]

    def valid(self) -> bool:
        return (self.parts == 1 or (0 < self.tail <= self.tiles and 2 <= self.parts <= MAX_PARTS
                                     and self.part_iters()[-1] >= 1)) and self.units + 1024 < (1 << 16)

    def modelled(self, sms: int) -> float:
        """Time of the persistent kernel in loop iterations: the slowest block's units."""
        costs = [self.iters + FIXED_ITERS] * self.whole
        if self.active:
            costs += [it + FIXED_ITERS + REDG_ITERS for _ in range(self.tail) for it in self.part_iters()]
        blocks = min(len(costs), sms)
        return max(sum(costs[b::blocks]) for b in range(blocks)) + (ZERO_ITERS if self.active else 0.0)


def split_of(s: Shape, o: Options) -> Split:
    """The split the kernel of (s, o) is generated with (none unless o names one)."""
    sp = Split(s.tiles, s.Cpad // BC, o.split, o.tail) if o.split > 1 and o.persistent else Split(s.tiles, s.Cpad // BC)
    if not sp.valid() or (sp.parts > 1 and not sp.tail):
        raise Unsupported(f"split {o.split} x {o.tail} tiles does not fit {s}")
    return sp


@lru_cache(maxsize=None)
def split_plan(s: Shape, sms: int, parts: int = 0) -> Split:
    """(Cached: every call of conv2d asks, and the model walks every split.) The split with the least modelled time (parts 0: any number of parts, else that one),
    where it saves more than MIN_GAIN (with `parts` given: the best tail for it, gain or not);
    the tiles split are the last turn's and possibly whole turns before it."""
    base = Split(s.tiles, s.Cpad // BC)
    if parts == 1:
        return base
    best, best_t = base, base.modelled(sms) * (1 - MIN_GAIN) if parts == 0 else float("inf")
    rest = s.tiles % sms or sms
    for S in ([parts] if parts else range(2, MAX_PARTS + 1)):
        for tail in range(rest, s.tiles + 1, sms):
            sp = Split(s.tiles, s.Cpad // BC, S, tail)
            if sp.valid() and sp.modelled(sms) < best_t - 1e-9:
                best, best_t = sp, sp.modelled(sms)
    return best


def resolve(s: Shape, o: Options, sms: int) -> Options:
    """Options with the split chosen for this shape on a GPU of `sms` multiprocessors (split 0:
    the plan's; split S > 1 with tail 0: the plan's tail for S parts)."""
    if not o.persistent or o.split == 1 or (o.split > 1 and o.tail):
        return o
    sp = split_plan(s, sms, o.split)
    return replace(o, split=sp.parts if sp.active else 1, tail=sp.tail)


def uses_tile_loop(s: Shape, o: Options) -> bool:
    """Persistent blocks, where the unit count suits the 16-bit magic division of the unit number
    (with room for the number of the next unit, up to 1024 SMs past the last)."""
    return o.persistent and split_of(s, o).units + 1024 < (1 << 16)


def launch_grid(s: Shape, o: Options, sms: int) -> tuple[int, int, int]:
    """The grid to launch the kernel of (s, o) with, on a GPU with `sms` multiprocessors."""
    return (min(split_of(s, o).units, sms), 1, 1) if uses_tile_loop(s, o) else s.grid()


class Unsupported(ValueError):
    """What a kernel does not take: a shape past its 32-bit offsets or immediates, a split that does
    not fit the shape, an arch without its shared memory or instructions."""


def check_shape(s: Shape) -> None:
    if min(s.N, s.C, s.H, s.W, s.K) < 1:
        raise Unsupported(f"empty problem {s}")
    lim = 1 << 31
    if s.C * s.HWN * 4 >= lim or s.K * s.HWN * 4 >= lim:
        raise Unsupported("tensors of 2 GiB or more need 64-bit offsets")
    if s.U_ROWS * 16 * s.Kpad * 4 >= lim:
        raise Unsupported("transformed filters of 2 GiB or more")
    if (3 * s.W + 3) * s.N * 4 >= (1 << 23):
        raise Unsupported("load offsets beyond the 24-bit immediate")
    if s.TH * s.TW > 65535 or s.NB > 65535:
        raise Unsupported("grid too large")
