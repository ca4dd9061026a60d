"""conv2d for device tensors (torch, CuPy, anything with __cuda_array_interface__ or DLPack):
padding 1, stride 1, 3x3 filters, FP32.

    y = conv2d(x, w)                       # x [N, C, H, W], w [K, C, 3, 3] -> [N, K, H, W]
    y = conv2d(x, w, impl="cuda")          # the CUDA-C reference of the same algorithm
    y = conv2d(x, w, impl="direct")        # direct convolution (checking)
    y = conv2d(xc, wc, layout="CHWN")      # x [C, H, W, N], w [C, 3, 3, K] -> [K, H, W, N]
    y = conv2d(x, w, algo="f4")            # Winograd F(4x4,3x3), non-fused (default "auto")
    y = conv2d(x, w, algo="f4fused")       # Winograd F(4x4,3x3), fused: NCHW in and out, no transposes
    y = conv2d(x, w, algo="f4tc")          # F(4x4,3x3), non-fused, its GEMM 3xTF32 on the tensor cores

impl="sass" is the generated SASS main kernel, built for the GPU's arch (target.ARCHS; designed
and run on sm_90, the others checked on the CPU only); the filter transform and, for NCHW,
the layout transposes are the CUDA-C kernels of winograd.cu. algo: "f2" the fused
F(2x2,3x3) kernel of sassgen (CHWN: NCHW through transposes), "f4" F(4x4,3x3) with the SASS
GEMM of gemmgen (kernels_sass.winograd.f4; CUDA-C transforms that read and write either
layout), "f4fused" F(4x4,3x3) in one SASS kernel that reads x and writes y in the
caller's layout, NCHW or CHWN (kernels_sass.winograd.f4fused; SASS only), "f4tc" "f4" with the
3xTF32 tensor-core GEMM of tcgemm (FP32 accuracy; SASS only, sm_90), "auto" the fastest for
the shape, layout and GPU by the cost model (choose_algo, cost.py). Shapes the SASS kernel cannot
take (offsets past 32 bits) raise plan.Unsupported; use impl="cuda" for those.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, Optional

import numpy as np

from . import cost, cubins, f4, f4fused, f4fused_layout, plan, sassgen
from .device import (Lib, arch, clock_mhz, cuda_module, dtype_of, filter_strides, host_memory, memory_bandwidth_gbs,
                     pointer, shape_of, sm_count)
from .plan import Options, Shape
from .target import ARCHS, target

IMPLS = ("sass", "cuda", "direct")
ALGOS = ("auto", "f2", "f4", "f4fused", "f4tc")
SASS_ONLY = ("f4fused", "f4tc")


# ---- kernels -----------------------------------------------------------------------------------

def sass_arch() -> str:
    """The GPU's arch, where the SASS kernels are generated for it; else RuntimeError."""
    gpu = arch()
    if gpu not in ARCHS:
        raise RuntimeError(f"the SASS kernels are generated for {', '.join(ARCHS)}; this GPU is {gpu}")
    return gpu


def sass_options(shape: Shape, opts: Options = Options()) -> Options:
    """opts with the channel split (split-C) chosen for this shape on this GPU, and the design
    its arch can run (sassgen.fit: one buffer, no LDGSTS where the arch needs that)."""
    return sassgen.fit(plan.resolve(shape, opts, sm_count()), target(sass_arch()))


@lru_cache(maxsize=None)
def sass_kernel(shape: Shape, opts: Options = Options()):
    """The kernel of (shape, opts) for this GPU; opts resolved (sass_options)."""
    import sassas
    module = sassas.load(cubins.build(shape, opts, arch=sass_arch()))
    return module[sassgen.kernel_name(shape, opts)]


@dataclass
class Workspace:
    """Intermediate buffers of one call (kept by the caller to reuse, e.g. when timing)."""
    xc: Any = None      # CHWN input
    u: Any = None       # transformed filters
    yk: Any = None      # KHWN output
    u4: Any = None      # F(4x4,3x3): transformed filters, inputs, products (f4.Plan.buffers)
    v4: Any = None
    m4: Any = None
    scales: Any = None  # F(4x4,3x3) with the FP16 halves: max |w| and max |V| (f4.Plan.buffers)
    u4f: Any = None     # F(4x4,3x3) fused: transformed filters (f4fused_layout.Fused.u_rows x Kp)


