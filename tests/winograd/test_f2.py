"""kernels_sass.winograd: the float64 math, the CUDA-C sources, the generated SASS (assembly,
hazards, NVIDIA's disassembler, the CPU simulator), and on a GPU the kernels themselves."""
from __future__ import annotations

import re

import numpy as np
import pytest

from kernels_sass.winograd import reference as ref
from kernels_sass.winograd import cubins, plan, sassgen
from kernels_sass.winograd.plan import Options, Shape


# ---- the math (float64, CPU) ------------------------------------------------------------------
def test_transform_matrices_are_the_f23_algorithm():
    # F(2,3): A^T [(G g) * (B^T d)] is the correlation of d (4) with g (3), exactly.
    rng = np.random.default_rng(1)
    for _ in range(20):
        d, g = rng.standard_normal(4), rng.standard_normal(3)
        want = np.array([d[0:3] @ g, d[1:4] @ g])
        got = ref.AT @ ((ref.G @ g) * (ref.BT @ d))
        assert np.allclose(got, want, rtol=0, atol=1e-13)
    # entries are dyadic: exact in binary floating point
    for m in (ref.G, ref.BT, ref.AT):
        assert np.all(m * 2 == np.round(m * 2))


@pytest.mark.parametrize("n,c,h,w,k", [(2, 3, 5, 7, 4), (1, 8, 6, 6, 5), (3, 2, 1, 1, 2), (2, 4, 2, 9, 3),
                                       (1, 5, 8, 3, 7)])
def test_winograd_equals_direct_float64(n, c, h, w, k):
    rng = np.random.default_rng(n * 1000 + c * 100 + h * 10 + w)
    x = rng.standard_normal((n, c, h, w))
    wt = rng.standard_normal((k, c, 3, 3))
    a = ref.winograd_conv2d(x, wt)
    b = ref.direct_conv2d(x, wt)
    assert a.shape == (n, k, h, w)
    assert np.linalg.norm(a - b) / np.linalg.norm(b) < 1e-14


def test_direct_matches_definition():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 2, 4, 5))
    w = rng.standard_normal((3, 2, 3, 3))
    y = ref.direct_conv2d(x, w)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    for k in range(3):
        for i in range(4):
            for j in range(5):
                assert np.isclose(y[0, k, i, j], np.sum(xp[0, :, i:i + 3, j:j + 3] * w[k]))


# ---- CUDA-C sources ---------------------------------------------------------------------------------
def test_cuda_sources_compile_with_nvrtc_for_sm90():
    from kernels_sass.winograd import cuda
    ok, why = cuda.nvrtc_available()
    if not ok:
        pytest.skip(why)
    try:
        data = cuda._nvrtc_compile(cuda.source(), "sm_90", cuda.OPTIONS, "winograd.cu")
    except cuda.CompilerMissing as e:
        pytest.skip(str(e))
    from sassas.elf import read_cubin
    names = {k.name for k in read_cubin(data).kernels}
    assert {"winograd_2x2_3x3", "filter_transform", "transpose2d", "direct_conv_f32", "direct_conv_f64",
            "f4_filter_transform", "f4_input_transform", "f4_gemm", "f4_output_transform", "f4_input_transform_nchw",
            "f4_output_transform_nchw"} <= names


# ---- the generated SASS ----------------------------------------------------------------------------
SHAPES = [Shape(64, 64, 56, 56, 64), Shape(33, 20, 9, 11, 70), Shape(1, 1, 1, 1, 1), Shape(128, 512, 7, 7, 512)]


@pytest.mark.parametrize("shape,opts", [(s, Options()) for s in SHAPES] + [(SHAPES[1], Options(split=2, tail=120))],
                         ids=str)
def test_sass_assembles_for_sm90_without_hazards(shape, opts):
    import sassas
    text = sassgen.generate(shape, opts)
    cubin = sassas.assemble(text, "sm_90", filename="winograd.sass")
    assert sassgen.kernel_name(shape, opts) in cubin.kernel_names
    assert cubins.hazards(cubin.program) == []
    from sassas.elf import read_cubin
    info = read_cubin(cubin.data).kernel(sassgen.kernel_name(shape, opts))
    assert info.registers <= 255
    # 255 registers allocated give R0..R252 (2 kept back): a MOV to R253 is an illegal
    # instruction on the H100
    assert max(int(r) for r in re.findall(r"\bR(\d+)\b", text)) <= 252
    assert [p.size for p in info.params] == [8, 8, 8]


