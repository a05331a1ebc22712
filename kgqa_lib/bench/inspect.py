"""Saved benchmark records read question by question: ``kgqa bench show`` and ``kgqa bench rescore``.

A saved record (``results/bench/runs/<records>/<model>/<cell>.jsonl.gz``) keeps what the method
produced — its prediction (:func:`~kgqa_lib.bench.core.kept_prediction`), the chains or queries it
wrote, its stage outcomes — but, on external benchmarks, neither the question text nor the gold
answers: those are joined here from the dataset files (``KGQA_DATA_DIR``), by qid, from the cell's
dataset loaded whole (a cell's ``--sample`` only chose which questions ran; the records' qids say
which). Records saved before predictions were kept hold ``["(answered)"]`` (:data:`NOT_KEPT`) in
place of a non-empty prediction (an empty one was kept as ``[]``): they can be shown but not re-scored.

:func:`show` and :func:`rescore` return data (dicts and rows); the CLI formats them. Every name the
caller gives (table, cell, qid, metric, model) is checked first: a wrong one is a
:class:`~kgqa_lib.errors.UsageError` naming the valid ones."""

from __future__ import annotations

import difflib
from typing import Any, Iterable

from ..errors import UsageError, UserError
from .core import TABLES, Cell, Records, Table, default_key, model_key

#: What a record saved before predictions were kept holds in place of a non-empty prediction.
NOT_KEPT = "(answered)"
NOT_KEPT_NOTE = "prediction not kept in this record (older saved records); re-run the cell to keep it"
SET_DATA_DIR = "set KGQA_DATA_DIR to the folder of the external benchmarks (e.g. `export KGQA_DATA_DIR=../shared/datasets`)"

#: ``--metric`` names → the key of :func:`kgqa_lib.evaluate.metrics.score`'s dict (and of a record's
#: ``metrics``). ``exact_set`` is ``exact_match``: the normalised predicted set equals the normalised gold set.
METRICS = {"hits@1": "hits@1", "any_hit": "any_hit", "exact_set": "exact_match", "exact_match": "exact_match",
           "f1": "f1", "precision": "precision", "recall": "recall", "lenient": "lenient",
           "rouge_l": "rouge_l", "rougeL": "rouge_l"}
OPEN_METRICS = ("rouge_l",)  # the metric of open questions (kind "open"); the others are factoid metrics

#: A record's bookkeeping (ids, config, accounting, what :func:`show` prints apart): not the method's outputs.
_BOOKKEEPING = {"qid", "dataset", "config", "config_hash", "metrics", "prediction", "prediction_cut", "llm",
                "seconds", "kg", "kind", "method", "model_id", "engine", "stripped", "question", "gold",
                "question_hash", "rescored_from", "error", "response", "trace", "stages", "shard"}


# ---------------------------------------------------------------- names the caller gives
def _choices(valid: list[str], limit: int = 0) -> str:
    shown = valid if not limit or len(valid) <= limit else valid[:limit] + [f"… ({len(valid)} in all)"]
    return ", ".join(shown)


def _unknown(what: str, name: str, valid: list[str], limit: int = 0) -> UsageError:
    close = difflib.get_close_matches(name, valid, n=1)
    return UsageError(f"{what} {name!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
                      + f"; valid: {_choices(valid, limit)}")


def get_table(table: str | Table) -> Table:
    """A paper table by name (a measurement table has no per-question records)."""
    if isinstance(table, Table):
        return table
    if table in TABLES:
        return TABLES[table]
    from .measure import MEASUREMENTS

    if table in MEASUREMENTS:
        raise UsageError(f"{table} is a measurement table: it has no per-question records; tables with records: "
                         f"{', '.join(TABLES)}")
    raise _unknown("unknown benchmark table", table, list(TABLES))


def get_cell(table: Table, name: str) -> Cell:
    for c in table.cells:
        if c.name == name:
            return c
    raise _unknown(f"table {table.name} has no cell", name, [c.name for c in table.cells])


