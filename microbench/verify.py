"""Checking an assembled kernel against its source with NVIDIA's disassembler (the oracle):
every instruction must decode to the text and the control code that were written.

Used by the CPU tests and by `python -m microbench build --verify`; needs nvdisasm and
pyelftools (sassas.learn.oracle finds them), never needed to run benchmarks.
"""
from __future__ import annotations

import re
from typing import Optional

from .sassgen import expand_params

_LINE = re.compile(r"^\s*(?P<ctl>[0-9a-fA-F-]{1,6}:[0-7-]:[0-7-]:[yY-]:[0-9a-fA-F]{1,2})\s+"
                   r"(?P<inst>[^;#]*?)\s*;")
_LABEL = re.compile(r"^\s*([A-Za-z_.$][\w.$]*):\s*(#.*)?$")
_KERNEL = re.compile(r"^\s*\.kernel\s+(\w+)")


def intended(text: str, param_base: int = 0x210) -> dict[str, list[tuple[str, str]]]:
    """Per kernel: (control text, instruction text) as written, parameters expanded and
    branch labels replaced by the byte address they stand for."""
    kernels: dict[str, list] = {}
    labels: dict[str, dict[str, int]] = {}
    current = None
    for line in text.splitlines():
        m = _KERNEL.match(line)
        if m:
            current = m.group(1)
            kernels[current] = []
            labels[current] = {}
            continue
        if current is None:
            continue
        m = _LABEL.match(line)
        if m and not _LINE.match(line):
            labels[current][m.group(1)] = 16 * len(kernels[current])
            continue
        m = _LINE.match(line)
        if m:
            kernels[current].append((m.group("ctl"), expand_params(" ".join(m.group("inst").split()),
                                                                  param_base)))
    out = {}
    for k, insts in kernels.items():
        resolved = []
        for ctl, inst in insts:
            mm = re.match(r"^(.*\bBRA)\s+([A-Za-z_.$][\w.$]*)$", inst)
            if mm and mm.group(2) in labels[k]:
                inst = f"{mm.group(1)} {labels[k][mm.group(2)]:#x}"
            resolved.append((ctl, inst))
        out[k] = resolved
    return out


_LISTINGS: dict = {}


def _listing(code: bytes, arch: str):
    """nvdisasm's reading of one code section (memoized: tests ask twice)."""
    key = (arch, code)
    if key not in _LISTINGS:
        from sassas.learn import oracle
        _LISTINGS[key] = oracle.disassemble_code(code, arch)
    return _LISTINGS[key]


def _norm(text: str) -> str:
    return " ".join(text.replace(" ,", ",").split())


def compare(text: str, cubin: bytes, arch: str = "sm_90") -> list[str]:
    """Differences between the source and what nvdisasm reads in the cubin (empty: none)."""
    from sassas.ast import ControlCode
    from sassas.learn import oracle
    from sassas.control import read_control
    want = intended(text)
    got_sections = {name.split(".text.", 1)[-1]: code for name, code in oracle.text_sections(cubin)}
    problems = []
    for kernel, insts in want.items():
        code = got_sections.get(kernel)
        if code is None:
            problems.append(f"{kernel}: no .text section in the cubin")
            continue
        listing = _listing(code, arch)
        if len(listing) < len(insts):
            problems.append(f"{kernel}: {len(listing)} instructions decoded, {len(insts)} written")
        for i, ((ctl, inst), d) in enumerate(zip(insts, listing)):
            if _norm(d.text) != _norm(inst):
                problems.append(f"{kernel} @{16 * i:#06x}: wrote `{inst}`, nvdisasm reads `{d.text}`")
            want_c = read_control(ctl)
            got_c = ControlCode.from_word(d.word)
            for field in ("stall", "yield_", "write_barrier", "read_barrier", "wait_mask"):
                if getattr(want_c, field) != getattr(got_c, field):
                    problems.append(f"{kernel} @{16 * i:#06x} `{inst}`: control {field} "
                                    f"{getattr(got_c, field)} in the cubin, {getattr(want_c, field)} written")
    return problems


def opcode_counts(cubin: bytes, arch: str = "sm_90", kernel: Optional[str] = None,
                  timed_only: bool = False) -> dict[str, int]:
    """Mnemonic (opcode with modifiers) counts in a cubin's code, per nvdisasm.

    timed_only: count only between the first and the last clock read (CS2R/S2UR/S2R of
    SR_CLOCKLO), i.e. inside the timed region.
    """
    from sassas.learn import oracle
    counts: dict[str, int] = {}
    for name, code in oracle.text_sections(cubin):
        if kernel is not None and name.split(".text.", 1)[-1] != kernel:
            continue
        texts = [d.text for d in _listing(code, arch)]
        if timed_only:
            marks = [i for i, t in enumerate(texts) if "SR_CLOCKLO" in t]
            if len(marks) >= 2:
                texts = texts[marks[0] + 1:marks[-1]]
        for t in texts:
            parts = t.split()
            if parts and parts[0].startswith("@"):
                parts = parts[1:]
            if parts:
                counts[parts[0]] = counts.get(parts[0], 0) + 1
    return counts
