"""The passes over a learned description, each one fact of the arch measured with the oracle:
descriptors, new forms by transplanting bits, register widths, optional predicates and
offsets, zero-register defers, alias exceptions, contradicted group values.
"""
from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from typing import Optional

from ..arch import ARCHS
from ..errors import SassError
from ..isa.engine import Isa
from ..isa.forms import (CONTROL_MASK, Alias, Encoding, Field, Group, field_uniform_register, field_values,
                         flag_token, form_key, form_name, instruction_tokens, split_flag_token, written_tokens)
from ..kinds import value_count
from ..parse import parse_instruction
from . import corpus, oracle, probe
from .sweep import OPCODE_BITS
from .verify import check_corpus, check_format, check_sample, claimed_bits


def learn_descriptors(isa: Isa, arch: str, log=print) -> Isa:
    """Find the hidden memory-descriptor field (sm_80..sm_89: nvdisasm prints `LDG.E R3,
    [R2.64]` for a word that names the uniform pair ptxas loaded the descriptor into) from
    ptxas's own words: compile the descriptor corpus (the same accesses with more and more
    uniform values live, so ptxas picks UR4, UR6, UR8 ...), and per encoding find the uniform
    register field of its opcode, hidden in it, that equals the register the kernel's
    descriptor load wrote (resolve.descriptor_registers's rule) in every sample, over at least
    two registers. Which instruction and constant is the descriptor load is learned too: the
    (uniform register <- constant) load that explains the most samples. Encodings of the same
    opcode without samples take the field where it is hidden in them too. Returns the new Isa."""
    from collections import Counter as _Counter
    from ..isa.description import value_kinds
    from ..isa.forms import DescriptorLoad, Field
    from ..resolve import descriptor_registers
    kernels = []
    for name, ptx in corpus.descriptor_kernels(arch):
        cubin = oracle.compile_ptx(ptx, arch)
        if cubin is None:
            log(f"[{arch}] descriptor corpus: ptxas refused {name}")
            continue
        for _section, code in oracle.text_sections(cubin):
            decoded = [isa.decode_match(w, 16 * i) for i, w in enumerate(oracle.words_of(code))]
            kernels.append([(w, m) for w, m in zip(oracle.words_of(code), decoded) if m is not None])
    loads = {DescriptorLoad(inst.mnemonic, tuple(inst.operands[1].values))
             for k in kernels for _w, (_e, inst) in k
             if [op.kind for op in inst.operands] == ["UR", "C[I][I]"]}
    ureg_fields: dict = defaultdict(set)
    for e in isa.encodings:
        for f, role in zip(e.fields, value_kinds(e)):
            if role == "ureg" and isinstance(f, Field):
                ureg_fields[e.opcode].add(f)
    best = (0, None, {})
    for load in sorted(loads, key=lambda d: (d.mnemonic, d.constant)):
        samples: dict = defaultdict(list)          # id(encoding) -> [(word, register)]
        encs = {}
        for k in kernels:
            for (w, (e, _inst)), register in zip(k, descriptor_registers([inst for _w, (_e, inst) in k], load)):
                if register is not None:
                    samples[id(e)].append((w, register))
                    encs[id(e)] = e
        found, explained = {}, 0
        for key, pairs in samples.items():
            e = encs[key]
            if len({r for _w, r in pairs}) < 2:
                continue
            fits = [f for f in sorted(ureg_fields[e.opcode], key=lambda f: f.segments)
                    if f.mask & e.hidden_mask == f.mask and all(f.extract(w) == r for w, r in pairs)]
            if fits:
                found[key] = (e, fits[0])
                explained += len(pairs)
        if explained > best[0]:
            best = (explained, load, found)
    explained, load, found = best
    if load is None:
        log(f"[{arch}] descriptors: none hidden")
        return isa
    field_of = {}
    defaults = _Counter()
    for e, f in found.values():
        e.descriptor = f
        field_of.setdefault(e.opcode, f)
        defaults[f.extract(e.base)] += 1
    default = defaults.most_common(1)[0][0]
    for e in isa.encodings:
        f = field_of.get(e.opcode)
        if e.descriptor is None and f is not None and f.mask & e.hidden_mask == f.mask:
            e.descriptor = f
            e.base = e.base & ~f.mask | f.insert(default)
    for e in isa.encodings:
        e.__dict__.pop("hidden_mask", None)
    n = sum(1 for e in isa.encodings if e.descriptor is not None)
    log(f"[{arch}] descriptors: {load.mnemonic} {load.constant} explains {explained} samples; "
        f"{len(found)} encodings seen, {n} with the field ({', '.join(sorted(field_of))}), default UR{default}")
    return Isa(arch, isa.encodings, isa.tables, isa.syntax, load)


