"""Every reader under random input: source files (mutated programs, random bytes, binary and
non-UTF-8 files), listings, cubins (`disasm` and the ELF reader behind `load`) and the command
line. Whatever the input, the answer is a result or diagnostics (file:line:col for sources, a
one-line error otherwise) with exit code 1 or 2: never a traceback, never a partial output.

Fresh seed each run, printed in the summary and in a failure; replay with SASSAS_FUZZ_SEED=N.
The counts of what was tried are in the run's summary (tests/conftest.py).
"""
from __future__ import annotations

import os
import re
import struct
import subprocess
import sys

import pytest

import sassas
from sassas import SassError
from sassas.disasm import disassemble
from sassas.elf import CubinFormatError, read_cubin
from sassas.errors import SassErrors
from sassas.files import decode_source
from sassas.isa import get_isa

from _fuzz import replay, rng_for
from test_frontend import ORACLE_PROGRAM, turingas_program

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAXPY = open(os.path.join(REPO, "examples", "saxpy.sass")).read()
_CODE_BLOCK = re.compile(r"<code>.*?</code>\n", re.S)
# Mutated inline Python could run anything (a mutated `range(2)` may become `range(2**63)`), so
# the mutants are assembled with inline code refused; the seeds keep one <code> block and
# {expr} to exercise that refusal, and the rest without.
SEEDS = [
    turingas_program(2),
    _CODE_BLOCK.sub("", turingas_program(2)).replace("{2 + 2}", "4"),
    _CODE_BLOCK.sub("", ORACLE_PROGRAM),
    SAXPY,
    ".kernel a\n<regs>\nx, v<0-3>\n</regs>\n--:-:-:Y:4 LDS.128 v0, [x];\n--:-:-:Y:5 EXIT;\n"
    ".kernel b\n.shared 64\n--:-:-:-:4 FFMA R0, R1.reuse, -R2, c[0x0][0x0];\nL:\n03:-:-:Y:5 @!P0 BRA L;\n",
]
_TOKEN = re.compile(r"\s+|[A-Za-z_0-9.]+|.", re.S)
JUNK = "<>{}[]()~:;,.@!|-+#/*\"'\\`$%^&=?\t\n0xRZPTUR255"
ARCHS = ["sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90"]
PROGRAMS = 300
CUBINS = 600
COMMAND_LINES = 150
ONE_LINE_ERROR = re.compile(r"^(sassas( \w+)?: error: [^\n]+|[^\n]+:\d+:\d+: error: .*)", re.S)
# What `sassas check` reports where it finds hazards (exit 1): a damaged cubin can decode to code
# whose first finding is a warning (a wait on a barrier nothing sets)
CHECK_FINDING = re.compile(r"^[^\n]+:\d+:\d+: (error|warning): ")


def mutate(text: str, rng) -> str:
    tokens = _TOKEN.findall(text)
    for _ in range(rng.randint(1, 4)):
        if not tokens:
            break
        i = rng.randrange(len(tokens))
        op = rng.randrange(6)
        if op == 0:
            del tokens[i]
        elif op == 1:
            tokens.insert(i, tokens[i])
        elif op == 2:
            j = rng.randrange(len(tokens))
            tokens[i], tokens[j] = tokens[j], tokens[i]
        elif op == 3:
            tokens[i] = "".join(rng.choice(JUNK) for _ in range(rng.randint(1, 3)))
        elif op == 4:
            tokens = tokens[:i]
        else:
            tokens[i] = str(rng.choice([0, 1, 5, 6, 7, 63, 64, 254, 255, 256, -1, 0x7FFFFFFF, 1 << 33]))
    return "".join(tokens)


def random_bytes(rng, n: int = 400) -> bytes:
    kind = rng.randrange(3)
    if kind == 0:
        return bytes(rng.getrandbits(8) for _ in range(rng.randrange(n)))            # binary
    if kind == 1:                                                                    # text, then a bad byte
        text = mutate(rng.choice(SEEDS), rng).encode()
        i = rng.randrange(len(text) + 1)
        return text[:i] + bytes([rng.choice([0x80, 0xC3, 0xFF, 0xFE, 0x00])]) + text[i:]
    return "".join(rng.choice(JUNK + "αβ€\x00\x7f") for _ in range(rng.randrange(n))).encode()


