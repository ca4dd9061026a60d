"""The parser's line plans (sassas.parse: a line of a known shape is built without the LALR
parser) give exactly what parsing the whole text at once gives: the same items, locations
included, and the same first error."""
from __future__ import annotations

import importlib
import random
from dataclasses import replace
from pathlib import Path

import pytest
from lark.exceptions import UnexpectedInput, VisitError

from sassas.errors import SassError
from sassas.parse_tree import ItemBuilder, syntax_error
from sassas.preprocess import preprocess

parse_module = importlib.import_module("sassas.parse")
ROOT = Path(__file__).resolve().parents[2]


def _whole_text(text: str, lines):
    """Items as the whole-text parse builds them (what parse_items falls back to)."""
    tree = parse_module._parser().parse(text)
    return ItemBuilder(lines).transform(tree)


def _described(items) -> list:
    out = []
    for it in items:
        if isinstance(it, tuple):
            out.append(it)
            continue
        locs = [it.loc]
        if hasattr(it, "operands"):
            # (operand locations are found on demand, from what the instruction keeps)
            locs += [it.operand_loc(i) for i in range(len(it.operands))]
            # The shape a plan hands its instructions is the one found from the instruction
            # (a copy by replace() has none yet).
            assert it.shape is replace(it).shape
        out.append((repr(it), locs))
    return out


def _same_as_whole_text(text: str, name: str = "t.sass") -> None:
    pre = preprocess(text, name)
    lines = parse_module.Lines(pre.text, name, pre.origins, pre.sources)
    try:
        expected = _described(_whole_text(pre.text, lines))
    except (UnexpectedInput, VisitError) as e:
        error = syntax_error(e, pre.text, lines) if isinstance(e, UnexpectedInput) else e.orig_exc
        with pytest.raises(SassError) as info:
            parse_module.parse_items(pre.text, name, lines)
        assert str(info.value) == str(error)
        return
    # Twice: the first pass makes the plans, the second builds from them.
    for _ in range(2):
        assert _described(parse_module.parse_items(pre.text, name, lines)) == expected