MAX_NEW_FORMS_PER_ROUND = 400
SAMPLES_PER_NEW_FORM = 2
OPCODE_MASK = (1 << OPCODE_BITS) - 1


_USUAL_CONTROL = 0x000fe4 << 104


# (4: sm_70's F2F.F16.F32 and F2F.F32.F16 differ in four type bits: 75, 76, 84, 85)
MAX_TRANSPLANT_BITS = 4
TRANSPLANTS_PER_FORM = 4


def transplant_samples(new: list, encodings: list, by_key: dict, arch: str, cache,
                       parse_failures=None) -> list:
    """Words of a form with modifiers its own samples never showed, found in its sibling forms
    (same opcode, other operand kinds). Where two encodings of one form differ in a few
    matched bits and print different modifiers (sm_90's `LEA.HI.SX32 R, R, R, I`: bits 73 and
    80 over `LEA R, R, R, I`), the same bits over a sibling's representative (`LEA R, R, UR,
    I`) often give that sibling the modifiers too: one flip of them alone changes the form
    (`.HI` takes a fifth operand), so single-bit probing never reaches them. Such words that
    print the sibling's form with a modifier set not seen in it become samples."""
    by_opcode: dict = defaultdict(list)
    for e in encodings:
        by_opcode[e.opcode].append(e)
    diffs: dict = defaultdict(set)          # opcode -> {(bits, value when set)}
    for op, encs in by_opcode.items():
        for e1, e2 in itertools.combinations(encs, 2):
            # (in print order: F2F.F32.F16 and F2F.F16.F32 fix the same two tokens)
            if e1.kinds != e2.kinds or e1.printed_fixed_tokens == e2.printed_fixed_tokens:
                continue
            (m1, v1), (m2, v2) = _fixed_bits(e1), _fixed_bits(e2)
            d = (v1 ^ v2) & m1 & m2 & ~OPCODE_MASK
            if d and bin(d).count("1") <= MAX_TRANSPLANT_BITS:
                diffs[op].add(d)
    candidates: dict = {}
    for e in new:
        src = getattr(e, "source_word", None)
        if src is None:
            continue
        fixed = _fixed_bits(e)[0]
        for d in diffs.get(e.opcode, ()):
            if d & fixed == d:
                candidates.setdefault(src ^ d, (e.opcode, e.kinds))
    if not candidates:
        return []
    known = {s.word for lst in by_key.values() for s in lst}
    found = probe.to_samples(oracle.disassemble([w for w in candidates if w not in known], arch, cache),
                             arch, parse_failures)
    out = []
    added: Counter = Counter()
    for w, s in found.items():
        if s is None or s.key != form_key_of(candidates[w]) or added[s.key] >= TRANSPLANTS_PER_FORM:
            continue
        # (in print order: F2F.F16.F32 is not F2F.F32.F16)
        seen = {written_tokens(x.inst) for x in by_key.get(s.key, ())} | {written_tokens(x.inst) for x in out}
        if written_tokens(s.inst) in seen:
            continue
        added[s.key] += 1
        out.append(s)
    return out


def _fixed_bits(e) -> tuple[int, int]:
    """(mask, value): the bits every word of the encoding has alike (matched bits, and group
    bits that all of a group's values agree on)."""
    mask, value = e.match_mask, e.match_value
    for g in e.groups:
        vals = list(g.values)
        if not vals:
            continue
        same = g.mask
        for v in vals:
            same &= ~(v ^ vals[0])
        mask |= same
        value |= vals[0] & same
    return mask, value


def form_key_of(opcode_kinds) -> tuple:
    return tuple(opcode_kinds)


def _renumber(token, k: int):
    """A token with operand k removed: '@j..' for j > k moves down, '@k..' -> None."""
    j, flag = split_flag_token(token)
    if j < 0 or j < k:
        return token
    return None if j == k else flag_token(j - 1, flag)


