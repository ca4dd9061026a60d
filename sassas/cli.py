"""The `sassas` command: asm, disasm, isa, check."""
from __future__ import annotations

import argparse
import os
import sys
from typing import Optional

from . import __version__
from .arch import ARCHS, get_arch
from .errors import SassError, error_lines
from .files import decode_source, read_source, write_atomic

# Exit codes: 1 for an error in the input (diagnostics printed), 2 for a bad command line
# (argparse's) and for an error inside sassas itself.
EXIT_INPUT, EXIT_USAGE, EXIT_INTERNAL = 1, 2, 2
TRACEBACK_ENV = "SASSAS_TRACEBACK"


class _Parser(argparse.ArgumentParser):
    """argparse with its errors on one line: `sassas asm: error: ...`, exit code 2."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def arch_name(text: str) -> str:
    """An --arch value in sassas's spelling ('90', 'SM90' -> 'sm_90'); argparse's error for one
    sassas does not target (microbench's and the Winograd kernels' command lines take it too)."""
    try:
        return get_arch(text).full_name
    except SassError as e:
        raise argparse.ArgumentTypeError(e.message) from None


def _yield_strategy(text: str) -> str:
    from .schedule import apply_yield_strategy
    try:
        apply_yield_strategy([], text)           # no instructions: only reads the strategy
    except ValueError:
        raise argparse.ArgumentTypeError(f"unknown strategy {text!r}: 'natural' or 'every:N' with N >= 1") from None
    return text


def _threads(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected a number of processes (0: one a CPU core), not {text!r}")
    return n


class _Version(argparse.Action):
    """--version as ptxas and nvcc have it, on one line (argparse's own wraps it to the terminal)."""

    def __init__(self, option_strings, dest, **kw):
        super().__init__(option_strings, dest, nargs=0, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"sassas {__version__} (archs: {', '.join(ARCHS)})")
        parser.exit()


def _arch_arg(p: argparse.ArgumentParser, required: bool = True, what: str = "target architecture"):
    p.add_argument("--arch", "-arch", required=required, metavar="sm_XX", type=arch_name,
                   help=f"{what}: {', '.join(ARCHS)}")


# `python -m sassas` sets this to a list and ends the process without tearing it down: a
# command keeps what it built there instead of freeing it object by object on return (a sixth
# of the time of a 200k-instruction `asm`).
kept: Optional[list] = None


def _cmd_asm(args) -> int:
    from .assembler import assemble
    from .workers import usable_cores
    if args.input == "-":
        text, name = decode_source(sys.stdin.buffer.read(), "<stdin>"), "<stdin>"
    else:
        text, name = read_source(args.input), args.input
    cubin = assemble(text, args.arch, filename=name, include_dirs=tuple(args.include),
                     kernel_name=args.kernel_name, allow_exec=not args.no_exec,
                     auto_reuse=args.auto_reuse, warnings_as_errors=args.werror,
                     yield_strategy=args.yield_strategy, dialect=args.dialect,
                     # (--check reads the whole program: assembled in ranges, there is none)
                     threads=1 if args.check else args.threads or usable_cores())
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
    if out == "-":
        sys.stdout.buffer.write(cubin.data)
        sys.stdout.flush()
    else:
        cubin.save(out)
    if kept is not None:
        kept.append(cubin)
    if args.verbose:
        print(f"{out}: {len(cubin.data)} bytes, {cubin.arch}, kernels: {', '.join(cubin.kernel_names)}",
              file=sys.stderr)
        from .disasm import resource_usage
        sys.stderr.write(resource_usage(cubin, source_name=out))
    return 0


def _cmd_check(args) -> int:
    from .check import run_check
    return run_check(args.files, args.arch, args.notes)


def _cmd_disasm(args) -> int:
    from .disasm import disassemble_file, resource_usage_file
    text = (resource_usage_file if args.res_usage else disassemble_file)(args.input, kernel=args.kernel,
                                                                          arch=args.arch)
    if args.output and args.output != "-":
        write_atomic(args.output, text)
    else:
        sys.stdout.write(text)
    return 0


# What the pieces of `sassas isa`'s lines mean (printed, as '#' lines, for those that occur).
FORM_LEGEND = (
    (r"(?<![\w\[])R(?![\w\]])", "R", "register R0..R254 (RZ: R255)"),
    (r"\bUR\b", "UR", "uniform register: UR0..UR62 on sm_75..sm_90, UR0..UR254 on Blackwell; URZ"),
    (r"(?<![\w\[])P\b", "P", "predicate P0..P6 (PT: P7)"),
    (r"\bUP\b", "UP", "uniform predicate UP0..UP6 (UPT)"),
    (r"\bB\b", "B", "convergence barrier register B0..B15"),
    (r"\bSR\b", "SR", "special register (SR_TID.X, SR_CLOCKLO, ...)"),
    (r"\bPR\b", "PR", "all predicates as one register"),
    (r"\bSB\b", "SB", "scoreboard (SB0..SB5)"),
    (r"(?<![\w\[+])I\b", "I", "immediate: integer or float"),
    (r"\bL\b", "L", "branch target: a label"),
    (r"C\[", "C[I][I]", "constant bank c[bank][offset] (C[I][R+I]: offset from a register)"),
    (r"(?<![\w\]])\[(?!\.)", "[R+I]", "memory address: [R2+0x10], [UR4+0x10], [R2+UR4+0x10], [0x10]"),
    (r"\bdesc\[", "desc[UR][R.64+I]", "global address with its memory descriptor in a uniform register pair"),
    (r"gdesc\[", "gdesc[UR]", "warpgroup MMA matrix descriptor"),
    (r"\bN\b|\bN\[", "N", "a name of the instruction set: gsb0, OPT_STACK, an address space (a[...], cx[UR4][...])"),
    (r"\{I\}", "{I}", "a set of scoreboards: {4,3,2,1}"),
    (r"\.INVALID", ".INVALIDn", "nvdisasm's own name for a modifier value it names no other way (kept to round-trip)"),
    (r"#\d", ".X#2", "the second of a modifier written twice (.INVALID7.INVALID7)"),
    (r"\.@g", ".@g!", "a negated guard predicate (@!P0)"),
    (r"\.@\d", ".@N<flag>", "a flag of operand N, from 0 = the first: .@1- is -R1, .@2| is |R2|, "
                              ".@2.64 is R2.64, .@4! is !P1"),
)


def _legend(lines: list[str]) -> list[str]:
    import re
    text = "\n".join(lines)
    found = [(piece, meaning) for pattern, piece, meaning in FORM_LEGEND if re.search(pattern, text)]
    width = max((len(p) for p, _ in found), default=0)
    hidden = "   (+ hidden descriptor UR: a field nvdisasm does not print)" if "hidden descriptor" in text else ""
    return [f"# FORM   [modifiers it takes]{hidden}"] + \
        [f"#   {p:<{width}}  {m}" for p, m in found]


def _cmd_isa(args) -> int:
    import difflib

    from .isa import get_isa
    isa = get_isa(args.arch)
    forms = [f for f in isa.forms() if args.opcode is None or f.split()[0] == args.opcode.upper()]
    if not forms:
        opcodes = sorted({f.split()[0] for f in isa.forms()})
        close = difflib.get_close_matches(args.opcode.upper(), opcodes, n=3)
        raise SassError(f"no opcode '{args.opcode}' on {isa.arch}" + (f"; did you mean {', '.join(close)}?"
                                                                      if close else ""))
    if not args.no_legend:
        print("\n".join(_legend(forms)))
    for line in forms:
        print(line)
    if args.opcode is None:
        print(f"{len(forms)} forms, {len({f.split()[0] for f in forms})} opcodes on {isa.arch}", file=sys.stderr)
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    parser = _Parser(prog="sassas", description="SASS assembler for NVIDIA Volta..Blackwell")
    parser.add_argument("--version", action=_Version, help="print the version and the archs, and exit")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("asm", help="assemble SASS source into a cubin")
    p.add_argument("input", help="source file (.sass), or - for standard input")
    p.add_argument("-o", "--output", help="output cubin (default: INPUT with .cubin; - for standard output)")
    _arch_arg(p)
    p.add_argument("-I", dest="include", action="append", default=[], help="include directory")
    p.add_argument("--kernel-name", help="name of the kernel when the file declares none")
    p.add_argument("--no-exec", action="store_true",
                   help="refuse inline Python (<code> blocks, {expr}, .include of .py files): for untrusted input")
    p.add_argument("--auto-reuse", action="store_true", help="set operand .reuse flags where it is safe")
    p.add_argument("-Werror", "--warnings-as-errors", dest="werror", action="store_true",
                   help="treat warnings as errors")
    p.add_argument("--dialect", choices=("turingas", "nvdisasm"), default=None,
                   help="whose meaning a spelling has where TuringAs and nvdisasm differ (CS2R R5, SR_CLOCKLO: "
                        "TuringAs's CS2R.32; LDG.E on sm_80); default: found from the file")
    p.add_argument("--yield", dest="yield_strategy", metavar="STRATEGY", type=_yield_strategy,
                   help="set every yield flag: 'natural' (only where a stall needs it) or 'every:N'")
    p.add_argument("--check", action="store_true",
                   help="run `sassas check` on the result: a hazard that is an error writes no cubin "
                        "(`asm` alone refuses only a wait one cycle after its barrier is set)")
    p.add_argument("-t", "--threads", type=_threads, default=0, metavar="N",
                   help="processes that assemble a large kernel, each a range of 50 000 of its lines or more "
                        "(or, where it cannot be cut, encode 10 000 of its instructions or more; the cubin and "
                        "the messages are the same, sooner only where cores are idle); 0, the default: one a "
                        "CPU core; 1: this process alone")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="print the cubin's size, arch and kernels, and each kernel's resources (as ptxas -v)")
    p.set_defaults(func=_cmd_asm)

    p = sub.add_parser("check", help="report control-code hazards (stalls, barriers, reuse)")
    p.add_argument("files", nargs="+", help="source files, cuobjdump/nvdisasm listings or cubins")
    _arch_arg(p)
    p.add_argument("--notes", action="store_true", help="also print notes (barriers re-armed, idle reuse flags)")
    p.set_defaults(func=_cmd_check)

    p = sub.add_parser("disasm", help="disassemble a cubin into editable source")
    p.add_argument("input", help="a cubin, or a fatbin or host program (nvcc's output): each cubin inside")
    _arch_arg(p, required=False, what="only the cubins for this arch (of a fatbin or host program)")
    p.add_argument("-o", "--output", help="output source (default, or -: standard output)")
    p.add_argument("--kernel", action="append",
                   help="only this kernel (and the device functions it calls); repeat for several")
    p.add_argument("--res-usage", action="store_true",
                   help="only each kernel's resources (registers, shared memory, parameters, barriers, stack), "
                        "as cuobjdump -res-usage")
    p.set_defaults(func=_cmd_disasm)

    p = sub.add_parser("isa", help="list the instruction forms an architecture supports")
    _arch_arg(p)
    p.add_argument("opcode", nargs="?", help="only this opcode")
    p.add_argument("--no-legend", action="store_true", help="leave out the '#' lines that explain the notation")
    p.set_defaults(func=_cmd_isa)

    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except SassError as e:
        for line in error_lines(e, "sassas"):
            print(line, file=sys.stderr)
        return EXIT_INPUT
    except BrokenPipeError:
        # The reader went away (`sassas isa ... | head`): nothing more to say.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_INPUT
    except OSError as e:
        where = f"{e.filename}: " if e.filename else ""
        print(f"sassas: error: {where}{e.strerror or e}", file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt:
        return 130
    except Exception as e:
        # A bug in sassas, not in the input: one line for the user, the traceback on request.
        if os.environ.get(TRACEBACK_ENV):
            raise
        print(f"sassas: internal error: {type(e).__name__}: {e} (please report it; set {TRACEBACK_ENV}=1 "
              "for the traceback)", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
