"""False alarms of `sassas check` on ptxas-compiled code (hazard-free by construction): every
kernel of the learning corpus (sassas.learn.corpus.ptx) compiled by ptxas 12.9 for each arch,
listed with cuobjdump -sass (both cached under .cache/oracle), checked; prints errors and
warnings by kind (all should be 0).

    python benchmarks/checker_false_alarms.py [--arch sm_90 ...] [--sample N]
"""
import argparse
import collections

from sassas.check import check_file
from sassas.learn.latency import corpus_listings


def check_arch(arch: str, sample=None) -> tuple[int, int, collections.Counter, dict]:
    counts, examples, kernels, flagged = collections.Counter(), {}, 0, 0
    for name, listing in corpus_listings(arch, sample):
        kernels += 1
        found = [h for h in check_file(f"{name}.lst", arch, text=listing)
                 if h.severity in ("error", "warning") and h.kind != "unreadable"]
        flagged += bool(found)
        for h in found:
            counts[h.kind] += 1
            examples.setdefault(h.kind, f"{name}: {h.message[:120]}")
    return kernels, flagged, counts, examples


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", action="append", default=None)
    ap.add_argument("--sample", type=int, help="check this many kernels an arch (a fixed draw)")
    args = ap.parse_args()
    archs = args.arch or ["sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120"]
    print(f"{'arch':6} {'kernels':>8} {'flagged':>8} {'false alarms':>13}  by kind (first example)")
    for arch in archs:
        kernels, flagged, counts, examples = check_arch(arch, args.sample)
        kinds = "; ".join(f"{k} {n} ({examples[k]})" for k, n in counts.items()) or "-"
        print(f"{arch:6} {kernels:8d} {flagged:8d} {sum(counts.values()):13d}  {kinds}", flush=True)


if __name__ == "__main__":
    main()
