"""Bulk copies global -> shared on sm_90 (cp.async.bulk: `UBLKCP.S.G`), completing on
mbarriers (`SYNCS.ARRIVE.TRANS64` arms a barrier with the bytes to expect, the copy engine
counts them down, `SYNCS.PHASECHK.TRANS64.TRYWAIT` waits for the phase).

One warp a block. STAGES buffers of COPIES copies of COPY_BYTES each; buffer s completes on
mbarrier s. Every loop iteration visits the stages in order: wait until stage s's copies of the
previous iteration landed (phase parity (i & 1) ^ 1; a fresh mbarrier passes parity 1 at
once), arm its mbarrier with the stage's bytes, issue its copies. After the loop every
stage's last phase is waited for; the end clock comes after that wait, or (issue-only
variant) before it. Every copy reads the first COPY_BYTES of `inp` (a source that stays in
L2, as smem.async_copy's LDGSTS.BYPASS); the host checks that each lane's word of the first
buffer holds inp[lane] at the end.

The latency cases keep one copy in flight: a figure is the copy's round trip plus what the
warp issues between seeing the last phase and issuing the next copy (the branch out of the
spin, the arrive, the copy's operands: about 20 cycles with ptxas's stalls).

The tensor form (cp.async.bulk.tensor.2d: `UTMALDG.2D`) does the same with boxes of a 2-D
tensor of 32-bit words, 64 wide (256-byte rows) and 64 high, described by a tensor map that
the host encodes (cuTensorMapEncodeTiled) into the first 128 bytes of `inp` once it knows
the buffer's address; the tensor starts 1 KiB into `inp`. Each box is 64 x rows words,
from the tensor's origin. The kernel first drops any cached copy of the map (`UTMACCTL.IV`,
what fence.proxy.tensormap::generic.acquire compiles to).

The SASS does what ptxas does for the CUDA-C reference (`kernels/smem_bulk_copy.cu`) with
one difference: ptxas wraps each UBLKCP (a uniform-datapath instruction, issued once per
warp) in an ELECT loop because only thread 0 executes it in C; here the whole warp executes
it once, and only the mbarrier arrive, a per-thread instruction, is predicated on lane 0.
The streams put NOPs after each copy (Shape.gap), so that copies leave about 75 cycles apart
(50 for copies of 512 B); the issue-only cases issue them back to back.

The latency cases time each copy: the warp reads the clock after each phase it sees, lane j
keeping the reads around copy j (as its start and end clocks); the figure is the median over
the copies (the mean beside it).
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .core import (CUDA, SASS, Benchmark, Case, Impl, Metric, Records, TensorMap2D, cuda_impl,
                   register, sass_impl, sm_bandwidth_metrics)
from .patterns import LIMIT_BYTES_PER_CLK, WARP
from .results import Limit
from .sassgen import Regs, Sass, block_start, epilogue, loop_control, prologue, shared_base

BUFFER_BYTES = 32 * 1024       # all stages' buffers: static shared memory stays under 48 KiB
# mbarrier.init's 64-bit word for an expected arrival count of 1, as ptxas builds it
# ((0x100000 - count) << 1, (0x100000 - count) << 11).
MBARRIER_INIT_COUNT1 = (0x1FFFFE, 0x7FFFF800)
BULK_UNIT = 16                 # UBLKCP's size operand counts 16-byte units
PARITY = 9                     # R9 = the phase parity to wait for, in bit 31
ARRIVE_BYTES = 10              # R10 = the bytes a stage's mbarrier expects
BARRIERS = 12                  # R12 = the first mbarrier's address
MBARRIER_REG = f"R{BARRIERS}+URZ"
LANE0 = "P3"                   # lane 0: the one thread that arrives on the mbarriers
READY = "P4"                   # TRYWAIT's answer
# Stamps (one copy in flight): lane j keeps the clock after copy j - 1's phase (its start)
# and after copy j's (its end). R48 = tid + 1, R49 = tid + 2; P5: the loop counter (i + 1 in
# iteration i) is tid + 1, P6: it is tid + 2.
STAMP_FROM, STAMP_TO = 48, 49
STAMP_START, STAMP_END = "P5", "P6"
COPY_PAIR = "UR12"             # UR12 = destination, UR13 = its mbarrier
SOURCE = "UR14"                # bulk: UR14:UR15 = inp, the source of every copy
SIZE = "UR16"                  # bulk: UR16 = COPY_BYTES / 16
# Tensor form: UR12..UR15 = destination, mbarrier, x, y (UTMALDG's first operand); UR16:UR17 =
# the tensor map's address (inp).
TENSOR_MAP = "UR16"
TENSOR_WIDTH = 64              # words: a row of 256 bytes
TENSOR_HEIGHT = 64
TENSOR_ROW_BYTES = 4 * TENSOR_WIDTH
TENSOR_OFFSET = 1024           # bytes into inp where the tensor starts (the map: the first 128)
TENSOR_MAP_WORDS = 32
FORMS = ("bulk", "tensor")
COPY_STALL = 12


@dataclass(frozen=True)
class Shape:
    """STAGES buffers of COPIES copies of COPY_BYTES each."""
    copy_bytes: int
    copies: int
    stages: int
    form: str = "bulk"         # 'bulk' (UBLKCP) | 'tensor' (UTMALDG.2D, boxes of whole rows)
    # The stall of a copy and of the uniform-register write before it: ptxas gives both 12.
    stall: int = COPY_STALL
    gap: int = 0               # cycles of NOP after each copy (and its stall)

    def __post_init__(self):
        if self.form not in FORMS:
            raise ValueError(f"unknown copy form {self.form!r}")
        if self.copy_bytes % BULK_UNIT or self.copy_bytes <= 0:
            raise ValueError(f"a bulk copy moves a positive multiple of 16 bytes, not {self.copy_bytes}")
        if self.form == "tensor" and (self.copy_bytes % TENSOR_ROW_BYTES
                                      or self.rows > TENSOR_HEIGHT):
            raise ValueError(f"a box is 1..{TENSOR_HEIGHT} rows of {TENSOR_ROW_BYTES} bytes, "
                             f"not {self.copy_bytes} bytes")
        if self.stage_bytes * self.stages > BUFFER_BYTES:
            raise ValueError(f"{self.stages} x {self.stage_bytes} bytes exceed the "
                             f"{BUFFER_BYTES}-byte buffer")

    @property
    def stage_bytes(self) -> int:
        return self.copy_bytes * self.copies

    @property
    def copies_per_iteration(self) -> int:
        return self.copies * self.stages

    @property
    def single(self) -> bool:
        """One copy in flight (the latency cases): each copy is timed on its own."""
        return self.stages == 1 and self.copies == 1

    @property
    def rows(self) -> int:
        """Tensor form: the box's height (rows of TENSOR_WIDTH words)."""
        return self.copy_bytes // TENSOR_ROW_BYTES

    @property
    def tag(self) -> str:
        tag = f"{_size(self.copy_bytes)}x{self.copies}x{self.stages}"
        if self.stall != COPY_STALL:
            tag += f"_s{self.stall}"
        if self.gap:
            tag += f"_g{self.gap}"
        return tag

    @property
    def instruction(self) -> str:
        return "UBLKCP.S.G" if self.form == "bulk" else "UTMALDG.2D"

    @property
    def source_word(self) -> int:
        """inp's word that lands first in the buffer."""
        return 0 if self.form == "bulk" else TENSOR_OFFSET // 4


