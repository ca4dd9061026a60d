"""Hashes of everything the project generates: SASS texts, the cubins sassas assembles from them, and
the outputs of the CPU commands. A refactoring that changes none of them leaves this table as it is.

    python tools/generated_hashes.py            # compare with tests/data/generated_hashes.json
    python tools/generated_hashes.py --write    # regenerate that baseline (after a change meant to alter output)
    python tools/generated_hashes.py --list     # the table itself, one line an item

Items (each hashed with SHA-256, first 16 hex digits):
- examples/*.sass assembled for every architecture (an assembly error is hashed as its message),
- the microbench kernels (every benchmark's SASS sources, full and quick cases) for each arch they target,
- the winograd F(2x2,3x3) kernels (sassgen) over the shapes and option variants the commands build,
  and the F(4x4,3x3) GEMMs (gemmgen, and tcgemm's 3xTF32 ones) over their splits and variants,
- the CPU commands' outputs: `winograd sass`, `winograd report` of every results file,
  `microbench list`, `microbench dump`, `microbench show`.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import hashlib
import io
import json
import os
import subprocess
import sys
import tempfile
from contextlib import redirect_stdout
from dataclasses import replace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASELINE = os.path.join(ROOT, "tests", "data", "generated_hashes.json")
ARCHS = ("sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90")


def digest(data) -> str:
    if isinstance(data, str):
        data = data.encode()
    return hashlib.sha256(data).hexdigest()[:16]


def _assembled(text: str, arch: str, filename: str) -> str:
    import sassas
    from sassas.errors import SassError
    try:
        return digest(bytes(sassas.assemble(text, arch=arch, filename=filename).data))
    except SassError as e:
        return "error " + digest(str(e))


def examples() -> dict[str, str]:
    import sassas
    from sassas.errors import SassError
    out = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "examples", "*.sass"))):
        name = os.path.basename(path)
        with open(path) as f:
            out[f"examples/{name} sass"] = digest(f.read())
        for arch in ARCHS:
            try:
                out[f"examples/{name} {arch} cubin"] = digest(bytes(sassas.assemble_file(path, arch=arch).data))
            except SassError as e:        # (the message without the checkout's path)
                out[f"examples/{name} {arch} cubin"] = "error " + digest(str(e).replace(ROOT, ""))
    return out


def microbench(archs=("sm_90",)) -> dict[str, str]:
    from microbench.core import all_benchmarks
    out = {}
    for arch in archs:
        seen = {}
        for bname, b in sorted(all_benchmarks().items()):
            for quick in (False, True):
                for c in b.cases(quick, arch):
                    if c.source.lang == "sass":
                        seen.setdefault(c.source.key, (f"{bname} {c.source.filename}", c.source))
        for key, (label, src) in seen.items():
            name = f"microbench {label} {arch}"
            out[name + " sass"] = digest(src.text)
            out[name + " cubin"] = _assembled(src.text, arch, src.filename)
    return out


def _winograd_jobs():
    """(shape, options) of the F(2x2,3x3) kernels: the commands' shapes at the default options
    (resolved for two GPU sizes), the ablation variants, the safe kernels and forced splits."""
    from kernels_sass.winograd.plan import Options, Shape, resolve
    resnet = {"Conv2": (64, 56, 64), "Conv3": (128, 28, 128), "Conv4": (256, 14, 256), "Conv5": (512, 7, 512)}
    shapes = [Shape(n, c, hw, hw, k) for (c, hw, k) in resnet.values() for n in (32, 64, 96, 128)]
    shapes += [Shape(1, 3, 5, 7, 5), Shape(33, 20, 9, 11, 70), Shape(7, 1, 1, 1, 1), Shape(40, 12, 6, 13, 130),
               Shape(1, 3, 1, 2, 5), Shape(32, 16, 6, 6, 64)]
    variants = [Options(yield_mode="natural"), Options(yield_mode="every7"), Options(yield_mode="every8"),
                Options(ldg_spacing=3), Options(sts_spacing=2), Options(cluster=4), Options(persistent=False),
                Options(overlap=False), Options(reuse_slots=False), Options(bank_slots=False),
                Options(ldgsts=False), Options(ldgu_spacing=8), Options(ldgu_spacing=40), Options(safe=True),
                Options(transform_step=2), Options(split=2), Options(split=3, tail=4), Options(split=1)]
    jobs = set()
    for s in shapes:
        for sms in (132, 114, 3):
            jobs.add((s, resolve(s, Options(), sms)))
    for s in (Shape(128, 64, 56, 56, 64), Shape(32, 256, 14, 14, 256), Shape(33, 20, 9, 11, 70)):
        for o in variants:
            jobs.add((s, resolve(s, o, 132)))
    return sorted(jobs, key=str)


def _gemm_jobs():
    from kernels_sass.winograd import Shape, f4, gemmgen
    variants = [gemmgen.OPTIONS, gemmgen.EIGHT_BY_EIGHT, replace(gemmgen.OPTIONS, a_sets=2),
                replace(gemmgen.OPTIONS, lane_map="2x2"), replace(gemmgen.OPTIONS, unroll=2),
                replace(gemmgen.OPTIONS, unroll=4), replace(gemmgen.OPTIONS, skip="copies"),
                replace(gemmgen.OPTIONS, skip="lds"), replace(gemmgen.OPTIONS, reuse=False),
                replace(gemmgen.OPTIONS, wait_all=True), replace(gemmgen.OPTIONS, depbar_yield=False)]
    shapes = [Shape(32, 256, 14, 14, 256), Shape(128, 512, 7, 7, 512), Shape(64, 128, 28, 28, 128)]
    jobs = set()
    for s in shapes:
        for parts in range(1, f4.MAX_PARTS + 1):
            for o in variants:
                g = f4.Plan(s, parts, o).gemm
                for gg in (g, gemmgen.GemmShape(2 * g.C, g.K, g.T, parts)):
                    try:
                        gemmgen.Generator(gg, o)
                    except gemmgen.Unsupported:
                        continue
                    jobs.add((gg, o))
    return sorted(jobs, key=str)


def _tc_gemm_jobs():
    from kernels_sass.winograd import Shape, f4, tcgemm
    variants = [tcgemm.OPTIONS, tcgemm.TcOptions(cols=64), tcgemm.TcOptions(reuse_across=True),
                tcgemm.TcOptions(skip="all")]
    jobs = set()
    for s in (Shape(32, 256, 14, 14, 256), Shape(33, 20, 9, 11, 70)):
        for parts in range(1, f4.MAX_PARTS + 1):
            for o in variants:
                g = f4.Plan(s, parts, o).gemm
                try:
                    tcgemm.Generator(g, o)
                except tcgemm.Unsupported:
                    continue
                jobs.add((g, o))
    return sorted(jobs, key=str)


def winograd() -> dict[str, str]:
    from kernels_sass.winograd import gemmgen, sassgen, tcgemm
    out = {}
    for s, o in _winograd_jobs():
        name = "winograd " + sassgen.kernel_name(s, o)
        text = sassgen.generate(s, o)
        out[name + " sass"] = digest(text)
        out[name + " cubin"] = _assembled(text, sassgen.ARCH, "winograd_sassgen.sass")
    for g, o in _gemm_jobs():
        name = "winograd " + gemmgen.kernel_name(g, o)
        text = gemmgen.generate(g, o)
        out[name + " sass"] = digest(text)
        out[name + " cubin"] = _assembled(text, gemmgen.ARCH, "winograd_gemmgen.sass")
    for g, o in _tc_gemm_jobs():
        name = "winograd " + tcgemm.kernel_name(g, o)
        text = tcgemm.generate(g, o)
        out[name + " sass"] = digest(text)
        out[name + " cubin"] = _assembled(text, "sm_90", "winograd_tcgemm.sass")
    return out


def _run(args: list[str], tmp: str = None) -> str:
    """A command's exit status and standard output (a temporary folder named in it as <tmp>)."""
    p = subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600,
                       env={**os.environ, "MPLBACKEND": "Agg"})
    return f"rc={p.returncode}\n" + (p.stdout.replace(tmp, "<tmp>") if tmp else p.stdout)


