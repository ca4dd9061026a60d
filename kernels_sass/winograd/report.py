"""Rendering bench results: the table (with cuDNN anchor figures measured on an H200, kept in
data/), the ablation table and the plot."""
from __future__ import annotations

import csv
import math
import os

import numpy as np

from .baselines import CUDNN_PREFIX, cudnn_layout
from .plan import Shape
from .workloads import BENCH_CASE, log, read_run

ANCHORS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "cudnn_fp32_nchw_h200_2026-11-22.csv")


def anchors(path: str = ANCHORS) -> dict:
    """{(layer, N): {algo: tflops}}: cuDNN's algorithms measured on an H200 (the file says how)."""
    with open(path) as f:
        lines = [l for l in f if not l.startswith("#")]
    out: dict = {}
    for r in csv.DictReader(lines):
        out.setdefault((r["layer"], int(r["N"])), {})[r["algo"]] = float(r["eff_tflops"])
    return out


def render_ablation(data: dict) -> None:
    rows = data["ablation"]
    # the variants recorded in the data (a run of an older generator has other tags), default first
    tags = [t for t in rows[0]["ms"] if not t.endswith(" 2C")] if rows else []
    print("# SASS switches: main kernel ms (and time relative to the default, first column)")
    print(f"{'config':<12}" + "".join(f"{t:>22}" for t in tags) + f"{'loop FFMA util':>16}")
    for r in rows:
        base = r["ms"][tags[0]]
        print(f"{r['config']:<12}" + "".join(f"{r['ms'][t]:>13.4f} ({r['ms'][t] / base:5.3f})" for t in tags)
              + f"{r['loop_ffma_util']:>16.1%}"
              + ("" if all(r.get("same", {}).values()) else "  OUTPUT DIFFERS from the default"))
    print("# loop FFMA util: extra warp FFMAs of the 2C run / (SMs x 4 x extra time x max SM clock)", flush=True)


def render_ablation4(data: dict) -> None:
    """The F(4x4,3x3) ablation (ablation4.py) as a markdown table an algorithm: a row a switch
    turned back, a column a layer, each cell the time and its ratio to the default's."""
    rows = data["ablation4"]
    info = data.get("info", {})
    print(f"# F(4x4,3x3) ablation: {info.get('device', '?')}, {info.get('time', '')}; each row turns one switch of "
          f"the default back; cell: ms (time / the default's); ! output not as the default's")
    for algo in dict.fromkeys(r["algo"] for r in rows):
        mine = [r for r in rows if r["algo"] == algo]
        layers = list(dict.fromkeys(r["config"] for r in mine))
        variants = list(dict.fromkeys(r["variant"] for r in mine))
        cell = {(r["variant"], r["config"]): r for r in mine}
        what = {r["variant"]: r.get("what", "") for r in mine}
        print(f"\n## {algo}" + (" (NCHW, the whole convolution)" if algo == "f4tc" else
                                " (main kernel)" if algo == "f4fused" else ""))
        print("| switch | turned back | " + " | ".join(layers) + " |")
        print("|---|---|" + "---|" * len(layers))
        for v in variants:
            cells = []
            for layer in layers:
                r = cell.get((v, layer))
                if r is None or r["ms"] != r["ms"]:
                    cells.append("-" if r is None else r["output"].split(":")[0])
                    continue
                bad = not r["output"].startswith(("identical", "within"))
                cells.append(f"{r['ms']:.4f} ({r['vs_default']:.3f}x)" + (" !" if bad else ""))
            print(f"| {v} | {what[v]} | " + " | ".join(cells) + " |")
        outs = sorted({r["output"] for r in mine})
        print("outputs against the default's: " + "; ".join(
            f"{o}: {sum(r['output'] == o for r in mine)}" for o in outs), flush=True)


# the table's columns: bench case (or derived figure) and its short name
COLUMNS = {"sass main": "sassMain", "sass CHWN": "sassCHWN", "sass NCHW": "sassNCHW", "sass4 gemm": "f4GEMM",
           "sass4 CHWN": "f4CHWN", "sass4 NCHW": "f4NCHW", "f4fused main": "f4fMain", "f4fused NCHW": "f4fNCHW",
           "f4fused CHWN": "f4fCHWN", "sass4tc gemm": "f4tcGEMM", "sass4tc CHWN": "f4tcCHWN",
           "sass4tc NCHW": "f4tcNCHW",
           "cuda NCHW": "cudaNCHW",
           "cudnn (benchmark)": "fp32BM", "torch FP32 (no benchmark)": "fp32",
           "torch FP32 channels_last (benchmark)": "fp32BMcl", "torch default (TF32)": "defTF32",
           "torch default (TF32) channels_last": "defTF32cl", "cudnn best NCHW": "cuDNNnchw",
           "cudnn best NHWC": "cuDNNnhwc"}
