"""sm_90 ISA description: skeleton encodings, corpus round trip, property test per form."""
from __future__ import annotations

import random

import pytest

from sassas.ast import ControlCode, Operand
from sassas.errors import SassError
from sassas.isa import get_isa
from sassas.learn import oracle
from sassas.isa.forms import Field, instruction_values
from sassas.parse import parse_instruction

ARCH = "sm_90"

# (nvdisasm text, 128-bit word) as printed by nvdisasm 13.5 for code compiled by ptxas 12.9.
SKELETON = [
    ("LDC R1, c[0x0][0x28]", 0x000e220000000800_00000a00ff017b82),
    ("S2R R5, SR_TID.X", 0x000e620000002100_0000000000057919),
    ("ULDC UR4, c[0x0][0x21c]", 0x000fe40000000800_0000870000047ab9),
    ("ISETP.GE.U32.AND P0, PT, R5, UR4, PT", 0x002fda000bf06070_0000000405007c0c),
    ("@P0 EXIT", 0x000fea0003800000_000000000000094d),
    ("LDC.64 R2, c[0x0][0x210]", 0x000e620000000a00_00008400ff027b82),
    ("ULDC.64 UR4, c[0x0][0x208]", 0x000fe20000000a00_0000820000047ab9),
    ("IMAD.WIDE.U32 R2, R5, 0x4, R2", 0x002fcc00078e0002_0000000405027825),
    ("LDG.E R0, desc[UR4][R2.64]", 0x000e64000c1e1900_0000000402007981),
    ("FFMA R4, R0, R5, 0.0010000000474974513054", 0x002fc80000000005_3a83126f00047423),
    ("FMUL.RZ R4, R4, 0.15915493667125701904", 0x000fc8000040c000_3e22f98304047820),
    ("MUFU.SIN R5, R4", 0x000e640000000400_0000000400057308),
    ("FADD R5, R0, R5", 0x002fca0000000000_0000000500057221),
    ("STG.E desc[UR4][R2.64], R5", 0x000fe2000c101904_0000000502007986),
    ("EXIT", 0x000fea0003800000_000000000000794d),
    ("NOP", 0x000fc00000000000_0000000000007918),
]


@pytest.fixture(scope="module")
def isa():
    try:
        return get_isa(ARCH)
    except SassError as e:
        pytest.skip(f"no {ARCH} description: {e.message}")


@pytest.mark.parametrize("text,word", SKELETON, ids=[t for t, _ in SKELETON])
def test_skeleton_encode(isa, text, word):
    inst = parse_instruction(text)
    inst.control = ControlCode.from_word(word)
    inst.address = 0
    assert f"{isa.encode(inst):032x}" == f"{word:032x}"


@pytest.mark.parametrize("text,word", SKELETON, ids=[t for t, _ in SKELETON])
def test_skeleton_decode_format(isa, text, word):
    assert isa.format(isa.decode(word)) == text


def test_branch_is_pc_relative(isa):
    # BRA to itself at 0x100: the word holds -16 relative to the next instruction.
    word = 0x000fc0000383ffff_fffffffc00fc7947
    inst = isa.decode(word, address=0x100)
    assert inst.operands[0].values == (0x100,)
    inst.control = ControlCode.from_word(word)
    inst.address = 0x100
    assert isa.encode(inst) == word


def test_reuse_flags_go_to_control_bits(isa):
    inst = parse_instruction("FADD R5, R0.reuse, R5")
    plain = parse_instruction("FADD R5, R0, R5")
    for i in (inst, plain):
        i.control, i.address = ControlCode(), 0
    diff = isa.encode(inst) ^ isa.encode(plain)
    assert diff and diff >> 122 and not diff & ((1 << 122) - 1)


def test_errors(isa):
    with pytest.raises(SassError, match="unknown opcode 'FFMX'.*FFMA"):
        isa.encode(parse_instruction("FFMX R1, R2, R3, R4"))
    with pytest.raises(SassError, match="do not match any form"):
        isa.encode(parse_instruction("FFMA R1, R2"))
    with pytest.raises(SassError, match="modifier"):
        isa.encode(parse_instruction("FADD.BOGUS R1, R2, R3"))
    with pytest.raises(SassError, match="does not fit"):
        isa.encode(parse_instruction("LDS R1, [R2+0x7fffffff]"))


