"""Hazard checker, automatic scheduler and yield strategies (sassas.hazards, sassas.schedule).

Oracle tests compile tests/sassas/control_corpus (our own CUDA source, as PTX) with ptxas 12.9 and
read the result back with cuobjdump: compiler output is hazard-free, so the checker must
report nothing (no false alarms), and every mutation that breaks a dependency must be caught.
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from sassas.assembler import parse
from sassas.arch import get_arch
from sassas.ast import NO_BARRIER
from sassas.hazards import check
from sassas.schedule import schedule_kernel
from sassas.hazards import KINDS
from sassas.listing import read_listing
from sassas.resolve import resolve_kernel
from sassas.schedule import apply_yield_strategy

CORPUS = Path(__file__).parent / "control_corpus"
ROOT = Path(__file__).parents[2]
ARCHS = ["sm_75", "sm_80", "sm_86", "sm_89", "sm_90"]


def _tool(name: str, *subdirs: str):
    base = Path(sys.prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages" / "nvidia"
    for sub in subdirs:
        p = base / sub / "bin" / name
        if p.exists():
            return str(p)
    return shutil.which(name)


PTXAS = _tool("ptxas", "cuda_nvcc")
CUOBJDUMP = _tool("cuobjdump", "cu13", "cuda_cuobjdump")
needs_oracle = pytest.mark.skipif(PTXAS is None or CUOBJDUMP is None,
                                  reason="ptxas / cuobjdump not installed (pip install -e '.[test]')")


@functools.lru_cache(maxsize=None)
def corpus_listing(arch: str) -> str:
    """cuobjdump -sass of tests/sassas/control_corpus compiled by ptxas for `arch`."""
    import tempfile
    ptx = CORPUS / ("kernels.compute_75.ptx" if arch == "sm_75" else "kernels.compute_80.ptx")
    with tempfile.TemporaryDirectory() as tmp:
        cubin = os.path.join(tmp, "k.cubin")
        subprocess.run([PTXAS, f"-arch={arch}", "-O3", "-o", cubin, str(ptx)], check=True, capture_output=True)
        return subprocess.run([CUOBJDUMP, "-sass", cubin], check=True, capture_output=True, text=True).stdout


def corpus_kernels(arch: str):
    kernels, _ = read_listing(corpus_listing(arch), f"corpus-{arch}")
    return kernels


def problems(hazards):
    """Errors and warnings (notes are informational)."""
    return [h for h in hazards if h.severity != "note"]


def program(text: str, arch: str = "sm_90"):
    prog = parse(text, arch, "test.sass")
    for k in prog.kernels:
        resolve_kernel(k, get_arch(arch))
    return prog


# ---- the checker on small programs --------------------------------------------------------

SAFE = """
--:-:0:-:2  LDG.E R2, [R4.64];
--:-:-:-:4  FADD R6, R7, R8;
01:-:-:-:4  FFMA R9, R2, R6, R2;
--:-:-:Y:5  EXIT;
"""


def kinds(text: str, arch: str = "sm_90"):
    return sorted({h.kind for h in problems(check(program(text, arch)))})


def test_correct_program_is_clean():
    assert kinds(SAFE) == []


def test_missing_wait_on_variable_result():
    assert kinds(SAFE.replace("01:-:-:-:4  FFMA", "--:-:-:-:4  FFMA")) == ["raw-variable"]


def test_fixed_latency_read_too_early():
    assert "raw-fixed" in kinds(SAFE.replace("--:-:-:-:4  FADD", "--:-:-:-:1  FADD"))


def test_imad_result_reaches_the_alu_pipe_a_cycle_late():
    """sm_90: IMAD -> SHF.L.U32 at 4 cycles read the old value on an H200 (latency.toml's
    imad -> alu: 5), while ptxas's IMAD.WIDE.U32 -> LEA at 3 cycles stays legal (imad_wide)."""
    imad = """
--:-:-:-:{d}  IMAD R2, R3, 0x38, R4;
--:-:-:-:4  SHF.L.U32 R5, R2, 0x2, RZ;
--:-:-:Y:5  EXIT;
"""
    assert "raw-fixed" in kinds(imad.format(d=4))
    assert kinds(imad.format(d=5)) == []
    wide = """
--:-:-:-:3  IMAD.WIDE.U32 R2, R3, 0x4, R4;
--:-:-:-:4  LEA R6, P0, R2, R8, 0x2;
--:-:-:Y:5  EXIT;
"""
    assert kinds(wide) == []


