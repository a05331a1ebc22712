"""Keqing (Wang et al.) on GrailQA dev over the shared Freebase fragment, with the local model:
Hits@1 and F1 overall, by GrailQA level and by chain / non-chain question, beside the paper's
GrailQA rows (appendix C, Tables 5 and 6); decomposition accuracy on the chain questions; costs.

Three cells, the paper's four stages on a seeded sample of ``keqing:grailqa`` (the fragment's questions
outside the pool the templates and exemplars come from, see :mod:`kgqa_lib.methods.keqing`). Two differ
only in where a question's topic entities come from: ``keqing_grailqa`` links them from the question text
(``topics=linked``, the default: GrailQA gives no topics at test time) and ``keqing_grailqa_oracle`` reads
them off the gold s-expression (``topics=oracle``, an oracle, reported beside it and labelled so). The oracle
cell's records were made before the setting existed, when the oracle was Keqing's only behaviour on GrailQA
(:data:`PROVENANCE`); neither cell's records name ``topics`` in their settings, so the two share a config hash:
the report says which topics each cell used from the cells' commands (:func:`cell_topics`) and the records.
The third, ``keqing_grailqa_dense``, is the default with the paper's dense supplement (sec. 3.2,
``dense_supplement``), reported beside the default on the same questions. Every cell runs on the fragment of
the questions' own gold facts, and the report says so (:data:`kgqa_lib.bench.overview.FRAGMENT`).

GrailQA's questions, answers and gold annotations must not enter the repository, so the saved records are
stripped (:func:`strip`): :func:`kgqa_lib.bench.keqing.strip_full`'s fields (no gold relation path), plus per
question its GrailQA level, chain length, whether the template bank covers every hop of its gold chain, the
decomposition check's flags (chain right, seed right), the gold-chain ceiling's scores (Hits@1 and F1 of the
gold chain executed as Keqing executes chains) and, for linked topics, how many of the gold graph query's
entities were linked — flags and numbers computed when the record is saved, with the data there; no text, no
entity names, no gold chain, s-expression or topic."""

from __future__ import annotations

from collections import defaultdict
from functools import lru_cache
from typing import Any

import numpy as np

from ..evaluate.report import format_gain, paired_gain, summarize
from .core import Cell, Records, Table, partial, register
from .keqing import (DENSE_N, POINTS_NOTE, _md, _rate, dense_description, dense_disclosure, in_points, stage,
                     strip_full, supplement_calls, supplement_stats)
from .result_table import ResultTable, table

SAMPLE = 200
LINKED, ORACLE = "keqing_grailqa", "keqing_grailqa_oracle"  # the two cells: topics linked (default) / ORACLE
DENSE = "keqing_grailqa_dense"  # the default with the dense supplement (sec. 3.2)
PROVENANCE = ("the records of `keqing_grailqa_oracle` were saved by an earlier version of the code (in two parts: "
              "43 questions, then all 200) as `keqing_grailqa`, by its command without `--set topics=oracle`: the "
              "setting did not exist yet and the gold s-expression's topic was Keqing's only behaviour on GrailQA (what "
              "`topics=oracle` reproduces). Their settings hold no `topics`, and neither do those of the "
              "`keqing_grailqa` records (topics linked, the default, which a record's settings do not name): the two "
              "cells' records carry the same settings and the same config hash, which therefore do not tell them "
              "apart — the cell does")
LEVELS = ("i.i.d.", "compositional", "zero-shot")
# Keqing paper, appendix C (GrailQA dev), as (EM, F1) in percent. Table 5: column "Overall";
# Table 6: columns "IID", "Compositional", "Zero-shot".
PAPER = {
    "Keqing-LLaMA (Ours)": {"all": (72.5, 77.8), "i.i.d.": (80.5, 85.6), "compositional": (73.3, 80.1),
                            "zero-shot": (67.5, 74.7)},
    "KB-BINDER (Li et al., 2023a)": {"all": (50.6, 56.0), "i.i.d.": (51.9, 57.4), "compositional": (50.6, 56.6),
                                     "zero-shot": (49.9, 55.1)},
}
PAPER_DEV, PAPER_TRAIN = 6763, 44337  # GrailQA dev / train questions (paper, Table 4)
#: (entity nodes in one question only, entity nodes) of the graph queries of the GrailQA dev sample the fragment is
#: built from: what :func:`entity_sharing` counts in KGQA_DATA_DIR's ``grailqa_ToG_1000.json``, kept here so the
#: report regenerates without the data (tests/unit/test_keqing_reports.py recomputes it when the data is there)
FRAGMENT_SHARING = (805, 881)
#: the cells whose records read ``partial k/N`` (unscored) until they hold every planned question: the dense cell
PARTIAL_SHOWN = (DENSE,)


