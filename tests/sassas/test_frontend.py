"""The TuringAs language front end: blocks, inline Python, register names and allocation,
multi-kernel files, diagnostics. No GPU; the nvdisasm round trip skips without the oracle."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

import sassas
from sassas import SassError, parse
from sassas.errors import Diagnostics
from sassas.frontend import set_reuse_flags
from sassas.ast import format_operand
from sassas.regalloc import bank


def text_of(inst) -> str:
    pred = ""
    if inst.predicate is not None:
        pred = "@" + format_operand(inst.predicate) + " "
    ops = ", ".join(format_operand(o) for o in inst.operands)
    return f"{pred}{inst.mnemonic} {ops}".rstrip()


def listing(prog, kernel=0):
    k = prog.kernels[kernel]
    return [(i.control.to_text() if i.control else None, text_of(i)) for i in k.instructions]


def error_of(text, **kw) -> SassError:
    with pytest.raises(SassError) as e:
        parse(text, "sm_90", kw.pop("filename", "bad.sass"), **kw)
    return e.value


# A TuringAs-style kernel: <params>, <regs> (range ~ names), <smem>, <consts>, a <code> block
# with {expr}, blockDim, decimal wait masks.
TURINGAS_PROGRAM = """\
<params>
output, 8
n, 4
</params>

<regs>
0-16 ~ output0, output1, tid, offset, target, start, stop, iter
R20 ~ acc
</regs>

<smem>
buf, 1024
</smem>

<consts>
table, 16
</consts>

--:-:1:-:5    S2R tid, SR_TID.X;
02:-:-:-:6    SHF.L.U32 offset, tid, 0x2, RZ;
--:-:-:-:5    IMAD.MOV.U32 iter, RZ, RZ, RZ;
--:-:-:Y:4    IMAD acc, tid, blockDim.x, RZ;
--:-:-:-:1    IADD3 acc, acc, table[1], RZ;
LOOP:
<code>
out_ = []
for i in range(UNROLL):
    out_.append(f'--:-:{i % 6}:-:1    LDS target, [offset+buf+{4 * i}];')
