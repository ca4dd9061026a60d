"""Real compiled code nobody wrote for sassas, from permissively licensed wheels on PyPI.

Each corpus (CORPORA) names wheels and the libraries in them that hold CUDA fatbins. They are
downloaded at test time with pip (never committed; cached under .cache/realworld/<corpus>),
the fatbins found by their magic 0x50ed55ba (whatever section holds them), and
`cuobjdump -xelf all` extracts one linked cubin per arch. Archs a corpus ships no cubin for
but whose fatbins carry PTX (`ptx_archs`) are built from that PTX with ptxas (test extra).

  - bitsandbytes 0.50.2 (MIT): libbitsandbytes_cuda128.so, CUDA 12.8, sm_70..sm_90, sm_100
    and sm_120 (Blackwell: held out, the tables were learned from the PTX corpus alone).
  - torchvision 0.22.1 (BSD-3) + torchaudio 2.7.1 (BSD-2): their own kernels (NMS, ROI
    align/pool, deformable convolution in float/double/half, anti-aliased interpolation; RNN-T
    loss, forced alignment, the CUDA CTC prefix decoder with CUB), CUDA 12.6, cubins for
    sm_70, sm_75, sm_80, sm_86, sm_90; sm_89 is ptxas 12.9's build of the wheels' compute_50 PTX.
    Only the projects' own libraries: never the NVIDIA libraries bundled beside them
    (torchvision.libs/libnvjpeg*, libcudart*).

Per corpus and arch, on a deterministic sample of kernels (at most `max_instructions`), the
test measures

1. `sassas disasm` -> `sassas asm`: the kernel's code byte-identical (the `.raw` escape
   guarantees it where the text is lossy), the module's data equal (global variables, module
   constant banks, their symbols and relocations: every torchvision/torchaudio cubin has
   `.rel(a).nv.constant4`), and how many instructions needed `.raw` bits (kernels whose code
   has relocations, `.rel.text.<k>`, are left out: sassas source cannot say them);
2. listing input: `nvdisasm -hex` text of each instruction re-encoded from its text alone
   (control bits from the hex), bit-exact share;
3. decode + format equal to nvdisasm's text (raw mode, whitespace aside), share.

Shares 2 and 3 must stay at or above the corpus's floors (what was achieved when the floor was
set; raise them as the ISA tables improve). Skips, with the reason, without network or tools.
Only permissively licensed code: never point this at NVIDIA's SDK libraries (cuBLAS, cuDNN,
cuFFT, cuRAND, NCCL, nvJPEG...: their licence forbids disassembly).

`benchmarks/isa_gaps.py --corpus NAME` buckets what is missed, by opcode and differing bits.
"""
from __future__ import annotations

import fcntl
import fnmatch
import functools
import hashlib
import io
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional

import pytest

import sassas
from sassas.disasm import UnsupportedCubin, disassemble
from sassas.elf import read_cubin, read_module
from sassas.errors import SassError
from sassas.learn import oracle
from sassas.learn.compare import format_comparisons, normal_text

ARCHS = ["sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120"]
pytestmark = pytest.mark.corpus
MAX_INSTRUCTIONS = 20000
FATBIN_MAGIC = struct.pack("<I", 0xBA55ED50)
# pip fetches the same x86-64 CPython 3.11 wheels whatever the interpreter or host: only the
# fatbins inside are read.
PIP_TARGET = ["--only-binary", ":all:", "--python-version", "3.11", "--implementation", "cp",
              "--abi", "cp311", "--platform", "manylinux_2_28_x86_64", "--platform",
              "manylinux_2_24_x86_64", "--platform", "manylinux_2_17_x86_64",
              "--platform", "manylinux2014_x86_64"]