SOURCES = sorted((ROOT / "examples").glob("*.sass"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_examples_parse_alike(path):
    _same_as_whole_text(path.read_text(), path.name)


def test_generated_lines_parse_alike():
    """Lines of many shapes with numbers at the edges of what lexes as a register or an
    integer (R999, UR99, RZ, leading zeros, long hex, floats, comments holding numbers,
    listing hex words of 16 and 17 digits, names that end in a number)."""
    rng = random.Random(3)
    registers = ["R0", "R7", "R12", "R254", "R255", "R999", "R1000", "RZ", "UR4", "UR63", "UR64", "UR99",
                 "UR100", "URZ", "P0", "P6", "P7", "PT", "SR_TID.X", "acc12", "acc012", "v0", "j0Ab00", "gsb0",
                 "x1e3", "tid"]
    numbers = ["0", "7", "012", "0x0", "0x1f", "0xFFFFFFFF", "0x123456789abcdef01", "-0x10", "1.5", "1e3",
               "-1", "4294967296", "0x8"]
    operands = ["{r}", "{r}.reuse", "-{r}", "|{r}|", "{n}", "[{r}+{n}]", "[{r}]", "[{r}-{n}]",
                "c[0x0][{n}]", "desc[UR4][{r}.64]", "{r}.H1", "!{r}"]
    templates = ["--:-:-:Y:4      FFMA {0}, {1}, {2}, {3};", "  @P0 IADD3 {0}, {1}, {2}, RZ;",
                 "01:-:2:-:1 LDG.E.128 {0}, {1};", "MOV {0}, {1}; # {n} rows",
                 "L{n}: FADD {0}, {1}, {2};", "--:-:-:Y:4 STS [{0}], {1}; /* {n} */",
                 "IMAD.WIDE {0}, {1}, {2}, {3} ; // R{n}", "BRA `(.L_x_{n});",
                 "/*0{n}0*/ FADD {0}, {1}, {2} ; /* {h} */ /* {h} */", "FMUL {0}, {1}, {2} ; /*{h}*/ /* {h} */ /* {h} */"]
    hexwords = ["0x0", "0x000fe20000000f00", "0x1234567890abcdef", "0x1234567890abcdef1", "0x7", "12"]
    lines = []
    for _ in range(3000):
        ops = [rng.choice(operands).format(r=rng.choice(registers), n=rng.choice(numbers)) for _ in range(4)]
        lines.append(rng.choice(templates).format(*ops, n=rng.choice(numbers), h=rng.choice(hexwords)))
    good = []
    for line in lines:
        _same_as_whole_text(line)
        try:
            parse_module.parse_items(line)
            good.append(line)
        except SassError:
            pass
    assert len(good) > 500
    _same_as_whole_text("\n".join(good))
    _same_as_whole_text("\n".join(lines[:300]))     # with errors: the first one, as the whole text


def test_lines_that_continue_the_line_before():
    # `.reg x` may take a register on the next line; a statement may take hex words there.
    _same_as_whole_text(".kernel k\n.reg x\nR5\nFFMA R1, R2, R3, R4;\nEXIT;")
    _same_as_whole_text("FFMA R1, R2, R3, R4;\n/* 0x0000000000000012 */\nEXIT;")
    _same_as_whole_text("FFMA R1, R2,\n R3, R4;\nEXIT;")
    _same_as_whole_text("FFMA R1, R2, R3, R4; /* a\ncomment */ EXIT;")


def test_listing_instructions_take_the_line_plans(monkeypatch):
    """A listing's instruction line and its high-word line are planned as one line, the
    printed address not part of the shape: a second pass over a listing builds every
    instruction from the plans, and gives what the whole-text parse gives (locations included),
    also where the two lines are not such a pair."""
    rng = random.Random(5)
    body = []
    for n in range(200):
        low, high = rng.getrandbits(64), rng.getrandbits(23) << 41 | rng.getrandbits(16)
        body.append(f"        /*{16 * n:04x}*/                   FFMA R{rng.randrange(200)}, R{rng.randrange(200)}, "
                    f"R{rng.randrange(200)}, R{rng.randrange(200)} ;   /* 0x{low:016x} */")
        body.append(f"                                                      /* 0x{high:016x} */")
    listing = "\n\tcode for sm_90\n\t\tFunction : k\n" + "\n".join(body) + "\n"
    _same_as_whole_text(listing)
    pre = preprocess(listing, "t.sass")
    lines = parse_module.Lines(pre.text, "t.sass", pre.origins, pre.sources)
    planned = []
    real_plan_line = parse_module._plan_line
    monkeypatch.setattr(parse_module, "_plan_line", lambda *a: planned.append(a) or real_plan_line(*a))
    assert len(parse_module.parse_items(pre.text, "t.sass", lines)) == 201     # .kernel + 200
    assert [args[0] for args in planned] == [".kernel k"]        # (a directive is never planned)
    # Not pairs: a high word after a label, a comment holding the first line's end, two high words.
    _same_as_whole_text("L0: /* 0x0000000000000012 */\n/* 0x0000000000000012 */\nEXIT;")
    _same_as_whole_text("/*0000*/ FFMA R1, R2, R3, R4 ; # /* 0x0000000000000012 */\n"
                        "/* 0x0000000000000012 */\nEXIT;")
    _same_as_whole_text("/*0000*/ FFMA R1, R2, R3, R4 ; /* 0x0000000000000012 */\n/* 0x0000000000000012 */\n"
                        "/* 0x0000000000000013 */\nEXIT;")


def test_lines_of_one_digit_key_parse_alike():
    """Lines that differ only in their digits and hex letters share a digit key (sassas.parse):
    built through it, where the digits outside the numbers cut out (`STS.64`/`STS.32`,
    `.F16x2`), the `0` before an `x` (`0x1f`/`1x1f`), hex letters outside hex numbers (`acc`,
    `Rab`, `0xa`) and names that end in digits decide the shape, each line gives what the
    whole-text parse gives. Fresh seed each run."""
    from _fuzz import replay, rng_for
    rng = rng_for("digit-keys")
    # (each {d} a random digit, each {h} a random digit or hex letter, either case)
    templates = ["--:-:-:Y:{d}      FFMA R{d}{d}, R{d}.reuse, R{d}{d}{d}, R{d};",
                 "STS.{d}{d} [R{d}+0x{h}{h}{h}], R{d}{d};", "LDS.{d}{d}{d} R{d}, [R{d}{d}+{d}x{h}{h}];",
                 "IADD3 R{d}, R{d}, 0x{h}{h}, RZ;", "IADD3 R{d}, R{h}{h}, {d}{h}, RZ;",
                 "HFMA2.F{d}{d}x{d} R{d}, R{d}, R{d}, R{d};", "MOV R{d}, acc{d}{h};", "MOV R{d}, a{h}{h}{d};",
                 "@P{d} BRA `(.L_x_{d}{d});", "MOV R{d}, UR{d}{d}; # {h}{h}", "{d}{d}:{d}:{d}:-:{h} MOV R{d}, {d};",
                 "FADD R{d}, R{d}, -{d}.{d}e{d};", "ISETP.GE.AND P{d}, PT, R{d}, c[0x{d}][0x{h}{h}{h}], PT;",
                 "MOV R{d}, 0x{h}{h}{h}{h}{h}{h}{h}{h}{h}{h}{h}{h}{h}{h}{h}{h}{h};"]

    def fill(template: str) -> str:
        out = []
        for piece in template.split("{"):
            if piece.startswith("d}"):
                out.append(rng.choice("0123456789" if rng.random() < 0.8 else "00") + piece[2:])
            elif piece.startswith("h}"):
                out.append(rng.choice("0123456789abcdefABCDEF") + piece[2:])
            else:
                out.append(piece)
        return "".join(out)
    lines = [fill(rng.choice(templates)) for _ in range(4000)]
    parse_module._digit_keys.clear()
    good = []
    for line in lines[:800]:
        try:
            parse_module.parse_items(line)
            good.append(line)
        except SassError:
            pass
    assert len(good) > 200, replay()
    text = "\n".join(good + [line for line in lines[800:] if not line.startswith("{")])
    try:
        _same_as_whole_text("\n".join(good), "t.sass")
        _same_as_whole_text(text, "t.sass")
    except AssertionError as e:
        raise AssertionError(f"{e} ({replay()})") from None
    assert parse_module._digit_keys, "no line was built through its digit key"
    # The same digit key as the line before, but no number: a syntax error, as the whole text.
    _same_as_whole_text("IADD3 R1, R2, 0x1f, RZ;\nIADD3 R1, R2, 1x1f, RZ;\nEXIT;")
    _same_as_whole_text("STS.64 [R1+0x10], R2;\nSTS.32 [R1+0x10], R2;\nMOV R1, acc1;\nMOV R1, Rab1;\nEXIT;")
