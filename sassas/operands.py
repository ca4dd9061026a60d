"""Canonical operands: atoms from the grammar -> Operand(kind, values, flags), and back to text.

See the table in :mod:`sassas.ast`. The rules, in short:
- registers become their class letters in the kind (R, UR, P, UP, B, SB) and their number in
  values (RZ = URZ = 255, PT = UPT = 7);
- numbers become ``I`` (value int or float), special registers ``SR`` (value the name),
  branch targets and symbolic names ``L``/``N`` (value the name, until resolved);
- ``-``, ``|..|``, ``!``, ``~`` before the operand, and register suffixes (``.64``, ``.H1``,
  ``.reuse`` -> ``reuse``) are flags; a suffix belongs to the operand's first register;
- a bracket group that holds a register and no number gets an explicit ``+I`` = 0, so
  ``[R2]`` and ``[R2+0x8]`` are one kind; it is printed back without ``+0x0``.
"""
from __future__ import annotations

import math
import re
from typing import Iterable, Sequence

from .ast import SCOREBOARD_SET, ZERO_NAMES, Loc, Operand, SymbolRef
from .errors import SassError

REGISTER_ZERO = {"R": 255, "UR": 255, "P": 7, "UP": 7}
_REGISTER = re.compile(r"(UR|UP|SB|R|P|B)(\d+|Z|T)$")

# Bare words that are operands in their own right: the predicate register files that P2R/R2P
# and UP2UR/UR2UP move as a whole.
OPERAND_KEYWORDS = frozenset({"PR", "UPR"})
# The highest register a program may name, per class; the one above is the zero/true register
# (RZ, URZ, PT, UPT), written by name. UR0..UR254 is Blackwell's uniform register file; an arch
# with fewer (sm_75..sm_90: UR0..UR62) refuses the others in the ISA layer.
MAX_REGISTER = {"R": 254, "UR": 254, "P": 6, "UP": 6, "B": 15, "SB": 7}
# CUDA's launch dimensions (TuringAs names): their offsets from the arch's launch_base in
# constant bank 0 (0 on sm_70..sm_90, 0x360 on Blackwell); the resolver adds the base.
LAUNCH_CONSTANTS = {
    ("blockDim", ".x"): 0x0, ("blockDim", ".y"): 0x4, ("blockDim", ".z"): 0x8,
    ("gridDim", ".x"): 0xC, ("gridDim", ".y"): 0x10, ("gridDim", ".z"): 0x14,
}
LAUNCH_NAMES = frozenset(name + suffix for name, suffix in LAUNCH_CONSTANTS)


class Atom:
    """One lexical piece of an operand: a token type and its text (from Lark or built)."""
    __slots__ = ("type", "value", "line", "column")

    def __init__(self, type: str, value: str, line: int = 0, column: int = 0):
        self.type, self.value, self.line, self.column = type, value, line, column


def parse_register(text: str, loc: Loc | None = None) -> tuple[str, int]:
    m = _REGISTER.match(text)
    assert m, text
    cls, num = m.groups()
    if num in ("Z", "T"):
        return cls, REGISTER_ZERO[cls]
    n = int(num)
    if n > MAX_REGISTER[cls]:
        zero = ZERO_NAMES.get((cls, MAX_REGISTER[cls] + 1))
        hint = f"; {zero} names register {MAX_REGISTER[cls] + 1}" if zero and n == MAX_REGISTER[cls] + 1 else ""
        raise SassError(f"register {text} out of range: {cls} registers are {cls}0..{cls}{MAX_REGISTER[cls]}{hint}", loc)
    return cls, n


def parse_number(text: str) -> int | float:
    t = text.lstrip("+")
    neg = t.startswith("-")
    body = t[1:] if neg else t
    up = body.upper()
    if up in ("INF", "QNAN", "SNAN", "NAN"):
        v = math.inf if up == "INF" else math.nan
        return -v if neg else v
    if up.startswith("0X"):
        v = int(body, 16)
    elif body.isdecimal():          # \d+, without the regex: every integer literal passes here
        v = int(body)
    else:
        v = float(body)
    return -v if neg else v


