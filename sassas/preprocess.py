"""Preprocess stage: TuringAs blocks, inline Python and includes, turned into plain statements
and directives for the grammar.

- ``<params>  name, size [, align]``           -> ``.param name size align``
- ``<regs>    0-3 : a, b, c, d`` (exactly one number a name), ``0-16 ~ a, b`` (the names take
  the listed registers in order, spare registers allowed), ``R5 ~ x``, ``acc<0-7>`` names
  ``acc0..acc7``; a line of names alone (``x, y, acc<0-63>``) is allocated automatically
  -> ``.reg name [Rn]`` / ``.regs name first last``
- ``<consts>  name, size``                      -> ``.const name size`` (constant bank 3)
- ``<smem>    name, size [, align]``            -> ``.smem name size align`` (static shared memory);
  a bare byte count (TuringAs's ``<SMEM>4096</SMEM>``, also on one line) -> ``.shared 4096``
- ``<code> ... </code>``: Python run in the file's namespace; the lines it leaves in ``out_``
  (a string or a list of lines, as TuringAs reads it) are assembled in its place;
- ``{expr}`` in any line: replaced by ``str(eval(expr))`` in the file's namespace;
- ``.include "file"`` / ``#include "file"``: the file's lines; a ``.py`` file is run in the
  including file's namespace instead (TuringAs's ``-inc helper.py``).

Inline Python runs with the user's rights, like a Makefile: each source file gets a fresh
namespace of its own (nothing leaks between files or into the assembler), and with
``allow_exec=False`` any inline code is refused with an error.

Every output line keeps the file and line it really stands on, and for generated or included
lines where it came from (``Loc.origin``), so diagnostics point at what the user wrote.
"""
from __future__ import annotations

import bisect
import os
import re
import textwrap
from dataclasses import dataclass, field
from itertools import repeat
from typing import Optional, Sequence

from .ast import Loc
from .errors import SassError, SassErrors
from .files import decode_source

_BLOCK_OPEN = re.compile(r"^\s*<\s*(\w+)\s*>\s*(?:(?:#|//).*)?$")
_BLOCK_CLOSE = re.compile(r"^\s*<\s*/\s*(\w+)\s*>\s*(?:(?:#|//).*)?$")
_INCLUDE = re.compile(r'^\s*[.#]include\s+"([^"]+)"\s*(?:(?:#|//).*)?$')
_NAME = re.compile(r"[A-Za-z_]\w*")
_COUNT = re.compile(r"\d+|0[xX][0-9a-fA-F]+")
KNOWN_BLOCKS = ("params", "regs", "consts", "smem", "code")
MAX_INCLUDE_DEPTH = 32
MAX_REGISTER_NUMBER = 254
# A <code> block may generate another <code> block; this bounds the recursion.
MAX_GENERATION_DEPTH = 16


class LineSources:
    """The (file, line) each output line stands on, as a read-only sequence; kept as runs of
    consecutive lines of one file (most of a file is kept as written: one run, not a pair an
    output line)."""
    __slots__ = ("_starts", "_runs", "_length")

    def __init__(self):
        self._starts: list[int] = []                # the output index each run starts at
        self._runs: list[tuple[str, int]] = []      # its file and first line number
        self._length = 0

    def append(self, source: tuple[str, int]) -> None:
        self.extend(source[0], (source[1],))

    def extend(self, file: str, numbers: Sequence[int]) -> None:
        """Lines of `file` numbered `numbers`, after those already here."""
        if isinstance(numbers, range) and numbers.step == 1:
            if numbers:
                self._run(file, numbers.start, len(numbers))
            return
        for number in numbers:
            self._run(file, number, 1)

    def _run(self, file: str, first: int, count: int) -> None:
        if self._runs:
            last_file, last_first = self._runs[-1]
            if last_file == file and last_first + self._length - self._starts[-1] == first:
                self._length += count          # (continues the last run)
                return
        self._starts.append(self._length)
        self._runs.append((file, first))
        self._length += count

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index: int) -> tuple[str, int]:
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError("line index out of range")
        k = bisect.bisect_right(self._starts, index) - 1
        file, first = self._runs[k]
        return file, first + index - self._starts[k]

    def __iter__(self):
        return (self[i] for i in range(self._length))


