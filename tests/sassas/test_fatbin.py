"""nvcc's output as `disasm` and `check` read it: the cubins inside a fatbin and a host program
(tests/sassas/data/fatbin, built by nvcc 13.0 from k.cu there), against cuobjdump's listing and
extraction (`-lelf`, `-xelf all`: the oracle, run here on the CPU); compressed cubins (zstd)
through the zstandard package, named with the reason where it is missing."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

import sassas
from sassas.check import run_check
from sassas.cli import main
from sassas.disasm import disassemble_file, file_cubins
from sassas.elf import CubinFormatError, read_cubin
from sassas.elf.fatbin import embedded_cubins
from sassas.learn.oracle import OracleMissing, find_tool

DATA = os.path.join(os.path.dirname(__file__), "data", "fatbin")
FILES = ("two_archs.fatbin", "compressed.fatbin", "app")


def _cuobjdump():
    try:
        return str(find_tool("cuobjdump", "sm_90"))
    except OracleMissing as e:
        pytest.skip(str(e))


@pytest.mark.parametrize("name", FILES)
def test_the_cubins_are_cuobjdumps(name, tmp_path):
    """Names, archs, order and (uncompressed) bytes as cuobjdump -lelf lists and -xelf all writes them."""
    cuobjdump = _cuobjdump()
    path = os.path.join(DATA, name)
    listed = subprocess.run([cuobjdump, "-lelf", path], capture_output=True, text=True, check=True).stdout
    theirs = re.findall(r"ELF file\s+\d+: (\S+)", listed)
    with open(path, "rb") as f:
        ours = embedded_cubins(f.read(), name)
    assert [c.name for c in ours] == theirs and len(theirs) >= 2
    assert [c.arch for c in ours] == [n.split(".")[-2] for n in theirs]
    subprocess.run([cuobjdump, "-xelf", "all", path], cwd=tmp_path, capture_output=True, check=True)
    if name == "compressed.fatbin":
        pytest.importorskip("zstandard", reason="compressed cubins are read through zstandard (the test extra)")
    for c in ours:
        assert c.unread == "" and c.data == (tmp_path / c.name).read_bytes()
        assert read_cubin(c.data).target == c.arch


def test_disasm_of_a_host_program_rebuilds_its_cubin():
    """`sassas disasm app --arch sm_90 --kernel K`: each sm_90 cubin that has K, under a line naming
    it; its source assembles back to the same code."""
    text = disassemble_file(os.path.join(DATA, "app"), kernel="_Z5scalePfPKffi", arch="sm_90")
    assert text.startswith("# ==== app.4.sm_90.cubin (in app)\n# sassas disasm of app.4.sm_90.cubin: sm_90")
    cubin = file_cubins(os.path.join(DATA, "app"), "sm_90")[-1]
    rebuilt = sassas.assemble(text.split("\n", 1)[1], "sm_90", "app.sass")
    assert read_cubin(rebuilt.data).kernel("_Z5scalePfPKffi").code == read_cubin(cubin.data).kernel("_Z5scalePfPKffi").code


@pytest.mark.parametrize("argv, message", [
    (["disasm", "{d}/app", "--arch", "sm_75"], "sassas: error: app: no cubin for sm_75; it holds app.1.sm_80.cubin, "
                                               "app.2.sm_90.cubin, app.3.sm_80.cubin, app.4.sm_90.cubin"),
    (["disasm", "{d}/app", "--kernel", "nope"], "sassas: error: app: no kernel 'nope' in its cubins"),
    (["disasm", "{t}/cut.fatbin"], "sassas: error: cut.fatbin: not a cubin sassas can read: damaged fatbin: its "
                                   "entries (bytes 0x10..0x3268) run past the end (0x1770 bytes)"),
    (["disasm", "{python}"], "not a cubin sassas can read: an ELF file for machine"),
])
def test_what_is_not_there_is_one_line(capsys, tmp_path, argv, message):
    with open(os.path.join(DATA, "two_archs.fatbin"), "rb") as f:
        (tmp_path / "cut.fatbin").write_bytes(f.read()[:6000])
    with open(sys.executable, "rb") as f:
        if "{python}" in argv and f.read(4) != b"\x7fELF":
            pytest.skip("the Python executable is no ELF file here")
    assert main([a.format(d=DATA, t=tmp_path, python=sys.executable) for a in argv]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


def test_without_zstandard_compressed_cubins_are_named(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "zstandard", None)        # (import zstandard: ImportError)
    text = disassemble_file(os.path.join(DATA, "compressed.fatbin"))
    assert text == "".join(f"# ==== compressed.{i}.sm_{a}.cubin (in compressed.fatbin): compressed (zstd): "
                           f"`pip install zstandard` lets sassas read it; `cuobjdump -xelf all FILE` writes it out\n"
                           for i, a in ((1, 80), (2, 90)))
    assert run_check([os.path.join(DATA, "compressed.fatbin")], "sm_90") == 1
    assert "compressed.fatbin:compressed.2.sm_90.cubin: not checked: compressed (zstd)" in capsys.readouterr().out


def test_compressed_cubins_read_as_their_uncompressed_twins():
    """-Xfatbin -compress-all's cubins, decompressed, are the bytes of the same build uncompressed."""
    pytest.importorskip("zstandard", reason="compressed cubins are read through zstandard (the test extra)")
    packed = file_cubins(os.path.join(DATA, "compressed.fatbin"))
    plain = file_cubins(os.path.join(DATA, "two_archs.fatbin"))
    assert [(c.arch, c.data) for c in packed] == [(c.arch, c.data) for c in plain]


