"""Which meaning a line has: TuringAs's dialect or nvdisasm's text.

The two agree on most spellings. Where they do not, the tables say so (data, not code):
`data/turingas.toml`, generated with TuringAs as the oracle, maps each TuringAs spelling with
implied parts to the spelling nvdisasm prints for the word TuringAs writes (`SHF.L` ->
`SHF.L.U32`, `IADD3.X R, R, R, R, P` -> `... P, !PT`, `LEA.HI R, R, R, I` -> `LEA.HI R, R,
R, RZ, I`), marks the spellings that are also nvdisasm text with another meaning
(`CS2R R5, SR_CLOCKLO`: TuringAs's 32-bit CS2R.32, nvdisasm's 64-bit pair write) and those
where TuringAs's word means something other than what is written (`wrong`: sassas writes what
is written, with a warning; with `to`, completed with what TuringAs implies: `STG.E.GPU` on
sm_80 -> `STG.E.STRONG.GPU`; with `refuse` where sassas cannot write the written spelling
either); `data/spellings.toml` holds sassas's own explicit spellings (`CS2R.64`).

A file's dialect: `nvdisasm` for a cuobjdump/nvdisasm listing and for a file that uses
sassas's directives (`.kernel`, `.param`, ...: TuringAs reads none of them); `turingas` for
a file in TuringAs's form (control-code prefixes `--:-:1:Y:4`, `<params>`/`<regs>` blocks);
`nvdisasm` again for bare instruction text (`/*0010*/ CS2R R6, SR_CLOCKLO ;` lines pasted from
a listing carry neither). The caller may force either (`--dialect`, `dialect=`), which also
silences the ambiguity warnings.
"""
from __future__ import annotations

import re
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Optional

from .ast import DEFAULT_LATENCY, ZERO_NAMES, ControlCode, Instruction, Operand
from .cache import load_toml
from .errors import SassError

DIALECTS = ("turingas", "nvdisasm")
_DATA = Path(__file__).parent / "data"
_DIRECTIVE = re.compile(r"^[ \t]*\.(?!include\b)[A-Za-z_]", re.M)
# What only TuringAs's form has: a control-code prefix at the start of a line, or a block.
_TURINGAS_FORM = re.compile(r"^[ \t]*(?:[0-9A-Fa-f-]{2}:[0-7-]:[0-7-]:[Yy-]:[0-9A-Fa-f-]|"
                            r"<(?:params|regs|consts|smem|code)>)", re.M | re.I)


def detect_dialect(text: str, listing: bool) -> str:
    if listing or _DIRECTIVE.search(text) or not _TURINGAS_FORM.search(text):
        return "nvdisasm"
    return "turingas"


@lru_cache(maxsize=None)
def _tables() -> tuple[dict, dict]:
    turingas = load_toml((_DATA / "turingas.toml").read_bytes(), "turingas")
    own = load_toml((_DATA / "spellings.toml").read_bytes(), "spellings")["spellings"]
    return turingas, own


_FILLED_IN = re.compile(r"(!?)(U?P)([0-6]|T)$|U?RZ$")
_ZERO_REGISTERS = {name: Operand(kind, (value,)) for (kind, value), name in ZERO_NAMES.items()}


@lru_cache(maxsize=None)
def _filled_in(text: str) -> Operand:
    """An operand TuringAs fills in: RZ, URZ or a predicate (`!PT`, `P0`, `!UPT`)."""
    m = _FILLED_IN.match(text)
    if m.group(2) is None:
        return _ZERO_REGISTERS[text]
    return Operand(m.group(2), (7 if m.group(3) == "T" else int(m.group(3)),), frozenset("!" if m.group(1) else ()))


def _written(operands: tuple, ref: str) -> Operand:
    """`$i`: the i-th operand written; `$i-.64`: it without the flag (TuringAs's `.64` address
    where the arch's `.E` says it)."""
    index, _, flag = ref[1:].partition("-")
    op = operands[int(index)]
    return replace(op, flags=op.flags - {flag}) if flag else op


def _rewrite(inst: Instruction, entry: dict) -> None:
    opcode, *mods = entry["to"].split(".")
    inst.opcode, inst.modifiers = opcode, tuple(mods)
    order = entry.get("operands")
    if order is not None:
        inst.operands = tuple(_written(inst.operands, o) if o[0] == "$" else _filled_in(o) for o in order)
    raw = entry.get("raw")
    if raw is not None and inst.raw is None:
        inst.raw = (int(raw[0], 16), int(raw[1], 16))


_VALUE_FLAGS = frozenset({"!", "-", "|", "~", "reuse"})
# A parameter's word (`n[0]`), resolved later, is a constant-bank operand.
_KIND_OF_NAME = {"N[I]": "C[I][I]"}


def spelling_key(spelling: str, operands) -> str:
    """A table's key: the spelling, its operands' kinds (`[R+I].64`: TuringAs's LDG with a 64-bit
    address) and its special registers (TuringAs's `CS2R R, SR_CLOCKLO` is CS2R.32, its
    `CS2R R, SRZ` the 64-bit CS2R)."""
    kinds = [_KIND_OF_NAME.get(op.kind, op.kind) + "".join(sorted(op.flags - _VALUE_FLAGS)) for op in operands]
    return " ".join([spelling, *kinds, *(str(op.values[0]) for op in operands if op.kind == "SR")])


