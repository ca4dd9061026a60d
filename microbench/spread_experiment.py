"""Which run lengths, warm-ups and per-launch samples bring the launch-to-launch spread
((max - min) / median over the launches) under 1% for the three families of cases that
exceed it (microbench/README.md, "Spread"):

- spread.bulk: the one-block-an-SM bulk and 2-D tensor streams of smem.bulk_copy (2 KiB and
  8 KiB copies, tma.2d 8 KiB boxes): 1, 2, 4 and 8 times the iterations, 8 more warm-up
  launches, and every block waiting at the start until the whole grid has arrived;
  each launch's sample as the median over SMs (smem.bulk_copy's), the mean over SMs, and the
  sum of the SMs' bytes over the sum of their spans.
- spread.ldgsts: smem.async_copy's one-warp issue-only LDGSTS runs: 4, 8, 16 and 32
  iterations of 32 copies between the clock reads (the copies are not waited for inside the
  clocks: once the queue of outstanding copies is full, a longer run times its drain rate
  rather than the issue), 8 more warm-up launches, one iteration's copies waited for before
  the start clock ('warm'), and the same warp on every SM (the median and mean over SMs).
- spread.cluster: smem.cluster's streams of 8 CTAs (rank+1, rank+7) and of 4 (rank+1):
  1, 2 and 4 times the iterations and 8 more warm-up launches; each launch's sample as the
  mean over SMs (smem.cluster's), the median, the sum over SMs' bytes over the sum of their
  spans, and the mean of the SMs between the 10th and 90th percentiles.

Registered only with MICROBENCH_SPREAD_EXPERIMENT=1 (the worker processes inherit it):

    MICROBENCH_SPREAD_EXPERIMENT=1 python -m microbench run spread --json spread.json
    python -m microbench.spread_experiment spread.json      # the compact table
"""
from __future__ import annotations

import os
import sys

import numpy as np

from .bench_smem import SM_BLOCK, UNROLL
from .bench_smem_bulk import (Shape, _check_landed, _lane0, _size, _source_words, _tensor_input,
                              _tensor_map, bulk_impls, bulk_kernel)
from .bench_smem_cluster import STREAM_ITERS_FACTOR, cluster_stream_impls
from .bench_smem_more import COPY_CHUNK, COPY_FORMS, COPY_UNROLL, COPY_WINDOW, copy_impl
from .core import (CUDA, SASS, SM_STATISTICS, Benchmark, Case, Metric, cuda_impl, register,
                   sass_impl)
from .patterns import LIMIT_BYTES_PER_CLK, WARP
from . import patterns as pat
from .results import Limit

ENV = "MICROBENCH_SPREAD_EXPERIMENT"
MORE_WARMUP = 8
BANDWIDTH_LIMIT = Limit(max=LIMIT_BYTES_PER_CLK, why="32 banks x 4 B a clock")
ISSUE_LIMIT = Limit(min=1.0, why="a warp issues at most one instruction a clock")


def enabled() -> bool:
    return os.environ.get(ENV, "") not in ("", "0")


def _rate(work_per_thread, how: str):
    """A launch's bytes/clk/SM from the per-SM (bytes, span): `how` is a statistic over the
    SMs' rates (median, mean), 'sum' (all SMs' bytes over all their spans) or 'trim10' (the
    mean of the rates between the 10th and 90th percentiles)."""
    def compute(rec, case) -> float:
        work = np.asarray(work_per_thread(rec, case), dtype=np.float64)
        _ids, spans, sums = rec.sm_groups(work)
        ok = spans > 0
        if how == "sum":
            return float(sums[ok].sum() / spans[ok].sum())
        rates = sums[ok] / spans[ok]
        if how == "trim10":
            lo, hi = np.percentile(rates, [10, 90])
            return float(rates[(rates >= lo) & (rates <= hi)].mean())
        return SM_STATISTICS[how](rates)
    return compute