def _pt_raw(f: Field) -> int:
    """What a 3-bit predicate field holds for PT/UPT (7): 0 where it is stored inverted (sm_86's
    BMMA reads its UP operand so: `UP0` is 7, and UPT, left out of the text, is 0)."""
    return 7 ^ f.value_mask if f.transform == "n" else 7


def _without_operand(e: Encoding, k: int, word: int, text: str) -> Optional[Encoding]:
    """Encoding e with predicate operand k left out of the text and fixed to PT (7): what
    nvdisasm prints when that predicate is PT. None where a group (other than the operand's own
    negation), alias or reuse bit refers to the operand."""
    pos = 1 + sum(value_count(kind) for kind in e.kinds[:k])
    f = e.fields[pos]
    if not isinstance(f, Field):
        return None
    # A group of operand k's own flags (an input predicate's `!`) is fixed to the word's value,
    # where that value prints no flag: a UPT left out of the text is not negated.
    own = [g for g in e.groups if g.tokens and all(split_flag_token(t)[0] == k for t in g.tokens)]
    if any(g.values.get(word & g.mask) != frozenset() for g in own):
        return None
    fixed_mask = f.mask | sum(g.mask for g in own)
    fixed = f.insert(_pt_raw(f)) | sum(word & g.mask for g in own)
    toks = set(e.fixed_tokens) | set(e.order)
    for g in e.groups:
        if any(g is o for o in own):
            continue
        toks |= set(g.tokens)
        for seq in g.sequences.values():
            toks |= set(seq)
    if any(_renumber(t, k) is None for t in toks) or k in e.reuse or k in e.reuse_decode_only:
        return None
    if any(j == pos for a in e.aliases for j, _c in a.when):
        return None
    ren = lambda ts: frozenset(_renumber(t, k) for t in ts)
    groups = [Group(g.mask, {v: ren(ts) for v, ts in g.values.items()}, g.default,
                    sequences={v: tuple(_renumber(t, k) for t in seq) for v, seq in g.sequences.items()})
              for g in e.groups if not any(g is o for o in own)]
    aliases = [Alias(tuple((j - 1 if j > pos else j, c) for j, c in a.when), ren(a.add), ren(a.drop),
                     ren(a.needs), ren(a.unless)) for a in e.aliases]
    shift = lambda d: {(i - 1 if i > k else i): v for i, v in d.items()}
    kinds = e.kinds[:k] + e.kinds[k + 1:]
    return Encoding(e.opcode, kinds, e.guard_kind, e.match_mask | fixed_mask,
                    (e.match_value & ~fixed_mask) | fixed, (e.base & ~fixed_mask) | fixed,
                    e.fields[:pos] + e.fields[pos + 1:], groups, ren(e.fixed_tokens),
                    tuple(_renumber(t, k) for t in e.order), shift(e.reuse),
                    name=form_name(e.opcode, kinds), example=text, aliases=aliases,
                    source_word=word, reuse_decode_only=shift(e.reuse_decode_only),
                    descriptor=e.descriptor)


def _replacing(isa: Isa, new: dict) -> Isa:
    """The description with the encodings that `new` maps (by id) replaced."""
    return Isa(isa.arch, [new.get(id(x), x) for x in isa.encodings], isa.tables, isa.syntax, isa.descriptor_load)


def _representative_word(isa: Isa, e: Encoding) -> int:
    """The learner's representative of the encoding, or (a description read back) its
    example's word with ptxas's usual control code; 0 where neither is to be had."""
    if e.source_word:
        return e.source_word
    if not e.example:
        return 0
    try:
        inst = parse_instruction(e.example)
        if form_key(inst) != (e.opcode, e.kinds):
            return 0
        values = field_values(inst, isa.uniform_zero)
        word = isa._try_encode(e, inst, instruction_tokens(inst), values, []) or 0
    except (SassError, Exception):
        return 0
    # (a control code nvdisasm accepts)
    return (word & ~CONTROL_MASK) | (_USUAL_CONTROL & CONTROL_MASK) if word else 0


# Bits of a register number, per register file (a uniform register's: the arch's).
REGISTER_BITS = {"R": 8, "P": 3, "UP": 3}


