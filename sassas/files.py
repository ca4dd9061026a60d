"""Reading source files and writing outputs, the way every command does it: a source that is
not UTF-8 text is an error with the place of its first bad byte, and an output file appears
whole or not at all (written beside its destination, then renamed over it)."""
from __future__ import annotations

import os
import tempfile
from typing import Union

from .ast import Loc
from .errors import SassError

PathLike = Union[str, os.PathLike]


def decode_source(data: bytes, name: str) -> str:
    """`data` as UTF-8 text, or a SassError naming the first byte that is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise SassError(f"not a text file: byte 0x{data[e.start]:02x} at offset {e.start} is not UTF-8",
                        Loc(name, line, col)) from None


def read_source(path: PathLike) -> str:
    """A source file's text (OSError where it cannot be read, SassError where it is not text)."""
    with open(path, "rb") as f:
        return decode_source(f.read(), str(path))


def write_atomic(path: PathLike, data: Union[bytes, str]) -> None:
    """Write `data` to `path` so that the file is either the whole new content or untouched:
    a temporary file in the same folder, renamed over `path` once written."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise IsADirectoryError(21, "Is a directory", str(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(os.path.abspath(path)) + ".", suffix=".tmp",
                                   dir=folder)
    except OSError as e:       # name the file asked for, not the temporary one
        raise OSError(e.errno, e.strerror, str(path)) from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError) and e.filename == tmp:
            raise OSError(e.errno, e.strerror, str(path)) from None
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
