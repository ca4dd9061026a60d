"""The grammar and the canonical operand model (no oracle, no GPU)."""
import pytest

from sassas import SassError, parse
from sassas.ast import ControlCode
from sassas.ast import format_operand
from sassas.control import parse_control
from sassas.parse import parse_instruction

# (nvdisasm text, [(kind, values, flags)]) -- the canonical form every stage relies on.
OPERAND_CASES = [
    ("LDG.E R4, desc[UR8][R2.64] ;", [("R", (4,), set()), ("desc[UR][R.64+I]", (8, 2, 0), set())]),
    ("IADD3 R6, R10, -0xc, RZ ;", [("R", (6,), set()), ("R", (10,), set()), ("I", (-12,), set()), ("R", (255,), set())]),
    ("LDS R11, [R11+UR5] ;", [("R", (11,), set()), ("[R+UR+I]", (11, 5, 0), set())]),
    ("S2R R0, SR_TID.X ;", [("R", (0,), set()), ("SR", ("SR_TID.X",), set())]),
    ("ULDC.64 UR8, c[0x0][0x208] ;", [("UR", (8,), set()), ("C[I][I]", (0, 0x208), set())]),
    ("VIADD R5, R9.reuse, 0xffffffff ;", [("R", (5,), set()), ("R", (9,), {"reuse"}), ("I", (0xFFFFFFFF,), set())]),
    ("LOP3.LUT R4, R9, 0x3, RZ, 0xc0, !PT ;",
     [("R", (4,), set()), ("R", (9,), set()), ("I", (3,), set()), ("R", (255,), set()), ("I", (0xC0,), set()), ("P", (7,), {"!"})]),
    ("FFMA R1, -|R2|, c[0x0][0x210], R4 ;",
     [("R", (1,), set()), ("R", (2,), {"-", "|"}), ("C[I][I]", (0, 0x210), set()), ("R", (4,), set())]),
    ("STS.128 [R2+0x10], R4 ;", [("[R+I]", (2, 16), set()), ("R", (4,), set())]),
    ("LDS.U.128 R4, [R2.X4+UR4+-0x10] ;", [("R", (4,), set()), ("[R+UR+I]", (2, 4, -16), {".X4"})]),
    # A minus right after the register (the lexer reads `-0x10` as one number) is the offset's sign.
    ("LDS R0, [R2-0x10] ;", [("R", (0,), set()), ("[R+I]", (2, -16), set())]),
    ("STS [R2 - 0x10], R4 ;", [("[R+I]", (2, -16), set()), ("R", (4,), set())]),
    ("LDG.E R4, desc[UR8][R2.64-0x8] ;", [("R", (4,), set()), ("desc[UR][R.64+I]", (8, 2, -8), set())]),
    ("P2R R8, PR, RZ, 0x3 ;", [("R", (8,), set()), ("PR", (), set()), ("R", (255,), set()), ("I", (3,), set())]),
    ("FMUL.RZ R17, R5, 0.15915493667125701904 ;", [("R", (17,), set()), ("R", (5,), set()), ("I", (0.15915493667125701904,), set())]),
]


@pytest.mark.parametrize("text,expected", OPERAND_CASES)
def test_canonical_operands(text, expected):
    inst = parse_instruction(text)
    got = [(o.kind, o.values, set(o.flags)) for o in inst.operands]
    assert got == expected


@pytest.mark.parametrize("text", [
    "LDG.E R4, desc[UR8][R2.64]", "LDS R11, [R11+UR5]", "FFMA R1, -|R2|, c[0x0][0x210], R4",
    "LOP3.LUT R4, R9, 0x3, RZ, 0xc0, !PT", "STS.128 [R2+0x10], R4", "P2R R8, PR, RZ, 0x3",
    "IADD3 R6, R10, -0xc, RZ", "VIADD R5, R9.reuse, 0xffffffff",
])
def test_operand_text_round_trip(text):
    inst = parse_instruction(text)
    assert ", ".join(format_operand(o) for o in inst.operands) == text.split(" ", 1)[1]


