"""What the walkthrough notebooks show of a method's stages: small tables and texts built from the
stages' outputs (FuSIC's feedback rounds, ToG's prunings and beam), so a notebook calls one function per
stage instead of defining its own display helpers."""

from __future__ import annotations

from typing import Any


def first_and_count(items: list[str], width: int = 80, sep: str = ", ") -> str:
    """As many of ``items`` as fit in ``width`` characters joined by ``sep`` (at least one), then "… and N
    more" for the rest: a long list in a table cell (pandas shows ``display.max_colwidth`` = 90 in the
    notebooks) without a name cut in the middle."""
    items = [str(x) for x in items]
    kept: list[str] = []
    for i, x in enumerate(items):
        tail = f"{sep}… and {len(items) - i - 1} more" if i < len(items) - 1 else ""
        if kept and len(sep.join(kept + [x]) + tail) > width:
            break
        kept.append(x)
    rest = len(items) - len(kept)
    return sep.join(kept) + (f"{sep}… and {rest} more" if rest else "")


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


def tog_relations(step, width: int = 80):
    """ToG's relation pruning at one depth: per beam entity, its candidate relations (those that fit
    in ``width`` characters and how many more), those kept with their scores, whether the LLM was called, parse errors."""
    import pandas as pd

    return pd.DataFrame([(r.entity, len(r.candidates), first_and_count(r.candidates, width, "; "),
                          ", ".join(f"{n} ({sc:.2f})" for n, sc in r.kept), "yes" if r.called else "no", r.error or "")
                         for r in step.relations],
                        columns=["from", "relations", "shown", "kept (score)", "LLM call", "parse"])


