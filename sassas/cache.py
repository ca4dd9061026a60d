"""Where sassas keeps what it derives from its own data files at run time (the ISA
descriptions' pickles, the parser's tables): each derived file is named by a hash of what it
was made from, and one that cannot be read or written is made afresh."""
from __future__ import annotations

import hashlib
import os
import pickle
from pathlib import Path
from typing import Any, Callable


def cache_dir() -> Path:
    """$SASSAS_CACHE_DIR, else the user's cache directory ($XDG_CACHE_HOME or ~/.cache) /sassas."""
    if os.environ.get("SASSAS_CACHE_DIR"):
        return Path(os.environ["SASSAS_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "sassas"


def through_pickle(name: str, kind: type, make: Callable[[], Any]) -> Any:
    """The object pickled as `name` in cache_dir() if it is there and of type `kind`; else
    make()'s, pickled there for the next run (whole or not at all, also with several
    processes). A cache that cannot be read or written is passed by. `name` says what the
    object was made from (a hash of its sources): a changed source makes another name."""
    cached = cache_dir() / name
    try:
        with open(cached, "rb") as f:
            found = pickle.load(f)
        if isinstance(found, kind):
            return found
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError, ValueError):
        pass
    made = make()
    import tempfile         # (only where the cache is written: most runs read it)
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("wb", dir=cached.parent, suffix=".tmp", delete=False) as f:
            try:
                pickle.dump(made, f, protocol=pickle.HIGHEST_PROTOCOL)
            except BaseException:
                os.unlink(f.name)
                raise
        os.replace(f.name, cached)
    except OSError:
        return made
    _remove_older(cached)
    return made


# Files of one kind (`isa-sm_90-` and a hash) kept at most: the newest, made by the sassas
# that runs and a few before it (two checkouts or versions used in turn each keep theirs,
# instead of making it anew at every run).
KEPT_OF_A_KIND = 4


def _remove_older(cached: Path) -> None:
    """Remove the files of the same kind as `cached` that earlier sassas versions or data files
    made, but the KEPT_OF_A_KIND newest (`cached` among them): a changed sassas would otherwise
    leave a few megabytes behind at each change."""
    stem, _, _digest = cached.stem.rpartition("-")
    try:
        others = []
        for other in cached.parent.glob(f"{stem}-*{cached.suffix}"):
            if other != cached and other.stem.rpartition("-")[0] == stem:
                try:
                    others.append((other.stat().st_mtime_ns, other))
                except OSError:
                    pass
        others.sort(reverse=True)
        for _, other in others[KEPT_OF_A_KIND - 1:]:
            try:
                other.unlink()
            except OSError:
                pass
    except OSError:
        pass


def load_toml(data: bytes, name: str) -> dict:
    """tomllib's reading of `data` (a data file's bytes; `name` names its cache file), through a
    pickle named by a hash of the bytes: parsing sassas's larger TOML tables (the TuringAs
    spellings, the control rules, the semantics) took 40-50 ms of every command's start, the
    pickle a few."""
    digest = hashlib.sha256(data).hexdigest()[:24]
    return through_pickle(f"toml-{name}-{digest}.pickle", dict, lambda: _toml(data))


def _toml(data: bytes) -> dict:
    import tomllib          # (only where no pickle is at hand: most runs never read TOML)
    return tomllib.loads(data.decode())