def resolve_model(table: Table, llm: str | None) -> str:
    """The records folder of ``--llm``: a model name (``local:qwen2.5-0.5b``, :func:`model_key`) or the
    folder's own name (as ``kgqa bench list`` shows it); default: the default model. A model without
    saved records of this table is a UsageError naming those that have some."""
    models = table.models()
    model = default_key() if llm is None else llm if llm in models else model_key(llm)
    if model not in models:
        raise UsageError(f"table {table.name} has no saved records of model {model}; models with records: "
                         f"{', '.join(models) or 'none'}")
    return model


def metric_key(metric: str) -> str:
    if metric not in METRICS:
        raise _unknown("unknown metric", metric, list(METRICS))
    return METRICS[metric]


# ---------------------------------------------------------------- records and questions
def prediction_kept(r: dict[str, Any]) -> bool:
    """False for a record saved before predictions were kept (``["(answered)"]``); an empty prediction
    is kept (the method returned nothing, in old records and new)."""
    return not (r.get("stripped") and r.get("prediction") == [NOT_KEPT])


def load_questions(spec: str) -> tuple[dict[str, Any] | None, str | None]:
    """(the questions of dataset ``spec`` by qid, None), or (None, why not: the first sentence of the
    loader's message) when its files are not there (an external benchmark without ``KGQA_DATA_DIR``)."""
    from .. import methods  # noqa: F401  (FuSIC's and Keqing's dataset loaders)
    from ..data.datasets import DatasetNotFound, load_dataset
    from ..kg import grailqa_fragment  # noqa: F401  (grailqa:fragment sets)

    try:
        ds = load_dataset(spec)
    except DatasetNotFound as exc:
        return None, " ".join(str(exc).split()).split(". ")[0].rstrip(".")
    return {q.qid: q for q in ds}, None


def is_wrong(r: dict[str, Any]) -> bool:
    """Hits@1 = 0 or F1 < 1; a record of an open question (ROUGE-L only): ROUGE-L < 1."""
    m = r.get("metrics") or {}
    if "hits@1" in m or "f1" in m:
        return m.get("hits@1", 1.0) == 0 or m.get("f1", 1.0) < 1
    return "rouge_l" in m and m["rouge_l"] < 1


def _chain(x: Any) -> str:
    return " → ".join(map(str, x)) if isinstance(x, list) else str(x)


def _tog_step(st: dict[str, Any]) -> str:
    """One depth of a ToG search kept in a stripped record, in a line: the relations kept (score), the entities
    scored, the paths of the beam, the judge's verdict."""
    rel = "; ".join(f"{x.get('entity')}: " + ", ".join(f"{k[0]} ({k[1]:g})" if isinstance(k, list) and len(k) == 2
                                                        else str(k) for k in x.get("kept") or [])
                    for x in st.get("relations") or [])
    ent = "; ".join(f"{x.get('relation')}: " + ", ".join(f"{c} ({sc:g})" for c, sc in zip(x.get("candidates") or [],
                                                                                           x.get("scores") or []))
                    for x in st.get("entities") or [])
    beam = " | ".join(" → ".join(f"{h} —{r}→ {t}" for h, r, t in p) for p in st.get("beam") or []) or "empty"
    j = st.get("judgement")
    judge = ("skipped (" + str(st["judge_skipped"]) + ")" if st.get("judge_skipped") else
             "not asked" if not j else "sufficient" if j.get("sufficient") else
             f"not sufficient{' (' + str(j['error']) + ')' if j.get('error') else ''}")
    return f"relations kept: {rel or '—'}; entities scored: {ent or '—'}; beam: {beam}; judge: {judge}"


