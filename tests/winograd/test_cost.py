"""The cost model behind algo="auto" (kernels_sass/winograd/cost.py) against the recorded bench runs
of the H100 and the H200 (results/h*_bench_all.json): no GPU needed."""
from dataclasses import replace

import numpy as np
import pytest

from kernels_sass.winograd import api, cost, cost_fit
from kernels_sass.winograd.plan import Shape
from kernels_sass.winograd.workloads import resnet_configs

H200 = cost.KNOWN_GPUS["NVIDIA H200"]


@pytest.fixture(scope="module")
def runs():
    return cost_fit.load(cost_fit.DEFAULT_RUNS)


def test_nnls_solves_a_known_problem():
    rng = np.random.default_rng(1)
    A = rng.uniform(0, 1, (40, 4))
    x = np.array([2.0, 0.0, 0.5, 3.0])
    assert np.allclose(cost_fit.nnls(A, A @ x), x, atol=1e-9)
    b = A @ np.array([1.0, -2.0, 0.0, 1.0])                      # the unconstrained fit is negative
    got = cost_fit.nnls(A, b)
    assert (got >= 0).all() and got[1] == 0.0
    for j in range(4):                                           # the optimum: no coordinate improves it
        for d in (1e-4, -1e-4):
            y = got.copy()
            y[j] = max(0.0, y[j] + d)
            assert np.linalg.norm(A @ y - b) >= np.linalg.norm(A @ got - b) - 1e-12


def test_the_stored_model_is_the_fit_of_the_runs_it_names(runs):
    """data/cost_model.json is what `model --fit --write` makes of the runs it was fitted on."""
    import json
    stored = json.loads(cost.MODEL_FILE.read_text())
    coef, _ = cost_fit.fit(cost_fit.load([cost_fit.RESULTS / name for name in stored["fitted_on"]]))
    assert coef.keys() == stored["coefficients"].keys()
    for name, c in coef.items():
        assert np.allclose(c, stored["coefficients"][name], rtol=1e-6, atol=1e-9), name


def test_auto_takes_the_fastest_measured_algorithm(runs):
    """On the H100 and the H200, NCHW and CHWN: auto's choice is the measured fastest on at least
    15 of the 16 layers, and never more than 2% slower than it (63 of 64; the other, the H100's
    Conv3/N96 CHWN, 1.2%)."""
    result = cost_fit.check(runs)
    assert len(result) == 64
    for run in ("h100_bench_all.json", "h200_bench_all.json"):
        for layout in ("NCHW", "CHWN"):
            sel = [c for c in result if c["run"] == run and c["layout"] == layout]
            assert sum(c["auto"] == c["best"] for c in sel) >= 15, (run, layout)
            assert max(c["loss"] for c in sel) < 0.02, (run, layout)


def test_auto_on_gpus_without_the_sm90_kernels(runs):
    """Between F(2x2,3x3) and F(4x4,3x3) with the FFMA GEMM (what an sm_80 GPU has): the faster
    measured on 62 of the 64 layers and layouts; the worst, Conv5/N32 CHWN on the H100, 8.6% slower
    (predicted 91.8 and 92.4 us, measured 97.5 and 89.8)."""
    result = cost_fit.check(runs, arch="sm_80")
    assert {a for c in result for a in c["pred"]} == {"f2", "f4"}
    assert sum(c["auto"] == c["best"] for c in result) >= 62
    assert max(c["loss"] for c in result) < 0.09


def test_the_model_fitted_on_one_gpu_chooses_for_the_other(runs):
    """Fitted on one GPU's run alone, the model's choices on the other's (whose memory moves 1.4x
    as fast at the same SM clock) lose at most 2% against the fastest measured (63 of 64 right)."""
    for fit_on, check_on in (("h100", "h200"), ("h200", "h100")):
        coef, _ = cost_fit.fit([r for r in runs if r.run.startswith(fit_on)])
        result = cost_fit.check([r for r in runs if r.run.startswith(check_on)], coef)
        assert max(c["loss"] for c in result) < 0.02, (fit_on, check_on)


