"""Module data in sassas source: global variables, module constant banks, relocations.

    .global msg 6 4               # name size [align [offset]]: a variable in global memory
    .init msg 0x0 0x6c6c6568      # initial bytes: a 32-bit word at a byte offset of it
    .init msg 0x4 0x6f            #   (an initialised variable goes to .nv.global.init)
    .global table 16 8
    .init table 0x0 &msg          # the 64-bit address of msg (relocation R_CUDA_G64)
    .visible table                # a GLOBAL symbol (`.weak`: WEAK); else LOCAL, as ptxas
    .moduleconst 4 0x0 &msg       # module constant bank 4, offset 0: &msg (R_CUDA_64)
    .moduleconst 3 0x0 0x3f800000
    .constsym 3 one 0x0 4         # a named object in module bank 3 (a __constant__ variable)
    .extern vprintf               # a symbol no file defines (the driver's `vprintf`)
    .moduleconst 4 0x8 &vprintf   #   whose address the data may hold

These directives belong to no kernel and may stand anywhere in a file; a name after `&` is a
global variable or a kernel of the file, or a name declared `.extern`. `parse` collects them (declare_module), checks them
once the whole file is read (check_module, errors with file:line:col), and the assembler turns
them into an :class:`sassas.image.ModuleImage` (build_module).
"""
from __future__ import annotations

import difflib

from .ast import AddressOf, ModuleData, Program
from .errors import Diagnostics, SassError
from .image import STB, GlobalLayout, GlobalObject, ModuleImage, Relocation, RelocType, place_globals

WORD_BYTES, ADDRESS_BYTES = 4, 8
USER_CONSTANT_BANK = 3          # TuringAs's <consts>: `.nv.constant3`, read as c[0x3][...]


def _unknown(what: str, name: str, known, loc) -> SassError:
    msg = f"{what}: no global variable{', kernel or .extern' if 'address' in what else ''} named '{name}'"
    close = difflib.get_close_matches(name, list(known), n=1)
    if close:
        msg += f"; did you mean '{close[0]}'?"
    return SassError(msg, loc)


def check_module(program: Program, diags: Diagnostics) -> None:
    """Attach `.init`/`.visible`/`.weak` to their globals and check names, sizes and places;
    every error goes to `diags`."""
    m = program.module
    if not m:
        return
    kernels = {k.name for k in program.kernels}
    for name, decl in m.globals.items():
        if name in kernels:
            diags.error(SassError(f"global '{name}' has the name of a kernel", decl.loc))
    for name, loc in m.externs.items():
        if name in kernels or name in m.globals or name in m.constsyms:
            diags.error(SassError(f"'.extern {name}': '{name}' is defined in this file", loc))
    for name, (bank, decl) in m.constsyms.items():
        if name in kernels:
            diags.error(SassError(f"constant '{name}' has the name of a kernel", decl.loc))
        written = max((o + (ADDRESS_BYTES if isinstance(w, AddressOf) else WORD_BYTES)
                       for o, w, _ in m.banks.get(bank, [])), default=0)
        if decl.offset + decl.size > written:
            diags.error(SassError(f"'.constsym {bank} {name}': bytes 0x{decl.offset:x}..0x{decl.offset + decl.size:x} "
                                  f"lie past the {written} bytes .moduleconst writes in bank {bank}", decl.loc))
    for name, binding, loc in m.binds:
        decl = m.globals.get(name) or m.constsyms.get(name, (0, None))[1]
        if decl is None:
            diags.error(_unknown(f"'.{binding} {name}'", name, list(m.globals) + list(m.constsyms), loc))
        else:
            decl.bind = binding
    for name, offset, word, loc in m.inits:
        decl = m.globals.get(name)
        if decl is None:
            diags.error(_unknown(f"'.init {name}'", name, m.globals, loc))
            continue
        width = ADDRESS_BYTES if isinstance(word, AddressOf) else WORD_BYTES
        # A word may run past the end of a variable whose size is not a multiple of 4, as long
        # as the bytes past it are zero (`.init msg 0x4 0x6f` for the last 2 of 6 bytes).
        spill = offset + width - decl.size
        if offset >= decl.size or (spill > 0 and (width == ADDRESS_BYTES
                                                  or word >> (8 * (width - spill)) != 0)):
            diags.error(SassError(f"'.init {name} 0x{offset:x}': {width} bytes at 0x{offset:x} run past the "
                                  f"{decl.size} bytes of '{name}'", loc))
            continue
        decl.init.append((offset, word, loc))
    # Places: the same layout the writer makes, one object at a time, so that an overlap is
    # reported on the object that causes it.
    layout = GlobalLayout()
    for decl in m.globals.values():
        obj = GlobalObject(decl.name, decl.size, decl.align, decl.offset,
                           initial=bytes(decl.size) if decl.init else None)
        try:
            layout.place(obj)
        except ValueError as e:
            diags.error(SassError(str(e), decl.loc))
    targets = set(m.globals) | set(m.constsyms) | kernels | set(m.externs)
    refs = [w for d in m.globals.values() for _, w, _ in d.init] + [w for b in m.banks.values() for _, w, _ in b]
    for ref in refs:
        if isinstance(ref, AddressOf) and ref.name not in targets:
            diags.error(_unknown(f"address '&{ref.name}'", ref.name, targets, ref.loc))


