"""Control codes: the rules every arch shares, of the yield flag, the stall and the reuse flags:
the codes nvdisasm rejects (an error where the source writes one, see sassas.parse.parse_control)
or reads otherwise than written (a warning, see sassas.validity). The text form is
sassas.parse's (reading) and ControlCode.to_text's (writing)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .ast import ControlCode, Loc
from .errors import SassError


def check_legal(code: ControlCode, loc: Optional[Loc] = None) -> None:
    """Combinations the hardware (and nvdisasm) reject."""
    if code.stall > 15:
        raise SassError(f"stall {code.stall} out of range 0..15", loc)
    for rule in CONTROL_RULES:
        if rule.severity == "error" and rule.holds(code.bits):
            raise SassError(rule.describe(code.bits), loc)


# ---- the validity model: control codes nvdisasm rejects or prints otherwise ---------------

@dataclass(frozen=True)
class ControlRule:
    """A set of control codes (c = word >> 105) that nvdisasm rejects ("error") or reads
    otherwise than written ("warning"): those with the yield flag as given, a stall in
    `stalls`, and reuse slots of which any of `reuse_any` or all of `reuse_all` are set (no
    condition on reuse where both are 0)."""
    name: str
    severity: str
    yield_: bool
    stalls: frozenset
    reuse_any: int = 0
    reuse_all: int = 0
    message: str = ""

    def holds(self, c: int) -> bool:
        if (not c >> 4 & 1) != self.yield_ or c & 0xF not in self.stalls:
            return False
        reuse = c >> 17 & 0xF
        if self.reuse_any and not reuse & self.reuse_any:
            return False
        return not self.reuse_all or reuse & self.reuse_all == self.reuse_all

    def describe(self, c: int) -> str:
        """The diagnostic for control code `c`, ending in the rule's name."""
        return f"{self.message.format(stall=c & 0xF)} [{self.name}]"


_ALL_STALLS = frozenset(range(16))
REUSE_SLOTS_0_2 = 0b0111
# Measured with nvdisasm 12.8 (sm_70) and 13.5 (sm_75..sm_90): every control code of FFMA,
# IADD3, MOV and LDS (16 stalls x 2 yield values x 16 reuse masks), the same on every arch and
# form. With the yield flag 'Y' (hardware bit 0) the reuse bits of slots 0..2 are not reuse
# flags to nvdisasm: it prints no `.reuse`, rejects any of them at stall 0 and slots 1 and 2
# together at any stall ("undefined value ... for table 'TABLES_opex_N'"); slot 3 is free.
CONTROL_RULES = (
    ControlRule("stall-needs-yield", "error", False, frozenset({0, 12, 13, 14, 15}),
                message="stall {stall} needs the yield flag 'Y': without it only stalls 1..11 are legal"),
    ControlRule("yield-stall0-reuse", "error", True, frozenset({0}), reuse_any=REUSE_SLOTS_0_2,
                message="a .reuse flag with the yield flag 'Y' and stall 0 makes a word the GPU does not "
                        "define (nvdisasm: undefined value for table opex); drop the .reuse, or the 'Y', "
                        "or give a stall of 1 or more"),
    ControlRule("yield-reuse-slots-1-2", "error", True, _ALL_STALLS, reuse_all=0b0110,
                message=".reuse on reuse slots 1 and 2 together (the operands in the B and C positions) "
                        "with the yield flag 'Y' makes a word the GPU does not define (nvdisasm: undefined "
                        "value for table opex); drop the .reuse flags or the 'Y'"),
    ControlRule("yield-reuse-unprinted", "warning", True, _ALL_STALLS - {0}, reuse_any=REUSE_SLOTS_0_2,
                message=".reuse with the yield flag 'Y': nvdisasm reads these bits as no reuse flag and "
                        "prints no .reuse; drop the .reuse or the 'Y'"),
)