@dataclass
class Preprocessed:
    text: str
    sources: LineSources = field(default_factory=LineSources)   # per output line
    origins: list[Optional[Loc]] = field(default_factory=list)
    listing: bool = False          # an nvdisasm / cuobjdump listing, taken as it stands
    lines: Optional[list[str]] = None   # text.split("\n"), as preprocess made them


@dataclass
class _Context:
    include_dirs: tuple[str, ...]
    allow_exec: bool
    lines: list[str] = field(default_factory=list)
    out: Preprocessed = field(default_factory=lambda: Preprocessed(""))
    errors: list[SassError] = field(default_factory=list)


def new_namespace(filename: str) -> dict:
    """The namespace a file's inline Python runs in: fresh, with the builtins only."""
    import builtins
    return {"__builtins__": builtins, "__name__": "sassas_inline", "__file__": filename}


def preprocess(text: str, filename: str = "<input>", include_dirs: tuple[str, ...] = (),
               allow_exec: bool = True, arch: Optional[str] = None) -> Preprocessed:
    """`arch`: the target, which picks its functions from a listing of several archs' code."""
    ctx = _Context(tuple(include_dirs), allow_exec)
    lines = text.split("\n")
    if is_listing(text):
        # NVIDIA's text, taken as it stands: no includes, blocks or inline Python run in it.
        lines = listing_statements(lines, filename, text, listing_arch(text, arch, filename))
        _emit_as_written(ctx, lines, range(1, len(lines) + 1), filename, None)
        ctx.out.listing = True
    else:
        _expand(ctx, lines, range(1, len(lines) + 1), filename, new_namespace(filename), None, 0, text)
    if ctx.errors:
        raise ctx.errors[0] if len(ctx.errors) == 1 else SassErrors(ctx.errors)
    ctx.out.text = "\n".join(ctx.lines)
    ctx.out.lines = ctx.lines
    return ctx.out


def _emit(ctx: _Context, text: str, file: str, line: int, origin: Optional[Loc]):
    if "\n" in text:
        # (an {expr} that gave several lines: each a line of the output, from the same place)
        for piece in text.split("\n"):
            _emit(ctx, piece, file, line, origin)
        return
    ctx.lines.append(text)
    ctx.out.sources.append((file, line))
    ctx.out.origins.append(origin)


def _emit_as_written(ctx: _Context, lines: list[str], numbers: Sequence[int], file: str,
                     origin: Optional[Loc]):
    """_emit for each of `lines` (numbered `numbers`), kept as written (in C loops: most lines)."""
    ctx.lines.extend(lines)
    ctx.out.sources.extend(file, numbers)
    ctx.out.origins.extend(repeat(origin, len(lines)))


_SPECIAL_MARKS = ("<", "{", "}", "include")


def _special_lines(lines: list[str], text: Optional[str] = None, marks: tuple = _SPECIAL_MARKS) -> list[int]:
    """The indices of the lines that hold one of `marks` (`<`, `{`, `}` or `include`): each
    found by str.find in the lines joined (`text`, where the caller has it; a few lines hold
    one, and looking into each line took longer)."""
    text = "\n".join(lines) if text is None else text
    found = []
    for mark in marks:
        pos = text.find(mark)
        while pos >= 0:
            found.append(pos)
            pos = text.find(mark, pos + 1)
    found.sort()
    out: list[int] = []
    line, last = 0, 0
    for pos in found:
        line += text.count("\n", last, pos)
        last = pos
        if not out or out[-1] != line:
            out.append(line)
    return out


