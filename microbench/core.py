"""What a benchmark is: cases (one kernel, one launch configuration, one input) and the
metrics computed from the records each launch writes.

A benchmark lists its cases deterministically (the runner may resume a benchmark at case
i in a fresh process after a GPU fault), and may derive further results from its cases'
results (`summarize`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np

from .nvrtc import read_kernel
from .patterns import LIMIT_BYTES_PER_CLK, WARP
from .results import Limit, Result

SASS = "sass"
CUDA = "cuda"
IMPLS = (SASS, CUDA)


@dataclass(frozen=True)
class Source:
    """A kernel's source: SASS text for sassas, or CUDA-C for NVRTC."""
    lang: str                    # 'sass' | 'cuda'
    text: str
    filename: str                # for diagnostics, and the dump command
    options: tuple[str, ...] = ()  # NVRTC options (-D...)

    @property
    def key(self) -> tuple:
        return (self.lang, self.text, self.options)


@dataclass(frozen=True)
class Metric:
    """One figure computed from a launch's records."""
    name: str
    unit: str
    compute: Callable[["Records", "Case"], float]
    limit: Limit = Limit()
    headline: bool = True        # shown in the summary table


@dataclass(frozen=True)
class Impl:
    """One implementation of a kernel: its source and the kernel's name in the module."""
    source: Source
    kernel: str


def sass_impl(kernel) -> Impl:
    """A generated SASS kernel (sassgen.Sass) as an implementation."""
    return Impl(Source(SASS, kernel.text(), f"{kernel.name}.sass"), kernel.name)


def cuda_impl(filename: str, kernel: str, **defines) -> Impl:
    """A CUDA-C reference in kernels/, compiled with -DNAME=value for each define, in order."""
    return Impl(Source(CUDA, read_kernel(filename), filename,
                       tuple(f"-D{name}={value}" for name, value in defines.items())), kernel)


@dataclass(frozen=True)
class TensorMap2D:
    """A TMA tensor map that the host encodes at launch, when the input buffer's address is
    known, into inp's first 128 bytes: a 2-D tensor of 32-bit words, `width` x `height`
    (rows packed), starting `offset` bytes into inp, copied in boxes of box_width x
    box_height."""
    offset: int
    width: int
    height: int
    box_width: int
    box_height: int

    WORDS = 32                   # a CUtensorMap: 128 bytes


@dataclass
class Case:
    bench: str
    variant: str
    impl: str                    # 'sass' | 'cuda'
    source: Source
    kernel: str                  # kernel name inside the module
    grid: object                 # int, or 'sms' for blocks_per_sm blocks per SM
    block: int
    iters: int
    metrics: Sequence[Metric]
    inp: Optional[np.ndarray] = None   # uint32 words for `inp` (None: one zero word)
    p0: int = 0
    p1: int = 0
    flag: int = 0
    # Expected instruction counts in the kernel's disassembly, e.g. {'LDS.128': 128}, for
    # the CPU tests: exact for SASS, at least for CUDA references.
    expect: dict = field(default_factory=dict)
    model: Optional[float] = None   # a prediction for the first metric (bank model...)
    extra: dict = field(default_factory=dict)
    # Check the records (e.g. a chain's result); returns an error text or None.
    check: Optional[Callable[["Records", "Case"], Optional[str]]] = None
    # Function attributes set before the case's launches and reset after them, by
    # cuFuncSetAttribute's short names ({'preferred_shared_memory_carveout': 100}).
    attributes: dict = field(default_factory=dict)
    cluster: int = 0             # thread-block cluster size (x) to launch with; 0: no cluster
    blocks_per_sm: int = 1       # with grid 'sms': blocks launched per SM
    warmup: int = 0              # untimed launches of this case beyond the run's --warmup
    # Launches a sample: each metric's sample is its mean over this many launches (streams
    # whose figure moves with where the launch places its blocks and clusters).
    launches: int = 1
    tensor_map: Optional[TensorMap2D] = None   # encoded into inp[0:32] at launch
    index: int = -1              # position in its benchmark's case list (set by the runner)

    @property
    def label(self) -> str:
        return f"{self.bench} {self.variant} [{self.impl}]"

    def grid_size(self, sm_count: int) -> int:
        """Blocks to launch: 'sms' is blocks_per_sm a SM, rounded down to whole clusters."""
        if self.grid != "sms":
            return int(self.grid)
        blocks = sm_count * self.blocks_per_sm
        return blocks - blocks % self.cluster if self.cluster else blocks