def learn_register_widths(isa: Isa, arch: str, log=print) -> Isa:
    """A register field learned narrower than its register file. Where the representative's
    register is one flip from the zero register and nvdisasm leaves that one out on the form,
    the flip looks like a change of form: sm_80's `ULEA UR4, UP6, UR4, UR4, 0x2` has UP6, bit
    81 makes it UPT, printed as no operand, so bit 81 was matched and the predicate field came
    out as bits 82..83 (faiss's `ULEA UR10, UP1, UR6, UR10, 0x2` did not fit). For every
    register field of one segment short of its file's width, whose missing bits are matched
    bits beside it, ask nvdisasm about the word with each missing bit set; where every such
    word prints the same form with that register, and decodes so with the field widened,
    widen it."""
    from dataclasses import replace
    from ..kinds import VALUE_PIECES, kind_pieces
    cache = oracle.DisasmCache(arch)
    uniform_bits = ARCHS[arch].uniform_register_bits
    plans = []                  # (encoding, value index, widened field, probe words)
    for e in isa.encodings:
        claimed = claimed_bits(e)
        pos = 1
        for kind in e.kinds:
            for piece in [p for p in kind_pieces(kind) if p in VALUE_PIECES]:
                f = e.fields[pos] if pos < len(e.fields) else None
                width = uniform_bits if piece == "UR" else REGISTER_BITS.get(piece)
                pos += 1
                if width is None or not isinstance(f, Field) or len(f.segments) != 1 or f.transform != "u":
                    continue
                wl, vl, w = f.segments[0]
                if vl == 0 and w >= width or wl < vl:
                    continue
                widened = Field(((wl - vl, 0, width),))
                missing = widened.mask & ~f.mask
                if missing & ~e.match_mask or missing & e.match_value or missing & claimed:
                    continue
                word = _representative_word(isa, e)
                if not word:
                    continue
                words = [(word & ~widened.mask) | widened.insert(1 << b)
                         for b in range(width) if widened.insert(1 << b) & missing]
                plans.append((e, pos - 1, widened, words))
    samples = probe.to_samples(oracle.disassemble([w for *_x, ws in plans for w in ws], arch, cache), arch)
    widened_encodings = {}
    for e, j, widened, words in plans:
        current = widened_encodings.get(id(e), e)
        missing = widened.mask & ~current.fields[j].mask if isinstance(current.fields[j], Field) else 0
        if not missing:
            continue
        fields = list(current.fields)
        fields[j] = widened
        trial_e = replace(current, fields=fields, match_mask=current.match_mask & ~missing,
                          match_value=current.match_value & ~missing, base=current.base & ~missing)
        trial = _replacing(isa, {id(e): trial_e})
        probed = [samples.get(w) for w in words]
        if all(s is not None and s.key == (e.opcode, e.kinds) and not check_sample(trial, s, strict=False)
               for s in probed):
            widened_encodings[id(e)] = trial_e
    log(f"[{arch}] {len(widened_encodings)} encodings with a register field widened to its file "
        f"({len(plans)} fields probed)")
    return _replacing(isa, widened_encodings) if widened_encodings else isa


def learn_overlapping_fields(isa: Isa, arch: str, log=print) -> Isa:
    """A field whose segments claim one value bit twice, learned from the opcode sweep: sm_90's
    and Blackwell's `BRA.U !UP0, target` came out as target bits 2..9 in word bits 16..23 and
    bits 8..57 in 32..81, where the other BRA forms hold bits 10..57 in 34..81; ptxas sets
    bit 32 there, which nvdisasm does not count in the target (the encoder left it clear). A
    value bit claimed twice stays with the first segment that claims it; the later segment
    starts after it, and the word bits it gives up are hidden (the hidden-bits pass sets them
    as ptxas does)."""
    from dataclasses import replace
    changed = {}
    for e in isa.encodings:
        fields = list(e.fields)
        for j, f in enumerate(fields):
            if not isinstance(f, Field) or len(f.segments) < 2:
                continue
            claimed, segments = set(), []
            for wl, vl, w in f.segments:
                skip = 0
                while skip < w and vl + skip in claimed:
                    skip += 1
                if skip < w:
                    segments.append((wl + skip, vl + skip, w - skip))
                claimed.update(range(vl, vl + w))
            if tuple(segments) != f.segments:
                fields[j] = Field(tuple(segments), f.transform)
        if fields != list(e.fields):
            changed[id(e)] = replace(e, fields=fields)
    log(f"[{arch}] {len(changed)} encodings with a field that claimed value bits twice")
    return _replacing(isa, changed) if changed else isa


