"""`sassas disasm` -> `sassas asm` on ptxas-compiled cubins: same code bytes, same launch metadata.

Needs ptxas 12.9 (the test extra); skips with the reason otherwise. Reports how many
instructions needed the `.raw` escape (bits the ISA tables do not reproduce from text).
"""
import itertools

import pytest

import sassas
from sassas.disasm import disassemble
from sassas.elf import read_cubin
from sassas.isa import oracle
from sassas.isa.corpus import ptx as corpus_ptx

ARCHS = ["sm_75", "sm_80", "sm_86", "sm_89", "sm_90"]
LAUNCH_ATTRIBUTES = ("params", "registers", "shared_bytes", "max_threads", "exit_offsets", "param_base")


def _cubins(arch, count):
    out = []
    for name, ptx in itertools.islice(corpus_ptx.kernels(arch), count * 3):
        cubin = oracle.compile_ptx(ptx, arch)
        if cubin is not None:
            out.append((name, cubin))
        if len(out) == count:
            break
    return out


@pytest.mark.oracle
@pytest.mark.parametrize("arch", ARCHS)
def test_unedited_round_trip_is_identical(arch, capsys):
    try:
        oracle.find_tool("ptxas", arch)
    except oracle.OracleMissing as e:
        pytest.skip(f"no ptxas for {arch}: {e}")
    total = raw = 0
    for name, original in _cubins(arch, 6):
        text = disassemble(original, source_name=name)
        raw += text.count("\n.raw ")
        total += sum(1 for line in text.splitlines() if line.endswith(";"))
        rebuilt = sassas.assemble(text, arch, filename=f"{name}.sass")
        a, b = read_cubin(original), read_cubin(rebuilt.data)
        assert [k.name for k in a.kernels] == [k.name for k in b.kernels]
        for ka, kb in zip(a.kernels, b.kernels):
            assert ka.code == kb.code, f"{name}/{ka.name}: code differs"
            for attr in LAUNCH_ATTRIBUTES:
                assert getattr(ka, attr) == getattr(kb, attr), f"{name}/{ka.name}: {attr}"
    assert total > 0
    with capsys.disabled():
        print(f"\n[{arch}] disasm->asm round trip: {total} instructions identical, "
              f"{raw} ({100.0 * raw / total:.1f}%) needed .raw bits")


def test_relocations_are_refused():
    from sassas.disasm import UnsupportedCubin, _refuse_what_cannot_be_carried

    class S:
        def __init__(self, name):
            self.name = name

    class K:
        name = "k"

    class Info:
        sections = [S(".rel.text.k")]

    with pytest.raises(UnsupportedCubin, match="relocations"):
        _refuse_what_cannot_be_carried(Info(), [K()])
