"""What the walkthrough notebooks show of a method's stages: small tables and texts built from the
stages' outputs (PG&AKV's Cypher and verifier input, FuSIC's prompts, retriever training and feedback
rounds, Keqing's reasoning path, ToG's prunings and beam), so a notebook calls one function per stage
instead of defining its own display helpers."""

from __future__ import annotations

from typing import Any

#: ends the name of a candidate a step did not keep (:func:`keqing_layers`); :func:`kgqa_lib.viz.draw_reasoning_path`
#: draws such a box grey and dashed
NOT_SELECTED = " (not selected)"


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


def cypher_statements(pg: Any) -> str:
    """PG&AKV's parse of a sketch's Cypher (a :class:`~kgqa_lib.methods.pgakv.PseudoGraph`) in one line: its
    statements — the Cypher text split on ';', so one statement may hold several clauses — with the clause
    lines in them (CREATE, MERGE, MATCH, ...), those that did not parse as written (repaired line by line),
    the lines the repair dropped and the errors."""
    import re
    from collections import Counter

    clauses = Counter(m.upper() for m in re.findall(r"^\s*(CREATE|MERGE|MATCH|WITH|SET|DELETE|RETURN)\b", pg.cypher,
                                                    re.M | re.I))
    shown = ", ".join(f"{k} × {v}" for k, v in clauses.items()) or "none"
    return (f"statements (the Cypher split on ';'): {pg.statements}, holding {sum(clauses.values())} clause lines "
            f"({shown}); not parsed as written (repaired line by line): {pg.failed_statements}; "
            f"dropped lines: {pg.dropped_lines or 'none'}; errors: {pg.errors or 'none'}")


def verifier_facts(ground: Any, limit: int) -> str:
    """What of PG&AKV's ground graph ``G_g`` the verifier's prompt shows under "Facts from the knowledge graph":
    the kept subjects by mean cosine, best first, each subject's triples by cosine (the paper's sec. 3.2.2: the
    higher-scored triples closer to the sketch), at most ``limit`` (the setting ``ground_limit``)."""
    n = len(ground.triples)
    return (f"The facts are G_g: kept subjects by mean cosine, best first, each subject's triples by cosine (sec. 3.2.2: "
            f"the higher-scored closer to the sketch); at most ground_limit = {limit} triples: {min(n, limit)} of {n} "
            "shown.")


def stage_functions(method: Any) -> dict[str, str]:
    """The trace's stage names of a method (``tr.record("name", function, ...)`` in its source and in the
    helpers of its module it calls) → the function each stage calls: what a notebook that calls the functions
    one by one finds under another name in the trace."""
    import ast
    import inspect
    import textwrap

    out: dict[str, str] = {}
    seen: set[Any] = set()
    todo = [inspect.unwrap(method)]
    while todo:
        fn = todo.pop(0)
        if fn in seen:
            continue
        seen.add(fn)
        for node in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(fn)))):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            if (isinstance(f, ast.Attribute) and f.attr == "record" and len(node.args) >= 2
                    and isinstance(node.args[0], ast.Constant)):
                a = node.args[1]
                name = a.id if isinstance(a, ast.Name) else a.attr if isinstance(a, ast.Attribute) else ast.unparse(a)
                out.setdefault(str(node.args[0].value), name)
            elif isinstance(f, ast.Name):  # a helper of the same module may record stages too
                helper = fn.__globals__.get(f.id)
                if inspect.isfunction(helper) and helper.__module__ == fn.__module__:
                    todo.append(helper)
    return out


def some_of(items: list[Any], n: int = 10) -> str:
    """``items`` as a list when there are at most ``n``, else the first ``n`` and "+ k more"."""
    items = list(items)
    return f"{items}" if len(items) <= n else f"{items[:n]} + {len(items) - n} more"


