"""The `sassas` command: asm, disasm, isa, check."""
from __future__ import annotations

import argparse
import os
import sys
from typing import Optional

from .arch import ARCHS
from .errors import SassError


def _arch_arg(p: argparse.ArgumentParser, required: bool = True):
    p.add_argument("--arch", "-arch", required=required, metavar="sm_XX",
                   help=f"target architecture: {', '.join(ARCHS)}")


# `python -m sassas` sets this to a list and ends the process without tearing it down: a
# command keeps what it built there instead of freeing it object by object on return (a sixth
# of the time of a 200k-instruction `asm`).
kept: Optional[list] = None


def _cmd_asm(args) -> int:
    from .assembler import assemble
    if args.input == "-":
        text, name = sys.stdin.read(), "<stdin>"
    else:
        with open(args.input) as f:
            text, name = f.read(), args.input
    cubin = assemble(text, args.arch, filename=name, include_dirs=tuple(args.include),
                     kernel_name=args.kernel_name, allow_exec=not args.no_exec,
                     auto_reuse=args.auto_reuse, warnings_as_errors=args.werror,
                     yield_strategy=args.yield_strategy)
    for warning in cubin.warnings:
        print(warning.render(), file=sys.stderr)
    if args.check:
        # The whole control-code checker over what was assembled: an error stops the cubin.
        from .hazards import check
        hazards = [h for h in check(cubin.program) if h.severity != "note"]
        for h in hazards:
            print(h.render(), file=sys.stderr)
        if any(h.severity == "error" or args.werror for h in hazards):
            return 1
    out = args.output or os.path.splitext(os.path.basename(args.input if args.input != "-" else "out"))[0] + ".cubin"
    cubin.save(out)
    if kept is not None:
        kept.append(cubin)
    if args.verbose:
        print(f"{out}: {len(cubin.data)} bytes, {cubin.arch}, kernels: {', '.join(cubin.kernel_names)}",
              file=sys.stderr)
    return 0


def _cmd_check(args) -> int:
    from .hazards import run_check
    return run_check(args.files, args.arch, args.notes)


def _cmd_disasm(args) -> int:
    from .disasm import disassemble_file
    text = disassemble_file(args.input, kernel=args.kernel)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


def _cmd_isa(args) -> int:
    from .isa import get_isa
    isa = get_isa(args.arch)
    forms = [f for f in isa.forms() if args.opcode is None or f.split()[0] == args.opcode.upper()]
    if not forms:
        raise SassError(f"no opcode '{args.opcode}' on {isa.arch}")
    for line in forms:
        print(line)
    if args.opcode is None:
        print(f"{len(forms)} forms, {len({f.split()[0] for f in forms})} opcodes on {isa.arch}", file=sys.stderr)
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="sassas", description="SASS assembler for NVIDIA Volta..Hopper")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("asm", help="assemble SASS source into a cubin")
    p.add_argument("input", help="source file (.sass), or - for standard input")
    p.add_argument("-o", "--output", help="output cubin (default: INPUT with .cubin)")
    _arch_arg(p)
    p.add_argument("-I", dest="include", action="append", default=[], help="include directory")
    p.add_argument("--kernel-name", help="name of the kernel when the file declares none")
    p.add_argument("--no-exec", action="store_true",
                   help="refuse inline Python (<code> blocks, {expr}, .include of .py files): for untrusted input")
    p.add_argument("--auto-reuse", action="store_true", help="set operand .reuse flags where it is safe")
    p.add_argument("-Werror", "--warnings-as-errors", dest="werror", action="store_true",
                   help="treat warnings as errors")
    p.add_argument("--yield", dest="yield_strategy", metavar="STRATEGY",
                   help="set every yield flag: 'natural' (only where a stall needs it) or 'every:N'")
    p.add_argument("--check", action="store_true",
                   help="run `sassas check` on the result: a hazard that is an error writes no cubin "
                        "(`asm` alone refuses only a wait one cycle after its barrier is set)")
    p.add_argument("-v", "--verbose", action="store_true")
    p.set_defaults(func=_cmd_asm)

    p = sub.add_parser("check", help="report control-code hazards (stalls, barriers, reuse)")
    p.add_argument("files", nargs="+", help="source files or cuobjdump/nvdisasm listings")
    _arch_arg(p)
    p.add_argument("--notes", action="store_true", help="also print notes (barriers re-armed, idle reuse flags)")
    p.set_defaults(func=_cmd_check)

    p = sub.add_parser("disasm", help="disassemble a cubin into editable source")
    p.add_argument("input")
    p.add_argument("-o", "--output")
    p.add_argument("--kernel", action="append",
                   help="only this kernel (and the device functions it calls); repeat for several")
    p.set_defaults(func=_cmd_disasm)

    p = sub.add_parser("isa", help="list the instruction forms an architecture supports")
    _arch_arg(p)
    p.add_argument("opcode", nargs="?", help="only this opcode")
    p.set_defaults(func=_cmd_isa)

    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except SassError as e:
        print(str(e), file=sys.stderr)
        return 1
    except OSError as e:
        print(f"sassas: error: {e.filename or ''}: {e.strerror or e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
