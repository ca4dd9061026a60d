"""TuringAs as an oracle: what each spelling of its dialect means on each arch.

The spellings below are what TuringAs's grammar accepts (read from its source as facts: opcodes,
modifier alternatives, operand orders). `python -m sassas.learn.turingas` writes each of them
with TuringAs and rewrites `sassas/data/turingas.toml`, the table of what each spelling means on
each arch: the text nvdisasm prints for the word TuringAs writes. The tests
(tests/sassas/test_turingas_differential.py) assemble random programs of these spellings with
TuringAs and with sassas.

TuringAs is found at $SASSAS_TURINGAS or ../shared/oracles/turingas from the repository root.
"""
from __future__ import annotations

import itertools
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

from . import oracle

ROOT = Path(__file__).resolve().parents[2]
ARCHS = (70, 75, 80, 86)


def turingas_dir() -> Optional[Path]:
    env = os.environ.get("SASSAS_TURINGAS")
    for d in ([Path(env)] if env else []) + [ROOT.parent / "shared" / "oracles" / "turingas"]:
        if (d / "turingas" / "main.py").is_file():
            return d
    return None


def run_turingas(paths: list[Path], arch: int, outdir: Path) -> list[Path]:
    """Assemble each file with TuringAs (one Python process for all of them)."""
    d = turingas_dir()
    outs = [outdir / (p.stem + f".{arch}.cubin") for p in paths]
    # One Python process for all the files: TuringAs's start-up is most of its time.
    script = ("import sys\nfrom turingas import main\n"
              "arch, files = sys.argv[1], sys.stdin.read().split()\n"
              "for i, o in zip(files[::2], files[1::2]):\n"
              "    sys.argv = ['turingas', '-i', i, '-o', o, '-arch', arch]\n"
              "    try:\n"
              "        main.main()\n"
              "    except Exception as e:\n"
              "        print('FAILED', i, type(e).__name__, e)\n")
    listing = "\n".join(f"{p}\n{o}" for p, o in zip(paths, outs))
    for o in outs:
        o.unlink(missing_ok=True)
    subprocess.run([sys.executable, "-c", script, str(arch)], input=listing, cwd=d, check=True,
                   capture_output=True, text=True)
    return outs