def commands() -> dict[str, str]:
    out = {}
    for shape in (("32", "64", "56", "56", "64"), ("33", "20", "9", "11", "70")):
        out["cli winograd sass " + " ".join(shape)] = digest(_run(["kernels_sass.winograd", "sass", *shape]))
    out["cli winograd sass --yield-mode natural --no-ldgsts"] = digest(_run(
        ["kernels_sass.winograd", "sass", "128", "256", "14", "14", "256", "--yield-mode", "natural", "--no-ldgsts"]))
    for path in sorted(glob.glob(os.path.join(ROOT, "kernels_sass", "winograd", "results", "*.json"))):
        with open(path) as f:
            data = json.load(f)
        if isinstance(data, dict) and ({"results", "ablation", "ablation4"} & set(data)):      # the files `report` reads
            out["cli winograd report " + _content_key(path)] = digest(_run(["kernels_sass.winograd", "report", path]))
    out["cli microbench list"] = digest(_run(["microbench", "list"]))
    with tempfile.TemporaryDirectory() as tmp:
        for path in sorted(glob.glob(os.path.join(ROOT, "microbench", "results", "*", "microbench.json.gz"))):
            plain = os.path.join(tmp, "microbench.json")       # `show` reads plain JSON
            with gzip.open(path, "rb") as f, open(plain, "wb") as g:
                g.write(f.read())
            for brief in ([], ["--brief"]):
                out["cli microbench show " + " ".join(brief + [_content_key(path)])] = digest(
                    _run(["microbench", "show", *brief, plain], tmp))
            os.remove(plain)
        _run(["microbench", "dump", tmp])
        for path in sorted(glob.glob(os.path.join(tmp, "**", "*"), recursive=True)):
            if os.path.isfile(path):
                with open(path, "rb") as f:
                    out["cli microbench dump " + os.path.relpath(path, tmp)] = digest(f.read())
    return out


