"""Assembler throughput: instructions per second of `sassas.assemble` on generated sm_90 files
of growing size, per pipeline stage, and how it scales (a table, not a timed test).

    python benchmarks/bench_assemble.py [--sizes 10000,50000,200000] [--arch sm_90]

Issue 3 asks for >= 100k instructions/s at 200k instructions and linear scaling to 1M.
"""
import argparse
import random
import time

import sassas
from sassas.arch import get_arch
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
    ap.add_argument("--sizes", default="10000,50000,200000")
    ap.add_argument("--arch", default="sm_90")
    args = ap.parse_args()
    target = get_arch(args.arch)
    isa = get_isa(target.name)
    print(f"{'instructions':>12} {'parse s':>8} {'resolve+encode s':>17} {'ELF+total s':>12} {'inst/s':>9} {'us/inst':>8}")
    base = None
    for n in (int(s) for s in args.sizes.split(",")):
        text = program(n)
        t0 = time.perf_counter()
        prog = sassas.parse(text, target.name, "big.sass")
        t1 = time.perf_counter()
        for k in prog.kernels:
            resolve_kernel(k, target)
            encode_kernel(k, target, isa)
        t2 = time.perf_counter()
        sassas.assemble(text, target.name, "big.sass")
        t3 = time.perf_counter()
        total = t3 - t2
        rate = n / total
        per = 1e6 * total / n
        base = base or per
        print(f"{n:12d} {t1 - t0:8.2f} {t2 - t1:17.2f} {total:12.2f} {rate:9.0f} {per:8.1f}"
              f"   (x{per / base:.2f} per instruction vs the smallest)", flush=True)


if __name__ == "__main__":
    main()
