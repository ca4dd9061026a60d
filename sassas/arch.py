"""The architectures sassas targets, and the two cubin ELF dialects, as data tables.

Every number here was read off cubins made by ptxas 12.9 (CUDA 12 dialect) and nvcc/ptxas
13.0 (CUDA 13 dialect) with `readelf`, `cuobjdump -elf` and pyelftools; the comment on each
field says what it means and where it shows.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

from .errors import SassError


@dataclass(frozen=True)
class Arch:
    name: str                  # 'sm_90'
    sm: int                    # 90: the number in e_flags and in nvdisasm's -b SM90
    param_base: int            # byte offset of kernel parameters in constant bank 0
    # Largest parameter block: 4 KiB historically, 32764 bytes with CUDA 12.1+ drivers on Volta+.
    max_param_bytes: int
    max_registers: int         # per thread, as EIATTR_REGCOUNT / MAXREG_COUNT allow
    register_file: int         # 32-bit registers per SM (for ptxas's MAXREG_COUNT heuristic)
    max_shared_per_block: int  # bytes with the opt-in attribute (static limit is 48 KiB)
    uniform_registers: bool    # uniform registers exist (Turing and later)
    # ptxas puts the register count in bits 24..31 of .text.<kernel>'s sh_info before Hopper.
    regcount_in_text_info: bool
    # EIATTR_SW_WAR value ptxas writes for every kernel (None: attribute absent).
    sw_war: Optional[int]
    # Low 12 bits of the EXIT instruction (same from sm_70 to sm_90): used to find exit offsets.
    exit_opcode: int = 0x94D
    default_abi: str = "cuda13"
    # Bytes ptxas reserves at the start of a kernel's static shared memory (sm_90: 1 KiB, the
    # user's variables start at 0x400 and .nv.shared.<k> counts the reserve), when any is used.
    reserved_shared: int = 0
    # CUDA 13 dialect only: the `.nv.compat` attributes (name, value) nvcc 13.0 writes for a
    # plain kernel; nvdisasm 13 refuses an sm_90 cubin without them. Values copied, not understood.
    compat: tuple[tuple[str, object], ...] = ()
    # Relocations of module data with explicit addends (SHT_RELA, `.rela.nv.constant4`), as
    # ptxas 12.x writes them for sm_90; before, SHT_REL with the addend in the data (and the
    # `.nv.rel.action` section beside them).
    rela: bool = False
    # The relocation type of a CALL.ABS target (cuobjdump: R_CUDA_ABS47_34 before Hopper,
    # R_CUDA_ABS55_16_34 on sm_90), as ptxas writes it for calls to its helper functions.
    call_relocation: int = 0x3A
    # e_flags bits that replace the dialect's own (Blackwell: 0x6000002 where sm_75..sm_90
    # have 0x6000004, from ptxas 12.9 and 13.0 alike); None: the dialect's.
    flag_bits: Optional[int] = None
    # Where blockDim.x sits in constant bank 0: 0 on sm_70..sm_90, 0x360 on Blackwell
    # (`mov.u32 %r, %ntid.x` -> `LDC R, c[0x0][0x360]`, ptxas 12.9); and gridDim.x, this many
    # bytes on: 12 to sm_90, 16 on Blackwell (%nctaid.x .. z: c[0x0][0x370] .. 0x378).
    launch_base: int = 0
    grid_dim_offset: int = 0xC
    # The dialects a cubin for this arch can be written in (ptxas 12.9 already writes Blackwell
    # cubins with the CUDA 13 header, OSABI 0x41 and ABI version 8; the CUDA 12 header of the
    # older archs is not one that any tool writes for them).
    abis: tuple[str, ...] = ("cuda12", "cuda13")
    # Width of a uniform-register field whose all-ones value is URZ: 6 (URZ = 63) to sm_90;
    # Blackwell's uniform register file is wider and ptxas writes URZ as 255 (UR63 is a register).
    uniform_register_bits: int = 6
    # The arch whose ISA description encodes this one's code, where it has none of its own:
    # ptxas 12.9's code for the learning corpus's multi-snippet kernels is word for word what
    # sm_120's description reproduces on sm_121, and sm_100's on sm_103 but for sm_103's
    # MUFU.EX2.F16x2/.BF16x2 (tests/sassas/test_isa_archs.py).
    isa_from: str = ""
    # "a": the arch-specific target (sm_90a, sm_100a, sm_120a: wgmma, tcgen05), which code for
    # no other GPU may run; its instructions and description are the plain arch's.
    features: str = ""

    @property
    def full_name(self) -> str:
        """'sm_90a' for the arch-specific target, else the name."""
        return self.name + self.features

    @property
    def sm_name(self) -> str:
        """nvdisasm's spelling: SM90."""
        return f"SM{self.sm}"

    def launch_offset(self, name: str) -> int:
        """The c[0x0] byte offset of a launch dimension, `blockDim.x` .. `gridDim.z`."""
        dim, axis = name.split(".")
        return self.launch_base + (self.grid_dim_offset if dim == "gridDim" else 0) + 4 * "xyz".index(axis)


