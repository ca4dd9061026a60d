"""Checking and choosing encodings against the corpus: refine an encoding to what every sample of
its form needs, choose reuse bits, check that every sample re-encodes to its word and prints
as nvdisasm prints it, rank and dedupe the encodings of a form.
"""
from __future__ import annotations

from collections import Counter, defaultdict

from ..errors import SassError
from ..isa.description import DEFAULT_SYNTAX
from ..isa.engine import Isa
from ..isa.forms import CONTROL_MASK, instruction_tokens, written_tokens
from ..parse import parse_instruction
from . import corpus, oracle, probe
from .probe import modifier_order


def refine(encodings, by_key, corpus_words=frozenset()) -> None:
    """Use the corpus where single probes cannot see: share reuse bits among a form's
    encodings, order modifiers as the corpus prints them, and set hidden bits (ones nvdisasm
    does not print) to what ptxas writes most often (in its own words where it wrote any:
    probed neighbours carry the representative's bits or random ones)."""
    reuse_by_key = choose_reuse_bits(encodings, by_key)
    # nvdisasm prints an opcode's modifiers in one order whatever the operands: pool the
    # sequences of all its forms (one form rarely shows every pair of modifiers together);
    # an encoding's own sequences decide the pairs its opcode prints both ways.
    sequences: dict = defaultdict(list)
    for e in encodings:
        sequences[e.opcode] += e.evidence
    for key, samples in by_key.items():
        sequences[key[0]] += [tuple(s.inst.modifiers) for s in samples]
    for e in encodings:
        key = (e.opcode, e.kinds)
        e.reuse, e.reuse_decode_only = (dict(d) for d in reuse_by_key[_reuse_key(e)])
        samples = by_key.get(key, [])
        mine = own_samples(e, samples)
        e.order = modifier_order(sequences[e.opcode], e.evidence + [tuple(s.inst.modifiers) for s in mine])
        for cached in ("order_index", "print_cache", "reuse_masks", "unprinted_reuse", "printed_fixed_tokens"):
            e.__dict__.pop(cached, None)
        if mine:
            set_hidden_bits(e, [s for s in mine if s.word in corpus_words] or mine)


def own_samples(e, samples: list) -> list:
    """The samples (of e's form) that e's opcode bits match, with e's fixed modifiers."""
    return [s for s in samples if s.word & e.match_mask == e.match_value
            and instruction_tokens(s.inst) >= e.fixed_tokens]


def set_hidden_bits(e, samples: list) -> None:
    """Set e's hidden bits (those nvdisasm does not print) as most `samples` have them."""
    hidden = ~(e.match_mask | CONTROL_MASK | claimed_bits(e)) & ((1 << 128) - 1)
    for b in range(128):
        if hidden >> b & 1:
            ones = sum(s.word >> b & 1 for s in samples)
            if 2 * ones > len(samples):
                e.base |= 1 << b
            elif 2 * ones < len(samples):
                e.base &= ~(1 << b)


ZERO_REGISTER = {"R": 255, "UR": 255}


def choose_reuse_bits(encodings, by_key) -> dict:
    """Per form: ({operand: the reuse bit to encode}, {operand: other bits printing .reuse on
    it}). Probes may show two bits printing .reuse on one operand (sm_70's nvdisasm shows the
    B and C bits alike on the one register of `FSEL R, R, R, P`); ptxas sets the bit of the
    register's slot. The corpus decides where it shows .reuse on the operand; else the bit
    that the opcode's other forms give an operand after the same operand kinds, else the one
    the arch's other forms pair with the same register field, counting forms where one bit
    alone prints .reuse on the operand (`FFMA R, R, R, c` keeps its third register in the C
    field, and takes B's bit like `FFMA R, R, R, R`). A form's encodings are pooled only where
    their operands sit in the same fields (_reuse_key): sm_86's `F2FP.MERGE_C R2, R0.reuse, RZ`
    keeps its sources in the B and C fields, `F2FP.PACK_AB` in A and B."""
    seen: dict = defaultdict(lambda: defaultdict(set))
    field_of: dict = {}
    matches: dict = defaultdict(list)
    for e in encodings:
        key = _reuse_key(e)
        per_op = seen[key]
        for i, b in e.reuse.items():
            per_op[i] |= {b, *e.reuse_decode_only.get(i, ())}
        field_of.setdefault(key, operand_fields(e))
        matches[key].append((e.match_mask, e.match_value))
    bit_of_field: dict = defaultdict(Counter)
    bit_of_operand: dict = defaultdict(Counter)
    for key, per_op in seen.items():
        for i, bits in per_op.items():
            if len(bits) == 1:
                bit_of_operand[(key[0], key[1][:i])][next(iter(bits))] += 1
                if i in field_of[key]:
                    bit_of_field[field_of[key][i]][next(iter(bits))] += 1
    out = {}
    for key, per_op in seen.items():
        samples = [s for s in by_key.get(key[:2], []) if any(s.word & m == v for m, v in matches[key])]
        decided = reuse_from_samples(samples, per_op)
        reuse, decode_only = {}, {}
        for i in sorted(set(per_op) | set(decided)):
            bits = per_op.get(i, set())
            if i in decided:
                pick = decided[i]
            else:
                same_operand = bit_of_operand.get((key[0], key[1][:i]), Counter())
                same_field = bit_of_field.get(field_of[key].get(i), Counter())
                pick = max(sorted(bits), key=lambda b: (same_operand[b], same_field[b]))
            reuse[i] = pick
            if bits - {pick}:
                decode_only[i] = tuple(sorted(bits - {pick}))
        out[key] = (reuse, decode_only)
    return out