# ---- the spellings: opcode -> (modifier choices, operand template) -------------------------
# A modifier choice is a tuple of alternatives ("" = left out); an operand template's fields:
# R register, P predicate (maybe negated), I small immediate, C a constant, F a float,
# A an address [R+imm], U uniform register, S a special register of the instruction.
_SR = ("SR_TID.X", "SR_TID.Y", "SR_TID.Z", "SR_CTAID.X", "SR_CTAID.Y", "SR_CTAID.Z", "SR_LANEID")
_MEM = (("", ".U8", ".S8", ".U16", ".S16", ".32", ".64", ".128"),)
SPELLINGS: list[tuple[str, tuple, str]] = [
    ("MOV", (), "R, R"), ("MOV", (), "R, I"), ("MOV", (), "R, C"),
    # (TuringAs's grammar reads .EF/.LU but cannot encode them: left out)
    ("LDG", ((".E",),) + _MEM + (("", ".CONSTANT", ".STRONG"), ("", ".CTA", ".GPU", ".SYS")), "R, A"),
    ("LDG", ((".E",),) + _MEM + (("", ".CONSTANT", ".STRONG"), ("", ".CTA", ".GPU", ".SYS")), "R, A64"),
    ("STG", ((".E",),) + _MEM + (("", ".CTA", ".GPU", ".SYS"), ("", ".STRONG")), "A, R"),
    ("LDS", (("", ".U"),) + _MEM, "R, A"),
    ("STS", _MEM, "A, R"),
    ("LDC", (("", ".E"), ("", ".U8", ".S8", ".U16", ".S16", ".32", ".64")), "R, C"),
    ("LDSM", ((".16",), (".M88", ".MT88"), (".1", ".2", ".4")), "R, A"),
    ("DEPBAR", ((".LE",),), "SB0, I"),
    ("IADD3", (), "R, R, R, R"), ("IADD3", (), "R, R, I, R"), ("IADD3", (), "R, R, C, R"),
    ("IADD3", (), "R, D, R, R, R"), ("IADD3", (), "R, D, D, R, R, R"),
    ("IADD3", ((".X",),), "R, R, R, R, P"), ("IADD3", ((".X",),), "R, R, R, R, P, P"),
    ("IADD3", ((".X",),), "R, R, I, R, P"), ("IADD3", ((".X",),), "R, R, C, R, P"),
    ("IADD3", ((".X",),), "R, R, R, I, P"), ("IADD3", ((".X",),), "R, R, I, R, P, P"),
    ("LEA", (("", ".HI"), ("", ".X"), ("", ".SX32")), "R, R, R, I"),
    ("LEA", (("", ".HI"), ("", ".X"), ("", ".SX32")), "R, R, C, I"),
    ("LEA", (("", ".HI"), ("", ".X"), ("", ".SX32")), "R, R, R, R, I"),
    ("IMAD", (("", ".MOV", ".SHL", ".IADD"), ("", ".U32", ".S32"), ("",)), "R, R, R, R"),
    ("IMAD", (("", ".U32"),), "R, R, I, R"), ("IMAD", (("", ".U32"),), "R, R, C, R"),
    ("IMAD", ((".X",),), "R, R, R, R, P"),
    ("IMAD", ((".WIDE",), ("", ".U32")), "W, R, R, W"), ("IMAD", ((".WIDE",), ("", ".U32")), "W, R, I, W"),
    ("IMAD", ((".HI",), ("", ".U32")), "R, R, R, R"),
    ("ISETP", ((".EQ", ".NE", ".LT", ".GT", ".GE", ".LE"), ("", ".U32", ".S32"), (".AND", ".OR", ".XOR")), "D, D, R, R, P"),
    ("ISETP", ((".LT", ".GE"), ("", ".U32"), (".AND",)), "D, D, R, I, P"),
    ("LOP3", ((".LUT",),), "R, R, R, R, I8"), ("LOP3", ((".LUT",),), "R, R, I, R, I8, P"),
    ("SHF", ((".L", ".R"), ("", ".S32", ".U32", ".S64", ".U64"), ("", ".HI")), "R, R, I, R"),
    ("SHF", ((".L", ".R"), ("", ".U32")), "R, R, R, R"),
    ("PRMT", (), "R, R, I, R"), ("SEL", (), "R, R, R, P"), ("SEL", (), "R, R, I, P"),
    ("SGXT", (("", ".U32"),), "R, R, I"), ("IABS", (), "R, R"), ("IMNMX", (("", ".U32"),), "R, R, R, P"),
    ("HADD2", (), "R, R, R"), ("HFMA2", (), "R, R, R, R"), ("HMUL2", (), "R, R, R"),
    ("FFMA", (), "R, R, R, R"), ("FFMA", (), "R, R, F, R"), ("FFMA", (), "R, R, C, R"), ("FFMA", (), "R, R, R, C"),
    ("MUFU", ((".COS", ".SIN", ".EX2", ".LG2", ".RCP", ".RSQ", ".SQRT"),), "R, R"),
    ("FADD", (), "R, R, R"), ("FADD", (), "R, R, F"), ("FMUL", (), "R, R, R"), ("FMUL", (), "R, R, F"),
    ("FMNMX", (), "R, R, R, P"),
    ("HMMA", ((".1688",), (".F16", ".F32")), "Q, W, R, Q"),
    ("HMMA", ((".16816",), (".F16", ".F32")), "Q, Q, W, Q"),
    ("IMMA", ((".8816", ".8832"), (".U8", ".S8"), (".U8", ".S8")), "W, R.ROW, R.COL, W"),
    ("BMMA", ((".88128",), (".POPC",)), "W, R.ROW, R.COL, W"),
    ("CS2R", (), "R, SR_CLOCKLO"), ("CS2R", (), "W, SRZ"),
    *[("S2R", (), f"R, {sr}") for sr in _SR], ("NOP", (), ""),
    ("BAR", ((".SYNC",),), "I4"),
    ("SHFL", ((".IDX", ".UP", ".DOWN", ".BFLY"),), "D, R, R, I5, I5"),
    ("F2F", ((".F16",), (".F32",)), "R, R"),
    ("F2I", (("", ".FTZ"), ("", ".U32", ".S32"), ("", ".TRUNC", ".FLOOR", ".CEIL")), "R, R"),
    ("I2F", (("", ".U32", ".S32"), ("", ".RN", ".RM", ".RP", ".RZ")), "R, R"),
    ("ATOMS", ((".ADD", ".EXCH"),), "R, A, R"),
    ("P2R", (), "R, PR, R, I"), ("P2R", (), "R, PR, I"), ("R2P", (), "PR, R, I"),
    # control flow (the files have a label TOP)
    ("BRA", (), "TOP"),          # (TuringAs cannot find the label of a BRA.U) ("BSSY", (), "B0, TOP"), ("BSYNC", (), "B0"),
    ("BMOV", ((".32",), (".CLEAR",)), "R, B0"), ("YIELD", (), ""),
    ("BAR", ((".SYNC.DEFER_BLOCKING",),), "I4"), ("LDGDEPBAR", (), ""),
    # uniform datapath (sm_75+)
    ("UMOV", (), "U, U"), ("UMOV", (), "U, I"), ("UMOV", (), "U, C"), *[("S2UR", (), f"U, {sr}") for sr in _SR],
    ("ULDC", (("", ".64"),), "UW, C"),
    ("USHF", ((".L", ".R"), ("", ".U32", ".S32"), ("", ".HI")), "U, U, I, U"),
    ("UIADD3", (("", ".X"),), "U, U, U, U"), ("UIADD3", (), "U, U, I, U"),
    ("ULEA", (("", ".HI"),), "U, U, U, I5"),
    # more operand forms
    ("IADD3", (), "R, R, R, I"), ("IADD3", (), "R, R, U, R"),
    ("IMAD", ((".WIDE",), ("", ".U32")), "W, R, C, W"), ("IMAD", (("", ".U32"),), "R, R, R, U"),
    ("ISETP", ((".GE", ".NE"), ("", ".U32"), (".AND",)), "D, D, R, C, P"),
    ("ISETP", ((".GE",), ("", ".U32"), (".AND",)), "D, D, R, U, P"),
    ("LOP3", ((".LUT",),), "D, R, R, R, R, I8"), ("LOP3", ((".LUT",),), "R, R, C, R, I8, P"),
    ("SHFL", ((".IDX", ".BFLY"),), "D, R, R, R, I5"),
    ("FADD", (), "R, R, C"), ("FMUL", (), "R, R, C"), ("FFMA", (), "R, R, R, F"),
    ("MUFU", ((".RCP64H", ".RSQ64H"),), "R, R"), ("MUFU", ((".RCP",),), "R, C"),
    ("F2FP", (("", ".RELU"), ("", ".BF16"), (".PACK_AB",)), "R, R, R"),
    ("HMMA", ((".884",), (".F16", ".F32"), (".F16", ".F32"), (".STEP0", ".STEP1", ".STEP2", ".STEP3")),
     "Q, W.ROW, W.COL, Q"),
    ("ATOMS", ((".CAS",),), "R, A, R, R"),
    ("ATOMG", ((".EXCH",), ("", ".STRONG"), ("", ".GPU", ".SYS")), "R, A, R"),
    ("RED", ((".E",), (".ADD", ".MIN"), (".U32", ".S32", ".F32"), ("", ".STRONG"), ("", ".GPU", ".SYS")), "A64, R"),
    ("RED", ((".E",), (".ADD", ".MIN"), (".U32", ".S32", ".F32"), ("", ".STRONG"), ("", ".GPU", ".SYS")), "A, R"),
    ("LDG", ((".E",), ("", ".64", ".128")), "R, AU"),
    ("LDGSTS", ((".E",), ("", ".BYPASS"), ("", ".LTC128B"), ("", ".64", ".128")), "AS, AG"),
]


