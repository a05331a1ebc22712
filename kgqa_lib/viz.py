"""Figures. ``save_fig`` writes ``figures/<notebook>__<name>.png`` (stable bytes: no timestamps)."""

from __future__ import annotations

from pathlib import Path

from .evaluate.walkthrough import NOT_SELECTED  # a candidate a step did not keep: drawn grey, dashed
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


GOLD = "#DD8452"  # the colour of a gold answer in every graph drawing


def is_gold(name: str, highlight) -> bool:
    """Whether a drawn node names a gold answer: its text, or its text before a " (…)" note such as a vote
    count, equals one of ``highlight`` (case-insensitive)."""
    text = str(name).lower()
    return any(text == h or text.startswith(h + " (") for h in {str(h).lower() for h in highlight})


def gold_legend(ax, highlight, drawn, max_named: int | None = 3, extra=()) -> None:
    """The legend entry of the gold colour: "gold answer" when a drawn node is gold, else a line that says
    the drawing does not reach the gold answer — naming the gold answers (the first ``max_named``, then
    "… and N more"; None: all). ``extra``: further legend handles. Nothing without ``highlight`` or ``extra``."""
    from matplotlib.patches import Patch

    highlight = [str(h) for h in highlight]
    handles = []
    if highlight:
        cut = len(highlight) if max_named is None else max_named
        named = ", ".join(highlight[:cut]) + (f" … and {len(highlight) - cut} more" if len(highlight) > cut else "")
        if any(is_gold(n, highlight) for n in drawn):
            handles.append(Patch(facecolor=GOLD, edgecolor="#4C72B0", label=f"gold answer ({named})"))
        else:
            handles.append(Patch(facecolor="white", edgecolor="#999999", label=f"gold answer not in this drawing: {named}"))
    handles += list(extra)
    if handles:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(0.0, 0.0), fontsize=7, frameon=False)


def draw_triples(ax, triples, title: str = "", highlight=(), color: str = "#4C72B0", max_triples: int = 25):
    """A small knowledge graph drawn from ``(s, r, o)`` triples (networkx spring layout, fixed seed).
    Nodes named in ``highlight`` (e.g. the gold answers) are drawn in orange, with a legend entry saying so
    (or that the drawing does not reach them: :func:`gold_legend`)."""
    import textwrap

    import networkx as nx

    g = nx.MultiDiGraph()
    for s, r, o in list(triples)[:max_triples]:
        g.add_edge(str(s), str(o), label=str(r))
    ax.set_title(title, fontsize=10)
    ax.axis("off")
    if not g.number_of_nodes():
        ax.text(0.5, 0.5, "(empty)", ha="center", va="center", transform=ax.transAxes)
        return ax
    pos = nx.spring_layout(g, seed=0, k=1.6 / max(1, g.number_of_nodes()) ** 0.5)
    colors = [GOLD if is_gold(n, highlight) else color for n in g.nodes]
    nx.draw_networkx_nodes(g, pos, ax=ax, node_color=colors, node_size=260, alpha=0.85)
    nx.draw_networkx_edges(g, pos, ax=ax, arrows=True, arrowsize=10, edge_color="#888888", width=1.0)
    nx.draw_networkx_labels(g, pos, ax=ax, labels={n: "\n".join(textwrap.wrap(n, 18)) for n in g.nodes}, font_size=7)
    edge_labels = {(u, v): d["label"] for u, v, d in g.edges(data=True)}
    nx.draw_networkx_edge_labels(g, pos, ax=ax, edge_labels=edge_labels, font_size=6, font_color="#444444")
    gold_legend(ax, highlight, g.nodes)
    return ax


