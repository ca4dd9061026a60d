"""A kernel assembled in ranges of its lines by several processes (sassas.ranges, `sassas asm
-t N`) gives what one process gives: the same cubin, the same warnings in the same order (the
encoder's first 20 of a message, then a count; the barrier-raise check's, also at a cut) and,
where the file cannot be done in ranges or has an error, exactly the one process's outcome."""
from __future__ import annotations

import os
import random
import subprocess

import pytest

import sassas
from sassas import SassError, ranges
from sassas.cli import main
from sassas.learn import oracle

SEED = int(os.environ.get("SASSAS_FUZZ_SEED", random.randrange(1 << 30)))

TEMPLATES = [
    "--:-:-:Y:1      FFMA R{a}, R{b}.reuse, R{c}, R{d};",          # (a yield-reuse warning on each)
    "--:-:0:-:1      LDS.128 R{q}, [R{b}+0x{i:x}];",
    "01:-:-:Y:4      IADD3 R{a}, R{b}, 0x{i:x}, RZ;",               # (waits on what LDS set: a warning)
    "--:-:-:Y:4  @P0 BRA {label};",
    "--:-:-:-:2      MOV R2, 32@lo(table);",
    "--:-:-:Y:4      ISETP.GE.AND P0, PT, R{a}, c[0x0][0x210], PT;",
    "--:1:-:-:1      STS.64 [R{b}+0x{i:x}], R{e};",
]


