"""The Winograd convolution as a PyTorch operator: `torch.ops.sassas_winograd.conv2d3x3`.

    y = torch.ops.sassas_winograd.conv2d3x3(x, w, "auto", "auto", "winograd", "torch")
    # x [N, C, H, W], w [K, C, 3, 3] -> [N, K, H, W]; padding 1, stride 1, no bias

`conv2d` (what kernels_sass.winograd.Conv2d calls) is the same operator: the custom op where
torch.compile traces it, an autograd.Function with the same forward and backward in eager mode
(the custom op's Python dispatch costs tens of microseconds a call).

Arguments after the tensors: impl ("auto": the SASS kernel where it runs, else PyTorch; or
api.IMPLS), algo (api.ALGOS), and the two backward switches:

- input_grad "winograd": for a 3x3 filter, stride 1 and padding 1 the input gradient is the
  convolution of the output gradient with the filters rotated by 180 degrees, C and K swapped,
  so it runs through this same operator (and its kernels); "torch": PyTorch's
  convolution_backward (cuDNN on the GPU, TF32 off).
- weight_grad "winograd": F(3x3, 2x2) (wgrad.weight_grad: the output gradient in 2x2 tiles
  against the input's 4x4 windows, 16 GEMMs over N x tiles); "torch": PyTorch's
  convolution_backward (cuDNN on the GPU); "auto" (the default): whichever of the two is faster
  for the shape, timed on its first call (wgrad.choose), "torch" off the GPU and in the custom
  op's registered backward (what torch.compile traces). TF32 is off in both: in eager mode the op turns it off around the call;
  in a torch.compile'd graph the call runs later, under the caller's setting.

The forward runs api.conv2d on CUDA float32 tensors (made contiguous) that the kernels cover
(`uncovered` says why not); everything else (CPU, float64, half, empty tensors, another GPU
than those of target.ARCHS with impl="auto", shapes past the kernels' 32-bit offsets) runs
torch.nn.functional.conv2d (TF32 off, as in the backward). The backward formulas are the same either way, so gradcheck in
float64 on the CPU checks them. A fake implementation gives torch.compile and meta tensors the
output's shape without running anything.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Optional

import torch
import torch.nn.functional as F

from . import api, f4fused_layout, plan, wgrad
from .plan import Shape
from .target import ARCHS

NAME = "sassas_winograd::conv2d3x3"
IMPLS = ("auto",) + api.IMPLS
INPUT_GRADS = ("winograd", "torch")
WEIGHT_GRADS = ("auto", "winograd", "torch")


def _geometry_error(x: torch.Tensor, w: torch.Tensor) -> Optional[str]:
    if x.dim() != 4 or w.dim() != 4 or tuple(w.shape[2:]) != (3, 3) or w.shape[1] != x.shape[1]:
        return f"x [N, C, H, W] and w [K, C, 3, 3], got {tuple(x.shape)} and {tuple(w.shape)}"
    return None


def _check_arguments(x, w, impl, algo, input_grad, weight_grad) -> None:
    bad = _geometry_error(x, w)
    if bad:
        raise ValueError(f"{NAME}: {bad}")
    for what, value, allowed in (("impl", impl, IMPLS), ("algo", algo, api.ALGOS),
                                 ("input_grad", input_grad, INPUT_GRADS), ("weight_grad", weight_grad, WEIGHT_GRADS)):
        if value not in allowed:
            raise ValueError(f"{NAME}: {what} {value!r}: one of {allowed}")
    if impl == "cuda" and algo in api.SASS_ONLY:
        raise ValueError(f"{NAME}: algo {algo!r} is SASS only (impl 'auto' or 'sass'); impl 'cuda' has 'f4'")


@lru_cache(maxsize=None)
def _shape_error(s: Shape, algo: str) -> Optional[str]:
    """Why the SASS kernels cannot take s (None: they can)."""
    try:
        which = api.choose_algo(s, "NCHW", api.this_gpu()) if algo == "auto" else algo
        if which in ("f4", "f4tc"):
            api.f4_plan(s, tc=which == "f4tc")
        elif which == "f4fused":
            f4fused_layout.check(s)
        else:
            plan.check_shape(s)
    except plan.Unsupported as e:
        return str(e)
    return None


def uncovered(x: torch.Tensor, w: torch.Tensor, impl: str = "auto", algo: str = "auto") -> Optional[str]:
    """Why the forward of (x, w) runs PyTorch rather than the kernels (None: the kernels run)."""
    if not (x.is_cuda and w.is_cuda):
        return "CPU tensors (the kernels run on NVIDIA GPUs)"
    if x.dtype != torch.float32 or w.dtype != torch.float32:
        return f"{x.dtype if x.dtype != torch.float32 else w.dtype} tensors (the kernels are FP32)"
    if x.device != w.device:
        return "x and w on different GPUs"
    if x.device.index not in (None, 0):
        return f"tensors on {x.device} (sassas.load runs the kernels on GPU 0)"
    if x.numel() == 0 or w.numel() == 0:
        return "empty tensors"
    if impl == "auto":
        gpu = api.arch()
        if gpu not in ARCHS:
            return (f"this GPU is {gpu}, the SASS kernels are generated for {', '.join(ARCHS)} (impl='cuda' "
                    f"runs the CUDA-C reference, slower than cuDNN)")
        bad = _shape_error(api.problem(x, w), algo)
        if bad:
            return f"shape {tuple(x.shape)} x {tuple(w.shape)}: {bad}"
    return None


def _forward(x: torch.Tensor, w: torch.Tensor, impl: str, algo: str, input_grad: str,
             weight_grad: str) -> torch.Tensor:
    _check_arguments(x, w, impl, algo, input_grad, weight_grad)
    if uncovered(x, w, impl, algo) is not None:
        with wgrad.fp32():
            return F.conv2d(x, w, padding=1).contiguous()
    with torch.cuda.device(x.device):
        # detach: torch gives no __cuda_array_interface__ for tensors that require grad
        return api.conv2d(x.detach().contiguous(), w.detach().contiguous(),
                          "sass" if impl == "auto" else impl, algo=algo)


@torch.library.custom_op(NAME, mutates_args=())
def conv2d3x3(x: torch.Tensor, w: torch.Tensor, impl: str = "auto", algo: str = "auto",
              input_grad: str = "winograd", weight_grad: str = "auto") -> torch.Tensor:
    return _forward(x, w, impl, algo, input_grad, weight_grad)


@conv2d3x3.register_fake
def _(x, w, impl="auto", algo="auto", input_grad="winograd", weight_grad="auto"):
    _check_arguments(x, w, impl, algo, input_grad, weight_grad)
    return x.new_empty((x.shape[0], w.shape[0], x.shape[2], x.shape[3]))


def rotated(w: torch.Tensor) -> torch.Tensor:
    """The filters of the input gradient: w [K, C, 3, 3] rotated by 180 degrees -> [C, K, 3, 3]."""
    return w.flip(2, 3).transpose(0, 1).contiguous()


def _setup_context(ctx, inputs, output):
    x, w, impl, algo, input_grad, weight_grad = inputs
    ctx.save_for_backward(x, w)
    ctx.switches = (impl, algo, input_grad, weight_grad)


def _convolution_backward(gy, x, w, mask):
    with wgrad.fp32():
        return torch.ops.aten.convolution_backward(gy, x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, mask)


def _untimed(x, gy) -> str:
    return "torch"


def _gradients(ctx, gy, forward, choose_weight_grad):
    """(gx, gw, None x 4); `forward` runs the input gradient's convolution, `choose_weight_grad`
    resolves weight_grad "auto": the custom op and _untimed in its registered backward (which
    AOT autograd traces with fake tensors: nothing can be timed), _Eager and wgrad.choose in
    _Eager's."""
    x, w = ctx.saved_tensors
    impl, algo, input_grad, weight_grad = ctx.switches
    gx = gw = None
    if ctx.needs_input_grad[0]:
        if input_grad == "winograd":
            gx = forward(gy, rotated(w), impl, algo, input_grad, weight_grad)
        else:
            gx = _convolution_backward(gy, x, w, [True, False, False])[0]
    if ctx.needs_input_grad[1]:
        if weight_grad == "auto":
            weight_grad = choose_weight_grad(x, gy)
        if weight_grad == "winograd":
            gw = wgrad.weight_grad(x, gy)
        else:
            gw = _convolution_backward(gy, x, w, [False, True, False])[1]
    return gx, gw, None, None, None, None


