"""The F(2x2,3x3) kernel's layout, which the generator (sassgen) and its users share: the
shared-memory buffers and the output staging with their sizes per design (`fit` picks the
design an arch can run), the registers of each role and the register-bank slots of the
transforms, the parameters and the scoreboards of the main loop."""
from __future__ import annotations

from dataclasses import replace

from .plan import BC, Options
from .target import DEFAULT_ARCH, Target, target

ARCH = DEFAULT_ARCH
THREADS = 256
BUF = 0x10000              # one buffer, 64 KiB; buffers toggled by XOR
SMEM_BYTES = 2 * BUF       # (sm_90's; Generator.smem_bytes per arch)
ES_U, ES_V = 528, 272      # floats per position e (filter, input) in a buffer
V_OFF = 16 * ES_U          # floats: the input tile follows the filter tile
# Output staging: floats per filter row (32 images + 4 padding), per position. A row of 36
# floats (9 16-byte chunks) spreads a warp's STS.128 of 4 kg x 4 tg x 2 e over all 8 bank
# quads (4 threads each, the minimum of 4 wavefronts); with 48 the kg rows hit the same quads
# and the stores took 8 (ncu: the kernel's only excess shared-memory wavefronts).
KS_M = 36
KS_M_TIGHT = 32            # ... where 72 KiB of staging is more than a block may have (sm_75)
SLOTS_PER_STEP = 128       # FFMAs per channel (16 x 8 tile)
STEPS = BC
SLOTS = SLOTS_PER_STEP * STEPS
MIN_DIST = 8               # main loop: slots (>= cycles) from a fixed-latency result to its use
PRED_DIST = 14             # ... from a predicate result (ISETP, LOP3 P, carry) to its use

# The 16-bit load mask: load q of the 4x4 input window (q = 4*row + col) is bit MASK_BIT[q].
# The loads come in groups of at most six, one group a byte, so that one R2P turns a group's
# bits into P0..P5 (three R2P instead of 16 LOP3s an iteration; P6 stays the channel and loop
# predicate).
LOAD_GROUPS = ((0, 1, 2, 3, 4, 5), (6, 7, 8, 9, 10, 11), (12, 13, 14, 15))
MASK_BIT = {q: 8 * g + i for g, group in enumerate(LOAD_GROUPS) for i, q in enumerate(group)}


def window_bits(rows=range(4), cols=range(4)) -> int:
    """The mask bits of the window elements in the given rows and columns."""
    return sum(1 << MASK_BIT[4 * i + j] for i in rows for j in cols)


def load_pred(q: int) -> int:
    """The predicate register that guards load q after its group's R2P."""
    return MASK_BIT[q] % 8


# Parameters: x (CHWN input), u (transformed filters [Kpad/64][16][C+pad][64]), y (KHWN output),
# at these offsets of the parameter block.
PARAMS = (("x", 8), ("u", 8), ("y", 8))
P_X, P_U, P_Y = 0x0, 0x8, 0x10


def stage_bytes(ks_m: int) -> int:
    """The output staging's shared memory: 16 positions x 32 filter rows of ks_m floats."""
    return 16 * 32 * ks_m * 4


def smem_bytes(buffers: int, ks_m: int = KS_M) -> int:
    """A block's dynamic shared memory: two buffers at BUF apart (XOR), or one, or the staging."""
    one = (V_OFF + 16 * ES_V) * 4
    return max(2 * BUF if buffers == 2 else one, stage_bytes(ks_m))


def staging_row(opts: Options, t: Target) -> int:
    """Floats a staged filter row takes (KS_M, or KS_M_TIGHT where KS_M's staging does not fit)."""
    return KS_M if smem_bytes(opts.buffers) <= t.max_smem else KS_M_TIGHT


def dynamic_smem(opts: Options, arch: str = DEFAULT_ARCH) -> int:
    """The dynamic shared memory the kernel of (opts, arch) is launched with."""
    return smem_bytes(opts.buffers, staging_row(opts, target(arch)))


