"""nvdisasm text -> Instruction, for the ISA layer: the project's parser
(:func:`sassas.parse.parse_instruction`, through grammar.lark); a line of a shape it has seen
before is built without running the LALR parser (see sassas.parse).
"""
from __future__ import annotations

from ..ast import Instruction


def parse_instruction(text: str) -> Instruction:
    """One nvdisasm instruction line (without address/hex comments) -> Instruction."""
    from ..parse import parse_instruction as project_parse
    return project_parse(text)
