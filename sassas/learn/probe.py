"""Fitting encodings to the oracle by probing.

For each *representative* word (one real encoding of a form, from the corpus) we flip every
non-control bit, one at a time, and let nvdisasm say what changed:

* nothing printed, or another opcode / operand kinds: the bit selects the form (it is matched
  when decoding);
* one value of one operand changed by 2**k: the bit is bit k of that value's field;
* only modifiers or operand flags changed: the bit belongs to a modifier group;
* nothing visible changed: a hidden bit, kept as the representative has it.

Modifier bits whose pairwise flips interact are merged into groups, and each group (and
each name-valued field, such as special registers) is enumerated in full to learn its table.
Nothing in here knows any particular instruction.

:mod:`sassas.learn.induce` runs one learning round with these.
"""
from __future__ import annotations

import itertools
import math
import struct
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Optional

from ..ast import ControlCode, Instruction
from ..errors import SassError
from ..isa.forms import (CONTROL_MASK, CONTROL_SHIFT, Encoding, Field, Group, field_values, form_key,
                         form_name, instruction_tokens, numbered_modifiers, uniform_field_zero)
from ..parse import parse_instruction
from . import oracle


# Bits of the word that carry the reuse flags (the rest of the control bits are never probed).
REUSE_BITS = {ControlCode(reuse=1 << i).bits.bit_length() - 1 + CONTROL_SHIFT: i for i in range(4)}
# A control code nvdisasm accepts on any word and shows .reuse under: no yield, stall 1
# (a representative's stall of 12..15 is illegal once the word may not yield).
SHOWS_REUSE_CONTROL = ControlCode(stall=1, yield_=False).bits << CONTROL_SHIFT
PROBE_BITS = [b for b in range(128) if not (CONTROL_MASK >> b) & 1] + sorted(REUSE_BITS)
MAX_GROUP_BITS = 10
PAIR_DISTANCE = 8


@dataclass
class Sample:
    word: int
    address: int
    text: str
    inst: Instruction         # as sassas reads the text (URZ is 255)
    # The instruction's values (guard first) as the word's fields hold them: the uniform
    # registers numbered as the arch's fields do (URZ is 63 on sm_75..sm_90). What the learner
    # relates to bits reads these; what goes through the Isa (encode, decode) reads `inst`.
    values: list

    @property
    def key(self):
        return form_key(self.inst)

    @property
    def guard_kind(self) -> Optional[str]:
        return self.inst.predicate.kind if self.inst.predicate is not None else None


def to_samples(disassembled: dict[int, Optional[oracle.Disassembled]], arch: str,
               parse_failures: Optional[dict[str, str]] = None) -> dict[int, Optional[Sample]]:
    """Parse each disassembled word's text (nvdisasm's for `arch`); illegal or unreadable words
    map to None."""
    uniform_zero = uniform_field_zero(arch)
    out: dict[int, Optional[Sample]] = {}
    for w, d in disassembled.items():
        if d is None:
            out[w] = None
            continue
        try:
            inst = parse_instruction(d.text)
        except (SassError, Exception) as e:  # the parser's failures are reported, not fatal
            if parse_failures is not None:
                parse_failures.setdefault(d.text, str(e).splitlines()[0])
            out[w] = None
            continue
        inst.address = d.address
        out[w] = Sample(w, d.address, d.text, inst, field_values(inst, uniform_zero))
    return out


# --------------------------------------------------------------------------- value comparison

def _is_float(v) -> bool:
    return isinstance(v, float)


def same_value(a, b) -> bool:
    if _is_float(a) and _is_float(b) and math.isnan(a) and math.isnan(b):
        return True
    if (_is_float(a) or _is_float(b)) and a == 0 and b == 0:
        return math.copysign(1, a) == math.copysign(1, b)     # nvdisasm prints -0.0
    return type(a) is type(b) and a == b or (not isinstance(a, str) and not isinstance(b, str) and a == b)


