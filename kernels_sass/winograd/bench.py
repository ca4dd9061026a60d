"""The timing commands: bench (SASS kernels, the CUDA-C reference, cuDNN and PyTorch on the ResNet
configurations; the ablation of the SASS switches) and gemm (the F(4x4,3x3) GEMM alone against cuBLAS)."""
from __future__ import annotations

import json
import math
import statistics
import time

from . import baselines, f4fused_layout
from .plan import Options, Shape
from .report import render, render_ablation
from .workloads import BENCH_CASE, ablation_variants, flops, gemm_options, log, options_from_args, resnet_configs


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


def bench_info() -> dict:
    """The run's device, library versions, method and GPU clock state (TF32 switched off)."""
    import torch
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    props = torch.cuda.get_device_properties(torch.device("cuda"))
    info = {"device": props.name, "sms": props.multi_processor_count, "torch": torch.__version__,
            "cudnn": torch.backends.cudnn.version(), "time": time.strftime("%Y-%m-%d %H:%M:%S"),
            "method": "median of 5 rounds of a CUDA graph of 30 calls cycling through 3 input sets; "
                      "effective TFLOPS = 2*N*C*H*W*K*9/time; rel_err: ||y - y64|| / ||y64|| on input set 0 against "
                      "torch's float64 conv2d",
            "torch_cases": "conv2d with (cudnn.benchmark, allow_tf32, channels_last) = " + "; ".join(
                f"{k}: {v}" for k, v in baselines.TORCH_CASES.items()) + "; each in a thread of its own "
                "(PyTorch's cuDNN plan cache is per thread)"}
    try:
        import subprocess
        q = subprocess.run(["nvidia-smi", "--query-gpu=clocks.max.sm,clocks.sm", "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=20).stdout.strip().split(",")
        info["max_sm_clock_mhz"], info["sm_clock_mhz_at_start"] = float(q[0]), float(q[1])
    except Exception as e:
        info["max_sm_clock_mhz"] = 1980.0
        log(f"[bench] nvidia-smi: {e}; assuming 1980 MHz")
    from .device import arch, memory_bandwidth_gbs
    info["arch"], info["memory_bandwidth_gbs"] = arch(), memory_bandwidth_gbs()     # the cost model's GPU
    info["gpu_state_at_start"] = gpu_state()
    log(f"[bench] {info}")
    return info


def cmd_bench(args) -> int:
    import torch
    from . import api
    dev = torch.device("cuda")
    info = bench_info()
    opts = options_from_args(args)
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
        # F(4x4,3x3) non-fused, with the FFMA GEMM (f4) or the 3xTF32 tensor-core one (f4tc)
        from . import f4
        for algo4, pre in (("f4", BENCH_CASE["f4"]), ("f4tc", BENCH_CASE["f4tc"])):
            if "sass" not in args.impl or algo4 not in args.algo:
                continue
            p4 = api.f4_plan(s, args.parts, algo4 == "f4tc")
            row[f"{algo4}_parts"] = p4.parts
            row[f"{algo4}_options"] = p4.options.tag() or "default"
            row[f"{algo4}_gemm"] = [p4.gemm.C, p4.gemm.K, p4.gemm.T, p4.gemm.parts]
            ws4 = [api.Workspace() for _ in range(sets)]
            for i in range(sets):      # the transforms, for the GEMM-only timings
                api.conv2d(xcs[i], wcs[i], "sass", layout="CHWN", out=yks[i], workspace=ws4[i], algo=algo4,
                           parts=p4.parts)
            cases[f"{pre} gemm"] = lambda i, p4=p4, ws4=ws4: f4.gemm("sass", ws4[i].u4, ws4[i].v4, ws4[i].m4, p4, stream())
            if algo4 == "f4":
                cases["f4 filter transform"] = lambda i, p4=p4, ws4=ws4: f4.filter_transform(wcs[i], ws4[i].u4, p4, "CHWN",
                                                                                             stream())
                cases["f4 input transform"] = lambda i, p4=p4, ws4=ws4: f4.input_transform(xcs[i], ws4[i].v4, p4, stream())
                cases["f4 output transform"] = lambda i, p4=p4, ws4=ws4: f4.output_transform(ws4[i].m4, yks[i], p4,
                                                                                             stream())
                cases["f4 input transform NCHW"] = lambda i, p4=p4, ws4=ws4: f4.input_transform(
                    xs[i], ws4[i].v4, p4, stream(), "NCHW")
                cases["f4 output transform NCHW"] = lambda i, p4=p4, ws4=ws4: f4.output_transform(
                    ws4[i].m4, ys[i], p4, stream(), "NCHW")
            cases[f"{pre} CHWN"] = lambda i, p4=p4, ws4=ws4, a=algo4: api.conv2d(
                xcs[i], wcs[i], "sass", layout="CHWN", out=yks[i], workspace=ws4[i], algo=a, parts=p4.parts)
            cases[f"{pre} NCHW"] = lambda i, p4=p4, ws4=ws4, a=algo4: api.conv2d(
                xs[i], wts[i], "sass", out=ys[i], algo=a, parts=p4.parts,
                workspace=api.Workspace(u4=ws4[i].u4, v4=ws4[i].v4, m4=ws4[i].m4))
        if "sass" in args.impl and "f4fused" in args.algo:
            # the fused F(4x4,3x3) kernel alone (U transformed once here) and with its filter transform
            pf, pfc = api.f4fused_parts(s, args.parts), api.f4fused_parts(s, args.parts, "CHWN")
            fz = f4fused_layout.Fused(s, pf)
            row["f4fused_parts"], row["f4fused_parts_chwn"] = pf, pfc
            row["f4fused_warp_ffma"] = fz.grid()[0] * fz.grid()[1] * 36 * 32 * 32 * fz.Cp // 32
            wsf, wsc = [api.Workspace() for _ in range(sets)], [api.Workspace() for _ in range(sets)]
            for i in range(sets):
                api.conv2d(xs[i], wts[i], "sass", out=ys[i], workspace=wsf[i], algo="f4fused", parts=pf)
                api.conv2d(xcs[i], wcs[i], "sass", layout="CHWN", out=yks[i], workspace=wsc[i], algo="f4fused", parts=pfc)
            cases["f4fused main"] = lambda i: api.f4fused_main(xs[i], wsf[i].u4f, ys[i], s, pf, "NCHW", stream())
            cases["f4fused NCHW"] = lambda i: api.conv2d(xs[i], wts[i], "sass", out=ys[i], workspace=wsf[i],
                                                         algo="f4fused", parts=pf)
            cases["f4fused CHWN"] = lambda i: api.conv2d(xcs[i], wcs[i], "sass", layout="CHWN", out=yks[i],
                                                         workspace=wsc[i], algo="f4fused", parts=pfc)
        row["algo_auto"] = api.choose_algo(s, "NCHW", api.this_gpu())
        row["algo_auto_chwn"] = api.choose_algo(s, "CHWN", api.this_gpu())
        if "cuda" in args.impl:
            cases["cuda main"] = lambda i: api.main_kernel("cuda", xcs[i], us[i], yks[i], s, opts, stream())
            cases["cuda NCHW"] = lambda i: api.conv2d(xs[i], wts[i], "cuda", out=ys[i], workspace=wss[i], algo="f2")
        cases["filter transform"] = lambda i: api.filter_transform(wcs[i], us[i], s, "CHWN", stream())
        # what PyTorch users get: conv2d under its flags, each in a thread of its own (in_fresh_thread)
        xls = [x.contiguous(memory_format=torch.channels_last) for x in xs]
        wls = [w.contiguous(memory_format=torch.channels_last) for w in wts]
        yls = [torch.empty((s.N, s.K, s.H, s.W), device=dev, memory_format=torch.channels_last) for _ in range(sets)]
        torch_cases = baselines.torch_cases(xs, wts, xls, wls)
        cases.update(torch_cases)
        want = torch.nn.functional.conv2d(xs[0].double(), wts[0].double(), padding=1)
        row["cudnn_algos"] = {}
        row["rel_err"] = {}
        if not args.no_cudnn_algos:
            try:
                global _CUDNN
                if _CUDNN is None:
                    from .cudnn import Cudnn
                    torch.nn.functional.conv2d(xs[0], wts[0], padding=1)     # torch loads libcudnn
                    _CUDNN = Cudnn()
                    info["cudnn_direct"] = f"cuDNN {_CUDNN.version} through its C API (ctypes), FMA math, NCHW and NHWC"
                for layout, x4, w4, y4 in (("NCHW", xs, wts, ys), ("NHWC", xls, wls, yls)):
                    try:
                        found, refused = baselines.cudnn_algorithm_cases(_CUDNN, s, layout, x4, w4, y4, want, dev)
                    except Exception as e:
                        log(f"[bench] cuDNN {layout} algorithms unavailable: {type(e).__name__}: {e}")
                        refused = {f"{layout} error": f"{type(e).__name__}: {e}"}
                        found = {}
                    cases.update(found)
                    row["cudnn_algos"].update(refused)
            except Exception as e:
                log(f"[bench] per-algorithm cuDNN unavailable: {type(e).__name__}: {e}")
                row["cudnn_algos"]["error"] = f"{type(e).__name__}: {e}"
        # the output of each case that computes the whole convolution, from its return value after
        # a call on input set 0, as an NCHW view (torch's and cuDNN's cases return it)
        def chwn(_):
            return yks[0].permute(3, 0, 1, 2)

        def nchw(_):
            return ys[0]
        outputs = {"sass main": chwn, "sass CHWN": chwn, "sass NCHW": nchw, "sass4 CHWN": chwn, "sass4 NCHW": nchw,
                   "sass4tc CHWN": chwn, "sass4tc NCHW": nchw,
                   "cuda main": chwn, "cuda NCHW": nchw, "f4fused main": nchw, "f4fused NCHW": nchw,
                   "f4fused CHWN": chwn}
        outputs.update({c: (lambda got: got) for c in cases if c in torch_cases or baselines.cudnn_layout(c)})

        def measure(cname, fn):
            """(ms, how, relative error against float64 or None)"""
            err = None
            if cname in outputs:
                for t in (ys[0], yks[0], yls[0]):      # poisoned: an output left unwritten is NaN
                    t.fill_(float("nan"))
                got = fn(0)
                torch.cuda.synchronize()
                err = baselines.rel_err(outputs[cname](got), want)
            ms, how = timeit(fn, sets, reps=args.reps, graph=not args.no_graph)
            return ms, how, err

        for cname, fn in cases.items():
            try:
                if cname in torch_cases:
                    ms, how, err = baselines.in_fresh_thread(measure, cname, fn)
                else:
                    ms, how, err = measure(cname, fn)
            except Exception as e:
                log(f"[bench] {name} {cname}: {type(e).__name__}: {e}")
                ms, how, err = float("nan"), f"error: {e}", None
            torch.backends.cudnn.benchmark = torch.backends.cudnn.allow_tf32 = False
            row["ms"][cname] = ms
            row["how"][cname] = how
            if err is not None:
                row["rel_err"][cname] = err
            log(f"[bench] {name:<10} {cname:<36} {ms:8.4f} ms  {flops(s) / ms / 1e9:7.2f} TFLOPS ({how})"
                + (f"  rel err {err:.1e}" if err is not None else ""))
        results.append(row)
        del xs, wts, xcs, wcs, us, yks, ys, wss, xls, wls, yls, want, cases, torch_cases, outputs
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


def f16_operands(u, v):
    """U's rows (FP32, torch) as tcgemm's FP16 split takes them (f4_filter_transform_f16's
    layout: per channel pair a row of hi words, then of lo words, a word the half2 of the pair),
    scaled by U's split scale; and the scales word pair [max |u|, max |v|] (float bits)."""
    import torch
    from .tcgemm import split_scale
    bits = lambda t: int(t.abs().max().float().view(torch.int32))
    scales = torch.tensor([bits(u), bits(v)], dtype=torch.int32, device=u.device).view(torch.float32)
    x = u * 2.0 ** (split_scale(bits(u)) - 127)
    hi = x.half()
    lo = (x - hi.float()).half()
    pairs = lambda h: torch.stack([h[0::2], h[1::2]], dim=-1).view(torch.int32).squeeze(-1)    # [rows/2][K]
    words = torch.stack([pairs(hi), pairs(lo)], dim=1).reshape(u.shape).view(torch.float32)
    return words, scales


def cmd_gemm(args) -> int:
    """The F(4x4,3x3) batched GEMM alone (gemmgen's SASS kernel, or with the variant "tc"
    tcgemm's 3xTF32 one) for each split of its channel loop, against cuBLAS (torch.bmm, FP32
    without TF32) on the same operands; FFMA issue rate of the whole kernel and of its loop (the
    difference of C and 2C channels; for "tc", of the FFMAs the same GEMM would take)."""
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
        for o, parts in [(o, n) for o in variants for n in ([args.parts] if args.parts else range(1, f4.MAX_PARTS + 1))]:
            p = f4.Plan(s, parts, o)
            g = p.gemm
            try:
                f4.generator(g, o)
            except gemmgen.Unsupported:
                continue
            times = []
            for gg in (g, gemmgen.GemmShape(2 * g.C, g.K, g.T, parts)):
                pad = f4.Plan(s, parts, o).buffers()["u4"][0] - g.operand_rows
                u = torch.randn((gg.operand_rows + pad, gg.K), device=dev)
                v = torch.randn((gg.operand_rows + pad, gg.T), device=dev)
                m = torch.full((parts * gemmgen.E, gg.K, gg.T), float("nan"), device=dev)
                words, scales = f16_operands(u, v) if getattr(o, "split", "") == "f16" else (u, None)

                def fn(i, gg=gg, words=words, v=v, m=m, o=o, scales=scales):
                    f4.launch_sass_gemm(gg, words, v, m, o, torch.cuda.current_stream().cuda_stream, scales)
                fn(0)
                torch.cuda.synchronize()
                if gg is g:
                    ut = u[:gemmgen.E * g.C].view(gemmgen.E, g.C, g.K).double()
                    vt = v[:gemmgen.E * g.C].view(gemmgen.E, g.C, g.T).double()
                    want = torch.bmm(ut.transpose(1, 2), vt)
                    got = m.view(parts, gemmgen.E, g.K, g.T).double().sum(0)
                    err = float(torch.linalg.vector_norm(got - want) / torch.linalg.vector_norm(want))
                    if getattr(o, "skip", ""):    # a measurement-only variant: its results are wrong by design
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
                   "blocks": math.prod(f4.launch_grid(g, o)), "model": f4.modelled(p, sms), "ms": times[0], "ms_2C": times[1],
                   "ffma_issue": whole, "loop_issue": loop, "rel_err": err, "cublas_ms": cublas}
            rows.append(row)
            print(f"{name:<12}{f'{g.C}x{g.K}x{g.T}':>18}{o.tag() or '-':>10}{parts:>5}{'*' if row['chosen'] else ' '}{row['blocks']:>7}"
                  f"{row['model']:>7.0f}{times[0]:>9.4f}{tf:>8.1f}{whole:>11.1%}{loop:>7.1%}{err:>9.1e}"
                  f"{cublas:>10.4f}{2 * gemmgen.E * g.K * g.T * g.C / cublas / 1e9:>8.1f}", flush=True)
    print("# * the variant and split f4.plan chooses (modelled)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": props.name, "sms": sms, "rows": rows}, f, indent=1)
    return 0


