"""Throughput of the ISA layer alone: Isa.encode and Isa.decode on corpus instructions.

    python benchmarks/bench_isa.py [--arch sm_90] [--n 200000]

Prints a table (instructions per second); not a timed test. The instructions are the
arch's PTX corpus (compiled by ptxas, from the oracle cache), repeated to N, parsed once
up front so only the ISA layer is measured.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sassas.ast import ControlCode
from sassas.errors import SassError
from sassas.isa import get_isa
from sassas.learn import corpus, oracle
from sassas.parse import parse_instruction


def workload(arch: str, n: int):
    isa = get_isa(arch)
    words = corpus.build(arch)
    listing = oracle.disassemble(words, arch, oracle.DisasmCache(arch))
    insts, raw = [], []
    for w, d in listing.items():
        if d is None:
            continue
        inst = parse_instruction(d.text)
        inst.address, inst.control = d.address, ControlCode.from_word(w)
        try:
            isa.encode(inst)
            isa.decode(w, d.address)
        except SassError:
            continue
        insts.append(inst)
        raw.append((w, d.address))
    reps = -(-n // len(insts))
    return isa, (insts * reps)[:n], (raw * reps)[:n]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--n", type=int, default=200_000)
    args = ap.parse_args()
    isa, insts, raw = workload(args.arch, args.n)
    rows = []
    for n in sorted({args.n // 4, args.n // 2, args.n}):
        t = time.perf_counter()
        for inst in insts[:n]:
            isa.encode(inst)
        enc = n / (time.perf_counter() - t)
        t = time.perf_counter()
        for w, a in raw[:n]:
            isa.decode(w, a)
        dec = n / (time.perf_counter() - t)
        t = time.perf_counter()
        for w, a in raw[:n // 4]:
            isa.format(isa.decode(w, a))
        fmt = (n // 4) / (time.perf_counter() - t)
        rows.append((n, enc, dec, fmt))
    print(f"ISA layer, {args.arch}: instructions per second")
    print(f"{'instructions':>12} {'encode':>10} {'decode':>10} {'decode+format':>14}")
    for n, enc, dec, fmt in rows:
        print(f"{n:>12,} {enc:>10,.0f} {dec:>10,.0f} {fmt:>14,.0f}")


if __name__ == "__main__":
    main()
