"""The ISA engine: reads a description (sassas/isa/data/sm_XX.toml) and encodes, decodes and
prints instructions. All knowledge of the instruction set is in the description; this module
only knows how descriptions are shaped:

* an instruction *form* is an opcode plus its operand kinds (``FFMA R, R, R, I``); one form may
  have several *encodings* (e.g. with an operand fixed to a constant);
* every value of the instruction (guard predicate first, then each operand's numbers in order)
  is either a *field* (bit segments plus a value transform) or a *constant*;
* modifiers and operand flags are *tokens* (``RM``, ``U32``, ``@1-`` = flag '-' on operand 1,
  ``@g!`` = negated guard); each *group* of bits maps its values to a set of tokens;
* an encoding matches a word when ``word & match_mask == match_value``; encoding starts from
  ``base`` and ORs in fields and groups; control bits come from ControlCode.
"""
from __future__ import annotations

import difflib
import functools
import itertools
import math
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

from ..ast import ControlCode, Instruction, Operand
from ..errors import SassError
from ..kinds import value_count

DATA_DIR = Path(__file__).resolve().parent / "data"
CONTROL_SHIFT = 105
CONTROL_MASK = ((1 << 21) - 1) << CONTROL_SHIFT
MASK128 = (1 << 128) - 1
_DEFAULT_CONTROL_BITS = ControlCode().bits & ~(0xF << 17)
_REUSE = frozenset({"reuse"})
_CONTROL_CACHE: dict = {}
_NEGATED = frozenset({"!"})
_NO_FLAGS = frozenset()
GUARD_NEGATED = "@g!"


def flag_token(operand_index: int, flag: str) -> str:
    return f"@{operand_index}{flag}"


# --------------------------------------------------------------------------- value transforms

def _f32_bits(v: float) -> int:
    return struct.unpack("<I", struct.pack("<f", v))[0]


# nvdisasm prints every NaN immediate as `+QNAN` / `-QNAN`: text loses the payload. A NaN
# read from text (Python's one NaN, payload-free) gets the pattern compiled code holds most:
# CUDA's own NaN constant (CUDART_NAN_F, 0x7fffffff: 330 of 370 `+QNAN` FSELs in faiss's sm_80
# code, the rest 0x7fc00000), and 0xffc00000 for `-QNAN` (MUFU's in torchvision). A NaN that
# carries a payload (decoded, not read) keeps it; `.raw` keeps any other.
TEXT_NAN_F32 = {False: 0x7FFFFFFF, True: 0xFFC00000}
_TEXT_NAN_F64 = 0x7FF8000000000000


def _f32_immediate_bits(v: float) -> int:
    bits = _f64_bits(v)
    if bits & ~(1 << 63) == _TEXT_NAN_F64:
        return TEXT_NAN_F32[bool(bits >> 63)]
    return _f32_bits(v)


