"""Parse stage: source text -> Program (kernels of labels and instructions), via grammar.lark."""
from __future__ import annotations

import functools
import hashlib
import itertools
import re
from importlib import resources
from typing import Optional

from lark import Lark, Token, Transformer
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from .ast import (DEFAULT_SMEM_ALIGN, AddressOf, AutoName, ControlCode, Declarations, GlobalDecl, Instruction, Kernel, Label,
                  Loc, ModuleData, Operand, Param, Program, Shape, SourceLine)
from .cache import cache_dir
from .control import read_control
from .errors import Diagnostics, SassError
from .operands import MAX_REGISTER, canonical_operand, parse_number, parse_register

# Spans of the `#`/`//` comments of the text being parsed (the line parser needs them).
_comment_spans: list[tuple[int, int]] = []


def _note_comment(tok: Token) -> Token:
    _comment_spans.append((tok.start_pos, tok.end_pos))
    return tok


@functools.lru_cache(maxsize=None)
def _parser() -> Lark:
    grammar = resources.files("sassas").joinpath("grammar.lark").read_text()
    # LALR with the contextual lexer: one pass, and a token is only tried where it may stand.
    # Building its tables takes a fifth to a third of a second, longer than assembling 50k
    # instructions: Lark keeps them in the cache directory, in a file that also holds a hash
    # of the grammar, the options and Lark's and Python's versions and is rebuilt when these
    # differ or it cannot be read (and passed by when it cannot be written).
    cache = cache_dir() / f"grammar-{hashlib.sha256(grammar.encode()).hexdigest()[:24]}.lark"
    return Lark(grammar, parser="lalr", lexer="contextual", propagate_positions=False,
                maybe_placeholders=False, cache=str(cache), lexer_callbacks={"COMMENT": _note_comment})


class Lines:
    """Maps positions in the parsed text back to source locations."""

    def __init__(self, text: str, filename: str, origins: Optional[list[Optional[Loc]]] = None,
                 sources: Optional[list[tuple[str, int]]] = None):
        self.filename = filename
        self.lines = text.split("\n")
        # origins[i]: where line i+1 was generated from (include, <code> block); None if written.
        self.origins = origins
        # sources[i]: (file, line) that line i+1 really stands on, when preprocessing moved it.
        self.sources = sources

    def info(self, line: int) -> SourceLine:
        """The source line that the Locs on parsed line `line` stand on."""
        n = len(self.lines)
        text = self.lines[line - 1] if 0 < line <= n else ""
        origin = self.origins[line - 1] if self.origins and 0 < line <= len(self.origins) else None
        file, src_line = self.filename, line
        if self.sources and 0 < line <= len(self.sources):
            file, src_line = self.sources[line - 1]
        return SourceLine(file, src_line, text, origin)

    def loc(self, line: int, col: int) -> Loc:
        return Loc.on(self.info(line), col)


# Operand is immutable (a frozen dataclass, whose __init__ sets each field through
# object.__setattr__); the parser makes some per instruction, so it sets their slots directly
# (the same objects, in a third of the time; see _compile_build).
_new_object = object.__new__
_OPERAND_SLOTS = tuple(Operand.__dict__[f].__set__ for f in ("kind", "values", "flags", "symbol"))