# cases of results written before the TF32 cases, under the names they have now
LEGACY_NAMES = {"torch default": "torch FP32 (no benchmark)"}
TF32 = "torch default (TF32)"
W = 11      # a column's width


def derived(r: dict) -> dict:
    """A bench row's times and errors by case (LEGACY_NAMES renamed), with "cudnn best <layout>",
    the fastest cuDNN algorithm run directly in each layout, and "cudnn best", the faster of
    them; "best_algo": its layout and name."""
    ms = {LEGACY_NAMES.get(k, k): v for k, v in r["ms"].items()}
    err = {LEGACY_NAMES.get(k, k): v for k, v in (r.get("rel_err") or {}).items()}
    best_algo = None
    for layout in ("NCHW", "NHWC"):
        algos = {k: v for k, v in ms.items() if cudnn_layout(k) == layout and v == v}
        if not algos:
            continue
        best = min(algos, key=algos.get)
        cols = [f"cudnn best {layout}"]
        if best_algo is None or algos[best] < ms["cudnn best"]:
            cols.append("cudnn best")
            best_algo = f"{layout} {best[len(CUDNN_PREFIX[layout]):]}"
        for col in cols:
            ms[col] = algos[best]
            if best in err:
                err[col] = err[best]
    return {"ms": ms, "err": err, "best_algo": best_algo}


def _cell(v, fmt: str) -> str:
    """A right-aligned cell; blank where the run has no such figure."""
    return f"{'':>{W}}" if v is None else f"{v:>{W}{fmt}}"


def tf32_line(rows: list, limit: float = 1e-5) -> str:
    """Where auto's NCHW convolution is faster than PyTorch's default (TF32, NCHW) within `limit`
    of float64, and how far the closest others are. rows: (config, speed over the default,
    relative error or None)."""
    exact = [(c, x) for c, x, e in rows if e is not None and e <= limit]
    won = [(c, x) for c, x in exact if x > 1]
    rest = sorted((x, c) for c, x in exact if x <= 1)[::-1][:3]
    bound = f"{limit:.0e}".replace("e-0", "e-")
    line = (f"faster than PyTorch's default (TF32, NCHW) at <= {bound} relative error (auto, NCHW in "
            f"and out): {len(won)} of {len(rows)} layers")
    if won:
        line += " (" + ", ".join(f"{c} {x:.2f}x" for c, x in won) + ")"
    if rest:
        line += "; closest of the others: " + ", ".join(f"{c} {x:.2f}x" for x, c in rest)
    return line


