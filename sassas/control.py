"""Control codes: their text forms, read (the TuringAs prefix; ControlCode.to_text writes it) and
the annotations cuobjdump prints for sm_120 (read and written), and the rules every arch shares,
of the yield flag, the stall and the reuse flags: the codes nvdisasm rejects (an error where the
source writes one) or reads otherwise than written (a warning, see sassas.validity)."""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Optional

from .ast import BARRIER_COUNT, DEFAULT_LATENCY, NO_BARRIER, ControlCode, Loc
from .errors import SassError


# TuringAs reads the wait field as a *decimal* number whose bits are the barriers to wait on
# (`03` = barriers 0 and 1, `12` = barriers 2 and 3); it has two characters.
_DECIMAL_WAIT = re.compile(r"\d\d")


def read_control(text: str, loc: Optional[Loc] = None) -> ControlCode:
    """A control prefix as TuringAs reads it. A two-digit wait field is decimal; a field with
    a hex letter (`0c`, as hex-minded listings write it) cannot be decimal and is read as hex;
    six positions (`-----1`) name one barrier each. The rest is parse_control's."""
    wait, rest = text.split(":", 1)
    if rest.endswith(":-"):
        # TuringAs's default latency: the front end puts in the cycles (sassas.dialect)
        return replace(read_control(f"{wait}:{rest[:-1]}1", loc), stall=DEFAULT_LATENCY)
    if _DECIMAL_WAIT.fullmatch(wait):
        mask = int(wait, 10)
        if mask >> BARRIER_COUNT:
            raise SassError(f"wait mask {mask} names a barrier above {BARRIER_COUNT - 1} (the field is a "
                            f"decimal bit mask, as in TuringAs: 63 waits on all six)", loc)
        # Hand it on in the positional form, which no reading can take for another mask.
        wait = "".join(str(b) if mask >> b & 1 else "-" for b in range(BARRIER_COUNT))
    return parse_control(f"{wait}:{rest}", loc)


def parse_control(text: str, loc: Optional[Loc] = None) -> ControlCode:
    """A control code in its text form ``wait:read:write:yield:stall``, e.g. ``--:-:1:Y:4``:
    - wait: the scoreboard barriers to wait on, ``--`` for none, else a bit mask in hex (``03``,
      ``0c``; read_control reads TuringAs's decimal two digits); a 6-character positional form
      (``--2-4-``) names one barrier a slot;
    - read / write: the barrier (0..5) that the instruction's operand read / result write
      sets, ``-`` for none;
    - yield: ``Y`` to let the scheduler switch warps here, ``-`` not;
    - stall: cycles to wait before issuing the next instruction, hex ``0``..``f``.
    Codes that break a rule (check_legal) are errors."""
    parts = text.split(":")
    if len(parts) != 5:
        raise SassError(f"control code '{text}' must have 5 fields wait:read:write:yield:stall", loc)
    wait, read, write, yld, stall = parts

    def barrier(field: str, what: str) -> int:
        if field == "-":
            return NO_BARRIER
        b = int(field)
        if b >= BARRIER_COUNT:
            raise SassError(f"{what} barrier {b} out of range: scoreboard barriers are 0..{BARRIER_COUNT - 1}", loc)
        return b

    if set(wait) <= {"-"}:
        mask = 0
    elif len(wait) == BARRIER_COUNT and set(wait) <= set("-012345"):
        mask = 0
        for ch in wait:
            if ch != "-":
                mask |= 1 << int(ch)
    else:
        try:
            mask = int(wait.replace("-", "0"), 16)
        except ValueError:
            raise SassError(f"bad wait mask '{wait}' in control code", loc) from None
    if mask >> BARRIER_COUNT:
        raise SassError(f"wait mask 0x{mask:x} names a barrier above {BARRIER_COUNT - 1}", loc)
    code = ControlCode(stall=int(stall, 16), yield_=yld in "yY", write_barrier=barrier(write, "write"),
                       read_barrier=barrier(read, "read"), wait_mask=mask)
    check_legal(code, loc)
    return code


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


# ---- the control code as cuobjdump 12.8 prints it for sm_120 ------------------------------
# After the operands, before the `;`: `&wr=0x1` (write barrier), `&rd=0x2` (read barrier),
# `&req={0,3}` (the barriers waited on), `?transN` (stall N, yield bit 1) or
# `?WAITN_END_GROUP` (stall N, yield bit 0: TuringAs `Y`); nothing for a field at its default
# (no barrier, no wait, stall 0 with yield bit 0). Reuse shows as `.reuse` on the operands.
CONTROL_NOTE = re.compile(r"&(wr|rd)=0x([0-7])|&req=\{([0-5](?:,[0-5])*)\}|\?trans([0-9]+)|\?WAIT([0-9]+)_END_GROUP")


def control_from_notes(notes: list[str], loc: Optional[Loc] = None) -> ControlCode:
    """The control code that cuobjdump's annotations (`&wr=0x1`, `?trans1`, ...) spell."""
    write = read = NO_BARRIER
    mask = stall = 0
    yield_ = True
    for note in notes:
        m = CONTROL_NOTE.fullmatch(note)
        if m is None:
            raise SassError(f"unknown control annotation '{note}': expected &wr=0xN, &rd=0xN, &req={{..}}, "
                            f"?transN or ?WAITN_END_GROUP", loc)
        which, barrier, waits, trans, wait_stall = m.groups()
        if barrier is not None:
            if int(barrier) >= BARRIER_COUNT:
                raise SassError(f"{note}: scoreboard barriers are 0..{BARRIER_COUNT - 1}", loc)
            if which == "wr":
                write = int(barrier)
            else:
                read = int(barrier)
        elif waits is not None:
            for b in waits.split(","):
                mask |= 1 << int(b)
        else:
            stall = int(trans if trans is not None else wait_stall)
            yield_ = trans is None
            if stall > 15:
                raise SassError(f"{note}: stall {stall} out of range 0..15", loc)
    return ControlCode(stall=stall, yield_=yield_, write_barrier=write, read_barrier=read, wait_mask=mask)


def format_notes(code: ControlCode) -> str:
    """`code` as cuobjdump 12.8 annotates an sm_120 instruction (reuse left out)."""
    notes = []
    if code.wait_mask:
        waited = [str(b) for b in reversed(range(BARRIER_COUNT)) if code.wait_mask >> b & 1]
        notes.append("&req={" + ",".join(waited) + "}")
    if code.read_barrier != NO_BARRIER:
        notes.append(f"&rd=0x{code.read_barrier:x}")
    if code.write_barrier != NO_BARRIER:
        notes.append(f"&wr=0x{code.write_barrier:x}")
    if not code.yield_:
        notes.append(f"?trans{code.stall}")
    elif code.stall:
        notes.append(f"?WAIT{code.stall}_END_GROUP")
    return " ".join(notes)
