"""The F(4x4,3x3) ablation: each switch of f4tc's NCHW path and of the fused kernel turned back
alone, timed in one process against the default on the same layers (a row a switch, as the
ablation of Yan, Wang and Chu, PPoPP'20, section 6), each variant's output checked against the
default's.

    python -m kernels_sass.winograd bench --ablation --algo f4tc f4fused [--json F]

f4tc: the whole NCHW convolution (filter and input transforms, GEMM, output transform), since its
switches move launches as well as the GEMM's code; f4fused: its main kernel (the switches are
f4fused's generator constants; the filter transform does not change). Timing as `bench`
(bench.timeit: CUDA graphs, median of 5 rounds).
"""
from __future__ import annotations

import json

from . import f4, f4fused_placement
from .bench import bench_info, timeit
from .plan import Unsupported
from .report import render_ablation4
from .workloads import (ABLATION4_CONFIGS, ABLATION4_FUSED_CONFIGS, TOL, F4tcSwitch, f4fused_ablation_variants,
                        f4tc_ablation_variants, log, resnet_configs)

ALGOS = ("f4tc", "f4fused")
PASSED = ("identical", "within 1e-5")
NOT_RUN = "not run"


def selected(tags, wanted) -> list:
    """The default (first) and the tags containing one of `wanted` (all where none given)."""
    return [t for i, t in enumerate(tags) if i == 0 or not wanted or any(w in t for w in wanted)]


def configs(prefixes, algo: str) -> list:
    """(name, Shape) of the layers: those whose name starts with a prefix given, else the ablation's."""
    default = ABLATION4_CONFIGS if algo == "f4tc" else ABLATION4_FUSED_CONFIGS
    return [(n, s) for n, s in resnet_configs()
            if (any(n.startswith(p) for p in prefixes) if prefixes else n in default)]


def compare(y, ref) -> tuple[str, float]:
    """("identical" | "within 1e-5" | "DIFFERS", ||y - ref|| / ||ref||); no reference (the
    default failed): RuntimeError."""
    import torch
    if ref is None:
        raise RuntimeError("no output of the default to compare with")
    if torch.equal(y, ref):
        return "identical", 0.0
    rel = float(torch.linalg.vector_norm((y - ref).double()) / torch.linalg.vector_norm(ref.double()))
    return ("within 1e-5" if rel <= TOL else "DIFFERS"), rel


def f4tc_call(v: F4tcSwitch, p: f4.Plan, x, w, y, ws, lib):
    """One NCHW convolution as the variant runs it, on torch's current stream."""
    import torch
    from . import api
    s = p.s

    def run():
        stream = torch.cuda.current_stream().cuda_stream      # (inside a graph capture: its stream)
        if v.transposes:        # NCHW through CHWN (the KCRS filters read in place)
            api.transpose(x, ws.xc, s.N, s.C * s.H * s.W, stream)
            f4.conv("sass", ws.xc, w, ws.yk, p, "CHWN", ws, lib, stream, w_layout="NCHW")
            api.transpose(ws.yk, y, s.K * s.H * s.W, s.N, stream)
        else:
            f4.conv("sass", x, w, y, p, "NCHW", ws, lib, stream)
    return run


def _failed(row: dict, e: Exception) -> None:
    """The row of a variant that raised: no time, the error as its output."""
    log(f"[ablation4] {row['config']} {row['algo']} {row['variant']}: {type(e).__name__}: {e}")
    row.update(ms=float("nan"), output=f"error: {type(e).__name__}: {e}", rel_diff=float("nan"))


def _add(rows: list, row: dict) -> None:
    """Append the row with its time against the first row's (the default's), and log it."""
    row["vs_default"] = row["ms"] / (rows[0]["ms"] if rows else row["ms"])
    rows.append(row)
    log(f"[ablation4] {row['config']:<10} {row['algo']:<7} {row['variant']:<20} {row['ms']:8.4f} ms "
        f"{row['vs_default']:6.3f}x  {row['output']}")