def _f32_exact(v: float) -> Optional[int]:
    try:
        b = struct.unpack("<I", struct.pack("<f", v))[0]
    except OverflowError:
        return None
    return b if struct.unpack("<f", struct.pack("<I", b))[0] == v else None


def _single_bit(x: int) -> Optional[int]:
    return x.bit_length() - 1 if x and x & (x - 1) == 0 else None


M64 = (1 << 64) - 1


def _f16_exact(v: float) -> Optional[int]:
    try:
        b = struct.unpack("<H", struct.pack("<e", v))[0]
    except (OverflowError, struct.error):
        return None
    return b if struct.unpack("<e", struct.pack("<H", b))[0] == v else None


def _bit_of_change(v0, v1, slot_type: str) -> list[tuple[int, str]]:
    """Which bit of the stored value differs between v0 and v1, under each transform that
    explains the change by one bit: [(k, transform)]."""
    if slot_type == "float":
        a0, a1 = float(v0), float(v1)
        if math.isnan(a0) or math.isnan(a1):
            return []
        out = []
        for name, exact in (("f32", _f32_exact), ("f16", _f16_exact)):
            b0, b1 = exact(a0), exact(a1)
            if b0 is not None and b1 is not None:
                k = _single_bit(b0 ^ b1)
                if k is not None:
                    out.append((k, name))
        d0 = struct.unpack("<Q", struct.pack("<d", a0))[0]
        d1 = struct.unpack("<Q", struct.pack("<d", a1))[0]
        k = _single_bit(d0 ^ d1)
        if k is not None and k >= 32:
            out.append((k - 32, "f64hi"))
        return out
    x = (int(v0) ^ int(v1)) & M64
    k = _single_bit(x)
    if k is not None:
        return [(k, "u")]
    low = x & -x
    if x == M64 & ~(low - 1):                # every bit from k up: k is the sign bit
        return [(low.bit_length() - 1, "s")]
    return []


# --------------------------------------------------------------------------- probing

@dataclass
class Probe:
    """What single-bit flips of one representative word showed."""
    rep: Sample
    slot_types: list[str]
    pcrel: set[int]
    structural: set[int] = field(default_factory=set)
    illegal: set[int] = field(default_factory=set)
    hidden: set[int] = field(default_factory=set)
    slot_bits: dict[int, dict[int, int]] = field(default_factory=lambda: defaultdict(dict))  # slot -> {bit: k}
    slot_hints: dict[int, Counter] = field(default_factory=lambda: defaultdict(Counter))
    slot_bits_by: dict[int, dict[str, dict[int, int]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(dict)))  # slot -> transform -> {bit: k}

    def settle_slots(self) -> None:
        """Per slot, keep the transform whose bits line up best (fewest segment offsets)."""
        for j, by in self.slot_bits_by.items():
            def score(t):
                bits = by[t]
                return (len({b - k for b, k in bits.items()}), -len(bits), t != "f32")
            best = min(by, key=score)
            self.slot_bits[j] = dict(by[best])
            self.slot_hints[j] = Counter({best: len(by[best]), "s": self.slot_hints[j]["s"]})
    name_bits: dict[int, set[int]] = field(default_factory=lambda: defaultdict(set))        # str slots
    modifier_bits: set[int] = field(default_factory=set)
    modifier_tokens: dict[int, frozenset] = field(default_factory=dict)    # bit -> tokens when flipped
    guard_kinds: Counter = field(default_factory=Counter)     # P or UP: what flipped guards print
    reuse: dict[int, set[int]] = field(default_factory=lambda: defaultdict(set))   # operand -> bits
    sequences: list[tuple[str, ...]] = field(default_factory=list)
    # Tokens that come and go with values (printing aliases such as IMAD.MOV): not modifiers.
    alias_tokens: set[str] = field(default_factory=set)
    # Valid words of other forms one flip away: seeds for learning those forms.
    neighbours: list[Sample] = field(default_factory=list)


def _values(s: Sample, pcrel: set[int]) -> list:
    vals = list(s.values)
    for j in pcrel:
        vals[j] = int(vals[j]) - s.address
    return vals


