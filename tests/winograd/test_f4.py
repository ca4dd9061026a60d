"""Winograd F(4x4,3x3), non-fused (kernels_sass.winograd.f4): the float64 math, the SASS batched
GEMM of gemmgen (assembly, hazards, NVIDIA's disassembler, the CPU simulator), the split plan,
and on a GPU the whole path through conv2d."""
from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest

from kernels_sass.winograd import cubins, f4, gemmgen, sassgen, sim
from kernels_sass.winograd import reference as ref
from kernels_sass.winograd.gemmgen import GemmShape
from kernels_sass.winograd.plan import Shape, Unsupported


# ---- the math (float64, CPU) ------------------------------------------------------------------
def test_f4_matrices_are_the_f43_algorithm():
    # F(4,3): A^T [(G g) * (B^T d)] is the correlation of d (6) with g (3)
    rng = np.random.default_rng(2)
    for _ in range(20):
        d, g = rng.standard_normal(6), rng.standard_normal(3)
        want = np.array([d[i:i + 3] @ g for i in range(4)])
        assert np.allclose(ref.AT4 @ ((ref.G4 @ g) * (ref.BT4 @ d)), want, rtol=0, atol=1e-13)


@pytest.mark.parametrize("n,c,h,w,k", [(2, 3, 5, 7, 4), (1, 8, 6, 6, 5), (3, 2, 1, 1, 2), (2, 4, 9, 9, 3),
                                       (1, 5, 8, 3, 7)])
def test_f4_winograd_equals_direct_float64(n, c, h, w, k):
    rng = np.random.default_rng(n * 1000 + c * 100 + h * 10 + w)
    x, wt = rng.standard_normal((n, c, h, w)), rng.standard_normal((k, c, 3, 3))
    a, b = ref.winograd_conv2d(x, wt, 4), ref.direct_conv2d(x, wt)
    assert a.shape == (n, k, h, w)
    assert np.linalg.norm(a - b) / np.linalg.norm(b) < 1e-14


# ---- the generated GEMM ----------------------------------------------------------------------------
GEMMS = [GemmShape(16, 128, 128), GemmShape(512, 512, 512), GemmShape(512, 512, 384, 2), GemmShape(64, 256, 4736, 4)]


@pytest.mark.parametrize("g", GEMMS, ids=str)
def test_gemm_assembles_without_hazards(g):
    import sassas
    from sassas.elf import read_cubin
    text = gemmgen.generate(g)
    cubin = sassas.assemble(text, "sm_90", filename="gemm.sass")
    assert cubins.hazards(cubin.program) == []
    info = read_cubin(cubin.data).kernel(gemmgen.kernel_name(g))
    assert info.registers == gemmgen.OPTIONS.registers() == 168      # three blocks of 128 threads an SM
    assert gemmgen.OPTIONS.blocks_per_sm() == 3 and gemmgen.OPTIONS.threads == 128
    assert [p.size for p in info.params] == [8, 8, 8]
    # the loop: 1 iteration of 8 channels, 128 FFMA and 6 LDS.128 a channel, 4 copies, and 14
    # instructions of control in all: the copies' group, DEPBAR, BAR, two offsets, three stage
    # XORs (two uniform), the counter, the branch
    loop = text[text.index("LOOP:"):text.index("BRA LOOP")]
    assert len(re.findall(r"\bFFMA\b", loop)) == 1024
    assert len(re.findall(r"\bLDS\.128\b", loop)) == 48
    assert len(re.findall(r"\bLDGSTS\b", loop)) == 4
    assert len(re.findall(r";", loop)) == 1024 + 48 + 4 + 9


EIGHT = gemmgen.GemmOptions(tile_rows=8, a_sets=2, unroll=2)        # the 8x8 tile


