"""The generated kernels on every arch sassas encodes (F(2x2,3x3) of sassgen, the F(4x4,3x3)
GEMM of gemmgen), on the CPU: the simulator's result against float64, sassas's hazard checker,
and NVIDIA's disassembler reading every instruction as generated. Only sm_90's kernels also run
on a GPU (tests/winograd/test_f2.py, test_f4.py, marked gpu).

Each arch gets the design sassgen.fit / gemmgen.fit choose for it (one shared-memory buffer
and no LDGSTS below 128 KiB a block; copies through registers without LDGSTS). The shapes and
data are drawn from a fresh seed each run, shown in the summary; SASSAS_FUZZ_SEED=N replays it."""
from __future__ import annotations

import os
import random
import re
from functools import lru_cache

import numpy as np
import pytest

from kernels_sass.winograd import cubins, f4, gemmgen, plan, sassgen, sim
from kernels_sass.winograd import reference as ref
from kernels_sass.winograd.plan import Options, Shape
from kernels_sass.winograd.target import ARCHS, target

SEED = int(os.environ.get("SASSAS_FUZZ_SEED") or random.randrange(1 << 32))
ALL = ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120")
SMS = 3         # the simulated GPU's multiprocessors: a persistent block takes several units

def _rng(name: str) -> random.Random:
    return random.Random(f"{SEED}-{name}")


@lru_cache(maxsize=None)
def f2_case() -> tuple[Shape, Options]:
    """A small random shape whose last tiles are split in two (both epilogues: STG and the
    reduction), resolved for SMS multiprocessors. (One block of filters and of images: more
    are the same code on every arch, tests/winograd/test_f2.py.)"""
    r = _rng("f2")
    s = Shape(r.randint(1, 32), r.randint(9, 24), r.randint(1, 6), r.randint(1, 6), r.randint(1, 64))
    return s, plan.resolve(s, Options(split=2, tail=r.randint(1, s.tiles)), SMS)


@lru_cache(maxsize=None)
def f2_kernel(arch: str):
    """(options, text, assembled cubin) of f2_case on arch."""
    import sassas
    s, o = f2_case()
    o = sassgen.fit(o, target(arch))
    text = sassgen.generate(s, o, arch)
    return o, text, sassas.assemble(text, arch, filename="winograd.sass")


@lru_cache(maxsize=None)
def f4_case() -> Shape:
    r = _rng("f4")
    return Shape(r.randint(1, 9), r.randint(1, 20), r.randint(1, 10), r.randint(1, 10), r.randint(1, 9))


def gemm_options(arch: str) -> list[gemmgen.GemmOptions]:
    """The default GEMM, and where the copies go through registers also the 8x8 tile (its
    256 threads copy one chunk of each operand, not two)."""
    t = target(arch)
    return [gemmgen.fit(o, t) for o in ([gemmgen.OPTIONS] + ([] if t.async_copy else [gemmgen.EIGHT_BY_EIGHT]))]


@lru_cache(maxsize=None)
def gemm_kernel(arch: str, o: gemmgen.GemmOptions):
    import sassas
    g = f4.Plan(f4_case(), 1, o).gemm
    text = gemmgen.generate(g, o, arch)
    return g, text, sassas.assemble(text, arch, filename="gemm.sass")


def _nvdisasm(arch: str):
    from sassas.learn import oracle
    why = oracle.missing_tools(arch, ("nvdisasm",))
    if why:
        pytest.skip(why)


# ---- F(2x2,3x3) -------------------------------------------------------------------------------
def test_the_designs_fit_each_arch():
    """Two 64 KiB buffers and LDGSTS where a block may have 128 KiB (sm_80, sm_90, sm_100); one
    buffer without LDGSTS on sm_86, sm_89, sm_120 (99 KiB) and sm_75 (64 KiB, and no LDGSTS:
    its GEMM copies through registers)."""
    want = {"sm_75": (1, False, False), "sm_80": (2, True, True), "sm_86": (1, False, True),
            "sm_89": (1, False, True), "sm_90": (2, True, True), "sm_100": (2, True, True),
            "sm_120": (1, False, True)}
    for arch in ALL:
        t = target(arch)
        o = sassgen.fit(Options(), t)
        assert (o.buffers, o.ldgsts, gemmgen.fit(gemmgen.OPTIONS, t).async_copy) == want[arch], arch
        assert sassgen.dynamic_smem(o, arch) <= t.max_smem
    assert sassgen.fit(Options(), target("sm_90")) == Options()
    assert sassgen.dynamic_smem(sassgen.fit(Options(), target("sm_75")), "sm_75") == 64 * 1024
    with pytest.raises(ValueError, match="shared memory"):
        sassgen.Generator(Shape(1, 1, 1, 1, 1), Options(ldgsts=False), "sm_86")     # not fitted: 128 KiB
    with pytest.raises(ValueError, match="LDGSTS"):
        sassgen.Generator(Shape(1, 1, 1, 1, 1), Options(), "sm_75")
    with pytest.raises(ValueError, match="LDGSTS"):
        gemmgen.Generator(gemmgen.GemmShape(16, 128, 128), gemmgen.OPTIONS, "sm_75")


