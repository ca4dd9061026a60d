"""The ISA layer: a declarative description per arch (data/sm_XX.toml) and its engine."""
from .model import Isa, get_isa  # noqa: F401
