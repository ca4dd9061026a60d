"""Assembler throughput: instructions per second of a whole `python -m sassas asm` process
(interpreter start-up, ISA load, parse, resolve, checks, encode, ELF, writing the cubin) on
generated files of several mixes and sizes, and how it scales (a table, not a timed test).

    python benchmarks/bench_assemble.py [--sizes 200000,1000000] [--mixes dense,barriers,...]
                                        [--repeat 3] [--arch sm_90] [--threads N] [--stages]

Mixes:
  dense     FFMA / LDS.128 with hand-written control codes, stall 1 everywhere, no barriers
  barriers  seven kinds of instruction, a third of them setting or waiting on scoreboard barriers
  listing   `cuobjdump -sass` of the `barriers` file's cubin, assembled as it stands
            (skipped where cuobjdump is missing)
  turingas  TuringAs dialect: <params> and <regs> blocks, named registers, `name[i]` parameters
  auto      instructions without control codes: the scheduler writes them

Each cell is the median of --repeat runs (each a fresh process, after one that writes the
bytecode and sassas's caches, as any later run finds them; the runs go round the cells, a
process a cell a round); "wall" is the process's elapsed time, "CPU" its user + system time
(which other work on the machine inflates less); "best" is the fastest run's wall time and
rate (on a shared host, where other work slows some runs, the closest to the machine's own
speed, as timeit reports it).
"per inst" is the CPU time of one instruction relative to the mix's smallest size: linear
scaling keeps it at x1.00. --threads N passes `-t N` (`asm --threads`: up to N processes
assemble a large kernel, each a range of its lines; 1: one process; their CPU time counts in
"CPU", on Linux, where this script reaps them); without it, sassas's default, one a CPU core.
--stages adds, per mix and size, an in-process split of the time by pipeline stage in one
process (not part of the rate).
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

R = random.Random

BARRIER_TEMPLATES = [
    "--:-:-:Y:4      FFMA R{a}, R{b}.reuse, R{c}, R{d};",
    "--:-:-:-:2      IADD3 R{a}, R{b}, 0x{i:x}, RZ;",
    "--:-:0:-:1      LDS.128 R{q}, [R{b}+0x{i:x}];",
    "01:-:-:Y:4      LOP3.LUT R{a}, R{b}, 0x{i:x}, RZ, 0xc0, !PT;",
    "--:-:-:Y:4      ISETP.GE.AND P0, PT, R{a}, UR4, PT;",
    "--:-:-:Y:4  @P0 FADD R{a}, R{b}, -R{c};",
    "--:1:-:-:1      STS.64 [R{b}+0x{i:x}], R{e};",
]


def _fields(rng: random.Random) -> dict:
    return dict(a=rng.randrange(8, 200), b=rng.randrange(8, 200), c=rng.randrange(8, 200),
                d=rng.randrange(8, 200), e=rng.randrange(4, 100) * 2, q=rng.randrange(2, 50) * 4,
                i=rng.randrange(0, 4096) * 16)


def _wrap(body: list[str], params: str = "p, 8") -> str:
    return "\n".join([".kernel big", "<params>", params, "</params>", "LOOP:", *body,
                      "--:-:-:Y:5  @P0 BRA LOOP;", "--:-:-:Y:5      EXIT;", ""])


def barriers(n: int, seed: int = 0) -> str:
    rng = R(seed)
    return _wrap([rng.choice(BARRIER_TEMPLATES).format(**_fields(rng)) for _ in range(n)])


def dense(n: int, seed: int = 0) -> str:
    rng = R(seed)
    body = []
    for k in range(n):
        f = _fields(rng)
        if k % 8 == 7:
            body.append("--:-:-:-:1      LDS.128 R{q}, [R{b}+0x{i:x}];".format(**f))
        else:
            body.append("--:-:-:Y:1      FFMA R{a}, R{b}.reuse, R{c}, R{d};".format(**f))
    return _wrap(body)


def turingas(n: int, seed: int = 0) -> str:
    rng = R(seed)
    regs = ["<regs>", "0-3 : base, base_hi, tid, addr", "8-71 ~ acc<0-63>", "72-135 ~ a<0-63>",
            "136-199 ~ b<0-63>", "</regs>"]
    templates = [
        "--:-:-:Y:1      FFMA acc{x}, a{y}.reuse, b{z}, acc{x};",
        "--:-:-:Y:1      FFMA acc{x}, a{y}, b{z}, acc{x};",
        "--:-:0:-:2      LDS.128 a{q}, [addr+0x{i:x}];",
        "01:-:-:Y:4      IADD3 addr, addr, 0x{i:x}, RZ;",
        "--:-:-:Y:4      IMAD.WIDE base, tid, 0x4, base;",
        "--:-:-:Y:4      ISETP.GE.AND P0, PT, tid, n[0], PT;",
    ]
    body = []
    for _ in range(n):
        body.append(rng.choice(templates).format(x=rng.randrange(64), y=rng.randrange(64), z=rng.randrange(64),
                                                 q=rng.randrange(16) * 4, i=rng.randrange(4096) * 16))
    text = _wrap(body, "n, 8")
    return text.replace("</params>\n", "</params>\n" + "\n".join(regs) + "\n", 1)


def auto(n: int, seed: int = 0) -> str:
    rng = R(seed)
    templates = ["FFMA R{a}, R{b}, R{c}, R{d};", "IADD3 R{a}, R{b}, 0x{i:x}, RZ;", "LDS.128 R{q}, [R{b}+0x{i:x}];",
                 "LOP3.LUT R{a}, R{b}, 0x{i:x}, RZ, 0xc0, !PT;", "FADD R{a}, R{b}, -R{c};",
                 "STS.64 [R{b}+0x{i:x}], R{e};"]
    body = [rng.choice(templates).format(**_fields(rng)) for _ in range(n)]
    return "\n".join([".kernel big", "<params>", "p, 8", "</params>", *body, "EXIT;", ""])


def listing(n: int, arch: str, workdir: str) -> str | None:
    """`cuobjdump -sass` of the barriers file's cubin, or None without cuobjdump."""
    from sassas.learn.oracle import OracleMissing, find_tool
    try:
        tool = find_tool("cuobjdump", arch)
    except OracleMissing:
        return None
    import sassas
    cubin = os.path.join(workdir, "listing-source.cubin")
    sassas.assemble(barriers(n), arch, "big.sass").save(cubin)
    out = subprocess.run([str(tool), "-sass", cubin], capture_output=True, text=True, check=True).stdout
    os.remove(cubin)
    return out


