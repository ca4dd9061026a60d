"""Assemble examples/smem_loop.sass (shared memory, barrier, loop, P2R/R2P), run it on the GPU,
and check it against NumPy.

    python examples/smem_loop.py [--blocks B] [--iters I]
"""
import argparse
import os
import sys

import numpy as np

import sassas
from sassas.load import DeviceBuffer

HERE = os.path.dirname(os.path.abspath(__file__))
BLOCK = 256


def reference(x: np.ndarray, iters: int) -> np.ndarray:
    blocks = x.size // BLOCK
    s = x.reshape(blocks, BLOCK).astype(np.float64)
    tid = np.arange(BLOCK)
    acc = np.zeros_like(s)
    for j in range(iters):
        acc += s[:, (tid + j) & 255]
    acc += (tid & 1 != 0) * 1.0 + (tid & 2 != 0) * 2.0
    return acc.reshape(-1)


def run(blocks: int = 264, iters: int = 37, arch: str = "sm_90", seed=None,
        source: str = os.path.join(HERE, "smem_loop.sass"), repeat: int = 0):
    """Relative error against float64, and (with repeat > 0) the median time in ms."""
    cubin = sassas.assemble_file(source, arch=arch)
    module = sassas.load(cubin)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(blocks * BLOCK).astype(np.float32)
    out = np.full(blocks * BLOCK, np.nan, dtype=np.float32)   # poisoned: every element must be written
    dx, dout = DeviceBuffer.from_numpy(x), DeviceBuffer.from_numpy(out)
    module["smem_loop"](blocks, BLOCK, dx, dout, np.int32(iters))
    got = dout.to_numpy()
    want = reference(x, iters)
    err = float(np.linalg.norm(got - want) / np.linalg.norm(want))
    ms = None
    if repeat:
        times = module["smem_loop"].time(blocks, BLOCK, dx, dout, np.int32(iters), repeat=repeat, warmup=3)
        ms = float(np.median(times))
    return err, ms


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--blocks", type=int, default=264)
    p.add_argument("--iters", type=int, default=37)
    p.add_argument("--arch", default="sm_90")
    p.add_argument("--source", default=os.path.join(HERE, "smem_loop.sass"), help="the .sass file to run")
    p.add_argument("--repeat", type=int, default=0, help="also time it: launches to take the median of")
    args = p.parse_args()
    err, ms = run(args.blocks, args.iters, args.arch, source=args.source, repeat=args.repeat)
    ok = err < 1e-6
    timing = f", median {ms:.4f} ms" if ms is not None else ""
    print(f"{os.path.basename(args.source)} blocks={args.blocks} iters={args.iters}: relative error vs "
          f"float64 {err:.2e} -> {'OK' if ok else 'MISMATCH'}{timing}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