class _Build(Transformer):
    def __init__(self, lines: Lines, line_offset: int = 0):
        super().__init__(visit_tokens=False)
        self.L = lines
        self.line_offset = line_offset      # of a line parsed alone: the line before it

    def _loc(self, tok: Token) -> Loc:
        return self.L.loc(tok.line + self.line_offset, tok.column)

    def start(self, items):
        return items

    def label(self, items):
        tok = items[0]
        return Label(tok.value[:-1], self._loc(tok))

    # Operands stay atoms here: the statement turns them into Operands (through its plan).
    def operand(self, atoms):
        return atoms

    def operands(self, ops):
        return ops

    def statement(self, items):
        tokens = [it for it in items if isinstance(it, Token)]
        atom_lists = next((it for it in items if isinstance(it, list)), [])
        first_line = tokens[0].line

        def place(tok: Token):
            return (tok.line - first_line, 0, tok.column - 1), self._loc(tok)

        plan = _StatementPlan(tokens, atom_lists, place, None)
        return plan.build(("",), self.L, first_line + self.line_offset)

    def _num(self, tok: Token) -> int:
        v = parse_number(tok.value)
        if not isinstance(v, int):
            raise SassError(f"expected an integer, found '{tok.value}'", self._loc(tok))
        return v

    def kernel(self, items):
        return ("kernel", items[0].value, self._loc(items[0]))

    def func(self, items):
        return ("func", items[0].value, self._loc(items[0]))

    def param(self, items):
        name = items[0]
        size = self._num(items[1])
        align = self._num(items[2]) if len(items) > 2 else min(size, 8) if size in (1, 2, 4, 8) else 4
        return ("param", Param(name.value, size, align, loc=self._loc(name)), self._loc(name))

    def _directive_number(name):
        def f(self, items):
            return (name, self._num(items[0]), self._loc(items[0]))
        return f

    shared = _directive_number("shared")
    registers = _directive_number("registers")
    maxthreads = _directive_number("maxthreads")

    def _word(self, tok: Token):
        """A data directive's value: a 32-bit word, or `&name[+addend]` (an AddressOf)."""
        if tok.type == "ADDRESS_OF":
            m = re.fullmatch(r"&([A-Za-z_$][\w$]*)(?:([+-])(\w+))?", tok.value)
            addend = int(m.group(3), 0) * (-1 if m.group(2) == "-" else 1) if m.group(3) else 0
            if not -(1 << 63) <= addend < 1 << 63:
                raise SassError(f"'{tok.value}': the addend does not fit in 64 bits", self._loc(tok))
            return AddressOf(m.group(1), addend, self._loc(tok))
        word = self._num(tok)
        if not 0 <= word < 1 << 32:
            raise SassError(f"'{tok.value}' is not a 32-bit word", self._loc(tok))
        return word

    def constbank(self, items):
        bank, offset = self._num(items[0]), self._num(items[1])
        loc = self._loc(items[0])
        if not 1 <= bank <= 17 or offset % 4:
            raise SassError(".constbank takes a bank 1..17, a 4-byte aligned offset and a 32-bit word", loc)
        word = self._word(items[2])
        if isinstance(word, AddressOf):
            raise SassError(f"'&{word.name}': a kernel's own constant bank holds no addresses; module "
                            f"constant banks do (`.moduleconst {bank} 0x{offset:x} &{word.name}`)", word.loc)
        return ("constbank", (bank, offset, word), loc)

    def moduleconst(self, items):
        bank, offset = self._num(items[0]), self._num(items[1])
        loc = self._loc(items[0])
        if not 1 <= bank <= 17:
            raise SassError(f".moduleconst bank {bank}: module constant banks are 1..17 "
                            f"(bank 0 holds each kernel's parameters)", loc)
        word = self._word(items[2])
        align = 8 if isinstance(word, AddressOf) else 4
        if offset < 0 or offset % align:
            raise SassError(f".moduleconst offset 0x{offset:x} is not {align}-byte aligned"
                            + (" (an address takes 8 bytes)" if align == 8 else ""), self._loc(items[1]))
        return ("moduleconst", (bank, offset, word), loc)

    def global_object(self, items):
        name = items[0]
        size = self._num(items[1])
        align = self._num(items[2]) if len(items) > 2 else 1
        offset = self._num(items[3]) if len(items) > 3 else None
        if size <= 0:
            raise SassError(f"global '{name.value}' needs a positive size", self._loc(items[1]))
        if align <= 0 or align & (align - 1):
            raise SassError(f"global '{name.value}': alignment {align} is not a power of two", self._loc(items[2]))
        if offset is not None and (offset < 0 or offset % align):
            raise SassError(f"global '{name.value}': offset 0x{offset:x} is not a multiple of its "
                            f"alignment {align}", self._loc(items[3]))
        return ("global", GlobalDecl(name.value, size, align, offset, loc=self._loc(name)), self._loc(name))

    def init(self, items):
        name, offset = items[0], self._num(items[1])
        word = self._word(items[2])
        align = 8 if isinstance(word, AddressOf) else 4
        if offset < 0 or offset % align:
            raise SassError(f".init offset 0x{offset:x} is not {align}-byte aligned"
                            + (" (an address takes 8 bytes)" if align == 8 else ""), self._loc(items[1]))
        return ("init", (name.value, offset, word), self._loc(name))

    def constsym(self, items):
        bank, name, offset, size = self._num(items[0]), items[1], self._num(items[2]), self._num(items[3])
        if not 1 <= bank <= 17:
            raise SassError(f".constsym bank {bank}: module constant banks are 1..17", self._loc(items[0]))
        if size <= 0 or offset < 0:
            raise SassError(f".constsym '{name.value}' needs a positive size and offset", self._loc(items[3]))
        return ("constsym", (bank, name.value, offset, size), self._loc(name))

    def extern(self, items):
        return ("extern", items[0].value, self._loc(items[0]))

    def visible(self, items):
        return ("bind", (items[0].value, "visible"), self._loc(items[0]))

    def weak(self, items):
        return ("bind", (items[0].value, "weak"), self._loc(items[0]))
    minblocks = _directive_number("minblocks")
    align = _directive_number("align")

    def reg(self, items):
        name = items[0]
        reg = parse_register(items[1].value, self._loc(items[1])) if len(items) > 1 else None
        return ("reg", (name.value, reg), self._loc(name))

    def regs(self, items):
        name = items[0]
        first, last = self._num(items[1]), self._num(items[2])
        if last < first:
            raise SassError(f"'{name.value}<{first}-{last}>': the range runs backwards", self._loc(items[1]))
        if last - first > 254:
            raise SassError(f"'{name.value}<{first}-{last}>' has more names than there are registers",
                            self._loc(items[1]))
        base = parse_register(items[3].value, self._loc(items[3])) if len(items) > 3 else None
        return ("regs", (name.value, first, last, base), self._loc(name))

    def const(self, items):
        return ("const", (items[0].value, self._num(items[1])), self._loc(items[0]))

    def smem(self, items):
        size = self._num(items[1])
        align = self._num(items[2]) if len(items) > 2 else None
        return ("smem", (items[0].value, size, align), self._loc(items[0]))

    def arch(self, items):
        return ("arch", items[0].value, self._loc(items[0]))

    def raw(self, items):
        return ("raw", (self._num(items[0]), self._num(items[1])), self._loc(items[0]))