@dataclass(frozen=True)
class Corpus:
    name: str
    licence: str
    # (pip requirement, patterns of the wheel's members that hold fatbins)
    wheels: tuple[tuple[str, tuple[str, ...]], ...]
    # Percent of instructions, per arch: (listing re-encoded bit-exactly, decode+format ==
    # nvdisasm). What the tables achieve today; they may only go up.
    floors: dict[str, tuple[float, float]] = field(hash=False, compare=False, default_factory=dict)
    # Archs with no cubin in the wheels: built with ptxas from the fatbins' PTX.
    ptx_archs: tuple[str, ...] = ()
    max_instructions: int = MAX_INSTRUCTIONS

    @property
    def cache(self) -> Path:
        key = hashlib.sha1(repr((self.wheels, self.ptx_archs)).encode()).hexdigest()[:10]
        return oracle.CACHE_DIR / "realworld" / f"{self.name}-{key}"

    @property
    def label(self) -> str:
        return " + ".join(spec for spec, _ in self.wheels)


CORPORA = {c.name: c for c in [
    Corpus("bitsandbytes", "MIT",
           (("bitsandbytes==0.50.2", ("bitsandbytes/libbitsandbytes_cuda128.so",)),),
           # sm_70 format: `@!PT LDC RZ, c[0x0][RZ]` prints `c[0x0][0x0]` (docs/REALWORLD_GAPS.md);
           # the sample holds it since it takes kernels with addresses in their code too.
           floors={**{arch: (100.0, 100.0) for arch in ARCHS}, "sm_70": (100.0, 99.97)}),
    Corpus("torchvision-audio", "BSD-3-Clause (torchvision), BSD-2-Clause (torchaudio)",
           (("torchvision==0.22.1", ("torchvision/_C.so",)),
            ("torchaudio==2.7.1", ("torchaudio/lib/libtorchaudio.so",
                                   "torchaudio/lib/libctc_prefix_decoder.so"))),
           ptx_archs=("sm_89",),
           # (sm_70, sm_90 listing: one FSEL `-QNAN`, lossy text; .raw keeps it in disasm)
           floors={
               "sm_70": (99.99, 100.0),
               "sm_75": (100.0, 100.0),
               "sm_80": (100.0, 100.0),
               "sm_86": (100.0, 100.0),
               "sm_89": (100.0, 100.0),
               "sm_90": (99.99, 100.0),
           }),
    # Two more projects' code, first seen after the tables were learned (held out): faiss's
    # sm_70/sm_80 kernels (nvcc 12), and xformers' sm_70..sm_80 kernels and its sm_90a
    # FlashAttention-3 build (warpgroup MMA, TMA, mbarriers, register reallocation).
    Corpus("faiss", "MIT",
           (("faiss-gpu-cu12==1.14.1.post1", ("faiss_gpu_cu12.libs/libfaiss-*.so",)),),
           # (sm_80 listing: FSEL `+QNAN` with the payload 0x7fc00000, lossy text)
           floors={"sm_70": (100.0, 100.0), "sm_80": (99.96, 100.0)}),
    Corpus("xformers", "BSD-3-Clause",
           (("xformers==0.0.30", ("xformers/_C.so", "xformers/_C_flashattention3.so")),),
           floors={"sm_70": (100.0, 100.0), "sm_75": (100.0, 100.0), "sm_80": (100.0, 100.0),
                   "sm_90": (100.0, 100.0)}),
]}


class CorpusMissing(RuntimeError):
    """The corpus cannot be had here (no network, no tools): the reason, for a skip."""


def _cuobjdump() -> str:
    """cuobjdump able to extract every arch: 12.8 (knows sm_70) where fetched, else 13.x."""
    for arch in ("sm_70", None):
        try:
            return str(oracle.find_tool("cuobjdump", arch))
        except oracle.OracleMissing:
            continue
    raise CorpusMissing("cuobjdump (test extra) is not installed")


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


