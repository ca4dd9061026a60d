"""The shared-memory benchmarks beyond LDS/STS on a real sm_90 GPU (marker `gpu`; skipped
elsewhere with the loader's reason): every figure within its physical limit, and the
relations the README states (LEA + LDS = LDS + 6 cycles, ldmatrix conflicts at 128/n,
one shared atomic instruction a clock, a neighbour's shared memory slower than one's own)."""
from __future__ import annotations

import io

import pytest

pytestmark = pytest.mark.gpu


def _run(gpu, names):
    from microbench.runner import run
    log = io.StringIO()
    _dev, results = run(names, quick=True, gpu=gpu, log=log)
    for r in results:
        assert r.error is None, (r.name, r.variant, r.impl, r.error)
    return {(r.variant, r.impl): r.value for r in results}


def test_latency_forms(gpu):
    v = _run(gpu, ["smem.latency_forms"])
    lds = v[("lds32 [R] thread", "sass")]
    assert 15 <= lds <= 40
    assert v[("lea + lds32 [R] thread", "sass")] == pytest.approx(lds + 6, abs=0.5)
    assert v[("lea + lds32 [R] thread", "cuda")] == pytest.approx(lds + 6, abs=0.5)
    assert v[("lds32 [R.X4+UR] thread", "sass")] == pytest.approx(lds, abs=0.5)
    assert v[("ld64 generic [R.64] thread", "sass")] > lds


def test_matrix_conflicts(gpu):
    v = _run(gpu, ["smem.matrix"])
    for op in ("ldmatrix", "stmatrix"):
        assert v[(f"{op}.x4 rows-contiguous", "sass")] >= 120
        assert v[(f"{op}.x4 row-stride-128", "sass")] == pytest.approx(16, rel=0.05)
        assert v[(f"{op}.x4 row-stride-128-swizzled", "sass")] >= 120


def test_atomics_by_contention(gpu):
    v = _run(gpu, ["smem.atomic"])
    assert v[("atoms.add distinct", "sass")] >= 28
    assert v[("atoms.add 32-lanes-per-address", "sass")] == pytest.approx(1, rel=0.05)


def test_async_copy_and_carveout_within_limits(gpu):
    _run(gpu, ["smem.async_copy", "smem.carveout"])


def test_cluster_neighbour_is_slower_than_own(gpu):
    v = _run(gpu, ["smem.cluster"])
    assert v[("ld32 cluster 2 rank+1", "sass")] > v[("ld32 cluster 2 own", "sass")]


def _bulk_copy_relations(v):
    """The relations that fail, of: latency grows with the copy's size; 4 blocks an SM stream at
    least as fast as one (within 2%)."""
    failed = []
    for impl in ("sass", "cuda"):
        for form, small in (("", "16"), ("tma.2d ", "256")):
            if not v[(f"{form}latency 16K", impl)] > v[(f"{form}latency {small}", impl)]:
                failed.append(f"{impl} {form}latency 16K <= latency {small}")
            four = v[(f"{form}stream 8K copies, 4 blocks/SM", impl)]
            one = v[(f"{form}stream 8K copies, 1 block/SM", impl)]
            if not four >= one * 0.98:
                failed.append(f"{impl} {form}stream: 4 blocks/SM {four:.4g} < 0.98 x 1 block/SM {one:.4g}")
    return failed


def test_bulk_copies_within_limits_and_latency_grows_with_size(gpu):
    # Throughput on a GPU shared with other test processes (pytest -n) is disturbed now and then:
    # a relation that fails is measured again, up to three runs in all, and must hold in one.
    runs = []
    for _ in range(3):
        runs.append(_bulk_copy_relations(_run(gpu, ["smem.bulk_copy"])))
        if not runs[-1]:
            return
    pytest.fail("in each of 3 runs: " + " | ".join("; ".join(r) for r in runs))