def draw_reasoning_path(ax, layers, edges, titles=(), highlight=(), max_per_layer: int = 7,
                        max_named: int | None = 3):
    """A reasoning path as columns: ``layers[i]`` are the entities reached after step ``i``
    (layer 0: the seeds), ``edges`` are ``(layer, from, to)`` links drawn between neighbouring
    columns. A column with more entities than ``max_per_layer`` shows a "+N more" box. Entities
    named in ``highlight`` (the gold answers; a box whose text before " (" names one too) are drawn in
    orange, with a legend entry saying so or that no drawn box is gold (:func:`gold_legend`, naming
    ``max_named`` of them; None: all). A name ending in :data:`NOT_SELECTED` (a candidate the step did not
    keep) is drawn with a grey dashed border, the edges into it dashed, and the legend says so."""
    import textwrap

    from matplotlib.patches import Patch

    pos: dict[tuple[int, str], tuple[float, float]] = {}
    for i, layer in enumerate(layers):
        shown = list(layer)[:max_per_layer]
        n = len(shown) + (1 if len(layer) > max_per_layer else 0)
        for j, name in enumerate(shown):
            y = 1 - (j + 0.5) / max(n, 1)
            pos[i, str(name)] = (i, y)
            dim = str(name).endswith(NOT_SELECTED)
            ax.text(i, y, "\n".join(textwrap.wrap(str(name), 16)), ha="center", va="center", fontsize=7,
                    color="#555555" if dim else "black",
                    bbox={"boxstyle": "round,pad=0.3", "alpha": 0.9,
                          "facecolor": GOLD if is_gold(name, highlight) else "#EEEEEE" if dim else "#DCE6F2",
                          "edgecolor": "#999999" if dim else "#4C72B0", "linestyle": "--" if dim else "-"})
        if len(layer) > max_per_layer:
            ax.text(i, 1 - (n - 0.5) / n, f"+{len(layer) - max_per_layer} more", ha="center", va="center",
                    fontsize=7, color="#555555")
        if i < len(titles):
            ax.text(i, 1.08, "\n".join(textwrap.wrap(str(titles[i]), 26)), ha="center", va="bottom", fontsize=7.5)
    for i, a, b in edges:
        if (i, str(a)) in pos and (i + 1, str(b)) in pos:
            (x0, y0), (x1, y1) = pos[i, str(a)], pos[i + 1, str(b)]
            dim = str(b).endswith(NOT_SELECTED)
            ax.annotate("", xy=(x1 - 0.22, y1), xytext=(x0 + 0.22, y0),
                        arrowprops={"arrowstyle": "->", "color": "#BBBBBB" if dim else "#888888", "lw": 0.8,
                                    "linestyle": "--" if dim else "-"})
    ax.set_xlim(-0.5, len(layers) - 0.5)
    ax.set_ylim(-0.05, 1.25)
    ax.axis("off")
    dimmed = any(name.endswith(NOT_SELECTED) for _, name in pos)
    extra = [Patch(facecolor="#EEEEEE", edgecolor="#999999", linestyle="--",
                   label="(not selected): a candidate the step did not keep")] if dimmed else []
    gold_legend(ax, highlight, [name for _, name in pos], max_named, extra)
    return ax


def ci_panels(panels, paper_label: str = "the paper (GPT-3.5)", width: float = 4.4, height: float = 3.4):
    """One panel per ``{"title", "ylabel", "bars": [{"label", "value", "lo", "hi", "paper", "color"}]}``:
    bars in points (0–100) with their 95% CI, the paper's value as a red dot where it has one, and "not run
    yet" where ``value`` is None. Returns the figure."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(width * len(panels), height), sharey=True, squeeze=False)
    for ax, panel in zip(axes[0], panels):
        for i, b in enumerate(panel["bars"]):
            if b["value"] is None:
                ax.text(i, 2, "not run yet", rotation=90, ha="center", va="bottom", fontsize=7, color="#666666")
            else:
                ax.bar(i, b["value"], yerr=[[b["value"] - b["lo"]], [b["hi"] - b["value"]]], capsize=3, color=b["color"])
            if b.get("paper") is not None:
                ax.plot(i, b["paper"], "o", color="#C44E52", label=paper_label if not ax.get_legend_handles_labels()[0] else None)
        ax.set_xticks(range(len(panel["bars"])), [b["label"] for b in panel["bars"]], rotation=30, ha="right", fontsize=8)
        ax.set_title(panel["title"], fontsize=9)
        ax.set_ylabel(panel["ylabel"])
        ax.yaxis.set_tick_params(labelleft=True)
        ax.set_ylim(0, 100)
    axes[0][0].legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig


def score_density(ax, groups: dict, bins: int = 32, lo: float = 0.2, hi: float = 1.0, xlabel: str = "cosine"):
    """Step histograms normalised to density, one per named group of scores (``{"name": [scores]}``), so
    groups of different sizes compare by shape; the legend gives each group's size and median."""
    import numpy as np

    edges = np.linspace(lo, hi, bins + 1)
    for (name, scores), color in zip(groups.items(), ("#DD8452", "#4C72B0", "#55A868", "#999999")):
        if len(scores):
            ax.hist(scores, bins=edges, density=True, histtype="step", lw=1.6, color=color,
                    label=f"{name} (n={len(scores)}, median {np.median(scores):.2f})")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("density")
    ax.legend(fontsize=7)
    return ax