def test_wait_on_unset_barrier():
    assert "wait-unset" in kinds(SAFE.replace("01:-:-:-:4  FFMA", "03:-:-:-:4  FFMA"))


ASYNC_COPY = """
--:5:-:-:1  LDGSTS.E.BYPASS.128 [R7], desc[UR4][R4.64+0x100];
--:-:3:-:1  LDGDEPBAR;
--:-:-:Y:4  DEPBAR.LE SB3, 0x0;
--:-:-:-:6  BAR.SYNC.DEFER_BLOCKING 0x0;
--:-:-:Y:5  EXIT;
"""


def test_async_copy_group_needs_a_scoreboard():
    """LDGDEPBAR counts its group on the scoreboard of its write-barrier field, which
    DEPBAR.LE SBn, 0x0 drains (ptxas: LDGDEPBAR, stall 1, DEPBAR: no raise delay). Without a
    write barrier nothing can wait for the copies (the Winograd kernel's first LDGSTS version
    published shared memory before its copies had landed)."""
    assert kinds(ASYNC_COPY) == []
    assert kinds(ASYNC_COPY.replace("--:-:3:-:1  LDGDEPBAR", "--:-:-:-:1  LDGDEPBAR")) == ["async-untracked", "wait-unset"]
    # the DEPBAR waits on the scoreboard: what else set it is released too
    text = "--:-:3:-:2  LDS R9, [R7];\n" + ASYNC_COPY.replace("--:-:-:Y:5  EXIT", "--:-:-:-:4  FADD R9, R9, R9;\n--:-:-:Y:5  EXIT")
    assert kinds(text) == []


def test_wait_after_the_barrier_was_waited_on_is_redundant_not_unset():
    # ptxas drains all six barriers (CCTL.IVALL, fences), then still waits on the load's
    # barrier at the store that reads its result: redundant, not a wait on nothing.
    text = """
    --:-:5:-:2  LDG.E R3, [R2.64];
    63:-:-:-:5  CCTL.IVALL;
    32:-:-:-:1  STG.E [R4.64], R3;
    --:-:-:Y:5  EXIT;
    """
    assert kinds(text) == []
    notes = [h.kind for h in check(program(text)) if h.severity == "note"]
    assert "wait-redundant" in notes
    # A barrier that nothing ever set is still a warning.
    assert kinds(text.replace("32:-:-:-:1  STG", "48:-:-:-:1  STG")) == ["wait-unset"]


def test_in_order_queue_may_overwrite_the_sources_of_an_earlier_instruction():
    # sm_75: FP64 is a variable-latency, in-order queue; ptxas lets DMUL overwrite a source of
    # the DFMA just before it without waiting on DFMA's read barrier.
    text = """
    --:4:1:-:4  DFMA.RM R10, R6, R8, R10;
    --:-:2:-:2  DMUL.RM R6, R6, 1.5;
    06:-:-:-:1  STG.E.64 [R4.64], R10;
    --:-:-:-:1  STG.E.64 [R4.64+0x8], R6;
    --:-:-:Y:5  EXIT;
    """
    assert kinds(text, "sm_75") == []
    # An instruction of another pipe must wait.
    assert "war" in kinds(text.replace("DMUL.RM R6, R6, 1.5", "MOV R6, R7"), "sm_75")


def test_source_of_store_overwritten_before_read_barrier():
    text = """
    --:0:-:-:2  STG.E [R4.64], R2;
    --:-:-:-:4  MOV R2, R7;
    --:-:-:Y:5  EXIT;
    """
    assert kinds(text) == ["war"]
    assert kinds(text.replace("--:-:-:-:4  MOV", "01:-:-:-:4  MOV")) == []


