"""smem.bulk_copy on the CPU: what the UBLKCP kernels must hold to measure what they say.

tests/microbench/test_kernels.py assembles every one for sm_90, decodes it with nvdisasm to
exactly the text and control codes written, runs `sassas check` on it and compiles the
CUDA-C reference with NVRTC (each keeping its UBLKCPs); here: the mbarrier protocol (one
arrival, the bytes the stage's copies bring, parity), the copies' footprint, the ordering of
the clocks against the waits, the launch shapes and the host's check of the landed data."""
from __future__ import annotations

import re

import numpy as np
import pytest

from microbench import bench_smem_bulk as bulk
from microbench.core import Records, all_benchmarks

ARCH = "sm_90"
SHAPES = sorted({*bulk.STREAM_SHAPES, *bulk.LATENCY_SHAPES, bulk.ISSUE_SHAPE},
                key=lambda s: (s.copy_bytes, s.copies, s.stages))


def _cases(quick=True):
    return all_benchmarks()["smem.bulk_copy"].cases(quick, ARCH)


def _texts(shape, wait_each=True):
    return [text for _ctl, text in bulk.bulk_kernel(shape, wait_each).instructions()]


def test_cases_have_both_implementations_and_distinct_names():
    cases = _cases()
    assert {c.impl for c in cases} == {"sass", "cuda"}
    assert len({(c.variant, c.impl) for c in cases}) == len(cases)
    assert {c.extra["what"] for c in cases} == {"bandwidth", "latency", "issue"}


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.tag)
def test_each_stage_arms_its_mbarrier_once_with_its_copies_bytes(shape):
    """Per stage and iteration: one arrival (lane 0 only, the mbarrier counts 1) expecting
    exactly the bytes its copies bring, then the copies, each into its own 16-byte-aligned
    range of the buffer, completing on that stage's mbarrier."""
    k = bulk.bulk_kernel(shape)
    text = k.text()
    assert f"MOV R{bulk.ARRIVE_BYTES}, {shape.stage_bytes:#x};" in text
    assert f"UMOV {bulk.SIZE}, {shape.copy_bytes // 16:#x};" in text
    insts = _texts(shape)
    loop = insts[next(i for i, t in enumerate(insts) if t.startswith("IADD3 R6")):]
    barriers = bulk.shared_base(ARCH) + bulk.BUFFER_BYTES
    ranges = []
    stage = -1
    for i, t in enumerate(loop):
        if "SYNCS.ARRIVE" in t:
            assert t.startswith(f"@{bulk.LANE0} ")
            stage += 1
            assert f"R12+URZ{'+' + hex(8 * stage) if stage else ''}]" in t
        if t.startswith("UBLKCP"):
            dst = int(re.search(r"UMOV UR12, (0x[0-9a-f]+)", loop[i - 2]).group(1), 16)
            bar = int(re.search(r"UMOV UR13, (0x[0-9a-f]+)", loop[i - 1]).group(1), 16)
            assert bar == barriers + 8 * stage
            assert dst % 16 == 0
            ranges.append((dst, dst + shape.copy_bytes))
        if t.startswith("@P2 BRA"):
            break
    assert stage == shape.stages - 1
    assert len(ranges) == shape.copies_per_iteration
    ranges.sort()
    assert ranges[0][0] >= bulk.shared_base(ARCH) and ranges[-1][1] <= barriers
    assert all(a[1] <= b[0] for a, b in zip(ranges, ranges[1:]))      # no overlap


def test_mbarriers_are_initialised_for_one_arrival_before_the_block_barrier():
    insts = _texts(bulk.ISSUE_SHAPE)
    inits = [i for i, t in enumerate(insts) if t.startswith("SYNCS.EXCH.64")]
    assert len(inits) == bulk.ISSUE_SHAPE.stages
    assert max(inits) < insts.index("BAR.SYNC.DEFER_BLOCKING 0x0")
    # (0x100000 - 1) << 1 and << 11: ptxas's mbarrier.init word for a count of 1
    assert "UMOV UR10, 0x1ffffe" in insts and "UMOV UR11, 0x7ffff800" in insts


