"""The 3xTF32 tensor-core GEMM of F(4x4,3x3) (kernels_sass.winograd.tcgemm): assembly, hazards,
NVIDIA's disassembler, the CPU simulator (HMMA.1688.F32.TF32 modelled on the mma fragments),
the 3xTF32 split's accuracy, the plan, and on a GPU the whole path through conv2d(algo="f4tc")."""
from __future__ import annotations

import os
import re

import numpy as np
import pytest

from kernels_sass.winograd import cubins, f4, gemmgen, sim, tcgemm
from kernels_sass.winograd import reference as ref
from kernels_sass.winograd.gemmgen import GemmShape
from kernels_sass.winograd.plan import Shape, Unsupported


SEED = int(os.environ["SASSAS_FUZZ_SEED"])    # drawn once a run and reported by tests/conftest.py


def _rng(name: str) -> np.random.Generator:
    return np.random.default_rng([SEED, sum(map(ord, name))])


def _sim_gemm(g: GemmShape, rng, o: tcgemm.TcOptions = tcgemm.OPTIONS):
    u = rng.standard_normal((g.operand_rows, g.K)).astype(np.float32)
    v = rng.standard_normal((g.operand_rows, g.T)).astype(np.float32)
    m = np.full((g.parts * gemmgen.E, g.K, g.T), np.nan, np.float32)
    out, mach = sim.simulate(tcgemm.generate(g, o), tcgemm.grid(g, o), {"u": u, "v": v, "m": m},
                             list(gemmgen.PARAMS), o.smem_bytes(), tcgemm.THREADS)
    return u, v, out["m"].view(np.float32).reshape(g.parts, gemmgen.E, g.K, g.T), mach


# ---- the generated kernel ----------------------------------------------------------------------
@pytest.mark.parametrize("g", [GemmShape(32, 128, 128), GemmShape(512, 512, 512), GemmShape(256, 256, 512, 2)],
                         ids=str)
def test_assembles_without_hazards(g):
    import sassas
    from sassas.disasm import disassemble
    from sassas.elf import read_cubin
    text = tcgemm.generate(g)
    cubin = sassas.assemble(text, "sm_90", filename="tcgemm.sass")
    assert cubins.hazards(cubin.program) == []
    info = read_cubin(cubin.data).kernel(tcgemm.kernel_name(g))
    assert info.registers == tcgemm.OPTIONS.registers() == 145        # three blocks of 128 threads an SM
    assert tcgemm.OPTIONS.blocks_per_sm() == 3 and tcgemm.TcOptions(cols=128).blocks_per_sm() == 2
    # the loop body: 4 iterations of 48 HMMA (16 mma tiles x 3), 24 LOP3 + 24 FADD (the split),
    # 8 LDS.64 + 8 LDS (the next fragments), 3 copies
    loop = text[text.index("LOOP:"):text.index("BRA LOOP")]
    for pattern, n in ((r"HMMA\.1688\.F32\.TF32", 192), (r"LOP3\.LUT R\d+, R\d+, 0xffffe000", 96),
                       (r"\bFADD\b", 96), (r"LDS\.64", 32), (r"LDS R", 32), (r"LDGSTS", 12)):
        assert len(re.findall(pattern, loop)) == n, pattern