def _draft(d: dict[str, Any]) -> str:
    """One KB-BINDER draft kept in a stripped record, in a line: what it wrote, its outcome, what answered."""
    ex = ", ".join(f"{e.get('status')} ({e.get('n')})" for e in d.get("executions") or [])
    return (f"wrote {d.get('wrote') or '(no logical form kept)'}; {d.get('status')}"
            + (f"; answered by {d['answered_by']}" if d.get("answered_by") else "")
            + (f"; {d.get('n_candidates')} candidate forms, executions: {ex}" if d.get("n_candidates") else ""))


def method_outputs(r: dict[str, Any]) -> list[tuple[str, Any]]:
    """What the method produced that the record keeps besides its prediction, as (label, value): the
    response (whole records), Keqing's decomposition (predicted chain beside the gold one), FuSIC's
    attempts (status, rows, the SPARQL it wrote), ToG's and KB-BINDER's summaries, and every other
    table-specific field; last, the names of the recorded stages."""
    out: list[tuple[str, Any]] = []
    if r.get("response") not in (None, "") and [r["response"]] != r.get("prediction"):  # (open answers: the same)
        out.append(("response", r["response"]))
    for key, value in r.items():
        if key in _BOOKKEEPING or value in (None, [], {}):
            continue
        if key == "diagnostics" and isinstance(value, dict):
            for name, d in value.items():
                if name == "decomposition" and isinstance(d, dict):  # saved records keep flags, never the gold chain
                    rest = {k: v for k, v in d.items() if k not in ("predicted_chain", "gold_chain")}
                    out.append(("decomposition", f"predicted chain {_chain(d.get('predicted_chain'))}"
                                + (f"; gold chain {_chain(d['gold_chain'])}" if d.get("gold_chain") else "")
                                + ("; " if rest else "") + ", ".join(f"{k} {v}" for k, v in rest.items())))
                else:
                    out.append((f"diagnostics.{name}", d))
        elif key == "tog_search" and isinstance(value, list):
            out += [(f"ToG depth {st.get('depth')}", _tog_step(st)) for st in value if isinstance(st, dict)]
        elif key == "kbbinder_drafts" and isinstance(value, list):
            out += [(f"draft {d.get('index')}", _draft(d)) for d in value if isinstance(d, dict)]
        elif key == "attempts" and isinstance(value, list):
            for i, a in enumerate(value, 1):
                a = dict(a)
                query = a.pop("query", None)
                out.append((f"attempt {i}", ", ".join(f"{k} {v}" for k, v in a.items())
                            + (f"; query: {query}" if query else "; query not kept (older records)" if r.get("stripped") else "")))
        else:
            out.append((key, value))
    trace = [s for s in r.get("trace") or [] if isinstance(s, dict) and s.get("name")]
    if r.get("stripped"):  # what the strip function kept of a stage's output (e.g. older Keqing records' check)
        out += [(f"stage {s['name']}", s["output"]) for s in trace
                if isinstance(s.get("output"), dict) and any(v not in (None, "", [], {}) for v in s["output"].values())]
        if any("seconds" in s for s in trace):
            out.append(("stages", ", ".join(s["name"] for s in trace)))
    elif trace:
        out.append(("stages", ", ".join(s["name"] for s in trace) + " (the whole trace is in the record)"))
    return out


def _cost(r: dict[str, Any]) -> str:
    llm = r.get("llm") or {}
    return (f"{llm.get('calls', 0)} LLM calls ({llm.get('cache_hits', 0)} from the cache), "
            f"{r.get('seconds', 0.0):.1f} s")


