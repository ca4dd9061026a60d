"""Where sassas keeps what it derives from its own data files at run time (the ISA
descriptions' pickles, the parser's tables): each derived file is named by a hash of what it
was made from, and one that cannot be read or written is made afresh."""
from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """$SASSAS_CACHE_DIR, else the user's cache directory ($XDG_CACHE_HOME or ~/.cache) /sassas."""
    if os.environ.get("SASSAS_CACHE_DIR"):
        return Path(os.environ["SASSAS_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "sassas"


def load_toml(data: bytes, name: str) -> dict:
    """tomllib's reading of `data` (a data file's bytes; `name` names its cache file), through a
    pickle in cache_dir() named by a hash of the bytes: parsing sassas's larger TOML tables
    (the TuringAs spellings, the control rules, the semantics) took 40-50 ms of every
    command's start, the pickle a few. A cache that cannot be read or
    written is passed by."""
    import hashlib
    import pickle
    import tempfile
    import tomllib
    digest = hashlib.sha256(data).hexdigest()[:24]
    cached = cache_dir() / f"toml-{name}-{digest}.pickle"
    try:
        with open(cached, "rb") as f:
            table = pickle.load(f)
        if isinstance(table, dict):
            return table
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError, ValueError):
        pass
    table = tomllib.loads(data.decode())
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("wb", dir=cached.parent, suffix=".tmp", delete=False) as f:
            try:
                pickle.dump(table, f, protocol=pickle.HIGHEST_PROTOCOL)
            except BaseException:
                os.unlink(f.name)
                raise
        os.replace(f.name, cached)      # whole or not at all, also with several processes
    except OSError:
        pass
    return table