def check_diagnostics(err: SassError, text: str):
    errors = err.errors if isinstance(err, SassErrors) else [err]
    for e in errors:
        assert e.loc is not None and e.loc.line >= 1, f"{replay()}: diagnostic without a line: {e.message!r}\n{text}"
        assert "Traceback" not in str(e)


def listing_of(cubin: bytes) -> str:
    """A `cuobjdump -sass`-style listing of a cubin, made by sassas's own decoder."""
    info = read_cubin(cubin)
    isa = get_isa(info.arch)
    out = [f"\tcode for {info.arch}"]
    for k in info.kernels:
        out += [f"\t\tFunction : {k.name}", f'\t.headerflags\t@"EF_CUDA_{info.arch.upper().replace("_", "")}"']
        for a in range(0, len(k.code), 16):
            w = int.from_bytes(k.code[a:a + 16], "little")
            out.append(f"        /*{a:04x}*/                   {isa.format(isa.decode(w, a))} ;  "
                       f"/* 0x{w & (1 << 64) - 1:016x} */")
            out.append(f"                                                  /* 0x{w >> 64:016x} */")
        out.append("\t\t..........")
    return "\n".join(out) + "\n"


# ---- sources and listings, in process -------------------------------------------------------

def _assemble_or_diagnose(text: str, arch: str, outcomes: dict):
    try:
        sassas.assemble(text, arch, "fuzz.sass", allow_exec=False)
        outcomes["ok"] += 1
    except SassError as e:
        check_diagnostics(e, text)
        outcomes["error"] += 1


def test_mutated_programs_never_crash(report):
    rng = rng_for("programs")
    outcomes = {"ok": 0, "error": 0}
    for n in range(PROGRAMS):
        _assemble_or_diagnose(mutate(SEEDS[n % len(SEEDS)], rng), rng.choice(ARCHS[1:]), outcomes)
    report(f"fuzz: mutated programs: {PROGRAMS} ({outcomes})")
    assert outcomes["error"] > PROGRAMS // 3


def test_random_bytes_as_source(report):
    rng = rng_for("bytes")
    outcomes = {"ok": 0, "error": 0}
    for _ in range(PROGRAMS):
        data = random_bytes(rng)
        try:
            text = decode_source(data, "fuzz.sass")
        except SassError as e:
            check_diagnostics(e, repr(data[:80]))
            outcomes["error"] += 1
            continue
        _assemble_or_diagnose(text, "sm_90", outcomes)
    report(f"fuzz: random-byte sources: {PROGRAMS} ({outcomes})")


