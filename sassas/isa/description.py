"""The ISA description file (sassas/isa/data/sm_XX.toml): writing it diff-friendly, reading and
validating it; :func:`get_isa`, the description of an arch.

Layout (numbers in hex strings where they exceed TOML's 64-bit integers):

    arch = "sm_90"
    [syntax]                      how nvdisasm prints numbers
    [tables.SR]                   name = number, for name-valued fields
    [fields]                      name = { bits = "16:8", type = "u" }  one per distinct layout;
                                  bits "word_lsb:width" or "word_lsb:width@value_lsb", comma-separated
    [[form]]                      one encoding of one form (opcode + operand kinds)
    opcode, operands, guard       'FFMA', ['R', 'R', 'R', 'I'], 'P'
    values                        a field name or "=constant" per value: guard first, then operands
    match                         "mask:value": the bits that identify this encoding
    base                          the word before fields and groups are ORed in
    support                       corpus words it reproduces (the encoder prefers higher)
    reproduces                    the tokens of ptxas's words it reproduces bit-exactly, joined
                                  by ' ': modifiers in print order, then operand flags ('@2-');
                                  the encoder tries first an encoding that reproduced the
                                  instruction's (hidden bits ptxas sets with some modifiers only)
    tokens                        modifiers always printed by this encoding
    order                         modifier print order
    reuse                         { operand index = reuse bit }
    reuse_decode_only             { operand index = [reuse bits] } that also print .reuse on it
    descriptor                    a field nvdisasm does not print: the uniform register of the
                                  memory descriptor (Instruction.descriptor); base holds the
                                  default ptxas writes
    [descriptor_load]             mnemonic = "ULDC.64", constant = [bank, offset]: the load that
                                  puts the descriptor in a uniform pair (see resolve.py for how
                                  a listing's hidden descriptor is inferred from it)
    defer_when                    ["4=0"]: value conditions under which nvdisasm prints a word
                                  of this encoding by a more general form that matches it too
                                  (`c[0x0][RZ]`, not `c[0x0][0x0]`): the decoder passes it over
    aliases                       printing aliases decided by values, most specific first:
                                  { when = ["2=255", "3:pow2", "4!=255"], print = ["MOV"],
                                  unless = ["WIDE"] }: nvdisasm prints these tokens (value 0 =
                                  guard, then operand values) where the groups' modifiers
                                  include `needs` and none of `unless`
    [[form.group]]                bits = [..], values = { "TOKENS" = n }, default = n
                                  (TOKENS: modifiers joined by ' ' in print order, '@2-' = flag
                                  '-' on operand 2, '' = prints nothing; n is the group's bits
                                  packed low to high)
"""
from __future__ import annotations

import copy
import functools
import hashlib
import json
import re
from pathlib import Path
from typing import Optional

from ..arch import ARCHS
from ..cache import through_pickle
from ..errors import SassError
from ..kinds import VALUE_ROLES, value_pieces
from .engine import Isa
from .forms import CONTROL_MASK, MASK128, Alias, DescriptorLoad, Encoding, Field, Group, form_name

DATA_DIR = Path(__file__).resolve().parent / "data"

# How nvdisasm prints float immediates (the learner checks it against the corpus).
DEFAULT_SYNTAX = {"float_format": "%.20g", "float_format_large": "%.20e", "float_large_exponent": "9",
                  "negative_zero": "-0.0"}


# --------------------------------------------------------------------------- writing

def _q(s: str) -> str:
    return json.dumps(s)


def _hex(v: int) -> str:
    return f'"0x{v:032x}"'


def _bits_text(f: Field) -> str:
    return ",".join(f"{wl}:{w}" + (f"@{vl}" if vl else "") for wl, vl, w in f.segments)


def _bits_of(mask: int) -> list[int]:
    return [b for b in range(128) if mask >> b & 1]


def _pack(value: int, bits: list[int]) -> int:
    return sum(((value >> b) & 1) << i for i, b in enumerate(bits))


