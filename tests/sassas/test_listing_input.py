"""`sassas asm` takes `cuobjdump -sass` and `nvdisasm -hex` listings unchanged.

The control bits come from bits 105..127 of each instruction's hex; nothing else may come from
the hex, so the same listing with every other hex bit scrambled must give the same code.
Kernels: tests/sassas/data/realistic_kernels.cu compiled by NVRTC for each architecture (sm_70: NVRTC's
PTX through ptxas 12.9, see tests/sassas/_realistic.py; its listings come from nvdisasm/cuobjdump 12.8).
Reports the share of instructions reproduced bit-exactly per arch and listing kind.
"""
import os
import random
import re
import subprocess

import pytest

import sassas
from sassas import nvrtc
from sassas.elf import read_cubin
from sassas.errors import SassError
from sassas.learn import oracle
from sassas.learn.compare import listing_encodings
from _realistic import compile_realistic

ARCHS = ["sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90"]
pytestmark = pytest.mark.corpus
SOURCE = os.path.join(os.path.dirname(__file__), "data", "realistic_kernels.cu")
# Every instruction is reproduced on every arch: it may not go down.
MIN_EXACT_PERCENT = 100.0

_ok, _why = nvrtc.available()
needs_nvrtc = pytest.mark.skipif(not _ok, reason=f"NVRTC is needed to compile the test kernels: {_why}")


def _tool(name, arch):
    try:
        return str(oracle.find_tool(name, arch))
    except oracle.OracleMissing as e:
        pytest.skip(f"{name} for {arch} not installed (test extra): {e}")


def _listing(kind: str, arch: str, cubin_path: str) -> str:
    if kind == "cuobjdump":
        cmd = [_tool("cuobjdump", arch), "-sass", cubin_path]
    else:
        cmd = [_tool("nvdisasm", arch), "-hex", cubin_path]
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout


def _scramble(listing: str, seed: int) -> str:
    """Randomise every hex bit except the control bits (105..127: high word bits 41..63)."""
    rng = random.Random(seed)
    lines = listing.split("\n")
    for i, line in enumerate(lines):
        m = re.search(r"/\*\s*(0x[0-9a-fA-F]{16})\s*\*/", line)
        if not m:
            continue
        word = int(m.group(1), 16)
        high = re.match(r"^\s*/\*\s*0x", line) is not None      # the next-line (high) word
        keep = ((1 << 23) - 1) << 41 if high else 0
        new = (word & keep) | (rng.getrandbits(64) & ~keep)
        lines[i] = line.replace(m.group(1), f"0x{new:016x}")
    return "\n".join(lines)


def _exact_share(listing: str, arch: str, original: bytes) -> tuple[int, int, list[str]]:
    """(instructions equal to the original, instructions, first failures) - per instruction,
    so one unsupported form does not hide how the rest fare."""
    good = total = 0
    failures = []
    for inst, want, got, error in listing_encodings(listing, arch, original):
        total += 1
        if got == want:
            good += 1
        elif error is not None:
            failures.append(f"{inst.loc.text.strip()[:80]}: {error.message[:120]}")
        else:
            failures.append(f"{inst.loc.text.strip()[:80]}: bits 0x{got ^ want:x} differ")
    return good, total, failures


@needs_nvrtc
@pytest.mark.oracle
@pytest.mark.parametrize("kind", ["cuobjdump", "nvdisasm"])
@pytest.mark.parametrize("arch", ARCHS)
def test_listing_reassembles(arch, kind, tmp_path, report):
    original = compile_realistic(arch)
    path = tmp_path / "k.cubin"
    path.write_bytes(original)
    listing = _listing(kind, arch, str(path))
    good, total, failures = _exact_share(listing, arch, original)
    scrambled_good, scrambled_total, _ = _exact_share(_scramble(listing, 1), arch, original)
    percent = 100.0 * good / total
    report(f"[{arch} {kind}] {good}/{total} instructions bit-exact ({percent:.1f}%); "
           f"with scrambled non-control hex: {scrambled_good}/{scrambled_total}"
           + "".join(f"\n    {f}" for f in failures[:5]))
    assert (scrambled_good, scrambled_total) == (good, total)
    assert percent >= MIN_EXACT_PERCENT, failures[:10]
    if good == total:
        # Whole file through the command-line pipeline: every function's code identical.
        rebuilt = read_cubin(sassas.assemble(listing, arch, filename=f"k.{kind}").data)
        for k in read_cubin(original).kernels:
            assert rebuilt.kernel(k.name).code == k.code


def test_listing_detection_keeps_line_numbers():
    from sassas.preprocess import is_listing, listing_statements
    text = "\n\tcode for sm_90\n\t\tFunction : k\n\t.headerflags\t@\"EF_CUDA_SM90\"\n" \
           "        /*0000*/                   EXIT ;   /* 0x000000000000794d */\n" \
           "                                            /* 0x000fea0003800000 */\n"
    assert is_listing(text)
    out = listing_statements(text.split("\n"), "x")
    assert len(out) == len(text.split("\n"))
    assert out[2] == ".kernel k" and "EXIT" in out[4] and out[3] == ""


def test_listing_annotation_is_not_part_of_the_instruction():
    # nvdisasm -hex on a cubin whose attributes mark spill code (ptxas 12.6, sm_90):
    # `(*"SpillRefill"*)` stands between the operands and the ';'.
    from sassas.parse import parse_program
    from sassas.preprocess import preprocess
    text = ("\t.section\t.text.k,\"ax\",@progbits\n"
            ".text.k:\n"
            "        /*0000*/                   STL [R1+0x4], R4                                  (*\"SpillRefill\"*); /* 0x0000040401007387 */\n"
            "                                                                                                       /* 0x000fe20000100800 */\n")
    program = preprocess(text, "x.sass")
    line = program.text.split("\n")[2]
    assert "STL [R1+0x4], R4" in line and "Spill" not in line and len(line) == len(text.split("\n")[2])
    inst = parse_program(program.text, "sm_90", "x.sass").kernels[0].instructions[0]
    assert inst.opcode == "STL" and len(inst.operands) == 2


def test_listing_of_a_module_without_code_is_an_empty_module():
    """nvdisasm's text of a cubin without functions (faiss ships some) is headers only: it
    assembles to a cubin without kernels, while a source without instructions is an error."""
    listing = ('\t.headerflags\t@"EF_CUDA_TEXMODE_UNIFIED EF_CUDA_64BIT_ADDRESS EF_CUDA_SM80 '
               'EF_CUDA_VIRTUAL_SM(EF_CUDA_SM80)"\n\t.elftype\t@"ET_EXEC"\n\n\n'
               '//--------------------- .debug_frame              --------------------------\n'
               '\t.section\t.debug_frame,"",@progbits\n')
    info = read_cubin(sassas.assemble(listing, "sm_80", filename="empty.sass").data)
    assert info.kernels == [] and info.functions == []
    with pytest.raises(SassError) as e:
        sassas.assemble("// nothing here\n", "sm_80", filename="e.sass")
    assert str(e.value).startswith("e.sass:1:1: error: nothing to assemble")
