"""Rendering bench results: the table (with cuDNN anchor figures measured on an H200, kept in
data/), the ablation table and the plot."""
from __future__ import annotations

import csv
import json
import math
import os

import numpy as np

from .plan import Shape
from .workloads import log

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


def render(data: dict, plot: str = None) -> None:
    res = data["results"]
    slow = [f"{when}: {', '.join(st['slowdown'])} at {st.get('temperature_c')} C"
            for when, st in (("start", data["info"].get("gpu_state_at_start") or {}),
                             ("end", data["info"].get("gpu_state_at_end") or {})) if st.get("slowdown")]
    if slow:
        print(f"# WARNING: the GPU cut its clock during this run ({'; '.join(slow)}): the timings are not "
              f"comparable with other runs")
    anc = anchors()
    for r in res:      # the best cuDNN algorithm run directly, where there were such runs
        algos = {k: v for k, v in r["ms"].items() if k.startswith("cudnn ") and k != "cudnn (benchmark)" and v == v}
        if algos:
            best = min(algos, key=algos.get)
            r["ms"]["cudnn best"] = algos[best]
            r["cudnn_best_algo"] = best[6:]
    cols = [c for c in ("sass main", "sass CHWN", "sass NCHW", "sass4 gemm", "sass4 CHWN", "sass4 NCHW", "cuda NCHW",
                        "cudnn (benchmark)", "torch default", "cudnn best") if any(c in r["ms"] for r in res)]
    print(f"# {data['info'].get('device')}  torch {data['info'].get('torch')}  cuDNN {data['info'].get('cudnn')}")
    print("# effective TFLOPS (2*N*C*H*W*K*9 / time), FP32 everywhere (no TF32)")
    short = {"sass main": "sassMain", "sass CHWN": "sassCHWN", "sass NCHW": "sassNCHW", "cuda NCHW": "cudaNCHW",
             "sass4 gemm": "f4GEMM", "sass4 CHWN": "f4CHWN", "sass4 NCHW": "f4NCHW",
             "cudnn (benchmark)": "torchBM", "torch default": "torchDef", "cudnn best": "cudnnBest"}
    if any("sass4 CHWN" in r["ms"] for r in res):
        print("# sass* = F(2x2,3x3) fused SASS kernel, f4* = F(4x4,3x3) non-fused (f4GEMM: its SASS GEMM alone); the "
              "ratios use the algorithm conv2d's algo='auto' picks (api.choose_algo), named after them")
    ref_col = "cudnn best" if "cudnn best" in cols else "cudnn (benchmark)"
    print(f"# ratios against {ref_col}: torchBM = torch conv2d, cudnn.benchmark=True; cudnnBest = fastest "
          f"cuDNN algorithm run directly (FMA math), its name last")
    head = f"{'config':<11}" + "".join(f"{short[c]:>10}" for c in cols) + f"{'CHWN/cuDNN':>11}{'NCHW/cuDNN':>11}"
    if anc:
        head += f"{'anchor best (H200)':>26}"
    print(head)
    ratios_chwn, ratios_nchw = [], []
    for r in res:
        tf = {c: r["gflop"] / r["ms"][c] if r["ms"].get(c) and r["ms"][c] == r["ms"][c] else float("nan")
              for c in cols}
        line = f"{r['config']:<11}" + "".join(f"{tf[c]:>10.2f}" for c in cols)
        base = tf.get(ref_col, float("nan"))
        f4 = r.get("algo_auto") == "f4" and "sass4 CHWN" in r["ms"]
        rc = tf.get("sass4 CHWN" if f4 else "sass CHWN", float("nan")) / base
        rn = tf.get("sass4 NCHW" if f4 else "sass NCHW", float("nan")) / base
        if rc == rc:
            ratios_chwn.append(rc)
        if rn == rn:
            ratios_nchw.append(rn)
        line += f"{rc:>11.2f}{rn:>11.2f}" + ((" f4" if f4 else " f2") if "algo_auto" in r else "")
        if r.get("cudnn_best_algo"):
            line += f"  {r['cudnn_best_algo']}"
        if anc:
            layer, n = r["config"].split("/N")
            a = anc.get((layer, int(n)), {})
            if a:
                best = max(a, key=a.get)
                line += f"{a[best]:>9.2f} {best[:16]:>16}"
        print(line)

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
    print(f"geometric mean of sass/cudnn: CHWN (transforms + main kernels) {gm(ratios_chwn):.3f}, "
          f"NCHW (with the layout transposes) {gm(ratios_nchw):.3f}; min CHWN {min(ratios_chwn, default=float('nan')):.3f}",
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
            ax.bar(xs + k * wdt, [r["gflop"] / r["ms"][c] if r["ms"].get(c) else 0 for r in res], wdt, label=c)
        ax.set_xticks(xs + 0.4 - wdt / 2)
        ax.set_xticklabels([r["config"] for r in res], rotation=60, fontsize=8)
        ax.set_ylabel("effective TFLOPS (2NCHWK9 / t)")
        ax.set_title(f"Winograd FP32 (sass: F(2x2,3x3), f4: F(4x4,3x3)), {data['info'].get('device')}")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(plot, dpi=120)
        log(f"[report] plot written to {plot}")


def cmd_report(args) -> int:
    with open(args.json) as f:
        data = json.load(f)
    if "ablation" in data:
        render_ablation(data)
    else:
        render(data, plot=args.plot)
    return 0
