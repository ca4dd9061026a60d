"""The ISA layer: a declarative description per arch (data/sm_XX.toml) and its engine."""
from .description import get_isa  # noqa: F401
from .engine import Isa  # noqa: F401
