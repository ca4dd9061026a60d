"""The loader: argument packing on any machine; loading and launching on a GPU.

GPU tests skip with the reason from `sassas.load.gpu_available()`. They compile reference
kernels for the device's arch (NVRTC from cuda-python, else ptxas from the pip wheel), rewrite
each cubin with sassas.elf (both ELF dialects), and run the original and the rewritten ones.
"""
from __future__ import annotations

import ctypes
import os
import struct
from pathlib import Path

import numpy as np
import pytest

import sassas
from importlib import import_module

L = import_module("sassas.load")    # the module (the package also has a function `load`)
from sassas.elf import KernelImage, read_cubin, write_cubin


# ------------------------------------------------------------------ packing (no GPU needed)

class FakeCudaArray:
    """Anything with __cuda_array_interface__ (CuPy, torch, Numba) is passed by its pointer."""

    def __init__(self, ptr: int):
        self.__cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (ptr, False), "version": 3}


def test_pack_scalars_by_parameter_size():
    packed = L.pack_arguments("k", [4, 8, 4, 8, 2, 1], [2.5, 2.5, -3, -3, 7, 255])
    assert packed == [struct.pack("<f", 2.5), struct.pack("<d", 2.5), struct.pack("<i", -3),
                      struct.pack("<q", -3), struct.pack("<h", 7), bytes([255])]


def test_pack_unsigned_range_and_overflow():
    assert L.pack_arguments("k", [4], [0xFFFFFFFF]) == [b"\xff\xff\xff\xff"]
    with pytest.raises(TypeError, match=r"kernel 'k', parameter 0 \(4 bytes\).*does not fit"):
        L.pack_arguments("k", [4], [1 << 32])


def test_pack_numpy_scalars_use_their_dtype():
    packed = L.pack_arguments("k", [2, 8, 4], [np.float16(1.5), np.uint64(1 << 63), np.int32(-1)])
    assert packed == [np.float16(1.5).tobytes(), (1 << 63).to_bytes(8, "little"), b"\xff" * 4]
    with pytest.raises(TypeError, match=r"parameter 0 \(4 bytes\).*float64"):
        L.pack_arguments("k", [4], [np.float64(1.0)])


def test_pack_pointers_and_raw_bytes():
    ctypes_struct = (ctypes.c_int32 * 3)(1, 2, 3)
    packed = L.pack_arguments("k", [8, 12, 12], [FakeCudaArray(0x7F0000001000), b"\1" * 12, ctypes_struct])
    assert packed[0] == (0x7F0000001000).to_bytes(8, "little")
    assert packed[1] == b"\1" * 12 and packed[2] == struct.pack("<3i", 1, 2, 3)


def test_pack_errors_name_kernel_index_and_size():
    with pytest.raises(TypeError, match=r"kernel 'saxpy' takes 4 argument\(s\) \(parameter sizes \[4, 8, 8, 4\]\), got 3"):
        L.pack_arguments("saxpy", [4, 8, 8, 4], [1.0, 2, 3])
    with pytest.raises(TypeError, match=r"kernel 'saxpy', parameter 1 \(4 bytes\): a device array"):
        L.pack_arguments("saxpy", [4, 4], [1.0, FakeCudaArray(16)])
    with pytest.raises(TypeError, match=r"parameter 0 \(8 bytes\): a host numpy array"):
        L.pack_arguments("k", [8], [np.zeros(4)])
    with pytest.raises(TypeError, match=r"parameter 0 \(12 bytes\): a Python float"):
        L.pack_arguments("k", [12], [1.0])
    with pytest.raises(TypeError, match=r"parameter 0 \(8 bytes\): cannot pass a str"):
        L.pack_arguments("k", [8], ["x"])


def test_packed_argument_array_points_at_each_value():
    packed = L._PackedArguments([b"\1\2\3\4", b"\5" * 8, b"\6"])
    pointers = [int(p) for p in packed.pointers]
    assert [ctypes.string_at(p, n) for p, n in zip(pointers, (4, 8, 1))] == [b"\1\2\3\4", b"\5" * 8, b"\6"]
    assert all(p % 16 == 0 for p in pointers)
    assert L._PackedArguments([]).address == 0


def test_dlpack_host_memory_is_refused():
    with pytest.raises(TypeError, match="not CUDA memory"):
        L._dlpack_pointer(np.zeros(4, np.float32))


def test_package_load_and_module_are_both_callable():
    assert callable(sassas.load) and callable(L) and L.load is not None


def test_dim3():
    assert L._dim3(5, "grid") == (5, 1, 1) and L._dim3((2, 3), "grid") == (2, 3, 1)
    with pytest.raises(ValueError, match="block"):
        L._dim3((1, 2, 3, 4), "block")
    with pytest.raises(ValueError, match="grid"):
        L._dim3(0, "grid")


def test_no_gpu_is_reported_cleanly():
    available, reason = L.gpu_available()
    assert isinstance(available, bool) and reason
    if not available:
        with pytest.raises(L.NoGpuError):
            L.load(write_cubin("sm_90", [KernelImage("k", bytes.fromhex("4d790000000000000000800300ea0f00"),
                                                     [], registers=8)]))


