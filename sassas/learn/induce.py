"""One learning round from the probes (:mod:`sassas.learn.probe`): each representative's encoding
(learn_encodings), then what single flips cannot show: reuse bits (learn_reuse) and the
printing aliases nvdisasm applies by value (learn_aliases, induce_aliases: rules generalised
from probed words).
"""
from __future__ import annotations

from typing import Callable, Optional

from ..isa.forms import (CONTROL_MASK, Encoding, Field, field_uniform_register, instruction_tokens,
                         uniform_field_zero, value_meets)
from . import oracle
from .probe import (MAX_NAME_BITS, PROBE_BITS, REUSE_BITS, SHOWS_REUSE_CONTROL, Sample, build_encoding, build_group,
                    classify, compatible, enumeration_words, groups_overlap_fields, modifier_groups, name_window,
                    pair_words, same_value, table_name, to_samples, widen_small_groups, widened_group)


# --------------------------------------------------------------------------- one learning round

def learn_encodings(reps: list[Sample], arch: str, cache: oracle.DisasmCache,
                    tables: dict[str, dict[str, int]],
                    log: Callable[[str], None] = print,
                    parse_failures: Optional[dict[str, str]] = None,
                    neighbours: Optional[list[Sample]] = None,
                    name_windows: Optional[dict] = None) -> list[Encoding]:
    """Probe each representative and build its encoding. Fills name `tables` (e.g. SR),
    `name_windows` (table -> the bits its names span, kept from round to round) and
    `neighbours` (valid words of other forms one flip away from a representative)."""
    name_windows = {} if name_windows is None else name_windows
    def disasm(words):
        return to_samples(oracle.disassemble(words, arch, cache), arch, parse_failures)

    flip_words = {rep.word: {b: rep.word ^ (1 << b) for b in PROBE_BITS} for rep in reps}
    results = disasm([w for d in flip_words.values() for w in d.values()])
    probes = []
    for rep in reps:
        flips = {b: results.get(w) for b, w in flip_words[rep.word].items()}
        probes.append((classify(rep, flips), flips))
    log(f"  probed {len(reps)} representatives ({len(reps) * len(PROBE_BITS)} flips)")
    pairs = disasm([w for p, _ in probes for _b1, _b2, w in pair_words(p)])
    for p, _flips in probes:          # every representative's name bits first: their span
        for j, bits in p.name_bits.items():
            tname = f"{p.rep.inst.opcode}.{table_name(p.rep.inst, j)}"
            lo, hi = min(bits), max(bits)
            wlo, whi = name_windows.get(tname, (lo, hi))
            if max(whi, hi) - min(wlo, lo) < MAX_NAME_BITS:
                name_windows[tname] = (min(wlo, lo), max(whi, hi))
    enum_words = []
    plans = []
    for p, flips in probes:
        groups_bits = modifier_groups(p, flips, pairs)
        name_plans = {}
        for j in p.name_bits:
            lo, width = name_window(p, j, name_windows, f"{p.rep.inst.opcode}.{table_name(p.rep.inst, j)}")
            name_plans[j] = (lo, width, enumeration_words(p.rep.word, list(range(lo, lo + width))))
        wide_bits = widen_small_groups(p, groups_bits)     # one to one with groups_bits
        plans.append(((wide_bits, groups_bits), name_plans))
        for bits in wide_bits:
            enum_words += enumeration_words(p.rep.word, bits)
        for _lo, _w, words in name_plans.values():
            enum_words += words
    enums = disasm(enum_words)
    log(f"  {len(pairs)} pair probes, {len(enum_words)} enumeration probes")
    encodings = []
    for (p, _flips), ((wide_bits, groups_bits), name_plans) in zip(probes, plans):
        groups = [g for g in (widened_group(p, wide, bits, enums) for wide, bits in zip(wide_bits, groups_bits)) if g]
        name_tables = {}
        for j, (lo, width, words) in name_plans.items():
            tname = f"{p.rep.inst.opcode}.{table_name(p.rep.inst, j)}"
            table = tables.setdefault(tname, {})
            for w in words:
                s = enums.get(w)
                if compatible(p.rep, s):
                    name = s.values[j]
                    if isinstance(name, str) and lo == name_windows.get(tname, (lo,))[0]:
                        table.setdefault(name, (w >> lo) & ((1 << width) - 1))
            name_tables[j] = (lo, width)
        enc = build_encoding(p, groups, name_tables)
        if wide_bits != groups_bits and groups_overlap_fields(enc):
            # a widened group took a bit that a value's field claims (an aligned register's
            # low bit): the groups as probed
            groups = [g for g in (build_group(p, bits, enums) for bits in groups_bits) if g]
            enc = build_encoding(p, groups, name_tables)
        enc.source_word = p.rep.word
        encodings.append(enc)
        if neighbours is not None:
            neighbours.extend(p.neighbours)
    return encodings


