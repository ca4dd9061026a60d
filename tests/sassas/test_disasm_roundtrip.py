"""`sassas disasm` -> `sassas asm` on NVRTC-compiled cubins: same code bytes, same launch metadata.

The kernels (tests/sassas/data/realistic_kernels.cu) are compiled by NVRTC for sm_75..sm_90, and for
sm_70 through NVRTC's PTX and ptxas 12.9 (tests/sassas/_realistic.py); skips with the reason where a
tool is missing. Reports how many
instructions needed the `.raw` escape (bits the ISA tables do not reproduce from text).
"""
import itertools
import os

import pytest

import sassas
from sassas.disasm import UnsupportedCubin, disassemble
from sassas.elf import read_cubin
from sassas import nvrtc
from _realistic import compile_realistic

ARCHS = ["sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90"]
LAUNCH_ATTRIBUTES = ("params", "registers", "shared_bytes", "max_threads", "exit_offsets",
                     "param_base", "barriers", "frame_size", "constant_banks")
SOURCE = os.path.join(os.path.dirname(__file__), "data", "realistic_kernels.cu")

_ok, _why = nvrtc.available()
needs_nvrtc = pytest.mark.skipif(not _ok, reason=f"NVRTC is needed to compile the test kernels: {_why}")


def _compile(arch: str) -> bytes:
    return compile_realistic(arch, ["-std=c++17"])


@pytest.mark.corpus
@needs_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
def test_unedited_round_trip_is_identical(arch, report):
    original = _compile(arch)
    text = disassemble(original, source_name="realistic_kernels.cubin")
    rebuilt = sassas.assemble(text, arch, filename="realistic_kernels.sass")
    a, b = read_cubin(original), read_cubin(rebuilt.data)
    assert sorted(k.name for k in a.kernels) == sorted(k.name for k in b.kernels)
    for ka in a.kernels:
        kb = b.kernel(ka.name)
        assert ka.code == kb.code, f"{ka.name}: code differs"
        for attr in LAUNCH_ATTRIBUTES:
            assert getattr(ka, attr) == getattr(kb, attr), f"{ka.name}: {attr}"
    total = sum(1 for line in text.splitlines() if line.rstrip().endswith(";"))
    raw = text.count("\n.raw ")
    report(f"[{arch}] disasm->asm round trip: {len(a.kernels)} kernels, {total} instructions "
           f"identical; {raw} ({100.0 * raw / total:.1f}%) needed .raw bits")


@needs_nvrtc
def test_edit_survives_inserting_an_instruction():
    """Labels, not offsets: a NOP inserted before a loop keeps the branches right."""
    text = disassemble(_compile("sm_90"), kernel="dynamic_shared")
    lines = text.splitlines()
    first = next(i for i, l in enumerate(lines) if l.rstrip().endswith(";"))
    lines.insert(first, "--:-:-:Y:1        NOP;")
    edited = sassas.assemble("\n".join(lines), "sm_90")
    k = read_cubin(edited.data).kernel("dynamic_shared")
    again = disassemble(edited.data)
    assert len(k.code) == len(read_cubin(_compile("sm_90")).kernel("dynamic_shared").code) + 16
    # Every branch still names a label that exists.
    labels = {l[:-1] for l in again.splitlines() if l.endswith(":")}
    for line in again.splitlines():
        if " BRA " in line:
            assert line.split("BRA", 1)[1].strip(" ;").split()[-1] in labels


def test_unknown_kernel_and_not_a_cubin_are_errors(tmp_path):
    cubin = sassas.assemble("--:-:-:Y:5 EXIT;\n", "sm_90", kernel_name="k").data
    with pytest.raises(sassas.SassError, match=r"k.cubin: no kernel 'nope' in this cubin; it has k"):
        disassemble(cubin, kernel="nope", source_name="k.cubin")
    with pytest.raises(sassas.SassError, match=r"x.sass: not a cubin sassas can read: not an ELF file"):
        disassemble(b"EXIT;", source_name="x.sass")