ARCHS: dict[str, Arch] = {a.name: a for a in (
    #    name     sm  param  maxparam maxreg regfile smem/block  UR     regs-in-info sw_war
    Arch("sm_70", 70, 0x160, 32764, 255, 65536, 96 * 1024, False, True, 0x1, default_abi="cuda12"),
    Arch("sm_75", 75, 0x160, 32764, 255, 65536, 64 * 1024, True, True, 0x1),
    Arch("sm_80", 80, 0x160, 32764, 255, 65536, 163 * 1024, True, True, None),
    Arch("sm_86", 86, 0x160, 32764, 255, 65536, 99 * 1024, True, True, None),
    Arch("sm_89", 89, 0x160, 32764, 255, 65536, 99 * 1024, True, True, None),
    Arch("sm_90", 90, 0x210, 32764, 255, 65536, 227 * 1024, True, False, 0x8, reserved_shared=1024, rela=True,
         call_relocation=0x4B, compat=(
        ("EICOMPAT_ATTR_CUDA_ACCELERATOR_TARGET", 0),      # 1 for sm_90a
        ("EICOMPAT_ATTR_ISA_CLASS", 1),
        ("EICOMPAT_ATTR_INST_TCGEN05_MMA", 5),
        ("EICOMPAT_ATTR_0x07", 0x101),
        ("EICOMPAT_ATTR_INST_TENSORMAP_V1", 0),
        ("EICOMPAT_ATTR_ENABLE_OPPORTUNISTIC_FINALIZATION", 1),
        ("EICOMPAT_ATTR_CAN_FASTPATH_FINALIZE", [0, 0]),
    )),
    # Blackwell, as ptxas 12.9 and 13.0 write it: parameters at c[0x0][0x380], 1 KiB of shared
    # memory reserved like sm_90, SW_WAR 0x8 on sm_100/sm_103 and 0x0 on sm_120/sm_121, the
    # `.nv.compat` attributes of nvcc 13.0 (CAN_FASTPATH_FINALIZE's first value is 9 for sm_100, 0x50 for sm_120).
    *(Arch(name, sm, 0x380, 32764, 255, 65536, smem * 1024, True, False, war, reserved_shared=1024, rela=True,
           call_relocation=0x4B, flag_bits=0x6000002, launch_base=0x360, grid_dim_offset=0x10, abis=("cuda13",),
           uniform_register_bits=8, isa_from=isa_from, compat=(
        ("EICOMPAT_ATTR_CUDA_ACCELERATOR_TARGET", 0),
        ("EICOMPAT_ATTR_ISA_CLASS", 1),
        ("EICOMPAT_ATTR_INST_TCGEN05_MMA", 5),
        ("EICOMPAT_ATTR_0x07", 0x101),
        ("EICOMPAT_ATTR_INST_TENSORMAP_V1", 0),
        ("EICOMPAT_ATTR_ENABLE_OPPORTUNISTIC_FINALIZATION", 1),
        ("EICOMPAT_ATTR_CAN_FASTPATH_FINALIZE", [fastpath, 0]),
    )) for name, sm, smem, war, fastpath, isa_from in (
        ("sm_100", 100, 227, 0x8, 9, ""), ("sm_103", 103, 227, 0x8, 9, "sm_100"),
        ("sm_120", 120, 99, 0x0, 0x50, ""), ("sm_121", 121, 99, 0x0, 0x50, "sm_120"))),
)}
# sm_70 defaults to the CUDA 12 dialect: CUDA 13 tools (and nvdisasm 13.5) dropped Volta.