def _unpack(n: int, bits: list[int]) -> int:
    return sum(((n >> i) & 1) << b for i, b in enumerate(bits))


def _field_role(kind_letter: str, f: Field) -> str:
    if f.transform.startswith("table:"):
        return f.transform[6:].lower().replace(".", "_")
    return {"pcrel": "target", "f32": "f32", "f64hi": "f64hi", "f16": "f16"}.get(f.transform, kind_letter)


def value_kinds(e: Encoding) -> list[str]:
    """A role word for each value: guard, then per operand kind piece."""
    out = ["pred"]
    for kind in e.kinds:
        toks = value_pieces(kind)
        is_cbank = kind.startswith("C[")
        for i, t in enumerate(toks):
            role = VALUE_ROLES[t]
            if is_cbank and i == 0:
                role = "cbank"
            elif is_cbank and t in ("I", "+I"):
                role = "coffset"
            out.append(role)
    return out


def _print_order(e: Encoding, g: Group, v: int) -> list[str]:
    """A group value's tokens as nvdisasm prints them: its own modifier order where it has
    one, else the encoding's; operand flags last."""
    seq = g.sequences.get(v, ())
    rest = sorted(g.values[v] - set(seq), key=lambda x: (e.order_index.get(x, 999), x))
    return list(seq) + rest