def compatible(rep: Sample, s: Optional[Sample]) -> bool:
    return s is not None and s.key == rep.key and (s.guard_kind in (None, rep.guard_kind) or
                                                   rep.guard_kind is None)


def classify(rep: Sample, flips: dict[int, Optional[Sample]]) -> Probe:
    rep_vals = rep.values
    same_form = {b: s for b, s in flips.items() if compatible(rep, s)}
    slot_types = []
    for j, v in enumerate(rep_vals):
        if isinstance(v, str):
            slot_types.append("str")
        elif _is_float(v) or any(_is_float(s.values[j]) for s in same_form.values()):
            slot_types.append("float")
        else:
            slot_types.append("int")
    # Branch targets print as absolute addresses: a slot is pc-relative when it follows the
    # address of the flipped copies rather than staying put.
    pcrel = set()
    for j, t in enumerate(slot_types):
        if t != "int":
            continue
        absolute = sum(s.values[j] == rep_vals[j] for s in same_form.values())
        relative = sum(s.values[j] - s.address == rep_vals[j] - rep.address
                       for s in same_form.values())
        if relative > absolute:
            pcrel.add(j)
    probe = Probe(rep, slot_types, pcrel)
    v0 = _values(rep, pcrel)
    t0 = instruction_tokens(rep.inst)
    probe.sequences.append(tuple(rep.inst.modifiers))
    reuse0 = {i for i, op in enumerate(rep.inst.operands) if "reuse" in op.flags}
    for b, s in flips.items():
        if s is None:
            probe.structural.add(b)
            probe.illegal.add(b)
            continue
        if not compatible(rep, s):
            probe.structural.add(b)
            probe.neighbours.append(s)
            continue
        if s.guard_kind:
            probe.guard_kinds[s.guard_kind] += 1
        if b in REUSE_BITS:
            reuse1 = {i for i, op in enumerate(s.inst.operands) if "reuse" in op.flags}
            if len(reuse0 ^ reuse1) == 1:
                probe.reuse[(reuse0 ^ reuse1).pop()].add(REUSE_BITS[b])
            continue
        v1 = _values(s, pcrel)
        changed = [j for j in range(len(v0)) if not same_value(v0[j], v1[j])]
        t1 = instruction_tokens(s.inst)
        if not changed and t0 == t1:
            probe.hidden.add(b)
        elif len(changed) == 1 and t0 == t1:
            j = changed[0]
            if slot_types[j] == "str":
                probe.name_bits[j].add(b)
                continue
            found = _bit_of_change(v0[j], v1[j], slot_types[j])
            if not found:
                probe.structural.add(b)
                continue
            for k, transform in found:
                probe.slot_bits_by[j][transform if slot_types[j] == "float" else "int"][b] = k
                probe.slot_hints[j][transform] += 1
        elif not changed:
            probe.modifier_bits.add(b)
            probe.modifier_tokens[b] = t1
            probe.sequences.append(tuple(s.inst.modifiers))
        elif (len(changed) == 1 and slot_types[changed[0]] == "int"
              and (found := _bit_of_change(v0[changed[0]], v1[changed[0]], "int"))):
            # A value bit whose flip also changes the printed tokens: the tokens are an
            # alias that depends on the value (IMAD.MOV.U32 R1, RZ, RZ, R2), not a modifier.
            j = changed[0]
            for k, transform in found:
                probe.slot_bits_by[j]["int"][b] = k
                probe.slot_hints[j][transform] += 1
            probe.alias_tokens |= {t for t in t0 ^ t1 if not t.startswith("@")}
            probe.sequences.append(tuple(s.inst.modifiers))
        else:
            probe.structural.add(b)
    probe.settle_slots()
    return probe


