"""A stand-in GPU for testing the runner without one (MICROBENCH_FAKE_GPU=1).

It returns synthetic samples (the case's model prediction, or 1.0, with 0.1% noise) and can
be told to misbehave at chosen case indices, to exercise the worker isolation:

    MICROBENCH_FAKE_FAIL="crash:3,hang:5,sticky:7,error:9,bogus:11"

crash: the worker process dies; hang: it sleeps forever; sticky: a CUDA error that ruins the
context; error: an ordinary failure of that case; bogus: a figure far above any limit.
Indices count within one benchmark's case list.
"""
from __future__ import annotations

import os
import time

import numpy as np

from .gpu import DeviceInfo, GpuError

ENV = "MICROBENCH_FAKE_GPU"
FAIL_ENV = "MICROBENCH_FAKE_FAIL"


def enabled() -> bool:
    return os.environ.get(ENV, "") not in ("", "0")


def _failures() -> dict[int, str]:
    out = {}
    for item in os.environ.get(FAIL_ENV, "").split(","):
        if ":" in item:
            what, idx = item.split(":", 1)
            out[int(idx)] = what.strip()
    return out


class FakeGpu:
    def __init__(self, arch: str = "sm_90", sm_count: int = 132):
        self.info = DeviceInfo("Fake GPU", arch, sm_count, 1980000, 13000)
        self.failures = _failures()
        self.calls = 0

    def run_case(self, case, repeat: int, warmup: int):
        index = getattr(case, "index", None)
        what = self.failures.get(index) if index is not None else None
        if what == "crash":
            os._exit(17)
        if what == "hang":
            while True:
                time.sleep(1)
        if what == "sticky":
            raise GpuError("cuEventSynchronize failed: CUDA_ERROR_ILLEGAL_INSTRUCTION",
                           "CUDA_ERROR_ILLEGAL_INSTRUCTION")
        if what == "error":
            raise RuntimeError("fake failure")
        self.calls += 1
        rng = np.random.default_rng(self.calls)
        samples = {}
        for m in case.metrics:
            v = case.model if case.model else 1.0
            if what == "bogus":
                v = 1e6
            samples[m.name] = [float(v * (1 + 0.001 * x)) for x in rng.standard_normal(repeat)]
        return samples, [0.01] * repeat, None
