"""Profiling with Nsight Compute: profile (launch one kernel a few times for ncu) and loop (the
F(4x4,3x3) GEMM's main-loop FFMA issue rate and stall reasons, by C vs 2C)."""
from __future__ import annotations

import csv
import json
import math
import sys

from .plan import Shape
from .workloads import gemm_options, log, options_from_args


def cmd_profile(args) -> int:
    """Launch the SASS main kernel of one shape (or, with --gemm, the F(4x4,3x3) GEMM alone) a
    few times on random data: a target for a profiler
    (ncu --kernel-name regex:wino --launch-skip 1 --launch-count 1 ...)."""
    import torch
    from . import api, sassgen
    dev = torch.device("cuda")
    if args.gemm:
        from . import f4, gemmgen
        g, o = gemmgen.GemmShape(*args.gemm), gemm_options(args.gemm_options)
        try:
            f4.generator(g, o)
        except (gemmgen.Unsupported, ValueError) as e:
            raise SystemExit(f"profile --gemm {' '.join(map(str, args.gemm))}: {e}") from None
        u = torch.randn((g.operand_rows, g.K), device=dev)
        v = torch.randn((g.operand_rows, g.T), device=dev)
        m = torch.empty((g.parts * gemmgen.E, g.K, g.T), device=dev)
        for _ in range(args.launches):
            f4.launch_sass_gemm(g, u, v, m, o, torch.cuda.current_stream().cuda_stream)
        torch.cuda.synchronize()
        log(f"[profile] {args.launches} launches of {f4.module(o).kernel_name(g, o)}")
        return 0
    if len(args.shape) != 5:
        raise SystemExit("profile: give the problem N C H W K, or --gemm C K T PARTS")
    s = Shape(*args.shape)
    xc = torch.randn((s.C, s.H, s.W, s.N), device=dev)
    u = torch.randn((s.U_ROWS, 16, s.Kpad), device=dev)
    yk = torch.empty((s.K, s.H, s.W, s.N), device=dev)
    for _ in range(args.launches):
        api.main_kernel("sass", xc, u, yk, s, options_from_args(args), torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    log(f"[profile] {args.launches} launches of {sassgen.kernel_name(s, options_from_args(args))}")
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