</code>
63:-:-:Y:{2 + 2}    IADD3 iter, iter, 0x1, RZ;
12:-:-:-:1    ISETP.LT.AND P0, PT, iter, n, PT;
--:-:-:Y:5    @P0 BRA LOOP;
--:-:-:Y:5    EXIT;
"""


def turingas_program(unroll=3):
    return TURINGAS_PROGRAM.replace("<code>\n", f"<code>\nUNROLL = {unroll}\n")


def test_turingas_program_parses_to_what_was_written():
    prog = parse(turingas_program(), "sm_90", "lds.sass")
    assert [k.name for k in prog.kernels] == ["lds"]        # default: the file's name
    k = prog.kernels[0]
    assert [(p.name, p.size) for p in k.params] == [("output", 8), ("n", 4)]
    assert k.shared_bytes == 1024
    assert listing(prog) == [
        ("--:-:1:-:5", "S2R R2, SR_TID.X"),
        ("02:-:-:-:6", "SHF.L.U32 R3, R2, 0x2, RZ"),
        ("--:-:-:-:5", "IMAD.MOV.U32 R7, RZ, RZ, RZ"),
        ("--:-:-:Y:4", "IMAD R20, R2, c[0x0][0x0], RZ"),
        ("--:-:-:-:1", "IADD3 R20, R20, c[0x3][0x4], RZ"),
        ("--:-:0:-:1", "LDS R4, [R3]"),
        ("--:-:1:-:1", "LDS R4, [R3+0x4]"),
        ("--:-:2:-:1", "LDS R4, [R3+0x8]"),
        ("63:-:-:Y:4", "IADD3 R7, R7, 0x1, RZ"),
        ("12:-:-:-:1", "ISETP.LT.AND P0, PT, R7, n, PT"),   # params: resolve's business
        ("--:-:-:Y:5", "@P0 BRA LOOP"),
        ("--:-:-:Y:5", "EXIT"),
    ]


@pytest.mark.parametrize("wait,mask", [("--", 0), ("01", 1), ("03", 3), ("10", 0b1010), ("12", 0b1100),
                                       ("63", 63), ("0c", 12), ("-----1", 2)])
def test_wait_field_reads_as_turingas(wait, mask):
    # TuringAs reads the two-digit wait field as a decimal bit mask; a hex letter means hex.
    inst = parse(f"{wait}:-:-:Y:4 NOP;", "sm_90", "w.sass").kernels[0].instructions[0]
    assert inst.control.wait_mask == mask


@pytest.mark.parametrize("text,message", [
    ("64:-:-:Y:4 NOP;", "wait mask 64 names a barrier above 5"),
    ("--:6:-:Y:4 NOP;", "read barrier 6 out of range"),
    ("--:-:-:-:c NOP;", "needs the yield flag"),
])
def test_illegal_control(text, message):
    err = error_of(text)
    assert message in err.message and err.loc.line == 1


# ---- <regs> -----------------------------------------------------------------------------

def regs_of(block: str, body: str):
    prog = parse(f"<regs>\n{block}\n</regs>\n{body}\n--:-:-:Y:5 EXIT;\n", "sm_90", "r.sass")
    return listing(prog)


def test_regs_exact_list_and_vector_names():
    got = regs_of("0-3 : a, b, c, d\n8, 10 : e, f\nR12-R13 : v<0-1>   # comment",
                  "--:-:-:Y:4 FFMA d, a, b, c;\n--:-:-:Y:4 FADD e, f, v1;")
    assert [t for _, t in got[:2]] == ["FFMA R3, R0, R1, R2", "FADD R8, R10, R13"]


def test_regs_tilde_takes_registers_in_order():
    got = regs_of("0-16 ~ a, b, c", "--:-:-:Y:4 FFMA a, b, c, a;")
    assert got[0][1] == "FFMA R0, R1, R2, R0"


@pytest.mark.parametrize("block,message", [
    ("0-3 : a, b", "must pair up"),
    ("0-1 ~ a, b, c", "2 register(s) for 3 name(s)"),
    ("3-1 : a", "runs backwards"),
    ("0 : 1x", "expected a register name"),
    ("0 : a\n1 : a", "'a' declared twice"),
])
def test_regs_errors(block, message):
    err = error_of(f"<regs>\n{block}\n</regs>\n--:-:-:Y:5 EXIT;\n")
    assert message in err.message and err.loc.line >= 2


def test_automatic_allocation_aligns_and_avoids_banks():
    src = """
<regs>
0-3 : p0, p1, p2, p3
vec<0-7>, x, y, z, w
</regs>
--:-:-:Y:4 LDS.128 vec4, [p0];
--:-:-:Y:4 FFMA w, x, y, z;
--:-:-:Y:4 FFMA z, x, y, w;
--:-:-:Y:4 STS.64 [p1], vec2;
--:-:-:Y:5 EXIT;
"""
    k = parse(src, "sm_90", "a.sass").kernels[0]
    lds, f1, f2, sts, _ = k.instructions
    base = lds.operands[0].values[0] - 4
    assert base % 4 == 0 and base >= 4                       # clear of R0..R3, aligned
    assert sts.operands[1].values[0] == base + 2
    srcs = [op.values[0] for op in f1.operands[1:]]
    assert len(set(srcs)) == 3 and not set(srcs) & set(range(base, base + 8)) and not set(srcs) & {0, 1, 2, 3}
    assert len({bank(r) for r in srcs}) == 2                  # not all three in one bank
    # Same input, same registers.
    again = parse(src, "sm_90", "a.sass").kernels[0]
    assert listing(parse(src, "sm_90", "a.sass")) == [(i.control.to_text(), text_of(i)) for i in again.instructions]


def test_auto_scalar_used_as_128_bit_gets_four_aligned_registers():
    k = parse("<regs>\nlo, q\n</regs>\n--:-:-:Y:4 LDS.128 q, [lo];\n--:-:-:Y:5 EXIT;\n",
              "sm_90", "q.sass").kernels[0]
    q = k.instructions[0].operands[0].values[0]
    lo = k.instructions[0].operands[1].values[0]
    assert q % 4 == 0 and lo not in range(q, q + 4)


def test_auto_reuse_sets_flags_only_where_safe():
    src = """