def _segments(bits: dict[int, int], illegal: set[int], fillable: set[int] = frozenset(),
              below: set[int] = frozenset()) -> tuple[tuple[int, int, int], ...]:
    """{word bit: value bit} -> segments. Bits that were illegal to flip, or in `below` (flips
    that changed the form: BPT.TRAP 0x1 flipped to 0 prints no operand), are added where the
    segment continues below (e.g. low bits of an aligned register); holes inside a run are
    filled when their flips showed nothing else (some values print as another form)."""
    by_offset: dict[int, set[int]] = defaultdict(set)
    for b, k in bits.items():
        by_offset[b - k].add(k)
    segs = []
    for off, ks in by_offset.items():
        lo, hi = min(ks), max(ks)
        k = lo - 1
        while k >= 0 and (off + k in illegal or off + k in below):
            ks.add(k)
            k -= 1
        for k in range(lo, hi):
            if k not in ks and (off + k in illegal or off + k in fillable):
                ks.add(k)
        run = []
        for k in sorted(ks):
            if run and k == run[-1] + 1:
                run.append(k)
            else:
                if run:
                    segs.append((off + run[0], run[0], len(run)))
                run = [k]
        segs.append((off + run[0], run[0], len(run)))
    return tuple(sorted(segs, key=lambda s: s[1]))


# Register numbers span their register file: R0..RZ (255), UR0..URZ (63 to sm_90; Blackwell's
# 8-bit fields the register-widths pass widens, knowing the arch), P0..PT (7).
REGISTER_WIDTH = {"reg": 8, "ureg": 6, "pred": 3, "upred": 3}


def _register_width(segs, role: str, free: set[int]):
    """A register field seen narrower than its register file (flipping the top bit of P3
    gives PT, which nvdisasm leaves out, so the form changed): widened over the bits above
    where their flips showed no other value or modifier."""
    width = REGISTER_WIDTH.get(role)
    if width is None or len(segs) != 1 or segs[0][1] != 0 or segs[0][2] >= width:
        return segs
    wl, _vl, w = segs[0]
    if all(b in free for b in range(wl + w, wl + width)):
        return ((wl, 0, width),)
    return segs


def pair_words(probe: Probe) -> list[tuple[int, int, int]]:
    """Pairs of modifier bits to flip together: near ones, and far ones whose single flips
    replace the same modifier (F2FP's destination type is bits 76 and 87 on sm_90)."""
    bits = sorted(probe.modifier_bits)
    t0 = instruction_tokens(probe.rep.inst)

    def related(b1, b2):
        if b2 - b1 <= PAIR_DISTANCE:
            return True
        t1, t2 = probe.modifier_tokens.get(b1, t0), probe.modifier_tokens.get(b2, t0)
        if (t0 - t1) & (t0 - t2) or (t1 - t0) & (t2 - t0):
            return True
        # two flips that each add a modifier, a little farther apart: one field's bits may
        # lie apart (sm_70 I2F R, R: bit 74 = unsigned, 85 = source width; both flipped
        # print U8, not U32 and S8)
        return b2 - b1 <= 2 * PAIR_DISTANCE and bool(t1 - t0) and bool(t2 - t0)
    return [(b1, b2, probe.rep.word ^ (1 << b1) ^ (1 << b2))
            for i, b1 in enumerate(bits) for b2 in bits[i + 1:] if related(b1, b2)]


