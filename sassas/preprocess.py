"""Preprocess stage: TuringAs blocks and includes, turned into plain statements for the grammar.

- ``<params> name, size [, align] ... </params>`` -> ``.param name size align`` directives;
- ``.include "file"`` / ``#include "file"``: the file's lines, with where they came from.

The output keeps, for every line, the file and line it really stands on, so diagnostics point
at what the user wrote.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Optional

from .ast import Loc
from .errors import SassError

_BLOCK_OPEN = re.compile(r"^\s*<\s*(\w+)\s*>\s*$")
_BLOCK_CLOSE = re.compile(r"^\s*<\s*/\s*(\w+)\s*>\s*$")
_INCLUDE = re.compile(r'^\s*[.#]include\s+"([^"]+)"\s*$')
KNOWN_BLOCKS = ("params",)
MAX_INCLUDE_DEPTH = 32


@dataclass
class Preprocessed:
    text: str
    sources: list[tuple[str, int]] = field(default_factory=list)   # per output line
    origins: list[Optional[Loc]] = field(default_factory=list)


def preprocess(text: str, filename: str = "<input>", include_dirs: tuple[str, ...] = ()) -> Preprocessed:
    out = Preprocessed("")
    lines: list[str] = []
    _expand(text, filename, include_dirs, lines, out, None, 0)
    out.text = "\n".join(lines)
    return out


def _emit(lines, out: Preprocessed, text: str, file: str, line: int, origin: Optional[Loc]):
    lines.append(text)
    out.sources.append((file, line))
    out.origins.append(origin)


def _expand(text, filename, include_dirs, lines, out, origin, depth):
    src = text.split("\n")
    i = 0
    while i < len(src):
        line = src[i]
        lineno = i + 1
        m = _INCLUDE.match(line)
        if m:
            loc = Loc(filename, lineno, line.find('"') + 1, line, origin)
            if depth >= MAX_INCLUDE_DEPTH:
                raise SassError("includes nested too deeply (a file including itself?)", loc)
            path = _find_include(m.group(1), filename, include_dirs)
            if path is None:
                raise SassError(f"cannot find include file '{m.group(1)}'", loc)
            with open(path) as f:
                _expand(f.read(), path, include_dirs, lines, out, loc, depth + 1)
            i += 1
            continue
        m = _BLOCK_OPEN.match(line)
        if m and m.group(1).lower() in KNOWN_BLOCKS:
            name = m.group(1).lower()
            start = i
            i += 1
            body = []
            while i < len(src) and not _BLOCK_CLOSE.match(src[i]):
                body.append((i + 1, src[i]))
                i += 1
            if i == len(src):
                raise SassError(f"<{m.group(1)}> block is not closed: expected </{m.group(1)}>",
                                Loc(filename, start + 1, line.find("<") + 1, line, origin))
            close = _BLOCK_CLOSE.match(src[i])
            if close.group(1).lower() != name:
                raise SassError(f"</{close.group(1)}> closes <{m.group(1)}>",
                                Loc(filename, i + 1, src[i].find("<") + 1, src[i], origin))
            _emit(lines, out, "", filename, start + 1, origin)
            for ln, text_line in body:
                _emit(lines, out, _param_line(text_line, filename, ln, origin), filename, ln, origin)
            _emit(lines, out, "", filename, i + 1, origin)
            i += 1
            continue
        _emit(lines, out, line, filename, lineno, origin)
        i += 1


def _param_line(line: str, filename: str, lineno: int, origin) -> str:
    """`name, size[, align]` -> `.param name size align` (comments and blank lines kept)."""
    body = re.split(r"#|//", line, maxsplit=1)[0].strip()
    if not body:
        return line
    parts = [p.strip() for p in body.split(",")]
    loc = Loc(filename, lineno, len(line) - len(line.lstrip()) + 1, line, origin)
    if len(parts) not in (2, 3) or not re.fullmatch(r"[A-Za-z_]\w*", parts[0]):
        raise SassError("expected 'name, size' or 'name, size, align' in <params>", loc)
    for p in parts[1:]:
        if not re.fullmatch(r"\d+|0x[0-9a-fA-F]+", p):
            raise SassError(f"expected a byte count, found '{p}'", loc)
    return ".param " + " ".join(parts)


def _find_include(name: str, including: str, include_dirs) -> Optional[str]:
    here = os.path.dirname(including) if including and not including.startswith("<") else "."
    for d in (here, *include_dirs):
        p = os.path.join(d, name)
        if os.path.isfile(p):
            return p
    return None