def learn_optional_predicates(isa: Isa, arch: str, log=print) -> Isa:
    """nvdisasm leaves out an output predicate that is PT/UPT on some forms only
    (`UIMAD.WIDE.U32 UR4, UR8, UR10, URZ`, `LEA.HI.X.SX32 R17, R12, c[0x0][0x1e4], 0x1, P1`),
    and ptxas writes such words where the corpus may have none. For every encoding with a
    predicate operand that is not PT in its representative, ask nvdisasm about the word with
    that operand set to PT; where the text has the same form less that operand, add the
    encoding without it (operand fixed to 7), kept only where that word round-trips."""
    cache = oracle.DisasmCache(arch)
    have = {(e.opcode, e.kinds) for e in isa.encodings}
    probes = []
    for e in isa.encodings:
        word = _representative_word(isa, e)
        if not word:
            continue
        pos = 1
        for k, kind in enumerate(e.kinds):
            n = value_count(kind)
            if kind in ("P", "UP") and k > 0:
                f = e.fields[pos]
                if isinstance(f, Field) and f.value_bits == 3 and f.extract(word) != _pt_raw(f):
                    kinds = e.kinds[:k] + e.kinds[k + 1:]
                    probes.append((e, k, (word & ~f.mask) | f.insert(_pt_raw(f)), kinds))
            pos += n
    samples = probe.to_samples(oracle.disassemble([w for *_x, w, _k in probes], arch, cache), arch)
    added = []
    seen = set()
    for e, k, word, kinds in probes:
        s = samples.get(word)
        if s is None or s.key != (e.opcode, kinds):
            continue
        d = _without_operand(e, k, word, s.text)
        if d is None:
            continue
        sig = (d.opcode, d.kinds, d.match_mask, d.match_value, d.fixed_tokens)
        if sig in seen:
            continue
        current = Isa(arch, isa.encodings + added, isa.tables, isa.syntax, isa.descriptor_load)
        if not check_sample(current, s, strict=False):
            continue                      # an encoding already reads and writes that text
        trial = Isa(arch, isa.encodings + added + [d], isa.tables, isa.syntax, isa.descriptor_load)
        if check_sample(trial, s, strict=False):
            continue
        seen.add(sig)
        added.append(d)
    log(f"[{arch}] {len(added)} encodings where nvdisasm leaves out a PT predicate "
        f"({len(probes)} probed, {sum(1 for d in added if (d.opcode, d.kinds) not in have)} new forms)")
    return Isa(arch, isa.encodings + added, isa.tables, isa.syntax, isa.descriptor_load)


def _without_offset(e: Encoding, k: int, pos: int, word: int, text: str) -> Optional[Encoding]:
    """Encoding e with the offset ending operand k (`R2 0x0`, value `pos`) left out of the
    text and fixed to 0: what nvdisasm prints for `CALL.ABS.NOINC R2`. None where an alias
    reads that value."""
    from dataclasses import replace
    f = e.fields[pos]
    if any(j == pos for a in e.aliases for j, _c in a.when):
        return None
    aliases = [Alias(tuple((j - 1 if j > pos else j, c) for j, c in a.when), a.add, a.drop, a.needs, a.unless)
               for a in e.aliases]
    kinds = e.kinds[:k] + (e.kinds[k][:-len(" I")],) + e.kinds[k + 1:]
    return replace(e, kinds=kinds, match_mask=e.match_mask | f.mask, match_value=e.match_value & ~f.mask,
                   base=e.base & ~f.mask, fields=e.fields[:pos] + e.fields[pos + 1:], aliases=aliases,
                   name=form_name(e.opcode, kinds), example=text, source_word=word, support=0,
                   reproduces=frozenset(), defer_when=())


