"""The cubins inside nvcc's output: a fatbin (`nvcc -fatbin`), or a host program or library whose
`.nv_fatbin` section holds fatbins (`nvcc -o app`). Read only, to give `disasm` and `check` the
cubins `cuobjdump -xelf all` would write out, under the names it gives them.

A fatbin is a header (magic 0xBA55ED50, version, header size, size of what follows) and entries,
each a header of its own and a payload:

    u16 kind (1 PTX, 2 ELF)  u16 version  u32 header size  u64 payload size
    u32 compressed size      u32 -        u16 minor  u16 major  u32 SM (90: sm_90)
    u32 name offset  u32 name size  u64 flags  u64 -  u64 decompressed size

An ELF payload is the cubin; a compressed one (nvcc -Xfatbin -compress-all) has a non-zero
compressed or decompressed size. CUDA 13 writes it as a zstd frame, read here through the
zstandard package where it is installed (`pip install sassas[fatbin]`); without it, or in
another form, the cubin is named with the reason it is not read. The layout was read off nvcc
13.0's output and checked against cuobjdump's extraction (tests/sassas/test_fatbin.py). In a host
ELF the section holds several fatbins, each 8-byte aligned.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from .format import ELF_MAGIC, ELFCLASS64, ELFDATA2LSB, EM_CUDA, FATBIN_MAGIC, CubinFormatError, Elf64_Ehdr, \
    Elf64_Shdr, Record

FatbinHeader = Record("FatbinHeader", [("magic", "I"), ("version", "H"), ("header_size", "H"), ("size", "Q")])
FatbinEntry = Record("FatbinEntry", [
    ("kind", "H"), ("version", "H"), ("header_size", "I"), ("payload_size", "Q"),
    ("compressed_size", "I"), ("reserved0", "I"), ("minor", "H"), ("major", "H"), ("sm", "I"),
    ("name_offset", "I"), ("name_size", "I"), ("flags", "Q"), ("reserved1", "Q"), ("decompressed_size", "Q")])
KIND_PTX, KIND_ELF = 1, 2
FATBIN_SECTION = ".nv_fatbin"


ZSTD_MAGIC = bytes.fromhex("28b52ffd")
EXTRACT = "`cuobjdump -xelf all FILE` writes it out"


@dataclass(frozen=True)
class EmbeddedCubin:
    """One cubin of a fatbin or host program."""
    name: str               # as `cuobjdump -xelf all` names its file: app.2.sm_90.cubin
    arch: str               # sm_90
    data: bytes             # the cubin (decompressed), or the payload as stored where `unread`
    unread: str = ""        # why `data` is not the cubin: its compression, which sassas cannot undo here


def is_container(data: bytes) -> bool:
    """A fatbin, or an ELF file for a machine other than CUDA's (a host program or library)."""
    if data[:4] == FATBIN_MAGIC:
        return True
    if data[:4] != ELF_MAGIC or len(data) < Elf64_Ehdr.size:
        return False
    hdr = Elf64_Ehdr.unpack(data)
    return hdr["e_ident"][4] == ELFCLASS64 and hdr["e_ident"][5] == ELFDATA2LSB and hdr["e_machine"] != EM_CUDA


def embedded_cubins(data: bytes, file_name: str) -> list[EmbeddedCubin]:
    """The cubins of a fatbin or of a host ELF's .nv_fatbin section, numbered as cuobjdump numbers
    them (1, 2, ... over every fatbin of the file); CubinFormatError where `data` is neither or
    is damaged. `file_name` names them (its last extension dropped, as cuobjdump does)."""
    stem = os.path.splitext(os.path.basename(file_name))[0]
    if data[:4] == FATBIN_MAGIC:
        blobs = [data]
    else:
        blobs = [_fatbin_section(data)]
    out: list[EmbeddedCubin] = []
    for blob in blobs:
        offset = 0
        while offset + FatbinHeader.size <= len(blob) and blob[offset:offset + 4] == FATBIN_MAGIC:
            head = FatbinHeader.unpack(blob, offset)
            start, end = offset + head["header_size"], offset + head["header_size"] + head["size"]
            if end > len(blob):
                raise CubinFormatError(f"damaged fatbin: its entries (bytes {start:#x}..{end:#x}) run past the "
                                       f"end ({len(blob):#x} bytes)")
            out += _entries(blob, start, end, stem, len(out))
            offset = (end + 7) & ~7
    if not out and data[:4] == FATBIN_MAGIC:
        raise CubinFormatError("a fatbin with no cubin (PTX only?)")
    return out


def _entries(blob: bytes, start: int, end: int, stem: str, numbered: int) -> list[EmbeddedCubin]:
    out = []
    at = start
    while at + FatbinEntry.size <= end:
        e = FatbinEntry.unpack(blob, at)
        payload = at + e["header_size"]
        if e["header_size"] < FatbinEntry.size or payload + e["payload_size"] > end:
            raise CubinFormatError(f"damaged fatbin: entry at {at:#x} runs past its fatbin")
        if e["kind"] == KIND_ELF:
            arch = f"sm_{e['sm']}"
            data, unread = bytes(blob[payload:payload + e["payload_size"]]), ""
            if e["compressed_size"] or e["decompressed_size"]:
                data, unread = _decompressed(data, e["decompressed_size"])
            out.append(EmbeddedCubin(f"{stem}.{numbered + len(out) + 1}.{arch}.cubin", arch, data, unread))
        at = payload + e["payload_size"]
    return out


def _decompressed(payload: bytes, size: int) -> tuple[bytes, str]:
    """(the cubin, "") of a compressed payload, or (the payload, why it is not read)."""
    if payload[:4] != ZSTD_MAGIC:
        return payload, f"compressed in a form sassas does not read (not zstd); {EXTRACT}"
    try:
        import zstandard        # (optional: only compressed cubins need it)
    except ImportError:
        return payload, f"compressed (zstd): `pip install zstandard` lets sassas read it; {EXTRACT}"
    try:
        data = zstandard.ZstdDecompressor().decompress(payload, max_output_size=size)
    except zstandard.ZstdError as e:
        raise CubinFormatError(f"damaged fatbin: a compressed cubin does not decompress ({e})") from None
    if len(data) != size:
        raise CubinFormatError(f"damaged fatbin: a compressed cubin decompresses to {len(data)} bytes, not {size}")
    return data, ""


def _fatbin_section(data: bytes) -> bytes:
    """A host ELF's .nv_fatbin section."""
    hdr = Elf64_Ehdr.unpack(data)
    table = hdr["e_shoff"]
    if table + hdr["e_shnum"] * Elf64_Shdr.size > len(data) or hdr["e_shstrndx"] >= hdr["e_shnum"]:
        raise CubinFormatError("damaged ELF file: its section table runs past the end")
    sections = [Elf64_Shdr.unpack(data, table + i * Elf64_Shdr.size) for i in range(hdr["e_shnum"])]
    names = sections[hdr["e_shstrndx"]]["sh_offset"]
    for s in sections:
        name_at = names + s["sh_name"]
        if data[name_at:name_at + len(FATBIN_SECTION) + 1] == FATBIN_SECTION.encode() + b"\0":
            return data[s["sh_offset"]:s["sh_offset"] + s["sh_size"]]
    raise CubinFormatError(f"an ELF file for machine {hdr['e_machine']} (a host program or library?) with no "
                           f"CUDA code: no {FATBIN_SECTION} section")