def test_predicate_and_mnemonic():
    inst = parse_instruction("@!P0 BRA `(.L_x_0) ;")
    assert inst.opcode == "BRA" and inst.modifiers == ()
    assert inst.predicate.kind == "P" and inst.predicate.values == (0,) and "!" in inst.predicate.flags
    inst = parse_instruction("ISETP.GE.U32.AND P1, PT, R5, 0x3, PT ;")
    assert inst.opcode == "ISETP" and inst.modifiers == ("GE", "U32", "AND")


def test_listing_line_takes_control_from_hex():
    # cuobjdump -sass prints the control bits only in the second hex word.
    text = ("/*00d0*/                   LDG.E R2, desc[UR4][R2.64] ;        /* 0x0000000402027981 */\n"
            "                                                              /* 0x000ea2000c1e1900 */")
    inst = parse_instruction(text)
    hi = 0x000EA2000C1E1900
    assert inst.control == ControlCode.from_bits(hi >> 41)
    assert inst.control.write_barrier == 2 and inst.control.stall == 1 and not inst.control.yield_


@pytest.mark.parametrize("text,fields", [
    ("--:-:-:Y:4", dict(wait_mask=0, read_barrier=7, write_barrier=7, yield_=True, stall=4)),
    ("03:2:1:-:b", dict(wait_mask=3, read_barrier=2, write_barrier=1, yield_=False, stall=11)),
    ("-----1:-:-:Y:0", dict(wait_mask=2, stall=0, yield_=True)),
])
def test_control_text(text, fields):
    code = parse_control(text)
    for k, v in fields.items():
        assert getattr(code, k) == v
    assert parse_control(code.to_text()) == code


def test_control_bits_layout():
    # Bits 105.. of the word: stall, yield (inverted), write, read, wait, reuse.
    c = ControlCode(stall=5, yield_=True, write_barrier=2, read_barrier=3, wait_mask=0b100001, reuse=0b0101)
    bits = c.bits
    assert bits & 0xF == 5 and (bits >> 4) & 1 == 0
    assert (bits >> 5) & 7 == 2 and (bits >> 8) & 7 == 3
    assert (bits >> 11) & 0x3F == 0b100001 and (bits >> 17) & 0xF == 0b0101
    assert ControlCode.from_bits(bits) == c


@pytest.mark.parametrize("text,message", [
    ("--:-:6:Y:4 NOP;", "write barrier 6 out of range"),
    ("--:-:-:-:0 NOP;", "stall 0 needs the yield flag"),
    ("--:-:-:-:d NOP;", "stall 13 needs the yield flag"),
    ("--:3:-:Y:5 EXIT;", "EXIT takes no read barrier"),
    ("--:-:2:Y:5 STS [R2], R3;", "STS writes no register"),
])
def test_illegal_control_codes(text, message):
    with pytest.raises(SassError, match=message) as e:
        parse(text, "sm_90", "t.sass")
    assert e.value.loc.line == 1


def _error(text):
    with pytest.raises(SassError) as e:
        parse(text, "sm_90", "bad.sass")
    return e.value


def test_missing_semicolon_points_at_end_of_line():
    err = _error("--:-:-:Y:4 MOV R1, R2\n--:-:-:Y:4 EXIT;\n")
    assert "expected ';'" in err.message
    assert (err.loc.file, err.loc.line, err.loc.col) == ("bad.sass", 1, 22)
    assert str(err).startswith("bad.sass:1:22: error: expected ';'")


def test_malformed_operand_has_location():
    err = _error("--:-:-:Y:4 LDS R1, [R2;\n")
    assert err.loc.line == 1 and "missing ']'" in err.message


def test_bad_character():
    err = _error("--:-:-:Y:4 MOV R1, R2 % 3;\n")
    assert err.loc.line == 1 and err.loc.col == 23 and "unexpected character '%'" in err.message


def test_lowercase_opcode_is_an_error():
    err = _error("mov R1, R2;")
    assert err.loc.line == 1 and err.loc.col == 1


