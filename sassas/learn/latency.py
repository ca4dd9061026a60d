"""The latency table of an arch learned from ptxas's own code (sassas/data/latency.toml).

    python -m sassas.learn.latency --arch sm_120 [--write] [--sample N]

Every kernel of the learning corpus (sassas.learn.corpus.ptx) is compiled by ptxas and listed
by cuobjdump (both cached); ptxas's code is hazard-free, so:
- a latency class whose results ptxas gives a write barrier (most of its instructions that
  write a register) is variable-latency on the arch, one whose results it never protects so
  is fixed-latency;
- the smallest distance at which ptxas reads a fixed-latency result of one class in another
  (sassas.hazards.calibrate) bounds that pair's latency from above: where the table asks for
  more, the pair gets ptxas's figure.
The arch's own section of latency.toml (`[arch.sm_XX]`, `.class`, `.pair`) is written from
that over its base arch's table, every figure with its evidence; other archs are left as they
are. Without --write it prints the section.
"""
from __future__ import annotations

import argparse
import collections
import random
import re
import sys
from pathlib import Path
from typing import Iterator, Optional

from ..ast import NO_BARRIER, Kernel
from ..hazards import calibrate
from ..listing import read_listing
from ..semantics import SemanticsError, _load, arch_timing, effects
from . import oracle
from .corpus import ptx as corpus_ptx

LATENCY_TOML = Path(__file__).resolve().parents[1] / "data" / "latency.toml"
# A class is variable on an arch where ptxas gives at least this share of its register-writing
# instructions a write barrier (the rest: results nobody reads, or read after a wait on a
# later instruction of the same queue), fixed where it gives none.
VARIABLE_SHARE = 0.5


def corpus_listings(arch: str, sample: Optional[int] = None, seed: int = 0) -> Iterator[tuple[str, str]]:
    """(kernel name, `cuobjdump -sass` text) of the learning corpus compiled by ptxas for
    `arch` (the arch-specific target where a family needs it); `sample`: that many kernels,
    drawn with `seed`."""
    kernels = list(corpus_ptx.kernels(arch))
    if sample is not None and sample < len(kernels):
        kernels = random.Random(seed).sample(kernels, sample)
    for name, ptx in kernels:
        target = re.search(r"^\.target (\S+)", ptx, re.M)
        cubin = oracle.compile_ptx(ptx, target.group(1) if target else arch)
        if cubin is not None:
            yield name, oracle.sass_listing(cubin, arch)


def corpus_kernels(arch: str, sample: Optional[int] = None) -> list[Kernel]:
    kernels = []
    for name, listing in corpus_listings(arch, sample):
        kernels += read_listing(listing, f"{name}.lst")[0]
    return kernels


def barrier_shares(kernels: list[Kernel]) -> dict[str, tuple[int, int, collections.Counter]]:
    """Per latency class: (instructions writing a register that set a write barrier, all
    instructions writing a register, their mnemonics)."""
    out: dict[str, list] = {}
    for kernel in kernels:
        for inst in kernel.instructions:
            try:
                eff = effects(inst)
            except SemanticsError:
                continue
            if not any(reg[0] in ("R", "UR", "P", "UP") for reg in eff.writes):
                continue
            entry = out.setdefault(eff.cls, [0, 0, collections.Counter()])
            entry[0] += inst.control is not None and inst.control.write_barrier != NO_BARRIER
            entry[1] += 1
            entry[2][inst.opcode] += 1
    return {cls: (a, b, c) for cls, (a, b, c) in out.items()}


def _names(counter: collections.Counter) -> str:
    return "/".join(name for name, _ in counter.most_common(4))


def learn(arch: str, kernels: list[Kernel], base: str) -> tuple[dict[str, str], dict[str, str]]:
    """(class overrides, pair overrides) over `base`'s table, as TOML inline tables."""
    base_timing = arch_timing(base)
    classes: dict[str, str] = {}
    for cls, (barriers, total, names) in sorted(barrier_shares(kernels).items()):
        try:
            variable = base_timing.is_variable(cls)
        except SemanticsError:
            continue
        if not variable and barriers >= VARIABLE_SHARE * total:
            classes[cls] = (f'{{ variable = true, source = "ptxas ({barriers} of {total} {_names(names)} '
                            f'results take a write barrier on {arch})" }}')
        elif variable and barriers == 0 and total >= 2:
            print(f"note: {cls} ({_names(names)}) never takes a write barrier on {arch} "
                  f"({total} instructions); left variable", file=sys.stderr)
    return classes, {}