--:-:-:-:4 FFMA R0, R4, R5, R0;
--:-:-:-:4 FFMA R1, R4, R6, R1;
--:-:-:-:4 FFMA R4, R4, R7, R2;
--:-:-:-:4 FFMA R3, R4, R7, R3;
L:
--:-:-:-:4 FFMA R8, R4, R7, R8;
--:-:-:Y:5 EXIT;
"""
    got = [t for _, t in listing(parse(src, "sm_90", "r.sass", auto_reuse=True))]
    assert got[:5] == [
        "FFMA R0, R4.reuse, R5, R0",     # R4 again in slot A next
        "FFMA R1, R4.reuse, R6, R1",     # the next one writes R4, but reads it first
        "FFMA R4, R4, R7.reuse, R2",     # R4 is written here: its cached value is stale
        "FFMA R3, R4, R7, R3",           # a label follows: something may branch in
        "FFMA R8, R4, R7, R8",
    ]
    assert [t for _, t in listing(parse(src, "sm_90", "r.sass"))][0] == "FFMA R0, R4, R5, R0"
    # With the yield flag the reuse bits are no reuse flags (nvdisasm prints none): none set.
    yielding = src.replace("--:-:-:-:4", "--:-:-:Y:4")
    assert not any(".reuse" in t for _, t in listing(parse(yielding, "sm_90", "r.sass", auto_reuse=True)))


# ---- other blocks, names ------------------------------------------------------------------

def test_blockdim_griddim_on_every_arch():
    for arch in ("sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90"):
        src = "".join(f"--:-:-:Y:4 MOV R{i}, {n};\n" for i, n in enumerate(
            ["blockDim.x", "blockDim.y", "blockDim.z", "gridDim.x", "gridDim.y", "gridDim.z"])) + "--:-:-:Y:5 EXIT;"
        k = parse(src, arch, "d.sass").kernels[0]
        assert [i.operands[1].values for i in k.instructions[:6]] == [(0, o) for o in (0, 4, 8, 0xC, 0x10, 0x14)]


def test_consts_and_smem_layout():
    src = """
