"""python -m kernels_sass.winograd check|bench|report|sass|sim

  check   correctness of every implementation on the 16 ResNet configurations and odd shapes:
          fresh random data, outputs poisoned with NaN before each run, relative error
          ||y - ref|| / ||ref|| against a float64 reference (torch float64 conv2d on the GPU),
          limit 1e-5.
  bench   in one process: the SASS kernel, the CUDA-C reference, torch conv2d FP32 (allow_tf32
          off; cudnn.benchmark on and off; NCHW and channels_last), PyTorch's default conv2d
          (TF32 convolutions, benchmark off; NCHW and channels_last), every cuDNN FP32
          algorithm run directly in NCHW and NHWC; effective TFLOPS = 2*N*C*H*W*K*9 / time,
          ratios to the best cuDNN algorithm and to PyTorch's default, each case's relative
          error against float64; JSON (--json) and a plot (--plot). With --ablation: the SASS
          switches, each turned back alone (F(2x2,3x3)'s; --algo f4tc f4fused: F(4x4,3x3)'s).
  report  re-render a bench JSON (here, no GPU): table, cuDNN anchors (data/, measured on an H200), plot.
  mma-peak  the tensor pipe's rate for mma.sync m16n8k8 TF32 (what bounds the f4tc GEMM), and for
            wgmma m64n256k8 TF32 (HGMMA: what would bound a 3xTF32 GEMM on it).
  wgmma-gemm  the GEMM in 3xTF32 on HGMMA (wgmma, CUDA-C: wggemm.py) against tcgemm's kernels.
  fused-tc  the fused F(4x4,3x3) kernel with its products on mma.sync in 3xTF32 (CUDA-C:
            fusedtc.py) against PyTorch's TF32 default and f4fused, and where its time goes.
  model   the cost model behind algo="auto" (cost.py) against bench runs: each algorithm's
          predicted and measured time, auto's choice, the fastest measured; --fit refits it.
  f4tc-chunks  f4tc in chunks of images, V and M reused so they can stay in L2, against f4tc
            whole and PyTorch's TF32 default; each launch's time an image by batch size (chunks.py).
  sass    print the generated SASS of one shape.
  sim     run the generated SASS in the CPU simulator on one shape and compare with NumPy.
  train-bench  training-step time (forward + both gradients) of ResNet-18/34's 3x3 layers:
          the Conv2d layer against nn.Conv2d in FP32 and with TF32 (train_bench.py).

Progress goes to stderr; tables to stdout.
"""
from __future__ import annotations

import argparse
import sys

from . import ablation4, chunks, cost_fit, fusedtc, wggemm
from .bench import cmd_bench, cmd_gemm, cmd_mma_peak
from .check import cmd_check, cmd_sim, cmd_smoke
from .ncu import cmd_loop, cmd_profile
from .plan import Options, Unsupported
from .prebuild import cmd_prebuild, cmd_sass
from .report import cmd_report
from .train_bench import cmd_train_bench
from .workloads import EIGHT_BY_EIGHT, TC

BENCH_ALGOS = ("f2", "f4", "f4fused", "f4tc")
# The commands that launch kernels; the others run anywhere
GPU_COMMANDS = ("check", "bench", "profile", "smoke", "gemm", "mma-peak", "wgmma-gemm", "fused-tc", "f4tc-chunks",
                "loop", "train-bench")
CPU_COMMANDS = "the CPU commands are sass, sim, report, model (--gpu with --shape), prebuild"


def dimension(text: str) -> int:
    """A problem's N, C, H, W or K: a positive integer."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: N, C, H, W and K are positive integers")
    return value


def arch_name(text: str) -> str:
    """--arch: an arch the generators target (target.ARCHS), in sassas's spelling."""
    from sassas.cli import arch_name as sassas_arch_name
    from .target import ARCHS
    name = sassas_arch_name(text)
    if name not in ARCHS:
        raise argparse.ArgumentTypeError(f"{name}: the kernels are generated for {', '.join(ARCHS)}")
    return name


