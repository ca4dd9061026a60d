"""Operand kinds, the vocabulary: the pieces a kind string is made of and which carry values.

An operand's kind spells its shape (`R`, `C[I][I]`, `[R+I]`, `desc[UR][R.64+I]`; see the table in
:mod:`sassas.ast`); its values are the numbers and names of the value pieces, in order. Every
layer that walks a kind (the operand reader and printer, the frontend, the ISA's encoder and
description file, the resolver, the learner) splits it here, so that they agree on the pieces.
"""
from __future__ import annotations

import functools
import re

# One piece of a kind: a register class or a value letter, a keyword (`PR`, `UPR`, `desc`), a
# suffix written inside the kind (`.64`), or one character of punctuation.
KIND_TOKEN = re.compile(r"UPR|PR|UR|UP|SB|SR|\+I|desc|gdesc|tmem|\.[A-Za-z0-9_]+|[RPBILNC\[\]+@() ]|.")
# The pieces that carry one of Operand.values each, in order.
VALUE_PIECES = frozenset({"R", "UR", "P", "UP", "B", "SB", "SR", "I", "+I", "L", "N"})
# The value pieces that are a register's number.
REGISTER_PIECES = frozenset({"R", "UR", "P", "UP", "B", "SB"})
# The role of each value piece, as the ISA description names encoding fields.
VALUE_ROLES = {"R": "reg", "UR": "ureg", "P": "pred", "UP": "upred", "B": "breg", "SB": "sb",
               "SR": "sr", "I": "imm", "+I": "offset", "L": "target", "N": "name"}


@functools.lru_cache(maxsize=4096)
def kind_pieces(kind: str) -> tuple[str, ...]:
    """A kind split into its pieces: registers, values, keywords, punctuation, suffixes."""
    return tuple(KIND_TOKEN.findall(kind))


def value_pieces(kind: str) -> list[str]:
    """The pieces of `kind` that hold values, one per entry of Operand.values."""
    return [p for p in kind_pieces(kind) if p in VALUE_PIECES]


def value_count(kind: str) -> int:
    """How many values an operand of this kind carries."""
    return sum(1 for p in kind_pieces(kind) if p in VALUE_PIECES)


@functools.lru_cache(maxsize=4096)
def piece_slots(kinds: tuple[str, ...], piece: str) -> tuple[tuple[int, int], ...]:
    """(operand index, value index) of every value of `piece` (`UR`) among operands of these kinds."""
    return tuple((i, j) for i, kind in enumerate(kinds) for j, p in enumerate(value_pieces(kind)) if p == piece)


# Per interned ast.Shape (hashed by identity): where its uniform registers stand.
_uniform_slots: dict = {}


def uniform_slots(shape) -> tuple[tuple[int, int], ...]:
    """(operand index, value index) of every uniform register of an instruction of `shape`."""
    slots = _uniform_slots.get(shape)
    if slots is None:
        slots = _uniform_slots[shape] = piece_slots(tuple([kind for kind, _ in shape.operands]), "UR")
    return slots
