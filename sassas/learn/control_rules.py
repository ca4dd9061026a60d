"""Learning which instruction forms take which control fields and reuse slots, as nvdisasm
decides, per arch.

nvdisasm rejects a word whose control code sets a field the instruction has no use for: a
write barrier on a store, a branch or a fence, a read barrier on a branch, a wait mask on
`WARPGROUP.ARRIVE` (sm_90). It also rejects reuse flags that the instruction's opex table
does not define: a slot without a register to cache (`CS2R R, SR`), slots B and C together
on most forms, slot A on `HADD2.F32 R, R, c[..]` (sm_90), slots A and B together with the
yield flag on some. Which ones is a fact of each arch, so it is data:
`sassas/isa/data/control.toml`, written by

    python -m sassas.learn.control_rules [--arch sm_90 ...]

which takes every encoding's example from the ISA description, encodes it with a neutral
control code and with each field set in turn (each combination of reuse slots without and
with the yield flag at stalls 1 and 5, and with the yield flag at stall 0), and asks nvdisasm
about all of them in a few batched calls. A reuse combination that every form refuses is a
rule of every arch, sassas.control.CONTROL_RULES: the learner names it and lists nothing. A
rule lists an opcode where every encoding that nvdisasm reads refuses it, a form
(`BMOV B, I`) where every encoding of that form does, else the form with the modifiers
that only the refused encodings' examples carry (`HADD2.F32 R, R, C[I][I]`), or, where every
modifier of a refused one is one an accepted one carries, the form without the modifiers that
only accepted ones carry (`CCTL.!C.!I`). Where a form's examples disagree on a control field, it
samples each example's modifier groups at every value (an example shows one value a group, and
the verdict can hang on another). A reuse rule
(`reuse_BC`) names the least combination refused: every combination that holds it is
refused too (the learner says where that is not so).

nvdisasm also rejects some forms with the zero register in a place: `[RZ.64+0x10]` in a
256-bit `LDG` on sm_89, where `[R2.64+0x10]` is fine. The learner sets each register of each
example's operands to RZ (URZ) in turn; a rule `zero_register_2_0` lists what refuses RZ as
the first register of operand 2 (counted from 0), aggregated as above. A rule that a word of
ptxas's learning corpus breaks is dropped, or narrowed from the opcode to its forms: the
example's word can differ from ptxas's in a bit its text does not show (URZ on sm_100).

The rules are read at run time by :mod:`sassas.isa.control_rules` (its loader); learning needs
nvdisasm.
"""
from __future__ import annotations

import itertools
import math
import tomllib
from typing import Optional

from ..isa.control_rules import DATA_FILE, FIELDS, ZERO_REGISTERS, reuse_rule_name, zero_register_rule_name
from ..isa.description import DATA_DIR

# Reuse classes: (yield flag, stall 0) -> the stalls tried; a combination refused at any of them
# is refused (they agree wherever measured).
_REUSE_CLASSES = {(False, False): (1, 5), (True, False): (1, 5), (True, True): (0,)}
# An example's modifier groups take at most this many combinations of values to be sampled
MAX_MODIFIER_SAMPLES = 256