def test_check_of_a_host_program_checks_each_cubin(capsys):
    path = os.path.join(DATA, "app")
    assert run_check([path], "sm_90") == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [f"{path}:app.1.sm_80.cubin: 0 kernels, 0 instructions checked for stalls, scoreboard barriers, reuse: no hazards",
                   f"{path}:app.2.sm_90.cubin: 0 kernels, 0 instructions checked for stalls, scoreboard barriers, reuse: no hazards",
                   f"{path}:app.3.sm_80.cubin: 2 kernels, 72 instructions checked for stalls, scoreboard barriers, reuse: no hazards",
                   f"{path}:app.4.sm_90.cubin: 2 kernels, 88 instructions checked for stalls, scoreboard barriers, reuse: no hazards"]


def test_a_damaged_entry_is_refused():
    with open(os.path.join(DATA, "two_archs.fatbin"), "rb") as f:
        data = bytearray(f.read())
    data[16 + 8:16 + 16] = (1 << 40).to_bytes(8, "little")       # the first entry's payload size
    with pytest.raises(CubinFormatError, match="damaged fatbin: entry at 0x10 runs past its fatbin"):
        embedded_cubins(bytes(data), "x.fatbin")


def test_cuobjdump_listing_of_a_fatbin_assembles_for_the_arch_asked(tmp_path):
    """`cuobjdump -sass two_archs.fatbin` lists sm_80's and sm_90's code one after the other: `asm
    --arch` takes its arch's functions (their code as nvcc's cubin has it), `check` checks them, and
    an arch it lacks is one error."""
    listing = subprocess.run([_cuobjdump(), "-sass", os.path.join(DATA, "two_archs.fatbin")], capture_output=True,
                             text=True, check=True).stdout
    assert listing.count("Fatbin elf code:") == 2
    cubins = {c.arch: read_cubin(c.data) for c in file_cubins(os.path.join(DATA, "two_archs.fatbin"))}
    for arch, nvcc in cubins.items():
        ours = read_cubin(sassas.assemble(listing, arch, "two_archs.sass").data)
        assert sorted(k.name for k in ours.kernels) == sorted(k.name for k in nvcc.kernels)
        assert all(ours.kernel(k.name).code == k.code for k in nvcc.kernels)
    (tmp_path / "two_archs.sass").write_text(listing)
    assert run_check([str(tmp_path / "two_archs.sass")], "sm_80") == 0
    with pytest.raises(sassas.SassError) as e:
        sassas.assemble(listing, "sm_75", "two_archs.sass")
    assert e.value.message == "two_archs.sass: the listing has code for sm_80, sm_90, none for sm_75"


@pytest.mark.parametrize("name", FILES)
def test_damaged_files_give_an_error_not_a_traceback(name, tmp_path):
    """Truncated or overwritten headers, entries and cubins (the run's seed: tests/conftest.py):
    `disasm` and `--res-usage` either read what is there or raise SassError."""
    import random
    from sassas.disasm import resource_usage_file
    rng = random.Random(f"{os.environ.get('SASSAS_FUZZ_SEED', '0')}-{name}")
    with open(os.path.join(DATA, name), "rb") as f:
        data = f.read()
    path = tmp_path / name
    for _ in range(100):
        damaged = bytearray(data[:rng.randrange(len(data))] if rng.random() < 0.3 else data)
        for _ in range(rng.randint(0, 8) if damaged else 0):
            damaged[rng.randrange(min(len(damaged), 4096))] = rng.randrange(256)
        path.write_bytes(damaged)
        for read in (disassemble_file, resource_usage_file):
            try:
                read(path)
            except sassas.SassError:
                pass


def test_load_takes_the_cubin_with_kernels_for_the_arch(monkeypatch):
    """sassas.load's choice in a host program (on the CPU; the launch is tests/sassas/test_load.py's)."""
    from sassas.load import cubin_for_arch
    with open(os.path.join(DATA, "app"), "rb") as f:
        app = f.read()
    assert cubin_for_arch(app, "sm_80", "app") == file_cubins(os.path.join(DATA, "app"), "sm_80")[1].data
    with pytest.raises(CubinFormatError, match="^app: no cubin with kernels for sm_75; it holds app.1.sm_80.cubin"):
        cubin_for_arch(app, "sm_75", "app")
    monkeypatch.setitem(sys.modules, "zstandard", None)
    with open(os.path.join(DATA, "compressed.fatbin"), "rb") as f:
        packed = f.read()
    with pytest.raises(CubinFormatError, match=r"compressed.2.sm_90.cubin: compressed \(zstd\): `pip install zstandard`"):
        cubin_for_arch(packed, "sm_90", "compressed.fatbin")
