""".nv.info attributes: a sequence of ``format:u8 attribute:u8 payload`` records, named here
(:class:`NvInfoAttribute` of an :class:`AttributeKind` from :data:`EIATTR`), never bare
numbers; `.nv.compat` (CUDA 13 dialect) uses the same records with the codes of :data:`EICOMPAT`."""
from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Callable, Sequence

from .format import CubinFormatError, Record

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
# `cuobjdump -elf` 13.5 (tests/sassas/test_elf.py::test_attribute_names_match_cuobjdump); any other
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
