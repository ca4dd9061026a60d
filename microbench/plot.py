"""Figures from results (matplotlib, headless): PNG files in a folder.

- smem_conflicts.png: bytes/clk/SM against n-way bank conflicts, LDS and STS, 32/64/128-bit,
  SASS and CUDA-C, with the 128/n line;
- smem_patterns.png: every shared-memory pattern's bandwidth next to the bank model;
- latency.png: latencies (cycles) as bars, SASS beside CUDA-C;
- ffma.png: FFMA/clk/SM against warps per SM for each stall count / yield setting, and the
  register-bank variants;
- smem_latency_forms.png: the shared-memory chase forms beside the published figures;
- smem_matrix.png, smem_atomic.png, smem_async_copy.png, smem_cluster.png,
  smem_carveout.png: each benchmark's variants as bars, SASS beside CUDA-C (and the bank
  model where there is one).
Results with an error are left out (they have no figure).
"""
from __future__ import annotations

import os
from typing import Sequence

from .results import Result

COLORS = {4: "tab:blue", 8: "tab:orange", 16: "tab:green"}


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _ok(results: Sequence[Result], name: str, metric: str = None) -> list[Result]:
    return [r for r in results if r.name == name and r.value is not None
            and (metric is None or r.metric == metric)]


def plot_all(results: Sequence[Result], outdir: str, device: str = "") -> list[str]:
    os.makedirs(outdir, exist_ok=True)
    written = []
    for fn in (plot_conflicts, plot_patterns, plot_latency, plot_ffma, plot_latency_forms):
        path = fn(results, outdir, device)
        if path:
            written.append(path)
    for name, metric, unit in BAR_FIGURES:
        path = plot_bars(results, outdir, name, metric, unit, device)
        if path:
            written.append(path)
    return written


