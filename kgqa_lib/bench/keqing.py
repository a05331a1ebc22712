"""Keqing (Wang et al.) on MetaQA dev with the local model: Hits@1 per hop against the paper's
Table 2, decomposition accuracy, the gold-path ceiling, costs.

Two configurations, 200 dev questions per hop each (``--sample 200``, seed 0; the questions are
MetaQA dev lines outside the pool the templates and exemplars come from):

- ``keqing_metaqa`` — decomposition and retrieval only (no reasoning call, no response);
- ``keqing_full`` — the paper's four stages with the default settings (candidate selection, response).

MetaQA's questions, answers and gold annotations must not enter the repository, so the saved records
are *stripped* (:func:`strip`, :func:`strip_full`: question id, config hash, metrics, LLM/KG accounting,
the predicted relation path, flags and counts computed against the gold when the record is saved, error
categories — no question text, no entity names, no gold relation path: :func:`without_gold`;
:func:`restrip_saved` applies it to records saved before).
The gold-path ceiling needs the MetaQA KB (``KGQA_DATA_DIR``): it is computed when the data is there
and kept, numbers only, in ``results/bench/runs/keqing_metaqa/ceiling.json`` (keyed by a hash of the
question ids), so the report regenerates without the data; :func:`check_ceiling` recomputes it. The
reports' tallies of gold relation paths (the wrong decompositions, the questions the four stages lose)
are computed the same way from the MetaQA data and kept, tallies only, in ``gold_chains.json`` beside
(:func:`gold_chain_counts`)."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from ..evaluate.metrics import bootstrap_ci
from ..evaluate.report import format_gain, paired_gain, summarize
from ..methods.keqing import DENSE_MAX_SEEDS, DENSE_PER_SEED, KeqingSettings
from .baselines import KEQING_OVER_KBBINDER
from .core import Cell, Records, Table, keep_prediction, partial, read_json, register, write_json
from .result_table import ResultTable, table

PAPER = {1: 98.4, 2: 99.9, 3: 99.6}  # Keqing-LLaMA (Ours), LoRA-fine-tuned LLaMA-7B (paper, Table 2; no split named)
HOPS = (1, 2, 3)
SAMPLE = 200
KEEP = ("dataset", "qid", "kind", "metrics", "error", "llm", "kg", "seconds", "method", "model_id", "engine", "config_hash", "config",
        "diagnostics")
#: what a saved record keeps of a decomposition check: the chain the method predicted and the flags computed
#: against the gold when the record was saved — never the gold chain itself
DECOMPOSITION_KEPT = ("predicted_chain", "chain_correct", "seed_named", "seed_correct", "correct")
CEILING_FILE = "ceiling.json"
CHAINS_FILE = "gold_chains.json"  # the reports' tallies of gold relation paths (:func:`gold_chain_counts`)
REASON_MAX = KeqingSettings().reason_max  # facts one selection call may show (the default every cell runs with)


def stage(r: dict[str, Any], name: str) -> Any:
    return next((s["output"] for s in r.get("trace") or [] if s["name"] == name), None)


def strip(r: dict) -> dict:
    """A run record without MetaQA content: ids, metrics, costs, the predicted relation path, the
    decomposition check's flags, error categories (:func:`without_gold`: no gold relation path; older
    records carry the decomposition check as a ``decomposition_check`` trace stage, kept so)."""
    out = {k: r[k] for k in KEEP if k in r}
    check, dec = stage(r, "decomposition_check"), stage(r, "decompose")
    out["trace"] = ([{"name": "decomposition_check", "output": check}] if check else []) + \
                   ([{"name": "decompose", "output": {"error": dec.get("error")}}] if dec else [])
    keep_prediction(out, r)
    out["stripped"] = True
    return without_gold(out)


def without_gold(r: dict[str, Any]) -> dict[str, Any]:
    """A stripped record with its decomposition checks (the runner's ``diagnostics``, the trace stage of
    older records) cut to :data:`DECOMPOSITION_KEPT`: the predicted chain and the flags computed against
    the gold (chain right, seed named, seed right) stay, the gold chain goes; any other diagnostics too.
    What :func:`strip` saves, and what :func:`restrip_saved` makes of records saved before."""
    out = dict(r)
    if "diagnostics" in out:
        d = (out["diagnostics"] or {}).get("decomposition")
        out["diagnostics"] = {"decomposition": {k: d[k] for k in DECOMPOSITION_KEPT if k in d}} \
            if isinstance(d, dict) else {}
    if out.get("trace"):
        out["trace"] = [{**s, "output": {k: s["output"][k] for k in DECOMPOSITION_KEPT if k in s["output"]}}
                        if s.get("name") == "decomposition_check" and isinstance(s.get("output"), dict) else s
                        for s in out["trace"]]
    return out


#: the tables whose saved records :func:`restrip_saved` rewrites (Keqing's: their strip ends in :func:`without_gold`)
KEQING_TABLES = ("keqing_metaqa", "keqing_full", "keqing_ablations", "keqing_grailqa")


def restrip_saved(*names: str) -> dict[str, tuple[int, int]]:
    """Rewrite the saved records of Keqing's tables (``names``, default :data:`KEQING_TABLES`), every model's
    folder, as :func:`strip` saves them today: each record through :func:`without_gold`, in the same order and
    the same bytes' format as :func:`kgqa_lib.evaluate.runner.save_runs` writes (sorted keys, gzip without a
    timestamp), each file replaced whole. A file none of whose records changes is left untouched. Returns, per
    file (its path under the runs folder), the records changed and the records in it."""
    from .core import get_table

    out = {}
    for name in names or KEQING_TABLES:
        root = get_table(name).records_root
        for path in sorted(root.glob("*/*.jsonl.gz")):
            lines = [ln for ln in gzip.decompress(path.read_bytes()).decode("utf-8").splitlines() if ln.strip()]
            recs = [json.loads(ln) for ln in lines]
            new = [without_gold(r) for r in recs]
            changed = sum(a != b for a, b in zip(recs, new))
            if changed:
                _write_records(path, new)
            out[str(path.relative_to(root.parent))] = (changed, len(recs))
    return out


def _write_records(path: Path, records: list[dict[str, Any]]) -> None:
    """``path`` replaced whole by ``records`` as :func:`kgqa_lib.evaluate.runner.save_runs` writes them (one
    JSON line each, sorted keys; gzip with mtime 0, so the bytes are deterministic)."""
    data = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(gzip.compress(data.encode("utf-8"), mtime=0))
    os.replace(tmp, path)


def _norm(x: str) -> str:
    return " ".join(x.casefold().split())


def strip_full(r: dict) -> dict:
    """A full-pipeline record (candidate reasoning, response) without MetaQA content: on top of
    :func:`strip`, per sub-question the reasoning's counts (candidates, selected, made-up names,
    over the bound, calls, error), the final step's selection against the gold answers (counts), the
    lenient response check, and seconds and LLM calls per stage."""
    out = strip(r)
    plan = stage(r, "execute_plan")
    steps = plan[0] if isinstance(plan, list) and plan else []
    rs = [st.get("reasoning", {}) for st in steps]
    out["reasoning"] = [{**{k: x.get(k) for k in ("mode", "n_candidates", "n_answers", "unmatched", "over_bound",
                                                     "calls", "called", "error")},
                         **{k: x[k] for k in ("dense", "dense_selected") if k in x}} for x in rs]
    gold = {_norm(g) for g in r.get("gold") or []}
    pred = [_norm(p) for p in r.get("prediction") or []]
    last = rs[-1] if rs else {}
    cands = {_norm(c) for c in last.get("candidates") or []}
    out["selection"] = {"n_candidates": last.get("n_candidates", 0), "n_selected": len(pred),
                        "candidates_listed": len(cands), "gold_in_candidates": len(gold & cands),
                        "gold_selected": len(gold & set(pred)), "n_gold": len(gold)}
    resp = _norm(r.get("response") or "")
    out["response_check"] = {"names_top1": bool(pred) and pred[0] in resp,
                             "names_any": any(p in resp for p in pred), "responded": stage(r, "respond") is not None}
    secs = {s["name"]: s.get("seconds", 0.0) for s in r.get("trace") or []}
    out["stages"] = {"seconds": {k: secs[k] for k in ("select_exemplars", "decompose", "generate_chain", "execute_plan",
                                                      "respond") if k in secs},
                     "calls": {"decompose": int("decompose" in secs),
                               "reasoning": sum(int(x.get("calls") or x.get("called") or 0) for x in rs),
                               "respond": int("respond" in secs)}}
    if "generate_chain" in secs:  # Fig. 6's mode=chain: the chain call stands where the decomposition was
        out["stages"]["calls"]["generate_chain"] = 1
    return out


# ---------------------------------------------------------------- the gold-path ceiling
def qids_key(qids: set[str]) -> str:
    return hashlib.sha256("\n".join(sorted(qids)).encode("utf-8")).hexdigest()[:16]


def compute_ceiling(hops: int, qids: set[str]) -> tuple[float, int]:
    """Hits@1 of executing the *gold* relation path from the topic entity (topic excluded at every
    hop), answers ordered as Keqing orders them: what a perfect decomposition and matching would
    score on this KB. Needs KGQA_DATA_DIR; returns (nan, 0) without it."""
    from ..data.datasets import DatasetNotFound, load_dataset
    from ..evaluate.metrics import score
    from ..kg.sources import load_named
    from ..methods import keqing as K

    try:
        ds = [q for q in load_dataset(f"keqing:metaqa:{hops}hop") if q.qid in qids]
        kg = load_named("metaqa")
    except DatasetNotFound:
        return float("nan"), 0
    hits = []
    for q in ds:
        topic = {v for t in q.topic_entities for v in K.link_seed(t, kg)}
        frontier = sorted(topic)
        for hop in K.gold_chain(q):
            frontier = K.retrieve_candidates(kg, "metaqa", frontier, [(hop,)], topic)[0].tails
        hits.append(score([K._label(kg, v) for v in frontier], q.answers)["hits@1"])
    return float(np.mean(hits)), len(hits)


def ceiling(records: Records, hops: int, qids: set[str]) -> tuple[float, int]:
    """The stored ceiling of these questions; computed (and stored) when missing and the data is there."""
    path = records.folder / CEILING_FILE
    stored = read_json(path)
    entry = stored.get(f"{hops}hop")
    if entry and entry.get("qids") == qids_key(qids):
        return float(entry["hits@1"]), int(entry["n"])
    value, n = compute_ceiling(hops, qids)
    if n:
        stored[f"{hops}hop"] = {"qids": qids_key(qids), "n": n, "hits@1": value}
        write_json(path, stored)
    return value, n


def check_ceiling(table: Table | None = None) -> list[str]:
    """Recompute every stored ceiling from the KB: the hops whose value differs ([] when all match).
    Raises nothing without the data: the caller checks for it (the entries are then unverifiable)."""
    table = table or TABLE
    records = Records(table)
    stored = read_json(records.folder / CEILING_FILE)
    bad = []
    for h in HOPS:
        entry = stored.get(f"{h}hop")
        qids = {r["qid"] for r in records(f"keqing_metaqa_{h}hop")}
        if not qids:
            continue
        value, n = compute_ceiling(h, qids)
        if not entry or entry.get("qids") != qids_key(qids) or n != entry["n"] or abs(value - entry["hits@1"]) > 1e-12:
            bad.append(f"{h}hop: stored {entry and entry.get('hits@1')} (n={entry and entry.get('n')}), computed {value} (n={n})")
    return bad


# ---------------------------------------------------------------- the gold relation paths the reports tally
def gold_chains_of(hops: int) -> dict[str, tuple[str, ...]] | None:
    """qid → gold relation path of the ``keqing:metaqa:{hops}hop`` questions (needs KGQA_DATA_DIR; None without)."""
    from ..data.datasets import DatasetNotFound, load_dataset
    from ..methods import keqing as K

    try:
        return {q.qid: tuple(K.gold_chain(q)) for q in load_dataset(f"keqing:metaqa:{hops}hop")}
    except DatasetNotFound:
        return None


def gold_chain_counts(folder: Path | None, name: str, hops: int, items: list[tuple[Any, ...]]) -> Counter | None:
    """How often each ``(*labels, gold relation path)`` occurs among ``items``, each ``(qid, *labels)`` of a
    ``keqing:metaqa:{hops}hop`` question, in the order each first occurs: what a report tallies of the gold
    paths, which the saved records do not hold. Like the ceiling, the tally is kept (tallies only) in
    ``folder``'s :data:`CHAINS_FILE` under ``name``, keyed by a hash of the items, so the report regenerates
    without the data; computed from the data when missing or stale (then kept). None when it cannot be:
    without the data, or a question the data does not hold. ``folder`` None: from the data only, nothing kept."""
    if not items:
        return Counter()
    key = hashlib.sha256(json.dumps(items, ensure_ascii=False).encode("utf-8")).hexdigest()[:16]
    path = folder / CHAINS_FILE if folder is not None else None
    stored = read_json(path) if path is not None else {}
    entry = stored.get(name)
    if entry and entry.get("items") == key:
        return Counter({(*row[:-2], tuple(row[-2])): row[-1] for row in entry["counts"]})
    gold = gold_chains_of(hops)
    if gold is None or any(it[0] not in gold for it in items):
        return None
    counts = Counter((*it[1:], gold[it[0]]) for it in items)
    if path is not None:
        stored[name] = {"items": key, "counts": [[*k[:-1], list(k[-1]), n] for k, n in counts.items()]}
        write_json(path, stored)
    return counts


NEEDS_DATA = "— (needs KGQA_DATA_DIR: the MetaQA gold paths)"


# ---------------------------------------------------------------- reports (tables as data, then Markdown)
def _md(t: ResultTable) -> str:
    """The table as the report prints it: an empty cell is written ``| |``."""
    return re.sub(r"\|  (?=\|)", "| ", t.markdown())


def _not_run(cells: int, *first: Any, fill: tuple[tuple[int, Any], ...] = ()) -> list[Any]:
    """A row of ``cells`` cells: ``first`` then empty cells, with ``fill``'s (index, value) set."""
    row: list[Any] = [*first] + [""] * (cells - len(first))
    for i, v in fill:
        row[i] = v
    return row