def test_barrier_waited_too_soon():
    assert "barrier-delay" in kinds(SAFE.replace("--:-:0:-:2  LDG", "--:-:0:-:1  LDG").replace(
        "--:-:-:-:4  FADD R6, R7, R8;\n", ""))


def test_predicate_dependency_of_a_branch():
    text = """
    --:-:-:Y:{stall}  ISETP.GE.AND P0, PT, R1, R2, PT;
    --:-:-:-:5  @P0 BRA END;
    --:-:-:Y:5  EXIT;
    END:
    --:-:-:Y:5  EXIT;
    """
    assert kinds(text.format(stall="d")) == []
    assert kinds(text.format(stall="4")) == ["raw-fixed"]


def test_loop_carried_dependency():
    # The load at the bottom of the loop is read at the top of the next iteration.
    text = """
    --:-:0:-:2  LDG.E R2, [R4.64];
    LOOP:
    {wait}:-:-:-:4  FADD R6, R2, R6;
    --:-:0:-:2  LDG.E R2, [R4.64];
    --:-:-:-:5  @P0 BRA LOOP;
    --:-:-:Y:5  EXIT;
    """
    assert kinds(text.format(wait="01")) == []
    assert "raw-variable" in kinds(text.format(wait="--"))


def test_reuse_that_cannot_hit_is_a_note():
    text = """
    --:-:-:-:4  FFMA R1, R2.reuse, R3, R4;
    --:-:-:-:4  FFMA R5, R6, R3, R4;
    --:-:-:Y:5  EXIT;
    """
    hazards = check(program(text))
    assert [h.kind for h in hazards] == ["reuse-miss"] and hazards[0].severity == "note"


def test_every_kind_has_a_severity():
    assert set(KINDS.values()) <= {"error", "warning", "note"}


def test_examples_pass_or_report_with_location():
    for path in (ROOT / "examples").glob("*.sass"):
        for h in problems(check(program(path.read_text()))):
            assert h.loc is not None and h.loc.line > 0


# ---- automatic scheduling ---------------------------------------------------------------

def strip_controls(text: str) -> str:
    import re
    return re.sub(r"^(\s*)[0-9a-fA-F-]{1,6}:[0-7-]:[0-7-]:[yY-]:[0-9a-fA-F]{1,2}\s", r"\1", text, flags=re.M)


@pytest.mark.parametrize("example", sorted(p.name for p in (ROOT / "examples").glob("*.sass")))
def test_scheduler_output_passes_check(example):
    prog = program(strip_controls((ROOT / "examples" / example).read_text()))
    for k in prog.kernels:
        assert all(i.control is None for i in k.instructions)
        schedule_kernel(k, get_arch("sm_90"))
        assert all(i.control is not None for i in k.instructions)
    assert problems(check(prog)) == []


def test_scheduler_keeps_written_codes():
    text = SAFE.replace("--:-:-:-:4  FADD", "FADD").replace("--:-:-:Y:5  EXIT", "EXIT")
    prog = program(text)
    kernel = prog.kernels[0]
    written = [i.control for i in kernel.instructions]
    schedule_kernel(kernel, "sm_90")
    after = [i.control for i in kernel.instructions]
    assert after[0] == written[0] and after[2] == written[2]
    assert after[1] is not None and problems(check(prog)) == []


def test_yield_strategies():
    prog = program(strip_controls((ROOT / "examples" / "saxpy.sass").read_text()))
    kernel = prog.kernels[0]
    schedule_kernel(kernel, "sm_90")
    apply_yield_strategy(kernel, "every:7")
    flags = [i.control.yield_ for i in kernel.instructions]
    for n, flag in enumerate(flags):
        c = kernel.instructions[n].control
        assert flag == ((n + 1) % 7 == 0 or c.stall == 0 or c.stall > 11)
    apply_yield_strategy(kernel, "natural")
    assert all(i.control.yield_ == (i.control.stall > 11 or i.control.stall == 0) for i in kernel.instructions)
    with pytest.raises(ValueError):
        apply_yield_strategy(kernel, "sometimes")


