"""Every benchmark case, full and quick, builds the same kernel and launch as recorded in
data/case_digests.json: the SASS text (so the cubin) or the CUDA-C source and its NVRTC
options, the kernel name, the launch shape and extra warm-up launches, the input words, the
parameters, the metrics and their limits, the model and the extra fields. Refactoring the case-building code must keep
every line; a deliberate change of a benchmark rewrites the file:

    MICROBENCH_WRITE_DIGESTS=1 python -m pytest -q tests/microbench/test_case_digests.py
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os

import numpy as np
import pytest

from microbench.core import all_benchmarks

ARCH = "sm_90"
DATA = os.path.join(os.path.dirname(__file__), "data", "case_digests.json")
WRITE_ENV = "MICROBENCH_WRITE_DIGESTS"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def describe(case) -> dict:
    """What a case launches and how its figures are judged, as plain data."""
    inp = None if case.inp is None else _sha(np.ascontiguousarray(case.inp, np.uint32).tobytes())
    return {
        "source": [case.source.lang, case.source.filename, _sha(case.source.text.encode()),
                   list(case.source.options)],
        "kernel": case.kernel, "grid": case.grid, "blocks_per_sm": case.blocks_per_sm,
        "block": case.block, "iters": case.iters, "inp": inp, "p0": case.p0, "p1": case.p1,
        "flag": case.flag, "cluster": case.cluster, "attributes": case.attributes,
        "warmup": case.warmup,
        "tensor_map": None if case.tensor_map is None else dataclasses.asdict(case.tensor_map),
        "expect": case.expect, "model": case.model,
        "metrics": [[m.name, m.unit, m.limit.min, m.limit.max, m.headline] for m in case.metrics],
        "check": case.check is not None,
        "extra": json.loads(json.dumps(case.extra, default=str)),
    }


def current() -> dict:
    out = {}
    for name, bench in all_benchmarks().items():
        for quick in (False, True):
            for i, c in enumerate(bench.cases(quick, ARCH)):
                key = f"{name} | {'quick' if quick else 'full'} | {i:03d} {c.variant} | {c.impl}"
                assert key not in out, key
                out[key] = _sha(json.dumps(describe(c), sort_keys=True).encode())
    return out


def test_every_case_builds_what_was_recorded():
    got = current()
    if os.environ.get(WRITE_ENV):
        with open(DATA, "w") as f:
            json.dump(got, f, indent=0, sort_keys=True)
            f.write("\n")
    with open(DATA) as f:
        want = json.load(f)
    missing = sorted(set(want) - set(got))
    added = sorted(set(got) - set(want))
    changed = sorted(k for k in set(want) & set(got) if want[k] != got[k])
    assert not (missing or added or changed), (
        f"{len(changed)} cases changed, {len(missing)} gone, {len(added)} new; first: "
        + "; ".join((changed + missing + added)[:5]))


def test_the_record_covers_every_benchmark():
    with open(DATA) as f:
        names = {k.split(" | ")[0] for k in json.load(f)}
    assert names == set(all_benchmarks())
