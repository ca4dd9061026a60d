"""Tensor-core benchmarks: the rate of sm_90's mma.sync HMMAs in FP16 (m16n8k16 and m16n8k8,
FP32 accumulators), and the instruction mix of a fused F(4x4,3x3) Winograd loop whose products
run on them in FP16 halves, measured before such a loop is written (kernels_sass/winograd
NOTES.md section 26).

The mix is one warp's share of 16 channels (a k-step of HMMA.16816) of a block of 32 filters x
32 tiles x the 36 positions, 256 threads, one block an SM, the design of kernels_sass's fused
kernel (`f4fused`) with its FFMAs replaced by HMMAs:
- 108 HMMA.16816.F32: 36 accumulator tiles of 16 x 8 (4 positions of 32 x 32 and half of one),
  three products each (hi*hi, lo*hi, hi*lo: the values split into FP16 halves);
- 38 LDS.128: the A (filters) and B (tiles) fragments, hi and lo, of those 4.5 positions;
- the producer's part: two 6x6 windows a thread (36 loads: a row's columns 1-4 by LDG.128, 0
  and 5 alone), their transform B^T d B (12 six-point transforms of 12 FADD/FFMA each), the
  split of the 72 values into FP16 halves (FMUL by the scale, F2FP for hi, HADD2.F32 back,
  FADD for the residual, F2FP for lo), 36 STS.64 of the hi and lo half2 pairs;
- 18 LDGSTS.BYPASS.128 of the next k-step's filter fragments (already split, from L2), one
  commit, a DEPBAR for the previous group, and the block's barrier.
As `inst.ffma_loop_mix` does for the FFMA loop, no instruction waits on another's result but
the loads on those three or a window back (their registers are reused) and each HMMA on its
accumulator's previous product: the figure is what the mix's issue, shared-memory and
tensor-pipe throughput allow, the kernel's dependencies and latencies aside. The variants add
the parts one at a time.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Optional

import numpy as np

from .core import CUDA, SASS, Benchmark, Case, Metric, Records, Source, register
from .nvrtc import read_kernel
from .results import Limit
from .sassgen import Regs, Sass, block_start, epilogue, loop_control, prologue, shared_base

WARPS = 8                       # the fused kernel's block: 256 threads, one block an SM
THREADS = 32 * WARPS
TILES = 36                      # accumulator tiles a warp: 4 x (2 x 4) + 1 x 4
GROUPS = (8, 8, 8, 12)          # tiles of the passes taken together (the last: a position and a
                                # half): an accumulator's products 8 or 12 HMMAs apart, 16 cycles
                                # or more at 2 a HMMA, past the 15 of HMMA's latency
PASSES = 3                      # hi*hi, lo*hi, hi*lo

# One k-step's other instructions a thread (the design above)
FRAG_LOADS = 38                 # LDS.128: 8 a whole position, 6 the half one
V_STORES = 36                   # STS.64: (hi, lo) of two channels at each of 36 positions (a pair
                                # of windows)
U_COPIES = 18                   # LDGSTS.128: 36 x 32 x 16 values x 4 bytes / 256 threads / 16
WINDOWS = 2                     # 6x6 windows a thread: 16 channels x 32 tiles / 256 threads
WINDOW_ROWS = 6
TRANSFORM_FMA = 96              # a window's B^T d B: 12 six-point transforms of 8 FFMA + 4 FADD
TRANSFORM_ADD = 48
INT_OPS = 14                    # masks, predicates, addresses besides the window pointer's 4

# Registers. Record and loop: sassgen.Regs (R0..R6, R40..R47).
R_LDS, R_STS, R_COPY_DST = 2, 7, 8            # shared addresses (lane's chunk)
R_COPY_SRC = 10                               # R10:R11 the copies' source
R_WIN, R_WIN_BASE, R_WIN_OFF = 12, 14, 28     # window pointer, its base, its offset
A_HI, A_LO, B_HI, B_LO = 16, 20, 24, 26       # fragments (never written in the loop)
R_SRC = 30                                    # R30..R35 the ALU ops' sources
R_FMA_DST, R_CVT_DST, R_HALF_DST, R_INT_DST = 36, 9, 29, 39   # their destinations (one pipe each)
ACC = 48                                      # R48..R191 the accumulators
A_SHARED_TILES = 18                           # "a_ldg": 18 accumulators (R48..R119), each taking two
                                              # tiles' products (distance 8 or more HMMAs), so
                                              # that R120..R151 can take A's fragments from L2
R_A = 120                                     # two sets of 4 LDG.128: a position's A (hi, lo)
R_A_PTR, R_A_OFF = 152, 154                   # A's pointer (R152:R153) and offset
R_SHFL, R_MAX = 240, 245                      # "scale": the warp reduction's 5 results, the FMNMX's
                                              # ("pairs": the SHFLs' destinations in turn too)
PAIR_SHFL, PAIR_PRMT = 18 * WINDOWS, 36 * WINDOWS
SCALE_REDUCE = 5                              # SHFL.BFLY: 32 lanes
A_LOADS = 18                                  # LDG.128 a k-step: A of 4.5 positions
A_SB = 5
R_FRAG = 192                                  # R192..R203: an LDS.128 destination a barrier of LDS_SB
R_WINDOW = 204                                # R204..R227 a window's 6 LDG.128, R228..R239 its 12 LDG
LDS_SB = (0, 1, 2)
WINDOW_SB = (3, 4)
COPY_SB = 5

# Shared memory (static, at most 48 KiB; every warp writes and reads the same chunks: the data
# is not used, the banks are those of the design: a warp's access is contiguous)
LDS_AT, STS_AT, COPY_AT, SHARED_BYTES = 0, 0x2000, 0x4000, 0x6000
# Windows: block b reads its rows from inp + (b % 128) x 128 KiB, a window 32 KiB on (a warp's
# rows 4 KiB apart, a lane's 16 bytes), cycling through the 128 KiB: more than the 28 KiB of L1
# that a 227 KiB carveout leaves, so that the rows come from L2 as the design's do. U's
# fragments: the first 16 KiB of inp, the same for every block (U is in L2).
WINDOW_REGION, WINDOW_STRIDE, WARP_ROWS, ROW_BYTES = 0x20000, 0x8000, 0x1000, 0x200
INP_WORDS = 128 * WINDOW_REGION // 4

MIX_REGS = Regs()

VARIANTS = {
    # name: (hmma shape or None, parts)
    "HMMA.16816 alone": ("16816", ()),
    "HMMA.1688 alone": ("1688", ()),
    "+ fragment LDS": ("16816", ("lds",)),
    "+ shared stores and copies": ("16816", ("lds", "smem")),
    "full mix": ("16816", ("lds", "smem", "ldg", "alu")),
    "full mix, HMMA.1688": ("1688", ("lds", "smem", "ldg", "alu")),
    "full mix without HMMA": (None, ("lds", "smem", "ldg", "alu")),
    "full mix, memory in bursts": ("16816", ("lds", "smem", "ldg", "alu", "grouped")),
    "full mix, A from L2": ("16816", ("lds", "smem", "ldg", "alu", "a_ldg")),
    "full mix, A from L2, memory in bursts": ("16816", ("lds", "smem", "ldg", "alu", "a_ldg", "grouped")),
    "full mix, running scale": ("16816", ("lds", "smem", "ldg", "alu", "scale")),
    "full mix, HMMA.1688, running scale": ("1688", ("lds", "smem", "ldg", "alu", "scale")),
    "full mix, HMMA.1688, running scale, pairs by SHFL": ("1688", ("lds", "smem", "ldg", "alu", "scale", "pairs")),
    "full mix, HMMA.1688, running scale, windows in half the warps":
        ("1688", ("lds", "smem", "ldg", "alu", "scale", "roles")),
}
# "a_ldg": the filters' fragments (A, hi and lo) by LDG.128 from L2 into registers, a position
# ahead, instead of LDGSTS into shared memory and LDS from there: shared memory then holds V
# alone, two 16-channel stages of it in 147 KiB (with U beside it they would need 295 KiB, past
# sm_90's 227). "grouped": the loads and stores in bursts (the fragments a group's before its
# HMMAs, the stores and copies in 4 and 2 bursts) instead of spread evenly. "scale": V's scale
# found in the loop instead of by a pass over x before it: the largest |value| of each k-step's
# stage (an FMNMX a value; a warp's maximum by 5 SHFL.BFLY, one ATOMS.MAX a thread in the mix)
# before the barrier, so that a k-step whose values need a smaller scale can rescale the
# accumulators by a power of two (rare, not in the mix). "pairs": a fragment's half2 holds two
# adjacent channels of a tile; a thread that transforms one window of an 8-channel stage (the
# HMMA.1688 design: 256 windows, 256 threads) gets its partner channel's values from the
# neighbouring half-warp, an SHFL of the packed (hi, lo) and two PRMT a position pair (a thread
# packs half the positions: 18 SHFL and 36 PRMT a window). With 16-channel k-steps a thread
# transforms both channels of a pair itself. "roles": the other way to pair them on 8-channel
# stages: warps 0-3 (one a scheduler) transform both windows of a pair, two pairs a k-step, and
# warps 4-7 none; every warp keeps its 36 accumulator tiles and its HMMAs.


def hmma_ops(shape: Optional[str], accumulators: int = TILES) -> list[str]:
    """A k-step's HMMAs: group by group (GROUPS), in each the passes one after the other over
    the group's tiles. HMMA.1688 takes the k-step in two halves of 8 channels."""
    if shape is None:
        return []
    out, tile = [], 0
    for n in GROUPS:
        for half in ((0,) if shape == "16816" else (0, 1)):
            for p in range(PASSES):
                a = A_LO if p == 1 else A_HI
                b = B_LO if p == 2 else B_HI
                for t in range(tile, tile + n):
                    c = ACC + 4 * (t % accumulators)
                    out.append(f"HMMA.{shape}.F32 R{c}, R{a + 2 * half if shape == '1688' else a}, "
                               f"R{b + half if shape == '1688' else b}, R{c}")
        tile += n
    return out


