"""python -m kernels_sass.winograd model [--fit | --fit-on RUN ...] [--write] [BENCH.json ...]
python -m kernels_sass.winograd model --shape N C H W K [--layout CHWN] [--gpu H200 | ARCH,SMS,MHZ,GBS]

The cost model of cost.py against `bench` runs (default: results/h100_bench_all.json and
results/h200_bench_all.json). Without --fit it checks the stored coefficients
(data/cost_model.json): for each run, layout and layer, every algorithm's predicted and measured
time, the one algo="auto" takes, the fastest measured and what auto's choice loses against it.
--fit refits the coefficients to the runs' timings (non-negative least squares, each launch
measured alone first, then each whole convolution's rest) and prints how well each part fits;
--fit-on refits to other runs than those it checks (fit on one GPU, check on the other); --write
stores the coefficients. --shape prints each algorithm's predicted time for one shape and what
auto takes, on this GPU or the one --gpu describes.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from . import cost
from .api import candidates
from .cost import COMPONENTS, WHOLE, Gpu
from .plan import Shape
from .workloads import BENCH_CASE, read_run

RESULTS = Path(__file__).parent / "results"
DEFAULT_RUNS = (RESULTS / "h100_bench_all.json", RESULTS / "h200_bench_all.json")


@dataclass(frozen=True)
class Row:
    run: str
    config: str
    s: Shape
    gpu: Gpu
    us: dict            # the bench row's times, microseconds
    parts: dict         # the splits it ran: algorithm (f4fused: also "f4fused CHWN") -> parts


def gpu_of(info: dict) -> Gpu:
    """The run's GPU: its recorded attributes, else NVIDIA's figures for its name."""
    if "memory_bandwidth_gbs" in info:
        return Gpu(info.get("arch", "sm_90"), info["sms"], info["max_sm_clock_mhz"], info["memory_bandwidth_gbs"])
    if info["device"] not in cost.KNOWN_GPUS:
        raise SystemExit(f"model: {info['device']!r}: no memory bandwidth recorded in the run, and not one of "
                         f"{', '.join(cost.KNOWN_GPUS)}")
    return cost.KNOWN_GPUS[info["device"]]


def load(paths) -> list[Row]:
    rows = []
    for p in paths:
        data = read_run(str(p), "model")
        g = gpu_of(data["info"])
        for r in data["results"]:
            s = Shape(r["N"], r["C"], r["H"], r["W"], r["K"])
            parts = {a: r[f"{a}_parts"] for a in ("f4", "f4tc", "f4fused") if f"{a}_parts" in r}
            if "f4fused" in parts:
                parts["f4fused CHWN"] = r.get("f4fused_parts_chwn", parts["f4fused"])
            rows.append(Row(Path(p).name, r["config"], s, g, {k: v * 1e3 for k, v in r["ms"].items()}, parts))
    return rows


def fit_signed_last(A: np.ndarray, b: np.ndarray) -> np.ndarray:
    """nnls with the last coefficient (a constant) of either sign: as two columns, +1 and -1."""
    x = nnls(np.hstack([A, -A[:, -1:]]), b)
    return np.append(x[:-2], x[-2] - x[-1])


def nnls(A: np.ndarray, b: np.ndarray, iters: int = 200) -> np.ndarray:
    """min ||A x - b|| with x >= 0 (Lawson and Hanson's active set method)."""
    n = A.shape[1]
    x, free = np.zeros(n), np.zeros(n, bool)
    for _ in range(iters):
        grad = A.T @ (b - A @ x)
        if free.all() or grad[~free].max(initial=0) <= 1e-12 * max(1.0, np.abs(grad).max()):
            break
        free[np.argmax(np.where(free, -np.inf, grad))] = True
        while True:
            z = np.zeros(n)
            z[free] = np.linalg.lstsq(A[:, free], b, rcond=None)[0]
            if (z[free] > 0).all():
                x = z
                break
            neg = free & (z <= 0)
            alpha = np.min(x[neg] / (x[neg] - z[neg]))
            x = x + alpha * (z - x)
            free &= x > 1e-15
            x[~free] = 0.0
    return x


def _errors(pred: np.ndarray, meas: np.ndarray) -> tuple[float, float]:
    e = pred / meas - 1
    return float(np.sqrt(np.mean(e ** 2))), float(np.abs(e).max())


def fit(rows: list[Row]) -> tuple[dict, list[tuple[str, int, float, float]]]:
    """The coefficients and, for each part, (name, points, rms and max relative error)."""
    coef, quality = {}, []
    for name, part in COMPONENTS.items():
        use = [r for r in rows if part.measured in r.us]
        A = np.array([part.features(r.s, r.gpu, part.algo, r.parts.get(part.algo)) for r in use])
        b = np.array([r.us[part.measured] for r in use])
        coef[name] = [float(v) for v in nnls(A, b)]
        quality.append((name, len(use), *_errors(A @ np.array(coef[name]), b)))
    for algo, lay in cost.whole_names():
        parts, rest = WHOLE[algo][lay]
        use = [r for r in rows if rest.measured in r.us]
        split = [r.parts.get(f"{algo} {lay}", r.parts.get(algo)) for r in use]
        known = np.array([sum(cost.component(n, r.s, r.gpu, algo, p, coef) for n in parts) for r, p in zip(use, split)])
        A = np.array([rest.features(r.s, r.gpu, algo, p) for r, p in zip(use, split)])
        b = np.array([r.us[rest.measured] for r in use])
        # the rest's constant may be negative: launched one after the other, the components'
        # starts and tails overlap, so the whole can take less than their sum
        coef[f"{algo} {lay}"] = [float(v) for v in fit_signed_last(A, b - known)]
        quality.append((f"{algo} {lay} (whole)", len(use), *_errors(known + A @ np.array(coef[f"{algo} {lay}"]), b)))
    return coef, quality


def measured_algos(r: Row, layout: str) -> dict[str, float]:
    return {a: r.us[f"{k} {layout}"] for a, k in BENCH_CASE.items() if f"{k} {layout}" in r.us}


def check(rows: list[Row], coef: dict | None = None, arch: str | None = None) -> list[dict]:
    """For each row and layout: predicted and measured times, auto's choice among the algorithms
    the run measured (api.candidates of them; on a GPU of `arch` if given: "sm_80" has no fused
    F(4x4,3x3) kernel and no tensor-core GEMM), the fastest, the loss."""
    out = []
    for r in rows:
        gpu = replace(r.gpu, arch=arch) if arch else r.gpu
        for layout in ("NCHW", "CHWN"):
            meas = measured_algos(r, layout)
            cands = [a for a in candidates(r.s, layout, gpu) if a in meas]
            if not cands:
                continue
            # the splits the run measured (conv2d's at the time)
            pred = {a: cost.predict(r.s, a, layout, gpu, coef, r.parts.get(f"{a} {layout}", r.parts.get(a)))
                    for a in cands}
            pick = min(cands, key=lambda a: pred[a])
            best = min(cands, key=lambda a: meas[a])
            out.append({"run": r.run, "config": r.config, "layout": layout, "pred": pred, "meas": meas,
                        "auto": pick, "best": best, "loss": meas[pick] / meas[best] - 1})
    return out


def print_check(result: list[dict]) -> None:
    algos = list(BENCH_CASE)
    for run in dict.fromkeys(c["run"] for c in result):
        for layout in ("NCHW", "CHWN"):
            sel = [c for c in result if c["run"] == run and c["layout"] == layout]
            if not sel:
                continue
            print(f"\n{run}, {layout}: predicted / measured us (model error)")
            print(f"{'layer':12s} " + " ".join(f"{a:>24s}" for a in algos) + f" {'auto':>8s} {'best':>8s} {'loss':>6s}")
            for c in sel:
                cells = []
                for a in algos:
                    if a in c["pred"]:
                        p, m = c["pred"][a], c["meas"][a]
                        cells.append(f"{p:8.1f} / {m:7.1f} ({100 * (p / m - 1):+4.0f}%)")
                    else:
                        cells.append(f"{'-':>24s}")
                print(f"{c['config']:12s} " + " ".join(cells) + f" {c['auto']:>8s} {c['best']:>8s} {100 * c['loss']:5.1f}%")
            right = sum(c["auto"] == c["best"] for c in sel)
            mean = math.exp(sum(math.log1p(c["loss"]) for c in sel) / len(sel)) - 1
            print(f"auto takes the fastest on {right} of {len(sel)} layers; its time against the fastest's: "
                  f"geometric mean +{100 * mean:.1f}%, worst +{100 * max(c['loss'] for c in sel):.1f}%")


def parse_gpu(text: str) -> Gpu:
    """A GPU for --gpu: a name of cost.KNOWN_GPUS ("H100", "H200": any unique part of one), or
    ARCH,SMS,MHZ,GBS (e.g. sm_90,114,1755,2039 for an H100 PCIe)."""
    parts = text.split(",")
    if len(parts) == 4:
        try:
            return Gpu(parts[0], int(parts[1]), float(parts[2]), float(parts[3]))
        except ValueError:
            pass
    else:
        named = [g for name, g in cost.KNOWN_GPUS.items() if text.lower() in name.lower()]
        if len(named) == 1:
            return named[0]
    raise SystemExit(f"model --gpu {text!r}: one of {', '.join(cost.KNOWN_GPUS)} (or a unique part of the name), "
                     f"or ARCH,SMS,MHZ,GBS such as sm_90,114,1755,2039")


def print_shape(s: Shape, layout: str, gpu: Gpu) -> None:
    """Each algorithm's predicted time for s on gpu, and auto's choice."""
    cands = candidates(s, layout, gpu)
    print(f"{s}, {layout}, on {gpu}:")
    for algo in BENCH_CASE:
        if algo not in cands:
            print(f"  {algo:8s} {'-':>9s}   (not for this shape or GPU)")
            continue
        split = cost.f4fused_parts(s, layout, gpu) if algo == "f4fused" else None
        note = f", channels in {split} parts" if split and split > 1 else ""
        print(f"  {algo:8s} {cost.predict(s, algo, layout, gpu):9.1f} us{note}")
    print(f"auto: {cost.choose(s, layout, gpu, cands) if cands else 'none (the SASS kernels do not take this shape)'}")


def cmd_model(args) -> int:
    if args.shape:
        if args.gpu:
            gpu = parse_gpu(args.gpu)
        else:
            from .api import this_gpu
            try:
                gpu = this_gpu()
            except Exception as e:          # no driver or no GPU: say so, as the other commands do
                raise SystemExit(f"model --shape: no GPU to describe ({type(e).__name__}: {e}); name one with --gpu")
        print_shape(Shape(*args.shape), args.layout, gpu)
        return 0
    paths = args.runs or [str(p) for p in DEFAULT_RUNS]
    rows = load(paths)
    coef = None
    if args.fit or args.fit_on:
        fit_paths = args.fit_on or paths
        coef, quality = fit(load(fit_paths))
        print(f"fitted on {', '.join(Path(p).name for p in fit_paths)}: relative error of each part")
        print(f"{'part':28s} {'points':>6s} {'rms':>7s} {'max':>7s}  coefficients")
        for name, n, rms, mx in quality:
            key = name.replace(" (whole)", "")
            print(f"{name:28s} {n:6d} {100 * rms:6.1f}% {100 * mx:6.1f}%  " + " ".join(f"{v:.4g}" for v in coef[key]))
        if args.write:
            cost.MODEL_FILE.parent.mkdir(exist_ok=True)
            cost.MODEL_FILE.write_text(json.dumps({
                "fitted_on": [Path(p).name for p in fit_paths],
                "fit": {name: {"points": n, "rms": round(rms, 4), "max": round(mx, 4)} for name, n, rms, mx in quality},
                "coefficients": coef}, indent=1) + "\n")
            cost.coefficients.cache_clear()
            print(f"wrote {cost.MODEL_FILE}")
    print_check(check(rows, coef))
    return 0