@pytest.mark.parametrize("opts", [Options(yield_mode="every7", ldg_spacing=8, sts_spacing=2),
                                  Options(yield_mode="every8"), Options(yield_mode="none", transform_step=5),
                                  Options(cluster=1), Options(cluster=2, ldg_spacing=5, sts_spacing=3),
                                  Options(reuse_slots=False), Options(ldgu_spacing=8), Options(split=2, tail=10),
                                  Options(ldgsts=False), Options(bank_slots=False)],
                         ids=lambda o: o.tag())
def test_sass_switches_assemble(opts):
    text = sassgen.generate(Shape(32, 16, 14, 14, 64), opts)
    cubins.assemble(text)        # raises on hazards


def test_transform_fadds_read_both_register_banks():
    """bank_slots: every FADD of the input transform (prologue and loop) reads its two register
    sources from the two banks; the output transform shares a bank in one FADD of four in its
    first pass (three rows pair up pairwise there), never in the second. In order, most share."""
    def same_bank(text):
        pairs = re.findall(r"FADD R\d+, -?R(\d+), -?R(\d+)", text)
        return len(pairs), sum(int(a) % 2 == int(b) % 2 for a, b in pairs)
    shape = Shape(64, 64, 56, 56, 64)
    gen = sassgen.Generator(shape, Options())
    assert same_bank("\n".join(op.text for op in gen.loop_body())) == (32, 0)
    assert same_bank("\n".join(gen.tile_start().lines())) == (32, 0)
    total, shared = same_bank(sassgen.generate(shape, Options()))
    assert (total, shared) == (256, 2 * 4 * 4)       # 2 rounds x 4 filters x 4 columns
    assert same_bank(sassgen.generate(shape, Options(bank_slots=False)))[1] > 200


def test_nvdisasm_reads_the_sass_as_written():
    from sassas.learn import oracle
    why = oracle.missing_tools("sm_90", ("nvdisasm",))
    if why:
        pytest.skip(why)
    for shape, opts in [(s, Options()) for s in SHAPES[:2]] + [(Shape(32, 256, 14, 14, 256), Options(split=2, tail=64))]:
        text = sassgen.generate(shape, opts)      # (the last: split-C, REDG.E.ADD.F32.FTZ.RN)
        assert cubins.disasm_mismatches(text, cubins.assemble(text)) == []


def test_unsupported_shapes_are_refused():
    with pytest.raises(plan.Unsupported):
        sassgen.generate(Shape(1024, 1024, 64, 64, 64))   # input of 16 GiB: offsets past 32 bits


def _simulate(shape, seed=0, opts=Options(), sms=3, text=None):
    """Run the generated kernel (or `text`) in the simulator on a GPU of `sms` multiprocessors
    (a persistent block then computes several tiles)."""
    from kernels_sass.winograd import sim
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((shape.N, shape.C, shape.H, shape.W)).astype(np.float32)
    w = rng.standard_normal((shape.K, shape.C, 3, 3)).astype(np.float32)
    u = ref.fx_layout(w, shape.Kpad, shape.U_ROWS)
    y = np.full((shape.K, shape.H, shape.W, shape.N), np.nan, np.float32)
    opts = plan.resolve(shape, opts, sms)
    sp = plan.split_of(shape, opts)
    if sp.active:       # what the filter transform does on the GPU: zero the split tiles' outputs
        ref.zero_split_tiles(y, shape, sp.whole)
    text = text or sassgen.generate(shape, opts)
    out, m = sim.simulate(text, plan.launch_grid(shape, opts, sms), {"x": ref.to_chwn(x), "u": u, "y": y}, list(sassgen.PARAMS),
                          sassgen.SMEM_BYTES)
    got = ref.from_khwn(out["y"].view(np.float32).reshape(shape.K, shape.H, shape.W, shape.N))
    want = ref.direct_conv2d(x, w)
    return got, want, m


@pytest.mark.parametrize("shape", [Shape(5, 3, 3, 4, 2), Shape(40, 12, 5, 6, 70), Shape(3, 9, 2, 9, 65),
                                   Shape(1, 1, 1, 1, 1)], ids=str)
def test_sass_in_the_simulator_matches_float64(shape):
    got, want, m = _simulate(shape)
    assert not np.isnan(got).any(), "outputs left unwritten"
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 1e-6
    assert m.race_log == []
    assert m.undefined_log == []


@pytest.mark.parametrize("opts", [Options(cluster=4), Options(persistent=False), Options(overlap=False),
                                  Options(bank_slots=False), Options(ldgsts=False)],
                         ids=lambda o: o.tag())