def _at(reg: str, offset: int) -> str:
    """An address operand as nvdisasm prints it (no +0x0)."""
    return f"[{reg}+{offset:#x}]" if offset else f"[{reg}]"


def _spread(streams: list[list[str]], slots: int) -> list[list[str]]:
    """Deal the streams' items over `slots` slots, each stream evenly over the whole range and
    in its own order."""
    keyed = sorted(((i + 0.5) / len(s), k, i, item) for k, s in enumerate(streams) for i, item in enumerate(s))
    out = [[] for _ in range(slots)]
    for frac, _k, _i, item in keyed:
        out[min(slots - 1, int(frac * slots))].append(item)
    return out


def frag_loads(parts: tuple[str, ...]) -> int:
    """LDS.128 a k-step: A's and B's fragments, or B's alone where A comes from L2."""
    return (FRAG_LOADS // 2 if "a_ldg" in parts else FRAG_LOADS) if "lds" in parts else 0


def memory_streams(parts: tuple[str, ...], windows: int = WINDOWS) -> list[list[str]]:
    """The k-step's shared loads and stores, copies and A's loads of a thread that transforms
    `windows` windows, as streams ('kind|n')."""
    streams = []
    if "lds" in parts:
        streams.append([f"lds|{j}" for j in range(frag_loads(parts))])
    if "smem" in parts:
        if windows:
            streams.append([f"sts|{j}" for j in range(V_STORES * windows // WINDOWS)])
        if "a_ldg" not in parts:
            streams.append([f"copy|{j}" for j in range(U_COPIES)])
    if "a_ldg" in parts:
        streams.append([f"aldg|{j}" for j in range(A_LOADS)])
    return streams


def _bursts(stream: list[str], slots: int) -> list[list[str]]:
    """A memory stream in bursts: fragment loads (LDS, A's LDG) at the starts of the HMMA
    groups (GROUPS), in proportion to their tiles; the stores in 4 bursts, the copies in 2."""
    kind = stream[0].split("|")[0]
    if kind in ("lds", "aldg"):
        starts = [slots * sum(GROUPS[:g]) // TILES for g in range(len(GROUPS))]
        shares = [n / TILES for n in GROUPS]
    else:
        n = 4 if kind == "sts" else 2
        starts = [int(slots * (i + 0.125) / n) for i in range(n)]
        shares = [1 / n] * n
    out = [[] for _ in range(slots)]
    ends = [round(len(stream) * sum(shares[:i + 1])) for i in range(len(shares))]
    at = 0
    for start, end in zip(starts, ends):
        out[start] += stream[at:end]
        at = end
    return out


def _other_ops(parts: tuple[str, ...], windows: int = WINDOWS) -> list[list[str]]:
    """The k-step's instructions besides the HMMAs, the memory streams and the ALU's, of a
    thread that transforms `windows` windows, as streams of 'kind|text' items."""
    streams = [] if "grouped" in parts else memory_streams(parts, windows)
    values = 36 * windows
    if "alu" in parts and windows:
        fma = ["FFMA"] * (TRANSFORM_FMA * windows) + ["FADD"] * (TRANSFORM_ADD * windows)
        fma = [fma[(i * 5) % len(fma)] for i in range(len(fma))]      # FFMAs and FADDs mixed
        streams.append([f"fma|{op}" for op in fma])
        streams.append([f"split|{j}" for j in range(values)])          # 4 a value, in order
    if "alu" in parts:
        streams.append(["int|IADD3"] * INT_OPS)
    if "scale" in parts and windows:
        streams.append(["max|FMNMX"] * values)
    if "pairs" in parts:
        streams.append([f"shfl|{j}" for j in range(PAIR_SHFL)])
        streams.append(["prmt|PRMT"] * PAIR_PRMT)
    return streams


def _advance(k: Sass, ptr: int, base: int, off: int, stride: int, region: int, wait: int) -> None:
    """ptr (64-bit) = base + off, off moved `stride` bytes on within `region` (a power of two),
    after waiting for the loads that read ptr last."""
    k.op(f"IADD3 R{off}, R{off}, {stride:#x}, RZ", wait=wait, stall=5)
    k.op(f"LOP3.LUT R{off}, R{off}, {region - 1:#x}, RZ, 0xc0, !PT", stall=5)
    k.op(f"IADD3 R{ptr}, P1, R{base}, R{off}, RZ", stall=5)
    k.op(f"IADD3.X R{ptr + 1}, RZ, R{base + 1}, RZ, P1, !PT", stall=5)


def _loop(k: Sass, r: Regs, label: str, shape: Optional[str], parts: tuple[str, ...], windows: int) -> None:
    """One k-step a loop iteration: the HMMAs, each followed by its share of the other
    instructions of a thread that transforms `windows` windows, then the k-step's barrier."""
    hmmas = hmma_ops(shape, A_SHARED_TILES if "a_ldg" in parts else TILES)
    others = _other_ops(parts, windows)
    slots = len(hmmas or hmma_ops("16816"))          # without HMMAs: spread as with them
    plan = _spread(others, slots)
    if "grouped" in parts:
        for stream in memory_streams(parts, windows):
            for slot, items in enumerate(_bursts(stream, slots)):
                plan[slot] = items + plan[slot]
    counts = {}
    windows_at = {int(slots * (w + 0.1) / windows) for w in range(windows)} if "ldg" in parts else set()
    state = {"window": 0}

    def emit_other(item: str) -> None:
        kind, what = item.split("|")
        n = counts.get(kind, 0)
        counts[kind] = n + 1
        if kind == "lds":
            sb = LDS_SB[n % len(LDS_SB)]
            k.op(f"LDS.128 R{R_FRAG + 4 * (n % len(LDS_SB))}, {_at(f'R{R_LDS}', (n % 16) * 512)}", write=sb, wait=1 << sb)
        elif kind == "sts":
            k.op(f"STS.64 {_at(f'R{R_STS}', (n % 32) * 256)}, R{R_SRC}")
        elif kind == "copy":
            # offsets within LDGSTS's 12 bits: four chunks a warp (the copies bypass L1: every
            # one is a transfer from L2 whatever its address)
            at = (n % 4) * 512
            k.op(f"LDGSTS.E.BYPASS.128 {_at(f'R{R_COPY_DST}', at)}, desc[UR4]{_at(f'R{R_COPY_SRC}.64', at)}")
        elif kind == "fma":
            k.op(f"{what} R{R_FMA_DST + n % 3}, R{R_SRC}, R{R_SRC + 1}" + (f", R{R_SRC + 2}" if what == "FFMA" else ""))
        elif kind == "split":
            # one value: FMUL by the scale; for a pair of values one F2FP (hi), two HADD2.F32,
            # one F2FP (lo): 4 instructions a value on average
            k.op(f"FMUL R{R_FMA_DST + n % 3}, R{R_SRC + 3}, R{R_SRC + 4}")
            k.op(f"HADD2.F32 R{R_HALF_DST}, -RZ, R{A_HI}.H{n % 2}_H{n % 2}")
            k.op(f"FADD R{R_FMA_DST + (n + 1) % 3}, R{R_SRC + 4}, -R{R_SRC + 5}")
            if n % 2:
                k.op(f"F2FP.F16.F32.PACK_AB R{R_CVT_DST}, R{R_SRC + 4}, R{R_SRC + 5}")
            else:
                k.op(f"F2FP.F16.F32.PACK_AB R{R_CVT_DST}, R{R_SRC + 5}, R{R_SRC + 3}")
        elif kind == "int":
            k.op(f"IADD3 R{R_INT_DST}, R{R_SRC}, 0x1, RZ")
        elif kind == "shfl":
            # on the fragment loads' barriers in turn (the same unit, a similar latency)
            sb = LDS_SB[n % len(LDS_SB)]
            k.op(f"SHFL.BFLY PT, R{R_SHFL + n % len(LDS_SB)}, R{R_SRC}, 0x10, 0x1f", write=sb, wait=1 << sb)
        elif kind == "prmt":
            k.op(f"PRMT R{R_INT_DST}, R{R_SRC}, 0x5410, R{R_SRC + 1}")
        elif kind == "max":
            k.op(f"FMNMX R{R_MAX}, |R{R_SRC + 3}|, R{R_SRC + 4}, !PT")
        elif kind == "aldg":
            # a position's four loads (the last position: two) into set n // 4 % 2, the first
            # waiting for the previous position's (the set before is then free too); the first
            # of a k-step moves the pointer 16 KiB on through 2 MiB (U's size for 128 x 128
            # filters), the addresses L1 has not seen
            if n % A_LOADS == 0:
                _advance(k, R_A_PTR, R_COPY_SRC, R_A_OFF, 0x4000, 0x200000, 1 << A_SB)
            j = n % A_LOADS
            first = j % 4 == 0
            k.op(f"LDG.E.128 R{R_A + 16 * (j // 4 % 2) + 4 * (j % 4)}, desc[UR4]{_at(f'R{R_A_PTR}.64', j * 512)}",
                 write=A_SB, wait=(1 << A_SB) if first and j else 0)

    def emit_window() -> None:
        # wait for the last window's loads (their registers, and the pointer they read), move
        # the pointer to the next window, 6 rows of LDG.128 + 2 LDG
        w = state["window"]
        state["window"] = w + 1
        sb, prev = WINDOW_SB[w % 2], WINDOW_SB[(w + 1) % 2]
        _advance(k, R_WIN, R_WIN_BASE, R_WIN_OFF, WINDOW_STRIDE, WINDOW_REGION, 1 << prev)
        for row in range(WINDOW_ROWS):
            at, edge = row * ROW_BYTES, R_WINDOW + 4 * WINDOW_ROWS + 2 * row
            k.op(f"LDG.E.128 R{R_WINDOW + 4 * row}, desc[UR4]{_at(f'R{R_WIN}.64', at)}", write=sb)
            k.op(f"LDG.E R{edge}, desc[UR4][R{R_WIN}.64+{at + 4:#x}]", write=sb)
            k.op(f"LDG.E R{edge + 1}, desc[UR4][R{R_WIN}.64+{at + 8:#x}]", write=sb)

    inc, cmp, bra = loop_control(r, label)
    k.label(label)
    for s in range(slots):
        if hmmas:
            k.op(hmmas[s], stall=2)
        if s == 0:
            k.op(inc)
        elif s == 16:
            k.op(cmp)
        if s in windows_at:
            emit_window()
        for item in plan[s]:
            emit_other(item)
    if "scale" in parts and windows:
        # the k-step's maximum: across the warp (each SHFL waiting for the last, as the
        # reduction does), then into the block's word
        sb = LDS_SB[-1]
        k.op("NOP", stall=4, note="the last FMNMX's result")
        for j in range(SCALE_REDUCE):
            k.op(f"SHFL.BFLY PT, R{R_SHFL + j}, R{R_MAX}, {1 << j:#x}, 0x1f", write=sb, wait=1 << sb)
        k.op(f"ATOMS.MAX.S32 RZ, [R{R_LDS}+0x10], R{R_SHFL + SCALE_REDUCE - 1}", wait=1 << sb)
    if "smem" in parts:
        k.op("LDGDEPBAR", write=COPY_SB, stall=2)
        k.op(f"DEPBAR.LE SB{COPY_SB}, 0x1", stall=4, note="the previous k-step's copies")
        k.op("BAR.SYNC.DEFER_BLOCKING 0x0", y=True, stall=6)
    k.op(bra, stall=5)


def mix_kernel(name: str, shape: Optional[str], parts: tuple[str, ...], arch: str = "sm_90") -> Sass:
    base = shared_base(arch)
    k = Sass(name, shared=SHARED_BYTES + base, comment=(
        f"{name}: one k-step (16 channels) of a fused F(4x4,3x3) loop on HMMA in FP16 halves a loop\n"
        f"iteration: {shape and f'HMMA.{shape}' or 'no HMMA'}; parts {', '.join(parts) or 'none'}.\n"
        f"Generated by microbench/bench_mma.py."))
    r = MIX_REGS
    prologue(k, r, flag_predicate=False)
    # temporaries, before R30..R35 take the ALU ops' constant sources
    lane, warp, lane16, copy_off, win_off = range(R_SRC, R_SRC + 5)
    k.op(f"LOP3.LUT R{lane}, R{r.tid}, 0x1f, RZ, 0xc0, !PT", wait=0x01, y=True, stall=6, note="lane")
    k.op(f"SHF.R.U32.HI R{warp}, RZ, 0x5, R{r.tid}", y=True, stall=6, note="warp")
    if "roles" in parts:
        k.op(f"ISETP.GE.U32.AND P3, PT, R{warp}, {WARPS // 2:#x}, PT", y=True, stall=1,
             note="P3: a warp that transforms no window")
    k.op(f"IMAD.SHL.U32 R{lane16}, R{lane}, 0x10, RZ", y=True, stall=6)
    k.op(f"IADD3 R{R_LDS}, R{lane16}, {base + LDS_AT:#x}, RZ", y=True, stall=1)
    k.op(f"IADD3 R{R_COPY_DST}, R{lane16}, {base + COPY_AT:#x}, RZ", y=True, stall=1)
    k.op(f"IMAD.SHL.U32 R{R_STS}, R{lane}, 0x8, RZ", y=True, stall=6)
    k.op(f"IADD3 R{R_STS}, R{R_STS}, {base + STS_AT:#x}, RZ", y=True, stall=6)
    # the copies' source: inp + warp x 2 KiB + lane x 16
    k.op(f"IMAD R{copy_off}, R{warp}, 0x800, R{lane16}", y=True, stall=6)
    k.op(f"IADD3 R{R_COPY_SRC}, P1, R{r.inp}, R{copy_off}, RZ", wait=0x10, y=True, stall=6)
    k.op(f"IADD3.X R{R_COPY_SRC + 1}, RZ, R{r.inp + 1}, RZ, P1, !PT", y=True, stall=6)
    # the windows' base: inp + (ctaid % 128) x WINDOW_REGION + warp x WARP_ROWS + lane x 16
    k.op(f"LOP3.LUT R{win_off}, R{r.ctaid}, 0x7f, RZ, 0xc0, !PT", wait=0x02, y=True, stall=6)
    k.op(f"IMAD R{win_off}, R{win_off}, {WINDOW_REGION // WARP_ROWS:#x}, R{warp}", y=True, stall=6)
    k.op(f"IMAD R{win_off}, R{win_off}, {WARP_ROWS:#x}, R{lane16}", y=True, stall=6)
    k.op(f"IADD3 R{R_WIN_BASE}, P1, R{r.inp}, R{win_off}, RZ", y=True, stall=6)
    k.op(f"IADD3.X R{R_WIN_BASE + 1}, RZ, R{r.inp + 1}, RZ, P1, !PT", y=True, stall=6)
    k.op(f"MOV R{R_WIN_OFF}, RZ", y=True, stall=1)
    # fragments (1.0 in every half), accumulators and sources
    for reg in range(A_HI, B_LO + 2):
        k.op(f"MOV R{reg}, 0x3c003c00", stall=1)
    for reg in range(R_SRC, R_SRC + 6):
        k.op(f"MOV R{reg}, 0x3f800000", stall=1)
    if "a_ldg" in parts:
        k.op(f"MOV R{R_A_OFF}, RZ", stall=1)
    for reg in range(ACC, ACC + 4 * TILES, 2):
        k.op(f"CS2R R{reg}, SRZ", stall=1)
    k.op("NOP", y=True, stall=6)
    block_start(k, r)

    if "roles" in parts:
        # warps 0-3 (one a scheduler) transform two pairs of windows each, warps 4-7 none: the
        # two bodies branch apart once, and meet at each k-step's barrier
        k.op(f"@P3 BRA CONSUMERS", y=True, stall=5)
        _loop(k, r, "LOOP", shape, parts, 2 * WINDOWS)
        k.op("BRA DONE", y=True, stall=5)
        k.label("CONSUMERS")
        _loop(k, r, "LOOPC", shape, parts, 0)
        k.label("DONE")
    else:
        _loop(k, r, "LOOP", shape, parts, WINDOWS)
    # every load and copy landed before the record's stores reuse nothing they read
    epilogue(k, r, end_wait=0x3f if ("ldg" in parts or "smem" in parts or "lds" in parts) else 0)
    return k


def instructions_a_step(shape: Optional[str], parts: tuple[str, ...]) -> dict[str, int]:
    """What the loop holds, by kind (the CPU tests count them in the cubin): one body, or with
    "roles" the two bodies of the warps with and without windows."""
    if "roles" not in parts:
        return _body_counts(shape, parts, WINDOWS)
    out = _body_counts(shape, parts, 2 * WINDOWS)
    for kind, n in _body_counts(shape, parts, 0).items():
        out[kind] = out.get(kind, 0) + n
    return out


def _body_counts(shape: Optional[str], parts: tuple[str, ...], windows: int) -> dict[str, int]:
    """One loop body's instructions by kind, for a thread that transforms `windows` windows."""
    out = {}
    values = 36 * windows
    if shape:
        out[f"HMMA.{shape}.F32"] = len(hmma_ops(shape))
    if "lds" in parts:
        out["LDS.128"] = frag_loads(parts)
    if "smem" in parts:
        if windows:
            out["STS.64"] = V_STORES * windows // WINDOWS
        if "a_ldg" not in parts:
            out["LDGSTS.E.BYPASS.128"] = U_COPIES
    loads = WINDOW_ROWS * windows * ("ldg" in parts) + A_LOADS * ("a_ldg" in parts)
    if loads:
        out["LDG.E.128"] = loads
    if "ldg" in parts and windows:
        out["LDG.E"] = 2 * windows * WINDOW_ROWS
    if "alu" in parts and windows:
        out["FFMA"] = TRANSFORM_FMA * windows
        out["F2FP.F16.F32.PACK_AB"] = values
        out["HADD2.F32"] = values
    shuffles = (PAIR_SHFL if "pairs" in parts else 0) + (SCALE_REDUCE if "scale" in parts and windows else 0)
    if shuffles:
        out["SHFL.BFLY"] = shuffles
    if "pairs" in parts:
        out["PRMT"] = PAIR_PRMT
    if "scale" in parts and windows:
        out["FMNMX"] = values
        out["ATOMS.MAX.S32"] = 1
    return out


def shared_bytes_a_step(parts: tuple[str, ...]) -> int:
    """Bytes the block's LDS and STS move a k-step. Not the copies': LDGSTS lands beside them
    (H100: the HMMAs, loads, stores and copies of '+ shared stores and copies' took 2183 cycles
    a k-step, where the three's bytes at 128 a clock would take 2368)."""
    return THREADS * (16 * frag_loads(parts) + (8 * V_STORES if "smem" in parts else 0))


def loop_length(k: Sass, label: str = "LOOP") -> int:
    """Instructions from the loop's label to its back branch, the branch included."""
    at = next(i for i, ln in enumerate(k.lines) if ln.kind == "label" and ln.text == f"{label}:")
    n = 0
    for ln in k.lines[at + 1:]:
        if ln.kind == "inst":
            n += 1
            if ln.text.startswith(f"@P2 BRA {label}"):
                return n
    raise ValueError(f"no back branch to {label}")


@lru_cache(maxsize=None)
def mix_source(variant: str) -> tuple[str, Source, int]:
    """The variant's kernel name, source, and the instructions a k-step of a scheduler's two
    warps."""
    shape, parts = VARIANTS[variant]
    name = "hmma_mix_" + "_".join([shape or "none"] + list(parts))
    k = mix_kernel(name, shape, parts)
    # a scheduler's two warps: warps w and w + 4, so with "roles" one of each body
    issue = loop_length(k) + (loop_length(k, "LOOPC") if "roles" in parts else loop_length(k))
    return name, Source(SASS, k.text(), f"{name}.sass"), issue


@lru_cache(maxsize=None)
def hmma_cuda() -> Source:
    return Source(CUDA, read_kernel("hmma_stream.cu"), "hmma_stream.cu", (f"-DTILES={TILES}",))


def _cycles_a_step(rec: Records, case: Case) -> float:
    """Median over SMs of the SM's cycle span over the loop's iterations."""
    _ids, spans, _ = rec.sm_groups()
    return float(np.median(spans[spans > 0])) / case.iters


@register
class HmmaLoopMix(Benchmark):
    name = "inst.hmma_loop_mix"
    title = "A fused Winograd loop on HMMA in FP16 halves: its instruction mix's throughput"
    about = ("One k-step (16 channels) of a fused F(4x4,3x3) loop whose products are HMMAs in "
             "FP16 halves a loop iteration, 8 warps a block, one block an SM, L1 at what a 227 KiB "
             "shared carveout leaves: 108 HMMA.16816 (or 216 HMMA.1688) over 36 accumulator tiles, "
             "38 LDS.128 fragment loads, 36 STS.64 and 18 LDGSTS.BYPASS.128, two 6x6 windows "
             "(36 global loads from L2) and their transform and split (288 FFMA/FADD, 72 FMUL, "
             "72 FADD, 72 HADD2.F32, 72 F2FP), one barrier; no instruction waits on another's "
             "result but loads on loads three back (NOTES.md section 26 of kernels_sass/winograd). "
             "Cycles a k-step on each SM (median), the parts added one at a time; the CUDA-C "
             "reference is ptxas's stream of the same 108 HMMA.16816 (mma.sync m16n8k16).")

    def cases(self, quick: bool, arch: str = "sm_90") -> list[Case]:
        iters = 32 if quick else 64
        inp = np.zeros(INP_WORDS, dtype=np.uint32)
        out = []
        for variant, (shape, parts) in VARIANTS.items():
            kname, src, issue = mix_source(variant)
            counts = instructions_a_step(shape, parts)
            # a scheduler issues one instruction a clock for its two warps; the SM's shared
            # memory moves 128 bytes a clock
            floor = max(issue, shared_bytes_a_step(parts) / 128)
            metric = Metric("cycles_per_step", "cycles", _cycles_a_step,
                            Limit(min=floor, why="two warps a scheduler at one instruction a clock, "
                                  "and 128 shared-memory bytes a clock"))
            impls = [(SASS, src, kname)]
            if variant == "HMMA.16816 alone":
                impls.append((CUDA, hmma_cuda(), "hmma_stream"))
            for lang, source, k in impls:
                out.append(Case(self.name, variant, lang, source, k, "sms", THREADS, iters, [metric],
                                inp=inp, expect=counts,
                                attributes={"preferred_shared_memory_carveout": 100},
                                extra={"hmma": shape, "parts": list(parts),
                                       "shared_bytes_a_step": shared_bytes_a_step(parts)}))
        return out
