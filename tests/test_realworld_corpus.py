"""Real compiled code nobody wrote for sassas: bitsandbytes' CUDA kernels (MIT licence).

Downloaded at test time with pip (never committed; cached under .cache/realworld): the wheel's
libbitsandbytes_cuda128.so holds fatbins (found by their magic 0x50ed55ba), from which
`cuobjdump -xelf all` extracts one linked cubin per arch (sm_70..sm_90 are tested). Per arch,
on a deterministic sample of kernels (at most MAX_INSTRUCTIONS instructions), it measures

1. `sassas disasm` -> `sassas asm`: the kernel's code byte-identical (the `.raw` escape
   guarantees it where the text is lossy) and how many instructions needed `.raw` bits
   (kernels with relocations are left out);
2. listing input: `nvdisasm -hex` text of each instruction re-encoded from its text alone
   (control bits from the hex), bit-exact share;
3. decode + format equal to nvdisasm's text (raw mode, whitespace aside), share.

Shares 2 and 3 must stay at or above the FLOORS (what was achieved when the test was written;
raise them as the ISA tables improve). Skips, with the reason, without network or tools.
Only permissively licensed code: never point this at NVIDIA's SDK libraries (their licence
forbids disassembly).
"""
from __future__ import annotations

import io
import os
import random
import re
import struct
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Iterator

import pytest

import sassas
from sassas.disasm import UnsupportedCubin, disassemble
from sassas.elf import read_cubin
from sassas.errors import SassError
from sassas.isa import oracle
from sassas.isa.compare import format_comparisons, normal_text

WHEEL = "bitsandbytes==0.50.2"
LIBRARY = "bitsandbytes/libbitsandbytes_cuda128.so"
ARCHS = ["sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90"]
MAX_INSTRUCTIONS = 20000
FATBIN_MAGIC = struct.pack("<I", 0xBA55ED50)
CACHE = oracle.CACHE_DIR / "realworld" / WHEEL.replace("==", "-")
# Percent of instructions: (listing re-encoded bit-exactly, decode+format == nvdisasm).
# What the tables achieve today; they may only go up.
FLOORS = {
    "sm_70": (100.0, 100.0),
    "sm_75": (100.0, 100.0),
    "sm_80": (100.0, 100.0),
    "sm_86": (100.0, 100.0),
    "sm_89": (100.0, 100.0),
    "sm_90": (100.0, 100.0),
}

pytestmark = pytest.mark.oracle


def _cuobjdump() -> str:
    """cuobjdump able to extract every arch: 12.8 (knows sm_70) where fetched, else 13.x."""
    for arch in ("sm_70", None):
        try:
            return str(oracle.find_tool("cuobjdump", arch))
        except oracle.OracleMissing:
            continue
    pytest.skip("cuobjdump (test extra) is not installed")


def _fatbins(lib: bytes) -> list[bytes]:
    """Every fatbin container in a host binary: magic, version (2 bytes), header size (2),
    size of the entries that follow (8)."""
    out, pos = [], 0
    while (pos := lib.find(FATBIN_MAGIC, pos)) >= 0:
        _magic, _version, header, size = struct.unpack_from("<IHHQ", lib, pos)
        if header == 16 and 0 < size <= len(lib) - pos - header:
            out.append(lib[pos:pos + header + size])
            pos += header + size
        else:
            pos += 4
    return out


def _download() -> Path:
    """The cached per-arch cubins (linked ones: ET_EXEC) of the wheel's CUDA library."""
    done = CACHE / "complete"
    if done.exists():
        return CACHE
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                               "--only-binary", ":all:", WHEEL, "-d", tmp],
                              capture_output=True, text=True)
        wheels = list(Path(tmp).glob("*.whl"))
        if proc.returncode != 0 or not wheels:
            pytest.skip(f"could not download {WHEEL} (no network?): "
                        f"{(proc.stderr.strip().splitlines() or ['no wheel'])[-1]}")
        with zipfile.ZipFile(wheels[0]) as z:
            lib = z.read(LIBRARY)
        cuobjdump = _cuobjdump()
        CACHE.mkdir(parents=True, exist_ok=True)
        for i, fatbin in enumerate(_fatbins(lib)):
            work = Path(tmp) / f"f{i}"
            work.mkdir()
            (work / "x.fatbin").write_bytes(fatbin)
            subprocess.run([cuobjdump, "-xelf", "all", "x.fatbin"], cwd=work, capture_output=True)
            for cubin in work.glob("*.cubin"):
                data = cubin.read_bytes()
                m = re.search(r"\.(sm_\d+a?)\.cubin$", cubin.name)
                if m and struct.unpack_from("<H", data, 16)[0] == 2:      # ET_EXEC: linked
                    (CACHE / f"{i}.{m.group(1)}.cubin").write_bytes(data)
    done.write_text(WHEEL + "\n")
    return CACHE


@pytest.fixture(scope="module")
def corpus() -> dict[str, list[bytes]]:
    cache = _download()
    by_arch: dict[str, list[bytes]] = {}
    for path in sorted(cache.glob("*.cubin")):
        by_arch.setdefault(path.name.split(".")[1], []).append(path.read_bytes())
    return by_arch


