"""Print rules the learner induces, pinned with nvdisasm 13.5's text for words built by hand
(sm_90): value aliases of IMAD (.MOV/.IADD/.SHL, but not .SHL for 0x10000 nor with .WIDE),
negative zero, special-register names above 127 and SRZ, .reuse on every operand that has a
reuse slot, uniform guard predicates, the modifier order of LDG. Each word must decode to
the text and the text (control bits from the word) encode to the word."""
from __future__ import annotations

import pytest

from sassas.ast import ControlCode
from sassas.isa import get_isa
from sassas.learn.compare import normal_text
from sassas.isa.description import load_description, write_description
from sassas.isa.forms import Alias
from sassas.parse import parse_instruction

SM90 = [
    (0x000fe400078e00ff000000010d537824, "IMAD.MOV.U32 R83, R13, 0x1, RZ"),
    (0x000fe400078e0004000000010d537824, "IMAD.IADD.U32 R83, R13, 0x1, R4"),
    (0x000fe400078e00ff000000020d537824, "IMAD.SHL.U32 R83, R13, 0x2, RZ"),
    (0x000fe400078e00ff000200000d537824, "IMAD.SHL.U32 R83, R13, 0x20000, RZ"),
    (0x000fe400078e00ff000100000d537824, "IMAD.U32 R83, R13, 0x10000, RZ"),
    (0x000fe400078e0004000000020d537824, "IMAD.U32 R83, R13, 0x2, R4"),
    (0x000fe400078e000400000003ff537824, "IMAD.MOV.U32 R83, RZ, 0x3, R4"),
    (0x000fe400078e00ff000000020d537825, "IMAD.WIDE.U32 R83, R13, 0x2, RZ"),
    (0x000fe400078e00ff000000010d537825, "IMAD.WIDE.U32 R83, R13, 0x1, RZ"),
    (0x000fc800078102008000000014147809, "FMNMX.FTZ R20, |R20|, -0.0 , !PT"),
    (0x000ea200000080000000000000057919, "S2R R5, SR_SNAP_PM6"),
    (0x000ea200000000000000000000057919, "S2R R5, SR_LANEID"),
    (0x000fc4000001ff000000000000147805, "CS2R R20, SRZ"),
    (0x080fe40003f46270000000100a00720c, "ISETP.GE.AND P2, PT, R10, R16.reuse, PT"),
    (0x000fc6000fffe03f0000003f04078290, "@!UP0 UIADD3 UR7, UR4, URZ, URZ"),
    (0x000f62000c1ebd00000000062610b981, "@!P3 LDG.E.128.STRONG.SM R16, desc[UR6][R38.64]"),
]


def test_alias_conditions_survive_the_description_file(tmp_path):
    """Conditions `!=N`, `needs` and `unless` are written and read back unchanged."""
    isa = get_isa("sm_90")
    path = tmp_path / "sm_90.toml"
    write_description(isa, path)
    again = load_description(path)
    mine = [a for e in isa.encodings for a in e.aliases]
    theirs = [a for e in again.encodings for a in e.aliases]
    assert mine == theirs
    assert any(isinstance(a, Alias) and a.unless and any(c.startswith("!=") for _j, c in a.when) for a in mine)


# sm_70 (nvdisasm 12.8): F2F prints its destination type first (two encodings print the
# same two type modifiers in opposite orders); with a constant in the B slot, the one
# register left after it takes B's reuse bit (FFMA, FSEL, FSETP: what ptxas writes) or C's
# (LEA.HI.X's third source), and nvdisasm prints .reuse on it for either bit.
SM70 = [
    (0x000e2200002008000000001400148304, "@!P0 F2F.F16.F32 R20, R20"),
    (0x000e2200002018000000001400148310, "@!P0 F2F.F64.F32 R20, R20"),
    (0x000e2200003010000000001400148310, "@!P0 F2F.F32.F64 R20, R20"),
    (0x080fe4000600000000000004221f7208, "FSEL R31, R34, R4.reuse, !P4"),
    (0x100fe400000f0c16000059000303aa11, "@!P2 LEA.HI.X R3, R3, c[0x0][0x164], R22.reuse, 0x1, P0"),
    (0x081fe40000010026000068002b1f7623, "FFMA.FTZ R31, R43, R38.reuse, c[0x0][0x1a0]"),
    (0x080fe20003f7e000000000150e00720b, "FSETP.GEU.FTZ.AND P3, PT, R14, R21.reuse, PT"),
]


