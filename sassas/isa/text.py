"""nvdisasm text <-> Instruction, for the ISA layer.

Uses the project's parser (:func:`sassas.parse.parse_instruction`) when it exists; until then
(and as a cross-check) a small tokenizer that feeds the same operand canonicaliser
(:func:`sassas.operands.canonical_operand`), so both give identical Instructions.
"""
from __future__ import annotations

import re
from typing import Optional

from ..ast import Instruction, Operand
from ..errors import SassError
from ..operands import Atom, canonical_operand

_TOKEN = re.compile(r"""
    (?P<LABEL_REF>`\([^)]*\))
  | (?P<REGISTER>(?:R\d{1,3}|RZ|UR\d{1,2}|URZ|P[0-7]|PT|UP[0-7]|UPT|B\d{1,2}|SB\d)(?![\w$]))
  | (?P<SPECIAL_REGISTER>SR_[A-Za-z0-9_]+(?:\.[XYZ])?(?![\w$])|SRZ(?![\w$])|SR\d+(?![\w$]))
  | (?P<FLOAT>[+-]?(?:\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|INF|QNAN|SNAN|NAN)(?![\w$]))
  | (?P<NUMBER>-?(?:0[xX][0-9a-fA-F]+|\d+)(?![\w$]))
  | (?P<NAME>[A-Za-z_$][\w$]*)
  | (?P<SUFFIX>\.[A-Za-z0-9_]+)
  | (?P<LBRACKET>\[) | (?P<RBRACKET>\]) | (?P<PLUS>\+) | (?P<MINUS>-) | (?P<BAR>\|)
  | (?P<BANG>!) | (?P<TILDE>~) | (?P<AT>@) | (?P<LPAR>\() | (?P<RPAR>\))
  | (?P<SPACE>\s+)
""", re.X)
_HEAD = re.compile(r"^\s*(?:@(?P<neg>!?)(?P<pred>U?P[0-7T]))?\s*(?P<mnemonic>[A-Z][A-Z0-9_]*(?:\.[A-Za-z0-9_]+)*)\s*(?P<rest>.*?)\s*;?\s*$")


def _atoms(text: str) -> list[Atom]:
    atoms, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise SassError(f"cannot read operand text {text!r} at {text[pos:]!r}")
        if m.lastgroup != "SPACE":
            atoms.append(Atom(m.lastgroup, m.group()))
        pos = m.end()
    return atoms


def _split_operands(rest: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in rest:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def parse_instruction_fallback(text: str) -> Instruction:
    m = _HEAD.match(text)
    if not m:
        raise SassError(f"cannot read instruction {text!r}")
    predicate: Optional[Operand] = None
    if m.group("pred"):
        cls = "UP" if m.group("pred").startswith("U") else "P"
        num = 7 if m.group("pred").endswith("T") else int(m.group("pred")[-1])
        predicate = Operand(cls, (num,), frozenset({"!"} if m.group("neg") else ()))
    opcode, *mods = m.group("mnemonic").split(".")
    operands = tuple(canonical_operand(_atoms(p)) for p in _split_operands(m.group("rest")))
    return Instruction(opcode=opcode, modifiers=tuple(mods), operands=operands, predicate=predicate)


def parse_instruction(text: str) -> Instruction:
    """One nvdisasm instruction line (without address/hex comments) -> Instruction."""
    try:
        from ..parse import parse_instruction as project_parse
    except ImportError:
        return parse_instruction_fallback(text)
    return project_parse(text)
