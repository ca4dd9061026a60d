"""Loading cubins and launching their kernels, on the CUDA driver API of cuda-python.

    from sassas import load
    module = load.load("saxpy.cubin")              # bytes, a path, or an object with .data
    x = load.DeviceBuffer.from_numpy(np.arange(1024, dtype=np.float32))
    module["saxpy"](4, 256, 2.0, x, y, 1024)       # grid, block, *args
    y.to_numpy()

We call `cuda.bindings.driver` directly rather than cuda.core: its function set has been
stable from CUDA 12 to 13, while cuda.core's API moved between releases (`experimental`
namespace, launch signatures). Arguments are packed by the parameter sizes read from the
cubin's EIATTR_KPARAM_INFO (:func:`pack_arguments`, testable without a GPU).

Without the NVIDIA driver every entry point raises :class:`NoGpuError`; tests call
:func:`gpu_available` to skip.
"""
from __future__ import annotations

import ctypes
import os
import struct
import sys
import threading
import types
from pathlib import Path
from typing import Any, Optional, Sequence, Union

import numpy as np

from .elf import CubinFormatError, CubinInfo, KernelInfo, read_cubin
from .elf.fatbin import embedded_cubins, is_container
from .image import ParamInfo

__all__ = [
    "CudaError", "NoGpuError", "gpu_available", "device", "synchronize", "load", "Module", "Kernel",
    "DeviceBuffer", "empty", "zeros", "to_device", "pack_arguments",
]

STATIC_SHARED_LIMIT = 48 * 1024   # dynamic shared memory above this needs the opt-in attribute


# --------------------------------------------------------------------------------------------
# Errors and the driver
# --------------------------------------------------------------------------------------------

class CudaError(RuntimeError):
    """A CUDA driver call failed: which call, the error's name and the driver's description."""

    def __init__(self, function: str, code: int, name: str, description: str):
        self.function, self.code, self.name, self.description = function, code, name, description
        super().__init__(f"{function} failed: {name} ({code}): {description}")


class NoGpuError(RuntimeError):
    """No usable CUDA driver or device on this machine."""


_lock = threading.Lock()
_state: dict[str, Any] = {"driver": None, "ordinal": 0, "contexts": {}, "unavailable": None}


def _driver():
    """The cuda.bindings.driver module, initialised (cuInit) once; NoGpuError without a driver."""
    if _state["driver"] is not None:
        return _state["driver"]
    with _lock:
        if _state["driver"] is not None:
            return _state["driver"]
        if _state["unavailable"] is not None:
            raise NoGpuError(_state["unavailable"])
        try:
            from cuda.bindings import driver
        except ImportError as e:
            _state["unavailable"] = f"cuda-python is not installed ({e}); pip install cuda-python"
            raise NoGpuError(_state["unavailable"]) from e
        try:
            result = driver.cuInit(0)
        except Exception as e:  # cuda.pathfinder's DynamicLibNotFoundError when libcuda is absent
            _state["unavailable"] = f"the NVIDIA driver (libcuda) cannot be loaded: {e}"
            raise NoGpuError(_state["unavailable"]) from e
        err = result[0]
        if int(err) != 0:
            name, text = _error_text(driver, err)
            _state["unavailable"] = f"cuInit failed: {name}: {text}"
            raise NoGpuError(_state["unavailable"])
        _state["driver"] = driver
        return driver


def _error_text(driver, err) -> tuple[str, str]:
    try:
        name = driver.cuGetErrorName(err)[1]
        text = driver.cuGetErrorString(err)[1]
        return (name.decode() if isinstance(name, bytes) else str(name),
                text.decode() if isinstance(text, bytes) else str(text))
    except Exception:
        return f"CUresult {int(err)}", "(no description)"


def _call(function: str, *args: Any) -> Any:
    """Call driver.<function>(*args); raise CudaError on failure; return the result value(s)."""
    driver = _driver()
    result = getattr(driver, function)(*args)
    err, values = result[0], result[1:]
    if int(err) != 0:
        name, text = _error_text(driver, err)
        raise CudaError(function, int(err), name, text)
    if not values:
        return None
    return values[0] if len(values) == 1 else values


