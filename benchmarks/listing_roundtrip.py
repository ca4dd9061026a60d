"""Whole-cubin listings through `sassas asm` over a real-world corpus of
tests/sassas/test_realworld_corpus.py (every cubin, not the test's sample): per arch and
listing tool (`nvdisasm -hex`, `cuobjdump -sass`), how many functions of the reassembled cubins
have the code of the original, and how many listings do not assemble and why.

    python benchmarks/listing_roundtrip.py [--corpus bitsandbytes] [--arch sm_100 ...] [--tool nvdisasm]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "sassas"))

import sassas
from sassas.elf import read_cubin
from sassas.errors import SassError
from sassas.learn import oracle

LISTING_COMMANDS = {"nvdisasm": ["-hex"], "cuobjdump": ["-sass"]}


def main() -> int:
    import test_realworld_corpus as rw
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default="bitsandbytes", choices=list(rw.CORPORA))
    ap.add_argument("--arch", nargs="*", default=rw.ARCHS)
    ap.add_argument("--tool", nargs="*", default=list(LISTING_COMMANDS), choices=list(LISTING_COMMANDS))
    args = ap.parse_args()
    by_arch = rw.cubins(args.corpus)
    failed = False
    for arch in args.arch:
        for tool in args.tool:
            try:
                exe = str(oracle.find_tool(tool, arch))
            except oracle.OracleMissing as e:
                print(f"[{arch} {tool}] skipped: {e}")
                continue
            same = total = 0
            notes = []
            with tempfile.TemporaryDirectory() as tmp:
                for n, data in enumerate(by_arch.get(arch, [])):
                    path = os.path.join(tmp, f"{n}.cubin")
                    with open(path, "wb") as f:
                        f.write(data)
                    info = read_cubin(data)
                    functions = info.kernels + info.functions
                    total += len(functions)
                    listing = subprocess.run([exe, *LISTING_COMMANDS[tool], path], capture_output=True,
                                             text=True, check=True).stdout
                    try:
                        again = read_cubin(sassas.assemble(listing, arch, filename=f"{n}.{tool}").data)
                    except SassError as e:
                        notes.append(f"cubin {n} does not assemble: {e.message.splitlines()[0][:140]}")
                        continue
                    rebuilt = {k.name: k.code for k in again.kernels + again.functions}
                    for k in functions:
                        if rebuilt.get(k.name) == k.code:
                            same += 1
                        else:
                            notes.append(f"cubin {n}: {k.name[:80]} differs")
            failed |= same != total
            print(f"[{arch} {args.corpus} {tool}] {same}/{total} functions identical "
                  f"({len(by_arch.get(arch, []))} cubins)")
            for note in notes[:5]:
                print(f"    {note}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
