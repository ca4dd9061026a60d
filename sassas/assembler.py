"""The pipeline, stage by stage: preprocess -> parse -> front end (and the module data's check) ->
resolve -> schedule (the control codes the source leaves out) -> yield strategy -> encode -> ELF."""
from __future__ import annotations

import contextlib
import functools
import gc
import os
from dataclasses import dataclass, field
from typing import Optional, Union

from . import elf
from .arch import get_arch
from .ast import Program
from .dialect import DIALECTS, detect_dialect
from .encode import EncodedKernel, encode_kernel
from .errors import Diagnostic, Diagnostics
from .files import read_source, write_atomic
from .frontend import finish_program
from .hazards import barrier_raise_warnings
from .isa import get_isa
from .module import build_module, check_module
from .parse import Lines, parse_program
from .preprocess import preprocess
from .ranges import assemble_in_ranges
from .resolve import resolve_kernel
from .schedule import apply_yield_strategy, schedule_kernel


@dataclass
class Cubin:
    """An assembled cubin: its bytes, the arch, and the kernels in it."""
    data: bytes
    arch: str
    kernel_names: list[str]
    program: Optional[Program] = None
    warnings: list[Diagnostic] = field(default_factory=list)
    # What was built besides `program` (assembled in ranges: the first range's), kept with the
    # cubin: freeing it is then the caller's choice (`python -m sassas` ends without it).
    built: object = field(default=None, repr=False, compare=False)

    def save(self, path: Union[str, os.PathLike]) -> None:
        """Write the cubin: the whole file or, on an error, none (see sassas.files.write_atomic)."""
        write_atomic(path, self.data)

    def __bytes__(self) -> bytes:
        return self.data

    def __len__(self) -> int:
        return len(self.data)


def _gc_paused(fn):
    """Run `fn` with the cyclic garbage collector paused. The pipeline makes several small
    objects per instruction and no reference cycles; with the collector on, its passes over
    the growing heap took two thirds of the parse time of 50k instructions, and more per
    instruction the larger the file. Reference counting still frees everything as usual."""
    @functools.wraps(fn)
    def paused(*args, **kwargs):
        with contextlib.ExitStack() as stack:
            if gc.isenabled():
                gc.disable()
                stack.callback(gc.enable)
            return fn(*args, **kwargs)
    return paused


@_gc_paused
def parse(text: str, arch: str = "sm_90", filename: str = "<input>", include_dirs=(),
          kernel_name: Optional[str] = None, *, allow_exec: bool = True, auto_reuse: bool = False,
          warnings_as_errors: bool = False, diagnostics: Optional[Diagnostics] = None,
          dialect: Optional[str] = None) -> Program:
    """Preprocess and parse source into a Program, through the front end: register, constant
    and shared-memory names bound, the module data checked, labels and parameters not yet
    resolved.

    allow_exec=False refuses inline Python (`<code>`, `{expr}`, `.include "x.py"`);
    auto_reuse sets `.reuse` flags where safe; warnings go to `diagnostics` (if given) and,
    with warnings_as_errors, are raised as errors. dialect ('turingas' or 'nvdisasm') forces
    whose meaning a spelling has where the two differ; None finds it from the file
    (:mod:`sassas.dialect`)."""
    target = get_arch(arch)
    diags = diagnostics if diagnostics is not None else Diagnostics(warnings_as_errors)
    diags.warnings_as_errors = diags.warnings_as_errors or warnings_as_errors
    pre, lines = _preprocessed(text, filename, include_dirs, allow_exec, dialect, target.name)
    return _parse_preprocessed(pre, lines, text, target, filename, kernel_name, auto_reuse, diags, dialect)


def _preprocessed(text: str, filename: str, include_dirs, allow_exec: bool, dialect: Optional[str], arch: str):
    if dialect is not None and dialect not in DIALECTS:
        raise ValueError(f"dialect must be one of {', '.join(DIALECTS)}, not {dialect!r}")
    pre = preprocess(text, filename, tuple(include_dirs), allow_exec=allow_exec, arch=arch)
    return pre, Lines(pre.text, filename, pre.origins, pre.sources, pre.lines)


