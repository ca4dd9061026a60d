"""What the winograd commands run: the ResNet configurations and odd shapes, the error limit, the
SASS switches of the ablation and the F(4x4,3x3) GEMM variants, and the options the switches name."""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field, replace

from . import reference as ref
from . import tcgemm
from .plan import Options, Shape

RESNET = {"Conv2": (64, 56, 64), "Conv3": (128, 28, 128), "Conv4": (256, 14, 256), "Conv5": (512, 7, 512)}
BATCHES = (32, 64, 96, 128)
# The 1x1 image with one channel (8 of a window's 9 rows and columns padding) has 9 filters: with
# K = 1 the relative error of F(4x4,3x3) in float32 is unbounded where the one filter's centre tap
# is near 0 (the other taps' products cancel only to rounding): 0.7% of draws past 1e-5, up to
# 9e-5 (reference.f43_conv2d_fp32, 600 draws), none with K = 9
ODD = [Shape(1, 3, 5, 7, 5), Shape(33, 20, 9, 11, 70), Shape(7, 1, 1, 1, 9), Shape(40, 12, 6, 13, 130),
       Shape(130, 9, 2, 3, 64), Shape(64, 256, 15, 15, 200), Shape(2, 64, 56, 56, 64), Shape(96, 72, 28, 28, 40)]
SMOKE = [Shape(33, 20, 9, 11, 70), Shape(1, 3, 1, 2, 5), Shape(32, 16, 6, 6, 64)]
TOL = 1e-5
# The prefix of an algorithm's entries in a bench row's times ("sass4tc NCHW", "f4fused main", ...)
BENCH_CASE = {"f2": "sass", "f4": "sass4", "f4tc": "sass4tc", "f4fused": "f4fused"}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def read_run(path: str, command: str, kinds=("results",)) -> dict:
    """A run's JSON (bench's: "results"; its ablations': "ablation", "ablation4") for a command
    that reads one: a file that is missing, not JSON or not such a run ends the command with one
    line naming the file."""
    try:
        with open(path) as f:
            data = json.load(f)
    except OSError as e:
        raise SystemExit(f"{command}: {path}: {e.strerror or e}") from None
    except ValueError as e:         # (JSONDecodeError, UnicodeDecodeError)
        raise SystemExit(f"{command}: {path}: not a JSON file ({e})") from None
    if not (isinstance(data, dict) and "info" in data and any(k in data for k in kinds)):
        raise SystemExit(f"{command}: {path}: not a run of `bench` (a JSON object with 'info' and "
                         f"{' or '.join(repr(k) for k in kinds)})")
    return data


def resnet_configs():
    out = []
    for layer, (c, hw, k) in RESNET.items():
        for n in BATCHES:
            out.append((f"{layer}/N{n}", Shape(n, c, hw, hw, k)))
    return out


def flops(s: Shape) -> int:
    return ref.conv_flops(s.N, s.C, s.H, s.W, s.K)


def options_from_args(args) -> Options:
    return Options(yield_mode=args.yield_mode, ldg_spacing=args.ldg_spacing, sts_spacing=args.sts_spacing,
                   cluster=args.cluster, safe=getattr(args, "safe", False),
                   overlap=not getattr(args, "no_overlap", False), reuse_slots=not getattr(args, "no_reuse_slots", False),
                   bank_slots=not getattr(args, "no_bank_slots", False),
                   ldgsts=not (getattr(args, "no_ldgsts", False) or getattr(args, "one_buffer", False)),
                   split=args.split, tail=args.tail, buffers=1 if getattr(args, "one_buffer", False) else 2)


def ablation_variants() -> list[Options]:
    return [Options(yield_mode="natural"), Options(yield_mode="every7"), Options(yield_mode="every8"),
            Options(ldg_spacing=3), Options(sts_spacing=2), Options(cluster=4), Options(persistent=False),
            Options(overlap=False), Options(reuse_slots=False), Options(bank_slots=False),
            Options(ldgsts=False),
            Options(ldgu_spacing=8), Options(ldgu_spacing=16),
            Options(ldgu_spacing=40)]


