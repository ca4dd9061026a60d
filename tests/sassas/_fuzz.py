"""The seed of the random tests: fresh each run, printed, replayed with SASSAS_FUZZ_SEED=N
(tests/conftest.py draws it once for the run, before pytest-xdist's workers start)."""
from __future__ import annotations

import functools
import os
import random

SEED_ENV = "SASSAS_FUZZ_SEED"


@functools.lru_cache(maxsize=None)
def fuzz_seed() -> int:
    """One seed for the whole test run (the header and the summary show it; failures name it)."""
    return int(os.environ.get(SEED_ENV) or random.randrange(1 << 32))


def rng_for(name: str) -> random.Random:
    """A generator of its own for each test, from the run's seed."""
    return random.Random(f"{fuzz_seed()}-{name}")


def replay() -> str:
    return f"{SEED_ENV}={fuzz_seed()}"