def _newest_ptx(folder: Path) -> Optional[Path]:
    """The PTX of the highest compute capability that cuobjdump -xptx wrote (x.1.sm_50.ptx)."""
    def version(p: Path) -> int:
        m = re.search(r"sm_(\d+)", p.name)
        return int(m.group(1)) if m else 0
    return max(folder.glob("*.ptx"), key=version, default=None)


def download(corpus: Corpus, log=None) -> Path:
    """The cached per-arch cubins (linked ones: ET_EXEC) of the corpus's libraries, named
    `<wheel>.<library>.<fatbin>.<arch>.cubin`. Raises CorpusMissing. One process at a time
    fills the cache (the tests' workers share it): the others wait for it, then read it."""
    cache = corpus.cache
    if (cache / "complete").exists():
        return cache
    cache.parent.mkdir(parents=True, exist_ok=True)
    with open(cache.with_name(cache.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (cache / "complete").exists():
            _fill(corpus, cache)
    return cache


def _fill(corpus: Corpus, cache: Path) -> None:
    cuobjdump = _cuobjdump()
    ptxas = {}
    for arch in corpus.ptx_archs:
        try:
            ptxas[arch] = str(oracle.find_tool("ptxas", arch))
        except oracle.OracleMissing as e:
            raise CorpusMissing(f"ptxas for {arch} (test extra) is not installed: {e}") from None
    with tempfile.TemporaryDirectory() as tmp:
        specs = [spec for spec, _ in corpus.wheels]
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", *PIP_TARGET,
                               *specs, "-d", tmp], capture_output=True, text=True)
        if proc.returncode != 0:
            raise CorpusMissing(f"could not download {' '.join(specs)} (no network?): "
                                f"{(proc.stderr.strip().splitlines() or ['pip failed'])[-1]}")
        staging = cache.with_name(cache.name + ".part")
        staging.mkdir(parents=True, exist_ok=True)
        for w, (spec, patterns) in enumerate(corpus.wheels):
            name = re.split(r"[=<>!~ ]", spec, 1)[0].replace("-", "_").lower()
            wheel = next((p for p in Path(tmp).glob("*.whl") if p.name.lower().startswith(name + "-")), None)
            if wheel is None:
                raise CorpusMissing(f"pip gave no wheel for {spec}")
            with zipfile.ZipFile(wheel) as z:
                members = [m for m in z.namelist() if any(fnmatch.fnmatch(m, p) for p in patterns)]
                if len(members) < len(patterns):
                    raise CorpusMissing(f"{wheel.name} lacks one of {patterns}")
                libs = [z.read(m) for m in sorted(members)]
            for l, lib in enumerate(libs):
                for f, fatbin in enumerate(_fatbins(lib)):
                    work = Path(tmp) / f"{w}.{l}.{f}"
                    work.mkdir()
                    (work / "x.fatbin").write_bytes(fatbin)
                    subprocess.run([cuobjdump, "-xelf", "all", "-xptx", "all", "x.fatbin"], cwd=work,
                                   capture_output=True)
                    for cubin in work.glob("*.cubin"):
                        data = cubin.read_bytes()
                        m = re.search(r"\.(sm_\d+a?)\.cubin$", cubin.name)
                        if m and struct.unpack_from("<H", data, 16)[0] == 2:      # ET_EXEC: linked
                            (staging / f"{w}.{l}.{f}.{m.group(1)}.cubin").write_bytes(data)
                    ptx = _newest_ptx(work)
                    for arch, tool in ptxas.items():
                        if ptx is None:
                            continue
                        out = staging / f"{w}.{l}.{f}.{arch}.cubin"
                        built = subprocess.run([tool, "-arch", arch, str(ptx), "-o", str(out)],
                                               capture_output=True, text=True)
                        if built.returncode != 0:
                            raise CorpusMissing(f"ptxas -arch {arch} refused the PTX of {spec}: "
                                                f"{built.stderr.strip()[:200]}")
        (staging / "complete").write_text("\n".join(specs) + "\n")
        if cache.exists():
            shutil.rmtree(cache)
        staging.replace(cache)