def _parse_preprocessed(pre, lines: Lines, text: str, target, filename: str, kernel_name: Optional[str],
                        auto_reuse: bool, diags: Diagnostics, dialect: Optional[str]) -> Program:
    program = parse_program(pre.text, target.name, filename, lines, default_kernel=kernel_name,
                            diagnostics=diags, listing=pre.listing, target=target.full_name)
    check_module(program, diags)
    finish_program(program, diags, auto_reuse=auto_reuse, dialect=dialect or detect_dialect(text, pre.listing),
                   dialect_forced=dialect is not None)
    diags.raise_if_errors()
    return program


@_gc_paused
def assemble(text: str, arch: str = "sm_90", filename: str = "<input>", *, include_dirs=(),
             kernel_name: Optional[str] = None, allow_exec: bool = True, auto_reuse: bool = False,
             warnings_as_errors: bool = False, yield_strategy: Optional[str] = None,
             dialect: Optional[str] = None, threads: int = 1) -> Cubin:
    """Assemble SASS source text into a cubin for `arch`.

    Instructions written without a control code are scheduled automatically
    (:mod:`sassas.schedule`). ``yield_strategy`` ('natural', 'every:N' or N) then sets the
    yield flags of every instruction (see :func:`sassas.schedule.apply_yield_strategy`).
    Raises :class:`sassas.SassError` (with file:line:col) for any error in the input; the
    warnings are in ``Cubin.warnings``. See :func:`parse` for the options. ``threads`` > 1
    assembles a large kernel in up to that many processes, forked from this one, each a range
    of its lines (:mod:`sassas.ranges`; ``Cubin.program`` is then None), or where it cannot,
    encodes a large kernel in that many (the cubin, errors and warnings are the same: `sassas
    asm -t N`); 1 keeps to this process.
    """
    target = get_arch(arch)
    diags = Diagnostics(warnings_as_errors)
    pre, lines = _preprocessed(text, filename, include_dirs, allow_exec, dialect, target.name)
    isa = get_isa(target.name)
    if threads > 1 and yield_strategy is None and not auto_reuse and not warnings_as_errors:
        done = assemble_in_ranges(pre.text, lines, target, isa, threads, filename=filename, kernel_name=kernel_name,
                                  dialect=dialect or detect_dialect(text, pre.listing),
                                  dialect_forced=dialect is not None)
        if done is not None:
            program, encoded, diags = done
            data = elf.write_cubin(target, [_image(encoded)], module=build_module(program))
            return Cubin(data=data, arch=target.full_name, kernel_names=[k.name for k in program.kernels],
                         warnings=diags.warnings, built=(program, lines))
    program = _parse_preprocessed(pre, lines, text, target, filename, kernel_name, auto_reuse, diags, dialect)
    images = []
    for kernel in program.kernels:
        resolve_kernel(kernel, target)
        schedule_kernel(kernel, target)        # (instructions without a control code get one)
        if yield_strategy is not None:
            apply_yield_strategy(kernel, yield_strategy)
        encoded = encode_kernel(kernel, target, isa, threads)
        for message, loc in encoded.warnings:
            diags.warn(message, loc)
        for message, loc in barrier_raise_warnings(kernel, target.name).warnings(kernel.name):
            diags.warn(message, loc)
        images.append(_image(encoded))
    diags.raise_if_errors()
    data = elf.write_cubin(target, images, module=build_module(program))
    return Cubin(data=data, arch=target.full_name, kernel_names=[k.name for k in program.kernels], program=program,
                 warnings=diags.warnings)


def assemble_file(path: Union[str, os.PathLike], arch: str = "sm_90", **kw) -> Cubin:
    return assemble(read_source(path), arch, filename=str(path), **kw)


def _image(enc: EncodedKernel):
    k = enc.kernel
    return elf.KernelImage(
        name=k.name, code=enc.code,
        params=[elf.ParamInfo(offset=p.offset, size=p.size * p.count) for p in k.params],
        registers=enc.registers, shared_bytes=k.shared_bytes, max_threads=k.max_threads,
        min_blocks=k.min_blocks, exit_offsets=enc.exit_offsets, barriers=enc.barriers,
        constant_banks={b: bytes(d) for b, d in k.attributes.get("constant_banks", {}).items()},
        relocations=enc.relocations, entry=k.entry)
