"""The fused F(4x4,3x3) kernel's loop placement (f4fused's TRANSFORM_FROM, COPY_GAP, WINDOW_ROW_GAP)
and its wide window loads and output stores (WIDE_LOADS; EPILOGUE_PIPELINE and the others by
adding to VARIANTS) timed on the ResNet N128 layers: a benchmark table, every variant's output
checked bit for bit against the default's (the placement moves instructions, not arithmetic).

    python3 -m kernels_sass.winograd.f4fused_placement [--json FILE]
    python3 -m kernels_sass.winograd.f4fused_placement --profile N C H W K   # 3 launches, for ncu
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
    "copy_gap_8": {"COPY_GAP": 8},
    "copy_gap_16": {"COPY_GAP": 16},
    "window_rows_48": {"WINDOW_ROW_GAP": 48},
    "scalar_loads_stores": {"WIDE_LOADS": False},
}
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
    """The kernel as f4fused's constants now say (the cubin cache is keyed by the text)."""
    import sassas
    from .api import sass_arch
    return sassas.load(f4fused.build(s, parts, arch=sass_arch()))[f4fused.kernel_name(s, parts)]


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


def launcher(s, parts, f, x, u, y, k):
    from . import api
    from .device import pointer

    def run(_=0):
        import torch
        stream = torch.cuda.current_stream().cuda_stream      # (inside a graph capture: its stream)
        if parts > 1:
            api.fill(y, 0.0, stream)
        k(f.grid(), f4fused_layout.THREADS, pointer(x), pointer(u), pointer(y), shared=f4fused_layout.SMEM_BYTES, stream=stream)
    return run


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m kernels_sass.winograd.f4fused_placement")
    p.add_argument("--json")
    p.add_argument("--profile", nargs=5, type=int, metavar="DIM")
    p.add_argument("--variants", nargs="*", default=list(VARIANTS))
    args = p.parse_args(argv)
    import torch
    from .bench import timeit
    if args.profile:
        s = Shape(*args.profile)
        parts, f, x, u, y = setup(s)
        run = launcher(s, parts, f, x, u, y, kernel(s, parts))
        for _ in range(3):
            run()
        torch.cuda.synchronize()
        log(f"[profile] 3 launches of {f4fused.kernel_name(s, parts)}")
        return 0
    rows, bad = [], 0
    for name, s in LAYERS.items():
        parts, f, x, u, y = setup(s)
        ref = None
        for v in args.variants:
            with constants(VARIANTS[v]):
                k = kernel(s, parts)
            run = launcher(s, parts, f, x, u, y, k)
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