def test_a_fatbin_or_host_program_is_named_with_the_way_to_its_cubins():
    """What a user holding nvcc's output passes instead of a cubin: the message says what it is
    and how to get the cubins out."""
    import struct
    fatbin = struct.pack("<IHHQ", 0xBA55ED50, 1, 16, 0)
    host = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8) + struct.pack("<HHI", 2, 62, 1) + bytes(48)
    how = "; `sassas disasm FILE` shows the cubins it holds, `cuobjdump -xelf all FILE` writes them out"
    with pytest.raises(sassas.SassError) as e:
        disassemble(fatbin, source_name="a.fatbin")
    assert e.value.message == "a.fatbin: not a cubin sassas can read: a fatbin (nvcc's container of cubins and PTX)" + how
    with pytest.raises(sassas.SassError) as e:
        disassemble(host, source_name="a.out")
    assert e.value.message == ("a.out: not a cubin sassas can read: an ELF file for machine 62 (a host program or "
                               "library?)" + how)


@needs_nvrtc
@pytest.mark.parametrize("arch", ["sm_75", "sm_90"])
def test_resource_usage_is_cuobjdumps(arch):
    """`sassas disasm --res-usage` (and `asm -v`) against `cuobjdump -res-usage` on NVRTC's cubin:
    registers, static shared memory and stack of every function."""
    import re
    import subprocess
    import tempfile
    from sassas.disasm import resource_usage
    from sassas.learn.oracle import OracleMissing, find_tool
    try:
        cuobjdump = find_tool("cuobjdump", arch)
    except OracleMissing as e:
        pytest.skip(str(e))
    cubin = _compile(arch)
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        listing = subprocess.run([str(cuobjdump), "-res-usage", f.name], capture_output=True, text=True,
                                 check=True).stdout
    theirs = {m[0]: tuple(map(int, m[1:])) for m in
              re.findall(r"Function (\S+):\n\s+REG:(\d+) STACK:(\d+) SHARED:(\d+)", listing)}
    ours = {m[0]: (int(m[1]), int(m[4]), int(m[2])) for m in re.findall(
        r"^(\S+?)(?: \(device function\))?: (\d+) registers, (\d+) bytes static shared memory, (\d+) bytes of "
        r"parameters, \d+ barriers?, (\d+) bytes stack frame", resource_usage(cubin), re.M)}
    assert len(theirs) >= 5 and ours == theirs


def test_other_code_relocations_are_refused():
    from sassas.disasm import _refuse_what_cannot_be_carried

    class Section:
        def __init__(self, name, size):
            self.name, self.size, self.entsize = name, size, 24

    class Kernel:
        name = "k"

    class Relocation:
        def __init__(self, section, type):
            self.section, self.type = section, type

    class Info:
        sections = [Section(".rel.debug_frame", 48), Section(".rel.text.k", 24)]
        relocations = [Relocation(".text.k", 0x2A)]       # a type sassas source has no syntax for

    with pytest.raises(UnsupportedCubin, match=r"1 relocation\(s\) against .text.k"):
        _refuse_what_cannot_be_carried(Info(), [Kernel()])
    Info.relocations = [Relocation(".text.k", 0x38)]       # `32@lo(x)`: carried
    _refuse_what_cannot_be_carried(Info(), [Kernel()])
    Info.relocations = []
    Info.sections = [Section(".rela.nv.constant2.k", 48)]
    with pytest.raises(UnsupportedCubin, match=r"2 relocation\(s\) against .nv.constant2.k"):
        _refuse_what_cannot_be_carried(Info(), [Kernel()])
    # Empty, debug-only, another kernel's, or module data (carried by `.moduleconst`/`.init`): fine.
    Info.sections = [Section(".rel.debug_frame", 48), Section(".rela.text.k", 0), Section(".rel.text.other", 24),
                     Section(".rel.nv.constant4", 24), Section(".rela.nv.global.init", 24)]
    _refuse_what_cannot_be_carried(Info(), [Kernel()])


@needs_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
def test_register_count_matches_ptxas(arch):
    """Without `.registers`, the count is ptxas's: highest register + 1 + the reserved two
    (an H100 traps with an illegal instruction when they are missing)."""
    import re
    from sassas.encode import count_registers
    original = _compile(arch)
    text = re.sub(r"^\.registers .*$", "", disassemble(original), flags=re.M)
    program = sassas.parse(text, arch, "k.sass")
    info = read_cubin(original)
    assert {k.name: count_registers(k) for k in program.kernels} == \
           {k.name: k.registers for k in info.kernels}
