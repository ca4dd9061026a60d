"""Register groups (pairs, quads): every operand that the semantics table gives more than one
register must start where its width needs, in the front end (file:line:col and the reason)
and in `sassas check` (listings). Per arch, every form of the ISA description with a group
operand: aligned, it assembles and nvdisasm (the oracle) prints it back; each group moved one
register up, the front end refuses it at that operand and the checker reports it."""
import io
import os
import subprocess
import sys
from dataclasses import replace

import pytest

import sassas
from sassas.arch import ARCHS
from sassas.isa.description import DATA_DIR as ISA_DATA
from sassas.ast import ControlCode
from sassas.errors import SassError
from sassas.check import run_check
from sassas.hazards import misaligned_groups
from sassas.isa import get_isa
from sassas.learn import oracle
from sassas.ast import format_operand
from sassas.parse import parse_instruction
from sassas.semantics import register_groups

ZERO = {"R": 255, "UR": 63}


def _with(inst, changes):
    """inst with value (operand, value index) -> number."""
    ops = list(inst.operands)
    for (o, v), number in changes.items():
        values = list(ops[o].values)
        values[v] = number
        ops[o] = replace(ops[o], values=tuple(values))
    return replace(inst, operands=tuple(ops))


def _numbers(inst):
    return [(o.kind, o.values) for o in inst.operands]


def _group_forms(arch):
    """(form example, aligned instruction, its groups) for every form with a group operand."""
    isa = get_isa(arch)
    seen = set()
    for e in isa.encodings:
        if (e.opcode, e.kinds) in seen or not e.example:
            continue
        try:
            inst = parse_instruction(e.example + " ;")
        except SassError:
            continue
        groups = register_groups(inst)
        if not groups:
            continue
        seen.add((e.opcode, e.kinds))
        # Aligned, clear of one another and of the zero registers: 8, 16, ... per file.
        count = {"R": 0, "UR": 0}
        changes = {}
        for g in groups:
            count[g.file] += 1
            changes[g.operand, g.value] = 8 * count[g.file]
        yield e.example, _with(inst, changes), groups


@pytest.mark.oracle
@pytest.mark.parametrize("arch", list(ARCHS))
def test_every_group_operand_is_checked(arch):
    if not oracle.have_tools(arch):
        pytest.skip(f"nvdisasm for {arch} not installed")
    if not ISA_DATA.joinpath(f"{arch}.toml").exists():
        pytest.skip(f"no ISA description for {arch} (its cubins are written; its instructions are not learned)")
    isa = get_isa(arch)
    forms = list(_group_forms(arch))
    assert len(forms) > 40, len(forms)
    aligned_words = {}
    unreadable = []
    for example, inst, groups in forms:
        try:
            word = isa.encode(replace(inst, control=ControlCode(stall=2, yield_=True)))
        except SassError:
            continue                     # a form whose example does not encode as parsed
        aligned_words[example] = (inst, word)
        text = isa.format(inst)
        # Aligned: the front end takes it (except the
        # bindless constant `cx[UR51][0xc1c8]`, which only the listing reader reads, and the
        # examples' constant banks and offsets out of the source's range).
        try:
            sassas.parse(f"--:-:-:Y:4 {text};\n--:-:-:Y:5 EXIT;\n", arch, "ok.sass")
        except SassError as e:
            assert "must start at" not in e.message, text
            unreadable.append((text, e.message))
            continue
        assert not misaligned_groups([inst]), text
        for g in groups:
            number = inst.operands[g.operand].values[g.value]
            if number + 1 >= ZERO[g.file]:
                continue
            bad = _with(inst, {(g.operand, g.value): number + 1})
            bad_text = isa.format(bad)
            with pytest.raises(SassError) as err:
                sassas.parse(f"--:-:-:Y:4 {bad_text};\n--:-:-:Y:5 EXIT;\n", arch, "bad.sass")
            message = err.value.message
            assert f"{g.file}{number + 1}:{g.file}{number + g.width}" in message, (bad_text, message)
            assert "must start at" in message
            loc = err.value.loc            # at the operand that holds the group
            assert loc.line == 1 and loc.text[loc.col - 1:].startswith(format_operand(bad.operands[g.operand])), \
                (bad_text, loc)
            assert any(f"{g.file}{number + 1}:" in h.message for h in misaligned_groups([bad])), bad_text
    assert len(aligned_words) > 40
    assert all("cx[" in t or "constant" in m for t, m in unreadable), unreadable[:10]
    # The aligned words are real encodings: nvdisasm prints each as the form it was made from.
    words = [w for _i, w in aligned_words.values()]
    shown = oracle.disassemble(words, arch)
    wrong = [(isa.format(i), shown[w]) for i, w in aligned_words.values()
             if shown[w] is None or _numbers(parse_instruction(shown[w].text + " ;")) != _numbers(i)]
    # (a few examples of odd forms decode as another form: encoder matters, not alignment)
    assert len(wrong) <= len(words) // 20, wrong[:10]


LISTING = """\
        /*0000*/                   CS2R R5, SR_CLOCKLO ;                      /* 0x0000000000057805 */
                                                                             /* 0x000fe20000015000 */
        /*0010*/                   CS2R R6, SR_CLOCKLO ;                      /* 0x0000000000067805 */
                                                                             /* 0x000fe20000015000 */
        /*0020*/                   EXIT ;                                    /* 0x000000000000794d */
                                                                             /* 0x000fea0003800000 */
"""


def test_check_reports_a_misaligned_group_in_a_listing(tmp_path):
    path = tmp_path / "k.sass"
    path.write_text(LISTING)
    out = io.StringIO()
    assert run_check([str(path)], "sm_80", out=out) == 1
    lines = [line for line in out.getvalue().splitlines() if ": error: " in line]
    assert lines == [f"{path}:1:41: error: CS2R writes the register pair R5:R6; a pair must start at an even register"]


TURINGAS = os.environ.get("SASSAS_TURINGAS", os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                                          "..", "shared", "oracles", "turingas"))


@pytest.mark.oracle
def test_check_reports_misaligned_groups_in_a_cubin(tmp_path):
    """TuringAs encodes misaligned groups without a word; `sassas check` on its cubin names them."""
    if not os.path.isdir(os.path.join(TURINGAS, "turingas")):
        pytest.skip(f"TuringAs not found at {TURINGAS} (set SASSAS_TURINGAS)")
    src, cubin = tmp_path / "k.sass", tmp_path / "k.cubin"
    src.write_text("<params>\nout, 8\n</params>\n--:-:-:Y:4  IMAD.WIDE R5, R2, 0x4, R6;\n"
                   "--:-:-:Y:4  LDG.E.64.SYS R3, [R6];\n--:-:-:Y:4  EXIT;\n")
    r = subprocess.run([sys.executable, "-m", "turingas.main", "-i", str(src), "-o", str(cubin), "-arch", "75"],
                       cwd=TURINGAS, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = io.StringIO()
    assert run_check([str(cubin)], "sm_75", out=out) == 1
    text = out.getvalue()
    assert "IMAD.WIDE writes the register pair R5:R6; a pair must start at an even register" in text
    assert "LDG.E.64.SYS writes the register pair R3:R4" in text
