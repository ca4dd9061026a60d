"""Which meaning a line has (TuringAs's dialect or nvdisasm's text), and errors for missing
modifiers: checks that need no oracle."""
import sassas
import pytest
from sassas.elf import read_cubin


def _words(code: bytes, n: int) -> list[int]:
    return [int.from_bytes(code[16 * i:16 * i + 16], "little") for i in range(n)]


def test_missing_modifiers_are_named_with_the_nearest_spellings():
    """Not "modifiers (none) cannot be combined": what is missing, and valid spellings."""
    with pytest.raises(sassas.SassError) as e:
        sassas.assemble("--:-:-:-:2  SHF R1, R0, 0x2, RZ;\n--:-:-:-:2  EXIT;\n", arch="sm_75")
    msg = str(e.value)
    assert "SHF needs one of .S32 .S64 .U32 .U64 and one of .L .R" in msg
    assert "nearest on sm_75: " in msg and "SHF.L.U32" in msg


def test_cs2r_meaning_follows_the_dialect():
    """TuringAs's `CS2R R5, SR_CLOCKLO` is the 32-bit CS2R.32; nvdisasm's text is the 64-bit
    pair write. A TuringAs file gets TuringAs's meaning, with a warning that says so."""
    body = "--:-:-:-:2  CS2R R5, SR_CLOCKLO;\n--:-:-:-:2  EXIT;\n"
    words = {}
    for dialect in (None, "turingas", "nvdisasm"):
        try:
            cubin = sassas.assemble(body, arch="sm_75", dialect=dialect)
        except sassas.SassError as err:
            words[dialect] = str(err)
            continue
        words[dialect] = _words(read_cubin(bytes(cubin)).kernels[0].code, 1)[0]
        if dialect is None:
            assert any("CS2R means CS2R.32" in w.message for w in cubin.warnings)
        else:
            assert not cubin.warnings
    explicit = sassas.assemble("--:-:-:-:2  CS2R.32 R5, SR_CLOCKLO;\n--:-:-:-:2  EXIT;\n", arch="sm_75")
    assert words[None] == words["turingas"] == _words(read_cubin(bytes(explicit)).kernels[0].code, 1)[0]
    # nvdisasm's meaning writes R5 and R6: an odd register is refused (or, where the pair
    # check is not there, at least not the 32-bit word)
    assert words["nvdisasm"] != words["turingas"]
    # a sassas file (directives) reads nvdisasm's meaning; CS2R.64 says it in any file
    pair = sassas.assemble(".kernel k\n--:-:-:-:2  CS2R R4, SR_CLOCKLO;\n--:-:-:-:2  EXIT;\n", arch="sm_75")
    spelled = sassas.assemble("--:-:-:-:2  CS2R.64 R4, SR_CLOCKLO;\n--:-:-:-:2  EXIT;\n", arch="sm_75")
    assert (_words(read_cubin(bytes(pair)).kernels[0].code, 1) == _words(read_cubin(bytes(spelled)).kernels[0].code, 1))
    assert not pair.warnings and not spelled.warnings


def _word(text: str, arch: str, **kw):
    cubin = sassas.assemble(text, arch=arch, **kw)
    return _words(read_cubin(bytes(cubin)).kernels[0].code, 1)[0], [w.message for w in cubin.warnings]


def _same_word(spelling: str, filled_in: str, arch: str) -> bool:
    """Whether the TuringAs spelling assembles to the word of the spelling with what it
    implies written out (one instruction, then EXIT)."""
    return (_word(f"--:-:-:-:2  {spelling};\n--:-:-:-:2  EXIT;\n", arch)[0]
            == _word(f"--:-:-:-:2  {filled_in};\n--:-:-:-:2  EXIT;\n", arch)[0])