# (arch, Shape) -> the stall TuringAs writes for `-`, for the shapes that the tables leave as
# they are (most: no special register among the operands, no entry that rewrites or warns):
# those need no more than that, found once a shape.
_stall_of_plain_shape: dict = {}


def apply_dialect(inst: Instruction, arch: str, dialect: str, forced: bool) -> Optional[str]:
    """Rewrite `inst` in place to the spelling it stands for in `dialect`; a warning to give,
    or None."""
    shape = inst.shape
    stall = _stall_of_plain_shape.get((arch, shape))
    if stall is not None:
        if inst.control is not None and inst.control.stall == DEFAULT_LATENCY:
            inst.control = _with_latency(inst.control, stall)
        return None
    turingas, own = _tables()
    spelling, entry = _spelling_and_entry(inst, arch, turingas)
    if inst.control is not None and inst.control.stall == DEFAULT_LATENCY:
        inst.control = _with_latency(inst.control, entry.get("latency", 1))
    mine = own.get(spelling)
    if mine is None and "wrong" not in entry and "to" not in entry and \
            not any(kind == "SR" for kind, _flags in shape.operands):
        _stall_of_plain_shape[(arch, shape)] = entry.get("latency", 1)
    if mine is not None:
        _rewrite(inst, mine)
        return None
    if "wrong" not in entry and "to" not in entry:
        return None
    if "wrong" in entry:
        if entry.get("refuse"):
            raise SassError(f"{spelling} is refused on {arch}: TuringAs's word for it is {entry['wrong']}, "
                            f"which sassas does not write; write the instruction you mean "
                            f"as nvdisasm spells it (`sassas isa --arch {arch} {inst.opcode}` lists them)", inst.loc)
        meant = entry.get("to", spelling)
        if "to" in entry:
            _rewrite(inst, entry)
        if dialect == "turingas" and not forced:
            return (f"TuringAs's word for {spelling} on {arch} is {entry['wrong']}; sassas writes "
                    f"{meant} as nvdisasm reads it")
        return None
    if entry.get("ambiguous"):
        if dialect != "turingas":
            return None
        _rewrite(inst, entry)
        if forced:
            return None
        return (f"{spelling} means {entry['to']} in TuringAs's dialect, which this file is read in, "
                f"and something else in nvdisasm's text; taken as {entry['to']}: write "
                f"{entry['to']} to say so, or choose with --dialect turingas|nvdisasm"
                + (f" ({own_hint})" if (own_hint := _explicit_hint(spelling, own)) else ""))
    _rewrite(inst, entry)
    return None


# TuringAs writes sm_70..sm_86. A TuringAs file assembled for a newer arch keeps what its
# spellings mean there (implied parts, CS2R's 32-bit clock read, default stalls), as on the newest
# arch TuringAs knows; TuringAs's misencodings ("wrong") do not carry over: it wrote no word there.
_NEWEST_TURINGAS_ARCH = "sm_86"


def leaves_shape(arch: str, shape) -> bool:
    """Whether apply_dialect, having seen an instruction of `shape`, leaves every instruction
    of that shape as it is, but for a stall written `-`."""
    return (arch, shape) in _stall_of_plain_shape


# (arch, shape, special registers) -> (spelling, table entry): looked up once a shape, not once
# an instruction (a file repeats few shapes).
_entry_of_shape: dict = {}


def forget_shapes() -> None:
    """Drop what was found per shape (the table's entries, the plain shapes): for the table's
    generator, which reads files with the tables swapped out and back."""
    _entry_of_shape.clear()
    _stall_of_plain_shape.clear()


def _spelling_and_entry(inst: Instruction, arch: str, turingas: dict) -> tuple[str, dict]:
    key = (arch, inst.shape, tuple(op.values[0] for op in inst.operands if op.kind == "SR"))
    known = _entry_of_shape.get(key)
    if known is None:
        spelling = ".".join((inst.opcode, *inst.modifiers))
        known = _entry_of_shape[key] = (spelling, _entry(turingas, arch, spelling_key(spelling, inst.operands)))
    return known


def _entry(turingas: dict, arch: str, key: str) -> dict:
    if arch in turingas:
        return turingas[arch].get(key, {})
    if int(arch.removeprefix("sm_").rstrip("af")) > int(_NEWEST_TURINGAS_ARCH.removeprefix("sm_")):
        entry = turingas[_NEWEST_TURINGAS_ARCH].get(key, {})
        return {k: v for k, v in entry.items() if k not in ("wrong", "refuse")}
    return {}


def _with_latency(control: ControlCode, latency: int) -> ControlCode:
    """The control code with TuringAs's stall for `-`: the spelling's latency, in the stall
    field, a bit past it falling into the yield bit as TuringAs writes it (S2UR's 20)."""
    bits = latency | (0 if control.yield_ else 1) << 4
    return replace(control, stall=bits & 0xF, yield_=not bits >> 4 & 1)


def _explicit_hint(spelling: str, own: dict) -> str:
    """sassas's explicit spelling of nvdisasm's meaning, where it has one (`CS2R.64`)."""
    for key, e in own.items():
        if e["to"] == spelling:
            return f"{key} is nvdisasm's meaning"
    return ""
