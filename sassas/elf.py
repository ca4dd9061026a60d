"""Cubin files: a writer built from scratch (model -> layout -> bytes) and a reader.

A cubin is an ELF64 executable (machine EM_CUDA) holding, per kernel:

    .text.<k>           the machine code; sh_info = the kernel's symbol (+ register count in
                        bits 24..31 before sm_90); sh_flags bits 20..26 = named barriers (CUDA 12)
    .nv.info.<k>        attributes of the kernel: parameters, exits, launch bounds ...
    .nv.constant0.<k>   constant bank 0 image: driver area + parameters (zeros)
    .nv.shared.<k>      NOBITS, its size is the kernel's static shared memory

plus module-wide `.nv.info` (register count and stack sizes per kernel), `.nv.callgraph`,
`.symtab`/`.strtab`/`.shstrtab`, optional `.nv.constant3` (user constants), and, in the CUDA 13
dialect, `.note.nv.tkinfo` / `.note.nv.cuinfo`. Module data (:class:`ModuleImage`): global
variables in `.nv.global.init` (initialised) / `.nv.global` (NOBITS) with OBJECT symbols,
module constant banks `.nv.constant<b>` (bank 4: addresses of globals), and their relocations
`.rel.<section>` (addend in the data; `.nv.rel.action` beside them) or `.rela.<section>` (sm_90)
of types R_CUDA_64 / R_CUDA_G64. The two dialects and the per-arch numbers sit
in :mod:`sassas.arch`.

`.nv.info` holds a sequence of attributes ``format:u8 attribute:u8 payload``; the attributes
are named objects here (:class:`NvInfoAttribute` of an :class:`AttributeKind` from
:data:`EIATTR`), never bare numbers.
"""
from __future__ import annotations

import re

import struct
from dataclasses import dataclass, field
from enum import IntEnum, IntFlag
from typing import Any, Callable, Optional, Sequence, Union

from .arch import Arch, ElfAbi, abi_from_header, arch_from_sm, get_abi, get_arch

# --------------------------------------------------------------------------------------------
# ELF constants (only those a cubin uses)
# --------------------------------------------------------------------------------------------

ELF_MAGIC = b"\x7fELF"
ELFCLASS64 = 2
ELFDATA2LSB = 1
EV_CURRENT = 1
ET_EXEC = 2
EM_CUDA = 190
STO_CUDA_ENTRY = 0x10          # st_other of a kernel entry point


class SHT(IntEnum):
    NULL = 0
    PROGBITS = 1
    SYMTAB = 2
    STRTAB = 3
    RELA = 4
    NOTE = 7
    NOBITS = 8
    REL = 9
    CUDA_INFO = 0x70000000
    CUDA_CALLGRAPH = 0x70000001
    CUDA_RELOCINFO = 0x7000000B     # .nv.rel.action
    CUDA_COMPAT_INFO = 0x70000086


class SHF(IntFlag):
    NONE = 0
    WRITE = 0x1
    ALLOC = 0x2
    EXECINSTR = 0x4
    INFO_LINK = 0x40
    # OS-specific bits ptxas sets on the two notes (meaning undocumented).
    CUDA_CUINFO_NOTE = 0x1000000
    CUDA_TKINFO_NOTE = 0x2000000


TEXT_BARRIERS_SHIFT = 20       # named-barrier count in .text sh_flags (CUDA 12 dialect)
TEXT_BARRIERS_MASK = 0x7F
TEXT_REGCOUNT_SHIFT = 24       # register count in .text sh_info before sm_90


class STB(IntEnum):
    LOCAL = 0
    GLOBAL = 1
    WEAK = 2


class STT(IntEnum):
    NOTYPE = 0
    OBJECT = 1
    FUNC = 2
    SECTION = 3


class PT(IntEnum):
    LOAD = 1
    PHDR = 6


class PF(IntFlag):
    X = 1
    W = 2
    R = 4


class NoteType(IntEnum):
    CUDA_CUINFO = 1000         # .note.nv.cuinfo
    CUDA_TKINFO = 2000         # .note.nv.tkinfo


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


# ptxas writes `.nv.rel.action` (CUDA_RELOCINFO, entries of 8 bytes) beside relocations in
# its REL-dialect cubins (sm_50..sm_89), always these 16 bytes: in every cubin of the test
# corpora (CUDA 12.6 and 12.8 nvcc, ptxas 12.9). Their meaning is not documented; we copy them.
REL_ACTION = bytes.fromhex("73000000000000000000001125000536")

NOTE_OWNER = b"NVIDIA Corp\0"
NOTE_VERSION = 2

# ptxas writes these four caller/callee pairs in every .nv.callgraph (entry 0 with the
# negative "callees" -1..-4); their meaning is not documented, we copy them.
CALLGRAPH_SENTINELS = ((0, -1), (0, -2), (0, -3), (0, -4))


# --------------------------------------------------------------------------------------------
# Records: declared once, used by the writer and the reader
# --------------------------------------------------------------------------------------------

class Record:
    """A fixed-layout little-endian record: ``Record('Elf64_Sym', [('st_name', 'I'), ...])``."""

    def __init__(self, name: str, fields: Sequence[tuple[str, str]]):
        self.name = name
        self.fields = tuple(f for f, _ in fields)
        self.struct = struct.Struct("<" + "".join(code for _, code in fields))
        self.size = self.struct.size

    def pack(self, **values: Any) -> bytes:
        return self.struct.pack(*(values[f] for f in self.fields))

    def unpack(self, data: bytes, offset: int = 0) -> dict[str, Any]:
        return dict(zip(self.fields, self.struct.unpack_from(data, offset)))


Elf64_Ehdr = Record("Elf64_Ehdr", [
    ("e_ident", "16s"), ("e_type", "H"), ("e_machine", "H"), ("e_version", "I"),
    ("e_entry", "Q"), ("e_phoff", "Q"), ("e_shoff", "Q"), ("e_flags", "I"),
    ("e_ehsize", "H"), ("e_phentsize", "H"), ("e_phnum", "H"),
    ("e_shentsize", "H"), ("e_shnum", "H"), ("e_shstrndx", "H")])
Elf64_Shdr = Record("Elf64_Shdr", [
    ("sh_name", "I"), ("sh_type", "I"), ("sh_flags", "Q"), ("sh_addr", "Q"),
    ("sh_offset", "Q"), ("sh_size", "Q"), ("sh_link", "I"), ("sh_info", "I"),
    ("sh_addralign", "Q"), ("sh_entsize", "Q")])
Elf64_Sym = Record("Elf64_Sym", [
    ("st_name", "I"), ("st_info", "B"), ("st_other", "B"), ("st_shndx", "H"),
    ("st_value", "Q"), ("st_size", "Q")])
Elf64_Phdr = Record("Elf64_Phdr", [
    ("p_type", "I"), ("p_flags", "I"), ("p_offset", "Q"), ("p_vaddr", "Q"),
    ("p_paddr", "Q"), ("p_filesz", "Q"), ("p_memsz", "Q"), ("p_align", "Q")])
Elf64_Rel = Record("Elf64_Rel", [("r_offset", "Q"), ("r_info", "Q")])
Elf64_Rela = Record("Elf64_Rela", [("r_offset", "Q"), ("r_info", "Q"), ("r_addend", "q")])
Elf64_Nhdr = Record("Elf64_Nhdr", [("n_namesz", "I"), ("n_descsz", "I"), ("n_type", "I")])
CallgraphEntry = Record("CallgraphEntry", [("caller", "I"), ("callee", "i")])
# .note.nv.cuinfo descriptor: note version, virtual SM, toolkit version (major*10+minor).
CuInfoDesc = Record("CuInfoDesc", [("version", "H"), ("virtual_sm", "H"), ("toolkit", "I")])
# .note.nv.tkinfo descriptor head: offsets into the string blob that follows it.
TkInfoDesc = Record("TkInfoDesc", [
    ("version", "I"), ("object_name", "I"), ("tool_name", "I"), ("tool_version", "I"),
    ("tool_branch", "I"), ("tool_options", "I")])

# .nv.info attribute header and payload records.
NvInfoHeader = Record("NvInfoHeader", [("format", "B"), ("attribute", "B")])
SymbolValue = Record("SymbolValue", [("symbol", "I"), ("value", "I")])
KParamInfoRecord = Record("KParamInfo", [
    ("index", "I"), ("ordinal", "H"), ("offset", "H"), ("flags", "I")])
ParamCbankRecord = Record("ParamCbank", [("symbol", "I"), ("offset", "H"), ("size", "H")])