def learn_aliases(encodings: list[Encoding], arch: str, cache: oracle.DisasmCache,
                  tables: dict, samples_by_key: dict, log: Callable[[str], None] = print,
                  parse_failures: Optional[dict[str, str]] = None) -> None:
    """Probe special values of each encoding and set its printing aliases. Where a word
    prints an alias (a probe or a corpus word), special values are probed around it too, and
    the same word with each other value of each modifier group: what keeps the alias from
    printing nearby (IMAD.IADD needs an addend other than RZ, IMAD.SHL never has .WIDE)."""
    from ..isa.engine import Isa
    isa = Isa("", [], tables, {})
    specials = alias_specials(arch)

    def disasm(words):
        return to_samples(oracle.disassemble(words, arch, cache), arch, parse_failures)
    plans = [(e, alias_probe_words(e, e.source_word, specials)) for e in encodings if e.source_word]
    results = disasm([w for _e, ws in plans for w in ws])
    around = []
    for e, words in plans:
        corpus = samples_by_key.get((e.opcode, e.kinds), [])
        shown = [s for s in [results.get(w) for w in words] + corpus if _prints_alias(isa, e, s)]
        seeds: dict = {}
        for s in shown:                  # a few words per distinct alias
            delta = instruction_tokens(s.inst) ^ isa._decode_tokens(e, s.word)
            seeds.setdefault(delta, [])
            if len(seeds[delta]) < ALIAS_SEEDS:
                seeds[delta].append(s.word)
        more = [(s.word & ~g.mask) | v for s in shown for g in e.groups for v in g.values]
        more += [w for ws in seeds.values() for seed in ws for w in alias_probe_words(e, seed, specials)]
        around.append([w for w in dict.fromkeys(more) if w & e.match_mask == e.match_value][:MAX_ALIAS_VARIANTS])
    results.update(disasm([w for ws in around for w in ws]))
    n = 0
    for (e, words), more in zip(plans, around):
        obs = [results[w] for w in words + more if results.get(w) is not None]
        obs += samples_by_key.get((e.opcode, e.kinds), [])
        e.aliases = induce_aliases(e, obs, tables, specials)
        n += bool(e.aliases)
    log(f"  {sum(len(ws) for _e, ws in plans) + sum(map(len, around))} alias probes, "
        f"{n} encodings with aliases")


def _prints_alias(isa, enc: Encoding, s: Optional[Sample]) -> bool:
    """The word prints modifiers other than its groups' (before any alias)."""
    if s is None or s.key != (enc.opcode, enc.kinds) or s.word & enc.match_mask != enc.match_value:
        return False
    base = isa._decode_tokens(enc, s.word)
    return base is not None and {t for t in instruction_tokens(s.inst) ^ base if not t.startswith("@")} != set()


# --------------------------------------------------------------------------- printing aliases

# Values probed for each role: the zero registers / true predicates, small immediates, and
# every power of two (nvdisasm's IMAD.SHL skips 0x10000: the rule is learned, not assumed).
# Registers by sassas's numbers; alias_specials gives them as an arch's fields hold them.
ALIAS_SPECIALS = {"reg": [255], "ureg": [255], "pred": [7], "upred": [7],
                  "imm": [0, 1, 2, 4, -1], "offset": [0], "coffset": [0]}
