"""The weight gradient of a 3x3, stride-1, padding-1 convolution through Winograd F(3x3, 2x2).

    gw = weight_grad(x, gy)          # x [N, C, H, W], gy [N, K, H, W] -> [K, C, 3, 3]

gw[k, c, r, s] = sum over n, y, x of gy[n, k, y, x] * xpad[n, c, y + r, x + s]: a correlation
of the padded input with the output gradient whose result is 3x3. Cut the output gradient into
2x2 tiles: each tile and the 4x4 input window under it add a 3x3 correlation, and F(3x3, 2x2)
computes that one, so the whole sum is

    gw = G^T [ sum over (n, tile) of (A2 g A2^T) * (B^T d B) ] G        (* elementwise)

with F(2x2, 3x3)'s own matrices transposed (the transposition principle: F(3, 2) is F(2, 3)
read backwards, its output transform G^T, its filter transform A = (A^T)^T). The sum over
(n, tile) is 16 GEMMs, one a position e of the 4x4 domain: [K, P] x [P, C], P = N x tiles.

Here the transforms are grouped convolutions (16 fixed 4x4 filters, stride 2, a channel; 16
fixed 2x2 filters, stride 2, a gradient channel) and the GEMMs one batched matmul, all PyTorch
operations in FP32 with TF32 off: it runs wherever PyTorch does (float64 on the CPU for
gradcheck). `choose` times it against cuDNN's weight gradient once per shape and keeps the
faster (op's weight_grad="auto").
"""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import torch
import torch.nn.functional as F

from .reference import AT, BT, G


def _position_filters(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """The 16 filters f_e with (left t right^T)[e] = sum f_e * t for a tile t: [16, rows, cols]."""
    a, b = left.shape[0], right.shape[0]
    return np.einsum("ip,jq->ijpq", left, right).reshape(a * b, left.shape[1], right.shape[1])


# V = B^T d B over 4x4 windows; U = A2 g A2^T over 2x2 tiles (A2 = (A^T)^T, 4x2).
INPUT_FILTERS = _position_filters(BT, BT)             # [16, 4, 4]
GRADIENT_FILTERS = _position_filters(AT.T, AT.T)      # [16, 2, 2]
OUTPUT_MATRIX = G.T                                   # 3x4: gw = G^T M G


@contextmanager
def fp32():
    """cuDNN and cuBLAS without TF32, whatever the caller set (PyTorch's default lets cuDNN's
    convolutions use it): the operator and its gradients are FP32."""
    old = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = old


def weight_grad(x: torch.Tensor, gy: torch.Tensor) -> torch.Tensor:
    """The weight gradient [K, C, 3, 3] of y = conv2d(x, w, padding=1) for the output gradient gy."""
    n, c, h, w = x.shape
    k = gy.shape[1]
    th, tw = -(-h // 2), -(-w // 2)
    dt, dev = x.dtype, x.device
    with fp32():
        # The 4x4 windows at (2 t - 1): padding 1 on top/left, and enough at the bottom/right
        # for the last tile (whose output-gradient rows past h are zero).
        xp = F.pad(x, (1, 2 * tw + 1 - w, 1, 2 * th + 1 - h))
        gp = F.pad(gy, (0, 2 * tw - w, 0, 2 * th - h))
        fin = torch.as_tensor(INPUT_FILTERS, dtype=dt, device=dev).repeat(c, 1, 1).unsqueeze(1)
        fg = torch.as_tensor(GRADIENT_FILTERS, dtype=dt, device=dev).repeat(k, 1, 1).unsqueeze(1)
        v = F.conv2d(xp, fin, stride=2, groups=c)            # [N, C*16, th, tw]
        u = F.conv2d(gp, fg, stride=2, groups=k)             # [N, K*16, th, tw]
        v = v.view(n, c, 16, th * tw).permute(2, 0, 3, 1).reshape(16, n * th * tw, c)
        u = u.view(n, k, 16, th * tw).permute(2, 1, 0, 3).reshape(16, k, n * th * tw)
        m = torch.bmm(u, v).view(4, 4, k, c).permute(2, 3, 0, 1)          # [K, C, 4, 4]
        out = torch.as_tensor(OUTPUT_MATRIX, dtype=dt, device=dev)
        return (out @ m @ out.T).contiguous()


def cudnn_weight_grad(x: torch.Tensor, gy: torch.Tensor) -> torch.Tensor:
    """PyTorch's weight gradient (cuDNN on the GPU), TF32 off."""
    w_shape = [gy.shape[1], x.shape[1], 3, 3]
    with fp32():
        return torch.ops.aten.convolution_backward(gy, x, x.new_empty(w_shape), None, [1, 1], [1, 1], [1, 1],
                                                   False, [0, 0], 1, [False, True, False])[1]


_CHOSEN: dict = {}


def _time(fn, x, gy, repeat: int = 5) -> float:
    fn(x, gy)                                  # (warm-up: cuDNN's plan, the allocator)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeat):
        fn(x, gy)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / repeat


def choose(x: torch.Tensor, gy: torch.Tensor) -> str:
    """"winograd" or "torch": the faster weight gradient for this shape on this GPU, timed once
    (as cudnn.benchmark times its algorithms) and remembered; "torch" off the GPU."""
    if not x.is_cuda:
        return "torch"
    key = (tuple(x.shape), gy.shape[1], x.dtype, x.device)
    chosen = _CHOSEN.get(key)
    if chosen is None:
        times = {"winograd": _time(weight_grad, x, gy), "torch": _time(cudnn_weight_grad, x, gy)}
        chosen = _CHOSEN[key] = min(times, key=times.get)
    return chosen