def test_switches_in_the_simulator_match_float64(opts):
    """Clustered inserted work, one block a tile, and the next tile's loads issued at its start
    (not in the epilogue before it) compute the same."""
    shape = Shape(40, 12, 5, 6, 70)
    got, want, m = _simulate(shape, opts=opts)
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 1e-6
    assert m.race_log == [] and m.undefined_log == []


@pytest.mark.parametrize("shape,opts", [
    (Shape(40, 24, 5, 6, 70), Options(split=3, tail=5)),      # 3 parts of one block each, 5 of 36 tiles
    (Shape(33, 20, 6, 3, 64), Options(split=2, tail=12)),     # every tile split, the last part shorter
    (Shape(8, 48, 4, 4, 16), Options())],                     # the model's pick for 3 SMs: 4 tiles, the last in 3 parts
    ids=str)
def test_split_in_the_simulator_matches_float64(shape, opts):
    """Split-C: the parts of the last tiles add their sums into y (REDG); every output is
    written (the split tiles' outputs start at zero, the rest at NaN)."""
    sp = plan.split_of(shape, plan.resolve(shape, opts, 3))
    assert sp.active and sp.units > sp.tiles
    got, want, m = _simulate(shape, opts=opts)
    assert not np.isnan(got).any()
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 1e-6
    assert m.race_log == [] and m.undefined_log == []


def test_split_plan_fills_the_last_turn():
    """Conv4/N32 on 132 SMs: 196 tiles, the 64 of the second turn split in two; Conv4/N128
    (784 tiles, 5.94 turns) is left whole."""
    sp = plan.split_plan(Shape(32, 256, 14, 14, 256), 132)
    assert (sp.parts, sp.tail, sp.units) == (2, 64, 260)
    assert not plan.split_plan(Shape(128, 256, 14, 14, 256), 132).active
    assert sp.modelled(132) < 0.8 * plan.Split(196, 32).modelled(132)


def test_simulator_finds_a_missing_barrier():
    shape = Shape(8, 16, 3, 3, 8)
    lines = sassgen.generate(shape).splitlines()
    loop = lines.index("LOOP:")
    bar = next(i for i, l in enumerate(lines) if i > loop and "BAR.SYNC" in l)
    _, _, m = _simulate(shape, text="\n".join(lines[:bar] + lines[bar + 1:]))
    assert m.race_log


# ---- on the GPU -----------------------------------------------------------------------------------
def _gpu():
    from sassas.load import gpu_available
    ok, why = gpu_available()
    if not ok:
        pytest.skip(f"no GPU: {why}")


@pytest.mark.gpu
@pytest.mark.parametrize("impl", ["sass", "cuda", "direct"])
@pytest.mark.parametrize("shape", [Shape(33, 20, 9, 11, 70), Shape(32, 64, 14, 14, 64), Shape(1, 3, 1, 2, 5)], ids=str)
def test_conv2d_on_the_gpu(impl, shape):
    _gpu()
    from sassas.load import DeviceBuffer
    from kernels_sass.winograd import conv2d
    rng = np.random.default_rng()
    x = rng.standard_normal((shape.N, shape.C, shape.H, shape.W)).astype(np.float32)
    w = rng.standard_normal((shape.K, shape.C, 3, 3)).astype(np.float32)
    out = DeviceBuffer.from_numpy(np.full((shape.N, shape.K, shape.H, shape.W), np.nan, np.float32))
    conv2d(DeviceBuffer.from_numpy(x), DeviceBuffer.from_numpy(w), impl, out=out)
    got = out.to_numpy()
    want = ref.direct_conv2d(x, w)
    assert not np.isnan(got).any()
    assert np.linalg.norm(got - want) / np.linalg.norm(want) <= 1e-5


def test_report_renders_the_recorded_h100_run(capsys):
    # the bench/ablation JSON written on the H100 re-renders here (no GPU): schema kept in step
    import os
    from kernels_sass.winograd.__main__ import main
    here = os.path.join(os.path.dirname(__file__), "..", "..", "kernels_sass", "winograd", "results")
    assert main(["report", os.path.join(here, "h100_bench.json")]) == 0
    out = capsys.readouterr().out
    assert "geometric mean of sass/cudnn" in out and "Conv5/N128" in out
    assert main(["report", os.path.join(here, "h100_ablation.json")]) == 0
    assert "loop FFMA util" in capsys.readouterr().out