conv2d3x3.register_autograd(lambda ctx, gy: _gradients(ctx, gy, conv2d3x3, _untimed), setup_context=_setup_context)


class _Eager(torch.autograd.Function):
    """The operator's forward and backward without the custom op's dispatch (tens of
    microseconds a call in eager mode, on kernels of tens of microseconds)."""

    @staticmethod
    def forward(ctx, x, w, impl, algo, input_grad, weight_grad):
        y = _forward(x, w, impl, algo, input_grad, weight_grad)
        _setup_context(ctx, (x, w, impl, algo, input_grad, weight_grad), y)
        return y

    @staticmethod
    def backward(ctx, gy):
        return _gradients(ctx, gy, _Eager.apply, wgrad.choose)


def conv2d(x: torch.Tensor, w: torch.Tensor, impl: str = "auto", algo: str = "auto",
           input_grad: str = "winograd", weight_grad: str = "auto") -> torch.Tensor:
    """The operator as the layer calls it: torch.ops.sassas_winograd.conv2d3x3 where
    torch.compile traces it, else the same forward and backward as an autograd.Function."""
    if torch.compiler.is_compiling():
        return conv2d3x3(x, w, impl, algo, input_grad, weight_grad)
    return _Eager.apply(x, w, impl, algo, input_grad, weight_grad)