DECOMPOSITION_ONLY_COLUMNS = ("hops", "n", "Hits@1 [95% CI]", "paper", "gold-path ceiling",
                              "decomposition acc. (chain) [95% CI]", "unparseable", "no answer", "calls/q", "tokens/q",
                              "s/q (mean / median)", "outside-LLM share")


def metaqa_tables(records: Records) -> dict[str, ResultTable]:
    """keqing_metaqa's table as data: per hop Hits@1, the paper, the ceiling, decomposition accuracy, costs."""
    body = []
    for h in HOPS:
        name = f"keqing_metaqa_{h}hop"
        recs = records(name)
        if not recs:
            body.append(_not_run(len(DECOMPOSITION_ONLY_COLUMNS), h, 0, f"(not run: {name}.jsonl)",
                                 f"{PAPER[h] / 100:.3f}"))
            continue
        row = summarize(recs)
        checks = [_chain_right(c) for r in recs if (c := _decomposition(r))]
        dm, dlo, dhi = bootstrap_ci([float(c) for c in checks])
        unparse = sum(1 for r in recs if (d := stage(r, "decompose")) and d["error"] == "fallback")
        ceil, _ = ceiling(records, h, {r["qid"] for r in recs})
        body.append([h, row["n"], f"{row['hits@1']:.3f} [{row['hits@1_ci'][0]:.3f}, {row['hits@1_ci'][1]:.3f}]",
                     f"{PAPER[h] / 100:.3f}", f"{ceil:.3f}", f"{dm:.3f} [{dlo:.3f}, {dhi:.3f}]", unparse,
                     sum(1 for r in recs if not r["prediction"]), f"{row['calls/q']:.2f}", f"{row['tokens/q']:.0f}",
                     f"{row['s/q']:.2f} / {float(np.median([r['seconds'] for r in recs])):.2f}",
                     f"{row['outside_share']:.2f}"])
    return {"decomposition_only": table("decomposition_only", "Keqing on MetaQA dev (our reported part), "
                                        "decomposition and retrieval only", DECOMPOSITION_ONLY_COLUMNS, body)}


def wrong_sequences(records: Records) -> list[tuple[int, str, str, int]] | None:
    """(hops, predicted, gold, how often) of the decomposition-only run's wrong template sequences, most frequent
    first; the gold paths from :func:`gold_chain_counts` (None when they cannot be had)."""
    failures: Counter = Counter()
    for h in HOPS:
        wrong = [(r["qid"], " / ".join(c.get("predicted_chain") or []) or "(none)")
                 for r in records(f"keqing_metaqa_{h}hop") if (c := _decomposition(r)) and not _chain_right(c)]
        counts = gold_chain_counts(getattr(records, "folder", None), f"wrong_sequences_{h}hop", h, wrong)
        if counts is None:
            return None
        for (p, g), n in counts.items():
            failures[(h, p, " / ".join(g))] += n
    return [(h, p, g, n) for (h, p, g), n in failures.most_common(12)]


def report(records: Records) -> str:
    t = metaqa_tables(records)
    lines = ["# Keqing on MetaQA dev (local model)", "",
             f"Decomposition and retrieval only (no reasoning call, no response). Records {TABLE.provenance}.", "",
             "`decomposition acc.`: the chain part (the top-1 templates' chains equal the gold chain); these records "
             "predate the seed check.", "", _md(t["decomposition_only"]),
             "", "s/q is wall time per question on 2 cores; the mean includes stretches where another job shared",
             "the cores (the median is closer to an undisturbed run).", "",
             "Most frequent wrong template sequences (predicted ← gold):", ""]
    wrong = wrong_sequences(records)
    lines += [f"- {h}-hop ×{n}: `{p}` ← `{g}`" for h, p, g, n in wrong] if wrong is not None else [f"- {NEEDS_DATA}"]
    return "\n".join(lines) + "\n"


def _rate(xs: list[float]) -> str:
    m, lo, hi = bootstrap_ci(xs)
    return f"{m:.3f} [{lo:.3f}, {hi:.3f}]"


def _decomposition(r: dict[str, Any]) -> dict[str, Any] | None:
    """The gold-based decomposition check of a record: the runner's diagnostics when present, else the
    ``decomposition_check`` stage older records carry (chain only, no seed)."""
    d = (r.get("diagnostics") or {}).get("decomposition")
    return d if d is not None else stage(r, "decomposition_check")


def _chain_right(d: dict[str, Any]) -> bool:
    """The chain part of a decomposition check (our measure of the decomposition; the paper reports none):
    ``chain_correct`` of the runner's diagnostics, ``correct`` of the older trace stage (which checked the chain only)."""
    return bool(d.get("chain_correct", d.get("correct")))


FOUR_STAGES_COLUMNS = ("hops", "n", "Hits@1 [95% CI]", "F1 [95% CI]", "paper", "gold-path ceiling", "decomposition only",
                       "gain [95% CI]", "decomposition acc. (chain)", "seed linked right")


def _full_rows(records: Records) -> tuple[dict[int, list[dict[str, Any]]], ResultTable]:
    """The four stages' records per hop that have run, and their table against decomposition only."""
    from .core import get_table

    dec_only = Records(get_table("keqing_metaqa"))
    body, rows = [], {}
    for h in HOPS:
        recs = records(f"keqing_full_{h}hop")
        if not recs:
            body.append(_not_run(len(FOUR_STAGES_COLUMNS), h, 0, f"(not run: keqing_full_{h}hop.jsonl)",
                                 fill=((4, f"{PAPER[h] / 100:.3f}"),)))
            continue
        rows[h] = recs
        qids = {r["qid"] for r in recs}
        base = [r for r in dec_only(f"keqing_metaqa_{h}hop") if r["qid"] in qids]
        base_hits = f"{np.mean([r['metrics']['hits@1'] for r in base]):.3f}" if base else "—"
        gain = format_gain(paired_gain(recs, base, "hits@1")) if base else "—"
        ceil, n_ceil = ceiling(records, h, qids)
        checks = [c for r in recs if (c := _decomposition(r))]
        chain = _rate([float(c.get("chain_correct", c.get("correct"))) for c in checks]) if checks else "—"
        seeds = [float(c["seed_correct"]) for c in checks if "seed_correct" in c]
        seed = f"{_rate(seeds)} (n={len(seeds)})" if seeds else "not in these records"
        body.append([h, len(recs), _rate([r["metrics"]["hits@1"] for r in recs]), _rate([r["metrics"]["f1"] for r in recs]),
                     f"{PAPER[h] / 100:.3f}", f"{ceil:.3f}" if n_ceil else "— (needs KGQA_DATA_DIR)", base_hits, gain,
                     chain, seed])
    return rows, table("four_stages", "The four stages against decomposition only (MetaQA dev, our reported part)",
                       FOUR_STAGES_COLUMNS, body)


def selection_table(rows: dict[int, list[dict[str, Any]]]) -> ResultTable:
    """Candidate reasoning over the last sub-question and the response, per hop."""
    body = []
    for h, recs in rows.items():
        sel = [r.get("selection") or {} for r in recs]
        with_gold = [s for s in sel if s.get("n_gold")]
        in_cands = sum(1 for s in with_gold if s.get("gold_in_candidates")) / max(1, len(with_gold))
        selected = sum(1 for s in with_gold if s.get("gold_selected")) / max(1, len(with_gold))
        full_list = [s for s in sel if s.get("candidates_listed") == s.get("n_candidates")]  # traces keep the first labels only
        prec = sum(s.get("gold_selected", 0) for s in full_list) / max(1, sum(s.get("n_selected", 0) for s in full_list))
        rec = sum(s.get("gold_selected", 0) for s in full_list) / max(1, sum(s.get("gold_in_candidates", 0) for s in full_list))
        steps = [x for r in recs for x in r.get("reasoning") or []]
        fb = Counter(x.get("error") for x in steps)
        over = sum(1 for x in steps if x.get("over_bound"))
        top1 = sum(1 for r in recs if (r.get("response_check") or {}).get("names_top1")) / len(recs)
        body.append([h, f"{in_cands:.3f}", f"{selected:.3f}", f"{prec:.3f}", f"{rec:.3f} (n={len(full_list)})",
                     f"{fb.get('select_empty', 0)} / {fb.get('select_unmatched', 0)} / {over} of {len(steps)} sub-questions",
                     f"{top1:.3f}"])
    return table("selection", "Candidate reasoning and response",
                 ["hops", "gold among candidates", "gold selected", "selection precision", "selection recall",
                  "fell back to all (empty / unmatched / over bound)", "response names the top answer"], body)