def canonical_operand(atoms: Sequence, loc: Loc | None = None, sources: dict | None = None) -> Operand:
    """Build an Operand from the grammar's atoms (objects with .type and .value); `loc`, where
    the operand stands, is for the errors.

    With ``sources``, records where each value that a number or a name of the text gives
    comes from: value index -> (atom index, negated). Those values depend on nothing else, which lets
    the parser rebuild the operand for other numbers (see sassas.parse)."""
    kind: list[str] = []
    values: list = []
    flags: set[str] = set()
    symbol = None
    i, n = 0, len(atoms)

    def fail(msg: str):
        raise SassError(f"malformed operand: {msg}", loc)

    if n >= 3 and atoms[0].type == "NUMBER" and atoms[1].type == "AT":
        return _relocated_immediate(atoms, fail)
    if atoms[0].type == "LBRACE":
        return _scoreboard_set(atoms, fail)

    # Prefix operators apply to the whole operand.
    abs_open = False
    while i < n and atoms[i].type in ("MINUS", "BANG", "TILDE", "BAR"):
        t = atoms[i].type
        flag = {"MINUS": "-", "BANG": "!", "TILDE": "~", "BAR": "|"}[t]
        if flag in flags:
            fail(f"'{atoms[i].value}' written twice")
        flags.add(flag)
        abs_open = abs_open or t == "BAR"
        i += 1
    if i == n:
        fail("nothing after the operator")

    depth = 0
    group_has_reg = group_has_num = False
    group_is_descriptor = False
    first_reg_seen = False
    while i < n:
        a = atoms[i]
        t, v = a.type, a.value
        if t == "REGISTER":
            cls, num = parse_register(v, loc)
            if sources is not None:
                sources[len(values)] = (i, False)
            kind.append(cls)
            values.append(num)
            group_has_reg = True
            # Suffixes of the operand's first register are the operand's flags.
            j = i + 1
            while j < n and atoms[j].type == "SUFFIX":
                s = atoms[j].value
                if not first_reg_seen or s == ".reuse":
                    flag = "reuse" if s == ".reuse" else s
                    if flag in flags:
                        fail(f"'{s}' written twice")
                    flags.add(flag)
                else:
                    kind.append(s)
                j += 1
            first_reg_seen = True
            i = j
            continue
        if t == "SPECIAL_REGISTER":
            kind.append("SR")
            values.append(v)
        elif t in ("NUMBER", "FLOAT"):
            if depth and v[0] == "-" and i and atoms[i - 1].type in ("REGISTER", "NAME", "SUFFIX"):
                # `[R2-0x10]`: the lexer reads `-0x10` as one number; after a register it is the
                # offset's sign, as in `[R2 - 0x10]`.
                kind.append("+")
            if sources is not None:
                sources[len(values)] = (i, False)
            kind.append("I")
            values.append(parse_number(v))
            group_has_num = True
        elif t == "LABEL_REF":
            kind.append("L")
            values.append(v[2:-1])
            symbol = v[2:-1]
        elif t == "NAME":
            if v == "c" and i + 1 < n and atoms[i + 1].type == "LBRACKET":
                kind.append("C")
            elif i + 1 < n and atoms[i + 1].type == "LBRACKET" and v in ("desc", "gdesc", "tmem"):
                kind.append(v)
            elif v in OPERAND_KEYWORDS:
                kind.append(v)
            elif i + 1 < n and atoms[i + 1].type == "SUFFIX" and (v, atoms[i + 1].value) in LAUNCH_CONSTANTS:
                kind.append("C[I][I]")
                values.extend((0, LAUNCH_CONSTANTS[(v, atoms[i + 1].value)]))
                symbol = v + atoms[i + 1].value
                i += 2
                continue
            else:
                # A label, parameter or register alias: the resolver decides.
                if sources is not None:
                    sources[len(values)] = (i, False)
                kind.append("N")
                values.append(v)
                symbol = v
                # A name in brackets is a register alias (or an offset): it gets the `+I` too.
                group_has_reg = group_has_reg or depth > 0
        elif t == "LBRACKET":
            depth += 1
            group_has_reg = group_has_num = False
            # `desc[UR4]`, `gdesc[UR4]`: a descriptor register, not an address: no offset.
            group_is_descriptor = bool(kind) and kind[-1] in ("desc", "gdesc", "tmem")
            kind.append("[")
        elif t == "RBRACKET":
            if depth == 0:
                fail("']' without '['")
            if group_has_reg and not group_has_num and not group_is_descriptor:
                kind.append("+I")
                values.append(0)
            depth -= 1
            kind.append("]")
        elif t == "PLUS":
            kind.append("+")
        elif t == "MINUS":
            # `[R1-0x8]`: a minus before a number inside brackets is the number's sign.
            if i + 1 < n and atoms[i + 1].type in ("NUMBER", "FLOAT"):
                if sources is not None:
                    sources[len(values)] = (i + 1, True)
                kind.append("+")
                values.append(-parse_number(atoms[i + 1].value))
                kind.append("I")
                group_has_num = True
                i += 2
                continue
            fail("unexpected '-'")
        elif t == "BAR":
            if not abs_open:
                fail("'|' without a matching '|'")
            abs_open = False
        elif t == "SUFFIX":
            flag = "reuse" if v == ".reuse" else v
            if flag in flags:
                fail(f"'{v}' written twice")
            flags.add(flag)
        elif t in ("AT", "LPAR", "RPAR", "BANG", "TILDE"):
            kind.append(v)
        else:
            fail(f"unexpected '{v}'")
        i += 1
    if depth:
        fail("missing ']'")
    if abs_open:
        fail("missing closing '|'")
    k = "".join(_join_kind(kind))
    return Operand(kind=k, values=tuple(values), flags=frozenset(flags), symbol=symbol)