def _context() -> Any:
    """Make the selected device's primary context current in this thread; return it."""
    ordinal = _state["ordinal"]
    ctx = _state["contexts"].get(ordinal)
    if ctx is None:
        count = _call("cuDeviceGetCount")
        if count == 0:
            raise NoGpuError("the CUDA driver reports no devices")
        if not 0 <= ordinal < count:
            raise NoGpuError(f"device {ordinal} requested, the driver reports {count}")
        dev = _call("cuDeviceGet", ordinal)
        ctx = _call("cuDevicePrimaryCtxRetain", dev)
        _state["contexts"][ordinal] = ctx
    _call("cuCtxSetCurrent", ctx)
    return ctx


def device(ordinal: int = 0) -> str:
    """Select the device later calls use (default 0); returns its name."""
    _state["ordinal"] = ordinal
    _context()
    dev = _call("cuDeviceGet", ordinal)
    name = _call("cuDeviceGetName", 256, dev)
    return name.split(b"\0", 1)[0].decode(errors="replace")


def gpu_available() -> tuple[bool, str]:
    """(True, device name) when kernels can run here, else (False, why not)."""
    try:
        return True, device(_state["ordinal"])
    except (NoGpuError, CudaError) as e:
        return False, str(e)


def device_attribute(name: str) -> int:
    """A CUdevice_attribute of the current device by its short name, e.g.
    device_attribute("MULTIPROCESSOR_COUNT")."""
    driver = _driver()
    _context()
    dev = _call("cuDeviceGet", _state["ordinal"])
    return _call("cuDeviceGetAttribute", getattr(driver.CUdevice_attribute, "CU_DEVICE_ATTRIBUTE_" + name), dev)


def compute_capability() -> tuple[int, int]:
    return device_attribute("COMPUTE_CAPABILITY_MAJOR"), device_attribute("COMPUTE_CAPABILITY_MINOR")


def synchronize() -> None:
    """Wait for all work on the current device."""
    _context()
    _call("cuCtxSynchronize")


# --------------------------------------------------------------------------------------------
# Device memory
# --------------------------------------------------------------------------------------------

