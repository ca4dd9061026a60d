"""What the assembler hands over to the cubin writer (and what the reader gives back): kernels
(:class:`KernelImage` with its :class:`ParamInfo`), user constants (:class:`ConstantBank`) and
module data (:class:`ModuleImage`: :class:`GlobalObject`, :class:`Relocation`).

The image speaks the ELF file's words where the driver reads them verbatim: a global's symbol
binding (:class:`STB`) and a relocation's type (:class:`RelocType`) are the numbers the writer
puts in the file. How those become sections and bytes is :mod:`sassas.elf`'s business.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Optional, Sequence, Union

from .arch import Arch, get_arch


class STB(IntEnum):
    """A symbol's binding (ELF st_info >> 4): LOCAL (the file's own), GLOBAL (`.visible`), WEAK."""
    LOCAL = 0
    GLOBAL = 1
    WEAK = 2


class RelocType(IntEnum):
    """Relocation types, as `cuobjdump -elf` 13.5 names them (numbers from readelf on ptxas's
    cubins). Module data: R_CUDA_64, R_CUDA_G64. Code (`.rel(a).text.<function>`): the rest,
    each patching one field of the instruction at r_offset."""
    R_CUDA_64 = 2          # 64-bit address of the symbol (+ addend), e.g. in constant bank 4
    R_CUDA_G64 = 4         # 64-bit global address, in initialised global data (.nv.global.init)
    R_CUDA_ABS32_LO_32 = 0x38   # low 32 bits of the address, into the immediate at bits 32..63
    R_CUDA_ABS32_HI_32 = 0x39   # high 32 bits, same field
    R_CUDA_ABS47_34 = 0x3A      # a CALL.ABS target, sm_70..sm_89
    R_CUDA_ABS55_16_34 = 0x4B   # a CALL.ABS target, sm_90


def code_relocation_type(arch: Arch, part: str) -> RelocType:
    """The relocation ptxas writes for `32@lo(x)` ("lo"), `32@hi(x)` ("hi") and a CALL.ABS
    target ("abs") on `arch`."""
    if part == "lo":
        return RelocType.R_CUDA_ABS32_LO_32
    if part == "hi":
        return RelocType.R_CUDA_ABS32_HI_32
    return RelocType(arch.call_relocation)


_CODE_RELOCATION_PARTS = {RelocType.R_CUDA_ABS32_LO_32: "lo", RelocType.R_CUDA_ABS32_HI_32: "hi",
                          RelocType.R_CUDA_ABS47_34: "abs", RelocType.R_CUDA_ABS55_16_34: "abs"}


def code_relocation_part(rtype: int) -> Optional[str]:
    """The inverse: "lo", "hi", "abs", or None for a type that is not one of those."""
    return _CODE_RELOCATION_PARTS.get(rtype)


def align_up(value: int, alignment: int) -> int:
    """`value` rounded up to a multiple of `alignment`."""
    return (value + alignment - 1) // alignment * alignment if alignment > 1 else value


@dataclass(frozen=True)
class ParamInfo:
    offset: int               # bytes from the parameter base (c[0x0][param_base + offset])
    size: int                 # bytes


@dataclass
class KernelImage:
    name: str
    code: bytes
    params: list[ParamInfo]              # in ordinal order
    registers: int
    shared_bytes: int = 0                # static shared memory
    max_threads: Union[int, tuple[int, ...], None] = None      # .maxntid
    min_blocks: Optional[int] = None     # .minnctapersm: only lowers MAXREG_COUNT (as ptxas)
    exit_offsets: Optional[list[int]] = None   # None: found by scanning the code for EXIT
    s2r_ctaid_offsets: list[int] = field(default_factory=list)
    barriers: int = 0                    # named barriers used (BAR.SYNC 0 counts as 1)
    uses_local: int = 0                  # frame (local memory) bytes per thread
    req_threads: Union[int, tuple[int, ...], None] = None      # .reqntid
    max_registers: Optional[int] = None  # MAXREG_COUNT; None: arch limit or launch-bounds value
    shared_align: int = 16
    extra_attributes: list = field(default_factory=list)   # sassas.elf.NvInfoAttribute, per-kernel, verbatim
    # Constant banks of the kernel besides bank 0 (ptxas puts 64-bit immediates in bank 2):
    # bank -> bytes, written as `.nv.constant<bank>.<kernel>`.
    constant_banks: dict[int, bytes] = field(default_factory=dict)
    # Addresses the driver writes into the code at load (offset = the instruction's), against
    # kernels, functions, global variables or names no module defines (`vprintf`).
    relocations: list["Relocation"] = field(default_factory=list)
    # False: a device function (`.func`), called by kernels, not launchable: a local symbol
    # without STO_CUDA_ENTRY, no parameters, no constant bank 0.
    entry: bool = True

    @property
    def param_bytes(self) -> int:
        return max((p.offset + p.size for p in self.params), default=0)

    def const0_size(self, arch: Union[str, Arch]) -> int:
        arch = get_arch(arch) if isinstance(arch, str) else arch
        return arch.param_base + self.param_bytes


@dataclass
class ConstantBank:
    """User constants (`__constant__`), constant bank 3; `symbols`: name -> (offset, size)."""
    data: bytes
    symbols: dict[str, tuple[int, int]] = field(default_factory=dict)


@dataclass
class GlobalObject:
    """A module-wide variable in global memory: `.nv.global.init` when it has initial bytes
    (`initial`, `size` bytes), else `.nv.global` (zeros, NOBITS). `offset` None: placed after
    the section's previous object at `align`."""
    name: str
    size: int
    align: int = 1
    offset: Optional[int] = None
    initial: Optional[bytes] = None
    bind: STB = STB.LOCAL


