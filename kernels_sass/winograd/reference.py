"""Winograd F(2x2,3x3) and F(4x4,3x3) in float64 NumPy: the transform matrices and the same
tiling as the GPU kernels, for CPU tests and for small checks.

    Y = A^T [ (G g G^T) * (B^T d B) ] A      (* elementwise, summed over input channels)

For F(m x m, 3x3) (m = 2 or 4), d is an (m+2)x(m+2) input window at (m*th - 1, m*tw - 1)
(padding 1), g a 3x3 filter, Y the m x m output tile at (m*th, m*tw). Positions
e = (m+2)*i + j of the transformed tiles are the batched GEMMs of the GPU kernels (16 or 36).
"""
from __future__ import annotations

import numpy as np

# F(2x2,3x3): all entries are dyadic rationals, exact in binary floating point.
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
# F(4x4,3x3) (Lavin and Gray, 2016; interpolation points 0, 1, -1, 2, -2 and infinity). G's
# sixths, twelfths and 24ths are not exact in binary: the GPU's float32 U is rounded.
G4 = np.array([[1 / 4, 0.0, 0.0],
               [-1 / 6, -1 / 6, -1 / 6],
               [-1 / 6, 1 / 6, -1 / 6],
               [1 / 24, 1 / 12, 1 / 6],
               [1 / 24, -1 / 12, 1 / 6],
               [0.0, 0.0, 1.0]])
BT4 = np.array([[4.0, 0.0, -5.0, 0.0, 1.0, 0.0],
                [0.0, -4.0, -4.0, 1.0, 1.0, 0.0],
                [0.0, 4.0, -4.0, -1.0, 1.0, 0.0],
                [0.0, -2.0, -1.0, 2.0, 1.0, 0.0],
                [0.0, 2.0, -1.0, -2.0, 1.0, 0.0],
                [0.0, 4.0, 0.0, -5.0, 0.0, 1.0]])
AT4 = np.array([[1.0, 1.0, 1.0, 1.0, 1.0, 0.0],
                [0.0, 1.0, -1.0, 2.0, -2.0, 0.0],
                [0.0, 1.0, 1.0, 4.0, 4.0, 0.0],
                [0.0, 1.0, -1.0, 8.0, -8.0, 1.0]])
MATRICES = {2: (G, BT, AT), 4: (G4, BT4, AT4)}      # output tile m -> (G, B^T, A^T)


