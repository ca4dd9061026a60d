"""An encoder compiled for one instruction shape: the fast path of
:meth:`sassas.isa.engine.Isa.encode`, which most instructions take."""
from __future__ import annotations

from ..ast import Instruction
from ..kinds import value_pieces
from .forms import CONTROL_SHIFT, RZ, Encoding


def compiled_encoder(enc: Encoding, shape_word: int, inst: Instruction, registers: tuple = ()):
    """For an encoding whose fields all hold a value as it is (insert-plan codes 0, 1, 3, or
    an unsigned or signed integer field in pieces, code 2 with transform "u" or "s") and the
    shape word of `inst`'s shape: a function of an instruction of that shape that gives its
    word (values and control code in place), or None where Isa.encode's general path must look
    (a value out of range or not a number, raw bits, a descriptor); None where the encoding has
    other fields. What the function computes is what Isa._insert_values and Isa._with_control do for
    such an encoding, written out once for the shape instead of interpreted per instruction.
    `registers`: see Isa.shape_encoder (the function then takes `top`: its values are at hand
    here, where a function of its own read them again, a sixth of encoding's time)."""
    plan = enc.insert_plan
    slots = [("predicate", 0)] if inst.predicate is not None else [None]
    for i, op in enumerate(inst.operands):
        slots.extend((i, j) for j in range(len(value_pieces(op.kind))))
    if len(slots) != len(plan) or any(code not in (0, 1, 2, 3) or code == 2 and f.transform not in ("u", "s")
                                      for (code, _a, _b), f in zip(plan, enc.fields)):
        return None
    word = shape_word
    lines = []
    names: dict = {}
    width_of = {(o, v): w for o, v, w in registers}
    if len(width_of) != len(registers) or not set(width_of) <= set(slots):
        return None
    for k, ((code, a, b), slot) in enumerate(zip(plan, slots)):
        if slot is None:                        # no guard predicate written: PT (7)
            if code == 1 and 0 <= 7 <= b:
                word |= 7 << a
                continue
            return None
        source = "inst.predicate.values[0]" if slot[0] == "predicate" else f"ops[{slot[0]}].values[{slot[1]}]"
        lines.append(f"    v = {source}")
        width = width_of.get(slot)
        if width is not None and code != 1:
            return None                 # (a register in a field of another kind: not counted here)
        if code == 0:
            names[f"c{k}"] = a
            lines.append(f"    if v != c{k} or type(v) is not type(c{k}): return None")
        elif code == 1:
            lines += [f"    if v.__class__ is not int or not 0 <= v <= {b}: return None", f"    w |= v << {a}"]
            if width == 1:
                lines.append(f"    if v > t and v != {RZ}: t = v")
            elif width is not None:
                lines += [f"    if v != {RZ}:", f"        v += {width - 1}", f"        if v == {RZ}: v -= 1",
                          "        if v > t: t = v"]
        elif code == 3:
            lines += [f"    if v.__class__ is not int or not {-b} <= v < {b}: return None",
                      f"    w |= (v & {2 * b - 1}) << {a}"]
        else:
            # (_to_raw's "u" or "s" and Field.insert, for a field of several segments or with
            # bits the value must leave 0: a constant-bank offset in words)
            f = enc.fields[k]
            if f.transform == "u":
                lines.append(f"    if v.__class__ is not int or v < 0 or v & {~f.value_mask}: return None")
            else:
                half = 1 << (f.value_bits - 1)
                lines += [f"    if v.__class__ is not int or not {-half} <= v < {half}: return None",
                          f"    v &= {2 * half - 1}",
                          f"    if v & {~f.value_mask}: return None"]
            lines += [f"    w |= (v >> {vl} & {(1 << width) - 1}) << {wl}" for wl, vl, width in f.segments]
    keep = ~(0xF << 17)
    # (`v.__class__ is not int`: type(v)'s call cost a tenth of the function)
    body = ["def encode(inst, top):" if registers else "def encode(inst):",
            "    if inst.raw is not None or inst.descriptor is not None: return None",
            "    control = inst.control",
            "    if control is None: return None",
            "    ops = inst.operands",
            f"    w = {word}",
            *(["    t = -1"] if registers else []),
            *lines,
            *(["    if t > top[0]: top[0] = t"] if registers else []),
            # (ControlCode.bits as its cache holds it: a property's call cost a tenth of the function)
            "    bits = control._bits",
            "    if bits is None: bits = control.bits",
            f"    return w | (bits & {keep} | (control.reuse & {enc.unprinted_reuse}) << 17) << {CONTROL_SHIFT}"]
    scope = dict(names)
    exec("\n".join(body), scope)
    return scope["encode"]