# Bit fields of KParamInfo.flags: name, lowest bit, width.
KPARAM_FLAG_FIELDS = (
    ("log_alignment", 0, 8),    # log2 of the pointee's alignment (0 for by-value params)
    ("space", 8, 4),
    ("cbank", 12, 5),           # 0x1f as ptxas writes it
    ("not_cbank", 17, 1),       # 0: the parameter lives in the constant bank
    ("size", 18, 14),           # bytes
)
KPARAM_CBANK_DEFAULT = 0x1F


# --------------------------------------------------------------------------------------------
# .nv.info attributes
# --------------------------------------------------------------------------------------------

class EIFMT(IntEnum):
    NVAL = 1      # no value (2 padding bytes)
    BVAL = 2      # one byte (+1 padding byte)
    HVAL = 3      # 16-bit value
    SVAL = 4      # 16-bit size, then that many bytes


@dataclass(frozen=True)
class KParamInfo:
    ordinal: int
    offset: int               # from the start of the parameter block
    size: int
    index: int = 0
    log_alignment: int = 0
    space: int = 0
    cbank: int = KPARAM_CBANK_DEFAULT
    not_cbank: int = 0


@dataclass(frozen=True)
class ParamCbank:
    symbol: Any               # Symbol (writer) / symbol name (reader)
    offset: int               # parameter base in bank 0
    size: int                 # parameter bytes


@dataclass(frozen=True)
class SymbolAttr:
    symbol: Any               # Symbol (writer) / symbol name (reader)
    value: int


def _enc_kparam(v: KParamInfo, sym_index: Callable) -> bytes:
    flags = 0
    for name, lo, width in KPARAM_FLAG_FIELDS:
        x = getattr(v, name)
        if not 0 <= x < (1 << width):
            raise ValueError(f"KPARAM_INFO {name}={x} does not fit in {width} bits")
        flags |= x << lo
    return KParamInfoRecord.pack(index=v.index, ordinal=v.ordinal, offset=v.offset, flags=flags)


def _dec_kparam(b: bytes, sym_name: Callable) -> KParamInfo:
    r = KParamInfoRecord.unpack(b)
    bits = {name: (r["flags"] >> lo) & ((1 << width) - 1) for name, lo, width in KPARAM_FLAG_FIELDS}
    return KParamInfo(ordinal=r["ordinal"], offset=r["offset"], index=r["index"], **bits)


def _enc_symbol_value(v: SymbolAttr, sym_index: Callable) -> bytes:
    return SymbolValue.pack(symbol=sym_index(v.symbol), value=v.value)


def _dec_symbol_value(b: bytes, sym_name: Callable) -> SymbolAttr:
    r = SymbolValue.unpack(b)
    return SymbolAttr(sym_name(r["symbol"]), r["value"])


def _enc_param_cbank(v: ParamCbank, sym_index: Callable) -> bytes:
    return ParamCbankRecord.pack(symbol=sym_index(v.symbol), offset=v.offset, size=v.size)


def _dec_param_cbank(b: bytes, sym_name: Callable) -> ParamCbank:
    r = ParamCbankRecord.unpack(b)
    return ParamCbank(sym_name(r["symbol"]), r["offset"], r["size"])


def _scalar(fmt: str) -> tuple[Callable, Callable]:
    return (lambda v, sym_index: struct.pack(fmt, v)), (lambda b, sym_name: struct.unpack(fmt, b)[0])


# Payload codecs, by the name AttributeKind.payload uses:
# (encode(value, sym_index) -> bytes, decode(bytes, sym_name) -> value).
PAYLOADS: dict[str, tuple[Callable, Callable]] = {
    "none": (lambda v, sym_index: b"", lambda b, sym_name: None),
    "u8": _scalar("<B"),
    "u16": _scalar("<H"),
    "u32": _scalar("<I"),
    "u32[]": (lambda v, sym_index: struct.pack(f"<{len(v)}I", *v),
              lambda b, sym_name: list(struct.unpack(f"<{len(b) // 4}I", b))),
    "symbol,u32": (_enc_symbol_value, _dec_symbol_value),
    "kparam": (_enc_kparam, _dec_kparam),
    "param_cbank": (_enc_param_cbank, _dec_param_cbank),
    "bytes": (lambda v, sym_index: bytes(v), lambda b, sym_name: bytes(b)),
}


@dataclass(frozen=True)
class AttributeKind:
    name: str
    code: int
    format: EIFMT
    payload: str              # key of PAYLOADS


# The attributes sassas writes or reads by name. Codes and formats checked against
# `cuobjdump -elf` 13.5 (tests/test_elf.py::test_attribute_names_match_cuobjdump); any other
# code read from a foreign cubin is kept as raw bytes under EIATTR_<code>.
EIATTR: dict[str, AttributeKind] = {k.name: k for k in (
    #              name                            code  format       payload
    AttributeKind("EIATTR_CTAIDZ_USED",            0x04, EIFMT.NVAL, "none"),
    AttributeKind("EIATTR_MAX_THREADS",            0x05, EIFMT.SVAL, "u32[]"),
    AttributeKind("EIATTR_PARAM_CBANK",            0x0A, EIFMT.SVAL, "param_cbank"),
    AttributeKind("EIATTR_REQNTID",                0x10, EIFMT.SVAL, "u32[]"),
    AttributeKind("EIATTR_FRAME_SIZE",             0x11, EIFMT.SVAL, "symbol,u32"),
    AttributeKind("EIATTR_MIN_STACK_SIZE",         0x12, EIFMT.SVAL, "symbol,u32"),
    AttributeKind("EIATTR_KPARAM_INFO",            0x17, EIFMT.SVAL, "kparam"),
    AttributeKind("EIATTR_CBANK_PARAM_SIZE",       0x19, EIFMT.HVAL, "u16"),
    AttributeKind("EIATTR_MAXREG_COUNT",           0x1B, EIFMT.HVAL, "u16"),
    AttributeKind("EIATTR_EXIT_INSTR_OFFSETS",     0x1C, EIFMT.SVAL, "u32[]"),
    AttributeKind("EIATTR_S2RCTAID_INSTR_OFFSETS", 0x1D, EIFMT.SVAL, "u32[]"),
    AttributeKind("EIATTR_CRS_STACK_SIZE",         0x1E, EIFMT.SVAL, "u32"),
    AttributeKind("EIATTR_MAX_STACK_SIZE",         0x23, EIFMT.SVAL, "symbol,u32"),
    AttributeKind("EIATTR_REGCOUNT",               0x2F, EIFMT.SVAL, "symbol,u32"),
    AttributeKind("EIATTR_SW_WAR",                 0x36, EIFMT.SVAL, "u32"),
    AttributeKind("EIATTR_CUDA_API_VERSION",       0x37, EIFMT.SVAL, "u32"),
    AttributeKind("EIATTR_NUM_BARRIERS",           0x4C, EIFMT.BVAL, "u8"),
    AttributeKind("EIATTR_SPARSE_MMA_MASK",        0x50, EIFMT.HVAL, "u16"),
)}
EIATTR_BY_CODE: dict[int, AttributeKind] = {k.code: k for k in EIATTR.values()}

# `.nv.compat` (CUDA 13 dialect) uses the same record format with its own codes, as
# `cuobjdump -elf` 13.5 names them (0x07 it does not name).
EICOMPAT: dict[str, AttributeKind] = {k.name: k for k in (
    AttributeKind("EICOMPAT_ATTR_ISA_CLASS",                          0x02, EIFMT.BVAL, "u8"),
    AttributeKind("EICOMPAT_ATTR_INST_TENSORMAP_V1",                  0x03, EIFMT.BVAL, "u8"),
    AttributeKind("EICOMPAT_ATTR_INST_TCGEN05_MMA",                   0x05, EIFMT.BVAL, "u8"),
    AttributeKind("EICOMPAT_ATTR_ENABLE_OPPORTUNISTIC_FINALIZATION",  0x06, EIFMT.BVAL, "u8"),
    AttributeKind("EICOMPAT_ATTR_0x07",                               0x07, EIFMT.HVAL, "u16"),
    AttributeKind("EICOMPAT_ATTR_CUDA_ACCELERATOR_TARGET",            0x09, EIFMT.BVAL, "u8"),
    AttributeKind("EICOMPAT_ATTR_CAN_FASTPATH_FINALIZE",              0x0B, EIFMT.SVAL, "u32[]"),
)}
EICOMPAT_BY_CODE: dict[int, AttributeKind] = {k.code: k for k in EICOMPAT.values()}


@dataclass(frozen=True)
class NvInfoAttribute:
    kind: AttributeKind
    value: Any

    @property
    def name(self) -> str:
        return self.kind.name

    @classmethod
    def make(cls, name: str, value: Any) -> "NvInfoAttribute":
        return cls(EIATTR[name], value)

    def encode(self, sym_index: Callable[[Any], int]) -> bytes:
        encode, _ = PAYLOADS[self.kind.payload]
        payload = encode(self.value, sym_index)
        head = NvInfoHeader.pack(format=self.kind.format, attribute=self.kind.code)
        if self.kind.format == EIFMT.SVAL:
            return head + struct.pack("<H", len(payload)) + payload
        # NVAL/BVAL/HVAL: the value fills the two bytes after the header.
        return head + payload.ljust(2, b"\0")