<consts>
a, 8
b, 4
</consts>
<smem>
s1, 12
s2, 16, 16
</smem>
--:-:-:Y:4 MOV R0, b;
--:-:-:Y:4 MOV R1, a[1];
--:-:-:Y:4 MOV R2, s2;
--:-:-:Y:4 LDS R3, [s2+0x4];
--:-:-:Y:5 EXIT;
"""
    prog = parse(src, "sm_90", "c.sass")
    assert [t for _, t in listing(prog)][:4] == ["MOV R0, c[0x3][0x8]", "MOV R1, c[0x3][0x4]", "MOV R2, 0x10",
                                                  "LDS R3, [0x14]"]
    assert prog.kernels[0].shared_bytes == 32
    assert "has 2 32-bit word(s)" in error_of(src.replace("a[1]", "a[2]")).message


def test_names_bind_alike_in_every_operand_of_a_layout():
    """The front end learns each layout of operand once (frontend._LayoutBinder): operands that
    share names and differ in numbers bind as each alone would, including where binding adds
    to the number (a <smem> name beside an offset, one offset landing where another was) or
    checks it (a constant's word)."""
    decls = "<consts>\na, 8\n</consts>\n<smem>\npad, 256\nbuf, 64\n</smem>\n<regs>\n0-3 : base, x, y, addr\n</regs>\n"
    lines = ["--:-:-:Y:4 LDS R5, [addr+0x%x];" % k for k in (0, 0x4, 0x100, 0x200)]
    lines += ["--:-:-:Y:4 LDS R5, [buf+0x%x];" % k for k in (0, 0x4, 0x100, 0x200)]
    lines += ["--:-:-:Y:4 LDS R5, [addr+buf+0x%x];" % k for k in (0, 0x4, 0x100)]
    lines += ["--:-:-:Y:4 MOV R1, a[%d];" % k for k in (0, 1)]
    lines += ["--:-:-:Y:4 IADD3 x, y, 0x%x, RZ;" % k for k in (0, 0x100, 0x5A5A0100)]
    prog = parse(decls + "\n".join(lines) + "\n--:-:-:Y:5 EXIT;\n", "sm_90", "layouts.sass")
    assert [t for _, t in listing(prog)][:len(lines)] == [
        "LDS R5, [R3]", "LDS R5, [R3+0x4]", "LDS R5, [R3+0x100]", "LDS R5, [R3+0x200]",
        "LDS R5, [0x100]", "LDS R5, [0x104]", "LDS R5, [0x200]", "LDS R5, [0x300]",
        "LDS R5, [R3+0x100]", "LDS R5, [R3+0x104]", "LDS R5, [R3+0x200]",
        "MOV R1, c[0x3][0x0]", "MOV R1, c[0x3][0x4]",
        "IADD3 R1, R2, 0x0, RZ", "IADD3 R1, R2, 0x100, RZ",
        "IADD3 R1, R2, 0x5a5a0100, RZ"]
    wrong = decls + "--:-:-:Y:4 MOV R1, a[0];\n--:-:-:Y:4 MOV R1, a[2];\n--:-:-:Y:5 EXIT;\n"
    assert "has 2 32-bit word(s)" in error_of(wrong).message


def test_several_kernels_each_with_its_own_declarations():
    src = """
.kernel first
<params>
a, 4
</params>
<regs>
x
</regs>
--:-:-:Y:4 MOV x, RZ;
--:-:-:Y:5 EXIT;
.kernel second
.shared 256
.registers 32
<params>
a, 8
b, 4
</params>
<regs>
7 : x
</regs>
--:-:-:Y:4 MOV x, RZ;
--:-:-:Y:5 EXIT;
"""
    prog = parse(src, "sm_90", "two.sass")
    first, second = prog.kernels
    assert (first.name, second.name) == ("first", "second")
    assert [p.size for p in first.params] == [4] and [p.size for p in second.params] == [8, 4]
    assert (first.shared_bytes, second.shared_bytes, second.registers) == (0, 256, 32)
    assert second.instructions[0].operands[0].values == (7,)


# ---- inline Python ------------------------------------------------------------------------

def test_inline_python_namespace_is_per_file(tmp_path):
    (tmp_path / "inc.sass").write_text("--:-:-:Y:4 MOV R1, {VALUE if 'VALUE' in dir() else 0x7};\n")
    (tmp_path / "helper.py").write_text("def addr(i):\n    return 4 * i\n")
    main = tmp_path / "main.sass"
    main.write_text('.include "helper.py"\n<code>\nVALUE = 3\nout_ = ""\n</code>\n'
                    '--:-:-:Y:4 MOV R0, {addr(VALUE)};\n.include "inc.sass"\n--:-:-:Y:5 EXIT;\n')
    prog = parse(main.read_text(), "sm_90", str(main))
    # The included .sass file has its own namespace: VALUE is not visible there.
    assert [t for _, t in listing(prog)][:2] == ["MOV R0, 0xc", "MOV R1, 0x7"]
    # Nothing leaks into the next run or into the assembler.
    with pytest.raises(SassError, match="NameError"):
        parse("--:-:-:Y:4 MOV R0, {VALUE};\n", "sm_90", str(tmp_path / "other.sass"))
    assert not hasattr(sassas, "VALUE") and "VALUE" not in globals()


@pytest.mark.parametrize("src", [
    "--:-:-:Y:4 MOV R0, {1 + 2};\n",
    "<code>\nout_ = ''\n</code>\n",
    '.include "x.py"\n',
])
def test_no_exec_refuses_inline_code(src, tmp_path):
    (tmp_path / "x.py").write_text("X = 1\n")
    err = error_of(src, filename=str(tmp_path / "t.sass"), allow_exec=False)
    assert "inline code is disabled" in err.message and err.loc.line == 1


def test_error_in_generated_line_names_both_places():
    src = "--:-:-:Y:4 NOP;\n<code>\nout_ = ['--:-:-:Y:4 MOV R0, nosuch;']\n</code>\n--:-:-:Y:5 EXIT;\n"
    err = error_of(src)
    text = str(err)
    assert "undefined name 'nosuch'" in text
    assert "MOV R0, nosuch;" in text and "note: generated from here" in text and "<code>" in text
    assert err.loc.line == 2


def test_error_in_included_file_names_both_places(tmp_path):
    (tmp_path / "inc.sass").write_text("--:-:-:Y:4 MOV R0, R999;\n")
    err = error_of('--:-:-:Y:4 NOP;\n.include "inc.sass"\n', filename=str(tmp_path / "m.sass"))
    assert err.loc.file.endswith("inc.sass") and err.loc.line == 1
    assert err.loc.origin.file.endswith("m.sass") and err.loc.origin.line == 2
    assert "out of range" in err.message


@pytest.mark.parametrize("generator", [
    "<code>\nout_ = ['--:-:-:Y:4 MOV R1, R2;\\n--:-:-:Y:4 MOV R0, nosuch;']\n</code>\n",
    "<code>\nT = '--:-:-:Y:4 MOV R1, R2;\\n--:-:-:Y:4 MOV R0, nosuch;'\n</code>\n{T}\n",
])
def test_a_generated_line_of_several_is_that_many_lines(generator):
    """An item of a <code> block's list, or an {expr}, that holds newlines gives that many
    lines, each standing where it was generated."""
    err = error_of("--:-:-:Y:4 NOP;\n" + generator + "--:-:-:Y:5 EXIT;\n")
    assert "undefined name 'nosuch'" in err.message and err.loc.text.strip() == "--:-:-:Y:4 MOV R0, nosuch;"
    assert err.loc.origin is not None and err.loc.line == (2 if generator.startswith("<code>\nout_") else 5)
    prog = parse("--:-:-:Y:4 NOP;\n" + generator.replace("nosuch", "R3") + "--:-:-:Y:5 EXIT;\n", "sm_90", "g.sass")
    assert [t for _, t in listing(prog)][1:3] == ["MOV R1, R2", "MOV R0, R3"]


def test_python_error_points_into_the_code_block():
    err = error_of("<code>\nx = 1\ny = 1 / 0\n</code>\n")
    assert "ZeroDivisionError" in err.message and err.loc.line == 3


# ---- diagnostics ------------------------------------------------------------------------

@pytest.mark.parametrize("line,message", [
    ("LDS.128 R5, [R2];", "LDS.128 writes the register quad R5:R8; a quad must start at a multiple of 4"),
    ("LDG.E.64 R3, desc[UR4][R4.64];", "writes the register pair R3:R4; a pair must start at an even register"),
    ("STS.128 [R2], R6;", "STS.128 reads the register quad R6:R9"),
    ("LDG.E R2, desc[UR4][R3.64];", "LDG.E reads the register pair R3:R4"),
    ("IMAD.WIDE R3, R1, 0x4, R4;", "IMAD.WIDE writes the register pair R3:R4"),
    ("ULDC.64 UR5, c[0x0][0x208];", "ULDC.64 writes the register pair UR5:UR6"),
    ("CS2R.64 R5, SR_CLOCKLO;", "CS2R writes the register pair R5:R6; a pair must start at an even register"),
    ("MOV R255, R1;", "R0..R254"),
    ("MOV UR63, UR1;", "UR0..UR62"),
    ("ISETP.GE.AND P7, PT, R1, R2, PT;", "P0..P6"),
    ("MOV R1, 0x100000000;", "does not fit in 32 bits"),
    ("MOV R1, c[0x0][0x10000];", "constant offset"),
    ("MOV R1, c[0x12][0x0];", "constant bank 0x12 out of range"),
    ("LDS.128 R8, [R2];", None),
    ("STG.E desc[UR4][R2.64], R4;".replace("STG", "STG"), None),
])
def test_operand_diagnostics(line, message):
    src = f"--:-:-:Y:4 {line}\n--:-:-:Y:5 EXIT;\n"
    if message is None:
        parse(src, "sm_90", "ok.sass")
        return
    err = error_of(src)
    assert message in err.message and (err.loc.line, err.loc.file) == (1, "bad.sass")


@pytest.mark.parametrize("line", ["--:-:2:-:1 STG.E desc[UR4][R2.64], R4;", "--:-:0:Y:5 BRA L;",
                                  "--:-:1:Y:5 EXIT;"])
def test_write_barrier_on_instruction_without_result(line):
    err = error_of(f"L:\n{line}\n--:-:-:Y:5 EXIT;\n")
    assert "writes no register" in err.message and err.loc.line == 2


def test_several_errors_in_one_run():
    err = error_of("--:-:-:Y:4 LDS.128 R5, [R2];\n--:-:-:Y:4 MOV R0, nosuch;\n--:-:-:Y:4 MOV R1, 0x1ffffffff;\n"
                   "--:-:-:Y:5 EXIT;\n")
    assert [e.loc.line for e in err.errors] == [1, 2, 3]
    assert str(err).count("error:") == 3


def test_labels_duplicate_and_undefined():
    assert "did you mean 'LOOP'" in error_of("LOOP:\n--:-:-:Y:5 BRA LOPO;\n--:-:-:Y:5 EXIT;\n").message


def test_missing_exit_is_a_warning_or_an_error():
    diags = Diagnostics()
    parse("--:-:-:Y:4 NOP;\n", "sm_90", "w.sass", diagnostics=diags)
    assert len(diags.warnings) == 1 and "has no EXIT" in diags.warnings[0].render()
    assert diags.warnings[0].render().startswith("w.sass:1:")
    err = error_of("--:-:-:Y:4 NOP;\n", warnings_as_errors=True)
    assert "has no EXIT" in err.message and "[-Werror]" in err.message


def test_unterminated_blocks():
    for block in ("regs", "code", "smem", "consts"):
        err = error_of(f"--:-:-:Y:4 NOP;\n<{block}>\n")
        assert "not closed" in err.message and err.loc.line == 2


# ---- the command line ---------------------------------------------------------------------

def run_cli(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "sassas", *args], input=stdin, capture_output=True,
                          text=True, timeout=60, cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))