def cost_table(rows: dict[int, list[dict[str, Any]]]) -> ResultTable:
    """Calls by stage, the single-candidate selection calls the pipeline skips, tokens, seconds."""
    body = []
    for h, recs in rows.items():
        row = summarize(recs)
        calls = {k: sum((r.get("stages") or {}).get("calls", {}).get(k, 0) for r in recs) / len(recs)
                 for k in ("decompose", "reasoning", "respond")}
        single = sum(1 for r in recs for x in r.get("reasoning") or []
                     if x.get("mode") == "select" and x.get("n_candidates") == 1 and (x.get("calls") or 0) > 0) / len(recs)
        body.append([h, f"{row['calls/q']:.2f} ({calls['decompose']:.2f} + {calls['reasoning']:.2f} + "
                        f"{calls['respond']:.2f})", f"{single:.2f}", f"{row['calls/q'] - single:.2f}",
                     f"{row['tokens/q']:.0f}",
                     f"{row['s/q']:.2f} / {float(np.median([r['seconds'] for r in recs])):.2f}"])
    return table("cost", "Cost", ["hops", "calls/q (decompose + reasoning + respond)", "single-candidate calls/q",
                                  "calls/q without them", "tokens/q", "s/q (mean / median)"], body)


def full_tables(records: Records) -> dict[str, ResultTable]:
    """Every table of the keqing_full report, as data (``.frame()`` for a notebook, Markdown for the report)."""
    from .core import get_table

    rows, four = _full_rows(records)
    dec_only = Records(get_table("keqing_metaqa"))
    out = [four, selection_table(rows), bound_table(rows), target_table(rows, records),
           disagreements_table(rows, dec_only, records.folder), cost_table(rows)]
    return {t.name: t for t in out}


#: what the columns of keqing_full's tables mean (its report prints each above its table; notebook 31 under it:
#: :func:`legend`)
FOUR_STAGES_LEGEND = (
    "`paper`: Keqing paper, Table 2, row Keqing-LLaMA (Ours) (LoRA-fine-tuned LLaMA-7B, Hits@1; the table names no "
    "split). `gold-path ceiling`: Hits@1 of the gold relation path executed on this KB as Keqing executes chains — what "
    "a perfect decomposition would score. `decomposition only`: Hits@1 of the `keqing_metaqa` run on the same questions "
    "(no selection, no response: every entity the chains reach is an answer); `gain`: the four stages minus it, in "
    "points, with a paired bootstrap 95% CI. `decomposition acc. (chain)`: the top-1 templates' chains, concatenated, "
    "are the gold chain (our measure of the decomposition; the paper reports none). `seed linked right`: the first "
    "sub-question's seed names "
    "link to the topic entity; `(n=…)`: the records that carry this check (the others were saved without it).")
SELECTION_LEGEND = (
    "Over the last sub-question (the one whose selection is the answer): `gold among candidates` — questions whose "
    "candidates hold a gold answer; `gold selected` — questions whose selected answers hold a gold one, at any rank "
    "(Hits@1 counts the first answer only, so it can be lower: a selection that keeps several candidates may rank a "
    "wrong one above the gold one); `precision` — selected candidates that are gold; `recall` — gold candidates that "
    "were selected (both pooled over the questions whose trace lists every candidate: `n=`); `fell back to all` — "
    "sub-questions, every step counted, whose selection selected nothing (`empty`) or named no candidate "
    "(`unmatched`), or whose candidates stayed above what one selection call may show (`over bound`): each keeps "
    "every candidate; `response names the top answer` — lenient check: the normalised top answer occurs in the "
    "response text.")
DISAGREEMENTS_LEGEND = (
    "Same questions, Hits@1. `lost`: right with decomposition only, wrong with the four stages; `won`: the reverse. "
    "Causes of the losses from the records (the decomposition differs; a selection before the last sub-question "
    "dropped every path to a gold answer; the last selection left the gold answers out; gold selected but not ranked "
    "first), and the gold relation chains of the lost questions (`^r`: the relation walked backwards).")
#: LLM calls per question as the pipeline makes them (:func:`calls_now`), where a table shows them
CALLS_NOW = ("the recorded calls less any selection call over a single candidate entity, which the pipeline skips "
             "(it cannot change the answer)")


def report_full(records: Records) -> str:
    """The four-stage pipeline against the decomposition-only run on the same questions."""
    t = full_tables(records)
    lines = ["# Keqing, the paper's four stages, on MetaQA dev (local model)", "",
             "Default settings (candidate selection by the LLM, then a response). " + FOUR_STAGES_LEGEND + " The "
             "default leaves out the dense supplement (`dense_supplement=0`), which the paper's sec. 3.2 says it "
             "included \"in practice\" (with no number for it): the paper's column was probably made with it; "
             "keqing_ablations' dense cells measure what it changes.", "", _md(t["four_stages"]),
             "", "## Candidate reasoning and response", "", SELECTION_LEGEND, "", _md(t["selection"])]
    lines += _bound_lines(t["bound"]) + _target_lines(t["target"]) + _disagreement_lines(t["disagreements"])
    lines += ["", "## Cost", "",
              "`single-candidate calls`: selection calls over one candidate entity, which cannot change the answer (an "
              "empty or unmatched selection falls back to it); the pipeline skips them, so `calls/q without them` "
              "is what it spends on these questions.", "", _md(t["cost"]),
              "", "s/q is wall time per question on 2 cores, including stretches where other jobs shared the cores."]
    return "\n".join(lines) + "\n"


def calls_now(r: dict[str, Any]) -> int:
    """LLM calls the pipeline makes for this record's question: the recorded ones less any selection call
    over one candidate entity, which it skips (it cannot change the answer)."""
    single = sum(1 for x in r.get("reasoning") or []
                 if x.get("mode") == "select" and x.get("n_candidates") == 1 and (x.get("calls") or 0) > 0)
    return int(r["llm"]["calls"]) - single


def bound_table(rows: dict[int, list[dict[str, Any]]]) -> ResultTable:
    """Questions with a sub-question over the selection bound against the others, per hop."""
    body = []
    for h, recs in rows.items():
        over = [r for r in recs if any(x.get("over_bound") for x in r.get("reasoning") or [])]
        within = [r for r in recs if r not in over]
        cell = lambda rs: ([len(rs), f"{np.mean([r['metrics']['hits@1'] for r in rs]):.3f}",  # noqa: E731
                            f"{np.mean([r['llm']['calls'] for r in rs]):.2f}"] if rs else [len(rs), "—", "—"])
        body.append([h, *cell(over), *cell(within)])
    return table("bound", "The selection bound", ["hops", "over the bound: n", "Hits@1", "calls/q", "within it: n",
                                                  "Hits@1", "calls/q"], body)


def target_table(rows: dict[int, list[dict[str, Any]]], records: Records) -> ResultTable:
    """Per hop: Hits@1 against the gold-path ceiling and the calls the pipeline makes (:func:`calls_now`)."""
    body = [[h, *_target_cells(recs, *ceiling(records, h, {r["qid"] for r in recs}))] for h, recs in rows.items()]
    return table("target", "Within 2 points of the gold-path ceiling at ≤ 3 LLM calls per question",
                 ["hops", "Hits@1", "ceiling", "ours − ceiling (points)", "calls/q", "met"], body)


def _bound_lines(t: ResultTable) -> list[str]:
    return ["", "## The selection bound", "",
            "A selection call shows at most `reason_max` candidate facts (default 40). Above it, several chain groups "
            "are first narrowed by the group choice (one more call; never at K = 1, which gives one group); if still "
            "above, every candidate is kept without a selection call (`over_bound`). Questions with at "
            "least one sub-question over the bound against the others (Hits@1; the ceiling is per hop, not per "
            "question, so this compares question kinds, not the bound alone).", "", *_md(t).splitlines()]


def _target_lines(t: ResultTable) -> list[str]:
    return ["", "## Target: within 2 points of the gold-path ceiling at ≤ 3 LLM calls per question", "",
            f"`calls/q`: what the pipeline spends on these questions ({CALLS_NOW}). `within 2 points` counts a gap "
            "of exactly 2.0 as within.", "", *_md(t).splitlines()]


def _chain(r: dict[str, Any], which: str) -> str:
    d = _decomposition(r) or {}
    return ", ".join(d.get(which) or []) or "—"


def lost_cause(full: dict[str, Any], base: dict[str, Any]) -> str:
    """Why a question that decomposition only answers right is wrong after the four stages (from the
    stripped records): the decomposition differs; a selection before the last sub-question dropped
    every path to a gold answer (none among the last candidates); the last selection left the gold
    answers out; or the gold answer was selected but not ranked first."""
    if _chain(full, "predicted_chain") != _chain(base, "predicted_chain"):
        return "decomposition differs"
    sel = full.get("selection") or {}
    if not sel.get("gold_in_candidates"):
        return "an earlier selection dropped the path"
    if not sel.get("gold_selected"):
        return "the last selection left gold out"
    return "gold selected, not first"


def disagreement_counts(rows: dict[int, list[dict[str, Any]]], dec_only: Records) -> dict[int, dict[str, Any]]:
    """Per hop: paired questions, lost and won against decomposition only, the causes of the losses
    (:func:`lost_cause`, a Counter) and the ids of the lost questions, in order (``lost_qids``)."""
    out = {}
    for h, recs in rows.items():
        base = {r["qid"]: r for r in dec_only(f"keqing_metaqa_{h}hop")}
        pairs = [(r, base[r["qid"]]) for r in recs if r["qid"] in base]
        lost = [(f, b) for f, b in pairs if b["metrics"]["hits@1"] == 1.0 and f["metrics"]["hits@1"] != 1.0]
        out[h] = {"paired": len(pairs), "lost": len(lost),
                  "won": sum(1 for f, b in pairs if f["metrics"]["hits@1"] == 1.0 and b["metrics"]["hits@1"] != 1.0),
                  "causes": Counter(lost_cause(f, b) for f, b in lost), "lost_qids": [f["qid"] for f, _ in lost]}
    return out


def disagreements_table(rows: dict[int, list[dict[str, Any]]], dec_only: Records, folder: Path) -> ResultTable:
    """The disagreements per hop (:func:`disagreement_counts`), with the gold relation paths of the lost
    questions tallied by :func:`gold_chain_counts` (kept in ``folder``)."""
    fmt = lambda c: "; ".join(f"{k} {v}" for k, v in sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))) or "—"  # noqa: E731
    body = []
    for h, d in disagreement_counts(rows, dec_only).items():
        counts = gold_chain_counts(folder, f"lost_{h}hop", h, [(q,) for q in d["lost_qids"]])
        chains: Counter = Counter()
        for (chain,), n in (counts or {}).items():
            chains[", ".join(chain) or "—"] += n
        body.append([h, d["paired"], d["lost"], d["won"], fmt(d["causes"]), NEEDS_DATA if counts is None else fmt(chains)])
    return table("disagreements", "Where the four stages and decomposition only disagree",
                 ["hops", "paired n", "lost", "won", "causes of the losses", "gold chains of the losses"], body)


def _disagreement_lines(t: ResultTable) -> list[str]:
    return ["", "## Where the four stages and decomposition only disagree", "", DISAGREEMENTS_LEGEND, "",
            *_md(t).splitlines()]


def _disagreements(rows: dict[int, list[dict[str, Any]]], dec_only: Records, folder: Path) -> list[str]:
    """Per hop: the questions the four stages and decomposition only disagree on, the cause of each
    loss (:func:`lost_cause`) and the gold relation chains of the losses (the report's lines)."""
    return _disagreement_lines(disagreements_table(rows, dec_only, folder))


