"""False alarms of `sassas check` on ptxas-compiled code (hazard-free by construction): every
kernel of the learning corpus (sassas.learn.corpus.ptx) compiled by ptxas 12.9 for each arch,
listed with cuobjdump -sass, checked; prints errors and warnings by kind (all should be 0).

    python benchmarks/checker_false_alarms.py [--arch sm_90 ...]
"""
import argparse
import collections
import os
import re
import subprocess
import tempfile

from sassas.check import check_file
from sassas.learn import oracle
from sassas.learn.corpus import ptx as corpus_ptx


def check_arch(arch: str) -> tuple[int, collections.Counter, dict]:
    cuobjdump = str(oracle.find_tool("cuobjdump", arch))
    counts, examples, kernels = collections.Counter(), {}, 0
    for name, ptx in corpus_ptx.kernels(arch):
        target = re.search(r"^\.target (\S+)", ptx, re.M)      # (sm_100a for its own families)
        cubin = oracle.compile_ptx(ptx, target.group(1) if target else arch)
        if cubin is None:
            continue
        kernels += 1
        with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
            f.write(cubin)
        try:
            listing = subprocess.run([cuobjdump, "-sass", f.name], capture_output=True, text=True).stdout
        finally:
            os.unlink(f.name)
        for h in check_file(f"{name}.lst", arch, text=listing):
            if h.severity in ("error", "warning") and h.kind != "unreadable":
                counts[h.kind] += 1
                examples.setdefault(h.kind, f"{name}: {h.message[:120]}")
    return kernels, counts, examples


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--arch", action="append", default=None)
    archs = ap.parse_args().arch or ["sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120"]
    print(f"{'arch':6} {'kernels':>8} {'false alarms':>13}  by kind (first example)")
    for arch in archs:
        kernels, counts, examples = check_arch(arch)
        kinds = "; ".join(f"{k} {n} ({examples[k]})" for k, n in counts.items()) or "-"
        print(f"{arch:6} {kernels:8d} {sum(counts.values()):13d}  {kinds}", flush=True)


if __name__ == "__main__":
    main()
