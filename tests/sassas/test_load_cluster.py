"""Thread-block cluster launches through the loader (Kernel.launch(cluster=...)): the
dimensions are checked on any machine; on an sm_90+ GPU every CTA reads its rank and the
cluster's size back."""
from __future__ import annotations

from importlib import import_module

import numpy as np
import pytest

L = import_module("sassas.load")

SOURCE = r"""
extern "C" __global__ void ranks(unsigned *out) {
  unsigned r, n;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
  if (threadIdx.x == 0) out[blockIdx.x] = r * 100 + n;
}
"""


def test_cluster_dims_must_divide_the_grid():
    assert L._cluster_dims(4, (8, 1, 1)) == (4, 1, 1)
    with pytest.raises(ValueError, match=r"cluster dimension y = 2 does not divide the grid's \(3\)"):
        L._cluster_dims((1, 2), (4, 3, 1))


@pytest.mark.gpu
def test_cluster_launch_gives_every_cta_its_rank():
    ok, why = L.gpu_available()
    if not ok:
        pytest.skip(f"no GPU: {why}")
    major, minor = L.compute_capability()
    if major < 9:
        pytest.skip(f"clusters need sm_90 or later; this GPU is sm_{major}{minor}")
    from sassas.nvrtc import NvrtcMissing, compile_cuda
    try:
        cubin = compile_cuda(SOURCE, f"sm_{major}{minor}", [], filename="ranks.cu")
    except NvrtcMissing as e:
        pytest.skip(str(e))
    with L.load(cubin) as m:
        out = L.zeros(8, np.uint32)
        m["ranks"](8, 32, out, cluster=4)
        L.synchronize()
        assert list(out.to_numpy()) == [r * 100 + 4 for r in (0, 1, 2, 3, 0, 1, 2, 3)]
        with pytest.raises(ValueError, match="does not divide"):
            m["ranks"](6, 32, out, cluster=4)