def test_params_block_and_kernels():
    src = """
.kernel first
<params>
a, 4
p, 8
</params>
--:-:-:Y:4 MOV R1, a[0];
.kernel second
.shared 256
--:-:-:Y:4 EXIT;
"""
    prog = parse(src, "sm_90", "two.sass")
    assert [k.name for k in prog.kernels] == ["first", "second"]
    assert [(p.name, p.size) for p in prog.kernels[0].params] == [("a", 4), ("p", 8)]
    assert prog.kernels[1].shared_bytes == 256


def test_unclosed_params_block():
    err = _error("<params>\na, 4\n")
    assert err.loc.line == 1 and "not closed" in err.message


def test_caret_diagnostic_rendering():
    err = _error("--:-:-:Y:4 MOV R1, R2 % 3;\n")
    lines = str(err).splitlines()
    assert lines[1].strip() == "--:-:-:Y:4 MOV R1, R2 % 3;"
    assert lines[2].index("^") - 4 == 22


def test_shape_follows_the_instruction():
    """Instruction.shape (what the later stages key their per-shape facts on) is found again
    when a stage or a user assigns new operands, predicate, modifiers or opcode."""
    from dataclasses import replace

    from sassas.ast import Operand
    a = parse_instruction("FADD R1, R2, R3 ;")
    b = parse_instruction("FADD R7, R8, R9 ;")
    assert a.shape is b.shape and a.shape.operands == (("R", frozenset()),) * 3
    a.operands = a.operands[:2] + (Operand("I", (1.5,)),)
    assert a.shape is not b.shape and a.shape.operands[2] == ("I", frozenset())
    a.predicate = Operand("P", (0,), frozenset({"!"}))
    assert a.shape.guard == ("P", frozenset({"!"}))
    a.modifiers = ("FTZ",)
    a.opcode = "FMUL"
    assert (a.shape.opcode, a.shape.modifiers) == ("FMUL", ("FTZ",))
    assert a.shape is replace(a).shape        # (a copy finds it afresh)


def test_parse_program_builds_syntax_only():
    """parse_program gives the tree as written: names unbound, declarations on the kernel, the
    module's data unchecked; the assembler's front end (sassas.assembler.parse) binds them."""
    from sassas.errors import Diagnostics
    from sassas.frontend import finish_program
    from sassas.parse import parse_program
    src = (".reg x R5\n.smem buf 64\n.global g 4\n--:-:-:Y:4 MOV x, RZ;\n--:-:-:Y:4 STS [buf+0x4], x;\n"
           "--:-:-:Y:5 EXIT;\n")
    prog = parse_program(src, "sm_90", "k.sass")
    kernel = prog.kernels[0]
    mov, sts = kernel.instructions[:2]
    assert (mov.operands[0].kind, mov.operands[0].values) == ("N", ("x",))
    assert kernel.declarations.registers["x"][:2] == ("R", 5)
    assert [s[:3] for s in kernel.declarations.smem] == [("buf", 64, 16)]
    assert list(prog.module.globals) == ["g"]
    bound = parse(src, "sm_90", "k.sass").kernels[0].instructions
    assert [format_operand(o) for o in bound[0].operands] == ["R5", "RZ"]
    assert [format_operand(o) for o in bound[1].operands] == ["[0x4]", "R5"]
    diags = Diagnostics()
    finish_program(prog, diags)
    assert not diags.errors and [format_operand(o) for o in mov.operands] == ["R5", "RZ"]


def test_encode_encodes_only():
    """encode_kernel refuses an instruction without a control code (the assembler schedules
    first); assemble gives such instructions one."""
    import sassas
    from sassas.arch import get_arch
    from sassas.encode import encode_kernel
    from sassas.isa import get_isa
    from sassas.resolve import resolve_kernel
    src = "MOV R1, RZ;\nEXIT;\n"
    kernel = parse(src, "sm_90", "k.sass").kernels[0]
    resolve_kernel(kernel, get_arch("sm_90"))
    with pytest.raises(ValueError, match="without a control code"):
        encode_kernel(kernel, get_arch("sm_90"), get_isa("sm_90"))
    assert len(sassas.assemble(src, "sm_90", "k.sass").data) > 0
