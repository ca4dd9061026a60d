"""Results: statistics over repetitions, the physical-limit guard, JSON, and the summary table.

JSON schema (``schema: "sassas.microbench/1"``)::

    {"schema": ..., "device": "NVIDIA H200", "arch": "sm_90", "sm_count": 132,
     "clock_khz": 1980000, "created": "...", "command": "...",
     "results": [{"name": "smem.bandwidth", "variant": "lds128 conflict-free",
                  "impl": "sass", "metric": "bytes_per_clk_sm", "unit": "B/clk/SM",
                  "value": 127.9, "median": 127.9, "spread": 0.001, "n": 15,
                  "samples": [...], "error": null, "limit": {"max": 128.0},
                  "model": 128.0, "extra": {...}}, ...]}

`value` is the median, or null when `error` says why there is no figure; `spread` is
(max - min) / |median| over the n repetitions. Latency tables read the results whose unit
is "cycles".
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Iterable, Optional, Sequence

SCHEMA = "sassas.microbench/1"
# A measured figure may exceed a physical limit by this fraction before it is an error:
# clock reads at the ends of a long run and the last instructions in flight.
TOLERANCE = 0.02


@dataclass(frozen=True)
class Limit:
    """Physical bounds of a metric: a figure beyond them is an error, never a result."""
    max: Optional[float] = None
    min: Optional[float] = None
    why: str = ""

    def check(self, value: float, tolerance: float = TOLERANCE) -> Optional[str]:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "no value (NaN)"
        if self.max is not None and value > self.max * (1 + tolerance):
            return (f"{value:.4g} is above the physical limit {self.max:.4g}"
                    + (f" ({self.why})" if self.why else "") + ": the measurement is wrong")
        if self.min is not None and value < self.min * (1 - tolerance):
            return (f"{value:.4g} is below the physical minimum {self.min:.4g}"
                    + (f" ({self.why})" if self.why else "") + ": the measurement is wrong")
        return None

    def as_dict(self) -> dict:
        return {k: v for k, v in (("max", self.max), ("min", self.min)) if v is not None}


@dataclass
class Result:
    name: str
    variant: str
    impl: str
    metric: str
    unit: str
    value: Optional[float] = None
    median: Optional[float] = None
    spread: Optional[float] = None
    n: int = 0
    samples: list = field(default_factory=list)
    error: Optional[str] = None
    limit: dict = field(default_factory=dict)
    model: Optional[float] = None
    extra: dict = field(default_factory=dict)
    headline: bool = True

    def to_dict(self) -> dict:
        d = asdict(self)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Result":
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in d.items() if k in known})


def median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    n = len(s)
    if n == 0:
        raise ValueError("median of nothing")
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def spread(xs: Sequence[float]) -> float:
    """(max - min) / |median|: the relative range over repetitions (0 for one sample)."""
    m = median(xs)
    if m == 0:
        return 0.0 if max(xs) == min(xs) else math.inf
    return (max(xs) - min(xs)) / abs(m)


def make_result(name: str, variant: str, impl: str, metric: str, unit: str,
                samples: Sequence[float], limit: Limit = Limit(), *, model=None, extra=None,
                error: Optional[str] = None, headline: bool = True) -> Result:
    """Statistics over `samples`, guarded by `limit`: a sample beyond a physical limit makes
    the whole result an error (value None), whatever the median says."""
    samples = [float(x) for x in samples]
    r = Result(name, variant, impl, metric, unit, n=len(samples), samples=samples,
               limit=limit.as_dict(), model=model, extra=dict(extra or {}), headline=headline)
    if error:
        r.error = error
        return r
    if not samples:
        r.error = "no samples"
        return r
    for x in samples:
        problem = limit.check(x)
        if problem:
            r.error = problem
            r.extra["rejected_median"] = median(samples)
            return r
    r.median = median(samples)
    r.value = r.median
    r.spread = spread(samples)
    return r


def error_result(name: str, variant: str, impl: str, metric: str, unit: str, error: str,
                 headline: bool = True) -> Result:
    return Result(name, variant, impl, metric, unit, error=error, headline=headline)


# --------------------------------------------------------------------------------------------
# JSON
# --------------------------------------------------------------------------------------------

def to_json(results: Iterable[Result], device: dict) -> dict:
    doc = {"schema": SCHEMA}
    doc.update(device)
    doc["results"] = [r.to_dict() for r in results]
    return doc


def write_json(path: str, results: Iterable[Result], device: dict) -> None:
    with open(path, "w") as f:
        json.dump(to_json(results, device), f, indent=1, default=_json_default)
        f.write("\n")


def _json_default(o):
    try:
        import numpy as np
        if isinstance(o, np.generic):
            return o.item()
        if isinstance(o, np.ndarray):
            return o.tolist()
    except ImportError:
        pass
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


class ResultsFileError(ValueError):
    """A file that is not a results document of this schema (says which file and why)."""


def read_json(path: str) -> tuple[dict, list[Result]]:
    with open(path) as f:
        try:
            doc = json.load(f)
        except ValueError as e:       # (JSONDecodeError, UnicodeDecodeError)
            raise ResultsFileError(f"{path}: not a JSON file: {e}") from None
    problems = validate(doc) if isinstance(doc, dict) else ["not a JSON object"]
    if problems:
        raise ResultsFileError(f"{path}: not a microbench results file ({SCHEMA}): {'; '.join(problems[:3])}")
    results = [Result.from_dict(d) for d in doc["results"]]
    return {k: v for k, v in doc.items() if k != "results"}, results


def validate(doc: dict) -> list[str]:
    """Problems with a results document (empty list: valid)."""
    problems = []
    if doc.get("schema") != SCHEMA:
        problems.append(f"schema is {doc.get('schema')!r}")
    for key in ("device", "arch", "results"):
        if key not in doc:
            problems.append(f"missing {key!r}")
    results = doc.get("results", [])
    if not isinstance(results, list):
        return problems + ["'results' is not a list"]
    for i, r in enumerate(results):
        if not isinstance(r, dict):
            problems.append(f"results[{i}] is not an object")
            continue
        for key in ("name", "variant", "impl", "metric", "value", "unit", "median", "spread", "n"):
            if key not in r:
                problems.append(f"results[{i}] lacks {key!r}")
        if r.get("impl") not in ("sass", "cuda"):
            problems.append(f"results[{i}].impl is {r.get('impl')!r}")
        if r.get("value") is None and not r.get("error"):
            problems.append(f"results[{i}] has neither a value nor an error")
        if r.get("value") is not None and r.get("error"):
            problems.append(f"results[{i}] has both a value and an error")
    return problems


# --------------------------------------------------------------------------------------------
# The summary table
# --------------------------------------------------------------------------------------------

def fmt_value(v: Optional[float]) -> str:
    if v is None:
        return "-"
    a = abs(v)
    if a >= 1000:
        return f"{v:.0f}"
    if a >= 100:
        return f"{v:.1f}"
    if a >= 10:
        return f"{v:.2f}"
    return f"{v:.3f}"


def fmt_cell(r: Optional[Result]) -> str:
    if r is None:
        return ""
    if r.error:
        return "ERROR"
    s = fmt_value(r.value)
    if r.spread is not None and r.n > 1:
        pct = r.spread * 100
        s += f" ±{pct:.1f}%" if pct < 9.95 else f" ±{pct:.0f}%"
    return s


def _align(rows: list[list[str]], right_from: int = 1) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for r in rows:
        cells = [c.ljust(widths[i]) if i < right_from else c.rjust(widths[i]) for i, c in enumerate(r)]
        out.append("  ".join(cells).rstrip())
    return out


def table(results: Sequence[Result], title: str = "", brief: bool = False) -> str:
    """Plain-text summary: one block per table group (a benchmark, or several that share
    variants: extra['table']); a row per variant; for each metric a column per impl, then
    the model's prediction if there is one; then the errors.

    Only `headline` results are shown; `brief` also leaves out results marked
    extra['brief'] = False (and says how many)."""
    lines = []
    if title:
        lines += [title, "=" * len(title)]
    groups: dict[str, list[Result]] = {}
    hidden = 0
    for r in results:
        if not r.headline:
            continue
        if brief and not r.extra.get("brief", True):
            hidden += 1
            continue
        groups.setdefault(r.extra.get("table") or r.name, []).append(r)
    errors = []
    for group, rs in groups.items():
        metrics: list[tuple[str, str]] = []
        impls: dict[tuple[str, str], list[str]] = {}
        for r in rs:
            key = (r.metric, r.unit)
            if key not in metrics:
                metrics.append(key)
            impls.setdefault(key, [])
            if r.impl not in impls[key]:
                impls[key].append(r.impl)
        cols: list[tuple[str, str, str]] = []      # (metric, unit, impl or 'model')
        for key in metrics:
            for impl in sorted(impls[key], key=lambda i: (i != "sass", i)):
                cols.append((*key, impl))
            if any(r.model is not None for r in rs if (r.metric, r.unit) == key):
                cols.append((*key, "model"))
        variants: list[str] = []
        for r in rs:
            if r.variant not in variants:
                variants.append(r.variant)
        cell = {(r.variant, r.metric, r.unit, r.impl): r for r in rs}
        model = {}
        for r in rs:
            if r.model is not None:
                model.setdefault((r.variant, r.metric, r.unit), r.model)
        rows = [["", *[m for m, _u, _i in cols]], ["", *[f"[{u}]" for _m, u, _i in cols]],
                ["variant", *[i for _m, _u, i in cols]]]
        for v in variants:
            row = [v]
            for m, u, i in cols:
                if i == "model":
                    x = model.get((v, m, u))
                    row.append(fmt_value(x) if x is not None else "")
                else:
                    row.append(fmt_cell(cell.get((v, m, u, i))))
            rows.append(row)
        lines.append("")
        lines.append(f"## {group}")
        lines += _align(rows)
        for r in rs:
            if r.error:
                errors.append(f"{r.name} / {r.variant} / {r.impl} / {r.metric}: {r.error}")
    if hidden:
        lines.append("")
        lines.append(f"({hidden} more results in the full table and the JSON)")
    if errors:
        lines.append("")
        lines.append(f"ERRORS ({len(errors)}): no figure is reported for these")
        shown = errors[:20] if brief else errors
        lines += [f"  {e[:300]}" if brief else f"  {e}" for e in shown]
        if len(shown) < len(errors):
            lines.append(f"  ... {len(errors) - len(shown)} more in the full table")
    return "\n".join(lines) + "\n"