# ---- the F(4x4,3x3) ablation (`bench --ablation --algo f4tc f4fused`, ablation4.py) -----------------
# The layers it runs on: the N128 ones, and Conv5/N32 where the side stream's gain is largest
# (its filter transform as long as its input transform, NOTES.md section 17)
ABLATION4_CONFIGS = ("Conv2/N128", "Conv3/N128", "Conv4/N128", "Conv5/N128", "Conv5/N32")
ABLATION4_FUSED_CONFIGS = ("Conv2/N128", "Conv3/N128", "Conv4/N128", "Conv5/N128")


@dataclass(frozen=True)
class F4tcSwitch:
    """A variant of f4tc's NCHW path: its GEMM's TcOptions and f4's launch switches."""
    tag: str
    what: str                                           # the switch turned back, in words
    gemm: tcgemm.TcOptions = tcgemm.OPTIONS
    constants: dict = field(default_factory=dict, hash=False, compare=False)   # f4's SIDE_STREAM, FLOAT4_ROWS
    transposes: bool = False                            # NCHW through CHWN: x and y transposed around f4.conv


def f4tc_ablation_variants() -> list[F4tcSwitch]:
    """f4tc's default NCHW path first, then one switch turned back a variant."""
    o = tcgemm.OPTIONS
    return [F4tcSwitch("default", "f4tc as conv2d runs it"),
            F4tcSwitch("cols128", "GEMM blocks of 128 columns (2 blocks an SM), not 64", replace(o, cols=128)),
            F4tcSwitch("no_reuse_across", "GEMM: A's .reuse only where the next instruction is its HMMA",
                       replace(o, reuse_across=False)),
            *(F4tcSwitch(f"hmma_gap_{gap}", f"GEMM: HMMAs {gap} cycles apart, not {o.hmma_gap}",
                         replace(o, hmma_gap=gap)) for gap in (o.hmma_gap - 1, o.hmma_gap + 2)),
            F4tcSwitch("f16_halves", "GEMM: FP16 halves (scaled, three HMMA.16816), not 3xTF32",
                       replace(o, split="f16")),
            F4tcSwitch("filter_sequential", "the filter transform before the input transform, one stream",
                       constants={"SIDE_STREAM": False}),
            F4tcSwitch("transposes", "NCHW through CHWN: x and y transposed, the CHWN transforms"
                       , transposes=True),
            F4tcSwitch("staged_rows", "output rows through shared memory, not float4 (changes W % 4 == 0 only)",
                       constants={"FLOAT4_ROWS": False})]


def f4fused_ablation_variants() -> dict[str, dict]:
    """tag -> f4fused's constants: the default first, then one switch turned back a variant
    (f4fused_placement.constants sets them)."""
    return {"default": {},
            "copy_gap_24": {"COPY_GAP": 24}, "copy_gap_12": {"COPY_GAP": 12},
            "transform_from_6": {"TRANSFORM_FROM": 6}, "transform_from_5": {"TRANSFORM_FROM": 5},
            "scalar_loads_stores": {"WIDE_LOADS": False}, "epilogue_serial": {"EPILOGUE_PIPELINE": False},
            "block_per_tile": {"PERSISTENT": False}, "tiles_first": {"FILTER_BLOCKS_FIRST": False}}


EIGHT_BY_EIGHT = "tile_rows=8,a_sets=2,unroll=2"     # the 8x8-tile GEMM, beside the default


TC = "tc"                   # the 3xTF32 tensor-core GEMM (tcgemm), as a GEMM variant


def gemm_options(text: str):
    """GemmOptions from 'tile_rows=16,unroll=4,lane_map=2x2' (empty: the default); "tc" or
    "tc,hmma_gap=5": the tensor-core GEMM's TcOptions."""
    from dataclasses import fields
    from . import gemmgen, tcgemm
    items = [x.strip() for x in text.split(",")]
    cls, base = (tcgemm.TcOptions, tcgemm.OPTIONS) if items[0] == TC else (gemmgen.GemmOptions, gemmgen.OPTIONS)
    if items[0] == TC:
        items = items[1:]
    types = {f.name: f.type for f in fields(cls)}
    kw = {}
    for item in filter(None, items):
        k, _, v = (x.strip() for x in item.partition("="))
        if k not in types:
            raise SystemExit(f"GEMM option {k!r}: expected one of {', '.join(types)}")
        try:
            kw[k] = v not in ("0", "false", "False") if types[k] == "bool" else int(v) if types[k] == "int" else v
        except ValueError:
            raise SystemExit(f"GEMM option {k}={v!r}: expected an integer") from None
    return replace(base, **kw)
