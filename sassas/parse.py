"""Parse stage: source text -> Program (kernels of labels and instructions), via grammar.lark: the
text line by line through line plans (or whole, through Lark), the items built by
sassas.parse_tree, grouped into kernels with their declarations and the module's data."""
from __future__ import annotations

import functools
import hashlib
import itertools
import re
from operator import itemgetter
from pathlib import Path
from typing import Optional

from lark import Lark, Token
from lark.exceptions import UnexpectedInput, VisitError

from .ast import (DEFAULT_SMEM_ALIGN, AutoName, Declarations, GlobalDecl, Instruction, Kernel, Label, Loc, ModuleData,
                  Program)
from .cache import cache_dir
from .errors import Diagnostics, SassError
from .parse_tree import NUMBER_IN_LINE, ItemBuilder, Lines, StatementPlan, syntax_error

# Spans of the `#`/`//` comments of the text being parsed (the line parser needs them).
_comment_spans: list[tuple[int, int]] = []


def _note_comment(tok: Token) -> Token:
    _comment_spans.append((tok.start_pos, tok.end_pos))
    return tok


@functools.lru_cache(maxsize=None)
def _parser() -> Lark:
    grammar = (Path(__file__).parent / "grammar.lark").read_text()
    # LALR with the contextual lexer: one pass, and a token is only tried where it may stand.
    # Building its tables takes a fifth to a third of a second, longer than assembling 50k
    # instructions: Lark keeps them in the cache directory, in a file that also holds a hash
    # of the grammar, the options and Lark's and Python's versions and is rebuilt when these
    # differ or it cannot be read (and passed by when it cannot be written).
    cache = cache_dir() / f"grammar-{hashlib.sha256(grammar.encode()).hexdigest()[:24]}.lark"
    return Lark(grammar, parser="lalr", lexer="contextual", propagate_positions=False,
                maybe_placeholders=False, cache=str(cache), lexer_callbacks={"COMMENT": _note_comment})


# ---- the text line by line ------------------------------------------------------------------
# Most lines are one statement or label, and differ from earlier lines only in register numbers
# and integer literals. _line_items parses each line on its own and keeps a plan per *shape*
# (the line with those numbers cut out, by NUMBER_IN_LINE); a line of a known shape is built
# from the plan without the parser. Why this gives what parsing the whole text gives:
#
# - Lark's lexer decides on character classes: every terminal of grammar.lark reads the digits
#   cut out here as \d, \w or [0-9a-fA-F], except where a count or a digit matters (CONTROL,
#   PREDICATE, ADDRESS, P/UP/B/SB registers, HEXWORD's 1-16 digits). NUMBER_IN_LINE only cuts
#   R and UR (1-3 digits) register numbers, integers (hex up to 16 digits) not touching
#   `.`, `:`, `-`, `*` or a word character, and the number at the end of a name after a lower
#   case letter (`acc12`, not `1e3` or `.F16x2`); and a plan is kept only when each cut number
#   is exactly one REGISTER or NUMBER token, the end of a NAME (a name the front end binds), the
#   number of a HEXWORD, or lies in a `#`/`//` comment, so the other terminals never see them.
#   Lines of one shape therefore lex into the same token types, parse alike, and differ only in
#   those values.
# - Parsing line by line gives the whole text's items when each line parses alone and no line
#   starts with what could continue the previous line's last item (a statement's HEXWORD, the
#   optional NUMBER or REGISTER of .param, .reg, .regs, .smem). Otherwise, and on any error,
#   the whole text is parsed at once, so errors are reported exactly as that parse reports them.

# The second line of an instruction in a listing: its high 64 bits alone, in a comment.
_HIGH_WORD_LINE = re.compile(r"\s*/\*\s*0x[0-9a-fA-F]{1,16}\s*\*/\s*$")
# The address a listing prints before an instruction (`/*0aa0*/`): never cut (it touches `*`),
# not read; zeroed for the line's shape.
_LISTING_ADDRESS = re.compile(r"^(\s*/\*)([0-9a-fA-F]{4,})(?=\*/)")
_line_plans: dict[tuple, "_LinePlan"] = {}
_MAX_LINE_PLANS = 100_000