def entity_sharing() -> tuple[int, int]:
    """(entity nodes that occur in one question only, entity nodes) over the gold graph queries of the GrailQA
    dev sample the fragment is built from (:mod:`kgqa_lib.kg.grailqa_fragment`): how little of a topic's
    neighbourhood belongs to other questions. Needs KGQA_DATA_DIR."""
    from ..data.grailqa import _raw

    questions: dict[str, set[str]] = defaultdict(set)
    for raw in _raw():
        for n in raw["graph_query"]["nodes"]:
            if n["node_type"] == "entity":
                questions[n["id"]].add(raw["qid"])
    return sum(1 for q in questions.values() if len(q) == 1), len(questions)


# ---------------------------------------------------------------- stripping (with the data)
@lru_cache(maxsize=1)
def _questions() -> dict[str, Any]:
    from ..methods import keqing as K

    return {q.qid: q for q in K.keqing_dataset("grailqa").questions}


def gold_chain_score(q, kg) -> dict[str, float]:
    """Hits@1 and F1 of the question's gold chain executed as Keqing executes a chain: the topic
    linked by its name, the topic never an answer, answers ordered by support."""
    from ..evaluate.metrics import score
    from ..methods import keqing as K

    topic = {v for t in q.topic_entities for v in K.link_seed(t, kg)}
    tails = K.retrieve_candidates(kg, K.GRAILQA_KG, sorted(topic), [K.gold_chain(q)], topic)[0].tails
    m = score([K._label(kg, v) for v in tails], q.answers)
    return {"hits@1": m["hits@1"], "f1": m["f1"]}


def grailqa_fields(r: dict[str, Any]) -> dict[str, Any]:
    """What the report needs of a record beyond :func:`strip_full`: counts and flags only."""
    from ..evaluate.diagnostics import keqing_decomposition
    from ..kg.sources import load_named
    from ..methods import keqing as K

    q = _questions().get(r["qid"])
    if q is None:
        raise ValueError(f"{r['qid']} is not a keqing:grailqa test question")
    chain = K.gold_chain(q)
    out: dict[str, Any] = {"level": q.metadata.get("level"), "chain": bool(chain), "hops": len(chain)}
    topics = stage(r, "topics")
    if topics and topics.get("source") == "linked":
        out["topics"] = topic_linking(q, topics)
    if chain:
        kg = load_named(K.GRAILQA_KG)
        bank = K.bank_for(K.GRAILQA_KG)
        d = keqing_decomposition(q, r.get("trace") or [], kg)
        out.update(covered=all((h,) in bank.canonical for h in chain),
                   decomposition={k: d[k] for k in ("chain_correct", "seed_correct", "correct")},
                   gold_chain=gold_chain_score(q, kg))
    return out


def topic_linking(q, topics: dict[str, Any]) -> dict[str, Any]:
    """Counts of a linked-topics record (its ``topics`` stage) against the gold: entities linked, the
    gold graph query's entities and how many of them were linked, and for a chain question whether its
    topic (the chain's start) was."""
    from ..data.grailqa import FB
    from ..methods import keqing as K

    linked = {m.get("entity") for m in topics.get("mentions") or []}
    gold = {FB + i for i in q.metadata.get("topic_ids") or []}
    found = K.sexpr_chain(q.gold_query.get("s_expression", ""))
    out = {"linked": len(linked), "gold": len(gold), "gold_linked": len(gold & linked)}
    if found:
        out["chain_topic_linked"] = FB + found[0] in linked
    return out


def strip(r: dict[str, Any]) -> dict[str, Any]:
    out = strip_full(r)
    out["grailqa"] = grailqa_fields(r)
    return out


# ---------------------------------------------------------------- report (tables as data, then Markdown)
def _g(r: dict[str, Any]) -> dict[str, Any]:
    return r.get("grailqa") or {}