def _size(n: int) -> str:
    return f"{n // 1024}K" if n % 1024 == 0 else str(n)


def kernel_name(shape: Shape, wait_each: bool) -> str:
    kind = "bulk_copy" if shape.form == "bulk" else "tma_2d"
    return f"{kind}_{shape.tag}{'' if wait_each else '_issue'}"


def _barrier(stage: int, base: str) -> str:
    """mbarrier `stage`'s address operand, written as nvdisasm writes it (no `+0x0`)."""
    return f"[{base}+{8 * stage:#x}]" if stage else f"[{base}]"


def _wait_phase(k: Sass, stage: int, label: str) -> None:
    """Spin until mbarrier `stage` completed the phase whose parity R9 holds."""
    k.label(label)
    k.op(f"SYNCS.PHASECHK.TRANS64.TRYWAIT {READY}, {_barrier(stage, MBARRIER_REG)}, R{PARITY}",
         write=1, stall=2)
    k.op(f"@!{READY} BRA {label}", wait=0x02, stall=5)


def _wait_all(k: Sass, shape: Shape) -> None:
    for s in range(shape.stages):
        _wait_phase(k, s, f"DRAIN{s}")


def bulk_kernel(shape: Shape, wait_each: bool = True, arch: str = "sm_90") -> Sass:
    regs = Regs()
    base = shared_base(arch)
    barriers = base + BUFFER_BYTES
    name = kernel_name(shape, wait_each)
    k = Sass(name, shared=base + BUFFER_BYTES + 8 * shape.stages, comment=(
        f"{name}: {shape.stages} stages of {shape.copies} x {shape.instruction} of "
        f"{shape.copy_bytes} bytes,\n"
        f"each stage completing on its mbarrier; the end clock "
        f"{'after the copies landed' if wait_each else 'after the last copy issued'}. "
        f"Generated by microbench/bench_smem_bulk.py."))
    prologue(k, regs)
    k.op(f"ISETP.EQ.AND {LANE0}, PT, R{regs.tid}, RZ, PT", wait=0x01, y=True, stall=6, note="lane 0")
    k.op(f"UMOV UR10, {MBARRIER_INIT_COUNT1[0]:#x}", stall=1)
    k.op(f"UMOV UR11, {MBARRIER_INIT_COUNT1[1]:#x}", stall=1, note="mbarrier.init, count 1")
    k.op(f"UMOV UR9, {barriers:#x}", y=True, stall=6)
    fenced = 0
    if shape.form == "tensor":
        # ptxas's order for fence.proxy.tensormap's acquire: a view fence before the
        # mbarrier inits, every scoreboard waited for before the map is dropped.
        k.op("FENCE.VIEW.ASYNC.S", write=5, stall=11)
        fenced = 0x20
    for s in range(shape.stages):
        k.op(f"SYNCS.EXCH.64 URZ, {_barrier(s, 'UR9')}, UR10", wait=fenced if s == 0 else 0,
             read=3, write=5, stall=1)
    k.op(f"MOV R{BARRIERS}, {barriers:#x}", stall=1)
    k.op(f"MOV R{PARITY}, 0x80000000", stall=1, note="parity 1: a fresh mbarrier passes")
    k.op(f"MOV R{ARRIVE_BYTES}, {shape.stage_bytes:#x}", stall=1, note="bytes a stage expects")
    if shape.form == "bulk":
        k.op(f"ULDC.64 {SOURCE}, inp[0]", stall=1, note="source: inp")
        k.op(f"UMOV {SIZE}, {shape.copy_bytes // BULK_UNIT:#x}", y=True, stall=6,
             note=f"{shape.copy_bytes} bytes, in 16-byte units")
    else:
        k.op(f"ULDC.64 {TENSOR_MAP}, inp[0]", stall=1, note="the tensor map: inp")
        k.op("UMOV UR14, URZ", stall=1, note="box at x = 0")
        k.op("UMOV UR15, URZ", y=True, stall=6, note="y = 0")
        k.op(f"UTMACCTL.IV [{TENSOR_MAP}]", wait=k.pending, read=0, stall=1,
             note="drop a cached copy of the map (fence.proxy.tensormap acquire)")
        k.op("UTMACMDFLUSH", read=3, stall=2)
    stamps = shape.single and wait_each
    if stamps:
        k.op(f"IADD3 R{STAMP_FROM}, R{regs.tid}, 0x1, RZ", stall=1, note="stamps: tid + 1")
        k.op(f"IADD3 R{STAMP_TO}, R{regs.tid}, 0x2, RZ", stall=1, note="tid + 2")
    block_start(k, regs)
    inc, cmp, bra = loop_control(regs, "LOOP")
    k.label("LOOP")
    # Loop control first: it runs while the last iteration's copies are in flight, and the
    # compare is long done when the branch reads it.
    k.op(inc, y=True, stall=6)
    k.op(cmp, stall=1)
    if stamps:
        # A predicate is read 13 cycles after it is written, at the earliest: these run
        # while the last copy is in flight.
        k.op(f"ISETP.EQ.AND {STAMP_START}, PT, R{regs.counter}, R{STAMP_FROM}, PT", stall=1)
        k.op(f"ISETP.EQ.AND {STAMP_END}, PT, R{regs.counter}, R{STAMP_TO}, PT", stall=5)
    for s in range(shape.stages):
        _wait_phase(k, s, f"WAIT{s}")
        if stamps:
            k.op(f"@{STAMP_START} CS2R R{regs.start}, SR_CLOCKLO", stall=1, note="copy tid starts")
            k.op(f"@{STAMP_END} CS2R R{regs.end}, SR_CLOCKLO", stall=1, note="copy tid - 1 ends")
        k.op(f"@{LANE0} SYNCS.ARRIVE.TRANS64 RZ, {_barrier(s, MBARRIER_REG)}, R{ARRIVE_BYTES}",
             stall=1, note=f"arm mbarrier {s}")
        for c in range(shape.copies):
            dst = base + s * shape.stage_bytes + c * shape.copy_bytes
            # UBLKCP reads its uniform registers after it issues: each waits for the last
            # one's read barrier before the pair is rewritten, as ptxas does.
            k.op(f"UMOV {COPY_PAIR}, {dst:#x}", wait=0x01, stall=1)
            k.op(f"UMOV UR13, {barriers + 8 * s:#x}", y=True, stall=shape.stall)
            if shape.form == "bulk":
                k.op(f"UBLKCP.S.G [{COPY_PAIR}], [{SOURCE}], {SIZE}", read=0, y=True, stall=shape.stall)
            else:
                k.op(f"UTMALDG.2D [{COPY_PAIR}], [{TENSOR_MAP}]", read=0, y=True, stall=shape.stall)
            for gap in range(shape.gap, 0, -15):
                k.op("NOP", y=True, stall=min(gap, 15))
    k.op(f"LOP3.LUT R{PARITY}, R{PARITY}, 0x80000000, RZ, 0x3c, !PT", stall=1, note="next parity")
    k.op(bra, stall=5)
    if stamps:
        # The last copy's end, and the whole loop's for the lanes past the last copy.
        k.op(f"ISETP.GE.AND {STAMP_END}, PT, R{STAMP_FROM}, R{regs.counter}, PT", y=True, stall=6)
    if wait_each:
        _wait_all(k, shape)
    if stamps:
        k.op(f"@{STAMP_END} CS2R R{regs.end}, SR_CLOCKLO", y=True, stall=6, note="end clock")
    epilogue(k, regs, sink=regs.sink, sink_always=True, end_clock=not stamps,
             before_store=lambda kk: _sink(kk, shape, regs, base, wait_each))
    return k


