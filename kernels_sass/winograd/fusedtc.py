"""F(4x4,3x3), fused, with its products on the tensor cores in 3xTF32 (mma.sync m16n8k8): a
measurement of what the fused kernel's design gains from the tensor pipe, in CUDA-C (fusedtc.cu,
ptxas's schedule; `python -m kernels_sass.winograd fused-tc`, NOTES.md section 21).

    fusedtc.filter_transform(w, u, s)              # U[e][c][k]: u_shape(s) floats
    fusedtc.launch(x, u, y, s, parts)              # y (NCHW) from x (NCHW); parts > 1 adds into y

The kernel is f4fused's block (32 filters x 32 tiles x 36 positions, 8 channels an iteration,
the input transform in the loop, the output transform in the epilogue) with the 36 products on
mma.sync. It is correct at FP32 accuracy and slower than f4fused's FFMA kernel: the variants of
VARIANTS (each a part of the loop left out, wrong results) show why.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "fusedtc.cu")
THREADS = 256
BK = BT = 32                       # a block's filters and tiles
BC = 8                             # channels an iteration
SMEM_BYTES = (2 * 2 * 36 * BC * 32 + 6 * 256 * 8) * 4     # fusedtc.cu's FT_SMEM_FLOATS
MAX_PARTS = 2


@dataclass(frozen=True)
class Variant:
    skip: int = 0                  # FT_SKIP: 1 the products, 2 the windows' loads, 4 U's copies, 8 the transform
    interleave: bool = False       # the next chunk's copies between this chunk's positions

    @property
    def bound(self) -> bool:       # a measurement only: its results are wrong
        return self.skip != 0


DEFAULT = Variant()
VARIANTS = {"default": DEFAULT, "copies interleaved": Variant(interleave=True),
            "no window loads": Variant(skip=2), "no products": Variant(skip=1),
            "products only": Variant(skip=2 | 4 | 8), "epilogue only": Variant(skip=15)}
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
    return sassas.load(compile_source(source(v), arch or gpu_arch(), "fusedtc.cu"))


def _up(v: int, m: int) -> int:
    return -(-v // m) * m


def dims(s) -> tuple[int, int, int, int, int]:
    """(TH, TW, Kp, Cp, T) of shape s."""
    th, tw = -(-s.H // 4), -(-s.W // 4)
    return th, tw, _up(s.K, BK), _up(s.C, BC), s.N * th * tw


def u_shape(s) -> tuple[int, int]:
    _, _, kp, cp, _ = dims(s)
    return 36 * cp, kp


def kernel_name(s, aligned: bool) -> str:
    """The kernel of 16-byte window rows and float4 stores where W % 4 == 0 and x, y are aligned."""
    return "f4_fused_tc_vec" if aligned and s.W % 4 == 0 else "f4_fused_tc"


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
    k = module(v)[kernel_name(s, pointer(x) % 16 == 0 and pointer(y) % 16 == 0)]
    k((-(-t // BT), kp // BK, z), THREADS, pointer(x), pointer(u), pointer(y),
      *[np.int32(a) for a in (s.N, s.C, s.H, s.W, s.K, th, tw, cp, kp, per_part)], shared=SMEM_BYTES, stream=stream)


def cmd_fused_tc(args) -> int:
    """The fused kernel on the tensor cores against PyTorch's TF32 default and f4fused's FFMA
    kernel on the layers (relative error against float64), then the variants on a few."""
    import json

    import torch
    from . import api, f4fused
    from .baselines import in_fresh_thread, rel_err, torch_conv
    from .bench import timeit
    from .workloads import log, resnet_configs
    stream = lambda: torch.cuda.current_stream().cuda_stream
    props = torch.cuda.get_device_properties(torch.device("cuda"))
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    torch.manual_seed(seed)
    print(f"# {props.name}: F(4x4,3x3) fused, products on mma.sync in 3xTF32 (CUDA-C), NCHW, ms "
          f"(filter transform included); relative error against float64 (data seed {seed})")
    print(f"{'layer':<11} {'fused-tc':>9} {'parts':>5} {'rel err':>8} {'f4fused':>8} {'TF32 def':>8} "
          f"{'TF32/ftc':>8} {'f4f/ftc':>8}")
    rows = []
    for name, s in resnet_configs():
        if args.configs and name not in args.configs:
            continue
        x = torch.randn(s.N, s.C, s.H, s.W, device="cuda")
        w = torch.randn(s.K, s.C, 3, 3, device="cuda")
        want = torch.nn.functional.conv2d(x.double(), w.double(), padding=1)
        y = torch.empty(s.N, s.K, s.H, s.W, device="cuda")
        u = torch.empty(*u_shape(s), device="cuda")
        row = {"config": name, "parts": {}}
        for parts in range(1, MAX_PARTS + 1):
            run = lambda _, parts=parts: (filter_transform(w, u, s, stream()), launch(x, u, y, s, parts, stream()))
            y.fill_(float("nan"))
            run(0)
            torch.cuda.synchronize()
            row["parts"][parts] = {"ms": timeit(run, 1, reps=args.reps)[0], "rel_err": rel_err(y, want)}
        best = min(row["parts"], key=lambda p: row["parts"][p]["ms"])
        row.update(best_parts=best, ms=row["parts"][best]["ms"], rel_err=max(v["rel_err"] for v in row["parts"].values()))
        row["tf32_default_ms"] = in_fresh_thread(lambda: timeit(lambda _: torch_conv(x, w, False, True), 1,
                                                                reps=args.reps)[0])
        fp = api.f4fused_parts(s)
        u4f = torch.empty(f4fused.Fused(s, fp).u_rows, f4fused.Fused(s, fp).Kp, device="cuda")
        row["f4fused_ms"] = timeit(lambda _: (api.f4fused_filter_transform(w, u4f, s, fp, "NCHW", stream()),
                                              api.f4fused_main(x, u4f, y, s, fp, "NCHW", stream())), 1, reps=args.reps)[0]
        rows.append(row)
        print(f"{name:<11} {row['ms']:9.4f} {best:5d} {row['rel_err']:8.1e} {row['f4fused_ms']:8.4f} "
              f"{row['tf32_default_ms']:8.4f} {row['tf32_default_ms'] / row['ms']:8.2f} "
              f"{row['f4fused_ms'] / row['ms']:8.2f}", flush=True)
    print("# the variants (main kernel alone, parts 1; all but the first two compute wrong results), ms")
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
