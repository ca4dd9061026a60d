"""CUDA C -> cubin with NVRTC (cuda.bindings.nvrtc), for references and the edit loop.

Only the tests, the microbenchmarks and `sassas.edit` use it; assembling never does.
"""
from __future__ import annotations

from typing import Mapping, Sequence


class NvrtcMissing(RuntimeError):
    """NVRTC (cuda-python's bindings or libnvrtc itself) cannot be used here."""


class NvrtcError(RuntimeError):
    """The CUDA C did not compile; the message carries NVRTC's log."""


def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError as e:
        raise NvrtcMissing(f"cuda.bindings.nvrtc cannot be imported: {e}") from e
    return nvrtc


def available() -> tuple[bool, str]:
    """(True, 'major.minor') where NVRTC works, else (False, the reason)."""
    try:
        err, major, minor = _nvrtc().nvrtcVersion()
    except Exception as e:          # the shared library is missing, ...
        return False, f"NVRTC unavailable: {e}"
    if int(err) != 0:
        return False, f"nvrtcVersion failed: {err}"
    return True, f"{major}.{minor}"


def _checked(result, what: str):
    if int(result[0]) != 0:
        raise NvrtcError(f"{what} failed: {result[0]}")
    return result[1] if len(result) == 2 else result[1:]


def _log(nvrtc, prog) -> str:
    try:
        size = _checked(nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
        buf = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, buf)
        return buf.rstrip(b"\0").decode(errors="replace").strip()
    except Exception:
        return ""


def compile_cuda(source: str, arch: str = "sm_90", options: Sequence[str] = (),
                 filename: str = "kernel.cu", headers: Mapping[str, str] = None) -> bytes:
    """Compile CUDA C for `arch` ('sm_90', ...) and return the cubin's bytes.

    `headers` maps include names to their text. Kernels meant to be found by name should be
    `extern "C"`. Raises NvrtcMissing or NvrtcError (with the compiler's log).
    """
    nvrtc = _nvrtc()
    headers = dict(headers or {})
    try:
        prog = _checked(nvrtc.nvrtcCreateProgram(
            source.encode(), filename.encode(), len(headers),
            [h.encode() for h in headers.values()], [n.encode() for n in headers]), "nvrtcCreateProgram")
    except NvrtcError:
        raise
    except Exception as e:
        raise NvrtcMissing(f"NVRTC cannot be used: {e}") from e
    try:
        opts = [f"--gpu-architecture={arch}", *options]
        if int(nvrtc.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])[0]) != 0:
            raise NvrtcError(f"NVRTC could not compile {filename} ({' '.join(opts)}):\n{_log(nvrtc, prog)}")
        size = _checked(nvrtc.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
        buf = b" " * size
        _checked(nvrtc.nvrtcGetCUBIN(prog, buf), "nvrtcGetCUBIN")
        return bytes(buf)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
