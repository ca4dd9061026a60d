"""python -m kernels_sass.winograd train-bench: training-step time of the 3x3 layers of ResNet-18/34.

For each stride-1 3x3 layer shape of ResNet-18/34 at 224x224 (workloads.RESNET: Conv2..Conv5)
and batch size, one training step of the layer alone (forward, then the input and the weight
gradient: torch.autograd.grad(y, (x, w), dy)) with

  winograd     kernels_sass.winograd.Conv2d (input gradient through the Winograd operator)
  wino/dx-cudnn Conv2d(input_grad="torch"): the input gradient by cuDNN (the switch, measured)
  torch-fp32   nn.Conv2d, cudnn.benchmark, TF32 off (FP32 throughout, as ours)
  torch-tf32   nn.Conv2d, cudnn.benchmark, TF32 on (PyTorch's default math for convolutions)

and the step's parts (forward, input gradient, weight gradient) of winograd and torch-fp32:
winograd's dw is F(3x3, 2x2) (wgrad.py), torch-fp32's cuDNN's; the winograd step runs the
faster of the two (weight_grad="auto", its choice in the JSON as "dw_choice").
Network time = sum over the layers of count x step time (the stride-2 3x3 layers, the 7x7 stem
and the 1x1 shortcuts are PyTorch's in every column and left out). Times: CUDA events around
`--reps` steps, median of 5 rounds, ms a step.
"""
from __future__ import annotations

import json
import statistics

from .workloads import RESNET, log

# stride-1 3x3 convolutions of each stage (BasicBlock: two a block, less the stride-2 first one)
COUNTS = {"resnet18": {"Conv2": 4, "Conv3": 3, "Conv4": 3, "Conv5": 3},
          "resnet34": {"Conv2": 6, "Conv3": 7, "Conv4": 11, "Conv5": 5}}
MODES = ("winograd", "wino/dx-cudnn", "torch-fp32", "torch-tf32")
PARTS = ("fwd", "dx", "dw")


def _time(fn, reps: int) -> float:
    import torch
    for _ in range(3):
        fn()
    times = []
    for _ in range(5):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(reps):
            fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / reps)
    return statistics.median(times)


def _layer(mode: str, c: int, k: int):
    import torch
    from torch import nn
    from .layer import Conv2d
    if mode.startswith("torch"):
        return nn.Conv2d(c, k, 3, padding=1, bias=False).cuda()
    return Conv2d(c, k, 3, padding=1, bias=False, input_grad="torch" if mode == "wino/dx-cudnn" else "winograd").cuda()


def measure(n: int, c: int, hw: int, k: int, reps: int) -> dict:
    """ms a step of each mode, and of each part for winograd and torch-fp32."""
    import torch
    from . import op, wgrad
    x = torch.randn(n, c, hw, hw, device="cuda", requires_grad=True)
    dy = torch.randn(n, k, hw, hw, device="cuda")
    out = {}
    for mode in MODES:
        torch.backends.cudnn.allow_tf32 = mode == "torch-tf32"
        conv = _layer(mode, c, k)
        out[mode] = _time(lambda: torch.autograd.grad(conv(x), (x, conv.weight), dy), reps)
    torch.backends.cudnn.allow_tf32 = False
    w = _layer("torch-fp32", c, k).weight.detach()
    xd = x.detach()

    def backward(mask):
        return lambda: torch.ops.aten.convolution_backward(dy, xd, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, mask)
    out["parts"] = {
        "winograd": {"fwd": _time(lambda: op.conv2d(xd, w), reps),
                     "dx": _time(lambda: op.conv2d(dy, op.rotated(w)), reps),
                     "dw": _time(lambda: wgrad.weight_grad(xd, dy), reps)},
        "torch-fp32": {"fwd": _time(lambda: torch.nn.functional.conv2d(xd, w, padding=1), reps),
                       "dx": _time(backward([True, False, False]), reps),
                       "dw": _time(backward([False, True, False]), reps)},
    }
    out["dw_choice"] = wgrad.choose(xd, dy)
    return out


def render(result: dict) -> str:
    lines = [f"GPU: {result['gpu']}, torch {result['torch']}, cuDNN {result['cudnn']}; ms a training step "
             "(forward + input and weight gradients)", ""]
    head = "| layer | N | " + " | ".join(MODES) + " | fp32/winograd | tf32/winograd | winograd fwd/dx/dw | fp32 fwd/dx/dw | dw chosen |"
    lines += [head, "|" + "---|" * (head.count("|") - 1)]
    for r in result["layers"]:
        t = r["ms"]
        wp, tp = t["parts"]["winograd"], t["parts"]["torch-fp32"]
        lines.append(f"| {r['layer']} | {r['N']} | " + " | ".join(f"{t[m]:.3f}" for m in MODES)
                     + f" | {t['torch-fp32'] / t['winograd']:.2f} | {t['torch-tf32'] / t['winograd']:.2f} | "
                     + "/".join(f"{wp[p]:.3f}" for p in PARTS) + " | " + "/".join(f"{tp[p]:.3f}" for p in PARTS) + f" | {t.get('dw_choice', '-')} |")
    lines += ["", "Networks (stride-1 3x3 layers only: sum of count x step):", ""]
    head = "| net | N | " + " | ".join(MODES) + " | fp32/winograd | tf32/winograd |"
    lines += [head, "|" + "---|" * (head.count("|") - 1)]
    for net, counts in COUNTS.items():
        for n in sorted({r["N"] for r in result["layers"]}):
            rows = {r["layer"]: r["ms"] for r in result["layers"] if r["N"] == n}
            if not all(layer in rows for layer in counts):
                continue
            tot = {m: sum(cnt * rows[layer][m] for layer, cnt in counts.items()) for m in MODES}
            lines.append(f"| {net} | {n} | " + " | ".join(f"{tot[m]:.2f}" for m in MODES)
                         + f" | {tot['torch-fp32'] / tot['winograd']:.2f} | {tot['torch-tf32'] / tot['winograd']:.2f} |")
    return "\n".join(lines)


def cmd_train_bench(args) -> int:
    import torch
    from . import op
    if not torch.cuda.is_available():
        raise SystemExit("train-bench: needs torch with CUDA and an NVIDIA GPU")
    why = op.uncovered(torch.empty(1, 1, 1, 1, device="cuda"), torch.empty(1, 1, 3, 3, device="cuda"))
    if why is not None:
        raise SystemExit(f"train-bench: the Winograd kernels do not run here: {why}")
    saved = torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.benchmark = True
    result = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
              "cudnn": torch.backends.cudnn.version(), "reps": args.reps, "layers": []}
    for layer, (c, hw, k) in RESNET.items():
        for n in args.batch:
            if args.configs and not any(f"{layer}/N{n}".startswith(p) for p in args.configs):
                continue
            log(f"train-bench {layer}/N{n}")
            result["layers"].append({"layer": layer, "N": n, "C": c, "HW": hw, "K": k,
                                     "ms": measure(n, c, hw, k, args.reps)})
    torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32 = saved
    print(render(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0
