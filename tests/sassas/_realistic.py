"""tests/sassas/data/realistic_kernels.cu compiled for any arch the tests cover.

sm_75..sm_90: NVRTC straight to a cubin. sm_70: NVRTC 13 refuses Volta (and compute_70), so
NVRTC writes PTX for compute_75, whose header is retargeted (`.target sm_70`, and a PTX ISA
version ptxas 12.9 reads; the kernels use nothing sm_75-specific) and ptxas 12.9 (test extra)
compiles it for sm_70. Skips, with the reason, where a tool is missing.
"""
from __future__ import annotations

import os
import re
import subprocess
import tempfile

import pytest

from sassas import nvrtc

SOURCE = os.path.join(os.path.dirname(__file__), "data", "realistic_kernels.cu")
# Archs NVRTC 13 cannot target: compiled through PTX and ptxas 12.9.
VIA_PTX = {"sm_70": "compute_75"}
_cache: dict = {}


def compile_realistic(arch: str, options=()) -> bytes:
    key = (arch, tuple(options))
    if key not in _cache:
        _cache[key] = _compile(arch, list(options))
    return _cache[key]


def _compile(arch: str, options: list) -> bytes:
    with open(SOURCE) as f:
        source = f.read()
    if arch not in VIA_PTX:
        return nvrtc.compile_cuda(source, arch, options=options, filename="realistic_kernels.cu")
    from sassas.learn import oracle
    try:
        ptxas = oracle.find_tool("ptxas", arch)
    except oracle.OracleMissing as e:
        pytest.skip(f"ptxas 12.9 (test extra) is needed to compile for {arch}: {e}")
    ptx = nvrtc_ptx(source, VIA_PTX[arch], options)
    ptx = re.sub(r"^\.target\s+sm_\w+", f".target {arch}", ptx, flags=re.M)
    ptx = re.sub(r"^\.version\s+\S+", ".version 8.0", ptx, flags=re.M)
    with tempfile.TemporaryDirectory() as tmp:
        src, out = os.path.join(tmp, "k.ptx"), os.path.join(tmp, "k.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        proc = subprocess.run([str(ptxas), "-arch", arch, src, "-o", out], capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"ptxas {arch} refused the retargeted PTX:\n{proc.stderr}")
        with open(out, "rb") as f:
            return f.read()


def nvrtc_ptx(source: str, arch: str, options=()) -> str:
    """PTX text from NVRTC for a virtual arch (compute_XX)."""
    from cuda.bindings import nvrtc as lib
    err, prog = lib.nvrtcCreateProgram(source.encode(), b"realistic_kernels.cu", 0, [], [])
    try:
        opts = [f"--gpu-architecture={arch}".encode(), *(o.encode() for o in options)]
        if int(lib.nvrtcCompileProgram(prog, len(opts), opts)[0]) != 0:
            raise RuntimeError(f"NVRTC could not compile realistic_kernels.cu for {arch}")
        _err, size = lib.nvrtcGetPTXSize(prog)
        buf = b" " * size
        lib.nvrtcGetPTX(prog, buf)
        return buf.rstrip(b"\0").decode()
    finally:
        lib.nvrtcDestroyProgram(prog)
