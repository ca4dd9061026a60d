"""The fused F(4x4,3x3) kernel with its products on mma.sync in 3xTF32 (fusedtc.py, CUDA-C): what
NVRTC makes of it (CPU), its results against float64 (GPU)."""
from __future__ import annotations

import os

import numpy as np
import pytest

from kernels_sass.winograd import fusedtc
from kernels_sass.winograd import reference as ref
from kernels_sass.winograd.plan import Shape

SEED = int(os.environ["SASSAS_FUZZ_SEED"])    # drawn once a run and reported by tests/conftest.py


def _compiled(v: fusedtc.Variant = fusedtc.DEFAULT) -> bytes:
    from kernels_sass.winograd import cuda
    ok, why = cuda.nvrtc_available()
    if not ok:
        pytest.skip(why)
    try:
        return cuda._nvrtc_compile(fusedtc.source(v), "sm_90a", cuda.OPTIONS, "fusedtc.cu")
    except cuda.CompilerMissing as e:
        pytest.skip(str(e))


@pytest.mark.parametrize("v", [fusedtc.DEFAULT, fusedtc.VARIANTS["copies interleaved"]], ids=str)
def test_the_kernels_have_the_loops_108_hmma_and_reassemble_byte_for_byte(v):
    """Each kernel's loop: 36 positions' 32 x 32 x 8 products on 8 warps, 3 HMMA.1688.F32.TF32 a
    tile (one copy of the loop: ptxas unrolls none of it); the warp-specialized ones move the
    registers from the producer warpgroup to the consumers (200 and 104 a thread: USETMAXREG, the
    384 x 168 the block has at launch);
    `sassas disasm` -> `sassas asm` gives NVRTC's code back byte for byte."""
    import sassas
    from sassas.disasm import disassemble
    from sassas.elf import read_cubin
    data = _compiled(v)
    text = disassemble(data)
    kernels = {k.split("\n", 1)[0]: k for k in text.split(".kernel ")[1:]}
    for name in ("f4_fused_tc", "f4_fused_tc_vec", "f4_fused_tc_ws", "f4_fused_tc_ws_vec"):
        assert kernels[name].count("HMMA.1688.F32.TF32") == 108, name
        assert ("USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xc8;" in kernels[name] and
                "USETMAXREG.DEALLOC.CTAPOOL 0x68;" in kernels[name]) == ("_ws" in name), name
    again = sassas.assemble(text, "sm_90a", "fusedtc.sass")
    code = lambda cubin: {k.name: k.code for k in read_cubin(cubin).kernels}
    assert code(again.data) == code(data)


def test_gpus_before_sm80_are_refused_not_given_empty_kernels():
    """Below sm_80 (no mma.sync TF32) the kernels compile to empty bodies: module refuses the
    arch before compiling; the warp-specialized kernel wants sm_90."""
    with pytest.raises(ValueError, match="sm_80 or later"):
        fusedtc.module(fusedtc.DEFAULT, "sm_75")
    with pytest.raises(ValueError, match="needs sm_90"):
        fusedtc.module(fusedtc.VARIANTS["warp-specialized"], "sm_86")


def test_the_variants_leave_out_what_they_say():
    """The measurement variants: without products no HMMA, the products-only one no copies."""
    from sassas.disasm import disassemble
    for tag, v in fusedtc.VARIANTS.items():
        assert v.bound == (tag not in ("default", "copies interleaved", "warp-specialized"))
    text = disassemble(_compiled(fusedtc.VARIANTS["no products"]))
    assert "HMMA" not in text.split(".kernel f4_fused_tc_vec", 1)[1].split(".kernel ", 1)[0]
    text = disassemble(_compiled(fusedtc.VARIANTS["products only"]))
    body = text.split(".kernel f4_fused_tc_vec", 1)[1].split(".kernel ", 1)[0]
    assert "LDGSTS" not in body and body.count("HMMA.1688.F32.TF32") == 108


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", fusedtc.KERNELS)
@pytest.mark.parametrize("shape,parts", [(Shape(3, 9, 12, 16, 40), 1), (Shape(3, 9, 12, 16, 40), 2),
                                         (Shape(33, 20, 9, 11, 70), 1), (Shape(33, 20, 9, 11, 70), 2),
                                         (Shape(7, 1, 1, 1, 9), 1), (Shape(4, 128, 28, 28, 96), 1),
                                         (Shape(2, 24, 7, 7, 64), 1)], ids=str)
def test_fused_tc_matches_float64_on_the_gpu(kernel, shape, parts):
    """Each kernel, both of its forms (W % 4 == 0: 16-byte window rows and float4 stores; else
    4-byte copies), channels in one part or two (atomicAdd), one chunk to 16, NaN-poisoned
    output: within 1e-5 of float64."""
    from sassas.load import DeviceBuffer, compute_capability, gpu_available
    ok, why = gpu_available()
    if not ok:
        pytest.skip(f"no GPU: {why}")
    v = fusedtc.VARIANTS[kernel]
    if compute_capability() < ((9, 0) if v.ws else (8, 0)):
        pytest.skip("mma.sync TF32 needs sm_80 or later, the warp-specialized kernel sm_90")
    rng = np.random.default_rng([SEED, sum(map(ord, f"fusedtc {kernel} {shape} {parts}"))])
    x = rng.standard_normal((shape.N, shape.C, shape.H, shape.W)).astype(np.float32)
    w = rng.standard_normal((shape.K, shape.C, 3, 3)).astype(np.float32)
    xd, wd = DeviceBuffer.from_numpy(x), DeviceBuffer.from_numpy(w)
    u = DeviceBuffer.from_numpy(np.zeros(fusedtc.u_shape(shape), np.float32))
    y = DeviceBuffer.from_numpy(np.full((shape.N, shape.K, shape.H, shape.W), np.nan, np.float32))
    fusedtc.filter_transform(wd, u, shape)
    fusedtc.launch(xd, u, y, shape, parts, v=v)
    got = y.to_numpy()
    want = ref.direct_conv2d(x, w)
    assert not np.isnan(got).any()
    assert np.linalg.norm(got - want) / np.linalg.norm(want) <= 1e-5
