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

The package: :mod:`.format` (ELF constants, enums, records), :mod:`.nvinfo` (the attributes),
:mod:`.writer` (:func:`write_cubin`), :mod:`.reader` (:func:`read_cubin`, :func:`read_module`).
What the writer takes and the reader gives back (:class:`KernelImage`, :class:`ModuleImage` ...)
is :mod:`sassas.image`'s; its names are re-exported here.
"""
from ..image import (STB, ConstantBank, GlobalObject, KernelImage, ModuleImage, ParamInfo, Relocation, RelocType,
                     code_relocation_part, code_relocation_type, find_exit_offsets, place_globals)
from .format import (CALLGRAPH_SENTINELS, ELFCLASS64, ELFDATA2LSB, ELF_MAGIC, EM_CUDA, ET_EXEC, EV_CURRENT, FATBIN_MAGIC,
                     NOTE_OWNER, NOTE_VERSION, PF, PT, REL_ACTION, SHF, SHT, STO_CUDA_ENTRY, STT,
                     TEXT_BARRIERS_MASK, TEXT_BARRIERS_SHIFT, TEXT_REGCOUNT_SHIFT, CallgraphEntry, CuInfoDesc,
                     CubinFormatError, Elf64_Ehdr, Elf64_Nhdr, Elf64_Phdr, Elf64_Rel, Elf64_Rela, Elf64_Shdr,
                     Elf64_Sym, NoteType, Record, TkInfoDesc, is_binary)
from .nvinfo import (EIATTR, EIATTR_BY_CODE, EICOMPAT, EICOMPAT_BY_CODE, EIFMT, KPARAM_CBANK_DEFAULT,
                     KPARAM_FLAG_FIELDS, PAYLOADS, AttributeKind, KParamInfo, KParamInfoRecord, NvInfoAttribute,
                     NvInfoHeader, ParamCbank, ParamCbankRecord, SymbolAttr, SymbolValue, decode_nv_info,
                     encode_nv_info)
from .reader import (MODULE_BANK, CubinInfo, KernelInfo, RelocationInfo, SectionInfo, SymbolInfo, read_cubin,
                     read_module)
from .writer import Layout, Section, StringTable, Symbol, write_cubin