def _papers(key: str) -> list[str]:
    """The paper's rows for a question group (``all`` or a level): F1 (EM) as fractions, ``—`` where none."""
    return [f"{PAPER[m][key][1] / 100:.3f} ({PAPER[m][key][0] / 100:.3f})" if key in PAPER[m] else "—" for m in PAPER]


def _row(label: str, recs: list[dict[str, Any]], paper_key: str, total: int) -> list[Any]:
    if not recs:
        return [label, 0, "", "", "", "", *_papers(paper_key)]
    ceil = [_g(r)["gold_chain"] for r in recs if _g(r).get("gold_chain")]
    ceiling = (f"{np.mean([c['hits@1'] for c in ceil]):.3f} / {np.mean([c['f1'] for c in ceil]):.3f} (n={len(ceil)})"
               if ceil else "—")
    return [label, len(recs), f"{len(recs) / total:.3f}", _rate([r["metrics"]["hits@1"] for r in recs]),
            _rate([r["metrics"]["f1"] for r in recs]), ceiling, *_papers(paper_key)]


#: what the question groups and columns of a cell's tables mean (the report's opening says it; notebook 31 prints it
#: under the tables: :func:`legend`)
QUESTIONS_LEGEND = (
    "`chain`: the gold s-expression is a relation chain from one entity (the outer answer-type class aside); "
    "`non-chain`: constraints, a second entity or class, counts, superlatives, comparatives — no gold chain, never a "
    "template, answered as Keqing can. `covered`: every hop of the gold chain has a template in the bank. "
    "`gold-chain ceiling`: the gold chain executed as Keqing executes chains (topic linked by name, never an answer), "
    "over the row's chain questions. `share`: the row's part of the cell's questions.")
#: the paper's columns (Tables 5 and 6), and what its EM is
PAPER_COLUMNS = ("Paper columns: Keqing paper, appendix C, Table 5 (column `Overall`) and Table 6 (columns `IID`, "
                 f"`Compositional`, `Zero-shot`), rows {' and '.join(f'`{m}`' for m in PAPER)}; F1 with EM in brackets")
EM_NOTE = ("The paper's EM is exact match of a logical form, which Keqing here never writes: Hits@1 is not that "
           "metric.")
#: the settings table's columns
SETTINGS_LEGEND = (
    "`chain topic linked`: chain questions whose topic (the gold chain's start) is among the linked entities, of the "
    "cell's chain questions. `paired difference`: Hits@1 on the questions both cells answered, in points, with its 95% "
    "CI; each row names its comparison (linked − ORACLE; dense − linked: the supplement against the linked default). "
    "While the dense cell runs, it reads `partial k/N` and is not scored. The paper, appendix C, Table 5, column "
    "`Overall` (F1 with EM in brackets): "
    + ", ".join(f"{m} {PAPER[m]['all'][1]}% ({PAPER[m]['all'][0]}%)" for m in PAPER)
    + "; the same for every row, and on the dense row the paper's own setting as far as it says: its sec. 3.2 "
    "(\"In practice, … will also be included as supplementary answer candidates\") implies that its numbers, "
    "Table 5's Keqing-LLaMA row among them, include the supplement.")
#: the columns of each table that hold shares (:func:`kgqa_lib.bench.keqing.in_points`), by the table's name without
#: its cell's prefix (``linked_levels`` → ``levels``; the first table of a cell: ``questions``)
SHARES = {"settings": ("Hits@1 [95% CI]", "F1 [95% CI]"),
          "questions": ("share", "Hits@1 [95% CI]", "F1 [95% CI]", "gold-chain ceiling Hits@1 / F1",
                        *(f"paper {m}: F1 (EM)" for m in PAPER)),
          "levels": ("Hits@1",),
          "decomposition": ("chain right [95% CI]", "seed right [95% CI]", "both [95% CI]", "Hits@1")}

LABELS = {LINKED: "linked (default)", ORACLE: "ORACLE: gold topic", DENSE: "linked + dense supplement"}
TITLES = {LINKED: "Linked topics (the default, `topics=linked`)",
          ORACLE: "ORACLE topics (`topics=oracle`: the gold s-expression's entity — not a GrailQA setting)",
          DENSE: f"Linked topics with the dense supplement (sec. 3.2, `dense_supplement={DENSE_N}`)"}