def learn_optional_offsets(isa: Isa, arch: str, log=print) -> Isa:
    """nvdisasm leaves out the offset after a register target where it is 0 on some forms:
    `CALL.ABS.NOINC R2` (CUTLASS's device printf through an address in constant bank 4), while
    `RET.ABS.NODEC R20 0x0` keeps it. For every encoding with an operand `R I` / `UR I` whose
    offset is a plain field, ask nvdisasm about the word with the offset 0; where the text is
    the same form with that operand's register alone, add the encoding without the offset
    (fixed to 0), kept only where that word round-trips and no encoding already did."""
    cache = oracle.DisasmCache(arch)
    probes = []
    for e in isa.encodings:
        pos = 1
        for k, kind in enumerate(e.kinds):
            n = value_count(kind)
            f = e.fields[pos + n - 1] if n else None
            if kind in ("R I", "UR I") and isinstance(f, Field) and f.transform in ("u", "s"):
                word = _representative_word(isa, e)
                if word:
                    kinds = e.kinds[:k] + (kind[:-len(" I")],) + e.kinds[k + 1:]
                    probes.append((e, k, pos + n - 1, word & ~f.mask, kinds))
            pos += n
    samples = probe.to_samples(oracle.disassemble([w for *_x, w, _k in probes], arch, cache), arch)
    added = []
    for e, k, pos, word, kinds in probes:
        s = samples.get(word)
        if s is None or s.key != (e.opcode, kinds):
            continue
        d = _without_offset(e, k, pos, word, s.text)
        current = Isa(arch, isa.encodings + added, isa.tables, isa.syntax, isa.descriptor_load)
        if d is None or not check_sample(current, s, strict=False):
            continue                      # (an encoding already reads and writes that text)
        trial = Isa(arch, isa.encodings + added + [d], isa.tables, isa.syntax, isa.descriptor_load)
        if not check_sample(trial, s, strict=False):
            added.append(d)
    log(f"[{arch}] {len(added)} encodings where nvdisasm leaves out a zero offset after a register "
        f"({len(probes)} probed)")
    return Isa(arch, isa.encodings + added, isa.tables, isa.syntax, isa.descriptor_load)


def _register_dropped(kind: str) -> Optional[tuple[str, int, str]]:
    """`C[I][R+I]` -> (`C[I][I]`, the register's value index in the operand, its class): the
    kind with its bracketed register (and the `+`) left out, or None where it has none."""
    from ..kinds import VALUE_PIECES, kind_pieces
    pieces = list(kind_pieces(kind))
    for i in range(len(pieces) - 1):
        if pieces[i] in ("R", "UR") and pieces[i + 1] == "+I" and "[" in pieces[:i]:
            index = sum(1 for p in pieces[:i] if p in VALUE_PIECES)
            return "".join(pieces[:i] + ["I"] + pieces[i + 2:]), index, pieces[i]
    return None


def learn_zero_register_defers(isa: Isa, arch: str, log=print) -> Isa:
    """nvdisasm leaves a bracketed zero register out (`c[0x0][0x1a8]`, the register-less
    form, which fixes that register field to RZ) except where the offset is 0: then it prints
    the register (`c[0x0][RZ]`, the general form). Single flips never reach RZ from a
    representative's register, so ask nvdisasm directly: for every encoding E whose operand
    is a sibling encoding S's with the register left out and fixed to the zero register,
    disassemble E's word with that offset 0; where the text has S's form, E defers to S at
    offset 0 (Encoding.defer_when), kept only where the word then decodes to that text."""
    from dataclasses import replace
    from ..operands import REGISTER_ZERO
    cache = oracle.DisasmCache(arch)
    by_opcode = defaultdict(list)
    for e in isa.encodings:
        by_opcode[e.opcode].append(e)
    probes = []
    for s_enc in isa.encodings:
        for k, kind in enumerate(s_enc.kinds):
            dropped = _register_dropped(kind)
            if dropped is None:
                continue
            e_kind, reg_index, cls = dropped
            s_pos = 1 + sum(value_count(x) for x in s_enc.kinds[:k]) + reg_index
            reg = s_enc.fields[s_pos]
            if not isinstance(reg, Field):
                continue
            zero = reg.insert(field_uniform_register(REGISTER_ZERO[cls], isa.uniform_zero) if cls == "UR"
                              else REGISTER_ZERO[cls])
            for e in by_opcode[s_enc.opcode]:
                if e.kinds != s_enc.kinds[:k] + (e_kind,) + s_enc.kinds[k + 1:] or e.defer_when:
                    continue
                if e.match_mask & reg.mask != reg.mask or e.match_value & reg.mask != zero:
                    continue
                e_pos = 1 + sum(value_count(x) for x in e.kinds[:k]) + reg_index
                offset = e.fields[e_pos]
                word = e.source_word or e.base
                if isinstance(offset, Field):
                    probes.append((e, s_enc, e_pos, (word & ~offset.mask & ~CONTROL_MASK)
                                   | (_USUAL_CONTROL & CONTROL_MASK)))
    samples = probe.to_samples(oracle.disassemble([w for *_x, w in probes], arch, cache), arch)
    deferring = {}
    for e, s_enc, e_pos, word in probes:
        s = samples.get(word)
        if s is None or s.key != (s_enc.opcode, s_enc.kinds) or id(e) in deferring:
            continue
        narrowed = replace(e, defer_when=((e_pos, "=0"),))
        if check_format(isa, s) and not check_format(_replacing(isa, {id(e): narrowed}), s):
            deferring[id(e)] = narrowed
    log(f"[{arch}] {len(deferring)} register-less encodings print the zero register at offset 0 "
        f"({len(probes)} probed)")
    return _replacing(isa, deferring) if deferring else isa