def _program(rng: random.Random, n: int, extra: dict | None = None) -> str:
    """A kernel of n random instructions with labels among them (a branch may name any label,
    before or after it), `extra`: line index -> a line put there."""
    labels = [f"L{k}" for k in range(max(1, n // 40))]
    at = {rng.randrange(n): name for name in labels}
    body = []
    for k in range(n):
        if k in at:
            body.append(f"{at[k]}:")
        if extra and k in extra:
            body.append(extra[k])
        f = dict(a=rng.randrange(8, 200), b=rng.randrange(8, 200), c=rng.randrange(8, 200),
                 d=rng.randrange(8, 200), e=rng.randrange(4, 100) * 2, q=rng.randrange(2, 50) * 4,
                 i=rng.randrange(0, 4096) * 16, label=rng.choice(list(at.values())))
        body.append(rng.choice(TEMPLATES).format(**f))
    return "\n".join([".global table 64 8", ".kernel k", "<params>", "p, 8", "</params>", *body,
                      "--:-:-:Y:5      EXIT;", ""])


def _outcome(text: str, threads: int, **kw):
    try:
        cubin = sassas.assemble(text, "sm_90", "t.sass", threads=threads, **kw)
    except SassError as e:
        return "error", str(e), [str(x) for x in getattr(e, "errors", [e])]
    return "cubin", cubin.data, [w.render() for w in cubin.warnings], cubin.program is None


@pytest.fixture
def small_ranges(monkeypatch):
    # (ranges of a few lines, so that a small kernel takes several processes)
    monkeypatch.setattr(ranges, "MIN_LINES_A_RANGE", 25)


def _same(text: str, threads: int, in_ranges: bool = True, **kw):
    one = _outcome(text, 1, **kw)
    several = _outcome(text, threads, **kw)
    assert several[:3] == one[:3]
    if one[0] == "cubin":
        assert one[3] is False and several[3] is in_ranges
    return one


@pytest.mark.parametrize("threads", [2, 3, 7])
def test_ranges_give_the_cubin_and_warnings_of_one_process(small_ranges, threads):
    rng = random.Random(SEED + threads)
    one = _same(_program(rng, 400), threads)
    assert one[0] == "cubin" and sum("more instructions" in w for w in one[2]) == 1, f"seed {SEED}"


def test_a_barrier_raise_warning_at_a_cut(small_ranges, monkeypatch):
    body = ["--:-:-:Y:4      IADD3 R8, R9, 0x10, RZ;"] * 200
    text = "\n".join([".kernel k", *body, "--:-:0:-:1      LDS.128 R12, [R8+0x40];",
                      "01:-:-:Y:4      IADD3 R9, R12, 0x10, RZ;", *body, "--:-:-:Y:5      EXIT;", ""])
    lines = text.split("\n")
    cut = lines.index("01:-:-:Y:4      IADD3 R9, R12, 0x10, RZ;")
    split_line = ranges.split_line
    monkeypatch.setattr(ranges, "split_line",
                        lambda at, near: cut if near == len(lines) // 2 else split_line(at, near))
    one = _same(text, 2)
    assert any("waits on barrier 0 one cycle after" in w for w in one[2])


def test_barrier_raise_warnings_are_counted_past_the_first_ones(small_ranges):
    """A file with the hazard at every few instructions: the first WARNINGS_PER_MESSAGE, then
    one line with how many more, the same from ranges as from one process."""
    hazard = ["--:-:0:-:1      LDS.128 R12, [R8+0x40];", "01:-:-:Y:4      IADD3 R9, R12, 0x10, RZ;",
              "--:-:-:Y:4      IADD3 R8, R9, 0x10, RZ;"]
    text = "\n".join([".kernel k", *hazard * 150, "--:-:-:Y:5      EXIT;", ""])
    one = _same(text, 3)
    raised = [w for w in one[2] if "waits on barrier 0 one cycle after" in w]
    assert len(raised) == sassas.errors.WARNINGS_PER_MESSAGE
    assert raised[0].startswith("t.sass:3:1: warning:") and raised[-1].startswith(f"t.sass:{3 + 3 * 19}:1:")
    assert one[2][-1] == "warning: 130 more times in kernel 'k', an instruction waits on a barrier one cycle after " \
                         "the instruction before it set it"


def test_turingas_names_and_a_listing_in_ranges(small_ranges, tmp_path):
    regs = "\n".join(["<regs>", "0-3 : base, base_hi, tid, addr", "8-71 ~ acc<0-63>", "</regs>"])
    body = [f"--:-:-:Y:1      FFMA acc{k % 64}, acc{(k * 7) % 64}, acc{(k * 5) % 64}, acc{k % 64};"
            f"{'' if k % 9 else chr(10) + '--:-:-:Y:4      ISETP.GE.AND P0, PT, tid, n[0], PT;'}"
            for k in range(300)]
    text = "\n".join([".kernel k", "<params>", "n, 8", "</params>", regs, *body, "--:-:-:Y:5      EXIT;", ""])
    _same(text, 2)
    try:
        cuobjdump = str(oracle.find_tool("cuobjdump", "sm_90"))
    except oracle.OracleMissing as e:
        pytest.skip(f"cuobjdump not installed (test extra): {e}")
    path = tmp_path / "k.cubin"
    sassas.assemble(text, "sm_90", "t.sass").save(path)
    listing = subprocess.run([cuobjdump, "-sass", str(path)], capture_output=True, text=True, check=True).stdout
    _same(listing, 3)


@pytest.mark.parametrize("case", ["error late", "undefined label", "directive late", "two kernels",
                                  "no EXIT", "auto registers", "raw early", "label twice",
                                  "resolve error early, front-end error late"])
def test_what_ranges_leave_to_one_process(small_ranges, case):
    rng = random.Random(SEED)
    n = 300
    if case == "error late":
        text = _program(rng, n, {250: "--:-:-:Y:0      FFMA R8, R9.reuse, R10, R11;"})
    elif case == "undefined label":
        text = _program(rng, n, {260: "--:-:-:Y:4      BRA NOWHERE;"})
    elif case == "directive late":
        text = _program(rng, n, {200: ".shared 4096"})
    elif case == "two kernels":
        text = _program(rng, n, {150: "--:-:-:Y:5      EXIT;\n.kernel k2"})
    elif case == "no EXIT":
        text = _program(rng, n).replace("--:-:-:Y:5      EXIT;", "--:-:-:Y:5      NOP;")
    elif case == "auto registers":
        text = _program(rng, n, {5: "--:-:-:Y:4      IADD3 x, RZ, 0x1, RZ;"}).replace(
            "</params>", "</params>\n<regs>\nx\n</regs>")
    elif case == "raw early":
        text = _program(rng, n, {k: f".raw 0xffff 0x{k:x}" for k in range(0, 40, 3)})
    elif case == "label twice":
        text = _program(rng, n, {10: "TWICE:", 250: "TWICE:"})
    else:
        # (one process reports the front end's errors of the whole file first)
        text = _program(rng, n, {10: "--:-:-:Y:4      ISETP.GE.AND P0, PT, R8, p[5], PT;",
                                 250: "--:-:0:-:1      LDS.128 R13, [R8];"})
    outcome = _outcome(text, 1)
    in_ranges = case in ("no EXIT", "raw early") and outcome[0] == "cubin"
    _same(text, 2, in_ranges=in_ranges)
    if case == "no EXIT":
        assert any("has no EXIT" in w for w in outcome[2])


def test_yield_reuse_and_werror_keep_to_one_process(small_ranges):
    text = _program(random.Random(SEED), 200)
    _same(text, 2, in_ranges=False, yield_strategy="every:3")
    _same(text, 2, in_ranges=False, auto_reuse=True)
    _same(text, 2, in_ranges=False, warnings_as_errors=True)


def test_threads_option_is_the_cubin_of_one_process(tmp_path, small_ranges, capsys):
    src = tmp_path / "k.sass"
    src.write_text(_program(random.Random(SEED), 300))
    outputs = []
    for threads in ("1", "2", "0"):
        out = tmp_path / f"k{threads}.cubin"
        assert main(["asm", str(src), "--arch", "sm_90", "-o", str(out), "-t", threads]) == 0
        outputs.append((out.read_bytes(), capsys.readouterr().err))
    assert outputs[1] == outputs[0] and outputs[2] == outputs[0]
    ranges.wait_for_children()


@pytest.mark.parametrize("example", ["smem_loop.sass", "saxpy.sass"])
def test_every_cut_of_an_example(monkeypatch, example):
    """Cut anywhere (between any two lines), an example gives one process's outcome, in
    ranges or not."""
    path = os.path.join(os.path.dirname(__file__), "..", "..", "examples", example)
    with open(path) as f:
        text = f.read()
    one = _outcome(text, 1)
    monkeypatch.setattr(ranges, "MIN_LINES_A_RANGE", 1)
    split_line = ranges.split_line
    in_ranges = 0
    for cut in range(1, len(text.split("\n"))):
        monkeypatch.setattr(ranges, "split_line",
                            lambda lines, near, cut=cut: cut if near == len(lines.lines) // 2 else split_line(lines, near))
        several = _outcome(text, 2)
        assert several[:3] == one[:3], cut
        in_ranges += several[3]
    assert in_ranges > 5