def test_cuda_error_message():
    e = L.CudaError("cuModuleLoadData", 200, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid")
    assert str(e) == ("cuModuleLoadData failed: CUDA_ERROR_INVALID_IMAGE (200): device kernel image is invalid")


def test_load_accepts_bytes_path_and_data_objects(tmp_path):
    image = b"\x7fELF..."
    path = tmp_path / "x.cubin"
    path.write_bytes(image)

    class ObjectCode:
        data = image
    assert L._cubin_bytes(image) == L._cubin_bytes(path) == L._cubin_bytes(str(path)) == L._cubin_bytes(ObjectCode())
    with pytest.raises(TypeError, match="cubin bytes"):
        L._cubin_bytes(42)


# ------------------------------------------------------------------------------ GPU tests

_available, _reason = L.gpu_available()
def gpu(test):
    """A GPU test: marked `gpu` (so `-m gpu` selects it) and skipped, with the reason, without one."""
    return pytest.mark.gpu(pytest.mark.skipif(not _available, reason=f"no GPU: {_reason}")(test))

CUDA_SOURCE = r"""
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" __global__ void __launch_bounds__(256, 2) reverse(float* out, double d, char c) {
  __shared__ float s[256];
  s[threadIdx.x] = threadIdx.x * d + c;
  __syncthreads();
  out[threadIdx.x] = s[255 - threadIdx.x];
}
extern "C" __global__ void noparams() {}
extern "C" __global__ void frame(unsigned* out, unsigned i) {
  volatile unsigned stack[16];
  stack[i & 15] = i;
  stack[(i & 15) ^ 3] = i + 1;
  out[0] = stack[(i & 15) ^ 3];
}
extern "C" __global__ void dynshared(unsigned* out, unsigned n) {
  extern __shared__ unsigned dyn[];
  for (unsigned k = threadIdx.x; k < n; k += blockDim.x) dyn[k] = k * 3;
  __syncthreads();
  unsigned sum = 0;
  for (unsigned k = 0; k < n; ++k) sum += dyn[k];
  if (threadIdx.x == 0) out[0] = sum;
}
"""


def _device_arch() -> str:
    major, minor = L.compute_capability()
    return f"sm_{major}{minor}"


def _compile_nvrtc(arch: str) -> bytes | None:
    try:
        from cuda.bindings import nvrtc
        err, prog = nvrtc.nvrtcCreateProgram(CUDA_SOURCE.encode(), b"ref.cu", 0, [], [])
        if int(err):
            return None
        err, = nvrtc.nvrtcCompileProgram(prog, 1, [f"--gpu-architecture={arch}".encode()])
        if int(err):
            return None
        err, size = nvrtc.nvrtcGetCUBINSize(prog)
        cubin = b" " * size
        err, = nvrtc.nvrtcGetCUBIN(prog, cubin)
        return cubin if int(err) == 0 else None
    except Exception:   # NVRTC library not installed
        return None


@pytest.fixture(scope="module")
def reference() -> bytes:
    """A cubin of CUDA_SOURCE for this GPU: compiled by NVRTC, or read from the file named by
    $SASSAS_LOAD_REFERENCE (for GPU machines without NVRTC; make it with NVRTC or nvcc)."""
    if not _available:
        pytest.skip(f"no GPU: {_reason}")
    arch = _device_arch()
    if os.environ.get("SASSAS_LOAD_REFERENCE"):
        cubin = Path(os.environ["SASSAS_LOAD_REFERENCE"]).read_bytes()
        assert read_cubin(cubin).arch == arch, "SASSAS_LOAD_REFERENCE is for another GPU"
        return cubin
    cubin = _compile_nvrtc(arch)
    if cubin is None:
        pytest.skip(f"NVRTC cannot compile for {arch} here (pip install nvidia-cuda-nvrtc, "
                    "or set SASSAS_LOAD_REFERENCE)")
    return cubin


def _rewrite(cubin: bytes, abi: str) -> bytes:
    """The reference's code in a cubin holding only what the assembler gives write_cubin."""
    info = read_cubin(cubin)
    images = [KernelImage(k.name, k.code, k.params, k.registers, shared_bytes=k.shared_bytes,
                          max_threads=k.max_threads, barriers=k.barriers, uses_local=k.frame_size)
              for k in info.kernels]
    return write_cubin(info.arch, images, abi=abi)


VARIANTS = ["reference", "cuda12", "cuda13"]


@pytest.fixture(params=VARIANTS)
def module(request, reference):
    image = reference if request.param == "reference" else _rewrite(reference, request.param)
    with L.load(image) as m:
        yield m


@gpu
def test_module_lists_kernels(module):
    assert sorted(module.names) == ["dynshared", "frame", "noparams", "reverse", "saxpy"]
    assert module["saxpy"] is module.kernel("saxpy") and "saxpy" in module
    with pytest.raises(KeyError, match="no kernel"):
        module.kernel("missing")


@gpu
def test_saxpy(module):
    n = 1000
    x = np.arange(n, dtype=np.float32)
    y = np.ones(n, dtype=np.float32)
    with L.DeviceBuffer.from_numpy(x) as dx, L.DeviceBuffer.from_numpy(y) as dy:
        module["saxpy"]((n + 255) // 256, 256, 2.0, dx, dy, n)
        L.synchronize()
        np.testing.assert_allclose(dy.to_numpy(), 2 * x + 1)


@gpu
def test_a_host_program_loads_as_its_cubin_for_this_gpu():
    """nvcc's `app` (tests/sassas/data/fatbin) holds sm_80's and sm_90's cubins: load takes this
    GPU's and its kernels run; on a GPU of another arch it says which archs the file has."""
    path = Path(__file__).parent / "data" / "fatbin" / "app"
    major, minor = L.compute_capability()
    if f"sm_{major}{minor}" not in ("sm_80", "sm_90"):
        with pytest.raises(ValueError, match=f"app: no cubin with kernels for sm_{major}{minor}; it holds app.1.sm_80"):
            sassas.load(path)
        return
    module = sassas.load(path)
    assert sorted(module.names) == ["_Z5scalePfPKffi", "_Z9block_sumPfPKfi"]
    x = np.random.default_rng().standard_normal(1000).astype(np.float32)
    with L.DeviceBuffer.from_numpy(x) as dx, L.zeros(1000, np.float32) as dy:
        module["_Z5scalePfPKffi"](4, 256, dy, dx, np.float32(-1.5), 1000)
        L.synchronize()
        np.testing.assert_array_equal(dy.to_numpy(), np.float32(-1.5) * x)


@gpu
def test_shared_memory_barrier_and_scalar_types(module):
    out = L.zeros(256, np.float32)
    module["reverse"](1, 256, out, np.float64(2.0), np.int8(-3))
    expected = (np.arange(256)[::-1] * 2.0 - 3).astype(np.float32)
    np.testing.assert_allclose(out.to_numpy(), expected)
    assert module["reverse"].attribute("max_threads_per_block") == 256   # EIATTR_MAX_THREADS


@gpu
def test_noparams_and_local_memory(module):
    module["noparams"]((2, 2), (32, 2))
    out = L.zeros(1, np.uint32)
    module["frame"](1, 1, out, 5)
    L.synchronize()
    assert out.to_numpy()[0] == 6


@gpu
def test_dynamic_shared_above_48k(module):
    n = 20000                               # 80 000 bytes of dynamic shared memory
    out = L.zeros(1, np.uint32)
    module["dynshared"](1, 128, out, n, shared=n * 4)
    assert out.to_numpy()[0] == (3 * n * (n - 1) // 2) & 0xFFFFFFFF


@gpu
def test_register_count_reaches_the_driver(module):
    k = module["saxpy"]
    assert k.attribute("num_regs") >= k.info.registers - 2   # the driver may round up


@gpu
def test_wrong_arguments_raise_before_launch(module):
    with pytest.raises(TypeError, match=r"kernel 'saxpy' takes 4"):
        module["saxpy"](1, 1, 1.0)


@gpu
def test_timing(module):
    times = module["noparams"].time(1, 32, repeat=5, warmup=1)
    assert len(times) == 5 and all(t >= 0 for t in times)


@gpu
def test_driver_errors_become_cuda_error():
    other = "sm_75" if _device_arch() != "sm_75" else "sm_80"   # code for another GPU
    image = write_cubin(other, [KernelImage("k", bytes.fromhex("4d790000000000000000800300ea0f00"), [], 8)])
    with pytest.raises(L.CudaError, match=r"cuModuleLoadData failed: CUDA_ERROR_\w+ \(\d+\): "):
        L.load(image)


TURINGAS_CLOCK = """\
<params>
out, 8
</params>
--:-:-:Y:4  MOV R6, 0x1234;
--:-:-:Y:4  MOV R4, 0x5678;
--:-:0:-:2  CS2R R5, SR_CLOCKLO;
--:-:-:Y:f  ULDC.64 UR4, memoryDescriptor;
--:-:1:-:1  LDC.64 R2, out[0];
03:-:-:Y:f  NOP;
03:-:-:-:1  STG.E.STRONG.GPU desc[UR4][R2.64], R4;
--:-:-:-:1  STG.E.STRONG.GPU desc[UR4][R2.64+0x4], R5;
--:-:-:-:1  STG.E.STRONG.GPU desc[UR4][R2.64+0x8], R6;
--:-:-:Y:5  EXIT;
"""


@gpu
def test_turingas_clock_read_is_32_bit_on_the_gpu():
    """A TuringAs file's `CS2R R5, SR_CLOCKLO` is the 32-bit read: it runs (the 64-bit CS2R
    into an odd register stops the kernel with CUDA error 715) and leaves R4 and R6 alone."""
    major, minor = L.compute_capability()
    cubin = sassas.assemble(TURINGAS_CLOCK, arch=f"sm_{major}{minor}", kernel_name="clock")
    out = L.zeros(3, np.uint32)
    sassas.load(cubin)["clock"](1, 1, out)
    L.synchronize()
    r4, r5, r6 = out.to_numpy()
    assert (r4, r6) == (0x5678, 0x1234) and r5 != 0