# Finding a line's shape (the NUMBER_IN_LINE split) costs more than building its statement.
# A line's *digit key* is the line with every digit written 0, every a-f written a and every
# A-F written A. NUMBER_IN_LINE looks at digits and hex letters only through classes that hold
# all of them alike (\w, [0-9], [a-z], [0-9a-fA-F]), but for the `0` before an `x` (`0x1f`):
# lines with the same digit key, the same digits and hex letters outside the numbers cut out
# and the same `0` before each `x` are cut at the same places into the same shape.
# _digit_keys maps a digit key to that check and the cut, with the statement's build (lines
# of one statement only): one translation of the whole text, a lookup and two itemgetters a
# line instead of the split.
_digit_keys: dict[str, tuple] = {}
_DIGIT_KEY = bytes.maketrans(b"123456789bcdefBCDEF", b"000000000aaaaaAAAAA")
# The words a listing prints after an instruction (`/* 0x000fe20000000f00 */`), all 0 in the
# key: NUMBER_IN_LINE cuts each whole, whatever its digits and letters, so these do not make a
# key of each line.
_HEX_WORD_IN_KEY = re.compile(rb"/\* 0x[0-9aA]{16} \*/")
_HEX_WORD_ZEROED = b"/* 0x0000000000000000 */"
_EMPTY = slice(0, 0)


class _WholeText(Exception):
    """The text has to be parsed as a whole (see above)."""


@functools.lru_cache(maxsize=None)
def _terminals() -> dict:
    return {t.name: (re.compile(t.pattern.to_regexp()), t.priority) for t in _parser().terminals}


def _continues(tok: Token, line: str) -> bool:
    """Whether the whole-text lexer, after an item that may go on (a statement's HEXWORD, the
    optional NUMBER or REGISTER of .param, .reg, .regs, .smem), could read another token at
    `tok` than the line's own lexer read: one of those with at least its priority matches there."""
    terms = _terminals()
    priority = terms[tok.type][1]
    return any(terms[name][1] >= priority and terms[name][0].match(line, tok.start_pos)
               for name in ("HEXWORD", "NUMBER", "REGISTER"))


class _LinePlan:
    """The items of one line shape: ('label', name, position) or ('statement', StatementPlan)."""
    __slots__ = ("items", "statement")

    def __init__(self, items: list):
        self.items = items
        # The common line, one statement: its build.
        self.statement = items[0][1].build if len(items) == 1 and items[0][0] == "statement" else None

    def build(self, parts: list, lines: Lines, lineno: int) -> list:
        out = []
        for item in self.items:
            if item[0] == "statement":
                out.append(item[1].build(parts, lines, lineno))
            else:
                _, name, (_, part, offset) = item
                start = sum(map(len, parts[:2 * part]))
                out.append(Label(name, lines.loc(lineno, start + offset + 1)))
        return out