@pytest.mark.parametrize("arch", ALL)
def test_f2_in_the_simulator_matches_float64(arch):
    s, _ = f2_case()
    o, text, _ = f2_kernel(arch)
    rng = np.random.default_rng(_rng("f2-data").randrange(1 << 63))
    x = rng.standard_normal((s.N, s.C, s.H, s.W)).astype(np.float32)
    w = rng.standard_normal((s.K, s.C, 3, 3)).astype(np.float32)
    y = np.full((s.K, s.H, s.W, s.N), np.nan, np.float32)
    sp = plan.split_of(s, o)
    assert sp.active
    ref.zero_split_tiles(y, s, sp.whole)
    out, m = sim.simulate(text, plan.launch_grid(s, o, SMS), {"x": ref.to_chwn(x), "u": ref.fx_layout(w, s.Kpad, s.U_ROWS),
                                                             "y": y}, list(sassgen.PARAMS), sassgen.dynamic_smem(o, arch),
                          arch=arch)
    got = ref.from_khwn(out["y"].view(np.float32).reshape(s.K, s.H, s.W, s.N))
    want = ref.direct_conv2d(x.astype(np.float64), w.astype(np.float64))
    assert not np.isnan(got).any(), f"{s} {o.tag()}: outputs left unwritten"
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 1e-6, f"{s} {o.tag()}"
    assert m.race_log == [] and m.undefined_log == []


@pytest.mark.parametrize("arch", ALL)
def test_f2_assembles_without_hazards(arch):
    from sassas.elf import read_cubin
    s, _ = f2_case()
    o, text, cubin = f2_kernel(arch)
    assert cubins.hazards(cubin.program) == [], f"{s} {o.tag()}"
    info = read_cubin(cubin.data).kernel(sassgen.kernel_name(s, o))
    assert [p.size for p in info.params] == [8, 8, 8]
    assert max(int(r) for r in re.findall(r"\bR(\d+)\b", text)) <= 252
    # what the arch has and has not
    assert ("LDGSTS" in text) == o.ldgsts and o.ldgsts <= target(arch).async_copy
    assert re.search(rf"\b{target(arch).reduce}\.E\.ADD\.F32", text)
    assert ("desc[UR4]" in text) == (target(arch).desc is not None)


@pytest.mark.parametrize("arch", ALL)
def test_f2_nvdisasm_reads_it_as_generated(arch):
    _nvdisasm(arch)
    _, text, cubin = f2_kernel(arch)
    assert cubins.disasm_mismatches(text, bytes(cubin.data), arch) == []


# ---- the F(4x4,3x3) GEMM ----------------------------------------------------------------------
def _gemm_params():
    return [pytest.param(a, o, id=f"{a}-{o.tag() or 'default'}") for a in ALL for o in gemm_options(a)]


@pytest.mark.parametrize("arch,o", _gemm_params())
def test_gemm_in_the_simulator_computes_the_convolution(arch, o):
    """The F(4x4,3x3) path with the simulated GEMM between the float64 transforms."""
    s = f4_case()
    g, text, _ = gemm_kernel(arch, o)
    rng = np.random.default_rng(_rng("f4-data").randrange(1 << 63))
    x, w = rng.standard_normal((s.N, s.C, s.H, s.W)), rng.standard_normal((s.K, s.C, 3, 3))
    u, v = ref.f4_operands(x, w, g.C, g.K, g.T, gemmgen.PAD_ROWS)
    m = np.full((gemmgen.E, g.K, g.T), np.nan, np.float32)
    out, mach = sim.simulate(text, g.grid(), {"u": u, "v": v, "m": m}, list(gemmgen.PARAMS), gemmgen.SMEM_BYTES,
                             o.threads, arch=arch)
    got = ref.f4_output(out["m"].view(np.float32).reshape(1, gemmgen.E, g.K, g.T), s.N, s.H, s.W, s.K)
    want = ref.direct_conv2d(x, w)
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 1e-5, f"{s}"
    assert mach.race_log == [] and mach.undefined_log == []


@pytest.mark.parametrize("arch,o", _gemm_params())
def test_gemm_assembles_without_hazards(arch, o):
    g, text, cubin = gemm_kernel(arch, o)
    assert cubins.hazards(cubin.program) == []
    assert ("LDGSTS" in text) == o.async_copy
    assert len(re.findall(r"\bFFMA\b", text[text.index("LOOP:"):text.index("BRA LOOP")])) == 8 * 8 * o.tile_rows * o.unroll


@pytest.mark.parametrize("arch,o", _gemm_params())
def test_gemm_nvdisasm_reads_it_as_generated(arch, o):
    _nvdisasm(arch)
    _, text, cubin = gemm_kernel(arch, o)
    assert cubins.disasm_mismatches(text, bytes(cubin.data), arch) == []


def test_archs_the_api_builds_for_pass_these_checks():
    """target.ARCHS (what conv2d generates for) is every arch here: both kernels assemble on each."""
    assert set(ARCHS) == set(ALL)
