"""kernels_sass.winograd's bench table (report.render) on results with the PyTorch and cuDNN
reference cases, and on results written before them; CPU only."""
from __future__ import annotations

from kernels_sass.winograd import report

GFLOP = 10.0      # 10 GFLOP in 0.1 ms = 100 TFLOPS


def _row(config, auto, ms, rel_err=None, cudnn_algos=None):
    n = int(config.split("/N")[1])
    row = {"config": config, "N": n, "C": 64, "H": 56, "W": 56, "K": 64, "gflop": GFLOP, "ms": ms,
           "how": {k: "graph" for k in ms}, "algo_auto": auto, "cudnn_algos": cudnn_algos or {}}
    if rel_err is not None:
        row["rel_err"] = rel_err
    return row


def _results():
    """Conv2/N32 with every case (NHWC's best beating NCHW's), and Conv2/N64 as older runs wrote it:
    no TF32 or NHWC cases, "torch default" for the FP32 heuristic case, no errors."""
    full = {"sass main": 0.08, "sass CHWN": 0.1, "sass NCHW": 0.125, "sass4 gemm": 0.05, "sass4 CHWN": 0.2,
            "sass4 NCHW": 0.25, "cuda NCHW": 0.5, "filter transform": 0.002,
            "cudnn (benchmark)": 0.4, "torch FP32 (no benchmark)": 0.5, "torch FP32 channels_last (benchmark)": 0.2,
            "torch default (TF32)": 0.0625, "torch default (TF32) channels_last": 0.05,
            "cudnn IMPLICIT_PRECOMP_GEMM": 0.4, "cudnn FFT_TILING": 0.16,
            "cudnn NHWC IMPLICIT_GEMM": 0.8, "cudnn NHWC IMPLICIT_PRECOMP_GEMM": 0.125}
    errs = {"sass main": 3e-7, "sass CHWN": 3e-7, "sass NCHW": 3e-7, "sass4 CHWN": 6e-7, "sass4 NCHW": 6e-7,
            "cuda NCHW": 2e-7, "cudnn (benchmark)": 1e-7, "torch FP32 (no benchmark)": 1e-7,
            "torch FP32 channels_last (benchmark)": 1e-7, "torch default (TF32)": 4.5e-4,
            "torch default (TF32) channels_last": 5e-4, "cudnn IMPLICIT_PRECOMP_GEMM": 1e-7,
            "cudnn FFT_TILING": 8e-7, "cudnn NHWC IMPLICIT_GEMM": 1e-7, "cudnn NHWC IMPLICIT_PRECOMP_GEMM": 2e-7}
    old = {"sass CHWN": 0.1, "sass NCHW": 0.2, "cudnn (benchmark)": 0.4, "torch default": 0.4,
           "cudnn IMPLICIT_PRECOMP_GEMM": 0.4, "cudnn FFT_TILING": 0.25}
    return {"info": {"device": "G", "torch": "T", "cudnn": 1, "sms": 132},
            "results": [_row("Conv2/N32", "f2", full, errs, {"NHWC FFT": "CUDNN_STATUS_NOT_SUPPORTED (3000)"}),
                        _row("Conv2/N64", "f2", old)]}


def test_best_cudnn_is_the_faster_layout_and_old_names_are_read():
    new, old = (report.derived(r) for r in _results()["results"])
    assert new["ms"]["cudnn best NCHW"] == 0.16 and new["ms"]["cudnn best NHWC"] == 0.125
    assert new["ms"]["cudnn best"] == 0.125 and new["best_algo"] == "NHWC IMPLICIT_PRECOMP_GEMM"
    assert new["err"]["cudnn best"] == 2e-7 and new["err"]["cudnn best NCHW"] == 8e-7
    assert old["ms"]["cudnn best"] == 0.25 and old["best_algo"] == "NCHW FFT_TILING"
    assert "cudnn best NHWC" not in old["ms"]
    assert old["ms"]["torch FP32 (no benchmark)"] == 0.4 and "torch default" not in old["ms"]


def _table(lines, comment, first, width):
    """{config: [cells]} of the table whose header follows the comment line starting with
    `comment`: cells of `width` characters after the first `first` (config and label)."""
    i = next(k for k, l in enumerate(lines) if l.startswith(comment))
    head = lines[i + 1]
    assert head.startswith("config")
    n = (len(head) - first) // width
    rows = {}
    for line in lines[i + 2:]:
        if line.startswith("#") or not line.startswith("Conv"):
            break
        rows[line.split()[0]] = [line[first + width * j:first + width * (j + 1)].strip() for j in range(n)]
    return head[first:].split(), rows


