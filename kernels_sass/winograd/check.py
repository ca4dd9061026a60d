"""The correctness commands: check (every implementation against a float64 reference on the GPU),
sim (the generated SASS in the CPU simulator), smoke (small shapes, NumPy reference, no torch)."""
from __future__ import annotations

import json
import math
import time

import numpy as np

from . import reference as ref
from .plan import Shape
from .workloads import ODD, SMOKE, TOL, log, options_from_args, resnet_configs


# ---- check -------------------------------------------------------------------------------------
def cmd_check(args) -> int:
    import torch
    from . import api, f4
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda")
    configs = resnet_configs() + [(f"odd/{s.N}x{s.C}x{s.H}x{s.W}x{s.K}", s) for s in ODD]
    if args.quick:
        configs = configs[::4] + configs[16:]
    impls = args.impl or ["sass", "cuda", "direct"]
    algos = args.algo or ["f2", "f4", "f4fused", "f4tc"]
    opts = options_from_args(args)
    f4.TC_SPLIT = args.tc_split
    gen = torch.Generator(device=dev)
    gen.manual_seed(int(time.time()) if args.seed is None else args.seed)
    rows, failed = [], 0
    for name, s in configs:
        x = torch.randn((s.N, s.C, s.H, s.W), device=dev, generator=gen)
        w = torch.randn((s.K, s.C, 3, 3), device=dev, generator=gen)
        want = torch.nn.functional.conv2d(x.double(), w.double(), padding=1)
        wn = float(torch.linalg.vector_norm(want))
        for impl, algo in [(i, a) for i in impls for a in (["-"] if i == "direct" else algos)
                           if not (i == "cuda" and a in api.SASS_ONLY)]:      # (f4fused, f4tc: SASS only)
            label = impl if impl == "direct" else f"{impl}/{algo}" + ("-f16" if algo == "f4tc" and f4.TC_SPLIT == "f16" else "")
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


def cmd_sim(args) -> int:
    from . import plan, sassgen, sim
    s = Shape(*args.shape)
    if args.algo == "f4fused":
        return sim_f4fused(s, args.seed, args.arch)
    rng = np.random.default_rng(args.seed)
    x = rng.standard_normal((s.N, s.C, s.H, s.W)).astype(np.float32)
    w = rng.standard_normal((s.K, s.C, 3, 3)).astype(np.float32)
    u = ref.fx_layout(w, s.Kpad, s.U_ROWS)
    y = np.full((s.K, s.H, s.W, s.N), np.nan, np.float32)
    from .target import target
    t = target(args.arch)           # (an arch of target.ARCHS: the command line checked it)
    # a GPU of 3 SMs: a persistent block takes several units
    opts = sassgen.fit(plan.resolve(s, options_from_args(args), 3), t)
    sp = plan.split_of(s, opts)
    if sp.active:
        ref.zero_split_tiles(y, s, sp.whole)
    text = sassgen.generate(s, opts, t.arch)
    out, m = sim.simulate(text, plan.launch_grid(s, opts, 3), {"x": ref.to_chwn(x), "u": u, "y": y}, list(sassgen.PARAMS),
                          sassgen.dynamic_smem(opts, t.arch), arch=t.arch)
    got = ref.from_khwn(out["y"].view(np.float32).reshape(s.K, s.H, s.W, s.N))
    want = ref.direct_conv2d(x, w)
    err = float(np.linalg.norm(np.nan_to_num(got - want, nan=1e30)) / np.linalg.norm(want))
    print(f"sim {t.arch} {s} {opts.tag()}: relative error {err:.2e}, NaN {int(np.isnan(got).sum())}, "
          f"races {len(m.race_log)}, undefined reads {len(m.undefined_log)}")
    for line in (m.race_log + m.undefined_log)[:10]:
        print("  " + line)
    return 0 if err <= TOL and not m.race_log and not m.undefined_log else 1


def sim_f4fused(s: Shape, seed: int, arch: str = "sm_90") -> int:
    """The fused F(4x4,3x3) kernel of s in the CPU simulator against float64: 0 if within TOL,
    no race, no read of an unwritten register."""
    err, m = f4fused_simulated_error(s, np.random.default_rng(seed), arch)
    print(f"sim {arch} {s} f4fused: relative error {err:.2e}, races {len(m.race_log)}, "
          f"undefined reads {len(m.undefined_log)}")
    for line in (m.race_log + m.undefined_log)[:10]:
        print("  " + line)
    return 0 if err <= TOL and not m.race_log and not m.undefined_log else 1


SIM_SMS = 3       # the simulated GPU's SMs (persistent blocks: most take several tiles)


def f4fused_simulated_error(s: Shape, rng, arch: str = "sm_90", parts: int = 1, layout: str = "NCHW",
                            sms: int = SIM_SMS):
    """(relative error against float64 with NaN as 1e30, the simulator's machine) of the fused
    F(4x4,3x3) kernel of s (channels split in `parts`, x and y in `layout`; launched as on a GPU of
    `sms` SMs) on fresh random x and w from rng; y poisoned with NaN first (zeroed, as conv2d does,
    where parts add into it)."""
    from . import f4fused, f4fused_layout, sim
    f = f4fused.fused(s, parts, layout, arch)
    x = rng.standard_normal((s.N, s.C, s.H, s.W)).astype(np.float32)
    w = rng.standard_normal((s.K, s.C, 3, 3)).astype(np.float32)
    u = np.zeros((f.u_rows, f.Kp), np.float32)          # f4_filter_transform's layout
    u[:36 * f.Cp].reshape(36, f.Cp, f.Kp)[:, :s.C, :s.K] = ref.filter_transform(w, 4)
    y = np.full((s.N, s.K, s.H, s.W) if layout == "NCHW" else (s.K, s.H, s.W, s.N), np.nan if parts == 1 else 0.0,
                np.float32)
    xl = x if layout == "NCHW" else ref.to_chwn(x)
    out, m = sim.simulate(f4fused.generate(s, arch, parts, layout), f.launch_grid(sms), {"x": xl, "u": u, "y": y},
                          list(f4fused.PARAMS), f.smem_bytes, threads=f4fused_layout.THREADS, arch=arch)
    got = out["y"].view(np.float32).reshape(y.shape)
    got = got if layout == "NCHW" else ref.from_khwn(got)
    want = ref.direct_conv2d(x, w)
    return float(np.linalg.norm(np.nan_to_num(got - want, nan=1e30)) / np.linalg.norm(want)), m


def cmd_smoke(args) -> int:
    """Small shapes, NumPy reference, no torch: for compute-sanitizer runs."""
    from sassas.load import DeviceBuffer, synchronize
    from .api import SASS_ONLY, conv2d, sass_options
    opts = options_from_args(args)
    rng = np.random.default_rng(args.seed)
    bad = 0
    for s in SMOKE:
        x = rng.standard_normal((s.N, s.C, s.H, s.W)).astype(np.float32)
        w = rng.standard_normal((s.K, s.C, 3, 3)).astype(np.float32)
        want = ref.direct_conv2d(x, w)
        for impl, algo in [(i, a) for i in args.impl or ["sass", "cuda", "direct"]
                           for a in (["f2"] if i == "direct" else args.algo or ["f2", "f4"])
                           if not (i == "cuda" and a in SASS_ONLY)]:
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