def test_cli_no_exec_and_errors(tmp_path):
    src = tmp_path / "k.sass"
    src.write_text("--:-:-:Y:4 MOV R0, {1+1};\n--:-:-:Y:5 EXIT;\n")
    out = tmp_path / "k.cubin"
    r = run_cli("asm", str(src), "-o", str(out), "--arch", "sm_90", "--no-exec")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert f"{src}:1:20: error:" in r.stderr and not out.exists()


def test_cli_werror(tmp_path):
    src = tmp_path / "k.sass"
    src.write_text("--:-:-:Y:4 NOP;\n")
    out = tmp_path / "k.cubin"
    r = run_cli("asm", str(src), "-o", str(out), "--arch", "sm_90", "-Werror")
    assert r.returncode == 1 and "has no EXIT" in r.stderr and not out.exists()


def test_cli_asm_check(tmp_path):
    """`asm --check` runs the hazard checker: a read before the S2R's result is there writes
    no cubin; without --check the same file assembles. The one-cycle barrier wait is always
    reported: a warning, an error with -Werror."""
    src = tmp_path / "k.sass"
    src.write_text("--:-:0:-:2 S2R R0, SR_TID.X;\n--:-:-:Y:5 IADD3 R1, R0, 0x1, RZ;\n--:-:-:Y:5 EXIT;\n")
    out = tmp_path / "k.cubin"
    r = run_cli("asm", str(src), "-o", str(out), "--arch", "sm_90", "--check")
    assert r.returncode == 1 and f"{src}:2:1: error: reads R0 before S2R" in r.stderr and not out.exists()
    r = run_cli("asm", str(src), "-o", str(out), "--arch", "sm_90")
    assert r.returncode == 0 and out.exists()
    src.write_text("--:-:0:-:1 S2R R0, SR_TID.X;\n01:-:-:Y:5 IADD3 R1, R0, 0x1, RZ;\n--:-:-:Y:5 EXIT;\n")
    out.unlink()
    r = run_cli("asm", str(src), "-o", str(out), "--arch", "sm_90")
    assert r.returncode == 0 and f"{src}:2:1: warning: waits on barrier 0 one cycle after S2R" in r.stderr
    out.unlink()
    r = run_cli("asm", str(src), "-o", str(out), "--arch", "sm_90", "-Werror")
    assert r.returncode == 1 and "Traceback" not in r.stderr and not out.exists()
    assert f"{src}:2:1: error: waits on barrier 0 one cycle after S2R" in r.stderr


