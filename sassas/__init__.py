"""sassas: a SASS assembler for NVIDIA Volta..Hopper (sm_70..sm_90), in Python.

    import sassas
    cubin = sassas.assemble(open("saxpy.sass").read(), arch="sm_90", filename="saxpy.sass")
    module = sassas.load(cubin)
    module["saxpy"](grid, block, 2.0, x, y, n)
"""
from .assembler import Cubin, assemble, assemble_file, parse
from .errors import SassError

__version__ = "0.1.0"
__all__ = ["assemble", "assemble_file", "parse", "load", "Cubin", "SassError", "__version__"]


def load(cubin, **kw):
    """Load a cubin (a :class:`Cubin`, bytes or a path) onto the GPU: see :mod:`sassas.load`."""
    from .load import load as _load
    return _load(cubin, **kw)
