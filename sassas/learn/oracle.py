"""NVIDIA's tools as an oracle: find ptxas / nvdisasm / cuobjdump, compile PTX, disassemble words.

Used by the learner (``sassas.learn``) and the tests only, never when assembling.
Results are cached on disk under ``<repo>/.cache/oracle`` so that learning can resume and
tests stay fast.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

REPO_ROOT = Path(__file__).resolve().parents[2]
CACHE_DIR = Path(os.environ.get("SASSAS_CACHE", REPO_ROOT / ".cache")).resolve()

# Where the pip wheels put each tool, relative to the `nvidia` package directory.
_WHEEL_DIRS = {
    "ptxas": ["cuda_nvcc/bin"],
    "nvdisasm": ["cu13/bin", "cuda_nvdisasm/bin"],
    "cuobjdump": ["cu13/bin", "cuda_cuobjdump/bin"],
}
# Disassemblers that still know the archs newer tools call deprecated (sm_70): nvdisasm and
# cuobjdump 12.8 unpacked from the Triton wheel into one folder (cuobjdump -sass runs the
# nvdisasm beside it). The folder is $SASSAS_LEGACY_TOOLS, else <cache>/nvdisasm-12.8;
# `python -m sassas.learn.oracle --fetch-legacy` fills it (pip download + unzip of two files).
LEGACY_ENV = "SASSAS_LEGACY_TOOLS"
_LEGACY_ARCHS = {"sm_70", "sm_72"}
_LEGACY_TOOLS = ("nvdisasm", "cuobjdump")
# Triton wheels that bundle nvdisasm/cuobjdump 12.8 (tried in order).
_LEGACY_WHEELS = ("triton==3.4.0", "triton==3.5.0", "triton==3.3.1")
_LEGACY_MEMBER = "triton/backends/nvidia/bin/"


def legacy_dir() -> Path:
    """The folder holding nvdisasm/cuobjdump 12.8 for sm_70 (it may not exist)."""
    env = os.environ.get(LEGACY_ENV)
    # Absolute: the tools are also run from temporary working directories.
    return Path(env).resolve() if env else CACHE_DIR / "nvdisasm-12.8"


class OracleMissing(RuntimeError):
    """A tool the oracle needs is not installed."""


def _nvidia_package_dirs() -> list[Path]:
    spec = importlib.util.find_spec("nvidia")
    if spec is None or not spec.submodule_search_locations:
        return []
    return [Path(p) for p in spec.submodule_search_locations]


def find_tool(name: str, arch: Optional[str] = None) -> Path:
    """The path of `name` (ptxas, nvdisasm, cuobjdump) able to handle `arch`.

    Order: environment variable SASSAS_<NAME> (SASSAS_<NAME>_LEGACY for sm_70), the pip
    wheels' binaries (for sm_70: the legacy folder, see :func:`legacy_dir`), then PATH
    (never for sm_70: a PATH nvdisasm 13 refuses it). Raises OracleMissing.
    """
    legacy = arch in _LEGACY_ARCHS and name != "ptxas"
    env = os.environ.get(f"SASSAS_{name.upper()}{'_LEGACY' if legacy else ''}")
    if env:
        return Path(env).resolve()
    candidates: list[Path] = []
    if legacy:
        candidates.append(legacy_dir() / name)
    else:
        for base in _nvidia_package_dirs():
            candidates += [base / sub / name for sub in _WHEEL_DIRS.get(name, [])]
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    found = shutil.which(name)
    if found and not legacy:
        return Path(found)
    hint = (f"; run `python -m sassas.learn.oracle --fetch-legacy` (unpacks nvdisasm/cuobjdump 12.8 "
            f"from the Triton wheel into {legacy_dir()}) or set {LEGACY_ENV}" if legacy else "")
    raise OracleMissing(f"{name} not found for {arch or 'any arch'} "
                        f"(set SASSAS_{name.upper()}{'_LEGACY' if legacy else ''}{hint})")


def fetch_legacy_tools(dest: Optional[Path] = None, log=print) -> Path:
    """Download a Triton wheel with pip (no dependencies) and unpack only its nvdisasm and
    cuobjdump 12.8 into `dest` (default :func:`legacy_dir`). Idempotent; the wheel itself is
    deleted afterwards. Raises OracleMissing when no wheel can be had (e.g. no network)."""
    import sys
    import zipfile
    dest = Path(dest) if dest else legacy_dir()
    if all((dest / t).is_file() for t in _LEGACY_TOOLS):
        return dest
    errors = []
    with tempfile.TemporaryDirectory() as tmp:
        for spec in _LEGACY_WHEELS:
            proc = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                                   "--only-binary", ":all:", spec, "-d", tmp],
                                  capture_output=True, text=True)
            wheels = sorted(Path(tmp).glob("triton-*.whl"))
            if proc.returncode != 0 or not wheels:
                errors.append(f"{spec}: {(proc.stderr.strip().splitlines() or ['no wheel'])[-1]}")
                continue
            with zipfile.ZipFile(wheels[0]) as z:
                names = set(z.namelist())
                if not all(_LEGACY_MEMBER + t in names for t in _LEGACY_TOOLS):
                    errors.append(f"{spec}: the wheel has no {_LEGACY_MEMBER}nvdisasm")
                    wheels[0].unlink()
                    continue
                dest.mkdir(parents=True, exist_ok=True)
                for t in _LEGACY_TOOLS:
                    part = dest / f".{t}.part"
                    part.write_bytes(z.read(_LEGACY_MEMBER + t))
                    part.chmod(0o755)
                    part.replace(dest / t)
            log(f"legacy tools from {wheels[0].name} -> {dest}")
            return dest
    raise OracleMissing("could not fetch nvdisasm/cuobjdump 12.8 (Triton wheel): " + "; ".join(errors))


def have_tools(arch: str) -> bool:
    return missing_tools(arch) is None


def missing_tools(arch: str, tools: Iterable[str] = ("ptxas", "nvdisasm")) -> Optional[str]:
    """Why `tools` cannot handle `arch` (the first missing one's message: which tool, for
    which arch, and how to get it), or None when they all can. A test's skip reason."""
    for name in tools:
        try:
            find_tool(name, arch)
        except OracleMissing as e:
            return str(e)
    return None