def _reuse_key(e) -> tuple:
    """Encodings that share reuse bits: one form, its operands in the same fields."""
    return e.opcode, e.kinds, tuple(sorted(operand_fields(e).items()))


def operand_fields(e) -> dict:
    """Operand index -> the word position of its first value's field."""
    out, pos = {}, 1
    for i, (_kind, n) in enumerate(e.operand_shape):
        f = e.fields[pos] if pos < len(e.fields) else None
        if f is not None and not isinstance(f, tuple):
            out[i] = f.segments[0][0]
        pos += n
    return out


def reuse_from_samples(samples, seen=None) -> dict[int, int]:
    """{operand index: reuse bit} where the words decide it: the bit is set in every word
    whose text shows .reuse on the operand and clear in every word showing none on it
    (nvdisasm hides .reuse on RZ, so those words say nothing), and is one of the bits that
    probes `seen` print .reuse on it, where they saw any."""
    from ..ast import ControlCode
    candidates: dict[int, set] = {}
    excluded: dict[int, set] = defaultdict(set)
    for s in samples:
        bits = {b for b in range(4) if ControlCode.from_word(s.word).reuse >> b & 1}
        for i, op in enumerate(s.inst.operands):
            if "reuse" in op.flags:
                candidates[i] = candidates.get(i, bits) & bits
            elif op.kind in ZERO_REGISTER and op.values[0] != ZERO_REGISTER[op.kind]:
                excluded[i] |= bits
    out = {}
    for i, bits in candidates.items():
        left = bits - excluded[i]
        if seen and seen.get(i):
            left &= seen[i]
        if len(left) == 1:
            out[i] = left.pop()
    return out


def check_sample(isa: Isa, s: probe.Sample, strict: bool = True, descriptor=None) -> str:
    """'' when the sample round-trips bit-exactly both ways; else what went wrong.
    Not strict (words of the opcode sweep, whose hidden bits are random): the word decodes
    to nvdisasm's text, and that text encodes to a word that prints the same."""
    if not strict:
        try:
            text = isa.format(isa.decode(s.word, s.address))
            if text != s.text:
                return f"format: {text!r} != {s.text!r}"
            inst = parse_instruction(s.text)
            inst.address = s.address
            again = isa.format(isa.decode(isa.encode(inst), s.address))
        except SassError as e:
            return f"text round trip: {e.message}"
        return "" if again == s.text else f"text round trip: {again!r} != {s.text!r}"
    try:
        inst = parse_instruction(s.text)
        inst.address = s.address
        from ..ast import ControlCode
        inst.control = ControlCode.from_word(s.word)
        if descriptor is not None and inst.opcode in isa.descriptor_opcodes:
            inst.descriptor = descriptor      # what the kernel around it gives (check_corpus)
        word = isa.encode(inst)
    except SassError as e:
        return f"encode: {e.message}"
    if word != s.word:
        return f"encode: 0x{word:032x} != 0x{s.word:032x} (diff 0x{word ^ s.word:x})"
    return check_format(isa, s)


def check_format(isa: Isa, s: probe.Sample) -> str:
    """'' when the word decodes and prints as nvdisasm's text; else what went wrong."""
    try:
        text = isa.format(isa.decode(s.word, s.address))
    except SassError as e:
        return f"decode: {e.message}"
    if text != s.text:
        return f"format: {text!r} != {s.text!r}"
    return ""


