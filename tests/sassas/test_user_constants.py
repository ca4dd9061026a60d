"""TuringAs's `<consts>` (`.const name size`): module constant bank 3, written as the section
`.nv.constant3` (PROGBITS, SHF_ALLOC, 4-byte aligned, the declared size) with a LOCAL OBJECT
symbol per constant, so that `c[0x3][...]` reads find them once loaded. Checked with
pyelftools, against TuringAs itself (the oracle: same section and symbols for the same file)
and with nvdisasm (the reads)."""
import io
import os
import subprocess
import sys

import pytest
from elftools.elf.elffile import ELFFile

import sassas
from sassas.errors import SassError
from sassas.learn import oracle

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TURINGAS = os.environ.get("SASSAS_TURINGAS", os.path.join(ROOT, "..", "shared", "oracles", "turingas"))

SOURCE = """<params>
out, 8
</params>
<CONSTS>
table, 16
scale, 4
</CONSTS>
--:-:-:Y:4  MOV R0, table[1];
--:-:-:Y:4  MOV R1, scale[0];
--:-:-:Y:4  EXIT;
"""


def _bank3(data: bytes):
    """(section header facts, bytes, {symbol: (value, size, bind, type)}) of .nv.constant3."""
    elf = ELFFile(io.BytesIO(data))
    sec = elf.get_section_by_name(".nv.constant3")
    assert sec is not None, "no .nv.constant3"
    index = [s.name for s in elf.iter_sections()].index(".nv.constant3")
    symbols = {s.name: (s["st_value"], s["st_size"], s["st_info"]["bind"], s["st_info"]["type"])
               for s in elf.get_section_by_name(".symtab").iter_symbols() if s["st_shndx"] == index}
    header = (sec["sh_type"], sec["sh_flags"], sec["sh_addralign"], sec["sh_size"])
    return header, sec.data(), symbols


@pytest.mark.parametrize("arch", ["sm_70", "sm_75", "sm_80", "sm_90"])
def test_consts_become_nv_constant3(arch):
    header, data, symbols = _bank3(sassas.assemble(SOURCE, arch).data)
    assert header == ("SHT_PROGBITS", 0x2, 4, 20)
    assert data == bytes(20)                       # no initial values given: zeros
    assert symbols == {".nv.constant3": (0, 0, "STB_LOCAL", "STT_SECTION"),
                       "table": (0, 16, "STB_LOCAL", "STT_OBJECT"),
                       "scale": (16, 4, "STB_LOCAL", "STT_OBJECT")}


def test_moduleconst_3_gives_initial_values():
    src = ".moduleconst 3 0x4 0x3f800000\n.moduleconst 3 0x10 0x40000000\n" + SOURCE
    _header, data, symbols = _bank3(sassas.assemble(src, "sm_80").data)
    assert data == bytes(4) + (0x3f800000).to_bytes(4, "little") + bytes(8) + (0x40000000).to_bytes(4, "little")
    assert symbols["scale"] == (16, 4, "STB_LOCAL", "STT_OBJECT")


def test_reads_name_bank_3(tmp_path):
    try:
        nvdisasm = oracle.find_tool("nvdisasm", "sm_80")
    except oracle.OracleMissing as e:
        pytest.skip(f"nvdisasm not installed: {e}")
    path = tmp_path / "k.cubin"
    path.write_bytes(sassas.assemble(SOURCE, "sm_80").data)
    listing = subprocess.run([str(nvdisasm), str(path)], capture_output=True, text=True, check=True).stdout
    assert "MOV R0, c[0x3][0x4]" in listing and "MOV R1, c[0x3][0x10]" in listing


def test_two_kernels_must_agree_on_bank_3():
    src = (".kernel a\n.const x 4\n--:-:-:Y:4 MOV R0, x;\n--:-:-:Y:4 EXIT;\n"
           ".kernel b\n.const y 4\n.const x 4\n--:-:-:Y:4 MOV R0, x;\n--:-:-:Y:4 EXIT;\n")
    with pytest.raises(SassError, match="constant 'x' of kernel 'b' sits at c\\[0x3\\]\\[0x4\\]"):
        sassas.assemble(src, "sm_80")
    same = src.replace(".const y 4\n", "")
    _h, _d, symbols = _bank3(sassas.assemble(same, "sm_80").data)
    assert symbols["x"] == (0, 4, "STB_LOCAL", "STT_OBJECT")


@pytest.mark.oracle
@pytest.mark.parametrize("arch", ["sm_70", "sm_75", "sm_80", "sm_86"])
def test_same_bank_3_as_turingas(arch, tmp_path):
    if not os.path.isdir(os.path.join(TURINGAS, "turingas")):
        pytest.skip(f"TuringAs not found at {TURINGAS} (set SASSAS_TURINGAS)")
    src, out = tmp_path / "k.sass", tmp_path / "k.cubin"
    src.write_text(SOURCE)
    r = subprocess.run([sys.executable, "-m", "turingas.main", "-i", str(src), "-o", str(out), "-arch", arch[3:]],
                       cwd=TURINGAS, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert _bank3(out.read_bytes()) == _bank3(sassas.assemble(SOURCE, arch).data)


def test_a_constant_named_like_a_global_is_an_error():
    src = ".global x 4\n.kernel k\n.const x 4\n--:-:-:Y:4 MOV R0, x;\n--:-:-:Y:4 EXIT;\n"
    with pytest.raises(SassError, match="constant 'x' of kernel 'k' has the name of a global variable"):
        sassas.assemble(src, "sm_80")
