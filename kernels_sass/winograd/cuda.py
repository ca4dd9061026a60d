"""The CUDA-C kernels of winograd.cu, compiled at run time with NVRTC (cuda.bindings.nvrtc;
nvcc as a fallback) for the GPU at hand, cached on disk, loaded with sassas.load."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from functools import lru_cache
from typing import Sequence

from sassas import nvrtc

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "winograd.cu")
OPTIONS = ("--std=c++17", "-default-device")


class CompileError(RuntimeError):
    pass


class CompilerMissing(RuntimeError):
    pass


def source() -> str:
    with open(SOURCE) as f:
        return f.read()


def nvrtc_available() -> tuple[bool, str]:
    return nvrtc.available()


def _nvrtc_compile(src: str, arch: str, options: Sequence[str], name: str) -> bytes:
    try:
        return nvrtc.compile_cuda(src, arch, options, filename=name)
    except nvrtc.NvrtcMissing as e:
        raise CompilerMissing(str(e)) from e
    except nvrtc.NvrtcError as e:
        raise CompileError(str(e)) from e


def _nvcc_compile(src: str, arch: str) -> bytes:
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
    if nvcc is None:
        raise CompilerMissing("neither NVRTC nor nvcc is available")
    with tempfile.TemporaryDirectory() as d:
        cu, out = os.path.join(d, "winograd.cu"), os.path.join(d, "winograd.cubin")
        with open(cu, "w") as f:
            f.write(src)
        r = subprocess.run([nvcc, "-cubin", f"-arch={arch}", "-std=c++17", "-o", out, cu],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise CompileError(f"nvcc failed:\n{r.stderr}")
        with open(out, "rb") as f:
            return f.read()


def compile_source(src: str = None, arch: str = "sm_90", name: str = "winograd.cu") -> bytes:
    """CUDA-C -> cubin: NVRTC, else nvcc."""
    src = source() if src is None else src
    try:
        return _nvrtc_compile(src, arch, OPTIONS, name)
    except CompilerMissing:
        return _nvcc_compile(src, arch)


def _cache_dir() -> str:
    from .cubins import CACHE_DIR
    return CACHE_DIR


def cubin(arch: str) -> bytes:
    """The compiled winograd.cu for `arch`, through an on-disk cache keyed by source and the
    NVRTC version (a cubin from a newer compiler may not load on an older driver)."""
    src = source()
    ok, version = nvrtc_available()
    key = hashlib.sha1((src + arch + version + " ".join(OPTIONS)).encode()).hexdigest()[:16]
    path = os.path.join(_cache_dir(), f"winograd_cuda-{arch}-{key}.cubin")
    if os.path.exists(path):
        with open(path, "rb") as f:
            return f.read()
    data = compile_source(src, arch)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + f".{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    return data


@lru_cache(maxsize=None)
def module(arch: str):
    import sassas
    return sassas.load(cubin(arch))