def _meeting(e: Encoding, a: Alias, word: int) -> int:
    """`word` with the values the alias's conditions name changed to meet them (value 0 is
    the guard), or 0 where a condition cannot be met so."""
    def value(f: Field, word: int) -> int:
        raw = f.extract(word)
        return raw - (1 << f.value_bits) if f.transform == "s" and raw >> (f.value_bits - 1) & 1 else raw

    for j, cond in a.when:
        f = e.fields[j] if j < len(e.fields) else None
        if not isinstance(f, Field) or f.transform not in ("u", "s"):
            return 0
        v = value(f, word)
        if cond == "pow2":
            v = v if v > 1 and v & (v - 1) == 0 else 4
        elif cond.startswith("!="):
            v = v ^ 1 if v == _int_or_none(cond[2:]) else v
        elif cond.startswith("="):
            if _int_or_none(cond[1:]) is None:
                return 0
            v = _int_or_none(cond[1:])
        if f.transform == "u" and v & ~f.value_mask:
            return 0
        word = (word & ~f.mask) | f.insert(v & ((1 << f.value_bits) - 1))
    values = [value(f, word) if isinstance(f, Field) and f.transform in ("u", "s") else
              f[1] if not isinstance(f, Field) else None for f in e.fields]
    return word if a.holds(values) else 0


def _int_or_none(text: str):
    try:
        return int(text, 0)
    except ValueError:
        return None