# ---------------------------------------------------------------- kgqa bench show
def show(table: str | Table, cell: str, qids: Iterable[str] = (), llm: str | None = None, wrong: bool = False,
         limit: int = 5) -> dict[str, Any]:
    """Records of one cell, each joined with its question and gold answers when the dataset files are
    there: the given ``qids`` (in that order), else the first ``limit`` records (``wrong``: the first
    ``limit`` with :func:`is_wrong`). Returns ``table, cell, method, dataset, model, command, n``
    (records in the cell), ``selected`` (how the rows were chosen), ``data`` (None, or why the question
    and gold are not shown) and ``rows``: per record ``qid, question, gold, joined_from`` ("dataset",
    "record" — whole records hold their own —, or None), ``prediction`` (None when not kept),
    ``prediction_cut``, ``metrics``, ``error``, ``outputs`` (:func:`method_outputs`), ``cost``, and
    ``gold_changed`` (a whole record's own gold differs from the dataset's today)."""
    t = get_table(table)
    c = get_cell(t, cell)
    model = resolve_model(t, llm)
    recs = Records(t, model)(c.name)
    if not recs:
        raise UserError(f"{t.name} has no saved records of cell {c.name} for model {model} "
                        f"(`kgqa bench run {t.name} --cells {c.name}` runs it)")
    qids = list(qids)
    by_qid = {r["qid"]: r for r in recs if "qid" in r}
    if qids:
        for q in qids:
            if q not in by_qid:
                raise _unknown(f"cell {c.name} has no record of qid", q, list(by_qid), limit=10)
        chosen, selected = [by_qid[q] for q in qids], "the qids given"
    else:
        pool = [r for r in recs if is_wrong(r)] if wrong else recs
        chosen = pool[:limit]
        selected = (f"the first {len(chosen)} of {len(pool)} wrong records (hits@1 = 0 or F1 < 1; open questions: "
                    "ROUGE-L < 1)" if wrong
                    else f"the first {len(chosen)} of {len(recs)} records")
    questions, why = load_questions(c.dataset)
    rows = []
    for r in chosen:
        q = (questions or {}).get(r["qid"])
        if q is not None:
            question, gold, source = q.question, list(q.answers), "dataset"
        elif "question" in r or "gold" in r:
            question, gold, source = r.get("question"), r.get("gold"), "record"
        else:
            question = gold = source = None
        kept = prediction_kept(r)
        rows.append({"qid": r["qid"], "question": question, "gold": gold, "joined_from": source,
                     "in_dataset": questions is None or q is not None,
                     "gold_changed": q is not None and "gold" in r and list(r["gold"]) != list(q.answers),
                     "prediction": list(r.get("prediction") or []) if kept else None,
                     "prediction_cut": r.get("prediction_cut", 0), "metrics": r.get("metrics") or {},
                     "error": r.get("error"), "outputs": method_outputs(r), "cost": _cost(r)})
    data = None if questions is not None else \
        f"question and gold answers not shown: the dataset files of {c.dataset} are not there ({why}); {SET_DATA_DIR}"
    return {"table": t.name, "cell": c.name, "method": c.method, "dataset": c.dataset, "model": model,
            "command": c.command(), "n": len(recs), "selected": selected, "data": data, "rows": rows}


# ---------------------------------------------------------------- kgqa bench rescore
def _rescore_one(r: dict[str, Any], q: Any, key: str) -> float:
    from ..evaluate.metrics import score

    return score(r.get("prediction") or [], q.answers, kind=q.kind, response=r.get("response"))[key]


