"""The fused F(4x4,3x3) kernel's loop placement (f4fused's TRANSFORM_FROM, COPY_GAP, WINDOW_ROW_GAP)
and its wide window loads and output stores (WIDE_LOADS; EPILOGUE_PIPELINE and the others by
adding to VARIANTS) timed on the ResNet N128 layers: a benchmark table, every variant's output
checked bit for bit against the default's (the placement moves instructions, not arithmetic).

    python3 -m kernels_sass.winograd.f4fused_placement [--json FILE]
    python3 -m kernels_sass.winograd.f4fused_placement --profile N C H W K   # 3 launches, for ncu
    python3 -m kernels_sass.winograd.f4fused_placement --fixed [--json FILE]  # a block's fixed cost

--fixed times the main kernel (one part) on the layers' N, H, W and K with 8 to 256 channels
and fits time = a x iterations + b: b / a is what a block tile's prologue, epilogue and start cost
in loop iterations (the same block count, 8 channels an iteration), with persistent blocks
(default) and a block a tile (block_per_tile).
"""
from __future__ import annotations

import argparse
import json
import sys
from contextlib import contextmanager

from . import f4fused, f4fused_layout
from .plan import Shape
from .workloads import log

# name -> f4fused constants; "default" is the module as it is
VARIANTS = {
    "default": {},
    "transform_from_6": {"TRANSFORM_FROM": 6},
    "copy_gap_12": {"COPY_GAP": 12},
    "copy_gap_24": {"COPY_GAP": 24},
    "copy_gap_48": {"COPY_GAP": 48},
    "copy_gap_124": {"COPY_GAP": 124},
    "window_rows_48": {"WINDOW_ROW_GAP": 48},
    "window_rows_96": {"WINDOW_ROW_GAP": 96},
    "scalar_loads_stores": {"WIDE_LOADS": False},
    "block_per_tile": {"PERSISTENT": False},
    "tiles_first": {"FILTER_BLOCKS_FIRST": False},
    "setup_apart": {"INTERLEAVE_SETUP": False},
}
FIXED_VARIANTS = ("default", "setup_apart", "block_per_tile")
LAYERS = {"Conv2/N128": Shape(128, 64, 56, 56, 64), "Conv3/N128": Shape(128, 128, 28, 28, 128),
          "Conv4/N128": Shape(128, 256, 14, 14, 256), "Conv5/N128": Shape(128, 512, 7, 7, 512)}