def rate_metrics(work_per_thread, statistics) -> list[Metric]:
    return [Metric(f"B/clk/SM {how}", "B/clk/SM", _rate(work_per_thread, how), BANDWIDTH_LIMIT,
                   headline=i == 0) for i, how in enumerate(statistics)]


@register
class SpreadBulk(Benchmark):
    name = "spread.bulk"
    title = "Spread experiment: one-block-an-SM bulk and tensor streams"
    about = "See microbench/spread_experiment.py."
    SHAPES = (Shape(2048, 4, 4), Shape(8192, 1, 4), Shape(8192, 1, 4, "tensor"))
    BASE_ITERS = 512               # smem.bulk_copy's full runs: 32 x 16

    def cases(self, quick: bool, arch: str = "sm_90") -> list[Case]:
        out = []
        for shape in self.SHAPES:
            tensor = shape.form == "tensor"
            inp = _tensor_input() if tensor else _source_words()
            sync_word = len(inp)
            inp = np.append(inp, np.zeros(2, np.uint32))     # the start barrier's words
            what = f"{'tma.2d' if tensor else 'bulk'} {_size(shape.copy_bytes)} 1 block/SM"
            extra = {"copy_bytes": shape.copy_bytes, "source_word": shape.source_word}
            more = {"tensor_map": _tensor_map(shape)} if tensor else {}
            impls = bulk_impls(shape, True, arch)
            defines = dict(COPY_BYTES=shape.copy_bytes, COPIES=shape.copies, STAGES=shape.stages,
                           WAIT_EACH=1)
            if tensor:
                defines.update(TENSOR=1, ROWS=shape.rows, TENSOR_OFFSET=1024)
            synced = cuda_impl("smem_bulk_copy.cu", "smem_bulk_copy", **defines, SYNC_WORD=sync_word)
            runs = [(f"x{f}", lang, impls[lang], self.BASE_ITERS * f, 0)
                    for lang in (SASS, CUDA) for f in (1, 2, 4, 8)]
            runs += [(f"x1 warmup+{MORE_WARMUP}", lang, impls[lang], self.BASE_ITERS, MORE_WARMUP)
                     for lang in (SASS, CUDA)]
            together = sass_impl(bulk_kernel(shape, True, arch, sync_word=sync_word))
            runs += [(f"x{f} sync-start", lang, impl, self.BASE_ITERS * f, 0)
                     for lang, impl in ((SASS, together), (CUDA, synced)) for f in (1, 4)]
            for label, lang, impl, iters, warmup in runs:
                per_block = float(shape.stage_bytes * shape.stages * iters)
                metrics = rate_metrics(lambda rec, case, b=per_block: _lane0(rec, b),
                                       ("median", "mean", "sum"))
                out += self.both(f"{what} | {label}", {lang: impl}, grid="sms", block=WARP,
                                 iters=iters, metrics=metrics, inp=inp, check=_check_landed,
                                 warmup=warmup, extra=dict(extra), **more)
        return out


