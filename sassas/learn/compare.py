"""Instruction-by-instruction comparison with NVIDIA's tools, for the tests and the benchmarks
that measure how much of real code the ISA tables reproduce (never needed to assemble).

- listing_encodings: every instruction of a `cuobjdump -sass` / `nvdisasm -hex` listing,
  encoded from its text alone, beside the word the cubin holds;
- format_comparisons: every word as nvdisasm prints it (raw mode) beside our decode + format.
"""
from __future__ import annotations

from typing import Iterator, Optional

from ..arch import get_arch
from ..ast import Instruction
from ..elf import read_cubin
from ..errors import SassError
from ..isa import get_isa
from . import oracle

# nvdisasm's raw-mode batches: large enough to amortise its start-up, small enough that one
# word it rejects costs little.
FORMAT_BATCH = 10000


def normal_text(text: str) -> str:
    """Instruction text with whitespace normalised (`R1 , R2` and `R1, R2` compare equal)."""
    return " ".join(text.replace(" ,", ",").split())


def listing_encodings(listing: str, arch: str, original: bytes
                      ) -> Iterator[tuple[Instruction, int, Optional[int], Optional[SassError]]]:
    """(instruction, the cubin's word, our encoding or None, the error or None) for each
    instruction of `listing`, a listing of the cubin `original`."""
    from ..assembler import parse
    from ..resolve import resolve_kernel
    target = get_arch(arch)
    isa = get_isa(arch)
    program = parse(listing, target.name, "listing")
    info = read_cubin(original)
    for kernel in program.kernels:
        resolve_kernel(kernel, target)
        code = info.kernel(kernel.name).code
        for inst in kernel.instructions:
            want = int.from_bytes(code[inst.address:inst.address + 16], "little")
            try:
                yield inst, want, isa.encode(inst), None
            except SassError as e:
                yield inst, want, None, e


def format_comparisons(words: list[int], arch: str) -> Iterator[tuple[oracle.Disassembled, str]]:
    """(nvdisasm's reading of the word, our decode + format of it, or `<error message>`) for
    each word nvdisasm prints text for."""
    isa = get_isa(arch)
    for start in range(0, len(words), FORMAT_BATCH):
        listing, _bad, _fatal = oracle._run_raw(words[start:start + FORMAT_BATCH], arch)
        for d in listing:
            if not d.text:
                continue
            try:
                mine = isa.format(isa.decode(d.word, d.address))
            except SassError as e:
                mine = f"<{e.message}>"
            yield d, mine