def _cells(prefix: str, args: tuple[str, ...]) -> tuple[Cell, ...]:
    return tuple(Cell(f"{prefix}_{h}hop", "keqing", f"keqing:metaqa:{h}hop", SAMPLE,
                      ("--sample", str(SAMPLE), "--llm", "local", *args, "--no-transcripts")) for h in HOPS)


TABLE = register(Table(
    name="keqing_metaqa", title="Keqing on MetaQA dev, decomposition and retrieval only (local model)",
    cells=_cells("keqing_metaqa", ("--set", "reasoning=group", "--set", "respond=False")),
    report=report, output="keqing_metaqa.md", strip=strip, records="keqing_metaqa",
    source="Keqing paper, Table 2 (MetaQA Hits@1)", extra_files=(CEILING_FILE, CHAINS_FILE),
    provenance="made by an earlier version of the code with `--set respond=False` (the default reasoning was then `group`, "
               "which is `--set reasoning=group` today; the two together are the named setting "
               "`decomposition_only=true`); their config hash is that version's",
))

TABLE_FULL = register(Table(
    name="keqing_full", title="Keqing on MetaQA dev, the paper's four stages (local model)",
    cells=_cells("keqing_full", ()), report=report_full, output="keqing_full.md", strip=strip_full,
    records="keqing_full", source="Keqing paper, Table 2 (MetaQA Hits@1)", extra_files=(CEILING_FILE, CHAINS_FILE),
    effects=KEQING_OVER_KBBINDER,
))


# ---------------------------------------------------------------- Fig. 5 (K) and Fig. 6 (chain directly)
ABLATION_SAMPLE = 100  # a seeded subset of keqing_full's 200 (random.sample draws are prefix-consistent)
KS = (2, 4, 8)
DENSE_N = 10  # triples the dense-supplement cells add (the paper names no number; fixed before any run)
# the parts of the paper (and of its released code) beyond Fig. 5 and 6: cell prefix, `--set`, row label
PARTS = (("keqing_dense", f"dense_supplement={DENSE_N}", f"dense supplement, {DENSE_N} triples (sec. 3.2)"),
         ("keqing_text", "candidates=text", "candidates as text (sec. 3.3)"),
         ("keqing_released", "pipeline=released", "as released by its authors (1-hop facts, no response)"))
DENSE_LABEL, TEXT_LABEL, RELEASED_LABEL = (label for _, _, label in PARTS)  # their rows (notebook 32 shows each)
#: the paper on the supplement (sec. 3.2), which it gives no number for: its results were probably made with it
DENSE_IN_PRACTICE = ("In practice, we note that the triplets retrieved by DPR (Karpukhin et al., 2020) will also be "
                     "included as supplementary answer candidates to broaden the knowledge retrieval results")
#: the paper on the two formats of the candidates (sec. 3.3): rules for training-free LLMs, text for fine-tuned ones
FORMAT_IN_PRACTICE = ("In practice, we found that the first method is suitable for training-free LLMs, such as ChatGPT, "
                      "and the second method is suitable for LLMs that requires the stage of finetuning, such as LLaMA")


def dense_disclosure(compared: str = "keqing_full's comparison with the paper's Table 2",
                     measured: str = "the dense cells measure what it changes") -> str:
    """What the paper says of the dense supplement and what our default leaves out (the reports that name it):
    ``compared``, what leaves it out beside the paper's numbers; ``measured``, which cells measure what it changes."""
    return (f"Sec. 3.2: \"{DENSE_IN_PRACTICE}.\" The paper gives no number for the supplement (no result with and "
            "without it), so its reported numbers were probably made with it; our default leaves it out "
            f"(`dense_supplement=0`), and so does {compared} — {measured}")


def dense_description() -> str:
    """The dense supplement as implemented (`dense_supplement`), in the words both reports use."""
    return (f"up to {DENSE_N} triples around a sub-question's seeds, ranked by sentence-embedding similarity with it "
            "(all-MiniLM-L6-v2 standing for the paper's DPR) and reaching entities the chains did not, join the chains' "
            "candidates within the room the selection bound leaves (the paper: 'if there remains additional token "
            "budget'; it names no number: ours was fixed before any run). The search space is bounded and local: "
            f"the first {DENSE_MAX_SEEDS} seeds in the order they were reached and, around each, the first "
            f"{DENSE_PER_SEED} triples in the store's order (not ranked: a hub's other triples are never seen) — DPR "
            "searches the whole knowledge base, ours only the seeds' 1-hop neighbourhood. A sub-question whose chains "
            "reach one candidate, which makes no selection call by default, makes one with the supplement's candidates "
            "beside it")


ABLATION_COLUMNS = ("configuration", "n", "Hits@1 [95% CI]", "F1 [95% CI]", "gain over default", "chain right / seed right",
                    "candidates / sub-q", "over the bound: group choice first / kept all / of", "reasoning calls/q",
                    "calls/q", "tokens/q", "s/q (cached calls/q)")
DEFAULT_LABEL = "K = 1, sub-questions (default, four stages)"
CHAIN_LABEL = "logical chain directly (Fig. 6)"
LAST_LABEL = "selection on the last sub-question only"


def _ablation_cells(label: str, recs: list[dict[str, Any]], base: list[dict[str, Any]], chains: bool = True) -> list[Any]:
    """One configuration's row; ``chains=False`` for a pipeline without templates (the released code),
    whose decomposition has a seed to check but no template chain."""
    row = summarize(recs)
    n_cands = [x.get("n_candidates") or 0 for r in recs for x in r.get("reasoning") or []]
    # calls the pipeline makes (a record may hold selection calls over one candidate, which it skips: calls_now)
    calls = sum((r.get("stages") or {}).get("calls", {}).get("reasoning", 0) - (int(r["llm"]["calls"]) - calls_now(r))
                for r in recs) / len(recs)
    row["calls/q"] = float(np.mean([calls_now(r) for r in recs]))
    gain = format_gain(paired_gain(recs, base, "hits@1")) if base else "—"
    subs = [x for r in recs for x in r.get("reasoning") or [] if x.get("mode") == "select"]
    over = [x for x in subs if (x.get("n_candidates") or 0) > REASON_MAX]
    bound = (f"{sum(1 for x in over if (x.get('calls') or 0) >= 1)} / {sum(1 for x in over if x.get('over_bound'))} "
             f"of {len(over)} (of {len(subs)})") if subs else "—"
    decs = [d for d in (_decomposition(r) for r in recs) if d]
    seeds = [d["seed_correct"] for d in decs if "seed_correct" in d]
    dec = (f"{np.mean([bool(d.get('chain_correct', d.get('correct'))) for d in decs]):.2f} / " if chains else "— / ") + (
           f"{f'{np.mean(seeds):.2f}' if seeds else '—'} (n={len(decs)}"
           f"{'' if len(seeds) in (0, len(decs)) else f' / {len(seeds)}'})") if decs else "—"
    return [label, row["n"], _rate([r["metrics"]["hits@1"] for r in recs]), _rate([r["metrics"]["f1"] for r in recs]),
            gain, dec, f"{(sum(n_cands) / len(n_cands)) if n_cands else 0:.1f}", bound, f"{calls:.2f}",
            f"{row['calls/q']:.2f}", f"{row['tokens/q']:.0f}", f"{row['s/q']:.1f} ({row['cache_hits'] / row['n']:.2f})"]


def _hop_cells(h: int) -> dict[str, str]:
    """The ablation cells of one hop: row label → cell name (K, the chain directly, the last sub-question only
    from 2 hops, the parts beyond the figures)."""
    cells = {f"K = {k}": f"keqing_k{k}_{h}hop" for k in KS}
    cells[CHAIN_LABEL] = f"keqing_chain_{h}hop"
    if h > 1:  # LAST_NOTE: one sub-question, the same as the default
        cells[LAST_LABEL] = f"keqing_last_{h}hop"
    cells.update({label: f"{prefix}_{h}hop" for prefix, _, label in PARTS})
    return cells


def _hop_runs(records: Records, full: Records, h: int) -> tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]]]:
    """The ablation cells of one hop (label → records) and the default's records on their questions."""
    runs = {label: records(name) for label, name in _hop_cells(h).items()}
    qids = set().union(*({r["qid"] for r in v} for v in runs.values()))
    base = [r for r in full(f"keqing_full_{h}hop") if r["qid"] in qids] if qids else []
    return runs, base


def running_cells(records: Records) -> dict[str, str]:
    """The ablation cells still running: cell name → ``partial k/N`` (records of some, not all, of its planned
    questions). The report never scores them: their rows say ``partial k/N`` and nothing is concluded from them."""
    return {c.name: p for c in TABLE_ABLATIONS.cells if (p := partial(records(c.name), c))}


class _Scored:
    """``records`` with the cells of ``running`` read as ``[]`` (never scored); ``folder`` as ``records``'."""

    def __init__(self, records: Records, running: dict[str, str]) -> None:
        self.records, self.running, self.folder = records, running, getattr(records, "folder", None)

    def __call__(self, cell: str) -> list[dict[str, Any]]:
        return [] if cell in self.running else self.records(cell)


def ablation_tables(records: Records) -> dict[str, ResultTable]:
    """The keqing_ablations report's tables as data: every configuration per hop (a bold ``**h-hop**``
    row heads each hop: :func:`by_hop` makes it an index level), the ceiling target, the parts beside the default.
    A cell still running (:func:`running_cells`) reads ``partial k/N``, unscored."""
    from .core import get_table

    full = Records(get_table("keqing_full"))
    running = running_cells(records)
    scored = _Scored(records, running)
    body: list[list[Any]] = []
    target: list[list[Any]] = []
    for h in HOPS:
        runs, base = _hop_runs(scored, full, h)
        names = _hop_cells(h)
        body.append(_not_run(len(ABLATION_COLUMNS), f"**{h}-hop**"))
        if base:
            body.append(_ablation_cells(DEFAULT_LABEL, base, []))
        for label, recs in runs.items():
            body.append(_ablation_cells(label, recs, base, chains=label != RELEASED_LABEL) if recs else
                        _not_run(len(ABLATION_COLUMNS), label, "", running[names[label]]) if names[label] in running
                        else _not_run(len(ABLATION_COLUMNS), label, 0, "not run yet"))
        complete = [(lb, rs) for lb, rs in [(DEFAULT_LABEL, base), *runs.items()] if len(rs) >= ABLATION_SAMPLE]
        if complete:
            ceil, n_ceil = ceiling(scored, h, {r["qid"] for r in complete[0][1]})
            target += [[h, lb, *_target_cells(rs, ceil, n_ceil)] for lb, rs in complete]
    return {"ablations": table("ablations", "Keqing ablations on MetaQA dev (our reported part)", ABLATION_COLUMNS, body),
            "target": table("target", "Within 2 points of the gold-path ceiling at ≤ 3 LLM calls per question",
                          ["hops", "configuration", "Hits@1", "ceiling", "− ceiling (points)", "calls/q", "met"], target),
            "parts": parts_table(scored, full, running)}