KEYS = {LINKED: "linked", ORACLE: "oracle", DENSE: "dense"}  # the names of a cell's tables in :func:`result_tables`


def _linking(recs: list[dict[str, Any]]) -> str:
    """Of the chain questions of linked-topics records: how often the chain's topic was linked."""
    t = [_g(r)["topics"] for r in recs if _g(r).get("chain") and "chain_topic_linked" in (_g(r).get("topics") or {})]
    return f"{sum(x['chain_topic_linked'] for x in t)}/{len(t)}" if t else "—"


def _cell_tables(recs: list[dict[str, Any]], cell: Cell, running: str | None = None) -> list[ResultTable]:
    """One cell's tables: its questions by level and kind (with the paper's rows beside), and when it has
    records by level and kind, decomposition (chain questions), cost and failures. ``running``: the cell's
    ``partial k/N`` while it runs (its records are then not shown)."""
    key = KEYS[cell.name]
    columns = ["questions", "n", "share", "Hits@1 [95% CI]", "F1 [95% CI]", "gold-chain ceiling Hits@1 / F1",
               *(f"paper {m}: F1 (EM)" for m in PAPER)]
    title = f"{TITLES[cell.name]}: by GrailQA level and question kind"
    if not recs:
        body = [["all", 0, f"{running or 'not run yet'} ({cell.name}.jsonl)", "", "", "", *_papers("all")]]
        body += [[lv, 0, running or "not run yet", "", "", "", *_papers(lv)] for lv in LEVELS]
        return [table(key, title, columns, body)]
    n = len(recs)
    chain = [r for r in recs if _g(r).get("chain")]
    rows = [("all", recs, "all")] + [(lv, [r for r in recs if _g(r).get("level") == lv], lv) for lv in LEVELS] + [
        ("chain", chain, ""), ("— covered", [r for r in chain if _g(r).get("covered")], ""),
        ("— not covered", [r for r in chain if not _g(r).get("covered")], ""),
        ("non-chain", [r for r in recs if not _g(r).get("chain")], "")]
    out = [table(key, title, columns, [_row(label, rs, k, n) for label, rs, k in rows])]
    levels = []
    for lv in LEVELS:
        c = [r for r in chain if _g(r).get("level") == lv]
        o = [r for r in recs if _g(r).get("level") == lv and not _g(r).get("chain")]
        levels.append([lv, len(c), sum(1 for r in c if _g(r).get("covered")),
                       _rate([r["metrics"]["hits@1"] for r in c]) if c else "—", len(o),
                       _rate([r["metrics"]["hits@1"] for r in o]) if o else "—"])
    out.append(table(f"{key}_levels", "By level and kind",
                     ["level", "chain: n", "covered", "Hits@1", "non-chain: n", "Hits@1"], levels))
    dec = []
    for label, rs in [("all", chain)] + [(str(h), [r for r in chain if _g(r).get("hops") == h])
                                         for h in sorted({_g(r).get("hops") for r in chain})]:
        if not rs:
            continue
        d = [_g(r)["decomposition"] for r in rs]
        dec.append([label, len(rs), _rate([float(x["chain_correct"]) for x in d]),
                    _rate([float(x["seed_correct"]) for x in d]), _rate([float(x["correct"]) for x in d]),
                    sum(1 for r in rs if _g(r).get("covered")), _rate([r["metrics"]["hits@1"] for r in rs])])
    out.append(table(f"{key}_decomposition", "Decomposition (chain questions)",
                     ["gold hops", "n", "chain right [95% CI]", "seed right [95% CI]", "both [95% CI]", "covered",
                      "Hits@1"], dec))
    row = summarize(recs)
    calls = {k: sum((r.get("stages") or {}).get("calls", {}).get(k, 0) for r in recs) / n
             for k in ("decompose", "reasoning", "respond")}
    unparse = sum(1 for r in recs if (d := stage(r, "decompose")) and d.get("error") == "fallback")
    out.append(table(f"{key}_cost", "Cost and failures",
                     ["n", "calls/q (decompose + reasoning + respond)", "tokens/q", "s/q (mean / median)",
                      "unparseable decompositions", "no answer"],
                     [[n, f"{row['calls/q']:.2f} ({calls['decompose']:.2f} + {calls['reasoning']:.2f} + "
                          f"{calls['respond']:.2f})", f"{row['tokens/q']:.0f}",
                       f"{row['s/q']:.2f} / {float(np.median([r['seconds'] for r in recs])):.2f}", unparse,
                       sum(1 for r in recs if not r["prediction"])]]))
    return out


