"""python -m kernels_sass.winograd check|bench|report|sass|sim

  check   correctness of every implementation on the 16 ResNet configurations and odd shapes:
          fresh random data, outputs poisoned with NaN before each run, relative error
          ||y - ref|| / ||ref|| against a float64 reference (torch float64 conv2d on the GPU),
          limit 1e-5.
  bench   in one process: the SASS kernel, the CUDA-C reference, cuDNN FP32 (torch,
          allow_tf32=False, benchmark=True: cuDNN's own choice of its fastest algorithm),
          PyTorch's default conv2d; effective TFLOPS = 2*N*C*H*W*K*9 / time, ratio to cuDNN;
          JSON (--json) and a plot (--plot).
  report  re-render a bench JSON (here, no GPU): table, anchors from ../shared/anchors, plot.
  sass    print the generated SASS of one shape.
  sim     run the generated SASS in the CPU simulator on one shape and compare with NumPy.

Progress goes to stderr; tables to stdout.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import os
import statistics
import sys
import time
from dataclasses import replace

import numpy as np

from . import reference as ref
from .sassgen import Options, Shape

RESNET = {"Conv2": (64, 56, 64), "Conv3": (128, 28, 128), "Conv4": (256, 14, 256), "Conv5": (512, 7, 512)}
BATCHES = (32, 64, 96, 128)
ODD = [Shape(1, 3, 5, 7, 5), Shape(33, 20, 9, 11, 70), Shape(7, 1, 1, 1, 1), Shape(40, 12, 6, 13, 130),
       Shape(130, 9, 2, 3, 64), Shape(64, 256, 15, 15, 200), Shape(2, 64, 56, 56, 64), Shape(96, 72, 28, 28, 40)]
SMOKE = [Shape(33, 20, 9, 11, 70), Shape(1, 3, 1, 2, 5), Shape(32, 16, 6, 6, 64)]
TOL = 1e-5
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ANCHORS = os.path.join(os.path.dirname(REPO), "shared", "anchors")


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def resnet_configs():
    out = []
    for layer, (c, hw, k) in RESNET.items():
        for n in BATCHES:
            out.append((f"{layer}/N{n}", Shape(n, c, hw, hw, k)))
    return out


def flops(s: Shape) -> int:
    return ref.conv_flops(s.N, s.C, s.H, s.W, s.K)


# ---- check -------------------------------------------------------------------------------------
def cmd_check(args) -> int:
    import torch
    from . import api
    from .sassgen import Options
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda")
    configs = resnet_configs() + [(f"odd/{s.N}x{s.C}x{s.H}x{s.W}x{s.K}", s) for s in ODD]
    if args.quick:
        configs = configs[::4] + configs[16:]
    impls = args.impl or ["sass", "cuda", "direct"]
    algos = args.algo or ["f2", "f4"]
    opts = _opts(args)
    gen = torch.Generator(device=dev)
    gen.manual_seed(int(time.time()) if args.seed is None else args.seed)
    rows, failed = [], 0
    for name, s in configs:
        x = torch.randn((s.N, s.C, s.H, s.W), device=dev, generator=gen)
        w = torch.randn((s.K, s.C, 3, 3), device=dev, generator=gen)
        want = torch.nn.functional.conv2d(x.double(), w.double(), padding=1)
        wn = float(torch.linalg.vector_norm(want))
        for impl, algo in [(i, a) for i in impls for a in (["-"] if i == "direct" else algos)]:
            label = impl if impl == "direct" else f"{impl}/{algo}"
            for layout in (["NCHW", "CHWN"] if impl == "sass" and args.chwn else ["NCHW"]):
                t0 = time.perf_counter()
                kw = {} if impl == "direct" else {"algo": algo}
                try:
                    if layout == "NCHW":
                        y = torch.full((s.N, s.K, s.H, s.W), float("nan"), device=dev)
                        ws = api.Workspace(yk=torch.full((s.K, s.H, s.W, s.N), float("nan"), device=dev))
                        api.conv2d(x, w, impl, out=y, workspace=ws, opts=opts, **kw)
                        got = y
                    else:
                        xc = x.permute(1, 2, 3, 0).contiguous()
                        wc = w.permute(1, 2, 3, 0).contiguous()
                        y = torch.full((s.K, s.H, s.W, s.N), float("nan"), device=dev)
                        api.conv2d(xc, wc, impl, layout="CHWN", out=y, opts=opts, **kw)
                        got = y.permute(3, 0, 1, 2)
                    torch.cuda.synchronize()
                    nan = int(torch.isnan(got).sum())
                    # a split kernel's tiles start at zero, not NaN: an output none of its parts
                    # added to stays exactly zero (a computed one is 0.0 only where the exact
                    # value is within rounding of it: one in millions, |want| ~1e-7 of the rms)
                    rms = wn / math.sqrt(want.numel())
                    zeros = int(((got == 0) & (want.abs() > 1e-4 * rms)).sum())
                    err = float(torch.linalg.vector_norm(got.double() - want)) / wn
                    maxe = float((got.double() - want).abs().max()) / float(want.abs().max())
                    ok = nan == 0 and zeros == 0 and err <= TOL
                    status = "ok" if ok else f"FAIL ({zeros} outputs 0)" if zeros else "FAIL"
                except Exception as e:       # a launch error is a failure of this row, not of the run
                    nan, err, maxe, ok, status = -1, float("nan"), float("nan"), False, f"ERROR {type(e).__name__}: {e}"
                    if "illegal" in str(e).lower() or "launch failed" in str(e).lower():
                        rows.append((name, label, layout, nan, err, maxe, status))
                        log(f"[check] {name} {label} {layout}: {status} (context lost, stopping)")
                        _print_check(rows)
                        return 2
                failed += not ok
                rows.append((name, label, layout, nan, err, maxe, status))
                log(f"[check] {name:<24} {label:<8} {layout}: rel err {err:.2e} nan {nan} {status} "
                    f"({time.perf_counter() - t0:.2f}s)")
    _print_check(rows)
    print(f"{len(rows) - failed}/{len(rows)} passed (relative error <= {TOL:g}, no NaN, no output left 0)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump([dict(zip(("config", "impl", "layout", "nan", "rel_err", "max_rel_err", "status"), r))
                       for r in rows], f, indent=1)
    return 0 if failed == 0 else 1


def _print_check(rows):
    print(f"{'config':<26}{'impl':<10}{'layout':<7}{'rel err':>10}{'max err':>10}{'NaN':>6}  status")
    for name, impl, layout, nan, err, maxe, status in rows:
        print(f"{name:<26}{impl:<10}{layout:<7}{err:>10.2e}{maxe:>10.2e}{nan:>6}  {status}")


# ---- timing --------------------------------------------------------------------------------------
def timeit(fn, sets: int, reps: int = 30, rounds: int = 5, graph: bool = True) -> tuple[float, str]:
    """Milliseconds of one call: median over `rounds` of (events around reps calls) / reps;
    calls cycle through `sets` input sets (fn(i)). Captured in a CUDA graph when possible,
    so that launch overhead does not count."""
    import torch
    for i in range(2 * sets):          # warm-up: module loads, cuDNN autotuning, allocations
        fn(i % sets)
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    fn(0)
    b.record()
    b.synchronize()
    one = a.elapsed_time(b)
    if one * reps > 60:                # slow algorithms: about 60 ms a round
        reps = max(sets, int(60 / max(one, 1e-3)) // sets * sets)
        rounds = 3
    how = "loop"
    g = None
    if graph:
        try:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                fn(0)
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for i in range(reps):
                    fn(i % sets)
            g.replay()
            torch.cuda.synchronize()
            how = "graph"
        except Exception as e:
            log(f"[bench] graph capture failed ({type(e).__name__}: {e}); timing launches in a loop")
            g = None
            torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        if g is not None:
            g.replay()
        else:
            for i in range(reps):
                fn(i % sets)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / reps)
    return statistics.median(times), how


_CUDNN = None


# nvidia-smi's clocks_event_reasons bits that mean the SM clock was cut (not idle or the
# application clock): HW slowdown, SW thermal, HW thermal, HW power brake
SLOWDOWN_BITS = {0x8: "HW slowdown", 0x20: "SW thermal slowdown", 0x40: "HW thermal slowdown",
                 0x80: "HW power brake slowdown"}


def gpu_state() -> dict:
    """SM clock, temperature and the clock-event reasons now (nvidia-smi), {} where unavailable."""
    import subprocess
    try:
        q = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,temperature.gpu,clocks_event_reasons.active",
                            "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=20)
        clk, temp, reasons = [v.strip() for v in q.stdout.strip().splitlines()[0].split(",")]
        bits = int(reasons, 16)
        return {"sm_clock_mhz": float(clk), "temperature_c": float(temp), "clock_event_reasons": reasons,
                "slowdown": [name for bit, name in SLOWDOWN_BITS.items() if bits & bit]}
    except Exception:
        return {}


def cmd_bench(args) -> int:
    import torch
    from . import api
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    info = {"device": props.name, "sms": props.multi_processor_count, "torch": torch.__version__,
            "cudnn": torch.backends.cudnn.version(), "time": time.strftime("%Y-%m-%d %H:%M:%S"),
            "method": "median of 5 rounds of a CUDA graph of 30 calls cycling through 3 input sets; "
                      "effective TFLOPS = 2*N*C*H*W*K*9/time"}
    try:
        import subprocess
        q = subprocess.run(["nvidia-smi", "--query-gpu=clocks.max.sm,clocks.sm", "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=20).stdout.strip().split(",")
        info["max_sm_clock_mhz"], info["sm_clock_mhz_at_start"] = float(q[0]), float(q[1])
    except Exception as e:
        info["max_sm_clock_mhz"] = 1980.0
        log(f"[bench] nvidia-smi: {e}; assuming 1980 MHz")
    info["gpu_state_at_start"] = gpu_state()
    log(f"[bench] {info}")
    opts = _opts(args)
    configs = resnet_configs()
    if args.configs:
        configs = [c for c in configs if any(c[0].startswith(p) for p in args.configs)]
    if args.ablation:
        return bench_ablation(args, configs, info)
    results = []
    for name, s in configs:
        sets = 3
        xs = [torch.randn((s.N, s.C, s.H, s.W), device=dev) for _ in range(sets)]
        wts = [torch.randn((s.K, s.C, 3, 3), device=dev) for _ in range(sets)]
        xcs = [x.permute(1, 2, 3, 0).contiguous() for x in xs]
        wcs = [w.permute(1, 2, 3, 0).contiguous() for w in wts]
        us = [torch.empty((s.U_ROWS, 16, s.Kpad), device=dev) for _ in range(sets)]
        yks = [torch.empty((s.K, s.H, s.W, s.N), device=dev) for _ in range(sets)]
        ys = [torch.empty((s.N, s.K, s.H, s.W), device=dev) for _ in range(sets)]
        wss = [api.Workspace(xc=torch.empty((s.C, s.H, s.W, s.N), device=dev), u=us[i], yk=yks[i]) for i in range(sets)]
        row = {"config": name, "N": s.N, "C": s.C, "H": s.H, "W": s.W, "K": s.K, "gflop": flops(s) / 1e9, "ms": {}, "how": {},
               "sass_options": api.sass_options(s, opts).tag()}

        def stream():
            return torch.cuda.current_stream().cuda_stream

        for i in range(sets):   # the transformed filters for the main-kernel-only timings
            api.filter_transform(wcs[i], us[i], s, "CHWN", stream())
        cases = {}
        if "sass" in args.impl and "f2" in args.algo:
            cases["sass main"] = lambda i: api.main_kernel("sass", xcs[i], us[i], yks[i], s, opts, stream())
            cases["sass CHWN"] = lambda i: api.conv2d(xcs[i], wcs[i], "sass", layout="CHWN", out=yks[i], opts=opts, algo="f2",
                                                      workspace=api.Workspace(u=us[i]))
            cases["sass NCHW"] = lambda i: api.conv2d(xs[i], wts[i], "sass", out=ys[i], opts=opts, workspace=wss[i],
                                                      algo="f2")
        if "sass" in args.impl and "f4" in args.algo:
            from . import f4
            p4 = api.f4_plan(s, args.parts)
            row["f4_parts"] = p4.parts
            row["f4_options"] = p4.options.tag() or "default"
            row["f4_gemm"] = [p4.gemm.C, p4.gemm.K, p4.gemm.T, p4.gemm.parts]
            ws4 = [api.Workspace() for _ in range(sets)]
            for i in range(sets):      # the transforms, for the GEMM-only timings
                api.conv2d(xcs[i], wcs[i], "sass", layout="CHWN", out=yks[i], workspace=ws4[i], algo="f4",
                           parts=p4.parts)
            cases["sass4 gemm"] = lambda i: f4.gemm("sass", ws4[i].u4, ws4[i].v4, ws4[i].m4, p4, stream())
            cases["f4 filter transform"] = lambda i: f4.filter_transform(wcs[i], ws4[i].u4, p4, "CHWN", stream())
            cases["f4 input transform"] = lambda i: f4.input_transform(xcs[i], ws4[i].v4, p4, stream())
            cases["f4 output transform"] = lambda i: f4.output_transform(ws4[i].m4, yks[i], p4, stream())
            cases["sass4 CHWN"] = lambda i: api.conv2d(xcs[i], wcs[i], "sass", layout="CHWN", out=yks[i],
                                                       workspace=ws4[i], algo="f4", parts=p4.parts)
            cases["sass4 NCHW"] = lambda i: api.conv2d(xs[i], wts[i], "sass", out=ys[i], algo="f4", parts=p4.parts,
                                                       workspace=api.Workspace(xc=wss[i].xc, yk=wss[i].yk, u4=ws4[i].u4,
                                                                               v4=ws4[i].v4, m4=ws4[i].m4))
        row["algo_auto"] = api.choose_algo(s)
        if "cuda" in args.impl:
            cases["cuda main"] = lambda i: api.main_kernel("cuda", xcs[i], us[i], yks[i], s, opts, stream())
            cases["cuda NCHW"] = lambda i: api.conv2d(xs[i], wts[i], "cuda", out=ys[i], workspace=wss[i], algo="f2")
        cases["filter transform"] = lambda i: api.filter_transform(wcs[i], us[i], s, "CHWN", stream())

        def cudnn(i):
            torch.backends.cudnn.benchmark = True
            return torch.nn.functional.conv2d(xs[i], wts[i], padding=1)

        def torch_default(i):
            torch.backends.cudnn.benchmark = False
            return torch.nn.functional.conv2d(xs[i], wts[i], padding=1)
        cases["cudnn (benchmark)"] = cudnn
        cases["torch default"] = torch_default
        row["cudnn_algos"] = {}
        if not args.no_cudnn_algos:
            try:
                global _CUDNN
                if _CUDNN is None:
                    from .cudnn import Cudnn
                    torch.nn.functional.conv2d(xs[0], wts[0], padding=1)     # torch loads libcudnn
                    _CUDNN = Cudnn()
                    info["cudnn_direct"] = f"cuDNN {_CUDNN.version} through its C API (ctypes), FMA math"
                conv = _CUDNN.conv(s.N, s.C, s.H, s.W, s.K)
                want = torch.nn.functional.conv2d(xs[0].double(), wts[0].double(), padding=1)
                from .cudnn import ALGOS
                for algo, aname in enumerate(ALGOS):
                    size, status = conv.workspace(algo)
                    if size is None:
                        row["cudnn_algos"][aname] = status
                        continue
                    wsb = torch.empty(max(size, 16), dtype=torch.uint8, device=dev)

                    def fa(i, algo=algo, wsb=wsb, size=size):
                        conv.forward(algo, xs[i].data_ptr(), wts[i].data_ptr(), ys[i].data_ptr(), wsb.data_ptr(),
                                     size, torch.cuda.current_stream().cuda_stream)
                    try:
                        ys[0].fill_(float("nan"))
                        fa(0)
                        torch.cuda.synchronize()
                        err = float(torch.linalg.vector_norm(ys[0].double() - want) / torch.linalg.vector_norm(want))
                        if not err <= 1e-4:
                            row["cudnn_algos"][aname] = f"wrong result (rel err {err:.1e})"
                            continue
                        cases[f"cudnn {aname}"] = fa
                    except Exception as e:
                        row["cudnn_algos"][aname] = f"{type(e).__name__}: {e}"
            except Exception as e:
                log(f"[bench] per-algorithm cuDNN unavailable: {type(e).__name__}: {e}")
                row["cudnn_algos"]["error"] = f"{type(e).__name__}: {e}"
        for cname, fn in cases.items():
            try:
                ms, how = timeit(fn, sets, reps=args.reps, graph=not args.no_graph)
            except Exception as e:
                log(f"[bench] {name} {cname}: {type(e).__name__}: {e}")
                ms, how = float("nan"), f"error: {e}"
            torch.backends.cudnn.benchmark = False
            row["ms"][cname] = ms
            row["how"][cname] = how
            log(f"[bench] {name:<10} {cname:<18} {ms:8.4f} ms  {flops(s) / ms / 1e9:7.2f} TFLOPS ({how})")
        results.append(row)
        del xs, wts, xcs, wcs, us, yks, ys, wss
        torch.cuda.empty_cache()
    info["gpu_state_at_end"] = gpu_state()
    out = {"info": info, "options": opts.__dict__, "results": results}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    render(out, plot=args.plot)
    return 0


def bench_ablation(args, configs, info) -> int:
    """The SASS switches (main kernel only), and the main loop's FFMA issue rate by difference:
    the same layer with twice the channels costs (C/8 more iterations) x blocks; the extra
    time holds only main-loop work."""
    import torch
    from . import api
    dev = torch.device("cuda")
    variants = [Options()] + [o for o in ablation_variants()
                              if not args.variants or any(v in o.tag() for v in args.variants)]
    clk = info.get("max_sm_clock_mhz", 1980.0) * 1e6
    sms = info["sms"]
    rows = []
    for name, s in configs:
        sets = 3
        row = {"config": name, "ms": {}}
        for shape, label in ((s, ""), (Shape(s.N, 2 * s.C, s.H, s.W, s.K), " 2C")):
            xcs = [torch.randn((shape.C, shape.H, shape.W, shape.N), device=dev) for _ in range(sets)]
            us = [torch.randn((shape.U_ROWS, 16, shape.Kpad), device=dev) for _ in range(sets)]
            yks = [torch.empty((shape.K, shape.H, shape.W, shape.N), device=dev) for _ in range(sets)]
            ref0 = None
            for o in (variants if not label else [Options()]):
                def fn(i, o=o):
                    api.main_kernel("sass", xcs[i], us[i], yks[i], shape, o, torch.cuda.current_stream().cuda_stream)
                try:
                    yks[0].fill_(float("nan"))
                    fn(0)
                    torch.cuda.synchronize()
                    if o == Options():
                        ref0 = yks[0].clone()
                    same = bool(torch.equal(yks[0], ref0))   # scheduling only: bit-identical results
                    ms, _ = timeit(fn, sets, reps=args.reps)
                except Exception as e:
                    log(f"[ablation] {name} {o.tag()}{label}: {type(e).__name__}: {e}")
                    ms, same = float("nan"), False
                row["ms"][o.tag() + label] = ms
                row.setdefault("same", {})[o.tag() + label] = same
                log(f"[ablation] {name:<10} {o.tag() + label:<28} {ms:8.4f} ms  output {'identical' if same else 'DIFFERS'}")
            del xcs, us, yks
        d = row["ms"][Options().tag() + " 2C"] - row["ms"][Options().tag()]
        blocks = s.KB * s.NB * s.TH * s.TW
        ffma = blocks * 8 * (s.C // 8) * 1024
        row["loop_ffma_util"] = ffma / (sms * 4 * d * 1e-3 * clk) if d > 0 else float("nan")
        rows.append(row)
    out = {"info": info, "ablation": rows}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    render_ablation(out)
    return 0


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


# ---- report ---------------------------------------------------------------------------------
def anchors(path: str = ANCHORS) -> dict:
    """{(layer, N): {algo: tflops}} from the cuDNN anchor CSV (H200), if present."""
    fn = os.path.join(path, "cudnn9.19_h200_fp32_nchw.csv")
    out: dict = {}
    if not os.path.exists(fn):
        return out
    with open(fn) as f:
        lines = [l for l in f if not l.startswith("cudnn version") and not l.startswith("sgemm")]
    for r in csv.DictReader(lines):
        if r.get("status") == "ok":
            out.setdefault((r["layer"], int(r["N"])), {})[r["algo"]] = float(r["eff_tflops"])
    return out


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


def cmd_profile(args) -> int:
    """Launch the SASS main kernel of one shape (or, with --gemm, the F(4x4,3x3) GEMM alone) a
    few times on random data: a target for a profiler
    (ncu --kernel-name regex:wino --launch-skip 1 --launch-count 1 ...)."""
    import torch
    from . import api
    dev = torch.device("cuda")
    if args.gemm:
        from . import f4, gemmgen
        g, o = gemmgen.GemmShape(*args.gemm), gemm_options(args.gemm_options)
        try:
            gemmgen.Generator(g, o)
        except (gemmgen.Unsupported, ValueError) as e:
            raise SystemExit(f"profile --gemm {' '.join(map(str, args.gemm))}: {e}") from None
        u = torch.randn((g.operand_rows, g.K), device=dev)
        v = torch.randn((g.operand_rows, g.T), device=dev)
        m = torch.empty((g.parts * gemmgen.E, g.K, g.T), device=dev)
        for _ in range(args.launches):
            f4.launch_sass_gemm(g, u, v, m, o, torch.cuda.current_stream().cuda_stream)
        torch.cuda.synchronize()
        log(f"[profile] {args.launches} launches of {gemmgen.kernel_name(g, o)}")
        return 0
    if len(args.shape) != 5:
        raise SystemExit("profile: give the problem N C H W K, or --gemm C K T PARTS")
    s = Shape(*args.shape)
    xc = torch.randn((s.C, s.H, s.W, s.N), device=dev)
    u = torch.randn((s.U_ROWS, 16, s.Kpad), device=dev)
    yk = torch.empty((s.K, s.H, s.W, s.N), device=dev)
    for _ in range(args.launches):
        api.main_kernel("sass", xc, u, yk, s, _opts(args), torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    log(f"[profile] {args.launches} launches of {sassgen_name(s, _opts(args))}")
    return 0


def sassgen_name(s: Shape, o: Options) -> str:
    from .sassgen import kernel_name
    return kernel_name(s, o)


def cmd_sass(args) -> int:
    from .sassgen import generate
    sys.stdout.write(generate(Shape(*args.shape), _opts(args)))
    return 0


def _opts(args) -> Options:
    return Options(yield_mode=args.yield_mode, ldg_spacing=args.ldg_spacing, sts_spacing=args.sts_spacing,
                   cluster=args.cluster, safe=getattr(args, "safe", False),
                   overlap=not getattr(args, "no_overlap", False), reuse_slots=not getattr(args, "no_reuse_slots", False),
                   bank_slots=not getattr(args, "no_bank_slots", False), ldgsts=not getattr(args, "no_ldgsts", False),
                   split=args.split, tail=args.tail)


def cmd_sim(args) -> int:
    from . import sassgen, sim
    s = Shape(*args.shape)
    rng = np.random.default_rng(args.seed)
    x = rng.standard_normal((s.N, s.C, s.H, s.W)).astype(np.float32)
    w = rng.standard_normal((s.K, s.C, 3, 3)).astype(np.float32)
    u = ref.fx_layout(w, s.Kpad, s.U_ROWS)
    y = np.full((s.K, s.H, s.W, s.N), np.nan, np.float32)
    opts = sassgen.resolve(s, _opts(args), 3)        # a GPU of 3 SMs: a persistent block takes several units
    sp = sassgen.split_of(s, opts)
    if sp.active:
        ref.zero_split_tiles(y, s, sp.whole)
    text = sassgen.generate(s, opts)
    out, m = sim.simulate(text, sassgen.launch_grid(s, opts, 3), {"x": ref.to_chwn(x), "u": u, "y": y}, list(sassgen.PARAMS),
                          sassgen.SMEM_BYTES)
    got = ref.from_khwn(out["y"].view(np.float32).reshape(s.K, s.H, s.W, s.N))
    want = ref.direct_conv2d(x, w)
    err = float(np.linalg.norm(np.nan_to_num(got - want, nan=1e30)) / np.linalg.norm(want))
    print(f"sim {s} {opts.tag()}: relative error {err:.2e}, NaN {int(np.isnan(got).sum())}, "
          f"races {len(m.race_log)}, undefined reads {len(m.undefined_log)}")
    for line in (m.race_log + m.undefined_log)[:10]:
        print("  " + line)
    return 0 if err <= TOL and not m.race_log and not m.undefined_log else 1


def cmd_smoke(args) -> int:
    """Small shapes, NumPy reference, no torch: for compute-sanitizer runs."""
    from sassas.load import DeviceBuffer, synchronize
    from .api import conv2d, sass_options
    opts = _opts(args)
    rng = np.random.default_rng(args.seed)
    bad = 0
    for s in SMOKE:
        x = rng.standard_normal((s.N, s.C, s.H, s.W)).astype(np.float32)
        w = rng.standard_normal((s.K, s.C, 3, 3)).astype(np.float32)
        want = ref.direct_conv2d(x, w)
        for impl, algo in [(i, a) for i in args.impl or ["sass", "cuda", "direct"]
                           for a in (["f2"] if i == "direct" else args.algo or ["f2", "f4"])]:
            out = DeviceBuffer.from_numpy(np.full((s.N, s.K, s.H, s.W), np.nan, np.float32))
            conv2d(DeviceBuffer.from_numpy(x), DeviceBuffer.from_numpy(w), impl, out=out, opts=opts, algo=algo)
            synchronize()
            got = out.to_numpy()
            err = float(np.linalg.norm(np.nan_to_num(got - want, nan=1e30)) / np.linalg.norm(want))
            ok = err <= TOL
            bad += not ok
            what = "" if impl == "direct" else f"/{algo}" + (f" {sass_options(s, opts).tag()}" if impl == "sass" and algo == "f2" else "")
            print(f"smoke {s} {impl}{what}: relative error {err:.2e} "
                  f"NaN {int(np.isnan(got).sum())} {'ok' if ok else 'FAIL'}", flush=True)
    return 1 if bad else 0


def cmd_gemm(args) -> int:
    """The F(4x4,3x3) batched GEMM alone (gemmgen's SASS kernel) for each split of its channel
    loop, against cuBLAS (torch.bmm, FP32 without TF32) on the same operands; FFMA issue rate
    of the whole kernel and of its loop (the difference of C and 2C channels)."""
    import torch
    from . import f4, gemmgen
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    sms = props.multi_processor_count
    clk = 1980e6
    configs = [c for c in resnet_configs() if any(c[0].startswith(p) for p in (args.configs or ["Conv4", "Conv5"]))]
    variants = [gemm_options(v) for v in args.options]
    rows = []
    print(f"# {props.name}: the F(4x4,3x3) GEMM (36 batched, M[e] = U[e]^T V[e]); FFMA issue = warp FFMAs / "
          f"({sms} SMs x 4 x time x {clk / 1e6:.0f} MHz); loop = by C vs 2C")
    print(f"{'config':<12}{'C x K x T':>18}{'options':>10}{'parts':>6}{'blocks':>7}{'model':>7}{'ms':>9}{'TFLOPS':>8}{'FFMA issue':>11}"
          f"{'loop':>7}{'rel err':>9}{'cuBLAS ms':>10}{'TFLOPS':>8}")
    for name, s in configs:
        chosen = f4.plan(s, sms)
        cublas = None
        for o, parts in [(o, n) for o in variants for n in range(1, f4.MAX_PARTS + 1)]:
            p = f4.Plan(s, parts, o)
            g = p.gemm
            try:
                gemmgen.Generator(g, o)
            except gemmgen.Unsupported:
                continue
            times = []
            for gg in (g, gemmgen.GemmShape(2 * g.C, g.K, g.T, parts)):
                u = torch.randn((gg.operand_rows, gg.K), device=dev)
                v = torch.randn((gg.operand_rows, gg.T), device=dev)
                m = torch.full((parts * gemmgen.E, gg.K, gg.T), float("nan"), device=dev)

                def fn(i, gg=gg, u=u, v=v, m=m, o=o):
                    f4.launch_sass_gemm(gg, u, v, m, o, torch.cuda.current_stream().cuda_stream)
                fn(0)
                torch.cuda.synchronize()
                if gg is g:
                    ut = u[:gemmgen.E * g.C].view(gemmgen.E, g.C, g.K).double()
                    vt = v[:gemmgen.E * g.C].view(gemmgen.E, g.C, g.T).double()
                    want = torch.bmm(ut.transpose(1, 2), vt)
                    got = m.view(parts, gemmgen.E, g.K, g.T).double().sum(0)
                    err = float(torch.linalg.vector_norm(got - want) / torch.linalg.vector_norm(want))
                    if o.skip:           # a measurement-only variant: its results are wrong by design
                        err = float("nan")
                    if cublas is None:
                        u32, v32 = ut.float().transpose(1, 2), vt.float()
                        cublas, _ = timeit(lambda i: torch.bmm(u32, v32), 1, reps=args.reps)
                times.append(timeit(fn, 1, reps=args.reps)[0])
            ffma = gemmgen.E * g.K * g.T * g.C / 32
            whole = ffma / (sms * 4 * times[0] * 1e-3 * clk)
            loop = ffma / (sms * 4 * (times[1] - times[0]) * 1e-3 * clk)
            tf = 2 * gemmgen.E * g.K * g.T * g.C / times[0] / 1e9
            row = {"config": name, "C": g.C, "K": g.K, "T": g.T, "options": o.tag() or "default", "parts": parts,
                   "chosen": (parts, o) == (chosen.parts, chosen.options),
                   "blocks": g.blocks(), "model": f4.modelled(p, sms), "ms": times[0], "ms_2C": times[1],
                   "ffma_issue": whole, "loop_issue": loop, "rel_err": err, "cublas_ms": cublas}
            rows.append(row)
            print(f"{name:<12}{f'{g.C}x{g.K}x{g.T}':>18}{o.tag() or '-':>10}{parts:>5}{'*' if row['chosen'] else ' '}{g.blocks():>7}"
                  f"{row['model']:>7.0f}{times[0]:>9.4f}{tf:>8.1f}{whole:>11.1%}{loop:>7.1%}{err:>9.1e}"
                  f"{cublas:>10.4f}{2 * gemmgen.E * g.K * g.T * g.C / cublas / 1e9:>8.1f}", flush=True)
    print("# * the variant and split f4.plan chooses (modelled)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": props.name, "sms": sms, "rows": rows}, f, indent=1)
    return 0


# ---- loop: the GEMM's main-loop FFMA issue rate in cycles (Nsight Compute) ---------------------
LOOP_METRICS = ("smsp__cycles_active.sum", "smsp__inst_executed.sum",
                "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", "smsp__pcsamp_sample_count")
STALL_PREFIX = "smsp__pcsamp_warps_issue_stalled_"


def steady_shape(sms: int, C: int, blocks_per_sm: int = 2):
    """A GEMM whose blocks fill whole waves of `blocks_per_sm` blocks an SM: K = 256 and T the
    fewest 128-column tiles with 36 x 2 x T/128 blocks a whole number of waves (T = 1408 on 132
    SMs, with 2 blocks an SM or 3)."""
    from . import gemmgen
    per_col = gemmgen.E * 2
    cols = math.lcm(per_col, blocks_per_sm * sms) // per_col
    return gemmgen.GemmShape(C, 2 * gemmgen.BM, cols * gemmgen.BN, 1)


def ncu_metrics(g, options: str, metrics: list[str]) -> dict:
    """One launch of the SASS GEMM of shape g under ncu (its own clock, no clock control):
    {metric: value}."""
    import subprocess
    cmd = ["ncu", "--clock-control", "none", "--kernel-name", "regex:wino4_gemm", "--launch-skip", "1",
           "--launch-count", "1", "--csv", "--metrics", ",".join(metrics),
           sys.executable, "-m", "kernels_sass.winograd", "profile", "--gemm", str(g.C), str(g.K), str(g.T),
           str(g.parts), "--gemm-options", options]
    q = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    out = parse_ncu_csv(q.stdout)
    if q.returncode or not out:
        raise SystemExit(f"loop: ncu failed (exit {q.returncode}): {(q.stderr or q.stdout).strip()[-800:]}")
    return out


def parse_ncu_csv(text: str) -> dict:
    """{metric: value} from `ncu --csv` output (one kernel; ==PROF== lines and units skipped,
    thousands separators removed, non-numeric values left out)."""
    rows = list(csv.reader(line for line in text.splitlines() if line.startswith('"')))
    if not rows or "Metric Name" not in rows[0]:
        return {}
    name, value = rows[0].index("Metric Name"), rows[0].index("Metric Value")
    out = {}
    for r in rows[1:]:
        try:
            out[r[name]] = float(r[value].replace(",", ""))
        except (ValueError, IndexError):
            pass
    return out


def cmd_loop(args) -> int:
    """The main-loop FFMA issue rate of the F(4x4,3x3) GEMM in SM cycles, from Nsight Compute
    counters: a GEMM that fills whole waves at C and at 2C channels; the loop's share is the
    difference (extra warp FFMAs / extra active scheduler cycles). Also the instructions issued
    a cycle, the FFMA share of them and the warps' stall reasons (PC sampling, 2C run)."""
    import shutil
    import torch
    if not shutil.which("ncu"):
        raise SystemExit("loop: needs Nsight Compute's ncu on PATH (e.g. /usr/local/cuda/bin)")
    props = torch.cuda.get_device_properties(torch.device("cuda"))
    sms = props.multi_processor_count
    metrics = list(LOOP_METRICS) + [f"regex:{STALL_PREFIX}[a-z_]+$"]
    options = [(text, gemm_options(text)) for text in args.options]
    per_sm = math.lcm(*(o.blocks_per_sm() for _, o in options))
    g1 = steady_shape(sms, args.channels, per_sm)
    g2 = steady_shape(sms, 2 * args.channels, per_sm)
    print(f"# {props.name}: the F(4x4,3x3) GEMM's loop, K={g1.K} T={g1.T} ({g1.blocks()} blocks: whole waves of "
          + " or ".join(sorted({f"{o.blocks_per_sm()} blocks an SM" for _, o in options}))
          + f"), C={g1.C} vs {g2.C}; ncu counters, no clock control")
    print(f"{'options':<28}{'loop FFMA/clk':>14}{'issue/clk':>10}{'FFMA share':>11}{'whole':>7}  top stalls (% of samples)")
    rows = []
    for text, o in options:
        m1, m2 = (ncu_metrics(g, text, metrics) for g in (g1, g2))
        log(f"[loop] {o.tag() or 'default'}: ncu done")
        ffma = "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"
        d_ffma = (m2[ffma] - m1[ffma]) / 32
        d_cyc = m2["smsp__cycles_active.sum"] - m1["smsp__cycles_active.sum"]
        d_inst = m2["smsp__inst_executed.sum"] - m1["smsp__inst_executed.sum"]
        samples = m2.get("smsp__pcsamp_sample_count") or 1.0
        stalls = {k[len(STALL_PREFIX):]: v / samples for k, v in m2.items()
                  if k.startswith(STALL_PREFIX) and not k.endswith("_not_issued")}
        top = sorted(((k, v) for k, v in stalls.items() if k not in ("selected", "not_selected")), key=lambda kv: -kv[1])[:4]
        row = {"options": o.tag() or "default", "loop_ffma_per_clk": d_ffma / d_cyc, "loop_issue_per_clk": d_inst / d_cyc,
               "loop_ffma_share": d_ffma / d_inst, "whole_ffma_per_clk": m2[ffma] / 32 / m2["smsp__cycles_active.sum"],
               "stalls": stalls, "C": [g1.C, g2.C], "K": g1.K, "T": g1.T, "blocks_per_sm": o.blocks_per_sm()}
        rows.append(row)
        print(f"{row['options']:<28}{row['loop_ffma_per_clk']:>14.1%}{row['loop_issue_per_clk']:>10.1%}"
              f"{row['loop_ffma_share']:>11.1%}{row['whole_ffma_per_clk']:>7.1%}  "
              + ", ".join(f"{k} {100 * v:.1f}" for k, v in top), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": props.name, "sms": sms, "rows": rows}, f, indent=1)
    return 0


EIGHT_BY_EIGHT = "tile_rows=8,a_sets=2,unroll=2"     # the GEMM of sessions 6-9, beside the default


def gemm_options(text: str):
    """GemmOptions from 'tile_rows=16,unroll=4,lane_map=2x2' (empty: the default)."""
    from dataclasses import fields
    from . import gemmgen
    types = {f.name: f.type for f in fields(gemmgen.GemmOptions)}
    kw = {}
    for item in filter(None, text.split(",")):
        k, _, v = (x.strip() for x in item.partition("="))
        if k not in types:
            raise SystemExit(f"GEMM option {k!r}: expected one of {', '.join(types)}")
        try:
            kw[k] = v not in ("0", "false", "False") if types[k] == "bool" else int(v) if types[k] == "int" else v
        except ValueError:
            raise SystemExit(f"GEMM option {k}={v!r}: expected an integer") from None
    return replace(gemmgen.OPTIONS, **kw)


def cmd_prebuild(args) -> int:
    """Assemble the SASS kernels of the check/bench shapes into the cache (to carry them to a
    GPU machine whose time is short)."""
    from concurrent.futures import ProcessPoolExecutor
    jobs = []
    variants = [Options()]
    if args.ablation:
        variants += ablation_variants()
    for name, s in resnet_configs():
        for o in (variants if name.endswith("N128") else [Options()]):
            jobs.append((s, o))
        if args.ablation and name.endswith("N128"):
            jobs.append((Shape(s.N, 2 * s.C, s.H, s.W, s.K), Options()))
    for s in ODD + SMOKE:
        if (s, Options()) not in jobs:
            jobs.append((s, Options()))
    for s in SMOKE:
        jobs.append((s, Options(safe=True)))
    for S in args.split:
        jobs += [(s, Options(split=S)) for _, s in resnet_configs()] + [(s, Options(split=S)) for s in ODD + SMOKE]
    # F(4x4,3x3): the GEMMs of every split (the gemm command times them all, at C and 2C)
    from . import f4, gemmgen
    gemms = set()
    for s in [s for _, s in resnet_configs()] + ODD + SMOKE:
        for parts in range(1, f4.MAX_PARTS + 1):
            for o in map(gemm_options, args.gemm_options):
                g = f4.Plan(s, parts, o).gemm
                for gg in (g, gemmgen.GemmShape(2 * g.C, g.K, g.T, parts)):
                    try:
                        gemmgen.Generator(gg, o)
                    except gemmgen.Unsupported:
                        continue
                    gemms.add((gg, o))
    t = time.time()
    with ProcessPoolExecutor(max_workers=args.jobs or os.cpu_count()) as ex:
        list(ex.map(_build, [(s, o, args.sms) for s, o in jobs] + [(g, o, None) for g, o in sorted(gemms, key=str)]))
    log(f"[prebuild] {len(jobs)} F(2x2,3x3) kernels and {len(gemms)} F(4x4,3x3) GEMMs in {time.time() - t:.1f}s")
    return 0


def _build(job):
    from . import gemmgen, sassgen
    s, o, sms = job
    if isinstance(s, gemmgen.GemmShape):
        gemmgen.build(s, o)
    else:
        sassgen.build(s, sassgen.resolve(s, o, sms))


def ablation_variants() -> list[Options]:
    return [Options(yield_mode="natural"), Options(yield_mode="every7"), Options(yield_mode="every8"),
            Options(ldg_spacing=3), Options(sts_spacing=2), Options(cluster=4), Options(persistent=False),
            Options(overlap=False), Options(reuse_slots=False), Options(bank_slots=False),
            Options(ldgsts=False),
            Options(ldgu_spacing=8), Options(ldgu_spacing=16),
            Options(ldgu_spacing=40)]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m kernels_sass.winograd", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)

    def switches(q):
        q.add_argument("--yield-mode", default=Options().yield_mode, choices=["none", "natural", "every7", "every8"])
        q.add_argument("--ldg-spacing", type=int, default=Options().ldg_spacing)
        q.add_argument("--sts-spacing", type=int, default=Options().sts_spacing)
        q.add_argument("--cluster", type=int, default=Options().cluster,
                       help="non-FFMA instructions placed back to back in the main loop (1: spread)")
        q.add_argument("--safe", action="store_true", help="diagnosis: far larger latencies everywhere")
        q.add_argument("--no-reuse-slots", action="store_true",
                       help="main loop: .reuse only where the very next instruction is the FFMA that reuses it")
        q.add_argument("--no-bank-slots", action="store_true",
                       help="transform registers in order (FADD sources often in one register bank)")
        q.add_argument("--no-ldgsts", action="store_true",
                       help="main loop: filters through registers (LDG.128 + STS.128), not LDGSTS")
        q.add_argument("--no-overlap", action="store_true",
                       help="tile loop: a tile's first loads at its start, not in the epilogue before it")
        q.add_argument("--split", type=int, default=0,
                       help="split-C: channel parts of the last tiles (0: chosen per shape and GPU, 1: off)")
        q.add_argument("--tail", type=int, default=0, help="split-C: tiles split (0: chosen)")

    q = sub.add_parser("check")
    q.add_argument("--impl", action="append", choices=["sass", "cuda", "direct"])
    q.add_argument("--quick", action="store_true", help="4 ResNet configurations and the odd shapes")
    q.add_argument("--chwn", action="store_true", help="also the CHWN entry of the SASS path")
    q.add_argument("--algo", action="append", choices=["f2", "f4", "auto"],
                   help="Winograd F(2x2,3x3) fused (f2), F(4x4,3x3) non-fused (f4); default both")
    q.add_argument("--seed", type=int)
    q.add_argument("--json")
    switches(q)
    q.set_defaults(func=cmd_check)
    q = sub.add_parser("bench")
    q.add_argument("--impl", nargs="*", default=["sass", "cuda"])
    q.add_argument("--configs", nargs="*", help="prefixes, e.g. Conv2 Conv5/N128")
    q.add_argument("--reps", type=int, default=30)
    q.add_argument("--variants", nargs="*", help="--ablation: only the switches whose tag contains one of these (e.g. nobank)")
    q.add_argument("--no-graph", action="store_true")
    q.add_argument("--ablation", action="store_true", help="the SASS switches and the main-loop FFMA rate")
    q.add_argument("--no-cudnn-algos", action="store_true", help="skip the per-algorithm cuDNN runs")
    q.add_argument("--algo", nargs="*", default=["f2", "f4"], help="the SASS algorithms timed (f2, f4)")
    q.add_argument("--parts", type=int, default=0, help="F(4x4,3x3): split of the GEMM's channels (0: modelled)")
    q.add_argument("--json")
    q.add_argument("--plot")
    switches(q)
    q.set_defaults(func=cmd_bench)
    q = sub.add_parser("report")
    q.add_argument("json")
    q.add_argument("--plot")
    q.set_defaults(func=cmd_report)
    q = sub.add_parser("sass")
    q.add_argument("shape", nargs=5, type=int, metavar="DIM", help="the problem: N C H W K")
    switches(q)
    q.set_defaults(func=cmd_sass)
    q = sub.add_parser("profile", help="launch one shape's main kernel, or the F(4x4,3x3) GEMM (for ncu)")
    q.add_argument("shape", nargs="*", type=int, metavar="DIM", help="the problem: N C H W K")
    q.add_argument("--gemm", nargs=4, type=int, metavar=("C", "K", "T", "PARTS"),
                   help="the F(4x4,3x3) GEMM alone, of this shape")
    q.add_argument("--gemm-options", default="", help="its variant (gemm --options)")
    q.add_argument("--launches", type=int, default=3)
    switches(q)
    q.set_defaults(func=cmd_profile)
    q = sub.add_parser("sim")
    q.add_argument("shape", nargs=5, type=int, metavar="DIM", help="the problem: N C H W K")
    q.add_argument("--seed", type=int, default=0)
    switches(q)
    q.set_defaults(func=cmd_sim)
    q = sub.add_parser("smoke")
    q.add_argument("--impl", action="append", choices=["sass", "cuda", "direct"])
    q.add_argument("--algo", action="append", choices=["f2", "f4"])
    q.add_argument("--seed", type=int)
    switches(q)
    q.set_defaults(func=cmd_smoke)
    q = sub.add_parser("gemm", help="the F(4x4,3x3) GEMM alone, each split, against cuBLAS")
    q.add_argument("--configs", nargs="*", help="prefixes (default Conv4 Conv5)")
    q.add_argument("--options", nargs="*", default=["", EIGHT_BY_EIGHT],
                   help=f"GEMM variants, e.g. '' (the default) '{EIGHT_BY_EIGHT}' (sessions 6-9's 8x8 tile) 'a_sets=2' "
                        "'lane_map=2x2' "
                        "(gemmgen.GemmOptions; skip=... variants compute wrong results: their error is not checked)")
    q.add_argument("--reps", type=int, default=20)
    q.add_argument("--json")
    q.set_defaults(func=cmd_gemm)
    q = sub.add_parser("loop", help="the F(4x4,3x3) GEMM's main-loop FFMA issue rate in cycles (needs ncu)")
    q.add_argument("--options", nargs="*", default=["", EIGHT_BY_EIGHT, "skip=copies", "skip=lds"],
                   help="GEMM variants (gemm --options); skip=... are measurement-only variants")
    q.add_argument("--channels", type=int, default=512, help="C of the first run (the second has 2C)")
    q.add_argument("--json")
    q.set_defaults(func=cmd_loop)
    q = sub.add_parser("prebuild")
    q.add_argument("--ablation", action="store_true")
    q.add_argument("--jobs", type=int)
    q.add_argument("--sms", type=int, default=132, help="multiprocessors of the target GPU (the split depends on it)")
    q.add_argument("--split", nargs="*", type=int, default=[], help="also these forced splits (check --split S)")
    q.add_argument("--gemm-options", nargs="*", default=["", EIGHT_BY_EIGHT],
                   help="the F(4x4,3x3) GEMM variants (gemm --options)")
    q.set_defaults(func=cmd_prebuild)
    args = p.parse_args(argv)
    try:
        return args.func(args)
    except ModuleNotFoundError as e:
        if e.name in ("torch", "cupy"):      # the GPU commands run on a machine with PyTorch and a GPU
            raise SystemExit(f"{args.cmd}: needs {e.name} (and an NVIDIA GPU); the CPU commands are "
                             f"sass, sim, report, prebuild") from None
        raise


if __name__ == "__main__":
    sys.exit(main())