def learn(arch: str) -> dict[str, list[str]]:
    """Rule -> sorted opcodes, forms and forms with modifiers whose words nvdisasm rejects under it."""
    from dataclasses import replace

    from ..ast import ControlCode
    from ..parse import parse_instruction
    from ..isa import get_isa
    from ..isa.forms import CONTROL_SHIFT
    from . import oracle

    isa = get_isa(arch)
    control_mask = ((1 << 23) - 1) << CONTROL_SHIFT
    neutral = ControlCode(stall=1).bits
    examples = []              # (encoding, instruction with the neutral control code, word without it)
    for e in isa.encodings:
        if not e.example:
            continue
        try:
            inst = replace(parse_instruction(e.example), control=ControlCode(stall=1))
            word = isa.encode(inst)
        except Exception:      # an example whose text does not encode alone (a branch target)
            continue
        examples.append((e, inst, word & ~control_mask))
    fields = {field: neutral & ~(mask << shift) | (1 if none != 1 else 0) << shift
              for field, (shift, mask, none) in FIELDS.items()}
    examples += _modifier_samples(isa, examples, neutral, fields, arch)
    variants = {"neutral": neutral, **fields}
    for (yield_, stall0), stalls in _REUSE_CLASSES.items():
        for stall in stalls:
            for mask in range(1, 16):
                variants[(yield_, stall0, stall, mask)] = ControlCode(stall=stall, yield_=yield_, reuse=mask).bits
    words = {name: [w | c << CONTROL_SHIFT for _e, _inst, w in examples] for name, c in variants.items()}
    zeroed = _zero_register_words(isa, examples, neutral)
    seen = oracle.disassemble([w for ws in words.values() for w in ws]
                              + [w for by_place in zeroed for w in by_place.values()], arch)
    readable = [seen[w] is not None for w in words["neutral"]]

    def refused(name, i):
        return seen[words[name][i]] is None

    left_out: list = []
    out = {field: _aggregate(examples, readable, [refused(field, i) for i in range(len(examples))], left_out)
           for field in FIELDS}
    # Reuse: per encoding, the least refused combinations of each class.
    for (yield_, stall0), stalls in _REUSE_CLASSES.items():
        refused_masks = [{m for m in range(1, 16) if any(refused((yield_, stall0, s, m), i) for s in stalls)}
                         if readable[i] else set() for i in range(len(examples))]
        least = [{m for m in ms if not any(m0 != m and m0 & m == m0 for m0 in ms)} for ms in refused_masks]
        unclosed = [examples[i][0].example for i, ms in enumerate(refused_masks)
                    if ms != {m for m in range(1, 16) if any(m0 & m == m0 for m0 in least[i])}]
        if unclosed:
            print(f"{arch}: refused reuse combinations not closed upward (rules over-refuse) in {unclosed[:5]}")
        for mask in range(1, 16):
            which = [mask in least[i] for i in range(len(examples))]
            name = reuse_rule_name(yield_, stall0, mask)
            if all(w for w, r in zip(which, readable) if r):
                print(f"{arch}: {name} refused by every form (a rule of sassas.control, not listed)")
                continue
            names = _aggregate(examples, readable, which, left_out)
            if names:
                out[name] = names
    places = sorted({place for by_place in zeroed for place in by_place})
    for place in places:
        which = [place in zeroed[i] and seen[zeroed[i][place]] is None for i in range(len(examples))]
        names = _aggregate(examples, readable, which, left_out)
        if names:
            out[zero_register_rule_name(*place)] = names
    _drop_contradicted(arch, isa, out)
    if left_out:
        print(f"{arch}: {len(left_out)} refusals left out (an encoding refuses, another of its form with the same "
              f"modifiers does not): {sorted(set(left_out))[:4]}")
    return out


def _drop_contradicted(arch: str, isa, out: dict[str, list[str]]) -> None:
    """A rule refuses nothing ptxas writes: a name that a word of the learning corpus breaks is
    dropped (its example's word differs from ptxas' in a bit the text does not show, as URZ on
    sm_100 does). An opcode so broken is narrowed to its forms, and those checked again."""
    from ..isa.forms import CONTROL_SHIFT, form_key, form_name
    from . import corpus, oracle

    seen = oracle.disassemble(corpus.build(arch), arch, oracle.DisasmCache(arch))
    words = []
    for word, d in seen.items():
        inst = isa.decode(word, d.address) if d is not None else None
        if inst is not None:
            words.append((inst, form_name(*form_key(inst)), word >> CONTROL_SHIFT, d.text))
    # An opcode's forms; a form without operands (its name is the opcode's) by its modifiers.
    forms_of: dict[str, set] = {}
    for e in isa.encodings:
        if e.name != e.opcode:
            forms_of.setdefault(e.opcode, set()).add(e.name)
        elif e.example and (modifiers := _modifiers(e.example)):
            forms_of.setdefault(e.opcode, set()).add(".".join([e.opcode, *modifiers]))
    for rule, names in out.items():
        pending = list(names)
        kept = []
        while pending:
            n = pending.pop()
            broken = _first_breaking(rule, n, words)
            if broken is None:
                kept.append(n)
                continue
            narrower = sorted(forms_of.get(n, ())) if " " not in n and "." not in n else []
            print(f"{arch}: {rule} does not list {n!r}" + (" but its forms" if narrower else "")
                  + f": ptxas writes {broken!r} with it")
            pending += narrower
        out[rule] = sorted(kept)


