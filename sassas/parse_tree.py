"""The parse tree to items: Lark's tree of a statement (grammar.lark) -> a Label, an Instruction or
a directive tuple (ItemBuilder); the plans that build a statement again for other register
numbers and literals without the parser (StatementPlan, used by sassas.parse's line plans); the
syntax errors' messages (syntax_error); Lines, which maps positions in the parsed text back to
source locations."""
from __future__ import annotations

import re
from typing import Optional

from lark import Token, Transformer
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from .ast import (OPERAND_SETTERS, SELF_BOUND, UNBOUND, AddressOf, ControlCode, GlobalDecl, Instruction, Label, Loc,
                  Operand, Param, Shape, SourceLine, bind_to_itself, names_nothing, shape_part)
from .control import control_from_notes, format_notes, read_control
from .errors import SassError
from .operands import MAX_REGISTER, Atom, canonical_operand, parse_number, parse_register


# The numbers a line plan cuts out of a line (its register numbers and integer literals): a line's
# shape is what is left (see the line plans in sassas.parse for why that is safe).
NUMBER_IN_LINE = re.compile(
    # Each choice starts at its first digit and looks back from there: the regex engine then
    # skips to digits quickly (this split runs on every line).
    r"([0-9](?:(?<=(?<![\w$.])R[0-9])[0-9]{0,2}(?![\w$])"          # R0..R999
    r"|(?<=(?<![\w$.])UR[0-9])[0-9]{0,2}(?![\w$])"                # UR0..UR999
    r"|(?<![\w$.:*-][0-9])(?:(?<=0)[xX][0-9a-fA-F]{1,16}|[0-9]*)(?![\w$.:-])"     # 0x1f, 12
    r"|(?<=[a-z][0-9])(?<![0-9.][a-z][0-9])[0-9]*(?![\w$*])))")                # acc12: a name's number


class Lines:
    """Maps positions in the parsed text back to source locations."""

    def __init__(self, text: str, filename: str, origins: Optional[list[Optional[Loc]]] = None,
                 sources: Optional[list[tuple[str, int]]] = None, lines: Optional[list[str]] = None):
        """`lines`: text.split("\n"), where the caller has it."""
        self.filename = filename
        self.lines = lines if lines is not None else text.split("\n")
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
# (the same objects, in a third of the time; see _compile_build and ast.new_operand).
_new_object = object.__new__


class ItemBuilder(Transformer):
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

        plan = StatementPlan(tokens, atom_lists, place, None)
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


# An operand that is a name alone (`acc12`), by the number at its end as cut out, per (the
# name's prefix, kind, flags): made where a line first names it, and kept, as the registers'.
_name_operands: dict[tuple, dict[str, Operand]] = {}


# An operand that holds a cut number but is not a register or a name alone (`[addr+0x10]`,
# `0x4`, `n[0]`), by its values and symbol, per (kind, flags, the plan's symbol): kept up to
# _MAX_VALUE_OPERANDS a table (the numbers of a large file's immediates and offsets can be many).
_value_operands: dict[tuple, dict[tuple, Operand]] = {}
_MAX_VALUE_OPERANDS = 1 << 16


def _register_operand_table(prefix: str, kind: str, flags: frozenset) -> dict[str, Operand]:
    key = (prefix, kind, flags)
    table = _register_operands.get(key)
    if table is None:
        table = _register_operands[key] = {d: bind_to_itself(Operand(kind, (n,), flags))
                                           for d, n in _REGISTER_NUMBERS[prefix].items()}
    return table


class StatementPlan:
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
        notes = []
        for tok in tokens:
            if tok.type == "CONTROL_NOTE":
                notes.append(tok)
            elif tok.type == "CONTROL":
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
        if notes:
            control = _noted_control(control, notes, tokens, place)
        elif control is None and len(hexwords) == 1 and tokens[0].type == "ADDRESS":
            # A listing line with its low word alone (cuobjdump 12.8, sm_120): no annotation
            # is the control code at its defaults.
            control = control_from_notes([])
        elif control is None and len(hexwords) >= 2:
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

    def loc(self, lines: Lines, lineno: int, operand: Optional[int] = None) -> Loc:
        """The Loc of the statement built from this plan on line `lineno` of `lines` (its first
        line), or of its operand `operand`; the parts found again from the line's text, as
        _line_items cut it (where the place is not in the first)."""
        line, part, offset = self.where if operand is None else self.operands[operand][-3:]
        start = 0
        if part:
            parts = NUMBER_IN_LINE.split(lines.lines[lineno - 1]) if self.cut else ("",)
            start = sum(map(len, parts[:2 * part]))
        return Loc.on(lines.info(lineno + line), start + offset + 1)