def _sink(k: Sass, shape: Shape, regs: Regs, base: int, wait_each: bool) -> None:
    """sink = the lane's word of the first buffer (after the drain, for the issue-only
    variant, whose end clock comes before it)."""
    if not wait_each:
        _wait_all(k, shape)
    k.op(f"SHF.L.U32 R{regs.sink}, R{regs.tid}, 0x2, RZ", y=True, stall=6)
    k.op(f"LDS R{regs.sink}, [R{regs.sink}+{base:#x}]", write=2, stall=1,
         note="the lane's word of the first copy")


@lru_cache(maxsize=None)
def bulk_impls(shape: Shape, wait_each: bool, arch: str = "sm_90") -> dict[str, Impl]:
    defines = dict(COPY_BYTES=shape.copy_bytes, COPIES=shape.copies, STAGES=shape.stages,
                   WAIT_EACH=int(wait_each))
    if shape.single and wait_each:
        defines["STAMPS"] = 1
    if shape.form == "tensor":
        defines.update(TENSOR=1, ROWS=shape.rows, TENSOR_OFFSET=TENSOR_OFFSET)
    return {SASS: sass_impl(bulk_kernel(shape, wait_each, arch)),
            CUDA: cuda_impl("smem_bulk_copy.cu", "smem_bulk_copy", **defines)}