class Records:
    """The words a launch wrote: one record of 4 uint32 per thread (see sassgen)."""

    def __init__(self, words: np.ndarray, block: int):
        self.raw = np.asarray(words, dtype=np.uint32).reshape(-1, 4)
        self.block = block

    @property
    def threads(self) -> int:
        return self.raw.shape[0]

    @property
    def start(self) -> np.ndarray:
        return self.raw[:, 0]

    @property
    def end(self) -> np.ndarray:
        return self.raw[:, 1]

    @property
    def smid(self) -> np.ndarray:
        return self.raw[:, 2]

    @property
    def sink(self) -> np.ndarray:
        return self.raw[:, 3]

    def warp_leaders(self) -> np.ndarray:
        """Row index of lane 0 of every warp."""
        return np.arange(0, self.threads, 32)

    def cycles(self) -> np.ndarray:
        """end - start per thread, as unsigned 32-bit differences (int64)."""
        return ((self.end.astype(np.int64) - self.start.astype(np.int64)) & 0xFFFFFFFF)

    def warp_span(self, warp: int = 0) -> int:
        """Cycles from the earliest start to the latest end among the warp's 32 threads."""
        rows = slice(32 * warp, 32 * warp + 32)
        ref = np.int64(self.start[rows][0])
        rel_start = _signed32(self.start[rows].astype(np.int64) - ref)
        rel_end = _signed32(self.end[rows].astype(np.int64) - ref)
        return int(rel_end.max() - rel_start.min())

    def sm_groups(self, work: Optional[np.ndarray] = None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per SM the threads ran on: (sm ids, cycle span from the SM's earliest start to its
        latest end, sum of `work` over the SM's threads).

        A block runs on one SM, so rows are first reduced per block (rows are in block
        order). Clocks of one SM are one counter; differences are taken modulo 2^32
        relative to a first start, so a counter wrap inside the run does no harm.
        """
        nb = self.threads // self.block
        st = self.start[: nb * self.block].reshape(nb, self.block).astype(np.int64)
        en = self.end[: nb * self.block].reshape(nb, self.block).astype(np.int64)
        bref = st[:, :1]
        b_min = _signed32(st - bref).min(axis=1)
        b_max = _signed32(en - bref).max(axis=1)
        b_sm = self.smid[: nb * self.block : self.block]
        b_work = (np.zeros(nb) if work is None else
                  np.asarray(work, dtype=np.float64)[: nb * self.block].reshape(nb, self.block).sum(axis=1))
        ids = np.unique(b_sm)
        spans = np.empty(len(ids), dtype=np.int64)
        sums = np.empty(len(ids), dtype=np.float64)
        bref = bref[:, 0]
        for i, sm in enumerate(ids):
            sel = np.flatnonzero(b_sm == sm)
            shift = _signed32(bref[sel] - bref[sel[0]])       # each block's ref vs the first
            spans[i] = int((b_max[sel] + shift).max() - (b_min[sel] + shift).min())
            sums[i] = b_work[sel].sum()
        return ids, spans, sums

    def sm_spans(self) -> dict[int, int]:
        """Per SM: the cycle span (see sm_groups)."""
        ids, spans, _ = self.sm_groups()
        return {int(sm): int(span) for sm, span in zip(ids, spans)}


def _signed32(x: np.ndarray) -> np.ndarray:
    x = x & 0xFFFFFFFF
    return np.where(x >= 2 ** 31, x - 2 ** 32, x)


# --------------------------------------------------------------------------------------------
# Metric helpers
# --------------------------------------------------------------------------------------------

SM_STATISTICS: dict[str, Callable[[np.ndarray], float]] = {
    "median": lambda x: float(np.median(x)),
    "mean": lambda x: float(np.mean(x)),
    "p10": lambda x: float(np.percentile(x, 10)),
    "p90": lambda x: float(np.percentile(x, 90)),
}


def per_sm_rate(work_per_thread: Callable[[Records, "Case"], np.ndarray], statistic: str = "median"):
    """A metric: `statistic` (median, mean, p10, p90) over SMs of (work done by the SM's
    threads) / (the SM's cycle span)."""
    reduce = SM_STATISTICS[statistic]

    def compute(rec: Records, case: "Case") -> float:
        work = np.asarray(work_per_thread(rec, case), dtype=np.float64)
        _ids, spans, sums = rec.sm_groups(work)
        ok = spans > 0
        if not ok.any():
            raise ValueError("no SM recorded a positive cycle span")
        return reduce(sums[ok] / spans[ok])
    return compute


def bandwidth_metric(bytes_per_thread: Callable[[Records, "Case"], np.ndarray],
                     statistic: str = "median") -> Metric:
    """Shared-memory bytes per clock per SM (per_sm_rate), at most what the banks move."""
    return Metric("bytes_per_clk_sm", "B/clk/SM", per_sm_rate(bytes_per_thread, statistic),
                  Limit(max=LIMIT_BYTES_PER_CLK, why="32 banks x 4 B a clock"))


def sm_bandwidth_metrics(bytes_per_thread: Callable[[Records, "Case"], np.ndarray]) -> list[Metric]:
    """A stream's bytes/clk/SM: the mean over SMs (headline), and the median, 10th and 90th
    percentiles over SMs beside it.

    For streams whose SMs do not get one rate (which SMs pair up in a cluster, or win the
    shared L2 and copy engines, changes from launch to launch), the rates over SMs are no
    narrow peak: their median jumps between launches, while their mean moves only as much
    as the mix; the percentiles show the spread over SMs within a launch."""
    out = [bandwidth_metric(bytes_per_thread, "mean")]
    for statistic in ("median", "p10", "p90"):
        m = bandwidth_metric(bytes_per_thread, statistic)
        out.append(Metric(f"{m.name}_{statistic}", m.unit, m.compute, m.limit, headline=False))
    return out


def latency_metric(hops: int, every_warp: bool = False) -> Metric:
    """Cycles per dependent load: warp 0's span over its `hops` loads, or with `every_warp`
    the median over every warp of the launch (each warp a chase of its own: where the
    latency depends on which SMs a launch gets, one warp's figure moves with the placement
    from launch to launch, the median over the GPU's placements does not)."""
    def one_warp(rec: Records, case: "Case") -> float:
        return float(rec.warp_span(0)) / hops

    def median_over_warps(rec: Records, case: "Case") -> float:
        spans = [rec.warp_span(w) for w in range(rec.threads // 32)]
        return float(np.median(spans)) / hops

    return Metric("latency", "cycles", median_over_warps if every_warp else one_warp,
                  Limit(min=1.0, why="a dependent load takes at least a clock"))


def chain_check(expected: np.ndarray, every_block: bool = False
                ) -> Callable[[Records, "Case"], Optional[str]]:
    """A pointer chase's check: each lane's sink is the offset its chain ends at (`expected`
    per lane; of every block's first warp with `every_block`)."""
    def check(rec: Records, case: "Case") -> Optional[str]:
        got = rec.sink.reshape(-1, WARP) if every_block else rec.sink[None, : len(expected)]
        want = expected[None, : got.shape[1]]
        if (got == want).all():
            return None
        block, lane = (int(x[0]) for x in np.nonzero(got != want))
        where = f"CTA {block} lane {lane}" if every_block else f"lane {lane}"
        return (f"chase ended at offset {int(got[block, lane])} in {where}, expected "
                f"{int(want[0, lane])}: the loads did not follow the chain")
    return check


class Benchmark:
    """Base class: name, title, cases(quick), summarize(results)."""
    name: str = ""
    title: str = ""
    about: str = ""

    def both(self, variant: str, impls: dict, **fields) -> list[Case]:
        """The case of `variant` for each implementation ({'sass': Impl, 'cuda': Impl}),
        in that order, with the same launch and metrics."""
        return [Case(bench=self.name, variant=variant, impl=lang, source=impl.source,
                     kernel=impl.kernel, **fields) for lang, impl in impls.items()]

    def cases(self, quick: bool, arch: str = "sm_90") -> list[Case]:
        raise NotImplementedError

    def summarize(self, results: list[Result]) -> list[Result]:
        """Results derived from the cases' results (default: none)."""
        return []


REGISTRY: dict[str, Benchmark] = {}


def register(cls):
    inst = cls()
    if inst.name in REGISTRY:
        raise ValueError(f"benchmark {inst.name} registered twice")
    REGISTRY[inst.name] = inst
    return cls


def all_benchmarks() -> dict[str, Benchmark]:
    import importlib
    for module in ("bench_smem", "bench_smem_forms", "bench_smem_more", "bench_smem_cluster",
                   "bench_smem_bulk", "bench_inst", "bench_mma"):   # registering, in this order
        importlib.import_module(f"{__package__}.{module}")
    return REGISTRY


class UnknownBenchmark(ValueError):
    """A benchmark or group name that no benchmark has."""


def select(names: Sequence[str]) -> list[Benchmark]:
    """Benchmarks by name; 'all' or nothing = every one; a prefix ('smem') selects a group."""
    reg = all_benchmarks()
    if not names or "all" in names:
        return list(reg.values())
    out = []
    for n in names:
        hits = [b for k, b in reg.items() if k == n or k.startswith(n + ".")]
        if not hits:
            raise UnknownBenchmark(f"unknown benchmark {n!r}; known: {', '.join(reg)}")
        for b in hits:
            if b not in out:
                out.append(b)
    return out