POWERS_OF_TWO = [1 << k for k in range(3, 32)]
ZERO_ROLES = ("reg", "ureg", "pred", "upred")
MAX_ALIAS_VARIANTS = 4000
ALIAS_SEEDS = 3


def alias_specials(arch: str) -> dict:
    """ALIAS_SPECIALS as `arch`'s fields hold them: the values the alias probes write into
    fields, and the alias rules' conditions (URZ is `=63` on sm_75..sm_90)."""
    zero = uniform_field_zero(arch)
    return {**ALIAS_SPECIALS, "ureg": [field_uniform_register(v, zero) for v in ALIAS_SPECIALS["ureg"]]}


def _plain_value(role: str, v, specials: dict):
    zero = specials.get(role, [None])[0] if role in ZERO_ROLES else None
    if role in ZERO_ROLES:
        return v if v != zero else 2 if role in ("reg", "ureg") else 1
    if role == "imm":
        return 3
    return v


def _put(word: int, f: Field, v) -> Optional[int]:
    if type(v) is not int or f.transform not in ("u", "n", "s"):
        return None
    raw = v & ((1 << f.value_bits) - 1) if f.transform == "s" else v
    if raw < 0 or raw & ~f.value_mask or (f.transform == "s" and not
                                          -(1 << (f.value_bits - 1)) <= v < 1 << (f.value_bits - 1)):
        return None
    if f.transform == "n":
        raw ^= f.value_mask
    return (word & ~f.mask) | f.insert(raw)


def plain_word(enc: Encoding, rep_word: int, specials: dict) -> int:
    """The word with no zero register and no special immediate among its values (`specials`:
    alias_specials of the arch)."""
    from ..isa.description import value_kinds
    roles = value_kinds(enc)
    plain = rep_word
    for j, f in enumerate(enc.fields):
        if j > 0 and isinstance(f, Field) and j < len(roles) and roles[j] in specials:
            raw = f.extract(rep_word)
            v = raw - (1 << f.value_bits) if f.transform == "s" and raw >> (f.value_bits - 1) & 1 else raw
            v = raw ^ f.value_mask if f.transform == "n" else v
            w = _put(plain, f, _plain_value(roles[j], v, specials))
            if w is not None:
                plain = w
    return plain


def learn_reuse(encodings: list[Encoding], arch: str, cache: oracle.DisasmCache,
                parse_failures: Optional[dict[str, str]] = None) -> None:
    """Reuse bits of register operands that the representative's probe could not see
    (nvdisasm prints no .reuse on RZ, nor on an instruction that may yield): flip each reuse
    bit of the plain word, with a control code that does not yield."""
    plans = []
    specials = alias_specials(arch)
    for e in encodings:
        known = known_reuse_bits(e)
        if not e.source_word or len(known) == len(REUSE_BITS):
            continue
        plain = plain_word(e, e.source_word, specials) & ~CONTROL_MASK | SHOWS_REUSE_CONTROL
        plans.append((e, {b: plain | (1 << b) for b in REUSE_BITS if REUSE_BITS[b] not in known}))
    results = to_samples(oracle.disassemble([w for _e, d in plans for w in d.values()], arch, cache),
                         arch, parse_failures)
    for e, flips in plans:
        for b, w in flips.items():
            s = results.get(w)
            if s is None or s.key != (e.opcode, e.kinds):
                continue
            shown = {i for i, op in enumerate(s.inst.operands) if "reuse" in op.flags}
            if len(shown) == 1:
                i = shown.pop()
                if i in e.reuse:
                    e.reuse_decode_only[i] = tuple(sorted({*e.reuse_decode_only.get(i, ()), REUSE_BITS[b]}))
                else:
                    e.reuse[i] = REUSE_BITS[b]