def test_sm70_reuse_bit_printed_but_not_encoded():
    """nvdisasm prints R22.reuse for LEA.HI.X's B reuse bit too; the encoder writes C's."""
    isa = get_isa("sm_70")
    b_bit = 0x080fe400000f0c16000059000303aa11
    assert isa.format(isa.decode(b_bit)) == "@!P2 LEA.HI.X R3, R3, c[0x0][0x164], R22.reuse, 0x1, P0"


# sm_80: one group of IDP's bits selects both source types; nvdisasm prints S8.U8 for one
# value and U8.S8 for another (the same two modifiers, in the order of the value).
SM80 = [
    (0x000fe200000002080000000706057226, "IDP.4A.S8.U8 R5, R6, R7, R8"),
    (0x000fe200000004080000000706057226, "IDP.4A.U8.S8 R5, R6, R7, R8"),
    (0x000fe200000006080000000706057226, "IDP.4A.S8.S8 R5, R6, R7, R8"),
    (0x000fe200000012080000000706057226, "IDP.2A.LO.S16.U8 R5, R6, R7, R8"),
    (0x000fe200002018000000000200047310, "F2F.F64.F32 R4, R2"),
    (0x000fe200003010000000000200047310, "F2F.F32.F64 R4, R2"),
]
# sm_86: IMMA's types, likewise (nvdisasm 13.x text).
SM86 = [
    (0x000fe20000401c100000000c08047237, "IMMA.16832.S8.U8 R4, R8.ROW, R12.COL, R16"),
    (0x000fe20000404c100000000c08047237, "IMMA.16832.U8.S8 R4, R8.ROW, R12.COL, R16"),
]

# Learned since the issue-3 gaps (see README "Rules the learner follows"): a modifier that two
# bits decide together (ATOMS.CAST.SPIN, HFMA2.BF16_V2), bits ptxas sets with one modifier
# only (HFMA2.RELU's 87..89 on sm_90, not on plain HFMA2), and idioms of compiled CUDA C
# (IMAD.HI with an immediate, RED through a uniform address, a store to shared address 0).
LEARNED = [
    ("sm_90", 0x000e240001800005000008040b05738d, "ATOMS.CAST.SPIN R5, [R11+0x8], R4, R5"),
    ("sm_80", 0x000e24000180c005000008040b05738d, "ATOMS.CAST.SPIN R5, [R11.X16+0x8], R4, R5"),
    ("sm_90", 0x040fe400000408062000000706077231, "HFMA2 R7, R6.reuse.H0_H0, R7.H0_H0, R6.H0_H0"),
    ("sm_86", 0x004fca00000000060000000700077231, "HFMA2 R7, R0, R7, R6"),
    ("sm_75", 0x000fe200078e00ff9e3779b909077827, "IMAD.HI.U32 R7, R9, -0x61c88647, RZ"),
    ("sm_80", 0x000fc600078e02029249249303087827, "IMAD.HI R8, R3, -0x6db6db6d, R2"),
    ("sm_75", 0x000fe2000c11410600000000ff00798e, "RED.E.ADD.STRONG.GPU [UR6], R0"),
    ("sm_86", 0x0003e4000000040000000000ff008388, "@!P0 STS.U16 [RZ], R0"),
]

# A set of scoreboards DEPBAR also waits on (bits 32..37, bit n for SBn), as ptxas writes it
# before a loop (torchvision, nvdisasm 13.x); and sm_70's zero register that nvdisasm shows
# in brackets only at offset 0 (`c[0x0][RZ]` but `c[0x0][0x1a8]`; bitsandbytes, nvdisasm 12.8).
SETS_AND_ZERO_REGISTERS = [
    ("sm_75", 0x000fce00000000000000801e0000791a, "DEPBAR.LE SB0, 0x0, {4,3,2,1}"),
    ("sm_75", 0x000fce0000000000000080140000791a, "DEPBAR.LE SB0, 0x0, {4,2}"),
    ("sm_80", 0x000fce0000000000000080160000791a, "DEPBAR.LE SB0, 0x0, {4,2,1}"),
    ("sm_86", 0x000fce00000000000000801e0000791a, "DEPBAR.LE SB0, 0x0, {4,3,2,1}"),
    ("sm_70", 0x000fe2000000080000000000fffffb82, "@!PT LDC RZ, c[0x0][RZ]"),
    ("sm_70", 0x000f22000000020000006a00ff117b82, "LDC.S8 R17, c[0x0][0x1a8]"),
]