def rescore(table: str | Table, metric: str, llm: str | None = None,
            cells: Iterable[str] | None = None) -> dict[str, Any]:
    """``metric`` recomputed, cell by cell, from each record's kept prediction against the gold answers
    of the cell's dataset (:func:`kgqa_lib.evaluate.metrics.score`, the answers normalised as every metric
    normalises them). Returns ``table, model, metric, key`` (the metrics' key it reads and computes) and
    ``rows``, one per cell: ``cell, dataset, records, status`` and, when re-scored, ``n``, ``mean, low,
    high`` (95% bootstrap CI), ``stored`` (the stored mean on the same questions; None when the records
    do not store it), ``stored_all`` (over every record storing it), ``differ`` (records whose
    re-scored value differs from the stored one), ``not_kept`` (prediction not kept), ``cut`` (a
    prediction cut when saved), ``no_response`` (an open question whose record keeps no response:
    ROUGE-L was computed from it), ``missing`` (a qid no longer in the dataset) and ``gold_changed``
    (a whole record's own gold differs from the dataset's today: the stored value was scored on it).

    ``status``: ``rescored``; ``not run``; ``not kept`` (every non-empty prediction of the cell is
    ``["(answered)"]``: older records); ``not applicable`` (the metric is for the other kind of
    question: factoid metrics vs ``rouge_l`` for open questions). A cell that needs the dataset files
    and cannot load them is a :class:`UserError` (set ``KGQA_DATA_DIR``) naming the cells."""
    from ..evaluate.metrics import bootstrap_ci

    t = get_table(table)
    key = metric_key(metric)
    chosen = [get_cell(t, n) for n in cells] if cells else list(t.cells)
    model = resolve_model(t, llm)
    records = Records(t, model)
    rows: list[dict[str, Any]] = []
    todo: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    for c in chosen:
        recs = records(c.name)
        row = {"cell": c.name, "dataset": c.dataset, "records": len(recs)}
        rows.append(row)
        if not recs:
            row["status"] = "not run"
        elif not any(prediction_kept(r) and r.get("prediction") for r in recs) and not all(prediction_kept(r) for r in recs):
            row.update(status="not kept", not_kept=sum(not prediction_kept(r) for r in recs))
        else:
            todo.append((row, recs))
    loaded: dict[str, tuple[dict[str, Any] | None, str | None]] = {}
    for row, _ in todo:
        if row["dataset"] not in loaded:
            loaded[row["dataset"]] = load_questions(row["dataset"])
    absent = [row for row, _ in todo if loaded[row["dataset"]][0] is None]
    if absent:
        spec = absent[0]["dataset"]
        names = ", ".join(r["cell"] for r in absent[:5]) + (f" and {len(absent) - 5} more" if len(absent) > 5 else "")
        raise UserError(f"kgqa bench rescore needs the gold answers of {spec} for cells {names}, and its files are "
                        f"not there ({loaded[spec][1]}): {SET_DATA_DIR}")
    for row, recs in todo:
        questions = loaded[row["dataset"]][0] or {}
        kind = "open" if key in OPEN_METRICS else "factoid"
        kinds = {questions[r["qid"]].kind for r in recs if r.get("qid") in questions}
        if kinds and kind not in kinds:  # e.g. hits@1 on open questions (ROUGE-L)
            row.update(status="not applicable", kinds=sorted(kinds))
            continue
        new, old, stored_all = [], [], []
        counts = dict.fromkeys(("not_kept", "cut", "no_response", "missing", "gold_changed", "differ", "other_kind"), 0)
        for r in recs:
            stored = (r.get("metrics") or {}).get(key)
            if stored is not None:
                stored_all.append(stored)
            q = questions.get(r.get("qid"))
            if not prediction_kept(r):
                counts["not_kept"] += 1
            elif r.get("prediction_cut"):
                counts["cut"] += 1
            elif q is None:
                counts["missing"] += 1
            elif q.kind != kind:
                counts["other_kind"] += 1
            elif q.kind == "open" and "response" not in r:  # ROUGE-L scored the response, which it does not keep
                counts["no_response"] += 1
            else:
                v = _rescore_one(r, q, key)
                new.append(v)
                old.append(stored)
                counts["differ"] += stored is not None and abs(v - stored) > 1e-9
                counts["gold_changed"] += "gold" in r and list(r["gold"]) != list(q.answers)
        mean, low, high = bootstrap_ci(new)
        same = [v for v in old if v is not None]
        row.update(status="rescored", n=len(new), mean=mean, low=low, high=high,
                   stored=sum(same) / len(same) if same and len(same) == len(old) else None,
                   stored_all=sum(stored_all) / len(stored_all) if stored_all else None,
                   stored_n=len(stored_all), **counts)
    return {"table": t.name, "model": model, "metric": metric, "key": key, "rows": rows}