def write_description(isa: Isa, path: Path, header: str = "") -> None:
    field_names: dict[Field, str] = {}
    uses: dict[Field, int] = {}
    roles: dict[Field, str] = {}
    in_file_order = sorted(isa.encodings, key=lambda e: (e.opcode, e.kinds, -e.specificity, e.match_value))
    # Field names by role, numbered in the file's own order: the same names however the
    # encodings were ordered in memory (reading and writing a file again leaves it as it was).
    for e in in_file_order:
        for f, role in zip(e.fields, value_kinds(e)):
            if isinstance(f, Field):
                uses[f] = uses.get(f, 0) + 1
                roles.setdefault(f, _field_role(role, f))
        if e.descriptor is not None:
            uses[e.descriptor] = uses.get(e.descriptor, 0) + 1
            roles.setdefault(e.descriptor, "ureg")
    per_role: dict[str, int] = {}
    for f in sorted(uses, key=lambda f: (roles[f], f.segments[0][0], -uses[f], _bits_text(f), f.transform)):
        n = per_role.get(roles[f], 0)
        per_role[roles[f]] = n + 1
        field_names[f] = f"{roles[f]}{n}"
    out = [f"# ISA description for {isa.arch}, generated by `python -m sassas.learn`: do not edit.",
           "# See sassas/isa/description.py for the layout."]
    if header:
        out += ["# " + line for line in header.splitlines()]
    out += [f"arch = {_q(isa.arch)}", "", "[syntax]"]
    out += [f"{k} = {_q(v)}" for k, v in sorted(isa.syntax.items())]
    if isa.descriptor_load is not None:
        bank, offset = isa.descriptor_load.constant
        out += ["", "[descriptor_load]", f"mnemonic = {_q(isa.descriptor_load.mnemonic)}",
                f"constant = [{bank}, 0x{offset:x}]"]
    for tname, table in sorted(isa.tables.items()):
        out += ["", f"[tables.{_q(tname)}]"]
        out += [f"{_q(k)} = {v}" for k, v in sorted(table.items(), key=lambda kv: (kv[1], kv[0]))]
    out += ["", "[fields]   # name = bits 'word_lsb:width[@value_lsb]', type; used by N forms"]
    for f, name in sorted(field_names.items(), key=lambda kv: kv[1]):
        out.append(f"{name} = {{ bits = {_q(_bits_text(f))}, type = {_q(f.transform)} }}   # {uses[f]}")
    for e in in_file_order:
        out += ["", "[[form]]", f"# {form_name(e.opcode, e.kinds)}",
                f"example = {_q(e.example)}",
                f"opcode = {_q(e.opcode)}",
                f"operands = [{', '.join(_q(k) for k in e.kinds)}]",
                f"guard = {_q(e.guard_kind)}",
                "values = [" + ", ".join(_q(field_names[f]) if isinstance(f, Field) else _q(f"={f[1]!r}")
                                          for f in e.fields) + "]",
                f"match = \"0x{e.match_mask:032x}:0x{e.match_value:032x}\"",
                f"base = {_hex(e.base)}"]
        if e.descriptor is not None:
            out.append(f"descriptor = {_q(field_names[e.descriptor])}")
        if e.support:
            out.append(f"support = {e.support}")
        if e.reproduces:
            out.append("reproduces = [" + ", ".join(_q(" ".join(t)) for t in
                                                   sorted(e.reproduces, key=lambda t: (len(t), t))) + "]")
        if e.fixed_tokens:
            out.append(f"tokens = [{', '.join(_q(t) for t in sorted(e.fixed_tokens))}]")
        if e.order:
            out.append(f"order = [{', '.join(_q(t) for t in e.order)}]")
        if e.reuse:
            out.append("reuse = { " + ", ".join(f"{_q(str(i))} = {b}" for i, b in sorted(e.reuse.items())) + " }")
        if e.reuse_decode_only:
            out.append("reuse_decode_only = { " + ", ".join(f"{_q(str(i))} = {sorted(bits)}" for i, bits in
                                                          sorted(e.reuse_decode_only.items())) + " }")
        if e.defer_when:
            out.append("defer_when = [" + ", ".join(_q(f"{j}{c}") for j, c in e.defer_when) + "]")
        if e.aliases:
            out.append("aliases = [")
            for a in e.aliases:
                out.append("  { when = [" + ", ".join(_q(f"{j}{c}" if c.startswith(("=", "!=")) else f"{j}:{c}")
                                                     for j, c in a.when) + "]"
                           + f", print = [{', '.join(_q(t) for t in sorted(a.add))}]"
                           + "".join(f", {key} = [{', '.join(_q(t) for t in sorted(toks))}]"
                                     for key, toks in (("instead_of", a.drop), ("needs", a.needs),
                                                       ("unless", a.unless)) if toks)
                           + " },")
            out.append("]")
        for g in e.groups:
            bits = _bits_of(g.mask)
            vals = sorted(((" ".join(_print_order(e, g, v)), _pack(v, bits)) for v in g.values),
                          key=lambda kv: kv[1])
            # Several values may print alike: the first (or the default) is the one to encode,
            # the others are listed for decoding only.
            default_n = _pack(g.default, bits) if g.default >= 0 else None
            vals.sort(key=lambda kv: (kv[0], kv[1] != default_n, kv[1]))
            canonical, aliases = {}, []
            for k, n in vals:
                if k in canonical:
                    aliases.append((n, k))
                else:
                    canonical[k] = n
            out += ["[[form.group]]", f"bits = {bits}",
                    "values = { " + ", ".join(f"{_q(k)} = {n}" for k, n in
                                              sorted(canonical.items(), key=lambda kv: kv[1])) + " }"]
            if aliases:
                out.append("decode_only = { " + ", ".join(f'"{n}" = {_q(k)}' for n, k in sorted(aliases)) + " }")
            if g.default >= 0:
                out.append(f"default = {_pack(g.default, bits)}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(out) + "\n")


# --------------------------------------------------------------------------- reading

def _parse_field(spec: dict) -> Field:
    segs = []
    for part in spec["bits"].split(","):
        loc, _, vl = part.partition("@")
        wl, w = loc.split(":")
        segs.append((int(wl), int(vl or 0), int(w)))
    return Field(tuple(segs), spec.get("type", "u"))


def _value_conditions(specs: list, where: str) -> tuple:
    """["2=255", "3:pow2", "4!=255"] -> ((2, "=255"), (3, "pow2"), (4, "!=255"))."""
    when = []
    for w in specs:
        m = re.fullmatch(r"(\d+)(!?=.*|:.*)", w)
        if not m:
            raise SassError(f"{where}: value condition {w!r} is not 'N=V', 'N!=V' or 'N:pow2'")
        when.append((int(m.group(1)), m.group(2).lstrip(":")))
    return tuple(when)


def _parse_alias(spec: dict, where: str) -> Alias:
    if not isinstance(spec, dict) or "when" not in spec:
        raise SassError(f"{where}: an alias needs 'when' and 'print'")
    when = _value_conditions(spec["when"], where)
    return Alias(when, frozenset(spec.get("print", ())), frozenset(spec.get("instead_of", ())),
                 frozenset(spec.get("needs", ())), frozenset(spec.get("unless", ())))


def _parse_const(text: str):
    import ast as pyast
    try:
        return pyast.literal_eval(text[1:])
    except (ValueError, SyntaxError):
        return float(text[1:])        # inf, nan


def load_description_cached(path: Path) -> Isa:
    """load_description, through a pickle of its result in cache_dir(): reading the TOML takes
    about a second for sm_90, the pickle a sixth of that. The TOML stays the source of truth:
    the pickle is named by a hash of it and of the code that reads it, so a changed file (or
    sassas) is read afresh. A cache that cannot be read or written is passed by."""
    text = path.read_bytes()
    digest = hashlib.sha256(text)
    for code in (Path(__file__), Path(__file__).with_name("forms.py"), Path(__file__).with_name("engine.py")):
        digest.update(code.read_bytes())
    return through_pickle(f"isa-{path.stem}-{digest.hexdigest()[:24]}.pickle", Isa,
                          lambda: _share_equal_tokens(load_description(path, text.decode())))


def _share_equal_tokens(isa: Isa) -> Isa:
    """The description with each of its equal token sets and token sequences (and the strings
    in them) one object: its modifier groups repeat some ten thousand of them more than a
    hundred thousand times, and its pickle then holds each once (and loads sooner)."""
    seen: dict = {}

    def share(value):
        kind = type(value)
        if kind is str:
            return seen.setdefault(value, value)
        if (kind is frozenset or kind is tuple) and all(type(x) is str for x in value):
            value = kind(share(x) for x in value)
            return seen.setdefault((kind, value), value)
        return value

    for e in isa.encodings:
        for g in e.groups:
            g.values = {v: share(toks) for v, toks in g.values.items()}
            g.by_tokens = {share(toks): v for toks, v in g.by_tokens.items()}
            g.sequences = {v: share(seq) for v, seq in g.sequences.items()}
        e.fixed_tokens, e.order, e.kinds = share(e.fixed_tokens), share(e.order), share(e.kinds)
    return isa


def load_description(path: Path, text: Optional[str] = None) -> Isa:
    import tomllib          # (only where the pickle is not at hand)
    data = tomllib.loads(text if text is not None else path.read_text())
    arch = data["arch"]
    fields = {name: _parse_field(spec) for name, spec in data.get("fields", {}).items()}
    encodings = []
    for n, form in enumerate(data.get("form", [])):
        where = f"{path.name}: form {n} ({form.get('opcode')})"
        vals = []
        for v in form["values"]:
            if v.startswith("="):
                vals.append(("const", _parse_const(v)))
            elif v in fields:
                vals.append(fields[v])
            else:
                raise SassError(f"{where}: unknown field {v!r}")
        mask, value = (int(x, 16) for x in form["match"].split(":"))
        groups = []
        for g in form.get("group", []):
            bits = g["bits"]
            table, sequences = {}, {}
            for toks, packed in [(t, p) for t, p in g["values"].items()] + \
                    [(t, int(p)) for p, t in g.get("decode_only", {}).items()]:
                v = _unpack(packed, bits)
                table[v] = frozenset(toks.split())
                mods = tuple(t for t in toks.split() if not t.startswith("@"))
                if len(mods) > 1:
                    sequences[v] = mods
            default = _unpack(g["default"], bits) if "default" in g else -1
            grp = Group(sum(1 << b for b in bits), table, default, sequences=sequences)
            if default < 0:
                grp.by_tokens.pop(frozenset(), None)
            groups.append(grp)
        e = Encoding(opcode=form["opcode"], kinds=tuple(form["operands"]), guard_kind=form.get("guard", "P"),
                     match_mask=mask, match_value=value, base=int(form["base"], 16), fields=vals,
                     groups=groups, fixed_tokens=frozenset(form.get("tokens", ())),
                     order=tuple(form.get("order", ())),
                     reuse={int(k): v for k, v in form.get("reuse", {}).items()},
                     reuse_decode_only={int(k): tuple(v) for k, v in form.get("reuse_decode_only", {}).items()},
                     name=form_name(form["opcode"], form["operands"]), example=form.get("example", ""),
                     aliases=[_parse_alias(a, where) for a in form.get("aliases", [])],
                     defer_when=_value_conditions(form.get("defer_when", []), where),
                     support=form.get("support", 0),
                     reproduces=frozenset(tuple(t.split()) for t in form.get("reproduces", ())))
        if "descriptor" in form:
            if form["descriptor"] not in fields:
                raise SassError(f"{where}: unknown descriptor field {form['descriptor']!r}")
            e.descriptor = fields[form["descriptor"]]
        validate_encoding(e, where)
        encodings.append(e)
    syntax = dict(DEFAULT_SYNTAX, **data.get("syntax", {}))
    load = data.get("descriptor_load")
    descriptor_load = DescriptorLoad(load["mnemonic"], tuple(load["constant"])) if load else None
    return Isa(arch, encodings, data.get("tables", {}), syntax, descriptor_load)


def validate_encoding(e: Encoding, where: str = "") -> None:
    """Fields fit the word, no bit is claimed twice, match bits are fixed bits."""
    where = where or e.name
    claimed = CONTROL_MASK
    for f in e.fields:
        if isinstance(f, Field):
            if f.mask & ~MASK128:
                raise SassError(f"{where}: field beyond bit 127")
            if f.mask & claimed:
                raise SassError(f"{where}: field bits 0x{f.mask & claimed:x} assigned twice")
            claimed |= f.mask
    for g in e.groups:
        if g.mask & claimed:
            raise SassError(f"{where}: group bits 0x{g.mask & claimed:x} assigned twice")
        claimed |= g.mask
        for v in g.values:
            if v & ~g.mask:
                raise SassError(f"{where}: group value outside its bits")
    if set(e.reuse_decode_only) - set(e.reuse):
        raise SassError(f"{where}: reuse_decode_only names an operand without a reuse bit")
    for j, _cond in e.defer_when:
        if not (0 <= j < len(e.fields) and isinstance(e.fields[j], Field)):
            raise SassError(f"{where}: defer_when names value {j}, which is not a field")
    if e.match_mask & claimed:
        raise SassError(f"{where}: match bits overlap fields or groups")
    if e.descriptor is not None and e.descriptor.mask & (claimed | e.match_mask):
        raise SassError(f"{where}: the descriptor field overlaps printed bits")
    if e.match_value & ~e.match_mask or e.base & claimed & ~CONTROL_MASK:
        raise SassError(f"{where}: match value or base has bits outside their mask")


@functools.lru_cache(maxsize=None)
def get_isa(arch: str) -> Isa:
    path = DATA_DIR / f"{arch}.toml"
    shared = ARCHS[arch].isa_from if arch in ARCHS else ""
    if not path.exists() and shared:
        # (the same encodings, under this arch's name in messages)
        isa = copy.copy(get_isa(shared))
        isa.arch = arch
        return isa
    if not path.exists():
        known = sorted(p.stem for p in DATA_DIR.glob("sm_*.toml"))
        raise SassError(f"no ISA description for {arch} (have: {', '.join(known) or 'none'}); "
                        f"run python -m sassas.learn --arch {arch}")
    return load_description_cached(path)