def sm_number(arch: str) -> str:
    """'sm_90a' -> '90a'."""
    return arch.split("_", 1)[1]


def _write_whole(path: Path, data: bytes) -> None:
    """Write `path` whole or not at all: several processes (the tests' workers) share the
    cache, and one may read a file while another writes it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("wb", dir=path.parent, prefix=path.name, suffix=".tmp", delete=False) as f:
        f.write(data)
    os.replace(f.name, path)


# --------------------------------------------------------------------------- compiling

def compile_ptx(ptx: str, arch: str, options: Iterable[str] = ()) -> Optional[bytes]:
    """Compile PTX text to a cubin with ptxas; cached by content. None when ptxas refuses."""
    options = list(options)
    key = hashlib.sha1(f"{arch}\0{options}\0{ptx}".encode()).hexdigest()
    cached = CACHE_DIR / "oracle" / "cubin" / f"{key}.cubin"
    failed = cached.with_suffix(".failed")
    if cached.exists():
        return cached.read_bytes()
    if failed.exists():
        return None
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "k.ptx", Path(tmp) / "k.cubin"
        src.write_text(ptx)
        proc = subprocess.run([str(find_tool("ptxas", arch)), "-arch", arch, *options,
                               str(src), "-o", str(out)], capture_output=True, text=True)
        if proc.returncode != 0:
            _write_whole(failed, proc.stderr.encode())
            return None
        data = out.read_bytes()
    _write_whole(cached, data)
    return data


def sass_listing(cubin: bytes, arch: str) -> str:
    """`cuobjdump -sass` of a cubin (the tool able to read `arch`); cached by content."""
    key = hashlib.sha1(f"{arch}\0".encode() + cubin).hexdigest()
    cached = CACHE_DIR / "oracle" / "sass" / f"{key}.txt"
    if cached.exists():
        return cached.read_text()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.cubin"
        path.write_bytes(cubin)
        listing = subprocess.run([str(find_tool("cuobjdump", arch)), "-sass", str(path)],
                                 capture_output=True, text=True, check=True).stdout
    _write_whole(cached, listing.encode())
    return listing


def text_sections(cubin: bytes) -> list[tuple[str, bytes]]:
    """The code sections (.text.*) of a cubin, read with sassas's own ELF reader."""
    from ..elf import read_cubin
    return [(s.name, s.data) for s in read_cubin(cubin).sections if s.name.startswith(".text")]