# Stream shapes: 32 KiB in flight a block, in copies of 512 B .. 8 KiB; blocks per SM 1, 2, 4.
# A stream's copies leave STREAM_GAP cycles of NOP apart (about 75 cycles from copy to copy;
# ptxas's ELECT loop issues one every 50 or so). Back to back (25 cycles apart) the 2 KiB
# copies streamed 30% slower (H100: 9.7 against 13.9 B/clk/SM) and their launches scattered
# 2% instead of 0.2%. Copies of 512 B leave SMALL_COPY_GAP apart (50 cycles from copy to
# copy): the copy engine takes about 74 cycles for one, so the longer gap would time the
# issue (6.55 against 6.96).
STREAM_GAP = 50
SMALL_COPY_GAP = 25


def _stream_shape(copy_bytes: int, copies: int, form: str = "bulk") -> Shape:
    return Shape(copy_bytes, copies, 4, form,
                 gap=STREAM_GAP if copy_bytes >= 1024 else SMALL_COPY_GAP)


STREAM_SHAPES = (_stream_shape(512, 16), _stream_shape(2048, 4), _stream_shape(8192, 1))
STREAM_BLOCKS = ((_stream_shape(8192, 1), 2), (_stream_shape(8192, 1), 4))
# Latency: one copy in flight, waited for before the next.
LATENCY_SHAPES = tuple(Shape(n, 1, 1) for n in (16, 128, 1024, 4096, 16384))
ISSUE_SHAPE = Shape(1024, 8, 4)     # 32 copies issued back to back, then waited for
ISSUE_STALLS = (COPY_STALL, 2)      # ptxas's stalls around a copy, and the least
SOURCE_WORDS = 16384 // 4           # the largest copy's source
# The tensor form: boxes of 4 and 32 rows (1 KiB, 8 KiB) streamed, 1 .. 64 rows one at a time.
TENSOR_STREAM = ((_stream_shape(1024, 8, "tensor"), 1), (_stream_shape(8192, 1, "tensor"), 1),
                 (_stream_shape(8192, 1, "tensor"), 4))