def _expand(ctx: _Context, lines: list[str], numbers: Sequence[int], filename: str, namespace: dict,
            origin: Optional[Loc], depth: int, text: Optional[str] = None):
    """Expand the lines of one file (or of one <code> block's output), lines[i] numbered
    numbers[i], into ctx; `text`: the lines joined, where the caller has it."""
    # The indices of the lines that may hold a block, an include or {expr} (each needs one of
    # these), then len(lines); the lines between, most lines, are kept as written, a run at a time.
    special = _special_lines(lines, text) + [len(lines)]
    i = 0
    while i < len(lines):
        plain_end = special[bisect.bisect_left(special, i)]
        if plain_end > i:
            _emit_as_written(ctx, lines[i:plain_end], numbers[i:plain_end], filename, origin)
            i = plain_end
            continue
        lineno, line = numbers[i], lines[i]
        m = _INCLUDE.match(line)
        if m:
            _include(ctx, m.group(1), Loc(filename, lineno, line.find('"') + 1, line, origin),
                     filename, namespace, depth)
            i += 1
            continue
        m = _SMEM_ONE_LINE.match(line)
        if m:
            _emit(ctx, f".shared {m.group(1)}", filename, lineno, origin)
            i += 1
            continue
        m = _BLOCK_OPEN.match(line)
        if m and m.group(1).lower() in KNOWN_BLOCKS:
            name = m.group(1).lower()
            i += 1
            body = []
            while i < len(lines) and not _BLOCK_CLOSE.match(lines[i]):
                body.append((numbers[i], lines[i]))
                i += 1
            if i == len(lines):
                raise SassError(f"<{m.group(1)}> block is not closed: expected </{m.group(1)}>",
                                Loc(filename, lineno, line.find("<") + 1, line, origin))
            close_no, close_line = numbers[i], lines[i]
            close = _BLOCK_CLOSE.match(close_line)
            if close.group(1).lower() != name:
                raise SassError(f"</{close.group(1)}> closes <{m.group(1)}>",
                                Loc(filename, close_no, close_line.find("<") + 1, close_line, origin))
            open_loc = Loc(filename, lineno, line.find("<") + 1, line, origin)
            _emit(ctx, "", filename, lineno, origin)
            if name == "code":
                _code_block(ctx, body, open_loc, filename, namespace, origin, depth)
            else:
                for ln, text_line in body:
                    try:
                        text_line = _substitute(ctx, text_line, Loc(filename, ln, 1, text_line, origin), namespace)
                        out = _BLOCK_LINE[name](text_line, Loc(filename, ln, 1, text_line, origin))
                    except SassError as e:
                        ctx.errors.append(e)
                        out = ""
                    _emit(ctx, out, filename, ln, origin)
            _emit(ctx, "", filename, close_no, origin)
            i += 1
            continue
        try:
            text = line
            if "{" in line or "}" in line:
                here = Loc(filename, lineno, len(line) - len(line.lstrip()) + 1, line, origin)
                text = _substitute(ctx, line, here, namespace)
        except SassError as e:
            ctx.errors.append(e)
            text = ""
        # A line changed by {expr} keeps what was written as the origin of what is parsed.
        line_origin = origin if text == line else Loc(filename, lineno, 1, line, origin)
        _emit(ctx, text, filename, lineno, line_origin)
        i += 1


# ---- includes ---------------------------------------------------------------------------

def _include(ctx: _Context, name: str, loc: Loc, filename: str, namespace: dict, depth: int):
    if depth >= MAX_INCLUDE_DEPTH:
        raise SassError("includes nested too deeply (a file including itself?)", loc)
    path = _find_include(name, filename, ctx.include_dirs)
    if path is None:
        raise SassError(f"cannot find include file '{name}'", loc)
    try:
        with open(path, "rb") as f:
            text = decode_source(f.read(), path)
    except OSError as e:
        raise SassError(f"cannot read include file '{name}': {e.strerror or e}", loc) from None
    except SassError as e:
        raise SassError(f"cannot read include file '{name}': {e.message} ({e.loc})", loc) from None
    if path.endswith(".py"):
        # A Python helper (TuringAs's -inc): its definitions are for this file's inline code.
        _refuse_exec(ctx, loc, f"including the Python file '{name}'")
        _run(text, path, namespace, loc, "exec")
        return
    lines = text.split("\n")
    _expand(ctx, lines, range(1, len(lines) + 1), path, new_namespace(path), loc, depth + 1)