@functools.lru_cache(maxsize=None)
def _cubins_or_reason(name: str):
    try:
        cache = download(CORPORA[name])
    except CorpusMissing as e:
        return str(e)
    by_arch: dict[str, list[bytes]] = {}
    for path in sorted(cache.glob("*.cubin")):
        # (an arch-specific build, sm_90a, is sm_90's instruction set)
        by_arch.setdefault(path.name.split(".")[-2].rstrip("a"), []).append(path.read_bytes())
    return by_arch


def cubins(name: str) -> dict[str, list[bytes]]:
    """arch -> the corpus's cubins for it. Raises CorpusMissing (once a session: remembered)."""
    got = _cubins_or_reason(name)
    if isinstance(got, str):
        raise CorpusMissing(got)
    return got


def sample(cubins: list[bytes], arch: str, limit: Optional[int] = MAX_INSTRUCTIONS):
    """(cubin, info, kernel) choices with at most `limit` instructions in all (None: every
    kernel), the same on every run."""
    rng = random.Random(arch)
    pool = []
    for data in cubins:
        info = read_cubin(data)
        # Kernels and device functions (ptxas's `__cuda_sm70_shflsync_idx_p`), with the
        # addresses the driver fills into their code (`32@lo(x)`, CALL.ABS targets) or not.
        pool += [(data, info, k) for k in info.kernels + info.functions]
    rng.shuffle(pool)
    chosen, total = [], 0
    for data, info, k in pool:
        n = len(k.code) // 16
        if limit is None or total + n <= limit:
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


def code_relocations(info, function: str) -> set[tuple]:
    """The relocations of a function's code: (offset, symbol, type, addend)."""
    return {(r.offset, r.symbol, r.type, r.addend) for r in info.relocations if r.section == f".text.{function}"}


def words(chosen) -> list[int]:
    """The chosen kernels' words, one stream (for nvdisasm's raw mode)."""
    return [w for _data, _info, k in chosen for w in oracle.words_of(k.code)]


def by_cubin(chosen) -> list[tuple[bytes, object, list]]:
    """The chosen kernels, cubin by cubin: (cubin, its info, its chosen kernels)."""
    out: dict[int, tuple[bytes, object, list]] = {}
    for data, info, k in chosen:
        out.setdefault(id(data), (data, info, []))[2].append(k)
    return list(out.values())


def round_trips(data: bytes, info, chosen: list, arch: str, failures: list[str], refused: list[str]):
    """`sassas disasm` -> `sassas asm` of a cubin's chosen kernels: (kernels, the text, the
    rebuilt cubin's info), all of them in one text (reading a large cubin takes a fifth of a
    second), else, to name the kernel that fails, each alone with what it calls; a kernel
    disasm refuses goes to `refused`, one asm refuses to `failures`."""
    def one(kernels):
        text = disassemble(data, kernel=[k.name for k in kernels])
        # (for the cubin's own target: xformers' sm_90 code is sm_90a, `.arch sm_90a` in the text)
        return text, read_cubin(sassas.assemble(text, info.target, filename=f"{arch}.sass").data)
    try:
        yield (chosen, *one(chosen))
        return
    except SassError:
        pass
    for k in chosen:
        try:
            yield ([k], *one([k]))
        except UnsupportedCubin as e:
            refused.append(f"{k.name[:60]}: {e.message[:160]}")
        except SassError as e:
            failures.append(f"{k.name[:60]}: {e.message[:160]}")


