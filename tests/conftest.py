"""What the tests measure, reported once at the end of the run (not in the middle of pytest's
progress line): the `report` fixture collects lines, shown in a "sassas measurements" section
of the terminal summary, with the seed of the random tests.

The tests run on every core (pytest-xdist, `-n auto` in pyproject.toml; `-n 0` runs them in one
process). The random tests' seed is drawn once, before the workers start, and handed to them in
$SASSAS_FUZZ_SEED, so that one seed, shown in the header and the summary, replays the whole run.
A measurement travels back to the process that prints the summary on its test's report."""
from __future__ import annotations

import os
import random

import pytest

SEED_ENV = "SASSAS_FUZZ_SEED"
_KEY = "sassas measurement"
_LINES: list[tuple[str, str]] = []    # (test id, line), in the order they came
_ORDER: dict[str, int] = {}           # test id -> place in the collection, where workers ran the tests


def pytest_configure(config):
    # (in a worker, the controller's seed is already in the environment)
    if not os.environ.get(SEED_ENV):
        os.environ[SEED_ENV] = str(random.randrange(1 << 32))


def _seed_line() -> str:
    return f"random tests ran with {SEED_ENV}={os.environ[SEED_ENV]} (set it to replay them)"


def pytest_report_header(config):
    return _seed_line()


@pytest.fixture
def report(request):
    """report(line): a measurement to show in the run's summary."""
    return lambda line: request.node.user_properties.append((_KEY, line.strip("\n")))


def pytest_runtest_logreport(report):
    # The teardown report carries every line the test reported, whichever process ran it.
    if report.when == "teardown":
        _LINES.extend((report.nodeid, line) for key, line in report.user_properties if key == _KEY)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    if not _ORDER:
        _ORDER.update((nodeid, i) for i, nodeid in enumerate(ids))


def pytest_terminal_summary(terminalreporter):
    terminalreporter.section("sassas measurements")
    terminalreporter.write_line(_seed_line())
    # In the tests' order, as one process would print them; a line reported more than once
    # (by each worker) once.
    ordered = sorted(_LINES, key=lambda item: _ORDER.get(item[0], len(_ORDER)))
    for line in dict.fromkeys(line for _nodeid, line in ordered):
        terminalreporter.write_line(line)