def modifier_groups(probe: Probe, flips: dict[int, Optional[Sample]],
                    pairs: dict[int, Optional[Sample]]) -> list[list[int]]:
    """Union modifier bits whose combined flip is not the sum of their single flips."""
    parent = {b: b for b in probe.modifier_bits}

    def find(b):
        while parent[b] != b:
            parent[b] = parent[parent[b]]
            b = parent[b]
        return b

    t0 = instruction_tokens(probe.rep.inst)
    for b1, b2, w in pair_words(probe):
        s = pairs.get(w)
        t1, t2 = instruction_tokens(flips[b1].inst), instruction_tokens(flips[b2].inst)
        expected = (t0 - (t0 - t1) - (t0 - t2)) | (t1 - t0) | (t2 - t0)
        if not compatible(probe.rep, s) or instruction_tokens(s.inst) != expected:
            parent[find(b1)] = find(b2)
    # Bits whose single flips each take away the same modifier of the representative decide
    # it together (ATOMS.CAST.SPIN: clearing bit 87 prints CAS, clearing bit 88 prints CAST;
    # BRA.U.ANY: bits 32 and 84): one group, enumerated whole, or the one that flips it
    # last would claim the modifier alone and the other would keep its default.
    size = Counter(find(b) for b in probe.modifier_bits)
    for b1, b2 in itertools.combinations(sorted(probe.modifier_bits), 2):
        t1, t2 = probe.modifier_tokens.get(b1, t0), probe.modifier_tokens.get(b2, t0)
        shared = {t for t in (t0 - t1) & (t0 - t2) if not t.startswith("INVALID")}
        r1, r2 = find(b1), find(b2)
        if shared and r1 != r2 and size[r1] + size[r2] <= MAX_GROUP_BITS:
            parent[r1] = r2
            size[r2] += size.pop(r1)
    groups: dict[int, list[int]] = defaultdict(list)
    for b in probe.modifier_bits:
        groups[find(b)].append(b)
    out = []
    for bits in groups.values():
        if len(bits) > MAX_GROUP_BITS:
            out.extend([b] for b in sorted(bits))
        else:
            out.append(sorted(bits))
    return sorted(out)


# A small modifier field is enumerated whole (all 2^k values, k <= WHOLE_FIELD_BITS).
WHOLE_FIELD_BITS = 3


def widen_small_groups(probe: Probe, groups: list[list[int]]) -> list[list[int]]:
    """Add to a small modifier group the bits next to it whose single flips changed the form
    or were illegal: a field's value two flips away is not seen one flip at a time (sm_70's
    I2F source width, bits 84..85: 2 = 32-bit; flipping bit 85 gives 0 = 8-bit, a modifier,
    flipping bit 84 gives 3 = 64-bit, another form; 1 = 16-bit needs both). Enumerating the
    widened group keeps only the values that print this form; the others stay undecodable
    here as before."""
    taken = set(probe.modifier_bits) | set(probe.hidden)
    for bb in probe.slot_bits.values():
        taken |= set(bb)
    for bb in probe.name_bits.values():
        taken |= set(bb)
    for bits in groups:
        taken |= set(bits)
    def free(n):
        return n >= 16 and n in probe.structural and n not in taken and not (CONTROL_MASK >> n) & 1

    out = []
    for bits in groups:
        # each run of adjacent bits of the group is a field (or part of one)
        runs: list[list[int]] = []
        for b in sorted(bits):
            if runs and b == runs[-1][-1] + 1:
                runs[-1].append(b)
            else:
                runs.append([b])
        wide = set(bits)
        for run in runs:
            extra = [n for n in (run[0] - 1, run[-1] + 1) if free(n)]
            if extra and len(run) + len(extra) <= WHOLE_FIELD_BITS \
                    and len(wide) + len(extra) <= MAX_GROUP_BITS:
                taken |= set(extra)
                wide |= set(extra)
        out.append(sorted(wide))
    return out


def enumeration_words(rep_word: int, bits: list[int]) -> list[int]:
    words = []
    clear = rep_word
    for b in bits:
        clear &= ~(1 << b)
    for n in range(1 << len(bits)):
        w = clear
        for i, b in enumerate(bits):
            if n >> i & 1:
                w |= 1 << b
        words.append(w)
    return words


def _mask(bits) -> int:
    m = 0
    for b in bits:
        m |= 1 << b
    return m