def dodged_errorbars(ax, series: dict, step: float = 0.06, log2: bool = False):
    """One line per named series ``{label: (x, y, lo, hi)}`` with its 95% CI as error bars, each series
    shifted sideways by ``step`` (a factor on a log2 axis) so that equal values and overlapping intervals
    stay visible; the ticks stay at the true x values."""
    import numpy as np

    xs = sorted({float(v) for x, *_ in series.values() for v in x})
    for i, (label, (x, y, lo, hi)) in enumerate(series.items()):
        shift = (i - (len(series) - 1) / 2) * step
        x = np.asarray(x, dtype=float)
        y, lo, hi = (np.asarray(v, dtype=float) for v in (y, lo, hi))
        ax.errorbar(x * 2 ** shift if log2 else x + shift, y, yerr=[y - lo, hi - y], marker="o", ms=4, capsize=3,
                    lw=1.2, label=label)
    if log2:
        ax.set_xscale("log", base=2)
    ax.set_xticks(xs, [f"{v:g}" for v in xs])
    ax.minorticks_off()
    return ax


def grouped_ci_bars(ax, groups: list, series: dict, notes: list | None = None):
    """Bars per group (x) and series (colour), ``series = {label: [(value, lo, hi) per group]}`` with the 95%
    CI as error bars (a ``None`` value: no bar); ``notes`` (one text per group) are written above each group."""
    n = len(series)
    width = 0.8 / max(1, n)
    top = 0.0
    for j, (label, cells) in enumerate(series.items()):
        shown = [(i, c) for i, c in enumerate(cells) if c is not None and c[0] is not None]
        for k, (i, (v, lo, hi)) in enumerate(shown):
            ax.bar(i - 0.4 + width * (j + 0.5), v, width, yerr=[[v - lo], [hi - v]], capsize=3, color=f"C{j}",
                   label=label if k == 0 else None)
            top = max(top, hi)
    ax.set_xticks(range(len(groups)), groups)
    for i, text in enumerate(notes or []):
        ax.text(i, top * 1.03, text, ha="center", va="bottom", fontsize=7)
    return ax


def pruning_sweep(sweep, dev: dict, paper_threshold: float, chosen: float):
    """Notebook 12: PG&AKV's pruning re-scored offline, one panel per set of ``dev`` (``{set: records}``):
    the share of dev questions with a gold answer in the pruned ground graph per threshold, a line per ``k``
    (``sweep``: rows of set, k, threshold, ``gold in G_g``), the share with one among the retrieved triples
    (the ceiling), the paper's threshold and the one chosen on dev."""
    import matplotlib.pyplot as plt
    import numpy as np

    from .evaluate.pgakv_analysis import gold_funnel

    fig, axes = plt.subplots(1, len(dev), figsize=(5 * len(dev), 3.2), sharey=True, squeeze=False)
    for ax, s in zip(axes[0], dev):
        for k, rows in sweep[sweep["set"] == s].groupby("k", sort=False):
            ax.plot(rows["threshold"], rows["gold in G_g"], marker="o", label=f"k = {k}")
        ax.axhline(np.mean([gold_funnel(r)["G_t"] for r in dev[s]]), color="#999999", ls=":",
                   label="gold among retrieved (G_t)")
        ax.axvline(paper_threshold, color="#C44E52", lw=1, ls="--", label="the paper's threshold")
        ax.axvline(chosen, color="black", lw=1, ls="-.", label="chosen on dev")
        ax.set_title(f"{s}, dev questions (n={len(dev[s])})", fontsize=9)
        ax.set_xlabel("pruning threshold (mean cosine of a subject's triples)")
    axes[0][0].set_ylabel("share of questions with a gold answer in G_g")
    axes[0][0].legend(fontsize=7)
    fig.suptitle("Pruning re-scored offline: what the ground graph keeps", y=1.02)
    return fig


FUNNEL_STAGES = ("G_p", "G_t", "G_g", "G_f")


