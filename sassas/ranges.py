"""A large kernel assembled in ranges of its lines at once (`sassas asm -t N`, one a CPU core
by default): each range read, bound, resolved and encoded by a process of its own, forked from
the assembler's after preprocessing, and the code joined. The cubin, the warnings and the
errors are those of one process:

- each process parses its lines alone (sassas.parse.line_range_items: lines are read one by
  one, so a range gives the items the whole text gives there), then tells the first process
  how many instructions it holds and its labels; the first process, which holds the kernel's
  directives, gives back every label's address, the directives and where the range starts;
- each then binds, resolves, encodes and checks its instructions as the whole kernel's, and the
  first joins the code, the register count, the EXITs and the warnings (sassas.encode.join_ranges);
  the barrier-raise warning of the pair of instructions at a cut is found by the process
  before it (it reads the next range's first instruction as well);
- where the file is not one kernel of plain instructions and labels past its first range, or
  any process finds an error or a warning that is not the encoder's or the barrier-raise
  check's, or a process cannot be forked or dies, None is returned and the assembler does the
  whole in one process, as without ranges (so the diagnostics are exactly its).

The ranges are of MIN_LINES_A_RANGE lines at least: below that, forking and the first parse
of each range's shapes cost more than they save. A forked child shares the parent's memory
until either writes a page; only the small messages and the range's encoded code travel
(pickled, through pipes)."""
from __future__ import annotations

import os
import pickle
import signal
import threading
from typing import Optional

from .arch import Arch
from .ast import Instruction, Kernel, Label, Program
from .encode import EncodedKernel, EncodedRange, encode_range, exit_offsets_and_barriers, join_ranges
from .errors import Diagnostics, SassError
from .frontend import check_kernel_end, finish_program, has_exit
from .hazards import barrier_raise_warnings
from .module import check_module
from .parse import group_items, line_range_items, split_line
from .parse_tree import Lines
from .resolve import INSTRUCTION_BYTES, assign_addresses, resolve_kernel

MIN_LINES_A_RANGE = 50_000
# How far past a cut the process before it looks for the next range's first instruction.
_LINES_TO_NEXT_INSTRUCTION = 64


class _NotInRanges(Exception):
    """The file is assembled in one process (see the module's docstring)."""


