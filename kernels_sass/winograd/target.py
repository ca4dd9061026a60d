"""What the generated kernels need to know of the arch they are generated for, read from
sassas (its arch table and per-arch ISA description) rather than written down again here.

    t = target("sm_86")
    t.smem_base, t.max_smem, t.async_copy     # 0, 99 KiB, True (LDGSTS from sm_80 on)

The F(2x2,3x3) and F(4x4,3x3) generators take a Target; the kernels' designs (shared-memory
layout, filter copies) follow from it (plan.fit, gemmgen.Generator).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Optional

DEFAULT_ARCH = "sm_90"      # the arch the kernels were designed and measured on
# Archs the generators have been checked on (the simulator, sassas's hazard checker and nvdisasm
# on the CPU, tests/winograd/test_archs.py; sm_90 also on an H100 and an H200).
ARCHS = ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90")


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

    def param(self, offset: int) -> str:
        """The constant-bank operand of the parameter at byte `offset` of the parameter block."""
        return f"c[0x0][{self.param_base + offset:#x}]"


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
                  reduce="REDG" if "REDG" in isa.by_opcode else "RED")
