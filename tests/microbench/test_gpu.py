"""microbench on a GPU (marker `gpu`; skipped with the loader's reason elsewhere).

A quick run of the shared-memory benchmarks that the issue's "done when" names: LDS.128
conflict-free near 128 B/clk/SM, n-way conflicts near 128/n, shared-memory latency in the
published range, and no result over a physical limit.
"""
from __future__ import annotations

import io

import pytest

pytestmark = pytest.mark.gpu


def _run(gpu, names):
    from microbench.runner import run
    log = io.StringIO()
    dev, results = run(names, quick=True, gpu=gpu, log=log)
    return {(r.name, r.variant, r.impl, r.metric): r for r in results}, log.getvalue()


def test_shared_memory_bandwidth_and_conflicts(gpu):
    rs, log = _run(gpu, ["smem.bandwidth"])
    best = rs[("smem.bandwidth", "lds128 conflict-free", "sass", "bytes_per_clk_sm")]
    assert best.error is None, best.error
    assert best.value >= 120, log[-3000:]
    assert best.spread < 0.02
    for n in (2, 4, 8, 16, 32):
        r = rs[("smem.bandwidth", f"lds32 {n}-way", "sass", "bytes_per_clk_sm")]
        assert r.error is None and r.value == pytest.approx(128 / n, rel=0.15), (n, r.value)


def test_shared_memory_latency(gpu):
    rs, log = _run(gpu, ["smem.latency"])
    r = rs[("smem.latency", "lds32 lanes", "sass", "latency")]
    assert r.error is None, r.error
    assert 15 <= r.value <= 60, log[-3000:]


def test_instruction_benchmarks_give_no_impossible_figures(gpu):
    rs, log = _run(gpu, ["inst.clock", "inst.mufu", "inst.latency"])
    for key, r in rs.items():
        if r.impl == "sass":
            assert r.error is None, (key, r.error)
