"""Diagnostics in the form compilers use: ``file:line:col: error: message``, the line, a caret."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from .ast import Loc


# The same warning is given for the first few instructions of a kernel, then counted: a file
# that writes `.reuse` under every yield flag gets 20 lines, not 100 000 (and finding where
# each of the others was written would cost as much as assembling it).
WARNINGS_PER_MESSAGE = 20


@dataclass
class Diagnostic:
    severity: str          # 'error' | 'warning' | 'note'
    message: str
    loc: Optional[Loc] = None
    notes: list["Diagnostic"] = field(default_factory=list)

    def render(self) -> str:
        head = f"{self.loc}: " if self.loc else ""
        lines = [f"{head}{self.severity}: {self.message}"]
        if self.loc and self.loc.text:
            text = self.loc.text.rstrip("\n")
            lines.append("    " + text.expandtabs(4))
            col = max(self.loc.col, 1)
            pad = text[:col - 1].expandtabs(4)
            lines.append("    " + " " * len(pad) + "^")
        origin = self.loc.origin if self.loc else None
        while origin is not None:
            lines.append(f"{origin}: note: generated from here")
            if origin.text:
                lines.append("    " + origin.text.rstrip("\n").expandtabs(4))
            origin = origin.origin
        for note in self.notes:
            lines.append(note.render())
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.render()


class SassError(Exception):
    """An error in the user's input (or in what they asked for), with where it is."""

    def __init__(self, message: str, loc: Optional[Loc] = None, notes: Optional[list[Diagnostic]] = None):
        super().__init__(message)
        self.message = message
        self.loc = loc
        self.notes = notes or []

    @property
    def diagnostic(self) -> Diagnostic:
        return Diagnostic("error", self.message, self.loc, list(self.notes))

    def with_loc(self, loc: Optional[Loc]) -> "SassError":
        if self.loc is None and loc is not None:
            self.loc = loc
        return self

    def __str__(self) -> str:
        return self.diagnostic.render()


class SassErrors(SassError):
    """Several errors from one input; the first one's text is the exception's message."""

    def __init__(self, errors: list[SassError]):
        super().__init__(errors[0].message, errors[0].loc, errors[0].notes)
        self.errors = errors

    def __str__(self) -> str:
        return "\n".join(e.diagnostic.render() for e in self.errors)


def error_lines(e: SassError, tool: str) -> list[str]:
    """Each error of `e` as a command prints it: a compiler's diagnostic where it has a place,
    else one line in the tool's name (`sassas check: error: ...`)."""
    errors = e.errors if isinstance(e, SassErrors) else [e]
    # The same error at the same place once, with its count: the lines a `<code>` block or a
    # macro writes all stand at its place (256 copies of one message said nothing more).
    counts: dict[str, int] = {}
    for err in errors:
        text = err.diagnostic.render() if err.loc else f"{tool}: error: {err.message}"
        counts[text] = counts.get(text, 0) + 1
    return [text if n == 1 else f"{text}\n{tool}: note: the error above, {n} times at that place "
            f"(once for each line written there)" for text, n in counts.items()]


class Diagnostics:
    """The errors and warnings of one run. Errors are collected so that several can be
    reported at once; with ``warnings_as_errors`` a warning is recorded as an error."""

    def __init__(self, warnings_as_errors: bool = False):
        self.warnings_as_errors = warnings_as_errors
        self.errors: list[SassError] = []
        self.warnings: list[Diagnostic] = []

    def error(self, err: SassError) -> None:
        self.errors.append(err)

    def warn(self, message: str, loc: Optional[Loc] = None) -> None:
        if self.warnings_as_errors:
            self.errors.append(SassError(f"{message} [-Werror]", loc))
        else:
            self.warnings.append(Diagnostic("warning", message, loc))

    def raise_if_errors(self) -> None:
        if self.errors:
            raise self.errors[0] if len(self.errors) == 1 else SassErrors(list(self.errors))