def _details(recs: list[dict[str, Any]], cell: Cell, running: str | None = None) -> list[str]:
    """One cell's section body: its tables (:func:`_cell_tables`) with their headings and notes."""
    t = {x.name.removeprefix(KEYS[cell.name]).lstrip("_") or "questions": x for x in _cell_tables(recs, cell, running)}
    lines = [_md(t["questions"])]
    if not recs:
        return lines
    lines += ["", "### By level and kind", "", _md(t["levels"])]
    lines += ["", "### Decomposition (chain questions)", "",
              "`chain right`: the top-1 templates' chains, concatenated, are the gold chain (the paper's decomposition "
              "accuracy); `seed right`: the first sub-question's seed names link to the topic entity; `both`: the "
              "two.", "", _md(t["decomposition"])]
    lines += ["", "### Cost and failures", "", _md(t["cost"]), "",
              "s/q is wall time per question on 2 cores, including stretches where other jobs shared the cores."]
    return lines


#: each cell's paired comparison in the settings table: (the other cell, the difference as the row names it)
AGAINST = {LINKED: (ORACLE, "linked − ORACLE"), DENSE: (LINKED, "dense − linked")}


def settings_table(recs: dict[str, list[dict[str, Any]]], running: dict[str, str] | None = None) -> ResultTable:
    """The three cells side by side: linked (default), the oracle, the dense supplement; paired differences,
    each naming its comparison (:data:`AGAINST`). ``running``: cells still running → ``partial k/N``."""
    running = running or {}
    body = []
    for name in (LINKED, ORACLE, DENSE):
        rs = recs[name]
        if not rs:
            body.append([LABELS[name], f"`{name}`", 0, running.get(name, "not run yet"), "", "", ""])
            continue
        other, what = AGAINST.get(name, ("", ""))
        gain = f"{format_gain(paired_gain(rs, recs[other], 'hits@1'))} ({what})" if recs.get(other) else "—"
        body.append([LABELS[name], f"`{name}`", len(rs), _rate([r["metrics"]["hits@1"] for r in rs]),
                     _rate([r["metrics"]["f1"] for r in rs]), _linking(rs) if name != ORACLE else "—", gain])
    from .core import FRAGMENT

    return table("settings", f"The settings (GrailQA dev, {FRAGMENT})",
                 ["topics", "cell", "n", "Hits@1 [95% CI]", "F1 [95% CI]", "chain topic linked",
                  "paired difference in Hits@1"], body)


def _scored(records: Records, cells: dict[str, Cell]) -> tuple[dict[str, list[dict[str, Any]]], dict[str, str]]:
    """Each cell's records, and the cells of :data:`PARTIAL_SHOWN` still running (name → ``partial k/N``),
    whose records are left out: a running cell is never scored."""
    recs = {name: records(name) for name in cells}
    running = {n: p for n in PARTIAL_SHOWN if (p := partial(recs[n], cells[n]))}
    return {n: [] if n in running else rs for n, rs in recs.items()}, running


def result_tables(records: Records) -> dict[str, ResultTable]:
    """Every table of the report, as data: ``settings``, then per cell ``linked``, ``linked_levels``,
    ``linked_decomposition``, ``linked_cost`` (``oracle_…``, ``dense_…``; a cell without records has its
    first table only)."""
    cells = {c.name: c for c in TABLE.cells}
    recs, running = _scored(records, cells)
    out = [settings_table(recs, running)] + [t for name in (LINKED, ORACLE, DENSE)
                                             for t in _cell_tables(recs[name], cells[name], running.get(name))]
    return {t.name: t for t in out}


def _kind(name: str) -> str:
    """A table's kind, its name without its cell's prefix: ``settings``, ``questions`` (a cell's first table),
    ``levels``, ``decomposition``, ``cost``."""
    for key in KEYS.values():
        if name == key:
            return "questions"
        if name.startswith(key + "_"):
            return name[len(key) + 1:]
    return name


