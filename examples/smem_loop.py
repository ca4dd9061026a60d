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


def run(blocks: int = 264, iters: int = 37, arch: str = "sm_90", seed=None) -> float:
    cubin = sassas.assemble_file(os.path.join(HERE, "smem_loop.sass"), arch=arch)
    module = sassas.load(cubin)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(blocks * BLOCK).astype(np.float32)
    out = np.full(blocks * BLOCK, np.nan, dtype=np.float32)   # poisoned: every element must be written
    dx, dout = DeviceBuffer.from_numpy(x), DeviceBuffer.from_numpy(out)
    module["smem_loop"](blocks, BLOCK, dx, dout, np.int32(iters))
    got = dout.to_numpy()
    want = reference(x, iters)
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--blocks", type=int, default=264)
    p.add_argument("--iters", type=int, default=37)
    p.add_argument("--arch", default="sm_90")
    args = p.parse_args()
    err = run(args.blocks, args.iters, args.arch)
    ok = err < 1e-6
    print(f"smem_loop blocks={args.blocks} iters={args.iters}: relative error vs float64 {err:.2e} "
          f"-> {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