def words_of(code: bytes) -> list[int]:
    return [int.from_bytes(code[i:i + 16], "little") for i in range(0, len(code) - 15, 16)]


# --------------------------------------------------------------------------- disassembling

@dataclass(frozen=True)
class Disassembled:
    """One instruction as nvdisasm printed it (raw mode: branch targets are absolute)."""
    address: int
    word: int
    text: str          # without the trailing ';', e.g. '@!P0 FFMA R7, -R7.reuse, 0.5, R4'


_LINE = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;?\s*/\*\s*0x([0-9a-f]{16})\s*\*/\s*$")
_HIGH = re.compile(r"^\s*/\*\s*0x([0-9a-f]{16})\s*\*/\s*$")
# Only `error` lines name the bad word's address. A `fatal` line (e.g. "More than one pattern
# matched during instruction decoding", sm_75) stops the scan and names address 0x0 wherever
# the word sits, so its address is not one to drop.
_BAD_ADDRESS = re.compile(r"^nvdisasm error\s*:.*at address 0x([0-9a-f]+)", re.M)
_FATAL = re.compile(r"^nvdisasm fatal\s*:", re.M)


def parse_listing(out: str) -> list[Disassembled]:
    """Parse `nvdisasm -hex` output (raw or ELF mode) into instructions."""
    result = []
    pending: Optional[tuple[int, str, int]] = None
    for line in out.splitlines():
        if pending is not None:
            m = _HIGH.match(line)
            if m:
                address, text, low = pending
                result.append(Disassembled(address, low | int(m.group(1), 16) << 64, text))
            pending = None
            continue
        m = _LINE.match(line)
        if m:
            text = m.group(2).rstrip().rstrip(";").rstrip()
            pending = (int(m.group(1), 16), text, int(m.group(3), 16))
    return result


def _nvdisasm_arch(arch: str) -> str:
    return "SM" + sm_number(arch)


