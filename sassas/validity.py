"""The validity model: every word the assembler writes is one nvdisasm accepts and prints as
the source says. The encoder asks, for each word, whether its control code breaks a rule:
those of the yield flag (sassas.control.CONTROL_RULES, the same on every arch), the control
fields an instruction form does not take (a write barrier on a store, a read barrier on a
branch), the reuse slots it does not take and the places where it refuses the zero register
(sassas.isa.control_rules, learned per arch from nvdisasm)."""
from __future__ import annotations

from .ast import ZERO_NAMES
from .control import REUSE_SLOTS_0_2, CONTROL_RULES
from .isa.control_rules import FIELDS, form_control_rules
from .isa.forms import form_key, form_name

# Control fields that decide whether a word needs a closer look (CONTROL_RULES, per-form rules).
_YIELD_BIT, _REUSE_0_2 = 1 << 4, REUSE_SLOTS_0_2 << 17
_NO_BARRIERS_NO_WAIT = 0x3F << 5
_REUSE = 0xF << 17

# (arch, Shape) -> the instruction's form name, the reuse rules and the zero-register rules that
# name it: found once a shape.
_form_of_shape: dict = {}


def _form_and_rules(inst, arch: str):
    key = (arch, inst.shape)
    known = _form_of_shape.get(key)
    if known is None:
        form = form_name(*form_key(inst))
        rules = form_control_rules(arch)
        known = _form_of_shape[key] = (form, rules.reuse_rules_for(inst.opcode, form, inst.modifiers),
                                       rules.zero_register_rules_for(inst.opcode, form, inst.modifiers))
    return known


def control_problems(inst, c: int, arch: str) -> list[tuple[str, str]]:
    """(severity, message) for each rule that the control code `c` (word >> 105) of the
    encoded instruction `inst` breaks: CONTROL_RULES, and the fields and reuse slots its form
    does not take (sassas.isa.control_rules, learned per arch)."""
    out = [(r.severity, r.describe(c)) for r in CONTROL_RULES if r.holds(c)]
    rules = form_control_rules(arch)
    form, reuse_rules, _zero_rules = _form_and_rules(inst, arch)
    if inst.opcode in rules.opcodes_with_rules:
        for field, (shift, mask, none) in FIELDS.items():
            if c >> shift & mask != none and rules.refuses(field, inst.opcode, form, inst.modifiers):
                what = field.replace("_", " ")
                out.append(("error", f"{form} takes no {what} on {arch} (nvdisasm rejects the word); "
                                     f"write {'--' if field == 'wait_mask' else '-'} in the control code's "
                                     f"{what} field [{field}]"))
    for r in reuse_rules:
        if r.refuses(c):
            together = " together" if r.mask & (r.mask - 1) else ""
            when = " with the yield flag 'Y'" + (" and stall 0" if r.stall0 else "") if r.yield_ else ""
            out.append(("error", f"{form} takes no .reuse on reuse slot{'s' if together else ''} {r.slots()}"
                                 f"{together}{when} on {arch} (nvdisasm: undefined value for table opex); "
                                 f"drop the .reuse [{r.name}]"))
    return out


def may_break_rules(c: int, opcode: str, arch: str) -> bool:
    """Cheap test, for every encoded word, whether control_problems can find anything."""
    if c & _YIELD_BIT:
        stall = c & 0xF
        if stall == 0 or stall >= 12:
            return True
    elif c & _REUSE_0_2:
        return True
    if c & _REUSE and opcode in form_control_rules(arch).opcodes_with_reuse_rules:
        return True
    if c & _NO_BARRIERS_NO_WAIT != _NO_BARRIERS_NO_WAIT or c >> 11 & 0x3F:
        return opcode in form_control_rules(arch).opcodes_with_rules
    return False


def may_refuse_zero_register(opcode: str, arch: str) -> bool:
    """Cheap test, for every encoded word, whether zero_register_problems can find anything."""
    return opcode in form_control_rules(arch).opcodes_with_zero_register_rules


def zero_register_problems(inst, arch: str) -> list[str]:
    """Messages for each register operand of `inst` that holds the zero register where its
    form refuses it (nvdisasm rejects the word)."""
    form, _reuse_rules, zero_rules = _form_and_rules(inst, arch)
    out = []
    for rule in zero_rules:
        zero = rule.zero_register(inst)
        if zero is not None:
            out.append(f"{form} takes no {ZERO_NAMES[zero]} in operand {rule.operand + 1} on {arch} (nvdisasm "
                       f"rejects the word); use another {zero[0]} register [zero_register]")
    return out