def encode_nv_info(attributes: Sequence[NvInfoAttribute], sym_index: Callable[[Any], int]) -> bytes:
    return b"".join(a.encode(sym_index) for a in attributes)


def decode_nv_info(data: bytes, sym_name: Callable[[int], Any] = lambda i: i,
                   kinds: dict[int, AttributeKind] = EIATTR_BY_CODE, prefix: str = "EIATTR") -> list[NvInfoAttribute]:
    attributes, pos = [], 0
    while pos + 4 <= len(data):
        head = NvInfoHeader.unpack(data, pos)
        try:
            fmt, code = EIFMT(head["format"]), head["attribute"]
        except ValueError:
            raise CubinFormatError(f"damaged cubin: attribute format {head['format']:#x} at offset {pos:#x} "
                                   "of an .nv.info section") from None
        if fmt == EIFMT.SVAL:
            size = struct.unpack_from("<H", data, pos + 2)[0]
            payload = data[pos + 4:pos + 4 + size]
            pos += 4 + size
        else:
            payload = data[pos + 2:pos + 4]
            pos += 4
        kind = kinds.get(code)
        if kind is None or kind.format != fmt:
            kind = AttributeKind(f"{prefix}_{code:#04x}", code, fmt, "bytes")
        elif fmt == EIFMT.BVAL:
            payload = payload[:1]
        elif fmt == EIFMT.NVAL:
            payload = b""
        _, decode = PAYLOADS[kind.payload]
        try:
            value = decode(payload, sym_name)
        except struct.error:
            # A known code with a payload of another shape than ours (seen from other
            # toolkit versions): keep the name, carry the bytes.
            kind = AttributeKind(kind.name, code, fmt, "bytes")
            value = bytes(payload)
        attributes.append(NvInfoAttribute(kind, value))
    return attributes


# --------------------------------------------------------------------------------------------
# What the assembler hands over
# --------------------------------------------------------------------------------------------

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
    extra_attributes: list[NvInfoAttribute] = field(default_factory=list)   # per-kernel, verbatim
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


def _dim3(value: Union[int, tuple[int, ...], None]) -> Optional[list[int]]:
    if value is None:
        return None
    dims = [value] if isinstance(value, int) else list(value)
    if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
        raise ValueError(f"thread-block bound {value!r}: expected 1..3 positive numbers")
    return dims + [1] * (3 - len(dims))


# --------------------------------------------------------------------------------------------
# Model
# --------------------------------------------------------------------------------------------

@dataclass(eq=False)
class Section:
    name: str
    type: SHT
    flags: int = 0
    # bytes, or a function of the finished Layout (for contents that name symbol indices)
    content: Union[bytes, Callable[["Layout"], bytes]] = b""
    nobits_size: int = 0
    link: Optional["Section"] = None
    info: Union[int, "Section", "Symbol"] = 0
    info_high: int = 0         # bits or'ed into sh_info (register count of .text)
    align: int = 1
    entsize: int = 0


@dataclass(eq=False)
class Symbol:
    name: str
    section: Optional[Section]
    value: int = 0
    size: int = 0
    bind: STB = STB.LOCAL
    type: STT = STT.NOTYPE
    other: int = 0


class Layout:
    """Indices, string offsets, file offsets: everything serialisation needs."""

    def __init__(self, sections: list[Section], symbols: list[Symbol]):
        self.sections = [Section("", SHT.NULL)] + sections
        self.symbols = [Symbol("", None)] + symbols
        self.section_index = {id(s): i for i, s in enumerate(self.sections)}
        self.symbol_index_of = {id(s): i for i, s in enumerate(self.symbols)}
        self.first_global = next((i for i, s in enumerate(self.symbols) if s.bind != STB.LOCAL),
                                 len(self.symbols))
        if any(s.bind == STB.LOCAL for s in self.symbols[self.first_global:]):
            raise AssertionError("ELF requires local symbols before global ones")

    def index(self, thing: Union[Section, Symbol, int, None]) -> int:
        if thing is None:
            return 0
        if isinstance(thing, int):
            return thing
        if isinstance(thing, Section):
            return self.section_index[id(thing)]
        return self.symbol_index_of[id(thing)]


class StringTable:
    def __init__(self) -> None:
        self.data = bytearray(b"\0")
        self.offsets: dict[str, int] = {"": 0}

    def add(self, name: str) -> int:
        if name not in self.offsets:
            self.offsets[name] = len(self.data)
            self.data += name.encode() + b"\0"
        return self.offsets[name]


