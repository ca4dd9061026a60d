"""microbench kernels on the CPU: every benchmark's SASS assembles for sm_90 with sassas and
decodes (nvdisasm, the oracle) to exactly the instructions and control codes written; the
CUDA-C references compile with NVRTC for sm_90 and keep the instructions they measure.

Assembly failures fail (an instruction the assembler does not support yet must show);
only the oracle (nvdisasm, pyelftools) and NVRTC may be missing, and then those tests skip.
"""
from __future__ import annotations

import importlib.util

import pytest

import sassas
from microbench.core import all_benchmarks
from microbench.nvrtc import available as nvrtc_available
from microbench.nvrtc import compile_cuda
from sassas.elf import read_cubin

ARCH = "sm_90"


def _sources(lang: str):
    """Distinct (source, one case using it) over every benchmark, full and quick."""
    seen = {}
    for b in all_benchmarks().values():
        for quick in (False, True):
            for c in b.cases(quick, ARCH):
                if c.source.lang == lang:
                    seen.setdefault(c.source.key, (c.source, []))[1].append(c)
    return list(seen.values())


SASS_SOURCES = _sources("sass")
CUDA_SOURCES = _sources("cuda")


def _id(item):
    src, _cases = item
    return src.filename + ("[" + " ".join(src.options) + "]" if src.options else "")


@pytest.fixture(scope="module")
def sass_cubins():
    return {src.key: bytes(sassas.assemble(src.text, arch=ARCH, filename=src.filename).data)
            for src, _ in SASS_SOURCES}


def _oracle_or_skip():
    if importlib.util.find_spec("elftools") is None:
        pytest.skip("pyelftools is not installed (test extra)")
    from sassas.learn import oracle
    try:
        oracle.find_tool("nvdisasm", ARCH)
    except oracle.OracleMissing as e:
        pytest.skip(f"nvdisasm not available: {e}")


def test_there_are_kernels():
    assert len(SASS_SOURCES) >= 60
    assert len(CUDA_SOURCES) >= 10
    names = set(all_benchmarks())
    assert {"smem.bandwidth", "smem.warp", "smem.latency", "inst.latency", "inst.mufu",
            "inst.clock", "inst.ffma_banks", "inst.ffma_issue"} <= names


@pytest.mark.parametrize("item", SASS_SOURCES, ids=_id)
def test_sass_assembles_for_sm90(item):
    src, cases = item
    cubin = sassas.assemble(src.text, arch=ARCH, filename=src.filename)   # must not raise
    info = read_cubin(bytes(cubin.data))
    names = {k.name for k in info.kernels}
    for c in cases:
        assert c.kernel in names
    for k in info.kernels:
        assert [p.size for p in k.params] == [8, 8, 4, 4, 4, 4]
        # Blocks as large as the cases launch must fit the 64K-register file (registers
        # are allocated 8 a thread at a time).
        biggest = max(c.block for c in cases if c.kernel == k.name)
        allocated = -(-k.registers // 8) * 8
        assert allocated * biggest <= 65536, (k.name, k.registers, biggest)
        assert k.shared_bytes <= 48 * 1024


@pytest.mark.parametrize("item", SASS_SOURCES, ids=_id)
def test_sass_decodes_as_written(item, sass_cubins):
    _oracle_or_skip()
    from microbench.verify import compare, opcode_counts
    src, cases = item
    cubin = sass_cubins[src.key]
    problems = compare(src.text, cubin, ARCH)
    assert not problems, "\n".join(problems[:20])
    counts = opcode_counts(cubin, ARCH, timed_only=True)
    for c in cases:
        for mnemonic, n in c.expect.items():
            assert counts.get(mnemonic, 0) >= n, (c.label, mnemonic, counts)


@pytest.mark.parametrize("item", SASS_SOURCES, ids=_id)
def test_sass_passes_the_hazard_checker(item):
    """sassas's own hazard checker finds nothing, except in the inst.latency chains run on
    purpose with stalls shorter than the latency (reads too early: 'raw-fixed')."""
    hazards_mod = pytest.importorskip("sassas.check")
    src, cases = item
    found = [h for h in hazards_mod.check_file(src.filename, ARCH, src.text)
             if h.severity in ("error", "warning")]
    intended = src.filename.startswith("chain_") and all(
        c.extra.get("stall", 99) < 8 for c in cases)
    bad = [h for h in found if not (intended and h.kind == "raw-fixed")]
    assert not bad, "\n".join(h.render() for h in bad[:10])


def test_verify_notices_a_difference(sass_cubins):
    _oracle_or_skip()
    from microbench.verify import compare
    src, _ = next(s for s in SASS_SOURCES if s[0].filename == "chain_iadd3_s3.sass")
    cubin = sass_cubins[src.key]
    assert compare(src.text, cubin) == []
    changed = src.text.replace("IADD3 R8, R8, R9, RZ;", "IADD3 R8, R8, R10, RZ;", 1)
    assert any("R10" in p for p in compare(changed, cubin))
    stalled = src.text.replace("--:-:-:-:3           IADD3 R8, R8, R9, RZ;",
                               "--:-:-:-:4           IADD3 R8, R8, R9, RZ;", 1)
    assert any("stall" in p for p in compare(stalled, cubin))


@pytest.fixture(scope="module")
def nvrtc_ok():
    ok, why = nvrtc_available()
    if not ok:
        pytest.skip(why)
    return why


@pytest.mark.parametrize("item", CUDA_SOURCES, ids=_id)
def test_cuda_reference_compiles_with_nvrtc(item, nvrtc_ok):
    src, cases = item
    cubin = compile_cuda(src.text, ARCH, src.options, src.filename)
    info = read_cubin(cubin)
    names = {k.name for k in info.kernels}
    for c in cases:
        assert c.kernel in names
    for k in info.kernels:
        assert [p.size for p in k.params] == [8, 8, 4, 4, 4, 4], k.name
    if importlib.util.find_spec("elftools") is None:
        return
    from sassas.learn import oracle
    try:
        oracle.find_tool("nvdisasm", ARCH)
    except oracle.OracleMissing:
        return
    from microbench.verify import opcode_counts
    counts_of = {}
    for c in cases:
        if not c.expect:
            continue
        if c.kernel not in counts_of:
            counts_of[c.kernel] = opcode_counts(cubin, ARCH, kernel=c.kernel)
        counts = counts_of[c.kernel]
        for mnemonic, n in c.expect.items():
            assert counts.get(mnemonic, 0) >= n, (c.label, mnemonic, counts)