@dataclass(frozen=True)
class ConstantSlot:
    """A word (or pair) of constant bank 0 that the driver fills and hand-written SASS reads,
    by an arch-neutral name: its byte offset per arch, or why the arch has none."""
    name: str
    meaning: str
    offsets: dict[str, int]            # arch name -> byte offset in c[0x0]
    missing: str = ""                  # why an arch not in `offsets` has no such slot


# Offsets as ptxas 12.9 reads them (nvdisasm of small PTX kernels per arch): the memory
# descriptor with `ULDC.64 UR4, c[0x0][0x118]` (sm_80..sm_89), `c[0x0][0x208]` (sm_90) or
# `LDCU.64 UR4, c[0x0][0x358]` (Blackwell) before LDG/STG, none on sm_70/sm_75 (their LDG/STG
# take no descriptor); the stack pointer with `MOV R1, c[0x0][0x28]` (`c[0x0][0x37c]` on
# Blackwell) at the top of every kernel; the shared window with
# `MOV R4, c[0x0][0x18]; MOV R5, c[0x0][0x1c]` for `cvta.shared.u64` (sm_90 reads no slot
# for it); the local window with `IADD3 R4, P0, R1, c[0x0][0x20]` for `cvta.local.u64`.
CONSTANT_SLOTS: dict[str, ConstantSlot] = {s.name: s for s in (
    ConstantSlot("memoryDescriptor", "the 64-bit global-memory descriptor (desc[UR] of LDG, STG, ATOMG, RED)",
                 {"sm_80": 0x118, "sm_86": 0x118, "sm_89": 0x118, "sm_90": 0x208,
                  **dict.fromkeys(("sm_100", "sm_103", "sm_120", "sm_121"), 0x358)},
                 "its global-memory instructions take no descriptor (ptxas: `LDG.E.SYS R0, [R2]`, no desc[UR])"),
    ConstantSlot("stackPointer", "the initial stack pointer (ptxas: `MOV R1, stackPointer` first)",
                 {**dict.fromkeys(("sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90"), 0x28),
                  **dict.fromkeys(("sm_100", "sm_103", "sm_120", "sm_121"), 0x37c)}),
    ConstantSlot("sharedWindow", "the 64-bit generic address of shared memory's window (cvta.shared)",
                 dict.fromkeys(("sm_70", "sm_75", "sm_80", "sm_86", "sm_89"), 0x18),
                 "ptxas reads no constant for the shared window there"),
    ConstantSlot("localWindow", "the 64-bit generic address of local memory's window (cvta.local)",
                 dict.fromkeys(("sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90"), 0x20)),
)}


def constant_slot(name: str, arch: Arch) -> int:
    """The byte offset in c[0x0] of the slot called `name` on `arch`; ValueError (with the
    reason) where the arch has none."""
    slot = CONSTANT_SLOTS[name]
    if arch.name not in slot.offsets:
        where = ", ".join(slot.offsets)
        raise ValueError(f"'{name}' ({slot.meaning}) does not exist on {arch.name}: {slot.missing}; "
                         f"it exists on {where}")
    return slot.offsets[arch.name]


class UnknownArch(SassError, ValueError):
    """An architecture sassas does not target (a SassError for the user, a ValueError for
    callers that check a name)."""


# The archs with an arch-specific ("a") target, as nvcc 13.0 and ptxas 12.9 take them.
ACCELERATED = ("sm_90", "sm_100", "sm_103", "sm_120", "sm_121")


