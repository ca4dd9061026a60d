"""The F(4x4,3x3) ablation (kernels_sass.winograd.ablation4, `bench --ablation --algo f4tc f4fused`)
on the CPU: its variants (tags, switches that exist and are turned back), the SASS each switch
generates against the default's and the normal kernel's, prebuild's job list, the table rendered
from a small JSON, the command line's refusals; on a GPU (marked gpu), f4's launch switches leave
f4tc's output as it is."""
from __future__ import annotations

import json

import pytest

from kernels_sass.winograd import ablation4, f4, f4fused, tcgemm
from kernels_sass.winograd.__main__ import main
from kernels_sass.winograd.f4fused_placement import constants
from kernels_sass.winograd.plan import Shape
from kernels_sass.winograd.prebuild import ablation4_jobs
from kernels_sass.winograd.report import render_ablation4
from kernels_sass.winograd.workloads import (ABLATION4_CONFIGS, ABLATION4_FUSED_CONFIGS, f4fused_ablation_variants,
                                             f4tc_ablation_variants, resnet_configs)

CONV3 = Shape(128, 128, 28, 28, 128)
CONV5 = Shape(128, 512, 7, 7, 512)


def test_variants_are_the_default_then_one_switch_each():
    tc = f4tc_ablation_variants()
    tags = [v.tag for v in tc]
    assert len(set(tags)) == len(tags) == 9
    assert tc[0].tag == "default" and tc[0].gemm == tcgemm.OPTIONS and not tc[0].constants and not tc[0].transposes
    for v in tc[1:]:
        changed = (v.gemm != tcgemm.OPTIONS) + bool(v.constants) + v.transposes
        assert changed == 1, v.tag
        for k, value in v.constants.items():       # an f4 switch, turned away from its default
            assert getattr(f4, k) != value
    fz = f4fused_ablation_variants()
    assert list(fz)[0] == "default" and fz["default"] == {}
    assert len(fz) == 9
    for tag, values in list(fz.items())[1:]:
        assert len(values) == 1, tag
        (k, value), = values.items()
        assert getattr(f4fused, k) != value, tag
    assert {k for v in fz.values() for k in v} == {"COPY_GAP", "TRANSFORM_FROM", "WIDE_LOADS", "EPILOGUE_PIPELINE",
                                                   "PERSISTENT", "FILTER_BLOCKS_FIRST"}


def test_f4_switches_default_on_and_constants_restore_them():
    assert f4.SIDE_STREAM and f4.FLOAT4_ROWS
    with constants({"SIDE_STREAM": False}, f4):
        assert not f4.SIDE_STREAM
    assert f4.SIDE_STREAM
    with pytest.raises(AttributeError, match="no switch SIDE_STREEM"):
        with constants({"SIDE_STREEM": False}, f4):
            pass
    with constants({"COPY_GAP": 4}):            # f4fused by default
        assert f4fused.COPY_GAP == 4
    assert f4fused.COPY_GAP == 96


def test_fused_switches_change_the_sass_and_the_default_is_the_kernel():
    normal = f4fused.generate(CONV3)
    texts = {}
    for tag, values in f4fused_ablation_variants().items():
        with constants(values):
            texts[tag] = f4fused.generate(CONV3)
    assert texts["default"] == normal
    assert len(set(texts.values())) == len(texts)       # every switch changes Conv3's kernel
    assert f4fused.generate(CONV3) == normal            # the constants restored


def test_wide_loads_switch_is_a_no_op_where_w_is_odd():
    normal = f4fused.generate(CONV5)
    with constants({"WIDE_LOADS": False}):
        assert f4fused.generate(CONV5) == normal


def test_tc_switches_change_the_gemm_and_the_default_is_the_planned_one():
    for s in (CONV3, CONV5):
        p = f4.plan(s, 132, tc=True)
        normal = tcgemm.generate(p.gemm, p.options)
        texts = {}
        for v in f4tc_ablation_variants():
            texts[v.tag] = tcgemm.generate(f4.Plan(s, p.parts, v.gemm).gemm, v.gemm)
        assert texts["default"] == normal
        gemm_tags = [v.tag for v in f4tc_ablation_variants() if v.gemm != tcgemm.OPTIONS]
        assert len(gemm_tags) == 5
        assert len({texts[t] for t in gemm_tags} | {normal}) == 6      # each its own GEMM
        for v in f4tc_ablation_variants():             # launch switches: the GEMM as it is
            if v.gemm == tcgemm.OPTIONS:
                assert texts[v.tag] == normal