class DeviceBuffer:
    """Device memory with a shape and dtype; freed on close(), on leaving a `with`, or by GC.

    Exposes `__cuda_array_interface__`, so CuPy, Numba or PyTorch can view it too.
    """

    def __init__(self, nbytes: int, shape: Optional[tuple[int, ...]] = None, dtype: Any = np.uint8):
        self.dtype = np.dtype(dtype)
        self.shape = tuple(shape) if shape is not None else (nbytes // self.dtype.itemsize,)
        self.nbytes = int(nbytes)
        self._ptr = 0
        _context()
        # cuMemAlloc refuses 0 bytes; keep a null pointer for empty buffers.
        self._ptr = int(_call("cuMemAlloc", self.nbytes)) if self.nbytes else 0

    @classmethod
    def empty(cls, shape: Union[int, Sequence[int]], dtype: Any = np.float32) -> "DeviceBuffer":
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        dtype = np.dtype(dtype)
        return cls(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize, shape, dtype)

    @classmethod
    def zeros(cls, shape: Union[int, Sequence[int]], dtype: Any = np.float32) -> "DeviceBuffer":
        buf = cls.empty(shape, dtype)
        if buf.nbytes:
            _call("cuMemsetD8", buf._ptr, 0, buf.nbytes)
        return buf

    @classmethod
    def from_numpy(cls, array: np.ndarray) -> "DeviceBuffer":
        array = np.ascontiguousarray(array)
        buf = cls(array.nbytes, array.shape, array.dtype)
        buf.copy_from(array)
        return buf

    @property
    def ptr(self) -> int:
        if self._ptr == 0 and self.nbytes:
            raise ValueError("DeviceBuffer used after close()")
        return self._ptr

    def copy_from(self, array: np.ndarray) -> None:
        array = np.ascontiguousarray(array)
        if array.nbytes != self.nbytes:
            raise ValueError(f"copy of {array.nbytes} bytes into a DeviceBuffer of {self.nbytes}")
        if self.nbytes:
            _context()
            _call("cuMemcpyHtoD", self.ptr, array.ctypes.data, self.nbytes)

    def to_numpy(self) -> np.ndarray:
        """A host copy (waits for the copy, which waits for earlier work on the default stream)."""
        out = np.empty(self.shape, self.dtype)
        if self.nbytes:
            _context()
            _call("cuMemcpyDtoH", out.ctypes.data, self.ptr, self.nbytes)
        return out

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False),
                "version": 3, "strides": None}

    def close(self) -> None:
        ptr, self._ptr = self._ptr, 0
        if ptr and _state["driver"] is not None:
            try:
                _context()
                _call("cuMemFree", ptr)
            except Exception:
                pass  # freeing at interpreter exit or after a sticky error: nothing to do

    def __del__(self) -> None:
        self.close()

    def __enter__(self) -> "DeviceBuffer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"DeviceBuffer(ptr={self._ptr:#x}, shape={self.shape}, dtype={self.dtype})"


def empty(shape: Union[int, Sequence[int]], dtype: Any = np.float32) -> DeviceBuffer:
    return DeviceBuffer.empty(shape, dtype)


def zeros(shape: Union[int, Sequence[int]], dtype: Any = np.float32) -> DeviceBuffer:
    return DeviceBuffer.zeros(shape, dtype)


def to_device(array: np.ndarray) -> DeviceBuffer:
    return DeviceBuffer.from_numpy(array)


# --------------------------------------------------------------------------------------------
# Argument packing (pure: no GPU needed)
# --------------------------------------------------------------------------------------------

_FLOAT_FORMATS = {2: np.float16, 4: np.float32, 8: np.float64}
_DLPACK_CUDA_DEVICES = {2, 13}    # kDLCUDA, kDLCUDAManaged


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", ctypes.c_uint32), ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("byte_offset", ctypes.c_uint64)]


def _dlpack_pointer(obj: Any) -> int:
    """Device address of a DLPack producer (its DLTensor's data + byte_offset)."""
    if hasattr(obj, "__dlpack_device__"):
        device_type = int(obj.__dlpack_device__()[0])
        if device_type not in _DLPACK_CUDA_DEVICES:
            raise TypeError(f"a DLPack tensor on device type {device_type}, not CUDA memory")
    capsule = obj.__dlpack__()
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    # "dltensor" capsules hold a DLManagedTensor, which starts with its DLTensor;
    # "dltensor_versioned" ones a DLManagedTensorVersioned: version (2 x u32), manager_ctx,
    # deleter, flags (u64), then the DLTensor.
    is_versioned = ctypes.pythonapi.PyCapsule_IsValid
    is_versioned.restype, is_versioned.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.c_char_p]
    if is_versioned(capsule, b"dltensor_versioned"):
        header = 8 + 2 * ctypes.sizeof(ctypes.c_void_p) + 8
        address = get_pointer(capsule, b"dltensor_versioned") + header
    else:
        address = get_pointer(capsule, b"dltensor")
    tensor = _DLTensor.from_address(address)
    if tensor.device.device_type not in _DLPACK_CUDA_DEVICES:
        raise TypeError(f"a DLPack tensor on device type {tensor.device.device_type}, not CUDA memory")
    return (tensor.data or 0) + tensor.byte_offset


def _describe(arg: Any) -> str:
    return type(arg).__name__


# size -> (struct format of the signed int, smallest, largest signed, largest unsigned).
_INT_PACKING = {n: (f, -(1 << (8 * n - 1)), (1 << (8 * n - 1)) - 1, (1 << 8 * n) - 1)
                for n, f in ((1, "b"), (2, "h"), (4, "i"), (8, "q"))}


def _pack_one(arg: Any, size: int) -> bytes:
    """The `size` bytes a kernel parameter receives for `arg`; TypeError/ValueError otherwise."""
    # Device memory: a 64-bit address. torch's __cuda_array_interface__ builds a dict per call
    # (several microseconds, five times a launch in a convolution): its data_ptr() first.
    pointer = None
    if isinstance(arg, DeviceBuffer):
        pointer = arg.ptr
    elif type(arg).__module__.startswith("torch") and hasattr(arg, "data_ptr"):
        if not arg.is_cuda:
            raise TypeError("a torch tensor in host memory; move it to the GPU first (.cuda())")
        pointer = arg.data_ptr()
    elif hasattr(arg, "__cuda_array_interface__"):
        pointer = int(arg.__cuda_array_interface__["data"][0] or 0)
    elif hasattr(arg, "__dlpack__") and not isinstance(arg, np.ndarray):
        pointer = _dlpack_pointer(arg)
    if pointer is not None:
        if size != 8:
            raise TypeError(f"a device array (pointer, 8 bytes) for a {size}-byte parameter")
        return struct.pack("<Q", pointer)

    if isinstance(arg, np.ndarray):
        if arg.ndim != 0:
            raise TypeError("a host numpy array; copy it to the device first (DeviceBuffer.from_numpy)")
        arg = arg[()]
    if isinstance(arg, np.generic):
        data = arg.tobytes()
        if len(data) != size:
            raise TypeError(f"a {arg.dtype} ({len(data)} bytes) for a {size}-byte parameter")
        return data
    if isinstance(arg, (bool, int)):
        if size not in _INT_PACKING:
            raise TypeError(f"a Python int for a {size}-byte parameter (use bytes or a numpy scalar)")
        fmt, lo, hi, top = _INT_PACKING[size]
        if lo <= arg <= hi:
            return struct.pack("<" + fmt, arg)
        if 0 <= arg <= top:
            return struct.pack("<" + fmt.upper(), arg)
        raise ValueError(f"int {arg} does not fit in {size} bytes")
    if isinstance(arg, float):
        if size not in _FLOAT_FORMATS:
            raise TypeError(f"a Python float for a {size}-byte parameter")
        return _FLOAT_FORMATS[size](arg).tobytes()
    if isinstance(arg, (bytes, bytearray, memoryview)):
        data = bytes(arg)
        if len(data) != size:
            raise TypeError(f"{len(data)} raw bytes for a {size}-byte parameter")
        return data
    if isinstance(arg, (ctypes.Structure, ctypes.Union, ctypes.Array, ctypes._SimpleCData)):
        data = bytes(arg)
        if len(data) != size:
            raise TypeError(f"a ctypes {_describe(arg)} of {len(data)} bytes for a {size}-byte parameter")
        return data
    raise TypeError(f"cannot pass a {_describe(arg)} (expected int, float, numpy scalar, bytes, "
                    "DeviceBuffer, or an array with __cuda_array_interface__ / __dlpack__)")


def pack_arguments(kernel_name: str, param_sizes: Sequence[int], args: Sequence[Any]) -> list[bytes]:
    """Each argument as the exact bytes of its parameter (sizes in ordinal order).

    Raises TypeError naming the kernel, the parameter index and the expected size when the
    count or an argument does not fit.
    """
    if len(args) != len(param_sizes):
        raise TypeError(f"kernel {kernel_name!r} takes {len(param_sizes)} argument(s) "
                        f"(parameter sizes {list(param_sizes)}), got {len(args)}")
    packed = []
    for index, (arg, size) in enumerate(zip(args, param_sizes)):
        try:
            packed.append(_pack_one(arg, size))
        except (TypeError, ValueError) as e:
            raise TypeError(f"kernel {kernel_name!r}, parameter {index} ({size} bytes): {e}") from None
    return packed


class _PackedArguments:
    """Argument bytes plus the void* array cuLaunchKernel reads; alive for the launch call."""

    def __init__(self, packed: list[bytes]):
        # One 16-byte aligned slot a parameter keeps every value naturally aligned (the
        # buffer itself is: past 16 bytes ctypes allocates it on the heap, 16-byte aligned).
        blob = b"".join(p.ljust((len(p) + 15) // 16 * 16, b"\0") for p in packed)
        self.storage = ctypes.create_string_buffer(blob, max(len(blob), 32))
        base = ctypes.addressof(self.storage)
        offsets, offset = [], 0
        for p in packed:
            offsets.append(base + offset)
            offset += (len(p) + 15) // 16 * 16
        self.pointers = (ctypes.c_uint64 * max(len(packed), 1))(*offsets)
        self.address = ctypes.addressof(self.pointers) if packed else 0


# --------------------------------------------------------------------------------------------
# Modules and kernels
# --------------------------------------------------------------------------------------------

def _dim3(value: Union[int, Sequence[int]], what: str) -> tuple[int, int, int]:
    dims = [value] if isinstance(value, (int, np.integer)) else list(value)
    if not 1 <= len(dims) <= 3 or any(int(d) < 1 for d in dims):
        raise ValueError(f"{what} must be a positive int or 1..3 positive ints, got {value!r}")
    dims = [int(d) for d in dims] + [1] * (3 - len(dims))
    return dims[0], dims[1], dims[2]


def _cluster_dims(value: Union[int, Sequence[int]], grid3: tuple[int, int, int]) -> tuple[int, int, int]:
    dims = _dim3(value, "cluster")
    for axis, c, g in zip("xyz", dims, grid3):
        if g % c:
            raise ValueError(f"cluster dimension {axis} = {c} does not divide the grid's ({g})")
    return dims


def _stream_handle(stream: Any) -> Any:
    """Driver stream handle from None, an int, a CUstream, or a foreign stream object."""
    if stream is None or isinstance(stream, int):
        return _driver().CUstream(stream or 0)
    if hasattr(stream, "__cuda_stream__"):            # cuda.core and others: (version, handle)
        return _driver().CUstream(int(stream.__cuda_stream__()[1]))
    for attribute in ("cuda_stream", "ptr", "handle"):  # torch, CuPy, cuda.core
        if hasattr(stream, attribute):
            return _driver().CUstream(int(getattr(stream, attribute)))
    return stream


class Kernel:
    def __init__(self, module: "Module", info: KernelInfo, handle: Any):
        self.module = module
        self.name = info.name
        self.info = info
        self.handle = handle
        self.params: list[ParamInfo] = list(info.params)
        self._max_dynamic_shared = STATIC_SHARED_LIMIT - info.shared_bytes

    @property
    def param_sizes(self) -> list[int]:
        return [p.size for p in self.params]

    def attribute(self, name: str) -> int:
        """cuFuncGetAttribute by short name: 'num_regs', 'max_threads_per_block', 'shared_size_bytes'..."""
        attr = getattr(_driver().CUfunction_attribute, f"CU_FUNC_ATTRIBUTE_{name.upper()}")
        return _call("cuFuncGetAttribute", attr, self.handle)

    def _prepare_shared(self, shared: int) -> None:
        # Static + dynamic shared memory above 48 KiB must be opted into, once per size.
        if shared > self._max_dynamic_shared:
            attr = _driver().CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            _call("cuFuncSetAttribute", self.handle, attr, shared)
            self._max_dynamic_shared = shared

    def launch(self, grid: Union[int, Sequence[int]], block: Union[int, Sequence[int]], *args: Any,
               shared: int = 0, stream: Any = None,
               cluster: Optional[Union[int, Sequence[int]]] = None) -> None:
        """Launch asynchronously on `stream` (default stream when None). `cluster`: the
        thread-block cluster's dimensions (sm_90 and later; each must divide the grid's)."""
        grid3, block3 = _dim3(grid, "grid"), _dim3(block, "block")
        cluster3 = None if cluster is None else _cluster_dims(cluster, grid3)
        packed = _PackedArguments(pack_arguments(self.name, self.param_sizes, args))
        _context()
        self._prepare_shared(shared)
        if cluster3 is None:
            _call("cuLaunchKernel", self.handle, *grid3, *block3, shared, _stream_handle(stream),
                  packed.address, 0)
            return
        driver = _driver()
        attr = driver.CUlaunchAttribute()
        attr.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster3
        config = driver.CUlaunchConfig()
        config.gridDimX, config.gridDimY, config.gridDimZ = grid3
        config.blockDimX, config.blockDimY, config.blockDimZ = block3
        config.sharedMemBytes = shared
        config.hStream = _stream_handle(stream)
        config.attrs = [attr]
        config.numAttrs = 1
        _call("cuLaunchKernelEx", config, self.handle, packed.address, 0)

    __call__ = launch

    def time(self, grid: Union[int, Sequence[int]], block: Union[int, Sequence[int]], *args: Any,
             repeat: int = 10, warmup: int = 1, shared: int = 0, stream: Any = None,
             cluster: Optional[Union[int, Sequence[int]]] = None) -> list[float]:
        """Milliseconds of each of `repeat` launches (after `warmup` untimed ones), by CUDA events."""
        for _ in range(warmup):
            self.launch(grid, block, *args, shared=shared, stream=stream, cluster=cluster)
        handle = _stream_handle(stream)
        events = [(_call("cuEventCreate", 0), _call("cuEventCreate", 0)) for _ in range(repeat)]
        try:
            for start, end in events:
                _call("cuEventRecord", start, handle)
                self.launch(grid, block, *args, shared=shared, stream=stream, cluster=cluster)
                _call("cuEventRecord", end, handle)
            if events:
                _call("cuEventSynchronize", events[-1][1])
            return [float(_call("cuEventElapsedTime", start, end)) for start, end in events]
        finally:
            for pair in events:
                for event in pair:
                    _call("cuEventDestroy", event)

    def __repr__(self) -> str:
        return f"<Kernel {self.name} params={self.param_sizes} regs={self.info.registers}>"


CubinLike = Union[bytes, bytearray, memoryview, str, os.PathLike, Any]


def _cubin_bytes(cubin: CubinLike) -> bytes:
    if isinstance(cubin, (bytes, bytearray, memoryview)):
        return bytes(cubin)
    if isinstance(cubin, (str, os.PathLike)):
        return Path(cubin).read_bytes()
    data = getattr(cubin, "data", None)
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"load() takes cubin bytes, a path, or an object with .data bytes; got {type(cubin).__name__}")


def cubin_for_arch(container: bytes, arch: str, name: str) -> bytes:
    """The cubin with kernels for `arch` in a fatbin or host program; CubinFormatError where there is
    none, or several (sassas.load loads one cubin: its PTX, which the driver would compile, is not
    taken)."""
    cubins = embedded_cubins(container, name)
    mine = [c for c in cubins if c.arch == arch and not c.unread and read_cubin(c.data).kernels]
    if len(mine) != 1:
        what = (f"{len(mine)} cubins with kernels ({', '.join(c.name for c in mine)})" if mine
                else "no cubin with kernels")
        unread = [f"{c.name}: {c.unread}" for c in cubins if c.arch == arch and c.unread]
        raise CubinFormatError(f"{name}: {what} for {arch}; it holds {', '.join(c.name for c in cubins)}"
                               + "".join(f"; {u}" for u in unread))
    return mine[0].data


class Module:
    """A loaded cubin. `module.kernel(name)` or `module[name]`; `module.names`."""

    def __init__(self, image: bytes, info: CubinInfo, handle: Any):
        self.image = image
        self.info = info
        self.handle = handle
        self._kernels: dict[str, Kernel] = {}

    @property
    def names(self) -> list[str]:
        return [k.name for k in self.info.kernels]

    def kernel(self, name: str) -> Kernel:
        if name not in self._kernels:
            info = self.info.kernel(name)          # KeyError listing the kernels there are
            handle = _call("cuModuleGetFunction", self.handle, name.encode())
            self._kernels[name] = Kernel(self, info, handle)
        return self._kernels[name]

    __getitem__ = kernel

    def __contains__(self, name: str) -> bool:
        return name in self.names

    def __iter__(self):
        return iter(self.names)

    def unload(self) -> None:
        handle, self.handle = self.handle, None
        if handle is not None and _state["driver"] is not None:
            try:
                _context()
                _call("cuModuleUnload", handle)
            except Exception:
                pass

    def __enter__(self) -> "Module":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.unload()

    def __repr__(self) -> str:
        return f"<Module {self.info.arch} kernels={self.names}>"


def load(cubin: CubinLike) -> Module:
    """Load a cubin (bytes, path, or object with `.data`) into the current device's context; of a
    fatbin or host program (nvcc's output), the cubin inside for this GPU's arch."""
    image = _cubin_bytes(cubin)
    if is_container(image):
        major, minor = compute_capability()
        name = os.path.basename(str(cubin)) if isinstance(cubin, (str, os.PathLike)) else "the fatbin"
        image = cubin_for_arch(image, f"sm_{major}{minor}", name)
    info = read_cubin(image)          # parameters for packing, and a format check before the driver
    _context()
    handle = _call("cuModuleLoadData", image)
    return Module(image, info, handle)


class _CallableModule(types.ModuleType):
    """`sassas.load(cubin)` and `sassas.load.load(cubin)` both work.

    The package exports a function `load`, but importing this submodule rebinds the package
    attribute `sassas.load` to the module; making the module callable keeps both spellings valid.
    """

    def __call__(self, cubin: CubinLike) -> Module:
        return load(cubin)


sys.modules[__name__].__class__ = _CallableModule
