"""`f4tc-chunks`: does f4tc gain when its transformed tensors stay in L2? (a measurement, NOTES.md
section 22)

f4tc moves V (36/16 of the input) and M (36/16 of the output) through global memory between its
three launches. Run on `chunk` images at a time, with V and M sized for one chunk and reused by
the next, they fit in L2 (50 MB on the H100, 60 MB on the H200) and could be read back from it
instead of HBM. The command times the whole convolution so (one stream, or chunks spread over
several streams with a pair of buffers each) against f4tc in one piece and PyTorch's TF32
default, and each of f4tc's launches alone by batch size with its buffers reused at every call,
so that the small batches' run from L2: the time an image of each.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass

from . import f4
from .device import sm_count
from .plan import Shape

CHUNKS = (4, 8, 16, 32)
STREAMS = (1, 2, 3)
LAUNCH_BATCHES = (8, 16, 32, 64, 128)
CONFIGS = ("Conv2/N128", "Conv3/N32", "Conv3/N128", "Conv4/N128", "Conv5/N128")


def chunk_starts(n: int, chunk: int) -> list[tuple[int, int]]:
    """(first image, images) of each chunk of n images, the last one shorter where chunk does
    not divide n."""
    if chunk < 1:
        raise ValueError(f"chunk {chunk}: expected at least 1 image")
    return [(n0, min(chunk, n - n0)) for n0 in range(0, n, chunk)]


@dataclass
class Chunked:
    """f4tc on s in chunks of `chunk` images, chunk i on stream i % streams with that stream's
    V and M (so a stream's chunks reuse them in order and the streams never share one)."""
    s: Shape
    chunk: int
    streams: int

    def __post_init__(self):
        import torch
        self.plans = {n: f4.plan(Shape(n, self.s.C, self.s.H, self.s.W, self.s.K), sm_count(), tc=True)
                      for _, n in chunk_starts(self.s.N, self.chunk)}
        numel = lambda name: max(int(torch.Size(p.buffers()[name]).numel()) for p in self.plans.values())
        # U once for each GEMM variant and padding the chunks' plans ask for (a short last chunk's
        # plan may take another)
        self.u4 = {self.u_key(p): (p, torch.empty(p.buffers()["u4"], device="cuda")) for p in self.plans.values()}
        self.v4 = [torch.empty(numel("v4"), device="cuda") for _ in range(self.streams)]
        self.m4 = [torch.empty(numel("m4"), device="cuda") for _ in range(self.streams)]
        self.side = [torch.cuda.Stream() for _ in range(self.streams)]

    @staticmethod
    def u_key(p: f4.Plan) -> tuple:
        return p.options, p.gemm.C, p.gemm.K

    def __call__(self, x, w, y) -> None:
        """y = conv2d(x, w) (NCHW), in the order of the caller's current stream."""
        import torch
        main = torch.cuda.current_stream()
        for p, u4 in self.u4.values():
            f4.filter_transform(w, u4, p, "NCHW", main)
        for side in self.side:
            side.wait_stream(main)
        for i, (n0, n) in enumerate(chunk_starts(self.s.N, self.chunk)):
            p, j = self.plans[n], i % self.streams
            f4.input_transform(x[n0:n0 + n], self.v4[j], p, self.side[j], "NCHW")
            f4.gemm("sass", self.u4[self.u_key(p)][1], self.v4[j], self.m4[j], p, self.side[j])
            f4.output_transform(self.m4[j], y[n0:n0 + n], p, self.side[j], "NCHW")
        for side in self.side:
            main.wait_stream(side)


def launch_times(C: int, HW: int, n: int, reps: int) -> dict:
    """f4tc's three launches on (n, C, HW, HW, C), each alone, its buffers the same at every call
    (ms)."""
    import torch
    from .bench import timeit
    s = Shape(n, C, HW, HW, C)
    p = f4.plan(s, sm_count(), tc=True)
    b = p.buffers()
    x, w = torch.randn(n, C, HW, HW, device="cuda"), torch.randn(C, C, 3, 3, device="cuda")
    y = torch.empty(n, C, HW, HW, device="cuda")
    u4, v4, m4 = (torch.zeros(b[k], device="cuda") for k in ("u4", "v4", "m4"))
    cur = torch.cuda.current_stream
    f4.filter_transform(w, u4, p, "NCHW", cur())
    mb = lambda *ts: sum(t.numel() for t in ts) * 4 / 1e6
    return {"N": n, "MB": {"x": mb(x), "V": mb(v4), "M": mb(m4)},
            "input transform": timeit(lambda _: f4.input_transform(x, v4, p, cur(), "NCHW"), 1, reps=reps)[0],
            "gemm": timeit(lambda _: f4.gemm("sass", u4, v4, m4, p, cur()), 1, reps=reps)[0],
            "output transform": timeit(lambda _: f4.output_transform(m4, y, p, cur(), "NCHW"), 1, reps=reps)[0]}


def cmd_f4tc_chunks(args) -> int:
    import torch
    from . import api
    from .baselines import in_fresh_thread, rel_err, torch_conv
    from .bench import timeit
    from .workloads import log, resnet_configs
    props = torch.cuda.get_device_properties(torch.device("cuda"))
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    torch.manual_seed(seed)
    variants = [(c, n) for c in args.chunks for n in args.streams]
    print(f"# {props.name}: f4tc (3xTF32 GEMM) in chunks of c images on n streams (c{{c}}s{{n}}), V and M one "
          f"chunk's and reused; NCHW, ms, filter transform included (data seed {seed})")
    print(f"{'layer':<11} {'TF32 def':>8} {'f4tc':>8} " + " ".join(f"{f'c{c}s{n}':>8}" for c, n in variants) +
          f" {'best':>8} {'rel err':>8}")
    rows = []
    for name, s in resnet_configs():
        if name not in (args.configs or CONFIGS):
            continue
        x = torch.randn(s.N, s.C, s.H, s.W, device="cuda")
        w = torch.randn(s.K, s.C, 3, 3, device="cuda")
        y = torch.empty(s.N, s.K, s.H, s.W, device="cuda")
        want = torch.nn.functional.conv2d(x.double(), w.double(), padding=1)
        ms, err = {}, {}

        def measure(tag, run):
            y.fill_(float("nan"))
            run(0)
            torch.cuda.synchronize()
            err[tag] = rel_err(y, want)
            ms[tag] = timeit(run, 1, reps=args.reps)[0]
        ws = api.Workspace()
        measure("f4tc", lambda _: api.conv2d(x, w, out=y, algo="f4tc", workspace=ws))
        for c, n in variants:
            run = Chunked(s, c, n)
            measure(f"c{c}s{n}", lambda _, run=run: run(x, w, y))
            del run
        tf32 = in_fresh_thread(lambda: timeit(lambda _: torch_conv(x, w, False, True), 1, reps=args.reps)[0])
        best = min(ms, key=ms.get)
        rows.append({"config": name, "tf32_default_ms": tf32, "ms": ms, "rel_err": err, "best": best})
        print(f"{name:<11} {tf32:8.4f} " + " ".join(f"{ms[t]:8.4f}" for t in ms) + f" {best:>8} "
              f"{max(err.values()):8.1e}", flush=True)
    print("# each launch alone, its buffers the same at every call (L2-resident where they fit): us an image")
    print(f"{'C x HW':<9} {'N':>4} {'x MB':>6} {'V MB':>6} {'M MB':>6} {'input':>8} {'gemm':>8} {'output':>8}")
    launches = []
    for C, HW in ((64, 56), (128, 28), (256, 14)):
        for n in args.batches:
            r = launch_times(C, HW, n, args.reps)
            r.update(C=C, HW=HW)
            launches.append(r)
            per = lambda k: r[k] / n * 1e3
            print(f"{f'{C} x {HW}':<9} {n:4d} {r['MB']['x']:6.1f} {r['MB']['V']:6.1f} {r['MB']['M']:6.1f} "
                  f"{per('input transform'):8.3f} {per('gemm'):8.3f} {per('output transform'):8.3f}", flush=True)
        log(f"[f4tc-chunks] {C} x {HW} launches done")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": props.name, "seed": seed, "rows": rows, "launches": launches}, f, indent=1)
    return 0