def test_unscoped_ldg_on_sm80_is_strong_gpu_in_turingas_files_only():
    body = "--:-:-:-:2  LDG.E R4, [R2];\n--:-:-:-:2  EXIT;\n"
    turingas, warned = _word(body, "sm_80")
    nvdisasm, quiet = _word(".kernel k\n" + body, "sm_80")
    strong, _ = _word(".kernel k\n--:-:-:-:2  LDG.E.STRONG.GPU R4, [R2];\n--:-:-:-:2  EXIT;\n", "sm_80")
    assert any("LDG.E means LDG.E.STRONG.GPU" in w for w in warned) and not quiet
    assert nvdisasm != turingas
    # the same memory order as the explicit spelling; TuringAs's descriptor register (UR0) kept
    assert turingas & ~(0x3f << 32) == strong & ~(0x3f << 32)


def test_turingas_implied_parts():
    for arch in ("sm_70", "sm_75", "sm_80", "sm_86"):
        assert _same_word("SHF.L R1, R0, 0x2, RZ", "SHF.L.U32 R1, R0, 0x2, RZ", arch)
        assert _same_word("IADD3.X R1, RZ, RZ, R1, P0", "IADD3.X R1, RZ, RZ, R1, P0, !PT", arch)
        assert _same_word("STS.32 [R2], R4", "STS [R2], R4", arch)


def test_turingas_misencoding_is_refused_with_the_reason():
    with pytest.raises(sassas.SassError, match=r"LDG.E.STRONG is refused on sm_80: TuringAs's word for it is "
                                               r"read by nvdisasm as LDG.E.CONSTANT.SM.PRIVATE"):
        sassas.assemble("--:-:-:-:2  LDG.E.STRONG R4, [R2];\n--:-:-:-:2  EXIT;\n", arch="sm_80")


def test_turingas_scoped_stores_on_sm80():
    """.SYS is TuringAs's default scope: STG.E.SYS is its STG.E, bit for bit (.STRONG.GPU on
    sm_80). Its STG.E.GPU word reads as .STRONG.GPU.PRIVATE: sassas writes .STRONG.GPU, warned."""
    for arch in ("sm_80", "sm_86"):
        sys_, quiet = _word("--:-:-:-:2  STG.E.SYS [R2], R4;\n--:-:-:-:2  EXIT;\n", arch)
        plain, _ = _word("--:-:-:-:2  STG.E [R2], R4;\n--:-:-:-:2  EXIT;\n", arch)
        assert sys_ == plain and not quiet
        gpu, warned = _word("--:-:-:-:2  STG.E.GPU [R2], R4;\n--:-:-:-:2  EXIT;\n", arch)
        strong, _ = _word(".kernel k\n--:-:-:-:2  STG.E.STRONG.GPU [R2], R4;\n--:-:-:-:2  EXIT;\n", arch)
        assert any("STG.E.GPU on " + arch + " is read by nvdisasm as STG.E.STRONG.GPU.PRIVATE; sassas writes "
                   "STG.E.STRONG.GPU" in w for w in warned)
        assert gpu & ~(0x3f << 32) == strong & ~(0x3f << 32)     # (TuringAs's descriptor UR0 kept)


def test_turingas_fills_in_uniform_zero_and_predicates():
    for arch in ("sm_75", "sm_80", "sm_86"):
        assert _same_word("UIADD3.X UR12, UR8, UR27, UR16", "UIADD3.X UR12, UR8, UR27, UR16, !UPT, !UPT", arch)
        assert _same_word("ULEA.HI UR21, UR5, UR31, 0x5", "ULEA.HI UR21, UR5, UR31, URZ, 0x5", arch)


def test_turingas_red_on_sm75():
    """RED's type .U32 is TuringAs's default; its `[R2.64]` address is `.E`'s on sm_70/75 (the
    bit it sets for .64 is one nvdisasm does not print, kept)."""
    from sassas.isa import get_isa
    isa = get_isa("sm_75")
    for line, text in (("RED.E.ADD.F32 [R2.64+0x10], R5;", "RED.E.ADD.F32.FTZ.RN.SYS [R2+0x10], R5"),
                       ("RED.E.ADD.U32.GPU [R2+0x10], R5;", "RED.E.ADD.GPU [R2+0x10], R5")):
        word, warned = _word(f"--:-:-:-:2  {line}\n--:-:-:-:2  EXIT;\n", "sm_75")
        assert isa.format(isa.decode(word)).rstrip(" ;") == text and not warned