def fusic_rounds(attempts, language: str = "sparql", feedback: str = "diagnostic", max_answers: int = 10) -> str:
    """Every generation round of FuSIC's execution-guided loop (:func:`~kgqa_lib.methods.fusic.egf_loop`'s
    attempts): its outcome (with its answers: all up to ``max_answers``, then "+ k more"), the query in full,
    and — after a failed round — the feedback the LLM was sent (``feedback``: diagnostic or paper)."""
    from ..methods.fusic import feedback_turn

    out = []
    for i, a in enumerate(attempts):
        ex = a.execution
        out.append(f"── round {a.round}: {ex.status}"
                   + (f", {len(ex.answers)} answers: {some_of(ex.answers, max_answers)}" if ex.ok else ""))
        out.append(ex.query or f"(no query in the reply: {a.response.strip()!r})")
        if i < len(attempts) - 1:  # a failed round is followed by its feedback
            out.append("feedback sent → " + feedback_turn(attempts[: i + 1], language, feedback).replace("\n", "\n    "))
        out.append("")
    return "\n".join(out)


def prompt_turns(messages: list[dict[str, str]], show: tuple[int, ...] = (0, 1, 2, -1)) -> str:
    """A chat prompt turn by turn, each under its role: the system message, the worked examples as
    earlier user/assistant turns ("exemplar i of n"), the question last; only the messages at ``show``
    (indexes; -1 the last), the others counted in one line."""
    n = len(messages)
    pairs = (n - 2) // 2 if n > 2 else 0
    keep = sorted({i % n for i in show if -n <= i < n})
    out, skipped = [], 0

    def label(i: int) -> str:
        role = messages[i]["role"]
        if i == 0 and role == "system":
            return "[system]"
        if i == n - 1:
            return f"[{role} · the question]"
        return f"[{role} · exemplar {(i + 1) // 2} of {pairs}]" if pairs else f"[{role}]"

    for i in range(n):
        if i not in keep:
            skipped += 1
            continue
        if skipped:
            out.append(f"(… {skipped} more message{'s' * (skipped != 1)}: further exemplar turns)\n")
            skipped = 0
        out.append(f"{label(i)}\n{messages[i]['content'].strip()}\n")
    if skipped:
        out.append(f"(… {skipped} more message{'s' * (skipped != 1)})")
    return "\n".join(out).rstrip()


def rerank_sizes_note(K: int, k_sizes: dict[str, int]) -> str:
    """FuSIC's re-ranking sizes per aspect: the retriever's top ``K`` in, the ``k`` the LLM keeps out, and
    whether the call selects (k < K) or only reorders (k ≥ K; the paper: k ≪ K)."""
    return "\n".join(f"{a}: K = {K} in, k = {k} kept: " + ("selects and orders" if k < K else
                                                           "k = K here, so re-ranking only reorders (the paper: k ≪ K)")
                     for a, k in k_sizes.items())


def fusic_training(retrievers: list[Any], task: str, shots: int, seed: int = 0):
    """The trained dense retriever among ``retrievers`` (None if there is none): a table of its training stages —
    questions, examples, batches (steps), the loss of the first and the last batch — and a note saying what an
    example and the loss are, with each few-shot question's number of examples."""
    import inspect

    import pandas as pd

    from ..embed.retrieval import train_dense
    from ..methods.fusic import (RecordedDense, get_task, prepared_domain, prepared_shots, trained_retriever,
                                training_examples)

    dense = next((r for r in retrievers if r.name == "dense" and hasattr(r, "training")), None)
    if dense is None:
        return None, "No trained dense retriever among the retrievers."
    t = get_task(task, seed)
    stages = [("source domain", prepared_domain(t.source.name))]
    if shots:
        stages.append(("target few shots", prepared_shots(task, shots, seed=seed)))
    rows = []
    for (name, prepared), report in zip(stages, dense.training):
        d = report.as_dict()
        rows.append({"questions": len(prepared), "examples": d["examples"], "steps": d["steps"],
                     "loss, first batch": d["first_loss"], "loss, last batch": d["last_loss"]})
    frame = pd.DataFrame(rows, index=[name for name, _ in stages][:len(rows)])
    epochs = inspect.signature(trained_retriever).parameters["epochs"].default
    batch = inspect.signature(train_dense).parameters["batch_size"].default
    note = ("An example is one (question, gold element) pair: a question gives one for its gold path, one per "
            "relation on it and one per answer type, each found among its own candidates.")
    if shots:
        per_q = [len(training_examples([p], seed=seed)) for p in stages[1][1]]
        note += f" The {len(per_q)} few-shot questions give {' + '.join(map(str, per_q))} = {sum(per_q)}."
    if isinstance(dense, RecordedDense):  # the fine-tuned MiniLM (dense_training=finetune, the default)
        note += (f" Steps: batches of {batch} over {epochs} epochs. The loss is the multiple-negatives ranking loss: "
                 "the cross-entropy of each question's scores, its own positive against the batch's other positives "
                 "and hard negatives (lower is better; 0: the positive always far ahead).")
    return frame, note


