"""Register allocation for names declared without numbers (`.reg x`, `.regs acc 0 63`, or a
`<regs>` line of names alone).

Every name gets its own registers for the whole kernel (no liveness: this is an assembler, the
programmer decides what lives where). The allocator only chooses *which* free registers:

- vector names (``acc<0-63>``) get consecutive registers, aligned as their uses need (a member
  used as an ``LDS.128`` destination must sit on a multiple of 4) and otherwise to
  min(4, size);
- a scalar used as a 64/128-bit operand gets 2/4 aligned registers;
- other scalars are placed to avoid register-bank conflicts.

Register banks (sm_70 and later). Jia, Maggioni, Staiger, Scarpazza, "Dissecting the NVIDIA
Volta GPU Architecture via Microbenchmarking" (arXiv:1804.06826, 2018), section on the register
file: Volta has 2 register banks, each 64 bits wide, and a register's bank is its index mod 2;
an instruction with three source registers (FFMA is the measured case) is slowed when they
all sit in the same bank, unless the reuse cache supplies one of them. Their Turing paper
(arXiv:1903.07486) reports the same for sm_75. Later architectures are assumed to keep it
(unpublished), so the allocator treats it as a heuristic: it never changes what a program
computes, only how fast three-source instructions issue.
"""
from __future__ import annotations

from dataclasses import dataclass

from .ast import AutoName
from .errors import SassError

NUM_BANKS = 2
MAX_R = 254          # R255 is RZ


def bank(register: int) -> int:
    return register % NUM_BANKS


@dataclass
class ThreeSource:
    """An instruction that reads three registers in one issue (FFMA R0, a, b, c): its source
    operands as names (str, not yet allocated) or register numbers (int)."""
    sources: tuple


def allocate(autos: list[AutoName], reserved: set[int], three_source: list[ThreeSource]) -> dict[str, int]:
    """Registers for each auto name: {name: first register}. Deterministic for the same input."""
    free = [r for r in range(MAX_R + 1) if r not in reserved]
    taken: set[int] = set(reserved)
    result: dict[str, int] = {}

    def fits(base: int, count: int) -> bool:
        return base + count - 1 <= MAX_R and all(r not in taken for r in range(base, base + count))

    def place(auto: AutoName, base: int, count: int):
        for r in range(base, base + count):
            taken.add(r)
        if len(auto.names) == 1:
            result[auto.names[0]] = base
        else:
            for k, name in enumerate(auto.names):
                result[name] = base + k

    vectors = [a for a in autos if len(a.names) > 1]
    scalars = [a for a in autos if len(a.names) == 1]
    # Big, constrained blocks first: they are the hardest to fit.
    vectors.sort(key=lambda a: -len(a.names))
    for auto in vectors:
        count = len(auto.names)
        base = next((b for b in range(0, MAX_R + 1) if _vector_ok(auto, b) and fits(b, count)), None)
        if base is None:
            raise SassError(f"no room for {count} consecutive registers for "
                            f"'{auto.names[0]}'..'{auto.names[-1]}'", auto.loc)
        place(auto, base, count)
    wide = [a for a in scalars if a.align > 1 or a.width > 1]
    for auto in sorted(wide, key=lambda a: -max(a.align, a.width)):
        base = next((b for b in range(0, MAX_R + 1, max(auto.align, 1)) if fits(b, auto.width)), None)
        if base is None:
            raise SassError(f"no free registers left for '{auto.names[0]}'", auto.loc)
        place(auto, base, auto.width)
    for auto in (a for a in scalars if a.align == 1 and a.width == 1):
        name = auto.names[0]
        candidates = []
        for b in range(NUM_BANKS):
            r = next((r for r in free if r not in taken and bank(r) == b), None)
            if r is not None:
                candidates.append((_conflicts(name, r, result, three_source), r))
        if not candidates:
            raise SassError(f"no free registers left for '{name}'", auto.loc)
        _, r = min(candidates)
        place(auto, r, 1)
    return result


def _vector_ok(auto: AutoName, base: int) -> bool:
    if base % auto.align:
        return False
    return all((base + k) % a == 0 for k, a in auto.member_align.items())


def _conflicts(name: str, register: int, placed: dict[str, int], three_source: list[ThreeSource]) -> int:
    """How many three-source instructions that read `name` would find all three of their
    (known) source registers in one bank if `name` took `register`."""
    count = 0
    for inst in three_source:
        if name not in inst.sources:
            continue
        regs = set()
        for s in inst.sources:
            r = register if s == name else placed.get(s) if isinstance(s, str) else s
            if r is None:
                break
            regs.add(r)
        else:
            if len(regs) == 3 and len({bank(r) for r in regs}) == 1:
                count += 1
    return count