# ---- against the oracle -------------------------------------------------------------------

ORACLE_PROGRAM = """\
<params>
out, 8
</params>
<regs>
0-15 ~ tid, addr, value, lo, hi
</regs>
<smem>
buf, 512
</smem>
--:-:0:-:7    S2R tid, SR_TID.X;
01:-:-:Y:4    SHF.L.U32 addr, tid, 0x2, RZ;
--:-:-:Y:4    IMAD value, tid, tid, RZ;
<code>
out_ = [f'--:{i}:-:Y:{2 + i}    STS [addr+buf+{4 * i}], value;' for i in range(N)]
</code>
63:-:-:Y:6    BAR.SYNC.DEFER_BLOCKING 0x0;
--:-:1:-:2    LDS lo, [addr+buf];
02:-:-:Y:4    FFMA hi, lo, lo, value;
--:-:-:Y:5    EXIT;
"""


@pytest.mark.parametrize("arch", ["sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90"])
def test_turingas_program_through_nvdisasm(arch):
    oracle = pytest.importorskip("sassas.learn.oracle")
    why = oracle.missing_tools(arch, ("nvdisasm",))
    if why:
        pytest.skip(why)
    src = ORACLE_PROGRAM.replace("<code>\n", "<code>\nN = 3\n")
    try:
        cubin = sassas.assemble(src, arch, "oracle.sass")
    except SassError as e:
        if "match any form" in e.message or "unknown opcode" in e.message:
            pytest.skip(f"the {arch} encoder does not cover this program yet: {e.message}")
        raise
    assert sassas.assemble(src, arch, "oracle.sass").data == cubin.data   # deterministic
    from sassas.ast import ControlCode
    from sassas.parse import parse_instruction
    (_, code), = [s for s in oracle.text_sections(cubin.data)]
    decoded = oracle.disassemble_code(code, arch)
    wanted = cubin.program.kernels[0].instructions
    assert len(decoded) >= len(wanted)
    for inst, dis in zip(wanted, decoded):
        got = parse_instruction(dis.text)
        assert text_of(got) == text_of(inst), dis.text
        assert ControlCode.from_word(dis.word) == inst.control, dis.text