def tog_relations(step, width: int = 80):
    """ToG's relation pruning at one depth: per beam entity, its candidate relations (those that fit
    in ``width`` characters and how many more), those kept with their scores, whether the LLM was called, parse errors."""
    import pandas as pd

    return pd.DataFrame([(r.entity, len(r.candidates), first_and_count(r.candidates, width, "; "),
                          ", ".join(f"{n} ({sc:.2f})" for n, sc in r.kept), "yes" if r.called else "no", r.error or "")
                         for r in step.relations],
                        columns=["from", "relations", "relations (first few)", "kept (score)", "LLM call", "parse"])


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
    titles = ["drafts as written (identical samples merged; (JOIN (R r) X) follows r forward from X)",
              f"each draft's best {max_candidates} bound candidates (d0: of draft 0) → execution", "answer sets the drafts reached (votes)"]
    if vote is not None:
        final = first_and_count(vote.answers, 40) if vote.answers else "no answer"
        layers.append([final])
        titles.append("the vote's answer")
        won = next((k for k, os_ in answer_sets.items() if any(o.draft.index == vote.winner for o in os_)), None)
        if won is not None:
            edges.append((2, set_name[won], final))
    return [list(dict.fromkeys(x)) for x in layers], list(dict.fromkeys(edges)), titles


def keqing_layers(steps: list[Any], label: Any, kg: Any = None, kg_name: str = "miniworld",
                  exclude: Any = ()) -> tuple[list, list, list]:
    """(layers, edges, titles) for :func:`~kgqa_lib.viz.draw_reasoning_path`: Keqing's sub-questions as
    columns. Column 0: the first sub-question's seed entities (named by ``label``, e.g. ``kg.label``); then
    per sub-question its candidates — the answers its reasoning kept first, then the candidates it did not
    keep, named with :data:`NOT_SELECTED` (drawn grey) — and a title naming the sub-question
    and the relation chains it chose. Edges: with ``kg`` (and its schema ``kg_name``, the topic entities
    ``exclude``), every (seed, candidate) pair the step's chains reach
    (:func:`~kgqa_lib.methods.keqing.reached_from`); without it, the one triple per candidate its group
    holds (a multi-hop chain's last hop starts from an entity not drawn: no edge)."""
    from ..methods.keqing import reached_from

    def name(v: str) -> str:
        return label(v) if "://" in v else v

    layers = [[name(v) for v in steps[0].seeds]] if steps else []
    edges = []
    for i, st in enumerate(steps):
        kept = list(dict.fromkeys(st.reasoning.answers))
        others = [v for g in st.groups for v in g.reached if v not in kept]
        shown = {v: name(v) for v in kept} | {v: name(v) + NOT_SELECTED for v in dict.fromkeys(others)}
        layers.append(list(shown.values()))
        for g in st.groups:
            if kg is not None and g.chain and not g.stated:
                pairs = reached_from(kg, kg_name, st.seeds, g.chain, set(exclude))
                edges += [(i, name(a), shown[v]) for a, v in pairs if v in shown]
            else:
                edges += [(i, h, shown[v]) for (h, _, t), v in zip(g.triples, g.reached) if v in shown]
    titles = ["topic entity"] + [f"{st.sub.id}: " + " / ".join(c for i in st.reasoning.chosen for c in st.groups[i].chain)
                                 for st in steps]
    return layers, list(dict.fromkeys(edges)), titles


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