def test_the_parity_starts_at_one_and_flips_once_an_iteration():
    insts = _texts(bulk.Shape(2048, 4, 4))
    assert "MOV R9, 0x80000000" in insts
    flips = [t for t in insts if t.startswith("LOP3.LUT R9, R9, 0x80000000")]
    assert len(flips) == 1


def test_uniform_operands_wait_for_the_last_copy_to_read_them():
    """UBLKCP reads UR12/UR13 after it issues: the UMOV that rewrites them waits on the read
    barrier the previous UBLKCP set."""
    for ctl, text in bulk.bulk_kernel(bulk.Shape(512, 16, 4)).instructions():
        if text.startswith("UBLKCP"):
            assert ctl.split(":")[1] == "0", (ctl, text)
        if text.startswith("UMOV UR12"):
            assert ctl.startswith("01"), (ctl, text)


@pytest.mark.parametrize("wait_each", [True, False])
def test_clocks_around_the_waits(wait_each):
    """With wait_each the drain (TRYWAIT after the loop) is inside the timed region; the
    issue-only variant reads the end clock first."""
    insts = _texts(bulk.ISSUE_SHAPE, wait_each)
    clocks = [i for i, t in enumerate(insts) if t.startswith("CS2R")]
    loop_end = next(i for i, t in enumerate(insts) if t.startswith("@P2 BRA"))
    drains = [i for i, t in enumerate(insts) if "TRYWAIT" in t and i > loop_end]
    assert len(clocks) == 2 and len(drains) == bulk.ISSUE_SHAPE.stages
    if wait_each:
        assert clocks[0] < loop_end < min(drains) and max(drains) < clocks[1]
    else:
        assert clocks[1] < min(drains)
    lds = next(i for i, t in enumerate(insts) if t.startswith("LDS"))
    assert lds > max(drains)


@pytest.mark.parametrize("form", bulk.FORMS)
def test_latency_kernels_stamp_each_copy_after_its_phase(form):
    """One copy in flight: after each wait, lane i + 1's predicate reads the start clock (copy
    i starts) and lane i's reads the end clock (copy i - 1 ended); after the drain the last
    copy's lane and the lanes past it read the end clock; the epilogue reads none."""
    shape = bulk.TENSOR_LATENCY[0] if form == "tensor" else bulk.LATENCY_SHAPES[0]
    insts = _texts(shape)
    loop = next(i for i, t in enumerate(insts) if t.startswith("IADD3 R6, R6"))
    loop_end = next(i for i, t in enumerate(insts) if t.startswith("@P2 BRA"))
    assert "ISETP.EQ.AND P5, PT, R6, R48, PT" in insts[loop:loop_end]
    assert "ISETP.EQ.AND P6, PT, R6, R49, PT" in insts[loop:loop_end]
    wait = next(i for i, t in enumerate(insts) if t.startswith("@!P4 BRA WAIT0"))
    assert insts[wait + 1:wait + 3] == ["@P5 CS2R R40, SR_CLOCKLO", "@P6 CS2R R42, SR_CLOCKLO"]
    drain = next(i for i, t in enumerate(insts) if t.startswith("@!P4 BRA DRAIN0"))
    assert insts[drain - 2] == "ISETP.GE.AND P6, PT, R48, R6, PT"
    assert insts[drain + 1] == "@P6 CS2R R42, SR_CLOCKLO"
    assert sum(t.startswith("CS2R") for t in insts) == 1          # the start clock
    # the streams keep one start and one end clock
    assert sum("CS2R" in t for t in _texts(bulk.Shape(2048, 4, 4))) == 2


