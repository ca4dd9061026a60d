"""`f4tc-chunks` (chunks.py): the chunks cover every image once (CPU); f4tc in chunks on several
streams, V and M reused, gives the convolution (GPU)."""
from __future__ import annotations

import pytest

from kernels_sass.winograd import chunks
from kernels_sass.winograd.plan import Shape


@pytest.mark.parametrize("n,chunk", [(128, 16), (7, 3), (5, 8), (1, 1)])
def test_chunks_cover_every_image_once_the_last_one_shorter(n, chunk):
    starts = chunks.chunk_starts(n, chunk)
    images = [i for n0, m in starts for i in range(n0, n0 + m)]
    assert images == list(range(n))
    assert all(m == chunk for _, m in starts[:-1]) and 1 <= starts[-1][1] <= chunk


def test_a_chunk_of_no_images_is_refused():
    with pytest.raises(ValueError, match="chunk 0: expected at least 1 image"):
        chunks.chunk_starts(4, 0)


def test_the_command_takes_its_chunks_and_streams():
    from kernels_sass.winograd.__main__ import main
    with pytest.raises(SystemExit) as e:
        main(["f4tc-chunks", "--chunks", "x"])
    assert e.value.code == 2


@pytest.mark.gpu
@pytest.mark.parametrize("shape,chunk,streams", [(Shape(7, 20, 9, 11, 40), 3, 2), (Shape(5, 128, 28, 28, 128), 2, 3),
                                                 (Shape(4, 64, 8, 8, 64), 4, 1)], ids=str)
def test_f4tc_in_chunks_on_streams_matches_float64_on_the_gpu(shape, chunk, streams):
    """Chunks of unequal size (their own plans), streams reusing their V and M chunk after
    chunk, NaN-poisoned output: within 1e-5 of float64."""
    from sassas.load import gpu_available
    ok, why = gpu_available()
    if not ok:
        pytest.skip(f"no GPU: {why}")
    import torch
    from kernels_sass.winograd import api
    if api.arch() != "sm_90":
        pytest.skip(f"the tensor-core GEMM is generated for sm_90; this GPU is {api.arch()}")
    torch.manual_seed(sum(map(ord, f"chunks {shape} {chunk} {streams}")))
    x = torch.randn(shape.N, shape.C, shape.H, shape.W, device="cuda")
    w = torch.randn(shape.K, shape.C, 3, 3, device="cuda")
    y = torch.full((shape.N, shape.K, shape.H, shape.W), float("nan"), device="cuda")
    chunks.Chunked(shape, chunk, streams)(x, w, y)
    torch.cuda.synchronize()
    want = torch.nn.functional.conv2d(x.double(), w.double(), padding=1)
    assert not torch.isnan(y).any()
    assert float(torch.linalg.vector_norm(y.double() - want) / torch.linalg.vector_norm(want)) <= 1e-5