def frames() -> dict[str, Any]:
    """The report's tables as DataFrames, from the saved records of the cells that hold their planned
    questions (a cell still running reads not run yet), the shares in points (:data:`SHARES`; the columns:
    :func:`legend`)."""
    from .overview import complete_records
    from .result_table import frames as to_frames

    return to_frames([in_points(t, SHARES.get(_kind(t.name), ()))
                      for t in result_tables(complete_records(TABLE)).values()])


def legend(name: str) -> str:
    """What the columns of the :func:`frames` table ``name`` mean (a cell's tables: ``linked``, ``linked_levels``,
    …), in the report's words: the settings' columns and the paper's; a cell's question groups and the paper's."""
    kind = _kind(name)
    text = {"settings": f"{SETTINGS_LEGEND} {EM_NOTE}",
            "questions": f"{QUESTIONS_LEGEND} {PAPER_COLUMNS}. {EM_NOTE}", "levels": QUESTIONS_LEGEND}.get(kind, "")
    return f"{POINTS_NOTE} {text}".strip() if kind in SHARES else text


def cell_topics(cell: Cell) -> str:
    """Where a cell's topic entities come from, from its command: its ``--set topics=…``, else Keqing's default."""
    from ..methods.keqing import KeqingSettings

    given = [a.split("=", 1)[1] for i, a in enumerate(cell.args) if i and cell.args[i - 1] == "--set"
             and a.startswith("topics=")]
    return given[-1] if given else KeqingSettings().topics


def topics_lines(recs: dict[str, list[dict[str, Any]]], cells: dict[str, Cell],
                 running: dict[str, str] | None = None) -> list[str]:
    """Which topics each cell's records were made with: the cell's setting (:func:`cell_topics`), and per cell
    with records their settings, config hashes and how many hold the counts of topics linked from the text;
    where two cells' records share a config hash, that the hash does not tell them apart."""
    import json

    from ..methods.keqing import KeqingSettings

    default = KeqingSettings().topics
    what = {"linked": "topics linked from the question text", "oracle": "ORACLE topics, read off the gold s-expression"}
    lines, hashes = [], {}
    for name in (LINKED, ORACLE, DENSE):
        t = cell_topics(cells[name])
        head = f"- `{name}`: {what.get(t, t)} (`topics={t}`{', the default' if t == default else ''})"
        rs = recs[name]
        if not rs:
            lines.append(head + f"; {(running or {}).get(name, 'not run yet')}.")
            continue
        hashes[name] = sorted({str(r.get("config_hash")) for r in rs})
        settings = sorted({json.dumps((r.get("config") or {}).get("settings") or {}, sort_keys=True) for r in rs})
        linked = sum(1 for r in rs if "topics" in _g(r))
        lines.append(head + f"; its {len(rs)} records: settings {', '.join(f'`{x}`' for x in settings)}, config hash "
                     f"{', '.join(f'`{x}`' for x in hashes[name])}; {linked} of them hold the counts of topics linked "
                     "from the question text.")
    shared = [(a, b, sorted(set(hashes[a]) & set(hashes[b]))) for i, a in enumerate(hashes) for b in list(hashes)[i + 1:]]
    for a, b, common in shared:
        if common:
            lines += ["", f"`{a}` and `{b}` records share the config hash {', '.join(f'`{x}`' for x in common)}: the "
                         "hash covers the method, the dataset, the model, the seed, the prompt files and the settings "
                         "a command gives, not the code, and a setting left at its default is not among them — so it "
                         "does not tell these cells apart; the cell does."]
    return lines


def fragment_caveat(sharing: tuple[int, int] = FRAGMENT_SHARING) -> str:
    """Why the supplement is flattered on this fragment (the dense paragraph of the report)."""
    one, n = sharing
    return ("On this fragment the supplement is flattered: the fragment holds only the gold facts of the 1,000 dev "
            f"questions, and {one:,} of the {n:,} entity nodes of their graph queries occur in one question only, so "
            "a linked topic's 1-hop neighbourhood — where the supplement searches — is mostly its own question's "
            "gold edges, and the supplement can put gold answers among the candidates even where the template is wrong. "
            "A gain of the dense cell over the linked default is therefore an upper bound specific to this fragment, "
            "not what the supplement would give on full Freebase")