# ---- the oracle: ptxas output -------------------------------------------------------------

@needs_oracle
@pytest.mark.parametrize("arch", ARCHS)
def test_no_false_alarms_on_ptxas_code(arch):
    kernels = corpus_kernels(arch)
    assert len(kernels) >= 15
    found = [h.render() for k in kernels for h in problems(check(k, arch))]
    assert found == [], "\n\n".join(found[:5])


def _assert_reschedules_cleanly(kernels, arch: str) -> None:
    """ptxas's control codes thrown away and scheduled again by sassas: the checker finds nothing."""
    for kernel in kernels:
        for inst in kernel.instructions:
            inst.control = None
        schedule_kernel(kernel, arch)
        found = [h.render() for h in problems(check(kernel, arch))]
        assert found == [], kernel.name + "\n" + "\n\n".join(found[:3])


@needs_oracle
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_scheduler_on_ptxas_code(arch):
    """Throw ptxas's control codes away, schedule again: the result must pass the checker."""
    _assert_reschedules_cleanly(corpus_kernels(arch), arch)


@functools.lru_cache(maxsize=None)
def learning_corpus_listing(arch: str) -> tuple[str, int]:
    """cuobjdump -sass of the learning corpus's multi-snippet kernels (sassas.learn.corpus.ptx:
    every instruction family of the ISA learner, ~60 kernels an arch) that ptxas 12.9
    accepts, compiled as one module; and how many kernels it holds."""
    import tempfile
    from sassas.learn import oracle
    from sassas.learn.corpus import ptx
    try:
        cuobjdump = oracle.find_tool("cuobjdump", arch)
    except oracle.OracleMissing as e:
        pytest.skip(str(e))
    accepted = [text for name, text in ptx.kernels(arch)
                if "_one_" not in name and oracle.compile_ptx(text, arch) is not None]
    cubin = oracle.compile_ptx(ptx.module(arch, accepted), arch)
    assert cubin is not None, "ptxas refused the module of kernels it accepted one by one"
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "corpus.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        listing = subprocess.run([str(cuobjdump), "-sass", path], check=True, capture_output=True,
                                 text=True).stdout
    return listing, len(accepted)


def learning_corpus_kernels(arch: str):
    listing, count = learning_corpus_listing(arch)
    kernels, errors = read_listing(listing, f"learning-corpus-{arch}")
    assert len(kernels) == count and not errors
    return kernels


@needs_oracle
@pytest.mark.parametrize("arch", ["sm_70"] + ARCHS + ["sm_100", "sm_120"])
def test_no_false_alarms_on_learning_corpus(arch):
    """Every instruction family of the ISA learning corpus (conversions, FP64, atomics, fences,
    MMA...), not only the control corpus: compiler output raises no error or warning."""
    found = [h.render() for k in learning_corpus_kernels(arch) for h in problems(check(k, arch))]
    assert found == [], f"{len(found)} false alarms on {arch}:\n" + "\n\n".join(found[:3])


@needs_oracle
@pytest.mark.parametrize("arch", ["sm_70"] + ARCHS + ["sm_100", "sm_120"])
def test_scheduler_on_learning_corpus(arch):
    """The learning corpus with ptxas's control codes thrown away and scheduled again passes
    the checker."""
    _assert_reschedules_cleanly(learning_corpus_kernels(arch), arch)


def _direct_waits(kernel):
    """(instruction, barrier) pairs where the instruction waits on a write barrier whose
    setter, earlier in the same straight-line run, wrote a register the instruction reads."""
    from sassas.semantics import effects
    insts = kernel.instructions
    out = []
    for n, inst in enumerate(insts):
        # With several barriers waited on, another may cover the same result (in-order queues).
        if bin(inst.control.wait_mask).count("1") != 1:
            continue
        for b in range(6):
            if not inst.control.wait_mask >> b & 1:
                continue
            for m in range(n - 1, max(n - 40, -1), -1):
                other = insts[m]
                if other.opcode in ("BRA", "EXIT", "RET", "CALL", "BSYNC", "BSSY", "WARPSYNC", "BAR"):
                    break
                if other.control.write_barrier == b:
                    if set(effects(other).writes) & set(effects(inst).reads):
                        out.append((n, b))
                    break
    return out