def test_bandwidth_moves_conv3_between_the_fused_kernel_and_f4tc():
    """Conv3 from N = 64: the fused kernel on the H100 (measured 1.3-11.5% faster), f4tc on the H200
    (whose memory moves f4tc's V and M 1.4x as fast: 3.2-14.5% faster)."""
    for n in (64, 96, 128):
        s = Shape(n, 128, 28, 28, 128)
        assert api.choose_algo(s, "NCHW", cost.H100) == "f4fused"
        assert api.choose_algo(s, "NCHW", H200) == "f4tc"


def test_auto_keeps_to_what_each_gpu_runs():
    sm80 = replace(cost.H100, arch="sm_80")
    for name, s in resnet_configs():
        assert api.choose_algo(s, "NCHW", sm80) in ("f2", "f4"), name
        assert api.choose_algo(s, "CHWN", replace(cost.H100, arch="")) in ("f2", "f4"), name
    assert "f4fused" not in api.candidates(Shape(8, 64, 56, 56, 1024), "NCHW", cost.H100)   # K > 512
    assert api.candidates(Shape(8, 64, 56, 56, 64), "NCHW", cost.H100) == ["f2", "f4", "f4tc", "f4fused"]


def test_predictions_grow_with_the_batch():
    for layout in ("NCHW", "CHWN"):
        for algo in ("f2", "f4", "f4tc", "f4fused"):
            t = [cost.predict(Shape(n, 128, 28, 28, 128), algo, layout, cost.H100) for n in (32, 64, 128)]
            assert 0 < t[0] < t[1] < t[2], (algo, layout, t)


def test_a_model_file_of_other_features_is_refused(monkeypatch):
    monkeypatch.setattr(cost, "coefficients", lambda: {name: [1.0] for name in cost.COMPONENTS}
                        | {f"{a} {lay}": [1.0] for a, lay in cost.whole_names()})
    with pytest.raises(ValueError, match="refit it"):
        cost.predict(Shape(32, 64, 56, 56, 64), "f2", "NCHW", cost.H100)


def test_auto_takes_the_fused_kernel_on_conv2():
    """Conv2 (64 channels, 56x56) at every N on both GPUs and in both layouts: the fused
    F(4x4,3x3) kernel, measured 1.9-2.1x f4tc and 1.3-1.9x F(2x2,3x3)."""
    for gpu in cost.KNOWN_GPUS.values():
        for layout in ("NCHW", "CHWN"):
            for n in (32, 64, 96, 128):
                assert api.choose_algo(Shape(n, 64, 56, 56, 64), layout, gpu) == "f4fused", (gpu, layout, n)


def _model(*args):
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", "kernels_sass.winograd", "model", *args],
                          capture_output=True, text=True, timeout=120)


def test_model_cli_predicts_a_shape_on_a_named_gpu():
    r = _model("--shape", "64", "128", "28", "28", "128", "--gpu", "H100")
    assert r.returncode == 0, r.stderr
    assert "auto: f4fused" in r.stdout and "f4tc" in r.stdout
    r = _model("--shape", "64", "128", "28", "28", "128", "--gpu", "H200")
    assert "auto: f4tc" in r.stdout
    r = _model("--shape", "16", "512", "7", "7", "512", "--gpu", "sm_80,108,1410,1555")     # an A100's figures
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("(not for this shape or GPU)") == 2                    # f4tc and f4fused: sm_90 only
    assert "auto: f2" in r.stdout or "auto: f4" in r.stdout


def test_model_cli_refuses_an_unknown_gpu_without_a_traceback():
    r = _model("--shape", "1", "8", "8", "8", "8", "--gpu", "A100")
    assert r.returncode != 0
    assert "model --gpu 'A100': one of" in r.stderr and "Traceback" not in r.stderr


def test_model_cli_checks_the_recorded_runs():
    r = _model()
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("auto takes the fastest on") == 4