TENSOR_LATENCY = tuple(Shape(n, 1, 1, "tensor") for n in (256, 1024, 4096, 16384))
TENSOR_ISSUE = Shape(1024, 8, 4, "tensor")
# The streams run 128 times the latency runs' iterations (2.6-7.8 ms a launch with one block
# an SM and copies of 2 or 8 KiB): a block's copies wait on L2 with every other SM's, and
# which SMs get the most changes from launch to launch. An eighth of this length left the
# one-block-an-SM streams 1-2.5% apart across launches (as the median over SMs), half of it
# 0.2-0.8% (as the mean) but the CUDA-C streams of 8 KiB copies (tensor form, or two blocks
# an SM) up to 1.35-2.1%; the SASS stream of 2 KiB copies back to back 1.1-2.3% at any
# length (0.2% STREAM_GAP apart).
STREAM_ITERS_FACTOR = 128
# A stream's sample is the mean of STREAM_LAUNCHES launches: at any length the 8 KiB streams of
# one block an SM (tensor form, SASS) kept single launches 1.0-1.04% apart on the H100, a few
# launches of 21 a fifth of a percent above the rest (where the launch put the blocks that
# waited longest on L2); the mean of 4 halves that.
STREAM_LAUNCHES = 4
# MICROBENCH_BULK_GAPS=1: the streams of one and two blocks an SM also with the other gaps of
# these (SASS only; 0: back to back).
GAPS_ENV = "MICROBENCH_BULK_GAPS"
GAPS = (0, 12, 25, 50, 100)


def _source_words() -> np.ndarray:
    return (np.arange(SOURCE_WORDS, dtype=np.uint64) * 2654435761 % 2 ** 32).astype(np.uint32)