def mnemonics(opcode: str, choices: tuple) -> list[str]:
    return [opcode + "".join(c) for c in itertools.product(*choices)] if choices else [opcode]


def _operand(field: str, rng: random.Random, mnemonic: str) -> str:
    if field[:1] in ("W", "Q") and "." in field:        # a register group with a layout
        base, _, suffix = field.partition(".")
        return _operand(base, rng, mnemonic) + "." + suffix
    if field.startswith("R"):
        # aligned for any register group up to 128 bits: what a spelling means must not depend
        # on the register drawn (TuringAs's `CS2R R5, SR_CLOCKLO` reads 32 bits; nvdisasm's
        # 64-bit CS2R refuses R5 but takes R4, and only then is the spelling ambiguous)
        return f"R{rng.randrange(0, 16) * 4}" + field[1:]
    n = rng.randrange(0, 32) * 4
    if field == "W":
        return f"R{rng.randrange(0, 32) * 2}"
    if field == "Q":
        return f"R{rng.randrange(0, 16) * 4}"
    if field == "P":
        return rng.choice(("P0", "P1", "P3", "PT", "!P2"))
    if field == "D":                      # a predicate written: never negated, never PT
        # (nvdisasm leaves a PT destination out: `LOP3.LUT PT, R4, ...` prints as the form
        # without one, and the spelling would be judged by another form's text)
        return rng.choice(("P0", "P1", "P3"))
    if field == "I":
        return rng.choice((str(rng.randrange(0, 32)), hex(rng.randrange(0, 32))))
    if field in ("I4", "I5", "I8"):
        return hex(rng.randrange(0, {"I4": 15, "I5": 32, "I8": 256}[field]))
    if field == "C":
        return f"c[0x0][{hex(0x160 + n)}]"
    if field == "F":
        return rng.choice(("1.5", "-2.0", "0.25", "3.0"))
    if field == "A":
        return f"[R{rng.randrange(0, 32) * 2}+{hex(n * 4)}]"
    if field == "U":
        return f"UR{rng.randrange(0, 32)}"
    if field == "UW":
        return f"UR{rng.randrange(0, 16) * 2}"
    if field == "AU":
        return f"[R{rng.randrange(0, 32) * 2}.64+UR{rng.randrange(0, 32)}+{hex(n * 4)}]"
    if field == "AS":
        return f"[R{rng.randrange(0, 64)}+{hex(n * 4)}]"
    if field in ("AG", "A64"):
        return f"[R{rng.randrange(0, 32) * 2}.64+{hex(n * 4)}]"
    if field == "S":
        return rng.choice(_SR)
    return field


