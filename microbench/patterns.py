"""Shared-memory access patterns: which byte each lane of a warp touches, and what a bank
model predicts for them.

A pattern is 32 byte offsets (one per lane, relative to the start of the benchmark's
shared array; -1 = lane inactive) for an access `width` bytes wide (4, 8 or 16). The
kernels read the offsets from global memory, so one kernel per (instruction, width) runs
every pattern.

Bank model: 32 banks of 4 bytes; word w sits in bank w % 32; a bank serves one word per
cycle, and lanes reading the same word share it (broadcast). Two ways of grouping a warp's
request into the cycles ("wavefronts") the banks need are predicted:

- ``phase``: the warp is split into fixed phases of 128 bytes' worth of lanes (32 lanes for
  32-bit, 16 for 64-bit, 8 for 128-bit accesses); each phase takes as many wavefronts as its
  most-loaded bank has distinct words;
- ``ideal``: any lanes may share a wavefront: max(most-loaded bank over the whole warp,
  distinct bytes / 128).

The measurement says which the hardware does (the `phase-cross` patterns are built to tell
them apart).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

WARP = 32
BANKS = 32
BANK_BYTES = 4
LIMIT_BYTES_PER_CLK = BANKS * BANK_BYTES      # 128 B/clk/SM
FOOTPRINT = 16 * 1024                         # a pattern's bytes fit in 16 KiB
CONFLICT_WAYS = (2, 4, 8, 16, 32)


@dataclass(frozen=True)
class Pattern:
    name: str
    width: int                 # bytes per lane: 4, 8, 16
    offsets: tuple[int, ...]   # 32 byte offsets, -1 = inactive lane
    about: str = ""
    ways: Optional[int] = None  # the n of an n-way conflict pattern (for plots)

    @property
    def array(self) -> np.ndarray:
        return np.array(self.offsets, dtype=np.int64)

    @property
    def active(self) -> np.ndarray:
        return self.array >= 0

    @property
    def active_lanes(self) -> int:
        return int(self.active.sum())

    @property
    def requested_bytes(self) -> int:
        """Bytes the active lanes ask for (what a bandwidth figure counts)."""
        return self.active_lanes * self.width

    def words(self, lanes=None) -> set[int]:
        arr = self.array
        lanes = range(WARP) if lanes is None else lanes
        out = set()
        for lane in lanes:
            if arr[lane] >= 0:
                base = int(arr[lane]) // BANK_BYTES
                out.update(range(base, base + self.width // BANK_BYTES))
        return out

    @property
    def unique_bytes(self) -> int:
        return len(self.words()) * BANK_BYTES

    def input_words(self, base: int = 0) -> np.ndarray:
        """The per-lane words the kernel reads: offset (+base), bit 31 set when inactive."""
        arr = self.array
        out = np.where(arr >= 0, arr + base, 0x80000000).astype(np.uint64)
        return out.astype(np.uint32)


def _bank_load(words: set[int]) -> int:
    if not words:
        return 0
    counts = np.bincount(np.fromiter((w % BANKS for w in words), dtype=np.int64), minlength=BANKS)
    return int(counts.max())


def wavefronts_phase(p: Pattern) -> int:
    lanes_per_phase = LIMIT_BYTES_PER_CLK // p.width
    total = 0
    for start in range(0, WARP, lanes_per_phase):
        total += _bank_load(p.words(range(start, start + lanes_per_phase)))
    return total


def wavefronts_ideal(p: Pattern) -> int:
    words = p.words()
    if not words:
        return 0
    return max(_bank_load(words), -(-len(words) * BANK_BYTES // LIMIT_BYTES_PER_CLK))


def model_bytes_per_clk(p: Pattern, model: str = "phase") -> float:
    """Requested bytes per clock the model predicts for a stream of this access (one SM)."""
    wf = wavefronts_phase(p) if model == "phase" else wavefronts_ideal(p)
    return p.requested_bytes / wf if wf else 0.0


def limit_bytes_per_clk(p: Pattern) -> float:
    """The physical ceiling on *requested* bytes per clock and SM for this pattern.

    The banks deliver at most 128 distinct bytes a clock, and one shared-memory instruction
    is accepted per clock per SM; a pattern that asks for the same word from several lanes
    (broadcast) counts those bytes once in the first bound.
    """
    unique = p.unique_bytes
    if unique == 0:
        return 0.0
    return min(LIMIT_BYTES_PER_CLK * p.requested_bytes / unique, float(p.requested_bytes))


def min_cycles_per_instruction(p: Pattern) -> float:
    """The fewest cycles one warp's instruction can take: its distinct bytes over 128 B/clk,
    and at least one cycle."""
    return max(1.0, p.unique_bytes / LIMIT_BYTES_PER_CLK)


# --------------------------------------------------------------------------------------------
# The patterns
# --------------------------------------------------------------------------------------------

def _mk(name: str, width: int, offs, about: str, ways: Optional[int] = None) -> Pattern:
    offs = tuple(int(o) for o in offs)
    assert len(offs) == WARP, name
    for o in offs:
        if o >= 0:
            assert o % width == 0, (name, o)
            assert o + width <= FOOTPRINT, (name, o)
    return Pattern(name, width, offs, about, ways)


def patterns(width: int) -> list[Pattern]:
    """Every pattern measured for accesses `width` bytes wide."""
    if width not in (4, 8, 16):
        raise ValueError(f"access width {width} bytes: expected 4, 8 or 16")
    lanes = np.arange(WARP)
    w = width
    out = [_mk("conflict-free", w, lanes * w, "lane i at i*width: consecutive", ways=1)]
    for n in CONFLICT_WAYS:
        out.append(_mk(f"{n}-way", w, lanes * w * n,
                       f"lane i at i*width*{n}: {n}-way bank conflict within a phase "
                       f"(capped at the lanes of a phase)", ways=n))
    out.append(_mk("broadcast", w, np.zeros(WARP, dtype=np.int64), "every lane the same address"))
    out.append(_mk("pairs", w, (lanes // 2) * w, "lanes 2i and 2i+1 share an address (multicast)"))
    perm = np.random.default_rng(12345).permutation(WARP)
    out.append(_mk("permuted", w, perm * w, "consecutive addresses, lanes in a fixed random order"))
    out.append(_mk("half-warp", w, np.where(lanes < 16, lanes * w, -1),
                   "lanes 0..15 active (half-warp divergence), consecutive"))
    out.append(_mk("quarter-warp", w, np.where(lanes < 8, lanes * w, -1),
                   "lanes 0..7 active (quarter-warp divergence), consecutive"))
    out.append(_mk("odd-lanes", w, np.where(lanes % 2 == 1, lanes * w, -1),
                   "odd lanes active, consecutive addresses"))
    if w == 16:
        out += _gemm_operands()
    if w > 4:
        out.append(_mk("phase-cross", w, _phase_cross(w),
                       "each fixed phase has a 2-way conflict, but phase pairs use "
                       "complementary banks: 'phase' model 2x slower than 'ideal'"))
    return out


def _gemm_operands() -> list[Pattern]:
    """The operand reads of a register-tiled SGEMM (LDS.128, 4 consecutive floats of a row of
    A or of B a lane): a warp of 32 threads covers a 4 x 8 grid of thread tiles, so it reads 4
    distinct 16-byte chunks of A and 8 of B. Which lanes share a chunk is the kernel's choice
    (its lane -> (ty, tx) map); these patterns measure what each choice costs the banks."""
    lanes = np.arange(WARP)
    c = 16
    return [
        _mk("gemm-a-quarters", 16, (lanes // 8) * c,
            "ty = lane/8: each quarter-warp reads one chunk, 4 chunks in all (A, ty-major map)"),
        _mk("gemm-b-quarters", 16, (lanes % 8) * c,
            "tx = lane%8: each quarter-warp reads the same 8 chunks (B, ty-major map)"),
        _mk("gemm-a-halves", 16, ((lanes % 16) // 4) * c,
            "ty = (lane%16)/4: each half-warp reads the same 4 chunks (A, half-warp 4x4 map)"),
        _mk("gemm-b-halves", 16, (lanes % 4 + 4 * (lanes // 16)) * c,
            "tx = lane%4 + 4*(lane/16): each half-warp reads 4 chunks of its own (B, half-warp 4x4 map)"),
        _mk("gemm-quarter-pairs", 16, (lanes % 2 + 2 * (lanes // 8)) * c,
            "each quarter-warp reads 2 chunks of its own, 8 in all"),
        _mk("gemm-a-blocked", 16, _blocked_map()[0] * c,
            "ty of the blocked map: quarter-warps 2 ty x 4 tx, the two of a half-warp disjoint in both (A)"),
        _mk("gemm-b-blocked", 16, _blocked_map()[1] * c,
            "tx of the blocked map (B)"),
        _mk("gemm-a-2x2", 16, _quad_map()[0] * c,
            "ty of the 2x2 map: every 4 consecutive lanes cover 2 ty x 2 tx (A)"),
        _mk("gemm-b-2x2", 16, _quad_map()[1] * c,
            "tx of the 2x2 map (B)"),
    ]


def _quad_map() -> tuple[np.ndarray, np.ndarray]:
    """A lane -> (ty, tx) map of a 4 x 8 warp in which lanes 4k..4k+3 cover a 2 x 2 block:
    ty = bits 2,1 of the lane, tx = bits 4,3,0."""
    lanes = np.arange(WARP)
    return (lanes >> 1) & 3, 2 * (lanes >> 3) + (lanes & 1)


def _blocked_map() -> tuple[np.ndarray, np.ndarray]:
    """A lane -> (ty, tx) map of a 4 x 8 warp in which each quarter-warp covers 2 ty x 4 tx and
    the two quarter-warps of a half-warp share neither a ty nor a tx:
    q0 = {0,1} x {0..3}, q1 = {2,3} x {4..7}, q2 = {0,1} x {4..7}, q3 = {2,3} x {0..3}."""
    lanes = np.arange(WARP)
    q, j = lanes // 8, lanes % 8
    ty = j // 4 + 2 * (q & 1)
    tx = j % 4 + 4 * ((q & 1) ^ (q >> 1))
    return ty, tx


def _phase_cross(width: int) -> np.ndarray:
    """Lanes of phase q use half the banks (q even: banks 0..15, odd: 16..31), in two rows.

    Within a fixed phase (128 B of lanes) two lanes hit each used bank in different rows: a
    2-way conflict. Phase q and q^1 together cover all banks in each row, so a scheduler free
    to pair lanes across phases needs no extra wavefront.
    """
    lanes_per_phase = LIMIT_BYTES_PER_CLK // width      # 16 (64-bit) or 8 (128-bit)
    half = lanes_per_phase // 2                         # lanes per row within a phase
    offs = []
    for lane in range(WARP):
        q, j = divmod(lane, lanes_per_phase)
        row, col = divmod(j, half)
        # row r of phase pair (q // 2): 256 bytes apart per phase pair, 128 per row
        offs.append((q // 2) * 2 * LIMIT_BYTES_PER_CLK * 2 + row * LIMIT_BYTES_PER_CLK
                    + (q % 2) * (LIMIT_BYTES_PER_CLK // 2) + col * width)
    return np.array(offs)


def pattern(width: int, name: str) -> Pattern:
    for p in patterns(width):
        if p.name == name:
            return p
    raise KeyError(f"no pattern {name!r} for width {width}; known: "
                   f"{', '.join(p.name for p in patterns(width))}")