def _plan_line(line: str, parts: list, lineno: int, lines: Lines) -> tuple[Optional[_LinePlan], list]:
    """Parse one line alone: (its plan, or None where it cannot have one; its items)."""
    _comment_spans.clear()
    try:
        tree = _parser().parse(line)
    except UnexpectedInput:
        raise _WholeText from None
    comments = list(_comment_spans)
    items = tree.children
    if items and items[0].data in ("statement", "label"):
        first = items[0].children[0]
        if _continues(first, line):
            raise _WholeText
    # Where the cut numbers are: [start, end) in this line.
    spans, pos = [], 0
    for k, part in enumerate(parts):
        if k % 2:
            spans.append((pos, pos + len(part)))
        pos += len(part)
    part_starts = list(itertools.accumulate(map(len, parts), initial=0))[::2]
    claimed: set[int] = set()
    cacheable = True

    def number_of(tok: Token) -> Optional[int]:
        nonlocal cacheable
        inside = [k for k, (a, b) in enumerate(spans) if a < tok.end_pos and b > tok.start_pos]
        if not inside:
            return None
        k = inside[0]
        a, b = spans[k]
        prefix = line[tok.start_pos:a]
        if len(inside) == 1 and (
                (b == tok.end_pos and
                 ((tok.type == "NUMBER" and prefix == "") or (tok.type == "REGISTER" and prefix in ("R", "UR"))
                  or (tok.type == "NAME" and prefix != "")))
                or (tok.type == "HEXWORD" and line[a:b] == tok.value[2:-2].strip())):
            claimed.add(k)
            return k
        cacheable = False
        return None

    def position(tok: Token) -> tuple:
        start = tok.start_pos
        part = max(m for m, ps in enumerate(part_starts) if ps <= start)
        return (0, part, start - part_starts[part])

    info = lines.info(lineno)

    def place(tok: Token):
        where = position(tok)
        return where, Loc.on(info, tok.column)

    plan_items = []
    for item in items:
        if item.data == "statement":
            tokens = [t for t in item.children if isinstance(t, Token)]
            ops = next((t for t in item.children if not isinstance(t, Token)), None)
            atom_lists = [list(op.children) for op in ops.children] if ops is not None else []
            for tok in tokens:
                number_of(tok)          # numbers must not stand in the statement's own tokens
                if tok.type == "CONTROL_NOTE":
                    cacheable = False   # (its control code read from the hex words themselves)
            plan = StatementPlan(tokens, atom_lists, place, number_of)
            plan_items.append(("statement", plan))
        elif item.data == "label":
            tok = item.children[0]
            number_of(tok)
            plan_items.append(("label", tok.value[:-1], position(tok)))
        else:
            # A directive: built as the whole-text parse builds it, never planned.
            cacheable = False
            try:
                built_item = ItemBuilder(lines, lineno - 1).transform(item)
            except VisitError:
                raise _WholeText from None
            plan_items.append(("built", built_item))
    uncovered = set(range(len(spans))) - claimed
    if any(not any(a <= spans[k][0] and spans[k][1] <= b for a, b in comments) for k in uncovered):
        cacheable = False
    if any(kind == "built" for kind, *_ in plan_items):
        out = []
        for kind, *rest in plan_items:
            out.extend([rest[0]] if kind == "built" else _LinePlan([(kind, *rest)]).build(parts, lines, lineno))
        return None, out
    plan = _LinePlan(plan_items)
    return (plan if cacheable else None), plan.build(parts, lines, lineno)


def _digit_key_entry(line: str, key: str, parts: list, build) -> tuple:
    """What _line_items keeps for a digit key (see _digit_keys), from a line of it cut into
    `parts` whose plan builds one statement: (the check's positions as an itemgetter and
    what it finds on this line, an itemgetter cutting a line into parts, the build)."""
    cuts, pos = [], 0
    for k, part in enumerate(parts):
        if k % 2:
            cuts.append((pos, pos + len(part)))
        pos += len(part)
    inside = {i for a, b in cuts for i in range(a, b)}
    checked = [i for i, ch in enumerate(key) if ch in "0aA" and i not in inside]
    checked += [i - 1 for i in range(1, len(key)) if key[i] in "xX" and key[i - 1] == "0" and i - 1 in inside]
    checked = sorted(set(checked))
    # (two positions at least, so that itemgetter gives a tuple)
    check = itemgetter(*checked, 0, 0) if checked else None
    cut = itemgetter(*[s for a, b in cuts for s in (_EMPTY, slice(a, b))], _EMPTY)
    return (check, check(line) if check else None, cut, build)


