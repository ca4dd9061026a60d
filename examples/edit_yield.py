"""Edit compiler output: take an NVRTC-compiled FFMA-heavy kernel, change its yield flags in
the SASS, reassemble, and compare results and time against the original.

    python examples/edit_yield.py [--n N] [--repeat R]

Variants: the original; every yield flag cleared where legal (stall 1..11); a yield forced
every 8th instruction (what Yan et al. observed in nvcc code).
"""
import argparse
import sys

import numpy as np

import sassas
from sassas.edit import edit_cuda, map_instructions
from sassas.load import DeviceBuffer

CUDA = r"""
extern "C" __global__ void poly(const float* x, float* y, int n, int iters) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i], a = 0.5f, b = -0.25f, c = 0.125f, d = 1.0f;
    for (int k = 0; k < iters; ++k) {
        a = fmaf(a, v, 0.999f); b = fmaf(b, v, -0.5f); c = fmaf(c, v, 0.25f); d = fmaf(d, v, 0.75f);
    }
    y[i] = a + b + c + d;
}
"""


def clear_yields(index, control, predicate, text):
    wait, read, write, yld, stall = control.split(":")
    if yld == "Y" and 1 <= int(stall, 16) <= 11:
        return f"{wait}:{read}:{write}:-:{stall}", predicate, text
    return None


def yield_every(n):
    def edit(index, control, predicate, text):
        wait, read, write, _, stall = control.split(":")
        y = "Y" if index % n == n - 1 or not 1 <= int(stall, 16) <= 11 else "-"
        return f"{wait}:{read}:{write}:{y}:{stall}", predicate, text
    return edit


def reference(x, iters):
    x = x.astype(np.float64)
    a, b, c, d = (np.full_like(x, v) for v in (0.5, -0.25, 0.125, 1.0))
    for _ in range(iters):
        a, b, c, d = a * x + 0.999, b * x - 0.5, c * x + 0.25, d * x + 0.75
    return a + b + c + d


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--n", type=int, default=1 << 22)
    p.add_argument("--iters", type=int, default=256)
    p.add_argument("--repeat", type=int, default=20)
    args = p.parse_args()
    rng = np.random.default_rng()
    x = rng.uniform(-0.9, 0.9, args.n).astype(np.float32)
    want = reference(x, args.iters)
    dx = DeviceBuffer.from_numpy(x)
    grid, block = (args.n + 255) // 256, 256
    variants = {
        "original (NVRTC)": None,
        "round trip, unedited": lambda src: src,
        "yield flags cleared": map_instructions(clear_yields),
        "yield every 8": map_instructions(yield_every(8)),
    }
    print(f"{'variant':24} {'lines changed':>13} {'median ms':>10} {'rel. error':>11}")
    status = 0
    for name, edit in variants.items():
        result = edit_cuda(CUDA, edit if edit is not None else None, arch="sm_90")
        image = result.original if edit is None else result.cubin
        kernel = sassas.load(image)["poly"]
        dy = DeviceBuffer.from_numpy(np.full(args.n, np.nan, np.float32))
        kernel(grid, block, dx, dy, np.int32(args.n), np.int32(args.iters))
        got = dy.to_numpy()
        err = float(np.linalg.norm(got - want) / np.linalg.norm(want))
        times = kernel.time(grid, block, dx, dy, np.int32(args.n), np.int32(args.iters), repeat=args.repeat)
        changed = 0 if edit is None else result.changed_lines
        print(f"{name:24} {changed:13d} {float(np.median(times)):10.4f} {err:11.2e}")
        if not err < 1e-5:
            status = 1
    from sassas.elf import read_cubin
    unedited = edit_cuda(CUDA, lambda src: src, arch="sm_90")
    same = read_cubin(unedited.original).kernel("poly").code == read_cubin(unedited.cubin.data).kernel("poly").code
    print(f"unedited round trip byte-identical in code: {same}")
    return status if same else 1


if __name__ == "__main__":
    sys.exit(main())