@dataclass(frozen=True)
class Relocation:
    """A relocation of module data: at byte `offset` of its section, `symbol` (the name of a
    GlobalObject or a kernel) + `addend`, of `type`."""
    offset: int
    symbol: str
    type: int = 2                    # RelocType.R_CUDA_64
    addend: int = 0


@dataclass
class ModuleImage:
    """Module-level data beside the kernels: global variables, module constant banks
    (`.nv.constant<b>`, e.g. bank 4: addresses of globals, patched by the driver at load)
    and the relocations of both."""
    globals: list[GlobalObject] = field(default_factory=list)
    constant_banks: dict[int, bytes] = field(default_factory=dict)
    bank_relocations: dict[int, list[Relocation]] = field(default_factory=dict)
    global_relocations: list[Relocation] = field(default_factory=list)   # in .nv.global.init
    # Named objects in module constant banks (`__constant__` variables): bank -> objects
    # (GlobalObject with its offset set; `align` and `initial` unused).
    bank_symbols: dict[int, list[GlobalObject]] = field(default_factory=dict)
    # Symbols the module's data names but no module defines (undefined globals: `vprintf`,
    # whose address CUTLASS's printf keeps in bank 4), for the driver to resolve.
    externs: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.globals or self.constant_banks or self.bank_relocations or self.global_relocations
                    or self.bank_symbols or self.externs)


def find_exit_offsets(arch: Union[str, Arch], code: bytes) -> list[int]:
    """Byte offsets of EXIT instructions (predicated ones included, as ptxas lists them)."""
    arch = get_arch(arch) if isinstance(arch, str) else arch
    return [pos for pos in range(0, len(code) - 15, 16)
            if int.from_bytes(code[pos:pos + 2], "little") & 0xFFF == arch.exit_opcode]


class GlobalLayout:
    """Global objects laid out in their sections one at a time: `.nv.global.init` for those
    with initial bytes, `.nv.global` for the others, each at its `offset` or else aligned after
    the previous one. `sections`: section name -> ([(object, offset)], size, alignment)."""

    def __init__(self):
        self.sections: dict[str, tuple[list[tuple[GlobalObject, int]], int, int]] = {}
        self._names: set[str] = set()

    def place(self, obj: GlobalObject) -> None:
        """Add `obj`; a ValueError (and nothing added) where it cannot go."""
        where = f"global {obj.name!r}"
        if obj.name in self._names:
            raise ValueError(f"{where} defined twice")
        if obj.size <= 0 or obj.align <= 0 or obj.align & (obj.align - 1):
            raise ValueError(f"{where}: size {obj.size} / alignment {obj.align}: expected a positive size "
                             f"and a power-of-two alignment")
        if obj.initial is not None and len(obj.initial) != obj.size:
            raise ValueError(f"{where}: {len(obj.initial)} initial bytes for {obj.size}")
        section = ".nv.global.init" if obj.initial is not None else ".nv.global"
        placed, end, align = self.sections.get(section, ([], 0, 1))
        offset = align_up(end, obj.align) if obj.offset is None else obj.offset
        if offset % obj.align:
            raise ValueError(f"{where}: offset {offset:#x} is not a multiple of its alignment {obj.align}")
        if offset < end:        # (only an explicit offset can fall among the objects placed)
            for other, at in placed:
                if offset < at + other.size and at < offset + obj.size:
                    raise ValueError(f"{where} ({offset:#x}+{obj.size}) overlaps {other.name!r} ({at:#x}+{other.size})")
        self._names.add(obj.name)
        placed.append((obj, offset))
        self.sections[section] = (placed, max(end, offset + obj.size), max(align, obj.align))


def place_globals(objects: Sequence[GlobalObject]) -> dict[str, tuple[list[tuple[GlobalObject, int]], int, int]]:
    """Lay the objects out in their sections (GlobalLayout): section name -> ([(object,
    offset)], size, alignment)."""
    layout = GlobalLayout()
    for obj in objects:
        layout.place(obj)
    return layout.sections