def _line_items(lines: Lines, start: int = 0, stop: Optional[int] = None) -> list:
    """The items of the parsed text, line by line through the line plans; raises _WholeText.
    `start`, `stop`: those of lines start+1..stop only (where no listing's instruction runs
    over the range's ends: see split_line)."""
    out: list = []
    texts = lines.lines
    stop = len(texts) if stop is None else stop
    own = texts[start:stop] if start or stop < len(texts) else texts
    whole = "\n".join(own)
    keys = (_HEX_WORD_IN_KEY.sub(_HEX_WORD_ZEROED, whole.encode("ascii").translate(_DIGIT_KEY))
            .decode("ascii").split("\n") if whole.isascii() else None)
    # (no listing's instruction without a comment's end: most texts look at no line's end)
    comment_ends = "*/" in whole
    del whole
    by_key = _digit_keys
    try:
        if keys is not None and not comment_ends:
            # Most texts: a statement a line, most of them of a digit key seen before (the
            # first step of _statement_items, here without a call a line).
            append = out.append
            for lineno, line, digit_key in zip(itertools.count(start + 1), own, keys):
                known = by_key.get(digit_key)
                if known is not None:
                    check, value, cut, build = known
                    if check is None or check(line) == value:
                        append(build(cut(line), lines, lineno))
                        continue
                _statement_items(line, digit_key, lineno, lines, out)
            return out
        high_word = _HIGH_WORD_LINE.match
        skip = False
        for lineno, line in enumerate(own, start + 1):
            if skip:
                skip = False
                continue
            digit_key = keys[lineno - 1 - start] if keys is not None else None
            if comment_ends and line.endswith("*/") and lineno < stop and high_word(texts[lineno]) and "#" not in line \
                    and "//" not in line:
                # A listing's instruction and the high word on the next line: one statement,
                # planned as one line (the positions of what stands on the first line are
                # those of that line; the second holds the hex alone).
                line += " " + texts[lineno]
                skip = True
                # (the address the listing prints before the instruction is not read: its
                # digits, zeroed, do not make a shape of each line)
                address = _LISTING_ADDRESS.match(line)
                if address is not None:
                    a, b = address.span(2)
                    line = line[:a] + "0" * (b - a) + line[b:]
                if digit_key is not None:
                    digit_key += " " + keys[lineno - start]
                    if address is not None:
                        digit_key = digit_key[:a] + "0" * (b - a) + digit_key[b:]
            _statement_items(line, digit_key, lineno, lines, out)
    except SassError:
        raise _WholeText from None
    return out


def _statement_items(line: str, digit_key: Optional[str], lineno: int, lines: Lines, out: list) -> None:
    """Append the items of one line (or of a listing's instruction joined into one) to `out`:
    built from the plan of its digit key or of its shape, or planned; raises SassError."""
    by_key = _digit_keys
    if digit_key is not None:
        known = by_key.get(digit_key)
        if known is not None and (known[0] is None or known[0](line) == known[1]):
            out.append(known[3](known[2](line), lines, lineno))
            return
    parts = NUMBER_IN_LINE.split(line)
    key = tuple(parts[::2])
    plans = _line_plans
    plan = plans.get(key)
    if plan is not None:
        if plan.statement is not None:
            out.append(plan.statement(parts, lines, lineno))
        elif plan.items:
            out.extend(plan.build(parts, lines, lineno))
    else:
        plan, items = _plan_line(line, parts, lineno, lines)
        out.extend(items)
        if plan is None:
            return
        if len(plans) >= _MAX_LINE_PLANS:
            plans.clear()
        plans[key] = plan
    if digit_key is not None and plan.statement is not None:
        if len(by_key) >= _MAX_LINE_PLANS:
            by_key.clear()
        by_key[digit_key] = _digit_key_entry(line, digit_key, parts, plan.statement)


def split_line(lines: Lines, near: int) -> int:
    """A line index at or after `near` where the text may be cut into two ranges that
    _line_items reads alone: not the high word of a listing's instruction."""
    texts = lines.lines
    while near < len(texts) and _HIGH_WORD_LINE.match(texts[near]):
        near += 1
    return near


def line_range_items(lines: Lines, start: int, stop: int) -> Optional[list]:
    """The items of lines start+1..stop (split_line's cuts) as parsing the whole text gives
    them, or None where that text is to be parsed whole (parse_items does)."""
    try:
        return _line_items(lines, start, stop)
    except _WholeText:
        return None