def supplement_answers(dense: list[dict[str, Any]], linked: list[dict[str, Any]]) -> str:
    """Of the supplement cell's questions right at Hits@1, and of those it answers right where the linked default
    does not (paired), how many hold a supplement candidate among their final answers (``dense_selected`` of the
    last sub-question); and the one-candidate sub-questions that made a selection call with it."""
    with_one = lambda r: bool(((r.get("reasoning") or [{}])[-1] or {}).get("dense_selected"))  # noqa: E731
    right = [r for r in dense if r["metrics"]["hits@1"] == 1.0]
    base = {r["qid"]: r for r in linked}
    won = [r for r in right if r["qid"] in base and base[r["qid"]]["metrics"]["hits@1"] != 1.0]
    return (f"{sum(map(with_one, right))} of the {len(right)} questions this cell answers right at Hits@1 hold a "
            f"supplement candidate among their final answers; {sum(map(with_one, won))} of the {len(won)} it answers "
            f"right where `{LINKED}` does not (paired, {sum(1 for r in dense if r['qid'] in base)} questions); "
            f"{supplement_calls(dense)} sub-questions whose chains reached one candidate made a selection call with it")


def dense_reading(records: Records | None = None) -> str:
    """Notebook 31's reading of the dense row (the report's words): why the supplement is flattered on this
    fragment, where its right answers come from (once the dense cell is complete), and what the same supplement
    does on MetaQA dev, a real KG's neighbourhoods (notebook 32's cells, once complete). One paragraph per line."""
    from .keqing import HOPS, part_gains

    cells = {c.name: c for c in TABLE.cells}
    recs, running = _scored(records if records is not None else Records(TABLE), cells)
    out = [f"{fragment_caveat()}."]
    if recs.get(DENSE) and recs.get(LINKED) and DENSE not in running:
        out.append(f"Answers from the supplement: {supplement_answers(recs[DENSE], recs[LINKED])}.")
    metaqa = part_gains("keqing_dense")
    if all(metaqa.values()):
        out.append(f"On MetaQA dev (our reported part), where a seed's neighbourhood is a real KG's, the same supplement "
                   f"({DENSE_N} triples) changes Hits@1 by {' / '.join(format_gain(g) for g in metaqa.values())} points on "
                   f"{'/'.join(map(str, HOPS))}-hop against the default (paired; `32_keqing_ablations`).")
    return "\n".join(out)


def report(records: Records) -> str:
    from ..methods.keqing import GRAILQA_POOL_FRACTION, GRAILQA_SPLIT_SEED
    from .core import FRAGMENT

    cells = {c.name: c for c in TABLE.cells}
    recs, running = _scored(records, cells)
    models = sorted({str(r.get("model_id")) for rs in recs.values() for r in rs})
    lines = [f"# Keqing on GrailQA dev ({FRAGMENT}; local model)", "",
             "Three cells on the same questions: the first two differ only in where a question's topic entities come "
             "from, the third is the default with the paper's dense supplement:", "",
             f"- `{LINKED}` — **{LABELS[LINKED]}**: `{cells[LINKED].command()}`",
             f"- `{ORACLE}` — **{LABELS[ORACLE]}**: `{cells[ORACLE].command()}`",
             f"- `{DENSE}` — **{LABELS[DENSE]}**: `{cells[DENSE].command()}`", "",
             "The paper's four stages with the default settings (decomposition, top-1 template, chain execution, "
             "candidate selection by the LLM, response). Questions: a seeded sample of `keqing:grailqa`, the GrailQA "
             f"dev questions of the shared fragment outside the pool ({GRAILQA_POOL_FRACTION:.0%} of them, seed "
             f"{GRAILQA_SPLIT_SEED}, stratified by level) that the template bank (its one-hop chain questions) and the "
             "decomposition exemplars (its chain questions) come from. " + QUESTIONS_LEGEND, "",
             "Topics: GrailQA gives no topic entities at test time. Keqing uses a question's topics three ways: they "
             "are never an answer, their mention is masked in the question template that picks the decomposition "
             "exemplars, and they seed a sub-question the decomposition gave no usable seed. `topics=linked` (the "
             "default) links them from the question text alone with FuSIC's entity linker (exact label/alias matches "
             "of question spans, longest first; the longest mention is the one masked). `topics=oracle` reads them "
             "off the gold s-expression (the chain's entity and its verbatim mention): an **oracle**, shown for "
             "comparison, never a GrailQA result. Which topics each cell's records were made with:", "",
             *topics_lines(recs, cells, running), "", f"Provenance: {PROVENANCE}.", "",
             f"{PAPER_COLUMNS}, as fractions. {EM_NOTE} Its F1 is answer F1, as ours, but over all "
             f"{PAPER_DEV:,} dev questions on full Freebase, with templates from {PAPER_TRAIN:,} training questions "
             "and a fine-tuned LLaMA-7B; here the GrailQA dev sample of KGQA_DATA_DIR (`grailqa_ToG_1000.json`), a "
             "fragment holding only its questions' gold facts, templates from the pool split of the same questions, "
             f"and the local model ({', '.join(models) or 'not run yet'}) "
             "without fine-tuning. GrailQA's levels are relative to its training set, which is not here; relative to "
             "our pool, `covered` says what the bank holds.", "",
             f"The dense supplement (sec. 3.2, `dense_supplement={DENSE_N}`): {dense_description()}. "
             + dense_disclosure(f"`{LINKED}` beside the paper's Tables 5 and 6", f"`{DENSE}` measures what it changes")
             + ".", "", f"{fragment_caveat()}.", "",
             f"## The settings (GrailQA dev, {FRAGMENT})", "",
             SETTINGS_LEGEND, "",
             _md(settings_table(recs, running))]
    for name in (LINKED, ORACLE, DENSE):
        lines += ["", f"## {TITLES[name]} — GrailQA dev, {FRAGMENT}", "", f"`{name}`.", ""] + \
            _details(recs[name], cells[name], running.get(name))
        if name == DENSE and recs[name]:
            lines += ["", f"The supplement: {supplement_stats(recs[name])}.", "",
                      "Answers from the supplement (after the fact, from the saved counts): "
                      f"{supplement_answers(recs[DENSE], recs[LINKED])}."]
    return "\n".join(lines) + "\n"