#: what each column of the ablations table means (its report prints them all above the table; notebook 32 those
#: of the columns it shows, under it: :func:`legend`)
ABLATION_NOTES = {
    "gain over default": "`gain over default`: Hits@1 minus the default (K = 1, sub-questions, the four stages: the "
                         "keqing_full records of the same questions), points, paired bootstrap 95% CI.",
    "chain right / seed right": "`chain right / seed right`: the decomposition's relation chain (for the logical chain "
                                "directly: the written chain) equals the gold chain / its seed names link to the topic "
                                "entity (`—`: records without the seed check; `n=a / b`: b of the a records carry it).",
    "candidates / sub-q": "`candidates / sub-q`: candidate answers the reasoning stage saw per sub-question.",
    "over the bound: group choice first / kept all / of": (
        "`over the bound`: sub-questions whose candidates exceed what one selection call may show "
        f"({REASON_MAX} facts): narrowed first by the group choice (one more call; only with several chain groups, "
        "i.e. K > 1) / then still above it, every candidate kept without a selection / all over it (all sub-questions "
        "with a selection stage)."),
    "calls/q": f"`calls/q`: LLM calls per question, {CALLS_NOW}; tokens are as recorded.",
    "s/q (cached calls/q)": (
        "`s/q (cached calls/q)`: wall seconds per question, which depend on the machine's load when each run was "
        "made; a call with the same prompt as one another run made before it (the decomposition, a selection over the "
        "same candidates) is answered from the LLM cache, so cells run later took fewer seconds."),
}
#: why selection on the last sub-question only has no 1-hop cell (:func:`_hop_cells`)
LAST_NOTE = ("no 1-hop cell (a 1-hop question has one sub-question, so selecting at the last one is the "
             "default)")


def report_ablations(records: Records) -> str:
    """Fig. 5's K-curve and Fig. 6's decompose-vs-chain on MetaQA, each paired against the default
    (K = 1, sub-questions, the four stages: the keqing_full records of the same questions)."""
    t = ablation_tables(records)
    lines = ["# Keqing ablations on MetaQA dev (local model): Fig. 5's K, Fig. 6's logical chain directly, the dense "
             "supplement, candidates as text, the released code", "",
             f"{ABLATION_SAMPLE} questions per hop (a subset of keqing_full's {SAMPLE}); every other setting is the "
             "default (four stages). The paper draws Fig. 5 on WebQSP (no model named) and Fig. 6 on MetaQA "
             "(fine-tuned LLaMA, its caption); its curves are read from the figures, so no number of theirs is printed "
             "here. `logical chain directly`: the LLM writes the relation chain, which runs from the topic entity as "
             "one step; candidate reasoning and the response as in the default (the paper replaces only decomposition "
             "and retrieval). `selection on the last sub-question only` is not in the paper (`reason_steps=last`): the "
             f"sub-questions before the last keep every entity their chains reach; it has {LAST_NOTE}. "
             + " ".join(ABLATION_NOTES.values()) + " A cell still running reads `partial k/N` and is not scored. The "
             "parts of the paper beyond its figures — the dense supplement (sec. 3.2), candidates as text (sec. 3.3) — "
             "and its authors' released code, each on the same questions: what each is, what the paper says of it and "
             "where ours departs, in their section below.", "",
             _md(t["ablations"]),
             "", "## Target on these questions: within 2 points of the gold-path ceiling at ≤ 3 LLM calls per question",
             "", "The target for the full pipeline, per configuration with all its questions; `ceiling`: the gold "
             "relation path executed as Keqing executes chains, on the same questions; `calls/q` as above. A gap of "
             "exactly 2.0 counts as within.", "", _md(t["target"])]
    return "\n".join(lines + _parts_lines(t["parts"])) + "\n"


def supplement_stats(recs: list[dict[str, Any]]) -> str:
    """What the dense supplement did in these records: its candidates per sub-question it joined, the
    share of the answers kept there that it gave, and the questions whose final answers hold one of them."""
    steps = [x for r in recs for x in r.get("reasoning") or [] if x.get("dense")]
    if not steps:
        return "no sub-question got a supplement"
    last = sum(1 for r in recs if ((r.get("reasoning") or [{}])[-1] or {}).get("dense_selected"))
    answers = sum(x.get("n_answers") or 0 for x in steps)
    return (f"{np.mean([x['dense'] for x in steps]):.1f} supplement candidates in {len(steps)} sub-questions; "
            f"{sum(x.get('dense_selected') or 0 for x in steps)} of their {answers} answers from it; "
            f"{last} of {len(recs)} questions answered with one")


def supplement_calls(recs: list[dict[str, Any]]) -> int:
    """Sub-questions whose chains reached one candidate (no selection call without the supplement) that made a
    selection call with the supplement's candidates beside it (from the saved counts: candidates − supplement = 1)."""
    return sum(1 for r in recs for x in r.get("reasoning") or []
               if x.get("dense") and (x.get("n_candidates") or 0) - x["dense"] == 1 and (x.get("calls") or 0) >= 1)


def selection_failures(recs: list[dict[str, Any]]) -> tuple[int, int, int]:
    """(empty, unmatched, selections): of the selection calls over several candidates (within the bound), those
    whose answer selected nothing / named no candidate — each falls back to every candidate."""
    calls = [x for r in recs for x in r.get("reasoning") or [] if x.get("mode") == "select"
             and (x.get("n_candidates") or 0) > 1 and not x.get("over_bound") and (x.get("calls") or 0) >= 1]
    return (sum(1 for x in calls if x.get("error") == "select_empty"),
            sum(1 for x in calls if x.get("error") == "select_unmatched"), len(calls))


def _failures(recs: list[dict[str, Any]]) -> str:
    e, u, n = selection_failures(recs)
    return f"empty {e}/{n}, unmatched {u}/{n}"


def parts_table(records: Records, full: Records, running: dict[str, str] | None = None) -> ResultTable:
    """The dense supplement, the text format and the released code, each against the default on the same
    questions: paired Hits@1, and what each changes (the supplement's share of the answers and the selection
    calls it adds; the text format's empty and unmatched selections beside the default's; the released code's
    reasoning calls, seeds over its bound and dropped names). ``running``: cells still running (cell name →
    ``partial k/N``), whose rows say so, unscored."""
    running = running or {}
    body = []
    for h in HOPS:
        for prefix, setting, label in PARTS:
            name = f"{prefix}_{h}hop"
            recs = [] if name in running else records(name)
            if not recs:
                body.append([h, label, "" if name in running else 0, "",
                             f"{running.get(name, 'not run yet')} (`{name}`, `--set {setting}`)", "", ""])
                continue
            qids = {r["qid"] for r in recs}
            base = [r for r in full(f"keqing_full_{h}hop") if r["qid"] in qids]
            both = {r["qid"] for r in base}
            mine = [r for r in recs if r["qid"] in both]
            steps = [x for r in recs for x in r.get("reasoning") or []]
            if prefix == "keqing_dense":
                what = supplement_stats(recs)
                what += f"; one-candidate sub-questions that made a selection call with it: {supplement_calls(recs)}" \
                    if what != "no sub-question got a supplement" else ""
            elif prefix == "keqing_text":
                what = (f"{sum(int(x.get('calls') or 0) for x in steps) / len(recs):.2f} selection calls/q; selections "
                        f"{_failures(recs)} (the default: {_failures(base)})")
            else:
                what = (f"{sum(int(x.get('calls') or 0) for x in steps) / len(recs):.2f} reasoning calls/q; "
                        f"sub-questions with a seed over the bound: {sum(1 for x in steps if x.get('over_bound'))}; "
                        f"names matching no fact, dropped: {sum(int(x.get('unmatched') or 0) for x in steps)}")
            hits = f"{np.mean([r['metrics']['hits@1'] for r in base]):.3f}" if base else "—"
            body.append([h, label, len(mine), hits,
                         f"{np.mean([r['metrics']['hits@1'] for r in mine]) if mine else float('nan'):.3f}",
                         format_gain(paired_gain(recs, base, "hits@1")) if base else "—", what])
    return table("parts", "The dense supplement, candidates as text and the released code, beside the default",
                 ["hops", "configuration", "paired n", "default Hits@1", "Hits@1", "difference [95% CI]",
                  "what it changed"], body)


#: what the parts table's `what it changed` column counts, per part (cell prefix)
CHANGED = {
    "keqing_dense": "its candidates per sub-question it joined, the answers it gave, the questions answered with one, "
                    "and the one-candidate sub-questions that made a selection call with it",
    "keqing_text": "selection calls per question, and of its selection calls over several candidates those whose "
                   "answer selected nothing (`empty`) or named no candidate (`unmatched`; each falls back to every "
                   "candidate), beside the default's on the same questions",
    "keqing_released": "its reasoning calls, the sub-questions with a seed whose facts were over the bound, and the "
                       "names matching no fact (dropped)",
}
PARTS_LEGEND = ("Each configuration against the default (the four stages with K = 1, the keqing_full records) on the "
                "questions both answered, Hits@1, the difference in points with a paired bootstrap 95% CI; a cell still "
                "running reads `partial k/N` and is not scored. The paper gives no number for any of the three.")


def text_description() -> str:
    """``candidates=text`` as implemented, what sec. 3.3 claims of the two formats and what that predicts here."""
    return ("the candidate facts serialised as sentences (`s r o.`) instead of tuples `(s, r, o)` whose format the "
            f"instruction explains. Sec. 3.3: \"{FORMAT_IN_PRACTICE}.\" Our model is not fine-tuned, so the paper "
            "predicts text ≤ rules here; no number of the paper isolates the format. The cell changes the instruction "
            "too, not only the format: `keqing_select_text` is the candidate-reasoning instruction of the paper's "
            "Table 1 ('Use the following pieces of context …', with our reply line), where the default "
            "`keqing_select` adds the tuple rules and 'give every answer the tuples support' — a difference is the two "
            f"together. `what it changed`: {CHANGED['keqing_text']}")


RELEASED_WHAT = ("the released code's `chat.py` after the same decomposition as the default: every 1-hop fact of each "
                 "seed instead of templates and chains, one reasoning call per seed whose facts hold several relations, "
                 "and no response (its chain column reads `—`: it matches no template)")


def released_departures() -> list[str]:
    """Where ``pipeline=released`` departs from the authors' ``chat.py``, one clause each."""
    s = KeqingSettings()
    return ["the local model decomposes and reasons (`chat.py`: a fine-tuned Llama-2 decomposes, ChatGPT reasons)",
            "the reasoning prompt is our `keqing_select` (rules and a worked example, the facts one per line), where "
            "`chat.py` sends its own `RAG_prompt` with the facts, joined by \", \", in the system message",
            "names the model writes that match no fact are dropped (`chat.py` keeps them and fuzzy-matches them to "
            "entities at the next hop)",
            "`chat.py` is interactive — a human confirms or corrects every answer — and ours acts as if the human "
            "always accepted",
            "a dependent sub-question's seeds are the names the model wrote, linked (an `<ANSWER>-k` takes that "
            "sub-question's answers; none usable: the answers it depends on, then the topic), where `chat.py` always "
            "takes the answers of the sub-question it depends on",
            "`chat.py` returns `list(set(...))`, in arbitrary order (its Hits@1 is then a matter of chance), where "
            "ours keeps the model's order",
            f"at most {s.released_seeds} seeds per sub-question and {s.released_facts} facts per call (`chat.py` has "
            "no bound)"]


def released_description() -> str:
    """``pipeline=released`` as implemented, and where it departs from the authors' ``chat.py``."""
    d = released_departures()
    return (f"{RELEASED_WHAT}. Where ours departs from `chat.py`: " + "; ".join(d[:-1]) + f"; and {d[-1]}. "
            f"`what it changed`: {CHANGED['keqing_released']}")