def _first_breaking(rule: str, name: str, words) -> Optional[str]:
    """The text of the first ptxas word that the rule's entry `name` refuses, else None."""
    from ..isa.control_rules import rule_refuses
    opcode = name.split(" ")[0].split(".")[0]
    for inst, form, c, text in words:
        if inst.opcode == opcode and rule_refuses(rule, name, inst, form, c):
            return text
    return None


def _modifier_samples(isa, examples, neutral: int, fields: dict[str, int], arch: str) -> list:
    """More samples of the forms whose examples disagree on a control field (nvdisasm refuses it
    in some, takes it in others): each such example's word with every combination of values of
    its modifier groups (up to MAX_MODIFIER_SAMPLES a word), decoded, where it stays of the form
    with modifiers no sample of the form has. An example shows one value of each group, and the
    verdict can hang on another: sm_100's CCTL without operands takes a read barrier with .I or
    .C and refuses it without, whatever its operation (IVALL, IVALLP, WBALL, WBALLP)."""
    from dataclasses import replace

    from ..ast import ControlCode
    from ..errors import SassError
    from ..isa.forms import CONTROL_SHIFT, form_key, form_name
    from . import oracle

    controls = (neutral, *fields.values())
    seen = oracle.disassemble([w | c << CONTROL_SHIFT for _e, _inst, w in examples for c in controls], arch)
    verdicts: dict[tuple[str, str], set] = {}
    for e, _inst, w in examples:
        if seen[w | neutral << CONTROL_SHIFT] is not None:
            for field, c in fields.items():
                verdicts.setdefault((e.name, field), set()).add(seen[w | c << CONTROL_SHIFT] is None)
    mixed = {form for (form, _field), v in verdicts.items() if len(v) == 2}
    have = {(e.name, frozenset(inst.modifiers)) for e, inst, _w in examples}
    out = []
    for e, _inst, w in examples:
        if e.name not in mixed:
            continue
        groups = [g for g in e.groups if not any(t.startswith("@") for ts in g.values.values() for t in ts)]
        values = [sorted(g.values) for g in groups]
        if math.prod(len(v) for v in values) > MAX_MODIFIER_SAMPLES:
            continue
        base = w & ~sum(g.mask for g in groups)
        for combo in itertools.product(*values):
            word = base | sum(combo)
            try:
                inst = isa.decode(word | neutral << CONTROL_SHIFT)
            except SassError:
                continue
            if inst is None or form_name(*form_key(inst)) != e.name:
                continue
            key = (e.name, frozenset(inst.modifiers))
            if key not in have:
                have.add(key)
                out.append((e, replace(inst, control=ControlCode.from_bits(neutral)), word))
    return out


def _zero_register_words(isa, examples, control: int) -> list[dict[tuple[int, int], int]]:
    """Per example, (operand, register piece) -> its word with that register the zero register,
    for each register piece that is not already zero and whose word encodes."""
    from dataclasses import replace

    from ..ast import ControlCode
    from ..kinds import value_pieces
    from ..isa.forms import CONTROL_SHIFT

    out = []
    for _e, inst, _w in examples:
        inst = replace(inst, control=ControlCode.from_bits(control))
        by_place = {}
        for i, op in enumerate(inst.operands):
            for j, (piece, value) in enumerate(zip(value_pieces(op.kind), op.values)):
                zero = ZERO_REGISTERS.get(piece)
                if zero is None or value == zero:
                    continue
                values = list(op.values)
                values[j] = zero
                operands = list(inst.operands)
                operands[i] = op.with_values(*values)
                try:
                    word = isa.encode(replace(inst, operands=tuple(operands)))
                except Exception:      # the form does not take the zero register there
                    continue
                by_place[(i, j)] = word & ((1 << CONTROL_SHIFT) - 1) | control << CONTROL_SHIFT
        out.append(by_place)
    return out