def learn_alias_exceptions(isa: Isa, arch: str, samples: list, log=print) -> Isa:
    """An alias learned from words with some modifiers may not hold with others: sm_90's
    signed `IMAD.SHL` (a power of two, RZ) was learned without WIDE among its exceptions, and
    xformers' `IMAD.WIDE R54, R48, 0x2, RZ` printed as IMAD.SHL.WIDE. Start from words that
    decode through an alias (corpus words, and each encoding's representative with its values
    set to meet each alias's conditions) and that nvdisasm prints with the alias; give each
    every other value of each modifier group the alias does not name; where nvdisasm then
    prints it without the alias's modifiers, that value's modifiers join the alias's exceptions
    (`unless`). Kept only where every corpus word that round-tripped still does."""
    from dataclasses import replace
    cache = oracle.DisasmCache(arch)
    starts = []                              # (encoding, alias index, word)
    for s in samples:
        found = isa.decode_match(s.word, s.address)
        if found is None or not found[0].aliases:
            continue
        e = found[0]
        tokens, values = isa._decode_tokens(e, s.word), isa._decode_values(e, s.word, s.address)
        if tokens is not None and values is not None:
            k = next((k for k, a in enumerate(e.aliases) if a.holds(values) and a.allows(tokens)), None)
            if k is not None:
                starts.append((e, k, s.word))
    for e in isa.encodings:
        rep = _representative_word(isa, e) if e.aliases else 0
        for k, a in enumerate(e.aliases if rep else ()):
            word = _meeting(e, a, rep)
            for g in e.groups if word else ():  # the fewest modifiers: those the alias needs
                fits = [v for v, toks in g.values.items() if not toks & a.unless and (a.needs & g.tokens) <= toks]
                if fits:
                    word = (word & ~g.mask) | min(fits, key=lambda v: len(g.values[v]))
            tokens = isa._decode_tokens(e, word) if word else None
            if tokens is not None and a.allows(tokens):
                starts.append((e, k, word))
    base_texts = probe.to_samples(oracle.disassemble([w for *_x, w in starts], arch, cache), arch)
    probes, seen = [], set()
    for e, k, word in starts:
        a = e.aliases[k]
        t = base_texts.get(word)
        if t is None or not a.add <= set(t.inst.modifiers):
            continue                         # (nvdisasm does not print the alias here at all)
        for g in e.groups:
            for v, toks in g.values.items():
                mods = frozenset(t for t in toks if not t.startswith("@"))
                other = (word & ~g.mask) | v
                if not mods or mods & (a.unless | a.needs | a.drop | a.add) or (id(e), k, other) in seen:
                    continue
                seen.add((id(e), k, other))
                probes.append((e, k, mods, other))
    texts = probe.to_samples(oracle.disassemble([w for *_x, w in probes], arch, cache), arch)
    extra: dict = defaultdict(set)
    for e, k, mods, word in probes:
        t = texts.get(word)
        if t is not None and t.key[0] == e.opcode and not e.aliases[k].add <= set(t.inst.modifiers) \
                and mods <= set(t.inst.modifiers):
            extra[(id(e), k)] |= mods
    if not extra:
        log(f"[{arch}] alias exceptions: none to add ({len(probes)} probed)")
        return isa
    trial = _replacing(isa, {id(e): replace(e, aliases=[replace(a, unless=a.unless | frozenset(extra.get((id(e), k), ())))
                                                        for k, a in enumerate(e.aliases)])
                             for e in isa.encodings if any(key[0] == id(e) for key in extra)})
    before, after = check_corpus(isa, arch, samples), check_corpus(trial, arch, samples)
    if set(after) - set(before):
        log(f"[{arch}] alias exceptions: adding them would break {len(set(after) - set(before))} corpus words; kept")
        return isa
    log(f"[{arch}] alias exceptions: {sum(len(v) for v in extra.values())} modifiers added to the exceptions "
        f"of {len(extra)} aliases ({len(probes)} probed)")
    return trial


def drop_contradicted_group_values(isa: Isa, samples: list, log=print) -> Isa:
    """A group learned from one representative may hold only with the other groups' values
    of it: from `MUFU.TANH.BF16 R0, UR0` the function group says 6 = INVALID6 (RCP64H has no
    .BF16 form), and that encoding, more specific than the one learned from
    `MUFU.RCP64H R5, UR4`, decodes the latter as MUFU.INVALID6 (sm_90). Where a corpus word
    decodes to the wrong text through an encoding one of whose groups gives it a token
    nvdisasm did not print, drop that group value from that encoding; kept only where the word
    then prints right and every corpus word that round-tripped still does."""
    from dataclasses import replace
    before = check_corpus(isa, isa.arch, samples)
    encodings = list(isa.encodings)
    current = isa
    dropped = 0
    for s in samples:
        if not check_format(current, s).startswith("format:"):
            continue
        e, _inst = current.decode_match(s.word, s.address)
        printed = instruction_tokens(s.inst)
        groups = []
        for g in e.groups:
            v = s.word & g.mask
            if g.values.get(v, frozenset()) <= printed:
                groups.append(g)
            else:
                groups.append(Group(g.mask, {k: t for k, t in g.values.items() if k != v}, g.default,
                                    sequences={k: q for k, q in g.sequences.items() if k != v}))
        narrowed = replace(e, groups=groups)
        trial = [narrowed if x is e else x for x in encodings]
        trial_isa = Isa(isa.arch, trial, isa.tables, isa.syntax, isa.descriptor_load)
        if not check_format(trial_isa, s):
            encodings, current = trial, trial_isa
            dropped += 1
    if not dropped:
        return isa
    after = check_corpus(current, isa.arch, samples)
    if set(after) - set(before):
        log(f"[{isa.arch}] contradicted group values: dropping them would break "
            f"{len(set(after) - set(before))} corpus words; kept")
        return isa
    log(f"[{isa.arch}] contradicted group values dropped from {dropped} encodings "
        f"({len(before) - len(after)} corpus words fixed)")
    return current