def part_explained(label: str) -> str:
    """Notebook 32's explanation of one part beyond the figures (``label``: :data:`DENSE_LABEL`,
    :data:`TEXT_LABEL` or :data:`RELEASED_LABEL`), the report's words one paragraph per line (for
    :func:`kgqa_lib.notebooks.say`); for candidates as text, one candidate fact in both formats."""
    from ..methods.keqing import CandidateGroup, verbalise

    if label == DENSE_LABEL:
        return (f"As run here (`dense_supplement={DENSE_N}`): {dense_description()}.\n"
                + dense_disclosure("keqing_full's comparison with the paper's Table 2",
                                   "the table below measures what it changes") + ".")
    if label == TEXT_LABEL:
        g = CandidateGroup(("directed_by",), [("A Film", "directed_by", "A Director")], ["A Director"], ["A Director"])
        return (f"As run here (`candidates=text`): {text_description()}.\n"
                f"One candidate fact as the default shows it: {verbalise(g, 0, 'rules')} — and as text: "
                f"{verbalise(g, 0, 'text')}")
    if label == RELEASED_LABEL:
        return ("The authors' released code is the GitHub repository NoviceStone/Keqing; this setting follows its "
                f"`chat.py` (`pipeline=released`). As run here: {RELEASED_WHAT}.\nWhere ours departs from `chat.py`:"
                + "".join(f"\n- {x[0].upper()}{x[1:]}." for x in released_departures())
                + f"\n`what it changed`: {CHANGED['keqing_released']}.")
    raise ValueError(f"no explanation for {label!r}: give one of {DENSE_LABEL!r}, {TEXT_LABEL!r}, {RELEASED_LABEL!r}")


def _parts_lines(t: ResultTable) -> list[str]:
    return ["", "## The dense supplement, candidates as text and the released code, beside the default", "",
            PARTS_LEGEND, "",
            f"- `dense supplement` (sec. 3.2, `dense_supplement={DENSE_N}`): {dense_description()}. "
            f"{dense_disclosure()}. `what it changed`: {CHANGED['keqing_dense']}.",
            f"- `candidates as text` (sec. 3.3, `candidates=text`): {text_description()}.",
            f"- `as released by its authors` (`pipeline=released`): {released_description()}.", "",
            *_md(t).splitlines()]


def _parts(records: Records, full: Records) -> list[str]:
    """The report's section on the parts beyond the figures (:func:`parts_table`)."""
    return _parts_lines(parts_table(records, full))


def _target_cells(recs: list[dict[str, Any]], ceil: float, n_ceil: int) -> list[Any]:
    """`Hits@1 | ceiling | − ceiling | calls/q | met` of the target: within 2 points of the gold-path
    ceiling (a gap of exactly 2.0 is within) at ≤ 3 LLM calls per question (:func:`calls_now`)."""
    hits = float(np.mean([r["metrics"]["hits@1"] for r in recs]))
    calls = float(np.mean([calls_now(r) for r in recs]))
    if not n_ceil:
        return [f"{hits:.3f}", "— (needs KGQA_DATA_DIR)", "", f"{calls:.2f}", "—"]
    gap = round(100 * (hits - ceil), 1)
    why = [w for w, bad in (("accuracy", gap < -2.0), ("calls", calls > 3.0)) if bad]
    return [f"{hits:.3f}", f"{ceil:.3f}", f"{gap:+.1f}", f"{calls:.2f}", "yes" if not why else "no (" + ", ".join(why) + ")"]


ABLATION_CELLS = tuple(
    Cell(f"keqing_k{k}_{h}hop", "keqing", f"keqing:metaqa:{h}hop", ABLATION_SAMPLE,
         ("--sample", str(ABLATION_SAMPLE), "--llm", "local", "--set", f"K={k}", "--no-transcripts"))
    for k in KS for h in HOPS) + tuple(
    Cell(f"keqing_chain_{h}hop", "keqing", f"keqing:metaqa:{h}hop", ABLATION_SAMPLE,
         ("--sample", str(ABLATION_SAMPLE), "--llm", "local", "--set", "mode=chain", "--no-transcripts"))
    for h in HOPS) + tuple(
    # not in the paper: candidate reasoning over the last sub-question only (earlier ones keep every entity
    # their chains reach) — keqing_full's 2-/3-hop losses against decomposition only are earlier selections
    # dropping the path, and it spends one selection call per question
    Cell(f"keqing_last_{h}hop", "keqing", f"keqing:metaqa:{h}hop", ABLATION_SAMPLE,
         ("--sample", str(ABLATION_SAMPLE), "--llm", "local", "--set", "reason_steps=last", "--no-transcripts"))
    for h in HOPS if h > 1) + tuple(
    # the dense supplement (sec. 3.2), the candidates as text (sec. 3.3) and the authors' released code, on the
    # same questions as the default
    Cell(f"{prefix}_{h}hop", "keqing", f"keqing:metaqa:{h}hop", ABLATION_SAMPLE,
         ("--sample", str(ABLATION_SAMPLE), "--llm", "local", "--set", setting, "--no-transcripts"))
    for prefix, setting, _ in PARTS for h in HOPS)

TABLE_ABLATIONS = register(Table(
    name="keqing_ablations", title="Keqing on MetaQA dev: K = 2/4/8 (Fig. 5), the logical chain directly (Fig. 6), selection on "
                                   "the last sub-question, the dense supplement (sec. 3.2), candidates as text (sec. 3.3), "
                                   "the released code",
    cells=ABLATION_CELLS, report=report_ablations, output="keqing_ablations.md", strip=strip_full,
    records="keqing_ablations", source="Keqing paper, Fig. 5 and Fig. 6, sec. 3.2 and 3.3; its authors' released code",
    extra_files=(CEILING_FILE,),
))


# ---------------------------------------------------------------- for the notebooks: tables, figure data, summaries
BUILDERS = {"keqing_metaqa": metaqa_tables, "keqing_full": full_tables, "keqing_ablations": ablation_tables}
FIG5_ROWS = (DEFAULT_LABEL, *(f"K = {k}" for k in KS))  # the ablations table's rows of Fig. 5, and of Fig. 6:
FIG6_ROWS = (DEFAULT_LABEL, CHAIN_LABEL)


#: the columns of each report table that hold shares (Hits@1, F1, accuracies, the paper's values), which the
#: reports print as fractions and the notebooks in points (:func:`in_points`)
SHARES = {
    "decomposition_only": ("Hits@1 [95% CI]", "paper", "gold-path ceiling", "decomposition acc. (chain) [95% CI]"),
    "four_stages": ("Hits@1 [95% CI]", "F1 [95% CI]", "paper", "gold-path ceiling", "decomposition only",
                    "decomposition acc. (chain)", "seed linked right"),
    "selection": ("gold among candidates", "gold selected", "selection precision", "selection recall",
                  "response names the top answer"),
    "bound": ("Hits@1",),
    "target": ("Hits@1", "ceiling"),
    "ablations": ("Hits@1 [95% CI]", "F1 [95% CI]", "chain right / seed right"),
    "parts": ("default Hits@1", "Hits@1"),
}
POINTS_NOTE = "Hits@1, F1 and the other shares in points (of 100), like the gains."
_SHARE = re.compile(r"(?<![\d.])[01]\.\d{2,3}(?![\d.])")


def in_points(t: ResultTable, columns: tuple[str, ...]) -> ResultTable:
    """``t`` with every share in ``columns`` (``0.970``, ``0.99``: a fraction as the reports print it) written in
    points to the same precision (``97.0``, ``99``); other cells and columns as they are."""
    from decimal import Decimal

    def points(m: re.Match) -> str:
        value = Decimal(m.group(0))
        return m.group(0) if value > 1 else f"{value * 100:.{len(m.group(0)) - 4}f}"

    keep = [c in columns for c in t.columns]
    return table(t.name, t.title, t.columns, [[_SHARE.sub(points, c) if k and isinstance(c, str) else c
                                               for c, k in zip(r, keep)] for r in t.rows])


def frames(name: str) -> dict[str, Any]:
    """The report tables of ``keqing_metaqa``, ``keqing_full`` or ``keqing_ablations`` as DataFrames, from the
    saved records of the cells that hold their planned questions (a cell still running reads not run yet), the
    shares in points (:func:`in_points`; the columns: :func:`legend`)."""
    from .core import get_table
    from .overview import complete_records
    from .result_table import frames as to_frames

    return to_frames([in_points(t, SHARES.get(t.name, ()))
                      for t in BUILDERS[name](complete_records(get_table(name))).values()])


LEGENDS = {"four_stages": FOUR_STAGES_LEGEND, "selection": SELECTION_LEGEND, "disagreements": DISAGREEMENTS_LEGEND,
           "parts": PARTS_LEGEND}


def legend(name: str, columns: list[str] | tuple[str, ...] | None = None) -> str:
    """What the columns of the :func:`frames` table ``name`` mean: the text its report prints beside it
    (``ablations``: the notes of ``columns`` only, default all of :data:`ABLATION_NOTES`), led by
    :data:`POINTS_NOTE` where the table holds shares."""
    text = (" ".join(ABLATION_NOTES[c] for c in (columns or ABLATION_NOTES) if c in ABLATION_NOTES)
            if name == "ablations" else LEGENDS[name])
    return f"{POINTS_NOTE} {text}" if name in SHARES else text


def by_hop(df):
    """A report frame whose hop groups are bold rows (``**2-hop**``, as in the ablations table) indexed by
    (hops, row label) instead, the bold rows dropped."""
    import pandas as pd

    labels = pd.Series(df.index, index=range(len(df)))
    hops = labels.str.extract(r"^\*\*(\d+)-hop\*\*$")[0].ffill()
    keep = ~labels.str.startswith("**").to_numpy()
    out = df[keep].copy()
    out.index = pd.MultiIndex.from_arrays([hops[keep].astype(int).to_numpy(), labels[keep].to_numpy()],
                                          names=["hops", df.index.name])
    return out


def stored_ceiling(table: Table, hops: int, qids: set[str]) -> float | None:
    """The gold-path ceiling stored for exactly these questions (read only: never computed here), or None."""
    entry = read_json(Records(table).folder / CEILING_FILE).get(f"{hops}hop")
    return float(entry["hits@1"]) if entry and entry.get("qids") == qids_key(qids) else None


def ablation_points():
    """Fig. 5 and Fig. 6 as numbers, from the complete ablation cells: per hop the default (K = 1,
    decomposition: keqing_full on the same questions), each K and the logical chain directly, with n,
    Hits@1 and its 95% CI, the paired difference from the default and its 95% CI (points), candidates
    per sub-question and the LLM calls per question (:func:`calls_now`)."""
    import pandas as pd

    from .overview import complete_records

    records, full = complete_records(TABLE_ABLATIONS), Records(TABLE_FULL)
    rows = []
    for h in HOPS:
        runs, base = _hop_runs(records, full, h)
        configs = [(DEFAULT_LABEL, 1, base), *((f"K = {k}", k, runs[f"K = {k}"]) for k in KS),
                   (CHAIN_LABEL, None, runs[CHAIN_LABEL])]
        for label, k, recs in configs:
            if not recs or not base:
                continue
            m, lo, hi = bootstrap_ci([r["metrics"]["hits@1"] for r in recs])
            g = (0.0, 0.0, 0.0, len(recs)) if recs is base else paired_gain(recs, base, "hits@1")
            cands = [x.get("n_candidates") or 0 for r in recs for x in r.get("reasoning") or []]
            rows.append({"hops": h, "configuration": label, "K": k, "n": len(recs), "Hits@1": 100 * m,
                         "ci_low": 100 * lo, "ci_high": 100 * hi, "gain": 100 * g[0], "gain_low": 100 * g[1],
                         "gain_high": 100 * g[2], "candidates / sub-q": float(np.mean(cands)) if cands else 0.0,
                         "calls/q": float(np.mean([calls_now(r) for r in recs]))})
    return pd.DataFrame(rows, columns=["hops", "configuration", "K", "n", "Hits@1", "ci_low", "ci_high", "gain",
                                       "gain_low", "gain_high", "candidates / sub-q", "calls/q"])


