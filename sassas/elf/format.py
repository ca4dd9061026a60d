"""The ELF format of a cubin: the constants and enums it uses, and its fixed-layout records
(declared once, used by the writer and the reader). The symbol bindings (STB) and relocation
types (RelocType) that the image carries live in :mod:`sassas.image`."""
from __future__ import annotations

import struct
from enum import IntEnum, IntFlag
from typing import Any, Sequence

# --------------------------------------------------------------------------------------------
# ELF constants (only those a cubin uses)
# --------------------------------------------------------------------------------------------

ELF_MAGIC = b"\x7fELF"
# A fatbin (nvcc's container of cubins and PTX, also inside host programs) starts with 0xBA55ED50.
FATBIN_MAGIC = bytes.fromhex("50ed55ba")


def is_binary(data: bytes) -> bool:
    """Whether `data` starts as a cubin, a fatbin or another ELF file does (not source text)."""
    return data[:4] in (ELF_MAGIC, FATBIN_MAGIC)
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


class CubinFormatError(ValueError):
    """Not a cubin, or a damaged one: what is wrong, in words."""
