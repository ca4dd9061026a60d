"""The caller's tensors and the GPU: device pointers and shapes of torch/CuPy/DLPack arrays,
allocation on the caller's library and stream, the GPU's architecture and multiprocessor count, and
the CUDA-C kernels of winograd.cu (the transforms and the references) compiled for it."""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Optional

import numpy as np

from .plan import Shape


# ---- tensors ---------------------------------------------------------------------------------
class Lib:
    """Allocation and stream of the library the caller's tensors come from."""

    def __init__(self, like: Any):
        self.kind = "buffer"
        mod = type(like).__module__
        if mod.startswith("torch"):
            self.kind = "torch"
        elif mod.startswith("cupy"):
            self.kind = "cupy"
        self.like = like

    def empty(self, shape, dtype=np.float32):
        if self.kind == "torch":
            import torch
            return torch.empty(tuple(shape), dtype={np.dtype(np.float32): torch.float32,
                                                    np.dtype(np.float64): torch.float64}[np.dtype(dtype)],
                               device=self.like.device)
        if self.kind == "cupy":
            import cupy
            return cupy.empty(tuple(shape), dtype=dtype)
        from sassas.load import DeviceBuffer
        return DeviceBuffer.empty(tuple(shape), dtype)

    def stream(self):
        if self.kind == "torch":
            import torch
            return torch.cuda.current_stream(self.like.device).cuda_stream
        if self.kind == "cupy":
            import cupy
            return cupy.cuda.get_current_stream().ptr
        return 0


def _interface(t: Any) -> dict:
    if hasattr(t, "__cuda_array_interface__"):
        return t.__cuda_array_interface__
    raise TypeError(f"{type(t).__name__} is not a CUDA array (no __cuda_array_interface__)")


def shape_of(t: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in (t.shape if hasattr(t, "shape") else _interface(t)["shape"]))


def _is_torch(t: Any) -> bool:
    return type(t).__module__.startswith("torch")


def pointer(t: Any) -> int:
    """Device address of a C-contiguous device array."""
    where = host_memory(t)
    if where:
        raise TypeError(f"{where} is not GPU memory")
    if _is_torch(t):
        # (torch builds __cuda_array_interface__ anew at each call: several microseconds, a
        # dozen times a convolution)
        if not t.is_contiguous() and t.numel() > 1:
            raise ValueError("conv2d needs C-contiguous tensors")
        return t.data_ptr()
    if hasattr(t, "__cuda_array_interface__"):
        ai = t.__cuda_array_interface__
        if ai.get("strides") is not None:
            itemsize = np.dtype(ai["typestr"]).itemsize
            expect, acc = [], itemsize
            for d in reversed(ai["shape"]):
                expect.append(acc)
                acc *= d
            if tuple(reversed(expect)) != tuple(ai["strides"]) and int(np.prod(ai["shape"])) > 1:
                raise ValueError("conv2d needs C-contiguous tensors")
        return int(ai["data"][0])
    from sassas.load import _dlpack_pointer
    return _dlpack_pointer(t)


def host_memory(t: Any) -> Optional[str]:
    """What `t` is where it lies in host memory, which the kernels cannot read (a CPU torch
    tensor, a NumPy array); None for GPU memory and what sassas.load takes as it."""
    if _is_torch(t):
        return None if t.is_cuda else f"a torch tensor on the {t.device.type.upper()}"
    if isinstance(t, np.ndarray):
        return "a NumPy array (host memory)"
    return None


def dtype_of(t: Any) -> np.dtype:
    if _is_torch(t):
        return np.dtype(str(t.dtype).replace("torch.", ""))
    if hasattr(t, "__cuda_array_interface__"):
        return np.dtype(t.__cuda_array_interface__["typestr"])
    return np.dtype(str(t.dtype).replace("torch.", ""))


# ---- the GPU -----------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def arch() -> str:
    from sassas.load import compute_capability
    major, minor = compute_capability()
    return f"sm_{major}{minor}"


@lru_cache(maxsize=None)
def sm_count() -> int:
    """Multiprocessors of the GPU (the persistent kernel launches one block each)."""
    from sassas.load import device_attribute
    return device_attribute("MULTIPROCESSOR_COUNT")


@lru_cache(maxsize=None)
def clock_mhz() -> float:
    """The SM clock's highest rate."""
    from sassas.load import device_attribute
    return device_attribute("CLOCK_RATE") / 1e3


@lru_cache(maxsize=None)
def memory_bandwidth_gbs() -> float:
    """DRAM bandwidth, GB/s: memory clock x bus width x 2 (double data rate)."""
    from sassas.load import device_attribute
    return device_attribute("MEMORY_CLOCK_RATE") * device_attribute("GLOBAL_MEMORY_BUS_WIDTH") * 2 / 8 / 1e6


# A second stream of the current context and two events without timing, made once a context:
# work that does not depend on what the caller's stream runs before it goes there, beside it.
_side_streams: dict[int, tuple] = {}


def side_stream() -> tuple:
    """(stream, fork event, join event) of the current CUDA context."""
    from sassas.load import _call, _context
    ctx = _context()
    key = int(ctx)
    made = _side_streams.get(key)
    if made is None:
        from cuda.bindings import driver
        made = _side_streams[key] = (
            _call("cuStreamCreate", driver.CUstream_flags.CU_STREAM_NON_BLOCKING),
            _call("cuEventCreate", driver.CUevent_flags.CU_EVENT_DISABLE_TIMING),
            _call("cuEventCreate", driver.CUevent_flags.CU_EVENT_DISABLE_TIMING))
    return made


def beside(stream, launch) -> None:
    """launch(side) on the side stream, after what `stream` holds so far; what `stream` gets
    next runs beside it until join(stream) (one fork at a time)."""
    from sassas.load import _call, _stream_handle
    side, fork, join = side_stream()
    _call("cuEventRecord", fork, _stream_handle(stream))
    _call("cuStreamWaitEvent", side, fork, 0)
    launch(side)
    _call("cuEventRecord", join, side)


def join(stream) -> None:
    """`stream` waits for the work beside() put on the side stream."""
    from sassas.load import _call, _stream_handle
    _call("cuStreamWaitEvent", _stream_handle(stream), side_stream()[2], 0)


def zero32(t: Any, count: int, stream) -> None:
    """The first `count` 32-bit words of device array t set to zero, in `stream`'s order."""
    from sassas.load import _call, _stream_handle
    _call("cuMemsetD32Async", pointer(t), 0, count, _stream_handle(stream))


def cuda_module():
    from . import cuda
    return cuda.module(arch())

def filter_strides(s: Shape, layout: str) -> tuple[np.int64, ...]:
    """Element strides of w's k, c, r, s: KCRS with the NCHW front, else CRSK."""
    st = (s.C * 9, 9, 3, 1) if layout == "NCHW" else (1, 9 * s.K, 3 * s.K, s.K)
    return tuple(np.int64(v) for v in st)
