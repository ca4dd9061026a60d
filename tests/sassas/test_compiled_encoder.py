"""The encoder compiled for a shape (sassas.isa.compiled_encoder) gives the word the
general path gives, or leaves the instruction to it: over every encoding's example on each
arch, with its integer values moved to random ones (in range, out of range, misaligned,
negative) and random control codes, for 500 encodings an arch; and the word a shape's bits
found once (Isa._shape_word) give is the one each instruction's own try gives, also for the
encodings with printing aliases. Fresh seed each run."""
from __future__ import annotations

from dataclasses import replace

import pytest

from sassas.arch import ARCHS
from sassas.ast import ControlCode
from sassas.errors import SassError
from sassas.isa import get_isa
from sassas.parse import parse_instruction

from _fuzz import replay, rng_for


def _encode(isa, inst, compiled: bool, shape_words: bool = True):
    """The word (or the error's text), with or without the shape's compiled encoder (and
    without it, with or without its shape words)."""
    try:
        isa.encode(inst)
    except SassError as e:
        return "error", str(e)
    known = isa._shape_cache[inst.shape]
    if not compiled:
        isa._shape_cache[inst.shape] = (*known[:2], known[2] if shape_words else [None] * len(known[2]), None)
    try:
        return "word", isa.encode(inst)
    except SassError as e:
        return "error", str(e)
    finally:
        isa._shape_cache[inst.shape] = known


def _instructions(rng, encodings):
    """(encoding, instruction) pairs: each encoding's example, twice, with random values and
    control codes."""
    for enc in encodings:
        try:
            base = parse_instruction(enc.example)
        except SassError:
            continue
        for _ in range(2):
            ops = []
            for op in base.operands:
                values = tuple(rng.choice([v, v + 4 * rng.randrange(-64, 64), rng.randrange(-1 << 20, 1 << 20),
                                           v + 1, -v, 1 << rng.randrange(40)])
                               if type(v) is int and op.kind not in ("R", "UR", "P", "UP") else v
                               for v in op.values)
                ops.append(op.with_values(*values) if values != op.values else op)
            control = ControlCode(stall=rng.randrange(1, 12), yield_=rng.random() < 0.5,
                                  write_barrier=rng.choice([0, 7]), read_barrier=rng.choice([1, 7]),
                                  wait_mask=rng.randrange(64))
            yield enc, replace(base, operands=tuple(ops), control=control)


@pytest.mark.parametrize("arch", [a for a in ARCHS if a != "sm_70"] + ["sm_70"])
def test_compiled_encoder_gives_the_general_word(arch):
    rng = rng_for(f"compiled-encoder-{arch}")
    isa = get_isa(arch)
    tried = compiled = 0
    encodings = [e for e in isa.encodings if e.example]
    for enc, inst in _instructions(rng, rng.sample(encodings, min(len(encodings), 500))):
        general = _encode(isa, inst, False)
        # (False: a shape only the register-counting encoders have met, its own encoder not
        # compiled yet; it stays so where encode refuses the instruction before compiling it,
        # as a uniform register past the arch's own)
        fast = isa._shape_cache.get(inst.shape, (None,) * 4)[3]
        compiled += callable(fast) and fast(inst) is not None
        assert _encode(isa, inst, True) == general, (enc.example, inst, replay())
        tried += 1
    assert tried > 300 and compiled > 100, (tried, compiled)


@pytest.mark.parametrize("arch", ["sm_75", "sm_80", "sm_90", "sm_100"])
def test_shape_words_give_each_instructions_word(arch):
    rng = rng_for(f"shape-words-{arch}")
    isa = get_isa(arch)
    tried = aliased = 0
    encodings = [e for e in isa.encodings if e.example and e.aliases]
    for enc, inst in _instructions(rng, rng.sample(encodings, min(len(encodings), 300))):
        own = _encode(isa, inst, False, shape_words=False)
        encs, _tokens, words, _fast = isa._shape_cache.get(inst.shape, ((), None, (), None))
        aliased += any(w is not None and e.aliases for e, w in zip(encs, words))
        assert _encode(isa, inst, False) == own, (enc.example, inst, replay())
        tried += 1
    assert tried >= 20 and aliased >= 10, (tried, aliased)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90", "sm_120"])
def test_the_counting_encoder_gives_the_word_and_the_highest_register(arch):
    """Isa.shape_encoder with the shape's R register slots (what `sassas asm` uses where it
    counts a kernel's registers): the general word, and highest_register's register, on
    random R registers (quads and pairs up to RZ among them)."""
    from sassas.semantics import highest_register, register_slots
    rng = rng_for(f"counting-encoder-{arch}")
    isa = get_isa(arch)
    counted = 0
    encodings = [e for e in isa.encodings if e.example]
    for _enc, base in _instructions(rng, rng.sample(encodings, min(len(encodings), 600))):
        ops = tuple(op.with_values(rng.choice([rng.randrange(256), rng.choice([250, 252, 253, 254, 255])]),
                                   *op.values[1:])
                    if op.kind == "R" and type(op.values[0]) is int else op for op in base.operands)
        inst = replace(base, operands=ops)
        try:
            slots = register_slots(inst)
            expected = highest_register(inst)
        except Exception:
            continue
        if not slots:
            continue
        counting = isa.shape_encoder(inst, slots)
        if counting is None:
            continue
        top = [-1]
        word = counting(inst, top)
        if word is None:
            continue
        assert word == isa.encode(inst), (inst, replay())
        assert top[0] == expected, (inst, top[0], expected, replay())
        counted += 1
    assert counted > 100, counted


def test_a_shape_met_only_by_the_counting_encoder_is_compiled_when_encode_asks():
    """shape_encoder(inst, registers) leaves the shape's own encoder uncompiled (False in the
    cache); encode compiles it when it first needs it, and refusing an instruction of that
    shape (a uniform register past sm_90's own) leaves the entry uncompiled, not broken."""
    from sassas import semantics
    isa = get_isa("sm_90")
    inst = parse_instruction("UIADD3 UR10, UP0, UR6, 0x1000, URZ ;")
    inst = replace(inst, operands=(inst.operands[0], inst.operands[1], inst.operands[2].with_values(17),
                                   *inst.operands[3:]))
    isa._shape_cache.pop(inst.shape, None)
    assert isa.shape_encoder(inst, semantics.register_slots(inst) or ((0, 0, 1),)) is not None
    assert isa._shape_cache[inst.shape][3] is False
    bad = replace(inst, operands=(inst.operands[0], inst.operands[1], inst.operands[2].with_values(70),
                                  *inst.operands[3:]))
    with pytest.raises(SassError):
        isa.encode(bad)
    assert isa._shape_cache[inst.shape][3] is False
    word = isa.encode(inst)
    fast = isa._shape_cache[isa._with_field_uniform_registers(inst).shape][3]
    assert callable(fast) and fast(isa._with_field_uniform_registers(inst)) in (None, word)
