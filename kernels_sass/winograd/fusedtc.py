"""F(4x4,3x3), fused, with its products on the tensor cores in 3xTF32 (mma.sync m16n8k8): a
measurement of what the fused kernel's design gains from the tensor pipe, in CUDA-C (fusedtc.cu,
ptxas's schedule; `python -m kernels_sass.winograd fused-tc`, NOTES.md section 21).

    fusedtc.filter_transform(w, u, s)              # U[e][c][k]: u_shape(s) floats
    fusedtc.launch(x, u, y, s, parts, v=v)         # y (NCHW) from x (NCHW); parts > 1 adds into y

The kernels are f4fused's block (32 filters x 32 tiles x 36 positions, 8 channels an iteration,
the input transform in the loop, the output transform in the epilogue) with the 36 products on
mma.sync: every warp in every phase (DEFAULT), or warp-specialized (a producer warpgroup beside
two consumer ones, sm_90a). Both are correct at FP32 accuracy and slower than f4fused's FFMA
kernel on most layers; the bound variants of VARIANTS (each a part of the loop left out, wrong
results) show why.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .plan import round_up

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "fusedtc.cu")
BK = BT = 32                       # a block's filters and tiles
BC = 8                             # channels an iteration
STAGE_FLOATS = 2 * 2 * 36 * BC * 32          # fusedtc.cu's FT_STAGES
RAW_FLOATS = 6 * 256 * 4 + 6 * 2 * 256       # FT_RAW_FLOATS
MAX_PARTS = 2


@dataclass(frozen=True)
class Variant:
    ws: bool = False               # warp-specialized (sm_90a): a producer warpgroup beside two consumer ones
    skip: int = 0                  # FT_SKIP: 1 the products, 2 the windows' loads, 4 U's copies, 8 the transform
    interleave: bool = False       # the next chunk's copies between this chunk's positions (not ws)

    @property
    def bound(self) -> bool:       # a measurement only: its results are wrong
        return self.skip != 0

    @property
    def threads(self) -> int:
        return 384 if self.ws else 256

    @property
    def smem_bytes(self) -> int:   # the ws kernel's two raw buffers: the windows one chunk ahead
        return 4 * (STAGE_FLOATS + (2 if self.ws else 1) * RAW_FLOATS)


DEFAULT = Variant()
VARIANTS = {"default": DEFAULT, "copies interleaved": Variant(interleave=True), "warp-specialized": Variant(ws=True),
            "no window loads": Variant(skip=2), "no products": Variant(skip=1),
            "products only": Variant(skip=2 | 4 | 8), "epilogue only": Variant(skip=15)}
KERNELS = ("default", "warp-specialized")      # the ones that compute the convolution
BREAKDOWN_CONFIGS = ("Conv2/N128", "Conv3/N128", "Conv4/N128", "Conv5/N128")


def source(v: Variant = DEFAULT) -> str:
    from .cuda import source as winograd_source
    with open(SOURCE) as f:
        kernel = f.read()
    return f"{winograd_source()}\n#define FT_SKIP {v.skip}\n#define FT_INTERLEAVE {int(v.interleave)}\n{kernel}"


@lru_cache(maxsize=None)
def module(v: Variant = DEFAULT, arch: str = ""):
    """The kernels of variant v, compiled for arch (default: this GPU's)."""
    import sassas
    from .cuda import compile_source
    from .device import arch as gpu_arch
    arch = arch or gpu_arch()
    if int(arch.split("_")[1].rstrip("a")) < 80:       # (the kernels compile to empty bodies there)
        raise ValueError(f"the fused tensor-core kernels need sm_80 or later (mma.sync TF32); this GPU is {arch}")
    if v.ws and arch != "sm_90":
        raise ValueError(f"the warp-specialized kernel needs sm_90 (setmaxnreg); this GPU is {arch}")
    return sassas.load(compile_source(source(v), "sm_90a" if arch == "sm_90" else arch, "fusedtc.cu"))



def dims(s) -> tuple[int, int, int, int, int]:
    """(TH, TW, Kp, Cp, T) of shape s."""
    th, tw = -(-s.H // 4), -(-s.W // 4)
    return th, tw, round_up(s.K, BK), round_up(s.C, BC), s.N * th * tw


def u_shape(s) -> tuple[int, int]:
    _, _, kp, cp, _ = dims(s)
    return 36 * cp, kp


def kernel_name(s, aligned: bool, v: Variant = DEFAULT) -> str:
    """The kernel of 16-byte window rows and float4 stores where W % 4 == 0 and x, y are aligned."""
    return "f4_fused_tc" + ("_ws" if v.ws else "") + ("_vec" if aligned and s.W % 4 == 0 else "")


def filter_transform(w, u, s, stream=0) -> None:
    """U[e][c][k] from w (KCRS) into u (u_shape(s))."""
    from .device import cuda_module, filter_strides, pointer
    _, _, kp, cp, _ = dims(s)
    cuda_module()["f4_filter_transform"]((-(-kp // 128), cp), 128, pointer(w), pointer(u), np.int32(s.K),
                                         np.int32(s.C), np.int32(kp), np.int32(cp), *filter_strides(s, "NCHW"),
                                         stream=stream)


def launch(x, u, y, s, parts: int = 1, stream=0, v: Variant = DEFAULT) -> None:
    """y from x and U; the channels in `parts` (y zeroed first and the parts added into it)."""
    from .api import fill
    from .device import pointer
    th, tw, kp, cp, t = dims(s)
    chunks = cp // BC
    per_part = -(-chunks // parts)
    z = -(-chunks // per_part)
    if z > 1:
        fill(y, 0.0, stream)
    k = module(v)[kernel_name(s, pointer(x) % 16 == 0 and pointer(y) % 16 == 0, v)]
    k((-(-t // BT), kp // BK, z), v.threads, pointer(x), pointer(u), pointer(y),
      *[np.int32(a) for a in (s.N, s.C, s.H, s.W, s.K, th, tw, cp, kp, per_part)], shared=v.smem_bytes, stream=stream)


def cmd_fused_tc(args) -> int:
    """The fused kernel on the tensor cores against PyTorch's TF32 default and f4fused's FFMA
    kernel on the layers (relative error against float64), then the variants on a few."""
    import json

    import torch
    from . import api, f4fused_layout
    from .baselines import in_fresh_thread, rel_err, torch_conv
    from .bench import timeit
    from .workloads import log, resnet_configs
    stream = lambda: torch.cuda.current_stream().cuda_stream
    props = torch.cuda.get_device_properties(torch.device("cuda"))
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    torch.manual_seed(seed)
    print(f"# {props.name}: F(4x4,3x3) fused, products on mma.sync in 3xTF32 (CUDA-C), NCHW, ms "
          f"(filter transform included; the best split of the channels); relative error against float64 "
          f"(data seed {seed})")
    print(f"{'layer':<11} " + " ".join(f"{t:>22}" for t in KERNELS) + f" {'rel err':>8} {'f4fused':>8} {'TF32 def':>8} "
          f"{'TF32/best':>9} {'f4f/best':>8}")
    rows = []
    for name, s in resnet_configs():
        if args.configs and name not in args.configs:
            continue
        x = torch.randn(s.N, s.C, s.H, s.W, device="cuda")
        w = torch.randn(s.K, s.C, 3, 3, device="cuda")
        want = torch.nn.functional.conv2d(x.double(), w.double(), padding=1)
        y = torch.empty(s.N, s.K, s.H, s.W, device="cuda")
        u = torch.empty(*u_shape(s), device="cuda")
        row = {"config": name}
        for tag in KERNELS:
            v, runs = VARIANTS[tag], {}
            for parts in range(1, MAX_PARTS + 1):
                run = lambda _, parts=parts, v=v: (filter_transform(w, u, s, stream()),
                                                   launch(x, u, y, s, parts, stream(), v))
                y.fill_(float("nan"))
                run(0)
                torch.cuda.synchronize()
                runs[parts] = {"ms": timeit(run, 1, reps=args.reps)[0], "rel_err": rel_err(y, want)}
            best = min(runs, key=lambda p: runs[p]["ms"])
            row[tag] = {"parts": runs, "best_parts": best, "ms": runs[best]["ms"],
                        "rel_err": max(r["rel_err"] for r in runs.values())}
        row["ms"] = min(row[tag]["ms"] for tag in KERNELS)
        row["rel_err"] = max(row[tag]["rel_err"] for tag in KERNELS)
        row["tf32_default_ms"] = in_fresh_thread(lambda: timeit(lambda _: torch_conv(x, w, False, True), 1,
                                                                reps=args.reps)[0])
        fp = api.f4fused_parts(s)
        fused = f4fused_layout.Fused(s, fp)
        u4f = torch.empty(fused.u_rows, fused.Kp, device="cuda")
        f4fused_run = lambda _: (api.f4fused_filter_transform(w, u4f, s, fp, "NCHW", stream()),
                                 api.f4fused_main(x, u4f, y, s, fp, "NCHW", stream()))
        row["f4fused_ms"] = timeit(f4fused_run, 1, reps=args.reps)[0]
        rows.append(row)
        print(f"{name:<11} " + " ".join(f"{row[t]['ms']:18.4f} ({row[t]['best_parts']})" for t in KERNELS) +
              f" {row['rel_err']:8.1e} {row['f4fused_ms']:8.4f} {row['tf32_default_ms']:8.4f} "
              f"{row['tf32_default_ms'] / row['ms']:9.2f} {row['f4fused_ms'] / row['ms']:8.2f}", flush=True)
    print("# the variants (main kernel alone, parts 1; those past the first three compute wrong results), ms")
    print(f"{'layer':<11} " + " ".join(f"{t:>18}" for t in VARIANTS))
    breakdown = []
    for name, s in resnet_configs():
        if name not in (args.variant_configs or BREAKDOWN_CONFIGS):
            continue
        x = torch.randn(s.N, s.C, s.H, s.W, device="cuda")
        y = torch.empty(s.N, s.K, s.H, s.W, device="cuda")
        u = torch.randn(*u_shape(s), device="cuda")
        row = {"config": name}
        for tag, v in VARIANTS.items():
            row[tag] = timeit(lambda _, v=v: launch(x, u, y, s, 1, stream(), v), 1, reps=args.reps)[0]
        breakdown.append(row)
        log(f"[fused-tc] {name} variants done")
        print(f"{name:<11} " + " ".join(f"{row[t]:18.4f}" for t in VARIANTS), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": props.name, "seed": seed, "rows": rows, "variants": breakdown}, f, indent=1)
    return 0
