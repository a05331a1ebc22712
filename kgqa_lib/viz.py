"""Figures. ``save_fig`` writes ``figures/<notebook>__<name>.png`` (stable bytes: no timestamps)."""

from __future__ import annotations

from pathlib import Path

from .paths import figures_dir


def save_fig(fig, notebook: str, name: str, dpi: int = 120) -> Path:
    path = figures_dir() / f"{notebook}__{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi, bbox_inches="tight", metadata={"Software": None})
    return path


def metric_bars(ax, table, metric: str, label_col: str = "method"):
    """Bars of ``metric`` per row of a report table, with its bootstrap CI as error bars."""
    means = table[metric].to_numpy(dtype=float)
    cis = table[f"{metric}_ci"].tolist()
    lower = [m - lo for m, (lo, _) in zip(means, cis)]
    upper = [hi - m for m, (_, hi) in zip(means, cis)]
    ax.bar(table[label_col].astype(str), means, yerr=[lower, upper], capsize=6, color=["#4C72B0", "#DD8452", "#55A868", "#C44E52"][: len(means)])
    ax.set_ylim(0, 1)
    ax.set_ylabel(metric)
    return ax