def instruction(opcode: str, mnemonic: str, template: str, rng: random.Random) -> str:
    ops = ", ".join(_operand(f, rng, mnemonic) for f in template.split(", ")) if template else ""
    return f"{mnemonic} {ops};" if ops else f"{mnemonic};"


def all_spellings() -> list[tuple[str, str, str]]:
    """(opcode, mnemonic, operand template) for every spelling."""
    return [(op, m, t) for op, choices, t in SPELLINGS for m in mnemonics(op, choices)]


# ---- the table: what each spelling means where TuringAs writes it --------------------------
# Modifiers TuringAs leaves implied that the word spells out (a default scope or strength, a
# type, the one BMMA operation), and modifiers it accepts that stand for the default and that
# nvdisasm leaves out. Any other difference is TuringAs writing bits that mean something else.
# (RED.E.ADD.F32: the float reduction is .FTZ.RN, the only one there is.)
IMPLIED = {"SYS", "GPU", "STRONG", "U32", "32", "XOR", "FTZ", "RN"}
# (IMAD.MOV/.SHL/.IADD: TuringAs writes a plain IMAD for them; .SYS is its default scope, the
# bits of no scope: its LDG.E.SYS is its LDG.E, bit for bit, on every arch; .U32, RED's default
# type, which its grammar wants written.)
DEFAULTS = {"32", "E", "U", "1", "S32", "RN", "MOV", "SHL", "IADD", "SYS", "U32"}
# Defaults that TuringAs sets and that nvdisasm reads as the other meaning (SGXT is signed).
WRONG_IMPLIED = {("SGXT", "U32")}


