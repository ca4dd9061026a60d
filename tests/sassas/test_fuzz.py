"""Mutated programs through the whole assembler and the command line: whatever the input, the
answer is a cubin or diagnostics with a line number, never a traceback."""
from __future__ import annotations

import random
import re

import pytest

import sassas
from sassas import SassError
from sassas.errors import SassErrors

from test_frontend import ORACLE_PROGRAM, turingas_program

_CODE_BLOCK = re.compile(r"<code>.*?</code>\n", re.S)
# Mutated inline Python could run anything (a mutated `range(2)` may become `range(2**63)`), so
# the mutants are assembled with inline code refused; the seeds keep one <code> block and
# {expr} to exercise that refusal, and the rest without.
SEEDS = [
    turingas_program(2),
    _CODE_BLOCK.sub("", turingas_program(2)).replace("{2 + 2}", "4"),
    _CODE_BLOCK.sub("", ORACLE_PROGRAM),
    open(__file__.replace("tests/sassas/test_fuzz.py", "examples/saxpy.sass")).read(),
    ".kernel a\n<regs>\nx, v<0-3>\n</regs>\n--:-:-:Y:4 LDS.128 v0, [x];\n--:-:-:Y:5 EXIT;\n"
    ".kernel b\n.shared 64\n--:-:-:Y:4 FFMA R0, R1.reuse, -R2, c[0x0][0x0];\nL:\n03:-:-:Y:5 @!P0 BRA L;\n",
]
_TOKEN = re.compile(r"\s+|[A-Za-z_0-9.]+|.", re.S)
JUNK = "<>{}[]()~:;,.@!|-+#/*\"'\\`$%^&=?\t\n0xRZPTUR255"
RUNS = 300


def mutate(text: str, rng: random.Random) -> str:
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


def check_diagnostics(err: SassError, text: str):
    errors = err.errors if isinstance(err, SassErrors) else [err]
    for e in errors:
        assert e.loc is not None and e.loc.line >= 1, f"diagnostic without a line: {e.message!r}\n{text}"
        assert "Traceback" not in str(e)


def test_mutated_programs_never_crash():
    rng = random.Random(20240611)
    outcomes = {"ok": 0, "error": 0}
    for n in range(RUNS):
        text = mutate(SEEDS[n % len(SEEDS)], rng)
        try:
            sassas.assemble(text, "sm_90", "fuzz.sass", allow_exec=False)
            outcomes["ok"] += 1
        except SassError as e:
            check_diagnostics(e, text)
            outcomes["error"] += 1
    assert outcomes["error"] > RUNS // 2


@pytest.mark.parametrize("n", range(8))
def test_mutated_programs_through_the_cli(n, tmp_path, capsys):
    from sassas.cli import main
    rng = random.Random(n)
    src = tmp_path / "fuzz.sass"
    src.write_text(mutate(SEEDS[n % len(SEEDS)], rng))
    out = tmp_path / "fuzz.cubin"
    code = main(["asm", str(src), "-o", str(out), "--arch", "sm_90", "--no-exec"])
    err = capsys.readouterr().err
    assert code in (0, 1)
    if code == 1:
        assert not out.exists()
        assert re.search(r"fuzz\.sass:\d+:\d+: error: ", err), err
