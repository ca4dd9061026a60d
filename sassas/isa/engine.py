"""The ISA engine: encodes, decodes and prints instructions by an arch's description (the
data model of :mod:`sassas.isa.forms`, read by :mod:`sassas.isa.description`). All knowledge of
the instruction set is in the description; this module only knows how descriptions are shaped.
"""
from __future__ import annotations

import difflib
import itertools
import math
import struct
from dataclasses import replace
from typing import Optional

from ..ast import ControlCode, Instruction, Operand
from ..errors import SassError
from ..kinds import uniform_slots
from .compiled_encoder import compiled_encoder
from .forms import (CONTROL_SHIFT, GUARD_NEGATED, MASK128, URZ, DescriptorLoad, Encoding, Field,
                    field_uniform_register, form_key, form_name, instruction_tokens, instruction_values,
                    numbered_modifiers, sassas_values, split_flag_token, uniform_field_zero, value_meets,
                    written_tokens)

_DEFAULT_CONTROL_BITS = ControlCode().bits & ~(0xF << 17)
_REUSE = frozenset({"reuse"})
_CONTROL_CACHE: dict = {}
_NEGATED = frozenset({"!"})
_NO_FLAGS = frozenset()

# --------------------------------------------------------------------------- value bits

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


def _next_number(token: str, taken, known) -> str:
    """`token`, or where it is taken its next free repeat number if `known` has it (E2M1 ->
    E2M1#2), else `token` (printed once)."""
    if token not in taken:
        return token
    base = token.split("#")[0]
    n = 2
    while f"{base}#{n}" in taken:
        n += 1
    numbered = f"{base}#{n}"
    return numbered if numbered in known else token


