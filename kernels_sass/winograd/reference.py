"""Winograd F(2x2,3x3) in float64 NumPy: the transform matrices and the same tiling as the GPU
kernels, for CPU tests and for small checks.

    Y = A^T [ (G g G^T) * (B^T d B) ] A      (* elementwise, summed over input channels)

d is a 4x4 input window at (2*th - 1, 2*tw - 1) (padding 1), g a 3x3 filter, Y the 2x2 output
tile at (2*th, 2*tw). Positions e = 4*i + j of the 4x4 transformed tiles are the 16 batched
GEMMs of the GPU kernels.
"""
from __future__ import annotations

import numpy as np

# The exact transform matrices (all entries are dyadic rationals: exact in binary floating point).
G = np.array([[1.0, 0.0, 0.0],
              [0.5, 0.5, 0.5],
              [0.5, -0.5, 0.5],
              [0.0, 0.0, 1.0]])
BT = np.array([[1.0, 0.0, -1.0, 0.0],
               [0.0, 1.0, 1.0, 0.0],
               [0.0, -1.0, 1.0, 0.0],
               [0.0, 1.0, 0.0, -1.0]])
AT = np.array([[1.0, 1.0, 1.0, 0.0],
               [0.0, 1.0, -1.0, -1.0]])


def tiles(h: int, w: int) -> tuple[int, int]:
    """Output tiles (TH, TW) of a padding-1, stride-1 3x3 convolution of an h x w image."""
    return (h + 1) // 2, (w + 1) // 2


def filter_transform(w: np.ndarray) -> np.ndarray:
    """w: [K, C, 3, 3] -> U: [16, C, K], U[e=4i+j, c, k] = (G w[k, c] G^T)[i, j]."""
    w = np.asarray(w, dtype=np.float64)
    u = np.einsum("ar,kcrs,bs->abck", G, w, G)            # [4, 4, C, K]
    return u.reshape(16, w.shape[1], w.shape[0])


def input_transform(x: np.ndarray) -> np.ndarray:
    """x: [N, C, H, W] -> V: [16, C, N, TH, TW], V[e] = (B^T d B)[i, j] for each tile's window d."""
    x = np.asarray(x, dtype=np.float64)
    n, c, h, w = x.shape
    th, tw = tiles(h, w)
    # Zero padding: one row/column before, enough after for the last 4x4 window.
    xp = np.zeros((n, c, 2 * th + 2, 2 * tw + 2))
    xp[:, :, 1:h + 1, 1:w + 1] = x
    # d[n, c, th, tw, r, s] = xp[n, c, 2*th + r, 2*tw + s]
    idx_h = 2 * np.arange(th)[:, None] + np.arange(4)[None, :]        # [TH, 4]
    idx_w = 2 * np.arange(tw)[:, None] + np.arange(4)[None, :]        # [TW, 4]
    d = xp[:, :, idx_h[:, None, :, None], idx_w[None, :, None, :]]    # [N, C, TH, TW, 4, 4]
    v = _bt_d_b(d)                                                     # [4, 4, C, N, TH, TW]
    return v.reshape(16, c, n, th, tw)


def _bt_d_b(d: np.ndarray) -> np.ndarray:
    # d: [N, C, TH, TW, 4, 4] -> [4, 4, C, N, TH, TW]
    return np.einsum("ar,nctwrs,bs->abcntw", BT, d, BT)


def output_transform(m: np.ndarray, h: int, w: int) -> np.ndarray:
    """m: [16, K, N, TH, TW] -> y: [N, K, h, w] (the 2x2 tiles, cropped to h x w)."""
    _, k, n, th, tw = m.shape
    m4 = m.reshape(4, 4, k, n, th, tw)
    y = np.einsum("ia,abknts,jb->kntisj", AT, m4, AT)                    # [K, N, TH, 2, TW, 2]
    y = y.reshape(k, n, 2 * th, 2 * tw)[:, :, :h, :w]
    return np.ascontiguousarray(y.transpose(1, 0, 2, 3))


def winograd_conv2d(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Padding-1, stride-1 3x3 convolution (cross-correlation, as in PyTorch) by Winograd
    F(2x2,3x3) in float64. x: [N, C, H, W], w: [K, C, 3, 3] -> [N, K, H, W]."""
    x = np.asarray(x, dtype=np.float64)
    n, c, h, wd = x.shape
    u = filter_transform(w)                       # [16, C, K]
    v = input_transform(x)                        # [16, C, N, TH, TW]
    m = np.einsum("eck,ecnts->eknts", u, v)       # the 16 batched GEMMs
    return output_transform(m, h, wd)


def direct_conv2d(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Padding-1, stride-1 3x3 cross-correlation in float64, by definition."""
    x = np.asarray(x, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    n, c, h, wd = x.shape
    xp = np.zeros((n, c, h + 2, wd + 2))
    xp[:, :, 1:h + 1, 1:wd + 1] = x
    y = np.zeros((n, w.shape[0], h, wd))
    for r in range(3):
        for s in range(3):
            y += np.einsum("nchw,kc->nkhw", xp[:, :, r:r + h, s:s + wd], w[:, :, r, s])
    return y


def conv_flops(n: int, c: int, h: int, w: int, k: int) -> int:
    """Direct-convolution FLOPs, the convention of the effective-TFLOPS figures."""
    return 2 * n * c * h * w * k * 9


# ---- the GPU kernels' layouts, in NumPy (for the simulator and CPU tests) ------------------
def to_chwn(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(x).transpose(1, 2, 3, 0))


def from_khwn(y: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(y).transpose(3, 0, 1, 2))


def fx_layout(w: np.ndarray, kpad: int, rows: int, dtype=np.float32) -> np.ndarray:
    """The filter-transform kernel's output: U[kb][e][c][64] (k = 64 kb + ..) for c < rows (zero
    past C), k < kpad (zero past K)."""
    k, c = w.shape[:2]
    u = filter_transform(w)                       # [16, C, K]
    out = np.zeros((16, rows, kpad), dtype=np.float64)
    out[:, :c, :k] = u
    return out.reshape(16, rows, kpad // 64, 64).transpose(2, 0, 1, 3).astype(dtype)


def zero_split_tiles(y: np.ndarray, s, first: int) -> None:
    """y (KHWN) <- 0 at the outputs of tiles first.. of the SASS kernel's order (tile = kb + KB *
    (nb + NB * pos), 64 filters, 32 images, 2x2 outputs at pos = th * TW + tw): where a split
    kernel adds the parts of those tiles (winograd.cu's zero_split_tiles, for the simulator)."""
    for tile in range(first, s.tiles):
        kb, rest = tile % s.KB, tile // s.KB
        nb, pos = rest % s.NB, rest // s.NB
        th, tw = divmod(pos, s.TW)
        y[64 * kb:64 * kb + 64, 2 * th:2 * th + 2, 2 * tw:2 * tw + 2, 32 * nb:32 * nb + 32] = 0.0
