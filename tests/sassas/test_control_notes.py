"""The control code as cuobjdump 12.8 prints it for sm_120 (`&wr=0x1 &req={3} ?trans1`), read
by the listing front end: as the control code where no hex gives it, checked where both do.

The oracle test lists ptxas 12.9's sm_120 code with cuobjdump 12.8 (annotations and the low
word only) and 13.5 (both words, no annotations) and checks that both give the same control
codes. No GPU needed.
"""
from __future__ import annotations

import itertools
import subprocess

import pytest

from sassas.ast import NO_BARRIER, ControlCode
from sassas.control import control_from_notes, format_notes
from sassas.errors import SassError
from sassas.listing import read_listing
from sassas.parse import parse_items

try:
    from sassas.learn.oracle import OracleMissing, compile_ptx, find_tool, legacy_dir
except ImportError:
    OracleMissing = RuntimeError
    compile_ptx = find_tool = legacy_dir = None


def _fields(c: ControlCode) -> tuple:
    return c.stall, c.yield_, c.write_barrier, c.read_barrier, c.wait_mask


def test_every_control_code_round_trips_through_notes():
    barriers = [NO_BARRIER, 0, 3, 5]
    for stall, yield_, wr, rd, mask in itertools.product(range(16), (False, True), barriers, barriers,
                                                         (0, 1, 0b100001, 0b111111)):
        if not yield_ and stall == 0:
            continue        # illegal (nvdisasm refuses it), and not printable as a note
        code = ControlCode(stall=stall, yield_=yield_, write_barrier=wr, read_barrier=rd, wait_mask=mask)
        notes = format_notes(code).split()
        assert _fields(control_from_notes(notes)) == _fields(code), notes


def test_printed_forms():
    """The forms and order cuobjdump 12.8 prints (from ptxas 12.9 sm_120 code)."""
    code = ControlCode(stall=4, yield_=False, write_barrier=2, read_barrier=NO_BARRIER, wait_mask=0b100)
    assert format_notes(code) == "&req={2} &wr=0x2 ?trans4"
    code = ControlCode(stall=6, yield_=True, wait_mask=0b11)
    assert format_notes(code) == "&req={1,0} ?WAIT6_END_GROUP"
    assert format_notes(ControlCode(stall=0, yield_=True)) == ""      # BRA, NOP: nothing printed


LISTING = """\
        /*0020*/                   LDC.64 R2, c[0x0][0x380]            &wr=0x1  ?trans1;          /* 0x0000e000ff027b82 */
        /*0090*/                   UIADD3 UR4, UPT, UPT, UR6, UR4, UR5 &req={0} ?WAIT4_END_GROUP; /* 0x0000000406047290 */
        /*00e0*/                   BRA 0xe0;                                                      /* 0xfffffffc00fc7947 */
"""


def test_listing_lines_with_notes_and_low_word():
    items = parse_items(LISTING, "k.sass")
    assert _fields(items[0].control) == (1, False, 1, NO_BARRIER, 0)
    assert _fields(items[1].control) == (4, True, NO_BARRIER, NO_BARRIER, 1)
    assert _fields(items[2].control) == (0, True, NO_BARRIER, NO_BARRIER, 0)
    kernels, errors = read_listing("\t\tFunction : k\n" + LISTING, "k.sass")
    assert errors == []
    assert [_fields(i.control) for i in kernels[0].body] == [_fields(i.control) for i in items]


def test_notes_that_disagree_with_the_hex_are_an_error():
    text = ("        /*0030*/                   LDCU UR5, c[0x0][0x364]  &wr=0x2 ?trans1 ;  /* 0x00006c80ff0577ac */\n"
            "                                                                /* 0x000e220008000800 */\n")
    with pytest.raises(SassError) as e:
        parse_items(text, "k.sass")
    assert (e.value.loc.line, e.value.loc.col) == (1, 61)     # at `&wr=0x2`
    assert "'&wr=0x2 ?trans1' disagree with the hex words, which say '&wr=0x0 ?trans1'" in e.value.message
    # Agreeing notes and hex: the hex's control code, reuse bits included.
    ok = parse_items(text.replace("&wr=0x2", "&wr=0x0"), "k.sass")[0]
    assert _fields(ok.control) == (1, False, 0, NO_BARRIER, 0)
    with pytest.raises(SassError, match="disagree with the control prefix"):
        parse_items("--:-:2:-:1 LDCU UR5, c[0x0][0x364] &wr=0x0 ?trans1;", "k.sass")


def test_unknown_stall_in_notes_is_an_error():
    with pytest.raises(SassError, match="stall 16 out of range"):
        parse_items("LDCU UR5, c[0x0][0x364] ?trans16;", "k.sass")


PTX = """.version 8.8
.target sm_120
.address_size 64
.visible .entry k(.param .u64 p_out, .param .u64 p_in, .param .u32 n)
{
.reg .b32 %a, %b, %c; .reg .f32 %x, %y; .reg .b64 %p, %q; .reg .pred %pr;
ld.param.u64 %p, [p_in]; ld.param.u64 %q, [p_out]; ld.param.u32 %b, [n];
cvta.to.global.u64 %p, %p; cvta.to.global.u64 %q, %q;
mov.u32 %a, %tid.x; mov.u32 %c, %ntid.y; ld.global.b32 %a, [%p]; ld.global.f32 %x, [%p+4];
setp.lt.u32 %pr, %a, %b; sqrt.rn.f32 %y, %x; div.u32 %c, %a, %c;
@%pr add.u32 %a, %a, %c; cvt.rzi.s32.f32 %b, %y; add.u32 %a, %a, %b;
st.global.b32 [%q], %a;
ret;
}
"""


def test_cuobjdump_12_8_notes_equal_13_5_hex(tmp_path):
    if find_tool is None:
        pytest.skip("sassas.learn.oracle not importable")
    try:
        new = find_tool("cuobjdump", "sm_120")
    except OracleMissing as e:
        pytest.skip(f"cuobjdump 13 not found: {e}")
    old = legacy_dir() / "cuobjdump"
    if not old.exists():
        pytest.skip(f"cuobjdump 12.8 not found in {legacy_dir()} (python -m sassas.learn.oracle --help)")
    cubin = compile_ptx(PTX, "sm_120")
    if cubin is None:
        pytest.skip("ptxas 12.9 cannot compile for sm_120")
    path = tmp_path / "k.cubin"
    path.write_bytes(cubin)
    annotated = subprocess.run([str(old), "-sass", str(path)], capture_output=True, text=True).stdout
    assert "?trans" in annotated and "&wr=" in annotated
    plain = subprocess.run([str(new), "-sass", str(path)], capture_output=True, text=True).stdout
    (a, errors_a), (b, errors_b) = read_listing(annotated, "128.sass"), read_listing(plain, "135.sass")
    assert errors_a == errors_b == []
    assert len(a[0].body) == len(b[0].body) > 10
    assert [_fields(i.control) for i in a[0].body] == [_fields(i.control) for i in b[0].body]
