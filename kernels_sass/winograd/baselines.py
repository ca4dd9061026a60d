"""What a PyTorch user gets, for the bench: conv2d under PyTorch's flags (its default, TF32
convolutions, and FP32 with and without cudnn.benchmark, NCHW and channels_last), and every cuDNN
FP32 algorithm run directly (cudnn.py) in NCHW and NHWC; the relative error of an output against
float64."""
from __future__ import annotations

import threading

# name: (cudnn.benchmark, allow_tf32, channels_last). PyTorch's defaults are benchmark off and
# TF32 convolutions on (torch.backends.cudnn.allow_tf32 = True); the bench runs with both off.
# "cudnn (benchmark)", torch FP32 with cudnn.benchmark in NCHW, keeps the name of earlier results.
TORCH_CASES = {
    "cudnn (benchmark)": (True, False, False),
    "torch FP32 (no benchmark)": (False, False, False),
    "torch FP32 channels_last (benchmark)": (True, False, True),
    "torch default (TF32)": (False, True, False),
    "torch default (TF32) channels_last": (False, True, True),
}
# cuDNN's algorithms run directly: "cudnn <ALGO>" (NCHW) and "cudnn NHWC <ALGO>"
CUDNN_PREFIX = {"NCHW": "cudnn ", "NHWC": "cudnn NHWC "}
# a cuDNN algorithm whose output is further than this from float64 is not timed
CUDNN_TOL = 1e-4


def rel_err(got, want) -> float:
    """||got - want|| / ||want||, in float64; got in any memory format of want's (logical) shape."""
    import torch
    return float(torch.linalg.vector_norm(got.double() - want) / torch.linalg.vector_norm(want))


def torch_conv(x, w, benchmark: bool, tf32: bool):
    """torch's conv2d (padding 1) under these flags; leaves both off, the bench's state, for the
    next case. Set at each call: timeit runs the calls (and captures them in a CUDA graph)."""
    import torch
    torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32 = benchmark, tf32
    try:
        return torch.nn.functional.conv2d(x, w, padding=1)
    finally:
        torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32 = False, False


def in_fresh_thread(fn, *args):
    """fn(*args) in a thread of its own, its result or exception passed back. PyTorch keeps the
    cuDNN plan it picked for a convolution per thread, under a key with allow_tf32 and the memory
    format but not cudnn.benchmark: in one thread the first of the benchmark and heuristic cases
    of a shape would set the plan of both. In its own thread a case gets its own pick, as in a
    process of its own."""
    out: dict = {}

    def run():
        try:
            out["value"] = fn(*args)
        except BaseException as e:       # re-raised in the caller's thread
            out["error"] = e
    t = threading.Thread(target=run, name="bench-case")
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]
    return out.get("value")


def torch_cases(xs, wts, xls, wls) -> dict:
    """{name: fn(i)} for TORCH_CASES on input set i: NCHW tensors xs, wts or channels_last xls, wls.
    fn returns the output (NCHW or channels_last, torch's choice)."""
    cases = {}
    for name, (benchmark, tf32, channels_last) in TORCH_CASES.items():
        x, w = (xls, wls) if channels_last else (xs, wts)
        cases[name] = lambda i, x=x, w=w, benchmark=benchmark, tf32=tf32: torch_conv(x[i], w[i], benchmark, tf32)
    return cases


def cudnn_algorithm_cases(cd, s, layout: str, xs, wts, ys, want, dev) -> tuple[dict, dict]:
    """cuDNN's algorithms on shape s in this layout (tensors xs, wts, ys in it: NCHW or
    channels_last), each run once on input set 0 and checked against want (float64, NCHW).
    Returns ({case: fn(i)} of those within CUDNN_TOL (fn returns its output),
    {layout-qualified algorithm: why not} of the others)."""
    import torch
    from .cudnn import ALGOS
    conv = cd.conv(s.N, s.C, s.H, s.W, s.K, layout)
    tag = "" if layout == "NCHW" else f"{layout} "
    cases, refused = {}, {}
    for algo, aname in enumerate(ALGOS):
        size, status = conv.workspace(algo)
        if size is None:
            refused[tag + aname] = status
            continue
        wsb = torch.empty(max(size, 16), dtype=torch.uint8, device=dev)

        def fa(i, algo=algo, wsb=wsb, size=size):
            conv.forward(algo, xs[i].data_ptr(), wts[i].data_ptr(), ys[i].data_ptr(), wsb.data_ptr(), size,
                         torch.cuda.current_stream().cuda_stream)
            return ys[i]
        try:
            ys[0].fill_(float("nan"))
            fa(0)
            torch.cuda.synchronize()
            err = rel_err(ys[0], want)
        except Exception as e:
            refused[tag + aname] = f"{type(e).__name__}: {e}"
            continue
        if not err <= CUDNN_TOL:
            refused[tag + aname] = f"wrong result (rel err {err:.1e})"
            continue
        cases[CUDNN_PREFIX[layout] + aname] = fa
    return cases, refused


def cudnn_layout(case: str):
    """"NCHW" or "NHWC" for a case that runs one cuDNN algorithm directly, else None."""
    if case.startswith(CUDNN_PREFIX["NHWC"]):
        return "NHWC"
    if case.startswith(CUDNN_PREFIX["NCHW"]) and case != "cudnn (benchmark)" and not case.startswith("cudnn best"):
        return "NCHW"
    return None