def _kinds(inst) -> list[tuple]:
    """An instruction's operands by kind (TuringAs cuts a value to its field and puts a negated
    predicate's sign into the next field without a word: matters of values, which sassas
    checks, not of the spelling)."""
    out = []
    for op in inst.operands:
        out.append((op.kind, op.flags - {"!"}))
    return out


def _align(written: list[tuple], canon) -> Optional[list[str]]:
    """The canonical operands as the written ones (`$i`) and the ones TuringAs fills in (RZ,
    URZ, a predicate or uniform predicate), in order; None where they do not line up so."""
    from sassas.ast import ZERO_NAMES, format_operand
    out, i = [], 0
    for op in canon.operands:
        if i < len(written) and (op.kind, op.flags - {"!"}) == written[i]:
            out.append(f"${i}")
            i += 1
        elif op.kind in ("P", "UP") or ZERO_NAMES.get((op.kind, *op.values[:1])) in ("RZ", "URZ"):
            out.append(format_operand(op))
        else:
            return None
    return out if i == len(written) else None


def _without_wide_address(written, canon, sassas_word) -> Optional[list[str]]:
    """The operand order for a spelling whose `.64` address (TuringAs's `[R2.64+0x10]`) is a
    bit nvdisasm does not print and the arch's forms have no `.64` for (RED on sm_70/75, where
    `.E` says the address is 64-bit): the written operand with the flag dropped (`$0-.64`).
    None where the arch writes the `.64` (sm_80's RED: the flag means something there)."""
    from dataclasses import replace

    from sassas.ast import format_operand
    kinds = _kinds(written)
    order = _align([(k, f - {".64"}) for k, f in kinds], canon)
    wide = [i for i, (_k, f) in enumerate(kinds) if ".64" in f]
    if order is None or not wide:
        return None
    ops = [format_operand(replace(op, flags=op.flags | {".64"}) if i in wide else op)
           for i, op in enumerate(canon.operands)]
    if sassas_word(f"{'.'.join((canon.opcode, *canon.modifiers))} {', '.join(ops)};") is not None:
        return None
    return [o + "-.64" if o[0] == "$" and int(o[1:]) in wide else o for o in order]