@pytest.mark.oracle
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", list(CORPORA))
def test_realworld_corpus(name, arch, report):
    corpus = CORPORA[name]
    try:
        by_arch = cubins(name)
    except CorpusMissing as e:
        pytest.skip(f"{name}: {e}")
    if arch not in by_arch:
        pytest.skip(f"{corpus.label} holds no {arch} code (its cubins: {', '.join(sorted(by_arch))}; "
                    f"an empty list means cuobjdump could not extract them)")
    try:
        nvdisasm = str(oracle.find_tool("nvdisasm", arch))
    except oracle.OracleMissing as e:
        pytest.skip(f"nvdisasm for {arch} not installed: {e}")
    chosen = sample(by_arch[arch], arch, corpus.max_instructions)

    # 1. disasm -> asm: the code, and the module data beside it.
    kernels = instructions = raw = with_relocations = with_code_relocations = 0
    round_trip_failures: list[str] = []
    refused: list[str] = []
    for data, info, chosen_here in by_cubin(chosen):
        for group, text, rebuilt_info in round_trips(data, info, chosen_here, arch, round_trip_failures, refused):
            if read_module(rebuilt_info) != read_module(info):
                round_trip_failures += [f"{k.name[:60]}: module data differs" for k in group]
                continue
            raw += text.count("\n.raw ")
            for k in group:
                if code_relocations(rebuilt_info, k.name) != code_relocations(info, k.name):
                    round_trip_failures.append(f"{k.name[:60]}: relocations of the code differ")
                    continue
                rebuilt = rebuilt_info.kernel(k.name).code
                if rebuilt != k.code:
                    at = next(i for i in range(len(k.code)) if rebuilt[i:i + 1] != k.code[i:i + 1]) // 16 * 16
                    own = re.split(rf"\n\.(?:kernel|func) {re.escape(k.name)}\n", text, maxsplit=1)[-1]
                    line = next((l for l in own.splitlines() if f"/*{at:04x}*/" in l), "?")
                    round_trip_failures.append(f"{k.name[:60]}: code differs at 0x{at:x}: {line.strip()[:120]}")
                    continue
                # (relocations of the module data, or of this kernel's code)
                with_relocations += any(not r.section.startswith(".text.") or r.section == f".text.{k.name}"
                                        for r in rebuilt_info.relocations)
                with_code_relocations += bool(code_relocations(info, k.name))
                kernels += 1
                instructions += len(k.code) // 16

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
    decoded = good_format = 0
    format_failures: list[str] = []
    for d, mine in format_comparisons(words(chosen), arch):
        decoded += 1
        if normal_text(mine) == normal_text(d.text):
            good_format += 1
        elif len(format_failures) < 10:
            format_failures.append(f"{d.text}  <- ours: {mine}")

    p_listing = 100.0 * good_listing / max(listed, 1)
    p_format = 100.0 * good_format / max(decoded, 1)
    report(f"[{arch} {corpus.label}] {len(chosen)} kernels sampled; disasm->asm identical: {kernels} kernels, "
           f"{instructions} instructions, {raw} ({100.0 * raw / max(instructions, 1):.1f}%) needed .raw; "
           f"{with_relocations} of them with relocated module data, {with_code_relocations} with addresses "
           f"in the code (equal after the round trip); "
           f"{len(refused)} refused by disasm, {len(round_trip_failures)} NOT identical\n"
           f"    listing re-encoded bit-exactly: {good_listing}/{listed} ({p_listing:.2f}%); "
           f"decode+format == nvdisasm: {good_format}/{decoded} ({p_format:.2f}%)"
           + "".join(f"\n    round trip: {f}" for f in round_trip_failures[:6])
           + "".join(f"\n    refused: {f}" for f in refused[:4])
           + "".join(f"\n    listing: {f[:160]}" for f in failures[:4])
           + "".join(f"\n    format:  {f[:160]}" for f in format_failures[:4]))
    assert kernels > 0 and listed > 0 and decoded > 0
    assert not round_trip_failures, round_trip_failures[:10]
    assert not refused, refused[:10]
    floor_listing, floor_format = corpus.floors[arch]
    assert p_listing >= floor_listing, failures[:10]
    assert p_format >= floor_format, format_failures[:10]
