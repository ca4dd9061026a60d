"""Where the ISA tables still miss: per arch, the instructions of real compiled code (a corpus
of tests/sassas/test_realworld_corpus.py, sampled as the test samples it or whole, and the NVRTC
kernels of tests/sassas/test_listing_input.py) that do not re-encode bit-exactly from nvdisasm's
listing text, or whose decode + format differs from nvdisasm's, bucketed by opcode and by
differing bits / text.

    PYTHONPATH=$PWD python3 benchmarks/isa_gaps.py [--corpus bitsandbytes|torchvision-audio]
        [--all] [--arch sm_90 ...] [--examples 2] [--top 25] [--no-nvrtc]

--all measures every kernel of the corpus instead of the test's sample (slower). Prints the
largest buckets with example instructions (the word in hex for format gaps), then a table of
shares per arch.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "sassas"))

from sassas.errors import SassError                                 # noqa: E402
from sassas.learn import oracle                                     # noqa: E402
from sassas.learn.compare import format_comparisons, listing_encodings, normal_text  # noqa: E402

ARCHS = ["sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90"]


def _bit_ranges(x: int) -> str:
    out, b = [], 0
    while x >> b:
        if x >> b & 1:
            e = b
            while x >> (e + 1) & 1:
                e += 1
            out.append(f"{b}" if e == b else f"{b}-{e}")
            b = e + 1
        else:
            b += 1
    return ",".join(out)


def listing_gaps(listing: str, arch: str, original: bytes, buckets, examples, n_examples):
    good = total = 0
    try:
        encodings = list(listing_encodings(listing, arch, original))
    except SassError as e:
        # The whole listing is lost (e.g. a line the parser does not take): one bucket, counted
        # as one miss per instruction line.
        lines = sum(1 for line in listing.splitlines() if re.match(r"\s*/\*[0-9a-f]{4,}\*/", line))
        key = ("(listing)", "does not parse: " + re.sub(r"\d+", "N", e.message.splitlines()[0])[:90])
        buckets[key] += lines
        if len(examples[key]) < n_examples:
            examples[key].append(e.message.splitlines()[0][:160])
        return 0, lines
    for inst, want, got, error in encodings:
        total += 1
        if got == want:
            good += 1
            continue
        if error is not None:
            why = "error: " + re.sub(r"0x[0-9a-f]+|\d+", "N", error.message)[:90]
        else:
            why = f"bits {_bit_ranges(got ^ want)}"
        key = (inst.opcode, why)
        buckets[key] += 1
        if len(examples[key]) < n_examples:
            examples[key].append(inst.loc.text.strip()[:110] if inst.loc else str(inst))
    return good, total


def format_gaps(words, arch, buckets, examples, n_examples):
    good = total = 0
    for d, mine in format_comparisons(words, arch):
        total += 1
        if normal_text(mine) == normal_text(d.text):
            good += 1
            continue
        a, b = normal_text(d.text).split(" "), normal_text(mine).split(" ")
        opcode = next((t for t in a if not t.startswith("@")), "?")
        diff = " ".join(t for t in a if t not in b)[:40] + " | ours " + " ".join(t for t in b if t not in a)[:40]
        if mine.startswith("<"):
            diff = "no decode"
        key = (opcode.split(".")[0], re.sub(r"\b(U?R|U?P|B)\d+\b", r"\1n", re.sub(r"0x[0-9a-f]+", "N", diff)))
        buckets[key] += 1
        if len(examples[key]) < n_examples:
            examples[key].append(f"{d.text}  <- ours: {mine}  [0x{d.word:032x}]")
    return good, total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", action="append")
    ap.add_argument("--examples", type=int, default=2)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--no-nvrtc", action="store_true")
    import test_realworld_corpus as rw
    ap.add_argument("--corpus", default="bitsandbytes", choices=sorted(rw.CORPORA))
    ap.add_argument("--all", action="store_true", help="every kernel, not the test's sample")
    args = ap.parse_args()
    spec = rw.CORPORA[args.corpus]
    try:
        corpus = rw.cubins(args.corpus)
    except rw.CorpusMissing as e:
        print(f"{args.corpus}: {e}", file=sys.stderr)
        return 1
    rows = []
    for arch in args.arch or ARCHS:
        if arch not in corpus:
            print(f"\n===== {arch}: no cubin in {spec.label}")
            continue
        nvdisasm = str(oracle.find_tool("nvdisasm", arch))
        chosen = rw.sample(corpus[arch], arch, None if args.all else spec.max_instructions)
        lb, le = Counter(), defaultdict(list)
        good_l = total_l = 0
        for listing, data in rw.listings(chosen, nvdisasm):
            g, t = listing_gaps(listing, arch, data, lb, le, args.examples)
            good_l += g
            total_l += t
        with tempfile.TemporaryDirectory() as tmp:
            good_n = total_n = 0
            if not args.no_nvrtc:
                from _realistic import compile_realistic
                original = compile_realistic(arch)
                path = os.path.join(tmp, "k.cubin")
                with open(path, "wb") as f:
                    f.write(original)
                listing = subprocess.run([nvdisasm, "-hex", path], capture_output=True, text=True,
                                         check=True).stdout
                good_n, total_n = listing_gaps(listing, arch, original, lb, le, args.examples)
        words = rw.words(chosen)
        if args.all:
            words = list(dict.fromkeys(words))    # each distinct word once
        fb, fe = Counter(), defaultdict(list)
        good_f, total_f = format_gaps(words, arch, fb, fe, args.examples)
        rows.append((arch, good_n, total_n, good_l, total_l, good_f, total_f))
        print(f"\n===== {arch}: nvrtc listing {good_n}/{total_n}, {args.corpus} listing {good_l}/{total_l} "
              f"({100 * good_l / max(total_l, 1):.2f}%), format {good_f}/{total_f} "
              f"({100 * good_f / max(total_f, 1):.2f}%)")
        print("-- listing re-encode gaps (opcode, what differs): count")
        for key, n in lb.most_common(args.top):
            print(f"  {n:6d}  {key[0]:10s} {key[1]}")
            for ex in le[key]:
                print(f"            {ex}")
        print("-- format gaps (opcode, nvdisasm tokens | ours): count")
        for key, n in fb.most_common(args.top):
            print(f"  {n:6d}  {key[0]:10s} {key[1]}")
            for ex in fe[key]:
                print(f"            {ex[:230]}")
    print(f"\n| arch | NVRTC listing bit-exact | {args.corpus} listing bit-exact | decode+format == nvdisasm |")
    print("|---|---|---|---|")
    for arch, gn, tn, gl, tl, gf, tf in rows:
        print(f"| {arch} | {100 * gn / max(tn, 1):.2f}% | {100 * gl / max(tl, 1):.2f}% | {100 * gf / max(tf, 1):.2f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