@pytest.mark.parametrize("o", [gemmgen.GemmOptions(depbar_yield=False), gemmgen.GemmOptions(wait_all=True),
                               gemmgen.GemmOptions(reuse=False), gemmgen.GemmOptions(a_sets=2),
                               gemmgen.GemmOptions(lane_map="2x2"), gemmgen.GemmOptions(unroll=2),
                               gemmgen.GemmOptions(unroll=4), EIGHT, replace(EIGHT, unroll=1),
                               replace(EIGHT, lds_gap=4), gemmgen.GemmOptions(skip="copies"),
                               gemmgen.GemmOptions(skip="both")],
                         ids=lambda o: o.tag() or "default")
def test_gemm_options_assemble(o):
    gemmgen.build(GemmShape(32, 128, 128), o, cache=False)


@pytest.mark.parametrize("o", [gemmgen.OPTIONS, EIGHT], ids=["default", "8x8"])
def test_gemm_copies_are_spaced_as_ptxas_spaces_them(o):
    """The H100 race of the first version: a DEPBAR.LE with a BAR 2 cycles after it, copies 2
    cycles apart. Now the DEPBAR stalls 4 and comes 8 FFMA slots before the BAR."""
    body = gemmgen.Generator(GemmShape(32, 128, 128), o).loop_body()
    texts = [op.text for op in body]
    for i, t in enumerate(texts):
        if t.startswith("DEPBAR"):
            assert body[i].stall >= 4
            assert texts.index("BAR.SYNC.DEFER_BLOCKING 0x0", i) - i >= gemmgen.DEPBAR_LEAD
        if t == "LDGDEPBAR":
            last_copy = max(j for j in range(i) if texts[j].startswith("LDGSTS"))
            assert sum(max(op.stall, 1) for op in body[last_copy:i]) >= gemmgen.COPY_GAP


def test_nvdisasm_reads_the_gemm_as_written():
    from sassas.learn import oracle
    why = oracle.missing_tools("sm_90", ("nvdisasm",))
    if why:
        pytest.skip(why)
    for g in GEMMS[:3]:
        text = gemmgen.generate(g)
        assert cubins.disasm_mismatches(text, gemmgen.build(g, cache=False)) == []


def test_unsupported_gemms_are_refused():
    for g in [GemmShape(12, 128, 128), GemmShape(16, 100, 128), GemmShape(16, 128, 0), GemmShape(24, 128, 128, 2),
              GemmShape(16, 128, 1 << 20)]:
        with pytest.raises(Unsupported):
            gemmgen.Generator(g)
    with pytest.raises(Unsupported):             # 3 iterations, a body of 2
        gemmgen.Generator(GemmShape(24, 128, 128), EIGHT)


def _sim_gemm(g: GemmShape, o: gemmgen.GemmOptions, seed: int = 0):
    rng = np.random.default_rng(seed)
    u = rng.standard_normal((g.operand_rows, g.K)).astype(np.float32)
    v = rng.standard_normal((g.operand_rows, g.T)).astype(np.float32)
    m = np.full((g.parts * gemmgen.E, g.K, g.T), np.nan, np.float32)
    out, mach = sim.simulate(gemmgen.generate(g, o), g.grid(), {"u": u, "v": v, "m": m}, list(gemmgen.PARAMS),
                             gemmgen.SMEM_BYTES, o.threads)
    return u, v, out["m"].view(np.float32).reshape(g.parts, gemmgen.E, g.K, g.T), mach


@pytest.mark.parametrize("g,o", [(GemmShape(32, 128, 128), gemmgen.GemmOptions()),
                                 (GemmShape(32, 128, 256, 2), gemmgen.GemmOptions()),
                                 (GemmShape(8, 128, 128), gemmgen.GemmOptions()),       # one body: CNT 0
                                 (GemmShape(24, 128, 128), gemmgen.GemmOptions(lane_map="2x2")),
                                 (GemmShape(32, 128, 128, 2), gemmgen.GemmOptions(a_sets=2, unroll=2)),
                                 (GemmShape(64, 128, 128), gemmgen.GemmOptions(unroll=4)),
                                 (GemmShape(32, 128, 256), EIGHT),
                                 (GemmShape(32, 128, 256, 2), replace(EIGHT, lane_map="2x2")),
                                 (GemmShape(48, 128, 128), replace(EIGHT, unroll=1)),
                                 (GemmShape(32, 128, 128), replace(EIGHT, lds_gap=4, a_sets=1))], ids=str)
