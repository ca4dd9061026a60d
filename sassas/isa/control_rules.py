"""Which instruction forms take which control fields and reuse slots, as nvdisasm decides: the
rules, per arch.

nvdisasm rejects a word whose control code sets a field the instruction has no use for: a
write barrier on a store, a branch or a fence, a read barrier on a branch, a wait mask on
`WARPGROUP.ARRIVE` (sm_90). It also rejects reuse flags that the instruction's opex table
does not define: a slot without a register to cache (`CS2R R, SR`), slots B and C together
on most forms, slot A on `HADD2.F32 R, R, c[..]` (sm_90), slots A and B together with the
yield flag on some. And it rejects a few forms with the zero register in one place (`[RZ.64+..]`
in sm_89's 256-bit `LDG`). Which ones is a fact of each arch, so it is data:
`sassas/isa/data/control.toml`, learned by `python -m sassas.learn.control_rules`. A rule lists
an opcode where every encoding that nvdisasm reads refuses it, a form (`BMOV B, I`) where every
encoding of that form does, else the form with the modifiers that only the refused encodings'
examples carry (`HADD2.F32 R, R, C[I][I]`), or the form without the modifiers that only its
accepted encodings carry (`CCTL.!C.!I`). A reuse rule (`reuse_BC`) names the least
combination refused: every combination that holds it is refused too.

Used by :mod:`sassas.validity` (the encoder's check of every word); never needs the oracle.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from ..arch import ARCHS
from ..ast import ZERO_NAMES
from ..cache import load_toml
from ..kinds import value_pieces

# Control fields (bits of the 23-bit control code c = word >> 105), by their name in the data.
FIELDS = {
    "write_barrier": (5, 0x7, 7),        # (shift, mask, value meaning "none")
    "read_barrier": (8, 0x7, 7),
    "wait_mask": (11, 0x3F, 0),
}
DATA_FILE = "control.toml"
REUSE_SLOTS = "ABCD"                     # reuse bit 0..3 (c >> 17)
_REUSE_RULE = re.compile(r"(yield_)?(stall0_)?reuse_([A-D]+)$")
_YIELD_BIT = 1 << 4                      # clear where the yield flag 'Y' is written
_ZERO_REGISTER_RULE = re.compile(r"zero_register_(\d+)_(\d+)$")
# The zero register of each register file whose operands may refuse it (RZ, URZ).
ZERO_REGISTERS = {kind: value for (kind, value) in ZERO_NAMES if kind in ("R", "UR")}


def zero_register_rule_name(operand: int, piece: int) -> str:
    """`zero_register_2_0`: the first register (piece 0) of operand 2 (counted from 0)."""
    return f"zero_register_{operand}_{piece}"


def reuse_rule_name(yield_: bool, stall0: bool, mask: int) -> str:
    """`reuse_BC`, `yield_reuse_AB`, `yield_stall0_reuse_D`."""
    slots = "".join(s for i, s in enumerate(REUSE_SLOTS) if mask >> i & 1)
    return f"{'yield_' if yield_ else ''}{'stall0_' if stall0 else ''}reuse_{slots}"


@dataclass(frozen=True)
class Names:
    """What a rule applies to: opcodes, forms (`BMOV B, I`), and forms with modifiers
    (`HADD2.F32 R, R, C[I][I]`: its instructions that carry these) where a form's encodings
    disagree."""
    opcodes: frozenset = frozenset()
    forms: frozenset = frozenset()
    forms_with: tuple = ()               # (form, modifiers it carries, modifiers it does not carry)

    def matches(self, opcode: str, form: str, modifiers) -> bool:
        if opcode in self.opcodes or form in self.forms:
            return True
        carried = set(modifiers)
        return any(f == form and needed <= carried and not excluded & carried for f, needed, excluded in self.forms_with)

    def named_opcodes(self) -> set:
        return set(self.opcodes) | {f.split()[0] for f in self.forms} | {f.split()[0] for f, *_m in self.forms_with}


@dataclass(frozen=True)
class ReuseRule:
    """Words with the yield flag and stall-0 state given whose reuse bits hold all of `mask`."""
    name: str
    yield_: bool
    stall0: bool
    mask: int
    names: Names

    def slots(self) -> str:
        return " and ".join(s for i, s in enumerate(REUSE_SLOTS) if self.mask >> i & 1)

    def refuses(self, c: int) -> bool:
        """Whether the control code `c` (word >> 105) breaks the rule."""
        yield_, stall0 = not c & _YIELD_BIT, c & 0xF == 0
        return c >> 17 & self.mask == self.mask and self.yield_ == yield_ and self.stall0 == (stall0 and yield_)


@dataclass(frozen=True)
class ZeroRegisterRule:
    """Instructions whose operand `operand` may not hold the zero register as its register
    `piece` (counted among the operand's values)."""
    operand: int
    piece: int
    names: Names

    def zero_register(self, inst):
        """(register file, value) of the zero register where `inst` holds it against the rule, else None."""
        if self.operand >= len(inst.operands):
            return None
        op = inst.operands[self.operand]
        pieces = value_pieces(op.kind)
        if self.piece < min(len(pieces), len(op.values)) and ZERO_REGISTERS.get(pieces[self.piece]) == op.values[self.piece]:
            return pieces[self.piece], op.values[self.piece]
        return None


@dataclass(frozen=True)
class FormControlRules:
    """Per field, what does not take it; the reuse rules; where the zero register is refused."""
    fields: dict[str, Names]
    reuse: tuple[ReuseRule, ...]
    zero_register: tuple[ZeroRegisterRule, ...] = ()

    def refuses(self, field: str, opcode: str, form: str, modifiers) -> bool:
        return self.fields[field].matches(opcode, form, modifiers)

    @functools.cached_property
    def opcodes_with_rules(self) -> frozenset:
        """Every opcode some field rule names (the encoder looks closer at those only)."""
        return frozenset(set().union(*(n.named_opcodes() for n in self.fields.values())))

    @functools.cached_property
    def opcodes_with_reuse_rules(self) -> frozenset:
        return frozenset(set().union(*(r.names.named_opcodes() for r in self.reuse)))

    @functools.cached_property
    def opcodes_with_zero_register_rules(self) -> frozenset:
        return frozenset(set().union(*(r.names.named_opcodes() for r in self.zero_register)))

    def zero_register_rules_for(self, opcode: str, form: str, modifiers) -> tuple[ZeroRegisterRule, ...]:
        return tuple(r for r in self.zero_register if r.names.matches(opcode, form, modifiers))

    def reuse_rules_for(self, opcode: str, form: str, modifiers) -> tuple[ReuseRule, ...]:
        """The reuse rules of an instruction (sassas.validity keeps them a shape)."""
        return tuple(r for r in self.reuse if r.names.matches(opcode, form, modifiers))


def parse_names(entries) -> Names:
    """An entry is an opcode (`CCTL`), a form (`CCTL [R+I]`) or a form with modifiers it carries
    and, marked `!`, modifiers it does not (`HADD2.F32 R, R, C[I][I]`; `CCTL.!C.!I`: the form
    without operands, neither .C nor .I)."""
    opcodes, forms, forms_with = set(), set(), []
    for n in entries:
        head, _, kinds = n.partition(" ")
        opcode, *modifiers = head.split(".")
        form = f"{opcode} {kinds}" if kinds else opcode
        if modifiers:
            forms_with.append((form, frozenset(m for m in modifiers if not m.startswith("!")),
                               frozenset(m[1:] for m in modifiers if m.startswith("!"))))
        elif kinds:
            forms.add(n)
        else:
            opcodes.add(n)
    return Names(frozenset(opcodes), frozenset(forms), tuple(forms_with))


@functools.lru_cache(maxsize=None)
def form_control_rules(arch: str) -> FormControlRules:
    data = load_toml((Path(__file__).parent / "data" / DATA_FILE).read_bytes(), "control")
    entry = data.get(arch) or data.get(ARCHS[arch].isa_from if arch in ARCHS else "", {})
    fields = {field: parse_names(entry.get(field, [])) for field in FIELDS}
    rules = [_rule(name, parse_names(entries)) for name, entries in entry.items() if entries]
    return FormControlRules(fields, tuple(r for r in rules if isinstance(r, ReuseRule)),
                            tuple(r for r in rules if isinstance(r, ZeroRegisterRule)))


def _rule(name: str, names: Names):
    """The ReuseRule or ZeroRegisterRule a data key (`yield_reuse_AB`, `zero_register_2_0`)
    names, else None (the control-field rules: FIELDS)."""
    m = _REUSE_RULE.match(name)
    if m:
        return ReuseRule(name, bool(m[1]), bool(m[2]), sum(1 << REUSE_SLOTS.index(s) for s in m[3]), names)
    m = _ZERO_REGISTER_RULE.match(name)
    return ZeroRegisterRule(int(m[1]), int(m[2]), names) if m else None


def rule_refuses(rule: str, name: str, inst, form: str, c: int) -> bool:
    """Whether one entry `name` of the rule `rule` refuses the instruction `inst` of form `form`
    with control code `c` (the learner checks its rules against ptxas' words with it)."""
    names = parse_names([name])
    if not names.matches(inst.opcode, form, inst.modifiers):
        return False
    if rule in FIELDS:
        shift, mask, none = FIELDS[rule]
        return c >> shift & mask != none
    parsed = _rule(rule, names)
    if isinstance(parsed, ReuseRule):
        return parsed.refuses(c)
    return isinstance(parsed, ZeroRegisterRule) and parsed.zero_register(inst) is not None