@needs_oracle
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_mutations_are_caught(arch):
    from sassas.semantics import effects
    caught = tried = 0
    missed = []
    # 1. drop a wait that orders a consumer after its producer (ptxas code)
    for kernel in corpus_kernels(arch):
        for n, b in _direct_waits(kernel):
            inst = kernel.instructions[n]
            original = inst.control
            inst.control = replace(original, wait_mask=original.wait_mask & ~(1 << b))
            tried += 1
            if any(h.severity == "error" for h in check(kernel, arch)):
                caught += 1
            else:
                missed.append(f"drop wait {b}: {kernel.name} {inst.mnemonic} /*{inst.address:04x}*/")
            inst.control = original
    # 2. shorten a stall / 3. reuse a barrier too early (scheduler output: every stall > 1 of
    #    a non-branch is needed, every barrier is waited on by a consumer)
    for kernel in corpus_kernels(arch)[:8]:
        for inst in kernel.instructions:
            inst.control = None
        schedule_kernel(kernel, arch)
        insts = kernel.instructions
        for n, inst in enumerate(insts):
            original = inst.control
            mutations = []
            if original.stall > 1 and inst.opcode not in ("BRA", "EXIT", "RET", "CALL"):
                mutations.append(("shorten stall", replace(original, stall=original.stall - 1)))
            if original.write_barrier != NO_BARRIER:
                results = set(effects(inst).writes)
                consumer = next((c for c in insts[n + 1:] if c.control.wait_mask >> original.write_barrier & 1
                                 and results & set(effects(c).reads + effects(c).writes)), None)
                if consumer is not None:
                    # Another barrier that nothing up to the consumer waits on: the result is
                    # then never waited for. (A barrier that some instruction in between waits
                    # on would make the mutant correct: that wait completes the load too; so
                    # would a wait on a later instruction of the same in-order queue.)
                    between = insts[n + 1:insts.index(consumer) + 1]
                    queue = effects(inst).info.queue
                    other = next((b for b in range(6) if b not in (original.write_barrier, original.read_barrier)
                                  and not any(c.control.wait_mask >> b & 1 for c in between)), None)
                    in_order = queue is not None and any(effects(c).info.queue == queue for c in between[:-1])
                    if other is not None and not in_order:
                        mutations.append(("reuse barrier", replace(original, write_barrier=other)))
            for what, mutated in mutations:
                inst.control = mutated
                tried += 1
                if any(h.severity in ("error", "warning") for h in check(kernel, arch)):
                    caught += 1
                else:
                    missed.append(f"{what}: {kernel.name} {inst.mnemonic} /*{inst.address:04x}*/")
                inst.control = original
    assert tried > 50
    assert missed == [], f"{caught}/{tried} caught; missed:\n" + "\n".join(missed[:10])


def test_wait_on_a_dealloc_drains_fixed_latency_results():
    # ptxas (sm_90a) reads an IMAD.WIDE result 2 cycles on, across a USETMAXREG.DEALLOC whose
    # barrier it waits on: the register file is resized only once results in flight have landed.
    text = """
    --:-:-:-:1  IMAD.WIDE.U32 R2, R7, 0x40, R2;
    --:-:0:-:1  USETMAXREG.DEALLOC.CTAPOOL 0x28;
    {wait}:-:-:-:1  STG.E desc[UR4][R2.64], R5;
    --:-:-:Y:5  EXIT;
    """
    assert kinds(text.format(wait="01"), "sm_90") == []
    assert kinds(text.format(wait="--"), "sm_90") == ["raw-fixed"]