def _noted_control(control: Optional[ControlCode], notes: list, tokens: list, place) -> ControlCode:
    """The control code of a statement annotated as cuobjdump 12.8 prints sm_120 code
    (`&wr=0x1 ?trans1`), checked against its control prefix and its hex words where it has
    them. (Such a line is never planned: its hex words are read here, not built.)"""
    noted = control_from_notes([t.value for t in notes], place(notes[0])[1])
    fields = lambda c: (c.stall, c.yield_, c.write_barrier, c.read_barrier, c.wait_mask)
    hexwords = [t for t in tokens if t.type == "HEXWORD"]
    if control is None and len(hexwords) >= 2:
        low, high = (int(t.value[2:-2].strip(), 16) for t in hexwords[:2])
        control, given = ControlCode.from_word(high << 64 | low), "the hex words"
    else:
        given = "the control prefix"
    if control is not None and fields(control) != fields(noted):
        raise SassError(f"control annotations '{' '.join(t.value for t in notes)}' disagree with {given}, "
                        f"which say '{format_notes(control) or '(none)'}'", place(notes[0])[1])
    return control or noted


def _compile_build(plan: StatementPlan):
    """plan.build(parts, lines, lineno) -> Instruction, as straight-line Python made for the
    plan (a generic loop over its parts took twice as long): for a line cut into text pieces
    and numbers (parts, as NUMBER_IN_LINE.split gives them), standing on line `lineno` of
    `lines` (a Lines).

    Everything particular to the plan is a global name of the function, so its code depends on
    the plan's layout only (operands, numbers, lines): compiled once per layout (compiling
    takes a millisecond, as long as parsing the line), run with the plan's names.

    What it makes per statement is the Instruction and the operands that hold a cut number but
    are not a register alone: an operand without one is the plan's own, and a register alone is
    looked up (_register_operand_table), and so is a name alone (_name_operands). Locations
    are left to a diagnostic (plan.loc)."""
    names: dict = {"new": _new_object, "Operand": Operand, "Instruction": Instruction, "controls": _controls,
                   "control_of_bits": _control_of_bits, "parse_register": parse_register, "plan": plan}
    for name, setter in zip(("kind", "values", "flags", "symbol", "binding"), OPERAND_SETTERS):
        names["op_" + name] = setter
    names["not_bound"] = UNBOUND
    names["self_bound"] = SELF_BOUND

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
            op = Operand(kind, values, flags, symbol)
            operands[-1] = const(bind_to_itself(op) if names_nothing(op) else op)
            continue
        if len(values) == 1 and fills[0][2] == _FROM_NAME_SYMBOL and symbol == values[0]:
            # The operand is a name alone (`acc12`): one Operand for every instruction that names it.
            _, number, _, prefix = fills[0]
            table = _name_operands.setdefault((prefix, kind, flags), {})
            body.append(f"d = parts[{2 * number + 1}]")
            body.append(f"{var} = {const(table)}.get(d)")
            body.append(f"if {var} is None: {var} = {const(table)}[d] = Operand({const(kind)}, ({const(prefix)} + d,), "
                        f"{const(flags)}, {const(prefix)} + d)")
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
        if not plan.shape.symbolic:
            body.append(f"{var} = new(Operand); op_kind({var}, {const(kind)}); "
                        f"op_values({var}, ({''.join(item + ', ' for item in items)})); "
                        f"op_flags({var}, {const(flags)}); op_symbol({var}, {symbol_item}); op_binding({var}, not_bound)")
            continue
        # An instruction with names, which the front end binds operand by operand: one Operand
        # for every instruction of the plan that writes the same numbers here (`[addr+0x10]`,
        # `0x4`), as for a register or a name alone, so that it is bound once. (Not for the
        # instructions without names: looking each one up costs more than making it.)
        table = const(_value_operands.setdefault((kind, flags, symbol), {}))
        # (one that names nothing, `0x10` or `[R2+0x10]`, bound to itself: SELF_BOUND)
        self_bound = (symbol is None and all(how not in (_FROM_NAME, _FROM_NAME_SYMBOL) for _, _, how, _ in fills)
                      and names_nothing(Operand(kind, values, flags)))
        body.append(f"key = ({''.join(item + ', ' for item in items)}{symbol_item},)")
        body.append(f"{var} = {table}.get(key)")
        body.append(f"if {var} is None:")
        body.append(f"    if len({table}) >= {_MAX_VALUE_OPERANDS}: {table}.clear()")
        body.append(f"    {var} = {table}[key] = new(Operand); op_kind({var}, {const(kind)}); "
                    f"op_values({var}, key[:-1]); op_flags({var}, {const(flags)}); op_symbol({var}, key[-1]); " +
                    (f"op_binding({var}, (self_bound, {var}, {const(shape_part(kind, flags, False))}))"
                     if self_bound else f"op_binding({var}, not_bound)"))
    predicate = const(plan.predicate)
    control = const(plan.control)
    if plan.control_words is not None:
        # (ControlCode.from_word of the two words: its bits from 105 are the high word's from 41)
        number, value = plan.control_words[1]
        high = f"int(parts[{2 * number + 1}], 16)" if number is not None else const(value)
        body.append(f"c = {high} >> 41")
        body.append("control = controls.get(c) or control_of_bits(c)")
        control = "control"
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
# The control codes of listing lines, by their bits: one ControlCode for each (a listing
# repeats a few hundred of them; a ControlCode is immutable).
_controls: dict[int, ControlCode] = {}


def _control_of_bits(bits: int) -> ControlCode:
    control = _controls[bits] = ControlCode.from_bits(bits)
    return control


def _predicate(text: str, loc: Loc):
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


def syntax_error(e: UnexpectedInput, text: str, lines: Lines) -> SassError:
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
