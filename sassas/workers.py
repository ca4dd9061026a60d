"""Work over the ranges of a long list in forked processes (`sassas asm --threads N`): each
range's result is computed by a child process of the one that asks, pickled back through a
pipe, and the results come back in the order of the ranges. What a child cannot give (it could
not be forked, it failed, it died) is computed in the asking process: the results are always
those of the work done in one process, only sooner where the machine has cores to spare.

A forked child shares its parent's memory until either writes a page (copy on write): it reads
the instructions where they are, and only its result travels. It ends with os._exit, so that
nothing of the parent (buffered output, exit handlers) runs twice."""
from __future__ import annotations

import os
import pickle
from typing import Callable, TypeVar

T = TypeVar("T")


def usable_cores() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def ranges(n: int, parts: int) -> list[tuple[int, int]]:
    """range(n) cut into `parts` consecutive (start, stop) ranges of near-equal length."""
    parts = max(1, min(parts, n))
    return [(n * k // parts, n * (k + 1) // parts) for k in range(parts)]


def map_ranges(n: int, workers: int, work: Callable[[int, int], T]) -> list[T]:
    """[work(start, stop) for each of `workers` ranges covering range(n)], in order: the first
    range in this process, the others in forked children at the same time."""
    parts = ranges(n, workers)
    if len(parts) == 1 or not hasattr(os, "fork"):
        return [work(start, stop) for start, stop in parts]
    children = []           # (pid or None, read end of its pipe or None)
    for start, stop in parts[1:]:
        children.append(_fork(work, start, stop))
    results = []
    try:
        results.append(work(*parts[0]))
    finally:
        # (every child is read and waited for, also when the work here raised)
        outputs = [_collect(pid, fd) for pid, fd in children]
    for (start, stop), output in zip(parts[1:], outputs):
        results.append(pickle.loads(output) if output is not None else work(start, stop))
    return results


def _fork(work: Callable[[int, int], T], start: int, stop: int) -> tuple:
    try:
        read, write = os.pipe()
    except OSError:
        return None, None
    try:
        pid = os.fork()
    except OSError:
        os.close(read)
        os.close(write)
        return None, None
    if pid == 0:                                    # the child
        status = 1
        try:
            os.close(read)
            data = pickle.dumps(work(start, stop), protocol=pickle.HIGHEST_PROTOCOL)
            with os.fdopen(write, "wb") as out:
                out.write(data)
            status = 0
        finally:
            os._exit(status)
    os.close(write)
    return pid, read


def _collect(pid, read) -> bytes | None:
    """A child's pickled result, or None where it gave none."""
    if pid is None:
        return None
    with os.fdopen(read, "rb") as f:
        data = f.read()
    _, status = os.waitpid(pid, 0)
    return data if os.waitstatus_to_exitcode(status) == 0 and data else None
