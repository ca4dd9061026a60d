"""The edit loop: CUDA C -> NVRTC cubin -> sassas source -> your edit -> cubin that loads.

    from sassas.edit import edit_cuda
    result = edit_cuda(cuda_source, edit=lambda src: src.replace("FFMA", "FFMA"), arch="sm_90")
    original, edited = sassas.load(result.original), sassas.load(result.cubin)

An edit is a function from source text to source text, or a list of ``(regex, replacement)``
pairs applied in order. :func:`map_instructions` builds a function that rewrites one
instruction line at a time (control code, predicate and instruction text as separate parts).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Optional, Sequence, Union

from .assembler import Cubin, assemble
from .disasm import disassemble
from .elf import read_cubin
from .nvrtc import compile_cuda

Edit = Union[Callable[[str], str], Sequence[tuple[str, str]], None]

# `control  [@P0] INSTRUCTION;` as `sassas disasm` writes it.
_LINE = re.compile(r"^(?P<control>[0-9a-fA-F-]{1,6}:[0-7-]:[0-7-]:[yY-]:[0-9a-fA-F]{1,2})(?P<space>\s+)"
                   r"(?P<predicate>@!?U?P[0-7T]\s+)?(?P<text>[A-Z].*?;)(?P<tail>.*)$")


@dataclass
class EditResult:
    original: bytes          # the NVRTC cubin
    source: str              # its sassas source, unedited
    edited_source: str       # after the edit
    cubin: Cubin             # the edited source, assembled

    @property
    def changed_lines(self) -> int:
        a, b = self.source.splitlines(), self.edited_source.splitlines()
        return sum(x != y for x, y in zip(a, b)) + abs(len(a) - len(b))


def apply_edit(source: str, edit: Edit) -> str:
    if edit is None:
        return source
    if callable(edit):
        return edit(source)
    for pattern, replacement in edit:
        source, n = re.subn(pattern, replacement, source, flags=re.M)
        if n == 0:
            raise ValueError(f"edit pattern {pattern!r} matched nothing")
    return source


def map_instructions(fn: Callable[[int, str, str, str], Optional[tuple[str, str, str]]]) -> Callable[[str], str]:
    """An edit that calls ``fn(index, control, predicate, text)`` for every instruction line
    (index counts instructions within each kernel) and writes back what it returns
    (``None`` keeps the line)."""
    def edit(source: str) -> str:
        out, index = [], 0
        for line in source.splitlines():
            if line.startswith(".kernel "):
                index = 0
            m = _LINE.match(line)
            if m:
                new = fn(index, m["control"], (m["predicate"] or "").strip(), m["text"])
                index += 1
                if new is not None:
                    control, predicate, text = new
                    line = f"{control}{m['space']}{predicate + ' ' if predicate else ''}{text}{m['tail']}"
            out.append(line)
        return "\n".join(out) + ("\n" if source.endswith("\n") else "")
    return edit


def edit_cubin(cubin: bytes, edit: Edit, arch: Optional[str] = None, kernel: Optional[str] = None) -> EditResult:
    arch = arch or read_cubin(cubin).target
    source = disassemble(cubin, kernel)
    edited = apply_edit(source, edit)
    return EditResult(original=cubin, source=source, edited_source=edited,
                      cubin=assemble(edited, arch, filename="<edited>"))


def edit_cuda(cuda_source: str, edit: Edit = None, arch: str = "sm_90", options: Sequence[str] = (),
              kernel: Optional[str] = None) -> EditResult:
    """Compile `cuda_source` with NVRTC for `arch`, disassemble, apply `edit`, reassemble."""
    return edit_cubin(compile_cuda(cuda_source, arch, options), edit, arch, kernel)