def webqsp_coverage() -> dict[str, int]:
    """Why WebQSP (the paper's Table 3) is not run on the fragment: of the WebQSP parses in
    ``KGQA_DATA_DIR`` (``webqsp:grasp``) with an inferential chain, how many have every relation of it
    in the GrailQA pool's template bank (the only templates the fragment has). Counts only, by chain length."""
    from ..data.datasets import load_dataset
    from ..methods import keqing as K

    bank = K.bank_for(K.GRAILQA_KG)
    known = {c.lstrip("^") for chain in bank.canonical for c in chain}
    out = {"parses": 0, "covered": 0, "1-hop": 0, "2-hop": 0}
    for q in load_dataset("webqsp:grasp").questions:
        chain = [c for c in (q.gold_query or {}).get("path", "").split(" → ") if c]
        if not chain:
            continue
        out["parses"] += 1
        out[f"{len(chain)}-hop"] = out.get(f"{len(chain)}-hop", 0) + 1
        out["covered"] += all(c in known for c in chain)
    return out


def webqsp_line(coverage: dict[str, int] | None = None) -> str:
    """:func:`webqsp_coverage` in a sentence: the parses with a chain, by length, and how many of them the bank
    covers."""
    wq = webqsp_coverage() if coverage is None else coverage
    return (f"WebQSP parses with an inferential chain: {wq['parses']} ({wq['1-hop']} one-hop, {wq['2-hop']} two-hop); "
            f"the GrailQA pool's template bank holds every chain relation of {wq['covered']} of the {wq['parses']}.")


TABLE = register(Table(
    name="keqing_grailqa", title="Keqing on GrailQA dev over the shared Freebase fragment, four stages (local model)",
    cells=(Cell(LINKED, "keqing", "keqing:grailqa", SAMPLE,
                ("--sample", str(SAMPLE), "--llm", "local", "--no-transcripts")),
           Cell(ORACLE, "keqing", "keqing:grailqa", SAMPLE,
                ("--sample", str(SAMPLE), "--llm", "local", "--set", "topics=oracle", "--no-transcripts")),
           Cell(DENSE, "keqing", "keqing:grailqa", SAMPLE,
                ("--sample", str(SAMPLE), "--llm", "local", "--set", f"dense_supplement={DENSE_N}", "--no-transcripts"))),
    report=report, output="keqing_grailqa.md", strip=strip, records="keqing_grailqa",
    source="Keqing paper, appendix C, Tables 5 and 6 (GrailQA dev)", provenance=PROVENANCE,
))
