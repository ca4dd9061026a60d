"""The file checker, `sassas check`: a source file, an NVIDIA listing or a cubin, built as `sassas
asm` would build it (sassas.assembler), then the hazard checker (sassas.hazards) over its kernels.

    python -m sassas.check check FILE --arch sm_90 [--notes]
    python -m sassas.check calibrate --arch sm_90 LISTING...     # latency table vs compiler code
"""
from __future__ import annotations

import argparse
import sys
from typing import Optional

from .arch import get_arch
from .assembler import parse
from .ast import Kernel
from .disasm import disassemble, file_cubins
from .elf import Elf64_Ehdr, is_binary, read_cubin
from .elf.fatbin import is_container
from .errors import SassError, error_lines
from .files import decode_source
from .hazards import Hazard, calibrate, check
from .listing import read_listing
from .preprocess import is_listing
from .resolve import resolve_kernel
from .schedule import schedule_kernel
from .semantics import arch_timing


def check_file(path: str, arch: str, text: Optional[str] = None) -> list[Hazard]:
    """Check a sassas source file, a `cuobjdump -sass` / `nvdisasm -hex` listing, or a cubin
    (for the arch it was built for), or the cubins of a fatbin or host program."""
    hazards = []
    for name, data, problem in ([(path, None, None)] if text is not None else _units(path)):
        if problem is not None:
            raise problem
        hazards += _checked(name, arch, text, data)[1]
    return hazards


def _checked(path: str, arch: str, text: Optional[str] = None,
             data: Optional[bytes] = None) -> tuple[list[Kernel], list[Hazard]]:
    """The kernels of one source, listing or cubin and what the checker finds in them."""
    kernels, hazards, arch = _checked_kernels(path, arch, text, data)
    for kernel in kernels:
        hazards += check(kernel, arch)
    return kernels, hazards


def _checked_kernels(path: str, arch: str, text: Optional[str] = None,
                     data: Optional[bytes] = None) -> tuple[list[Kernel], list[Hazard], str]:
    """The kernels of a source file, listing or cubin (`data`, else read from `path`) as `sassas
    asm` would build them, the listing's lines that could not be read (as warnings), and the arch
    to check them for (a cubin's own)."""
    if text is None:
        if data is None:
            with open(path, "rb") as f:
                data = f.read()
        if is_binary(data):
            # A cubin: its code as sassas source (control codes and all), for its own arch.
            try:
                info = read_cubin(data)
            except ValueError as e:
                raise SassError(f"{path}: not a cubin sassas can read: {e}") from None
            if not info.kernels and not info.functions:
                return [], [], info.target      # (module data alone: the host link's stubs)
            arch = info.target
            text = disassemble(data, source_name=path)
        else:
            text = decode_source(data, path)
    if is_listing(text):
        kernels, errors = read_listing(text, path, arch)
        return kernels, [Hazard("warning", e.message, e.loc, kind="unreadable") for e in errors], arch
    program = parse(text, arch, path)
    target = get_arch(arch)
    for kernel in program.kernels:
        resolve_kernel(kernel, target)
        # What `sassas asm` would build: instructions without a control code get one.
        if any(inst.control is None for inst in kernel.instructions):
            schedule_kernel(kernel, target)
    return program.kernels, [], arch


def run_check(paths: list[str], arch: str, notes: bool = False, out=None) -> int:
    """The `sassas check` command: print hazards like compiler diagnostics, and for a file
    without any, what was checked; exit status 1 if any error or warning."""
    out = out or sys.stdout
    bad = 0
    for path in paths:
        try:
            units = _units(path)
        except SassError as e:
            units = [(path, None, e)]
        for name, data, problem in units:
            try:
                if problem is not None:
                    raise problem
                kernels, hazards = _checked(name, arch, data=data)
            except SassError as e:
                for line in error_lines(e, "sassas check"):
                    print(line, file=out)
                bad += 1
                continue
            shown = [h for h in hazards if h.severity != "note" or notes]
            for h in shown:
                print(h.render(), file=out)
            found = sum(h.severity != "note" for h in hazards)
            bad += found
            if not found:
                count = sum(len(k.instructions) for k in kernels)
                print(f"{name}: {len(kernels)} kernel{'s' * (len(kernels) != 1)}, {count} instruction"
                      f"{'s' * (count != 1)} checked for stalls, scoreboard barriers, reuse: no hazards", file=out)
    return 1 if bad else 0


def _units(path: str) -> list[tuple[str, Optional[bytes], Optional[SassError]]]:
    """What to check of a file, as (name, bytes or None: read it, the error it gives or None): the
    file itself; a fatbin or host program as the cubins inside, each named path:cuobjdump's name
    (one sassas cannot read, compressed, as the error that it is not checked)."""
    try:
        with open(path, "rb") as f:
            head = f.read(Elf64_Ehdr.size)
    except OSError:
        head = b""          # (_checked_kernels says what is wrong with it)
    if not is_container(head):
        return [(path, None, None)]
    return [(f"{path}:{c.name}", c.data, SassError(f"{path}:{c.name}: not checked: {c.unread}") if c.unread else None)
            for c in file_cubins(path)]


def main(argv: Optional[list[str]] = None) -> int:
    """python -m sassas.check check FILE --arch sm_90 [--notes]
    python -m sassas.check calibrate --arch sm_90 LISTING..."""
    parser = argparse.ArgumentParser(prog="python -m sassas.check")
    parser.add_argument("command", choices=["check", "calibrate"])
    parser.add_argument("--arch", required=True)
    parser.add_argument("--notes", action="store_true", help="also print notes (re-armed barriers, reuse misses)")
    parser.add_argument("files", nargs="+", help="source or listing (check); cuobjdump -sass output of "
                        "compiler-built cubins (calibrate)")
    args = parser.parse_args(argv)
    if args.command == "check":
        return run_check(args.files, args.arch, notes=args.notes)
    kernels = []
    for path in args.files:
        with open(path) as f:
            kernels += read_listing(f.read(), path)[0]
    timing = arch_timing(args.arch)
    for (producer, consumer), (cycles, p, c) in sorted(calibrate(kernels, args.arch).items()):
        table = timing.fixed_latency(producer, consumer)
        flag = "  <-- table above the observed minimum" if table > cycles else ""
        print(f"{producer:>12} -> {consumer:<12} min {cycles:2d}  table {table:2d}  ({p} -> {c}){flag}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