def parse_items(text: str, filename: str = "<input>", lines: Optional[Lines] = None) -> list:
    """Parse text into a flat list of Label, Instruction and directive tuples."""
    lines = lines or Lines(text, filename)
    try:
        return _line_items(lines)
    except _WholeText:
        pass
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as e:
        raise syntax_error(e, text, lines) from None
    try:
        return ItemBuilder(lines).transform(tree)
    except Exception as e:  # Lark wraps errors raised in callbacks
        inner = getattr(e, "orig_exc", e)
        if isinstance(inner, SassError):
            raise inner from None
        raise


def parse_instruction(text: str, filename: str = "<input>") -> Instruction:
    """Parse one instruction as nvdisasm prints it (the trailing ';' may be left out)."""
    t = text.strip()
    if not re.search(r";\s*(/\*.*\*/\s*)*$", t):
        t += " ;"
    items = parse_items(t, filename)
    insts = [i for i in items if isinstance(i, Instruction)]
    if len(insts) != 1:
        raise SassError(f"expected one instruction, found {len(insts)}", Loc(filename, 1, 1, text))
    return insts[0]


def parse_program(text: str, arch: str, filename: str = "<input>", lines: Optional[Lines] = None,
                  default_kernel: Optional[str] = None, diagnostics: Optional[Diagnostics] = None,
                  listing: bool = False, target: Optional[str] = None) -> Program:
    """Group the parsed items into kernels: `.kernel NAME` starts one; before any, the file's
    statements belong to a kernel named after the file (or `default_kernel`). Directives go to
    their kernel's declarations (Kernel.declarations) or to the module's data (Program.module):
    the front end binds the names (:mod:`sassas.frontend`), sassas.module checks the data.
    `target`: what an `.arch` line must name (`sm_90a`: the arch-specific target), `arch` if None.

    A syntax error is raised at once; the errors found after it (a name declared twice...) go
    to `diagnostics`, or are raised together at the end when none is given."""
    diags = diagnostics if diagnostics is not None else Diagnostics()
    program = group_items(parse_items(text, filename, lines), arch, filename, default_kernel, diags, target)
    # (an NVIDIA listing of a module without code, headers only, is an empty module)
    if not program.kernels and not listing:
        first = lines.loc(1, 1) if lines is not None else Loc(filename, 1, 1, text.split("\n", 1)[0])
        diags.error(SassError("nothing to assemble: the input has no instructions", first))
    if diagnostics is None:
        diags.raise_if_errors()
    return program


def group_items(items: list, arch: str, filename: str, default_kernel: Optional[str], diags: Diagnostics,
                target: Optional[str] = None) -> Program:
    """parse_program's grouping of parsed items into kernels and the module's data."""
    program = Program(arch=arch, file=filename)
    current: Optional[Kernel] = None

    def start_kernel(name: str, loc) -> Kernel:
        nonlocal current
        current = Kernel(name=name, loc=loc)
        program.kernels.append(current)
        return current

    def kernel_here(loc) -> Kernel:
        return current if current is not None else start_kernel(default_kernel or _stem(filename), loc)

    pending_raw = None
    append = None           # the current kernel's body.append, once an item went there
    for it in items:
        if not isinstance(it, tuple):
            if append is None:
                append = kernel_here(it.loc).body.append
            if pending_raw is not None and isinstance(it, Instruction):
                it.raw = pending_raw
                pending_raw = None
            append(it)
            continue
        append = None       # (a directive may start another kernel)
        kind, value, loc = it
        try:
            if kind in ("kernel", "func"):
                if any(k.name == value for k in program.kernels):
                    raise SassError(f"function '{value}' defined twice", loc)
                start_kernel(value, loc).entry = kind == "kernel"
            elif kind == "arch":
                if value != (target or arch):
                    raise SassError(f"this file is written for {value}, but --arch is {target or arch}", loc)
            elif kind == "raw":
                pending_raw = value
            elif kind in MODULE_DIRECTIVES:
                declare_module(program, kind, value, loc)
            else:
                _declare(kernel_here(loc), kind, value, loc)
        except SassError as e:
            diags.error(e)
    return program


