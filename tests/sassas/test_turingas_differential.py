"""sassas against TuringAs itself, on TuringAs's own dialect.

Random TuringAs programs (every spelling TuringAs's grammar knows, per arch, fresh each run:
the seed is printed; SASSAS_TURINGAS_SEED=N replays it) are assembled by TuringAs and by
sassas; the code must be the same word for word, outside the divergences named below, and the
attributes must agree (parameters, shared memory, the parameter bank, enough registers).
Hand-written files in tests/sassas/data/turingas/ (what TuringAs users write) must match exactly.

TuringAs: $SASSAS_TURINGAS or ../shared/oracles/turingas (skipped, with the reason, without it).
"""
from __future__ import annotations

import os
import random
import re
from collections import Counter
from pathlib import Path

import pytest

import sassas
from sassas.dialect import _tables, spelling_key
from sassas.elf import read_cubin
from sassas.learn.turingas import ARCHS, all_spellings, instruction, run_turingas, turingas_dir
from sassas.parse import parse_instruction

pytestmark = pytest.mark.skipif(turingas_dir() is None, reason="TuringAs not found: set SASSAS_TURINGAS "
                                "or put it at ../shared/oracles/turingas (python -m turingas.main)")

SEED = int(os.environ.get("SASSAS_TURINGAS_SEED", random.SystemRandom().randrange(1 << 32)))
DATA = Path(__file__).parent / "data" / "turingas"
PROGRAM_LENGTH = 120


# ---- random programs in TuringAs's dialect -----------------------------------------------
_CONTROL_WAIT = ("--", "--", "--", "01", "02", "12")


def control(rng: random.Random) -> str:
    if rng.random() < 0.15:                 # the spelling's default latency
        # (with Y: some defaults (R2P's 12) are stalls that need it; sassas refuses them without)
        return f"{rng.choice(_CONTROL_WAIT)}:-:-:Y:-"
    if rng.random() < 0.3:
        return f"{rng.choice(_CONTROL_WAIT)}:-:-:Y:{rng.randrange(0, 16):x}"
    return f"{rng.choice(_CONTROL_WAIT)}:-:-:-:{rng.randrange(1, 12):x}"


def program(body: list[str], rng: random.Random) -> str:
    """A TuringAs file around `body` (instruction lines without control codes): parameters
    (8-byte ones first, so that packed and naturally aligned offsets agree), register names,
    shared memory, maybe a <consts> table, a loop label, a parameter read and EXIT."""
    n8, n4 = rng.randrange(0, 3), rng.randrange(1, 4)
    params = [f"ptr{i}, 8" for i in range(n8)] + [f"val{i}, 4" for i in range(n4)]
    smem = rng.randrange(0, 64) * 16
    lines = ["<params>", *params, "</params>", "<regs>", "60-63 : t0, t1, t2, t3", "</regs>"]
    if smem:
        lines += ["<SMEM>", str(smem), "</SMEM>"]
    if rng.random() < 0.5:
        lines += ["<consts>", "table, 16", "</consts>"]
        lines += [f"{control(rng)}  MOV t2, table[{rng.randrange(4)}];"]
    lines += [f"{control(rng)}  MOV t0, val0[0];", "TOP:"]
    lines += [f"{control(rng)}  {b}" for b in body]
    lines += [f"{control(rng)}  IADD3 t1, t1, 0x1, RZ;", "--:-:-:-:2  BRA TOP;", "--:-:-:-:2  EXIT;"]
    return "\n".join(lines) + "\n"


_CONTROL_LINE = re.compile(r"^[0-9a-fA-F-]{2}:[0-5-]:[0-5-]:[-yY]:[0-9a-fA-F-]\s+(.*)$")


def instruction_lines(text: str) -> list[str]:
    """The instructions of a TuringAs file, in order (each line with a control code)."""
    return [m.group(1) for m in map(_CONTROL_LINE.match, text.splitlines()) if m]