def get_arch(name: str) -> Arch:
    """'sm_90', 'sm90', 'SM90' or '90' -> the Arch; 'sm_90a' -> its arch-specific target."""
    digits = str(name).lower().removeprefix("sm").lstrip("_")
    key = f"sm_{digits}"
    if key.endswith("a") and key[:-1] in ACCELERATED:
        # nvcc 13.0 marks the target in .nv.compat only (CUDA_ACCELERATOR_TARGET 1, e_flags as
        # the plain arch's); ptxas 12.9's CUDA 12 header also sets e_flags bit 0x800 (elf.writer).
        base = ARCHS[key[:-1]]
        compat = tuple((n, 1 if n == "EICOMPAT_ATTR_CUDA_ACCELERATOR_TARGET" else v) for n, v in base.compat)
        return replace(base, features="a", compat=compat)
    try:
        return ARCHS[key]
    except KeyError:
        targets = ", ".join([*ARCHS, *(a + "a" for a in ACCELERATED)])
        raise UnknownArch(f"unknown architecture {name!r}; supported: {targets}") from None


def arch_from_sm(sm: int) -> Arch:
    for arch in ARCHS.values():
        if arch.sm == sm:
            return arch
    raise ValueError(f"unsupported SM number {sm}; known: {', '.join(ARCHS)}")


@dataclass(frozen=True)
class ElfAbi:
    """A cubin dialect: what changes in the ELF between the CUDA 12 and CUDA 13 toolkits."""
    name: str
    osabi: int                 # e_ident[EI_OSABI]
    abi_version: int           # e_ident[EI_ABIVERSION]
    # e_version: CUDA 12 writes the toolkit version there (0x81 = 12.9), CUDA 13 writes 1
    # and moves the version to .note.nv.cuinfo.
    e_version: int
    sm_shifts: tuple[int, ...]  # e_flags = flag_bits | sum(sm << s for s in sm_shifts)
    sm_shift_read: int          # where the reader finds the SM number
    flag_bits: int
    # Named-barrier count: bits 20..26 of .text sh_flags (CUDA 12) or EIATTR_NUM_BARRIERS (13).
    barriers_in_text_flags: bool
    notes: bool                # writes .note.nv.tkinfo / .note.nv.cuinfo
    cuda_api_version: int      # EIATTR_CUDA_API_VERSION: toolkit version as major*10+minor
    toolkit_version: int       # in .note.nv.cuinfo
    # e_flags bit of an arch-specific target (sm_90a): ptxas 12.9 sets 0x800 in the CUDA 12
    # header; nvcc 13.0 sets none (CUDA_ACCELERATOR_TARGET in .nv.compat says it).
    accelerator_flag: int = 0


# e_flags bits: CUDA 12 = EF_CUDA_TEXMODE_UNIFIED (0x100) | EF_CUDA_64BIT_ADDRESS (0x400),
# SM number in bits 0..7 and virtual SM in bits 16..23 (sm_75: 0x4b054b).
# CUDA 13 = 0x6000004 | SM << 8 (sm_75: 0x6004b04), as measured; the low bits' meaning is
# not documented publicly.
ELF_ABIS: dict[str, ElfAbi] = {a.name: a for a in (
    ElfAbi("cuda12", osabi=0x33, abi_version=7, e_version=129, sm_shifts=(0, 16), sm_shift_read=0,
           flag_bits=0x500, barriers_in_text_flags=True, notes=False,
           cuda_api_version=129, toolkit_version=129, accelerator_flag=0x800),
    ElfAbi("cuda13", osabi=0x41, abi_version=8, e_version=1, sm_shifts=(8,), sm_shift_read=8,
           flag_bits=0x6000004, barriers_in_text_flags=False, notes=True,
           cuda_api_version=130, toolkit_version=130),
)}


def get_abi(name: str) -> ElfAbi:
    try:
        return ELF_ABIS[name]
    except KeyError:
        raise ValueError(f"unknown cubin ELF dialect {name!r}; known: {', '.join(ELF_ABIS)}") from None


def abi_from_header(osabi: int, abi_version: int) -> ElfAbi:
    for abi in ELF_ABIS.values():
        if abi.osabi == osabi and abi.abi_version == abi_version:
            return abi
    raise ValueError(f"unknown cubin ELF dialect: OSABI {osabi:#x}, ABI version {abi_version}")