def test_gemm_in_the_simulator_matches_float64(g, o):
    u, v, got, mach = _sim_gemm(g, o)
    want = ref.f4_gemm(u, v, g.C, g.parts)
    assert not np.isnan(got).any()
    assert np.abs(got - want).max() / np.abs(want).max() < 1e-6
    assert mach.race_log == [] and mach.undefined_log == []


def test_f4_path_in_the_simulator_matches_direct():
    """The GPU layouts of U, V and M (reference.f4_operands / f4_output, as winograd.cu's
    transforms write and read them) around the simulated SASS GEMM: a convolution."""
    s = Shape(5, 7, 6, 9, 3)
    p = f4.Plan(s)
    g = p.gemm
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((s.N, s.C, s.H, s.W)), rng.standard_normal((s.K, s.C, 3, 3))
    u, v = ref.f4_operands(x, w, g.C, g.K, g.T, gemmgen.PAD_ROWS)
    m = np.full((gemmgen.E, g.K, g.T), np.nan, np.float32)
    out, mach = sim.simulate(gemmgen.generate(g), g.grid(), {"u": u, "v": v, "m": m}, list(gemmgen.PARAMS),
                             gemmgen.SMEM_BYTES, gemmgen.OPTIONS.threads)
    got = ref.f4_output(out["m"].view(np.float32).reshape(1, gemmgen.E, g.K, g.T), s.N, s.H, s.W, s.K)
    want = ref.direct_conv2d(x, w)
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 1e-5