def build_module(program: Program) -> Optional[ModuleImage]:
    """The checked module data as a ModuleImage (None when the file has none)."""
    m = program.module
    user_constants = [k for k in program.kernels if k.attributes.get("constant_bank3_bytes")]
    if not m and not user_constants:
        return None
    binds = {"local": STB.LOCAL, "visible": STB.GLOBAL, "weak": STB.WEAK}
    image = ModuleImage(externs=list(m.externs))
    pending: list[tuple[GlobalObject, list]] = []
    for decl in m.globals.values():
        initial = None
        refs = []
        if decl.init:
            data = bytearray(decl.size + ADDRESS_BYTES)
            for offset, word, _loc in decl.init:
                if isinstance(word, AddressOf):
                    data[offset:offset + ADDRESS_BYTES] = bytes(ADDRESS_BYTES)
                    refs.append((offset, word))
                else:
                    data[offset:offset + WORD_BYTES] = word.to_bytes(WORD_BYTES, "little")
            initial = bytes(data[:decl.size])
        obj = GlobalObject(decl.name, decl.size, decl.align, decl.offset, initial, binds[decl.bind])
        image.globals.append(obj)
        pending.append((obj, refs))
    places = {obj.name: at for placed, _size, _align in place_globals(image.globals).values() for obj, at in placed}
    for obj, refs in pending:
        for offset, ref in refs:
            image.global_relocations.append(
                Relocation(places[obj.name] + offset, ref.name, RelocType.R_CUDA_G64, ref.addend))
    for bank, writes in sorted(m.banks.items()):
        size = max(offset + (ADDRESS_BYTES if isinstance(w, AddressOf) else WORD_BYTES) for offset, w, _ in writes)
        data = bytearray(size)
        relocs: dict[int, Relocation] = {}
        for offset, word, _loc in writes:
            if isinstance(word, AddressOf):
                data[offset:offset + ADDRESS_BYTES] = bytes(ADDRESS_BYTES)
                relocs[offset] = Relocation(offset, word.name, RelocType.R_CUDA_64, word.addend)
            else:
                data[offset:offset + WORD_BYTES] = word.to_bytes(WORD_BYTES, "little")
                for at in (offset - 4, offset):       # a word written over an address replaces it
                    relocs.pop(at, None)
        image.constant_banks[bank] = bytes(data)
        syms = [GlobalObject(d.name, d.size, 1, d.offset, bind=binds[d.bind]) for b, d in m.constsyms.values() if b == bank]
        if syms:
            image.bank_symbols[bank] = syms
        if relocs:
            image.bank_relocations[bank] = sorted(relocs.values(), key=lambda r: r.offset)
    for kernel in user_constants:
        _add_user_constants(image, kernel, m)
    return image


def _add_user_constants(image, kernel, m: ModuleData) -> None:
    """A kernel's `<consts>` (`.const name size`, TuringAs's user constants) as objects of
    module constant bank 3 from offset 0, where c[0x3][...] reads find them once loaded:
    `.nv.constant3` with a LOCAL OBJECT symbol each, as TuringAs and ptxas write them (and no
    .nv.info attribute: neither writes one). The bank holds zeros of the declared size, or
    the words `.moduleconst 3` writes there (the initial values). Kernels of one file that
    declare constants share the bank, so they must declare the same names at the same places."""
    size = kernel.attributes["constant_bank3_bytes"]
    bank = image.constant_banks.get(USER_CONSTANT_BANK, b"")
    image.constant_banks[USER_CONSTANT_BANK] = bank + bytes(max(0, size - len(bank)))
    objects = image.bank_symbols.setdefault(USER_CONSTANT_BANK, [])
    known = {o.name: o for o in objects}
    for name, (offset, length) in kernel.attributes["constant_bank3_objects"].items():
        other = known.get(name)
        if name in m.globals:
            raise SassError(f"constant '{name}' of kernel '{kernel.name}' has the name of a global variable",
                            kernel.loc)
        if other is None:
            objects.append(GlobalObject(name, length, 1, offset))
        elif (other.offset, other.size) != (offset, length):
            raise SassError(f"constant '{name}' of kernel '{kernel.name}' sits at c[0x3][0x{offset:x}] ({length} "
                            f"bytes); constant bank 3 already has '{name}' at 0x{other.offset:x} ({other.size} bytes)",
                            kernel.loc)