def classify(line: str, word: int, arch: int, read: Optional[str]) -> Optional[dict]:
    """What the TuringAs spelling in `line` means on `arch`, given the word TuringAs wrote and
    nvdisasm's text of it (`read`, None where nvdisasm reads no instruction in it): None where
    sassas already writes that word from the line as it stands, else an entry."""
    import sassas
    from sassas.elf import read_cubin
    from sassas.isa import get_isa
    from sassas.isa.forms import form_key, form_name
    from sassas.parse import parse_instruction
    isa = get_isa(f"sm_{arch}")

    def sassas_word(text: str) -> Optional[int]:
        try:
            c = sassas.assemble(f"<params>\nx, 4\n</params>\nTOP:\n--:-:-:-:2  {text}\n--:-:-:-:2  EXIT;\n",
                                arch=f"sm_{arch}", kernel_name="kern", dialect="nvdisasm")
        except sassas.SassError:
            return None
        return int.from_bytes(read_cubin(bytes(c)).kernels[0].code[:16], "little")

    written = parse_instruction(line)
    try:
        canon = isa.decode(word)
        text = isa.format(canon)
    except Exception:
        wrong = (f"read by nvdisasm as {read.split()[0]}, a word sassas's description does not decode"
                 if read else "an illegal instruction (nvdisasm reads no instruction in it)")
        return {"wrong": wrong, **({"refuse": True} if sassas_word(line) is None else {})}
    # The spelling as written, with the operands TuringAs wrote (it cuts values to their fields
    # without a word, which sassas refuses: a matter of values, not of the spelling).
    from sassas.ast import format_operand
    spelled = ".".join((written.opcode, *written.modifiers))
    ops = [format_operand(op) for op in canon.operands[:len(written.operands)]]
    order = _align(_kinds(written), canon)
    if order is None:
        as_written = sassas_word(line)      # TuringAs dropped or moved an operand written
        if as_written is None:
            order = _without_wide_address(written, canon, sassas_word)
    else:
        as_written = sassas_word(f"{spelled} {', '.join(ops)};" if ops else f"{spelled};")
    if as_written == word:
        return None
    mods_w, mods_c = set(written.modifiers), set(canon.modifiers)
    dropped, added = mods_w - mods_c, mods_c - mods_w
    name = ".".join((canon.opcode, *canon.modifiers))
    ok = (canon.opcode == written.opcode and dropped <= DEFAULTS and added <= IMPLIED
          and not any((written.opcode, t) in WRONG_IMPLIED for t in added) and order is not None)
    mine = sassas_word(text.rstrip(" ;") + ";") if ok else None
    if mine is None:
        # (the same mnemonic: what differs is the operands, which the forms show). The mnemonic
        # as nvdisasm prints it: the decoder's modifier order can hang on the encoding a word's
        # operands pick (sm_80's STG.E.64.MMIO.GPU), and the table must not hang on them.
        read_name = next((t for t in read.split() if not t.startswith("@")), name) if read else name
        wrong = (f"read by nvdisasm as {read_name}" if name != spelled else
                 f"read by nvdisasm as {name}{form_name(*form_key(canon))[len(canon.opcode):]} (written "
                 f"{spelled}{form_name(*form_key(written))[len(written.opcode):]})")
        if as_written is not None:
            return {"wrong": wrong}
        # What is written, with the defaults nvdisasm leaves out dropped and as many of the
        # modifiers TuringAs implies added as go with it (STG.E.GPU on sm_80: TuringAs's word
        # reads as STG.E.STRONG.GPU.PRIVATE; written is STG.E.STRONG.GPU; RED.E.ADD.U32.STRONG.GPU
        # reads as RED.E.ADD.STRONG.SYS, written is RED.E.ADD.STRONG.GPU): sassas writes that,
        # with a warning.
        kept = [m for m in written.modifiers if m not in dropped & DEFAULTS]
        implied = sorted(added & IMPLIED)
        meant = None
        for n in range(len(implied), -1, -1) if order is not None else ():
            for extra in itertools.combinations(implied, n):
                completed = ".".join((written.opcode, *kept, *extra))
                if completed != spelled:
                    meant = sassas_word(f"{completed} {', '.join(ops)};" if ops else f"{completed};")
                if meant is not None:
                    break
            if meant is not None:
                break
        if meant is None:
            return {"wrong": wrong, "refuse": True}
        reading = isa.decode(meant)         # (its modifiers in nvdisasm's order)
        return {"to": ".".join((reading.opcode, *reading.modifiers)),
                **({"operands": order} if order != [f"${i}" for i in range(len(order))] else {}), "wrong": wrong}
    if name == spelled and order == [f"${i}" for i in range(len(order))]:
        return None     # the same text: TuringAs sets bits besides it (a divergence the test names)
    entry = {"to": name}
    if mine != word:
        # bits nvdisasm does not print (sm_80's LDS with TuringAs's .U bit, the hidden memory
        # descriptor UR0 of its LDG/STG): kept as TuringAs writes them
        mask = mine ^ word
        entry["raw"] = [hex(mask), hex(word & mask)]
    if order != [f"${i}" for i in range(len(order))]:
        entry["operands"] = order
    if as_written is not None:
        entry["ambiguous"] = True
    return entry