def test_latency_is_the_median_of_the_copies_lanes():
    """Lane j brackets copy j: the headline is the median over the first min(iters, 32)
    lanes, the mean beside it; the lanes past the last copy do not count."""
    c = next(c for c in _cases() if c.extra["what"] == "latency" and c.impl == "cuda")
    assert c.iters == 16 and "-DSTAMPS=1" in c.source.options
    words = np.zeros((32, 4), np.uint32)
    words[:, 0] = 2 ** 32 - 100                               # the counter wraps: no harm
    words[:, 1] = 300
    words[3, 1] = 1000                                        # one slow copy
    words[16:, 1] = 50000                                     # past the last copy
    rec = Records(words.ravel(), 32)
    assert [m.name for m in c.metrics] == ["latency", "latency_mean"]
    assert c.metrics[0].compute(rec, c) == 400
    assert c.metrics[1].compute(rec, c) == pytest.approx(400 + 700 / 16)
    assert not c.metrics[1].headline
    streams = [c for c in _cases() if c.extra["what"] != "latency"]
    assert not any("-DSTAMPS=1" in c.source.options for c in streams if c.impl == "cuda")


def test_stream_copies_leave_a_gap_apart_and_the_issue_runs_back_to_back(monkeypatch):
    """The streams put NOPs of STREAM_GAP cycles after each copy (SMALL_COPY_GAP after copies
    of 512 B); the issue-only and latency kernels none. MICROBENCH_BULK_GAPS adds the streams of 1 and 2 blocks an SM at other gaps
    (SASS only)."""
    for shape in (*bulk.STREAM_SHAPES, *(s for s, _ in bulk.STREAM_BLOCKS),
                  *(s for s, _ in bulk.TENSOR_STREAM)):
        insts = _texts(shape)
        copies = [i for i, t in enumerate(insts) if t.startswith(("UBLKCP", "UTMALDG"))]
        assert len(copies) == shape.copies_per_iteration
        for i in copies:
            assert insts[i + 1] == "NOP"
        stalls = [int(ctl.split(":")[-1], 16) for ctl, t in bulk.bulk_kernel(shape).instructions()
                  if t == "NOP"]
        want = [15, 15, 15, 5] if shape.copy_bytes >= 1024 else [15, 10]
        assert shape.gap == sum(want)
        assert stalls == want * shape.copies_per_iteration
    for shape in (*bulk.LATENCY_SHAPES, bulk.ISSUE_SHAPE):
        assert "NOP" not in _texts(shape, shape.single)
    assert not any(c.variant.endswith(("back to back", "gap 25")) for c in _cases())
    monkeypatch.setenv(bulk.GAPS_ENV, "1")
    extra = [c for c in _cases() if c.variant.endswith(("back to back",)) or ", gap " in c.variant]
    assert {c.impl for c in extra} == {"sass"}
    assert len(extra) == (len(bulk.GAPS) - 1) * (len(bulk.STREAM_SHAPES) + 1 + 2)


def test_shapes_fit_the_buffer_and_reject_what_does_not():
    for s in SHAPES:
        assert s.stage_bytes * s.stages <= bulk.BUFFER_BYTES
    with pytest.raises(ValueError, match="multiple of 16"):
        bulk.Shape(24, 1, 1)
    with pytest.raises(ValueError, match="exceed"):
        bulk.Shape(16384, 2, 2)


def test_stream_cases_count_bytes_on_lane0_and_launch_blocks_per_sm():
    for c in _cases():
        if c.extra["what"] != "bandwidth":
            assert c.grid == 1 and c.block == 32
            continue
        assert c.grid == "sms" and c.block == 32
        assert c.grid_size(132) == 132 * c.extra["blocks_per_sm"]
        assert c.metrics[0].limit.max == 128
        assert [m.name for m in c.metrics] == ["bytes_per_clk_sm", "bytes_per_clk_sm_median",
                                               "bytes_per_clk_sm_p10", "bytes_per_clk_sm_p90"]
        assert [m.headline for m in c.metrics] == [True, False, False, False]
    # the per-SM rate: 2 blocks on one SM, each 1000 cycles, 8 KiB x 4 stages x n iterations
    c = next(c for c in _cases() if c.extra["what"] == "bandwidth" and c.extra["blocks_per_sm"] == 2)
    words = np.zeros((64, 4), np.uint32)
    words[:, 0] = 100
    words[:, 1] = 1100
    words[:, 2] = 7
    rate = c.metrics[0].compute(Records(words.ravel(), 32), c)
    assert rate == pytest.approx(2 * 32768 * c.iters / 1000)
    # the headline is the mean over SMs: a second SM at half the rate
    words = np.concatenate([words, words])
    words[64:, 1] = 2100
    words[64:, 2] = 8
    got = [m.compute(Records(words.ravel(), 32), c) for m in c.metrics]
    assert got[0] == pytest.approx(0.75 * 2 * 32768 * c.iters / 1000)