def known_reuse_bits(e: Encoding) -> set[int]:
    """The reuse bits known to print .reuse on some operand of this encoding."""
    return set(e.reuse.values()).union(*e.reuse_decode_only.values())


def alias_probe_words(enc: Encoding, rep_word: int, specials: dict) -> list[int]:
    """Words of this encoding whose values are 'special' (`specials`: zero registers, small and
    power-of-two immediates) alone, in pairs, and zero registers in threes, over a word
    whose values are all plain: what nvdisasm prints for them shows its value aliases."""
    from ..isa.description import value_kinds
    roles = value_kinds(enc)
    slots = [(j, f, roles[j]) for j, f in enumerate(enc.fields)
             if j > 0 and isinstance(f, Field) and j < len(roles) and roles[j] in specials]
    if not slots:
        return []
    plain = plain_word(enc, rep_word, specials)
    words = [rep_word, plain]
    special = [(i, v) for i, (j, f, role) in enumerate(slots) for v in specials[role]]
    zeros = [(i, specials[role][0]) for i, (j, f, role) in enumerate(slots) if role in ZERO_ROLES]
    powers = [(i, v) for i, (j, f, role) in enumerate(slots) if role == "imm" for v in POWERS_OF_TWO]

    def put_all(base, assignment):
        w = base
        for i, v in assignment:
            w = _put(w, slots[i][1], v)
            if w is None:
                return None
        return w
    for a in special + powers:
        words += [put_all(plain, [a]), put_all(rep_word, [a])]
    for x, a in enumerate(special):
        for b in special[x + 1:]:
            if a[0] != b[0]:
                words.append(put_all(plain, [a, b]))
    for a in powers:
        for b in zeros:
            words.append(put_all(plain, [a, b]))
    for x, a in enumerate(zeros):
        for y, b in enumerate(zeros[x + 1:], x + 1):
            for c in zeros[y + 1:]:
                words.append(put_all(plain, [a, b, c]))
    return [w for w in dict.fromkeys(words) if w is not None and
            w & enc.match_mask == enc.match_value]


def _value_atoms(role: str, v, specials: dict) -> list[str]:
    """The conditions a value meets that may decide an alias: a register or predicate is
    the zero one or not (its number says nothing else); an immediate has its value and may
    be a power of two."""
    if type(v) is not int:
        return []
    if role in ZERO_ROLES:
        zero = specials[role][0]
        return [f"={zero}" if v == zero else f"!={zero}"]
    out = [f"={v}"]
    if v > 1 and v & (v - 1) == 0:
        out.append("pow2")
    return out


# Which conditions a rule drops first when generalising: modifiers, exact immediates (one
# word's value rarely decides), "is zero" (a probe's zero destination is incidental),
# "not zero", powers of two.
def _atom_rank(atom) -> tuple:
    kind, c = atom[0], atom[1]
    if kind in ("needs", "unless"):
        return (0 if kind == "needs" else 1, atom)
    if c.startswith("!="):
        return (4, atom)
    if c == "pow2":
        return (5, atom)
    return (3 if c[1:] in ("255", "63", "7") else 2, atom)


MAX_EXCEPTIONS = 2


