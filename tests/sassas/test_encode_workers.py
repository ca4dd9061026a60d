"""A kernel encoded in several processes (`sassas asm --threads N`, sassas.workers) gives what
one process gives: the same cubin, the same warnings (the first 20 of a message in the
kernel, then a count) and the same errors, in the same order, with their locations; a worker
that fails has its range encoded by the asking process."""
from __future__ import annotations

import os
import random

import pytest

import sassas
from sassas import SassError, encode, workers
from sassas.cli import main


def _program(seed: int, n: int, bad_every: int = 0) -> str:
    rng = random.Random(seed)
    templates = [
        "--:-:-:Y:1      FFMA R{a}, R{b}.reuse, R{c}, R{d};",        # (a warning on each)
        "--:-:0:-:1      LDS.128 R{q}, [R{b}+0x{i:x}];",
        "01:-:-:Y:4      IADD3 R{a}, R{b}, 0x{i:x}, RZ;",
        "--:-:-:Y:0      FFMA R{a}, R{b}.reuse, R{c}, R{d};",         # (an error on sm_90: opex)
        "--:-:-:-:2      MOV R2, 32@lo(table);",
        "--:-:-:-:2      MOV R3, 32@hi(table);",
    ]
    body = []
    for k in range(n):
        f = dict(a=rng.randrange(8, 200), b=rng.randrange(8, 200), c=rng.randrange(8, 200),
                 d=rng.randrange(8, 200), q=rng.randrange(2, 50) * 4, i=rng.randrange(0, 4096) * 16)
        t = templates[3] if bad_every and k % bad_every == bad_every - 1 else rng.choice(templates[:3] + templates[4:])
        body.append(t.format(**f))
    return "\n".join([".global table 64 8", ".kernel k", "LOOP:", *body, "--:-:-:Y:5  @P0 BRA LOOP;",
                      "--:-:-:Y:5      EXIT;", ""])


def _outcome(text: str, threads: int):
    try:
        cubin = sassas.assemble(text, "sm_90", "t.sass", threads=threads)
    except SassError as e:
        return "error", str(e), [str(x) for x in getattr(e, "errors", [e])]
    return "cubin", cubin.data, [w.render() for w in cubin.warnings]


@pytest.fixture
def small_ranges(monkeypatch):
    # (ranges of a few instructions, so that a small kernel takes several processes)
    monkeypatch.setattr(encode, "MIN_INSTRUCTIONS_A_WORKER", 7)


@pytest.mark.parametrize("threads", [2, 3, 8])
def test_workers_give_the_cubin_and_warnings_of_one_process(small_ranges, threads):
    text = _program(1, 400)
    one = _outcome(text, 1)
    assert one[0] == "cubin" and sum("more instructions" in w for w in one[2]) == 1
    assert _outcome(text, threads) == one


@pytest.mark.parametrize("threads", [2, 5])
def test_workers_give_the_errors_of_one_process(small_ranges, threads):
    text = _program(2, 300, bad_every=37)
    one = _outcome(text, 1)
    assert one[0] == "error" and len(one[2]) == 8
    assert _outcome(text, threads) == one


def test_a_failed_worker_has_its_range_done_here(monkeypatch):
    asker = os.getpid()

    def work(start, stop):
        if os.getpid() != asker and start >= 40:
            raise RuntimeError("a worker that fails")
        return list(range(start, stop))
    assert [x for part in workers.map_ranges(100, 4, work) for x in part] == list(range(100))
    assert workers.ranges(10, 4) == [(0, 2), (2, 5), (5, 7), (7, 10)]
    assert workers.ranges(2, 4) == [(0, 1), (1, 2)]


def test_threads_option(tmp_path, capsys):
    src = tmp_path / "k.sass"
    src.write_text(_program(3, 30))
    outs = []
    for threads in ("1", "4", "0"):
        out = tmp_path / f"k{threads}.cubin"
        assert main(["asm", str(src), "--arch", "sm_90", "-o", str(out), "-t", threads]) == 0
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] == outs[2]
    for bad in ("-1", "two"):
        with pytest.raises(SystemExit) as info:
            main(["asm", str(src), "--arch", "sm_90", "--threads", bad])
        assert info.value.code == 2
        assert "expected a number of processes" in capsys.readouterr().err