def fig5_reading(pts=None) -> str:
    """What notebook 32's Fig. 5 shows, from the records: how often K = 1 (the default, keqing_full on the same
    questions) already has the gold relation chain, per hop, and the spread of the K > 1 differences — the room
    more templates have to help ("" until a K cell is complete)."""
    from .overview import complete_records

    pts = ablation_points() if pts is None else pts
    ks = pts[pts["K"].notna() & (pts["K"] > 1)]
    if ks.empty:
        return ""
    records, full = complete_records(TABLE_ABLATIONS), Records(TABLE_FULL)
    right = {}
    for h in sorted(ks["hops"].unique()):
        _, base = _hop_runs(records, full, int(h))
        checks = [d for r in base if (d := _decomposition(r)) is not None]
        if checks:
            right[int(h)] = (sum(_chain_right(d) for d in checks), len(checks))
    said = ("With K = 1 the decomposition's relation chain is already the gold one for "
            + _slash([f"{a} of {n}" for a, n in right.values()]) + f" questions on {_hops(right)}"
            + " (the column `chain right`), so more templates mostly add other chains' candidates. " if right else "")
    return (said + f"Every K > 1 lies within {ks['gain'].abs().max():.1f} points of K = 1, and together their paired "
            f"95% CIs span {ks['gain_low'].min():+.1f} to {ks['gain_high'].max():+.1f} points.")


def _slash(values: list[str]) -> str:
    return " / ".join(values)


def _pts(x: float) -> str:
    """A signed difference in points, one decimal (never ``-0.0``)."""
    return f"{round(x, 1) + 0.0:+.1f}"


def summary() -> str:
    """Notebook 31's summary, from the saved records: the four stages on MetaQA dev against the paper's
    Table 2 and the gold-path ceiling, the selection stage against decomposition alone (worded from the paired
    CIs: :func:`selection_wording`), and GrailQA against the paper's appendix C."""
    from . import keqing_grailqa as G
    from .overview import complete_records

    full, dec = complete_records(TABLE_FULL), complete_records(TABLE)
    rows = {h: full(f"keqing_full_{h}hop") for h in HOPS}
    done = {h: recs for h, recs in rows.items() if recs}
    out = []
    if not done:
        out.append("Keqing's four stages on MetaQA dev have not run yet (`kgqa bench run keqing_full`).")
    else:
        hits = {h: 100 * float(np.mean([r["metrics"]["hits@1"] for r in recs])) for h, recs in done.items()}
        ceil = {h: stored_ceiling(TABLE_FULL, h, {r["qid"] for r in recs}) for h, recs in done.items()}
        hs = "/".join(str(h) for h in done)
        text = (f"On MetaQA dev (our reported part; {hs}-hop, {_slash([str(len(r)) for r in done.values()])} questions) "
                f"Keqing's four stages with the local model score Hits@1 {_slash([f'{v:.1f}' for v in hits.values()])}: "
                f"{_slash([_pts(v - PAPER[h]) for h, v in hits.items()])} points from the paper's fine-tuned "
                f"Keqing-LLaMA ({_slash([f'{PAPER[h]:.1f}' for h in done])})")
        if all(c is not None for c in ceil.values()):
            text += (f" and {_slash([_pts(v - 100 * ceil[h]) for h, v in hits.items()])} from the gold-path ceiling "
                     f"of this KB ({_slash([f'{100 * c:.1f}' for c in ceil.values()])})")
        out.append(text + ".")
        pairs = {h: [r for r in dec(f"keqing_metaqa_{h}hop") if r["qid"] in {x["qid"] for x in recs}]
                 for h, recs in done.items()}
        gains = {h: paired_gain(done[h], base, "hits@1") for h, base in pairs.items() if base}
        if gains:
            text = ("The candidate-selection stage, which the paper adds to pick the answers among the candidates, "
                    "changes Hits@1 by " + _slash([format_gain(g) for g in gains.values()])
                    + f" points on {'/'.join(map(str, gains))}-hop against decomposition alone (every entity the "
                    "chains reach is an answer; paired): " + selection_wording(gains, dec, done))
            out.append(text + ".")
    recs = complete_records(G.TABLE)(G.LINKED)
    if not recs:
        out.append("Keqing on GrailQA dev has not run yet (`kgqa bench run keqing_grailqa`).")
        return "\n".join(out)
    g = lambda r: r.get("grailqa") or {}  # noqa: E731
    iid = [r for r in recs if g(r).get("level") == "i.i.d."]
    f1 = lambda rs: 100 * float(np.mean([r["metrics"]["f1"] for r in rs])) if rs else float("nan")  # noqa: E731
    paper = G.PAPER["Keqing-LLaMA (Ours)"]
    grail = (f"On GrailQA dev ({len(recs)} questions over a fragment holding only the questions' gold facts, topics "
             f"linked from the question text) it reaches F1 {f1(recs):.1f} against the paper's {paper['all'][1]:.1f}, "
             f"and {f1(iid):.1f} on i.i.d. questions against {paper['i.i.d.'][1]:.1f}; "
             f"{sum(1 for r in recs if not r.get('prediction'))} of the {len(recs)} questions get no answer at all.")
    chain = [r for r in recs if g(r).get("chain")]
    cov = [r for r in chain if g(r).get("covered")]
    if chain:
        iid_chain = [r for r in chain if g(r).get("level") == "i.i.d."]
        hits = lambda rs: 100 * float(np.mean([r["metrics"]["hits@1"] for r in rs])) if rs else float("nan")  # noqa: E731
        grail += (f" The template bank decides it: chain questions whose every hop has a template score Hits@1 "
                  f"{hits(cov):.1f}, the others {hits([r for r in chain if r not in cov]):.1f}, and "
                  f"{sum(1 for r in iid_chain if g(r).get('covered'))} of the {len(iid_chain)} i.i.d. chain questions "
                  "are covered. GrailQA's levels are relative to its training set, which the paper's templates come "
                  "from and which is not here; our bank comes from a pool of dev questions, so \"i.i.d.\" questions "
                  "are not i.i.d. to it.")
    out.append(grail)
    return "\n".join(out)


def _hops(hs) -> str:
    return "/".join(str(h) for h in hs) + "-hop"


def selection_wording(gains: dict[int, tuple[float, float, float, int]], dec: Records,
                      full: dict[int, list[dict[str, Any]]]) -> str:
    """What the selection stage's paired Hits@1 differences from decomposition alone (``gains`` per hop) say,
    from their 95% CIs: lower where the interval lies below 0 (with the commonest cause of the questions it loses
    there, :func:`disagreement_counts`), higher where above, no clear difference where it reaches 0. The paper
    gives no result without the stage, so nothing is said of it."""
    from .core import effect_verdict

    by: dict[str, list[int]] = {}
    for h, g in gains.items():
        by.setdefault(effect_verdict(g, 1), []).append(h)
    parts = []
    if by.get("reversed"):
        h = by["reversed"][-1]
        causes = disagreement_counts({h: full[h]}, dec)[h]
        top, n = causes["causes"].most_common(1)[0] if causes["causes"] else ("—", 0)
        parts.append(f"lower at {_hops(by['reversed'])} (paired 95% CI below 0; of the {causes['lost']} {h}-hop "
                     f"questions it loses, {'all' if n == causes['lost'] else n}: {top})")
    if by.get("holds"):
        parts.append(f"higher at {_hops(by['holds'])} (paired 95% CI above 0)")
    if by.get("unclear"):
        parts.append(f"no clear difference at {_hops(by['unclear'])} (paired 95% CI reaching 0)")
    if by.get("no difference"):
        parts.append(f"none at {_hops(by['no difference'])} (every question scored the same)")
    return "; ".join(parts) + " — the paper gives no result without this stage"


def fig6_wording(chain) -> str:
    """What Fig. 6's paired differences (``chain``: :func:`ablation_points`' rows of the logical chain directly,
    indexed by hops; chain − sub-questions in points) say against the paper, which finds sub-questions ahead:
    from each hop's 95% CI — the paper's lead holds (below 0), goes the other way (above 0) or is unclear (reaching
    0); when every interval reaches 0, that the lead does not reproduce, and which way the differences lean."""
    from .core import effect_verdict

    by: dict[str, list[int]] = {}
    for h, r in chain.iterrows():
        by.setdefault(effect_verdict((r["gain"], r["gain_low"], r["gain_high"], int(r["n"])), -1), []).append(h)
    if set(by) <= {"unclear", "no difference"}:
        g = chain["gain"].round(1)
        lean = ("level" if (g == 0).all() else "level or higher" if (g >= 0).all() else "level or lower"
                if (g <= 0).all() else "higher at some hops, lower at others")
        return (f"it does not reproduce the paper's lead for sub-questions: the chain scores {lean}, every paired 95% "
                "CI reaching 0")
    parts = []
    if by.get("holds"):
        parts.append(f"the paper's lead for sub-questions holds at {_hops(by['holds'])} (paired 95% CI below 0)")
    if by.get("reversed"):
        parts.append(f"it goes the other way from the paper at {_hops(by['reversed'])} (the chain ahead, paired 95% CI "
                     "above 0)")
    if by.get("unclear"):
        parts.append(f"unclear at {_hops(by['unclear'])} (paired 95% CI reaching 0)")
    if by.get("no difference"):
        parts.append(f"no difference at {_hops(by['no difference'])} (every question scored the same)")
    return "; ".join(parts)


def ablations_headline(pts=None) -> tuple[str, str]:
    """Notebook 32's headline metric: Fig. 6 — the logical chain written directly minus sub-questions (the default,
    K = 1), paired Hits@1 in points per hop on MetaQA dev, from :func:`ablation_points` (default: the saved records)."""
    pts = ablation_points() if pts is None else pts
    chain = pts[pts["configuration"] == CHAIN_LABEL].set_index("hops")
    return ("Keqing, the logical chain directly − sub-questions (Fig. 6), paired Hits@1 points, MetaQA dev (our "
            f"reported part), {' / '.join(map(str, HOPS))}-hop",
            _slash([f"{_pts(chain.loc[h, 'gain'])} [{_pts(chain.loc[h, 'gain_low'])}, {_pts(chain.loc[h, 'gain_high'])}] "
                    f"(n={int(chain.loc[h, 'n'])})" if h in chain.index else "not run yet" for h in HOPS]))


def parts_summary(records: Records, full: Records) -> str:
    """One sentence on the parts beyond the figures (the dense supplement, candidates as text, the released code):
    per hop the paired Hits@1 difference from the default of each complete cell, ``still running`` for a cell
    without all its questions (``records``: the complete ones, :func:`kgqa_lib.bench.overview.complete_records`)."""
    parts = []
    for prefix, _, label in PARTS:
        gains = [format_gain(g) if g else "still running" for g in part_gains(prefix, records, full).values()]
        parts.append(f"{label}: " + (_slash(gains) if any(g != "still running" for g in gains) else "still running")
                     + ".")
    return (f"Beyond the figures, against the default on the same questions ({'/'.join(map(str, HOPS))}-hop, paired "
            "Hits@1 points; the paper gives no number for these):" + "".join(f"\n- {x}" for x in parts))


