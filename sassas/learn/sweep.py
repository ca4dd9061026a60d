"""Opcode-space sweep: find every instruction form the disassembler knows, corpus or not.

ptxas never emits some forms that hand-written kernels use (``MOV R, c[..][..]``, ``P2R``,
``R2P``, rare operand forms of common opcodes). For every value of the opcode bits (0..11,
which include the form-select bits 9..11) we build a few words from templates (operand
fields zero, register fields RZ, predicate fields PT, some random fillings), disassemble
them all in a few batched nvdisasm calls, and keep one word per form (opcode + operand
kinds + guard kind) and modifier set. Those words seed the bit-flip learner
(:func:`sassas.learn.induce.learn_encodings`) exactly as corpus words do.

Nothing here knows any instruction: the templates only use the public field layout of
ORACLE.md (registers in bytes 2, 3, 4 and 8; predicates as 3-bit fields with 7 = PT).
"""
from __future__ import annotations

import random
from collections import defaultdict
from typing import Callable, Optional

from ..ast import ControlCode
from ..isa.forms import CONTROL_SHIFT, instruction_tokens
from . import oracle, probe

OPCODE_BITS = 12
GUARD_PT = 7 << 12
# A legal, neutral control code: no barriers, no wait, stall 1.
CONTROL = ControlCode(stall=1, yield_=False).bits << CONTROL_SHIFT
# Register fields (bytes 2, 3, 4 and 8) set to RZ.
RZ_FIELDS = 0xFF << 16 | 0xFF << 24 | 0xFF << 32 | 0xFF << 64
# Uniform register fields (6 bits) set to URZ where a form reads uniform registers.
URZ_FIELDS = 0xFF << 16 | 0x3F << 24 | 0x3F << 32 | 0xFF << 64
# 3-bit predicate fields set to PT, as many forms place them (bits 77.., 81.., 84.., 87..).
PT_FIELDS = 0x7 << 77 | 0x7 << 81 | 0x7 << 84 | 0x7 << 87
OPERAND_BITS = sum(1 << b for b in range(16, CONTROL_SHIFT))
TEMPLATES = (0, RZ_FIELDS, RZ_FIELDS | PT_FIELDS, URZ_FIELDS | PT_FIELDS, PT_FIELDS)
RANDOM_PER_OPCODE = 12
SAMPLES_PER_FORM = 3


def sweep_words(seed: int = 0) -> list[int]:
    """Words for every opcode value: the templates, then random operand bits."""
    rng = random.Random(seed)
    words = []
    for op in range(1 << OPCODE_BITS):
        head = CONTROL | GUARD_PT | op
        words += [head | t for t in TEMPLATES]
        for _ in range(RANDOM_PER_OPCODE):
            r = rng.getrandbits(128) & OPERAND_BITS
            # Keep register bytes sane half of the time (RZ or small numbers).
            if rng.random() < 0.5:
                r = (r & ~RZ_FIELDS) | (RZ_FIELDS if rng.random() < 0.5 else 0)
            words.append(head | r)
    return words


def discover(arch: str, cache: Optional[oracle.DisasmCache] = None,
             parse_failures: Optional[dict[str, str]] = None,
             log: Callable[[str], None] = print) -> list[probe.Sample]:
    """Samples of every form the sweep reaches: up to SAMPLES_PER_FORM a form, each with a
    different modifier set, templates first (their words are the plainest)."""
    words = sweep_words()
    samples = probe.to_samples(oracle.disassemble(words, arch, cache), arch, parse_failures)
    by_form: dict[tuple, dict[frozenset, probe.Sample]] = defaultdict(dict)
    for w in words:
        s = samples.get(w)
        if s is None:
            continue
        toks = instruction_tokens(s.inst)
        forms = by_form[(s.key, s.guard_kind)]
        if toks not in forms and len(forms) < SAMPLES_PER_FORM:
            forms[toks] = s
    out = [s for forms in by_form.values() for s in forms.values()]
    legal = sum(1 for s in samples.values() if s is not None)
    log(f"  sweep: {len(words)} words, {legal} legal, {len(by_form)} forms")
    return out
