"""sha256 of the cubins the assembler makes of a fixed set of sources, per arch: to show that a
change meant to make the assembler faster leaves its output byte-identical.

    python benchmarks/cubin_hashes.py --save before.json     # before the change
    python benchmarks/cubin_hashes.py --compare before.json  # after it: lists what differs

Sources: examples/*.sass, the benchmark mixes of bench_assemble.py (3000 instructions; the
listing mix where cuobjdump is found), every SASS source of the microbenchmarks, and the
winograd kernels' generated SASS for a few shapes and options. Where a source does not assemble
for an arch the error message is recorded instead, so the errors must stay the same too.
"""
from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

ARCHS = ("sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90")


def sources():
    """(name, text, archs) of every source."""
    import bench_assemble
    for path in sorted(glob.glob(os.path.join(ROOT, "examples", "*.sass"))):
        with open(path) as f:
            yield os.path.relpath(path, ROOT), f.read(), ARCHS
    for mix, gen in bench_assemble.GENERATORS.items():
        if gen is not None:
            yield f"bench:{mix}", gen(3000, seed=1), ARCHS
    with tempfile.TemporaryDirectory() as work:
        text = bench_assemble.listing(3000, "sm_90", work)
    if text is not None:
        yield "bench:listing", text, ("sm_90",)
    from microbench.core import all_benchmarks
    seen = set()
    for b in all_benchmarks().values():
        for quick in (False, True):
            for c in b.cases(quick, "sm_90"):
                if c.source.lang == "sass" and c.source.key not in seen:
                    seen.add(c.source.key)
                    yield f"microbench:{c.source.filename}:{c.source.key}", c.source.text, ("sm_90",)
    from kernels_sass.winograd import sassgen
    from kernels_sass.winograd.sassgen import Options, Shape
    for shape, opts in [(Shape(64, 64, 56, 56, 64), Options()), (Shape(33, 20, 9, 11, 70), Options(split=2, tail=120)),
                        (Shape(32, 16, 14, 14, 64), Options(yield_mode="every7", ldg_spacing=8, sts_spacing=2)),
                        (Shape(32, 16, 14, 14, 64), Options(reuse_slots=False, cluster=2))]:
        yield f"winograd:{shape}:{opts.tag()}", sassgen.generate(shape, opts), ("sm_90",)


def hashes() -> dict[str, str]:
    import sassas
    out = {}
    for name, text, archs in sources():
        for arch in archs:
            try:
                cubin = sassas.assemble(text, arch, filename="src.sass")
                value = hashlib.sha256(cubin.data).hexdigest()
                if cubin.warnings:
                    value += " warnings:" + hashlib.sha256(
                        "\n".join(w.render() for w in cubin.warnings).encode()).hexdigest()[:16]
            except sassas.SassError as e:
                value = "error:" + hashlib.sha256(str(e).encode()).hexdigest()[:16]
            out[f"{name}@{arch}"] = value
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--save", metavar="FILE")
    group.add_argument("--compare", metavar="FILE")
    args = ap.parse_args()
    now = hashes()
    if args.save:
        with open(args.save, "w") as f:
            json.dump(now, f, indent=1, sort_keys=True)
        print(f"{len(now)} cubins hashed into {args.save}")
        return 0
    with open(args.compare) as f:
        before = json.load(f)
    differ = sorted(k for k in before.keys() | now.keys() if before.get(k) != now.get(k))
    for k in differ:
        print(f"differs: {k}: {before.get(k)} -> {now.get(k)}")
    print(f"{len(now)} cubins, {len(differ)} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