def test_gemm_lds_spacing_and_measurement_variants():
    """lds_gap spreads a channel's LDS.128 over it (after the BAR no closer than LDS_AHEAD slots
    to their first FFMA); skip= drops exactly the copies or the shared loads from the loop."""
    def loop_of(o):
        body = gemmgen.Generator(GemmShape(32, 128, 128), o).loop_body()
        return [op.text for op in body]

    for gap in (4, 15):
        texts = loop_of(replace(EIGHT, lds_gap=gap))
        ffma = [i for i, t in enumerate(texts) if t.startswith("FFMA")]
        lds = [i for i, t in enumerate(texts) if t.startswith("LDS")]
        by_channel = {}
        for i in lds:                          # the FFMA slot each LDS comes before
            slot = sum(1 for f in ffma if f < i)
            by_channel.setdefault(slot // 64, []).append(slot % 64)
        after_bar = min(gap, (64 - 3 - gemmgen.MIN_DIST - gemmgen.LDS_AHEAD) // 3)
        for ch, where in by_channel.items():
            if ch % 8 == 7:                    # the next stage's channel 0, after the BAR
                assert where == [3 + gemmgen.MIN_DIST + after_bar * m for m in range(4)]
            else:
                assert where == [2 + gap * m for m in range(4)]
            assert 64 - where[-1] >= gemmgen.LDS_AHEAD
    with pytest.raises(ValueError):
        gemmgen.Generator(GemmShape(32, 128, 128), replace(EIGHT, lds_gap=16))
    for o, lds in ((EIGHT, 64), (gemmgen.OPTIONS, 48)):
        base = loop_of(o)
        no_copies = loop_of(replace(o, skip="copies"))
        no_lds = loop_of(replace(o, skip="lds"))
        assert not any(t.startswith(("LDGSTS", "DEPBAR", "BAR", "LDGDEPBAR", "IADD3 R163", "IADD3 R164"))
                       for t in no_copies)
        assert sum(t.startswith("LDS") for t in no_copies) == sum(t.startswith("LDS") for t in base) == lds
        assert not any(t.startswith("LDS") for t in no_lds)
        assert sum(t.startswith("FFMA") for t in no_copies) == sum(t.startswith("FFMA") for t in no_lds) == 1024


def test_one_a_set_loads_each_row_quad_after_its_last_use():
    """a_sets=1: row quad q of the next channel is loaded 2 FFMA slots after quad q's last FFMA
    of this channel reads it, and its first FFMA waits on the quad's scoreboard; the B set of
    the next channel alternates; channel 7's BAR waits for the A loads of channel 7."""
    body = gemmgen.Generator(GemmShape(32, 128, 128)).loop_body()
    r = gemmgen.Regs(16, 1)
    slot, last_read, loaded = 0, {}, []
    for op in body:
        t = op.text
        if t.startswith("FFMA"):
            a = int(re.match(r"FFMA R\d+, R(\d+)", t).group(1))
            q = (a - r.acc) // 4
            if slot % 32 == 0:
                assert op.wait >> gemmgen.A_SB[q // 2] & 1
            last_read[q] = slot
            slot += 1
        elif t.startswith("LDS.128") and int(t.split()[1][1:-1]) < r.RB(0, 0):
            q = (int(t.split()[1][1:-1]) - r.acc) // 4
            loaded.append((q, slot))
            assert op.wb == gemmgen.A_SB[q // 2]
            assert slot - last_read.get(q, -1) == 3     # before FFMA 2 after the quad's last FFMA (-1: the body's end)
        elif t.startswith("BAR"):
            assert op.wait == 1 << 1 | 1 << 4 | 1 << 5 and slot == 7 * 128 + gemmgen.A1_BAR
    assert len(loaded) == 32 and slot == 1024


def test_loop_command_parts_without_a_gpu():
    """The `loop` command's whole-wave GEMM and its reading of ncu's CSV."""
    from kernels_sass.winograd.ncu import parse_ncu_csv, steady_shape
    g = steady_shape(132, 512)
    assert (g.C, g.K, g.T, g.parts) == (512, 256, 1408, 1) and g.blocks() == 3 * 2 * 132
    assert steady_shape(132, 512, 3) == g                    # 2 waves of 3 blocks an SM, too
    assert steady_shape(114, 512).blocks() % (2 * 114) == 0
    assert steady_shape(114, 512, 6).blocks() % (6 * 114) == 0
    from kernels_sass.winograd.workloads import EIGHT_BY_EIGHT, gemm_options
    assert gemm_options(EIGHT_BY_EIGHT) == gemmgen.EIGHT_BY_EIGHT and gemm_options("") == gemmgen.OPTIONS
    text = "\n".join([
        "==PROF== Connected to process 1",
        '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
        '"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"',
        '"0","1","python3","127.0.0.1","wino4_gemm_c512","1","7","(256, 1, 1)","(11, 2, 36)","0","9.0",'
        '"Command line profiler metrics","smsp__cycles_active.sum","cycle","247,679,902"',
        '"0","1","python3","127.0.0.1","wino4_gemm_c512","1","7","(256, 1, 1)","(11, 2, 36)","0","9.0",'
        '"Command line profiler metrics","smsp__pcsamp_sample_count","","30255"',
        '"0","1","python3","127.0.0.1","wino4_gemm_c512","1","7","(256, 1, 1)","(11, 2, 36)","0","9.0",'
        '"Command line profiler metrics","device__attribute_display_name","","NVIDIA H200"',
    ])
    assert parse_ncu_csv(text) == {"smsp__cycles_active.sum": 247679902.0, "smsp__pcsamp_sample_count": 30255.0}
    assert parse_ncu_csv("==ERROR== no kernels were profiled") == {}


# ---- the plan and the choice of algorithm ----------------------------------------------------------
def test_plan_pads_and_splits():
    p = f4.plan(Shape(128, 512, 7, 7, 512), 132, parts=1)
    assert (p.s.TH4, p.s.TW4, p.T) == (2, 2, 512)
    assert p.gemm == GemmShape(512, 512, 512, 1)
    # the model's picks (H200 bench, 2026-11-26): Conv5/N32's 144 blocks on 132 SMs and Conv5/N64's
    # 288 in 2 parts; Conv5/N128 (576 blocks) and Conv3/N128 (3528) not split
    assert f4.plan(Shape(32, 512, 7, 7, 512), 132).parts == 2
    assert f4.plan(Shape(64, 512, 7, 7, 512), 132).parts == 2
    assert f4.plan(Shape(128, 512, 7, 7, 512), 132).parts == 1
    assert f4.plan(Shape(128, 128, 28, 28, 128), 132).parts == 1
    # the variant: the 16x8 tile (3 blocks an SM), but the 8x8 one (2) where a single wave of the
    # 16x8 tile would leave lone blocks behind (Conv3/N32: 468 blocks, 396 a wave; H200: 19%)
    assert f4.plan(Shape(32, 128, 28, 28, 128), 132).options == gemmgen.EIGHT_BY_EIGHT
    for s in (Shape(64, 128, 28, 28, 128), Shape(96, 256, 14, 14, 256), Shape(96, 512, 7, 7, 512)):
        assert f4.plan(s, 132).options == gemmgen.OPTIONS
    assert f4.plan(Shape(32, 128, 28, 28, 128), 132, parts=2).parts == 2
    odd = f4.plan(Shape(33, 20, 9, 11, 70), 132).gemm
    assert (odd.C, odd.K, odd.T) == (24, 128, 384)            # C to a multiple of 8 (a body of one iteration)
    assert f4.plan(Shape(8, 512, 7, 7, 512), 132, parts=4).gemm.parts == 4
    assert p.buffers()["m4"] == (36, 512, 512)


def test_auto_on_gpus_without_the_sm90_kernels_takes_f4_for_more_channels():
    """Between F(2x2,3x3) and F(4x4,3x3) with the FFMA GEMM (an sm_80 GPU): the cost model takes
    F(4x4,3x3) on Conv3 and Conv5 from N = 64 and Conv4 from N = 96 in either layout (measured
    within 5% of the faster: tests/winograd/test_cost.py), F(2x2,3x3) on Conv2's 64 channels."""
    from dataclasses import replace
    from kernels_sass.winograd import api, cost
    from kernels_sass.winograd.workloads import resnet_configs
    sm80 = replace(cost.H100, arch="sm_80")
    for layout in ("CHWN", "NCHW"):
        picks = {name: api.choose_algo(s, layout, sm80) for name, s in resnet_configs()}
        f4 = {name for name, algo in picks.items() if algo == "f4"}
        assert f4 >= {f"Conv{layer}/N{n}" for layer in (3, 5) for n in (64, 96, 128)} | \
            {f"Conv4/N{n}" for n in (96, 128)}, layout
        assert not any(name.startswith("Conv2") for name in f4)
    assert api.choose_algo(Shape(8, 512, 56, 56, 64), "CHWN", sm80) == "f4"


# ---- on the GPU -----------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("impl", ["sass", "cuda"])
@pytest.mark.parametrize("shape", [Shape(33, 20, 9, 11, 70), Shape(64, 512, 7, 7, 512), Shape(1, 3, 1, 2, 5)], ids=str)
def test_f4_conv2d_on_the_gpu(impl, shape):
    from sassas.load import DeviceBuffer, gpu_available
    ok, why = gpu_available()
    if not ok:
        pytest.skip(f"no GPU: {why}")
    from kernels_sass.winograd import conv2d
    rng = np.random.default_rng()
    x = rng.standard_normal((shape.N, shape.C, shape.H, shape.W)).astype(np.float32)
    w = rng.standard_normal((shape.K, shape.C, 3, 3)).astype(np.float32)
    out = DeviceBuffer.from_numpy(np.full((shape.N, shape.K, shape.H, shape.W), np.nan, np.float32))
    conv2d(DeviceBuffer.from_numpy(x), DeviceBuffer.from_numpy(w), impl, out=out, algo="f4")
    got = out.to_numpy()
    want = ref.direct_conv2d(x, w)
    assert not np.isnan(got).any()
    assert np.linalg.norm(got - want) / np.linalg.norm(want) <= 1e-5