def _aggregate(examples, readable, refused, left_out: list) -> list[str]:
    """Opcodes all of whose encodings are refused, else forms, else forms with the modifiers of
    a refused sample that no accepted sample of the form carries, fewer where the opcode's
    accepted samples leave some; where every modifier of a refused sample is one an accepted
    sample carries, the form without the modifiers that only accepted samples carry, as few as
    keep the accepted ones out (`CCTL.!C.!I`); left out where none does (an accepted sample
    with the same modifiers: the encodings differ otherwise; its text added to `left_out`)."""
    from ..isa.control_rules import parse_names
    by_opcode: dict[str, set] = {}
    by_form: dict[str, set] = {}
    accepted_modifiers: dict[str, set] = {}
    accepted_sets: dict[str, list] = {}
    for (e, inst, _w), ok, r in zip(examples, readable, refused):
        if ok:                  # else not a word nvdisasm reads at all
            by_opcode.setdefault(e.opcode, set()).add(r)
            by_form.setdefault(e.name, set()).add(r)
            if not r:
                for key in (e.opcode, e.name):
                    accepted_modifiers.setdefault(key, set()).update(inst.modifiers)
                accepted_sets.setdefault(e.name, []).append(frozenset(inst.modifiers))
    names = {op for op, r in by_opcode.items() if r == {True}}
    names |= {f for f, r in by_form.items() if r == {True} and f.split()[0] not in names}
    for (e, inst, _w), ok, r in zip(examples, readable, refused):
        if ok and r and by_form[e.name] != {True} and e.opcode not in names:
            own = [m for m in inst.modifiers if m not in accepted_modifiers[e.name]]
            own = [m for m in own if m not in accepted_modifiers[e.opcode]] or own
            opcode, _, kinds = e.name.partition(" ")
            if not own:
                if parse_names(sorted(names)).matches(e.opcode, e.name, inst.modifiers):
                    continue        # (an entry with excluded modifiers holds it already)
                own = _excluding(frozenset(inst.modifiers), accepted_sets[e.name])
            if own:
                names.add(".".join([opcode, *own]) + (f" {kinds}" if kinds else ""))
            else:
                left_out.append(".".join([e.opcode, *inst.modifiers]))
    return sorted(names)


def _excluding(modifiers: frozenset, accepted: list) -> list[str]:
    """The modifiers (`X`) and excluded modifiers (`!Y`) of an entry that holds an instruction
    with `modifiers` and none with a set in `accepted`: from all of `modifiers` and every other
    modifier of `accepted` excluded, each dropped in turn where the accepted stay out; [] where
    even the first does not keep them out."""
    def keeps_out(needed, excluded):
        return not any(needed <= a and not excluded & a for a in accepted)
    needed, excluded = set(modifiers), set().union(*accepted) - modifiers
    if not keeps_out(needed, excluded):
        return []
    for m in sorted(excluded):
        if keeps_out(needed, excluded - {m}):
            excluded.discard(m)
    for m in sorted(needed):
        if keeps_out(needed - {m}, excluded):
            needed.discard(m)
    return sorted(needed) + [f"!{m}" for m in sorted(excluded)]


def _modifiers(example: str) -> tuple[str, ...]:
    from ..parse import parse_instruction
    return parse_instruction(example).modifiers


def write_data(results: dict[str, dict[str, list[str]]], path) -> None:
    lines = ["# Control fields, reuse slots and zero registers that instruction forms do not take: nvdisasm",
             "# rejects the word.",
             "# Generated by `python -m sassas.learn.control_rules` (see that module); do not edit.", ""]
    for arch in sorted(results, key=lambda a: int(a.removeprefix('sm_').rstrip('af'))):
        lines.append(f"[{arch}]")
        for field, names in results[arch].items():
            lines.append(f"{field} = [" + ", ".join(_toml_string(n) for n in names) + "]")
        lines.append("")
    from ..files import write_atomic
    write_atomic(path, "\n".join(lines))


def _toml_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def main(argv=None) -> int:
    import argparse

    from ..arch import ARCHS
    ap = argparse.ArgumentParser(prog="python -m sassas.learn.control_rules", description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", action="append", help="only this arch (repeatable); default every arch with an ISA description")
    args = ap.parse_args(argv)
    path = DATA_DIR / DATA_FILE
    results = {}
    if path.exists():
        results = {a: {f: list(v) for f, v in e.items()} for a, e in tomllib.loads(path.read_text()).items()}
    described = [a for a in ARCHS if (DATA_DIR / f"{a}.toml").exists()]
    for arch in args.arch or described:
        results[arch] = learn(arch)
        print(arch, {f: len(v) for f, v in results[arch].items()})
    write_data(results, path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
