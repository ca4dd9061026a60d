"""Winograd F(4x4,3x3), non-fused: CUDA-C transforms around the SASS batched SGEMM (gemmgen, or
tcgemm's 3xTF32 one).

    f4.conv(impl, x, w, y, plan, layout, ws, lib, stream)   # NCHW -> NCHW (w KCRS), or CHWN -> KHWN (w CRSK)

F(2x2,3x3) multiplies 4 times an output, F(4x4,3x3) 2.25 times: where the fused F(2x2,3x3)
kernel runs out of FFMA issue slots (Conv5: NOTES.md sections 8-11), the larger
tile wins even with U, V and M going through global memory (that is cuDNN's
WINOGRAD_NONFUSED). Four launches:

1. f4_filter_transform: U[e][c][k] = (G g G^T)[e]     (36 x Cp x Kp)
2. f4_input_transform:  V[e][c][t] = (B^T d B)[e]     (36 x Cp x Tp; t = (th*TW + tw)*N + n from CHWN,
                                                       n*TH*TW + th*TW + tw from NCHW: f4_input_transform_nchw)
3. the SASS GEMM:       M[p][e][k][t] = sum_c U V     (gemmgen's FFMA kernel, or tcgemm's 3xTF32 one on
                                                       the tensor cores; or f4_gemm, the CUDA-C reference)
4. f4_output_transform: y = A^T (sum_p M[p]) A        (KHWN, or NCHW: f4_output_transform_nchw)

NCHW tensors go through the path without layout transposes: the transforms read and write them,
the GEMM's columns in that layout's order (a warp's columns adjacent tiles of an image).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

import numpy as np

from . import gemmgen, tcgemm
from .gemmgen import BM, BN, GemmShape
from .device import arch, beside, cuda_module, filter_strides, join, pointer, zero32
from .plan import Shape, round_up
from .target import ARCHS, target

MAX_PARTS = 4
# The model behind the choice of parts and GEMM variant, in loop iterations of one block (8
# channels). An SM takes its blocks in turn, so the GEMM lasts about as long as the SM with the
# most blocks, n = ceil(blocks / SMs) of them (H100 gemm table, README: this ranks the splits of
# Conv4 and Conv5 as measured, where whole waves did not). One exception, measured on the H200
# (2026-11-26): where a single full wave of R blocks an SM (R: the variant's) leaves at most one
# block an SM, those blocks start together once the wave ends and run alone, with too few warps
# to hide their latencies: LONE_TAIL more blocks' time (the 16x8 tile on 432 and 468 blocks,
# 1.1 and 1.2 waves of 3 an SM: 19-20% slower than the 8x8 tile's 2 an SM; from 2 full waves on,
# or with 2 blocks an SM in the tail, the blocks no longer end together).
FIXED_ITERS = 3.0          # a block's prologue, first loads and epilogue
LONE_TAIL = 0.8
# A variant's time an iteration against the 8x8 tile's (least squares over the H200 gemm table)
VARIANTS = ((gemmgen.OPTIONS, 0.98), (gemmgen.EIGHT_BY_EIGHT, 1.0))
# The tensor-core GEMM (algo "f4tc"): its variant, and its block's iteration (128 x 64 x 8, three blocks an
# SM) against the 8x8 tile's (H100 gemm, results/h100_f4tc_gemm.json: 0.20 us against 0.58)
TC_VARIANTS = ((tcgemm.OPTIONS, 0.35),)
# The split of the tensor-core GEMM algo "f4tc" runs: "tf32" (3xTF32), or "f16" (FP16 halves:
# 0.79-1.09x of the 3xTF32 GEMM's time, a switch measured in NOTES.md section 20; `check
# --tc-split f16` runs conv2d with it), its iteration modelled at 0.85 of 3xTF32's
TC_SPLIT = "tf32"
TC_F16_SPEED = 0.85
SPEED = dict(VARIANTS + TC_VARIANTS + tuple((replace(o, split="f16"), v * TC_F16_SPEED) for o, v in TC_VARIANTS))
# Another part's M, per MB of M, read back by the output transform (an iteration is about 0.6
# us on Conv5): 0.3 us a MB on Conv5/N128 (1 -> 2 parts), 0.46 us on Conv5/N32 (2 -> 4 parts:
# 65536 threads, each adding its parts one after the other). An output transform that loads one
# part at a time takes 2 iterations a MB (H100, Conv5/N96: 0.043 ms with 1 part, 0.076 with 2).
M_ITERS_PER_MB = 0.7
# The launches' switches (the ablation turns them back: `bench --ablation --algo f4tc`, ablation4.py)
SIDE_STREAM = True         # the filter transform on a second stream beside the input transform (else after
                           # it, on the caller's stream: 1-4.5% slower on Conv3-Conv5, NOTES.md section 17)
FLOAT4_ROWS = True         # NCHW output, W % 4 == 0: a tile's rows of y as float4 (else through shared memory)



@dataclass(frozen=True)
class Plan:
    s: Shape
    parts: int = 1
    options: gemmgen.GemmOptions | tcgemm.TcOptions = gemmgen.OPTIONS      # the SASS GEMM's variant

    @property
    def T(self) -> int:
        return self.s.TH4 * self.s.TW4 * self.s.N

    @property
    def f16(self) -> bool:
        """The GEMM takes U and V in FP16 halves (tcgemm's F16Generator): U from
        f4_filter_transform_f16, the scales in the workspace's `scales`."""
        return isinstance(self.options, tcgemm.TcOptions) and self.options.split == "f16"

    @property
    def gemm(self) -> GemmShape:
        channels = self.options.channels if isinstance(self.options, tcgemm.TcOptions) else gemmgen.BC
        return GemmShape(round_up(self.s.C, self.options.unroll * channels * self.parts), round_up(self.s.K, BM),
                         round_up(self.T, BN), self.parts)

    def buffers(self) -> dict[str, tuple[int, ...]]:
        """Shapes of the intermediate buffers (float32; scales: two float bits words)."""
        g = self.gemm
        # the rows the last iterations' prefetches read past the last position's
        rows = g.operand_rows + (tcgemm.f16_pad_rows(self.options) if self.f16 else 0)
        out = {"u4": (rows, g.K), "v4": (rows, g.T), "m4": (g.parts * gemmgen.E, g.K, g.T)}
        if self.f16:
            out["scales"] = (2,)
        return out


def busiest_blocks(p: Plan, sms: int) -> float:
    """The GEMM's blocks on its busiest SM (and a lone tail's)."""
    wave = sms * p.options.blocks_per_sm()
    n = math.prod(launch_grid(p.gemm, p.options))
    return math.ceil(n / sms) + (LONE_TAIL if wave < n <= wave + sms else 0)


def modelled(p: Plan, sms: int) -> float:
    """Time of the GEMM in loop iterations: the busiest SM's blocks, and the extra M."""
    g = p.gemm
    speed = SPEED.get(p.options, 1.0)
    m_mb = gemmgen.E * g.K * g.T * 4 / 1e6
    return busiest_blocks(p, sms) * (g.iterations + FIXED_ITERS) * speed + (g.parts - 1) * m_mb * M_ITERS_PER_MB


def module(o: gemmgen.GemmOptions | tcgemm.TcOptions):
    """The generator of a GEMM variant: gemmgen (FFMA) or tcgemm (3xTF32 or FP16 halves on the
    tensor cores)."""
    return tcgemm if isinstance(o, tcgemm.TcOptions) else gemmgen


def generator(g: GemmShape, o: gemmgen.GemmOptions | tcgemm.TcOptions):
    """The variant's generator for g (raises gemmgen.Unsupported where it does not take g)."""
    return tcgemm.generator(g, o) if isinstance(o, tcgemm.TcOptions) else gemmgen.Generator(g, o)


def launch_grid(g: GemmShape, o: gemmgen.GemmOptions | tcgemm.TcOptions) -> tuple[int, int, int]:
    return tcgemm.grid(g, o) if isinstance(o, tcgemm.TcOptions) else g.grid()


def smem_bytes(o: gemmgen.GemmOptions | tcgemm.TcOptions) -> int:
    return o.smem_bytes() if isinstance(o, tcgemm.TcOptions) else gemmgen.SMEM_BYTES


def plan(s: Shape, sms: int, parts: int = 0, tc: bool = False) -> Plan:
    """The plan for s on a GPU of `sms` multiprocessors: the GEMM variant (VARIANTS, or with
    `tc` TC_VARIANTS in TC_SPLIT's split) and the split (`parts` given, > 0, or 1..MAX_PARTS) of
    the smallest modelled time."""
    return _plan(s, sms, parts, TC_SPLIT if tc else "")


@lru_cache(maxsize=None)
def _plan(s: Shape, sms: int, parts: int, split: str) -> Plan:
    """(Cached: every call of conv2d asks, and each candidate builds a GEMM generator.) plan()
    with the tensor-core split ("" for the FFMA GEMM)."""
    tc = bool(split)
    cands = []
    for o, _ in TC_VARIANTS if tc else VARIANTS:
        o = replace(o, split=split) if tc else o
        for n in [parts] if parts else range(1, MAX_PARTS + 1):
            p = Plan(s, n, o)
            try:
                generator(p.gemm, o)
            except gemmgen.Unsupported:
                continue
            if not parts and n > 1 and p.gemm.C != Plan(s, 1, o).gemm.C:
                continue                        # no channel padding for a split
            cands.append((modelled(p, sms), len(cands), p))
    if not cands:
        o = replace(TC_VARIANTS[0][0], split=split) if tc else VARIANTS[0][0]
        generator(Plan(s, parts or 1, o).gemm, o)     # raises with the reason
    return min(cands)[2]


@lru_cache(maxsize=None)
def sass_gemm(g: GemmShape, o: gemmgen.GemmOptions | tcgemm.TcOptions = gemmgen.OPTIONS):
    """The GEMM of (g, o) for this GPU (o fitted to its arch: gemmgen.fit, tcgemm.fit)."""
    import sassas
    gpu = arch()
    if gpu not in ARCHS:
        raise RuntimeError(f"the SASS GEMM is generated for {', '.join(ARCHS)}; this GPU is {gpu}")
    gen = module(o)
    o = gen.fit(o, target(gpu))
    return sassas.load(gen.build(g, o, arch=gpu))[gen.kernel_name(g, o)]


def filter_transform(w, u4, p: Plan, layout: str, stream=0, scales=None) -> None:
    """U (u4) from w; for the FP16 halves (p.f16) first max |w| into scales[0] (zeroed by the
    caller), then U scaled and split."""
    s, g = p.s, p.gemm
    args = (pointer(w), pointer(u4), np.int32(s.K), np.int32(s.C), np.int32(g.K), np.int32(g.C),
            *filter_strides(s, layout))
    if p.f16:
        n = s.K * s.C * 9
        cuda_module()["f4_absmax"]((min(-(-n // 128), 1024),), 128, pointer(w), np.int64(n), pointer(scales),
                                   stream=stream)
        cuda_module()["f4_filter_transform_f16"]((g.K // 128, g.C // 2), 128, *args, pointer(scales), stream=stream)
    else:
        cuda_module()["f4_filter_transform"]((g.K // 128, g.C), 128, *args, stream=stream)


def input_transform(x, v4, p: Plan, stream=0, layout: str = "CHWN", scales=None) -> None:
    """V (v4) from x in `layout` (CHWN, or NCHW with the columns image by image); where scales
    is given, max |V| into scales[1] (zeroed by the caller)."""
    s, g = p.s, p.gemm
    name = "f4_input_transform_nchw" if layout == "NCHW" else "f4_input_transform"
    cuda_module()[name]((g.T // 128, g.C), 128, pointer(x), pointer(v4), np.int32(s.N), np.int32(s.C),
                        np.int32(s.H), np.int32(s.W), np.int32(s.TW4), np.int32(p.T), np.int32(g.C),
                        np.int32(g.T), np.uint64(0 if scales is None else pointer(scales) + 4), stream=stream)


def launch_sass_gemm(g: GemmShape, u4, v4, m4, o: gemmgen.GemmOptions | tcgemm.TcOptions = gemmgen.OPTIONS,
                     stream=0, scales=None) -> None:
    """M (m4) from U (u4) and V (v4) by the SASS GEMM of shape g, variant o (the FP16 halves'
    also reads `scales`)."""
    extra = (pointer(scales),) if isinstance(o, tcgemm.TcOptions) and o.split == "f16" else ()
    sass_gemm(g, o)(launch_grid(g, o), o.threads, pointer(u4), pointer(v4), pointer(m4), *extra,
                    shared=smem_bytes(o), stream=stream)


def gemm(impl: str, u4, v4, m4, p: Plan, stream=0, scales=None) -> None:
    g = p.gemm
    if impl == "sass":
        launch_sass_gemm(g, u4, v4, m4, p.options, stream=stream, scales=scales)
    elif impl == "cuda":
        if g.parts != 1:
            raise ValueError("the CUDA-C GEMM has no split")
        cuda_module()["f4_gemm"]((g.T // 64, g.K // 64, gemmgen.E), 256, pointer(u4), pointer(v4), pointer(m4),
                                 np.int32(g.C), np.int32(g.K), np.int32(g.T), stream=stream)
    else:
        raise ValueError(impl)


def output_transform(m4, y, p: Plan, stream=0, layout: str = "CHWN") -> None:
    """y (KHWN, or NCHW: the columns of input_transform's NCHW order) from M (m4)."""
    s, g = p.s, p.gemm
    args = [pointer(m4), pointer(y), np.int32(s.N), np.int32(s.K), np.int32(s.H), np.int32(s.W), np.int32(s.TW4),
            np.int32(p.T), np.int32(g.K), np.int32(g.T), np.int32(g.parts)]
    if layout == "NCHW":      # a tile's rows as float4 where they are whole aligned 16 bytes
        args.append(np.int32(FLOAT4_ROWS and s.W % 4 == 0 and pointer(y) % 16 == 0))
    cuda_module()["f4_output_transform_nchw" if layout == "NCHW" else "f4_output_transform"](
        (-(-p.T // 128), s.K), 128, *args, stream=stream)


def conv(impl: str, x, w, y, p: Plan, layout: str, ws: Any, lib: Any, stream=0, w_layout: str = "") -> None:
    """y from x and w in `layout`: NCHW (w KCRS, y NCHW) or CHWN (w CRSK, y KHWN); w in the layout
    `w_layout` says where given (KCRS filters beside CHWN x: "NCHW"); buffers u4, v4, m4 of the
    workspace `ws` made with `lib` where missing."""
    for name, shape in p.buffers().items():
        if getattr(ws, name) is None:
            setattr(ws, name, lib.empty(shape))
    scales = ws.scales if p.f16 else None
    if scales is not None:
        zero32(scales, 2, stream)
    # The filter and input transforms run side by side: each alone leaves the GPU part idle
    # (a launch's start and tail, a small grid) and Conv5's filter transform (512 x 512 filters
    # into 36 x 1 MB of U) lasts as long as its input transform.
    if SIDE_STREAM:
        beside(stream, lambda side: filter_transform(w, ws.u4, p, w_layout or layout, side, scales))
    else:
        filter_transform(w, ws.u4, p, w_layout or layout, stream, scales)
    input_transform(x, ws.v4, p, stream, layout, scales)
    if SIDE_STREAM:
        join(stream)
    gemm(impl, ws.u4, ws.v4, ws.m4, p, stream, scales)
    output_transform(ws.m4, y, p, stream, layout)