def _align(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment if alignment > 1 else value


def _note(note_type: NoteType, desc: bytes) -> bytes:
    head = Elf64_Nhdr.pack(n_namesz=len(NOTE_OWNER), n_descsz=len(desc), n_type=note_type)
    return head + NOTE_OWNER.ljust(_align(len(NOTE_OWNER), 4), b"\0") + desc.ljust(_align(len(desc), 4), b"\0")


def _tkinfo_desc(arch: Arch) -> bytes:
    strings = [b"", b"sassas", b"sassas cubin writer", b"sassas", f"-arch {arch.name}".encode()]
    offsets, blob = [], bytearray()
    for text in strings:
        offsets.append(len(blob))
        blob += text + b"\0"
    # Object name points at the empty string at offset 0, like ptxas writes it; nvdisasm
    # wants the descriptor size itself padded to 4 bytes.
    desc = TkInfoDesc.pack(version=NOTE_VERSION, object_name=offsets[0], tool_name=offsets[1],
                           tool_version=offsets[2], tool_branch=offsets[3], tool_options=offsets[4]) + bytes(blob)
    return desc.ljust(_align(len(desc), 4), b"\0")


# --------------------------------------------------------------------------------------------
# Writer
# --------------------------------------------------------------------------------------------

def _check_kernel(arch: Arch, k: KernelImage) -> None:
    where = f"kernel {k.name!r}"
    if not k.name or "\0" in k.name:
        raise ValueError(f"{where}: invalid name")
    if len(k.code) == 0 or len(k.code) % 16:
        raise ValueError(f"{where}: code is {len(k.code)} bytes, expected a positive multiple of 16")
    if not 1 <= k.registers <= arch.max_registers:
        raise ValueError(f"{where}: {k.registers} registers, {arch.name} allows 1..{arch.max_registers}")
    if k.param_bytes > arch.max_param_bytes:
        raise ValueError(f"{where}: {k.param_bytes} parameter bytes, {arch.name} allows {arch.max_param_bytes}")
    spans = sorted((p.offset, p.offset + p.size, i) for i, p in enumerate(k.params))
    for p in k.params:
        if p.size <= 0 or p.offset < 0:
            raise ValueError(f"{where}: parameter {p} has a bad offset or size")
    for (a0, a1, i), (b0, b1, j) in zip(spans, spans[1:]):
        if b0 < a1:
            raise ValueError(f"{where}: parameters {i} and {j} overlap")
    if k.shared_bytes < 0 or k.shared_bytes > arch.max_shared_per_block:
        raise ValueError(f"{where}: {k.shared_bytes} bytes of shared memory, "
                         f"{arch.name} allows {arch.max_shared_per_block}")
    if not 0 <= k.barriers <= 16:
        raise ValueError(f"{where}: {k.barriers} named barriers, hardware has 16")
    for off in (k.exit_offsets or []) + k.s2r_ctaid_offsets:
        if off % 16 or not 0 <= off < len(k.code):
            raise ValueError(f"{where}: instruction offset {off:#x} outside the code or unaligned")


def _max_registers(arch: Arch, k: KernelImage) -> int:
    if k.max_registers is not None:
        return k.max_registers
    threads = _dim3(k.max_threads)
    if threads and k.min_blocks:
        # ptxas's launch-bounds limit: the register file shared by min_blocks blocks, rounded
        # down to the allocation granule of 8 (256 threads x 2 blocks -> 128).
        per_thread = arch.register_file // (threads[0] * threads[1] * threads[2] * k.min_blocks)
        return max(8, min(arch.max_registers, per_thread // 8 * 8))
    return arch.max_registers


def write_cubin(arch: Union[str, Arch], kernels: Sequence[KernelImage],
                constants: Union[bytes, ConstantBank, None] = None, *, abi: Optional[str] = None,
                module: Optional[ModuleImage] = None) -> bytes:
    """Build a cubin for `arch` ('sm_70'..'sm_121') holding `kernels`, and `module`'s global
    variables, module constant banks and their relocations.

    `abi` picks the ELF dialect ('cuda12': ptxas 12.x, loads on CUDA 12 and 13 drivers;
    'cuda13': nvcc 13, CUDA 13 drivers only, read by nvdisasm 13 without warnings);
    the default is the arch's (:attr:`sassas.arch.Arch.default_abi`).
    """
    arch = get_arch(arch) if isinstance(arch, str) else arch
    elf_abi = get_abi(abi or arch.default_abi)
    if elf_abi.name not in arch.abis:
        raise ValueError(f"{arch.name} cubins are written in the {' or '.join(arch.abis)} dialect, "
                         f"not {elf_abi.name}")
    names = [k.name for k in kernels]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate kernel names: {names}")
    for k in kernels:
        _check_kernel(arch, k)
    if isinstance(constants, (bytes, bytearray)):
        constants = ConstantBank(bytes(constants))
    module = module or ModuleImage()
    if constants is not None and 3 in module.constant_banks:
        raise ValueError("constant bank 3 given twice: as `constants` and in the module's banks")
    return _serialise(*_build_model(arch, elf_abi, list(kernels), constants, module), arch=arch, abi=elf_abi)


def place_globals(objects: Sequence[GlobalObject]) -> dict[str, tuple[list[tuple[GlobalObject, int]], int, int]]:
    """Lay the objects out in their sections: section name -> ([(object, offset)], size,
    alignment). Objects with initial bytes go to `.nv.global.init`, the others to `.nv.global`,
    each in the order given, at its `offset` or else aligned after the previous one."""
    out: dict[str, tuple[list[tuple[GlobalObject, int]], int, int]] = {}
    names: set[str] = set()
    for obj in objects:
        where = f"global {obj.name!r}"
        if obj.name in names:
            raise ValueError(f"{where} defined twice")
        names.add(obj.name)
        if obj.size <= 0 or obj.align <= 0 or obj.align & (obj.align - 1):
            raise ValueError(f"{where}: size {obj.size} / alignment {obj.align}: expected a positive size "
                             f"and a power-of-two alignment")
        if obj.initial is not None and len(obj.initial) != obj.size:
            raise ValueError(f"{where}: {len(obj.initial)} initial bytes for {obj.size}")
        section = ".nv.global.init" if obj.initial is not None else ".nv.global"
        placed, end, align = out.get(section, ([], 0, 1))
        offset = _align(end, obj.align) if obj.offset is None else obj.offset
        if offset % obj.align:
            raise ValueError(f"{where}: offset {offset:#x} is not a multiple of its alignment {obj.align}")
        for other, at in placed:
            if offset < at + other.size and at < offset + obj.size:
                raise ValueError(f"{where} ({offset:#x}+{obj.size}) overlaps {other.name!r} ({at:#x}+{other.size})")
        placed.append((obj, offset))
        out[section] = (placed, max(end, offset + obj.size), max(align, obj.align))
    return out


def _relocation_section(arch: Arch, target: Section, relocations: Sequence[Relocation],
                        symtab: Section, symbol_of: Callable[[str], "Symbol"],
                        explicit: Optional[bool] = None) -> Section:
    """`.rel.<target>` (or `.rela.` on arches that write explicit addends, or where `explicit`)."""
    explicit = arch.rela if explicit is None else explicit
    record = Elf64_Rela if explicit else Elf64_Rel

    def content(L: "Layout") -> bytes:
        # ptxas lists a section's relocations from the highest offset down; so do we. Symbols
        # are looked up here, once every section's are made.
        out = []
        for r in sorted(relocations, key=lambda r: -r.offset):
            sym = symbol_of(r.symbol)
            fields = dict(r_offset=r.offset, r_info=(L.index(sym) << 32) | int(r.type))
            if explicit:
                fields["r_addend"] = r.addend
            out.append(record.pack(**fields))
        return b"".join(out)

    return Section(f".{'rela' if explicit else 'rel'}{target.name}", SHT.RELA if explicit else SHT.REL,
                   flags=SHF.INFO_LINK, link=symtab, info=target, align=8, entsize=record.size, content=content)


def _module_sections(arch: Arch, module: ModuleImage, symtab: Section, kernel_symbols: dict[str, "Symbol"],
                     external: Callable[[str], "Symbol"]):
    """Sections and symbols of the module's data: (data sections by name, relocation
    sections, module constant banks, local symbols, global symbols). `external(name)`: the
    undefined symbol of one of the module's externs."""
    data: dict[str, Section] = {}
    local_syms: list[Symbol] = []
    global_syms: list[Symbol] = []
    objects: dict[str, Symbol] = {}
    for section_name, (placed, size, align) in place_globals(module.globals).items():
        if section_name == ".nv.global.init":
            image = bytearray(size)
            for obj, at in placed:
                image[at:at + obj.size] = obj.initial
            sec = Section(section_name, SHT.PROGBITS, flags=SHF.WRITE | SHF.ALLOC, content=bytes(image), align=align)
        else:
            sec = Section(section_name, SHT.NOBITS, flags=SHF.WRITE | SHF.ALLOC, nobits_size=size, align=align)
        data[section_name] = sec
        local_syms.append(Symbol(sec.name, sec, type=STT.SECTION))
        for obj, at in placed:
            sym = Symbol(obj.name, sec, value=at, size=obj.size, bind=STB(obj.bind), type=STT.OBJECT)
            objects[obj.name] = sym
            (local_syms if sym.bind == STB.LOCAL else global_syms).append(sym)

    def symbol_of(name: str) -> Symbol:
        sym = objects.get(name) or kernel_symbols.get(name)
        if sym is None and name in module.externs:
            sym = external(name)
        if sym is None:
            raise ValueError(f"relocation against {name!r}: no global variable, kernel or extern of that name")
        return sym

    def with_addends(image: bytes, relocations: Sequence[Relocation], what: str) -> bytes:
        out = bytearray(image)
        for r in relocations:
            if r.type not in (RelocType.R_CUDA_64, RelocType.R_CUDA_G64):
                raise ValueError(f"{what}: relocation type {r.type} is not supported (R_CUDA_64, R_CUDA_G64 are)")
            if r.offset % 8 or r.offset + 8 > len(out):
                raise ValueError(f"{what}: relocation at {r.offset:#x} is unaligned or past the end ({len(out)} bytes)")
            # REL: the addend is the data at the relocated place; RELA: it is in the entry.
            out[r.offset:r.offset + 8] = (0 if arch.rela else r.addend).to_bytes(8, "little", signed=True)
        return bytes(out)

    relocs: list[Section] = []
    banks: list[Section] = []
    for bank, image in sorted(module.constant_banks.items()):
        if not 1 <= bank <= 17:
            raise ValueError(f"module constant bank {bank}: expected 1..17")
        bank_relocs = module.bank_relocations.get(bank, [])
        sec = Section(f".nv.constant{bank}", SHT.PROGBITS, flags=SHF.ALLOC, align=8 if bank_relocs else 4,
                      content=with_addends(bytes(image), bank_relocs, f".nv.constant{bank}"))
        banks.append(sec)
        local_syms.append(Symbol(sec.name, sec, type=STT.SECTION))
        for obj in module.bank_symbols.get(bank, []):
            if obj.name in objects or obj.offset is None or obj.offset + obj.size > len(image):
                raise ValueError(f"constant {obj.name!r}: defined twice, or outside bank {bank}'s {len(image)} bytes")
            sym = Symbol(obj.name, sec, value=obj.offset, size=obj.size, bind=STB(obj.bind), type=STT.OBJECT)
            objects[obj.name] = sym
            (local_syms if sym.bind == STB.LOCAL else global_syms).append(sym)
        if bank_relocs:
            relocs.append(_relocation_section(arch, sec, bank_relocs, symtab, symbol_of))
    for bank in set(module.bank_relocations) | set(module.bank_symbols):
        if bank not in module.constant_banks and (module.bank_relocations.get(bank) or module.bank_symbols.get(bank)):
            raise ValueError(f"relocations or symbols in module constant bank {bank}, which has no data")
    if module.global_relocations:
        init = data.get(".nv.global.init")
        if init is None:
            raise ValueError("relocations in .nv.global.init, which holds no initialised global")
        init.content = with_addends(init.content, module.global_relocations, ".nv.global.init")
        relocs.append(_relocation_section(arch, init, module.global_relocations, symtab, symbol_of))
    for r in [r for rs in module.bank_relocations.values() for r in rs] + module.global_relocations:
        symbol_of(r.symbol)          # every name known, before any byte is written
    return data, relocs, banks, local_syms, global_syms


def _build_model(arch: Arch, abi: ElfAbi, kernels: list[KernelImage],
                 constants: Optional[ConstantBank],
                 module: Optional[ModuleImage] = None) -> tuple[list[Section], list[Symbol]]:
    shstrtab = Section(".shstrtab", SHT.STRTAB)
    strtab = Section(".strtab", SHT.STRTAB)
    symtab = Section(".symtab", SHT.SYMTAB, link=strtab, align=8, entsize=Elf64_Sym.size)
    head = [shstrtab, strtab, symtab]
    if abi.notes:
        tkinfo = Section(".note.nv.tkinfo", SHT.NOTE, flags=SHF.CUDA_TKINFO_NOTE, align=4,
                         content=_note(NoteType.CUDA_TKINFO, _tkinfo_desc(arch)))
        cuinfo_desc = CuInfoDesc.pack(version=NOTE_VERSION, virtual_sm=arch.sm, toolkit=abi.toolkit_version)
        cuinfo = Section(".note.nv.cuinfo", SHT.NOTE, flags=SHF.CUDA_CUINFO_NOTE, align=4, link=tkinfo,
                         content=_note(NoteType.CUDA_CUINFO, cuinfo_desc))
        head += [tkinfo, cuinfo]
        if arch.compat:
            compat_attrs = [NvInfoAttribute(EICOMPAT[name], value) for name, value in arch.compat]
            compat = Section(".nv.compat", SHT.CUDA_COMPAT_INFO, align=4,
                             content=encode_nv_info(compat_attrs, lambda x: x))
            # ptxas points the cuinfo note at the compat section.
            cuinfo.flags |= SHF.INFO_LINK
            cuinfo.info = compat
            head.append(compat)

    module_info_attrs: list[NvInfoAttribute] = []
    module_info = Section(".nv.info", SHT.CUDA_INFO, link=symtab, align=4,
                          content=lambda L: encode_nv_info(module_info_attrs, L.index))
    calls: list[tuple[Symbol, str]] = []      # (caller, callee's name): a CALL.ABS relocation each

    def callgraph_content(L: "Layout") -> bytes:
        # ptxas: the first sentinel, each caller/callee pair once, the other sentinels.
        edges = list(dict.fromkeys((L.index(caller), L.index(code_symbol(callee))) for caller, callee in calls))
        pairs = CALLGRAPH_SENTINELS[:1] + tuple(edges) + CALLGRAPH_SENTINELS[1:]
        return b"".join(CallgraphEntry.pack(caller=a, callee=b) for a, b in pairs)

    callgraph = Section(".nv.callgraph", SHT.CUDA_CALLGRAPH, link=symtab, align=4,
                        entsize=CallgraphEntry.size, content=callgraph_content)

    kernel_infos, texts, shareds, const0s = [], [], [], []
    local_syms: list[Symbol] = []
    global_syms: list[Symbol] = []
    functions: dict[str, Symbol] = {}
    code_relocations: list[tuple[Section, list[Relocation]]] = []
    for k in kernels:
        text_flags = SHF.ALLOC | SHF.EXECINSTR
        if abi.barriers_in_text_flags:
            text_flags |= k.barriers << TEXT_BARRIERS_SHIFT
        text = Section(f".text.{k.name}", SHT.PROGBITS, flags=text_flags, content=bytes(k.code),
                       link=symtab, align=128,
                       info_high=(k.registers << TEXT_REGCOUNT_SHIFT) if arch.regcount_in_text_info else 0)
        if k.entry:
            func = Symbol(k.name, text, size=len(k.code), bind=STB.GLOBAL, type=STT.FUNC, other=STO_CUDA_ENTRY)
            global_syms.append(func)
        else:
            func = Symbol(k.name, text, size=len(k.code), bind=STB.LOCAL, type=STT.FUNC)
            local_syms.append(func)
        functions[k.name] = func
        text.info = func
        texts.append(text)
        local_syms.append(Symbol(text.name, text, type=STT.SECTION))
        if k.relocations:
            code_relocations.append((text, k.relocations))
            calls.extend((func, r.symbol) for r in k.relocations if code_relocation_part(r.type) == "abs")

        if k.shared_bytes:
            shared = Section(f".nv.shared.{k.name}", SHT.NOBITS, flags=SHF.WRITE | SHF.ALLOC | SHF.INFO_LINK,
                             nobits_size=k.shared_bytes, info=text, align=k.shared_align)
            shareds.append(shared)
            local_syms.append(Symbol(shared.name, shared, type=STT.SECTION))

        module_info_attrs += [
            NvInfoAttribute.make("EIATTR_REGCOUNT", SymbolAttr(func, k.registers)),
            NvInfoAttribute.make("EIATTR_FRAME_SIZE", SymbolAttr(func, k.uses_local)),
            NvInfoAttribute.make("EIATTR_MIN_STACK_SIZE", SymbolAttr(func, k.uses_local)),
        ]
        if k.entry:
            const0 = Section(f".nv.constant0.{k.name}", SHT.PROGBITS, flags=SHF.ALLOC | SHF.INFO_LINK,
                             content=bytes(k.const0_size(arch)), info=text, align=4)
            const0s.append(const0)
        for bank, data in sorted(k.constant_banks.items()):
            cbank = Section(f".nv.constant{bank}.{k.name}", SHT.PROGBITS, flags=SHF.ALLOC | SHF.INFO_LINK,
                            content=bytes(data), info=text, align=4)
            const0s.append(cbank)
            local_syms.append(Symbol(cbank.name, cbank, type=STT.SECTION))
        if k.entry:
            const0_sym = Symbol(const0.name, const0, type=STT.SECTION)
            local_syms.append(const0_sym)
            attrs = _kernel_attributes(arch, abi, k, const0_sym)
        else:
            attrs = _function_attributes(arch, abi, k)     # (a device function has no bank 0)
        kernel_infos.append(Section(f".nv.info.{k.name}", SHT.CUDA_INFO, flags=SHF.INFO_LINK, link=symtab,
                                    info=text, align=4,
                                    content=lambda L, attrs=attrs: encode_nv_info(attrs, L.index)))

    extra: list[Section] = []
    if constants is not None:
        const3 = Section(".nv.constant3", SHT.PROGBITS, flags=SHF.ALLOC, content=constants.data, align=4)
        extra.append(const3)
        local_syms.append(Symbol(const3.name, const3, type=STT.SECTION))
        for name, (offset, size) in constants.symbols.items():
            if offset + size > len(constants.data):
                raise ValueError(f"constant {name!r} ({offset:#x}+{size}) outside the bank's {len(constants.data)} bytes")
            local_syms.append(Symbol(name, const3, value=offset, size=size, type=STT.OBJECT))
    local_syms.append(Symbol(callgraph.name, callgraph, type=STT.SECTION))

    undefined: dict[str, Symbol] = {}

    def external(name: str) -> Symbol:
        """A name the driver must find elsewhere: an undefined global symbol, as ptxas writes
        for `vprintf` (one per name, whether code or data refers to it)."""
        sym = undefined.get(name)
        if sym is None:
            sym = undefined[name] = Symbol(name, None, bind=STB.GLOBAL, type=STT.FUNC)
            global_syms.append(sym)
        return sym

    data, relocs, banks, module_locals, module_globals = _module_sections(
        arch, module or ModuleImage(), symtab, functions, external)
    local_syms += module_locals
    global_syms += module_globals
    objects = {s.name: s for s in module_locals + module_globals if s.type == STT.OBJECT}

    def code_symbol(name: str) -> Symbol:
        """A kernel, function or global variable of the module; else an undefined symbol."""
        return functions.get(name) or objects.get(name) or external(name)

    for text, rels in code_relocations:
        for r in rels:
            code_symbol(r.symbol)          # every symbol made before the layout numbers them
        # ptxas: entries with an addend in `.rela.text.<f>`, the others in `.rel.text.<f>`
        # (all in `.rela` on sm_90).
        groups = [(rels, True)] if arch.rela else [([r for r in rels if not r.addend], False),
                                                    ([r for r in rels if r.addend], True)]
        relocs += [_relocation_section(arch, text, group, symtab, code_symbol, explicit=explicit)
                   for group, explicit in groups if group]
    if relocs and not arch.rela:
        action = Section(".nv.rel.action", SHT.CUDA_RELOCINFO, content=REL_ACTION, align=8, entsize=8)
        relocs.insert(0, action)
        local_syms.append(Symbol(action.name, action, type=STT.SECTION))
    init = [data[".nv.global.init"]] if ".nv.global.init" in data else []
    bss = [data[".nv.global"]] if ".nv.global" in data else []

    # Section order follows ptxas: .shstrtab .strtab .symtab, then (ptxas's .debug_frame slot,
    # here .nv.callgraph) so that the notes land on indices 5 and 6: cuobjdump 13.5 calls an
    # sm_90 CUDA 13 cubin "Invalid ELF" unless a note sits at section index 6 (measured).
    notes, compat = head[3:5], head[5:]
    # Module data as ptxas places it: relocations after the .nv.info sections, initialised
    # globals after the code, the constant banks (module-wide first) at the end.
    sections = (head[:3] + [callgraph] + notes + [module_info] + compat + kernel_infos + relocs
                + extra + texts + init + shareds + bss + banks + const0s)
    return sections, local_syms + global_syms


def _function_attributes(arch: Arch, abi: ElfAbi, k: KernelImage) -> list[NvInfoAttribute]:
    """`.nv.info.<f>` of a device function, as ptxas writes it (less its SPARSE_MMA_MASK)."""
    A = NvInfoAttribute.make
    attrs = [A("EIATTR_SW_WAR", arch.sw_war)] if arch.sw_war is not None else []
    return attrs + [A("EIATTR_CUDA_API_VERSION", abi.cuda_api_version)] + k.extra_attributes


def _kernel_attributes(arch: Arch, abi: ElfAbi, k: KernelImage, const0_sym: Symbol) -> list[NvInfoAttribute]:
    A = NvInfoAttribute.make
    attrs = [A("EIATTR_CUDA_API_VERSION", abi.cuda_api_version)]
    # ptxas lists parameters last ordinal first.
    for ordinal in reversed(range(len(k.params))):
        p = k.params[ordinal]
        attrs.append(A("EIATTR_KPARAM_INFO", KParamInfo(ordinal=ordinal, offset=p.offset, size=p.size)))
    attrs.append(A("EIATTR_MAXREG_COUNT", _max_registers(arch, k)))
    if k.barriers and not abi.barriers_in_text_flags:
        attrs.append(A("EIATTR_NUM_BARRIERS", k.barriers))
    exits = find_exit_offsets(arch, k.code) if k.exit_offsets is None else k.exit_offsets
    if exits:
        attrs.append(A("EIATTR_EXIT_INSTR_OFFSETS", list(exits)))
    if k.s2r_ctaid_offsets:
        attrs.append(A("EIATTR_S2RCTAID_INSTR_OFFSETS", list(k.s2r_ctaid_offsets)))
    if k.max_threads is not None:
        attrs.append(A("EIATTR_MAX_THREADS", _dim3(k.max_threads)))
    if k.req_threads is not None:
        attrs.append(A("EIATTR_REQNTID", _dim3(k.req_threads)))
    if k.params:  # ptxas leaves both out for a kernel without parameters
        attrs.append(A("EIATTR_CBANK_PARAM_SIZE", k.param_bytes))
        attrs.append(A("EIATTR_PARAM_CBANK", ParamCbank(const0_sym, arch.param_base, k.param_bytes)))
    if arch.sw_war is not None:
        attrs.append(A("EIATTR_SW_WAR", arch.sw_war))
    attrs += k.extra_attributes
    return attrs


def _serialise(sections: list[Section], symbols: list[Symbol], *, arch: Arch, abi: ElfAbi) -> bytes:
    layout = Layout(sections, symbols)
    shstrtab, strtab, symtab = sections[0], sections[1], sections[2]

    names = StringTable()
    for s in layout.sections[1:]:
        names.add(s.name)
    shstrtab.content = bytes(names.data)
    strings = StringTable()
    for sym in layout.symbols[1:]:
        strings.add(sym.name)
    strtab.content = bytes(strings.data)
    symtab.info = layout.first_global
    symtab.content = b"".join(
        Elf64_Sym.pack(st_name=strings.offsets[s.name] if s.name else 0,
                       st_info=(s.bind << 4) | s.type, st_other=s.other,
                       st_shndx=layout.index(s.section), st_value=s.value, st_size=s.size)
        for s in layout.symbols)

    contents = [s.content(layout) if callable(s.content) else bytes(s.content) for s in layout.sections]

    # File offsets: header, sections in order, section headers, program headers.
    offsets, pos = [0], Elf64_Ehdr.size
    for s, data in zip(layout.sections[1:], contents[1:]):
        pos = _align(pos, max(s.align, 1))
        offsets.append(pos)
        if s.type != SHT.NOBITS:
            pos += len(data)
    shoff = _align(pos, 8)
    phoff = shoff + Elf64_Shdr.size * len(layout.sections)

    def size_of(i: int) -> int:
        s = layout.sections[i]
        return s.nobits_size if s.type == SHT.NOBITS else len(contents[i])

    # Segments as ptxas writes them: the header table, code, shared memory, constant banks.
    def span(kind: Callable[[Section], bool]) -> Optional[tuple[int, int, int]]:
        idx = [i for i, s in enumerate(layout.sections) if i and kind(s)]
        if not idx:
            return None
        start = min(offsets[i] for i in idx)
        file_end = max(offsets[i] + (0 if layout.sections[i].type == SHT.NOBITS else size_of(i)) for i in idx)
        mem = sum(size_of(i) for i in idx) if all(layout.sections[i].type == SHT.NOBITS for i in idx) \
            else file_end - start
        return start, max(file_end - start, 0), mem

    segments: list[tuple[PT, PF, tuple[int, int, int]]] = []
    code = span(lambda s: s.name.startswith(".text."))
    shared = span(lambda s: s.type == SHT.NOBITS and s.name.startswith(".nv.shared"))
    consts = span(lambda s: s.name.startswith(".nv.constant"))
    # Global variables: one read-write segment, the initialised bytes then the zeroed ones
    # (ptxas: file size = .nv.global.init, memory size up to the end of .nv.global).
    init_i = next((i for i, s in enumerate(layout.sections) if s.name == ".nv.global.init"), None)
    bss_i = next((i for i, s in enumerate(layout.sections) if s.name == ".nv.global"), None)
    data = None
    if init_i is not None or bss_i is not None:
        start = offsets[init_i if init_i is not None else bss_i]
        filesz = size_of(init_i) if init_i is not None else 0
        memsz = filesz
        if bss_i is not None:
            filesz = memsz = _align(filesz, max(layout.sections[bss_i].align, 1)) if filesz else 0
            memsz += size_of(bss_i)
        data = (start, filesz, memsz)
    n_phdrs = 2 + sum(x is not None for x in (code, shared, data, consts))
    table = (phoff, Elf64_Phdr.size * n_phdrs, Elf64_Phdr.size * n_phdrs)
    segments.append((PT.PHDR, PF.R, table))
    segments.append((PT.LOAD, PF.R, table))
    if code:
        segments.append((PT.LOAD, PF.R | PF.X, code))
    if shared:
        segments.append((PT.LOAD, PF.R | PF.W, shared))
    if data:
        segments.append((PT.LOAD, PF.R | PF.W, data))
    if consts:
        segments.append((PT.LOAD, PF.R, consts))

    out = bytearray()
    ident = ELF_MAGIC + bytes([ELFCLASS64, ELFDATA2LSB, EV_CURRENT, abi.osabi, abi.abi_version])
    e_flags = abi.flag_bits if arch.flag_bits is None else arch.flag_bits
    for shift in abi.sm_shifts:
        e_flags |= arch.sm << shift
    out += Elf64_Ehdr.pack(
        e_ident=ident.ljust(16, b"\0"), e_type=ET_EXEC, e_machine=EM_CUDA, e_version=abi.e_version,
        e_entry=0, e_phoff=phoff, e_shoff=shoff, e_flags=e_flags, e_ehsize=Elf64_Ehdr.size,
        e_phentsize=Elf64_Phdr.size, e_phnum=len(segments), e_shentsize=Elf64_Shdr.size,
        e_shnum=len(layout.sections), e_shstrndx=layout.index(shstrtab))
    for i, s in enumerate(layout.sections):
        if i == 0 or s.type == SHT.NOBITS:
            continue
        out += bytes(offsets[i] - len(out))
        out += contents[i]
    out += bytes(shoff - len(out))
    for i, s in enumerate(layout.sections):
        if i == 0:
            out += bytes(Elf64_Shdr.size)
            continue
        out += Elf64_Shdr.pack(
            sh_name=names.offsets[s.name], sh_type=s.type, sh_flags=int(s.flags), sh_addr=0,
            sh_offset=offsets[i], sh_size=size_of(i), sh_link=layout.index(s.link),
            sh_info=layout.index(s.info) | s.info_high, sh_addralign=s.align, sh_entsize=s.entsize)
    assert len(out) == phoff
    for p_type, p_flags, (offset, filesz, memsz) in segments:
        out += Elf64_Phdr.pack(p_type=p_type, p_flags=int(p_flags), p_offset=offset, p_vaddr=0, p_paddr=0,
                               p_filesz=filesz, p_memsz=memsz, p_align=8)
    return bytes(out)


# --------------------------------------------------------------------------------------------
# Reader
# --------------------------------------------------------------------------------------------

@dataclass
class SectionInfo:
    index: int
    name: str
    type: int
    flags: int
    offset: int
    size: int
    link: int
    info: int
    align: int
    entsize: int
    data: bytes               # b"" for NOBITS

    @property
    def type_name(self) -> str:
        try:
            return SHT(self.type).name
        except ValueError:
            return f"{self.type:#x}"


@dataclass
class SymbolInfo:
    index: int
    name: str
    value: int
    size: int
    bind: int
    type: int
    other: int
    section: int


# Per-kernel attributes write_cubin derives from KernelImage fields (the rest are carried
# through `extra_attributes`).
_WRITER_KERNEL_ATTRIBUTES = frozenset({
    "EIATTR_CUDA_API_VERSION", "EIATTR_KPARAM_INFO", "EIATTR_MAXREG_COUNT", "EIATTR_NUM_BARRIERS",
    "EIATTR_EXIT_INSTR_OFFSETS", "EIATTR_S2RCTAID_INSTR_OFFSETS", "EIATTR_MAX_THREADS",
    "EIATTR_REQNTID", "EIATTR_CBANK_PARAM_SIZE", "EIATTR_PARAM_CBANK", "EIATTR_SW_WAR"})


@dataclass
class KernelInfo:
    name: str
    code: bytes
    params: list[ParamInfo]
    registers: int
    shared_bytes: int
    max_threads: Optional[tuple[int, int, int]]
    req_threads: Optional[tuple[int, int, int]]
    exit_offsets: list[int]
    s2r_ctaid_offsets: list[int]
    barriers: int
    frame_size: int
    max_registers: Optional[int]
    param_base: Optional[int]
    attributes: list[NvInfoAttribute]           # from .nv.info.<k>
    module_attributes: list[NvInfoAttribute]    # this kernel's entries in .nv.info
    symbol_index: int = 0
    constant_banks: dict[int, bytes] = field(default_factory=dict)   # bank (not 0) -> data
    entry: bool = True                          # False: a device function (no STO_CUDA_ENTRY)

    def attribute(self, name: str) -> list[Any]:
        """Values of every attribute called `name` (per-kernel, then module-wide)."""
        return [a.value for a in self.attributes + self.module_attributes if a.name == name]

    def to_image(self) -> KernelImage:
        """A KernelImage writing the same launch-relevant attributes (for round trips)."""
        return KernelImage(
            name=self.name, code=self.code, params=list(self.params), registers=self.registers,
            shared_bytes=self.shared_bytes, max_threads=self.max_threads, exit_offsets=list(self.exit_offsets),
            s2r_ctaid_offsets=list(self.s2r_ctaid_offsets), barriers=self.barriers, uses_local=self.frame_size,
            req_threads=self.req_threads, max_registers=self.max_registers,
            constant_banks=dict(self.constant_banks), entry=self.entry,
            extra_attributes=[a for a in self.attributes if a.name not in _WRITER_KERNEL_ATTRIBUTES])


@dataclass(frozen=True)
class RelocationInfo:
    section: str              # the relocated section: '.nv.constant4'
    offset: int
    symbol: str               # the symbol's name ('' for none)
    symbol_index: int
    type: int
    addend: int               # RELA: the entry's; REL: the 8 bytes at the place (R_CUDA_64/G64), else 0
    explicit: bool            # RELA


@dataclass
class CubinInfo:
    arch: str
    sm: int
    abi: str
    e_flags: int
    sections: list[SectionInfo]
    symbols: list[SymbolInfo]
    kernels: list[KernelInfo]
    module_attributes: list[NvInfoAttribute]
    constants: Optional[bytes] = None           # .nv.constant3
    compat_attributes: list[NvInfoAttribute] = field(default_factory=list)   # .nv.compat
    relocations: list[RelocationInfo] = field(default_factory=list)          # every .rel/.rela section's
    # Device functions: FUNC symbols without STO_CUDA_ENTRY that have their own `.text.<name>`
    # (ptxas's `__cuda_sm20_div_u64`).
    functions: list[KernelInfo] = field(default_factory=list)

    def kernel(self, name: str) -> KernelInfo:
        """The kernel (or device function) called `name`."""
        for k in self.kernels + self.functions:
            if k.name == name:
                return k
        raise KeyError(f"no kernel {name!r} in this cubin; it has {', '.join(k.name for k in self.kernels)}")

    def section(self, name: str) -> Optional[SectionInfo]:
        return next((s for s in self.sections if s.name == name), None)


class CubinFormatError(ValueError):
    pass


def _cstr(table: bytes, offset: int) -> str:
    end = table.find(b"\0", offset)
    return table[offset:end if end >= 0 else len(table)].decode(errors="replace")


def read_cubin(data: bytes) -> CubinInfo:
    """Parse a cubin (either dialect) into sections, symbols and kernels with named attributes.
    A file that is not one, or a damaged one, raises CubinFormatError saying what is wrong."""
    try:
        return _read_cubin(bytes(data))
    except (struct.error, IndexError, OverflowError) as e:
        # A record that the checks of the headers let through reaches past its section.
        raise CubinFormatError(f"damaged cubin: {e}") from None


def _check_range(what: str, offset: int, size: int, total: int) -> None:
    if offset + size > total:
        raise CubinFormatError(f"damaged cubin: {what} (bytes {offset:#x}..{offset + size:#x}) runs past "
                               f"the end of the file ({total:#x} bytes)")


def _read_cubin(data: bytes) -> CubinInfo:
    if len(data) < Elf64_Ehdr.size or data[:4] != ELF_MAGIC:
        raise CubinFormatError("not an ELF file")
    hdr = Elf64_Ehdr.unpack(data)
    ident = hdr["e_ident"]
    if ident[4] != ELFCLASS64 or ident[5] != ELFDATA2LSB or hdr["e_machine"] != EM_CUDA:
        raise CubinFormatError("not a 64-bit little-endian CUDA ELF (cubin)")
    try:
        abi = abi_from_header(ident[7], ident[8])
    except ValueError as e:
        raise CubinFormatError(str(e)) from None
    _check_range("the section header table", hdr["e_shoff"], hdr["e_shnum"] * Elf64_Shdr.size, len(data))
    if not hdr["e_shstrndx"] < hdr["e_shnum"]:
        raise CubinFormatError(f"damaged cubin: section-name table index {hdr['e_shstrndx']} of "
                               f"{hdr['e_shnum']} sections")
    sm = (hdr["e_flags"] >> abi.sm_shift_read) & 0xFF
    try:
        arch = arch_from_sm(sm)
        arch_name, default_param_base = arch.name, arch.param_base
    except ValueError:
        arch_name, default_param_base = f"sm_{sm}", None

    raw_headers = [Elf64_Shdr.unpack(data, hdr["e_shoff"] + i * Elf64_Shdr.size) for i in range(hdr["e_shnum"])]
    shstr = raw_headers[hdr["e_shstrndx"]]
    shstr_data = data[shstr["sh_offset"]:shstr["sh_offset"] + shstr["sh_size"]]
    sections = []
    for i, h in enumerate(raw_headers):
        if h["sh_type"] not in (SHT.NOBITS, SHT.NULL):
            _check_range(f"section {i}", h["sh_offset"], h["sh_size"], len(data))
        body = b"" if h["sh_type"] in (SHT.NOBITS, SHT.NULL) else data[h["sh_offset"]:h["sh_offset"] + h["sh_size"]]
        sections.append(SectionInfo(i, _cstr(shstr_data, h["sh_name"]), h["sh_type"], h["sh_flags"],
                                    h["sh_offset"], h["sh_size"], h["sh_link"], h["sh_info"],
                                    h["sh_addralign"], h["sh_entsize"], body))
    by_name = {s.name: s for s in sections}

    symbols: list[SymbolInfo] = []
    symtab = next((s for s in sections if s.type == SHT.SYMTAB), None)
    if symtab is not None:
        if not symtab.link < len(sections):
            raise CubinFormatError(f"damaged cubin: the symbol table names string table {symtab.link} "
                                   f"of {len(sections)} sections")
        strtab = sections[symtab.link].data
        for i in range(len(symtab.data) // Elf64_Sym.size):
            r = Elf64_Sym.unpack(symtab.data, i * Elf64_Sym.size)
            symbols.append(SymbolInfo(i, _cstr(strtab, r["st_name"]), r["st_value"], r["st_size"],
                                      r["st_info"] >> 4, r["st_info"] & 0xF, r["st_other"], r["st_shndx"]))

    def sym_name(i: int) -> Any:
        return symbols[i].name if 0 <= i < len(symbols) else i

    info = by_name.get(".nv.info")
    module_attrs = decode_nv_info(info.data, sym_name) if info else []

    kernels, functions = [], []
    for sym in symbols:
        if sym.type != STT.FUNC or not 0 < sym.section < len(sections):
            continue
        if not sym.other & STO_CUDA_ENTRY and sections[sym.section].name != f".text.{sym.name}":
            continue    # a subroutine inside another function's code (`$__internal_0_$...`): part of it
        text = sections[sym.section]
        kinfo = by_name.get(f".nv.info.{sym.name}")
        attrs = decode_nv_info(kinfo.data, sym_name) if kinfo else []
        mine = [a for a in module_attrs if isinstance(a.value, SymbolAttr) and a.value.symbol == sym.name]

        def first(name: str, default: Any = None, pool: list = attrs) -> Any:
            return next((a.value for a in pool if a.name == name), default)

        kparams = sorted((a.value for a in attrs if isinstance(a.value, KParamInfo)), key=lambda p: p.ordinal)
        regcount = first("EIATTR_REGCOUNT", None, mine)
        registers = regcount.value if regcount else text.info >> TEXT_REGCOUNT_SHIFT
        frame = first("EIATTR_FRAME_SIZE", None, mine)
        barriers = first("EIATTR_NUM_BARRIERS")
        if barriers is None:
            barriers = (text.flags >> TEXT_BARRIERS_SHIFT) & TEXT_BARRIERS_MASK
        shared = by_name.get(f".nv.shared.{sym.name}")
        cbank = first("EIATTR_PARAM_CBANK")
        max_threads = first("EIATTR_MAX_THREADS")
        req = first("EIATTR_REQNTID")
        (kernels if sym.other & STO_CUDA_ENTRY else functions).append(KernelInfo(
            entry=bool(sym.other & STO_CUDA_ENTRY), name=sym.name, code=text.data[sym.value:sym.value + (sym.size or len(text.data))],
            params=[ParamInfo(p.offset, p.size) for p in kparams], registers=registers,
            shared_bytes=shared.size if shared else 0,
            max_threads=tuple(max_threads) if max_threads else None,
            req_threads=tuple(req) if req else None,
            exit_offsets=list(first("EIATTR_EXIT_INSTR_OFFSETS", [])),
            s2r_ctaid_offsets=list(first("EIATTR_S2RCTAID_INSTR_OFFSETS", [])),
            barriers=barriers, frame_size=frame.value if frame else 0,
            max_registers=first("EIATTR_MAXREG_COUNT"),
            param_base=cbank.offset if cbank else default_param_base,
            attributes=attrs, module_attributes=mine, symbol_index=sym.index,
            constant_banks={int(m.group(1)): sec.data for name, sec in by_name.items()
                            if (m := re.fullmatch(rf"\.nv\.constant([1-9]\d*)\.{re.escape(sym.name)}", name))}))

    relocations = []
    for sec in sections:
        if sec.type not in (SHT.REL, SHT.RELA) or not 0 < sec.info < len(sections) or sec.entsize <= 0:
            continue
        target = sections[sec.info]
        record = Elf64_Rela if sec.type == SHT.RELA else Elf64_Rel
        for i in range(sec.size // sec.entsize):
            r = record.unpack(sec.data, i * sec.entsize)
            index, rtype = r["r_info"] >> 32, r["r_info"] & 0xFFFFFFFF
            if sec.type == SHT.RELA:
                addend = r["r_addend"]
            elif rtype in (RelocType.R_CUDA_64, RelocType.R_CUDA_G64) and target.data:
                addend = int.from_bytes(target.data[r["r_offset"]:r["r_offset"] + 8], "little", signed=True)
            else:
                addend = 0
            relocations.append(RelocationInfo(target.name, r["r_offset"], sym_name(index) if index else "",
                                              index, rtype, addend, sec.type == SHT.RELA))

    const3 = by_name.get(".nv.constant3")
    compat = by_name.get(".nv.compat")
    return CubinInfo(arch=arch_name, sm=sm, abi=abi.name, e_flags=hdr["e_flags"], sections=sections,
                     symbols=symbols, kernels=kernels, functions=functions, module_attributes=module_attrs,
                     constants=const3.data if const3 else None, relocations=relocations,
                     compat_attributes=decode_nv_info(compat.data, kinds=EICOMPAT_BY_CODE, prefix="EICOMPAT_ATTR")
                     if compat else [])


MODULE_BANK = re.compile(r"\.nv\.constant(\d+)$")


def read_module(info: CubinInfo) -> ModuleImage:
    """The module-level data of a cubin: global variables (symbols of `.nv.global` /
    `.nv.global.init`), module constant banks (`.nv.constant<b>` without a kernel) and the
    relocations of both. Raises ValueError for what a ModuleImage cannot hold."""
    module = ModuleImage()
    data_sections = {s.index: s for s in info.sections if s.name in (".nv.global", ".nv.global.init")}
    for sec in data_sections.values():
        objects = sorted((y for y in info.symbols if y.section == sec.index and y.type == STT.OBJECT),
                         key=lambda y: (y.value, y.index))
        covered = 0
        for i, y in enumerate(objects):
            if y.size <= 0:
                raise ValueError(f"{sec.name}: symbol {y.name!r} has no size")
            if y.value < covered:
                raise ValueError(f"{sec.name}: symbol {y.name!r} overlaps the one before it")
            if sec.data and any(sec.data[covered:y.value]):
                raise ValueError(f"{sec.name}: bytes {covered:#x}..{y.value:#x} belong to no symbol")
            # The alignment is not recorded: the largest power of two the offset allows, up to
            # the section's (the first object carries the section's own).
            align = max(sec.align, 1)
            while y.value % align:
                align //= 2
            module.globals.append(GlobalObject(
                y.name, y.size, align, y.value,
                initial=sec.data[y.value:y.value + y.size] if sec.type != SHT.NOBITS else None,
                bind=STB(y.bind)))
            covered = y.value + y.size
        if covered != sec.size:
            raise ValueError(f"{sec.name}: {sec.size} bytes, but its symbols end at {covered:#x}")
    for sec in info.sections:
        m = MODULE_BANK.match(sec.name)
        if m and sec.type == SHT.PROGBITS:
            module.constant_banks[int(m.group(1))] = sec.data
            objects = sorted((y for y in info.symbols if y.section == sec.index and y.type == STT.OBJECT),
                             key=lambda y: (y.value, y.index))
            if objects:
                module.bank_symbols[int(m.group(1))] = [GlobalObject(y.name, y.size, 1, y.value, bind=STB(y.bind))
                                                        for y in objects]
    for r in info.relocations:
        if r.section.endswith("debug_frame"):
            continue
        m = MODULE_BANK.match(r.section)
        if not m and r.section != ".nv.global.init":
            continue
        sym = info.symbols[r.symbol_index] if 0 < r.symbol_index < len(info.symbols) else None
        external = sym is not None and sym.section == 0 and sym.bind != STB.LOCAL and sym.name
        if sym is None or sym.type not in (STT.OBJECT, STT.FUNC, STT.NOTYPE) or (sym.section == 0 and not external) \
                or (sym.type == STT.NOTYPE and not external):
            raise ValueError(f"{r.section}: relocation at {r.offset:#x} against "
                             f"{'a section or undefined local symbol' if sym else 'no symbol'} "
                             f"{sym.name if sym else ''!r}")
        if external and sym.name not in module.externs:
            module.externs.append(sym.name)
        if r.type not in (RelocType.R_CUDA_64, RelocType.R_CUDA_G64):
            raise ValueError(f"{r.section}: relocation type {r.type} at {r.offset:#x} is not supported "
                             f"(R_CUDA_64, R_CUDA_G64 are)")
        rel = Relocation(r.offset, r.symbol, r.type, r.addend)
        if m:
            module.bank_relocations.setdefault(int(m.group(1)), []).append(rel)
        else:
            module.global_relocations.append(rel)
    for rels in list(module.bank_relocations.values()) + [module.global_relocations]:
        rels.sort(key=lambda r: r.offset)
    # The addend lives in the Relocation: zero the relocated places (REL cubins keep the addend
    # there), so that the same module reads the same from a REL and a RELA cubin.
    for bank, rels in module.bank_relocations.items():
        module.constant_banks[bank] = _zero_places(module.constant_banks[bank], [r.offset for r in rels])
    for obj in module.globals:
        if obj.initial is not None:
            at = [r.offset - obj.offset for r in module.global_relocations if 0 <= r.offset - obj.offset < obj.size]
            obj.initial = _zero_places(obj.initial, at)
    return module


def _zero_places(data: bytes, offsets: Sequence[int], width: int = 8) -> bytes:
    out = bytearray(data)
    for at in offsets:
        out[at:at + width] = bytes(len(out[at:at + width]))
    return bytes(out)