def bench_command(args):
    """What `bench` runs for its arguments: bench, or with --ablation F(2x2,3x3)'s switches (--algo
    f2 or none) or F(4x4,3x3)'s (--algo f4tc and/or f4fused: ablation4). Chosen before the GPU is
    looked for, so that a wrong combination is refused anywhere."""
    if args.ablation and args.algo:
        if set(args.algo) <= set(ablation4.ALGOS):
            return ablation4.cmd_ablation4
        if args.algo != ["f2"]:
            raise SystemExit(f"bench --ablation --algo {' '.join(args.algo)}: expected f2 (F(2x2,3x3)'s switches) "
                             f"or {' and/or '.join(ablation4.ALGOS)} (F(4x4,3x3)'s)")
    if args.algo is None:
        args.algo = list(BENCH_ALGOS)
    return cmd_bench


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
        q.add_argument("--one-buffer", action="store_true",
                       help="main loop: one shared-memory buffer, filters through registers (the design of "
                            "GPUs with less than 128 KiB a block; on sm_90, to run it on hardware)")
        q.add_argument("--no-overlap", action="store_true",
                       help="tile loop: a tile's first loads at its start, not in the epilogue before it")
        q.add_argument("--split", type=int, default=0,
                       help="split-C: channel parts of the last tiles (0: chosen per shape and GPU, 1: off)")
        q.add_argument("--tail", type=int, default=0, help="split-C: tiles split (0: chosen)")

    q = sub.add_parser("check")
    q.add_argument("--impl", action="append", choices=["sass", "cuda", "direct"])
    q.add_argument("--quick", action="store_true", help="4 ResNet configurations and the odd shapes")
    q.add_argument("--chwn", action="store_true", help="also the CHWN entry of the SASS path")
    q.add_argument("--algo", action="append", choices=["f2", "f4", "f4fused", "f4tc", "auto"],
                   help="Winograd F(2x2,3x3) fused (f2), F(4x4,3x3) non-fused (f4), F(4x4,3x3) fused, NCHW "
                        "in and out (f4fused, SASS only), F(4x4,3x3) non-fused with the 3xTF32 tensor-core GEMM "
                        "(f4tc, SASS only, sm_90); default all four")
    q.add_argument("--seed", type=int)
    q.add_argument("--tc-split", choices=["tf32", "f16"], default="tf32",
                   help="f4tc's tensor-core GEMM: 3xTF32 (default) or the FP16 halves (f4.TC_SPLIT)")
    q.add_argument("--json")
    switches(q)
    q.set_defaults(func=cmd_check)
    q = sub.add_parser("bench")
    q.add_argument("--impl", nargs="*", default=["sass", "cuda"])
    q.add_argument("--configs", nargs="*", help="prefixes, e.g. Conv2 Conv5/N128")
    q.add_argument("--reps", type=int, default=30)
    q.add_argument("--variants", nargs="*", help="--ablation: only the switches whose tag contains one of these "
                                                 "(e.g. nobank; F(4x4,3x3): copy_gap, cols128)")
    q.add_argument("--no-graph", action="store_true")
    q.add_argument("--ablation", action="store_true",
                   help="the SASS switches, each turned back alone: F(2x2,3x3)'s and its main-loop FFMA rate, or "
                        "with --algo f4tc f4fused (either or both) F(4x4,3x3)'s (default layers Conv2-5/N128, "
                        "Conv5/N32 for f4tc)")
    q.add_argument("--no-cudnn-algos", action="store_true", help="skip the per-algorithm cuDNN runs")
    q.add_argument("--algo", nargs="*", choices=BENCH_ALGOS,
                   help="the SASS algorithms timed (default all; with --ablation: f2, or f4tc and f4fused)")
    q.add_argument("--parts", type=int, default=0, help="F(4x4,3x3): split of the GEMM's channels (0: modelled)")
    q.add_argument("--json")
    q.add_argument("--plot")
    switches(q)
    q.set_defaults(func=bench_command)
    q = sub.add_parser("report")
    q.add_argument("json")
    q.add_argument("--plot")
    q.set_defaults(func=cmd_report)
    q = sub.add_parser("sass")
    q.add_argument("shape", nargs=5, type=dimension, metavar="DIM", help="the problem: N C H W K")
    q.add_argument("--arch", default="sm_90", type=arch_name, help="the arch to generate for (the switches fitted to it)")
    switches(q)
    q.set_defaults(func=cmd_sass)
    q = sub.add_parser("profile", help="launch one shape's main kernel, or the F(4x4,3x3) GEMM (for ncu)")
    q.add_argument("shape", nargs="*", type=dimension, metavar="DIM", help="the problem: N C H W K")
    q.add_argument("--gemm", nargs=4, type=int, metavar=("C", "K", "T", "PARTS"),
                   help="the F(4x4,3x3) GEMM alone, of this shape")
    q.add_argument("--gemm-options", default="", help="its variant (gemm --options)")
    q.add_argument("--launches", type=int, default=3)
    switches(q)
    q.set_defaults(func=cmd_profile)
    q = sub.add_parser("sim")
    q.add_argument("shape", nargs=5, type=dimension, metavar="DIM", help="the problem: N C H W K")
    q.add_argument("--seed", type=int, default=0)
    q.add_argument("--arch", default="sm_90", type=arch_name, help="the arch to generate for (the switches fitted to it)")
    q.add_argument("--algo", default="f2", choices=["f2", "f4fused"],
                   help="the fused F(2x2,3x3) kernel (f2) or the fused F(4x4,3x3) one (f4fused, sm_90)")
    switches(q)
    q.set_defaults(func=cmd_sim)
    q = sub.add_parser("smoke")
    q.add_argument("--impl", action="append", choices=["sass", "cuda", "direct"])
    q.add_argument("--algo", action="append", choices=["f2", "f4", "f4fused", "f4tc"])
    q.add_argument("--seed", type=int)
    switches(q)
    q.set_defaults(func=cmd_smoke)
    q = sub.add_parser("gemm", help="the F(4x4,3x3) GEMM alone, each split, against cuBLAS")
    q.add_argument("--configs", nargs="*", help="prefixes (default Conv4 Conv5)")
    q.add_argument("--options", nargs="*", default=["", EIGHT_BY_EIGHT, TC],
                   help=f"GEMM variants, e.g. '' (the default) '{EIGHT_BY_EIGHT}' (the 8x8 tile) 'a_sets=2' "
                        "'lane_map=2x2' 'tc' (the 3xTF32 tensor-core GEMM) "
                        "(gemmgen.GemmOptions; skip=... variants compute wrong results: their error is not checked)")
    q.add_argument("--reps", type=int, default=20)
    q.add_argument("--parts", type=int, default=0, help="only this split of the channels (0: 1 to f4.MAX_PARTS)")
    q.add_argument("--json")
    q.set_defaults(func=cmd_gemm)
    q = sub.add_parser("mma-peak", help="mma.sync m16n8k8 TF32's rate (what bounds the 3xTF32 GEMM, algo f4tc) "
                                        "and wgmma m64n256k8 TF32's (HGMMA, sm_90)")
    q.add_argument("--json")
    q.set_defaults(func=cmd_mma_peak)
    q = sub.add_parser("wgmma-gemm", help="F(4x4,3x3)'s GEMM in 3xTF32 on HGMMA (wgmma, sm_90a, CUDA-C) against "
                                          "tcgemm's 3xTF32 and FP16-split kernels")
    q.add_argument("--configs", nargs="*", help=f"layers (default {' '.join(wggemm.CONFIGS)})")
    q.add_argument("--reps", type=int, default=20)
    q.add_argument("--json")
    q.set_defaults(func=wggemm.cmd_wgmma_gemm)
    q = sub.add_parser("fused-tc", help="the fused F(4x4,3x3) kernel with its products on mma.sync in 3xTF32 "
                                        "(CUDA-C) against PyTorch's TF32 default and f4fused")
    q.add_argument("--configs", nargs="*", help="layers (default: the 16)")
    q.add_argument("--variant-configs", nargs="*",
                   help=f"layers of the variants (default {' '.join(fusedtc.BREAKDOWN_CONFIGS)})")
    q.add_argument("--seed", type=int, help="the random data's seed (default: a fresh one, printed)")
    q.add_argument("--reps", type=int, default=20)
    q.add_argument("--json")
    q.set_defaults(func=fusedtc.cmd_fused_tc)
    q = sub.add_parser("f4tc-chunks", help="f4tc in chunks of images with V and M reused (L2-resident) against "
                                           "f4tc whole and PyTorch's TF32 default; each launch by batch size")
    q.add_argument("--configs", nargs="*", help=f"layers (default {' '.join(chunks.CONFIGS)})")
    q.add_argument("--chunks", nargs="*", type=int, default=list(chunks.CHUNKS), help="images a chunk")
    q.add_argument("--streams", nargs="*", type=int, default=list(chunks.STREAMS), help="streams the chunks go to")
    q.add_argument("--batches", nargs="*", type=int, default=list(chunks.LAUNCH_BATCHES),
                   help="batch sizes of the launches alone")
    q.add_argument("--seed", type=int, help="the random data's seed (default: a fresh one, printed)")
    q.add_argument("--reps", type=int, default=20)
    q.add_argument("--json")
    q.set_defaults(func=chunks.cmd_f4tc_chunks)
    q = sub.add_parser("model", help="the cost model behind algo='auto' (cost.py) against bench runs: predicted "
                                     "and measured times, auto's choices; --fit refits it (no GPU)")
    q.add_argument("runs", nargs="*", help="bench JSON files (default: results/h100_bench_all.json, "
                                           "results/h200_bench_all.json)")
    q.add_argument("--fit", action="store_true", help="refit the coefficients to the runs (else: the stored ones)")
    q.add_argument("--fit-on", nargs="+", metavar="RUN", help="refit to these runs, check on the others")
    q.add_argument("--write", action="store_true", help=f"store the refitted coefficients ({cost_fit.cost.MODEL_FILE.name})")
    q.add_argument("--shape", nargs=5, type=dimension, metavar=("N", "C", "H", "W", "K"),
                   help="predict each algorithm's time for this shape instead, and say what auto takes")
    q.add_argument("--layout", choices=("NCHW", "CHWN"), default="NCHW", help="with --shape (default NCHW)")
    q.add_argument("--gpu", help="with --shape: H100, H200 or ARCH,SMS,MHZ,GBS (default: this GPU)")
    q.set_defaults(func=cost_fit.cmd_model)
    q = sub.add_parser("loop", help="the F(4x4,3x3) GEMM's main-loop FFMA issue rate in cycles (needs ncu)")
    q.add_argument("--options", nargs="*", default=["", EIGHT_BY_EIGHT, "skip=copies", "skip=lds"],
                   help="GEMM variants (gemm --options); skip=... are measurement-only variants")
    q.add_argument("--channels", type=int, default=512, help="C of the first run (the second has 2C)")
    q.add_argument("--json")
    q.set_defaults(func=cmd_loop)
    q = sub.add_parser("prebuild")
    q.add_argument("--ablation", action="store_true")
    q.add_argument("--ablation4", action="store_true",
                   help="only the kernels of `bench --ablation --algo f4tc f4fused` (its default layers)")
    q.add_argument("--jobs", type=int)
    q.add_argument("--sms", type=int, default=132, help="multiprocessors of the target GPU (the split depends on it)")
    q.add_argument("--split", nargs="*", type=int, default=[], help="also these forced splits (check --split S)")
    q.add_argument("--gemm-options", nargs="*", default=["", EIGHT_BY_EIGHT, TC],
                   help="the F(4x4,3x3) GEMM variants (gemm --options)")
    q.add_argument("--f4fused", action="store_true",
                   help="only the kernels of `device_run.sh f4fused`: the fused F(4x4,3x3) kernels of the check, "
                        "smoke and bench shapes, the F(2x2,3x3) kernels and chosen GEMMs bench compares them with")
    q.set_defaults(func=cmd_prebuild)
    q = sub.add_parser("train-bench", help="training step of ResNet-18/34's 3x3 layers: Conv2d against nn.Conv2d")
    q.add_argument("--batch", nargs="*", type=int, default=[32, 64, 128])
    q.add_argument("--configs", nargs="*", help="prefixes, e.g. Conv2 Conv5/N128")
    q.add_argument("--reps", type=int, default=20)
    q.add_argument("--json")
    q.set_defaults(func=cmd_train_bench)
    args = p.parse_args(argv)
    func = args.func(args) if args.cmd == "bench" else args.func
    if args.cmd in GPU_COMMANDS:
        from sassas.load import gpu_available
        ok, why = gpu_available()
        if not ok:
            raise SystemExit(f"{args.cmd}: needs an NVIDIA GPU ({why}); {CPU_COMMANDS}")
    try:
        return func(args)
    except ModuleNotFoundError as e:
        if e.name in ("torch", "cupy"):      # the GPU commands run on a machine with PyTorch and a GPU
            raise SystemExit(f"{args.cmd}: needs {e.name} (and an NVIDIA GPU); {CPU_COMMANDS}") from None
        raise
    except Unsupported as e:                 # a shape the kernels do not take
        raise SystemExit(f"{args.cmd}: {e}") from None


if __name__ == "__main__":
    sys.exit(main())