# ---- statements, built through a plan -------------------------------------------------------
# A statement's Instruction depends on its token types, on the text of its tokens, and on where
# they stand. A plan holds everything but the numbers of chosen tokens (registers R/UR and
# integer literals) and the columns, so that one plan serves every statement that differs from
# the one it was made from only there (see _line_items).

_FROM_REGISTER, _FROM_NUMBER, _FROM_NEGATED_NUMBER, _FROM_NAME, _FROM_NAME_SYMBOL = range(5)
# The numbers of R and UR registers as a line's numbers are cut out (decimal without leading
# zeros, in range), read by one lookup.
_REGISTER_NUMBERS = {prefix: {str(n): n for n in range(highest + 1)} for prefix, highest in MAX_REGISTER.items()}
# An operand that is a register alone (`R7`, `-R7.reuse`), by its number as cut out: one
# Operand for all the instructions that name it (operands are immutable and hold no location),
# made once per (register prefix, kind, flags) for every register number.
_register_operands: dict[tuple, dict[str, Operand]] = {}


def _register_operand_table(prefix: str, kind: str, flags: frozenset) -> dict[str, Operand]:
    key = (prefix, kind, flags)
    table = _register_operands.get(key)
    if table is None:
        table = _register_operands[key] = {d: Operand(kind, (n,), flags) for d, n in _REGISTER_NUMBERS[prefix].items()}
    return table