def fit(opts: Options, t: Target) -> Options:
    """The options with the design the arch can run: one buffer where 128 KiB of shared memory
    does not fit a block, registers instead of LDGSTS where the arch has none or the loop has
    one buffer."""
    if smem_bytes(opts.buffers) > t.max_smem:
        opts = replace(opts, buffers=1)
    if opts.ldgsts and (opts.buffers == 1 or not t.async_copy):
        opts = replace(opts, ldgsts=False)
    return opts

# ---- registers --------------------------------------------------------------------------
def ACC(kk: int, tt: int) -> int:
    """Accumulator of filter row kk (0..15), tile column tt (0..7). Columns are swapped in
    pairs so that an accumulator and the B operand it meets sit in different register banks."""
    return kk * 8 + (tt ^ 1)


def RA(buf: int, i: int) -> int:       # A operand (filter values), two sets
    return 128 + 24 * buf + i


def RB(buf: int, j: int) -> int:       # B operand (input values)
    return 144 + 24 * buf + j


def RX(q: int) -> int:                 # loaded input window d[q], q = 4*i + j
    return 176 + q


def RT(q: int) -> int:                 # transformed window (16 + 1 spare)
    return 192 + q


# Register banks of the transforms. FFMAs keep both register banks (bank = register mod 2)
# busy, so every register an inserted instruction reads costs an issue cycle of its own, and
# an FADD whose two sources share a bank takes two (microbench inst.ffma_reuse_insert: a NOP
# between FFMAs costs 1 cycle, an FADD reading two registers of one bank 2). With the window
# and its transform in consecutive registers every FADD of B^T d B reads one bank (pairs of
# rows 4 apart, pairs of columns 2 apart). The slots below put the element q = 4i + j of a
# 4x4 group at a register offset whose parity follows the pairs each pass forms:
# - input window d (pass 1 pairs rows (0,2), (1,2), (1,3) of a column): rows 0, 1 against
#   rows 2, 3, so parity = j ^ (i >= 2);
# - its transform T (pass 2 pairs columns (0,2), (1,3), (1,2) of a row): parity = (j >= 2);
# - the output transform's M (pass 1 pairs rows (0,1), (0,2), (1,2), (1,3): rows 0, 1, 2
#   pairwise, one pair per column has to share a bank; pass 2 pairs columns (0,1), (1,3),
#   (0,2), (2,3) of rows 0 and 1): parity = [0,1,0,0][i] ^ [0,1,1,0][j], one FADD in four
#   of pass 1 on one bank, none of pass 2.
def _slots(parity) -> tuple[int, ...]:
    """A permutation of 0..15 keeping each row's four offsets (4i..4i+3) with parity(i, j)."""
    out = []
    for i in range(4):
        free = {0: [4 * i, 4 * i + 2], 1: [4 * i + 1, 4 * i + 3]}
        out += [free[parity(i, j)].pop(0) for j in range(4)]
    return tuple(out)


X_SLOTS = _slots(lambda i, j: (j & 1) ^ (i >> 1))
T_SLOTS = _slots(lambda i, j: j >> 1)
M_SLOTS = _slots(lambda i, j: (0, 1, 0, 0)[i] ^ (0, 1, 1, 0)[j])
PLAIN_SLOTS = tuple(range(16))


RF = 212                               # 8 x 4 prefetched filter values (212..243)
R_MASK, R_CLIM, R_M = 209, 210, 211
R_XP, R_UP = 244, 246                  # 64-bit pointers
UR_TILE, UR_STRIDE, UR_NEXT = 6, 7, 8   # persistent blocks: this block's tile number, grid size, next tile
R_LDSA, R_LDSB, R_STSV, R_STSU, R_C0 = 248, 249, 250, 251, 252
# Scoreboards of the main loop: 0, 1 the two LDS operand sets, 2 the input loads, 3 the filter
# loads (LDG.128; with ldgsts the LDGSTS groups, ASYNC_SB), 4 the stores' reads, 5 the loads'
# address reads.
ASYNC_SB = 3