def learned_pairs(arch: str, kernels: list[Kernel]) -> dict[str, str]:
    """Pairs where the arch's current table asks for more cycles than ptxas leaves."""
    timing = arch_timing(arch)
    pairs = {}
    for (producer, consumer), (cycles, p, c) in sorted(calibrate(kernels, arch).items()):
        if timing.fixed_latency(producer, consumer) > cycles:
            pairs[f"{producer} -> {consumer}"] = (f'{{ cycles = {cycles}, source = "ptxas ({p} -> {c} '
                                                  f'at {cycles} cycle{"s" * (cycles != 1)} on {arch})" }}')
    return pairs


def section(arch: str, base: str, classes: dict[str, str], pairs: dict[str, str], kernels: int) -> str:
    lines = [f"# {arch}: learned by `python -m sassas.learn.latency --arch {arch} --write` from ptxas's",
             f"# code for the learning corpus ({kernels} kernels) over {base}'s table; no {arch} GPU measured.",
             f"[arch.{arch}]", f'base = "{base}"']
    if classes:
        lines += [f"[arch.{arch}.class]"] + [f"{k} = {v}" for k, v in sorted(classes.items())]
    if pairs:
        lines += [f"[arch.{arch}.pair]"] + [f'"{k}" = {v}' for k, v in sorted(pairs.items())]
    return "\n".join(lines) + "\n"


def replace_section(text: str, arch: str, new: str) -> str:
    """`text` (latency.toml) with the arch's tables, and the comment lines right above them,
    replaced by `new`."""
    lines = text.splitlines(keepends=True)
    header = re.compile(r"^\[arch\.(sm_\w+?)(\.\w+)?\]")
    start = end = None
    for i, line in enumerate(lines):
        m = header.match(line)
        if m and m.group(1) == arch and start is None:
            start = i
        elif m and m.group(1) != arch and start is not None:
            end = i
            break
    if start is None:
        return text.rstrip("\n") + "\n\n" + new
    while start > 0 and lines[start - 1].startswith("#"):
        start -= 1
    end = len(lines) if end is None else end
    tail = lines[end:]
    while end > start and lines[end - 1].startswith("#"):     # comments of the next section
        end -= 1
        tail.insert(0, lines[end])
    return "".join(lines[:start]) + new + "\n" + "".join(tail)


def _write(text: str) -> None:
    LATENCY_TOML.write_text(text)
    _load.cache_clear()
    arch_timing.cache_clear()


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sassas.learn.latency", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arch", required=True)
    parser.add_argument("--write", action="store_true", help="write the arch's section of latency.toml")
    parser.add_argument("--sample", type=int, help="learn from this many corpus kernels only")
    args = parser.parse_args(argv)
    arch = args.arch
    original = LATENCY_TOML.read_text()
    base = _load("latency.toml")["arch"].get(arch, {}).get("base")
    if base is None:
        parser.error(f"latency.toml has no base arch for {arch}: add `[arch.{arch}]` with `base = ...`")
    kernels = corpus_kernels(arch, args.sample)
    classes, _ = learn(arch, kernels, base)
    # The pairs are found against the table with the learned classes (a class turned variable
    # has no pairs), and again until nothing changes (a pair lowered can show a closer read).
    pairs: dict[str, str] = {}
    try:
        for _round in range(4):
            _write(replace_section(original, arch, section(arch, base, classes, pairs, len(kernels))))
            more = learned_pairs(arch, kernels)
            if not more:
                break
            pairs.update(more)
        text = replace_section(original, arch, section(arch, base, classes, pairs, len(kernels)))
    finally:
        _write(original)
    if args.write:
        _write(text)
        print(f"wrote {LATENCY_TOML}: {arch}: {len(classes)} classes, {len(pairs)} pairs")
    else:
        print(section(arch, base, classes, pairs, len(kernels)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