def test_hmmas_are_spaced_and_accumulators_far_apart():
    """Consecutive HMMAs at least hmma_gap cycles apart (ptxas: 6); an accumulator's three
    HMMAs of an iteration 32 HMMAs apart; the split's FADD after its LOP3."""
    for o in (tcgemm.OPTIONS, tcgemm.TcOptions(hmma_gap=5), tcgemm.TcOptions(cols=128, reuse_across=False)):
        body = tcgemm.Generator(GemmShape(32, 128, 128), o).loop_body()
        per = 3 * 4 * o.cols // 16
        cycle, last, issued = 0, None, []
        for op in body:
            if op.text.startswith("HMMA"):
                if last is not None:
                    assert cycle - last >= o.hmma_gap
                last = cycle
                issued.append(op.text.split()[1].rstrip(","))
            cycle += max(op.stall, 1)
        for it in range(4):
            hm = issued[per * it:per * (it + 1)]
            for n, acc in enumerate(hm):
                assert hm.index(acc) == n % (per // 3)
    with pytest.raises(ValueError):
        tcgemm.Generator(GemmShape(32, 128, 128), tcgemm.TcOptions(hmma_gap=4))


def test_nvdisasm_reads_the_kernel_as_written():
    from sassas.learn import oracle
    why = oracle.missing_tools("sm_90", ("nvdisasm",))
    if why:
        pytest.skip(why)
    for g, o in ((GemmShape(32, 128, 128), tcgemm.OPTIONS), (GemmShape(512, 512, 384, 2), tcgemm.TcOptions(cols=128))):
        text = tcgemm.generate(g, o)
        assert cubins.disasm_mismatches(text, tcgemm.build(g, o, cache=False)) == []


def test_unsupported_gemms_are_refused():
    for g in (GemmShape(16, 128, 128), GemmShape(64, 128, 128, 4), GemmShape(32, 100, 128),
              GemmShape(32, 128, 44032)):     # 16 iterations' channels; offsets of M past 24 bits
        with pytest.raises(Unsupported):
            tcgemm.Generator(g)
    with pytest.raises(Unsupported):
        tcgemm.fit(tcgemm.OPTIONS, tcgemm.target("sm_80"))


# ---- the simulator: the fragment layouts, the split, the copies ---------------------------------
@pytest.mark.parametrize("g,o", [(GemmShape(32, 128, 128), tcgemm.OPTIONS), (GemmShape(64, 128, 128, 2), tcgemm.OPTIONS),
                                 (GemmShape(32, 256, 128), tcgemm.TcOptions(cols=128))],
                         ids=lambda v: str(v) if isinstance(v, GemmShape) else v.tag() or "default")
def test_kernel_in_the_simulator_matches_float64(g, o):
    u, v, got, mach = _sim_gemm(g, _rng(str(g)), o)
    want = ref.f4_gemm(u, v, g.C, g.parts)
    assert not np.isnan(got).any()
    assert np.abs(got - want).max() / np.abs(want).max() < 2e-6
    assert mach.race_log == [] and mach.undefined_log == []


def test_f4tc_path_in_the_simulator_matches_direct():
    """The layouts of U, V and M as winograd.cu's transforms write and read them, around the
    simulated tensor-core GEMM: a convolution (channels padded to the loop body's 32)."""
    s = Shape(8, 7, 10, 9, 5)               # 72 columns: both column blocks hold outputs
    p = f4.plan(s, 132, tc=True)
    g = p.gemm
    assert p.options == tcgemm.OPTIONS and g.C == 32
    rng = _rng("f4tc path")
    x, w = rng.standard_normal((s.N, s.C, s.H, s.W)), rng.standard_normal((s.K, s.C, 3, 3))
    u, v = ref.f4_operands(x, w, g.C, g.K, g.T, gemmgen.PAD_ROWS)
    m = np.full((gemmgen.E, g.K, g.T), np.nan, np.float32)
    out, mach = sim.simulate(tcgemm.generate(g), tcgemm.grid(g), {"u": u, "v": v, "m": m}, list(gemmgen.PARAMS),
                             tcgemm.OPTIONS.smem_bytes(), tcgemm.THREADS)
    got = ref.f4_output(out["m"].view(np.float32).reshape(1, gemmgen.E, g.K, g.T), s.N, s.H, s.W, s.K)
    want = ref.direct_conv2d(x, w)
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 1e-5


def test_3xtf32_split_is_fp32_accurate_and_1xtf32_is_not():
    """hi = x with 13 low bits cleared, lo = x - hi (exact), the tensor core truncating lo too:
    the three products of a ResNet channel count are as accurate as an FP32 sum; hi*hi alone is not."""
    rng = _rng("split")
    a, b = rng.standard_normal((2, 512, 4096)).astype(np.float32)
    tf = lambda x: (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    lo = lambda x: (x - tf(x).astype(np.float32))
    exact = (a.astype(np.float64) * b).sum(0)
    three = (tf(a) * tf(b) + tf(lo(a)) * tf(b) + tf(a) * tf(lo(b))).sum(0)
    one = (tf(a) * tf(b)).sum(0)
    rel = lambda y: np.linalg.norm(y - exact) / np.linalg.norm(exact)
    assert rel(three) < 1e-6 < 1e-4 < rel(one)


def test_plan_pads_channels_to_the_loop_body():
    assert f4.plan(Shape(128, 512, 7, 7, 512), 132, tc=True).gemm.C == 512
    odd = f4.plan(Shape(33, 20, 9, 11, 70), 132, tc=True)
    assert (odd.gemm.C, odd.gemm.K) == (32, 128) and odd.options == tcgemm.OPTIONS
    assert f4.plan(Shape(8, 64, 7, 7, 64), 132, parts=2, tc=True).gemm.C == 64
    assert f4.module(tcgemm.OPTIONS) is tcgemm and f4.module(gemmgen.OPTIONS) is gemmgen


def test_auto_picks_f4tc_on_sm90_for_conv4_and_conv5():
    """sm_90: F(4x4,3x3) with the tensor-core GEMM on Conv4 and Conv5 at every N, in CHWN and in
    NCHW, on the H100 and the H200 (Conv3 turns on the memory bandwidth: test_cost.py)."""
    from kernels_sass.winograd import api, cost
    from kernels_sass.winograd.workloads import resnet_configs
    for gpu in cost.KNOWN_GPUS.values():
        for layout in ("CHWN", "NCHW"):
            picks = {name: api.choose_algo(s, layout, gpu) for name, s in resnet_configs()}
            assert {n for n, a in picks.items() if a == "f4tc" and not n.startswith("Conv3")} == \
                {f"Conv{layer}/N{n}" for layer in (4, 5) for n in (32, 64, 96, 128)}
            assert picks["Conv3/N32"] == "f4tc"


# ---- the FP16 split (TcOptions.split "f16") -----------------------------------------------------
@pytest.mark.parametrize("g", [GemmShape(64, 128, 128), GemmShape(512, 512, 512), GemmShape(256, 256, 512, 2)],
                         ids=str)
def test_f16_assembles_without_hazards(g):
    import sassas
    from sassas.elf import read_cubin
    o = tcgemm.F16
    text = tcgemm.generate(g, o)
    cubin = sassas.assemble(text, "sm_90", filename="tcgemm_f16.sass")
    assert cubins.hazards(cubin.program) == []
    info = read_cubin(cubin.data).kernel(tcgemm.kernel_name(g, o))
    assert info.registers == o.registers() == 187 and o.blocks_per_sm() == 2
    # the loop body: 4 iterations of 48 HMMA.16816, the next iteration's A fragments (hi and lo,
    # 16 LDS.64) and V values (16 LDS), their conversion (8 pairs: 2 FMUL, 2 F2FP, 2 HADD2.F32,
    # 2 FADD each), 6 copies
    loop = text[text.index("LOOP:"):text.index("BRA LOOP")]
    for pattern, n in ((r"HMMA\.16816\.F32 ", 192), (r"LDS\.64", 64), (r"LDS R", 64), (r"\bFMUL\b", 64),
                       (r"F2FP\.F16\.F32\.PACK_AB", 64), (r"HADD2\.F32", 64), (r"\bFADD\b", 64), (r"LDGSTS", 24)):
        assert len(re.findall(pattern, loop)) == n, pattern


def test_f16_conversion_results_wait_two_hmma_gaps():
    """Measured: a conversion stage one HMMA gap (6 cycles) after the one it reads gave NaN; each
    stage reads what the stage before wrote CONVERT_SPACING gaps earlier, 12 cycles or more."""
    gen = tcgemm.generator(GemmShape(64, 128, 128), tcgemm.F16)
    written, cycle = {}, 0
    converting = ("FMUL", "F2FP", "HADD2", "FADD")
    for op in gen.loop_body():
        name, regs = op.text.split()[0], re.findall(r"R(\d+)", op.text)
        if name.split(".")[0] in converting:
            for r in regs[1:]:
                if r in written:
                    assert cycle - written[r] >= 12, op.text
            written[regs[0]] = cycle
        cycle += max(op.stall, 1)


def test_f16_nvdisasm_reads_the_kernel_as_written():
    from sassas.learn import oracle
    why = oracle.missing_tools("sm_90", ("nvdisasm",))
    if why:
        pytest.skip(why)
    for g in (GemmShape(64, 128, 128), GemmShape(512, 512, 384, 2)):
        text = tcgemm.generate(g, tcgemm.F16)
        assert cubins.disasm_mismatches(text, tcgemm.build(g, tcgemm.F16, cache=False)) == []


def test_f16_refuses_what_it_is_not_generated_for():
    with pytest.raises(Unsupported):          # 16 channels an iteration, 4 a loop body
        tcgemm.generator(GemmShape(32, 128, 128), tcgemm.F16)
    with pytest.raises(ValueError):
        tcgemm.generator(GemmShape(64, 128, 128), tcgemm.TcOptions(split="f16", cols=128))
    with pytest.raises(ValueError):
        tcgemm.generator(GemmShape(64, 128, 128), tcgemm.TcOptions(split="bf16"))
    assert f4.Plan(Shape(8, 20, 7, 7, 64), 1, tcgemm.F16).gemm.C == 64
    assert f4.Plan(Shape(8, 20, 7, 7, 64), 1, tcgemm.F16).buffers()["scales"] == (2,)


def _f16_rows(u: np.ndarray) -> tuple[np.ndarray, int]:
    """U's FP32 rows as f4_filter_transform_f16 writes them (a channel pair's row of hi words,
    then its lo row; a word the half2 of the pair, the even channel low), with its scale's bits."""
    bits = int(np.abs(u).max().view(np.uint32))
    x = u * np.float32(2.0 ** (tcgemm.split_scale(bits) - 127))
    hi = x.astype(np.float16)
    lo = (x - hi.astype(np.float32)).astype(np.float16)
    word = lambda h: np.stack([h[0::2], h[1::2]], axis=-1).view(np.uint32)[..., 0]
    return np.stack([word(hi), word(lo)], axis=1).reshape(u.shape), bits


@pytest.mark.parametrize("g", [GemmShape(64, 128, 128), GemmShape(128, 128, 128, 2)], ids=str)
def test_f16_kernel_in_the_simulator_matches_float64(g):
    """The FP16 split's fragments (A from U's pair words, B converted from V's FP32 values in the
    gaps), its scales (V's from max |V|, undone in the epilogue) and copies, simulated."""
    rng = _rng(f"f16 {g}")
    o = tcgemm.F16
    rows = g.operand_rows + tcgemm.f16_pad_rows(o)
    u = (rng.standard_normal((rows, g.K)) * 3.0).astype(np.float32)
    v = (rng.standard_normal((rows, g.T)) * 1e-3).astype(np.float32)
    words, u_bits = _f16_rows(u)
    scales = np.array([u_bits, int(np.abs(v).max().view(np.uint32))], np.uint32)
    m = np.full((g.parts * gemmgen.E, g.K, g.T), np.nan, np.float32)
    out, mach = sim.simulate(tcgemm.generate(g, o), tcgemm.grid(g, o), {"u": words, "v": v, "m": m, "scales": scales},
                             list(tcgemm.PARAMS_F16), o.smem_bytes(), o.threads)
    got = out["m"].view(np.float32).reshape(g.parts, gemmgen.E, g.K, g.T)
    want = ref.f4_gemm(u, v, g.C, g.parts)
    assert not np.isnan(got).any()
    assert np.abs(got - want).max() / np.abs(want).max() < 2e-6
    assert mach.race_log == [] and mach.undefined_log == []


def test_tc_split_switch_plans_the_fp16_halves():
    """f4.TC_SPLIT "f16" (check --tc-split f16): conv2d's f4tc plans the FP16 split, with its
    channel padding and buffers; the default plan is 3xTF32's again after."""
    s = Shape(32, 256, 14, 14, 256)
    assert f4.plan(s, 132, tc=True).options == tcgemm.OPTIONS
    try:
        f4.TC_SPLIT = "f16"
        p = f4.plan(s, 132, tc=True)
        assert p.options == tcgemm.F16 and p.f16 and p.gemm.C == 256 and "scales" in p.buffers()
        assert f4.plan(s, 132).options != tcgemm.F16          # the FFMA GEMM's plan: not a tensor-core one
    finally:
        f4.TC_SPLIT = "tf32"
    assert f4.plan(s, 132, tc=True).options == tcgemm.OPTIONS


def test_split_scale_keeps_values_in_fp16_range():
    """s = 2^(a - 127): the largest |x| times s below 2^15 and at least 2^14 for maxima from
    2^-113 to FP32's largest; below, s stops at 2^127; zero, subnormal, inf and NaN maxima give
    normal scales."""
    rng = _rng("scale")
    for x in np.concatenate([rng.standard_normal(200) * 10.0 ** rng.integers(-30, 30, 200), [2.0 ** -113, 3e38]]):
        bits = int(np.float32(abs(x)).view(np.uint32))
        s = 2.0 ** (tcgemm.split_scale(bits) - 127)
        assert 2.0 ** 14 <= abs(np.float32(x)) * s < 2.0 ** 15
    assert tcgemm.split_scale(int(np.float32(1e-38).view(np.uint32))) == 254
    for bits in (0, 1, 0x7F800000, 0x7FC00000):
        assert 1 <= tcgemm.split_scale(bits) <= 254


def test_f16_split_is_fp32_accurate_at_any_scale_and_hi_alone_is_not():
    """x s = hi + lo in FP16 halves (22 significant bits), three products a term: as accurate as
    an FP32 sum at a ResNet channel count, whatever the operands' magnitude; hi*hi alone is not."""
    rng = _rng("f16 split")
    a, b = rng.standard_normal((2, 512, 4096)).astype(np.float32)
    exact = (a.astype(np.float64) * b).sum(0)
    rel = lambda y: np.linalg.norm(y - exact) / np.linalg.norm(exact)
    for k in (1.0, 1e4, 1e-4):
        sa, sb = (2.0 ** (tcgemm.split_scale(int(np.float32(np.abs(t * k).max()).view(np.uint32))) - 127) for t in (a, b))
        parts = []
        for t, sc in ((a * np.float32(k), sa), (b * np.float32(k), sb)):
            x = (t * np.float32(sc)).astype(np.float32)
            hi = x.astype(np.float16).astype(np.float64)
            parts.append((hi, (x - hi).astype(np.float16).astype(np.float64), sc))
        (ha, la, sa), (hb, lb, sb) = parts
        three = (ha * hb + la * hb + ha * lb).sum(0) / (sa * sb * k * k)
        assert rel(three) < 1e-6, k
    one = (a.astype(np.float16).astype(np.float64) * b.astype(np.float16)).sum(0)
    assert rel(one) > 1e-4


# ---- on the GPU -----------------------------------------------------------------------------------
def _skip_unless_sm90():
    """Skips the test unless an sm_90 GPU is here (the tensor-core GEMMs are generated for it)."""
    from sassas.load import gpu_available
    ok, why = gpu_available()
    if not ok:
        pytest.skip(f"no GPU: {why}")
    from kernels_sass.winograd import api
    if api.arch() != "sm_90":
        pytest.skip(f"the tensor-core GEMM is generated for sm_90; this GPU is {api.arch()}")


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [Shape(33, 20, 9, 11, 70), Shape(64, 512, 7, 7, 512), Shape(1, 3, 1, 2, 5),
                                   Shape(32, 256, 14, 14, 256)], ids=str)
def test_f4tc_conv2d_on_the_gpu(shape):
    _skip_unless_sm90()
    from sassas.load import DeviceBuffer
    from kernels_sass.winograd import conv2d
    rng = _rng(f"gpu{shape}")
    x = rng.standard_normal((shape.N, shape.C, shape.H, shape.W)).astype(np.float32)
    w = rng.standard_normal((shape.K, shape.C, 3, 3)).astype(np.float32)
    out = DeviceBuffer.from_numpy(np.full((shape.N, shape.K, shape.H, shape.W), np.nan, np.float32))
    conv2d(DeviceBuffer.from_numpy(x), DeviceBuffer.from_numpy(w), "sass", out=out, algo="f4tc")
    got = out.to_numpy()
    want = ref.direct_conv2d(x, w)
    assert not np.isnan(got).any()
    assert np.linalg.norm(got - want) / np.linalg.norm(want) <= 1e-5


@pytest.mark.gpu
@pytest.mark.parametrize("shape,scale", [(Shape(33, 20, 9, 11, 70), 1.0), (Shape(64, 512, 7, 7, 512), 1e4),
                                         (Shape(32, 256, 14, 14, 256), 1e-4)], ids=str)
def test_f4tc_in_fp16_halves_on_the_gpu(shape, scale):
    """f4tc's path with the FP16 split (the scales from max |w| and max |V|): FP32 accuracy
    at any magnitude, NaN-poisoned output."""
    _skip_unless_sm90()
    from sassas.load import DeviceBuffer
    from kernels_sass.winograd import api
    from kernels_sass.winograd.device import Lib
    rng = _rng(f"gpu f16 {shape}")
    x = (rng.standard_normal((shape.N, shape.C, shape.H, shape.W)) * scale).astype(np.float32)
    w = (rng.standard_normal((shape.K, shape.C, 3, 3)) * scale).astype(np.float32)
    xd, wd = DeviceBuffer.from_numpy(x), DeviceBuffer.from_numpy(w)
    out = DeviceBuffer.from_numpy(np.full((shape.N, shape.K, shape.H, shape.W), np.nan, np.float32))
    p = f4.Plan(shape, f4.plan(shape, api.sm_count(), tc=True).parts, tcgemm.F16)
    f4.conv("sass", xd, wd, out, p, "NCHW", api.Workspace(), Lib(xd))
    got = out.to_numpy()
    want = ref.direct_conv2d(x.astype(np.float64), w.astype(np.float64))
    assert not np.isnan(got).any()
    assert np.linalg.norm(got - want) / np.linalg.norm(want) <= 1e-5


def test_the_wgmma_peak_kernel_is_hgmma_tf32_and_sassas_rebuilds_it():
    """mma-peak's wgmma kernel (sm_90a, NVRTC): its loop is HGMMA.64x256x8.F32.TF32, 8 to a
    wait, and `sassas disasm` -> `sassas asm` gives its cubin's code back byte for byte."""
    from kernels_sass.winograd import cuda
    from kernels_sass.winograd.bench import wgmma_peak_source
    import sassas
    from sassas.disasm import disassemble
    from sassas.elf import read_cubin
    ok, why = cuda.nvrtc_available()
    if not ok:
        pytest.skip(why)
    try:
        data = cuda._nvrtc_compile(wgmma_peak_source(), "sm_90a", cuda.OPTIONS, "tf32_wgmma_peak.cu")
    except cuda.CompilerMissing as e:
        pytest.skip(str(e))
    text = disassemble(data)
    assert text.count("HGMMA.64x256x8.F32.TF32") == 40 and text.count("WARPGROUP.DEPBAR.LE gsb0, 0x0") == 5
    again = sassas.assemble(text, "sm_90a", "tf32_wgmma_peak.sass")
    code = lambda cubin: {k.name: k.code for k in read_cubin(cubin).kernels}
    assert code(again.data) == code(data)


def test_the_wgmma_gemm_variants_compile_to_unserialized_hgmma():
    """wgmma-gemm's kernels (sm_90a, NVRTC): 3 HGMMA.64x128x8.F32.TF32 a k-step, wgmma's A from
    registers, and ptxas keeps them in flight (a wait a group, not one an HGMMA: it serializes
    them where the registers do not fit, as with two fragment sets under 128 registers)."""
    from kernels_sass.winograd import cuda, wggemm
    from sassas.disasm import disassemble
    ok, why = cuda.nvrtc_available()
    if not ok:
        pytest.skip(why)
    for tag, c in wggemm.VARIANTS.items():
        try:
            text = disassemble(cuda._nvrtc_compile(wggemm.source(c), "sm_90a", cuda.OPTIONS, "wggemm.cu"))
        except cuda.CompilerMissing as e:
            pytest.skip(str(e))
        hgmma = len(re.findall(r"HGMMA\.64x128x8\.F32\.TF32 R\d+, R\d+, gdesc", text))
        waits = text.count("WARPGROUP.DEPBAR")
        assert hgmma and hgmma % 6 == 0 and waits <= hgmma // 3, (tag, hgmma, waits)