# Directives of the module's data (sassas.module), which belong to no kernel.
MODULE_DIRECTIVES = frozenset({"global", "init", "bind", "moduleconst", "constsym", "extern"})


def declare_module(program: Program, kind: str, value, loc: Optional[Loc]) -> None:
    """A directive of the module's data, into Program.module."""
    m: ModuleData = program.module
    if kind == "constsym":
        bank, name, offset, size = value
        value = GlobalDecl(name, size, 1, offset, loc=loc)
        if name not in m.globals and name not in m.constsyms:
            m.constsyms[name] = (bank, value)
            return
        kind = "global"
    if kind == "global":
        decl: GlobalDecl = value
        if decl.name in m.globals or decl.name in m.constsyms:
            first = (m.globals[decl.name] if decl.name in m.globals else m.constsyms[decl.name][1]).loc
            raise SassError(f"global '{decl.name}' defined twice"
                            + (f" (first at line {first.line})" if first else ""), loc)
        m.globals[decl.name] = decl
    elif kind == "init":
        m.inits.append((*value, loc))
    elif kind == "bind":
        m.binds.append((*value, loc))
    elif kind == "moduleconst":
        bank, offset, word = value
        m.banks.setdefault(bank, []).append((offset, word, loc))
    elif kind == "extern":
        m.externs.setdefault(value, loc)


def _declare_name(decls: Declarations, name: str, loc: Optional[Loc]) -> None:
    if name in decls.locs:
        first = decls.locs[name]
        raise SassError(f"'{name}' declared twice" + (f" (first at {first})" if first else ""), loc)
    decls.locs[name] = loc


def _declare(k: Kernel, kind: str, value, loc) -> None:
    """A directive that declares something of kernel `k`."""
    decls = k.declarations
    if kind == "param":
        if any(p.name == value.name for p in k.params):
            raise SassError(f"parameter '{value.name}' declared twice", loc)
        k.params.append(value)
    elif kind == "shared":
        k.shared_bytes = value
    elif kind == "registers":
        k.registers = value
    elif kind == "maxthreads":
        k.max_threads = value
    elif kind == "minblocks":
        k.min_blocks = value
    elif kind == "constbank":
        bank, offset, word = value
        data = k.attributes.setdefault("constant_banks", {}).setdefault(bank, bytearray())
        if len(data) < offset + 4:
            data.extend(bytes(offset + 4 - len(data)))
        data[offset:offset + 4] = word.to_bytes(4, "little")
    elif kind == "reg":
        name, reg = value
        _declare_name(decls, name, loc)
        if reg is None:
            decls.autos.append(AutoName([name], loc))
        else:
            decls.registers[name] = (*reg, loc)
    elif kind == "regs":
        prefix, first, last, base = value
        names = [f"{prefix}{i}" for i in range(first, last + 1)]
        for name in names:
            _declare_name(decls, name, loc)
        if base is None:
            decls.autos.append(AutoName(names, loc))
        else:
            cls, n = base
            if n + len(names) - 1 > 254:
                raise SassError(f"'{prefix}<{first}-{last}>' from {cls}{n} runs past {cls}254", loc)
            for i, name in enumerate(names):
                decls.registers[name] = (cls, n + i, loc)
    elif kind == "const":
        name, size = value
        _declare_name(decls, name, loc)
        decls.consts.append((name, size, loc))
    elif kind == "smem":
        name, size, align = value
        _declare_name(decls, name, loc)
        decls.smem.append((name, size, align if align is not None else DEFAULT_SMEM_ALIGN, loc))


def _stem(filename: str) -> str:
    import os
    base = os.path.basename(filename)
    stem = base.rsplit(".", 1)[0] if "." in base else base
    stem = re.sub(r"\W", "_", stem) or "kernel"
    return "kernel" if stem in ("<input>", "_input_") else stem
