"""Assembling the generated kernels (F(2x2,3x3) and the F(4x4,3x3) GEMMs) with sassas, through
an on-disk cache, with the hazard check and the encoder check against nvdisasm."""
from __future__ import annotations

import hashlib
import os

from .plan import Options, Shape
from .sassgen import generate, kernel_name
from .target import DEFAULT_ARCH


CACHE_DIR = os.environ.get("KERNELS_SASS_CACHE",
                           os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                        ".cache", "winograd"))


_ASSEMBLER_KEY = None


def _assembler_key() -> bytes:
    """A digest of the assembler itself: a changed encoder or cubin writer rebuilds the cache."""
    global _ASSEMBLER_KEY
    if _ASSEMBLER_KEY is None:
        import glob
        import sassas
        root = os.path.dirname(os.path.abspath(sassas.__file__))
        h = hashlib.sha1()
        for fn in sorted(glob.glob(os.path.join(root, "**", "*.*"), recursive=True)):
            if fn.endswith((".py", ".toml", ".lark")):
                with open(fn, "rb") as f:
                    h.update(f.read())
        _ASSEMBLER_KEY = h.digest()
    return _ASSEMBLER_KEY


def _source_hash(text: str) -> str:
    """The cache key: the SASS text alone. A cubin in the cache was checked when it was built
    (hazards; the tests compare generated kernels with nvdisasm), and a machine that runs it need
    not re-assemble it with whatever the assembler is there. After changing the assembler, remove
    the cache (KERNELS_SASS_CACHE, default .cache/winograd) or set KERNELS_SASS_REBUILD=1."""
    h = hashlib.sha1(text.encode())
    if os.environ.get("KERNELS_SASS_REBUILD"):
        h.update(_assembler_key())
    return h.hexdigest()[:16]


def build(shape: Shape, opts: Options = Options(), *, arch: str = DEFAULT_ARCH, check_hazards: bool = True,
          cache: bool = True) -> bytes:
    """Assemble the kernel for `shape` on `arch` (cubin bytes), through the on-disk cache."""
    return build_text(generate(shape, opts, arch), kernel_name(shape, opts), arch=arch, check_hazards=check_hazards,
                      cache=cache)


def build_text(text: str, name: str, *, arch: str = DEFAULT_ARCH, filename: str = "winograd_sassgen.sass",
               check_hazards: bool = True, cache: bool = True) -> bytes:
    """Assemble generated SASS for `arch` (cubin bytes), through the on-disk cache (CACHE_DIR,
    keyed by the kernel name, the text and the arch): the F(2x2,3x3) kernels and the F(4x4,3x3)
    GEMMs."""
    key = _source_hash(text) if arch == DEFAULT_ARCH else _source_hash(text + arch)
    path = os.path.join(CACHE_DIR, f"{name}-{key}.cubin")
    if cache and os.path.exists(path):
        with open(path, "rb") as f:
            return f.read()
    data = assemble(text, arch=arch, check_hazards=check_hazards, filename=filename)
    if cache:
        os.makedirs(CACHE_DIR, exist_ok=True)
        tmp = path + f".{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    return data


class HazardError(RuntimeError):
    pass


def assemble(text: str, *, arch: str = DEFAULT_ARCH, check_hazards: bool = True,
             filename: str = "winograd_sassgen.sass") -> bytes:
    import sassas
    cubin = sassas.assemble(text, arch, filename=filename)
    if check_hazards:
        errors = hazards(cubin.program)
        if errors:
            raise HazardError(f"{len(errors)} hazards, first: " + "; ".join(str(h.message) + f" @{h.address:#x}"
                                                                             for h in errors[:5]))
    return cubin.data


def hazards(program) -> list:
    from sassas import hazards as hz
    return [h for h in hz.check(program) if h.severity == "error"]


def disasm_mismatches(text: str, cubin: bytes, arch: str = DEFAULT_ARCH) -> list[str]:
    """Instructions where NVIDIA's disassembler reads the cubin differently from the source
    (operand reuse flags and branch targets aside): the encoder check of the tests.
    Needs nvdisasm (sassas.learn.oracle)."""
    import re
    from sassas.learn import oracle
    from sassas.parse import parse_instruction
    (_, code), = oracle.text_sections(cubin)[:1]
    dis = oracle.disassemble_code(code, arch)
    src = [m.group(1) for m in (re.match(r"^[-0-9]{2,6}:[-0-9]:[-0-9]:[-Yy]:[0-9a-fA-F]\s+(.*?);", l)
                                for l in text.splitlines()) if m]
    if len(src) != len(dis):
        return [f"{len(src)} source instructions, {len(dis)} disassembled"]

    def canon(t: str):
        i = parse_instruction(t.strip().rstrip(";") + " ;")
        ops = tuple((o.kind, o.values, tuple(sorted(f for f in o.flags if f != "reuse"))) for o in i.operands)
        pred = None if i.predicate is None else (i.predicate.values, tuple(sorted(i.predicate.flags)))
        return i.opcode, tuple(i.modifiers), ops, pred

    out = []
    for n, (s, d) in enumerate(zip(src, dis)):
        if re.search(r"\bBRA\b", s):
            if not re.search(r"\bBRA\b", d.text):
                out.append(f"{n}: {s} | {d.text}")
            continue
        if canon(s) != canon(d.text):
            out.append(f"{n}: {s} | {d.text}")
    return out