def render(data: dict, plot: str = None) -> None:
    res = data["results"]
    slow = [f"{when}: {', '.join(st['slowdown'])} at {st.get('temperature_c')} C"
            for when, st in (("start", data["info"].get("gpu_state_at_start") or {}),
                             ("end", data["info"].get("gpu_state_at_end") or {})) if st.get("slowdown")]
    if slow:
        print(f"# WARNING: the GPU cut its clock during this run ({'; '.join(slow)}): the timings are not "
              f"comparable with other runs")
    anc = anchors()
    der = [derived(r) for r in res]
    cols = [c for c in COLUMNS if any(c in d["ms"] for d in der)]
    ref_col = "cudnn best" if any("cudnn best" in d["ms"] for d in der) else "cudnn (benchmark)"

    def tflops(r, d, c):
        ms = d["ms"].get(c)
        return None if ms is None else (r["gflop"] / ms if ms == ms and ms > 0 else float("nan"))

    print(f"# {data['info'].get('device')}  torch {data['info'].get('torch')}  cuDNN {data['info'].get('cudnn')}")
    print("# effective TFLOPS (2*N*C*H*W*K*9 / time); FP32 (no TF32) except defTF32*")
    if any("sass4 CHWN" in d["ms"] for d in der):
        print("# sass* = F(2x2,3x3) fused SASS kernel, f4* = F(4x4,3x3) non-fused (f4GEMM: its SASS GEMM alone); "
              "auto = the algorithm conv2d's algo='auto' picks (api.choose_algo)")
    print("# torch conv2d: fp32BM = FP32 (allow_tf32 off), cudnn.benchmark on; fp32 = the same, benchmark off; "
          "defTF32 = PyTorch's defaults: TF32 convolutions (allow_tf32 on), benchmark off; *cl = channels_last "
          "tensors, else NCHW")
    print("# cuDNNnchw / cuDNNnhwc = the fastest cuDNN FP32 algorithm run directly (FMA math) in that layout; "
          "cudnn best = the faster of them, named last")
    head = f"{'config':<11}" + "".join(f"{COLUMNS[c]:>{W}}" for c in cols) + f"  {'cudnn best':<26}"
    if anc:
        head += f"{'anchor best (H200)':>26}"
    print(head)
    for r, d in zip(res, der):
        line = f"{r['config']:<11}" + "".join(_cell(tflops(r, d, c), ".2f") for c in cols)
        line += f"  {d['best_algo'] or '':<26}"
        if anc:
            layer, n = r["config"].split("/N")
            a = anc.get((layer, int(n)), {})
            if a:
                best = max(a, key=a.get)
                line += f"{a[best]:>9.2f} {best[:16]:>16}"
        print(line.rstrip())

    # time ratios (ref time / ours): our NCHW and CHWN entries against cuDNN's best and PyTorch's default
    ratio_cols = {"CHWN/best": ("auto CHWN", ref_col), "NCHW/best": ("auto NCHW", ref_col),
                  "f2NCHW/best": ("sass NCHW", ref_col), "f4NCHW/best": ("sass4 NCHW", ref_col),
                  "f4tcNCHW/best": ("sass4tc NCHW", ref_col),
                  "f4f/best": ("f4fused NCHW", ref_col), "f4fC/best": ("f4fused CHWN", ref_col),
                  "NCHW/TF32": ("auto NCHW", TF32), "f2NCHW/TF32": ("sass NCHW", TF32),
                  "f4NCHW/TF32": ("sass4 NCHW", TF32)}
    ratios: dict = {k: [] for k in ratio_cols}
    table = []
    against_tf32 = []      # (config, auto NCHW's speed over PyTorch's default, auto NCHW's error)
    for r, d in zip(res, der):
        algo = r.get("algo_auto", "f2")
        entry = BENCH_CASE.get(algo, "sass")
        if f"{entry} NCHW" not in d["ms"]:
            algo, entry = "f2", "sass"
        # CHWN in: "auto"'s choice for that layout (older results: the NCHW one)
        chwn = BENCH_CASE.get(r.get("algo_auto_chwn", algo), "sass")
        if f"{chwn} CHWN" not in d["ms"]:
            chwn = "sass"
        auto = {"auto CHWN": f"{chwn} CHWN", "auto NCHW": f"{entry} NCHW"}
        cells = {}
        for k, (ours, ref) in ratio_cols.items():
            t, b = tflops(r, d, auto.get(ours, ours)), tflops(r, d, ref)
            cells[k] = None if t is None or b is None else t / b
            if cells[k] is not None and cells[k] == cells[k]:
                ratios[k].append(cells[k])
        table.append((r, {"f4fused": "f4f"}.get(algo, algo) if "algo_auto" in r else "", cells))
        if cells["NCHW/TF32"] is not None:
            against_tf32.append((r["config"], cells["NCHW/TF32"], d["err"].get(auto["auto NCHW"])))
    shown = [k for k in ratio_cols if any(c[k] is not None for _, _, c in table)]
    print(f"# speed ratios: best = {ref_col}{' (cuDNNnchw or cuDNNnhwc)' if ref_col == 'cudnn best' else ''}, "
          f"TF32 = defTF32; CHWN/NCHW = the auto algorithm's entry (CHWN: transforms + main kernels; NCHW: NCHW "
          f"in and out); f2/f4/f4tc = that algorithm's NCHW entry"
          + ("; f4f = F(4x4,3x3) fused, NCHW in and out, its filter transform included (f4fC: CHWN in, KHWN out)"
             if "f4f/best" in shown else ""))
    print(f"{'config':<11}{'auto':>5}" + "".join(f"{k:>{W + 1}}" for k in shown))
    for r, algo, cells in table:
        print((f"{r['config']:<11}{algo:>5}" + "".join(" " + _cell(cells[k], ".2f") for k in shown)).rstrip())

    errs = [c for c in cols if any(c in d["err"] for d in der)]
    if errs:
        print("# relative error ||y - y64|| / ||y64|| against float64 (input set 0); cuDNN's algorithms above "
              "1e-4 are not timed")
        print(f"{'config':<11}" + "".join(f"{COLUMNS[c]:>{W}}" for c in errs))
        for r, d in zip(res, der):
            print((f"{r['config']:<11}" + "".join(_cell(d["err"].get(c), ".1e") for c in errs)).rstrip())

    clk = data["info"].get("max_sm_clock_mhz", 1980.0) * 1e6
    sms = data["info"].get("sms", 132)
    print(f"# FFMA issue utilisation of the main kernels (whole kernel, prologue and epilogue included): "
          f"warp FFMAs / ({sms} SMs x 4 schedulers x time x {clk / 1e6:.0f} MHz)")
    for r in res:
        s = Shape(r["N"], r["C"], r["H"], r["W"], r["K"])
        blocks = s.KB * s.NB * s.TH * s.TW
        ffma = blocks * 8 * (s.Cpad // 8) * 1024
        parts = []
        for c in ("sass main", "cuda main"):
            ms = r["ms"].get(c)
            if ms and ms == ms:
                parts.append(f"{c} {ffma / (sms * 4 * ms * 1e-3 * clk):6.1%} ({ms:.4f} ms)")
        ms = r["ms"].get("f4fused main")
        if ms and ms == ms and r.get("f4fused_warp_ffma"):
            fp = r.get("f4fused_parts", 1)
            parts.append(f"f4fused main {r['f4fused_warp_ffma'] / (sms * 4 * ms * 1e-3 * clk):6.1%} ({ms:.4f} ms"
                         + (f", {fp} parts)" if fp > 1 else ")"))
        split = r.get("sass_options", "").partition("-sp")[2]
        if r.get("f4_gemm") and r["ms"].get("sass4 gemm"):
            c, k, t, p = r["f4_gemm"]
            ms = r["ms"]["sass4 gemm"]
            tile = "" if r.get("f4_options", "default") == "default" else f", {r['f4_options']}"
            parts.append(f"f4 GEMM {36 * c * k * t / 32 / (sms * 4 * ms * 1e-3 * clk):6.1%} ({ms:.4f} ms, {p} part{'s' * (p > 1)}{tile})")
        print(f"  {r['config']:<12} " + "   ".join(parts) + (f"   (split-C: {split} tiles)" if split else ""))
        steps = [k for k in ("f4 filter transform", "f4 input transform", "sass4 gemm", "f4 output transform") if r["ms"].get(k)]
        if len(steps) == 4:
            print(f"  {'':<12} f4 steps: " + ", ".join(f"{k.replace('f4 ', '').replace('sass4 ', '')} {r['ms'][k]:.4f}"
                                                       for k in steps) + f" ms; whole CHWN {r['ms'].get('sass4 CHWN', float('nan')):.4f} ms")

    def gm(v):
        return math.exp(sum(math.log(x) for x in v) / len(v)) if v else float("nan")
    print(f"geometric mean of sass/cudnn: CHWN (transforms + main kernels) {gm(ratios['CHWN/best']):.3f}, "
          f"NCHW (auto, NCHW in and out) {gm(ratios['NCHW/best']):.3f}; "
          f"min CHWN {min(ratios['CHWN/best'], default=float('nan')):.3f}, "
          f"min NCHW {min(ratios['NCHW/best'], default=float('nan')):.3f}"
          + (f"; NCHW against PyTorch's default (TF32) {gm(ratios['NCHW/TF32']):.3f}" if ratios["NCHW/TF32"] else ""),
          flush=True)
    if against_tf32:
        print(tf32_line(against_tf32), flush=True)
    if ratios["f4f/best"]:
        print(f"geometric mean of f4fused NCHW / cudnn: {gm(ratios['f4f/best']):.3f} over "
              f"{len(ratios['f4f/best'])} configurations, min {min(ratios['f4f/best']):.3f}"
              + (f"; CHWN {gm(ratios['f4fC/best']):.3f}, min {min(ratios['f4fC/best']):.3f}" if ratios["f4fC/best"] else ""),
              flush=True)
    if plot:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except Exception as e:
            log(f"[report] no plot: matplotlib unavailable ({e})")
            return
        fig, ax = plt.subplots(figsize=(12, 5))
        xs = np.arange(len(res))
        wdt = 0.8 / len(cols)
        for k, c in enumerate(cols):
            ax.bar(xs + k * wdt, [tflops(r, d, c) or 0 for r, d in zip(res, der)], wdt, label=c)
        ax.set_xticks(xs + 0.4 - wdt / 2)
        ax.set_xticklabels([r["config"] for r in res], rotation=60, fontsize=8)
        ax.set_ylabel("effective TFLOPS (2NCHWK9 / t)")
        ax.set_title(f"Winograd FP32 (sass: F(2x2,3x3), f4: F(4x4,3x3)) against cuDNN and PyTorch, "
                     f"{data['info'].get('device')}")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(plot, dpi=120)
        log(f"[report] plot written to {plot}")


def cmd_report(args) -> int:
    data = read_run(args.json, "report", ("results", "ablation", "ablation4"))
    if "ablation4" in data:
        render_ablation4(data)
    elif "ablation" in data:
        render_ablation(data)
    else:
        render(data, plot=args.plot)
    return 0