class _StatementPlan:
    """An Instruction with its numbers and positions left open.

    A position is (line offset, part, column offset): the column is ``start + offset + 1`` for
    the start of that text piece of the line (the numbers cut the line into pieces). The
    instructions it builds keep it with where they stand (Instruction.written), and it makes
    their Locs from that when a diagnostic asks (locs)."""
    __slots__ = ("opcode", "modifiers", "control", "control_words", "predicate", "operands", "where", "shape",
                 "cut", "build")

    def __init__(self, tokens: list, atom_lists: list, place, number_of):
        """tokens: the statement's own tokens; atom_lists: its operands' atoms; place(tok) ->
        (position, Loc); number_of(tok) -> the index of the open number it is, or None; or
        number_of None: a plan for this statement only, its text not cut (parts ``("",)``)."""
        self.cut = number_of is not None
        if number_of is None:
            number_of = lambda tok: None
        operands = []
        for atoms in atom_lists:
            where, loc = place(atoms[0])
            sources: dict = {}
            op = canonical_operand(atoms, loc, sources)
            fills = []
            # A name with a number at its end (`acc12`) is the operand's symbol where it is the
            # last name and no label follows (as canonical_operand sets it); a name of an
            # operand where that does not hold keeps its number uncut (no plan).
            names = [a for a, _ in sources.values() if atoms[a].type == "NAME"]
            symbol_atom = max(names) if names else None
            if names and (any(atom.type == "LABEL_REF" for atom in atoms[symbol_atom:])
                          or op.symbol != atoms[symbol_atom].value):
                names = []
            for value_index, (atom_index, negated) in sources.items():
                atom = atoms[atom_index]
                if atom.type == "NAME" and atom_index not in names:
                    continue
                number = number_of(atom)
                if number is None:
                    continue
                if atom.type == "REGISTER":
                    prefix = atom.value.rstrip("0123456789")
                    fills.append((value_index, number, _FROM_REGISTER, prefix))
                elif atom.type == "NAME":
                    fills.append((value_index, number, _FROM_NAME_SYMBOL if atom_index == symbol_atom else _FROM_NAME,
                                  atom.value.rstrip("0123456789")))
                else:
                    fills.append((value_index, number, _FROM_NEGATED_NUMBER if negated else _FROM_NUMBER, ""))
            # (kind, values, flags, symbol, fills, line, part, offset); fills: (value index,
            # number index, _FROM_*, register prefix)
            operands.append((op.kind, op.values, op.flags, op.symbol, tuple(fills), *where))
        control = predicate = None
        hexwords = []
        for tok in tokens:
            if tok.type == "CONTROL":
                control = read_control(tok.value, place(tok)[1])
            elif tok.type == "PREDICATE":
                predicate = _predicate(tok.value, place(tok)[1])      # (an Operand every build shares)
            elif tok.type == "MNEMONIC":
                mnemonic = tok
            elif tok.type == "HEXWORD":
                # (the open number it is, or None; its value here)
                hexwords.append((number_of(tok), int(tok.value[2:-2].strip(), 16)))
        # Listings print the control bits only inside the instruction's hex: take them from
        # bits 105..127 (and nothing else from the hex); from open numbers when built.
        self.control_words = None
        if control is None and len(hexwords) >= 2:
            (low_number, low), (high_number, high) = hexwords[:2]
            if low_number is None and high_number is None:
                control = ControlCode.from_word(high << 64 | low)
            else:
                self.control_words = hexwords[:2]
        parts = mnemonic.value.split(".")
        self.opcode, self.modifiers = parts[0], tuple(parts[1:])
        self.control, self.predicate, self.operands = control, predicate, tuple(operands)
        self.where = place(tokens[0] if tokens[0].type != "ADDRESS" else mnemonic)[0]
        self.shape = Shape.find(self.opcode, self.modifiers, None if predicate is None else (predicate.kind, predicate.flags),
                                tuple([(kind, flags) for kind, _, flags, *_ in operands]),
                                any(symbol is not None for _, _, _, symbol, *_ in operands))
        self.build = _compile_build(self)

    def locs(self, lines: Lines, lineno: int) -> tuple[Loc, tuple[Loc, ...]]:
        """The Locs of the statement built from this plan on line `lineno` of `lines` (its
        first line), and of its operands; the parts found again from the line's text, as
        _line_items cut it."""
        parts = _NUMBER_IN_LINE.split(lines.lines[lineno - 1]) if self.cut else ("",)
        starts = list(itertools.accumulate(map(len, parts), initial=0))[::2]

        def loc(line, part, offset):
            return Loc.on(lines.info(lineno + line), starts[part] + offset + 1)
        return loc(*self.where), tuple(loc(line, part, offset) for *_, line, part, offset in self.operands)