GENERATORS = {"dense": dense, "barriers": barriers, "listing": None, "turingas": turingas, "auto": auto}


# The processes run as an installed sassas does: bytecode compiled (pip compiles it at install;
# PYTHONDONTWRITEBYTECODE would make each process compile every module again).
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _become_subreaper() -> bool:
    """Make this process the one that reaps the orphans of its children (Linux's
    PR_SET_CHILD_SUBREAPER): `sassas asm -t N` ends without waiting for its workers to end, and
    a worker that this process reaps counts in the CPU time. False where it cannot."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(36, 1, 0, 0, 0) == 0          # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


SUBREAPER = sys.platform.startswith("linux") and _become_subreaper()


def run_process(path: str, arch: str, out: str, threads: Optional[int] = None) -> tuple[float, float]:
    """(wall s, CPU s) of one `python -m sassas asm` process: wall until it ends, CPU its own and
    that of its workers (reaped here after it ends, where this process is a subreaper)."""
    with tempfile.TemporaryFile() as err:     # (warnings: a pipe left unread would block the process)
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "sassas", "asm", path, "--arch", arch, "-o", out,
                                 *(["-t", str(threads)] if threads is not None else [])],
                                cwd=ROOT, stderr=err, env=CHILD_ENV)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        cpu = usage.ru_utime + usage.ru_stime
        while SUBREAPER:                    # (its workers, which end after it)
            try:
                _, _, usage = os.wait4(-1, 0)
            except ChildProcessError:
                break
            cpu += usage.ru_utime + usage.ru_stime
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            raise SystemExit(f"sassas asm {path} failed ({proc.returncode}):\n{err.read().decode()[-2000:]}")
    return wall, cpu


def stage_seconds(text: str, arch: str) -> tuple[float, ...]:
    """In-process wall seconds of parse (with preprocess and front end), resolve, schedule and
    encode with the barrier-warning pass, ELF (garbage collector paused, as sassas.assemble pauses it)."""
    import gc
    import sassas
    from sassas import elf
    from sassas.arch import get_arch
    from sassas.assembler import _image
    from sassas.encode import encode_kernel
    from sassas.hazards import barrier_raise_warnings
    from sassas.isa import get_isa
    from sassas.resolve import resolve_kernel
    from sassas.schedule import schedule_kernel
    target = get_arch(arch)
    isa = get_isa(target.name)
    gc.disable()
    try:
        t0 = time.perf_counter()
        prog = sassas.parse(text, target.name, "big.sass")
        t1 = time.perf_counter()
        for k in prog.kernels:
            resolve_kernel(k, target)
        t2 = time.perf_counter()
        for k in prog.kernels:
            schedule_kernel(k, target)
        encoded = [encode_kernel(k, target, isa) for k in prog.kernels]
        for k in prog.kernels:
            barrier_raise_warnings(k, target.name).warnings(k.name)
        t3 = time.perf_counter()
        elf.write_cubin(target.name, [_image(e) for e in encoded])
        t4 = time.perf_counter()
    finally:
        gc.enable()
    return t1 - t0, t2 - t1, t3 - t2, t4 - t3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="200000,1000000")
    ap.add_argument("--mixes", default=",".join(GENERATORS))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--threads", type=int, default=None,
                    help="pass `-t N` to sassas asm (1: one process; 0, sassas's default: one a CPU core)")
    ap.add_argument("--stages", action="store_true")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"python -m sassas asm{'' if args.threads is None else f' -t {args.threads}'}, {args.arch}, "
          f"median of {args.repeat} process(es) a cell; "
          f"{os.cpu_count()} CPU(s), Python {sys.version.split()[0]}")
    print(f"{'mix':>9} {'instructions':>12} {'wall s':>7} {'CPU s':>6} {'inst/s':>8} {'inst/CPU s':>10} "
          f"{'per inst':>8} {'best s':>6} {'best inst/s':>11}"
          + ("   stages (parse/resolve/encode+checks/ELF s)" if args.stages else ""))
    with tempfile.TemporaryDirectory() as work:
        out = os.path.join(work, "out.cubin")
        # One process first: it writes the bytecode and the caches (ISA pickle, parser tables)
        # that every later process reads, as a user's second run does.
        warm = os.path.join(work, "warm.sass")
        with open(warm, "w") as f:
            f.write(dense(10))
        run_process(warm, args.arch, out)
        cells = []              # (mix, n, path), in the table's order
        for mix in args.mixes.split(","):
            for n in sizes:
                text = listing(n, args.arch, work) if mix == "listing" else GENERATORS[mix](n)
                if text is None:
                    cells.append((mix, n, None))
                    break
                path = os.path.join(work, f"{mix}-{n}.sass")
                with open(path, "w") as f:
                    f.write(text)
                del text
                cells.append((mix, n, path))
        # The repetitions go round the cells, one process a cell a round: a spell of a slower
        # host (they come and go on shared machines) then costs each cell a sample or two, not
        # one cell all of them.
        runs: dict[str, list] = {path: [] for _, _, path in cells if path}
        for r in range(args.repeat):
            print(f"[bench] round {r + 1}/{args.repeat}", file=sys.stderr, flush=True)
            for _, _, path in cells:
                if path:
                    runs[path].append(run_process(path, args.arch, out, args.threads))
        base = {}
        for mix, n, path in cells:
            if path is None:
                print(f"{mix:>9} {'skipped: cuobjdump not found':>40}")
                continue
            wall = statistics.median(w for w, _ in runs[path])
            best = min(w for w, _ in runs[path])
            cpu = statistics.median(c for _, c in runs[path])
            base.setdefault(mix, cpu / n)
            extra = ""
            if args.stages:
                with open(path) as f:
                    extra = "   " + " / ".join(f"{s:.2f}" for s in stage_seconds(f.read(), args.arch))
            print(f"{mix:>9} {n:12d} {wall:7.2f} {cpu:6.2f} {n / wall:8.0f} {n / cpu:10.0f} "
                  f"{'x%.2f' % (cpu / n / base[mix]):>8} {best:6.2f} {n / best:11.0f}{extra}", flush=True)

if __name__ == "__main__":
    main()