def induce_aliases(enc: Encoding, observations: list[Sample], tables: dict, specials: dict) -> list:
    """Alias rules that explain where nvdisasm's tokens differ from the groups' tokens.
    Each word printing an alias starts a rule with every condition it meets (values and
    modifiers); conditions are dropped one at a time while the rule still covers no word
    that prints otherwise. An exact immediate may give way to exceptions (`3!=65536`) where
    at most MAX_EXCEPTIONS other values print otherwise. Values are the fields' (`specials`:
    alias_specials of the arch)."""
    from ..isa.description import value_kinds
    from ..isa.engine import Isa
    from ..isa.forms import Alias
    isa = Isa("", [], tables, {})
    roles = value_kinds(enc)
    universe = {t for g in enc.groups for t in g.tokens if t != "@g!"}
    saved, enc.aliases = enc.aliases, []
    obs = []
    try:
        for s in observations:
            if s.key != (enc.opcode, enc.kinds) or s.word & enc.match_mask != enc.match_value:
                continue
            base = isa._decode_tokens(enc, s.word)
            vals = isa._decode_values(enc, s.word, s.address)
            if base is None or vals is None:
                continue
            printed = s.values
            if len(vals) != len(printed) or any(not same_value(a, b) for a, b in zip(vals, printed)):
                continue
            toks = instruction_tokens(s.inst)
            if {t for t in toks ^ base if t.startswith("@")} or any(t.startswith("INVALID") for t in toks):
                continue               # flags, or values nvdisasm marks invalid: no alias
            add, drop = frozenset(toks - base), frozenset(base - toks)
            # A branch target (pc-relative) never decides how nvdisasm spells an instruction:
            # a word printing tokens that the groups lack there is another encoding's
            # (`BRA.U.ANY` matching plain BRA's mask), not an alias of one target address.
            atoms = {(j, c) for j, (f, v) in enumerate(zip(enc.fields, vals))
                     if j > 0 and isinstance(f, Field) and f.transform != "pcrel" and j < len(roles)
                     for c in _value_atoms(roles[j], v, specials)}
            atoms |= {("needs" if t in base else "unless", t) for t in universe}
            obs.append(((add, drop), frozenset(atoms), vals, base))
    finally:
        enc.aliases = saved

    def meets(conds, o) -> bool:
        _d, _a, vals, base = o
        for k, c in conds:
            if k == "needs" and c not in base or k == "unless" and c in base:
                return False
            if isinstance(k, int) and not value_meets(vals[k], c):
                return False
        return True
    found: dict = {}
    for delta, atoms, _vals, _base in obs:
        if not (delta[0] or delta[1]):
            continue
        others = [o for o in obs if o[0] != delta]
        conds = set(atoms)
        if any(meets(conds, o) for o in others):
            continue                   # not decided by these conditions
        for c in sorted(atoms, key=_atom_rank):
            trial = conds - {c}
            covered = [o for o in others if meets(trial, o)]
            if not covered:
                conds = trial
            elif isinstance(c[0], int) and c[1].startswith("=") and c[1][1:] not in ("255", "63", "7"):
                # An exact immediate: keep the rule general where few values print otherwise.
                bad = {o[2][c[0]] for o in covered}
                if len(bad) <= MAX_EXCEPTIONS and all(type(b) is int for b in bad):
                    conds = trial | {(c[0], f"!={b}") for b in bad}
        found[(frozenset(conds), delta)] = None
    rules = []
    for conds, (add, drop) in found:
        when = tuple(sorted(c for c in conds if isinstance(c[0], int)))
        if not when:
            continue                   # modifiers alone: a group the probes did not see whole
        needs = frozenset(t for k, t in conds if k == "needs")
        unless = frozenset(t for k, t in conds if k == "unless")
        rules.append(Alias(when, add, drop, needs, unless))

    def conditions(r):
        return set(r.when) | {("needs", t) for t in r.needs} | {("unless", t) for t in r.unless}
    rules = [r for r in rules if not any(o is not r and o.add == r.add and o.drop == r.drop
                                         and conditions(o) < conditions(r) for o in rules)]

    # Order: a rule goes before another when more words that both match show its tokens.
    def wins(a, b):
        n = 0
        for o in obs:
            (add, drop) = o[0]
            if meets(conditions(a), o) and meets(conditions(b), o):
                n += (add, drop) == (a.add, a.drop)
                n -= (add, drop) == (b.add, b.drop)
        return n
    rules.sort(key=lambda r: (-len(conditions(r)), r.when, sorted(r.add)))
    for i in range(len(rules)):           # a few bubble passes settle pairwise preferences
        for k in range(len(rules) - 1):
            if wins(rules[k + 1], rules[k]) > 0:
                rules[k], rules[k + 1] = rules[k + 1], rules[k]
    return rules