def build_group(probe: Probe, bits: list[int], results: dict[int, Optional[Sample]]) -> Optional[Group]:
    rep = probe.rep
    v0 = _values(rep, probe.pcrel)
    mask = _mask(bits)
    seen: dict[int, frozenset] = {}
    printed: dict[int, tuple[str, ...]] = {}
    for w in enumeration_words(rep.word, bits):
        s = results.get(w)
        if not compatible(rep, s):
            continue
        v1 = _values(s, probe.pcrel)
        if any(not same_value(a, b) for a, b in zip(v0, v1)):
            continue
        seen[w & mask] = instruction_tokens(s.inst)
        printed[w & mask] = numbered_modifiers(s.inst.modifiers)
        probe.sequences.append(tuple(s.inst.modifiers))
    if not seen:
        return None
    alias = frozenset(probe.alias_tokens)
    seen = {v: toks - alias for v, toks in seen.items()}
    common = frozenset.intersection(*seen.values())
    values = {v: toks - common for v, toks in seen.items()}
    empties = [v for v, t in values.items() if not t]
    rep_value = rep.word & mask
    default = rep_value if rep_value in empties else (min(empties) if empties else -1)
    sequences = {v: seq for v, toks in values.items()
                 if len(seq := tuple(t for t in printed[v] if t in toks)) > 1}
    g = Group(mask, values, default, sequences=sequences)
    if default < 0:
        g.by_tokens.pop(frozenset(), None)
    return g


MAX_NAME_BITS = 10


def name_window(probe: Probe, j: int, windows: dict, tname: str) -> tuple[int, int]:
    """(lo, width) of name-valued value j: the span of the bits whose flips changed the name,
    widened to the span every representative of the same table showed (one that holds
    SR_LANEID flips fewer bits than one that holds SR_TID.X), where no other value or
    modifier of this representative sits in the extra bits."""
    bits = sorted(probe.name_bits[j])
    lo, hi = bits[0], bits[-1]
    wlo, whi = windows.get(tname, (lo, hi))
    wlo, whi = min(wlo, lo), max(whi, hi)
    claimed = set(probe.modifier_bits)
    for jj, bb in probe.slot_bits.items():
        claimed |= set(bb)
    for jj, bb in probe.name_bits.items():
        if jj != j:
            claimed |= bb
    if whi - wlo < MAX_NAME_BITS and not claimed & set(range(wlo, whi + 1)):
        lo, hi = wlo, whi
    return lo, hi - lo + 1


def modifier_order(sequences: list[tuple[str, ...]], own: list[tuple[str, ...]] = ()) -> tuple[str, ...]:
    """A print order consistent with every observed modifier sequence (ties: mean position).
    Where the sequences disagree about a pair, those in `own` (what one encoding prints)
    decide: F2F prints its destination type first, so one encoding prints F16.F32 and
    another F32.F16."""
    after: dict[str, set[str]] = defaultdict(set)
    pos: dict[str, list[float]] = defaultdict(list)
    own_pairs: set[tuple[str, str]] = set()
    for mine, seqs in ((True, own), (False, sequences)):
        for seq in seqs:
            toks = numbered_modifiers(seq)
            for i, t in enumerate(toks):
                pos[t].append(i / max(len(toks), 1))
                for u in toks[i + 1:]:
                    if mine:
                        own_pairs.add((t, u))
                    if (u, t) not in own_pairs:
                        after[t].add(u)
    remaining = set(pos)
    order = []
    while remaining:
        free = [t for t in remaining if not any(t in after[u] for u in remaining if u != t)]
        if not free:
            # A cycle through other encodings' sequences (F32.F16, F16.F64, and this one's
            # F64.F32): what this encoding prints still decides.
            free = [t for t in remaining if not any((u, t) in own_pairs for u in remaining if u != t)]
        pick = min(free or remaining, key=lambda t: (sum(pos[t]) / len(pos[t]), t))
        order.append(pick)
        remaining.remove(pick)
    return tuple(order)