def ablations_summary() -> str:
    """Notebook 32's summary, from the saved records: Fig. 5's K-curve and Fig. 6's sub-questions against the
    logical chain directly on MetaQA dev (against the paper, from the paired CIs: :func:`fig6_wording`), selection on the last
    sub-question only, the dense supplement, candidates as text and the released code (:func:`parts_summary`:
    ``still running`` until a cell holds its questions), and the cells not run yet."""
    from .overview import complete_records

    pts = ablation_points()
    if pts.empty:
        return "No Keqing ablation cell holds its planned questions yet (`kgqa bench run keqing_ablations`)."
    out = []
    ks = pts[pts["K"].notna() & (pts["K"] > 1)]
    if not ks.empty:
        zero = bool(((ks["gain_low"] <= 0) & (ks["gain_high"] >= 0)).all())
        top = max(pts["hops"])
        c = pts[(pts["hops"] == top) & pts["K"].notna()].sort_values("K")
        out.append(f"Fig. 5 (templates per sub-question, {int(pts['n'].max())} MetaQA dev questions per hop): "
                   f"K = {', '.join(str(int(k)) for k in sorted(ks['K'].unique()))} change Hits@1 by "
                   f"{ks['gain'].min():+.1f} to {ks['gain'].max():+.1f} points from K = 1"
                   + (" (every paired 95% CI includes 0)" if zero else "")
                   + f", while the candidates per sub-question grow from {c['candidates / sub-q'].iloc[0]:.1f} to "
                   f"{c['candidates / sub-q'].iloc[-1]:.1f} on {top}-hop"
                   + (": the gain the paper draws for more templates (on WebQSP) does not appear here." if zero else "."))
    ch = pts[pts["configuration"] == CHAIN_LABEL].set_index("hops")
    if not ch.empty:
        d = pts[pts["configuration"] == DEFAULT_LABEL].set_index("hops")
        h = ch.index.max()
        diffs = _slash([f"{_pts(r['gain'])} [{_pts(r['gain_low'])}, {_pts(r['gain_high'])}]" for _, r in ch.iterrows()])
        out.append(f"Fig. 6: the logical chain written directly minus sub-questions is {diffs} Hits@1 points on "
                   f"{_hops(ch.index)} (paired 95% CI), with {ch.loc[h, 'calls/q']:.2f} LLM calls per {h}-hop question "
                   f"against {d.loc[h, 'calls/q']:.2f}; the paper finds that sub-questions comprehensively outperform "
                   f"chains, and here {fig6_wording(ch)}.")
    records, full = complete_records(TABLE_ABLATIONS), Records(TABLE_FULL)
    last = {h: _hop_runs(records, full, h) for h in HOPS if h > 1}
    last = {h: paired_gain(runs[LAST_LABEL], base, "hits@1") for h, (runs, base) in last.items()
            if runs.get(LAST_LABEL) and base}
    if last:
        out.append("Selecting only at the last sub-question (not in the paper) changes Hits@1 by "
                   f"{_slash([format_gain(g) for g in last.values()])} points on {'/'.join(map(str, last))}-hop."
                   + chain_against_last(records))
    out.append(parts_summary(records, full))
    missing = [c.name for c in TABLE_ABLATIONS.cells if not records(c.name)]
    if missing:
        out.append(f"{len(missing)} of the table's {len(TABLE_ABLATIONS.cells)} cells have not run yet "
                   f"(`kgqa bench run keqing_ablations`).")
    return "\n".join(out)


def chain_against_last(records: Records | None = None) -> str:
    """Fig. 6's chain against selection on the last sub-question only, paired per hop from 2 hops (" " and a
    sentence, or "" while either cell of every such hop is incomplete): the chain runs from the topic entity as
    one step, so it too selects once, at its end — when every paired 95% CI reaches 0, what the chain gains over
    the default cannot be told from what skipping the earlier selections gains. ``records``: the complete
    ablation cells unless given."""
    if records is None:
        from .overview import complete_records

        records = complete_records(TABLE_ABLATIONS)
    gains = {}
    for h in HOPS[1:]:
        runs = {label: records(f"keqing_{name}_{h}hop") for label, name in (("chain", "chain"), ("last", "last"))}
        if runs["chain"] and runs["last"]:
            gains[h] = paired_gain(runs["chain"], runs["last"], "hits@1")
    gains = {h: g for h, g in gains.items() if g and g[3]}
    if not gains:
        return ""
    level = all(g[1] <= 0 <= g[2] for g in gains.values())
    return (" The logical chain directly also selects once, at its end (its chain runs from the topic entity as one "
            f"step): chain minus last-only is {_slash([format_gain(g) for g in gains.values()])} on "
            f"{'/'.join(map(str, gains))}-hop"
            + (", level within every paired 95% CI — so the chain's gain over sub-questions cannot be told apart from "
               "what skipping the earlier selections gains." if level else "."))


# ---------------------------------------------------------------- for the notebooks: the parts, models, Table 2's samples
#: what the paper (or the released code) leads one to expect of each part beyond the figures against the default,
#: per cell prefix: (the side of 0 the paired difference should fall on, the expectation in words)
EXPECTED = {"keqing_dense": (1, "Hits@1 ≥ the default (sec. 3.2 adds the supplement to broaden retrieval)"),
            "keqing_text": (-1, "Hits@1 ≤ the default (sec. 3.3: text suits fine-tuned models, rules the others; ours "
                                "is not fine-tuned)"),
            "keqing_released": (-1, "Hits@1 below the default (a seed's 1-hop facts instead of templates)")}
_OUTCOME = {"holds": "holds", "reversed": "fails", "unclear": "unclear", "no difference": "no difference",
            "not run": "not run yet"}


def part_gains(prefix: str, records: Records | None = None, full: Records | None = None) -> dict[int, Any]:
    """Per hop, a part's paired Hits@1 difference from the default (``paired_gain``, fractions) on the questions
    both answered, or None while its cell does not hold its questions (``records``: the complete ablation records,
    default the saved ones)."""
    from .overview import complete_records

    records = complete_records(TABLE_ABLATIONS) if records is None else records
    full = Records(TABLE_FULL) if full is None else full
    out: dict[int, Any] = {}
    for h in HOPS:
        recs = records(f"{prefix}_{h}hop")
        qids = {r["qid"] for r in recs}
        base = [r for r in full(f"keqing_full_{h}hop") if r["qid"] in qids] if recs else []
        out[h] = paired_gain(recs, base, "hits@1") if recs and base else None
    return out


def expectation(label: str, gains: dict[int, Any] | None = None) -> str:
    """Where a part's expectation (:data:`EXPECTED`) holds, fails or is unclear, per hop from its paired 95% CI
    (on the expected side of 0 / on the other / reaching 0), pointing to what the part changed."""
    from .core import effect_verdict

    prefix = next(p for p, _, lb in PARTS if lb == label)
    sign, what = EXPECTED[prefix]
    gains = part_gains(prefix) if gains is None else gains
    side = {"holds": "the paired 95% CI on the expected side of 0", "reversed": "the paired 95% CI on the other side "
            "of 0", "unclear": "the paired 95% CI reaching 0", "no difference": "every question scored the same"}
    per = [f"{h}-hop {_OUTCOME.get(v, v)}" + (f", {format_gain(g)} points ({side.get(v, v)})" if g else "")
           for h, g in gains.items() for v in [effect_verdict(g, sign)]]
    return (f"Expected: {what}. Against the default on the same questions: {'; '.join(per)}. What the part did, per "
            f"hop, is its `what it changed` below.")


def parts_view(parts, label: str, width: int = 110):
    """A part's rows of the parts table (``frames('keqing_ablations')['parts']``) without the long columns, and
    the text to print under them: the expectation (:func:`expectation`), what ``what it changed`` counts
    (:data:`CHANGED`) and its value per hop, wrapped to ``width``."""
    from textwrap import fill

    prefix = next(p for p, _, lb in PARTS if lb == label)
    rows = parts[parts["configuration"] == label]
    lines = [fill(expectation(label), width), fill(f"`what it changed`: {CHANGED[prefix]}.", width)]
    lines += [fill(f"{h}-hop: {w}", width, subsequent_indent="  ") for h, w in rows["what it changed"].items() if w]
    return rows.drop(columns=["configuration", "what it changed"]), "\n".join(lines)


def models_view(names: list[str], models: list[str]):
    """:func:`kgqa_lib.bench.core.models_frame` of ``names`` beside ``models``, indexed by cell, the columns every
    row shares (``metric``) moved to a caption; and that caption."""
    from .core import models_frame

    frame = models_frame(names, models=models)
    shared = [c for c in ("metric",) if c in frame and frame[c].nunique() == 1]
    caption = "".join(f"{c}: {frame[c].iloc[0]} (in points, 95% CI; the differences paired). " for c in shared)
    return frame.drop(columns=shared).set_index(["table", "cell"]), caption.strip()


def effects_view(names: list[str], models: list[str], width: int = 110):
    """:func:`kgqa_lib.bench.core.effects_frame` of ``names`` beside ``models``, indexed by effect, the paper's
    values and the cells compared moved to a caption (one line per effect, wrapped to ``width``); and that caption."""
    from textwrap import fill

    from .core import effects_frame

    frame = effects_frame(names, models=models)
    lines = [fill(f"{r['effect']}: {r['paper']} (cells {r['cells']}).", width, subsequent_indent="  ")
             for _, r in frame.iterrows()]
    return frame.drop(columns=[c for c in ("table", "paper", "cells") if c in frame]).set_index("effect"), "\n".join(lines)


def table2_samples() -> str:
    """How many MetaQA dev questions per hop Table 2's rows of ours rest on (the complete cells): Keqing's, and the
    baselines' (KB-BINDER, Think-on-Graph) with how many of theirs are among Keqing's — the table mixes samples."""
    from .baselines import TABLE_METAQA
    from .overview import complete_records

    keqing, base = complete_records(TABLE_FULL), complete_records(TABLE_METAQA)
    per = {}
    for h in HOPS:
        mine = {r["qid"] for r in keqing(f"keqing_full_{h}hop")}
        theirs = [{r["qid"] for r in base(f"{m}_metaqa_{h}hop")} for m in ("kbbinder", "tog")]
        per[h] = (len(mine), *(len(q) for q in theirs), *(len(q & mine) for q in theirs))
    say = lambda k, kb, tog, kb_in, tog_in, where="": (  # noqa: E731
        f"Keqing {k}, KB-BINDER {kb}, Think-on-Graph {tog}{where}" + (", the baselines' all among Keqing's"
                                                                     if (kb_in, tog_in) == (kb, tog) else
                                                                     f" ({kb_in} and {tog_in} of theirs among Keqing's)"))
    text = (say(*per[HOPS[0]], where=" questions per hop") if len(set(per.values())) == 1
            else "; ".join(f"{h}-hop: {say(*v)}" for h, v in per.items()))
    return (f"Questions behind each row (MetaQA dev, our reported part): {text}. Keqing's rows and the baselines' "
            "stand on samples of different sizes; a paired comparison (Keqing − KB-BINDER) uses the questions both "
            "answered.")