def test_prebuild_jobs_cover_every_layer_and_variant():
    gemms, fused = ablation4_jobs(132)
    assert len(gemms) == len(ABLATION4_CONFIGS) * 6          # the default GEMM and 5 variants a layer
    assert {o for _, o in gemms} == {v.gemm for v in f4tc_ablation_variants()}
    assert len(fused) == len(ABLATION4_FUSED_CONFIGS) * len(f4fused_ablation_variants())
    assert all(n in dict(resnet_configs()) for n in ABLATION4_CONFIGS)


def test_selection_keeps_the_default_and_picks_layers():
    tags = ["default", "copy_gap_8", "copy_gap_4", "transform_from_6"]
    assert ablation4.selected(tags, None) == tags
    assert ablation4.selected(tags, ["copy"]) == ["default", "copy_gap_8", "copy_gap_4"]
    assert {n for n, _ in ablation4.configs(None, "f4tc")} == set(ABLATION4_CONFIGS)
    assert {n for n, _ in ablation4.configs(None, "f4fused")} == set(ABLATION4_FUSED_CONFIGS)
    assert [n for n, _ in ablation4.configs(["Conv4/N6"], "f4fused")] == ["Conv4/N64"]


def _row(algo, config, variant, ms, base, output="identical"):
    return {"config": config, "algo": algo, "variant": variant, "what": f"{variant} in words", "parts": 1,
            "ms": ms, "vs_default": ms / base, "output": output, "rel_diff": 0.0}


def _fake():
    rows = [_row("f4tc", "Conv3/N128", "default", 0.2, 0.2), _row("f4tc", "Conv3/N128", "cols128", 0.22, 0.2),
            _row("f4tc", "Conv5/N32", "default", 0.07, 0.07),
            _row("f4tc", "Conv5/N32", "cols128", float("nan"), 0.07, "not run: K 512"),
            _row("f4fused", "Conv3/N128", "default", 0.25, 0.25),
            _row("f4fused", "Conv3/N128", "copy_gap_8", 0.255, 0.25, "DIFFERS")]
    return {"info": {"device": "NVIDIA H100 80GB HBM3", "time": "2026-11-27 06:00:00"}, "ablation4": rows}


def test_table_renders_from_json(capsys, tmp_path):
    render_ablation4(_fake())
    out = capsys.readouterr().out
    assert "## f4tc (NCHW, the whole convolution)" in out and "## f4fused (main kernel)" in out
    assert "| switch | turned back | Conv3/N128 | Conv5/N32 |" in out
    assert "| cols128 | cols128 in words | 0.2200 (1.100x) | not run |" in out
    assert "| default | default in words | 0.2000 (1.000x) | 0.0700 (1.000x) |" in out
    assert "| copy_gap_8 | copy_gap_8 in words | 0.2550 (1.020x) ! |" in out
    assert "outputs against the default's: DIFFERS: 1; identical: 1" in out
    path = tmp_path / "f4_ablation.json"
    path.write_text(json.dumps(_fake()))
    assert main(["report", str(path)]) == 0
    assert "## f4tc" in capsys.readouterr().out


def test_ablation_refuses_mixed_algorithms():
    with pytest.raises(SystemExit, match="expected f2 .* or f4tc and/or f4fused"):
        main(["bench", "--ablation", "--algo", "f2", "f4tc"])
    with pytest.raises(SystemExit, match="expected f2"):
        main(["bench", "--ablation", "--algo", "f4"])


# ---- on the GPU -----------------------------------------------------------------------------------
@pytest.mark.gpu
def test_launch_switches_keep_f4tcs_output_on_the_gpu():
    from sassas.load import gpu_available
    ok, why = gpu_available()
    if not ok:
        pytest.skip(f"no GPU: {why}")
    import torch
    from kernels_sass.winograd import api
    from kernels_sass.winograd.device import Lib
    s = Shape(32, 128, 14, 12, 128)
    x = torch.randn((s.N, s.C, s.H, s.W), device="cuda")
    w = torch.randn((s.K, s.C, 3, 3), device="cuda")
    p = api.f4_plan(s, 0, True)
    outs = {}
    for v in f4tc_ablation_variants():
        if v.gemm != tcgemm.OPTIONS:
            continue
        y = torch.full((s.N, s.K, s.H, s.W), float("nan"), device="cuda")
        ws = api.Workspace(xc=torch.empty((s.C, s.H, s.W, s.N), device="cuda"),
                           yk=torch.empty((s.K, s.H, s.W, s.N), device="cuda"))
        with constants(v.constants, f4):
            ablation4.f4tc_call(v, p, x, w, y, ws, Lib(x))()
        torch.cuda.synchronize()
        outs[v.tag] = y
    want = torch.nn.functional.conv2d(x.double(), w.double(), padding=1)
    for tag, y in outs.items():
        assert ablation4.compare(y, outs["default"])[0] in ablation4.PASSED, tag
        assert float(torch.linalg.vector_norm(y - want) / torch.linalg.vector_norm(want)) <= 1e-5, tag