def _f64_bits(v: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", v))[0]


def _bits_f32(b: int) -> float:
    return struct.unpack("<f", struct.pack("<I", b & 0xFFFFFFFF))[0]


def _bits_f64(b: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", b & 0xFFFFFFFFFFFFFFFF))[0]


class Transform:
    """How an instruction value maps to the integer stored in a field's segments."""
    # u: unsigned; n: unsigned, stored inverted (sm_90's HGMMA scale-d predicate: UP0 is 7);
    # s: two's complement; pcrel: signed, target - (address + size);
    # f32: IEEE single; f64hi: high 32 bits of an IEEE double; table:NAME: name <-> number
    KINDS = ("u", "n", "s", "pcrel", "f32", "f64hi", "f16")


@dataclass(frozen=True)
class Field:
    """Where one value lives: segments (word_lsb, value_lsb, width) and a transform."""
    segments: tuple[tuple[int, int, int], ...]
    transform: str = "u"

    @functools.cached_property
    def mask(self) -> int:
        m = 0
        for wl, _vl, w in self.segments:
            m |= ((1 << w) - 1) << wl
        return m

    @functools.cached_property
    def value_bits(self) -> int:
        return max(vl + w for _wl, vl, w in self.segments)

    @functools.cached_property
    def value_mask(self) -> int:
        m = 0
        for _wl, vl, w in self.segments:
            m |= ((1 << w) - 1) << vl
        return m

    def insert(self, raw: int) -> int:
        word = 0
        for wl, vl, w in self.segments:
            word |= ((raw >> vl) & ((1 << w) - 1)) << wl
        return word

    def extract(self, word: int) -> int:
        raw = 0
        for wl, vl, w in self.segments:
            raw |= ((word >> wl) & ((1 << w) - 1)) << vl
        return raw


@dataclass
class Group:
    """A set of bits that together select some tokens."""
    mask: int
    values: dict[int, frozenset]          # word & mask -> tokens
    default: int                          # the value used when none of the tokens is given
    by_tokens: dict[frozenset, int] = field(default_factory=dict)
    # word & mask -> its modifiers in print order, where it has several: IDP's one group of
    # source types prints U8.S8 for one value and S8.U8 for another.
    sequences: dict[int, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self):
        if not self.by_tokens:
            for v, toks in sorted(self.values.items()):
                self.by_tokens.setdefault(toks, v)
            self.by_tokens[frozenset()] = self.default if self.default in self.values else \
                self.by_tokens.get(frozenset(), self.default)

    @functools.cached_property
    def by_sequence(self) -> dict[tuple[str, ...], int]:
        """Modifiers in print order -> value, for the token sets that several values print
        (in different orders)."""
        count: dict[frozenset, int] = {}
        for toks in self.values.values():
            count[toks] = count.get(toks, 0) + 1
        out: dict[tuple[str, ...], int] = {}
        for v, seq in sorted(self.sequences.items()):
            if count.get(self.values[v], 0) > 1:
                out.setdefault(seq, v)
        return out

    @functools.cached_property
    def tokens(self) -> frozenset:
        return frozenset().union(*self.values.values()) if self.values else frozenset()


@dataclass
class Encoding:
    opcode: str
    kinds: tuple[str, ...]
    guard_kind: str
    match_mask: int
    match_value: int
    base: int
    fields: list                          # Field or ("const", value) per instruction value
    groups: list[Group]
    fixed_tokens: frozenset
    order: tuple[str, ...]                # modifier print order
    reuse: dict[int, int]                 # operand index -> reuse bit (0..3) the encoder sets
    name: str = ""                        # for messages: 'FFMA R, R, R, I'
    example: str = ""                     # the representative's nvdisasm text
    evidence: list = field(default_factory=list, repr=False)   # learner's modifier sequences
    # Printing aliases decided by values (nvdisasm's `IMAD.MOV.U32 R1, RZ, RZ, R2` is IMAD with
    # both factors RZ), most specific first: see Alias.
    aliases: list = field(default_factory=list)
    source_word: int = field(default=0, repr=False)   # the learner's representative
    support: int = 0                      # corpus words it reproduces: encoder preference
    # The tokens (written_tokens: modifiers in print order, then flags) of the corpus words
    # it reproduces bit-exactly: the encoder prefers an encoding that reproduced the
    # instruction's own, where ptxas sets bits that nvdisasm does not print with some
    # modifiers only (HFMA2.RELU, sm_90).
    reproduces: frozenset = frozenset()
    # Operand index -> further reuse bits that nvdisasm also prints as .reuse on it (decoding
    # only): with a constant in the B slot, sm_70's nvdisasm shows the B and C reuse bits alike
    # on the one register left (`LEA.HI.X R3, R3, c[0x0][0x164], R22.reuse`).
    reuse_decode_only: dict = field(default_factory=dict)
    # A field nvdisasm does not print but ptxas fills from context: the uniform register
    # holding the memory descriptor (Instruction.descriptor); `base` holds its default.
    descriptor: Optional[Field] = None
    # Raw-value conditions (value index, `=N`/`!=N`, as Alias.when) under which nvdisasm
    # prints a word of this encoding by a more general form that also matches it: sm_70..90
    # print `LDC R1, c[0x0][RZ]` where the register-less form `c[0x0][0x1a8]` has offset 0.
    # The decoder passes this encoding over then.
    defer_when: tuple = ()

    @property
    def shown_mask(self) -> int:
        """Bits that some match bit, field, group or the control code covers."""
        shown = self.match_mask | self.group_mask | ((1 << CONTROL_SHIFT) - 1) << CONTROL_SHIFT
        if self.descriptor is not None:
            shown |= self.descriptor.mask
        for f in self.fields:
            if type(f) is not tuple:
                shown |= f.mask
        return shown

    @functools.cached_property
    def hidden_mask(self) -> int:
        return ~self.shown_mask & MASK128

    def replace_hidden_bits(self, siblings: list["Encoding"]) -> None:
        """For an encoding learned from the opcode sweep alone, whose hidden bits (those
        nvdisasm never shows) were filled at random there: take them from the best-supported
        ptxas-confirmed encoding of the same opcode where they are hidden too (ptxas writes RZ
        into an unused register field of LEA, say), and write the rest as 0, as ptxas does for
        P2R and R2P. Random hidden bits made an H100 stop with an illegal instruction."""
        hidden = ~self.shown_mask & ((1 << 128) - 1)
        base = self.base & ~hidden
        for sib in sorted(siblings, key=lambda e: -e.support):
            common = hidden & ~sib.shown_mask
            base |= sib.base & common
            hidden &= ~common
        self.base = base

    @functools.cached_property
    def example_tokens(self) -> frozenset:
        if not self.example:
            return frozenset()
        from .text import parse_instruction
        try:
            return instruction_tokens(parse_instruction(self.example))
        except SassError:
            return frozenset()

    @functools.cached_property
    def group_cache(self) -> dict:
        return {}

    @functools.cached_property
    def decode_cache(self) -> dict:
        return {}

    @functools.cached_property
    def print_cache(self) -> dict:
        return {}

    @functools.cached_property
    def insert_plan(self) -> list:
        """Per value: (0, constant, _), (1, shift, max) for a plain unsigned field, (3, shift,
        2**(width-1)) for a plain signed one (two's complement), (2, _, _) for any other."""
        out = []
        for f in self.fields:
            if type(f) is tuple:
                out.append((0, f[1], None))
            elif f.transform == "u" and len(f.segments) == 1 and f.segments[0][1] == 0:
                out.append((1, f.segments[0][0], (1 << f.segments[0][2]) - 1))
            elif f.transform == "s" and len(f.segments) == 1 and f.segments[0][1] == 0:
                out.append((3, f.segments[0][0], 1 << (f.segments[0][2] - 1)))
            else:
                out.append((2, None, None))
        return out

    @functools.cached_property
    def fast_fields(self):
        out = []
        for f in self.fields:
            if type(f) is tuple or f.transform != "u" or len(f.segments) != 1 or f.segments[0][1]:
                return None
            out.append((f.segments[0][0], (1 << f.segments[0][2]) - 1))
        return out

    @functools.cached_property
    def group_mask(self) -> int:
        m = 0
        for g in self.groups:
            m |= g.mask
        return m

    @functools.cached_property
    def operand_shape(self) -> tuple[tuple[str, int], ...]:
        """(kind, value count) per operand; a pc-relative immediate decodes as a branch
        target, kind L (an absolute address, printed as a number until a label is given)."""
        out = []
        pos = 1
        for kind in self.kinds:
            n = value_count(kind)
            f = self.fields[pos] if n == 1 and pos < len(self.fields) else None
            if kind == "I" and isinstance(f, Field) and f.transform == "pcrel":
                kind = "L"
            out.append((kind, n))
            pos += n
        return tuple(out)

    @functools.cached_property
    def ordered_groups(self) -> bool:
        """Some group prints one token set in several orders, one per value."""
        return any(g.by_sequence for g in self.groups)

    @functools.cached_property
    def sequence_cache(self) -> dict:
        return {}

    @functools.cached_property
    def token_group(self) -> dict[str, int]:
        m: dict[str, int] = {}
        for gi, g in enumerate(self.groups):
            for t in g.tokens:
                m.setdefault(t, gi)
        return m

    @functools.cached_property
    def reuse_masks(self) -> dict[int, int]:
        """Operand index -> the reuse bits (as a mask) that print .reuse on it."""
        return {i: 1 << b | sum(1 << x for x in self.reuse_decode_only.get(i, ()))
                for i, b in self.reuse.items()}

    @functools.cached_property
    def order_index(self) -> dict[str, int]:
        return {t: i for i, t in enumerate(self.order)}

    @functools.cached_property
    def unprinted_reuse(self) -> int:
        """The reuse slots (a 4-bit mask) on which nvdisasm prints .reuse on no operand."""
        printed = 0
        for mask in self.reuse_masks.values():
            printed |= mask
        return 0xF & ~printed

    @functools.cached_property
    def printed_fixed_tokens(self) -> tuple[str, ...]:
        """The tokens it always prints, in its print order."""
        index = self.order_index
        return tuple(sorted(self.fixed_tokens, key=lambda t: (index.get(t, 1 << 20), t)))

    def prints_in_order(self, modifiers: tuple[str, ...]) -> bool:
        """Whether this encoding prints these (numbered) modifiers in the order given."""
        index = self.order_index
        return list(modifiers) == sorted(modifiers, key=lambda t: (index.get(t, 1 << 20), t))

    @property
    def specificity(self) -> int:
        return bin(self.match_mask).count("1")


@dataclass(frozen=True)
class Alias:
    """Tokens nvdisasm adds (and drops) when the values meet conditions.

    ``when`` holds (value index, condition) pairs, value 0 being the guard predicate;
    a condition is ``=N`` (the value equals N), ``!=N`` (it does not) or ``pow2`` (a power of
    two greater than 1). ``needs`` / ``unless``: modifiers the groups must / must not give
    (nvdisasm prints ``IMAD.SHL.U32`` but never ``IMAD.SHL.WIDE``).
    Decoding applies the first alias whose conditions hold; encoding accepts the alias's
    tokens when its conditions hold and encodes the tokens it stands for.
    """
    when: tuple[tuple[int, str], ...]
    add: frozenset
    drop: frozenset = frozenset()
    needs: frozenset = frozenset()
    unless: frozenset = frozenset()

    def holds(self, values) -> bool:
        for j, cond in self.when:
            if j >= len(values) or not value_meets(values[j], cond):
                return False
        return True

    def allows(self, group_tokens: frozenset) -> bool:
        """The modifiers that the groups give (before the alias) permit it."""
        return self.drop <= group_tokens and self.needs <= group_tokens and not self.unless & group_tokens


def value_meets(v, cond: str) -> bool:
    if cond == "pow2":
        return type(v) is int and v > 1 and v & (v - 1) == 0
    if cond.startswith("!="):
        return not value_meets(v, cond[1:])
    if cond.startswith("="):
        try:
            return type(v) is int and v == int(cond[1:], 0)
        except ValueError:
            return str(v) == cond[1:]
    return False


def split_flag_token(token: str) -> tuple[int, str]:
    """'@2-' -> (2, '-'); other tokens -> (-1, token)."""
    if token.startswith("@") and token[1:2].isdigit():
        i = 1
        while token[i].isdigit():
            i += 1
        return int(token[1:i]), token[i:]
    return -1, token


def instruction_values(inst: Instruction) -> list:
    """The instruction's values in description order: guard predicate, then operands."""
    vals = [inst.predicate.values[0] if inst.predicate is not None else 7]
    for op in inst.operands:
        vals.extend(op.values)
    return vals


_TOKEN_CACHE: dict = {}


def instruction_tokens(inst: Instruction) -> frozenset:
    """Modifiers (a repeated one gets '#2') and operand flags as tokens; .reuse excluded."""
    p = inst.predicate
    ck = (inst.modifiers, p is not None and "!" in p.flags, tuple(op.flags for op in inst.operands))
    hit = _TOKEN_CACHE.get(ck)
    if hit is None:
        if len(_TOKEN_CACHE) > 100000:
            _TOKEN_CACHE.clear()
        hit = _TOKEN_CACHE[ck] = _instruction_tokens(inst)
    return hit


def written_tokens(inst: Instruction) -> tuple[str, ...]:
    """The instruction's tokens with its modifiers in the order written (nvdisasm's print
    order: F2F.F64.F32 and F2F.F32.F64 are two encodings), then its flags, sorted."""
    mods = numbered_modifiers(inst.modifiers)
    return mods + tuple(sorted(instruction_tokens(inst) - set(mods)))


def numbered_modifiers(modifiers) -> tuple[str, ...]:
    """The modifiers as tokens: a repeated one gets '#2', '#3'."""
    toks: list[str] = []
    seen: dict[str, int] = {}
    for m in modifiers:
        seen[m] = seen.get(m, 0) + 1
        toks.append(m if seen[m] == 1 else f"{m}#{seen[m]}")
    return tuple(toks)


def _instruction_tokens(inst: Instruction) -> frozenset:
    toks = list(numbered_modifiers(inst.modifiers))
    if inst.predicate is not None and "!" in inst.predicate.flags:
        toks.append(GUARD_NEGATED)
    for i, op in enumerate(inst.operands):
        for f in op.flags:
            if f != "reuse":
                toks.append(flag_token(i, f))
    return frozenset(toks)


# A resolved branch target (kind L, an absolute byte address) is encoded like the absolute
# address that raw-mode listings print (`BRA 0x130`): the field's pcrel transform makes it relative.
_KIND_FOR_ENCODING = {"L": "I"}


def form_key(inst: Instruction) -> tuple[str, tuple[str, ...]]:
    kinds = tuple([op.kind for op in inst.operands])
    if any("L" in k for k in kinds):
        # Also inside a larger operand: a listing's `RET.REL.NODEC R6 `(fn)`` is `R L`.
        kinds = tuple(_KIND_FOR_ENCODING.get(k, k) if " " not in k else
                      " ".join(_KIND_FOR_ENCODING.get(p, p) for p in k.split(" ")) for k in kinds)
    return inst.opcode, kinds


def form_name(opcode: str, kinds: Iterable[str]) -> str:
    kinds = list(kinds)
    return f"{opcode} {', '.join(kinds)}" if kinds else opcode


# --------------------------------------------------------------------------- the engine

@dataclass(frozen=True)
class DescriptorLoad:
    """The instruction that loads the memory descriptor into a uniform register pair
    (`ULDC.64 UR4, c[0x0][0x118]` on sm_80..sm_89): its mnemonic and constant (bank, offset)."""
    mnemonic: str
    constant: tuple[int, int]

    @property
    def opcode(self) -> str:
        return self.mnemonic.split(".")[0]

    def register(self, inst: Instruction) -> Optional[int]:
        """The uniform register this instruction loads the descriptor into, or None."""
        if inst.mnemonic != self.mnemonic or len(inst.operands) != 2:
            return None
        dest, source = inst.operands
        if dest.kind != "UR" or source.kind != "C[I][I]" or tuple(source.values) != self.constant:
            return None
        return int(dest.values[0])


class Isa:
    def __init__(self, arch: str, encodings: list[Encoding], tables: dict[str, dict[str, int]],
                 syntax: dict, descriptor_load: Optional[DescriptorLoad] = None):
        self.arch = arch
        self.encodings = encodings
        self.descriptor_load = descriptor_load
        self.tables = tables
        self.table_names = {t: {v: k for k, v in tab.items()} for t, tab in tables.items()}
        # Names that stand as operands (HGMMA's scoreboard `gsb0`, BMOV's `OPT_STACK`).
        self.operand_names = frozenset(name for tab in tables.values() for name in tab)
        self.syntax = syntax
        self._shape_cache: dict = {}
        # Descriptions that record corpus support (learner with the opcode sweep) mark the
        # sweep-only encodings by support 0; older ones record none and are left as they are.
        if any(e.support for e in encodings):
            confirmed: dict[str, list[Encoding]] = {}
            for e in encodings:
                if e.support:
                    confirmed.setdefault(e.opcode, []).append(e)
            for e in encodings:
                if e.support == 0:
                    e.replace_hidden_bits(confirmed.get(e.opcode, []))
        self._index()

    def _index(self) -> None:
        self.by_key: dict[tuple, list[Encoding]] = {}
        self.by_opcode: dict[str, list[Encoding]] = {}
        # Opcodes with an encoding that carries a hidden descriptor (resolve fills it in).
        self.descriptor_opcodes = frozenset(e.opcode for e in self.encodings if e.descriptor is not None)
        for e in self.encodings:
            self.by_key.setdefault((e.opcode, e.kinds), []).append(e)
            self.by_opcode.setdefault(e.opcode, []).append(e)
        for lst in self.by_key.values():
            lst.sort(key=lambda e: -e.specificity)
        # Opcodes with a pc-relative operand (branches, BSSY, CALL.REL): where control can go.
        self.branch_opcodes = frozenset(e.opcode for e in self.encodings
                                        if any(kind == "L" for kind, _n in e.operand_shape))
        # Per opcode, the sets of always-printed modifiers that some encodings print in one
        # order and others in another (F2F.F32.F16 / F2F.F16.F32): there the order is meaning.
        orders: dict[tuple, set] = {}
        for e in self.encodings:
            if len(e.fixed_tokens) > 1:
                orders.setdefault((e.opcode, e.fixed_tokens), set()).add(e.printed_fixed_tokens)
        self.ordered_token_sets = frozenset(key for key, seen in orders.items() if len(seen) > 1)
        # Decoding: bucket encodings by the bits every encoding matches on (the opcode bits).
        common = MASK128
        for e in self.encodings:
            common &= e.match_mask
        self.decode_mask = common
        self.decode_index: dict[int, list[Encoding]] = {}
        for e in self.encodings:
            self.decode_index.setdefault(e.match_value & common, []).append(e)
        # Fewer operands first: nvdisasm leaves out operands that hold their default (a PT
        # predicate output), and the encoding learned where one is left out fixes those bits,
        # whereas the one that prints it cannot say "not the default" in a mask and so also
        # matches there (its mask may even look more specific, e.g. an offset fixed to 0).
        for lst in self.decode_index.values():
            lst.sort(key=lambda e: (len(e.kinds), -e.specificity))

    # ---- listing
    def forms(self) -> list[str]:
        """One line per form: ``FFMA R, R, R, I  [.FTZ .RM ...]``; ``+ hidden descriptor UR``
        where the word names a descriptor register that the text does not show."""
        out = []
        for (opcode, kinds), encs in sorted(self.by_key.items()):
            toks = sorted({t for e in encs for g in e.groups for t in g.tokens
                           if not t.startswith("@")} | {t for e in encs for t in e.fixed_tokens})
            out.append(form_name(opcode, kinds) + (f"   [{' '.join('.' + t for t in toks)}]" if toks else "")
                       + ("   + hidden descriptor UR" if any(e.descriptor is not None for e in encs) else ""))
        return out

    # ---- encoding
    def encode(self, inst: Instruction) -> int:
        # The encodings to try, the tokens, and each encoding's bits but the values' (where
        # they do not depend on the values) depend on the instruction's shape only: cached.
        shape = inst.shape
        known = self._shape_cache.get(shape)
        if known is None:
            encs, tokens = self._encodings_for(inst)
            known = self._shape_cache[shape] = (encs, tokens, [self._shape_word(e, inst, tokens) for e in encs])
        encs, tokens, shape_words = known
        values = instruction_values(inst)
        errors: list[str] = []
        for enc, shape_word in zip(encs, shape_words):
            if shape_word is None:
                word = self._try_encode(enc, inst, tokens, values, errors)
            else:
                word = self._insert_values(enc, shape_word, inst, values, errors)
                if word is not None:
                    word = self._with_control(word, inst, enc)
            if word is not None:
                return word
        message = (errors[0] if len(errors) == 1 else
                   f"cannot encode {inst.mnemonic} on {self.arch}: " + "; ".join(dict.fromkeys(errors)))
        if any("modifier" in e or "needs" in e for e in errors):
            message += self._nearest_spellings(inst, encs)
        raise SassError(message, inst.loc)

    def _nearest_spellings(self, inst: Instruction, encs: list[Encoding], n: int = 6) -> str:
        """The valid spellings of the instruction's form closest to what was written, for an
        error message: `; nearest on sm_75: SHF.L.U32, SHF.L.S32, ...`."""
        spellings: set[str] = set()
        for enc in encs:
            choices = [[t for t in g.by_tokens if g.by_tokens[t] is not None] for g in enc.groups]
            if math.prod(len(c) for c in choices) > 4096:
                continue
            for combo in itertools.product(*choices):
                toks = enc.fixed_tokens.union(*combo)
                mods = [t for t in enc.order if t in toks and not t.startswith("@")]
                spellings.add(".".join((enc.opcode, *mods)))
        written = ".".join((inst.opcode, *inst.modifiers))
        close = difflib.get_close_matches(written, sorted(spellings), n=n, cutoff=0.0)
        return f"; nearest on {self.arch}: {', '.join(close)}, ..." if close else ""

    def _encodings_for(self, inst: Instruction) -> tuple[list[Encoding], frozenset]:
        """The encodings to try for the instruction's form, in order, and its tokens."""
        key = form_key(inst)
        encs = self.by_key.get(key)
        if not encs:
            self._no_form(inst)
        tokens = instruction_tokens(inst)
        # An encoding that prints the modifiers in the order written (F2F.F64.F32 and
        # F2F.F32.F64 are two encodings with the same modifiers), learned from an example with
        # the same modifiers, is the likeliest to be what ptxas writes; then the most specific.
        if len(encs) > 1:
            written = numbered_modifiers(inst.modifiers)
            mine = written_tokens(inst)
            encs = sorted(encs, key=lambda e: (mine not in e.reproduces, e.support == 0,
                                               not e.prints_in_order(written),
                                               e.example_tokens != tokens, -e.support))
        # Where the order of two modifiers is their meaning, an encoding that prints them the
        # other way round is another instruction: never a fallback.
        kept = [e for e in encs if (e.opcode, e.fixed_tokens) not in self.ordered_token_sets
                or e.prints_in_order(tuple(t for t in numbered_modifiers(inst.modifiers) if t in e.fixed_tokens))]
        if len(kept) < len(encs) and not any(e.fixed_tokens <= tokens for e in kept):
            known = sorted({".".join([e.opcode, *e.printed_fixed_tokens]) for e in encs if e not in kept})
            raise SassError(f"{inst.opcode}.{'.'.join(inst.modifiers)} {form_name(*form_key(inst))[len(inst.opcode) + 1:]} "
                            f"is not known on {self.arch}: this form has {', '.join(known)} instead, the same "
                            f"modifiers in the other order: another instruction", inst.loc)
        return kept, tokens

    def _no_form(self, inst: Instruction):
        if inst.opcode not in self.by_opcode:
            close = difflib.get_close_matches(inst.opcode, list(self.by_opcode), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise SassError(f"unknown opcode '{inst.opcode}' on {self.arch}{hint}", inst.loc)
        have = sorted({form_name(e.opcode, e.kinds) for e in self.by_opcode[inst.opcode]})
        raise SassError(f"operands of {inst.opcode} do not match any form on {self.arch} "
                        f"(got {form_name(inst.opcode, form_key(inst)[1])}); forms: " + " | ".join(have),
                        inst.loc)

    def _group_word(self, enc: Encoding, tokens: frozenset, written: tuple[str, ...] = ()):
        """The bits that the groups contribute for these tokens, or an error message (cached).
        `written`: the numbered modifiers in the order written, for groups whose values differ
        in print order only."""
        cache = enc.group_cache
        key = (tokens, written) if enc.ordered_groups else tokens
        hit = cache.get(key)
        if hit is not None:
            return hit
        result = self._group_word_uncached(enc, tokens, written)
        cache[key] = result
        return result

    def _group_word_uncached(self, enc: Encoding, tokens: frozenset, written: tuple[str, ...] = ()):
        if not enc.fixed_tokens <= tokens:
            missing = ".".join(sorted(enc.fixed_tokens - tokens))
            return f"{enc.name} needs .{missing}"
        per_group: dict[int, set] = {}
        for t in tokens - enc.fixed_tokens:
            gi = enc.token_group.get(t)
            if gi is None:
                return self._bad_token(enc, t)
            per_group.setdefault(gi, set()).add(t)
        word = 0
        missing = []        # groups that have no default: one of their modifiers must be written
        for gi, g in enumerate(enc.groups):
            toks = frozenset(per_group.get(gi, ()))
            v = g.by_tokens.get(toks)
            if g.by_sequence:
                v = g.by_sequence.get(tuple(t for t in written if t in toks), v)
            if v is None:
                if not toks:
                    missing.append("one of " + " ".join(f".{t}" for t in sorted(g.tokens) if not t.startswith("@")))
                    continue
                return (f"modifiers {' '.join(sorted(toks))} cannot be combined "
                        f"that way in {enc.name} on {self.arch}")
            word |= v
        if missing:
            return f"{enc.opcode} needs {' and '.join(missing)} in {enc.name} on {self.arch}"
        return word

    def _alias_tokens(self, enc: Encoding, tokens: frozenset, values: list) -> frozenset:
        """The tokens an alias spelling stands for (``IMAD.MOV.U32`` -> ``IMAD.U32``)."""
        for a in enc.aliases:
            if a.add <= tokens and not (a.drop & tokens) and a.holds(values):
                group_tokens = (tokens - a.add) | a.drop
                if a.allows(group_tokens):
                    return group_tokens
        return tokens

    def _try_encode(self, enc: Encoding, inst: Instruction, tokens: frozenset, values: list,
                    errors: list[str]) -> Optional[int]:
        if inst.predicate is not None and inst.predicate.kind != enc.guard_kind:
            errors.append(f"guard predicate must be {enc.guard_kind}")
            return None
        if enc.aliases:
            tokens = self._alias_tokens(enc, tokens, values)
        gw = self._group_word(enc, tokens, numbered_modifiers(inst.modifiers) if enc.ordered_groups else ())
        if type(gw) is str:
            errors.append(self._alias_hint(enc, tokens) or gw)
            return None
        word = self._insert_values(enc, enc.base | gw, inst, values, errors)
        if word is None:
            return None
        reuse = self._reuse_bits(enc, inst, errors)
        if reuse is None:
            return None
        return self._with_control(word | reuse, inst, enc)

    def _shape_word(self, enc: Encoding, inst: Instruction, tokens: frozenset) -> Optional[int]:
        """What _try_encode gives before the values and the control code (the base, group and
        reuse bits) where that depends on the instruction's shape only (no alias, which reads
        values) and the encoding takes the shape; None otherwise, and _try_encode finds out."""
        if enc.aliases or (inst.predicate is not None and inst.predicate.kind != enc.guard_kind):
            return None
        gw = self._group_word(enc, tokens, numbered_modifiers(inst.modifiers) if enc.ordered_groups else ())
        reuse = self._reuse_bits(enc, inst, [])
        if type(gw) is str or reuse is None:
            return None
        return enc.base | gw | reuse

    def _insert_values(self, enc: Encoding, word: int, inst: Instruction, values: list,
                       errors: list[str]) -> Optional[int]:
        """`word` with the instruction's values in the encoding's fields (and its hidden memory
        descriptor register, where resolve or the decoder set one), or None (errors say why)."""
        for (code, a, b), f, v in zip(enc.insert_plan, enc.fields, values):
            if code == 1:                  # unsigned, one segment from value bit 0
                if type(v) is int and 0 <= v <= b:
                    word |= v << a
                    continue
            elif code == 3:                # signed, one segment from value bit 0
                if type(v) is int and -b <= v < b:
                    word |= (v & (2 * b - 1)) << a
                    continue
            elif code == 0:                # a constant
                if a != v and not _same_number(a, v):
                    errors.append(f"{enc.name}: this encoding needs {a!r} here, not {v!r}")
                    return None
                continue
            raw = self._to_raw(f, v, inst, errors)
            if raw is None:
                return None
            word |= f.insert(raw)
        if inst.descriptor is not None and enc.descriptor is not None:
            d = enc.descriptor
            if not 0 <= inst.descriptor <= d.value_mask:
                errors.append(f"descriptor UR{inst.descriptor} does not fit its field in {enc.name}")
                return None
            word = word & ~d.mask | d.insert(inst.descriptor)
        return word

    @staticmethod
    def _reuse_bits(enc: Encoding, inst: Instruction, errors: list[str]) -> Optional[int]:
        """The reuse bits of the operands marked .reuse, in place in the word, or None."""
        bits = 0
        for i, op in enumerate(inst.operands):
            if "reuse" in op.flags:
                bit = enc.reuse.get(i)
                if bit is None:
                    errors.append(f"operand {i + 1} of {enc.name} cannot take .reuse")
                    return None
                bits |= 1 << (CONTROL_SHIFT + 17 + bit)
        return bits

    @staticmethod
    def _with_control(word: int, inst: Instruction, enc: Encoding) -> int:
        """`word` with the instruction's control code and raw bits. The reuse bits come from the
        operands' .reuse, except those of slots no operand prints .reuse for (sm_90's HMMA.SP
        sets slot 3 for its sparsity metadata, which nvdisasm shows nowhere): those the control
        code gives (a listing's hex comment)."""
        control = inst.control
        if control is None:
            cbits = _DEFAULT_CONTROL_BITS
        else:
            cbits = control.bits & ~(0xF << 17) | (control.reuse & enc.unprinted_reuse) << 17
        word |= cbits << CONTROL_SHIFT
        if inst.raw is not None:
            mask, value = inst.raw
            word = (word & ~mask) | (value & mask)
        return word

    def _alias_hint(self, enc: Encoding, tokens: frozenset) -> str:
        for a in enc.aliases:
            if a.add and a.add <= tokens:
                conds = " and ".join(f"value {j} {c if c == 'pow2' else c[1:]}".replace(" pow2", " a power of two")
                                     for j, c in a.when)
                return (f"{enc.name}: .{'.'.join(sorted(a.add))} is written only when {conds} "
                        f"(values numbered from the guard predicate, 0)")
        return ""

    def _bad_token(self, enc: Encoding, token: str) -> str:
        if token.startswith("@"):
            return f"operand flag {token[1:]} not allowed in {enc.name} on {self.arch}"
        elsewhere = [e for e in self.encodings if token in e.token_group or token in e.fixed_tokens]
        if elsewhere:
            return f"modifier .{token} is not valid for {enc.name} on {self.arch}"
        return f"modifier .{token} is not known on {self.arch}"

    def _to_raw(self, f: Field, v, inst: Instruction, errors: list[str]) -> Optional[int]:
        t = f.transform
        try:
            if t == "u":
                raw = int(v)
                ok = 0 <= raw and raw & ~f.value_mask == 0
            elif t == "n":
                ok = 0 <= int(v) and int(v) & ~f.value_mask == 0
                raw = int(v) ^ f.value_mask
            elif t in ("s", "pcrel"):
                raw = int(v)
                if t == "pcrel":
                    raw -= inst.address + 16
                lo, hi = -(1 << (f.value_bits - 1)), (1 << (f.value_bits - 1))
                ok = lo <= raw < hi and (raw & ((1 << f.value_bits) - 1)) & ~f.value_mask == 0
                raw &= (1 << f.value_bits) - 1
            elif t == "f32":
                raw = _f32_immediate_bits(float(v))
                ok = True
            elif t == "f64hi":
                b = _f64_bits(float(v))
                raw, ok = b >> 32, b & 0xFFFFFFFF == 0
            elif t == "f16":
                raw = struct.unpack("<H", struct.pack("<e", float(v)))[0]
                ok = True
            elif t.startswith("table:"):
                raw = self.tables[t[6:]].get(v)
                ok = raw is not None
                if not ok:
                    errors.append(f"unknown {t[6:]} name {v!r} on {self.arch}")
                    return None
            else:
                raise AssertionError(t)
        except (TypeError, ValueError, OverflowError):
            ok = False
            raw = 0
        if not ok or raw & ~f.value_mask:
            errors.append(f"value {v!r} does not fit its field ({f.value_bits} bits, {t}) in "
                          f"{inst.opcode} on {self.arch}")
            return None
        return raw

    # ---- decoding
    def decode(self, word: int, address: int = 0) -> Instruction:
        found = self.decode_match(word, address)
        if found is None:
            raise SassError(f"cannot decode 0x{word:032x} on {self.arch}: no known encoding matches")
        return found[1]

    def decode_match(self, word: int, address: int = 0) -> Optional[tuple[Encoding, Instruction]]:
        """(the encoding that explains the word, the instruction), or None."""
        # The encoding whose hidden bits (those nvdisasm never shows) agree with the word
        # explains all of it; one learned where a bit is hidden (`.X4` on an RZ address) only
        # when no other matches.
        fallback = None
        for enc in self.decode_index.get(word & self.decode_mask, ()):
            if word & enc.match_mask == enc.match_value:
                if enc.defer_when and all(value_meets(enc.fields[j].extract(word), cond)
                                          for j, cond in enc.defer_when):
                    continue
                if (word ^ enc.base) & enc.hidden_mask:
                    fallback = fallback or enc
                    continue
                inst = self._decode_with(enc, word, address)
                if inst is not None:
                    return enc, inst
        if fallback is not None:
            inst = self._decode_with(fallback, word, address)
            if inst is not None:
                return fallback, inst
        return None

    def _decode_tokens(self, enc: Encoding, word: int):
        """Tokens the groups print for this word (before aliases), or None (cached)."""
        gbits = word & enc.group_mask
        cache = enc.decode_cache
        hit = cache.get(gbits, False)
        if hit is not False:
            return hit
        tokens = set(enc.fixed_tokens)
        for g in enc.groups:
            toks = g.values.get(word & g.mask)
            if toks is None:
                cache[gbits] = None
                return None
            tokens |= toks
        result = cache[gbits] = frozenset(tokens)
        return result

    def _decode_sequences(self, enc: Encoding, word: int) -> tuple:
        """The print order of each group value's modifiers, where it has several (cached)."""
        gbits = word & enc.group_mask
        hit = enc.sequence_cache.get(gbits)
        if hit is None:
            hit = enc.sequence_cache[gbits] = tuple(
                seq for g in enc.groups if (seq := g.sequences.get(word & g.mask)) is not None)
        return hit

    def _decode_with(self, enc: Encoding, word: int, address: int) -> Optional[Instruction]:
        tokens = self._decode_tokens(enc, word)
        if tokens is None:
            return None
        values = self._decode_values(enc, word, address)
        if values is None:
            return None
        if enc.aliases:
            for a in enc.aliases:
                if a.holds(values) and a.allows(tokens):
                    tokens = (tokens - a.drop) | a.add
                    break
        inst = self._build(enc, tokens, values, word, address, self._decode_sequences(enc, word))
        if enc.descriptor is not None:
            inst.descriptor = enc.descriptor.extract(word)
        return inst

    def _decode_values(self, enc: Encoding, word: int, address: int) -> Optional[list]:
        fast = enc.fast_fields
        if fast is not None:               # every value an unsigned one-segment field
            return [(word >> wl) & m for wl, m in fast]
        values = []
        for f in enc.fields:
            if type(f) is tuple:
                values.append(f[1])
                continue
            t = f.transform
            if len(f.segments) == 1:
                wl, vl, w = f.segments[0]
                raw = ((word >> wl) & ((1 << w) - 1)) << vl
            else:
                raw = f.extract(word)
            if t == "u":
                v = raw
            elif t == "n":
                v = raw ^ f.value_mask
            elif t in ("s", "pcrel"):
                if raw >> (f.value_bits - 1) & 1:
                    raw -= 1 << f.value_bits
                v = raw + (address + 16 if t == "pcrel" else 0)
            elif t == "f32":
                v = _bits_f32(raw)
            elif t == "f64hi":
                v = _bits_f64(raw << 32)
            elif t == "f16":
                v = struct.unpack("<e", struct.pack("<H", raw))[0]
            else:
                v = self.table_names[t[6:]].get(raw)
                if v is None:
                    return None
            values.append(v)
        return values

    def _build(self, enc: Encoding, tokens: frozenset, values: list, word: int, address: int,
               sequences: tuple = ()) -> Instruction:
        """`sequences`: group values' modifiers in print order; they keep the places that the
        encoding's order gives their tokens, filled in their own order."""
        plan = enc.print_cache.get((tokens, sequences))
        if plan is None:
            mods = sorted((t for t in tokens if not t.startswith("@")),
                          key=lambda t: (enc.order_index.get(t, 1 << 20), t))
            for seq in sequences:
                present = [t for t in seq if t in tokens]
                for place, t in zip(sorted(mods.index(t) for t in present), present):
                    mods[place] = t
            flags = [frozenset(f for j, f in map(split_flag_token, tokens) if j == i)
                     for i in range(len(enc.kinds))]
            plan = enc.print_cache[(tokens, sequences)] = (tuple(t.split("#")[0] for t in mods), flags,
                                                           GUARD_NEGATED in tokens)
        modifiers, flags, negated = plan
        cbits = word >> CONTROL_SHIFT
        control = _CONTROL_CACHE.get(cbits)
        if control is None:
            control = _CONTROL_CACHE[cbits] = ControlCode.from_bits(cbits)
        reuse = control.reuse
        operands = []
        pos = 1
        reuse_masks = enc.reuse_masks
        for i, (kind, n) in enumerate(enc.operand_shape):
            fl = flags[i]
            if reuse and reuse & reuse_masks.get(i, 0):
                fl = fl | _REUSE
            operands.append(Operand(kind, (values[pos],) if n == 1 else tuple(values[pos:pos + n]), fl))
            pos += n
        predicate = None
        if values[0] != 7 or negated:
            predicate = Operand(enc.guard_kind, (values[0],), _NEGATED if negated else _NO_FLAGS)
        return Instruction(enc.opcode, modifiers, tuple(operands), predicate, control, address=address)

    # ---- printing
    def format(self, inst: Instruction) -> str:
        parts = []
        if inst.predicate is not None:
            p = inst.predicate
            name = {"P": "PT", "UP": "UPT"}.get(p.kind) if p.values[0] == 7 else f"{p.kind}{p.values[0]}"
            parts.append(f"@{'!' if '!' in p.flags else ''}{name} ")
        text = inst.mnemonic
        if inst.operands:
            ops = [self._format_operand(op) for op in inst.operands]
            # nvdisasm leaves a space between an INF/QNAN/-0.0 immediate and the next comma.
            sep = self.syntax.get("special_float_comma", " ,")
            special = ("INF", "QNAN", self.syntax.get("negative_zero", "-0.0"))
            text += " " + "".join(o + (sep if o.endswith(special) else ",") + " "
                                  for o in ops[:-1]) + ops[-1]
        return "".join(parts) + text

    def _format_operand(self, op: Operand) -> str:
        from ..ast import format_operand
        if op.kind == "L" and op.symbol is None:
            return self._format_number(int(op.values[0]))
        return format_operand(op, number=self._format_number)

    def _format_number(self, v) -> str:
        if isinstance(v, float):
            if math.isnan(v):
                return self.syntax.get("nan", "+QNAN") if math.copysign(1, v) > 0 else \
                    self.syntax.get("negative_nan", "-QNAN")
            if math.isinf(v):
                return "+INF" if v > 0 else "-INF"
            if v == 0 and math.copysign(1, v) < 0:
                return self.syntax.get("negative_zero", "-0.0")
            # nvdisasm prints large magnitudes in exponent form with all digits kept.
            if v != 0 and abs(v) >= 10.0 ** int(self.syntax.get("float_large_exponent", 9)):
                return self.syntax.get("float_format_large", "%.20e") % v
            return self.syntax.get("float_format", "%.20g") % v
        return f"-0x{-v:x}" if v < 0 else f"0x{v:x}"


def _same_number(a, b) -> bool:
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return False


@functools.lru_cache(maxsize=None)
def get_isa(arch: str) -> Isa:
    from .description import load_description_cached
    path = DATA_DIR / f"{arch}.toml"
    if not path.exists():
        known = sorted(p.stem for p in DATA_DIR.glob("sm_*.toml"))
        raise SassError(f"no ISA description for {arch} (have: {', '.join(known) or 'none'}); "
                        f"run python -m sassas.isa.learn --arch {arch}")
    return load_description_cached(path)
