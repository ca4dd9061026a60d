"""The figures without matplotlib: plot_all against a stand-in that records every call, on
results for every benchmark's cases. Which files are drawn, and what each shows of the
limits and the published figures. (tests/microbench/test_core.py renders real PNGs where
matplotlib is installed.)"""
from __future__ import annotations

import sys
import types

import pytest

from microbench.core import all_benchmarks
from microbench.results import make_result


class _Recorder:
    def __init__(self, log, name):
        self._log, self._name = log, name

    def __getattr__(self, attr):
        def call(*args, **kwargs):
            self._log.append((self._name, attr, args, kwargs))
            if attr == "subplots":
                n = args[1] if len(args) > 1 else 1
                axes = [_Recorder(self._log, f"ax{i}") for i in range(n)] if n > 1 else _Recorder(self._log, "ax")
                return _Recorder(self._log, "fig"), axes
            if attr in ("bar", "barh"):
                return []
            return _Recorder(self._log, f"{self._name}.{attr}")
        return call


@pytest.fixture()
def drawn(monkeypatch):
    log = []
    mpl = types.ModuleType("matplotlib")
    mpl.use = lambda *a, **k: None
    pyplot = _Recorder(log, "plt")
    mpl.pyplot = pyplot
    monkeypatch.setitem(sys.modules, "matplotlib", mpl)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", pyplot)
    return log


def _results():
    out = []
    for name, bench in all_benchmarks().items():
        for c in bench.cases(True):
            for m in c.metrics:
                v = (m.limit.max / 2 if m.limit.max else 2 * m.limit.min if m.limit.min else 1.0)
                extra = dict(c.extra, iters=c.iters, grid=c.grid, block=c.block)
                out.append(make_result(name, c.variant, c.impl, m.name, m.unit, [v] * 3, m.limit,
                                       model=c.model, extra=extra, headline=m.headline))
    return out


def test_every_figure_is_drawn_once_and_closed(drawn, tmp_path):
    from microbench.plot import plot_all
    paths = plot_all(_results(), str(tmp_path), "Test GPU")
    names = sorted(p.rsplit("/", 1)[-1] for p in paths)
    assert names == sorted(["smem_conflicts.png", "smem_patterns.png", "latency.png", "ffma.png",
                            "smem_latency_forms.png", "smem_matrix.png", "smem_atomic.png",
                            "smem_async_copy.png", "smem_bulk_copy.png", "smem_cluster.png",
                            "smem_carveout.png"])
    saved = [c[2][0] for c in drawn if c[1] == "savefig"]
    assert saved == paths
    assert sum(c[1] == "close" for c in drawn) == len(paths)


def _figure_calls(drawn, filename):
    """The calls between the subplots() that starts a figure and its savefig."""
    end = next(i for i, c in enumerate(drawn) if c[1] == "savefig" and c[2][0].endswith(filename))
    start = max(i for i, c in enumerate(drawn[:end]) if c[1] == "subplots")
    return drawn[start:end]


def test_bar_figures_draw_the_bandwidth_limit_and_every_variant(drawn, tmp_path):
    from microbench.plot import plot_all
    results = _results()
    plot_all(results, str(tmp_path))
    for fig in ("smem_bulk_copy.png", "smem_cluster.png", "smem_patterns.png"):
        calls = _figure_calls(drawn, fig)
        assert any(c[1] == "axhline" and c[2] == (128,) for c in calls), fig
    bulk = {r.variant for r in results if r.name == "smem.bulk_copy" and r.metric == "bytes_per_clk_sm"}
    ticks = next(c for c in _figure_calls(drawn, "smem_bulk_copy.png") if c[1] == "set_xticks")
    assert set(ticks[2][1]) == bulk


def test_latency_forms_show_the_published_figures(drawn, tmp_path):
    from microbench.plot import plot_all
    plot_all(_results(), str(tmp_path))
    lines = [c for c in _figure_calls(drawn, "smem_latency_forms.png") if c[1] == "axvline"]
    assert [c[2][0] for c in lines] == [29.0, 29.9]
    assert all(c[3]["label"].startswith("published: ") for c in lines)