def test_latency_limit_is_the_copy_at_128_bytes_a_clock():
    for form, want in (("bulk", {16: 1.0, 128: 1.0, 1024: 8.0, 4096: 32.0, 16384: 128.0}),
                       ("tensor", {256: 2.0, 1024: 8.0, 4096: 32.0, 16384: 128.0})):
        lat = {c.extra["copy_bytes"]: c.metrics[0].limit.min for c in _cases()
               if c.extra["what"] == "latency" and c.extra.get("form", "bulk") == form}
        assert lat == want, form


def test_check_finds_a_copy_that_did_not_land():
    c = next(c for c in _cases() if c.extra["what"] == "latency" and c.extra["copy_bytes"] == 16)
    words = np.zeros((32, 4), np.uint32)
    words[:, 3] = 0
    words[:4, 3] = c.inp[:4]                   # a 16-byte copy: lanes 0..3 hold inp[0..3]
    assert c.check(Records(words.ravel(), 32), c) is None
    words[2, 3] ^= 1
    assert "lane 2" in c.check(Records(words.ravel(), 32), c)


# ------------------------------------------------------------------ the tensor form

def test_tensor_cases_carry_the_map_and_check_the_tensors_first_row():
    cases = [c for c in _cases() if c.extra.get("form") == "tensor"]
    assert cases and all(c.variant.startswith("tma.2d ") for c in cases)
    for c in cases:
        tm = c.tensor_map
        assert (tm.offset, tm.width, tm.height) == (1024, 64, 64)
        assert tm.box_width * tm.box_height * 4 == c.extra["copy_bytes"]
        assert c.expect == {"UTMALDG.2D": c.extra["copies"] * c.extra["stages"]}
        assert len(c.inp) == 256 + 64 * 64 and not c.inp[:256].any()
        assert c.extra["source_word"] == 256
    c = cases[0]
    words = np.zeros((32, 4), np.uint32)
    words[:, 3] = c.inp[256:288]
    assert c.check(Records(words.ravel(), 32), c) is None
    words[:, 3] = c.inp[:32]
    assert "expected inp[257]" in c.check(Records(words.ravel(), 32), c)   # inp[256] is 0
    assert all(c.tensor_map is None for c in _cases() if c.extra.get("form") is None)


def test_tensor_kernels_fence_the_map_and_copy_boxes_at_the_origin():
    insts = _texts(bulk.TENSOR_ISSUE)
    bar = insts.index("BAR.SYNC.DEFER_BLOCKING 0x0")
    assert insts.index("UTMACCTL.IV [UR16]") < bar and insts.index("UTMACMDFLUSH") < bar
    assert "ULDC.64 UR16, c[0x0][0x218]" in insts          # the map: inp
    assert "UMOV UR14, URZ" in insts and "UMOV UR15, URZ" in insts
    assert not any(t.startswith(("UMOV UR14", "UMOV UR15", "ULDC.64 UR16")) for t in insts[bar:])
    assert sum(t == "UTMALDG.2D [UR12], [UR16]" for t in insts) == 32
    with pytest.raises(ValueError, match="rows of 256 bytes"):
        bulk.Shape(128, 1, 1, "tensor")


