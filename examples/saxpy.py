"""Assemble examples/saxpy.sass, run it on the GPU, and check it against NumPy.

    python examples/saxpy.py [--n N] [--arch sm_90]
"""
import argparse
import os
import sys

import numpy as np

import sassas
from sassas.load import DeviceBuffer

HERE = os.path.dirname(os.path.abspath(__file__))


def run(n: int = 1_000_003, arch: str = "sm_90", seed=None) -> float:
    cubin = sassas.assemble_file(os.path.join(HERE, "saxpy.sass"), arch=arch)
    module = sassas.load(cubin)
    rng = np.random.default_rng(seed)
    a = np.float32(rng.standard_normal())
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    dx, dy = DeviceBuffer.from_numpy(x), DeviceBuffer.from_numpy(y)
    block = 256
    module["saxpy"]((n + block - 1) // block, block, a, dx, dy, np.int32(n))
    got = dy.to_numpy()
    want = a.astype(np.float64) * x.astype(np.float64) + y.astype(np.float64)
    err = float(np.max(np.abs(got - want) / (np.abs(want) + 1e-30)))
    return err


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--n", type=int, default=1_000_003)
    p.add_argument("--arch", default="sm_90")
    args = p.parse_args()
    err = run(args.n, args.arch)
    ok = err < 1e-6
    print(f"saxpy n={args.n}: max relative error vs float64 {err:.2e} -> {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