def _find_include(name: str, including: str, include_dirs) -> Optional[str]:
    here = os.path.dirname(including) if including and not including.startswith("<") else "."
    for d in (here, *include_dirs):
        p = os.path.join(d, name)
        if os.path.isfile(p):
            return p
    return None


# ---- inline Python ----------------------------------------------------------------------

def _refuse_exec(ctx: _Context, loc: Loc, what: str):
    if not ctx.allow_exec:
        raise SassError(f"{what} runs Python, and inline code is disabled (--no-exec / allow_exec=False)", loc)


def _run(code: str, label: str, namespace: dict, loc: Loc, mode: str, source_lines: Optional[dict] = None):
    """Run or evaluate user Python; any exception becomes a diagnostic at `loc`."""
    try:
        compiled = compile(code, label, mode)
        return eval(compiled, namespace) if mode == "eval" else exec(compiled, namespace)
    except SassError:
        raise
    except SyntaxError as e:
        raise SassError(f"inline Python: syntax error: {e.msg}", loc) from None
    except (Exception, SystemExit) as e:  # the user's code failed (or called exit()): an input error
        raise SassError(f"inline Python raised {type(e).__name__}: {e}", _failing_line(e, label, loc, source_lines)) from None


def _failing_line(e: Exception, label: str, loc: Loc, source_lines: Optional[dict]) -> Loc:
    """The line of the user's code that raised, when it is in the file (a <code> block's code
    keeps the file's line numbers); else the block or expression itself."""
    lineno, tb = None, e.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == label:
            lineno = tb.tb_lineno
        tb = tb.tb_next
    text = (source_lines or {}).get(lineno)
    if text is None:
        return loc
    return Loc(label, lineno, len(text) - len(text.lstrip()) + 1, text, loc.origin)


def _code_block(ctx: _Context, body, open_loc: Loc, filename: str, namespace: dict, origin, depth: int):
    _refuse_exec(ctx, open_loc, "this <code> block")
    if depth >= MAX_GENERATION_DEPTH:
        raise SassError("<code> blocks nested too deeply", open_loc)
    code = textwrap.dedent("\n".join(text for _, text in body))
    # Blank lines keep the Python's line numbers equal to the file's in tracebacks we report.
    code = "\n" * (body[0][0] - 1) + code if body else code
    namespace.pop("out_", None)
    _run(code, filename, namespace, open_loc, "exec", dict(body))
    out = namespace.pop("out_", "")
    if isinstance(out, str):
        generated = out.split("\n")
    else:
        try:
            # (an item of several lines is that many lines, as a string's are)
            generated = [line for x in out for line in str(x).split("\n")]
        except TypeError:
            raise SassError(f"<code> block: out_ must be a string or a list of lines, "
                            f"not {type(out).__name__}", open_loc) from None
    # Generated lines stand on the <code> line; their origin note points at it too.
    lineno = open_loc.line
    _expand(ctx, generated, [lineno] * len(generated), filename, namespace,
            Loc(filename, lineno, open_loc.col, open_loc.text, origin),
            depth + 1)


# Braces around decimal numbers alone are a set of scoreboards (`DEPBAR.LE SB0, 0x0, {4,3,2,1}`,
# as nvdisasm and `sassas disasm` write it), not an inline expression.
_SCOREBOARD_SET = re.compile(r"\{\s*\d+(?:\s*,\s*\d+)*\s*\}")