# Held-out real code (faiss 1.14 sm_80, xformers 0.0.30 sm_90a, FlashAttention-3 style):
# a predicate field learned too narrow (UP1 did not fit), the sm_90a features of the corpus's
# `.target sm_90a` family, HMMA.SP's reuse slot 3 that nvdisasm prints on no operand (taken
# from the control code), and `+QNAN` read from text as CUDA's NaN constant 0x7fffffff.
HELD_OUT = [
    ("sm_80", 0x000fe2000f82103f0000000a060a7291, "ULEA UR10, UP1, UR6, UR10, 0x2"),
    ("sm_90", 0x000fe2000f82103f000000100a097291, "ULEA UR9, UP1, UR10, UR16, 0x2"),
    ("sm_90", 0x002ea40008000600000000e8000079c8, "USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xe8"),
    ("sm_90", 0x000ea4000800014800000010ff0075a7, "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR8], R16"),
    ("sm_90", 0x000fe4000001000000008000000079c5, "WARPGROUP.DEPBAR.LE gsb0, 0x0"),
    ("sm_90", 0x000fe20008000a1807e09900081879f3,
     "QGMMA.SP.64x256x64.F32.E4M3.E4M3 R24, gdesc[UR8], R24, R153, gsb0"),
    ("sm_90", 0x254fe20000045ac00000cc147cc0723c, "HMMA.SP.16832.F32.BF16 R192, R124.reuse, R20, R192, R204, 0x0"),
    ("sm_80", 0x000fe200048000007fffffff1a1a7808, "FSEL R26, R26, +QNAN , !P1"),
    # FlashAttention-3 (xformers' sm_90a build): the uniform predicate file as an operand, an
    # mbarrier arrive at a fixed address, a TMA reduction with a cache policy, and HGMMA's
    # scale-d predicate, stored inverted (UPT is 0).
    ("sm_90", 0x000fe20008000000000000403f077883, "UP2UR UR7, UPR, URZ, 0x40"),
    # a learned alias's exceptions, checked against nvdisasm (learn_alias_exceptions): the
    # signed IMAD.SHL is never printed with WIDE
    ("sm_90", 0x000fe400078e02ff0000000230367825, "IMAD.WIDE R54, R48, 0x2, RZ"),
    ("sm_90", 0x000fe400078e02ff0000000230367824, "IMAD.SHL R54, R48, 0x2, RZ"),
    ("sm_90", 0x000fe20008000a8403480000ff0079b0, "ARRIVES.LDGSTSBAR.64.TRANSCNT [UR4+0x34800]"),
    ("sm_90", 0x0023d800080a1408000006043c0073bb, "UBLKRED.G.S.ADD.F32.RN [UR4], [UR60], UR8, desc[UR6]"),
    ("sm_90", 0x000fe2000c7018ff01e00000041879f0, "HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT"),
    ("sm_90", 0x000fe6000f80192020000000082079f0, "HGMMA.64x8x16.F32.BF16 R32, gdesc[UR8].negA.tnspA, R32, !UP0, gsb0"),
]

PINNED = ([("sm_90", w, t) for w, t in SM90] + [("sm_70", w, t) for w, t in SM70]
          + [("sm_80", w, t) for w, t in SM80] + [("sm_86", w, t) for w, t in SM86] + LEARNED
          + SETS_AND_ZERO_REGISTERS + HELD_OUT)


@pytest.mark.parametrize("arch,word,text", PINNED, ids=[f"{a} {t}" for a, _w, t in PINNED])
def test_word_and_text(arch, word, text):
    isa = get_isa(arch)
    assert normal_text(isa.format(isa.decode(word))) == normal_text(text)
    inst = parse_instruction(text)
    inst.control = ControlCode.from_word(word)
    assert isa.encode(inst) == word


def test_modifier_order_that_is_meaning_is_never_a_fallback():
    """F2F.F16.F32 and F2F.F32.F16 are two conversions: text in one order never takes an
    encoding that prints the other (sm_70 learned `F2F.F16.F32 R, c[..]` late; before, it
    silently took F2F.F32.F16's bits). Either the right word or an error naming the form."""
    from sassas.errors import SassError
    isa = get_isa("sm_70")
    inst = parse_instruction("F2F.F16.F32 R7, c[0x0][0x178]")
    try:
        word = isa.encode(inst)
    except SassError as e:
        assert "F2F.F16.F32 R, C[I][I] is not known on sm_70" in e.message and "F2F.F32.F16" in e.message
    else:
        assert normal_text(isa.format(isa.decode(word))) == "F2F.F16.F32 R7, c[0x0][0x178]"
