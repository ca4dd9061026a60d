"""Compiling the CUDA-C references at run time with NVRTC (cuda.bindings.nvrtc) to a cubin."""
from __future__ import annotations

import os
from functools import lru_cache
from typing import Sequence

KERNEL_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernels")


class NvrtcMissing(RuntimeError):
    """NVRTC (cuda-python's nvrtc bindings or libnvrtc) is not available."""


class NvrtcError(RuntimeError):
    """A CUDA-C reference did not compile: the log says why."""


def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise NvrtcMissing(f"cuda.bindings.nvrtc cannot be imported: {e}") from e
    return nvrtc


def available() -> tuple[bool, str]:
    """(True, version) when NVRTC can compile here, else (False, why not)."""
    try:
        nvrtc = _nvrtc()
        err, major, minor = nvrtc.nvrtcVersion()
        if int(err) != 0:
            return False, f"nvrtcVersion failed: {err}"
        return True, f"{major}.{minor}"
    except Exception as e:  # library not found, etc.
        return False, f"NVRTC unavailable: {e}"


def _check(nvrtc, result, what: str, prog=None):
    err = result[0]
    if int(err) != 0:
        log = _log(nvrtc, prog) if prog is not None else ""
        raise NvrtcError(f"{what} failed: {err}" + (f"\n{log}" if log else ""))
    return result[1:] if len(result) > 2 else (result[1] if len(result) == 2 else None)


def _log(nvrtc, prog) -> str:
    try:
        err, n = nvrtc.nvrtcGetProgramLogSize(prog)
        buf = b" " * n
        nvrtc.nvrtcGetProgramLog(prog, buf)
        return buf.decode(errors="replace").rstrip("\x00").strip()
    except Exception:
        return ""


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
    nvrtc = _nvrtc()
    texts, names = _headers()
    try:
        prog = _check(nvrtc, nvrtc.nvrtcCreateProgram(source.encode(), filename.encode(),
                                                      len(texts), list(texts), list(names)),
                      "nvrtcCreateProgram")
    except NvrtcError:
        raise
    except Exception as e:
        raise NvrtcMissing(f"NVRTC cannot be used: {e}") from e
    try:
        opts = [f"--gpu-architecture={arch}", "--std=c++17", *options]
        opts_b = [o.encode() for o in opts]
        err = nvrtc.nvrtcCompileProgram(prog, len(opts_b), opts_b)[0]
        if int(err) != 0:
            raise NvrtcError(f"NVRTC could not compile {filename} ({' '.join(opts)}):\n{_log(nvrtc, prog)}")
        size = _check(nvrtc, nvrtc.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize", prog)
        buf = b" " * size
        _check(nvrtc, nvrtc.nvrtcGetCUBIN(prog, buf), "nvrtcGetCUBIN", prog)
        return bytes(buf)
    finally:
        try:
            nvrtc.nvrtcDestroyProgram(prog)
        except Exception:
            pass


def read_kernel(name: str) -> str:
    with open(os.path.join(KERNEL_DIR, name)) as f:
        return f.read()