def test_mutated_listings_never_crash(report):
    rng = rng_for("listings")
    listings = [listing_of(sassas.assemble(SAXPY, arch).data) for arch in ("sm_80", "sm_90")]
    outcomes = {"ok": 0, "error": 0}
    for n in range(PROGRAMS // 2):
        arch = ("sm_80", "sm_90")[n % 2]
        _assemble_or_diagnose(mutate(listings[n % 2], rng), arch, outcomes)
    report(f"fuzz: mutated listings: {PROGRAMS // 2} ({outcomes})")


# ---- cubins -----------------------------------------------------------------------------------

def damaged_cubin(data: bytes, rng) -> bytes:
    d = bytearray(data)
    kind = rng.randrange(5)
    if kind == 0:                                          # truncated
        return bytes(d[:rng.randrange(len(d))])
    if kind == 1:                                          # ELF header bytes
        for _ in range(rng.randint(1, 4)):
            d[rng.randrange(0x40)] = rng.getrandbits(8)
    elif kind == 2:                                        # section headers: offsets, sizes, links
        shoff, = struct.unpack_from("<Q", d, 0x28)
        for _ in range(rng.randint(1, 3)):
            i = shoff + rng.randrange(max(1, len(d) - shoff))
            if i < len(d):
                d[i] = rng.getrandbits(8)
    elif kind == 3:                                        # program headers
        phoff, = struct.unpack_from("<Q", d, 0x20)
        for _ in range(rng.randint(1, 3)):
            i = phoff + rng.randrange(0x38 * 3)
            if i < len(d):
                d[i] = rng.getrandbits(8)
    else:                                                  # anywhere
        for _ in range(rng.randint(1, 8)):
            d[rng.randrange(len(d))] ^= 1 << rng.randrange(8)
    return bytes(d)


@pytest.fixture(scope="module")
def cubins():
    return [sassas.assemble(src, arch).data for arch in ("sm_80", "sm_89", "sm_90")
            for src in (SAXPY, _CODE_BLOCK.sub("", ORACLE_PROGRAM))]


def test_damaged_cubins_never_crash(cubins, report):
    """`disasm` and the ELF reader behind `load`: a damaged cubin is CubinFormatError / SassError."""
    rng = rng_for("cubins")
    outcomes = {"read": 0, "refused": 0}
    for _ in range(CUBINS):
        data = damaged_cubin(rng.choice(cubins), rng)
        try:
            read_cubin(data)
            outcomes["read"] += 1
        except CubinFormatError:
            outcomes["refused"] += 1
        try:
            disassemble(data, source_name="fuzz.cubin")
        except SassError as e:
            assert "\n" not in str(e).strip(), f"{replay()}: more than one line: {e}"
    report(f"fuzz: damaged cubins: {CUBINS} ({outcomes})")
    assert outcomes["refused"] > CUBINS // 10


# ---- the command line ------------------------------------------------------------------------

def _main(argv, capsys):
    from sassas.cli import main
    try:
        code = main(argv)
    except SystemExit as e:       # argparse
        code = e.code
    out = capsys.readouterr()
    # `check` reports hazards and input errors on standard output, like a compiler's listing.
    return code, out.err if code == 0 or out.err or argv[0] != "check" else out.out


def test_unknown_archs_one_line(tmp_path, capsys):
    src = tmp_path / "k.sass"
    src.write_text(SAXPY)
    for arch in ("sm_91", "sm_110", "sm_130", "sm_60", "x"):
        for argv in (["asm", str(src), "--arch", arch], ["check", str(src), "--arch", arch],
                     ["isa", "--arch", arch]):
            code, err = _main(argv, capsys)
            assert code == 2 and err.count("\n") == 1, (argv, err)
            assert f"unknown architecture '{arch}'" in err and "sm_70, sm_75, sm_80, sm_86, sm_89, sm_90" in err


def _command_lines(tmp_path, cubin: bytes, rng):
    good = tmp_path / "good.sass"
    good.write_text(SAXPY)
    binary = tmp_path / "binary.sass"
    binary.write_bytes(bytes(range(256)) * 4)
    latin1 = tmp_path / "latin1.sass"
    latin1.write_bytes("# caf\xe9\n".encode("latin-1") + SAXPY.encode())
    empty = tmp_path / "empty.sass"
    empty.write_text("")
    cub = tmp_path / "k.cubin"
    cub.write_bytes(cubin)
    bad_cubin = tmp_path / "bad.cubin"
    bad_cubin.write_bytes(damaged_cubin(cubin, rng))
    folder = tmp_path / "folder"
    folder.mkdir(exist_ok=True)
    inputs = [good, binary, latin1, empty, cub, bad_cubin, folder, tmp_path / "missing.sass"]
    outputs = [None, tmp_path / "out.cubin", folder, tmp_path / "no" / "such" / "dir.cubin", tmp_path / "out/"]
    extras = [[], [], [], ["--bogus"], ["-Werror"], ["--check"], ["-o"], ["--kernel", "nope"],
              ["--yield", rng.choice(["natural", "every:2", "every:0", "every:x", "sometimes"])]]
    valid = [["asm", str(good), "--arch", "sm_90", "-o", str(tmp_path / "out.cubin")],
             ["asm", str(good), "--arch", "sm_80", "--yield", "every:3", "-o", str(tmp_path / "out.cubin")],
             ["disasm", str(cub)], ["disasm", str(cub), "-o", str(tmp_path / "out.cubin")],
             ["check", str(good), "--arch", "sm_89"], ["isa", "--arch", "sm_75", "FFMA"]]
    while True:
        if rng.random() < 0.25:
            yield rng.choice(valid), None
            continue
        cmd = rng.choice(["asm", "asm", "asm", "disasm", "check", "isa", "frobnicate"])
        argv = [cmd]
        if cmd != "isa" and rng.random() < 0.95:
            argv.append(str(rng.choice(inputs)))
        out = rng.choice(outputs)
        if out is not None and cmd in ("asm", "disasm"):
            argv += ["-o", str(out)]
        if cmd in ("asm", "check", "isa") and rng.random() < 0.9:
            argv += ["--arch", rng.choice(ARCHS[1:] + ["sm_91", "sm_110", "sm_130", "90", "SM75"])]
        argv += rng.choice(extras)
        if cmd == "isa" and rng.random() < 0.5:
            argv.append(rng.choice(["FFMA", "ffma", "FFMX", "LDS", "?"]))
        yield argv, out


def test_command_lines_in_process(tmp_path, capsys, cubins, report):
    rng = rng_for("cli")
    codes = {}
    for (argv, out), _ in zip(_command_lines(tmp_path, cubins[0], rng), range(COMMAND_LINES)):
        before = set(os.listdir(tmp_path))
        code, err = _main(argv, capsys)
        codes[code] = codes.get(code, 0) + 1
        assert code in (0, 1, 2), (replay(), argv, code, err)
        assert "Traceback" not in err and "internal error" not in err, (replay(), argv, err)
        if code != 0:
            assert err.strip(), (replay(), argv)
            first = err.strip().split("\n")[0]
            finding = argv[0] == "check" and code == 1 and CHECK_FINDING.match(first)
            assert ONE_LINE_ERROR.match(first) or finding, (replay(), argv, err)
            left = {n for n in set(os.listdir(tmp_path)) - before}
            assert not left, (replay(), argv, f"left behind: {left}")
        assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")], (replay(), argv)
        for name in ("out.cubin",):
            if (tmp_path / name).exists():
                (tmp_path / name).unlink()
    report(f"fuzz: command lines (in process): {COMMAND_LINES} (exit codes {codes})")


@pytest.mark.parametrize("case", ["unknown-arch", "unknown-option", "missing", "binary", "directory-out",
                                  "unwritable-out", "bad-cubin", "ok"])
def test_command_line_subprocess(case, tmp_path, cubins):
    """A sample through a real process: exit code, one line on stderr, no output file left."""
    src = tmp_path / "k.sass"
    src.write_text(SAXPY)
    out = tmp_path / "k.cubin"
    argv = {"unknown-arch": ["asm", str(src), "--arch", "sm_110", "-o", str(out)],
            "unknown-option": ["asm", str(src), "--arch", "sm_90", "--frobnicate", "-o", str(out)],
            "missing": ["asm", str(tmp_path / "none.sass"), "--arch", "sm_90", "-o", str(out)],
            "binary": ["asm", sys.executable, "--arch", "sm_90", "-o", str(out)],
            "directory-out": ["asm", str(src), "--arch", "sm_90", "-o", str(tmp_path)],
            "unwritable-out": ["asm", str(src), "--arch", "sm_90", "-o", str(tmp_path / "no" / "k.cubin")],
            "bad-cubin": ["disasm", str(out), "-o", str(tmp_path / "k.txt")],
            "ok": ["asm", str(src), "--arch", "sm_90", "-o", str(out)]}[case]
    if case == "bad-cubin":
        out.write_bytes(cubins[0][:200])
    proc = subprocess.run([sys.executable, "-m", "sassas", *argv], capture_output=True, text=True, cwd=REPO)
    if case == "ok":
        assert proc.returncode == 0 and out.exists() and proc.stderr == ""
        return
    assert proc.returncode in (1, 2), proc
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / "k.txt").exists() and (case == "bad-cubin" or not out.exists())
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]
