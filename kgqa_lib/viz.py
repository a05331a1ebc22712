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


def draw_triples(ax, triples, title: str = "", highlight=(), color: str = "#4C72B0", max_triples: int = 25):
    """A small knowledge graph drawn from ``(s, r, o)`` triples (networkx spring layout, fixed seed).
    Nodes named in ``highlight`` (e.g. the gold answers) are drawn in orange."""
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
    hl = {str(h).lower() for h in highlight}
    colors = ["#DD8452" if n.lower() in hl else color for n in g.nodes]
    nx.draw_networkx_nodes(g, pos, ax=ax, node_color=colors, node_size=260, alpha=0.85)
    nx.draw_networkx_edges(g, pos, ax=ax, arrows=True, arrowsize=10, edge_color="#888888", width=1.0)
    nx.draw_networkx_labels(g, pos, ax=ax, labels={n: "\n".join(textwrap.wrap(n, 18)) for n in g.nodes}, font_size=7)
    edge_labels = {(u, v): d["label"] for u, v, d in g.edges(data=True)}
    nx.draw_networkx_edge_labels(g, pos, ax=ax, edge_labels=edge_labels, font_size=6, font_color="#444444")
    return ax


def draw_reasoning_path(ax, layers, edges, titles=(), highlight=(), max_per_layer: int = 7):
    """A reasoning path as columns: ``layers[i]`` are the entities reached after step ``i``
    (layer 0: the seeds), ``edges`` are ``(layer, from, to)`` links drawn between neighbouring
    columns. A column with more entities than ``max_per_layer`` shows a "+N more" box. Entities
    named in ``highlight`` (the gold answers) are drawn in orange."""
    import textwrap

    hl = {str(h).lower() for h in highlight}
    pos: dict[tuple[int, str], tuple[float, float]] = {}
    for i, layer in enumerate(layers):
        shown = list(layer)[:max_per_layer]
        n = len(shown) + (1 if len(layer) > max_per_layer else 0)
        for j, name in enumerate(shown):
            y = 1 - (j + 0.5) / max(n, 1)
            pos[i, str(name)] = (i, y)
            ax.text(i, y, "\n".join(textwrap.wrap(str(name), 16)), ha="center", va="center", fontsize=7,
                    bbox={"boxstyle": "round,pad=0.3", "alpha": 0.9,
                          "facecolor": "#DD8452" if str(name).lower() in hl else "#DCE6F2", "edgecolor": "#4C72B0"})
        if len(layer) > max_per_layer:
            ax.text(i, 1 - (n - 0.5) / n, f"+{len(layer) - max_per_layer} more", ha="center", va="center",
                    fontsize=7, color="#555555")
        if i < len(titles):
            ax.text(i, 1.08, "\n".join(textwrap.wrap(str(titles[i]), 26)), ha="center", va="bottom", fontsize=7.5)
    for i, a, b in edges:
        if (i, str(a)) in pos and (i + 1, str(b)) in pos:
            (x0, y0), (x1, y1) = pos[i, str(a)], pos[i + 1, str(b)]
            ax.annotate("", xy=(x1 - 0.22, y1), xytext=(x0 + 0.22, y0),
                        arrowprops={"arrowstyle": "->", "color": "#888888", "lw": 0.8})
    ax.set_xlim(-0.5, len(layers) - 0.5)
    ax.set_ylim(-0.05, 1.25)
    ax.axis("off")
    return ax