def _run_raw(words: list[int], arch: str) -> tuple[list[Disassembled], set[int], bool]:
    """One nvdisasm call on a raw stream. Returns (instructions, indices of the words named
    illegal, whether nvdisasm stopped on a fatal error at a word it did not name)."""
    with tempfile.NamedTemporaryFile(suffix=".bin", delete=False) as f:
        f.write(b"".join(w.to_bytes(16, "little") for w in words))
        path = f.name
    try:
        proc = subprocess.run([str(find_tool("nvdisasm", arch)), "-b", _nvdisasm_arch(arch),
                               "-hex", path], capture_output=True, text=True)
    finally:
        os.unlink(path)
    bad = {int(a, 16) // 16 for a in _BAD_ADDRESS.findall(proc.stderr)}
    fatal = bool(_FATAL.search(proc.stderr))
    if proc.returncode != 0:
        return [], bad, fatal
    return parse_listing(proc.stdout), bad, fatal


class DisasmCache:
    """word -> (address, text), or None when illegal, per arch, kept in a JSON file.

    Raw mode prints branch targets as absolute addresses, so the address a word sat at when
    it was disassembled is stored with its text.
    """

    def __init__(self, arch: str):
        self.arch = arch
        self.path = CACHE_DIR / "oracle" / f"disasm-{arch}.json"
        self.entries: dict[int, Optional[tuple[int, str]]] = {}
        if self.path.exists():
            raw = json.loads(self.path.read_text())
            self.entries = {int(k, 16): (tuple(v) if v else None) for k, v in raw.items()}
        self.dirty = False

    def save(self) -> None:
        if not self.dirty:
            return
        _write_whole(self.path, json.dumps({f"{k:032x}": v for k, v in self.entries.items()}).encode())
        self.dirty = False


def disassemble(words: list[int], arch: str, cache: Optional[DisasmCache] = None,
                batch: int = 20000) -> dict[int, Optional[Disassembled]]:
    """Disassemble many words (raw mode), each as it sits in the batch; illegal -> None.

    nvdisasm prints nothing when one word is illegal. It names each illegal word's address on
    an `error` line of stderr (drop those and run again), except the word that ends the scan
    with a `fatal` line, whose address it gets wrong: halve the batch to find that one.
    """
    result: dict[int, Optional[Disassembled]] = {}
    todo = []
    for w in dict.fromkeys(words):
        if cache is not None and w in cache.entries:
            e = cache.entries[w]
            result[w] = Disassembled(e[0], w, e[1]) if e else None
        else:
            todo.append(w)
    for start in range(0, len(todo), batch):
        chunk = todo[start:start + batch]
        for w, d in _disassemble_chunk(chunk, arch).items():
            result[w] = d
            if cache is not None:
                cache.entries[w] = (d.address, d.text) if d else None
                cache.dirty = True
    if cache is not None:
        cache.save()
    return result


def _disassemble_chunk(words: list[int], arch: str) -> dict[int, Optional[Disassembled]]:
    result: dict[int, Optional[Disassembled]] = {}
    pending = list(words)
    while pending:
        listing, bad, fatal = _run_raw(pending, arch)
        if listing:
            by_index = {d.address // 16: d for d in listing}
            for i, w in enumerate(pending):
                d = by_index.get(i)
                # A word printed as hex only (no text), or not at its address, counts as illegal.
                result[w] = d if d is not None and d.word == w and d.text else None
            return result
        bad = {i for i in bad if i < len(pending)}
        result.update(dict.fromkeys(pending[i] for i in bad))
        pending = [w for i, w in enumerate(pending) if i not in bad]
        if pending and (fatal or not bad):
            # The word that stopped nvdisasm is unnamed: split and try the halves.
            if len(pending) <= 1:
                result.update(dict.fromkeys(pending))
                return result
            half = len(pending) // 2
            result.update(_disassemble_chunk(pending[:half], arch))
            result.update(_disassemble_chunk(pending[half:], arch))
            return result
    return result


def disassemble_code(code: bytes, arch: str) -> list[Disassembled]:
    """Disassemble one code section as it is (raw mode, addresses from 0)."""
    listing, _bad, _fatal = _run_raw(words_of(code), arch)
    return listing


def _run_tool(argv: list[str]) -> int:
    """`python -m sassas.learn.oracle nvdisasm FILE.cubin ...`: run the tool able to read FILE's
    arch (nvdisasm 12.8 for sm_70 cubins)."""
    arch = None
    for a in argv[1:]:
        if a.endswith(".cubin") and os.path.isfile(a):
            try:
                from ..elf import read_cubin
                arch = read_cubin(Path(a).read_bytes()).arch
            except Exception:
                pass
    return subprocess.run([str(find_tool(argv[0], arch)), *argv[1:]]).returncode


def main(argv=None) -> int:
    import argparse
    import sys
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in _WHEEL_DIRS:
        return _run_tool(argv)
    ap = argparse.ArgumentParser(prog="python -m sassas.learn.oracle",
                                 description="Locate (or fetch) the oracle tools; never needed to assemble. "
                                 "`python -m sassas.learn.oracle nvdisasm|cuobjdump|ptxas ARGS...` runs one.")
    ap.add_argument("--fetch-legacy", action="store_true",
                    help=f"unpack nvdisasm/cuobjdump 12.8 (sm_70) from the Triton wheel into {legacy_dir()}")
    ap.add_argument("--arch", action="append", default=[], help="print the tools found for this arch")
    args = ap.parse_args(argv)
    status = 0
    if args.fetch_legacy:
        try:
            fetch_legacy_tools()
        except OracleMissing as e:
            print(f"warning: {e}")
            status = 1
    for arch in args.arch:
        for name in ("ptxas", "nvdisasm", "cuobjdump"):
            try:
                print(f"{arch} {name}: {find_tool(name, arch)}")
            except OracleMissing as e:
                print(f"{arch} {name}: missing ({e})")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
