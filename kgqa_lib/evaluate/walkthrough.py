"""What the walkthrough notebooks show of a method's stages: small tables and texts built from the
stages' outputs (FuSIC's feedback rounds, ToG's prunings and beam), so a notebook calls one function per
stage instead of defining its own display helpers."""

from __future__ import annotations

from typing import Any


def fusic_rounds(attempts, language: str = "sparql", feedback: str = "diagnostic") -> str:
    """Every generation round of FuSIC's execution-guided loop (:func:`~kgqa_lib.methods.fusic.egf_loop`'s
    attempts): its outcome (with up to five answers), the query in full, and — after a failed round —
    the feedback the LLM was sent (``feedback``: diagnostic or paper)."""
    from ..methods.fusic import feedback_turn

    out = []
    for i, a in enumerate(attempts):
        ex = a.execution
        out.append(f"── round {a.round}: {ex.status}" + (f", {len(ex.answers)} answers: {ex.answers[:5]}" if ex.ok else ""))
        out.append(ex.query or f"(no query in the reply: {a.response.strip()!r})")
        if i < len(attempts) - 1:  # a failed round is followed by its feedback
            out.append("feedback sent → " + feedback_turn(attempts[: i + 1], language, feedback).replace("\n", "\n    "))
        out.append("")
    return "\n".join(out)


def tog_relations(step):
    """ToG's relation pruning at one depth: per beam entity, its candidate relations (the first 80
    characters of the list), those kept with their scores, whether the LLM was called, parse errors."""
    import pandas as pd

    return pd.DataFrame([(r.entity, len(r.candidates), "; ".join(r.candidates)[:80],
                          ", ".join(f"{n} ({sc:.2f})" for n, sc in r.kept), "yes" if r.called else "no", r.error or "")
                         for r in step.relations],
                        columns=["from", "relations", "shown", "kept (score)", "LLM call", "parse"])


def tog_entities(step):
    """ToG's entity pruning at one depth: per followed relation, the candidates with their path scores."""
    import pandas as pd

    return pd.DataFrame([(e.relation, ", ".join(f"{c} ({sc:.2f})" for c, sc in zip(e.candidates, e.scores))[:110],
                          "yes" if e.called else "no", e.error or "") for e in step.entities],
                        columns=["followed", "candidates (path score)", "LLM call", "parse"])


def tog_beam(step):
    """The beam after one depth: each kept path's score and triples."""
    import pandas as pd

    return pd.DataFrame([(round(p.score, 3), " → ".join(f"({a} | {r} | {b})" for a, r, b in t))
                         for p, t in zip(step.beam, step.beam_triples)], columns=["score", "path"])


def tog_layers(steps: list[Any], topic_labels: list[str], look: Any = None) -> tuple[list, list, list]:
    """(layers, edges, titles) for :func:`~kgqa_lib.viz.draw_reasoning_path`: the topic entities, then the
    entities the beam holds after each of ``steps`` (and ``look``, a depth explored past ToG's stop, titled
    so), the edges the kept paths followed, and a title per layer naming the relations followed."""
    shown = list(steps) + ([look] if look is not None else [])
    layers, edges = [list(topic_labels)], []
    for i, st in enumerate(shown):
        pairs = list(zip(st.beam, st.beam_triples))
        layers.append(list(dict.fromkeys(t[-1][0] if p.hops[-1].inverse else t[-1][2] for p, t in pairs)))
        for p, t in pairs:
            a, _, b = t[-1]
            edges.append((i, *((b, a) if p.hops[-1].inverse else (a, b))))
    titles = ["topic entity"] + [f"depth {st.depth}{' (a look past the stop)' if st is look else ''}: "
                                 + ", ".join(dict.fromkeys(p.hops[-1].name for p in st.beam)) for st in shown]
    return layers, edges, titles


def kbbinder_layers(outcomes: list[Any], max_candidates: int = 4) -> tuple[list, list, list]:
    """(layers, edges, titles) for :func:`~kgqa_lib.viz.draw_reasoning_path`: KB-BINDER from drafts to
    answers — the distinct drafts (identical samples merged, with their count), the names each drafts
    (slots), what the binders bound them to (with scores), and the first draft's best-scored candidates
    with their execution (those not run: a candidate before them answered)."""
    drafts: dict[str, list[int]] = {}
    for o in outcomes:
        drafts.setdefault(o.draft.sexpr or f"(unreadable draft {o.draft.index})", []).append(o.draft.index)
    names = {s: f"draft {ix[0]}" + (f" (×{len(ix)})" if len(ix) > 1 else "") for s, ix in drafts.items()}
    slot_name = lambda b: f"{b.slot.kind}: {b.slot.text}"  # noqa: E731
    option_name = lambda o: f"{o.label} ({o.score:.2f})"  # noqa: E731
    layers: list[list[str]] = [list(names.values()), [], [], []]
    edges: list[tuple[int, str, str]] = []
    for o in outcomes:
        for b in o.bindings:
            layers[1].append(slot_name(b))
            edges.append((0, names[o.draft.sexpr or f"(unreadable draft {o.draft.index})"], slot_name(b)))
            for opt in b.options:
                layers[2].append(option_name(opt))
                edges.append((1, slot_name(b), option_name(opt)))
    first = next((o for o in outcomes if o.candidates), None)
    if first is not None:
        ran = {e["sexpr"]: f"{e['status']}, {e['n']} answers" for e in first.executions}
        for c in first.candidates[:max_candidates]:
            label = " / ".join(c.choice) + f" → {ran.get(c.sexpr, 'not run')}"
            layers[3].append(label)
            for b, chosen in zip(first.bindings, c.choice):
                edges += [(2, option_name(opt), label) for opt in b.options if opt.label == chosen]
    layers = [list(dict.fromkeys(x)) for x in layers]
    titles = ["drafts (identical samples merged)", "names drafted", "bound to (score)",
              f"candidates of {names.get(first.draft.sexpr, 'the first draft') if first else 'the first draft'}, best "
              "first → execution"]
    return layers, list(dict.fromkeys(edges)), titles
