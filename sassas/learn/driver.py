"""Learn and verify ISA descriptions from NVIDIA's tools.

    python -m sassas.learn --arch sm_90 [--arch sm_80 ...] [--out DIR] [--rounds N]

Steps, per arch: compile the PTX corpus (sassas/learn/corpus) with ptxas, disassemble every
distinct word with nvdisasm, group the samples by form (opcode + operand kinds), probe one
representative per form by bit flips (probe.py, induce.py), then verify (verify.py): every
corpus sample must re-encode from its text to the same 128-bit word (control bits included)
and decode back to nvdisasm's text. Samples not yet reproduced become representatives of the
next round. The description is written after every round; oracle results are cached under
.cache/oracle, so an interrupted run resumes cheaply. The passes over the result (passes.py)
follow; `--only` reruns one of them over a description already written.
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from ..errors import SassError
from ..isa.description import DATA_DIR, DEFAULT_SYNTAX, load_description, write_description
from ..isa.engine import Isa
from ..isa.forms import CONTROL_MASK, form_name, instruction_tokens
from . import corpus, induce, oracle, probe
from .passes import (MAX_NEW_FORMS_PER_ROUND, OPCODE_MASK, SAMPLES_PER_NEW_FORM,
                     drop_contradicted_group_values, learn_alias_exceptions, learn_descriptors,
                     learn_optional_offsets, learn_optional_predicates, learn_overlapping_fields,
                     learn_register_widths, learn_zero_register_defers, transplant_samples)
from .verify import check_corpus, check_sample, claimed_bits, dedupe, own_samples, rank, refine, set_hidden_bits

REPS_PER_ROUND = 4


def learn_arch(arch: str, out_dir: Path, rounds: int = 6, log=print, sweep: bool = True) -> dict:
    from . import sweep as sweep_mod
    t0 = time.time()
    log(f"[{arch}] building corpus")
    words = corpus.build(arch, progress=log)
    cache = oracle.DisasmCache(arch)
    parse_failures: dict[str, str] = {}
    samples_by_word = probe.to_samples(oracle.disassemble(words, arch, cache), arch, parse_failures)
    samples = [s for s in samples_by_word.values() if s is not None]
    illegal = sum(1 for w in words if samples_by_word.get(w) is None)
    log(f"[{arch}] {len(words)} distinct words, {len(samples)} parsed, {illegal} unusable, "
        f"{len(parse_failures)} texts the parser refused ({time.time() - t0:.1f}s)")
    corpus_words = {s.word for s in samples}
    # The pool: corpus samples, then words of forms the corpus lacks (opcode sweep, and
    # neighbours of representatives found while probing). Only the corpus is reported as
    # "bit-exact"; the others are learned and checked alike.
    pool = list(samples)
    if sweep:
        extra = [s for s in sweep_mod.discover(arch, cache, parse_failures, log) if s.word not in corpus_words]
        pool += extra
        log(f"[{arch}] sweep adds {len(extra)} samples of {len({s.key for s in extra} - {s.key for s in samples})} new forms")
    by_key: dict[tuple, list[probe.Sample]] = defaultdict(list)
    for s in pool:
        by_key[s.key].append(s)

    tables: dict[str, dict[str, int]] = {}
    name_windows: dict[str, tuple[int, int]] = {}
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
            n = 0
            for s in lst:
                if n >= REPS_PER_ROUND:
                    break
                toks = instruction_tokens(s.inst)
                if s.word not in probed and toks not in tried:
                    reps.append(s)
                    probed.add(s.word)
                    tried.add(toks)
                    n += 1
            if not n:
                for s in lst:
                    if s.word not in probed:
                        reps.append(s)
                        probed.add(s.word)
                        break
        if not reps:
            break
        log(f"[{arch}] round {rnd + 1}: {len(reps)} representatives")
        neighbours: list[probe.Sample] = []
        new = induce.learn_encodings(reps, arch, cache, tables, log=log, parse_failures=parse_failures,
                                  neighbours=neighbours, name_windows=name_windows)
        kept = []
        for e in new:
            try:
                from ..isa.description import validate_encoding
                validate_encoding(e)
            except SassError as err:
                log(f"  dropped {e.name}: {err.message}")
                continue
            kept.append(e)
        # Forms seen only as neighbours join the pool (bounded per round). A form here is
        # also its opcode value (bits 0..11): one mnemonic and operand kinds may be two
        # machine opcodes (I2F of a 32-bit source, 0xb06, and of a 64-bit one, 0xb12), and
        # corpus words of one say nothing about the other.
        added = 0
        for s in neighbours:
            same_opcode = [x for x in by_key.get(s.key, ()) if x.word & OPCODE_MASK == s.word & OPCODE_MASK]
            if not same_opcode and added < MAX_NEW_FORMS_PER_ROUND:
                added += 1
            if same_opcode and (len(same_opcode) >= SAMPLES_PER_NEW_FORM
                                or s.word in {x.word for x in same_opcode}
                                or same_opcode[0].word in corpus_words):
                continue
            by_key[s.key].append(s)
            pool.append(s)
        if added:
            log(f"  {added} new forms found next to representatives")
        moved = transplant_samples(encodings + kept, encodings + kept, by_key, arch, cache, parse_failures)
        for s in moved:
            by_key[s.key].append(s)
            pool.append(s)
        if moved:
            log(f"  {len(moved)} modifier sets carried over from sibling forms")
        induce.learn_aliases(kept, arch, cache, tables, by_key, log=log, parse_failures=parse_failures)
        induce.learn_reuse(kept, arch, cache, parse_failures=parse_failures)
        for e in kept:
            if e.source_word not in corpus_words:
                # Swept words carry random bits that nvdisasm does not print: clear them.
                e.base &= e.match_mask | CONTROL_MASK | claimed_bits(e)
        encodings = dedupe(encodings + kept)
        refine(encodings, by_key, corpus_words)
        rank(encodings, samples, tables)
        isa = Isa(arch, encodings, tables, dict(DEFAULT_SYNTAX))
        failures = {}
        pending = defaultdict(list)
        for s in pool:
            why = check_sample(isa, s, s.word in corpus_words)
            if why:
                failures[s.word] = why
                pending[s.key].append(s)
        ok = sum(1 for s in samples if s.word not in failures)
        ok_extra = sum(1 for s in pool if s.word not in failures) - ok
        log(f"[{arch}] round {rnd + 1}: {len(encodings)} encodings, {ok}/{len(samples)} corpus samples "
            f"bit-exact ({100 * ok / max(len(samples), 1):.1f}%), other forms {ok_extra}/{len(pool) - len(samples)} "
            f"({time.time() - t0:.1f}s)")
        write_description(isa, out_dir / f"{arch}.toml")
    isa = _hidden_bits_pass(learn_overlapping_fields(isa, arch, log), arch, samples)
    isa = learn_optional_predicates(isa, arch, log)
    isa = learn_optional_offsets(isa, arch, log)
    isa = learn_register_widths(isa, arch, log)
    isa = learn_zero_register_defers(isa, arch, log)
    isa = learn_descriptors(isa, arch, log)
    isa = learn_alias_exceptions(isa, arch, samples, log)
    write_description(drop_contradicted_group_values(isa, samples, log), out_dir / f"{arch}.toml")
    # Reload what was written, so the report is about the file, not the objects in memory.
    isa = load_description(out_dir / f"{arch}.toml")
    # The corpus as `sassas asm` gets it (whole-kernel listings: check_corpus), the rest alone.
    failures = check_corpus(isa, arch, samples, log)
    for s in pool:
        if s.word not in corpus_words:
            why = check_sample(isa, s, False)
            if why:
                failures[s.word] = why
    ok = sum(1 for s in samples if s.word not in failures)
    corpus_keys = {s.key for s in samples}
    forms_ok = sum(1 for k in corpus_keys if all(s.word not in failures for s in by_key[k]))
    other_ok = sum(1 for k in by_key if k not in corpus_keys and all(s.word not in failures for s in by_key[k]))
    report = {"arch": arch, "samples": len(samples), "bit_exact": ok, "forms": len(corpus_keys),
              "forms_ok": forms_ok, "other_forms": len(by_key) - len(corpus_keys), "other_forms_ok": other_ok,
              "encodings": len(isa.encodings),
              "parse_failures": parse_failures, "seconds": round(time.time() - t0, 1)}
    log(f"[{arch}] {forms_ok}/{len(corpus_keys)} corpus forms fully reproduced, {ok}/{len(samples)} samples "
        f"bit-exact ({100 * ok / max(len(samples), 1):.1f}%); other forms {other_ok}/{len(by_key) - len(corpus_keys)}; "
        f"{len(isa.encodings)} encodings")
    bad_forms = Counter()
    for s in pool:
        if s.word in failures:
            bad_forms[form_name(*s.key)] += 1
    if bad_forms:
        log(f"[{arch}] not resolved ({len(bad_forms)} forms):")
        shown = set()
        for s in pool:
            name = form_name(*s.key)
            if s.word in failures and name not in shown and len(shown) < 60:
                shown.add(name)
                log(f"  {name} ({bad_forms[name]}){'' if s.word in corpus_words else ' [sweep]'}: "
                    f"{s.text}  -- {failures[s.word]}")
    if parse_failures:
        log(f"[{arch}] parser refused {len(parse_failures)} texts, e.g.:")
        for text, err in list(parse_failures.items())[:10]:
            log(f"  {text!r}: {err}")
    return report


def _rank_pass(isa: Isa, arch: str, samples: list) -> Isa:
    rank(isa.encodings, samples, isa.tables)
    return Isa(arch, isa.encodings, isa.tables, isa.syntax, isa.descriptor_load)


def _hidden_bits_pass(isa: Isa, arch: str, samples: list) -> Isa:
    by_key: dict[tuple, list] = defaultdict(list)
    for s in samples:
        by_key[s.key].append(s)
    for e in isa.encodings:
        mine = own_samples(e, by_key.get((e.opcode, e.kinds), []))
        if mine:
            set_hidden_bits(e, mine)
    return _rank_pass(isa, arch, samples)


def _descriptors_pass(isa: Isa, arch: str, samples: list) -> Isa:
    for e in isa.encodings:
        e.descriptor = None
    return learn_descriptors(Isa(arch, isa.encodings, isa.tables, isa.syntax), arch)


# The passes that `--only` runs over a description already written: (function of isa, arch
# and the corpus samples, what it does).
POST_PASSES = {
    "rank": (_rank_pass, "which encoding the encoder tries first, from the corpus (support, reproduces)"),
    "overlapping-fields": (lambda isa, arch, _s: learn_overlapping_fields(isa, arch),
                           "fields of the opcode sweep that claim a value bit twice (BRA.U's target)"),
    "hidden-bits": (_hidden_bits_pass, "bits nvdisasm does not print, as ptxas writes them in the corpus; then rank"),
    "descriptors": (_descriptors_pass, "the hidden memory-descriptor field (sm_80..sm_89)"),
    "optional-predicates": (lambda isa, arch, _s: learn_optional_predicates(isa, arch),
                            "encodings where nvdisasm leaves out a PT output predicate"),
    "optional-offsets": (lambda isa, arch, _s: learn_optional_offsets(isa, arch),
                         "encodings where nvdisasm leaves out a zero offset after a register target"),
    "alias-exceptions": (lambda isa, arch, s: learn_alias_exceptions(isa, arch, s),
                         "modifiers with which nvdisasm does not print a learned alias"),
    "register-widths": (lambda isa, arch, _s: learn_register_widths(isa, arch),
                        "register fields learned narrower than their register file"),
    "zero-registers": (lambda isa, arch, _s: learn_zero_register_defers(isa, arch),
                       "where nvdisasm prints a bracketed zero register at offset 0"),
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sassas.learn", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", action="append", required=True, help="e.g. sm_90 (repeatable)")
    ap.add_argument("--out", type=Path, default=DATA_DIR, help="where to write sm_XX.toml")
    ap.add_argument("--rounds", type=int, default=6, help="probing rounds per arch")
    ap.add_argument("--no-sweep", action="store_true", help="learn from the corpus only")
    ap.add_argument("--only", choices=sorted(POST_PASSES), action="append", default=[],
                    help="only run this pass (repeatable) over the description in --out, in seconds, "
                         "and check the corpus after: " + "; ".join(f"{k}: {v[1]}" for k, v in sorted(POST_PASSES.items())))
    for name in POST_PASSES:          # the older spellings: --rank-only, --descriptors-only, ...
        ap.add_argument(f"--{name}-only", dest="only", action="append_const", const=name, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    for arch in args.arch:
        if not oracle.have_tools(arch):
            print(f"[{arch}] skipped: ptxas/nvdisasm for {arch} not found", file=sys.stderr)
            continue
        if args.only:
            path = args.out / f"{arch}.toml"
            isa = load_description(path)
            samples = [s for s in probe.to_samples(oracle.disassemble(corpus.build(arch), arch,
                                                                    oracle.DisasmCache(arch)), arch).values() if s]
            for name in dict.fromkeys(args.only):
                isa = POST_PASSES[name][0](isa, arch, samples)
            write_description(isa, path)
            bad = check_corpus(load_description(path), arch, samples)
            print(f"[{arch}] {', '.join(dict.fromkeys(args.only))}: {len(samples) - len(bad)}/{len(samples)} "
                  f"corpus words round-trip")
            continue
        learn_arch(arch, args.out, args.rounds, sweep=not args.no_sweep)
    return 0
