"""microbench on the CPU: bank model and patterns, record analysis, the physical-limit guard,
statistics, table, JSON, plots, the runner (with a fake GPU, in process and in worker
processes that crash, hang or fault), the GPU glue (with a fake loader) and the CLI."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from microbench import patterns as pat
from microbench.bench_inst import CHAINS, InstLatency
from microbench.bench_smem import (SmemBandwidth, SmemLatency, chase_expected, chase_input,
                                   chase_layout)
from microbench.core import Records, per_sm_rate, select
from microbench.fake import FakeGpu
from microbench.results import (Limit, make_result, median, read_json, spread, table,
                                to_json, validate, write_json)
from microbench.sassgen import control, expand_params, wait_field

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# ------------------------------------------------------------------ bank model and patterns

def test_conflict_free_and_n_way_model():
    for w in (4, 8, 16):
        p = pat.pattern(w, "conflict-free")
        assert pat.model_bytes_per_clk(p) == 128
        assert pat.limit_bytes_per_clk(p) == 128
        assert pat.min_cycles_per_instruction(p) == max(1, 32 * w / 128)
    for n in pat.CONFLICT_WAYS:
        p = pat.pattern(4, f"{n}-way")
        assert pat.wavefronts_phase(p) == n
        assert pat.model_bytes_per_clk(p) == pytest.approx(128 / n)
        assert pat.limit_bytes_per_clk(p) == 128       # distinct words: the banks' limit
    # 128-bit: 8 lanes a phase, so at most 8-way within a phase
    assert pat.wavefronts_phase(pat.pattern(16, "32-way")) == 32
    assert pat.model_bytes_per_clk(pat.pattern(16, "2-way")) == 64


def test_broadcast_partial_and_phase_cross():
    b = pat.pattern(4, "broadcast")
    assert b.unique_bytes == 4 and b.requested_bytes == 128
    assert pat.wavefronts_phase(b) == 1
    assert pat.limit_bytes_per_clk(b) == 128           # one instruction a clock
    b16 = pat.pattern(16, "broadcast")
    assert pat.limit_bytes_per_clk(b16) == 512
    half = pat.pattern(4, "half-warp")
    assert half.active_lanes == 16 and pat.limit_bytes_per_clk(half) == 64
    q16 = pat.pattern(16, "quarter-warp")
    assert pat.model_bytes_per_clk(q16) == 128 and pat.limit_bytes_per_clk(q16) == 128
    for w in (8, 16):
        pc = pat.pattern(w, "phase-cross")
        assert pat.model_bytes_per_clk(pc, "phase") == 64
        assert pat.model_bytes_per_clk(pc, "ideal") == 128
        assert len(set(pc.offsets)) == 32              # no two lanes share an address


def test_pattern_inputs_and_footprint():
    for w in (4, 8, 16):
        for p in pat.patterns(w):
            words = p.input_words()
            assert words.dtype == np.uint32 and len(words) == 32
            for lane in range(32):
                if p.offsets[lane] < 0:
                    assert words[lane] & 0x80000000
                else:
                    assert words[lane] == p.offsets[lane] < pat.FOOTPRINT


# ------------------------------------------------------------------ records

def _records(block, blocks, sm_of_block, start_of_block, cycles, wrap_base=0):
    n = block * blocks
    w = np.zeros((n, 4), dtype=np.uint32)
    for b in range(blocks):
        rows = slice(b * block, (b + 1) * block)
        st = wrap_base + start_of_block[b] + np.arange(block) % 7
        w[rows, 0] = st & 0xFFFFFFFF
        w[rows, 1] = (st + cycles[b]) & 0xFFFFFFFF
        w[rows, 2] = sm_of_block[b]
    return Records(w.ravel(), block)


def test_sm_spans_handle_wrap_and_shared_sms():
    rec = _records(64, 3, [5, 5, 9], [0, 500, 100], [1000, 1000, 2000], wrap_base=2 ** 32 - 300)
    spans = rec.sm_spans()
    assert spans[5] == 1500 + 6       # block 1 ends at 500 + 6 + 1000; block 0 starts at 0
    assert spans[9] == 2000 + 6
    assert rec.warp_span(0) == 1000 + 6
    assert rec.warp_span(1) == 1000 + 6


def test_per_sm_rate_is_median_over_sms():
    rec = _records(32, 3, [0, 1, 2], [0, 0, 0], [100, 200, 400])
    f = per_sm_rate(lambda r, c: np.full(r.threads, 10.0))
    # work 320 per SM; spans 106, 206, 406 -> median 320/206
    assert f(rec, None) == pytest.approx(320 / 206)


# ------------------------------------------------------------------ the guard, statistics

def test_limit_guard_rejects_impossible_figures():
    lim = Limit(max=128.0, why="banks")
    r = make_result("smem.bandwidth", "v", "sass", "bytes_per_clk_sm", "B/clk/SM",
                    [127.0, 127.5, 128.2], lim)
    assert r.error is None and r.value == 127.5
    bad = make_result("smem.bandwidth", "v", "cuda", "bytes_per_clk_sm", "B/clk/SM",
                      [120.0, 1865.0, 121.0], lim)
    assert bad.value is None and bad.median is None and "above the physical limit" in bad.error
    low = make_result("inst.clock", "v", "cuda", "cycles_per_inst", "cycles", [0.1] * 5,
                      Limit(min=1.0))
    assert low.value is None and "below the physical minimum" in low.error
    assert "ERROR" in table([bad]) and "1865" not in table([bad]).split("ERRORS")[0]


def test_median_and_spread():
    assert median([3, 1, 2]) == 2 and median([1, 2, 3, 4]) == 2.5
    assert spread([99, 100, 101]) == pytest.approx(0.02)
    r = make_result("a", "b", "sass", "m", "u", [10.0, 10.1, 9.9])
    assert r.n == 3 and r.spread == pytest.approx(0.02)


# ------------------------------------------------------------------ JSON, table, plots

def _synthetic_results():
    rs = []
    for op in ("LDS", "STS"):
        for w in (4, 8, 16):
            for n in (1, 2, 4, 8, 16, 32):
                name = "conflict-free" if n == 1 else f"{n}-way"
                for impl in ("sass", "cuda"):
                    rs.append(make_result("smem.bandwidth", f"{op.lower()}{w * 8} {name}", impl,
                                          "bytes_per_clk_sm", "B/clk/SM", [128 / n * 0.98] * 5,
                                          Limit(max=128), model=128 / n,
                                          extra={"op": op, "width": w, "ways": n}))
    rs.append(make_result("smem.latency", "lds32 broadcast", "sass", "latency", "cycles", [29.0] * 5))
    rs.append(make_result("smem.latency", "lds32 broadcast", "cuda", "latency", "cycles", [31.0] * 5))
    rs.append(make_result("inst.ffma_issue", " 4 warps stall=1 -", "sass", "ffma_per_clk_sm",
                          "FFMA/clk/SM", [120.0] * 5, extra={"warps": 4, "stall": 1, "yield": False}))
    rs.append(make_result("inst.ffma_banks", "banks a0 b1 c2", "sass", "cycles_per_ffma", "cycles", [1.02] * 5))
    rs.append(make_result("smem.bandwidth", "lds128 broken", "cuda", "bytes_per_clk_sm", "B/clk/SM",
                          [1865.0] * 5, Limit(max=128)))
    return rs


def test_json_round_trip_and_schema(tmp_path):
    rs = _synthetic_results()
    dev = {"device": "Test GPU", "arch": "sm_90", "sm_count": 132}
    path = tmp_path / "r.json"
    write_json(str(path), rs, dev)
    doc = json.loads(path.read_text())
    assert validate(doc) == []
    for r in doc["results"]:
        for key in ("name", "variant", "impl", "metric", "value", "unit", "median", "spread", "n"):
            assert key in r
    dev2, rs2 = read_json(str(path))
    assert dev2["device"] == "Test GPU" and len(rs2) == len(rs)
    assert rs2[0] == rs[0]
    assert validate({"schema": "x", "results": [{"impl": "gpu"}]})   # problems found


def test_table_is_aligned_and_lists_errors():
    text = table(_synthetic_results(), "title")
    assert "## smem.bandwidth" in text and "## smem.latency" in text
    block = text.split("## smem.latency")[1].split("##")[0].strip().splitlines()
    assert len({len(line) for line in block if line.strip()}) <= 2      # aligned columns
    assert "ERRORS (1)" in text and "lds128 broken" in text
    row = next(line for line in text.splitlines() if line.startswith("lds32 2-way"))
    assert "62.72" in row and "64.00" in row                             # measured, model


def test_plots_are_written(tmp_path):
    pytest.importorskip("matplotlib")
    from microbench.plot import plot_all
    paths = plot_all(_synthetic_results(), str(tmp_path), "Test GPU")
    names = {os.path.basename(p) for p in paths}
    assert {"smem_conflicts.png", "smem_patterns.png", "latency.png", "ffma.png"} <= names
    for p in paths:
        assert open(p, "rb").read(8) == b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------------------------ benchmark definitions

def test_every_benchmark_lists_cases_deterministically():
    for b in select(["all"]):
        a1 = [(c.variant, c.impl, c.kernel, c.block, c.iters) for c in b.cases(True)]
        a2 = [(c.variant, c.impl, c.kernel, c.block, c.iters) for c in b.cases(True)]
        assert a1 == a2 and a1
        for c in b.cases(False):
            assert c.impl in ("sass", "cuda")
            assert c.metrics
            assert {c2.impl for c2 in b.cases(False) if c2.variant == c.variant} <= {"sass", "cuda"}


def test_every_sass_case_has_a_cuda_reference():
    for b in select(["all"]):
        cases = b.cases(False)
        if b.name == "inst.latency":     # one reference per op against the stall sweep
            assert {c.extra["op"] for c in cases if c.impl == "cuda"} == set(CHAINS)
            continue
        if b.name in ("inst.ffma_banks", "inst.ffma_reuse_insert"):  # the compiler picks the banks: one reference
            assert any(c.impl == "cuda" for c in cases)
            continue
        if b.name == "inst.ffma_issue":
            assert {c.extra["warps"] for c in cases if c.impl == "cuda"} == {4, 8, 16, 32}
            continue
        if b.name == "inst.clock":
            assert any(c.impl == "cuda" for c in cases)
            continue
        if b.name == "inst.hmma_loop_mix":   # ptxas's HMMA stream; the mixes are of a loop not yet in C
            assert {c.variant for c in cases if c.impl == "cuda"} == {"HMMA.16816 alone"}
            continue
        sass = {c.variant for c in cases if c.impl == "sass"}
        cuda = {c.variant for c in cases if c.impl == "cuda"}
        if b.name == "smem.latency_forms":
            # ptxas never folds the index into LDS [R.X4+UR] on sm_90 (the point of that row);
            # mt4g's rolled loop is C's own
            assert all("[R.X4+UR]" in v for v in sass - cuda) and sass - cuda
            assert all(v.startswith("mt4g") for v in cuda - sass) and cuda - sass
            continue
        if b.name in ("smem.async_copy", "smem.bulk_copy"):   # the stall sweeps are SASS's
            sass = {v.rsplit(" stall ", 1)[0] for v in sass}
        assert sass == cuda, b.name


def test_bandwidth_limits_follow_the_patterns():
    cases = SmemBandwidth().cases(True)
    c = next(c for c in cases if c.variant == "lds128 conflict-free" and c.impl == "sass")
    assert c.metrics[0].limit.max == 128 and c.grid == "sms" and c.block == 768
    assert len(c.inp) == 768
    c = next(c for c in cases if c.variant == "lds32 half-warp")
    assert c.metrics[0].limit.max == 64


def test_chase_layout_follows_a_cycle():
    for width, kinds in ((4, ("broadcast", "lanes", "32-way")), (8, ("broadcast", "lanes")),
                         (16, ("broadcast", "lanes"))):
        for kind in kinds:
            chains, image = chase_layout(width, kind)
            for chain in chains:
                for here, there in zip(chain, np.roll(chain, -1)):
                    assert image[here // 4] == there
            inp = chase_input(width, kind)
            assert inp[0] == len(image) and list(inp[1:33]) == list(chains[:, 0])
            # walking the image from each start for k hops lands where chase_expected says
            hops = 100
            exp = chase_expected(width, kind, hops)
            for lane in range(32):
                a = int(chains[lane, 0])
                for _ in range(hops):
                    a = int(image[a // 4])
                assert a == exp[lane]
            if kind == "32-way":
                banks = {(int(c) // 4) % 32 for c in chains.ravel()}
                assert banks == {0}
            if kind == "lanes":       # each hop conflict-free: the fewest wavefronts possible
                for k in range(chains.shape[1]):
                    p = pat.Pattern("hop", width, tuple(int(x) for x in chains[:, k]))
                    assert pat.wavefronts_phase(p) == width // 4


def _lat(op, stall, correct, cpi):
    base = {"op": op, "stall": stall}
    return [make_result("inst.latency", f"{op} stall={stall}", "sass", "correct", "fraction",
                        [correct] * 3, extra=base),
            make_result("inst.latency", f"{op} stall={stall}", "sass", "cycles_per_inst", "cycles",
                        [cpi] * 3, extra=base)]


def test_latency_is_the_smallest_always_correct_stall():
    rs = []
    for s in range(1, 9):
        rs += _lat("FFMA", s, 1.0 if s >= 4 else 0.0, float(s))
        rs += _lat("IADD3", s, 1.0, 2.0 if s < 2 else float(s))
        rs += _lat("IMAD", s, 0.0 if s in (1, 2, 5) else 1.0, float(s))
    out = {r.variant: r for r in InstLatency().summarize(rs)}
    assert out["FFMA"].value == 4 and out["FFMA"].unit == "cycles"
    assert out["IADD3"].value == 2.0                     # right everywhere: from cycles/inst
    assert out["IMAD"].value == 6                         # 5 was wrong: not before it


# ------------------------------------------------------------------ the GPU glue, faked

class _FakeBuffer:
    def __init__(self, arr):
        self.arr = np.array(arr, copy=True)

    @classmethod
    def from_numpy(cls, arr):
        return cls(arr)

    def copy_from(self, arr):
        self.arr[...] = arr

    def to_numpy(self):
        return self.arr.copy()

    def close(self):
        pass


class _FakeLoader:
    """Stands in for sassas.load: kernels write records by a given behaviour."""

    def __init__(self, behaviour):
        self.behaviour = behaviour
        self.DeviceBuffer = _FakeBuffer

    def gpu_available(self):
        return True, "Fake Device"

    def compute_capability(self):
        return 9, 0

    def load(self, cubin):
        loader = self

        class Mod:
            def __getitem__(self, name):
                def launch(grid, block, out, inp, iters, flag, p0, p1):
                    assert isinstance(iters, np.int32) and isinstance(p0, np.uint32)
                    loader.behaviour(name, grid, block, out.arr.reshape(-1, 4), inp.arr, int(iters))
                return launch
        return Mod()


def _fake_gpu(monkeypatch, behaviour):
    import microbench.gpu as g
    fake = _FakeLoader(behaviour)
    monkeypatch.setattr(g, "loader", lambda: fake)
    monkeypatch.setattr(g, "build", lambda source, arch: b"cubin")

    def call(fn, *args):
        return {"cuDeviceGet": 0, "cuDeviceGetAttribute": 132, "cuDriverGetVersion": 13000,
                "cuEventCreate": object(), "cuEventElapsedTime": 0.5}.get(fn)
    monkeypatch.setattr(g, "_call", call)
    return g.Gpu()


def test_gpu_run_case_measures_bandwidth_from_records(monkeypatch):
    def behaviour(name, grid, block, rec, inp, iters):
        bytes_per_block = block * 16 * 128 * iters
        for b in range(grid):
            rows = rec[b * block:(b + 1) * block]
            rows[:, 0] = 1000 + b
            rows[:, 1] = 1000 + b + bytes_per_block // 120
            rows[:, 2] = b
    gpu = _fake_gpu(monkeypatch, behaviour)
    assert gpu.info.sm_count == 132 and gpu.info.arch == "sm_90"
    case = next(c for c in SmemBandwidth().cases(True)
                if c.variant == "lds128 conflict-free" and c.impl == "sass")
    samples, times, rec = gpu.run_case(case, repeat=3, warmup=1)
    assert len(samples["bytes_per_clk_sm"]) == 3 and times == [0.5] * 3
    assert samples["bytes_per_clk_sm"][0] == pytest.approx(120, rel=1e-3)


def test_gpu_run_case_rejects_unwritten_records_and_wrong_chase(monkeypatch):
    from microbench.gpu import CaseFailed

    def lazy(name, grid, block, rec, inp, iters):
        rec[:16, :3] = 1                       # half the warp never writes
    gpu = _fake_gpu(monkeypatch, lazy)
    case = next(c for c in SmemLatency().cases(True) if c.impl == "sass")
    with pytest.raises(CaseFailed, match="wrote no record"):
        gpu.run_case(case, 2, 0)

    def wrong(name, grid, block, rec, inp, iters):
        rec[:, 0], rec[:, 1], rec[:, 2], rec[:, 3] = 0, 1000, 0, 12345
    gpu = _fake_gpu(monkeypatch, wrong)
    with pytest.raises(CaseFailed, match="did not follow the chain"):
        gpu.run_case(case, 2, 0)


# ------------------------------------------------------------------ the runner

def test_runner_in_process_with_fake_gpu():
    import io
    from microbench.runner import run
    log = io.StringIO()
    dev, rs = run(["smem.latency", "inst.clock"], quick=True, gpu=FakeGpu(), build=False, log=log)
    assert dev["device"] == "Fake GPU" and dev["repeat"] == 9
    assert {r.name for r in rs} == {"smem.latency", "inst.clock"}
    assert all(r.error is None for r in rs)
    assert log.getvalue().count("\n") >= len(rs)     # a progress line per case
    assert validate(to_json(rs, dev)) == []


def test_runner_isolates_crashes_hangs_and_faults(monkeypatch):
    """smem.latency's cases alternate SASS / CUDA-C; kernels: chase32 (cases 0 2 4),
    chase.cu WIDTH=4 (1 3 5), chase64 (6 8), WIDTH=8 (7 9), chase128 (10 12), WIDTH=16 (11 13).
    A kernel that crashes its worker, hangs or faults is not run again."""
    from microbench.runner import run
    monkeypatch.setenv("MICROBENCH_FAKE_GPU", "1")
    monkeypatch.setenv("MICROBENCH_FAKE_FAIL", "crash:1,hang:6,sticky:10,error:7,bogus:11")
    monkeypatch.setenv("PYTHONPATH", ROOT)
    import io
    log = io.StringIO()
    dev, rs = run(["smem.latency"], quick=True, build=False, case_timeout=4, log=log)
    by_case = {(r.variant, r.impl): r for r in rs}
    cases = SmemLatency().cases(True)
    assert len(rs) == len(cases)
    errs = {i: by_case[(c.variant, c.impl)].error for i, c in enumerate(cases)}
    assert "died" in errs[1]
    assert "skipped" in errs[3] and "skipped" in errs[5]
    assert "no result within" in errs[6] and "skipped" in errs[8]
    assert "CUDA_ERROR_ILLEGAL_INSTRUCTION" in errs[10] and "skipped" in errs[12]
    assert "fake failure" in errs[7]
    for i in (0, 2, 4, 9, 11, 13):
        assert errs[i] is None, (i, errs[i])
    assert by_case[(cases[11].variant, cases[11].impl)].value > 1e5     # latency has no maximum


# ------------------------------------------------------------------ control codes, CLI

def test_control_and_wait_fields():
    assert control(stall=1) == "--:-:-:-:1"
    assert control(wait=0x01, write=0, stall=1) == "01:-:0:-:1"
    assert control(wait=0x3F, yield_=True, stall=6) == "012345:-:-:Y:6"
    assert wait_field(0x11) == "0---4-" and wait_field(8) == "08"
    with pytest.raises(ValueError):
        control(stall=0)
    with pytest.raises(ValueError):
        control(write=6)
    from sassas.control import read_control
    for mask in range(1, 64):
        assert read_control(f"{wait_field(mask)}:-:-:Y:1").wait_mask == mask
    assert expand_params("LDC R9, p1[0]; LDC.64 R4, out[0]") == "LDC R9, c[0x0][0x22c]; LDC.64 R4, c[0x0][0x210]"


def _cli(*args, env=None):
    e = dict(os.environ)
    e["PYTHONPATH"] = ROOT
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "microbench", *args], capture_output=True,
                          text=True, cwd=ROOT, env=e, timeout=600)


def test_cli_list_dump_show(tmp_path):
    p = _cli("list")
    assert p.returncode == 0 and "smem.bandwidth" in p.stdout and "inst.ffma_issue" in p.stdout
    p = _cli("dump", str(tmp_path / "src"), "smem.latency")
    assert p.returncode == 0
    files = os.listdir(tmp_path / "src")
    assert "chase32.sass" in files and any(f.endswith(".cu") for f in files)
    path = tmp_path / "r.json"
    write_json(str(path), _synthetic_results(), {"device": "Test GPU", "arch": "sm_90"})
    p = _cli("show", str(path), "--brief")
    assert p.returncode == 0 and "## smem.bandwidth" in p.stdout


def test_cli_run_with_fake_gpu(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    p = _cli("run", "inst.mufu", "--quick", "--json", str(out / "r.json"), "--table",
             str(out / "t.txt"), "--brief", env={"MICROBENCH_FAKE_GPU": "1"})
    assert p.returncode == 0, p.stderr[-2000:]
    assert "## inst.mufu" in p.stdout and "MUFU.EX2" in p.stdout
    doc = json.loads((out / "r.json").read_text())
    assert validate(doc) == [] and doc["device"] == "Fake GPU"
    assert (out / "t.txt").read_text().startswith("microbench on Fake GPU")
    assert "[inst.mufu 1/8]" in p.stderr


def test_cli_run_without_gpu_says_why():
    p = _cli("run", "inst.clock", env={"MICROBENCH_FAKE_GPU": "0"})
    from microbench.gpu import gpu_available
    ok, why = gpu_available()
    if ok:
        pytest.skip("a GPU is present")
    assert p.returncode == 2 and "no GPU" in p.stderr


@pytest.mark.parametrize("args, code, message", [
    (("build", "nosuch"), 2, "python -m microbench build: error: unknown benchmark 'nosuch'; known: smem.bandwidth"),
    (("build", "smem", "--arch", "sm_99"), 2, "python -m microbench build: error: argument --arch: unknown "
                                              "architecture 'sm_99'"),
    (("show", "{tmp}/missing.json"), 1, "python -m microbench show: error: {tmp}/missing.json: No such file"),
    (("show", "{tmp}/text.json"), 1, "python -m microbench show: error: {tmp}/text.json: not a JSON file"),
    (("show", "{tmp}/other.json"), 1, "python -m microbench show: error: {tmp}/other.json: not a microbench "
                                      "results file (sassas.microbench/1): schema is None; missing 'device'"),
])
def test_cli_bad_names_files_and_archs_get_one_line(tmp_path, args, code, message):
    (tmp_path / "text.json").write_text("EXIT;\n")
    (tmp_path / "other.json").write_text('{"results": [1]}')
    p = _cli(*(a.format(tmp=tmp_path) for a in args))
    assert p.returncode == code
    assert p.stderr.splitlines()[-1].startswith(message.format(tmp=tmp_path)), p.stderr
    assert "Traceback" not in p.stderr


def test_gemm_operand_patterns_come_from_lane_maps_that_cover_a_4x8_warp():
    """The gemm-* LDS.128 patterns (A: the ty chunk, B: the tx chunk of a lane) are built from
    lane -> (ty, tx) maps; each must give the 32 lanes the 32 tiles of a 4 x 8 warp once."""
    from microbench import patterns as pat
    for ty, tx in (pat._blocked_map(), pat._quad_map()):
        assert sorted(zip(ty.tolist(), tx.tolist())) == [(a, b) for a in range(4) for b in range(8)]
    by_name = {p.name: p for p in pat.patterns(16)}
    ty, tx = pat._quad_map()
    assert by_name["gemm-a-2x2"].offsets == tuple(int(v) * 16 for v in ty)
    assert by_name["gemm-b-2x2"].offsets == tuple(int(v) * 16 for v in tx)
    # every 4 consecutive lanes of the 2x2 map read 2 chunks of A and 2 of B
    for k in range(8):
        assert len(set(ty[4 * k:4 * k + 4].tolist())) == 2 and len(set(tx[4 * k:4 * k + 4].tolist())) == 2