def _tensor_input() -> np.ndarray:
    """inp of the tensor form: the map's 128 bytes (encoded at launch), zeros up to 1 KiB,
    then the tensor."""
    words = np.zeros(TENSOR_OFFSET // 4 + TENSOR_WIDTH * TENSOR_HEIGHT, dtype=np.uint32)
    words[TENSOR_OFFSET // 4:] = _source_words()[:TENSOR_WIDTH * TENSOR_HEIGHT]
    return words


def _tensor_map(shape: Shape) -> TensorMap2D:
    return TensorMap2D(offset=TENSOR_OFFSET, width=TENSOR_WIDTH, height=TENSOR_HEIGHT,
                       box_width=TENSOR_WIDTH, box_height=shape.rows)


def _check_landed(rec: Records, case: Case):
    """Every lane's sink is its word of the first copy: inp[lane] (bulk), the tensor's first
    row (tensor form)."""
    first = case.extra.get("source_word", 0)
    n = min(WARP, case.extra["copy_bytes"] // 4)
    want = case.inp[first:first + n]
    got = rec.sink.reshape(-1, WARP)[:, :n]
    if not (got == want[None, :]).all():
        block, lane = (int(x[0]) for x in np.nonzero(got != want[None, :]))
        return (f"block {block} lane {lane} read {int(got[block, lane]):#x} from the first buffer, "
                f"expected inp[{first + lane}] = {int(want[lane]):#x}: the copy did not land")
    return None


@register
class SmemBulkCopy(Benchmark):
    name = "smem.bulk_copy"
    title = "Shared memory: bulk and tensor copies from global memory (UBLKCP, UTMALDG)"
    about = ("UBLKCP.S.G (cp.async.bulk) and UTMALDG.2D (cp.async.bulk.tensor, prefix "
             "'tma.2d') global -> shared completing on mbarriers, one warp a block issuing: "
             "bytes/clk/SM with 4 stages of 8 KiB in flight a block (copies of 512 B .. 8 KiB; "
             "1, 2 or 4 blocks an SM; the mean over SMs, the median, 10th and 90th percentiles "
             "beside it); the latency of one copy (16 B .. 16 KiB) from issue to "
             "the waiting warp seeing its mbarrier phase complete; the cycles issuing one costs "
             "the warp (32 copies of 1 KiB, the wait after the end clock; with ptxas's stall of 12 "
             "around each copy, and with 2).")

    def cases(self, quick: bool, arch: str = "sm_90") -> list[Case]:
        iters = 16 if quick else 32
        out = []

        def add(variant, shape, wait_each, grid, blocks_per_sm, n_iters, metrics, what,
                langs=(SASS, CUDA), launches=1):
            extra = {"what": what, "copy_bytes": shape.copy_bytes, "copies": shape.copies,
                     "stages": shape.stages, "blocks_per_sm": blocks_per_sm,
                     "in_flight": shape.stage_bytes * shape.stages * blocks_per_sm}
            tensor = {}
            if shape.form == "tensor":
                variant = f"tma.2d {variant}"
                extra.update(form="tensor", box_rows=shape.rows, source_word=shape.source_word)
                tensor = {"tensor_map": _tensor_map(shape)}
            impls = bulk_impls(shape, wait_each, arch)
            out.extend(self.both(
                variant, {lang: impls[lang] for lang in langs},
                grid=grid, blocks_per_sm=blocks_per_sm, block=WARP, iters=n_iters,
                metrics=metrics, inp=_source_words() if shape.form == "bulk" else _tensor_input(),
                check=_check_landed, expect={shape.instruction: shape.copies_per_iteration},
                extra=extra, launches=launches, **tensor))

        for form in FORMS:
            bulk = form == "bulk"
            streams = [(s, 1) for s in STREAM_SHAPES] + list(STREAM_BLOCKS) if bulk else TENSOR_STREAM
            for shape, blocks in streams:
                n_iters = iters * STREAM_ITERS_FACTOR
                per_block = float(shape.stage_bytes * shape.stages * n_iters)
                metrics = sm_bandwidth_metrics(lambda rec, case, b=per_block: _lane0(rec, b))
                name = f"stream {_size(shape.copy_bytes)} copies, {blocks} block{'s' if blocks > 1 else ''}/SM"
                add(name, shape, True, "sms", blocks, n_iters, metrics, "bandwidth", launches=STREAM_LAUNCHES)
                if os.environ.get(GAPS_ENV, "") not in ("", "0") and blocks <= 2:
                    for gap in (g for g in GAPS if g != shape.gap):
                        add(f"{name}, " + (f"gap {gap}" if gap else "back to back"),
                            dataclasses.replace(shape, gap=gap), True, "sms", blocks, n_iters,
                            metrics, "bandwidth", langs=(SASS,))
            for shape in LATENCY_SHAPES if bulk else TENSOR_LATENCY:
                limit = Limit(min=max(1.0, shape.copy_bytes / LIMIT_BYTES_PER_CLK),
                              why="a copy lands at most 128 B a clock")
                metrics = [Metric("latency", "cycles",
                                  lambda rec, case, n=iters: float(np.median(_copy_cycles(rec, n))),
                                  limit),
                           Metric("latency_mean", "cycles",
                                  lambda rec, case, n=iters: float(np.mean(_copy_cycles(rec, n))),
                                  limit, headline=False)]
                add(f"latency {_size(shape.copy_bytes)}", shape, True, 1, 1, iters, metrics, "latency")
            for stall in ISSUE_STALLS:
                shape = dataclasses.replace(ISSUE_SHAPE if bulk else TENSOR_ISSUE, stall=stall)
                n_issue = shape.copies_per_iteration
                metric = Metric("cycles_per_inst", "cycles",
                                lambda rec, case, n=n_issue: float(rec.warp_span(0)) / n,
                                Limit(min=1.0, why="a warp issues at most one instruction a clock"))
                # the CUDA-C reference has ptxas's stalls: once
                add(f"issue {_size(shape.copy_bytes)} x {n_issue}"
                    + ("" if stall == COPY_STALL else f" stall {stall}"),
                    shape, False, 1, 1, 1, [metric], "issue",
                    langs=(SASS, CUDA) if stall == COPY_STALL else (SASS,))
        return out


def _copy_cycles(rec: Records, iters: int) -> np.ndarray:
    """The latency cases' samples: lane j's start and end clocks bracket copy j."""
    return rec.cycles()[:min(iters, WARP)]


def _lane0(rec: Records, per_block: float) -> np.ndarray:
    """Bytes per thread: a block's copies counted on its lane 0."""
    work = np.zeros(rec.threads)
    work[::WARP] = per_block
    return work