def gold_funnel_lines(frame):
    """Notebook 14: the share of test questions with a gold answer at each stage of PG&AKV (sketch → retrieved
    → pruned → verified), a line per row of ``frame`` (indexed by set, with ``run``, ``n`` and a column per stage)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 3))
    for s, row in frame.iterrows():
        ax.plot(list(FUNNEL_STAGES), row[list(FUNNEL_STAGES)], marker="o", label=f"{s}, {row['run']} (n={row['n']})")
    ax.set_ylabel("share of test questions")
    ax.set_xlabel("stage: sketch → retrieved → pruned → verified")
    ax.set_ylim(0, 1)
    ax.set_title("A gold answer present at each stage of PG&AKV (test questions)", fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    return fig


def retrieved_paths(paths_table, retrievers: list, k: int, question: str):
    """Notebook 20: each retriever's top ``k`` candidate paths with their scores, the gold path in red
    (``paths_table``: rows of retriever, path, score, gold); BM25's score is on its own scale, the dense
    retrievers' a cosine."""
    import re

    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(retrievers), figsize=(6 * len(retrievers), 3.6), squeeze=False)
    for ax, name in zip(axes[0], retrievers):
        t = paths_table[paths_table.retriever == name]
        ax.barh(range(len(t)), t.score, color=["#C44E52" if g else "#4C72B0" for g in t.gold])
        ax.set_yticks(range(len(t)), [re.sub(r"\w+\.\w+\.(\w+)", r"\1", p.split(" → ", 1)[-1]) for p in t.path],
                      fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("BM25 score (its own scale, not a cosine)" if name == "bm25" else "cosine similarity", fontsize=8)
        ax.set_title(f"{name}: top {k} paths (red = the gold path)", fontsize=9)
    fig.suptitle(question, fontsize=9)
    fig.tight_layout()
    return fig


def overview_panels(ov, skip: tuple[str, ...] = ("FuSIC-KBQA",)):
    """Notebook 90: one panel per paper and metric of the overview ``ov`` (:func:`kgqa_lib.bench.overview.overview`):
    ours against the paper's values per question set (:func:`kgqa_lib.bench.overview.plot`); the papers in
    ``skip`` have their own figure."""
    import matplotlib.pyplot as plt

    from .bench.overview import plot, short_set

    groups = [g for g in dict.fromkeys(zip(ov["paper"], ov["metric"])) if g[0] not in skip]
    fig, axes = plt.subplots(len(groups), 1, figsize=(13, 3.3 * len(groups)), squeeze=False)
    for ax, (paper, metric) in zip(axes[:, 0], groups):
        rows = ov[(ov["paper"] == paper) & (ov["metric"] == metric)]
        note = "; GrailQA on a gold-fact fragment" if rows["set"].str.contains("fragment").any() else ""
        if paper == "PG&AKV" and rows["set"].str.contains("MetaQA").any():  # the column each set stands for
            note += "; the paper's ticks: SimpleQuestions beside simple and 1-hop, QALD-10 beside the others"
        methods = list(dict.fromkeys(rows["method"]))
        who = f" ({methods[0]} only)" if len(methods) == 1 else ""
        plot(ax, rows.assign(set=rows["set"].map(short_set)),
             f"{paper}, {metric}{who}: ours (local 1.5B model) and the paper's{note}")
        ax.set_xlabel("question set")
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    return fig


def gain_bars(ax, gaps: dict, ylabel: str, paper_label: str = "the paper (GPT-3.5)"):
    """Paired differences per question set and model (``{"groups", "paper", "series"}``, e.g.
    :func:`kgqa_lib.bench.pgakv_metaqa.qsm_gaps`): bars with their 95% CI per model, a line at 0, the paper's
    difference as red dots, and "not run yet" where no model has the difference."""
    grouped_ci_bars(ax, [g.replace(" ", "\n", 1) for g in gaps["groups"]], gaps["series"])
    ax.axhline(0, color="black", lw=0.8)
    ax.plot(range(len(gaps["groups"])), gaps["paper"], "o", color="#C44E52", label=paper_label)
    width = 0.8 / max(1, len(gaps["series"]))
    for j, cells in enumerate(gaps["series"].values()):  # where grouped_ci_bars draws no bar
        for i, c in enumerate(cells):
            if c is None or c[0] is None:
                ax.text(i - 0.4 + width * (j + 0.5), -1, "not run yet", rotation=90, ha="center", va="top",
                        fontsize=7, color=f"C{j}")
    ax.set_xlim(-0.6, len(gaps["groups"]) - 0.4)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=7)
    return ax