def transpose(src, dst, rows: int, cols: int, stream=0) -> None:
    """dst[c][r] = src[r][c] (rows x cols, row-major)."""
    k = cuda_module()["transpose2d"]
    k(((cols + 31) // 32) * ((rows + 31) // 32), (32, 8), pointer(src), pointer(dst),
      np.int32(rows), np.int32(cols), stream=stream)


class SplitTiles(ctypes.Structure):
    """winograd.cu's SplitTiles: the output tiles from `first` on, to be zeroed (y null: none)."""
    _fields_ = [("y", ctypes.c_uint64)] + [(f, ctypes.c_int32) for f in ("first", "N", "H", "W", "K", "TW", "KB", "NB")]


def split_tiles(yk, s: Shape, opts: Options) -> tuple[SplitTiles, int]:
    """The zeroing the SASS kernel of (s, opts resolved) needs in yk: (parameter, tile count)."""
    sp = plan.split_of(s, opts)
    if not sp.active:
        return SplitTiles(0), 0
    return SplitTiles(pointer(yk), sp.whole, s.N, s.H, s.W, s.K, s.TW, s.KB, s.NB), sp.tail



def filter_transform(w, u, s: Shape, layout: str, stream=0, zero: tuple[SplitTiles, int] = (SplitTiles(0), 0)) -> None:
    """U[c][e][k] (rows Cpad + 8, Kpad) from w in KCRS (NCHW front) or CRSK; in the same launch,
    zero (split_tiles) the outputs of the tiles a split SASS kernel adds into."""
    k = cuda_module()["filter_transform"]
    k(((s.Kpad + 127) // 128, s.U_ROWS + zero[1]), 128, pointer(w), pointer(u), np.int32(s.K), np.int32(s.C),
      np.int32(s.Kpad), np.int32(s.U_ROWS), *filter_strides(s, layout), zero[0], stream=stream)


def main_kernel(impl: str, xc, u, yk, s: Shape, opts: Options = Options(), stream=0, zeroed: bool = False) -> None:
    """The main kernel. A SASS kernel with a channel split adds the parts of its last tiles into
    yk: their outputs are zeroed first, here unless `zeroed` (filter_transform did it)."""
    if impl == "sass":
        opts = sass_options(s, opts)
        zero, tiles = split_tiles(yk, s, opts)
        if tiles and not zeroed:
            cuda_module()["zero_split_tiles"]((2, tiles), 128, zero, stream=stream)
        sass_kernel(s, opts)(plan.launch_grid(s, opts, sm_count()), sassgen.THREADS, pointer(xc), pointer(u), pointer(yk),
                             shared=sassgen.dynamic_smem(opts, sass_arch()), stream=stream)
    elif impl == "cuda":
        k = cuda_module()["winograd_2x2_3x3"]
        k(s.grid(), 256, pointer(xc), pointer(u), pointer(yk), np.int32(s.N), np.int32(s.C),
          np.int32(s.H), np.int32(s.W), np.int32(s.K), np.int32(s.TW), np.int32(s.U_ROWS),
          shared=sassgen.SMEM_BYTES, stream=stream)
    else:
        raise ValueError(impl)


@lru_cache(maxsize=None)
def f4fused_kernel(s: Shape, parts: int = 1, layout: str = "NCHW", aligned: bool = True):
    """The fused F(4x4,3x3) kernel of s (channels split in `parts`, x and y in `layout`, both
    16-byte aligned or not) for this GPU."""
    import sassas
    return sassas.load(f4fused.build(s, parts, layout, aligned=aligned, arch=sass_arch()))[
        f4fused.kernel_name(s, parts, layout, aligned)]


@lru_cache(maxsize=None)
def f4fused_parts(s: Shape, parts: int = 0, layout: str = "NCHW") -> int:
    """parts, or (0) the split of the least predicted time on this GPU (cost.f4fused_parts;
    cached: conv2d asks at every call, and the model takes ~50 us to answer)."""
    return parts or cost.f4fused_parts(s, layout, this_gpu())


def f4fused_filter_transform(w, u4f, s: Shape, parts: int, layout: str, stream=0) -> None:
    """U[e][c][k] (f4fused_layout.Fused(s, parts).u_rows rows of Kp; the last PAD_ROWS, read by the
    kernel's last prefetch into a buffer nobody reads, are left as they are) from w, KCRS or CRSK."""
    f = f4fused_layout.Fused(s, parts)
    cuda_module()["f4_filter_transform"]((-(-f.Kp // 128), f.Cp), 128, pointer(w), pointer(u4f), np.int32(s.K),
                                         np.int32(s.C), np.int32(f.Kp), np.int32(f.Cp), *filter_strides(s, layout),
                                         stream=stream)


def f4fused_main(x, u4f, y, s: Shape, parts: int, layout: str = "NCHW", stream=0) -> None:
    """y from x (NCHW -> NKHW, or CHWN -> KHWN) and U by the fused kernel; with parts > 1 y is
    zeroed first and the parts add into it."""
    if parts > 1:
        fill(y, 0.0, stream)
    # (x or y a view at an offset not a multiple of 16 bytes: the kernel of 4-byte loads and stores)
    k = f4fused_kernel(s, parts, layout, pointer(x) % 16 == 0 and pointer(y) % 16 == 0)
    f = f4fused.fused(s, parts, layout, sass_arch())
    k(f.launch_grid(sm_count()), f4fused_layout.THREADS, pointer(x), pointer(u4f), pointer(y), shared=f.smem_bytes,
      stream=stream)


def f4fused_conv(x, w, y, s: Shape, parts: int, layout: str, ws: Workspace, lib: Any, stream=0) -> None:
    """y from x by the fused F(4x4,3x3) path: the filter transform, the kernel."""
    if ws.u4f is None:
        f = f4fused_layout.Fused(s, parts)
        ws.u4f = lib.empty((f.u_rows, f.Kp))
    f4fused_filter_transform(w, ws.u4f, s, parts, layout, stream)
    f4fused_main(x, ws.u4f, y, s, parts, layout, stream)


def direct(x, w, y, s: Shape, dtype=np.float32, stream=0) -> None:
    """Direct convolution, NCHW/KCRS/NKHW, in float32 or float64."""
    name = "direct_conv_f64" if np.dtype(dtype) == np.float64 else "direct_conv_f32"
    total = s.N * s.K * s.H * s.W
    cuda_module()[name]((total + 255) // 256, 256, pointer(x), pointer(w), pointer(y), np.int32(s.N),
                        np.int32(s.C), np.int32(s.H), np.int32(s.W), np.int32(s.K), stream=stream)


def fill(t, value: float, stream=0) -> None:
    n = int(np.prod(shape_of(t)))
    cuda_module()["fill_f32"](min((n + 255) // 256, 65535), 256, pointer(t), np.int64(n), float(value),
                              stream=stream)


# ---- the entry point ---------------------------------------------------------------------------
def problem(x, w, layout: str = "NCHW") -> Shape:
    xs, ws = shape_of(x), shape_of(w)
    if layout == "NCHW":
        if len(xs) != 4 or len(ws) != 4 or ws[2:] != (3, 3) or ws[1] != xs[1]:
            raise ValueError(f"conv2d: x [N, C, H, W] and w [K, C, 3, 3], got {xs} and {ws}")
        n, c, h, wd = xs
        k = ws[0]
    elif layout == "CHWN":
        if len(xs) != 4 or len(ws) != 4 or ws[1:3] != (3, 3) or ws[0] != xs[0]:
            raise ValueError(f"conv2d: x [C, H, W, N] and w [C, 3, 3, K], got {xs} and {ws}")
        c, h, wd, n = xs
        k = ws[3]
    else:
        raise ValueError(f"layout {layout!r}: NCHW or CHWN")
    return Shape(n, c, h, wd, k)


# The algorithms' own limits: the fused F(4x4,3x3) kernel and the tensor-core GEMM are written
# for sm_90 (the others' SASS is generated for every arch of target.ARCHS).
F4FUSED_ARCHS = ("sm_90",)
F4TC_ARCHS = ("sm_90",)


def this_gpu() -> cost.Gpu:
    """This GPU as the cost model sees it (its arch, SMs, SM clock and memory bandwidth)."""
    return cost.Gpu(arch(), sm_count(), clock_mhz(), memory_bandwidth_gbs())


def _runs(what) -> bool:
    try:
        what()
        return True
    except plan.Unsupported:
        return False


def candidates(s: Shape, layout: str, gpu: cost.Gpu) -> list[str]:
    """The algorithms whose kernels take s in `layout` on `gpu` (arch "": the CUDA-C ones)."""
    out = ["f2"] if _runs(lambda: plan.check_shape(s)) else []
    if _runs(lambda: f4.plan(s, gpu.sms)):
        out.append("f4")
    if gpu.arch in F4TC_ARCHS and _runs(lambda: f4.plan(s, gpu.sms, tc=True)):
        out.append("f4tc")
    if gpu.arch in F4FUSED_ARCHS and _runs(lambda: f4fused.fused(s, cost.f4fused_parts(s, layout, gpu), layout,
                                                                  gpu.arch)):
        out.append("f4fused")
    return out


@lru_cache(maxsize=None)
def choose_algo(s: Shape, layout: str = "NCHW", gpu: cost.Gpu = cost.H100) -> str:
    """The algorithm "auto" runs for s, given in `layout`, on `gpu`: of those that take the shape,
    the one of least time by the cost model (cost.py; fitted to and checked against bench runs:
    `python -m kernels_sass.winograd model`). "f2" where none does (conv2d then says why).
    Cached: conv2d asks at every call, and the model takes ~0.2 ms a shape."""
    return cost.choose(s, layout, gpu, candidates(s, layout, gpu) or ["f2"])


def f4_plan(s: Shape, parts: int = 0, tc: bool = False):
    return f4.plan(s, sm_count(), parts, tc)


def conv2d(x, w, impl: str = "sass", *, layout: str = "NCHW", out=None, opts: Options = Options(),
           workspace: Optional[Workspace] = None, algo: str = "auto", parts: int = 0):
    """3x3 convolution, padding 1, stride 1, FP32. See the module docstring. parts: F(4x4,3x3)'s
    split of the channel loop (0: the modelled best, f4.plan or cost.f4fused_parts)."""
    if impl not in IMPLS:
        raise ValueError(f"impl {impl!r}: one of {IMPLS}")
    if algo not in ALGOS:
        raise ValueError(f"algo {algo!r}: one of {ALGOS}")
    for name, t in (("x", x), ("w", w), ("out", out)):
        where = None if t is None else host_memory(t)
        if where:
            raise TypeError(f"conv2d: {name} is {where}; the kernels take GPU memory: a CUDA torch tensor, a "
                            f"CuPy array or a sassas DeviceBuffer (the layer Conv2d runs PyTorch's "
                            f"convolution on CPU tensors)")
    for t in (x, w):
        if dtype_of(t) != np.float32:
            raise TypeError(f"conv2d is FP32: got {dtype_of(t)}")
    s = problem(x, w, layout)
    if algo == "auto":
        gpu = this_gpu()
        algo = choose_algo(s, layout, gpu if impl == "sass" else replace(gpu, arch=""))
    if algo in SASS_ONLY and impl == "cuda":
        raise ValueError(f'algo "{algo}" is SASS only (impl "sass"); its CUDA-C counterpart is algo "f4"')
    if algo == "f4fused" and impl == "sass":
        parts = f4fused_parts(s, parts, layout)
        f4fused.fused(s, parts, layout, sass_arch())
        lib = Lib(x)
        ws = workspace or Workspace()
        y = out if out is not None else lib.empty((s.N, s.K, s.H, s.W) if layout == "NCHW" else (s.K, s.H, s.W, s.N))
        f4fused_conv(x, w, y, s, parts, layout, ws, lib, lib.stream())
        return y
    p4 = None
    if algo in ("f4", "f4tc") and impl != "direct":
        p4 = f4_plan(s, 1 if impl == "cuda" else parts, algo == "f4tc")
    elif impl == "sass":
        plan.check_shape(s)
    lib = Lib(x)
    stream = lib.stream()
    ws = workspace or Workspace()
    if layout == "NCHW":
        y = out if out is not None else lib.empty((s.N, s.K, s.H, s.W))
        if impl == "direct":
            direct(x, w, y, s, stream=stream)
            return y
        if p4 is not None:        # F(4x4,3x3): its transforms read and write NCHW
            f4.conv(impl, x, w, y, p4, layout, ws, lib, stream)
            return y
        if ws.xc is None:
            ws.xc = lib.empty((s.C, s.H, s.W, s.N))
        if ws.yk is None:
            ws.yk = lib.empty((s.K, s.H, s.W, s.N))
        transpose(x, ws.xc, s.N, s.C * s.H * s.W, stream)
        xc, yk = ws.xc, ws.yk
    else:
        y = out if out is not None else lib.empty((s.K, s.H, s.W, s.N))
        if impl == "direct":
            # through NCHW: checking only
            xn, yn, wn = lib.empty((s.N, s.C, s.H, s.W)), lib.empty((s.N, s.K, s.H, s.W)), lib.empty((s.K, s.C, 3, 3))
            transpose(x, xn, s.C * s.H * s.W, s.N, stream)
            transpose(w, wn, s.C * 9, s.K, stream)
            direct(xn, wn, yn, s, stream=stream)
            transpose(yn, y, s.N, s.K * s.H * s.W, stream)
            return y
        xc, yk = x, y
    if p4 is not None:
        f4.conv(impl, xc, w, yk, p4, layout, ws, lib, stream)
        return y
    if ws.u is None:
        ws.u = lib.empty((s.U_ROWS, 16, s.Kpad))
    zero = split_tiles(yk, s, sass_options(s, opts)) if impl == "sass" else (SplitTiles(0), 0)
    filter_transform(w, ws.u, s, layout, stream, zero)
    main_kernel(impl, xc, ws.u, yk, s, opts, stream, zeroed=True)
    if layout == "NCHW":
        transpose(yk, y, s.K * s.H * s.W, s.N, stream)
    return y