def plot_conflicts(results, outdir, device=""):
    rs = [r for r in _ok(results, "smem.bandwidth", "bytes_per_clk_sm") if r.extra.get("ways")]
    if not rs:
        return None
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), sharey=True)
    for ax, op in zip(axes, ("LDS", "STS")):
        for width in (4, 8, 16):
            for impl, style in (("sass", "-o"), ("cuda", "--x")):
                pts = sorted((r.extra["ways"], r.value) for r in rs
                             if r.extra.get("op") == op and r.extra.get("width") == width and r.impl == impl)
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], style, color=COLORS[width],
                            label=f"{op.lower()}{width * 8} {impl}")
        ways = [1, 2, 4, 8, 16, 32]
        ax.plot(ways, [128 / n for n in ways], ":", color="gray", label="128 / n")
        ax.axhline(128, color="red", lw=0.8, ls=":")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.set_xticks(ways, [str(w) for w in ways])
        ax.set_xlabel("lane stride = n x access width (n-way conflict for 32-bit)")
        ax.set_title(f"{op}: bandwidth vs bank conflicts")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("bytes / clock / SM")
    fig.suptitle(f"Shared memory bank conflicts {device}".strip())
    fig.tight_layout()
    path = os.path.join(outdir, "smem_conflicts.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_patterns(results, outdir, device=""):
    rs = _ok(results, "smem.bandwidth", "bytes_per_clk_sm")
    if not rs:
        return None
    return _bar_figure(rs, os.path.join(outdir, "smem_patterns.png"),
                       f"Shared memory patterns {device}".strip(), "bytes / clock / SM",
                       model_label="phase model", limits=(128,), width=(10, 0.28, 0))


def _variants(rs) -> list[str]:
    out = []
    for r in rs:
        if r.variant not in out:
            out.append(r.variant)
    return out


def _bar_figure(rs, path, title, ylabel, model_label, limits, width):
    """One bar per variant and implementation (SASS beside CUDA-C), the model as a tick where
    there is one, dotted red lines at the limits. width = (least, inches per variant, inches
    more)."""
    plt = _plt()
    variants = _variants(rs)
    least, per, more = width
    fig, ax = plt.subplots(figsize=(max(least, per * len(variants) + more), 5.5))
    xs = range(len(variants))
    for impl, off, color in (("sass", -0.2, "tab:blue"), ("cuda", 0.2, "tab:orange")):
        vals = {r.variant: r.value for r in rs if r.impl == impl}
        ax.bar([x + off for x in xs], [vals.get(v, 0) for v in variants], width=0.4, color=color, label=impl)
    models = {r.variant: r.model for r in rs if r.model is not None}
    if models:
        ax.plot(list(xs), [models.get(v, float("nan")) for v in variants], "k_", ms=10, label=model_label)
    for lim in limits:
        ax.axhline(lim, color="red", lw=0.8, ls=":")
    ax.set_xticks(list(xs), variants, rotation=90, fontsize=7)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _hbar_figure(rs, label_of, path, title, xlabel, height, lines=(), legend_loc=None):
    """Horizontal bars, one row per label, SASS beside CUDA-C, each with its value written at
    its end; `lines`: (x, style, legend text) drawn as vertical lines. height = (inches per
    row, inches more)."""
    plt = _plt()
    labels = []
    for r in rs:
        if label_of(r) not in labels:
            labels.append(label_of(r))
    per, more = height
    fig, ax = plt.subplots(figsize=(9, per * len(labels) + more))
    ys = range(len(labels))
    for impl, off, color in (("sass", -0.2, "tab:blue"), ("cuda", 0.2, "tab:orange")):
        vals = {label_of(r): r.value for r in rs if r.impl == impl}
        bars = ax.barh([y + off for y in ys], [vals.get(lab, 0) for lab in labels], height=0.4,
                       color=color, label=impl)
        for b, lab in zip(bars, labels):
            if lab in vals:
                ax.text(b.get_width(), b.get_y() + b.get_height() / 2, f" {vals[lab]:.1f}",
                        va="center", fontsize=7)
    for x, style, text in lines:
        ax.axvline(x, color="black", lw=0.9, ls=style, label=text)
    ax.set_yticks(list(ys), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    if legend_loc:
        ax.legend(fontsize=7, loc=legend_loc)
    else:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_latency(results, outdir, device=""):
    rs = [r for r in results if r.value is not None and r.unit == "cycles" and r.metric == "latency"]
    if not rs:
        return None
    return _hbar_figure(rs, lambda r: f"{r.name.split('.', 1)[1]}: {r.variant}",
                        os.path.join(outdir, "latency.png"), f"Latencies {device}".strip(),
                        "cycles", height=(0.32, 1.5))


def plot_ffma(results, outdir, device=""):
    issue = _ok(results, "inst.ffma_issue", "ffma_per_clk_sm")
    banks = _ok(results, "inst.ffma_banks", "cycles_per_ffma")
    if not issue and not banks:
        return None
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    ax = axes[0]
    series: dict[str, list] = {}
    for r in issue:
        if r.impl == "sass":
            key = f"stall={r.extra.get('stall')} {'Y' if r.extra.get('yield') else '-'}"
        else:
            key = "CUDA-C (ptxas)"
        series.setdefault(key, []).append((r.extra.get("warps"), r.value))
    for key, pts in series.items():
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "-o" if "CUDA" not in key else "--x", label=key)
    ax.axhline(128, color="red", lw=0.8, ls=":")
    ax.set_xscale("log", base=2)
    ax.set_xticks([4, 8, 16, 32], ["4", "8", "16", "32"])
    ax.set_xlabel("warps per SM")
    ax.set_ylabel("FFMA / clock / SM")
    ax.set_title("FFMA stream: stall count and yield")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    ax = axes[1]
    if banks:
        labels = [r.variant for r in banks]
        ax.barh(range(len(labels)), [r.value for r in banks],
                color=["tab:blue" if r.impl == "sass" else "tab:orange" for r in banks])
        ax.set_yticks(range(len(labels)), labels, fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("cycles per FFMA, one warp")
        ax.set_title("Register banks and reuse")
    fig.suptitle(f"FFMA {device}".strip())
    fig.tight_layout()
    path = os.path.join(outdir, "ffma.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# Benchmarks drawn as bars, one figure each: (benchmark, metric, axis label).
BAR_FIGURES = (
    ("smem.matrix", "bytes_per_clk_sm", "bytes / clock / SM"),
    ("smem.atomic", "atomics_per_clk_sm", "lane atomics / clock / SM"),
    ("smem.async_copy", "bytes_per_clk_sm", "bytes / clock / SM"),
    ("smem.bulk_copy", "bytes_per_clk_sm", "bytes / clock / SM"),
    ("smem.cluster", "bytes_per_clk_sm", "bytes / clock / SM"),
    ("smem.carveout", "bytes_per_clk_sm", "bytes / clock / SM"),
)

# Published shared-memory load latencies on H100 (cycles): drawn on smem_latency_forms.png.
PUBLISHED_H100 = (("Luo et al. 29.0", 29.0), ("mt4g 29.9", 29.9))


def plot_bars(results, outdir, name, metric, unit, device=""):
    """One bar per variant and implementation, the bank model as a tick where there is one."""
    rs = _ok(results, name, metric)
    if not rs:
        return None
    limits = {r.limit.get("max") for r in rs if r.limit and r.limit.get("max")}
    return _bar_figure(rs, os.path.join(outdir, name.replace(".", "_") + ".png"),
                       f"{name} {device}".strip(), unit, model_label="bank model",
                       limits=sorted(limits), width=(7, 0.35, 2))


def plot_latency_forms(results, outdir, device=""):
    rs = _ok(results, "smem.latency_forms", "latency")
    if not rs:
        return None
    lines = [(value, style, f"published: {text}")
             for (text, value), style in zip(PUBLISHED_H100, ("--", ":"))]
    return _hbar_figure(rs, lambda r: r.variant, os.path.join(outdir, "smem_latency_forms.png"),
                        f"Shared-memory latency by chase form {device}".strip(),
                        "cycles per dependent load", height=(0.34, 1.8), lines=lines,
                        legend_loc="lower right")