def _bits_f64(b: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", b & 0xFFFFFFFFFFFFFFFF))[0]


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
        self._counting_cache: dict = {}         # (shape, registers) -> shape_encoder's counting encoder
        self._reuse_slot_cache: dict = {}
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
        # Uniform registers: sassas names them UR0..UR254 and URZ as 255 (Blackwell's numbers,
        # as its fields hold them); an arch whose fields are 6 bits wide (sm_75..sm_90) has
        # UR0..UR62 and holds URZ as 63, and encode/decode translate at this boundary (sm_70
        # has none: no form takes one). See forms.uniform_field_zero.
        self.uniform_zero = uniform_field_zero(arch)
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
        # they do not depend on the values) depend on the instruction's shape only: cached,
        # with the first encoding's values-and-control code compiled for the shape where its
        # fields are plain (compiled_encoder): most instructions take that encoding.
        if self.uniform_zero != URZ:
            inst = self._with_field_uniform_registers(inst)
        encs, tokens, shape_words, fast = self._shape_entry(inst)
        if fast is not None:
            word = fast(inst)
            if word is not None:
                return word
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

    def _shape_entry(self, inst: Instruction, compile_encoder: bool = True) -> tuple:
        """(encodings to try, tokens, each encoding's shape word or None, the compiled encoder
        or None) of the instruction's shape, found once a shape. The encoder is compiled when
        first asked for (`compile_encoder`; until then the entry holds False): an encoder that
        counts registers (shape_encoder) compiles its own, and compiling either costs about a
        millisecond."""
        shape = inst.shape
        known = self._shape_cache.get(shape)
        if known is None:
            encs, tokens = self._encodings_for(inst)
            words = [self._shape_word(e, inst, tokens) for e in encs]
            known = self._shape_cache[shape] = (encs, tokens, words, False)
        if compile_encoder and known[3] is False:
            encs, tokens, words, _ = known
            fast = compiled_encoder(encs[0], words[0], inst) if words[0] is not None else None
            known = self._shape_cache[shape] = (encs, tokens, words, fast)
        return known

    def shape_encoder(self, inst: Instruction, registers: tuple = ()):
        """The compiled encoder of the instruction's shape, for an encoder that asks it once a
        shape and calls it on each instruction: fast(inst) is encode(inst), or None where
        encode must look (a uniform register this arch's fields number otherwise, as URZ on
        sm_75..sm_90, among others); None where the shape has none (or no encoding: encode
        raises its error).

        `registers`: R register slots (operand index, value index, width) whose highest
        register the caller counts (semantics.register_slots); the function is then
        fast(inst, top), which also raises top[0] to the highest register of those slots
        (number + width - 1; RZ, and a span's end at RZ, left out), where it gives a word."""
        try:
            if registers:
                key = (inst.shape, registers)
                fast = self._counting_cache.get(key, False)
                if fast is False:
                    encs, _tokens, words, _ = self._shape_entry(inst, compile_encoder=False)
                    fast = self._counting_cache[key] = (compiled_encoder(encs[0], words[0], inst, registers)
                                                        if words[0] is not None else None)
            else:
                fast = self._shape_entry(inst)[3]
        except SassError:
            return None
        slots = uniform_slots(inst.shape) if self.uniform_zero != URZ else ()
        if fast is None or not slots:
            return fast
        zero = self.uniform_zero

        def with_uniform_registers(inst: Instruction, *top) -> Optional[int]:
            # (a uniform register below the arch's URZ is numbered alike in its field: fast
            # takes the instruction as it stands; URZ, one past it or a name: encode looks)
            ops = inst.operands
            for i, j in slots:
                v = ops[i].values[j]
                if type(v) is not int or v >= zero:
                    return None
            return fast(inst, *top)
        return with_uniform_registers

    def _with_field_uniform_registers(self, inst: Instruction) -> Instruction:
        """`inst` with its uniform registers numbered as this arch's fields hold them (URZ as
        63 on sm_75..sm_90); an error where it names one the arch does not have."""
        slots = uniform_slots(inst.shape)
        if not slots:
            return inst
        operands = list(inst.operands)
        for i, j in slots:
            v = operands[i].values[j]
            if type(v) is not int:
                continue
            if v == URZ:
                values = list(operands[i].values)
                values[j] = field_uniform_register(v, self.uniform_zero)
                operands[i] = operands[i].with_values(*values)
            elif v >= self.uniform_zero:
                raise SassError(f"register UR{v} out of range on {self.arch}: its uniform registers are "
                                f"UR0..UR{self.uniform_zero - 1} (and URZ)", inst.operand_loc(i))
        if operands == list(inst.operands):
            return inst
        return replace(inst, operands=tuple(operands))

    def reuse_slots(self, inst: Instruction) -> Optional[dict[int, int]]:
        """Operand index -> the operand-reuse slot (0..3) it is read through, as the encoding
        of the instruction's form places it (HADD2's second source is slot 2, C, on sm_100),
        or None where no encoding takes the form (cached per shape)."""
        shape = inst.shape
        cache = self._reuse_slot_cache
        if shape not in cache:
            try:
                encs, _tokens = self._encodings_for(inst)
            except SassError:
                encs = []
            cache[shape] = dict(encs[0].reuse) if encs else None
        return cache[shape]

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
        reuse bits) where that depends on the instruction's shape only (no alias that the
        tokens may spell, which reads values) and the encoding takes the shape; None otherwise,
        and _try_encode finds out."""
        if inst.predicate is not None and inst.predicate.kind != enc.guard_kind:
            return None
        if any(a.add <= tokens and not (a.drop & tokens) for a in enc.aliases):
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
        if token == GUARD_NEGATED:
            return f"{enc.name} cannot take a negated guard predicate on {self.arch}"
        if token.startswith("@"):
            index, flag = split_flag_token(token)
            message = f"operand {index + 1} of {enc.name} cannot take {flag!r} on {self.arch}"
            takers = sorted({e.name for e in self.encodings
                             if e.opcode == enc.opcode and len(e.kinds) == len(enc.kinds)
                             and token in e.token_group})
            if takers:
                message += "; " + ", ".join(takers[:3]) + (" takes" if len(takers) == 1 else " take") + " it"
            return message
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
            if not tokens.isdisjoint(toks):
                # A modifier two groups print, where the encoding's print order has it twice
                # (`QMMA.16832.F32.E2M1.E2M1`: the A and B types), is numbered as the parser
                # numbers a repeated one: E2M1, E2M1#2. Elsewhere nvdisasm prints it once.
                toks = frozenset(_next_number(t, tokens, enc.order_index) for t in toks)
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
        # (the aliases above read the fields' numbers: sm_90's `=63` is URZ)
        values = sassas_values(values, enc.uniform_register_slots, self.uniform_zero)
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