def assemble_in_ranges(text: str, lines: Lines, target: Arch, isa, workers: int, *, filename: str,
                       kernel_name: Optional[str], dialect: str, dialect_forced: bool
                       ) -> Optional[tuple[Program, EncodedKernel, Diagnostics]]:
    """(the program of the first range's items, the encoded kernel, the diagnostics), or None
    where the text is assembled in one process. `text`: the preprocessed text, `lines` its
    lines; `workers`: the processes to use at most."""
    n = len(lines.lines)
    parts = min(workers, n // MIN_LINES_A_RANGE)
    if parts < 2 or not hasattr(os, "fork") or isa.descriptor_opcodes:
        return None            # (the hidden descriptor's register follows the code before it)
    if text.count(".kernel") + text.count(".func") > 1:
        return None            # (likely several functions: not tried)
    cuts = [0]
    for k in range(1, parts):
        cut = split_line(lines, n * k // parts)
        if cut <= cuts[-1] or cut >= n:
            return None
        cuts.append(cut)
    cuts.append(n)
    setting = (target, isa, filename, kernel_name, dialect, dialect_forced)
    children = []
    done = None
    try:
        for k in range(1, parts):
            child = _fork(lines, cuts[k], cuts[k + 1], cuts[k + 2] if k + 2 <= parts else None, setting)
            if child is None:
                return None
            children.append(child)
        done = _first_range(lines, cuts, children, setting)
        return done
    except Exception:
        # (_NotInRanges; or an error of the first range, which one process reports as it
        # would: after the front end's errors of the whole file, which another range may hold)
        return None
    finally:
        for child in children:
            child.end(abandoned=done is None)


class _Child:
    """A forked process and its two pipes: `reader` from it, `writer` to it."""

    def __init__(self, pid: int, reader, writer):
        self.pid, self.reader, self.writer = pid, reader, writer

    def receive(self):
        try:
            message = pickle.load(self.reader)
        except Exception:
            raise _NotInRanges from None
        if message is None:
            raise _NotInRanges
        return message

    def send(self, message) -> None:
        try:
            pickle.dump(message, self.writer, protocol=pickle.HIGHEST_PROTOCOL)
            self.writer.flush()
        except Exception:
            raise _NotInRanges from None

    def end(self, abandoned: bool = False) -> None:
        """Close the pipes (a child still waiting for its context then ends) and reap it: by a
        thread of its own where it has not ended yet (the kernel takes a tenth of a second to
        free a large child's memory, which the cubin need not wait for). `abandoned`: the file
        is assembled in one process instead, and a child still at work is stopped (its range
        would take a core from that process until it ended)."""
        if abandoned:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass
        for f in (self.writer, self.reader):
            try:
                f.close()
            except OSError:
                pass
        if os.waitpid(self.pid, os.WNOHANG)[0] == 0:
            reaper = threading.Thread(target=os.waitpid, args=(self.pid, 0), daemon=True)
            reaper.start()
            _reapers.append(reaper)


_reapers: list[threading.Thread] = []


def wait_for_children() -> None:
    """Wait until every child has ended and is reaped (for a test that counts processes;
    `python -m sassas` ends without waiting)."""
    while _reapers:
        _reapers.pop().join()


def _fork(lines: Lines, start: int, stop: int, following: Optional[int], setting: tuple) -> Optional[_Child]:
    try:
        up_read, up_write = os.pipe()
        down_read, down_write = os.pipe()
    except OSError:
        return None
    try:
        pid = os.fork()
    except OSError:
        for fd in (up_read, up_write, down_read, down_write):
            os.close(fd)
        return None
    if pid == 0:                                            # the child
        status = 1
        try:
            os.close(up_read)
            os.close(down_write)
            with os.fdopen(up_write, "wb") as to_parent, os.fdopen(down_read, "rb") as from_parent:
                _child_range(lines, start, stop, following, setting, to_parent, from_parent)
            status = 0
        finally:
            os._exit(status)
    os.close(up_write)
    os.close(down_read)
    return _Child(pid, os.fdopen(up_read, "rb"), os.fdopen(down_write, "wb"))


def _summary(items: Optional[list]) -> Optional[tuple[int, list[tuple[str, int]]]]:
    """(instructions, [(label, index of the instruction it names)]) of a range past the first
    one, or None where it holds a directive (or has to be parsed as a whole text)."""
    if items is None:
        return None
    count, labels = 0, []
    for item in items:
        if item.__class__ is Instruction:
            if item.control is None:
                return None         # (the scheduler looks at the whole kernel)
            count += 1
        elif item.__class__ is Label:
            labels.append((item.name, count))
        else:
            return None
    return count, labels


def _child_range(lines: Lines, start: int, stop: int, following: Optional[int], setting: tuple,
                 to_parent, from_parent) -> None:
    """The work of the process of lines start+1..stop; every message to the parent is None where
    the range cannot be done alone."""
    def send(message) -> None:
        pickle.dump(message, to_parent, protocol=pickle.HIGHEST_PROTOCOL)
        to_parent.flush()

    items = line_range_items(lines, start, stop)
    summary = _summary(items)
    send(summary)
    if summary is None:
        return
    context = pickle.load(from_parent)
    if context is None:
        return
    directives, labels, first_index = context
    target, isa, filename, kernel_name, dialect, dialect_forced = setting
    diags = Diagnostics()
    try:
        program = group_items(directives + items, target.name, filename, kernel_name, diags, target.full_name)
        result = _finish_range(program, labels, first_index, diags, setting,
                               _first_instruction(lines, stop, following))
    except Exception:
        result = None
    send(result)


def _finish_range(program: Program, labels: dict[str, int], first_index: int, diags: Diagnostics, setting: tuple,
                  next_first: Optional[Instruction]) -> Optional[tuple]:
    """Bind, resolve, encode and check the range's instructions (the program's one kernel, with
    the directives of the first range): (its EncodedRange, barrier-raise warnings, EXIT
    addresses, barrier count, whether it has an EXIT), or None on any diagnostic."""
    target, isa, _filename, _kernel_name, dialect, dialect_forced = setting
    if len(program.kernels) != 1:
        return None
    kernel = program.kernels[0]
    if kernel.declarations.autos:
        return None
    instructions = kernel.instructions
    for index, inst in enumerate(instructions, first_index):
        inst.address = INSTRUCTION_BYTES * index
    finish_program(program, diags, dialect=dialect, dialect_forced=dialect_forced,
                   labels_elsewhere=frozenset(labels), whole=False)
    if diags.errors or diags.warnings:
        return None
    resolve_kernel(kernel, target, labels=labels)
    # (every instruction has its control code: _summary said so of the range's items)
    part = encode_range(instructions, target, isa, kernel.registers is None, first_index)
    if part.errors:
        return None
    raised = barrier_raise_warnings(kernel, target.name)
    if next_first is not None and instructions:
        raised += barrier_raise_warnings(Kernel(kernel.name, body=[instructions[-1], next_first]), target.name)
    return (part, raised, *exit_offsets_and_barriers(instructions), has_exit(instructions))


def _first_instruction(lines: Lines, start: int, stop: Optional[int]) -> Optional[Instruction]:
    """The first instruction of the range of lines from `start` (as parsed alone: its control
    code and where it stands, what the barrier-raise check reads of it), or None where there
    is no next range; raises _NotInRanges where none is found near the cut."""
    if stop is None:
        return None
    end = min(stop, start + _LINES_TO_NEXT_INSTRUCTION)
    items = line_range_items(lines, start, split_line(lines, end) if end < stop else stop)
    for item in items or ():
        if item.__class__ is Instruction:
            return item
    raise _NotInRanges


def _first_range(lines: Lines, cuts: list[int], children: list[_Child], setting: tuple
                 ) -> tuple[Program, EncodedKernel, Diagnostics]:
    target, isa, filename, kernel_name, dialect, dialect_forced = setting
    items = line_range_items(lines, 0, cuts[1])
    if items is None:
        raise _NotInRanges
    # The other ranges wait for their context (every label's address, where each starts, the
    # directives): sent before this range's own work, from its items alone, and checked
    # against what assign_addresses finds below.
    types = list(map(type, items))
    last_directive = len(types) - 1 - types[::-1].index(tuple) if tuple in types else -1
    # (what the kernel declares; a `.raw` belongs to an instruction of this range)
    directives = [item for item in items[:last_directive + 1] if item.__class__ is tuple and item[0] != "raw"]
    own = _summary([item for item in items if item.__class__ is not tuple])
    if own is None or Instruction not in types[last_directive + 1:]:
        # (an instruction without a control code, which the scheduler gives over the whole
        # kernel; or no instruction after the last directive: `.raw` names the one after it)
        raise _NotInRanges
    labels: dict[str, int] = {}
    for name, index in own[1]:
        if name in labels:
            raise _NotInRanges      # (a label defined twice: the one process says where)
        labels[name] = INSTRUCTION_BYTES * index
    own_labels = dict(labels)
    summaries = [child.receive() for child in children]
    first_index = own[0]
    firsts = []
    for count, child_labels in summaries:
        firsts.append(first_index)
        for name, index in child_labels:
            if name in labels:
                raise _NotInRanges
            labels[name] = INSTRUCTION_BYTES * (first_index + index)
        first_index += count
    total = first_index
    for child, first in zip(children, firsts):
        child.send((directives, labels, first))

    diags = Diagnostics()
    program = group_items(items, target.name, filename, kernel_name, diags, target.full_name)
    # One kernel (`.kernel` would start another), without errors or names for the allocator.
    if len(program.kernels) != 1 or diags.errors or program.kernels[0].declarations.autos:
        raise _NotInRanges
    kernel = program.kernels[0]
    try:
        if assign_addresses(kernel) != own_labels or len(kernel.instructions) != own[0]:
            raise _NotInRanges
    except SassError:
        raise _NotInRanges from None
    elsewhere = frozenset(labels).difference(own_labels)
    check_module(program, diags)
    finish_program(program, diags, dialect=dialect, dialect_forced=dialect_forced, labels_elsewhere=elsewhere,
                   whole=False)
    if diags.errors:
        raise _NotInRanges
    resolve_kernel(kernel, target, labels=labels)
    instructions = kernel.instructions
    part = encode_range(instructions, target, isa, kernel.registers is None, 0)
    if part.errors:
        raise _NotInRanges
    raised = barrier_raise_warnings(kernel, target.name)
    following = _first_instruction(lines, cuts[1], cuts[2])
    if instructions:
        raised += barrier_raise_warnings(Kernel(kernel.name, body=[instructions[-1], following]), target.name)
    exits, barriers = exit_offsets_and_barriers(instructions)
    parts: list[EncodedRange] = [part]
    exited = has_exit(instructions)
    for child in children:
        child_part, child_raised, child_exits, child_barriers, child_exited = child.receive()
        parts.append(child_part)
        raised += child_raised
        exits += child_exits
        barriers = max(barriers, child_barriers)
        exited = exited or child_exited
    check_kernel_end(kernel, total, exited, diags)
    encoded = join_ranges(kernel, parts, exits, barriers)
    for message, loc in encoded.warnings:
        diags.warn(message, loc)
    for message, loc in raised.warnings(kernel.name):
        diags.warn(message, loc)
    return program, encoded, diags