def build_table(rng: random.Random, tmp: Path) -> dict:
    spellings = all_spellings()
    lines = [instruction(op, m, t, rng) for op, m, t in spellings]
    files, defaults = [], []
    for i, line in enumerate(lines):
        p = tmp / f"s{i}.sass"
        p.write_text(f"<params>\nx, 4\n</params>\nTOP:\n--:-:-:-:2  {line}\n--:-:-:-:2  EXIT;\n")
        files.append(p)
        # the stall `-` stands for: TuringAs's latency of the spelling
        p = tmp / f"d{i}.sass"
        p.write_text(f"<params>\nx, 4\n</params>\nTOP:\n--:-:-:Y:-  {line}\n--:-:-:-:2  EXIT;\n")
        defaults.append(p)
    from sassas import dialect
    # sassas as it reads nvdisasm's text alone, without the table being made
    tables = dialect._tables
    tables.cache_clear()
    _, own = tables()
    dialect._tables = lambda: ({}, own)
    dialect.forget_shapes()
    try:
        return _build_table(spellings, lines, files, defaults, tmp)
    finally:
        dialect._tables = tables
        dialect.forget_shapes()


def _build_table(spellings, lines, files, defaults, tmp: Path) -> dict:
    from sassas.dialect import spelling_key
    from sassas.elf import read_cubin
    from sassas.parse import parse_instruction
    table: dict = {}
    for arch in ARCHS:
        outs = run_turingas(files, arch, tmp)
        latency_outs = run_turingas(defaults, arch, tmp)
        entries = table.setdefault(f"sm_{arch}", {})
        words = [int.from_bytes(read_cubin(out.read_bytes()).kernels[0].code[:16], "little") if out.exists()
                 else None for out in outs]
        read = oracle.disassemble([w for w in words if w is not None], f"sm_{arch}", oracle.DisasmCache(f"sm_{arch}"))
        for (op, m, t), line, word, lat in zip(spellings, lines, words, latency_outs):
            if word is None:
                continue        # TuringAs refuses it too
            key = spelling_key(m, parse_instruction(line).operands)
            entry = classify(line, word, arch, read[word].text if read.get(word) else None)
            if entry is not None:
                entries[key] = entry
            if not lat.exists():
                continue
            control = int.from_bytes(read_cubin(lat.read_bytes()).kernels[0].code[:16], "little") >> 105
            latency = control & 0x1F        # the stall field and the (Y: clear) yield bit above it
            if latency != 1:
                entries.setdefault(key, {})["latency"] = latency
    return table


def write_table(table: dict, path: Path) -> None:
    out = ["# TuringAs's spellings and what they mean on each arch: the instruction nvdisasm reads in",
           "# the word TuringAs writes for them (as sassas's decoder prints it). Generated by",
           "# `python -m sassas.learn.turingas` (TuringAs and its grammar are the oracle); do not edit.",
           "#   key: the spelling as written, its operands' kinds and its special registers",
           "#   to: the spelling it stands for; operands: its operands, $i the i-th written, others",
           "#   filled in by TuringAs (RZ, !PT);",
           "#   ambiguous: the spelling is also nvdisasm text, which means something else (warned);",
           "#   raw: [mask, bits] TuringAs sets that nvdisasm does not print, kept;",
           "#   wrong: TuringAs's word reads as this, not as what is written: sassas writes what is",
           "#   written (a warning in TuringAs's dialect; with to, completed with what TuringAs",
           "#   implies), or, with refuse, refuses it;",
           "#   latency: the stall a `-` stands for (1 where not given), a bit past the field",
           "#   falling into the yield bit as TuringAs writes it", ""]
    for arch, entries in table.items():
        out.append(f"[{arch}]")
        for key in sorted(entries):
            e = entries[key]
            fields = []
            for k in ("to", "operands", "raw", "ambiguous", "wrong", "refuse", "latency"):
                if k in e:
                    v = e[k]
                    fields.append(f"{k} = " + ("true" if v is True else str(v) if isinstance(v, int) else
                                               "[" + ", ".join(f'"{x}"' for x in v) + "]" if isinstance(v, list)
                                               else f'"{v}"'))
            out.append(f'"{key}" = {{ {", ".join(fields)} }}')
        out.append("")
    path.write_text("\n".join(out))


if __name__ == "__main__":
    if turingas_dir() is None:
        sys.exit("TuringAs not found: set SASSAS_TURINGAS")
    with tempfile.TemporaryDirectory() as tmp:
        write_table(build_table(random.Random(0), Path(tmp)), ROOT / "sassas" / "data" / "turingas.toml")
