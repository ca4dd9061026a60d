"""Running benchmarks: build every kernel first (in parallel, no GPU needed), then run each
benchmark's cases in a worker process, so that a kernel that faults or hangs costs its own
case and not the rest of the run (a GPU fault leaves a CUDA context unusable).

Progress goes to stderr, one line per case.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Optional, Sequence, TextIO

from .core import Benchmark, Case, Source, select
from .results import Result, error_result, make_result

WORKER_EXIT_STICKY = 3


def source_digest(source: Source, arch: str) -> str:
    h = hashlib.sha1()
    for part in (arch, source.lang, source.text, *source.options):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def _build_one(args) -> tuple[str, Optional[str]]:
    source, arch, path = args
    from .gpu import build
    try:
        data = build(source, arch)
    except Exception as e:  # SassError, NvrtcError, NvrtcMissing...
        return path, f"{type(e).__name__}: {e}"
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    return path, None


def prebuild(cases: Sequence[Case], arch: str, cache_dir: str, jobs: int = 0,
             log: Optional[TextIO] = None) -> dict[str, str]:
    """Build every distinct source into cache_dir/<digest>.cubin. Returns {digest: error}."""
    os.makedirs(cache_dir, exist_ok=True)
    todo = {}
    for c in cases:
        d = source_digest(c.source, arch)
        path = os.path.join(cache_dir, d + ".cubin")
        if d not in todo and not os.path.exists(path):
            todo[d] = (c.source, arch, path)
    errors: dict[str, str] = {}
    if not todo:
        return errors
    t = time.perf_counter()
    jobs = jobs or min(len(todo), os.cpu_count() or 1)
    if log:
        print(f"[build] {len(todo)} kernels (SASS via sassas, CUDA-C via NVRTC) with {jobs} processes",
              file=log, flush=True)
    items = list(todo.items())
    if jobs <= 1:
        outcomes = [_build_one(a) for _d, a in items]
    else:
        import multiprocessing
        # spawn, not fork: the parent may hold a CUDA context already.
        with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as ex:
            outcomes = list(ex.map(_build_one, [a for _d, a in items]))
    for (d, (src, _a, _p)), (_path, err) in zip(items, outcomes):
        if err:
            errors[d] = err
            with open(os.path.join(cache_dir, d + ".error"), "w") as f:
                f.write(err)
            if log:
                print(f"[build] FAILED {src.filename} {' '.join(src.options)}: {err.splitlines()[0] if err else ''}",
                      file=log, flush=True)
    if log:
        print(f"[build] done in {time.perf_counter() - t:.1f}s, {len(errors)} failed", file=log, flush=True)
    return errors


# --------------------------------------------------------------------------------------------
# Running cases (in the worker, or in-process)
# --------------------------------------------------------------------------------------------

def results_of_case(case: Case, samples: dict, times: list, error: Optional[str] = None) -> list[Result]:
    out = []
    for i, m in enumerate(case.metrics):
        extra = dict(case.extra)
        if times:
            extra["kernel_ms_median"] = sorted(times)[len(times) // 2]
        extra["iters"] = case.iters
        extra["grid"] = case.grid
        extra["block"] = case.block
        if case.launches > 1:
            extra["launches_a_sample"] = case.launches
        model = case.model if i == 0 else None
        if error:
            r = error_result(case.bench, case.variant, case.impl, m.name, m.unit, error, m.headline)
            r.extra = extra
            r.model = model
        else:
            r = make_result(case.bench, case.variant, case.impl, m.name, m.unit,
                            samples.get(m.name, []), m.limit, model=model, extra=extra,
                            headline=m.headline)
        out.append(r)
    return out


def progress_line(bench: str, index: int, total: int, case: Case, results: list[Result],
                  seconds: float) -> str:
    parts = []
    for r in results:
        if r.error:
            parts.append(f"{r.metric} ERROR: {r.error}")
        else:
            from .results import fmt_value
            parts.append(f"{r.metric} {fmt_value(r.value)} {r.unit} ±{(r.spread or 0) * 100:.1f}% (n={r.n})")
    width = len(str(total))
    return (f"[{bench} {index + 1:>{width}}/{total}] {case.variant} [{case.impl}]: "
            + "; ".join(parts) + f"  {seconds:.2f}s")


def run_cases_inprocess(bench: Benchmark, cases: Sequence[Case], start: int, repeat: int,
                        warmup: int, cache_dir: Optional[str], emit, log: TextIO,
                        skip: Optional[dict] = None, gpu=None) -> int:
    """Run cases[start:] on this process's GPU; emit(dict) one record per case.
    `skip`: {source digest: reason} of kernels not to run. Returns 0, or
    WORKER_EXIT_STICKY after a fault that ruined the context."""
    from .gpu import CaseFailed, Gpu, GpuError
    gpu = gpu if gpu is not None else Gpu()
    device = gpu.info.as_dict()
    if cache_dir and hasattr(gpu, "builder"):
        gpu.builder = cached_builder(cache_dir)
    skip = skip or {}
    for i in range(start, len(cases)):
        case = cases[i]
        case.index = i
        t = time.perf_counter()
        error = None
        samples, times = {}, []
        sticky = False
        reason = skip.get(source_digest(case.source, gpu.info.arch))
        try:
            if reason:
                raise CaseFailed(reason)
            if case.source.lang == "sass" and gpu.info.arch != "sm_90":
                raise CaseFailed(f"the SASS kernels are written for sm_90; this GPU is {gpu.info.arch}")
            samples, times, _rec = gpu.run_case(case, repeat, warmup)
        except GpuError as e:
            error = f"CUDA error: {e}"
            sticky = e.sticky
        except CaseFailed as e:
            error = str(e)
        except Exception as e:  # build errors, loader errors, analysis bugs
            error = f"{type(e).__name__}: {e}"
            sticky = any(name in str(e) for name in GpuError.STICKY)
        results = results_of_case(case, samples, times, error)
        emit({"case": i, "device": device, "results": [r.to_dict() for r in results]})
        print(progress_line(bench.name, i, len(cases), case, results, time.perf_counter() - t),
              file=log, flush=True)
        if sticky:
            return WORKER_EXIT_STICKY
    return 0


def cached_builder(cache_dir: str):
    """A builder that reads prebuilt cubins (or their build errors) from cache_dir, and
    builds what is not there."""
    def cached_build(source: Source, arch: str) -> bytes:
        from .gpu import build
        d = source_digest(source, arch)
        path = os.path.join(cache_dir, d + ".cubin")
        if os.path.exists(path):
            with open(path, "rb") as f:
                return f.read()
        err = os.path.join(cache_dir, d + ".error")
        if os.path.exists(err):
            with open(err) as f:
                raise BuildFailed(f.read())
        return build(source, arch)
    return cached_build


class BuildFailed(RuntimeError):
    pass


# --------------------------------------------------------------------------------------------
# The parent: one worker process per benchmark, restarted after a fault or a hang
# --------------------------------------------------------------------------------------------

def run(names: Sequence[str], *, quick: bool = False, repeat: Optional[int] = None,
        warmup: Optional[int] = None, isolate: bool = True, case_timeout: float = 60.0,
        jobs: int = 0, log: TextIO = sys.stderr, arch: Optional[str] = None,
        gpu=None, build: bool = True) -> tuple[dict, list[Result]]:
    """Run the named benchmarks; returns (device facts, results incl. derived ones).

    `gpu`: an object with .info and .run_case (tests pass a fake); it implies in-process
    runs. `build=False` skips building the kernels first (the fake needs none).
    """
    from .gpu import Gpu, GpuError, gpu_available, probe_device
    repeat = repeat or (9 if quick else 21)
    warmup = 2 if warmup is None else warmup
    benches = select(names)
    from . import fake
    if gpu is not None:
        isolate = False
        why = gpu.info.name
        arch = arch or gpu.info.arch
    elif fake.enabled():
        gpu_info = fake.FakeGpu().info
        why, arch = gpu_info.name, arch or gpu_info.arch
        build = False                  # the fake runs no kernel
        if not isolate:
            gpu = fake.FakeGpu()
    elif isolate:
        # No CUDA context in this process: the workers take the GPU.
        ok, why, found = probe_device()
        if not ok:
            raise GpuError(f"no GPU to run on: {why}")
        arch = arch or found
    else:
        ok, why = gpu_available()
        if not ok:
            raise GpuError(f"no GPU to run on: {why}")
        gpu = Gpu()
        arch = arch or gpu.info.arch
    device: dict = {}
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="microbench-") as tmp:
        cache = os.path.join(tmp, "cubins")
        all_cases = {b.name: b.cases(quick, arch) for b in benches}
        if build:
            prebuild([c for cs in all_cases.values() for c in cs], arch, cache, jobs, log)
        t0 = time.perf_counter()
        for b in benches:
            cases = all_cases[b.name]
            print(f"[{b.name}] {b.title}: {len(cases)} cases", file=log, flush=True)
            if isolate:
                recs = _run_isolated(b, cases, quick, repeat, warmup, cache, case_timeout, log, tmp, arch)
            else:
                recs = []
                run_cases_inprocess(b, cases, 0, repeat, warmup, cache, recs.append, log, gpu=gpu)
            bench_results = []
            for rec in recs:
                device = device or rec.get("device", {})
                bench_results += [Result.from_dict(d) for d in rec["results"]]
            bench_results += b.summarize(bench_results)
            results += bench_results
        print(f"[done] {len(results)} results in {time.perf_counter() - t0:.1f}s", file=log, flush=True)
    device.setdefault("arch", arch)
    device.setdefault("device", why)
    device["created"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    device["command"] = " ".join(["python -m microbench", *sys.argv[1:]]) if sys.argv else ""
    device["quick"] = quick
    device["repeat"] = repeat
    device["warmup"] = warmup
    return device, results


def _run_isolated(bench: Benchmark, cases: list[Case], quick: bool, repeat: int, warmup: int,
                  cache: str, case_timeout: float, log: TextIO, tmp: str, arch: str) -> list[dict]:
    """Run the cases in worker processes. After a kernel faults (sticky CUDA error), hangs
    or kills its worker, the remaining cases of that same kernel are skipped (reported as
    errors) and a fresh worker goes on with the next case."""
    recs: dict[int, dict] = {}
    bad: dict[str, str] = {}           # source digest -> why its cases are skipped
    skip_path = os.path.join(tmp, f"{bench.name}.skip.json")
    digests = [source_digest(c.source, arch) for c in cases]
    start = 0
    attempt = 0
    fruitless = 0
    while start < len(cases):
        attempt += 1
        with open(skip_path, "w") as f:
            json.dump(bad, f)
        path = os.path.join(tmp, f"{bench.name}.{attempt}.jsonl")
        cmd = [sys.executable, "-m", "microbench", "_worker", bench.name, "--start", str(start),
               "--repeat", str(repeat), "--warmup", str(warmup), "--cache", cache, "--out", path,
               "--skip", skip_path]
        if quick:
            cmd.append("--quick")
        env = dict(os.environ)
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        out = log if _has_fileno(log) else None
        proc = subprocess.Popen(cmd, stdout=out, stderr=out, env=env, start_new_session=True)
        seen = start - 1
        last_progress = time.monotonic()
        timed_out = False
        while True:
            rc = proc.poll()
            for rec in _read_jsonl(path):
                if rec["case"] > seen:
                    seen = rec["case"]
                    last_progress = time.monotonic()
            if rc is not None:
                break
            if time.monotonic() - last_progress > case_timeout:
                timed_out = True
                _kill(proc)
                break
            time.sleep(0.05)
        produced = 0
        for rec in _read_jsonl(path):
            recs[rec["case"]] = rec
            seen = max(seen, rec["case"])
            produced += 1
        nxt = seen + 1
        if proc.returncode == WORKER_EXIT_STICKY and seen >= start:
            bad[digests[seen]] = (f"skipped: this kernel faulted in case {seen + 1} "
                                  f"({cases[seen].variant} [{cases[seen].impl}])")
        elif nxt < len(cases) and (timed_out or proc.returncode != 0):
            why = (f"no result within {case_timeout:.0f}s (hung kernel?): worker killed" if timed_out
                   else f"the worker process died (exit code {proc.returncode}) during this case")
            c = cases[nxt]
            recs[nxt] = {"case": nxt, "results": [r.to_dict() for r in results_of_case(c, {}, [], why)]}
            print(f"[{bench.name} {nxt + 1:>{len(str(len(cases)))}}/{len(cases)}] {c.variant} "
                  f"[{c.impl}]: ERROR {why}", file=log, flush=True)
            bad[digests[nxt]] = f"skipped: this kernel hung or crashed in case {nxt + 1} ({c.variant} [{c.impl}])"
            nxt += 1
        elif proc.returncode == 0 and nxt < len(cases):
            for i in range(nxt, len(cases)):
                recs[i] = {"case": i, "results": [r.to_dict() for r in results_of_case(
                    cases[i], {}, [], "the worker ended without running this case")]}
            break
        fruitless = fruitless + 1 if produced == 0 else 0
        if fruitless >= 3 and nxt < len(cases):
            why = (f"three worker processes in a row produced no result (last exit code "
                   f"{proc.returncode}{', timed out' if timed_out else ''}); see the log above")
            for i in range(nxt, len(cases)):
                recs[i] = {"case": i, "results": [r.to_dict() for r in results_of_case(cases[i], {}, [], why)]}
            print(f"[{bench.name}] giving up on the remaining {len(cases) - nxt} cases: {why}",
                  file=log, flush=True)
            break
        start = nxt
    return [recs[i] for i in sorted(recs)]


def _has_fileno(f) -> bool:
    try:
        f.fileno()
        return True
    except Exception:
        return False


def _read_jsonl(path: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                break   # a line being written
    return out


def _kill(proc: subprocess.Popen) -> None:
    import signal
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except Exception:
        try:
            proc.kill()
        except Exception:
            pass
    try:
        proc.wait(timeout=10)
    except Exception:
        pass


def worker_main(name: str, start: int, quick: bool, repeat: int, warmup: int, cache: str,
                out_path: str, skip_path: Optional[str] = None) -> int:
    bench = select([name])[0]
    from . import fake
    gpu = None
    if fake.enabled():
        gpu = fake.FakeGpu()
        arch = gpu.info.arch
    else:
        from .gpu import loader
        major, minor = loader().compute_capability()
        arch = f"sm_{major}{minor}"
    cases = bench.cases(quick, arch)
    with open(out_path, "a") as f:
        def emit(rec: dict) -> None:
            f.write(json.dumps(rec, default=_default) + "\n")
            f.flush()
        skip = {}
        if skip_path and os.path.exists(skip_path):
            with open(skip_path) as sf:
                skip = json.load(sf)
        return run_cases_inprocess(bench, cases, start, repeat, warmup, cache, emit, sys.stderr, skip,
                                   gpu=gpu)


def _default(o):
    import numpy as np
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(type(o).__name__)