def test_readme_language_example_parses():
    readme = open(os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "README.md")).read()
    section = readme[readme.index("## The language"):]
    example = section.split("```")[1]
    prog = parse(example, "sm_90", "readme.sass")
    k = prog.kernels[0]
    assert k.name == "saxpy" and k.shared_bytes == 1024
    texts = [text_of(i) for i in k.instructions]
    assert texts[0] == "S2R R0, SR_TID.X"
    assert texts[1].startswith("@P0 FFMA R1, R2, a, c[0x0][0x0]") or "c[0x0][0x0]" in texts[1]
    v0 = k.instructions[2].operands[0].values[0]
    assert v0 % 4 == 0 and texts[2].endswith(", [R0+0x10]")
    assert texts[3].startswith("IADD3 ") and texts[5] == "EXIT"
    assert k.instructions[5].control.stall == 5


def test_scoreboard_sets_are_not_inline_python():
    """`{4,3,2,1}` and `{5}` (decimal numbers alone) are DEPBAR's scoreboard sets in source too,
    as `sassas disasm` writes them; `{2+3}` is still an inline expression."""
    from sassas.disasm import disassemble
    from sassas.preprocess import preprocess
    src = ("--:-:-:Y:1  DEPBAR.LE SB0, 0x0, {4,3,2,1};\n--:-:-:Y:1  DEPBAR.LE SB0, 0x0, {5};\n"
           "--:-:-:Y:1  IADD3 R0, R0, {2+3}, RZ;\n--:-:-:Y:1  EXIT;\n")
    assert "{4,3,2,1}" in preprocess(src, "s.sass").text and "R0, 5, RZ" in preprocess(src, "s.sass").text
    cubin = sassas.assemble(src, "sm_80", filename="s.sass").data
    text = disassemble(cubin)
    assert "DEPBAR.LE SB0, 0x0, {4,3,2,1};" in text and "DEPBAR.LE SB0, 0x0, {5};" in text
    assert sassas.assemble(text, "sm_80", filename="again.sass").data == cubin