# Where sassas writes other bits than TuringAs, on purpose. Each class: what decides that an
# instruction is in it, and why (README: "TuringAs compatibility").
#  - misencoded: the table (sassas/data/turingas.toml) says TuringAs's word reads, by nvdisasm, as
#    another instruction than the one written (`wrong`); sassas writes the one written.
#  - extra bits: TuringAs sets bits besides the text's that nvdisasm reads as the same text;
#    sassas writes the text's. Named here by spelling, per arch.
EXTRA_BITS = {
    # TuringAs's ATOMS.ADD on sm_70/75 sets a bit of the operation's field that nvdisasm does
    # not print (its .EXCH value reads as .ADD: a `wrong` entry of the table)
    "ATOMS.ADD": "ATOMS operation bits",
}
# Spellings that TuringAs writes with an operand in another field or dropped (the text differs
# in an operand, not in the spelling): SHFL's lane and mask, P2R's register (RZ written),
# LEA.HI's fourth source (RZ written).
OPERAND_DROPPED = {"SHFL.IDX", "SHFL.UP", "SHFL.DOWN", "SHFL.BFLY", "P2R", "LEA.HI", "LEA.HI.X", "LEA.HI.X.SX32"}


def _key(line: str) -> str:
    inst = parse_instruction(line)
    return spelling_key(".".join((inst.opcode, *inst.modifiers)), inst.operands)


def _entry(arch: int, line: str):
    return _tables()[0].get(f"sm_{arch}", {}).get(_key(line))


def _words(code: bytes, n: int) -> list[int]:
    return [int.from_bytes(code[16 * i:16 * i + 16], "little") for i in range(n)]


def _constant_banks(data: bytes) -> dict[str, int]:
    """The sizes of the constant-bank sections (parameter bank, bank 3)."""
    return {s.name: s.size for s in read_cubin(data).sections if s.name.startswith(".nv.constant")}


def _same_constant_banks(mine: bytes, theirs: bytes) -> None:
    a, b = _constant_banks(mine), _constant_banks(theirs)
    if ".nv.constant3" not in a:
        b.pop(".nv.constant3", None)    # <consts>'s bank 3: compared where sassas writes it
    assert a == b


def _needed_registers(lines: list[str]) -> int:
    return 1 + max([int(r) for ln in lines for r in re.findall(r"\bR(\d+)", ln)] + [63])


def _classify(arch: int, line: str) -> str:
    entry = _entry(arch, line)
    if entry is not None and "wrong" in entry:
        return f"{line.split('.')[0].split()[0]} misencoded by TuringAs"
    mnemonic = line.split()[0].rstrip(";")
    if mnemonic in EXTRA_BITS:
        return EXTRA_BITS[mnemonic]
    if mnemonic in OPERAND_DROPPED:
        return "operand dropped or moved by TuringAs"
    return ""


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    print(f"\nTuringAs differential seed: {SEED} (replay: SASSAS_TURINGAS_SEED={SEED})")
    rng = random.Random(SEED)
    tmp = tmp_path_factory.mktemp("turingas")
    spellings = all_spellings()
    results = {}
    for arch in ARCHS:
        refused = Counter()
        body = []
        for op, m, t in rng.sample(spellings, len(spellings)):
            line = instruction(op, m, t, rng)
            entry = _entry(arch, line)
            if entry is not None and entry.get("refuse"):
                refused[m.split(".")[0]] += 1      # sassas refuses it with the reason (test_refusals)
                continue
            body.append(line)
        programs = [body[i:i + PROGRAM_LENGTH] for i in range(0, len(body), PROGRAM_LENGTH)]
        paths = []
        for i, b in enumerate(programs):
            p = tmp / f"p{arch}_{i}.sass"
            p.write_text(program(b, rng))
            paths.append(p)
        outs = run_turingas(paths, arch, tmp)
        results[arch] = (paths, outs, refused)
    return results