class _Buffer:
    def __init__(self, arr):
        self.arr = np.array(arr, copy=True)
        self.ptr = 0x7F0000000000
        self.uploads = [self.arr.copy()]

    @classmethod
    def from_numpy(cls, arr):
        buf = cls(arr)
        _Buffer.last.append(buf)
        return buf

    def copy_from(self, arr):
        self.arr[...] = arr
        self.uploads.append(np.array(arr, copy=True))

    def to_numpy(self):
        return self.arr.copy()

    def close(self):
        pass


def test_the_runner_encodes_the_map_with_the_buffers_address(monkeypatch):
    """run_case uploads inp with the map cuTensorMapEncodeTiled made for inp's own address
    (+ 1 KiB): 32-bit words, 64 x 64, rows of 256 bytes, the case's box."""
    import collections
    import types

    import microbench.gpu as g
    calls = []

    class Map:
        opaque = list(range(1, 17))

    def call(fn, *args):
        calls.append((fn, args))
        if fn == "cuTensorMapEncodeTiled":
            return Map()
        return {"cuDeviceGet": 0, "cuDeviceGetAttribute": 132, "cuDriverGetVersion": 13000,
                "cuEventCreate": object(), "cuEventElapsedTime": 0.5}.get(fn)

    def launch(grid, block, out, inp, *rest, **kw):
        rec = out.arr.reshape(-1, 4)
        rec[:, 0], rec[:, 1], rec[:, 2] = 0, 1000, 0
        rec[:, 3] = np.resize(inp.arr[256:288], len(rec))      # the copy "landed"

    fake = types.SimpleNamespace(DeviceBuffer=_Buffer, gpu_available=lambda: (True, "Fake"),
                                 compute_capability=lambda: (9, 0),
                                 load=lambda cubin: collections.defaultdict(lambda: launch))
    monkeypatch.setattr(g, "loader", lambda: fake)
    monkeypatch.setattr(g, "build", lambda source, arch: b"cubin")
    monkeypatch.setattr(g, "_call", call)
    _Buffer.last = []
    gpu = g.Gpu()
    case = next(c for c in _cases() if c.variant == "tma.2d latency 4K" and c.impl == "sass")
    samples, _times, _rec = gpu.run_case(case, repeat=2, warmup=1)
    assert samples["latency"] == [1000.0] * 2          # every lane's copy took 1000 cycles
    enc = [a for fn, a in calls if fn == "cuTensorMapEncodeTiled"]
    assert len(enc) == 1
    dtype, rank, address, dims, strides, box, steps, *modes = enc[0]
    assert (dtype.name, rank, address) == ("CU_TENSOR_MAP_DATA_TYPE_UINT32", 2, 0x7F0000000000 + 1024)
    assert [[int(x) for x in v] for v in (dims, strides, box, steps)] == [[64, 64], [256], [64, 16], [1, 1]]
    assert [m.name.rsplit("_", 1)[-1] for m in modes] == ["NONE"] * 4
    inp = _Buffer.last[0]
    want = np.array(case.inp, copy=True)
    want[:32] = np.array(list(range(1, 17)), np.uint64).view(np.uint32)
    assert np.array_equal(inp.uploads[-1], want)


def test_copies_keep_ptxas_stalls_except_in_the_least_stall_issue_variant():
    """ptxas puts 12 cycles between a copy's last uniform-register write and the copy, and
    after the copy; the 'stall 2' issue variants try the least."""
    for shape, want in ((bulk.Shape(2048, 4, 4), 12), (bulk.Shape(1024, 8, 4, stall=2), 2),
                        (bulk.Shape(1024, 8, 4, "tensor", stall=2), 2)):
        for ctl, text in bulk.bulk_kernel(shape, wait_each=False).instructions():
            if text.startswith(("UBLKCP", "UTMALDG", "UMOV UR13")):
                assert int(ctl.rsplit(":", 1)[1], 16) == want, (shape, ctl, text)
    issue = [c.variant for c in _cases() if c.extra["what"] == "issue" and c.impl == "sass"]
    assert issue == ["issue 1K x 32", "issue 1K x 32 stall 2",
                     "tma.2d issue 1K x 32", "tma.2d issue 1K x 32 stall 2"]