def _substitute(ctx: _Context, line: str, loc: Loc, namespace: dict) -> str:
    """Replace each `{expr}` before the line's comment with the value of expr."""
    if "{" not in line and "}" not in line:
        return line
    out, i, n = [], 0, len(line)
    while i < n:
        ch = line[i]
        if ch == "#" or line.startswith("//", i):
            out.append(line[i:])
            break
        if ch == "}":
            raise SassError("'}' without '{'", Loc(loc.file, loc.line, i + 1, line, loc.origin))
        if ch != "{":
            out.append(ch)
            i += 1
            continue
        depth, j = 0, i
        while j < n:
            if line[j] == "{":
                depth += 1
            elif line[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        at = Loc(loc.file, loc.line, i + 1, line, loc.origin)
        if j >= n:
            raise SassError("'{' without '}': inline expressions are written {expr}", at)
        if _SCOREBOARD_SET.fullmatch(line, i, j + 1):
            out.append(line[i:j + 1])       # a set of scoreboards, `{4,3,2,1}`: no Python
            i = j + 1
            continue
        _refuse_exec(ctx, at, f"the inline expression {line[i:j + 1]}")
        expr = line[i + 1:j].strip()
        if not expr:
            raise SassError("empty inline expression '{}'", at)
        out.append(str(_run(expr, loc.file, namespace, at, "eval")))
        i = j + 1
    return "".join(out)


# ---- declaration blocks -----------------------------------------------------------------

def _strip_comment(line: str) -> str:
    return re.split(r"#|//", line, maxsplit=1)[0].strip()


def _name_size_line(directive: str, block: str, allow_align: bool):
    def convert(line: str, loc: Loc) -> str:
        body = _strip_comment(line)
        if not body:
            return ""
        parts = [p.strip() for p in body.split(",")]
        shapes = "'name, size'" + (" or 'name, size, align'" if allow_align else "")
        if len(parts) not in ((2, 3) if allow_align else (2,)) or not _NAME.fullmatch(parts[0]):
            raise SassError(f"expected {shapes} in <{block}>", loc)
        for p in parts[1:]:
            if not _COUNT.fullmatch(p):
                raise SassError(f"expected a byte count, found '{p}'",
                                Loc(loc.file, loc.line, line.find(p) + 1 if p else 1, line, loc.origin))
        return f"{directive} " + " ".join(parts)
    return convert


def _smem_line(line: str, loc: Loc) -> str:
    """`name, size [, align]`, or TuringAs's form: the kernel's shared-memory bytes alone."""
    body = _strip_comment(line)
    if _COUNT.fullmatch(body):
        return f".shared {body}"
    return _smem_named(line, loc)


_smem_named = _name_size_line(".smem", "smem", allow_align=True)
_SMEM_ONE_LINE = re.compile(r"^\s*<\s*smem\s*>\s*(\d+|0[xX][0-9a-fA-F]+)\s*<\s*/\s*smem\s*>\s*(?:(?:#|//).*)?$", re.I)
_REG_INDEX = re.compile(r"R?(\d+)(?:\s*-\s*R?(\d+))?$")
_VECTOR_NAME = re.compile(r"([A-Za-z_]\w*)<(\d+)-(\d+)>(\w*)$")


def _regs_line(line: str, loc: Loc) -> str:
    """One <regs> line -> `.reg` / `.regs` directives (see the module docstring)."""
    body = _strip_comment(line)
    if not body:
        return ""
    m = re.match(r"^(.*?)([:~])(.*)$", body)
    numbers_text, sep, names_text = (m.group(1), m.group(2), m.group(3)) if m else ("", "", body)
    names = []   # (name, vector range or None, suffix)
    for item in (p.strip() for p in names_text.split(",")):
        v = _VECTOR_NAME.fullmatch(item)
        if v:
            first, last = int(v.group(2)), int(v.group(3))
            if last < first:
                raise SassError(f"vector name '{item}': the range runs backwards", loc)
            names.append((v.group(1), (first, last), v.group(4)))
        elif _NAME.fullmatch(item):
            names.append((item, None, ""))
        else:
            raise SassError(f"expected a register name, found '{item}' in <regs>", loc)
    if not sep:
        # Names alone: the allocator picks the registers.
        out = []
        for name, rng, suffix in names:
            if rng is None:
                out.append(f".reg {name}")
            elif suffix:
                raise SassError(f"'{name}<{rng[0]}-{rng[1]}>{suffix}': an automatically allocated "
                                "vector name cannot have a suffix", loc)
            else:
                out.append(f".regs {name} {rng[0]} {rng[1]}")
        return "\n".join(out)
    registers = []
    for item in (p.strip() for p in numbers_text.split(",")):
        r = _REG_INDEX.match(item)
        if not r:
            raise SassError(f"expected a register number or range like 0-15, found '{item}'", loc)
        lo = int(r.group(1))
        hi = int(r.group(2)) if r.group(2) else lo
        if hi < lo:
            raise SassError(f"register range '{item}' runs backwards", loc)
        if hi > MAX_REGISTER_NUMBER:
            raise SassError(f"register {hi} out of range: R registers are R0..R{MAX_REGISTER_NUMBER}", loc)
        registers.extend(range(lo, hi + 1))
    flat = [n + str(k) + s for n, rng, s in names for k in (range(rng[0], rng[1] + 1) if rng else [""])]
    if sep == ":" and len(flat) != len(registers):
        raise SassError(f"{len(registers)} register(s) for {len(flat)} name(s): with ':' they must "
                        "pair up one to one (use '~' to leave registers spare)", loc)
    if len(flat) > len(registers):
        raise SassError(f"{len(registers)} register(s) for {len(flat)} name(s)", loc)
    # TuringAs reads both ':' and '~' lines in order: the i-th name takes the i-th register.
    return "\n".join(f".reg {name} R{reg}" for name, reg in zip(flat, registers))


_BLOCK_LINE = {
    "params": _name_size_line(".param", "params", allow_align=True),
    "consts": _name_size_line(".const", "consts", allow_align=False),
    "smem": _smem_line,
    "regs": _regs_line,
}


# ---- listings: what `cuobjdump -sass` and `nvdisasm` print, taken unchanged ----------------
#
# Only the code of each function is kept; every other line becomes blank, so line numbers in
# diagnostics stay those of the listing. Instruction lines (`/*0070*/ LDG.E ... ; /* 0x... */`
# and the high word on the next line) go to the grammar as they are: it takes the control bits
# from the hex and nothing else.
_LISTING_MARK = re.compile(r"^\s*(code for sm_\d+|Function\s*:|\.section\s+\.text\.|\.headerflags\s)", re.M)
_CUOBJDUMP_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)\s*$")
_SECTION = re.compile(r"^\s*\.section\s+([^\s,]+)")
_TEXT_LABEL = re.compile(r"^\s*\.text\.\S+:\s*$")
_ENTRY = re.compile(r'^\s*\.other\s+\S+?,\s*@"STO_CUDA_ENTRY\b')
_INSTRUCTION_LINE = re.compile(r"^\s*(/\*[0-9a-fA-F]{4,}\*/|/\*\s*0x[0-9a-fA-F]+\s*\*/\s*$)")
# nvdisasm (ELF mode) notes what the cubin's attributes say of an instruction between the
# operands and the ';', e.g. `STL [R1+0x4], R4  (*"SpillRefill"*);` for ptxas's spill code
# (EIATTR_SPILL...): not part of the instruction, blanked (columns kept).
_ANNOTATION = re.compile(r'\(\*"[^"\n]*"\*\)')


