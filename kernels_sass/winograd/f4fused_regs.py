"""The fused F(4x4,3x3) kernel's register map (f4fused's generator): a thread's registers in the
loop (accumulators, operands, the 6x6 window, shared addresses, pointers, counters), the window's
and the epilogue's bank-aware layouts, and the epilogue's registers after the accumulators'
staging (OutputRegs: a block a tile, and persistent blocks, whose next tile lives on R184 up)."""
from __future__ import annotations

from dataclasses import dataclass

from .f4fused_layout import E

# ---- registers (thread) ----------------------------------------------------------------
RA = 144                   # A: 16 filters of the channel
RB = 160                   # B: two sets of 8 tiles
RA2, RB2 = 176, 180        # the small tile's 4 filters and 4 tiles
RX = 184                   # the 6x6 window (WIN, WIN_WIDE), transformed in place: 36 of R184..R219, R222,
                           # R223, R251, R252 (WINDOW_POOL)
RS = 220                   # 4 spares: the window's effective masks
RT = 239                   # 12 spares of the input transform (3 six-point transforms at a time)
XP, MLO, MHI, CH, UOFF, USTS, VSTS, LDA, LDB, LDA2, LDB2, UOFF2, USTS2, CNT = (
    224, 226, 227, 228, 229, 230, 231, 232, 233, 234, 235, 236, 237, 238)
TOP = 252                  # the highest register: 255 counted (256 threads: up to 255; R253 is an
                           # illegal instruction on the H100, NOTES.md section 7)


SETUP = list(range(RA, RX))   # the tile set-up's scratch (the loop's operands: free outside the loop)
UR_CUR, UR_NEXT, UR_STRIDE = 8, 9, 10   # persistent: this tile's number, the next one's, the grid size

WINDOW_POOL = list(range(RX, RX + 36)) + [RS + 2, RS + 3, TOP - 1, TOP]


def _window() -> list[list[int]]:
    """The window's registers WIN[i][j] (row i, column j), in the register bank (parity)
    P_i ^ P_j, P = (0, 0, 0, 1, 1, 0): pieces.f43_bt_ops then reads two banks in all its
    two-register ops but one (r1 and r5 share a bank: r1, r3, r5 cannot all differ), in the
    column pass and, since its outputs keep their column's pattern, in the row pass too
    (an FADD or FFMA reading one bank twice costs an issue cycle more between FFMAs, NOTES.md
    section 8). 20 even and 16 odd registers: the window's 36, and R222, R223 (the epilogue's),
    R251, R252."""
    pool = WINDOW_POOL
    free = {0: [r for r in pool if r % 2 == 0], 1: [r for r in pool if r % 2 == 1]}
    p = (0, 0, 0, 1, 1, 0)
    return [[free[p[i] ^ p[j]].pop(0) for j in range(6)] for i in range(6)]


WIN = _window()


def _window_wide() -> list[list[int]]:
    """The window's registers for wide loads: columns 1-4 of row i in the aligned quad R184 + 4i
    (parities 0 1 0 1: the LDG.128's or the two LDG.64's destinations), columns 0 and 5 in the
    banks that leave the fewest one-bank ops in pieces.f43_bt_ops (70 of 144, found by trying
    all 2^12: ~58 issue cycles a warp an iteration more than WIN, for half the window loads and
    about half their L1 wavefronts, NOTES.md section 16)."""
    first, last = (0, 0, 0, 1, 1, 0), (1, 0, 1, 1, 0, 1)
    pool = [r for r in WINDOW_POOL if r >= RX + 24]
    free = {0: [r for r in pool if r % 2 == 0], 1: [r for r in pool if r % 2 == 1]}
    return [[free[first[i]].pop(0), *range(RX + 4 * i, RX + 4 * i + 4), free[last[i]].pop(0)] for i in range(6)]


WIN_WIDE = _window_wide()


def _pairs() -> list[list[int]]:
    """The epilogue's m of its 4 (k, t) pairs: M[pair][6i + j] in the bank P_i ^ P_j, P = (0, 1,
    0, 0, 1, 0), for pieces.f43_at_ops as WIN for f43_bt_ops (one one-bank op in 10: m0, m1 and
    m3 cannot all differ); the accumulators and the operand registers, free after the loop."""
    pool = list(range(0, 144)) + list(range(RB, RB + 24))
    free = {0: [r for r in pool if r % 2 == 0], 1: [r for r in pool if r % 2 == 1]}
    p = (0, 1, 0, 0, 1, 0)
    return [[free[p[e // 6] ^ p[e % 6]].pop(0) for e in range(E)] for _ in range(4)]


PAIRS = _pairs()


@dataclass(frozen=True)
class OutputRegs:
    """The epilogue's registers after the accumulators' staging: indices, masks, output pointers
    (yps: 4 pairs), the transform's spares, 4 aligned quads from `quads` (the wide stores), and
    the pairs' m (pair pr in pairs[pr % len(pairs)])."""
    tid: int
    bx: int
    by: int
    kr: int
    tile: tuple                 # tile_of's 7
    ids: tuple                  # block_ids' 3 (persistent)
    rm: int
    cm: int
    om: int
    h0: int
    w0: int
    bound: tuple
    k0: int
    ro: int
    off: int
    ldc: int
    tmp: int
    masks: tuple
    yps: tuple
    spares: tuple
    quads: int
    pairs: tuple


# A block a tile: the accumulators' pairs, the window's registers (the loop is over) and RS on
OUTPUT = OutputRegs(tid=RA, bx=RA + 1, by=RA + 2, kr=RA + 3, tile=tuple(range(RA + 4, RA + 11)), ids=(),
                    rm=RA + 11, cm=RA + 12, om=RA + 13, h0=RA + 14, w0=RA + 15, bound=(RS, RS + 1), k0=RS + 2,
                    ro=RS + 3, off=RS + 4, ldc=RS + 8, tmp=RS + 10, masks=tuple(range(RS + 11, RS + 15)),
                    yps=(RS + 6, RX + 12, RX + 14, RX + 16), spares=tuple(range(RX, RX + 12)), quads=RX + 20,
                    pairs=tuple(map(tuple, PAIRS)))
# Persistent: the next tile's window, masks, pointers and addresses (R184 on) live through the
# epilogue, so everything in R0..R183, with two pairs' m in flight (pr % 2)
OUTPUT_PERSISTENT = OutputRegs(tid=144, bx=145, by=146, kr=147, tile=tuple(range(148, 155)), ids=(167, 182, 183),
                               rm=155, cm=156, om=157, h0=158, w0=159, bound=(180, 181), k0=160, ro=161, off=168,
                               ldc=172, tmp=162, masks=(163, 164, 165, 166), yps=(170, 174, 176, 178),
                               spares=tuple(range(96, 108)), quads=112, pairs=tuple(map(tuple, PAIRS[:2])))


def ACC(i: int, j: int) -> int:
    """Accumulator of row i (0..15), column j (0..7): columns swapped in pairs so that an
    accumulator and the B operand it meets sit in different register banks (as gemmgen)."""
    return 8 * i + (j ^ 1)


def ACC2(i: int, j: int) -> int:
    """The small tile's accumulator of row i, column j (0..3), after the big tile's."""
    return 128 + 4 * i + (j ^ 1)
