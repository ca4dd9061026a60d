"""Every cuDNN forward-convolution algorithm, FP32 data and FP32 FMA math (no TF32), through
cuDNN's legacy C API with ctypes: torch only exposes its own choice (benchmark=True).

    runner = Cudnn()                             # after torch has loaded libcudnn
    conv = runner.conv(n, c, h, w, k)            # descriptors for one shape, pad 1, stride 1;
                                                 # layout="NHWC": x, y NHWC and the filter KRSC
    for algo, name in enumerate(ALGOS):
        size, status = conv.workspace(algo)      # workspace bytes and "ok", or None and why not
        conv.forward(algo, x, w, y, workspace, size, stream)

Pointers are device addresses (ints). Raises CudnnError with cuDNN's status name.
"""
from __future__ import annotations

import ctypes
import os
from typing import Optional

ALGOS = ["IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING", "WINOGRAD",
         "WINOGRAD_NONFUSED"]
TENSOR_NCHW, TENSOR_NHWC, DATA_FLOAT, CROSS_CORRELATION, FMA_MATH = 0, 1, 0, 1, 3
# cudnnTensorFormat_t of each layout; for a filter, NHWC means KRSC (channels innermost)
FORMATS = {"NCHW": TENSOR_NCHW, "NHWC": TENSOR_NHWC}


class CudnnError(RuntimeError):
    pass


def _find_library() -> ctypes.CDLL:
    names = ["libcudnn.so.9", "libcudnn.so"]
    try:
        import nvidia.cudnn
        for base in nvidia.cudnn.__path__:
            names.insert(0, os.path.join(base, "lib", "libcudnn.so.9"))
    except Exception:
        pass
    try:
        import torch
        names.insert(0, os.path.join(os.path.dirname(torch.__file__), "lib", "libcudnn.so.9"))
    except Exception:
        pass
    errors = []
    for n in names:
        try:
            return ctypes.CDLL(n)
        except OSError as e:
            errors.append(f"{n}: {e}")
    raise CudnnError("libcudnn not found: " + "; ".join(errors[-3:]))


class Cudnn:
    def __init__(self):
        self.lib = _find_library()
        self.lib.cudnnGetErrorString.restype = ctypes.c_char_p
        self.handle = ctypes.c_void_p()
        self._check(self.lib.cudnnCreate(ctypes.byref(self.handle)), "cudnnCreate")
        self.version = self.lib.cudnnGetVersion()

    def _check(self, status: int, what: str) -> None:
        if status != 0:
            raise CudnnError(f"{what}: {self.lib.cudnnGetErrorString(status).decode()} ({status})")

    def status_name(self, status: int) -> str:
        return self.lib.cudnnGetErrorString(status).decode()

    def conv(self, n: int, c: int, h: int, w: int, k: int, layout: str = "NCHW") -> "Conv":
        return Conv(self, n, c, h, w, k, layout)


class Conv:
    def __init__(self, cd: Cudnn, n, c, h, w, k, layout: str = "NCHW"):
        if layout not in FORMATS:
            raise ValueError(f"layout {layout!r}: one of {list(FORMATS)}")
        fmt = FORMATS[layout]
        self.cd, lib, self.layout = cd, cd.lib, layout
        self.x, self.y, self.w, self.conv = (ctypes.c_void_p() for _ in range(4))
        cd._check(lib.cudnnCreateTensorDescriptor(ctypes.byref(self.x)), "cudnnCreateTensorDescriptor")
        cd._check(lib.cudnnCreateTensorDescriptor(ctypes.byref(self.y)), "cudnnCreateTensorDescriptor")
        cd._check(lib.cudnnCreateFilterDescriptor(ctypes.byref(self.w)), "cudnnCreateFilterDescriptor")
        cd._check(lib.cudnnCreateConvolutionDescriptor(ctypes.byref(self.conv)), "cudnnCreateConvolutionDescriptor")
        cd._check(lib.cudnnSetTensor4dDescriptor(self.x, fmt, DATA_FLOAT, n, c, h, w), "x descriptor")
        cd._check(lib.cudnnSetTensor4dDescriptor(self.y, fmt, DATA_FLOAT, n, k, h, w), "y descriptor")
        cd._check(lib.cudnnSetFilter4dDescriptor(self.w, DATA_FLOAT, fmt, k, c, 3, 3), "w descriptor")
        cd._check(lib.cudnnSetConvolution2dDescriptor(self.conv, 1, 1, 1, 1, 1, 1, CROSS_CORRELATION, DATA_FLOAT),
                  "convolution descriptor")
        cd._check(lib.cudnnSetConvolutionMathType(self.conv, FMA_MATH), "math type FMA")

    def workspace(self, algo: int) -> tuple[Optional[int], str]:
        size = ctypes.c_size_t()
        st = self.cd.lib.cudnnGetConvolutionForwardWorkspaceSize(self.cd.handle, self.x, self.w, self.conv, self.y,
                                                                  algo, ctypes.byref(size))
        if st != 0:
            return None, f"{self.cd.status_name(st)} ({st})"
        return size.value, "ok"

    def forward(self, algo: int, x: int, w: int, y: int, ws: int, ws_bytes: int, stream: int) -> None:
        lib = self.cd.lib
        self.cd._check(lib.cudnnSetStream(self.cd.handle, ctypes.c_void_p(stream)), "cudnnSetStream")
        alpha, beta = ctypes.c_float(1.0), ctypes.c_float(0.0)
        st = lib.cudnnConvolutionForward(self.cd.handle, ctypes.byref(alpha), self.x, ctypes.c_void_p(x), self.w,
                                         ctypes.c_void_p(w), self.conv, algo, ctypes.c_void_p(ws),
                                         ctypes.c_size_t(ws_bytes), ctypes.byref(beta), self.y, ctypes.c_void_p(y))
        self.cd._check(st, f"cudnnConvolutionForward {ALGOS[algo]}")
