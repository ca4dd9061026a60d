"""Randomised programs in the TuringAs dialect, on every arch: assembled by sassas, decoded by
nvdisasm (the oracle), and the decoded instructions and control fields must be exactly what
was written. Fresh programs each run, from the run's seed (printed in the summary and on a
failure; SASSAS_FUZZ_SEED=N replays it)."""
import random

import pytest

import sassas
from sassas.ast import ControlCode
from sassas.parse import parse_instruction

from _fuzz import replay, rng_for

ARCHS = ["sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90"]

# Instruction templates written as nvdisasm prints them; {r} a register, {i} an immediate.
TEMPLATES = [
    "FFMA R{r}, R{r}, R{r}, R{r}",
    "FFMA R{r}, R{r}, {f}, R{r}",
    "FADD R{r}, R{r}, -R{r}",
    "FMUL R{r}, R{r}, R{r}",
    "IADD3 R{r}, R{r}, R{r}, RZ",
    "IADD3 R{r}, R{r}, 0x{i:x}, RZ",
    "LOP3.LUT R{r}, R{r}, 0x{i:x}, RZ, 0xc0, !PT",
    "LOP3.LUT R{r}, R{r}, R{r}, RZ, 0xfc, !PT",
    "SHF.L.U32 R{r}, R{r}, 0x{s:x}, RZ",
    "SHF.R.U32.HI R{r}, RZ, 0x{s:x}, R{r}",
    "ISETP.GE.AND P{p}, PT, R{r}, R{r}, PT",
    "ISETP.NE.AND P{p}, PT, R{r}, 0x{i:x}, PT",
    "FSETP.GT.AND P{p}, PT, R{r}, R{r}, PT",
    "SEL R{r}, R{r}, R{r}, P{p}",
    "MOV R{r}, R{r}",
    "MOV R{r}, 0x{i:x}",
    "IMAD R{r}, R{r}, R{r}, R{r}",
    "LEA R{r}, R{r}, R{r}, 0x{s:x}",
    "LDS R{r}, [R{r}+0x{o:x}]",
    "LDS.64 R{e}, [R{r}+0x{o:x}]",
    "LDS.128 R{q}, [R{r}+0x{o:x}]",
    "STS [R{r}+0x{o:x}], R{r}",
    "STS.128 [R{r}+0x{o:x}], R{q}",
    "S2R R{r}, SR_TID.X",
    "NOP",
]
STORE_OR_BRANCH = ("STS", "BRA", "EXIT", "NOP")
BRANCHES = ("BRA", "EXIT")


def _control(rng: random.Random, mnemonic: str) -> str:
    wait = rng.choice(["--", f"{rng.randrange(1, 64):02d}"])
    read = "-" if mnemonic.startswith(BRANCHES) else rng.choice(["-", str(rng.randrange(6))])
    write = "-" if mnemonic.startswith(STORE_OR_BRANCH) else rng.choice(["-", str(rng.randrange(6))])
    yield_ = rng.choice(["Y", "-"])
    stall = rng.randrange(1, 12) if yield_ == "-" else rng.randrange(0, 16)
    return f"{wait}:{read}:{write}:{yield_}:{stall:x}"


def program(rng: random.Random, n: int) -> str:
    lines = [".kernel random_program", ".shared 4096", "TOP:"]
    for k in range(n):
        t = rng.choice(TEMPLATES)
        text = t.format(r=rng.randrange(0, 200), i=rng.randrange(1, 1 << 20), f=rng.choice([0.5, -2.0, 1.25]),
                        s=rng.randrange(1, 31), p=rng.randrange(0, 7), o=rng.randrange(0, 256) * 16,
                        e=rng.randrange(0, 100) * 2, q=rng.randrange(0, 50) * 4)
        # Distinct registers for a fresh name each time .format is called with one value:
        text = _distinct_registers(rng, t, text)
        if rng.random() < 0.15:
            text = f"@{'!' if rng.random() < 0.5 else ''}P{rng.randrange(0, 7)} " + text
        if k % 17 == 16:
            lines.append(f"L{k}:")
        lines.append(f"{_control(rng, text.lstrip('@!P0123456789 '))}    {text};")
    lines.append(f"{_control(rng, 'BRA')}    @P0 BRA TOP;")
    lines.append("--:-:-:Y:5    EXIT;")
    return "\n".join(lines)


def _distinct_registers(rng, template: str, text: str) -> str:
    """Give each {r} of the template its own random register (str.format reuses one value)."""
    parts = template.split("{r}")
    if len(parts) <= 2:
        return text
    out = parts[0]
    for part in parts[1:]:
        out += str(rng.randrange(0, 200)) + part
    return out.format(i=rng.randrange(1, 1 << 20), f=rng.choice([0.5, -2.0, 1.25]), s=rng.randrange(1, 31),
                      p=rng.randrange(0, 7), o=rng.randrange(0, 256) * 16, e=rng.randrange(0, 100) * 2,
                      q=rng.randrange(0, 50) * 4)


def _canonical(inst):
    return (inst.opcode, inst.modifiers, [(o.kind, o.values, o.flags - {"reuse"}) for o in inst.operands],
            None if inst.predicate is None else (inst.predicate.values, inst.predicate.flags))


@pytest.mark.oracle
@pytest.mark.parametrize("arch", ARCHS)
def test_random_programs_decode_as_written(arch):
    oracle = pytest.importorskip("sassas.learn.oracle")
    why = oracle.missing_tools(arch, ("nvdisasm",))
    if why:
        pytest.skip(why)
    src = program(rng_for(f"random-programs-{arch}"), 300)
    cubin = sassas.assemble(src, arch, f"random-{arch}.sass")
    (_, code), = oracle.text_sections(cubin.data)
    decoded = oracle.disassemble_code(code, arch)
    wanted = cubin.program.kernels[0].instructions
    assert len(decoded) >= len(wanted), replay()
    for inst, dis in zip(wanted, decoded):
        if inst.opcode == "BRA":
            continue       # the target prints as an address
        got = parse_instruction(dis.text)
        assert _canonical(got) == _canonical(inst), f"{replay()}: {dis.text!r} for line {inst.loc.line}"
        assert ControlCode.from_word(dis.word) == inst.control, f"{replay()}: {dis.text}"
