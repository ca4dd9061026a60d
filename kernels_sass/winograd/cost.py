"""The cost model behind conv2d's algo="auto": each algorithm's time for a shape, a layout and a GPU.

    gpu = cost.Gpu("sm_90", sms=132, clock_mhz=1980, bandwidth_gbs=3352)
    cost.predict(s, "f4tc", "NCHW", gpu)                       # microseconds
    cost.choose(s, "NCHW", gpu, ("f2", "f4", "f4tc", "f4fused"))  # the least predicted time

An algorithm's time is the sum of its launches' (its components'), each a linear function of the
few quantities that set it, plus a constant for the launches' starts and tails:
- a kernel that loops over the channels (the GEMMs, the fused kernels): the busiest SM's blocks
  and their loop iterations at the SM clock (an SM takes its blocks in turns: the split models
  of plan, f4 and f4fused_layout count them);
- a transform: the bytes it moves at the memory bandwidth and the elements it computes at the
  SMs' clock (the H200 moves V and M 1.4x as fast as the H100 at the same SM clock: this is
  what sets F(4x4,3x3)'s non-fused path against the fused kernel apart on the two GPUs).
The coefficients are fitted by non-negative least squares (a whole convolution's constant may be
negative: its launches' tails overlap) to the component and whole-convolution timings of `bench`
runs and stored in data/cost_model.json; `python -m kernels_sass.winograd model` (
cost_fit.py) refits them and checks the choices against the measured times.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable, Optional

from . import f4, f4fused_layout, plan
from .gemmgen import E
from .plan import Shape
from .workloads import BENCH_CASE

MODEL_FILE = Path(__file__).parent / "data" / "cost_model.json"


@dataclass(frozen=True)
class Gpu:
    arch: str
    sms: int
    clock_mhz: float           # the SM clock under load
    bandwidth_gbs: float       # DRAM: memory clock x bus width x 2 (DDR)


# The two GPUs the model was fitted on, as their drivers describe them (for `model --gpu` and the
# tests; bench runs that predate recording the attributes are matched by name)
KNOWN_GPUS = {
    "NVIDIA H100 80GB HBM3": Gpu("sm_90", 132, 1980.0, 3352.3),
    "NVIDIA H200": Gpu("sm_90", 132, 1980.0, 4814.3),
}
H100 = KNOWN_GPUS["NVIDIA H100 80GB HBM3"]


# ---- the quantities, in microseconds at unit coefficient ---------------------------------------
def _cycles(n: float, g: Gpu) -> float:
    return n / g.clock_mhz


def _bytes(n: float, g: Gpu) -> float:
    return n / g.bandwidth_gbs / 1e3


def _sm_elements(n: float, g: Gpu) -> float:
    return n / (g.sms * g.clock_mhz)


def _plan(s: Shape, g: Gpu, algo: str, parts: Optional[int]) -> f4.Plan:
    """F(4x4,3x3)'s non-fused plan for `algo` ("f4tc": the tensor-core GEMM's), in `parts` (None:
    the plan's own choice)."""
    return f4.plan(s, g.sms, parts or 0, tc=algo == "f4tc")


def f4_input(s: Shape, g: Gpu, p: f4.Plan) -> list[float]:
    v = E * p.gemm.C * p.gemm.T
    return [_bytes(4 * (s.N * s.C * s.H * s.W + v), g), _sm_elements(v, g), 1.0]


def f4_output(s: Shape, g: Gpu, p: f4.Plan) -> list[float]:
    y = s.N * s.K * s.H * s.W
    m = E * s.K * p.gemm.T          # the rows of M it reads (the GEMM's K is padded to its block)
    # y's rows through shared memory where a tile row is no whole float4 (NCHW, W % 4 != 0); a
    # split GEMM's parts of M added one after the other
    return [_bytes(4 * (m * p.parts + y), g), _sm_elements(y, g) * (s.W % 4 != 0),
            _sm_elements(m * (p.parts - 1), g), 1.0]


def f4_filter(s: Shape, g: Gpu) -> list[float]:
    return [_bytes(4 * (E + 9) * s.C * s.K, g), 1.0]


def f4_gemm(g: Gpu, p: f4.Plan) -> list[float]:
    n = f4.busiest_blocks(p, g.sms)
    return [_cycles(n * p.gemm.iterations, g), _cycles(n, g),
            _bytes(4 * (p.parts - 1) * E * p.gemm.K * p.gemm.T, g), 1.0]


def f4fused_main(s: Shape, g: Gpu, parts: int) -> list[float]:
    f = f4fused_layout.Fused(s, parts, persistent=True)
    n = -(-f.blocks // g.sms)
    loop = _cycles(n * f.iterations, g)
    # a window row: one 16-byte load and two 4-byte ones (W % 4 == 0), two 8-byte ones (W even),
    # six 4-byte ones (W odd)
    return [loop * (s.W % 4 == 0), loop * (s.W % 4 == 2), loop * (s.W % 2 == 1), _cycles(n, g),
            _bytes(4 * s.N * s.K * s.H * s.W * parts, g) * (parts > 1), 1.0]


def f2_main(s: Shape, g: Gpu) -> list[float]:
    return [_cycles(plan.split_plan(s, g.sms).modelled(g.sms), g), 1.0]


def _xy_bytes(s: Shape, g: Gpu) -> float:
    return _bytes(4 * s.N * (s.C + s.K) * s.H * s.W, g)


# ---- components (a kernel measured alone) and whole convolutions -------------------------------
Features = Callable[[Shape, Gpu, str, Optional[int]], list[float]]


@dataclass(frozen=True)
class Part:
    """A linear function of features(s, gpu, algo, parts): a launch `bench` times alone
    (`measured`: its key in a bench row's "ms"; `algo`: the algorithm whose split it ran with), or
    the rest of a whole convolution beyond its components. `parts`: the algorithm's split of the
    channel loop (when fitting, the one the bench run recorded; None: the plan's)."""
    measured: str
    features: Features
    algo: str = ""


COMPONENTS: dict[str, Part] = {
    "f2 main": Part("sass main", lambda s, g, a, p: f2_main(s, g)),
    "f4 gemm": Part("sass4 gemm", lambda s, g, a, p: f4_gemm(g, _plan(s, g, "f4", p)), "f4"),
    "f4tc gemm": Part("sass4tc gemm", lambda s, g, a, p: f4_gemm(g, _plan(s, g, "f4tc", p)), "f4tc"),
    "f4fused main": Part("f4fused main", lambda s, g, a, p: f4fused_main(s, g, p), "f4fused"),
    "f4 filter": Part("f4 filter transform", lambda s, g, a, p: f4_filter(s, g)),
}
# bench times the transforms with the FFMA GEMM's plan (f4's parts); f4tc's whole takes its own
for _layout, _suffix in (("NCHW", " NCHW"), ("CHWN", "")):
    COMPONENTS[f"f4 input {_layout}"] = Part("f4 input transform" + _suffix,
                                             lambda s, g, a, p: f4_input(s, g, _plan(s, g, a, p)), "f4")
    COMPONENTS[f"f4 output {_layout}"] = Part("f4 output transform" + _suffix,
                                              lambda s, g, a, p: f4_output(s, g, _plan(s, g, a, p)), "f4")

# algorithm -> layout -> (its components, the rest: its features and the measured whole); a rest's
# last feature is a constant (fitted with either sign: cost_fit.fit_signed_last)
WHOLE: dict[str, dict[str, tuple[tuple[str, ...], Part]]] = {
    "f2": {"NCHW": (("f2 main",), Part(BENCH_CASE["f2"] + " NCHW", lambda s, g, a, p: [_xy_bytes(s, g), 1.0])),
           "CHWN": (("f2 main",), Part(BENCH_CASE["f2"] + " CHWN", lambda s, g, a, p: [1.0]))},
    "f4fused": {"NCHW": (("f4fused main",), Part(BENCH_CASE["f4fused"] + " NCHW", lambda s, g, a, p: f4_filter(s, g))),
                # CHWN's loads and stores are a warp's 32 images, coalesced whatever W: a loop of its own
                "CHWN": ((), Part(BENCH_CASE["f4fused"] + " CHWN",
                                  lambda s, g, a, p: f4_filter(s, g)[:1] + f4fused_main(s, g, p)))},
}
for _algo in ("f4", "f4tc"):
    WHOLE[_algo] = {lay: ((f"f4 input {lay}", f"{_algo} gemm", f"f4 output {lay}"),
                          Part(f"{BENCH_CASE[_algo]} {lay}", lambda s, g, a, p: f4_filter(s, g)))
                    for lay in ("NCHW", "CHWN")}


# ---- the fitted coefficients -------------------------------------------------------------------
@lru_cache(maxsize=1)
def coefficients() -> dict[str, list[float]]:
    return json.loads(MODEL_FILE.read_text())["coefficients"]


def _dot(c: list[float], x: list[float]) -> float:
    if len(c) != len(x):
        raise ValueError(f"{MODEL_FILE.name}: {len(c)} coefficients for {len(x)} features; refit it "
                         f"(python -m kernels_sass.winograd model --fit ... --write)")
    return sum(a * b for a, b in zip(c, x))


def component(name: str, s: Shape, g: Gpu, algo: str, parts: Optional[int], coef: dict | None = None) -> float:
    return _dot((coef or coefficients())[name], COMPONENTS[name].features(s, g, algo, parts))


def predict(s: Shape, algo: str, layout: str, g: Gpu, coef: dict | None = None, parts: Optional[int] = None) -> float:
    """Microseconds of conv2d(algo=algo) on s in `layout` on g (the model's), its channel loop in
    `parts` (None: the split conv2d takes)."""
    coef = coef or coefficients()
    if algo == "f4fused" and parts is None:
        parts = f4fused_parts(s, layout, g, coef)
    names, rest = WHOLE[algo][layout]
    return (sum(component(n, s, g, algo, parts, coef) for n in names)
            + _dot(coef[f"{algo} {layout}"], rest.features(s, g, algo, parts)))


def f4fused_parts(s: Shape, layout: str, g: Gpu, coef: dict | None = None) -> int:
    """The fused kernel's split of the channel loop (split-C: each part adds its sums into y with
    REDG, y zeroed first) of least predicted time: more parts fill more SMs where the tiles are
    few, at the price of the adds (NCHW's, 16 bytes apart, cost ~4x CHWN's coalesced ones)."""
    def time(p: int) -> float:
        try:
            f4fused_layout.check(s, p, layout, persistent=True)
        except plan.Unsupported:
            return float("inf")
        return predict(s, "f4fused", layout, g, coef, p)
    return min(range(1, f4fused_layout.MAX_PARTS + 1), key=lambda p: (time(p), p))


def choose(s: Shape, layout: str, g: Gpu, candidates) -> str:
    """The candidate of least predicted time (the first of equal ones)."""
    cands = list(candidates)
    return cands[0] if len(cands) == 1 else min(cands, key=lambda a: predict(s, a, layout, g))


def whole_names() -> list[tuple[str, str]]:
    return [(a, lay) for a in WHOLE for lay in WHOLE[a]]