def tiles(h: int, w: int, m: int = 2) -> tuple[int, int]:
    """Output tiles (TH, TW) of m x m of a padding-1, stride-1 3x3 convolution of an h x w image."""
    return -(-h // m), -(-w // m)


def filter_transform(w: np.ndarray, m: int = 2) -> np.ndarray:
    """w: [K, C, 3, 3] -> U: [a*a, C, K] (a = m + 2), U[e=a*i+j, c, k] = (G w[k, c] G^T)[i, j]."""
    g = MATRICES[m][0]
    w = np.asarray(w, dtype=np.float64)
    u = np.einsum("ar,kcrs,bs->abck", g, w, g)            # [a, a, C, K]
    return u.reshape((m + 2) ** 2, w.shape[1], w.shape[0])


def input_transform(x: np.ndarray, m: int = 2) -> np.ndarray:
    """x: [N, C, H, W] -> V: [a*a, C, N, TH, TW], V[e] = (B^T d B)[i, j] for each tile's window d."""
    bt = MATRICES[m][1]
    a = m + 2
    x = np.asarray(x, dtype=np.float64)
    n, c, h, w = x.shape
    th, tw = tiles(h, w, m)
    # Zero padding: one row/column before, enough after for the last window.
    xp = np.zeros((n, c, m * th + 2, m * tw + 2))
    xp[:, :, 1:h + 1, 1:w + 1] = x
    # d[n, c, th, tw, r, s] = xp[n, c, m*th + r, m*tw + s]
    idx_h = m * np.arange(th)[:, None] + np.arange(a)[None, :]        # [TH, a]
    idx_w = m * np.arange(tw)[:, None] + np.arange(a)[None, :]        # [TW, a]
    d = xp[:, :, idx_h[:, None, :, None], idx_w[None, :, None, :]]    # [N, C, TH, TW, a, a]
    v = np.einsum("ar,nctwrs,bs->abcntw", bt, d, bt)                   # [a, a, C, N, TH, TW]
    return v.reshape(a * a, c, n, th, tw)


def output_transform(mm: np.ndarray, h: int, w: int, m: int = 2) -> np.ndarray:
    """mm: [a*a, K, N, TH, TW] -> y: [N, K, h, w] (the m x m tiles, cropped to h x w)."""
    at = MATRICES[m][2]
    a = m + 2
    _, k, n, th, tw = mm.shape
    y = np.einsum("ia,abknts,jb->kntisj", at, mm.reshape(a, a, k, n, th, tw), at)   # [K, N, TH, m, TW, m]
    y = y.reshape(k, n, m * th, m * tw)[:, :, :h, :w]
    return np.ascontiguousarray(y.transpose(1, 0, 2, 3))


def winograd_conv2d(x: np.ndarray, w: np.ndarray, m: int = 2) -> np.ndarray:
    """Padding-1, stride-1 3x3 convolution (cross-correlation, as in PyTorch) by Winograd
    F(m x m, 3x3) in float64. x: [N, C, H, W], w: [K, C, 3, 3] -> [N, K, H, W]."""
    x = np.asarray(x, dtype=np.float64)
    n, c, h, wd = x.shape
    u = filter_transform(w, m)                    # [a*a, C, K]
    v = input_transform(x, m)                     # [a*a, C, N, TH, TW]
    mm = np.einsum("eck,ecnts->eknts", u, v)      # the batched GEMMs
    return output_transform(mm, h, wd, m)


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


def f4_operands(x: np.ndarray, w: np.ndarray, cp: int, kp: int, tp: int, pad_rows: int = 0):
    """The F(4x4,3x3) GEMM's operands in the GPU layout (winograd.cu's f4_filter_transform and
    f4_input_transform): U [36*cp + pad_rows, kp], V [36*cp + pad_rows, tp] (float32), row
    e*cp + c, column k or t = (th*TW + tw)*N + n; zero past C, K and T."""
    n, c, h, wd = x.shape
    k = w.shape[0]
    th, tw = tiles(h, wd, 4)
    t = th * tw * n
    u = np.zeros((36, cp, kp))
    u[:, :c, :k] = filter_transform(w, 4)
    v = np.zeros((36, cp, tp))
    v[:, :c, :t] = input_transform(x, 4).transpose(0, 1, 3, 4, 2).reshape(36, c, t)
    return (np.concatenate([u.reshape(36 * cp, kp), np.zeros((pad_rows, kp))]).astype(np.float32),
            np.concatenate([v.reshape(36 * cp, tp), np.zeros((pad_rows, tp))]).astype(np.float32))


def f4_gemm(u: np.ndarray, v: np.ndarray, c: int, parts: int = 1) -> np.ndarray:
    """The F(4x4,3x3) GEMM in float64 from its operands in the GPU layout (rows e*c + channel;
    rows past 36*c ignored): M [parts, 36, K, T], part p over its c/parts channels."""
    cp = c // parts
    uu = np.asarray(u[:36 * c], dtype=np.float64).reshape(36, c, -1)
    vv = np.asarray(v[:36 * c], dtype=np.float64).reshape(36, c, -1)
    return np.stack([np.einsum("eck,ect->ekt", uu[:, p * cp:(p + 1) * cp], vv[:, p * cp:(p + 1) * cp])
                     for p in range(parts)])


def f4_output(m: np.ndarray, n: int, h: int, w: int, k: int) -> np.ndarray:
    """y [N, K, h, w] from the GEMM's M [parts, 36, kp, tp] (f4_output_transform's sum over parts)."""
    th, tw = tiles(h, w, 4)
    t = th * tw * n
    mm = np.asarray(m, dtype=np.float64).sum(0)[:, :k, :t].reshape(36, k, th, tw, n).transpose(0, 1, 4, 2, 3)
    return output_transform(mm, h, w, 4)


# ---- F(4x4,3x3)'s rounding: a float32 model, and other interpolation points -----------------
def f43_matrices(points) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(G, B^T, A^T) of F(4,3) for 5 finite interpolation points and infinity (Toom-Cook): A^T
    and G from the points (G's rows scaled by 1 / prod (p_i - p_j)), B^T solved from the
    identity A^T [(G g) * (B^T d)] = the correlation of d with g. points (0, 1, -1, 2, -2) give
    MATRICES[4] up to the signs and scales that move between G and B^T."""
    p = [float(v) for v in points]
    if len(p) != 5 or len(set(p)) != 5:
        raise ValueError("F(4,3) needs 5 distinct finite points")
    at = np.zeros((4, 6))
    g = np.zeros((6, 3))
    for i, pi in enumerate(p):
        at[:, i] = [pi ** j for j in range(4)]
        g[i] = [pi ** k / np.prod([pi - pj for pj in p if pj != pi]) for k in range(3)]
    at[3, 5] = 1.0
    g[5, 2] = 1.0
    bt = np.zeros((6, 6))
    for l in range(6):
        # sum_i at[j, i] g[i, k] bt[i, l] = [l == j + k] for every j < 4, k < 3
        a = np.array([[at[j, i] * g[i, k] for i in range(6)] for j in range(4) for k in range(3)])
        b = np.array([1.0 if l == j + k else 0.0 for j in range(4) for k in range(3)])
        bt[:, l] = np.linalg.lstsq(a, b, rcond=None)[0]
    return g, bt, at


def f43_conv2d_fp32(x: np.ndarray, w: np.ndarray, matrices=None) -> np.ndarray:
    """The fused F(4x4,3x3) kernel's arithmetic in float32 (for its error against float64 at
    realistic channel counts, without a GPU): U = G g G^T rounded to float32 (the filter
    transform), V = B^T d B in float32, M accumulated channel after channel by fused
    multiply-adds (a float64 product and sum, rounded once, as FFMA), A^T M A in float32.
    matrices: (G, B^T, A^T), default MATRICES[4]."""
    g, bt, at = MATRICES[4] if matrices is None else matrices
    f32 = np.float32
    x = np.asarray(x, dtype=f32)
    n, c, h, wd = x.shape
    k = w.shape[0]
    th, tw = tiles(h, wd, 4)
    u = np.einsum("ar,kcrs,bs->abck", g, np.asarray(w, np.float64), g).reshape(36, c, k).astype(f32)
    xp = np.zeros((n, c, 4 * th + 2, 4 * tw + 2), f32)
    xp[:, :, 1:h + 1, 1:wd + 1] = x
    ih = 4 * np.arange(th)[:, None] + np.arange(6)[None, :]
    iw = 4 * np.arange(tw)[:, None] + np.arange(6)[None, :]
    d = xp[:, :, ih[:, None, :, None], iw[None, :, None, :]]                     # [N, C, TH, TW, 6, 6]
    v = np.einsum("ar,nctwrs->nctwas", bt.astype(f32), d).astype(f32)
    v = np.einsum("nctwas,bs->nctwab", v, bt.astype(f32)).astype(f32)
    v = v.reshape(n, c, th, tw, 36).transpose(4, 1, 0, 2, 3).reshape(36, c, n * th * tw)
    m = np.zeros((36, k, n * th * tw), f32)
    for ch in range(c):
        m = (m.astype(np.float64) + u[:, ch, :, None].astype(np.float64) * v[:, ch, None, :]).astype(f32)
    mm = m.reshape(6, 6, k, n, th, tw)
    y = np.einsum("ia,abknts->ibknts", at.astype(f32), mm).astype(f32)
    y = np.einsum("ibknts,jb->kntisj", y, at.astype(f32)).astype(f32)           # [K, N, TH, 4, TW, 4]
    y = y.reshape(k, n, 4 * th, 4 * tw)[:, :, :h, :wd]
    return np.ascontiguousarray(y.transpose(1, 0, 2, 3))