def test_table_has_every_reference_ratios_and_errors(capsys):
    report.render(_results())
    lines = capsys.readouterr().out.splitlines()
    # TFLOPS of every case; the older run's FP32 heuristic case under its name now, blank cells where
    # a run has no figure; "cudnn best" = the faster layout's fastest algorithm, named
    i = next(k for k, l in enumerate(lines) if l.startswith("config"))
    head = lines[i][:11 + 11 * 14].split()
    assert head == ["config", "sassMain", "sassCHWN", "sassNCHW", "f4GEMM", "f4CHWN", "f4NCHW", "cudaNCHW",
                    "fp32BM", "fp32", "fp32BMcl", "defTF32", "defTF32cl", "cuDNNnchw", "cuDNNnhwc"]

    def cells(line):
        return [line[11 + 11 * j:11 + 11 * (j + 1)].strip() for j in range(14)], line[11 + 11 * 14:].split()[:2]
    new, new_best = cells(lines[i + 1])
    assert new == ["125.00", "100.00", "80.00", "200.00", "50.00", "40.00", "20.00",
                   "25.00", "20.00", "50.00", "160.00", "200.00", "62.50", "80.00"]
    assert new_best == ["NHWC", "IMPLICIT_PRECOMP_GEMM"]
    old, old_best = cells(lines[i + 2])
    assert old == ["", "100.00", "50.00", "", "", "", "", "25.00", "25.00", "", "", "", "40.00", ""]
    assert old_best == ["NCHW", "FFT_TILING"]
    # ratios, time of the reference / ours: best = NHWC IMPLICIT_PRECOMP_GEMM (0.125 ms), TF32 = 0.0625 ms
    head, rows = _table(lines, "# speed ratios", 16, 12)
    assert head == ["CHWN/best", "NCHW/best", "f2NCHW/best", "f4NCHW/best", "NCHW/TF32", "f2NCHW/TF32", "f4NCHW/TF32"]
    assert rows["Conv2/N32"] == ["1.25", "1.00", "1.00", "0.50", "0.50", "0.50", "0.25"]
    assert rows["Conv2/N64"] == ["2.50", "1.25", "1.25", "", "", "", ""]
    # errors of every case that computes the whole convolution, the best cuDNN algorithms' included
    head, rows = _table(lines, "# relative error", 11, 11)
    assert head == ["sassMain", "sassCHWN", "sassNCHW", "f4CHWN", "f4NCHW", "cudaNCHW", "fp32BM", "fp32",
                    "fp32BMcl", "defTF32", "defTF32cl", "cuDNNnchw", "cuDNNnhwc"]
    assert rows["Conv2/N32"] == ["3.0e-07", "3.0e-07", "3.0e-07", "6.0e-07", "6.0e-07", "2.0e-07", "1.0e-07",
                                 "1.0e-07", "1.0e-07", "4.5e-04", "5.0e-04", "8.0e-07", "2.0e-07"]
    assert rows["Conv2/N64"] == [""] * 13
    gm = [l for l in lines if l.startswith("geometric mean of sass/cudnn")][0]
    assert "NCHW (auto, NCHW in and out) 1.118" in gm and "min NCHW 1.000" in gm     # sqrt(1.0 * 1.25)
    assert "NCHW against PyTorch's default (TF32) 0.500" in gm


def test_auto_nchw_is_the_fused_f4_where_auto_picks_it(capsys):
    """A row whose "auto" is the fused F(4x4,3x3) kernel: its NCHW entry is auto's; CHWN keeps
    the CHWN choice (F(2x2,3x3) here)."""
    ms = {"sass CHWN": 0.1, "sass NCHW": 0.125, "f4fused NCHW": 0.08, "f4fused CHWN": 0.09,
          "cudnn (benchmark)": 0.2, "cudnn IMPLICIT_PRECOMP_GEMM": 0.2}
    row = _row("Conv2/N32", "f4fused", ms)
    row["algo_auto_chwn"] = "f2"
    report.render({"info": {"device": "G", "torch": "T", "cudnn": 1, "sms": 132}, "results": [row]})
    lines = capsys.readouterr().out.splitlines()
    i = next(k for k, l in enumerate(lines) if l.startswith("config") and "auto" in l)
    head, cells = lines[i].split(), lines[i + 1].split()
    assert cells[1] == "f4f"
    assert cells[head.index("CHWN/best")] == "2.00" and cells[head.index("NCHW/best")] == "2.50"


def test_tf32_line_counts_the_exact_layers_faster_than_the_default():
    """The issue's moonshot figure: auto NCHW faster than PyTorch's default (TF32) at <= 1e-5; a
    faster layer past the error limit, or with no error recorded, does not count."""
    rows = [("Conv2/N32", 1.25, 2e-6), ("Conv2/N64", 1.5, 2e-5), ("Conv3/N32", 0.9, 3e-6),
            ("Conv3/N64", 0.5, 3e-6), ("Conv4/N32", 0.7, 3e-6), ("Conv5/N32", 0.8, 3e-6), ("Conv5/N64", 2.0, None)]
    assert report.tf32_line(rows) == (
        "faster than PyTorch's default (TF32, NCHW) at <= 1e-5 relative error (auto, NCHW in and out): "
        "1 of 7 layers (Conv2/N32 1.25x); closest of the others: Conv3/N32 0.90x, Conv5/N32 0.80x, "
        "Conv4/N32 0.70x")


def test_table_prints_the_tf32_line(capsys):
    report.render(_results())
    line = [l for l in capsys.readouterr().out.splitlines() if l.startswith("faster than")]
    # Conv2/N32: auto NCHW (sass NCHW, 0.125 ms, 3e-7) at half the TF32 default's speed; Conv2/N64 has no TF32 case
    assert line == ["faster than PyTorch's default (TF32, NCHW) at <= 1e-5 relative error (auto, NCHW in and "
                    "out): 0 of 1 layers; closest of the others: Conv2/N32 0.50x"]
