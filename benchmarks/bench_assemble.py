"""Assembler throughput: instructions per second of `sassas.assemble` on generated sm_90 files
of growing size, per pipeline stage, and how it scales (a table, not a timed test).

    python benchmarks/bench_assemble.py [--sizes 10000,50000,200000,1000000] [--arch sm_90]

Issue 3 asks for >= 100k instructions/s at 200k instructions and linear scaling to 1M.

Each size is assembled twice: once stage by stage (the stage columns: preprocess + parse +
front end, resolve, encode with the register count, ELF; with the garbage collector paused, as
`sassas.assemble` pauses it) and once by `sassas.assemble`, which gives the rate (wall time;
"CPU s" is the process's CPU time in that run, which other work on the machine inflates less,
and "inst/CPU s" the rate by it).
The ISA description is loaded before the table (once per process, printed above it).
"per inst" is the CPU time of one instruction relative to the smallest size: linear scaling
keeps it at x1.00.
"""
import argparse
import gc
import random
import time

import sassas
from sassas import elf
from sassas.arch import get_arch
from sassas.assembler import _image
from sassas.encode import encode_kernel
from sassas.isa import get_isa
from sassas.resolve import resolve_kernel

TEMPLATES = [
    "--:-:-:Y:4      FFMA R{a}, R{b}.reuse, R{c}, R{d};",
    "--:-:-:-:2      IADD3 R{a}, R{b}, 0x{i:x}, RZ;",
    "--:-:0:-:1      LDS.128 R{q}, [R{b}+0x{i:x}];",
    "01:-:-:Y:4      LOP3.LUT R{a}, R{b}, 0x{i:x}, RZ, 0xc0, !PT;",
    "--:-:-:Y:4      ISETP.GE.AND P0, PT, R{a}, UR4, PT;",
    "--:-:-:Y:4  @P0 FADD R{a}, R{b}, -R{c};",
    "--:1:-:-:1      STS.64 [R{b}+0x{i:x}], R{e};",
]


def program(n: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    lines = [".kernel big", "<params>", "p, 8", "</params>", "LOOP:"]
    for _ in range(n):
        lines.append(rng.choice(TEMPLATES).format(
            a=rng.randrange(8, 200), b=rng.randrange(8, 200), c=rng.randrange(8, 200),
            d=rng.randrange(8, 200), e=rng.randrange(4, 100) * 2, q=rng.randrange(2, 50) * 4,
            i=rng.randrange(0, 4096) * 16))
    lines += ["--:-:-:Y:5  @P0 BRA LOOP;", "--:-:-:Y:5      EXIT;"]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="10000,50000,200000,1000000")
    ap.add_argument("--arch", default="sm_90")
    args = ap.parse_args()
    target = get_arch(args.arch)
    t0 = time.perf_counter()
    isa = get_isa(target.name)
    print(f"{target.name} ISA description loaded in {time.perf_counter() - t0:.2f} s (once per process)")
    print(f"{'instructions':>12} {'parse s':>8} {'resolve s':>9} {'encode s':>8} {'ELF s':>6} "
          f"{'assemble s':>10} {'CPU s':>6} {'inst/s':>8} {'inst/CPU s':>10} {'us/inst':>8} {'per inst':>8}")
    base = None
    for n in (int(s) for s in args.sizes.split(",")):
        text = program(n)
        # (a function: what the stage-by-stage run made is freed before the timed run, which
        # would otherwise assemble beside it, in twice the memory)
        stages = stage_seconds(text, target, isa)
        t0, c0 = time.perf_counter(), time.process_time()
        cubin = sassas.assemble(text, target.name, "big.sass")
        total, cpu = time.perf_counter() - t0, time.process_time() - c0
        del cubin           # (freeing it is not part of assembling)
        per, cpu_per = 1e6 * total / n, 1e6 * cpu / n
        base = base or cpu_per
        print(f"{n:12d} {stages[0]:8.2f} {stages[1]:9.2f} {stages[2]:8.2f} {stages[3]:6.2f} {total:10.2f} {cpu:6.2f} "
              f"{n / total:8.0f} {n / cpu:10.0f} {per:8.1f} {'x%.2f' % (cpu_per / base):>8}", flush=True)


def stage_seconds(text: str, target, isa) -> tuple[float, float, float, float]:
    """Wall seconds of parse (with preprocess and front end), resolve, encode, ELF."""
    gc.disable()        # as sassas.assemble does (see sassas.assembler._gc_paused)
    try:
        t0 = time.perf_counter()
        prog = sassas.parse(text, target.name, "big.sass")
        t1 = time.perf_counter()
        for k in prog.kernels:
            resolve_kernel(k, target)
        t2 = time.perf_counter()
        encoded = [encode_kernel(k, target, isa) for k in prog.kernels]
        t3 = time.perf_counter()
        elf.write_cubin(target.name, [_image(e) for e in encoded])
        t4 = time.perf_counter()
    finally:
        gc.enable()
    return t1 - t0, t2 - t1, t3 - t2, t4 - t3


if __name__ == "__main__":
    main()