@contextmanager
def constants(values: dict, module=f4fused):
    """The module's (f4fused's) constants set to `values` inside the block, restored after it."""
    missing = [k for k in values if not hasattr(module, k)]
    if missing:
        raise AttributeError(f"{module.__name__} has no switch {', '.join(missing)}")
    old = {k: getattr(module, k) for k in values}
    for k, v in values.items():
        setattr(module, k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            setattr(module, k, v)


def kernel(s: Shape, parts: int):
    """The kernel as f4fused's constants now say (the cubin cache is keyed by the text), and its
    geometry (f4fused_layout.Fused: its launch)."""
    import sassas
    from .api import sass_arch
    k = sassas.load(f4fused.build(s, parts, arch=sass_arch()))[f4fused.kernel_name(s, parts)]
    return k, f4fused.fused(s, parts, arch=sass_arch())


def setup(s: Shape):
    import torch
    from . import api
    parts = api.f4fused_parts(s)
    f = f4fused_layout.Fused(s, parts)
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn((s.N, s.C, s.H, s.W), device="cuda", generator=g)
    w = torch.randn((s.K, s.C, 3, 3), device="cuda", generator=g) / (3 * s.C ** 0.5)
    u = torch.empty((f.u_rows, f.Kp), device="cuda")
    y = torch.empty((s.N, s.K, s.H, s.W), device="cuda")
    api.f4fused_filter_transform(w, u, s, parts, "NCHW")
    return parts, f, x, u, y


def launcher(f, x, u, y, k):
    """A call of kernel k of geometry f (kernel()'s pair) on x, u, y, on torch's current stream."""
    from . import api
    from .device import pointer, sm_count
    grid = f.launch_grid(sm_count())

    def run(_=0):
        import torch
        stream = torch.cuda.current_stream().cuda_stream      # (inside a graph capture: its stream)
        if f.parts > 1:
            api.fill(y, 0.0, stream)
        k(grid, f4fused_layout.THREADS, pointer(x), pointer(u), pointer(y), shared=f.smem_bytes, stream=stream)
    return run


FIXED_LAYERS = {"Conv2/N128": Shape(128, 64, 56, 56, 64), "Conv3/N128": Shape(128, 128, 28, 28, 128),
                "Conv2/N32": Shape(32, 64, 56, 56, 64)}
FIXED_CHANNELS = (8, 16, 32, 64, 128, 256)


def fixed_cost(json_path=None, variants=FIXED_VARIANTS) -> int:
    """The main kernel's time against its channel loop's length on FIXED_LAYERS' other
    dimensions, for each variant: the fit's fixed part in iterations."""
    import numpy as np
    import torch
    from .bench import timeit
    rows = []
    print("# f4fused main kernel (1 part) by channels: ms; fit ms = a x iterations + b")
    for (name, layer), v in ((item, v) for item in FIXED_LAYERS.items() for v in variants):
        points = []
        for c in FIXED_CHANNELS:
            s = Shape(layer.N, c, layer.H, layer.W, layer.K)
            with constants(VARIANTS[v]):
                k, f = kernel(s, 1)
            g = torch.Generator(device="cuda").manual_seed(0)
            x = torch.randn((s.N, s.C, s.H, s.W), device="cuda", generator=g)
            u = torch.randn((f.u_rows, f.Kp), device="cuda", generator=g)
            y = torch.empty((s.N, s.K, s.H, s.W), device="cuda")
            ms, _ = timeit(launcher(f, x, u, y, k), 1)
            points.append((f.iterations, ms))
        a, b = np.polyfit(*np.array(points).T, 1)
        rows.append({"config": name, "variant": v, "blocks": f.blocks, "persistent": f.persistent, "points": points,
                     "ms_per_iteration": a, "fixed_ms": b, "fixed_iterations": b / a})
        print(f"{name:<11} {v:<15} " + " ".join(f"C{c}: {ms:.4f}" for (_, ms), c in zip(points, FIXED_CHANNELS)) +
              f" | a {a:.5f} b {b:.5f}: fixed = {b / a:.2f} iterations, "
              f"{b / (a * (layer.C // 8) + b):.0%} of C={layer.C}", flush=True)
    if json_path:
        with open(json_path, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m kernels_sass.winograd.f4fused_placement")
    p.add_argument("--json")
    p.add_argument("--profile", nargs=5, type=int, metavar="DIM")
    p.add_argument("--variants", nargs="*", choices=list(VARIANTS),
                   help=f"default: all; with --fixed: {' '.join(FIXED_VARIANTS)}")
    p.add_argument("--fixed", action="store_true", help="a block's fixed cost in loop iterations")
    args = p.parse_args(argv)
    if args.fixed:
        return fixed_cost(args.json, args.variants or FIXED_VARIANTS)
    import torch
    from .bench import timeit
    if args.profile:
        s = Shape(*args.profile)
        parts, _, x, u, y = setup(s)
        k, f = kernel(s, parts)
        run = launcher(f, x, u, y, k)
        for _ in range(3):
            run()
        torch.cuda.synchronize()
        log(f"[profile] 3 launches of {f4fused.kernel_name(s, parts)}")
        return 0
    rows, bad = [], 0
    for name, s in LAYERS.items():
        parts, f, x, u, y = setup(s)
        ref = None
        for v in args.variants or VARIANTS:
            with constants(VARIANTS[v]):
                k, f = kernel(s, parts)
            run = launcher(f, x, u, y, k)
            run()
            torch.cuda.synchronize()
            if ref is None:
                ref = y.clone()
            same = bool(torch.equal(y, ref))
            bad += not same
            ms, _ = timeit(run, 1)
            rows.append({"config": name, "variant": v, "parts": parts, "ms": ms, "same_as_default": same})
            log(f"{name:11s} {v:18s} {ms:.4f} ms  {'same' if same else 'DIFFERS'}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
