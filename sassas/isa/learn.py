"""Learn and verify ISA descriptions from NVIDIA's tools.

    python -m sassas.isa.learn --arch sm_90 [--arch sm_80 ...] [--out DIR] [--rounds N]

Steps, per arch: compile the PTX corpus (sassas/isa/corpus) with ptxas, disassemble every
distinct word with nvdisasm, group the samples by form (opcode + operand kinds), probe one
representative per form by bit flips (sassas/isa/fit.py), then verify: every corpus sample
must re-encode from its text to the same 128-bit word (control bits included) and decode
back to nvdisasm's text. Samples not yet reproduced become representatives of the next
round. The description is written after every round; oracle results are cached under
.cache/oracle, so an interrupted run resumes cheaply.
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from ..errors import SassError
from . import corpus, fit, oracle
from .description import DEFAULT_SYNTAX, load_description, write_description
from .model import DATA_DIR, Isa, form_name, instruction_tokens


REPS_PER_ROUND = 4


def refine(encodings, by_key) -> None:
    """Use the corpus where single probes cannot see: share reuse bits among a form's
    encodings, order modifiers as the corpus prints them, and set hidden bits (ones nvdisasm
    does not print) to what ptxas writes most often."""
    from .model import CONTROL_MASK
    from .fit import modifier_order
    reuse_by_key: dict = defaultdict(dict)
    for e in encodings:
        reuse_by_key[(e.opcode, e.kinds)].update(e.reuse)
    for e in encodings:
        key = (e.opcode, e.kinds)
        e.reuse = dict(reuse_by_key[key])
        samples = by_key.get(key, [])
        e.order = modifier_order(e.evidence + [tuple(s.inst.modifiers) for s in samples])
        e.__dict__.pop("order_index", None)
        claimed = e.match_mask | CONTROL_MASK
        for f in e.fields:
            if not isinstance(f, tuple):
                claimed |= f.mask
        for g in e.groups:
            claimed |= g.mask
        hidden = ~claimed & ((1 << 128) - 1)
        mine = [s for s in samples if s.word & e.match_mask == e.match_value
                and instruction_tokens(s.inst) >= e.fixed_tokens]
        if not mine:
            continue
        for b in range(128):
            if hidden >> b & 1:
                ones = sum(s.word >> b & 1 for s in mine)
                if 2 * ones > len(mine):
                    e.base |= 1 << b
                elif 2 * ones < len(mine):
                    e.base &= ~(1 << b)


def check_sample(isa: Isa, s: fit.Sample) -> str:
    """'' when the sample round-trips bit-exactly both ways; else what went wrong."""
    try:
        inst = fit.parse_instruction(s.text)
        inst.address = s.address
        from ..ast import ControlCode
        inst.control = ControlCode.from_word(s.word)
        word = isa.encode(inst)
    except SassError as e:
        return f"encode: {e.message}"
    if word != s.word:
        return f"encode: 0x{word:032x} != 0x{s.word:032x} (diff 0x{word ^ s.word:x})"
    try:
        text = isa.format(isa.decode(s.word, s.address))
    except SassError as e:
        return f"decode: {e.message}"
    if text != s.text:
        return f"format: {text!r} != {s.text!r}"
    return ""


def learn_arch(arch: str, out_dir: Path, rounds: int = 4, log=print) -> dict:
    t0 = time.time()
    log(f"[{arch}] building corpus")
    words = corpus.build(arch, progress=log)
    cache = oracle.DisasmCache(arch)
    parse_failures: dict[str, str] = {}
    samples_by_word = fit.to_samples(oracle.disassemble(words, arch, cache), parse_failures)
    samples = [s for s in samples_by_word.values() if s is not None]
    illegal = sum(1 for w in words if samples_by_word.get(w) is None)
    log(f"[{arch}] {len(words)} distinct words, {len(samples)} parsed, {illegal} unusable, "
        f"{len(parse_failures)} texts the parser refused ({time.time() - t0:.1f}s)")
    by_key: dict[tuple, list[fit.Sample]] = defaultdict(list)
    for s in samples:
        by_key[s.key].append(s)

    tables: dict[str, dict[str, int]] = {}
    encodings = []
    probed: set[int] = set()
    pending = {k: list(v) for k, v in by_key.items()}
    isa = Isa(arch, [], tables, dict(DEFAULT_SYNTAX))
    failures: dict[int, str] = {}
    for rnd in range(rounds):
        reps = []
        for key, lst in pending.items():
            # A few new representatives per form and round, each with a modifier set not
            # probed yet where possible.
            tried = {instruction_tokens(s.inst) for s in by_key[key] if s.word in probed}
            for s in lst:
                if len([r for r in reps if r.key == key]) >= REPS_PER_ROUND:
                    break
                toks = instruction_tokens(s.inst)
                if s.word not in probed and toks not in tried:
                    reps.append(s)
                    probed.add(s.word)
                    tried.add(toks)
            if not any(r.key == key for r in reps):
                for s in lst:
                    if s.word not in probed:
                        reps.append(s)
                        probed.add(s.word)
                        break
        if not reps:
            break
        log(f"[{arch}] round {rnd + 1}: {len(reps)} representatives")
        new = fit.learn_encodings(reps, arch, cache, tables, log=log, parse_failures=parse_failures)
        for e in new:
            try:
                from .description import validate_encoding
                validate_encoding(e)
            except SassError as err:
                log(f"  dropped {e.name}: {err.message}")
                continue
            encodings.append(e)
        refine(encodings, by_key)
        isa = Isa(arch, encodings, tables, dict(DEFAULT_SYNTAX))
        failures = {}
        pending = defaultdict(list)
        for s in samples:
            why = check_sample(isa, s)
            if why:
                failures[s.word] = why
                pending[s.key].append(s)
        ok = len(samples) - len(failures)
        log(f"[{arch}] round {rnd + 1}: {len(encodings)} encodings, {ok}/{len(samples)} samples "
            f"bit-exact ({100 * ok / max(len(samples), 1):.1f}%) ({time.time() - t0:.1f}s)")
        write_description(isa, out_dir / f"{arch}.toml")
    # Reload what was written, so the report is about the file, not the objects in memory.
    isa = load_description(out_dir / f"{arch}.toml")
    failures = {}
    for s in samples:
        why = check_sample(isa, s)
        if why:
            failures[s.word] = why
    ok = len(samples) - len(failures)
    forms_ok = sum(1 for k, lst in by_key.items() if all(s.word not in failures for s in lst))
    report = {"arch": arch, "samples": len(samples), "bit_exact": ok, "forms": len(by_key),
              "forms_ok": forms_ok, "encodings": len(isa.encodings),
              "parse_failures": parse_failures, "seconds": round(time.time() - t0, 1)}
    log(f"[{arch}] {forms_ok}/{len(by_key)} forms fully reproduced, {ok}/{len(samples)} samples "
        f"bit-exact ({100 * ok / max(len(samples), 1):.1f}%), {len(isa.encodings)} encodings")
    bad_forms = Counter()
    for s in samples:
        if s.word in failures:
            bad_forms[form_name(*s.key)] += 1
    if bad_forms:
        log(f"[{arch}] not resolved ({len(bad_forms)} forms):")
        shown = set()
        for s in samples:
            name = form_name(*s.key)
            if s.word in failures and name not in shown and len(shown) < 40:
                shown.add(name)
                log(f"  {name} ({bad_forms[name]}): {s.text}  -- {failures[s.word]}")
    if parse_failures:
        log(f"[{arch}] parser refused {len(parse_failures)} texts, e.g.:")
        for text, err in list(parse_failures.items())[:10]:
            log(f"  {text!r}: {err}")
    return report


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sassas.isa.learn", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", action="append", required=True, help="e.g. sm_90 (repeatable)")
    ap.add_argument("--out", type=Path, default=DATA_DIR, help="where to write sm_XX.toml")
    ap.add_argument("--rounds", type=int, default=4, help="probing rounds per arch")
    args = ap.parse_args(argv)
    for arch in args.arch:
        if not oracle.have_tools(arch):
            print(f"[{arch}] skipped: ptxas/nvdisasm for {arch} not found", file=sys.stderr)
            continue
        learn_arch(arch, args.out, args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