def _compile_build(plan: _StatementPlan):
    """plan.build(parts, lines, lineno) -> Instruction, as straight-line Python made for the
    plan (a generic loop over its parts took twice as long): for a line cut into text pieces
    and numbers (parts, as _NUMBER_IN_LINE.split gives them), standing on line `lineno` of
    `lines` (a Lines).

    Everything particular to the plan is a global name of the function, so its code depends on
    the plan's layout only (operands, numbers, lines): compiled once per layout (compiling
    takes a millisecond, as long as parsing the line), run with the plan's names.

    What it makes per statement is the Instruction and the operands that hold a cut number but
    are not a register alone: an operand without one is the plan's own, and a register alone is
    looked up (_register_operand_table). Locations are left to a diagnostic (plan.locs)."""
    names: dict = {"new": _new_object, "Operand": Operand, "Instruction": Instruction,
                   "ControlCode": ControlCode, "parse_register": parse_register, "plan": plan}
    for name, setter in zip(("kind", "values", "flags", "symbol"), _OPERAND_SLOTS):
        names["op_" + name] = setter

    def const(value) -> str:
        name = f"c{len(names)}"
        names[name] = value
        return name

    body = []
    operands = []
    for k, (kind, values, flags, symbol, fills, *_) in enumerate(plan.operands):
        var = f"op{k}"
        operands.append(var)
        if not fills:
            operands[-1] = const(Operand(kind, values, flags, symbol))
            continue
        if len(values) == 1 and fills[0][2] == _FROM_REGISTER:          # the operand is the register
            _, number, _, prefix = fills[0]
            body.append(f"d = parts[{2 * number + 1}]")
            body.append(f"{var} = {const(_register_operand_table(prefix, kind, flags))}.get(d)")
            # (leading zeros; or out of range, raising: _line_items then parses the whole text)
            body.append(f"if {var} is None: {var} = Operand({const(kind)}, (parse_register({const(prefix)} + d)[1],), "
                        f"{const(flags)}, {const(symbol)})")
            continue
        items = [const(v) for v in values]
        symbol_item = const(symbol)
        for value_index, number, how, prefix in fills:
            item = items[value_index] = f"v{k}_{value_index}"
            body.append(f"d = parts[{2 * number + 1}]")
            if how in (_FROM_NAME, _FROM_NAME_SYMBOL):
                body.append(f"{item} = {const(prefix)} + d")
                if how == _FROM_NAME_SYMBOL:
                    symbol_item = item
            elif how == _FROM_REGISTER:
                body.append(f"{item} = {const(_REGISTER_NUMBERS[prefix])}.get(d)")
                body.append(f"if {item} is None: {item} = parse_register({const(prefix)} + d)[1]")
            else:
                # (cut out: decimal digits, or 0x and hex digits)
                body.append(f"{item} = {'-' if how == _FROM_NEGATED_NUMBER else ''}"
                            f"(int(d, 16) if d[1:2] in ('x', 'X') else int(d))")
        body.append(f"{var} = new(Operand); op_kind({var}, {const(kind)}); "
                    f"op_values({var}, ({''.join(item + ', ' for item in items)})); "
                    f"op_flags({var}, {const(flags)}); op_symbol({var}, {symbol_item})")
    predicate = const(plan.predicate)
    control = const(plan.control)
    if plan.control_words is not None:
        low, high = (f"int(parts[{2 * number + 1}], 16)" if number is not None else const(value)
                     for number, value in plan.control_words)
        control = f"ControlCode.from_word({high} << 64 | {low})"
    opcode, modifiers = const(plan.opcode), const(plan.modifiers)
    body.append(f"operands = ({''.join(op + ', ' for op in operands)})")
    body.append(f"inst = Instruction({opcode}, {modifiers}, operands, {predicate}, {control}, (plan, lines, lineno))")
    # The shape is the plan's (Instruction.shape: found for these objects).
    body.append(f"inst._shape = ({const(plan.shape)}, operands, {predicate}, {modifiers}, {opcode})")
    body.append("return inst")
    source = "def build(parts, lines, lineno):\n" + "".join(f"    {line}\n" for line in body)
    code = _build_code.get(source)
    if code is None:
        code = _build_code[source] = compile(source, "<statement plan>", "exec")
    exec(code, names)
    return names["build"]