def test_listing_runs_no_inline_python():
    """A listing is NVIDIA's text: `{...}` in it is never evaluated (nvdisasm's scoreboard set
    `{4,3,2,1}` is read as written), so a listing cannot run code."""
    from sassas.preprocess import preprocess
    listing = ('\t.section\t.text.k,"ax",@progbits\n.text.k:\n'
               '        /*0000*/      DEPBAR.LE SB0, 0x0, {4,3,2,1} ;  /* 0x0000000000007918 */\n'
               '                                                      /* 0x000fc00000000000 */\n'
               '        /*0010*/      MOV R0, {open("/nonexistent/x", "w")} ;  /* 0x0000000000007918 */\n'
               '                                                      /* 0x000fc00000000000 */\n')
    text = preprocess(listing, "l.sass").text
    assert "DEPBAR.LE SB0, 0x0, {4,3,2,1}" in text and '{open("/nonexistent/x", "w")}' in text
    with pytest.raises(SassError) as e:
        sassas.assemble(listing, "sm_75", filename="l.sass")
    assert str(e.value).startswith("l.sass:5:")


def test_a_shared_operand_binds_per_pass_and_pickles_its_value_only():
    """The parser shares one Operand among the instructions that write it; the front end
    keeps its binding on the operand, marked with its pass: a second program with other
    declarations binds the same operand objects afresh, and the binding is no part of the
    operand's value (equality, hash, pickle, copy)."""
    import copy
    import pickle
    body = "\n".join(["--:-:-:-:1  FFMA acc0, a1, b2, acc0;"] * 3 + ["--:-:-:-:1  EXIT;"])
    one = parse("<params>\np, 8\n</params>\n<regs>\n8-9 ~ acc<0-1>\n10-11 ~ a<0-1>\n12-14 ~ b<0-2>\n</regs>\n" + body,
                arch="sm_90")
    two = parse("<params>\np, 8\n</params>\n<regs>\n20-21 ~ acc<0-1>\n30-31 ~ a<0-1>\n40-42 ~ b<0-2>\n</regs>\n" + body,
                arch="sm_90")
    assert [text_of(i) for i in one.kernels[0].instructions[:3]] == ["FFMA R8, R11, R14, R8"] * 3
    assert [text_of(i) for i in two.kernels[0].instructions[:3]] == ["FFMA R20, R31, R42, R20"] * 3
    op = two.kernels[0].instructions[0].operands[0]
    for other in (pickle.loads(pickle.dumps(op)), copy.copy(op), copy.deepcopy(op)):
        assert other == op and hash(other) == hash(op) and repr(other) == repr(op)
    assert pickle.dumps(op) == pickle.dumps(copy.copy(op))


@pytest.mark.parametrize("line,message", [
    ("LDG.E R1, [R2.64+0x10];", "operand 2 of LDG R, [R+I] cannot take '.64' on sm_90; LDG R, [R+UR+I] takes it"),
    ("IADD3 R1, R2, R3, ~R4;", "operand 4 of IADD3 R, R, R, R cannot take '~' on sm_90"),
])
def test_operand_flag_errors_name_the_operand(line, message):
    with pytest.raises(SassError) as e:
        sassas.assemble(f"--:-:-:Y:4 {line}\n--:-:-:Y:5 EXIT;\n", arch="sm_90", filename="bad.sass")
    assert e.value.message == message and e.value.loc.line == 1
