"""What the generated kernels need to know of the arch they are generated for, read from
sassas (its arch table and per-arch ISA description) rather than written down again here.

    t = target("sm_86")
    t.smem_base, t.max_smem, t.async_copy     # 0, 99 KiB, True (LDGSTS from sm_80 on)

The F(2x2,3x3) and F(4x4,3x3) generators take a Target; the kernels' designs (shared-memory
layout, filter copies) follow from it (sassgen.fit, gemmgen.fit).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional

DEFAULT_ARCH = "sm_90"      # the arch the kernels were designed and measured on
# Archs whose kernels (both generators) pass the CPU checks of tests/winograd/test_archs.py: the
# simulator, sassas's hazard checker, nvdisasm. Only sm_90's ran on a GPU (H100, H200).
ARCHS = ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120")


@dataclass(frozen=True)
class Target:
    arch: str
    smem_base: int              # where a kernel's dynamic shared memory starts in the CTA window
    max_smem: int               # dynamic shared memory a block may have (with the opt-in attribute)
    param_base: int             # the kernel parameters' offset in constant bank 0
    grid_dim_x: int             # gridDim.x's offset in constant bank 0
    desc: Optional[int]         # the memory descriptor's offset (desc[UR4] of LDG/STG/RED); None: the
                                # arch's global-memory instructions take none (sm_75)
    async_copy: bool            # LDGSTS, LDGDEPBAR and DEPBAR (sm_80 on)
    reduce: str                 # the opcode of a global reduction: REDG (sm_90 on) or RED
    carry_pair: bool            # IADD3 and UIADD3 are written with both carry-out predicates, PT
                                # where unused (Blackwell: `IADD3 R2, PT, PT, R0, 0x1, RZ`)
    uniform_load: str           # the constant load into uniform registers: ULDC, or LDCU (Blackwell)

    @property
    def scope(self) -> str:
        """The modifier LDG.E and STG.E carry: where they take no descriptor (sm_75), nvdisasm
        prints the memory scope .SYS (ptxas: `LDG.E.SYS R0, [R2]`), elsewhere nothing."""
        return ".SYS" if self.desc is None else ""

    def global_address(self, reg: int, off: int) -> str:
        """A 64-bit global address R<reg>:R<reg+1> + off, as the arch writes it (without a
        descriptor the pair is implied by .E: `[R2+0x10]`)."""
        return f"desc[UR4][R{reg}.64+{off:#x}]" if self.desc is not None else f"[R{reg}+{off:#x}]"

    def desc_load(self) -> list[str]:
        """The instructions that put the memory descriptor in UR4 (none where there is none)."""
        return [] if self.desc is None else [f"ULDC.64 UR4, c[0x0][{self.desc:#x}]"]

    def spell(self, text: str) -> str:
        """An instruction as the generators write it (sm_90's spelling, guard included) as this
        arch writes it. Applying it twice changes nothing."""
        if not self.carry_pair and self.uniform_load == "ULDC":
            return text
        m = _INSTRUCTION.match(text)
        guard, op, args = m.group(1) or "", m.group(2), m.group(3)
        base = op.split(".")[0]
        if base == "ULDC":
            op = self.uniform_load + op[len(base):]
        if self.carry_pair and base in ("IADD3", "UIADD3"):
            a = [x.strip() for x in args.split(",")]
            pt, pred = ("UPT", r"!?UP[T0-6]") if base == "UIADD3" else ("PT", r"!?P[T0-6]")
            carries = next(n for n in range(3) if not re.fullmatch(pred, a[1 + n]))
            a[1 + carries:1 + carries] = [pt] * (2 - carries)
            args = ", ".join(a)
        return f"{guard}{op} {args}" if args else f"{guard}{op}"

    def spell_line(self, line: str) -> str:
        """spell() on the instruction of a line of generated source (control code first)."""
        m = _LINE.match(line)
        return line if not m else f"{m.group(1)}{self.spell(m.group(2))};{m.group(3)}"

    def param(self, offset: int) -> str:
        """The constant-bank operand of the parameter at byte `offset` of the parameter block."""
        return f"c[0x0][{self.param_base + offset:#x}]"


_INSTRUCTION = re.compile(r"^(@!?U?P[T0-6]\s+)?(\S+)(?:\s+(.*))?$")
_LINE = re.compile(r"^([-0-9]{2,6}:[-0-9]:[-0-9]:[-Yy]:[0-9a-fA-F]\s+)([^;]*);(.*)$")


@lru_cache(maxsize=None)
def target(arch: str = DEFAULT_ARCH) -> Target:
    """The Target of `arch` ('sm_86', 'sm86', '86'); ValueError for an arch sassas does not know."""
    from sassas.arch import constant_slot, get_arch
    from sassas.isa.description import get_isa
    a = get_arch(arch)
    isa = get_isa(a.name)
    try:
        desc = constant_slot("memoryDescriptor", a)
    except ValueError:
        desc = None
    return Target(arch=a.name, smem_base=a.reserved_shared, max_smem=a.max_shared_per_block,
                  param_base=a.param_base, grid_dim_x=a.launch_base + 0xc, desc=desc,
                  async_copy="LDGSTS" in isa.by_opcode and "LDGDEPBAR" in isa.by_opcode,
                  reduce="REDG" if "REDG" in isa.by_opcode else "RED",
                  carry_pair=not any(e.kinds == ("R", "R", "R", "R") for e in isa.by_opcode["IADD3"]),
                  uniform_load="ULDC" if "ULDC" in isa.by_opcode else "LDCU")
