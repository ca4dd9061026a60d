"""kernels_sass.winograd's bench references (baselines.py): torch conv2d under PyTorch's flags, a
case in a thread of its own, cuDNN's algorithms in NCHW and NHWC; on the CPU and (marked gpu) on
a GPU."""
from __future__ import annotations

import threading

import pytest

from kernels_sass.winograd import baselines


def test_torch_conv_leaves_benchmark_and_tf32_off():
    torch = pytest.importorskip("torch")
    x, w = torch.randn(2, 3, 5, 6), torch.randn(4, 3, 3, 3)
    flags = torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32
    try:
        got = baselines.torch_conv(x, w, True, True)
        assert (torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32) == (False, False)
        assert torch.equal(got, torch.nn.functional.conv2d(x, w, padding=1))
        torch.backends.cudnn.allow_tf32 = True
        with pytest.raises(RuntimeError):
            baselines.torch_conv(x, w[:, :2], False, True)           # channels mismatch
        assert torch.backends.cudnn.allow_tf32 is False
        cases = baselines.torch_cases([x], [w], [x.contiguous(memory_format=torch.channels_last)],
                                      [w.contiguous(memory_format=torch.channels_last)])
        assert list(cases) == list(baselines.TORCH_CASES)
        assert cases["torch default (TF32) channels_last"](0).is_contiguous(memory_format=torch.channels_last)
    finally:
        torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32 = flags


def test_fresh_thread_returns_the_result_and_raises_the_error():
    assert baselines.in_fresh_thread(lambda a, b: (a + b, threading.current_thread().name), 2, 3) == (5, "bench-case")
    with pytest.raises(ZeroDivisionError):
        baselines.in_fresh_thread(lambda: 1 / 0)


def test_cudnn_layout_of_case_names():
    assert baselines.cudnn_layout("cudnn FFT_TILING") == "NCHW"
    assert baselines.cudnn_layout("cudnn NHWC IMPLICIT_GEMM") == "NHWC"
    for name in ("cudnn (benchmark)", "cudnn best", "cudnn best NHWC", "torch default (TF32)", "sass NCHW"):
        assert baselines.cudnn_layout(name) is None


@pytest.mark.gpu
def test_cudnn_in_both_layouts_and_torch_cases_in_graphs():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no GPU: torch.cuda.is_available() is False")
    from kernels_sass.winograd.bench import timeit
    from kernels_sass.winograd.cudnn import Cudnn
    from kernels_sass.winograd.plan import Shape
    s, dev, cl = Shape(8, 32, 14, 14, 48), torch.device("cuda"), torch.channels_last
    x, w = torch.randn((s.N, s.C, s.H, s.W), device=dev), torch.randn((s.K, s.C, 3, 3), device=dev)
    xl, wl = x.contiguous(memory_format=cl), w.contiguous(memory_format=cl)
    want = torch.nn.functional.conv2d(x.double(), w.double(), padding=1)
    flags = torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32
    try:
        torch.nn.functional.conv2d(x, w, padding=1)          # torch loads libcudnn
        cd = Cudnn()
        for layout, xx, ww, y in (("NCHW", x, w, torch.empty_like(want, dtype=torch.float32)),
                                  ("NHWC", xl, wl, torch.empty_like(want, dtype=torch.float32, memory_format=cl))):
            cases, refused = baselines.cudnn_algorithm_cases(cd, s, layout, [xx], [ww], [y], want, dev)
            assert cases, f"no cuDNN algorithm in {layout}: {refused}"
            for name, fn in cases.items():
                assert baselines.cudnn_layout(name) == layout
                y.fill_(float("nan"))
                assert baselines.rel_err(fn(0), want) <= baselines.CUDNN_TOL, name
        torch_cases = baselines.torch_cases([x], [w], [xl], [wl])
        for name in ("torch default (TF32)", "torch FP32 channels_last (benchmark)"):
            ms, how = baselines.in_fresh_thread(timeit, torch_cases[name], 1, 5)
            assert how == "graph" and ms > 0, (name, how)
            assert (torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32) == (False, False)
        assert baselines.rel_err(torch_cases["torch FP32 channels_last (benchmark)"](0), want) <= 1e-5
    finally:
        torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32 = flags
