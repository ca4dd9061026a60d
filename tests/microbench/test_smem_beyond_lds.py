"""The shared-memory benchmarks beyond LDS/STS, on the CPU: latency forms, ldmatrix/stmatrix,
atomics, asynchronous copies, carveout, cluster (distributed shared memory).

tests/test_microbench_kernels.py assembles, decodes and hazard-checks every benchmark's
SASS and compiles every CUDA-C reference, these included; here: what each kernel must hold
to measure what it says, the bank model, the footprints, and the launch options the runner
passes (cluster size, function attributes)."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import sassas
from microbench import bench_smem_cluster as cl
from microbench import bench_smem_forms as forms
from microbench import bench_smem_more as more
from microbench.bench_smem import SHARED_BYTES, SM_BLOCK
from microbench.core import all_benchmarks
from microbench.nvrtc import available as nvrtc_available
from microbench.nvrtc import compile_cuda
from sassas.elf import read_cubin

ARCH = "sm_90"
NEW = ("smem.latency_forms", "smem.matrix", "smem.atomic", "smem.async_copy", "smem.carveout",
       "smem.cluster")


def _cases(name, quick=True):
    return all_benchmarks()[name].cases(quick, ARCH)


def _timed_counts(cubin: bytes) -> dict:
    if importlib.util.find_spec("elftools") is None:
        pytest.skip("pyelftools is not installed (test extra)")
    from sassas.learn import oracle
    try:
        oracle.find_tool("nvdisasm", ARCH)
    except oracle.OracleMissing as e:
        pytest.skip(f"nvdisasm not available: {e}")
    from microbench.verify import opcode_counts
    return opcode_counts(cubin, ARCH, timed_only=True)


def test_the_benchmarks_are_registered_with_both_implementations():
    for name in NEW:
        cases = _cases(name)
        assert cases, name
        assert {c.impl for c in cases} == {"sass", "cuda"}, name
        assert len({(c.variant, c.impl) for c in cases}) == len(cases), name


# ------------------------------------------------------------------ latency forms

def test_each_form_times_exactly_its_hop():
    """The timed loop holds UNROLL hops of the form and nothing else but loop control."""
    hops = {"lds32 [R.X4+UR]": {"LDS": 64},
            "lea + lds32 [R]": {"LEA": 64, "LDS": 64},
            "ld32 generic [R.64]": {"LD.E": 64},
            "ld64 generic [R.64]": {"LD.E.64": 64}}
    loop_control = {"IADD3": 1, "ISETP.LT.AND": 1, "BRA": 1}
    for form in forms.FORMS:
        k = forms.form_kernel(form)
        cubin = bytes(sassas.assemble(k.text(), arch=ARCH, filename=k.name).data)
        assert _timed_counts(cubin) == {**hops[form.name], **loop_control}, form.name


def test_forms_text_the_addressing_they_name():
    text = {f.name: forms.form_kernel(f).text() for f in forms.FORMS}
    assert "LDS R20, [R20.X4+UR9];" in text["lds32 [R.X4+UR]"]
    assert "LEA R22, R20, UR9, 0x2;" in text["lea + lds32 [R]"]
    assert "LD.E R20, desc[UR4][R20.64];" in text["ld32 generic [R.64]"]
    assert "S2R R21, SR_SWINHI;" in text["ld64 generic [R.64]"]
    # the index forms store indices, the generic 64-bit form pairs of words
    assert "SHF.R.U32.HI R12, RZ, 0x2, R12;" in text["lea + lds32 [R]"]
    assert "STS.64 [R15+0x400], R12;" in text["ld64 generic [R.64]"]


def test_form_cases_check_every_thread_of_the_chain():
    cases = _cases("smem.latency_forms")
    assert {c.block for c in cases} == {1, 32}
    for c in cases:
        assert c.extra["chain"] == "lanes" and c.grid == 1


@pytest.mark.parametrize("form", [1, 2, 3, 4])
def test_cuda_forms_compile_to_the_published_code(form):
    ok, why = nvrtc_available()
    if not ok:
        pytest.skip(why)
    src = forms.form_source({1: "lea + lds32 [R]", 2: "ld64 generic [R.64]",
                             3: "mt4g loop (j = s[j], rolled)", 4: "ld32 generic [R.64]"}[form], "cuda")
    assert f"-DFORM={form}" in src.options
    counts = _timed_counts(compile_cuda(src.text, ARCH, src.options, src.filename))
    if form == 1:
        assert counts["LEA"] == counts["LDS"] == 64          # LEA + LDS a hop, nothing else
    elif form == 2:
        assert counts.get("LD.E.64", 0) >= 64 and "LDS" not in counts   # generic, not LDS
    elif form == 3:
        assert counts["LDS"] == counts["LEA"] >= 4           # unrolled by ptxas's choice
    else:
        assert counts.get("LD.E", 0) == 64 and "LDS" not in counts and "LEA" not in counts


# ------------------------------------------------------------------ ldmatrix / stmatrix

def test_matrix_bank_model():
    lay = {x.name: x for x in more.row_layouts()}
    assert more.matrix_ways(lay["rows-contiguous"], 4) == 1
    assert more.matrix_ways(lay["row-stride-32"], 4) == 2
    assert more.matrix_ways(lay["row-stride-64"], 4) == 4
    assert more.matrix_ways(lay["row-stride-128"], 4) == 8
    assert more.matrix_ways(lay["row-stride-128-swizzled"], 4) == 1
    assert more.matrix_ways(lay["row-stride-144"], 4) == 1


def test_matrix_rows_stay_inside_the_shared_array():
    for lay in more.row_layouts():
        top = max(lay.offsets) + 16 + (more.MATRIX_UNROLL - 1) * more.MATRIX_STEP
        assert top <= SHARED_BYTES, lay.name
        assert all(o % 16 == 0 for o in lay.offsets), lay.name


def test_matrix_kernels_use_the_named_instruction():
    for store, count, trans in ((False, 1, False), (False, 4, True), (True, 2, False), (True, 4, True)):
        k = more.matrix_kernel(store, count, trans)
        op = more.matrix_op(store, count, trans)
        cubin = bytes(sassas.assemble(k.text(), arch=ARCH, filename=k.name).data)
        assert _timed_counts(cubin)[op] == more.MATRIX_UNROLL
        # loads land in registers aligned to their count
        if not store:
            regs = [int(ln.text.split()[1][1:].rstrip(",")) for ln in k.lines
                    if ln.kind == "inst" and ln.text.startswith("LDSM")]
            assert all(r % count == 0 for r in regs)


# ------------------------------------------------------------------ atomics

def test_atomic_layouts_share_addresses_as_named():
    for name, offsets, per_address in more.atomic_layouts():
        words, counts = np.unique(np.array(offsets) // 4, return_counts=True)
        assert set(counts) == {per_address}, name
        if name == "distinct-one-bank":
            assert len(set(words % 32)) == 1


def test_atomic_cases_limit_is_one_instruction_a_clock():
    for c in _cases("smem.atomic"):
        assert c.metrics[0].limit.max == 32 and c.block == SM_BLOCK


# ------------------------------------------------------------------ async copies, carveout

def test_async_copy_issue_variant_waits_after_the_end_clock():
    def order(k):
        return [text.split(" ")[0] for _ctl, text in k.instructions()]
    issue = order(more.copy_kernel("ldgsts.128", 1, wait_each=False))
    clocks = [i for i, op in enumerate(issue) if op == "CS2R"]
    assert len(clocks) == 2 and issue.index("LDGDEPBAR") > clocks[1]
    assert issue.index("DEPBAR.LE") > clocks[1]
    each = more.copy_kernel("ldgsts.bypass.128", 4)
    ops = order(each)
    clocks = [i for i, op in enumerate(ops) if op == "CS2R"]
    assert clocks[0] < ops.index("LDGDEPBAR") < clocks[1]
    assert ("--:-:-:-:4", "LDGSTS.E.BYPASS.128 [R2+0x3000], desc[UR4][R4.64]") in each.instructions()


def test_carveout_cases_set_and_name_the_attribute():
    seen = set()
    for c in _cases("smem.carveout"):
        seen.add(c.extra["carveout"])
        if c.extra["carveout"] < 0:
            assert c.attributes == {}
        else:
            assert c.attributes == {"preferred_shared_memory_carveout": c.extra["carveout"]}
    assert seen == set(more.CARVEOUTS)


def test_case_attributes_are_set_then_reset(monkeypatch):
    from microbench import gpu as g
    calls = []
    monkeypatch.setattr(g, "_call", lambda fn, *a: calls.append((fn, a[1:] if fn == "cuFuncSetAttribute" else ())))

    class Kern:
        handle = "h"
    g._set_attribute(Kern(), "preferred_shared_memory_carveout", 50)
    g._set_attribute(Kern(), "preferred_shared_memory_carveout", g.ATTRIBUTE_DEFAULTS["preferred_shared_memory_carveout"])
    assert [c[1][1] for c in calls] == [50, -1]
    with pytest.raises(ValueError, match="no default known"):
        g._set_attribute(Kern(), "max_dynamic_shared_size_bytes", 1)


# ------------------------------------------------------------------ cluster

def test_cluster_cases_launch_whole_clusters():
    for c in _cases("smem.cluster"):
        assert c.cluster == c.extra["cluster"] and 0 <= c.p0 < c.cluster
        if c.block == SM_BLOCK and c.grid == "sms":    # bandwidth: one 24-warp CTA a SM
            assert c.grid_size(132) == 132 - 132 % c.cluster
        elif c.block == SM_BLOCK:   # bandwidth: one cluster alone
            assert c.grid == c.cluster and c.variant.endswith(" alone")
        else:                       # latency: clusters of one-warp CTAs on every SM
            assert c.grid == "sms" and c.block == 32
            assert c.grid_size(132) == 132 - 132 % c.cluster


def test_cluster_latency_is_the_median_over_every_ctas_chase():
    """Three one-warp CTAs whose chases took 200, 210 and 260 cycles a hop: 210."""
    from microbench.core import Records
    c = next(c for c in _cases("smem.cluster") if c.variant == "ld32 cluster 4 rank+2")
    (metric,) = c.metrics
    hops = c.extra["hops"]
    words = np.zeros((3 * 32, 4), np.uint32)
    words[:, 0] = 1000
    for warp, per_hop in enumerate((200, 260, 210)):
        words[32 * warp:32 * warp + 32, 1] = 1000 + per_hop * hops
    assert metric.compute(Records(words, 32), c) == 210.0


def test_cluster_stream_rate_is_the_mean_over_sms_with_percentiles_beside_it():
    """Two SMs at 10 and 30 B/clk: mean 20 (headline), median 20, p10 12, p90 28."""
    from microbench.core import Records
    c = next(c for c in _cases("smem.cluster") if c.variant == "ld128 stream cluster 4 rank+1")
    assert [m.name for m in c.metrics] == ["bytes_per_clk_sm", "bytes_per_clk_sm_median",
                                           "bytes_per_clk_sm_p10", "bytes_per_clk_sm_p90"]
    assert [m.headline for m in c.metrics] == [True, False, False, False]
    per_thread = 16.0 * cl.UNROLL * c.iters
    words = np.zeros((2 * SM_BLOCK, 4), np.uint32)
    words[:, 2] = np.repeat([3, 5], SM_BLOCK)          # block 0 on SM 3, block 1 on SM 5
    span = per_thread * SM_BLOCK
    words[:SM_BLOCK, 1] = int(span / 10)
    words[SM_BLOCK:, 1] = int(span / 30)
    got = [m.compute(Records(words.ravel(), SM_BLOCK), c) for m in c.metrics]
    assert got == pytest.approx([20, 20, 12, 28], rel=1e-3)


def test_cluster_stream_loads_every_address_once_an_iteration():
    k = cl.cluster_stream_kernel()
    addrs = [t.split("[R74.64")[1].rstrip("]") for _c, t in k.instructions() if t.startswith("LD.E.128")]
    assert len(set(addrs)) == len(addrs) == 128
    top = max(int(a[1:], 16) if a else 0 for a in addrs) + 32 * 16
    assert top <= SHARED_BYTES


def test_cluster_kernel_addresses_the_target_by_rank_byte():
    text = cl.cluster_chase_kernel().text()
    assert "S2R R23, SR_CgaCtaId;" in text and "LDC R24, c[0x0][0x188];" in text
    assert text.count("UCGABAR_ARV;") == 2 and text.count("UCGABAR_WAIT;") == 2
    cubin = bytes(sassas.assemble(text, arch=ARCH, filename="cluster.sass").data)
    info = read_cubin(cubin)
    assert [k.name for k in info.kernels] == [cl.KERNEL]
    assert _timed_counts(cubin)["LD.E"] == 64


def test_loader_checks_cluster_dims():
    from importlib import import_module
    L = import_module("sassas.load")
    assert L._cluster_dims(2, (8, 1, 1)) == (2, 1, 1)
    assert L._cluster_dims((2, 2), (4, 2, 1)) == (2, 2, 1)
    with pytest.raises(ValueError, match="cluster dimension x = 3 does not divide the grid's \\(8\\)"):
        L._cluster_dims(3, (8, 1, 1))
    with pytest.raises(ValueError, match="cluster must be a positive int"):
        L._cluster_dims(0, (8, 1, 1))


def test_async_copy_issue_runs_start_warm():
    """The issue-only cases issue one iteration's copies and wait for them before the start
    clock, time as many again without waiting, and warm up with more launches."""
    ops = [text.split(" ")[0] for _ctl, text in
           more.copy_kernel("ldgsts.128", 1, wait_each=False, warm=True).instructions()]
    clocks = [i for i, op in enumerate(ops) if op == "CS2R"]
    copies = [i for i, op in enumerate(ops) if op.startswith("LDGSTS")]
    waits = [i for i, op in enumerate(ops) if op == "DEPBAR.LE"]
    assert len(clocks) == 2 and len(copies) == 2 * more.COPY_UNROLL
    assert sum(i < clocks[0] for i in copies) == more.COPY_UNROLL
    assert len(waits) == 2 and waits[0] < clocks[0] and waits[1] > clocks[1]
    for c in _cases("smem.async_copy", quick=False):
        issue = "issue" in c.variant
        assert c.warmup == (more.ISSUE_WARMUP if issue else 0), c.label
        assert (c.kernel.endswith("_warm_stream") if c.impl == "sass" else
                "-DWARM=1" in c.source.options) == issue, c.label


@pytest.mark.parametrize("wait_each", [True, False])
def test_async_copies_keep_their_address_registers(wait_each):
    """A copy reads its address registers after it issues: nothing after the first LDGSTS
    may write R2 (shared) or R4:R5 (global), the issue-only (warm) variant's record included."""
    insts = [text for _ctl, text in
             more.copy_kernel("ldgsts.128", 1, wait_each, warm=not wait_each).instructions()]
    first = next(i for i, t in enumerate(insts) if t.startswith("LDGSTS"))
    for text in insts[first:]:
        op, _, rest = text.partition(" ")
        if op.startswith(("LDGSTS", "STG", "BRA", "EXIT", "LDGDEPBAR", "DEPBAR", "@")):
            continue
        dest = rest.split(",")[0].strip()
        assert dest not in ("R2", "R4", "R5"), text
