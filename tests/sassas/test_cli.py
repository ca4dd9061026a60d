"""The command line's messages: what `check` reports on a clean file, `isa`'s legend and
suggestions, the validity rules' diagnostics, and outputs that appear whole or not at all."""
from __future__ import annotations

import os

import pytest

import sassas
from sassas import SassError
from sassas.cli import main

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAXPY = os.path.join(REPO, "examples", "saxpy.sass")


def test_check_says_what_it_checked(capsys):
    assert main(["check", SAXPY, "--arch", "sm_90"]) == 0
    out = capsys.readouterr().out
    assert out == f"{SAXPY}: 1 kernel, 19 instructions checked for stalls, scoreboard barriers, reuse: no hazards\n"


def test_version_names_the_archs(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out == f"sassas {sassas.__version__} (archs: {', '.join(sassas.arch.ARCHS)})\n"


def test_resources_as_ptxas_v_and_cuobjdump_res_usage(capsys, tmp_path):
    out = str(tmp_path / "saxpy.cubin")
    assert main(["asm", SAXPY, "-o", out, "--arch", "sm_90", "-v"]) == 0
    usage = ("saxpy: 10 registers, 0 bytes static shared memory, 28 bytes of parameters, 0 barriers, "
             "0 bytes stack frame, 19 instructions\n")
    assert capsys.readouterr().err.endswith(usage)
    assert main(["disasm", out, "--res-usage"]) == 0
    assert capsys.readouterr().out == usage


def test_dash_output_is_standard_output(capsysbinary, tmp_path, monkeypatch):
    """`-o -` as cuobjdump and the LLVM tools take it: the cubin's bytes (or disasm's text) on
    standard output, no file named '-'."""
    monkeypatch.chdir(tmp_path)
    assert main(["asm", SAXPY, "-o", "-", "--arch", "sm_90"]) == 0
    data = capsysbinary.readouterr().out
    assert data == sassas.assemble_file(SAXPY, arch="sm_90").data and not os.path.exists("-")
    (tmp_path / "k.cubin").write_bytes(data)
    assert main(["disasm", "k.cubin", "-o", "-"]) == 0
    assert capsysbinary.readouterr().out.startswith(b"# sassas disasm of k.cubin: sm_90, 1 kernel(s)\n")
    assert not os.path.exists("-")


def test_isa_legend_and_suggestion(capsys):
    assert main(["isa", "--arch", "sm_90", "LDG"]) == 0
    out = capsys.readouterr().out
    legend = [line for line in out.splitlines() if line.startswith("#")]
    assert any("desc[UR][R.64+I]" in line for line in legend) and any(".INVALIDn" in line for line in legend)
    assert not any(line.startswith("#   B ") for line in legend)      # only the pieces LDG's forms use
    assert main(["isa", "--arch", "sm_90", "FFMX"]) == 1
    assert capsys.readouterr().err == "sassas: error: no opcode 'FFMX' on sm_90; did you mean FFMA, FMNMX?\n"
    assert main(["isa", "--arch", "sm_90", "--no-legend", "FFMA"]) == 0
    assert not capsys.readouterr().out.startswith("#")


KERNEL = ".kernel k\n{line}\n--:-:-:Y:5  EXIT;\n"


@pytest.mark.parametrize("arch", ["sm_70", "sm_75", "sm_90"])
@pytest.mark.parametrize("line, message", [
    ("--:-:-:Y:0  FFMA R2, R1.reuse, R3, R0;", "with the yield flag 'Y' and stall 0"),
    ("--:-:-:Y:4  FFMA R2, R1, R3.reuse, R0.reuse;", "reuse slots 1 and 2 together"),
    ("--:-:-:-:0  FFMA R2, R1, R3, R0;", "stall 0 needs the yield flag 'Y'"),
    ("--:-:1:-:2  MEMBAR.SC.GPU;", "MEMBAR takes no write barrier"),
    ("--:-:-:Y:0  FFMA R2, R1.reuse.reuse, R3, R0;", "'.reuse' written twice"),
])
def test_words_nvdisasm_rejects_are_refused(arch, line, message):
    with pytest.raises(SassError) as e:
        sassas.assemble(KERNEL.format(line=line), arch, "k.sass")
    assert message in str(e.value) and "k.sass:2:" in str(e.value)


def test_reuse_slots_a_form_does_not_take_are_refused():
    # sm_90's nvdisasm on this word: "Opclass 'hadd2_F32__RC', undefined value 0x31 for table
    # 'TABLES_opex_1'"; the same line without .F32 (another opex table) is a word it reads.
    line = "--:-:-:-:1  HADD2.F32 R79, R25.reuse, c[0x0][0x160];"
    with pytest.raises(SassError) as e:
        sassas.assemble(KERNEL.format(line=line), "sm_90", "k.sass")
    assert "k.sass:2:1:" in str(e.value) and "takes no .reuse on reuse slot A" in str(e.value)
    assert e.value.message.endswith("[reuse_A]")
    sassas.assemble(KERNEL.format(line=line.replace(".reuse", "")), "sm_90", "k.sass")
    sassas.assemble(KERNEL.format(line=line.replace("HADD2.F32", "HADD2")), "sm_90", "k.sass")


def test_reuse_on_a_yielding_instruction_warns():
    cubin = sassas.assemble(KERNEL.format(line="--:-:-:Y:4  FFMA R2, R1.reuse, R3, R0;"), "sm_90", "k.sass")
    assert [w.loc.line for w in cubin.warnings] == [2]
    assert "prints no .reuse" in cubin.warnings[0].message
    with pytest.raises(SassError):
        sassas.assemble(KERNEL.format(line="--:-:-:Y:4  FFMA R2, R1.reuse, R3, R0;"), "sm_90", "k.sass",
                        warnings_as_errors=True)


def test_a_warning_at_many_instructions_is_given_at_its_first_ones_then_counted():
    """The first WARNINGS_PER_MESSAGE instructions with a warning, in order, then one line with
    how many more: every instruction counted, in two control codes and two shapes of it."""
    lines = [f"--:-:-:Y:{4 + k % 2}  FFMA R{2 + k % 3}, R1.reuse, R3, R{k % 7};" if k % 5 else
             "--:-:-:Y:4  FMUL R2, R1.reuse, R3;" for k in range(70)]
    cubin = sassas.assemble("\n".join(lines + ["--:-:-:Y:5  EXIT;"]), "sm_90", "k.sass")
    first = [w for w in cubin.warnings if w.loc is not None]
    assert [w.loc.line for w in first] == list(range(1, 21))
    assert [w.message for w in cubin.warnings if w.loc is None] == [
        "50 more instructions of kernel 'k' with: " + first[0].message.split(": ", 1)[1]]


def test_failed_assembly_leaves_an_existing_output_alone(tmp_path, capsys):
    src, out = tmp_path / "k.sass", tmp_path / "k.cubin"
    out.write_bytes(b"old")
    src.write_text(KERNEL.format(line="--:-:-:Y:0  FFMA R2, R1.reuse, R3, R0;"))
    assert main(["asm", str(src), "--arch", "sm_90", "-o", str(out)]) == 1
    assert out.read_bytes() == b"old" and sorted(os.listdir(tmp_path)) == ["k.cubin", "k.sass"]
    src.write_text(KERNEL.format(line="--:-:-:Y:4  FFMA R2, R1, R3, R0;"))
    assert main(["asm", str(src), "--arch", "sm_90", "-o", str(out)]) == 0
    assert out.read_bytes()[:4] == b"\x7fELF" and sorted(os.listdir(tmp_path)) == ["k.cubin", "k.sass"]