_build_code: dict[str, object] = {}


def _predicate(text: str, loc: Loc):
    from .operands import Atom
    neg = text[1] == "!"
    reg = text[2:] if neg else text[1:]
    atoms = ([Atom("BANG", "!")] if neg else []) + [Atom("REGISTER", reg)]
    return canonical_operand(atoms, loc)


_EXPECTED_NAMES = {
    "SEMICOLON": "';'", "COMMA": "','", "MNEMONIC": "an opcode", "REGISTER": "a register",
    "NUMBER": "a number", "NAME": "a name", "LBRACKET": "'['", "RBRACKET": "']'", "LBRACE": "'{'", "RBRACE": "'}'",
    "LABEL": "a label", "CONTROL": "a control code", "PREDICATE": "a predicate",
}


def _describe_expected(expected) -> str:
    names = sorted({_EXPECTED_NAMES.get(e, e) for e in expected if not e.startswith("__")})
    if len(names) > 6:
        return "an instruction, label or directive" if "an opcode" in names else ", ".join(names[:6]) + ", ..."
    return " or ".join(names)


_STATEMENT_START = re.compile(r"\s*([0-9a-fA-F-]{1,6}:[0-7-]:[0-7-]:[yY-]:[0-9a-fA-F]{1,2}|@|[A-Z][A-Z0-9_]*\b)")
_COMMENT_TAIL = re.compile(r"\s*(#|//).*$")


def _missing_semicolon(text: str, pos: int, lines: Lines) -> Optional[SassError]:
    """If the error sits on a line that starts a statement while the statement before it
    never ended, the real mistake is the missing ';' at the end of that earlier line."""
    line_start = text.rfind("\n", 0, pos) + 1
    if not _STATEMENT_START.match(text, line_start):
        return None
    prev_end = line_start - 1
    while prev_end > 0:
        prev_start = text.rfind("\n", 0, prev_end) + 1
        prev = _COMMENT_TAIL.sub("", text[prev_start:prev_end]).rstrip()
        if prev.strip():
            if prev.endswith((";", ":", "*/")) or prev.lstrip().startswith((".", "<")):
                return None
            line = text.count("\n", 0, prev_start) + 1
            return SassError("expected ';' after the instruction", lines.loc(line, len(prev) + 1))
        prev_end = prev_start - 1
    return None