# A warp's 8 independent accumulators, 8 mma.sync an iteration (m16n8k8 TF32, or m16n8k16 FP16;
# ptxas: HMMAs 6 cycles apart, A and B reused): the tensor pipe's rate with enough warps
def _mma_peak_kernel(name: str, mma: str) -> str:
    return r"""
extern "C" __global__ void NAME(float *out, int n) {
    float c[8][4] = {};
    unsigned a = threadIdx.x, b = 3u * a;
    for (int i = 0; i < n; i++) {
#pragma unroll
        for (int j = 0; j < 8; j++)
            asm volatile("MMA {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                         "{%0,%1,%2,%3};" : "+f"(c[j][0]), "+f"(c[j][1]), "+f"(c[j][2]), "+f"(c[j][3])
                         : "r"(a), "r"(b), "r"(a ^ 1u), "r"(b ^ 1u), "r"(a ^ 2u), "r"(b ^ 2u));
    }
    float s = 0.f;
    for (int j = 0; j < 8; j++) s += c[j][0] + c[j][1] + c[j][2] + c[j][3];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
""".replace("NAME", name).replace("MMA", mma)


MMA_PEAK_SRC = (_mma_peak_kernel("tf32_mma_peak", "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32")
                + _mma_peak_kernel("f16_mma_peak", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"))


def wgmma_peak_source(k_steps: int = 8) -> str:
    """A warpgroup's wgmma m64n256k8 TF32 (HGMMA.64x256x8.F32.TF32), both operands from shared
    memory through constant descriptors (the values do not change the rate), `k_steps` of them
    into one accumulator tile a group, then wait: sm_90a only."""
    registers = ", ".join(f"%{i}" for i in range(128))
    accumulators = ", ".join(f'"+f"(d[{i}])' for i in range(128))
    mma = (f'asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %130, 0;\\n'
           f'wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 {{{registers}}}, %128, %129, p, 1, 1;\\n}}\\n"'
           f' : {accumulators} : "l"(da), "l"(db), "r"(1));')
    return r"""
extern "C" __global__ void __launch_bounds__(128) tf32_wgmma_peak(float *out, int n) {
    __shared__ __align__(1024) float tiles[10240];
    for (int i = threadIdx.x; i < 10240; i += blockDim.x) tiles[i] = 0.f;
    __syncthreads();
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    unsigned base = (unsigned)__cvta_generic_to_shared(tiles);
    // (descriptors: start address, leading and stride byte offsets, all >> 4; no swizzle)
    unsigned long long da = ((base >> 4) & 0x3FFF) | (8ull << 16) | (16ull << 32);
    unsigned long long db = (((base + 8192) >> 4) & 0x3FFF) | (8ull << 16) | (16ull << 32);
    float d[128];
#pragma unroll
    for (int j = 0; j < 128; j++) d[j] = 0.f;
    for (int i = 0; i < n; i++) {
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
        for (int k = 0; k < K_STEPS; k++) {
            MMA
        }
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    }
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < 128; j++) s += d[j];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
""".replace("MMA", mma).replace("K_STEPS", str(k_steps))


def cmd_mma_peak(args) -> int:
    """The tensor pipe's rate for HMMA.1688.F32.TF32 (mma.sync m16n8k8 TF32) at 4 to 32 warps an
    SM: what bounds tcgemm's 3xTF32 loop (three HMMAs a product tile); then, on sm_90, the rate
    of wgmma m64n256k8 TF32 (HGMMA, a warpgroup's) at 1 to 3 warpgroups an SM: what a 3xTF32
    loop on HGMMA would be bound by."""
    import numpy as np
    import sassas
    import torch
    from .cuda import compile_source
    from .device import arch, pointer
    props = torch.cuda.get_device_properties(torch.device("cuda"))
    sms, clk = props.multi_processor_count, 1980e6
    module = sassas.load(compile_source(MMA_PEAK_SRC, arch(), "mma_peak.cu"))
    out = torch.zeros(sms * 4 * 1024, device="cuda")
    n = 4096
    rows = []
    # (type, kernel, multiply-adds an HMMA): TF32 m16n8k8 (tcgemm's), FP16 m16n8k16 (what a split into
    # FP16 halves would run on)
    for kind, name, macs in (("tf32", "tf32_mma_peak", 16 * 8 * 8), ("f16", "f16_mma_peak", 16 * 8 * 16)):
        kernel = module[name]
        print(f"# {props.name}: mma.sync m16n8k{macs // 128} {kind.upper()}, 8 independent accumulators a warp; "
              f"cycles a HMMA a scheduler at {clk / 1e6:.0f} MHz")
        for threads, blocks in ((128, 1), (128, 2), (128, 3), (256, 2), (512, 2), (1024, 1)):
            def fn(_):
                kernel((sms * blocks, 1, 1), threads, pointer(out), np.int32(n))
            ms, _ = timeit(fn, 1, reps=5, rounds=3, graph=False)
            hmma = sms * blocks * threads // 32 * n * 8
            row = {"type": kind, "warps_per_sm": threads // 32 * blocks, "ms": ms,
                   "tflops": hmma * 2 * macs / ms / 1e9, "cycles_per_hmma": ms * 1e-3 * clk / (hmma / (sms * 4))}
            rows.append(row)
            print(f"warps/SM {row['warps_per_sm']:>3}  {ms:8.4f} ms  {row['tflops']:6.1f} {kind.upper()} TFLOPS  "
                  f"{row['cycles_per_hmma']:5.2f} cycles/HMMA/scheduler", flush=True)
    wgmma_rows = []
    if arch() == "sm_90":
        kernel = sassas.load(compile_source(wgmma_peak_source(), "sm_90a", "tf32_wgmma_peak.cu"))["tf32_wgmma_peak"]
        n = 1024
        print(f"# wgmma m64n256k8 TF32 (HGMMA.64x256x8.F32.TF32), 8 a group into one accumulator tile; cycles a "
              f"HGMMA an SM at {clk / 1e6:.0f} MHz; 3xTF32 (three products a tile) at a third of the rate")
        for blocks in (1, 2, 3):
            def fn(_):
                kernel((sms * blocks, 1, 1), 128, pointer(out), np.int32(n))
            ms, _ = timeit(fn, 1, reps=5, rounds=3, graph=False)
            hgmma = sms * blocks * n * 8
            row = {"warpgroups_per_sm": blocks, "ms": ms, "tf32_tflops": hgmma * 2 * 64 * 256 * 8 / ms / 1e9,
                   "cycles_per_hgmma_per_sm": ms * 1e-3 * clk / (hgmma / sms)}
            wgmma_rows.append(row)
            print(f"warpgroups/SM {blocks}  {ms:8.4f} ms  {row['tf32_tflops']:6.1f} TF32 TFLOPS  "
                  f"{row['cycles_per_hgmma_per_sm']:6.1f} cycles/HGMMA/SM  3xTF32 bound "
                  f"{row['tf32_tflops'] / 3:6.1f} TFLOPS", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": props.name, "sms": sms, "rows": rows, "wgmma_rows": wgmma_rows}, f, indent=1)
    return 0
