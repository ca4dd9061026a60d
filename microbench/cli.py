"""python -m microbench: list, run, build, dump, show.

    python -m microbench list
    python -m microbench run [NAMES|all] [--json FILE] [--plot DIR] [--repeat N] [--quick]
    python -m microbench build [NAMES]          # assemble/compile every kernel (no GPU)
    python -m microbench dump DIR [NAMES]       # write the generated SASS and CUDA-C sources
    python -m microbench show FILE.json [--plot DIR]   # table (and plots) from saved results

NAMES are benchmark names (see `list`) or groups ('smem', 'inst').
"""
from __future__ import annotations

import argparse
import os
import sys

from sassas.cli import arch_name


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m microbench",
                                description="GPU microbenchmarks written in SASS (assembled by sassas), "
                                            "each beside a CUDA-C reference compiled with NVRTC.")
    # (the metavar lists the commands a user runs: _worker is the runner's own)
    sub = p.add_subparsers(dest="cmd", required=True, metavar="{list,run,build,dump,show}")

    s = sub.add_parser("list", help="list the benchmarks")
    s.add_argument("-v", "--verbose", action="store_true", help="describe each, count its cases")

    s = sub.add_parser("run", help="run benchmarks on the GPU")
    s.add_argument("names", nargs="*", default=["all"], help="benchmarks or groups (default: all)")
    s.add_argument("--json", metavar="FILE", help="write the results as JSON")
    s.add_argument("--plot", metavar="DIR", help="write PNG figures into DIR")
    s.add_argument("--table", metavar="FILE", help="also write the (full) summary table to FILE")
    s.add_argument("--brief", action="store_true",
                   help="print the short table (main patterns only); --table still gets all")
    s.add_argument("--repeat", type=int, default=None,
                   help="samples per case (default 21, --quick 9): a timed launch each, or the mean of the case's launches a sample")
    s.add_argument("--warmup", type=int, default=2, help="untimed launches first (default 2)")
    s.add_argument("--quick", action="store_true", help="shorter loops and fewer repetitions")
    s.add_argument("--no-isolate", action="store_true",
                   help="run every case in this process (a GPU fault then ends the run)")
    s.add_argument("--case-timeout", type=float, default=60.0,
                   help="seconds without progress before a worker is killed (default 60)")
    s.add_argument("--jobs", type=int, default=0, help="build processes (default: CPU count)")

    s = sub.add_parser("build", help="assemble and compile every kernel (no GPU needed)")
    s.add_argument("names", nargs="*", default=["all"], help="benchmarks or groups (default: all)")
    s.add_argument("--arch", default="sm_90", type=arch_name, help="the arch to build for (default sm_90)")
    s.add_argument("--jobs", type=int, default=0, help="build processes (default: CPU count)")
    s.add_argument("--verify", action="store_true",
                   help="also check each SASS cubin against its source with nvdisasm")

    s = sub.add_parser("dump", help="write the kernels' SASS and CUDA-C sources into a folder")
    s.add_argument("dir", help="the folder to write into (made if missing)")
    s.add_argument("names", nargs="*", default=["all"], help="benchmarks or groups (default: all)")
    s.add_argument("--arch", default="sm_90", type=arch_name, help="the arch to generate for (default sm_90)")

    s = sub.add_parser("show", help="print the table of a results file (and plot it)")
    s.add_argument("json", help="a results file of `run --json`")
    s.add_argument("--brief", action="store_true", help="the short table")
    s.add_argument("--plot", metavar="DIR", help="write PNG figures into DIR")

    s = sub.add_parser("_worker")
    s.add_argument("name")
    s.add_argument("--start", type=int, default=0)
    s.add_argument("--repeat", type=int, required=True)
    s.add_argument("--warmup", type=int, required=True)
    s.add_argument("--cache", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--skip", default=None)
    s.add_argument("--quick", action="store_true")
    return p


def main(argv=None) -> int:
    """The command line; a name, file or arch it cannot take gets one line and a non-zero exit."""
    from .core import UnknownBenchmark
    from .results import ResultsFileError
    args = _parser().parse_args(argv)
    try:
        return _command(args)
    except UnknownBenchmark as e:
        print(f"python -m microbench {args.cmd}: error: {e}", file=sys.stderr)
        return 2
    except ResultsFileError as e:
        print(f"python -m microbench {args.cmd}: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        where = f"{e.filename}: " if e.filename else ""
        print(f"python -m microbench {args.cmd}: error: {where}{e.strerror or e}", file=sys.stderr)
        return 1


def _command(args) -> int:
    if args.cmd == "list":
        return cmd_list(args)
    if args.cmd == "run":
        return cmd_run(args)
    if args.cmd == "build":
        return cmd_build(args)
    if args.cmd == "dump":
        return cmd_dump(args)
    if args.cmd == "show":
        return cmd_show(args)
    if args.cmd == "_worker":
        from .runner import worker_main
        return worker_main(args.name, args.start, args.quick, args.repeat, args.warmup,
                           args.cache, args.out, args.skip)
    return 2


def cmd_list(args) -> int:
    from .core import all_benchmarks
    rows = []
    for name, b in all_benchmarks().items():
        if args.verbose:
            n_full = len(b.cases(False))
            n_quick = len(b.cases(True))
            rows.append(f"{name:<18} {b.title}  ({n_full} cases; quick: {n_quick})\n{'':<18} {b.about}")
        else:
            rows.append(f"{name:<18} {b.title}")
    print("\n".join(rows))
    return 0


def cmd_run(args) -> int:
    from .gpu import GpuError
    from .results import table, write_json
    from .runner import run
    try:
        device, results = run(args.names, quick=args.quick, repeat=args.repeat, warmup=args.warmup,
                              isolate=not args.no_isolate, case_timeout=args.case_timeout,
                              jobs=args.jobs)
    except GpuError as e:
        print(f"python -m microbench run: error: {e}", file=sys.stderr)
        return 2
    if args.json:
        write_json(args.json, results, device)
        print(f"[json] {args.json}", file=sys.stderr)
    if args.plot:
        try:
            from .plot import plot_all
            for path in plot_all(results, args.plot, device.get("device", "")):
                print(f"[plot] {path}", file=sys.stderr)
        except ImportError as e:
            print(f"[plot] skipped: matplotlib is not available ({e})", file=sys.stderr)
    title = (f"microbench on {device.get('device', '?')} ({device.get('arch', '?')}, "
             f"{device.get('sm_count', '?')} SMs){' --quick' if args.quick else ''}: "
             f"median of {device.get('repeat')} samples (a launch, or the mean of a stream's launches), ± = (max-min)/median")
    text = table(results, title)
    if args.table:
        with open(args.table, "w") as f:
            f.write(text)
        print(f"[table] {args.table}", file=sys.stderr)
    sys.stdout.write(table(results, title, brief=True) if args.brief else text)
    sys.stdout.flush()
    return 1 if any(r.error for r in results) else 0


def cmd_build(args) -> int:
    import tempfile

    from .core import select
    from .runner import prebuild
    from .runner import source_digest
    cases = [c for b in select(args.names) for c in b.cases(False, args.arch)]
    problems = 0
    with tempfile.TemporaryDirectory() as tmp:
        errors = prebuild(cases, args.arch, tmp, args.jobs, sys.stderr)
        for d, e in errors.items():
            print(e, file=sys.stderr)
        if args.verify:
            from .verify import compare
            seen = set()
            for c in cases:
                d = source_digest(c.source, args.arch)
                if c.source.lang != "sass" or d in seen or d in errors:
                    continue
                seen.add(d)
                with open(os.path.join(tmp, d + ".cubin"), "rb") as f:
                    found = compare(c.source.text, f.read(), args.arch)
                for line in found:
                    print(f"{c.source.filename}: {line}", file=sys.stderr)
                problems += len(found)
            print(f"[verify] {len(seen)} SASS kernels checked with nvdisasm: {problems} differences",
                  file=sys.stderr)
    return 1 if errors or problems else 0


def cmd_dump(args) -> int:
    from .core import select
    os.makedirs(args.dir, exist_ok=True)
    written = set()
    for b in select(args.names):
        for c in b.cases(False, args.arch):
            src = c.source
            fn = src.filename
            if src.options:
                stem, ext = os.path.splitext(fn)
                fn = stem + "".join("_" + o.lstrip("-D").replace("=", "") for o in src.options) + ext
            if fn in written:
                continue
            written.add(fn)
            with open(os.path.join(args.dir, fn), "w") as f:
                if src.options:
                    f.write(f"// NVRTC options: {' '.join(src.options)}\n")
                f.write(src.text)
    print(f"{len(written)} sources written to {args.dir}")
    return 0


def cmd_show(args) -> int:
    from .results import read_json, table
    device, results = read_json(args.json)
    sys.stdout.write(table(results, f"microbench results from {args.json} ({device.get('device', '?')})",
                           brief=args.brief))
    if args.plot:
        from .plot import plot_all
        for path in plot_all(results, args.plot, device.get("device", "")):
            print(f"[plot] {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