def _content_key(path: str) -> str:
    """A results file named by its content, so that renaming it keeps its row."""
    with open(path, "rb") as f:
        return "results:" + digest(f.read())


PARTS = {"examples": examples, "microbench": microbench, "winograd": winograd, "commands": commands}


def table(parts=tuple(PARTS)) -> dict[str, dict[str, str]]:
    """{part: {item: hash}}."""
    return {p: PARTS[p]() for p in parts}


def compare(got: dict[str, dict[str, str]], want: dict[str, dict[str, str]]) -> list[str]:
    diffs = []
    for part in got:
        g, w = got[part], want.get(part, {})
        for k in sorted(set(g) | set(w)):
            if g.get(k) != w.get(k):
                diffs.append(f"{part}: {k}: baseline {w.get(k, 'absent')}, now {g.get(k, 'absent')}")
    return diffs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help=f"write the baseline ({os.path.relpath(BASELINE, ROOT)})")
    ap.add_argument("--list", action="store_true", help="print the table")
    ap.add_argument("--baseline", default=BASELINE)
    ap.add_argument("--parts", nargs="*", choices=list(PARTS), default=list(PARTS))
    args = ap.parse_args(argv)
    sys.path.insert(0, ROOT)
    got = table(args.parts)
    if args.list:
        for part, items in got.items():
            for k, v in items.items():
                print(f"{v}  {part}: {k}")
    count = sum(map(len, got.values()))
    if args.write:
        want = {}
        if os.path.exists(args.baseline):         # --parts rewrites those parts only
            with open(args.baseline) as f:
                want = json.load(f)
        want.update(got)
        with open(args.baseline, "w") as f:
            json.dump(want, f, indent=1, sort_keys=True)
            f.write("\n")
        print(f"{count} hashes written to {os.path.relpath(args.baseline, ROOT)}")
        return 0
    with open(args.baseline) as f:
        want = json.load(f)
    diffs = compare(got, want)
    for d in diffs:
        print(d)
    print(f"{count} hashes, {len(diffs)} differ from {os.path.relpath(args.baseline, ROOT)}")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
