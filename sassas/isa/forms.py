"""The data model of an ISA description (sassas/isa/data/sm_XX.toml), as the engine
(:mod:`sassas.isa.engine`) and the description's reader and writer (:mod:`sassas.isa.description`)
share it:

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

import functools
import pickle
from dataclasses import dataclass, field
from typing import Iterable, Optional

from ..arch import ARCHS
from ..ast import ZERO_NAMES, Instruction
from ..errors import SassError
from ..kinds import value_count, value_pieces
from ..parse import parse_instruction

CONTROL_SHIFT = 105
CONTROL_MASK = ((1 << 21) - 1) << CONTROL_SHIFT
MASK128 = (1 << 128) - 1
GUARD_NEGATED = "@g!"


def flag_token(operand_index: int, flag: str) -> str:
    return f"@{operand_index}{flag}"


# --------------------------------------------------------------------------- value transforms

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

    def __getstate__(self) -> dict:
        # The groups, four fifths of a description's pickle, go in as a pickle of their own,
        # read where the encoding's groups are first used (__getattr__): a command loads the
        # description several times sooner and reads the groups of the few encodings it meets.
        state = dict(self.__dict__)
        if "groups" in state:
            state["_groups_pickle"] = pickle.dumps(state.pop("groups"), protocol=pickle.HIGHEST_PROTOCOL)
        return state

    def __getattr__(self, name: str):
        # (called only for an attribute not set: the groups before their first use)
        if name == "groups":
            state = self.__dict__
            if "_groups_pickle" in state:
                groups = state["groups"] = pickle.loads(state.pop("_groups_pickle"))
                return groups
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

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
    def uniform_register_slots(self) -> frozenset:
        """The indices of the values (0: the guard predicate) that are uniform registers."""
        return uniform_value_slots(self.kinds)

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


# ---- uniform-register numbering
# sassas numbers uniform registers UR0..UR254 and URZ as 255, as Blackwell's 8-bit fields hold
# them; where an arch's fields are 6 bits wide (sm_75..sm_90) they hold UR0..UR62 and URZ as 63.
# A description holds field numbers (an alias's `=63` on sm_90); the engine translates where
# it encodes and decodes, and the learner where it reads values from nvdisasm's text.

# sassas's numbers of URZ and RZ.
URZ = next(value for (kind, value), name in ZERO_NAMES.items() if name == "URZ")
RZ = next(value for (kind, value), name in ZERO_NAMES.items() if name == "RZ")


def uniform_field_zero(arch: str) -> int:
    """URZ as `arch`'s uniform-register fields hold it: all ones of their width (63 on
    sm_75..sm_90; sassas's own 255 on Blackwell, on sm_70, which has none, and on an arch
    sassas does not know)."""
    facts = ARCHS.get(arch)
    bits = facts.uniform_register_bits if facts is not None and facts.uniform_registers else 8
    return (1 << bits) - 1


def field_uniform_register(v, zero: int):
    """A uniform register's number (sassas's) as fields whose URZ is `zero` hold it."""
    return zero if v == URZ else v


def sassas_uniform_register(v, zero: int):
    """A uniform-register field's value, whose URZ is `zero`, as sassas numbers it."""
    return URZ if v == zero else v


@functools.lru_cache(maxsize=4096)
def uniform_value_slots(kinds: tuple[str, ...]) -> frozenset:
    """The indices of the values (0: the guard predicate) of operands of these kinds that are
    uniform registers."""
    pieces = [p for kind in kinds for p in value_pieces(kind)]
    return frozenset(k for k, p in enumerate(pieces, start=1) if p == "UR")


def field_values(inst: Instruction, zero: int) -> list:
    """instruction_values, with the uniform registers as fields whose URZ is `zero` hold them."""
    values = instruction_values(inst)
    if zero != URZ:
        for k in uniform_value_slots(tuple([op.kind for op in inst.operands])):
            values[k] = field_uniform_register(values[k], zero)
    return values


def sassas_values(values: list, slots: frozenset, zero: int) -> list:
    """Field values (guard first) with the uniform registers at `slots`, whose URZ is `zero`,
    as sassas numbers them."""
    if zero == URZ or not slots:
        return values
    return [sassas_uniform_register(v, zero) if k in slots else v for k, v in enumerate(values)]


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
