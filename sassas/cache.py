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