@pytest.mark.parametrize("arch", ARCHS)
def test_code_and_attributes_match_turingas(runs, arch):
    paths, outs, refused = runs[arch]
    compared = identical = 0
    classes = Counter()
    unexplained = []
    for path, out in zip(paths, outs):
        text = path.read_text()
        assert out.exists(), f"TuringAs refused {path.name} (seed {SEED})"
        theirs = read_cubin(out.read_bytes()).kernels[0]
        cubin = sassas.assemble(text, arch=f"sm_{arch}", filename=str(path), kernel_name="kern",
                                dialect="turingas")
        mine = read_cubin(bytes(cubin)).kernels[0]
        lines = instruction_lines(text)
        for line, a, b in zip(lines, _words(theirs.code, len(lines)), _words(mine.code, len(lines))):
            compared += 1
            if a == b:
                identical += 1
                continue
            why = _classify(arch, line)
            if why:
                classes[why] += 1
            else:
                unexplained.append(f"{line}  TuringAs {a:#034x}  sassas {b:#034x}")
        # attributes
        assert [(p.offset, p.size) for p in mine.params] == [(p.offset, p.size) for p in theirs.params]
        assert mine.shared_bytes == theirs.shared_bytes
        assert mine.param_base == theirs.param_base == 0x160
        _same_constant_banks(bytes(cubin), out.read_bytes())
        needed = _needed_registers(lines)
        assert mine.registers >= needed and theirs.registers >= needed
    print(f"\nsm_{arch}: {len(paths)} programs, {compared} instructions compared, {identical} bit-identical; "
          f"refused by sassas (table): {dict(refused)}; divergences: {dict(classes)}")
    assert not unexplained, f"seed {SEED}: {len(unexplained)} instructions differ:\n" + "\n".join(unexplained[:30])


@pytest.mark.parametrize("arch", ARCHS)
def test_refusals_say_why(arch):
    """A spelling TuringAs encodes as another instruction, and sassas cannot write as written,
    is refused with what TuringAs's word is."""
    rng = random.Random(SEED)
    refused = 0
    for op, m, t in all_spellings():
        line = instruction(op, m, t, rng)
        entry = _entry(arch, line)
        if entry is None or not entry.get("refuse"):
            continue
        with pytest.raises(sassas.SassError, match=re.escape(f"{m} is refused on sm_{arch}: TuringAs's word for it is")):
            sassas.assemble(f"--:-:-:-:2  {line}\n--:-:-:-:2  EXIT;\n", arch=f"sm_{arch}")
        refused += 1
    assert refused


def _file_archs(text: str) -> list[int]:
    m = re.search(r"#\s*archs?:\s*([\d, ]+)", text)
    return [int(a) for a in re.split(r"[,\s]+", m.group(1).strip())] if m else list(ARCHS)


HANDWRITTEN = sorted(DATA.glob("*.sass"))


@pytest.mark.parametrize("path", HANDWRITTEN, ids=[p.stem for p in HANDWRITTEN])
def test_handwritten_files_match_turingas(path, tmp_path):
    text = path.read_text()
    for arch in _file_archs(text):
        out = run_turingas([path], arch, tmp_path)[0]
        assert out.exists(), f"TuringAs refused {path.name} for {arch}"
        theirs = read_cubin(out.read_bytes()).kernels[0]
        cubin = sassas.assemble(text, arch=f"sm_{arch}", filename=str(path), kernel_name="kern")
        mine = read_cubin(bytes(cubin)).kernels[0]
        n = len(cubin.program.kernels[0].instructions)      # (<code> blocks included)
        assert _words(mine.code, n) == _words(theirs.code, n), f"{path.name} on sm_{arch}"
        assert [(p.offset, p.size) for p in mine.params] == [(p.offset, p.size) for p in theirs.params]
        assert mine.shared_bytes == theirs.shared_bytes
        _same_constant_banks(bytes(cubin), out.read_bytes())
        used = [op.values[0] for inst in cubin.program.kernels[0].instructions for op in inst.operands
                if op.kind == "R" and op.values[0] != 255]
        assert mine.registers >= max(used) + 1 and theirs.registers >= max(used) + 1



def test_the_table_is_what_its_generator_makes(tmp_path):
    """sassas/data/turingas.toml is the output of `python -m sassas.learn.turingas` (run with a
    fixed seed): with this run's seed the generator writes the same table, so what a spelling
    means does not hang on the registers and values drawn."""
    from sassas.learn import oracle
    from sassas.learn.turingas import build_table, write_table
    missing = [why for arch in ARCHS if (why := oracle.missing_tools(f"sm_{arch}", ("nvdisasm",)))]
    if missing:
        pytest.skip(f"the generator reads TuringAs's words with nvdisasm: {missing[0]}")
    out = tmp_path / "turingas.toml"
    write_table(build_table(random.Random(SEED), tmp_path), out)
    committed = Path(sassas.__file__).parent / "data" / "turingas.toml"
    assert out.read_text() == committed.read_text(), f"seed {SEED}: the generator's table differs"
