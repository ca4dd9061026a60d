"""PTX corpora for learning and testing the ISA description: ``kernels(arch)`` yields
(name, ptx) pairs; :func:`build` compiles them with ptxas and returns the code words."""
from __future__ import annotations

import re

from .ptx import descriptor_kernels, kernels  # noqa: F401


def build(arch: str, progress=None) -> list[int]:
    """Compile every corpus kernel for `arch`; the distinct instruction words, in order seen."""
    from .. import oracle
    words: dict[int, None] = {}
    for cubin in cubins(arch, progress):
        for _section, code in oracle.text_sections(cubin):
            words.update(dict.fromkeys(oracle.words_of(code)))
    return list(words)


def cubins(arch: str, progress=None) -> list[bytes]:
    """Every corpus kernel for `arch` compiled by ptxas (cached), the ones it refuses left out."""
    from .. import oracle
    out = []
    failed = []
    for name, ptx in kernels(arch):
        # (ptxas compiles for the PTX's own target: sm_90a for the sm_90a family)
        target = re.search(r"^\.target (\S+)", ptx, re.M)
        cubin = oracle.compile_ptx(ptx, target.group(1) if target else arch)
        if cubin is None:
            failed.append(name)
        else:
            out.append(cubin)
    if progress and failed:
        progress(f"corpus: ptxas refused {len(failed)} kernels: {', '.join(failed[:8])}")
    return out