def is_listing(text: str) -> bool:
    # (each mark holds one of these words; looking for them first spares most texts the
    # regex's try at every line)
    return (any(word in text for word in ("code for sm_", "Function", ".section", ".headerflags"))
            and _LISTING_MARK.search(text) is not None)


# cuobjdump -sass of a fatbin or host program: each cubin's functions under `code for sm_XX`,
# cubins one after the other, each after a `Fatbin elf code:` header
_CODE_FOR = re.compile(r"^\s*code for (sm_\d+a?)\s*$", re.M)


def listing_arch(text: str, arch: Optional[str], filename: str) -> Optional[str]:
    """The arch whose functions are taken from a listing with code of several (`code for sm_80`
    ... `code for sm_90`): `arch`, the target; None where the listing names one arch or none (all
    its functions are taken). SassError where it has no code for `arch`."""
    archs = list(dict.fromkeys(_CODE_FOR.findall(text))) if "code for sm_" in text else []
    if len(archs) < 2 or arch is None:
        return None
    for a in archs:
        if a.rstrip("a") == arch.rstrip("a"):
            return a
    raise SassError(f"{filename}: the listing has code for {', '.join(archs)}, none for {arch}")


def listing_arch_of(line: str) -> Optional[str]:
    """The arch a `code for sm_XX` line names, else None."""
    m = _CODE_FOR.match(line) if "code for" in line else None
    return m.group(1) if m else None