# What may stand inside `32@lo(...)`: nvdisasm's `name`, `(name + label@srel)`, and a constant
# addend `(name + 0x10)` (the atoms' texts joined without spaces).
_RELOCATION_TARGET = re.compile(
    r"\(?(?P<name>[A-Za-z_$.][\w$.]*)"
    r"(?:(?P<sign>[+-])(?:(?P<label>[A-Za-z_$.][\w$.]*)@srel|(?P<addend>0[xX][0-9a-fA-F]+|\d+)))?\)?")


def _relocated_immediate(atoms: Sequence, fail) -> Operand:
    """`32@lo(name)` and the like: a 32-bit immediate the driver fills in (value 0 here, the
    SymbolRef saying with what)."""
    width, part = atoms[0].value, atoms[2].value if atoms[2].type == "NAME" else ""
    if width != "32" or part not in ("lo", "hi"):
        fail(f"expected 32@lo(symbol) or 32@hi(symbol), found '{width}@{atoms[2].value}'")
    inner = "".join(a.value for a in atoms[3:])
    m = _RELOCATION_TARGET.fullmatch(inner[1:-1]) if inner.startswith("(") and inner.endswith(")") else None
    if m is None or (m.group(0).startswith("(") != m.group(0).endswith(")")):
        fail(f"expected 32@{part}(symbol), 32@{part}((symbol + label@srel)) or 32@{part}((symbol + offset)), "
             f"found '32@{part}{inner}'")
    if m.group("label") is not None and m.group("sign") != "+":
        fail(f"'{m.group('sign')} {m.group('label')}@srel': a label's offset is added, not subtracted")
    addend = int(m.group("addend"), 0) if m.group("addend") else 0
    ref = SymbolRef(part, m.group("name"), m.group("label"), -addend if m.group("sign") == "-" else addend)
    return Operand(kind="I", values=(0,), symbol=ref)


def _scoreboard_set(atoms: Sequence, fail) -> Operand:
    """`{4,3,2,1}`: scoreboards DEPBAR waits on besides its first operand's; kind ``{I}``, the
    value a mask with bit n for SBn (the instruction holds it so)."""
    mask = 0
    for a in atoms[1:-1]:
        n = parse_number(a.value)
        if not isinstance(n, int) or not 0 <= n <= MAX_REGISTER["SB"]:
            fail(f"expected scoreboard numbers 0..{MAX_REGISTER['SB']} in {{...}}, found '{a.value}'")
        if mask >> n & 1:
            fail(f"scoreboard {n} written twice in {{...}}")
        mask |= 1 << n
    return Operand(kind=SCOREBOARD_SET, values=(mask,))


def _join_kind(parts: list[str]) -> Iterable[str]:
    # Kind pieces are concatenated except that two value pieces side by side
    # (`RET.REL.NODEC R20 `(fn)``) are kept apart by a space.
    prev_value = False
    for p in parts:
        is_value = p in ("R", "UR", "P", "UP", "B", "SB", "SR", "I", "L", "N")
        if is_value and prev_value:
            yield " "
        yield p
        prev_value = is_value or p == "]"