def test_turingas_illegal_words_are_refused_as_such():
    """TuringAs's F2FP on sm_75 and IMAD.HI on sm_70 are words nvdisasm reads no instruction in."""
    for arch, line in (("sm_75", "F2FP.PACK_AB R0, R32, R12;"), ("sm_70", "IMAD.HI.U32 R5, R2, R3, RZ;")):
        with pytest.raises(sassas.SassError, match=r"TuringAs's word for it is an illegal instruction"):
            sassas.assemble(f"--:-:-:-:2  {line}\n--:-:-:-:2  EXIT;\n", arch=arch)


def test_turingas_smem_size():
    assert sassas.assemble("<SMEM>\n4096\n</SMEM>\n--:-:-:-:2  EXIT;\n", arch="sm_75").program.kernels[0].shared_bytes == 4096
    assert sassas.assemble("<smem>1024</smem>\n--:-:-:-:2  EXIT;\n", arch="sm_75").program.kernels[0].shared_bytes == 1024


def test_stall_dash_is_turingas_default_latency():
    """TuringAs's `-` stall: the latency its grammar gives the spelling (MOV: 5), else 1."""
    for arch in ("sm_75", "sm_80"):
        dash, _ = _word("--:-:-:-:-  MOV R1, R2;\n--:-:-:-:2  EXIT;\n", arch)
        five, _ = _word("--:-:-:-:5  MOV R1, R2;\n--:-:-:-:2  EXIT;\n", arch)
        assert dash == five
        dash, _ = _word("--:-:-:Y:-  NOP;\n--:-:-:-:2  EXIT;\n", arch)
        one, _ = _word("--:-:-:Y:1  NOP;\n--:-:-:-:2  EXIT;\n", arch)
        assert dash == one


def test_dialect_is_found_from_the_file():
    """TuringAs's form (control-code prefixes, blocks) reads as TuringAs's dialect; sassas's
    directives, listings and bare nvdisasm text (pasted `/*0010*/ ... ;` lines) as nvdisasm's."""
    from sassas.dialect import detect_dialect
    assert detect_dialect("--:-:1:Y:4  CS2R R5, SR_CLOCKLO;\n", False) == "turingas"
    assert detect_dialect("<params>\nx, 4\n</params>\nCS2R R5, SR_CLOCKLO;\n", False) == "turingas"
    assert detect_dialect(".kernel k\n--:-:1:Y:4  CS2R R4, SR_CLOCKLO;\n", False) == "nvdisasm"
    assert detect_dialect("        /*0000*/   CS2R R4, SR_CLOCKLO ;  /* 0x0000000000047805 */\n", False) == "nvdisasm"
    assert detect_dialect("CS2R R4, SR_CLOCKLO;\nEXIT;\n", False) == "nvdisasm"
    assert detect_dialect("--:-:1:Y:4  CS2R R5, SR_CLOCKLO;\n", True) == "nvdisasm"


def test_turingas_meaning_holds_on_archs_newer_than_turingas():
    """TuringAs writes sm_70..sm_86; its file assembled for sm_89/sm_90 keeps the 32-bit clock read."""
    body = "--:-:-:-:2  CS2R R5, SR_CLOCKLO;\n--:-:-:-:2  EXIT;\n"
    for arch in ("sm_89", "sm_90"):
        ref = sassas.assemble(".kernel k\n--:-:-:-:2  CS2R.32 R5, SR_CLOCKLO;\n--:-:-:-:2  EXIT;\n", arch=arch)
        got = sassas.assemble(body, arch=arch, kernel_name="k")
        assert read_cubin(got.data).kernels[0].code == read_cubin(ref.data).kernels[0].code