def _syntax_error(e: UnexpectedInput, text: str, lines: Lines) -> SassError:
    pos = getattr(e, "pos_in_stream", None)
    if pos is None and isinstance(e, UnexpectedToken):
        pos = e.token.start_pos
    if pos is not None and pos >= 0:
        missing = _missing_semicolon(text, pos, lines)
        if missing is not None:
            return missing
    if isinstance(e, UnexpectedCharacters):
        ch = text[e.pos_in_stream] if e.pos_in_stream < len(text) else ""
        return SassError(f"unexpected character '{ch}'", lines.loc(e.line, e.column))
    if isinstance(e, UnexpectedEOF) or (isinstance(e, UnexpectedToken) and e.token.type == "$END"):
        pos = len(text.rstrip())
        line = text.count("\n", 0, pos) + 1
        col = pos - (text.rfind("\n", 0, pos) + 1) + 1
        exp = e.expected if hasattr(e, "expected") else ()
        what = "expected ';' at the end of the instruction" if "SEMICOLON" in exp else "unexpected end of input"
        return SassError(what, lines.loc(line, col))
    tok = e.token
    expected = set(e.expected)
    if "SEMICOLON" in expected and tok.type in ("MNEMONIC", "CONTROL", "PREDICATE", "LABEL", "ADDRESS"):
        # A statement ran on into the next line: point just after the last thing written.
        pos = tok.start_pos
        while pos > 0 and text[pos - 1].isspace():
            pos -= 1
        line = text.count("\n", 0, pos) + 1
        col = pos - (text.rfind("\n", 0, pos) + 1) + 1
        return SassError("expected ';' after the instruction", lines.loc(line, col))
    if tok.type == "MNEMONIC" and "MNEMONIC" not in expected:
        return SassError(f"unexpected '{tok.value}': expected {_describe_expected(expected)}",
                         lines.loc(tok.line, tok.column))
    if tok.type in ("NAME", "REGISTER", "NUMBER") and "MNEMONIC" in expected:
        return SassError(f"expected an opcode, found '{tok.value}' (opcodes are upper case)",
                         lines.loc(tok.line, tok.column))
    return SassError(f"unexpected '{tok.value}': expected {_describe_expected(expected)}",
                     lines.loc(tok.line, tok.column))


# ---- the text line by line ------------------------------------------------------------------
# Most lines are one statement or label, and differ from earlier lines only in register numbers
# and integer literals. _line_items parses each line on its own and keeps a plan per *shape*
# (the line with those numbers cut out, by _NUMBER_IN_LINE); a line of a known shape is built
# from the plan without the parser. Why this gives what parsing the whole text gives:
#
# - Lark's lexer decides on character classes: every terminal of grammar.lark reads the digits
#   cut out here as \d, \w or [0-9a-fA-F], except where a count or a digit matters (CONTROL,
#   PREDICATE, ADDRESS, P/UP/B/SB registers, HEXWORD's 1-16 digits). _NUMBER_IN_LINE only cuts
#   R (1-3 digits) and UR (1-2) register numbers, integers (hex up to 16 digits) not touching
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

_NUMBER_IN_LINE = re.compile(
    # Each choice starts at its first digit and looks back from there: the regex engine then
    # skips to digits quickly (this split runs on every line).
    r"([0-9](?:(?<=(?<![\w$.])R[0-9])[0-9]{0,2}(?![\w$])"          # R0..R999
    r"|(?<=(?<![\w$.])UR[0-9])[0-9]?(?![\w$])"                     # UR0..UR99
    r"|(?<![\w$.:*-][0-9])(?:(?<=0)[xX][0-9a-fA-F]{1,16}|[0-9]*)(?![\w$.:-])"     # 0x1f, 12
    r"|(?<=[a-z][0-9])(?<![0-9.][a-z][0-9])[0-9]*(?![\w$*])))")                # acc12: a name's number
