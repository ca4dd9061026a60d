"""Read `cuobjdump -sass` / `nvdisasm -hex` listings into kernels, control codes included.

Each instruction line carries its low 64 bits as a hex comment and the next line its high
64 bits; :func:`sassas.parse.parse_instruction` takes the control code from them. cuobjdump
12.8 prints sm_120 code with the low word only and the control code as annotations
(`&wr=0x1 &req={3} ?trans1`), which then give it.
"""
from __future__ import annotations

import re
from typing import Optional

from .ast import ControlCode, Instruction, Kernel, Loc
from .control import CONTROL_NOTE, control_from_notes
from .errors import SassError
from .parse import parse_instruction
from .preprocess import listing_arch, listing_arch_of

_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")
_NVDISASM_FUNCTION = re.compile(r"^\s*\.text\.(\S+?):?\s*$")
_INSTRUCTION = re.compile(r"/\*([0-9a-fA-F]{4,})\*/\s*(.*?;)\s*/\*\s*(0x[0-9a-fA-F]{16})\s*\*/")
_MNEMONIC = re.compile(r"\s*(?:@!?U?P[0-7T]\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Za-z0-9_]+)*)")
_HIGH_WORD = re.compile(r"^\s*/\*\s*(0x[0-9a-fA-F]{16})\s*\*/\s*$")


class UnreadableInstruction(Instruction):
    """Placeholder for an instruction the parser cannot read: opcode and control code only."""


def read_listing(text: str, filename: str = "<listing>",
                 arch: Optional[str] = None) -> tuple[list[Kernel], list[SassError]]:
    """Kernels of a listing, and the errors of lines that could not be read. Of a listing with
    code of several archs (cuobjdump -sass of a fatbin), `arch`'s (preprocess.listing_arch).

    An instruction the parser rejects is kept with its opcode and control code but no operands,
    so scoreboard analysis still sees its barriers.
    """
    kernels: list[Kernel] = []
    errors: list[SassError] = []
    current: Optional[Kernel] = None
    pending: Optional[tuple[int, str, str, int, str]] = None
    keep = listing_arch(text, arch, filename)
    section_arch = None         # the `code for` line's arch the lines are under
    skipping = False            # in a function of an arch not kept

    def add(address: int, body: str, low: str, high: Optional[str], line_no: int, source: str) -> None:
        nonlocal current
        if current is None:
            current = Kernel(name="kernel", loc=Loc(filename, 1, 1))
            kernels.append(current)
        loc = Loc(filename, line_no, source.find(body) + 1, source)
        words = f"/* {low} */" + (f" /* {high} */" if high else "")
        try:
            inst = parse_instruction(f"{body} {words}", filename)
            if high is None and inst.control is None:
                inst.control = control_from_notes([])      # (no annotation: all at defaults)
        except SassError as e:
            errors.append(SassError(f"cannot read instruction: {e.message}", loc))
            mnemonic = _MNEMONIC.match(body)
            parts = mnemonic.group(1).split(".") if mnemonic else ["NOP"]
            control = ControlCode.from_word(int(high, 16) << 64 | int(low, 16)) if high else None
            if high is None:
                try:
                    control = control_from_notes([m.group(0) for m in CONTROL_NOTE.finditer(body)])
                except SassError:
                    pass            # (the parser's error, just recorded, says what is wrong)
            inst = UnreadableInstruction(opcode=parts[0], modifiers=tuple(parts[1:]), control=control)
        inst.loc = loc
        inst.address = address
        current.body.append(inst)

    for number, line in enumerate(text.splitlines(), 1):
        m = _HIGH_WORD.match(line)
        if m and pending is not None:
            add(*pending[:3], m.group(1), *pending[3:])
            pending = None
            continue
        if pending is not None:
            # cuobjdump 12.8 prints sm_120 code with its low word only, the control code as
            # annotations (`&wr=0x1 ?trans1`) before the `;`.
            add(*pending[:3], None, *pending[3:])
            pending = None
        section_arch = listing_arch_of(line) or section_arch
        m = _FUNCTION.match(line) or _NVDISASM_FUNCTION.match(line)
        if m:
            skipping = keep is not None and section_arch != keep
            if not skipping:
                current = Kernel(name=m.group(1), loc=Loc(filename, number, 1, line))
                kernels.append(current)
            continue
        m = None if skipping else _INSTRUCTION.search(line)
        if m:
            pending = (int(m.group(1), 16), m.group(2), m.group(3), number, line)
    if pending is not None:
        add(*pending[:3], None, *pending[3:])
    return kernels, errors