def _random_value(f, rng):
    if f.transform in ("u",):
        return rng.getrandbits(f.value_bits) & f.value_mask
    if f.transform == "s":
        v = rng.getrandbits(f.value_bits) & f.value_mask
        return v - (1 << f.value_bits) if v >> (f.value_bits - 1) & 1 else v
    return None        # floats, names and branch targets keep the example's value


def test_property_every_form(isa):
    """Random field values: encode -> decode -> encode gives the same word, and the decoded
    values are the ones put in."""
    rng = random.Random(90)
    failures = []
    for enc in isa.encodings:
        # Examples with reserved values (nvdisasm prints INVALIDn) come from the opcode sweep.
        if not enc.example or "INVALID" in enc.example:
            continue
        base = parse_instruction(enc.example)
        for _ in range(3):
            vals = instruction_values(base)
            for j, f in enumerate(enc.fields):
                if isinstance(f, Field):
                    v = _random_value(f, rng)
                    if v is not None and not (j == 0 and v == 7):
                        vals[j] = v
            inst = _with_values(base, vals)
            inst.address, inst.control = 0x1000, ControlCode()
            try:
                w = isa.encode(inst)
                back = isa.decode(w, 0x1000)
                back.control, back.address = ControlCode.from_word(w), 0x1000
                w2 = isa.encode(back)
            except SassError as e:
                failures.append(f"{enc.name}: {e.message}")
                continue
            if w2 != w:
                failures.append(f"{enc.name}: 0x{w:032x} -> {isa.format(back)} -> 0x{w2:032x}")
    rate = 1 - len(failures) / max(3 * len(isa.encodings), 1)
    print(f"property round trip: {rate:.1%} of {3 * len(isa.encodings)} cases; e.g. {failures[:5]}")
    assert rate > 0.9, failures[:20]


def _with_values(inst, vals):
    from copy import copy
    out = copy(inst)
    pos = 1
    ops = []
    for op in inst.operands:
        n = len(op.values)
        ops.append(Operand(op.kind, tuple(vals[pos:pos + n]), op.flags))
        pos += n
    out.operands = tuple(ops)
    if inst.predicate is not None or vals[0] != 7:
        flags = inst.predicate.flags if inst.predicate is not None else frozenset()
        kind = inst.predicate.kind if inst.predicate is not None else "P"
        out.predicate = Operand(kind, (vals[0],), flags)
    return out


@pytest.mark.corpus
@pytest.mark.skipif(oracle.missing_tools(ARCH) is not None, reason=str(oracle.missing_tools(ARCH)))
def test_corpus_round_trip(isa):
    """Every corpus word re-encodes from nvdisasm's text bit-exactly and prints back."""
    from sassas.learn import corpus, probe
    from sassas.learn.verify import check_sample
    words = corpus.build(ARCH)
    samples = [s for s in probe.to_samples(oracle.disassemble(words, ARCH, oracle.DisasmCache(ARCH)), ARCH).values() if s]
    bad = {s.text: why for s in samples if (why := check_sample(isa, s))}
    rate = 1 - len(bad) / len(samples)
    print(f"{ARCH}: {len(samples) - len(bad)}/{len(samples)} corpus samples bit-exact ({rate:.1%})")
    assert rate >= 0.90, list(bad.items())[:10]


def test_operand_names_of_the_instruction_set_need_no_declaration(isa):
    """`gsb0`, the warpgroup scoreboard of HGMMA/QGMMA (FlashAttention-3's code is full of
    them), is the instruction set's name, not a label or register name: source and listings
    take it as written, and a misspelt name is still an undefined name."""
    import sassas
    from sassas.disasm import disassemble
    src = "--:-:-:Y:1  HGMMA.64x8x16.F32 R24, gdesc[UR4], R24, gsb0;\n--:-:-:Y:1  EXIT;\n"
    text = disassemble(sassas.assemble(src, "sm_90", filename="g.sass").data)
    assert "HGMMA.64x8x16.F32 R24, gdesc[UR4], R24, gsb0;" in text
    with pytest.raises(SassError) as e:
        sassas.assemble(src.replace("gsb0", "gsb9"), "sm_90", filename="g.sass")
    assert "undefined name 'gsb9'" in str(e.value)
