"""What the tests measure, reported once at the end of the run (not in the middle of pytest's
progress line): the `report` fixture collects lines, shown in a "sassas measurements" section
of the terminal summary, with the seed of the random tests."""
from __future__ import annotations

import sys

import pytest

_LINES: list[str] = []


@pytest.fixture
def report():
    """report(line): a measurement to show in the run's summary."""
    return lambda line: _LINES.append(line.strip("\n"))


def pytest_terminal_summary(terminalreporter):
    fuzz = sys.modules.get("_fuzz")
    seeds = fuzz.SEEN if fuzz is not None else []
    if not _LINES and not seeds:
        return
    terminalreporter.section("sassas measurements")
    for seed in seeds:
        terminalreporter.write_line(f"random tests ran with {fuzz.SEED_ENV}={seed} (set it to replay them)")
    for line in _LINES:
        terminalreporter.write_line(line)