# The words of the listing lines that listing_statements reads one by one (a function's start,
# a section, an entry, a cubin's arch or header); the lines between are instructions, labels or
# what is dropped.
_LISTING_MARKS = ("Function", ".section", ".other", "code for", "Fatbin")


def listing_statements(lines: list[str], filename: str, text: Optional[str] = None,
                       arch: Optional[str] = None) -> list[str]:
    """The listing's lines as the parser takes them: a function's directive, its code's
    instructions (with their hex words) and labels as they stand; every other line blank, so
    that line numbers stay the listing's. `text`: the lines joined, where the caller has it.
    `arch` (listing_arch's): only the functions under `code for <arch>`."""
    out: list[str] = []
    in_code = False          # inside a function's code
    function: Optional[str] = None
    start = 0                # where the function's directive went in `out`
    section_arch = None      # the `code for` line's arch the lines are under
    instruction, text_label = _INSTRUCTION_LINE.match, _TEXT_LABEL.match
    i = 0
    for at in _special_lines(lines, text, _LISTING_MARKS) + [len(lines)]:
        # The lines before the next marked one, in one pass (most of a listing)
        run = lines[i:at]
        if in_code:
            out.extend([(_ANNOTATION.sub(_blank, line) if "(*" in line else line) if instruction(line) else
                        line if line.strip().endswith(":") and not text_label(line) else "" for line in run])
        else:
            out.extend([""] * len(run))
        if at == len(lines):
            break
        line, keep, i = lines[at], "", at + 1
        # (each regex only where the word it needs stands)
        m = _CUOBJDUMP_FUNCTION.match(line) if "Function" in line else None
        s = _SECTION.match(line) if ".section" in line else None
        if listing_arch_of(line) or line.startswith("Fatbin"):
            # the next cubin's code (`Fatbin elf code:` would pass for a label)
            section_arch, in_code = listing_arch_of(line) or section_arch, False
        elif m and arch is not None and section_arch != arch:
            in_code = False          # another arch's function
        elif m:
            # (cuobjdump does not say which functions are entries: all are kernels)
            function, in_code, keep = m.group(1), True, f".kernel {m.group(1)}"
        elif s:
            name = s.group(1)
            in_code = name.startswith(".text.")
            if in_code:
                # nvdisasm: a device function, unless `.other name,@"STO_CUDA_ENTRY ..."` follows
                function, start = name[len(".text."):], len(out)
                keep = f".func {function}"
        elif in_code and ".other" in line and _ENTRY.match(line):
            out[start] = f".kernel {function}"
        elif in_code:
            if instruction(line):
                keep = _ANNOTATION.sub(_blank, line) if "(*" in line else line
            elif line.strip().endswith(":") and not text_label(line):
                keep = line          # a branch target (.L_x_3:) or a function's entry
        out.append(keep)
    return out


def _blank(annotation: re.Match) -> str:
    return " " * len(annotation.group())
