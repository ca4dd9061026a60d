"""Compiling the CUDA-C references at run time with NVRTC (cuda.bindings.nvrtc) to a cubin."""
from __future__ import annotations

import os
from functools import lru_cache
from typing import Sequence

# The compiler itself is sassas's (one NVRTC wrapper for the whole project).
from sassas.nvrtc import NvrtcError, NvrtcMissing, available  # noqa: F401
from sassas.nvrtc import compile_cuda as _compile

KERNEL_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernels")


@lru_cache(maxsize=1)
def _headers() -> tuple[tuple[bytes, ...], tuple[bytes, ...]]:
    names, texts = [], []
    for fn in sorted(os.listdir(KERNEL_DIR)):
        if fn.endswith(".cuh"):
            names.append(fn.encode())
            with open(os.path.join(KERNEL_DIR, fn), "rb") as f:
                texts.append(f.read())
    return tuple(texts), tuple(names)


def compile_cuda(source: str, arch: str = "sm_90", options: Sequence[str] = (),
                 filename: str = "ref.cu") -> bytes:
    """CUDA-C source -> cubin bytes for `arch` (e.g. 'sm_90'). The .cuh files beside the
    references can be #included. Raises NvrtcMissing / NvrtcError."""
    texts, names = _headers()
    headers = {n.decode(): t.decode() for n, t in zip(names, texts)}
    return _compile(source, arch, ["--std=c++17", *options], filename=filename, headers=headers)


def read_kernel(name: str) -> str:
    with open(os.path.join(KERNEL_DIR, name)) as f:
        return f.read()
