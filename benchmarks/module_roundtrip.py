"""Whole-cubin `sassas disasm` -> `sassas asm` over a real-world corpus of
tests/sassas/test_realworld_corpus.py (every kernel, not the test's sample): per arch, how many
kernels come back with identical code and the module's data (global variables, module constant
banks, their symbols and relocations) equal, and how many cubins disasm refuses and why.

    python benchmarks/module_roundtrip.py [--corpus torchvision-audio] [--arch sm_80 ...]
"""
from __future__ import annotations

import argparse
import collections
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "sassas"))

import sassas
from sassas.disasm import UnsupportedCubin, disassemble
from sassas.elf import read_cubin, read_module
from sassas.errors import SassError


def main() -> int:
    import test_realworld_corpus as rw
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default="torchvision-audio", choices=list(rw.CORPORA))
    ap.add_argument("--arch", nargs="*", default=rw.ARCHS)
    args = ap.parse_args()
    by_arch = rw.cubins(args.corpus)
    failed = False
    for arch in args.arch:
        count = collections.Counter()
        notes = []
        for data in by_arch.get(arch, []):
            info = read_cubin(data)
            n = len(info.kernels)
            try:
                text = disassemble(data)
            except UnsupportedCubin as e:
                count["refused"] += n
                notes.append(f"refused ({n} kernels): {e.message[:120]}")
                continue
            try:
                again = read_cubin(sassas.assemble(text, arch).data)
            except SassError as e:
                count["assembly error"] += n
                notes.append(f"assembly error: {e.message[:120]}")
                continue
            same_module = read_module(again) == read_module(info)
            relocated = any(not r.section.endswith("debug_frame") for r in info.relocations)
            for k in info.kernels:
                ok = same_module and again.kernel(k.name).code == k.code
                count["identical" if ok else "DIFFERENT"] += 1
                count["identical, relocated module data"] += ok and relocated
        failed |= bool(count["DIFFERENT"] or count["assembly error"])
        print(f"[{arch} {args.corpus}] " + ", ".join(f"{v} {k}" for k, v in count.items()))
        for note in notes[:5]:
            print(f"    {note}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