def _sample(cubins: list[bytes], arch: str):
    """(cubin, info, kernel names) choices with at most MAX_INSTRUCTIONS instructions in all."""
    rng = random.Random(arch)
    pool = []
    for data in cubins:
        info = read_cubin(data)
        relocated = {s.name.split(".text.", 1)[1] for s in info.sections
                     if s.name.startswith((".rel.text.", ".rela.text.")) and s.size}
        # Kernels with relocations (global variables, `32@lo(sym)` in listings) are not
        # carried through sassas source yet: left out of the sample.
        pool += [(data, info, k) for k in info.kernels if k.name not in relocated]
    rng.shuffle(pool)
    chosen, total = [], 0
    for data, info, k in pool:
        n = len(k.code) // 16
        if total + n <= MAX_INSTRUCTIONS:
            chosen.append((data, info, k))
            total += n
    return chosen


def listings(chosen, nvdisasm: str) -> Iterator[tuple[str, bytes]]:
    """(nvdisasm -hex listing of the chosen kernels of one cubin, that cubin), cubin by cubin."""
    by_cubin: dict[int, tuple[bytes, set]] = {}
    for data, _info, k in chosen:
        by_cubin.setdefault(id(data), (data, set()))[1].add(k.name)
    with tempfile.TemporaryDirectory() as tmp:
        for n, (data, names) in enumerate(by_cubin.values()):
            path = os.path.join(tmp, f"{n}.cubin")
            with open(path, "wb") as f:
                f.write(data)
            index = ",".join(map(str, _symbol_indices(data, names)))
            yield subprocess.run([nvdisasm, "-hex", "-fun", index, path],
                                 capture_output=True, text=True, check=True).stdout, data


def _symbol_indices(data: bytes, names: set[str]) -> list[int]:
    from elftools.elf.elffile import ELFFile
    symtab = ELFFile(io.BytesIO(data)).get_section_by_name(".symtab")
    return [i for i, s in enumerate(symtab.iter_symbols()) if s.name in names and s["st_info"]["type"] == "STT_FUNC"]


@pytest.mark.parametrize("arch", ARCHS)
def test_realworld_corpus(arch, corpus, capsys):
    if arch not in corpus:
        pytest.skip(f"no {arch} cubin extracted from {WHEEL} (cuobjdump for {arch} missing?)")
    try:
        nvdisasm = str(oracle.find_tool("nvdisasm", arch))
    except oracle.OracleMissing as e:
        pytest.skip(f"nvdisasm for {arch} not installed: {e}")
    chosen = _sample(corpus[arch], arch)

    # 1. disasm -> asm, kernel by kernel.
    kernels = instructions = raw = refused = 0
    round_trip_failures: list[str] = []
    for data, info, k in chosen:
        try:
            text = disassemble(data, kernel=k.name)
        except UnsupportedCubin:
            refused += 1            # relocations (global variables): not carried yet
            continue
        try:
            rebuilt = read_cubin(sassas.assemble(text, arch, filename=f"{arch}.sass").data).kernel(k.name).code
        except SassError as e:
            round_trip_failures.append(f"{k.name[:60]}: {e.message[:160]}")
            continue
        if rebuilt != k.code:
            at = next(i for i in range(len(k.code)) if rebuilt[i:i + 1] != k.code[i:i + 1]) // 16 * 16
            line = next((l for l in text.splitlines() if f"/*{at:04x}*/" in l), "?")
            round_trip_failures.append(f"{k.name[:60]}: code differs at 0x{at:x}: {line.strip()[:120]}")
            continue
        kernels += 1
        instructions += len(k.code) // 16
        raw += text.count("\n.raw ")

    # 2. nvdisasm's listing of the chosen kernels, re-encoded from text.
    from test_listing_input import _exact_share
    listed = good_listing = 0
    failures: list[str] = []
    for listing, data in listings(chosen, nvdisasm):
        good, total, fails = _exact_share(listing, arch, data)
        good_listing += good
        listed += total
        failures += fails

    # 3. decode + format against nvdisasm's raw-mode text, one stream for all chosen kernels.
    words = [w for _data, _info, k in chosen for w in oracle.words_of(k.code)]
    decoded = good_format = 0
    format_failures: list[str] = []
    for d, mine in format_comparisons(words, arch):
        decoded += 1
        if normal_text(mine) == normal_text(d.text):
            good_format += 1
        elif len(format_failures) < 5:
            format_failures.append(f"{d.text}  <- ours: {mine}")

    p_listing = 100.0 * good_listing / max(listed, 1)
    p_format = 100.0 * good_format / max(decoded, 1)
    with capsys.disabled():
        print(f"\n[{arch} {WHEEL}] {len(chosen)} kernels sampled; disasm->asm identical: {kernels} kernels, "
              f"{instructions} instructions, {raw} ({100.0 * raw / max(instructions, 1):.1f}%) needed .raw; "
              f"{refused} refused (relocations), {len(round_trip_failures)} NOT identical\n"
              f"    listing re-encoded bit-exactly: {good_listing}/{listed} ({p_listing:.2f}%); "
              f"decode+format == nvdisasm: {good_format}/{decoded} ({p_format:.2f}%)"
              + "".join(f"\n    round trip: {f}" for f in round_trip_failures[:6])
              + "".join(f"\n    listing: {f[:160]}" for f in failures[:4])
              + "".join(f"\n    format:  {f[:160]}" for f in format_failures[:4]))
    assert kernels > 0 and listed > 0 and decoded > 0
    assert not round_trip_failures, round_trip_failures[:10]
    floor_listing, floor_format = FLOORS[arch]
    assert p_listing >= floor_listing, failures[:10]
    assert p_format >= floor_format, format_failures[:10]