def build_encoding(probe: Probe, groups: list[Group], name_tables: dict[int, tuple[int, int]],
                   extra_sequences: list[tuple[str, ...]] = ()) -> Encoding:
    rep = probe.rep
    vals = rep.values
    from types import SimpleNamespace
    from ..isa.description import value_kinds
    roles = value_kinds(SimpleNamespace(kinds=rep.key[1]))
    fields: list = []
    used = 0
    for j, v in enumerate(vals):
        if probe.slot_types[j] == "str" and j in name_tables:
            lo, width = name_tables[j]
            f = Field(((lo, 0, width),), f"table:{rep.inst.opcode}.{table_name(rep.inst, j)}")
        elif probe.slot_bits.get(j):
            others = set(probe.modifier_bits)
            for jj, bb in probe.slot_bits.items():
                if jj != j:
                    others |= set(bb)
            free = (probe.structural | probe.hidden) - others
            # A set bit whose flip changed the form may be the value's low bit (the smaller
            # value prints as another form); a clear one is not (a larger value would not).
            elided = {b for b in probe.structural - others if rep.word >> b & 1}
            segs = _segments(probe.slot_bits[j], probe.illegal, free, elided)
            segs = _register_width(segs, roles[j] if j < len(roles) else "", free)
            hints = probe.slot_hints[j]
            if probe.slot_types[j] == "float":
                transform = max(("f32", "f16", "f64hi"), key=lambda t: hints[t])
            elif j in probe.pcrel:
                transform = "pcrel"
            elif hints["s"] or (isinstance(v, int) and v < 0):
                transform = "s"
            elif isinstance(v, int) and len(segs) and Field(segs).value_bits > 1 \
                    and Field(segs).extract(rep.word) == v ^ Field(segs).value_mask:
                transform = "n"      # stored inverted: the representative's bits are ~value
            else:
                transform = "u"
            f = Field(segs, transform)
        else:
            fields.append(("const", v))
            continue
        used |= f.mask
        fields.append(f)
    group_mask = 0
    for g in groups:
        group_mask |= g.mask
    structural = _mask(probe.structural) & ~used & ~group_mask & ~CONTROL_MASK
    base = rep.word & ~used & ~group_mask & ~CONTROL_MASK
    fixed_tokens = instruction_tokens(rep.inst) - probe.alias_tokens
    for g in groups:
        fixed_tokens -= g.tokens
        rep_toks = g.values.get(rep.word & g.mask)
        if rep_toks is not None:
            fixed_tokens -= rep_toks
    enc = Encoding(
        opcode=rep.inst.opcode, kinds=rep.key[1], guard_kind=rep.guard_kind or _guess_guard(probe),
        match_mask=structural, match_value=rep.word & structural, base=base, fields=fields,
        groups=groups, fixed_tokens=frozenset(fixed_tokens),
        order=modifier_order(probe.sequences + list(extra_sequences)),
        # refine() picks the bit to encode where several print .reuse on one operand.
        reuse={i: min(bits) for i, bits in probe.reuse.items()},
        reuse_decode_only={i: tuple(sorted(bits))[1:] for i, bits in probe.reuse.items() if len(bits) > 1},
        name=form_name(rep.inst.opcode, rep.key[1]))
    enc.evidence = list(probe.sequences)
    enc.example = rep.text
    return enc


def widened_group(probe: Probe, wide: list[int], bits: list[int], results) -> Optional[Group]:
    """The group over the widened bits where some value of this form needs the extra bits
    changed (I2F's 16-bit source); else the group over the bits as probed."""
    if wide != bits:
        g = build_group(probe, wide, results)
        extra = _mask(wide) & ~_mask(bits)
        if g is not None and any((v ^ probe.rep.word) & extra for v in g.values):
            return g
    return build_group(probe, bits, results)


def groups_overlap_fields(enc: Encoding) -> bool:
    fields = 0
    for f in enc.fields:
        if not isinstance(f, tuple):
            fields |= f.mask
    seen = 0
    for g in enc.groups:
        if g.mask & (fields | seen):
            return True
        seen |= g.mask
    return False


def _guess_guard(probe: Probe) -> str:
    """The guard kind of a representative printed without one (@PT): what its flips print
    (uniform datapath instructions take @UPn)."""
    return probe.guard_kinds.most_common(1)[0][0] if probe.guard_kinds else "P"


def table_name(inst: Instruction, j: int) -> str:
    """The kind letter group of value j (guard = 0): 'SR' for special registers."""
    pos = 1
    from ..kinds import value_count
    for op in inst.operands:
        n = value_count(op.kind)
        if pos <= j < pos + n:
            return op.kind if op.kind.isalpha() else "SR"
        pos += n
    return "SR"
