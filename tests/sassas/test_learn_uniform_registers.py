"""The learner reads uniform registers as the arch's fields hold them (no oracle needed).

sassas numbers URZ 255 on every arch; sm_75..sm_90's 6-bit fields hold it as 63. The learner
relates nvdisasm's text to a word's bits through probe.to_samples (Sample.values), and the
ISA engine writes and reads the same fields: both go through sassas.isa.forms's numbering.
"""
from __future__ import annotations

import pytest

from sassas.isa import get_isa
from sassas.isa.forms import (instruction_values, sassas_values, uniform_field_zero,
                              uniform_value_slots)
from sassas.learn import oracle, probe
from sassas.learn.induce import alias_specials
from sassas.parse import parse_instruction


# (arch, URZ in its fields, its uniform registers)
NUMBERINGS = [("sm_90", 63, range(63)), ("sm_100", 255, range(255))]


@pytest.mark.parametrize("arch, zero, registers", NUMBERINGS)
def test_learner_reads_uniform_registers_as_fields_hold_them(arch, zero, registers):
    isa = get_isa(arch)
    names = [f"UR{n}" for n in registers] + ["URZ"]
    texts = [f"UMOV {d}, {s}" for d, s in zip(names, names[1:] + names[:1])]
    disassembled = {}
    for text in texts:
        word = isa.encode(parse_instruction(text))
        disassembled[word] = oracle.Disassembled(0, word, text)
    assert len(disassembled) == len(texts)
    samples = probe.to_samples(disassembled, arch)
    for word, s in samples.items():
        number = {name: (zero if name == "URZ" else int(name[2:])) for name in names}
        dst, src = (number[op.strip()] for op in s.text[len("UMOV "):].split(","))
        # What the engine wrote in the word (UMOV: bits 16..23 and 32..39) is what the learner reads.
        assert s.values[1:] == [dst, src] == [word >> 16 & 0xFF, word >> 32 & 0xFF], s.text
        enc, inst = isa.decode_match(word)
        assert isa._decode_values(enc, word, 0) == s.values
        # ... and back: sassas's numbers, the text nvdisasm printed.
        assert sassas_values(s.values, uniform_value_slots(s.key[1]), uniform_field_zero(arch)) \
            == instruction_values(s.inst) == instruction_values(inst)
        assert isa.format(inst) == s.text


def test_alias_probes_write_the_arch_s_urz():
    """The alias probes write URZ into fields, and alias rules compare fields, in the arch's numbers."""
    assert uniform_field_zero("sm_75") == uniform_field_zero("sm_90") == 63
    assert uniform_field_zero("sm_100") == uniform_field_zero("sm_120") == 255
    assert alias_specials("sm_90")["ureg"] == [63]
    assert alias_specials("sm_100")["ureg"] == [255]
    assert alias_specials("sm_70")["reg"] == alias_specials("sm_90")["reg"] == [255]