def tog_entities(step, width: int = 80):
    """ToG's entity pruning at one depth: per followed relation, the candidates with their path scores
    (those that fit in ``width`` characters and how many more)."""
    import pandas as pd

    return pd.DataFrame([(e.relation, first_and_count([f"{c} ({sc:.2f})" for c, sc in zip(e.candidates, e.scores)], width),
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


def kbbinder_layers(outcomes: list[Any], vote: Any = None, max_candidates: int = 3) -> tuple[list, list, list]:
    """(layers, edges, titles) for :func:`~kgqa_lib.viz.draw_reasoning_path`: KB-BINDER from drafts to the
    vote. Column 0: the distinct drafts as written (identical samples merged, their indexes named), so a
    relation drafted forward and one drafted reversed, ``(R r)``, are different boxes; column 1: each
    distinct draft's ``max_candidates`` best-scored bound candidates with what their execution returned
    (``not run``: one before them answered); column 2: the answer sets the drafts reached with their votes,
    and "no answer" for the drafts that reached none; column 3: the answer ``vote`` chose
    (:func:`~kgqa_lib.methods.kbbinder.vote`; without it, no column 3)."""
    from ..kg.graph import normalise_label

    groups: dict[str, list[Any]] = {}
    for o in outcomes:
        groups.setdefault(o.draft.sexpr or f"(draft {o.draft.index}: {o.status})", []).append(o)
    draft_name = {}
    for sexpr, os_ in groups.items():
        ix = [o.draft.index for o in os_]
        draft_name[sexpr] = (f"draft {ix[0]}" if len(ix) == 1 else f"drafts {', '.join(map(str, ix))}") + (
            f": {sexpr}" if os_[0].draft.sexpr else f": {os_[0].status}")
    answer_sets: dict[frozenset, list[Any]] = {}
    for o in outcomes:
        if o.answers:
            answer_sets.setdefault(frozenset(normalise_label(a) for a in o.answers), []).append(o)
    set_name = {k: first_and_count(os_[0].answers, 40) + f" ({len(os_)} vote{'s' if len(os_) > 1 else ''})"
                for k, os_ in answer_sets.items()}
    silent = [o for o in outcomes if not o.answers]
    no_answer = f"no answer ({len(silent)} draft{'s' if len(silent) != 1 else ''})"
    layers: list[list[str]] = [list(draft_name.values()), [], list(set_name.values()) + ([no_answer] if silent else [])]
    edges: list[tuple[int, str, str]] = []
    for sexpr, os_ in groups.items():
        o = os_[0]
        ran = {e["sexpr"]: e for e in o.executions}
        short = f"d{o.draft.index}"  # the first of the merged drafts
        for c in o.candidates[:max_candidates]:
            e = ran.get(c.sexpr)
            label = f"{short}: " + " / ".join(c.choice) + " → " + (
                "not run" if e is None else f"{e['status']}: {e['n']} answer{'s' if e['n'] != 1 else ''}" if e["n"]
                else e["status"])
            layers[1].append(label)
            edges.append((0, draft_name[sexpr], label))
            if e is not None and o.answers and c.sexpr == o.winner:
                edges.append((1, label, set_name[frozenset(normalise_label(a) for a in o.answers)]))
            elif e is not None and not o.answers:
                edges.append((1, label, no_answer))
    titles = ["drafts as written (identical samples merged; (R r) follows r backwards)",
              f"each draft's best {max_candidates} bound candidates (d0: of draft 0) → execution", "answer sets the drafts reached (votes)"]
    if vote is not None:
        final = first_and_count(vote.answers, 40) if vote.answers else "no answer"
        layers.append([final])
        titles.append("the vote's answer")
        won = next((k for k, os_ in answer_sets.items() if any(o.draft.index == vote.winner for o in os_)), None)
        if won is not None:
            edges.append((2, set_name[won], final))
    return [list(dict.fromkeys(x)) for x in layers], list(dict.fromkeys(edges)), titles


def keqing_layers(steps: list[Any], label: Any) -> tuple[list, list, list]:
    """(layers, edges, titles) for :func:`~kgqa_lib.viz.draw_reasoning_path`: Keqing's sub-questions as
    columns. Column 0: the first sub-question's seed entities (named by ``label``, e.g. ``kg.label``); then
    per sub-question the answers its reasoning kept, the edges of the chosen candidate groups' triples that
    reached a kept answer, and a title naming the sub-question and the relation chains it chose."""
    layers = [[label(v) for v in steps[0].seeds]] if steps else []
    layers += [[label(v) if "://" in v else v for v in st.reasoning.answers] for st in steps]
    edges = []
    for i, st in enumerate(steps):
        kept = set(st.reasoning.answers)
        for c in st.reasoning.chosen:
            edges += [(i, h, t) for (h, _, t), v in zip(st.groups[c].triples, st.groups[c].reached) if v in kept]
    titles = ["topic entity"] + [f"{st.sub.id}: " + " / ".join(c for i in st.reasoning.chosen for c in st.groups[i].chain)
                                 for st in steps]
    return layers, edges, titles


def tog_answer(result: Any, gold: list[str]) -> str:
    """Where ToG's answer came from, as the method decided it (its ``summary`` stage: the judge's answer after a
    "yes", the paths, or the LLM's own knowledge), the answer with its Hits@1 and F1 against ``gold``, why the
    search stopped, and the LLM calls per kind; with the answering stage's reply when one was asked."""
    from .metrics import score

    summary = next(st.output for st in result.trace if st.name == "summary")
    scores = {k: v for k, v in score(result.answers, gold).items() if k in ("hits@1", "f1")}
    lines = [f"answer from {summary['answer_from'].replace('_', ' ')}: {result.answers} {scores}",
             f"search stopped: {summary['stopped']} after {summary['depth_reached']} depth(s) | LLM calls: {summary['calls']}"]
    asked = next((st.output for st in result.trace if st.name.startswith("answer_from_")), None)
    if asked is not None:
        lines.append("the answering call replied: " + str(getattr(asked, "text", asked)).strip())
    return "\n".join(lines)


def tog_search_state(step: Any) -> str | None:
    """Why ToG's search stops after ``step`` — ``beam_empty``, ``judged_sufficient`` (the judge said yes) — or
    None when it goes on (the judge said no, or was not asked: the depth floor)."""
    if not step.beam:
        return "beam_empty"
    return "judged_sufficient" if step.judgement is not None and step.judgement.sufficient else None


def tog_deeper(question: str, steps: list[Any], ctx: Any, s: Any, kg: Any, display: Any = None) -> str:
    """Notebook 41: ToG's search past ``steps`` (explored and judged by the notebook), depth after depth as
    :func:`~kgqa_lib.methods.tog.beam_search` goes — explore, then the judge unless the depth floor skips it —
    until the judge says yes, the beam empties or ``s.depth``. Each new depth's prunings and beam go to
    ``display`` (IPython's by default), the paths and the judge's reply are printed. Appends the new steps and
    returns why the search stopped."""
    from ..methods import tog as T

    if display is None:
        from IPython.display import display

    stopped = tog_search_state(steps[-1])
    while not stopped and len(steps) < s.depth:
        step = T.explore_depth(question, steps[-1].beam, ctx, len(steps) + 1, s)
        steps.append(step)
        display(tog_relations(step), tog_entities(step), tog_beam(step))
        step.judge_skipped = T.judge_skip(step.depth, s.min_depth) if step.beam else None
        if step.beam and step.judge_skipped is None:
            step.judgement = T.judge(question, step.beam, ctx, s.max_triples)
            print(T.paths_text(step.beam, kg, s.max_triples), "\n---\n" + step.judgement.text)
        stopped = tog_search_state(step)
    return stopped or "max_depth"
