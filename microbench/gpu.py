"""The GPU side: device facts, building modules (sassas for SASS, NVRTC for CUDA-C, both
loaded with sassas.load), launching a case and timing it with CUDA events."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from .core import CUDA, SASS, Case, Records, Source, TensorMap2D
from .sassgen import RECORD_WORDS

POISON = 0xFFFFFFFF
# What a function attribute that a case may set goes back to after the case (the module,
# and so the function, is shared by every case of the same source).
ATTRIBUTE_DEFAULTS = {"preferred_shared_memory_carveout": -1}


def loader():
    """The module sassas.load (the package's attribute `load` is a function: import the
    module by name)."""
    import importlib
    return importlib.import_module("sassas.load")


def gpu_available() -> tuple[bool, str]:
    """(True, device name) or (False, why not): from sassas.load when it exists."""
    try:
        sl = loader()
    except Exception as e:  # the loader is missing or broken
        return False, f"sassas.load cannot be imported: {e}"
    fn = getattr(sl, "gpu_available", None)
    if fn is None:
        return False, "sassas.load has no gpu_available()"
    try:
        return fn()
    except Exception as e:
        return False, f"gpu_available() failed: {e}"


def probe_device() -> tuple[bool, str, str]:
    """(ok, device name or why not, 'sm_XY') for device 0, without creating a CUDA context
    (the parent process of a run leaves the GPU to its workers: a GPU in an exclusive
    compute mode takes one context at a time)."""
    try:
        from cuda.bindings import driver
    except ImportError as e:
        return False, f"cuda-python is not installed ({e})", ""
    try:
        err = driver.cuInit(0)[0]
    except Exception as e:
        return False, f"the NVIDIA driver (libcuda) cannot be loaded: {e}", ""
    if int(err) != 0:
        return False, f"cuInit failed: {err}", ""
    try:
        if _call("cuDeviceGetCount") == 0:
            return False, "the CUDA driver reports no devices", ""
        dev = _call("cuDeviceGet", 0)
        attr = driver.CUdevice_attribute
        major = _call("cuDeviceGetAttribute", attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
        minor = _call("cuDeviceGetAttribute", attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
        name = _call("cuDeviceGetName", 256, dev)
        name = name.split(b"\0", 1)[0].decode(errors="replace") if isinstance(name, bytes) else str(name)
        return True, name, f"sm_{major}{minor}"
    except Exception as e:
        return False, f"cannot query device 0: {e}", ""


def build(source: Source, arch: str) -> bytes:
    """A Source -> cubin bytes (no GPU needed)."""
    if source.lang == SASS:
        import sassas
        cubin = sassas.assemble(source.text, arch=arch, filename=source.filename)
        return bytes(cubin.data)
    if source.lang == CUDA:
        from .nvrtc import compile_cuda
        return compile_cuda(source.text, arch, source.options, source.filename)
    raise ValueError(f"unknown source language {source.lang!r}")


@dataclass
class DeviceInfo:
    name: str
    arch: str
    sm_count: int
    clock_khz: int
    driver: int

    def as_dict(self) -> dict:
        return {"device": self.name, "arch": self.arch, "sm_count": self.sm_count,
                "clock_khz": self.clock_khz, "driver_version": self.driver}


def _drv():
    from cuda.bindings import driver
    return driver


def _call(fn: str, *args):
    driver = _drv()
    res = getattr(driver, fn)(*args)
    err = res[0]
    if int(err) != 0:
        try:
            name = driver.cuGetErrorName(err)[1].decode()
        except Exception:
            name = str(err)
        raise GpuError(f"{fn} failed: {name}", name)
    if len(res) == 1:
        return None
    return res[1] if len(res) == 2 else res[1:]


class GpuError(RuntimeError):
    """A CUDA call failed. `sticky` errors (illegal address/instruction, launch failure...)
    leave the context unusable: the runner starts a fresh process."""
    STICKY = ("CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_ILLEGAL_INSTRUCTION",
              "CUDA_ERROR_LAUNCH_FAILED", "CUDA_ERROR_MISALIGNED_ADDRESS",
              "CUDA_ERROR_INVALID_PC", "CUDA_ERROR_HARDWARE_STACK_ERROR",
              "CUDA_ERROR_INVALID_ADDRESS_SPACE", "CUDA_ERROR_LAUNCH_TIMEOUT",
              "CUDA_ERROR_ASSERT", "CUDA_ERROR_CONTEXT_IS_DESTROYED", "CUDA_ERROR_UNKNOWN")

    def __init__(self, message: str, name: str = ""):
        super().__init__(message)
        self.name = name

    @property
    def sticky(self) -> bool:
        return self.name in self.STICKY


class Gpu:
    """One device (ordinal 0), its modules (cached by source) and buffers."""

    def __init__(self):
        ok, why = gpu_available()
        if not ok:
            raise GpuError(f"no GPU: {why}")
        sl = loader()
        self.sl = sl
        major, minor = sl.compute_capability()
        dev = _call("cuDeviceGet", 0)
        attr = _drv().CUdevice_attribute
        name = why
        def optional(fn, *args) -> int:
            try:
                return int(_call(fn, *args))
            except Exception:      # an attribute a newer driver dropped: informative only
                return 0
        self.info = DeviceInfo(
            name=name, arch=f"sm_{major}{minor}",
            sm_count=int(_call("cuDeviceGetAttribute", attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev)),
            clock_khz=optional("cuDeviceGetAttribute", attr.CU_DEVICE_ATTRIBUTE_CLOCK_RATE, dev),
            driver=optional("cuDriverGetVersion"))
        self._modules: dict[tuple, Any] = {}
        self.build_seconds = 0.0
        self.builder = None         # callable(source, arch) -> cubin; default: build()

    def module(self, source: Source):
        mod = self._modules.get(source.key)
        if mod is None:
            t = time.perf_counter()
            cubin = (self.builder or build)(source, self.info.arch)
            mod = self.sl.load(cubin)
            self.build_seconds += time.perf_counter() - t
            self._modules[source.key] = mod
        return mod

    def run_case(self, case: Case, repeat: int, warmup: int):
        """Launch the case warmup + repeat x case.launches times. Returns (samples per metric,
        each the mean over case.launches launches; event times in ms, likewise; the last
        launch's Records)."""
        kern = self.module(case.source)[case.kernel]
        grid = case.grid_size(self.info.sm_count)
        threads = grid * case.block
        inp_words = case.inp if case.inp is not None else np.zeros(1, np.uint32)
        inp = self.sl.DeviceBuffer.from_numpy(np.ascontiguousarray(inp_words, dtype=np.uint32))
        if case.tensor_map is not None:
            words = np.array(inp_words, dtype=np.uint32)
            words[:TensorMap2D.WORDS] = encode_tensor_map(case.tensor_map, inp.ptr)
            inp.copy_from(words)
        poison = np.full(threads * RECORD_WORDS, POISON, dtype=np.uint32)
        out = self.sl.DeviceBuffer.from_numpy(poison)
        args = (out, inp, np.int32(case.iters), np.int32(case.flag),
                np.uint32(case.p0 & 0xFFFFFFFF), np.uint32(case.p1 & 0xFFFFFFFF))
        launch_options = {"cluster": case.cluster} if case.cluster else {}
        for name, value in case.attributes.items():
            _set_attribute(kern, name, value)
        ev0 = _call("cuEventCreate", 0)
        ev1 = _call("cuEventCreate", 0)
        samples: dict[str, list[float]] = {m.name: [] for m in case.metrics}
        times: list[float] = []
        rec = None
        warmup += case.warmup
        per_sample = max(1, case.launches)
        pending: dict[str, list[float]] = {m.name: [] for m in case.metrics}
        pending_ms: list[float] = []
        try:
            for i in range(warmup + repeat * per_sample):
                out.copy_from(poison)
                _call("cuEventRecord", ev0, _drv().CUstream(0))
                kern(grid, case.block, *args, **launch_options)
                _call("cuEventRecord", ev1, _drv().CUstream(0))
                _call("cuEventSynchronize", ev1)
                _call("cuCtxSynchronize")
                ms = float(_call("cuEventElapsedTime", ev0, ev1))
                rec = Records(out.to_numpy(), case.block)
                problem = check_written(rec)
                if problem is None and case.check is not None:
                    problem = case.check(rec, case)
                if problem:
                    raise CaseFailed(problem)
                if i < warmup:
                    continue
                pending_ms.append(ms)
                for m in case.metrics:
                    pending[m.name].append(float(m.compute(rec, case)))
                if len(pending_ms) == per_sample:
                    times.append(sum(pending_ms) / per_sample)
                    pending_ms.clear()
                    for m in case.metrics:
                        values = pending[m.name]
                        # (a launch beyond its physical limit is the sample: the mean would
                        # hide it from the guard, which rejects the whole result)
                        beyond = [v for v in values if m.limit.check(v)]
                        samples[m.name].append(beyond[0] if beyond else sum(values) / per_sample)
                        values.clear()
        finally:
            for ev in (ev0, ev1):
                try:
                    _call("cuEventDestroy", ev)
                except Exception:
                    pass
            inp.close()
            out.close()
            for name in case.attributes:
                try:      # after a fault the context is gone: the error above is the one to tell
                    _set_attribute(kern, name, ATTRIBUTE_DEFAULTS[name])
                except GpuError:
                    pass
        return samples, times, rec


def encode_tensor_map(tm: TensorMap2D, address: int) -> np.ndarray:
    """The 128-byte CUtensorMap (cuTensorMapEncodeTiled) of `tm` for an input buffer at
    device address `address`, as 32 words: 32-bit elements, no interleave, no swizzle, no L2
    promotion, no out-of-bounds fill."""
    driver = _drv()
    u64, u32 = driver.cuuint64_t, driver.cuuint32_t
    tmap = _call("cuTensorMapEncodeTiled",
                 driver.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_UINT32, 2, address + tm.offset,
                 [u64(tm.width), u64(tm.height)], [u64(4 * tm.width)],
                 [u32(tm.box_width), u32(tm.box_height)], [u32(1), u32(1)],
                 driver.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
                 driver.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_NONE,
                 driver.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_NONE,
                 driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    return np.array([int(x) for x in tmap.opaque], dtype=np.uint64).view(np.uint32)


def _set_attribute(kern, name: str, value: int) -> None:
    if name not in ATTRIBUTE_DEFAULTS:
        raise ValueError(f"no default known for function attribute {name!r}")
    attr = getattr(_drv().CUfunction_attribute, f"CU_FUNC_ATTRIBUTE_{name.upper()}")
    _call("cuFuncSetAttribute", kern.handle, attr, int(value))


class CaseFailed(RuntimeError):
    """The kernel ran but its records are wrong (unwritten, or a failed result check)."""


def check_written(rec: Records) -> Optional[str]:
    """Every thread must have written its SM id (poisoned to 0xFFFFFFFF before the launch)."""
    bad = int((rec.smid == POISON).sum())
    if bad:
        return f"{bad} of {rec.threads} threads wrote no record (the kernel did not run to its end)"
    if int(rec.smid.max()) > 4096:
        return f"implausible SM id {int(rec.smid.max())} in the records"
    return None