def ablation_f4tc(name, s, variants, reps: int) -> list[dict]:
    import torch
    from . import api
    from .device import Lib
    sets = 3
    xs = [torch.randn((s.N, s.C, s.H, s.W), device="cuda") for _ in range(sets)]
    wts = [torch.randn((s.K, s.C, 3, 3), device="cuda") / (3 * s.C ** 0.5) for _ in range(sets)]
    ys = [torch.empty((s.N, s.K, s.H, s.W), device="cuda") for _ in range(sets)]
    lib = Lib(xs[0])
    parts = api.f4_plan(s, 0, True).parts
    rows, ref = [], None
    for v in variants:
        p = f4.Plan(s, parts, v.gemm)
        row = {"config": name, "algo": "f4tc", "variant": v.tag, "what": v.what, "parts": parts}
        try:
            f4.generator(p.gemm, v.gemm)       # a GEMM variant the shape cannot take: Unsupported
            wss = [api.Workspace(xc=torch.empty((s.C, s.H, s.W, s.N), device="cuda"),
                                 yk=torch.empty((s.K, s.H, s.W, s.N), device="cuda")) if v.transposes
                   else api.Workspace() for _ in range(sets)]
            calls = [f4tc_call(v, p, xs[i], wts[i], ys[i], wss[i], lib) for i in range(sets)]
            with f4fused_placement.constants(v.constants, f4):
                ys[0].fill_(float("nan"))                      # poisoned: an output left unwritten is NaN
                calls[0]()
                torch.cuda.synchronize()
                if not rows:                                   # the default: the reference
                    ref = ys[0].clone()
                row["output"], row["rel_diff"] = compare(ys[0], ref)
                row["ms"], _ = timeit(lambda i: calls[i](), sets, reps=reps)
            del wss, calls
        except Unsupported as e:             # not a failure: the shape does not take the variant
            log(f"[ablation4] {name} f4tc {v.tag}: not run: {e}")
            row.update(ms=float("nan"), output=f"{NOT_RUN}: {e}", rel_diff=float("nan"))
        except Exception as e:
            _failed(row, e)
        _add(rows, row)
        torch.cuda.empty_cache()
    return rows


def ablation_f4fused(name, s, variants: dict, reps: int) -> list[dict]:
    import torch
    parts, _, x, u, y = f4fused_placement.setup(s)
    rows, ref = [], None
    for tag, values in variants.items():
        row = {"config": name, "algo": "f4fused", "variant": tag,
               "what": ", ".join(f"{k} {v}" for k, v in values.items()) or "f4fused as conv2d runs it",
               "parts": parts}
        try:
            with f4fused_placement.constants(values):
                k, f = f4fused_placement.kernel(s, parts)
            run = f4fused_placement.launcher(f, x, u, y, k)
            y.fill_(float("nan"))
            run()
            torch.cuda.synchronize()
            if not rows:
                ref = y.clone()
            row["output"], row["rel_diff"] = compare(y, ref)
            row["ms"], _ = timeit(run, 1, reps=reps)
        except Exception as e:
            _failed(row, e)
        _add(rows, row)
    del x, u, y
    torch.cuda.empty_cache()
    return rows


def cmd_ablation4(args) -> int:
    """`bench --ablation --algo f4tc f4fused`: the table of each algorithm's switches."""
    info = bench_info()
    info["ablation_method"] = (
        "each variant turns back one switch of the default; f4tc: the whole NCHW convolution (3 input sets), "
        "f4fused: its main kernel (1 input set); time as bench (median of 5 rounds of a CUDA graph); output: "
        "the variant's y on the same input against the default's (identical, or within 1e-5 relative: "
        "||y - y_default|| / ||y_default||)")
    rows = []
    if "f4tc" in args.algo:
        tc = f4tc_ablation_variants()
        tags = selected([v.tag for v in tc], args.variants)
        for name, s in configs(args.configs, "f4tc"):
            rows += ablation_f4tc(name, s, [v for v in tc if v.tag in tags], args.reps)
    if "f4fused" in args.algo:
        fz = f4fused_ablation_variants()
        tags = selected(list(fz), args.variants)
        for name, s in configs(args.configs, "f4fused"):
            rows += ablation_f4fused(name, s, {t: fz[t] for t in tags}, args.reps)
    out = {"info": info, "ablation4": rows}
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)
    render_ablation4(out)
    return 1 if any(not r["output"].startswith(PASSED + (NOT_RUN,)) for r in rows) else 0
