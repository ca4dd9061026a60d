"""What the microbench GPU tests share: the GPU they run on."""
from __future__ import annotations

import pytest

from microbench.gpu import gpu_available


@pytest.fixture(scope="module")
def gpu():
    ok, why = gpu_available()
    if not ok:
        pytest.skip(f"no GPU: {why}")
    from microbench.gpu import Gpu
    g = Gpu()
    if g.info.arch != "sm_90":
        pytest.skip(f"the SASS kernels are written for sm_90; this GPU is {g.info.arch}")
    return g