@register
class SpreadLdgsts(Benchmark):
    name = "spread.ldgsts"
    title = "Spread experiment: one-warp issue-only LDGSTS"
    about = "See microbench/spread_experiment.py."

    def cases(self, quick: bool, arch: str = "sm_90") -> list[Case]:
        inp = (np.arange(COPY_WINDOW // 4, dtype=np.uint32) * 2654435761).astype(np.uint32)
        out = []
        for form in COPY_FORMS:
            for lang, stall in ((SASS, 1), (SASS, 4), (CUDA, None)):
                name = f"{form} issue" + (f" stall {stall}" if stall else "")
                plain = copy_impl(form, stall or 0, False, lang, arch)
                warm = copy_impl(form, stall or 0, False, lang, arch, warm=True)
                runs = [(f"iters {n}", plain, n, 0, 1) for n in (4, 8, 16, 32)]
                runs += [(f"iters 4 warmup+{MORE_WARMUP}", plain, 4, MORE_WARMUP, 1),
                         ("iters 4 warm", warm, 4, 0, 1), ("iters 16 warm", warm, 16, 0, 1),
                         ("iters 4 every SM", plain, 4, 0, "sms"),
                         ("iters 4 warm every SM", warm, 4, 0, "sms")]
                for label, impl, iters, warmup, grid in runs:
                    n = COPY_UNROLL * iters
                    if grid == 1:
                        metrics = [Metric("cycles_per_inst", "cycles",
                                          lambda rec, case, n=n: float(rec.warp_span(0)) / n,
                                          ISSUE_LIMIT)]
                    else:
                        metrics = [Metric(f"cycles_per_inst {how}", "cycles",
                                          lambda rec, case, n=n, how=how:
                                          SM_STATISTICS[how](rec.sm_groups()[1]) / n,
                                          ISSUE_LIMIT, headline=how == "median")
                                   for how in ("median", "mean")]
                    out += self.both(f"{name} | {label}", {lang: impl}, grid=grid, block=WARP,
                                     iters=iters, metrics=metrics, inp=inp, warmup=warmup,
                                     extra={"copies": n, "bytes_per_lane": COPY_CHUNK * n})
        return out


@register
class SpreadCluster(Benchmark):
    name = "spread.cluster"
    title = "Spread experiment: cluster streams of 8 and 4 CTAs"
    about = "See microbench/spread_experiment.py."
    PLACEMENTS = ((8, 1), (8, 7), (4, 1))
    BASE_ITERS = 32 * STREAM_ITERS_FACTOR     # smem.cluster's full runs

    def cases(self, quick: bool, arch: str = "sm_90") -> list[Case]:
        p = pat.pattern(16, "conflict-free")
        inp = np.tile(p.input_words(0), SM_BLOCK // 32)
        impls = cluster_stream_impls(arch)
        out = []
        for size, distance in self.PLACEMENTS:
            runs = [(f"x{f}", self.BASE_ITERS * f, 0) for f in (1, 2, 4)]
            runs += [(f"x1 warmup+{MORE_WARMUP}", self.BASE_ITERS, MORE_WARMUP)]
            for label, iters, warmup in runs:
                lane_bytes = 16.0 * UNROLL * iters
                metrics = rate_metrics(lambda rec, case, b=lane_bytes: np.full(rec.threads, b),
                                       ("mean", "median", "sum", "trim10"))
                out += self.both(f"cluster {size} rank+{distance} | {label}", impls, grid="sms",
                                 block=SM_BLOCK, iters=iters, metrics=metrics, inp=inp,
                                 p0=distance, cluster=size, warmup=warmup)
        return out


def compact_table(path: str) -> str:
    """One row per case, variant and impl: n launches, then per per-launch sample its median
    and spread in % (the first sample is the benchmark's own), and the kernel's ms."""
    from .results import fmt_value, read_json
    device, results = read_json(path)
    rows: dict[tuple, list] = {}
    for r in results:
        case, _, variant = r.variant.partition(" | ")
        key = (case, variant, r.impl)
        cells = rows.setdefault(key, [r.n, r.extra.get("kernel_ms_median")])
        sample = "warp" if r.metric == "cycles_per_inst" else r.metric.split()[-1]
        cells.append(f"{sample} ERROR" if r.error else
                     f"{sample} {fmt_value(r.value)} ±{100 * (r.spread or 0):.2f}")
    table = [["case", "variant", "impl", "n", "ms", "per-launch sample: median ±spread%"]]
    for (case, variant, impl), (n, ms, *cells) in rows.items():
        table.append([case, variant, impl, str(n), "" if ms is None else f"{ms:.2f}",
                      " | ".join(cells)])
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]) - 1)]
    lines = [f"spread experiment on {device.get('device', '?')}: {device.get('repeat')} timed launches "
             f"after {device.get('warmup')} warm-ups (+{MORE_WARMUP} where the variant says so)"]
    for row in table:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[-1])
    errors = [f"  {r.name} {r.variant} [{r.impl}] {r.metric}: {r.error}" for r in results if r.error]
    if errors:
        lines += ["", "ERRORS:"] + errors
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(compact_table(sys.argv[1]))
