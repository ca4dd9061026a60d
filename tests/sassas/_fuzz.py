"""The seed of the random tests: fresh each run, printed, replayed with SASSAS_FUZZ_SEED=N."""
from __future__ import annotations

import functools
import os
import random

SEED_ENV = "SASSAS_FUZZ_SEED"
SEEN: list[int] = []           # the run's seed, once drawn (conftest.py reports it)


@functools.lru_cache(maxsize=None)
def fuzz_seed() -> int:
    """One seed for the whole test run (the summary shows it; failures name it)."""
    seed = int(os.environ.get(SEED_ENV) or random.randrange(1 << 32))
    SEEN.append(seed)
    return seed


def rng_for(name: str) -> random.Random:
    """A generator of its own for each test, from the run's seed."""
    return random.Random(f"{fuzz_seed()}-{name}")


def replay() -> str:
    return f"{SEED_ENV}={fuzz_seed()}"