# The second line of an instruction in a listing: its high 64 bits alone, in a comment.
_HIGH_WORD_LINE = re.compile(r"\s*/\*\s*0x[0-9a-fA-F]{1,16}\s*\*/\s*$")
# The address a listing prints before an instruction (`/*0aa0*/`): never cut (it touches `*`),
# not read; zeroed for the line's shape.
_LISTING_ADDRESS = re.compile(r"^(\s*/\*)([0-9a-fA-F]{4,})(?=\*/)")
_line_plans: dict[tuple, "_LinePlan"] = {}
_MAX_LINE_PLANS = 100_000


def _zeroed(m: re.Match) -> str:
    return m.group(1) + "0" * len(m.group(2))


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
    """The items of one line shape: ('label', name, position) or ('statement', _StatementPlan)."""
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
            plan = _StatementPlan(tokens, atom_lists, place, number_of)
            plan_items.append(("statement", plan))
        elif item.data == "label":
            tok = item.children[0]
            number_of(tok)
            plan_items.append(("label", tok.value[:-1], position(tok)))
        else:
            # A directive: built as the whole-text parse builds it, never planned.
            cacheable = False
            try:
                built_item = _Build(lines, lineno - 1).transform(item)
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


def _line_items(lines: Lines) -> list:
    """The items of the parsed text, line by line through the line plans; raises _WholeText."""
    out = []
    plans = _line_plans
    split = _NUMBER_IN_LINE.split
    texts = lines.lines
    high_word = _HIGH_WORD_LINE.match
    try:
        skip = False
        for lineno, line in enumerate(texts, 1):
            if skip:
                skip = False
                continue
            if line.endswith("*/") and lineno < len(texts) and high_word(texts[lineno]) and "#" not in line \
                    and "//" not in line:
                # A listing's instruction and the high word on the next line: one statement,
                # planned as one line (the positions of what stands on the first line are
                # those of that line; the second holds the hex alone).
                line += " " + texts[lineno]
                skip = True
                # (the address the listing prints before the instruction is not read: its
                # digits, zeroed, do not make a shape of each line)
                line = _LISTING_ADDRESS.sub(_zeroed, line, 1)
            parts = split(line)
            key = tuple(parts[::2])
            plan = plans.get(key)
            if plan is not None:
                if plan.statement is not None:
                    out.append(plan.statement(parts, lines, lineno))
                elif plan.items:
                    out.extend(plan.build(parts, lines, lineno))
                continue
            plan, items = _plan_line(line, parts, lineno, lines)
            if plan is not None:
                if len(plans) >= _MAX_LINE_PLANS:
                    plans.clear()
                plans[key] = plan
            out.extend(items)
    except SassError:
        raise _WholeText from None
    return out


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
        raise _syntax_error(e, text, lines) from None
    try:
        return _Build(lines).transform(tree)
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
                  listing: bool = False) -> Program:
    """Group the parsed items into kernels: `.kernel NAME` starts one; before any, the file's
    statements belong to a kernel named after the file (or `default_kernel`). Directives go to
    their kernel's declarations (Kernel.declarations) or to the module's data (Program.module):
    the front end binds the names (:mod:`sassas.frontend`), sassas.module checks the data.

    A syntax error is raised at once; the errors found after it (a name declared twice...) go
    to `diagnostics`, or are raised together at the end when none is given."""
    diags = diagnostics if diagnostics is not None else Diagnostics()
    items = parse_items(text, filename, lines)
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
                if value != arch:
                    raise SassError(f"this file is written for {value}, but --arch is {arch}", loc)
            elif kind == "raw":
                pending_raw = value
            elif kind in MODULE_DIRECTIVES:
                declare_module(program, kind, value, loc)
            else:
                _declare(kernel_here(loc), kind, value, loc)
        except SassError as e:
            diags.error(e)
    # (an NVIDIA listing of a module without code, headers only, is an empty module)
    if not program.kernels and not listing:
        first = lines.loc(1, 1) if lines is not None else Loc(filename, 1, 1, text.split("\n", 1)[0])
        diags.error(SassError("nothing to assemble: the input has no instructions", first))
    if diagnostics is None:
        diags.raise_if_errors()
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
