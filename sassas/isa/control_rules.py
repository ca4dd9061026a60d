"""Which instruction forms take which control fields, as nvdisasm decides: the rules, per arch.

nvdisasm rejects a word whose control code sets a field the instruction has no use for: a
write barrier on a store, a branch or a fence, a read barrier on a branch, a wait mask on
`WARPGROUP.ARRIVE` (sm_90). Which ones is a fact of each arch, so it is data:
`sassas/isa/data/control.toml`, learned by `python -m sassas.learn.control_rules`. An opcode
is listed where every form that nvdisasm reads rejects the field, a form (`BMOV B, I`) where
only some forms do.

Used by :mod:`sassas.validity` (the encoder's check of every word); never needs the oracle.
"""
from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass
from importlib import resources

# Control fields (bits of the 23-bit control code c = word >> 105), by their name in the data.
FIELDS = {
    "write_barrier": (5, 0x7, 7),        # (shift, mask, value meaning "none")
    "read_barrier": (8, 0x7, 7),
    "wait_mask": (11, 0x3F, 0),
}
DATA_FILE = "control.toml"


@dataclass(frozen=True)
class FormControlRules:
    """Per field: opcodes of which no form takes it, and single forms (`BMOV B, I`) that do not."""
    opcodes: dict[str, frozenset]
    forms: dict[str, frozenset]

    def refuses(self, field: str, opcode: str, form: str) -> bool:
        return opcode in self.opcodes.get(field, ()) or form in self.forms.get(field, ())

    @functools.cached_property
    def opcodes_with_rules(self) -> frozenset:
        """Every opcode some rule names (the encoder looks closer at those only)."""
        out = set()
        for field in FIELDS:
            out |= self.opcodes.get(field, frozenset())
            out |= {f.split()[0] for f in self.forms.get(field, ())}
        return frozenset(out)


@functools.lru_cache(maxsize=None)
def form_control_rules(arch: str) -> FormControlRules:
    data = tomllib.loads(resources.files("sassas.isa").joinpath("data", DATA_FILE).read_text())
    entry = data.get(arch, {})
    opcodes, forms = {}, {}
    for field in FIELDS:
        names = entry.get(field, [])
        opcodes[field] = frozenset(n for n in names if " " not in n)
        forms[field] = frozenset(n for n in names if " " in n)
    return FormControlRules(opcodes, forms)