def check_corpus(isa: Isa, arch: str, samples: list, log=None) -> dict[int, str]:
    """The corpus samples that do not round-trip (word -> why), measured as `sassas asm` gets
    them from a listing: each word must decode and print as nvdisasm's text, and re-encode
    bit-exactly from that text (control bits from the word) in every kernel it occurs in,
    with what the kernel around it tells: the hidden memory descriptor (sm_80..sm_89), which
    resolve gives a memory instruction from the kernel's descriptor loads
    (resolve.descriptor_registers; a label, at every branch target as in nvdisasm's listing,
    starts a basic block). One word alone cannot say which pair ptxas loaded the descriptor
    into. Words without a hidden descriptor are checked once (check_sample)."""
    from ..ast import Label
    from ..resolve import descriptor_registers
    by_word = {s.word: s for s in samples}
    failures: dict[int, str] = {}
    context: dict[int, set] = defaultdict(set)          # word -> descriptor registers given
    if isa.descriptor_opcodes:
        for cubin in corpus.cubins(arch):
            for _section, code in oracle.text_sections(cubin):
                words = oracle.words_of(code)
                decoded = [isa.decode_match(w, 16 * i) if w in by_word else None for i, w in enumerate(words)]
                if not any(m is not None and m[1].opcode in isa.descriptor_opcodes for m in decoded):
                    continue
                targets = {op.values[0] for m in decoded if m is not None
                           for op in m[1].operands if op.kind == "L"}
                body = []
                for i, m in enumerate(decoded):
                    if 16 * i in targets:
                        body.append(Label(f".L_{i}"))
                    body.append(m[1] if m is not None else parse_instruction("NOP"))
                registers = descriptor_registers(body, isa.descriptor_load)
                for w, m, register in zip(words, decoded, registers):
                    if m is not None and m[1].opcode in isa.descriptor_opcodes:
                        context[w].add(register)
    for s in samples:
        why = check_sample(isa, s)
        if s.word in context and (not why or why.startswith("encode:")):
            why = ""
            for register in sorted(context[s.word], key=lambda r: -1 if r is None else r):
                why = check_sample(isa, s, descriptor=register)
                if why:
                    break
        if why:
            failures[s.word] = why
    return failures


def claimed_bits(e) -> int:
    """The bits an encoding's fields and groups hold."""
    m = 0
    for f in e.fields:
        if not isinstance(f, tuple):
            m |= f.mask
    for g in e.groups:
        m |= g.mask
    return m


def rank(encodings: list, samples: list, tables: dict) -> None:
    """Order each form's encodings by how many corpus words each reproduces exactly (the
    encoder tries them in this order, like LLVM's alias priorities): stored as `support`;
    and record in `reproduces` the token sets of the words each encoding reproduces (where
    several do, the encoder prefers one that reproduced the instruction's set)."""
    by_key = defaultdict(list)
    for e in encodings:
        by_key[(e.opcode, e.kinds)].append(e)
    samples_by_key = defaultdict(list)
    for s in samples:
        samples_by_key[s.key].append(s)
    from ..ast import ControlCode
    for key, encs in by_key.items():
        # (support 0 before the Isa is made: it would take the hidden bits of an encoding
        # with none from its siblings, and so undo what refine found in the corpus)
        for e in encs:
            e.support = 0
        isa = Isa("", encs, tables, dict(DEFAULT_SYNTAX))
        reproduces = defaultdict(set)
        for s in samples_by_key.get(key, []):
            inst = parse_instruction(s.text)
            inst.address, inst.control = s.address, ControlCode.from_word(s.word)
            toks, vals = instruction_tokens(inst), s.values
            first = True
            for e in encs:
                if isa._try_encode(e, inst, toks, vals, []) == s.word:
                    e.support += first
                    first = False
                    reproduces[id(e)].add(written_tokens(inst))
        for e in encs:
            e.reproduces = frozenset(reproduces[id(e)])


def _signature(e) -> tuple:
    """What makes two encodings interchangeable (duplicates are dropped)."""
    return (e.opcode, e.kinds, e.guard_kind, e.match_mask, e.match_value,
            tuple(f if isinstance(f, tuple) else (f.segments, f.transform) for f in e.fields),
            tuple((g.mask, tuple(sorted((v, tuple(sorted(t))) for v, t in g.values.items()))) for g in e.groups),
            e.fixed_tokens)


def dedupe(encodings: list) -> list:
    seen, out = set(), []
    for e in encodings:
        sig = _signature(e)
        if sig not in seen:
            seen.add(sig)
            out.append(e)
    return out
