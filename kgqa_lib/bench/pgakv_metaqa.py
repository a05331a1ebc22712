"""PG&AKV on a real knowledge graph: the MetaQA KB (WikiMovies, ~131k triples) with MetaQA's questions,
1-hop standing for the paper's SimpleQuestions column and 2/3-hop for its multi-hop (QALD-10) column.

Questions: MetaQA dev, our reported part — the same 100 per hop as KB-BINDER's and Think-on-Graph's
cells of ``baselines_metaqa`` (``keqing:metaqa:Nhop --sample 100``), so ToG's row is read from that
table's records, not run again. Settings are chosen on a dev part (``pgakv:metaqa:Nhop:dev``, 50 per
hop, lines disjoint from the reported ones) among a candidate grid fixed before any run (:data:`GRID`), by a rule fixed
with it (:func:`choose`); the chosen value is :data:`CHOSEN`, and a test checks it is what the rule gives
on the saved dev records.

Semantic querying searches every triple of the KG (``search_scope=kg``), not a per-question slice; QSM
searches the same way. Records are stripped (:func:`strip`): ids, metrics, costs, the prediction, and per
question the funnel of the gold answer through the stages (in ``G_p``, ``G_t``, ``G_g``, ``G_f``, computed
from the whole record when it is saved) and the sizes of each stage — no question text, no gold."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..evaluate.report import ci_cell, format_gain, paired_gain
from .baselines import KEEP
from .core import kept_text, Cell, Effect, Records, Table, default_key, get_table, keep_prediction, register
from .result_table import ResultTable, table

HOPS = (1, 2, 3)
REPORTED = 100  # per hop: the questions of baselines_metaqa (ToG, KB-BINDER)
DEV = 50  # per hop, from the dev lines (kgqa_lib.methods.pgakv.metaqa_dev_line)
GRID = (0.5, 0.6, 0.7, 0.8)  # pruning thresholds tried on dev, fixed before any run; top_k stays the paper's 10
PAPER_THRESHOLD = 0.7
#: the threshold :func:`choose` gives on the saved dev records (None until every dev cell is complete);
#: ``tests/unit/test_pgakv_metaqa.py`` checks it against the rule
CHOSEN: float | None = 0.5
SCOPE = ("--set", "search_scope=kg")
RUN_ARGS = ("--llm", "local", "--no-transcripts")
# The paper's Table 2, GPT-3.5 rows, Hits@1 (SimpleQuestions, QALD-10)
PAPER_TABLE2 = {"io": (20.2, 38.7), "cot": (22.0, 40.5), "sc": (21.2, 41.1), "qsm": (27.5, 34.2), "pgakv": (34.3, 48.6)}
PAPER_TABLE4_QALD = (40.5, 44.4, 48.6)  # CoT → Pseudo-Graph → Ours, QALD-10, GPT-3.5 (Table 4)
KG_FREE = ("io", "cot", "sc")
#: where the threshold is chosen: MetaQA dev lines apart from the reported ones (``pgakv:metaqa:Nhop:dev``)
TUNING_PART = "a held-out tuning part of MetaQA dev (disjoint from the reported questions)"
_CHOSEN_ROW = ("PG&AKV (threshold " + (f"{CHOSEN}, " if CHOSEN is not None else "")
               + "chosen on the held-out part of MetaQA dev)")
ROWS = {"io": "IO", "cot": "CoT", "sc": "SC (3 samples)", "qsm": "QSM (question → top-10 KG triples)",
        "pgakv": "PG&AKV (threshold 0.7, the paper's)", "pgakv_chosen": _CHOSEN_ROW,
        "pgakv_pg": "Pseudo-Graph only (Table 4: no KG)",
        "tog": "Think-on-Graph (the same questions, from the ToG baseline's runs)"}
#: the rows' names in sentences and in the notes of cells that wait for a run
SHORT = {"io": "IO", "cot": "CoT", "sc": "SC", "qsm": "QSM", "pgakv": "PG&AKV (threshold 0.7)",
         "pgakv_chosen": _CHOSEN_ROW, "pgakv_pg": "Pseudo-Graph only", "tog": "Think-on-Graph"}
NOT_RUN = "not run yet"
NOT_MEASURED = "not measured yet"


def _thr(t: float) -> str:
    return f"{t:.1f}".replace(".", "")


def _cells() -> tuple[Cell, ...]:
    """The dev cells first (the choice is made before the reported runs), then the reported ones."""
    cells = [Cell(f"dev_thr{_thr(t)}_{h}hop", "pgakv", f"pgakv:metaqa:{h}hop:dev", DEV,
                  ("--sample", str(DEV)) + SCOPE + ("--set", f"threshold={t}") + RUN_ARGS) for h in HOPS for t in GRID]
    for h in HOPS:
        ds = f"keqing:metaqa:{h}hop"
        sample = ("--sample", str(REPORTED))
        cells += [Cell(f"{m}_{h}hop", m, ds, REPORTED, sample + RUN_ARGS) for m in KG_FREE]
        cells.append(Cell(f"qsm_{h}hop", "qsm", ds, REPORTED, sample + SCOPE + RUN_ARGS))
        cells.append(Cell(f"pgakv_{h}hop", "pgakv", ds, REPORTED, sample + SCOPE + RUN_ARGS))
        cells.append(Cell(f"pgakv_pg_{h}hop", "pgakv", ds, REPORTED, sample + ("--set", "kg_context=none") + RUN_ARGS))
        if CHOSEN is not None and CHOSEN != PAPER_THRESHOLD:
            cells.append(Cell(f"pgakv_chosen_{h}hop", "pgakv", ds, REPORTED,
                              sample + SCOPE + ("--set", f"threshold={CHOSEN}") + RUN_ARGS))
    return tuple(cells)


# ---------------------------------------------------------------- stripped records
def _stage(r: dict[str, Any], name: str) -> Any:
    return next((s.get("output") for s in r.get("trace") or [] if s.get("name") == name), None)


def funnel(r: dict[str, Any]) -> dict[str, Any]:
    """Where the gold answer is, stage by stage, and each stage's size (from a whole record)."""
    from ..evaluate.pgakv_analysis import gold_funnel

    out: dict[str, Any] = {}
    pg, ret, ground, ver = (_stage(r, n) for n in ("cypher_to_triples", "semantic_query", "prune", "verify"))
    if pg is not None:
        out["sizes"] = {"G_p": len(pg.get("triples") or []), "seeds": len((ret or {}).get("seeds") or []),
                        "searched": (ret or {}).get("candidates"), "G_t": len((ret or {}).get("hits") or []),
                        "G_g": len((ground or {}).get("triples") or []),
                        "G_f": len(ver.get("triples") or []) if isinstance(ver, dict) else None}
        out["cypher_error"] = bool(pg.get("error"))
        if ret is not None and ground is not None and r.get("gold") is not None:
            out["gold"] = gold_funnel(r)
    return out


MAX_KEPT_TRIPLES = 20  # of each stage's triples a stripped record keeps


def produced(r: dict[str, Any]) -> dict[str, Any]:
    """What PG&AKV produced for one question, for ``kgqa bench show``: the Cypher the model wrote, the triples the
    semantic query retrieved (with their scores), the subjects pruning kept, and the verified triples G_f with
    what verification added and deleted. The model's output and KG triples only: no prompt, no question text, no
    gold. At most :data:`MAX_KEPT_TRIPLES` of each."""
    n, out = MAX_KEPT_TRIPLES, {}
    for s in r.get("trace") or []:
        o = s.get("output")
        if not isinstance(o, dict):
            continue
        if s["name"] == "cypher_to_triples":
            out["cypher"] = kept_text(o.get("cypher"), r.get("question"))
        elif s["name"] == "semantic_query":
            out["retrieved"] = [[*h.get("triple", []), h.get("score")] for h in (o.get("hits") or [])[:n]]
        elif s["name"] == "prune":
            out["kept_subjects"] = [x.get("label") for x in o.get("subjects") or [] if x.get("kept")][:n]
        elif s["name"] == "verify":
            out["verified"] = [list(t) for t in (o.get("triples") or [])[:n]]
            out["verify_changes"] = {k: [list(t) for t in (o.get(k) or [])[:n]] for k in ("added", "deleted")}
    return out


def strip(r: dict[str, Any]) -> dict[str, Any]:
    """A record without MetaQA text: ids, metrics, costs, the prediction, stage seconds, the funnel, and what the
    method produced (:func:`produced`)."""
    if r.get("stripped"):
        return r
    out = {k: r[k] for k in KEEP if k in r}
    keep_prediction(out, r)
    out["trace"] = [{"name": s["name"], "seconds": s.get("seconds", 0.0)} for s in r.get("trace") or []]
    f = funnel(r)
    if f:
        out["funnel"] = f
    out |= produced(r)
    out["stripped"] = True
    return out


# ---------------------------------------------------------------- the dev choice
def dev_scores(records: Records) -> dict[float, dict[str, Any]]:
    """Per threshold of :data:`GRID`: dev Hits@1 per hop and pooled, and how many questions."""
    out = {}
    for t in GRID:
        per = {h: records(f"dev_thr{_thr(t)}_{h}hop") for h in HOPS}
        pooled = [r["metrics"]["hits@1"] for recs in per.values() for r in recs]
        out[t] = {"per_hop": {h: (sum(r["metrics"]["hits@1"] for r in recs) / len(recs) if recs else None, len(recs))
                              for h, recs in per.items()},
                  "pooled": sum(pooled) / len(pooled) if pooled else None, "n": len(pooled)}
    return out


def _ranked(scores: dict[float, dict[str, Any]]) -> list[float]:
    """:data:`GRID` best first under the rule: pooled dev Hits@1, ties to the value nearest the paper's 0.7."""
    return sorted(GRID, key=lambda t: (round(scores[t]["pooled"], 9), -abs(t - PAPER_THRESHOLD)), reverse=True)


def choose(scores: dict[float, dict[str, Any]]) -> float | None:
    """The rule, fixed with the grid: the threshold with the highest pooled dev Hits@1; ties go to the
    one nearest the paper's 0.7. None until every dev cell has its :data:`DEV` questions per hop."""
    if any(s["n"] < DEV * len(HOPS) for s in scores.values()):
        return None
    return _ranked(scores)[0]


def dev_margin(records: Records) -> dict[str, Any] | None:
    """How far the rule's choice is ahead of the runner-up on the pooled dev questions: both thresholds,
    the questions each gets right of ``n``, the margin in questions and the paired gain (chosen − runner-up,
    Hits@1, bootstrap 95% CI). ``weak`` when that interval reaches 0: dev does not tell the two apart.
    None until the rule chooses."""
    scores = dev_scores(records)
    if choose(scores) is None:
        return None
    chosen, runner = _ranked(scores)[:2]
    recs = {t: [r for h in HOPS for r in records(f"dev_thr{_thr(t)}_{h}hop")] for t in (chosen, runner)}
    right = {t: round(sum(r["metrics"]["hits@1"] for r in rs)) for t, rs in recs.items()}
    gain = paired_gain(recs[chosen], recs[runner], "hits@1")
    return {"chosen": chosen, "runner-up": runner, "right": (right[chosen], right[runner]), "n": scores[chosen]["n"],
            "margin": right[chosen] - right[runner], "gain": gain, "weak": gain[1] <= 0}


def dev_margin_text(records: Records | None = None) -> str:
    """:func:`dev_margin` in a sentence (the report's, and notebook 11's); "" until the rule chooses."""
    m = dev_margin(records if records is not None else Records(TABLE))
    if m is None:
        return ""
    (a, b), g = m["right"], m["gain"]
    return (f"On the {m['n']} pooled dev questions {m['chosen']} answers {a} right and the runner-up, {m['runner-up']}, "
            f"{b}: {m['margin']} question{'' if m['margin'] == 1 else 's'} apart, a paired difference of "
            f"{format_gain(g)} Hits@1 points (95% CI, n={g[3]}). "
            + ("The interval reaches 0, so the choice is weak: dev does not tell the two thresholds apart."
               if m["weak"] else "The interval lies above 0: dev tells the two thresholds apart."))


# ---------------------------------------------------------------- report
# One rule everywhere (the report, its frames, notebook 11's summary): a cell is used only when it holds
# its planned questions; until then it reads "running: n of N" ("not run yet" with none), and no claim
# verdict or paired gain is drawn from it.
MINI_WORLD_NOTE = ("Our 9.9k-triple mini-world (test split of `pgakv_test`, per-question G_base) beside the MetaQA KB "
                   "(every triple searched).")
CLAIMS_NOTE = ("Each claim as a paired difference on the same questions: *holds* when its 95% CI lies above 0, "
               "*reversed* below 0, *unclear* across 0. The best KG-free baseline is the one with the highest Hits@1 at "
               "that hop, named in the cell.")
FUNNEL_NOTE = ("Share of questions with a gold answer in the pseudo-graph G_p, the retrieved triples G_t (top-10 per "
               "pseudo-triple over every KG triple), the pruned ground graph G_g and the verified graph G_f; sizes "
               "are means per question; non-LLM seconds = wall time outside the model per question.")


@dataclass(frozen=True)
class Run:
    """One cell's saved records against the questions it is planned to hold. Its records count only when
    it is complete (:attr:`done`); until then :meth:`status` says how far it is."""

    records: tuple[dict[str, Any], ...]
    planned: int

    @property
    def n(self) -> int:
        return len({r["qid"] for r in self.records})

    @property
    def complete(self) -> bool:
        return self.n >= self.planned

    @property
    def done(self) -> list[dict[str, Any]]:
        """The records when the cell is complete, else none."""
        return list(self.records) if self.complete else []

    def status(self) -> str:
        """``running: n of N`` while the cell is incomplete (``not run yet`` with no records); "" when complete."""
        return "" if self.complete else f"running: {self.n} of {self.planned}" if self.n else NOT_RUN

    def cell(self, metric: str = "hits@1") -> str:
        """``mean [lo, hi] (n=…)`` in points when complete, else :meth:`status`."""
        return ci_cell(self.done, metric) if self.complete else self.status()


def status(have: int, want: int) -> str:
    """What an incomplete cell reads: ``running: have of want``, or ``not run yet`` with nothing recorded."""
    return f"running: {have} of {want}" if have else NOT_RUN


def _mini_cell(part: str, method: str) -> str:
    """A mini-world test-split cell (``pgakv_test``'s records) under the same rule."""
    from ..evaluate import pgakv_analysis as pa

    text = pa.cell_on_test(part, method)
    return status(*pa.split_coverage(part, method)) if text.startswith(NOT_RUN) else text


def mini_world_table(rows: dict[str, dict[int, Run]]) -> ResultTable:
    """The mini-world's test-split cells (``pgakv_test``'s records, the same model) beside MetaQA's."""
    from ..evaluate import pgakv_analysis as pa

    body = []
    for m in ("io", "cot", "sc", "qsm", "pgakv", "pgakv_pg"):
        body.append([ROWS[m], *(_mini_cell(part, m) for part in pa.FACTOID), *(rows[m][h].cell() for h in HOPS)])
    body.append(["PG&AKV − QSM (paired)", *(pa.gain_on_test(part, "pgakv", "qsm") for part in pa.FACTOID),
                 *(_gain(rows, "pgakv", "qsm", h) for h in HOPS)])
    return table("mini_world", "The mini-world beside the real KG",
                 ["method", "mini-world simple", "mini-world multi-hop", *(f"MetaQA {h}-hop" for h in HOPS)], body)


def _tog(h: int) -> Run:
    table_ = get_table("baselines_metaqa")
    name = f"tog_metaqa_{h}hop"
    return Run(tuple(Records(table_)(name)), table_.cell(name).planned)


def _rows(records: Records) -> dict[str, dict[int, Run]]:
    run = lambda name: Run(tuple(records(name)), REPORTED)  # noqa: E731
    rows = {m: {h: run(f"{m}_{h}hop") for h in HOPS} for m in (*KG_FREE, "qsm", "pgakv", "pgakv_pg")}
    if CHOSEN is not None:
        rows["pgakv_chosen"] = {h: run(f"pgakv_chosen_{h}hop") if CHOSEN != PAPER_THRESHOLD
                                else rows["pgakv"][h] for h in HOPS}
    rows["tog"] = {h: _tog(h) for h in HOPS}
    return rows


def _mean(recs: list[dict[str, Any]], key: str = "hits@1") -> float | None:
    vals = [r["metrics"][key] for r in recs if key in r.get("metrics", {})]
    return sum(vals) / len(vals) if vals else None


def _waiting(rows: dict[str, dict[int, Run]], h: int, *methods: str) -> str:
    """The cells among ``methods`` (at ``h`` hops) still running, for a comparison that waits for them."""
    return "; ".join(f"{SHORT[m]} {rows[m][h].status()}" for m in methods if rows[m][h].n and not rows[m][h].complete)


def _compared(rows: dict[str, dict[int, Run]], a: str, b: str, h: int) -> tuple[float, float, float, int] | None:
    """``a − b`` at ``h`` hops, paired over the shared questions, when both cells are complete (else None)."""
    if not (rows[a][h].complete and rows[b][h].complete):
        return None
    g = paired_gain(rows[a][h].done, rows[b][h].done, "hits@1")
    return g if g[3] else None


def _gain(rows: dict[str, dict[int, Run]], a: str, b: str, h: int) -> str:
    g = _compared(rows, a, b, h)
    if g is not None:
        return f"{format_gain(g)} (n={g[3]})"
    waiting = _waiting(rows, h, a, b)
    return f"— ({waiting})" if waiting else "—"


def _holds(rows: dict[str, dict[int, Run]], a: str, b: str, h: int) -> str:
    """In words, as every effects table of the project says it: is ``a`` above ``b`` at ``h`` hops on the shared
    questions (paired 95% CI)? ``holds`` (above 0), ``reversed`` (below 0) or ``unclear`` (across 0); only once
    both cells are complete."""
    g = _compared(rows, a, b, h)
    if g is None:
        waiting = _waiting(rows, h, a, b)
        return f"{NOT_MEASURED} ({waiting})" if waiting else NOT_MEASURED
    mean, lo, hi, n = g
    if lo > 0:
        return f"holds ({100 * mean:+.1f} points, CI above 0, n={n})"
    if hi < 0:
        return f"reversed ({100 * mean:+.1f} points, CI below 0, n={n})"
    return f"unclear ({100 * mean:+.1f} points, CI includes 0, n={n})"


def dev_table(scores: dict[float, dict[str, Any]]) -> ResultTable:
    body = []
    for t, sc in scores.items():
        cells = [f"{100 * m:.1f} (n={n})" if n >= DEV else status(n, DEV) for m, n in sc["per_hop"].values()]
        pooled = f"{100 * sc['pooled']:.1f} (n={sc['n']})" if sc["n"] >= DEV * len(HOPS) else "—"
        body.append([t, *cells, pooled])
    return table("dev", f"Threshold chosen on {TUNING_PART} (Hits@1)",
                 ["threshold", *(f"{h}-hop" for h in HOPS), "pooled"], body)


def results_table(rows: dict[str, dict[int, Run]]) -> ResultTable:
    body = []
    for m, per in rows.items():
        paper = PAPER_TABLE2.get(m.replace("_chosen", ""))
        paper_txt = f"{paper[0]} / {paper[1]}" if paper and m != "pgakv_chosen" else "—"
        body.append([ROWS[m], *(per[h].cell() for h in HOPS), paper_txt])
    return table("results", "Results (MetaQA dev, our reported part), Hits@1",
                 ["method", *(f"{h}-hop" for h in HOPS), "paper (SimpleQuestions / QALD-10)"], body)


def _best_kg_free(rows: dict[str, dict[int, Run]], h: int) -> str:
    """The KG-free baseline with the highest Hits@1 among the complete ones (the first while none is)."""
    return max(KG_FREE, key=lambda m: (rows[m][h].complete, _mean(rows[m][h].done) or -1.0))


def claims_table(rows: dict[str, dict[int, Run]]) -> ResultTable:
    best = {h: _best_kg_free(rows, h) for h in HOPS}
    body = [["PG&AKV above the best KG-free baseline (Table 2)",
             *(f"vs {SHORT[best[h]]}, the best KG-free at {h}-hop: {_holds(rows, 'pgakv', best[h], h)}" for h in HOPS)],
            ["PG&AKV above QSM (Table 2)", *(_holds(rows, "pgakv", "qsm", h) for h in HOPS)],
            ["Pseudo-Graph above CoT (Table 4)", *(_holds(rows, "pgakv_pg", "cot", h) for h in HOPS)],
            ["PG&AKV above Pseudo-Graph (Table 4)", *(_holds(rows, "pgakv", "pgakv_pg", h) for h in HOPS)]]
    return table("claims", "Which of the paper's claims hold on the real KG",
                 ["claim (paper)", *(f"{h}-hop" for h in HOPS)], body)


def funnel_table(rows: dict[str, dict[int, Run]]) -> ResultTable:
    body = []
    for h in HOPS:
        recs = [r for r in rows["pgakv"][h].done if (r.get("funnel") or {}).get("gold")]
        if not recs:
            body.append([h, rows["pgakv"][h].status() or 0, *(["—"] * 10)])
            continue
        share = lambda k: f"{sum(1 for r in recs if r['funnel']['gold'].get(k)) / len(recs):.2f}"  # noqa: E731
        size = lambda k: f"{sum(r['funnel']['sizes'].get(k) or 0 for r in recs) / len(recs):.0f}"  # noqa: E731
        outside = sum(max(0.0, r["seconds"] - r["llm"].get("seconds", 0.0)) for r in recs) / len(recs)
        body.append([h, len(recs), share("G_p"), share("G_t"), share("G_g"), share("G_f"), size("searched"),
                     size("G_t"), size("G_g"), size("G_f"), sum(1 for r in recs if r["funnel"].get("cypher_error")),
                     f"{outside:.1f}"])
    return table("funnel", "Where the gold answer is lost (PG&AKV, threshold 0.7)",
                 ["hop", "n", "in G_p", "in G_t", "in G_g", "in G_f", "triples searched", "G_t", "G_g", "G_f",
                  "Cypher errors", "non-LLM s/q"], body)


def funnel_gf_note(rows: dict[str, dict[int, Run]]) -> str:
    """Why the funnel can hold a gold answer in G_f more often than in G_g, counted from the records: the
    verifier rewrites the pseudo-graph G_p against G_g (keeps, deletes, replaces, adds triples), so a G_p
    triple it keeps — the model's own fact, which the pruned KG graph may lack — stays in G_f. "" when no
    question has gold in G_f and not in G_g."""
    counts = {}
    for h in HOPS:
        gold = [r["funnel"]["gold"] for r in rows["pgakv"][h].done if (r.get("funnel") or {}).get("gold")]
        extra = [g for g in gold if g.get("G_f") and not g.get("G_g")]
        counts[h] = (len(extra), sum(1 for g in extra if g.get("G_p")))
    if not any(n for n, _ in counts.values()):
        return ""
    return ("A gold answer can be in G_f and not in G_g because verification rewrites the pseudo-graph G_p against "
            "G_g (keeping, deleting, replacing and adding triples): a G_p triple the verifier keeps — the model's own "
            "fact, which the pruned KG graph may lack — stays in G_f; questions with a gold answer in G_f but not in "
            "G_g: " + ", ".join(f"{h}-hop {n} ({p} of them with it already in G_p)" for h, (n, p) in counts.items())
            + ".")


def _verdict(rows: dict[str, dict[int, Run]], a: str, b: str, h: int) -> str:
    """:func:`_holds`' first word: ``holds``, ``reversed``, ``unclear`` or ``not measured yet``."""
    said = _holds(rows, a, b, h)
    return NOT_MEASURED if said.startswith(NOT_MEASURED) else said.split(" ", 1)[0]


def _hops(hs: list[int]) -> str:
    return " and ".join(", ".join(f"{h}-hop" for h in hs).rsplit(", ", 1))


def claims_in_words(records: Records | None = None) -> str:
    """The claims table (:func:`claims_table`) in words, one list item (a ``- `` line) per claim: at which hops
    it holds, is reversed, is unclear (paired 95% CI) — for :func:`kgqa_lib.notebooks.say`. ``records``: the
    default model's saved ones unless given."""
    rows = _rows(records if records is not None else Records(TABLE))
    best = {h: _best_kg_free(rows, h) for h in HOPS}
    named = (f"{SHORT[best[HOPS[0]]]} at every hop" if len(set(best.values())) == 1
             else ", ".join(f"{SHORT[best[h]]} at {h}-hop" for h in HOPS))
    claims = [(f"PG&AKV above the best KG-free baseline (Table 2; here {named})",
               {h: _verdict(rows, "pgakv", best[h], h) for h in HOPS}),
              ("PG&AKV above QSM (Table 2)", {h: _verdict(rows, "pgakv", "qsm", h) for h in HOPS}),
              ("Pseudo-Graph above CoT (Table 4)", {h: _verdict(rows, "pgakv_pg", "cot", h) for h in HOPS}),
              ("PG&AKV above Pseudo-Graph, i.e. the KG and verification add to the pseudo-graph (Table 4)",
               {h: _verdict(rows, "pgakv", "pgakv_pg", h) for h in HOPS})]
    words = {"holds": "holds", "reversed": "is reversed (the other way)", "unclear": "is unclear (95% CI across 0)",
             NOT_MEASURED: "is not measured yet"}
    items = []
    for claim, said in claims:
        parts = [f"{words[v]} at {_hops([h for h in HOPS if said[h] == v])}" for v in words
                 if any(said[h] == v for h in HOPS)]
        items.append(f"{claim}: " + "; ".join(parts) + ".")
    return ("Which of the paper's claims hold on the MetaQA KB (PG&AKV at the paper's threshold "
            f"{PAPER_THRESHOLD}, paired on the same questions):" + "".join(f"\n- {x}" for x in items))


def funnel_in_words(records: Records | None = None) -> str:
    """The funnel table (:func:`funnel_table`) in words: how many KG triples each question's semantic querying
    searches, where a gold answer is kept and lost from the top-10 retrieval through pruning and verification,
    per hop, and the non-LLM seconds per question ("" while no PG&AKV cell is complete)."""
    t = funnel_table(_rows(records if records is not None else Records(TABLE)))
    cols = t.columns
    body = [dict(zip(cols, r)) for r in t.rows if r[2] != "—"]
    if not body:
        return ""
    pct = lambda k: "/".join(f"{100 * float(r[k]):.0f}" for r in body)  # noqa: E731
    hops = "/".join(str(r["hop"]) for r in body)
    searched = sorted({r["triples searched"] for r in body})
    return (f"Semantic querying over the whole KG ({' or '.join(searched)} triples searched per question): the top-10 "
            f"retrieval per pseudo-triple puts a gold answer into G_t for {pct('in G_t')}% of the {hops}-hop questions "
            f"(the model's own pseudo-graph G_p holds one for {pct('in G_p')}%); pruning keeps it in G_g for "
            f"{pct('in G_g')}%, and after verification G_f holds one for {pct('in G_f')}%. G_t holds "
            + "/".join(r["G_t"] for r in body) + " triples per question, G_g "
            + "/".join(r["G_g"] for r in body) + ". Outside the model a question takes "
            + "/".join(r["non-LLM s/q"] for r in body)
            + " s (everything but the model calls: parsing the Cypher, embedding, the search, pruning).")


def funnel_reading(records: Records | None = None) -> str:
    """Notebook 11's reading of the funnel: :func:`funnel_in_words`, then :func:`funnel_gf_note`, one paragraph
    per line (for :func:`kgqa_lib.notebooks.say`)."""
    records = records if records is not None else Records(TABLE)
    return "\n".join(x for x in (funnel_in_words(records), funnel_gf_note(_rows(records))) if x)


def gains_table(rows: dict[str, dict[int, Run]]) -> ResultTable:
    body = [[f"{ROWS[a]} − {ROWS[b]}", *(_gain(rows, a, b, h) for h in HOPS)]
            for a, b in (("pgakv", "qsm"), ("pgakv", "cot"), ("pgakv", "io"), ("pgakv_pg", "cot"),
                         ("pgakv", "pgakv_pg"), ("pgakv", "tog"))]
    return table("gains", "Paired gains", ["comparison", *(f"{h}-hop" for h in HOPS)], body)


def summary(records: Records) -> str:
    """Notebook 11's sentence on the MetaQA KB, under the report's rule (complete cells only): PG&AKV (threshold
    0.7) − QSM and PG&AKV − the best KG-free baseline per hop, where both cells of a hop are complete; which
    cells are still running and how many are not run yet; then :func:`other_models_sentence`. The full table is
    the report's (notebook 11, section 5)."""
    rows = _rows(records)
    ours = [m for m in rows if m != "tog" and not (m == "pgakv_chosen" and CHOSEN == PAPER_THRESHOLD)]
    where = (f"On the MetaQA KB (a real KG: WikiMovies; MetaQA dev (our reported part), {REPORTED} questions per hop; "
             f"every cell in `results/bench/pgakv_metaqa.md`), PG&AKV at the paper's threshold {PAPER_THRESHOLD}")
    gap = lambda vs: ", ".join(f"{format_gain(g) if g else NOT_MEASURED} on {h}-hop" for h, g in vs.items())  # noqa: E731
    vs = {h: _compared(rows, "pgakv", "qsm", h) for h in HOPS}
    said = ("PG&AKV − QSM is " + gap(vs) if any(vs.values()) else
            "PG&AKV − QSM is not measured until both cells of a hop are complete")
    best = {h: _best_kg_free(rows, h) for h in HOPS}
    kg_free = {h: _compared(rows, "pgakv", best[h], h) for h in HOPS}
    if any(kg_free.values()):
        said += "; PG&AKV − the best KG-free baseline is " + ", ".join(
            f"{format_gain(g)} ({SHORT[best[h]]}) on {h}-hop" if g else f"{NOT_MEASURED} on {h}-hop"
            for h, g in kg_free.items())
    if not any(rows[m][h].complete for h in HOPS for m in ours):
        said += "; no cell is complete yet"
    running = [f"{SHORT[m]} {h}-hop ({rows[m][h].n} of {REPORTED})" for h in HOPS for m in ours
               if rows[m][h].n and not rows[m][h].complete]
    idle = sum(1 for h in HOPS for m in ours if not rows[m][h].n)
    said += ("; still running: " + ", ".join(running) if running else "") + (
        f"; the other {idle} cells are {NOT_RUN}" if idle else "")
    if any(s["n"] < DEV * len(HOPS) for s in dev_scores(records).values()):
        said += " (the dev cells that choose the pruning threshold are not all complete)"
    others = other_models_sentence()
    return f"{where}: {said}." + (f" {others}" if others else "")


def other_models_sentence() -> str:
    """PG&AKV − QSM on MetaQA with each model other than the default, on the hops where both of its cells are
    complete, as one sentence per model ("" when no other model has such a hop)."""
    out = []
    for m in TABLE.models():
        if m == default_key():
            continue
        rows = _rows(Records(TABLE, m))
        vs = {h: _compared(rows, "pgakv", "qsm", h) for h in HOPS}
        if any(vs.values()):
            out.append(f"With `{m}`, PG&AKV − QSM is " + ", ".join(
                f"{format_gain(g) if g else NOT_MEASURED} on {h}-hop" for h, g in vs.items()) + ".")
    return " ".join(out)


def qsm_gaps(models: list[str] | None = None) -> dict[str, Any]:
    """PG&AKV (threshold 0.7) − QSM, paired on the same questions, on every question set — the mini-world's
    test splits (``pgakv_test``'s questions, ``pgakv_t2``'s records) and MetaQA's hops — for each model
    (model keys; default: the default model, then every other model with records here or in ``pgakv_t2``), in points with the 95% CI;
    a set where either cell is incomplete gives None. With the paper's GPT-3.5 gain (Table 2) on the column
    each set stands for: ``{"groups", "paper", "series": {model: [(gain, lo, hi) | None per group]}}``."""
    from ..evaluate import pgakv_analysis as pa

    models = models or list(dict.fromkeys([default_key(), *TABLE.models(), *get_table("pgakv_t2").models()]))
    paper = {col: round(PAPER_TABLE2["pgakv"][col] - PAPER_TABLE2["qsm"][col], 1) for col in (0, 1)}
    groups = [f"mini-world {'simple' if p == 'simple' else 'multi-hop'}" for p in pa.FACTOID] + [
        f"MetaQA {h}-hop" for h in HOPS]
    series = {}
    for m in models:
        t2 = Records(get_table("pgakv_t2"), m)
        done = pa.complete_only(lambda part, run: t2(f"t2_{part}.{run}"))
        cells: list[tuple[float, float, float] | None] = []
        for part in pa.FACTOID:
            test = pa.split_qids(part)[1]
            a, b = pa.restrict(done(part, "pgakv"), test), pa.restrict(done(part, "qsm"), test)
            g = paired_gain(a, b, "hits@1") if a and b else None
            cells.append(tuple(100 * x for x in g[:3]) if g and g[3] else None)
        rows = _rows(Records(TABLE, m))
        for h in HOPS:
            g = _compared(rows, "pgakv", "qsm", h)
            cells.append(tuple(100 * x for x in g[:3]) if g else None)
        series[m] = cells
    return {"groups": groups, "paper": [paper[0], paper[1], paper[0], paper[1], paper[1]], "series": series}


def result_tables(records: Records) -> dict[str, ResultTable]:
    """Every table of the report, as data (``.frame()`` for a notebook, ``.markdown()`` for the report)."""
    rows = _rows(records)
    out = [dev_table(dev_scores(records)), results_table(rows), claims_table(rows), mini_world_table(rows),
           funnel_table(rows), gains_table(rows)]
    return {t.name: t for t in out}


def report(records: Records) -> str:
    t = result_tables(records)
    rows = _rows(records)
    rule = choose(dev_scores(records))
    margin = dev_margin_text(records)
    gf, fw = funnel_gf_note(rows), funnel_in_words(records)
    lines = ["# PG&AKV on a real knowledge graph: the MetaQA KB", "",
             "MetaQA dev, our reported part: the same 100 questions per hop as KB-BINDER's and Think-on-Graph's "
             "cells (`baselines_metaqa`), answered over the MetaQA KB (WikiMovies, every triple searchable: "
             "semantic querying over the whole KG, `search_scope=kg`; QSM searches the same way). 1-hop stands "
             "for the paper's SimpleQuestions column, 2- and 3-hop for its multi-hop (QALD-10) column. Hits@1 in "
             "points with a 95% bootstrap CI; gains paired on the questions both runs answered. The local "
             "Qwen2.5-Coder-1.5B instead of GPT-3.5; the paper's values are its Table 2 GPT-3.5 rows. A cell counts "
             "only once it holds all its questions: until then it reads \"running: n of N\" (\"not run yet\" with "
             "none), and no claim or paired gain is drawn from it.", "",
             f"## Threshold chosen on {TUNING_PART}", "",
             f"Grid fixed before any run: thresholds {', '.join(str(t) for t in GRID)} (top-k the paper's 10); rule: "
             f"the highest Hits@1 pooled over the hops, ties to the value nearest the paper's {PAPER_THRESHOLD}. "
             f"{DEV} questions per hop from MetaQA dev lines disjoint from the reported ones "
             "(`pgakv:metaqa:Nhop:dev`).",
             "",
             t["dev"].markdown(), "",
             (f"The rule gives {rule}." if rule is not None else
              "The rule gives nothing yet: not every dev cell is complete.")
             + ("" if CHOSEN is None else f" The reported runs use {CHOSEN}.") + (f" {margin}" if margin else ""),
             "", "## Results (MetaQA dev, our reported part)", "", t["results"].markdown(), "",
             "## Which of the paper's claims hold on the real KG", "", CLAIMS_NOTE, "", t["claims"].markdown(), "",
             claims_in_words(records), "",
             f"Table 4's QALD-10 steps in the paper (CoT → Pseudo-Graph → Ours, GPT-3.5): "
             f"{' → '.join(str(x) for x in PAPER_TABLE4_QALD)}.", "",
             "## The mini-world beside the real KG", "", MINI_WORLD_NOTE, "", t["mini_world"].markdown(), "",
             "## Where the gold answer is lost (PG&AKV, threshold 0.7)", "", FUNNEL_NOTE, "",
             t["funnel"].markdown(), "", *([gf, ""] if gf else []), *([fw, ""] if fw else []),
             "## Paired gains", "", t["gains"].markdown()]
    return "\n".join(lines) + "\n"


def frames(model: str | None = None) -> dict[str, Any]:
    """The report's tables as DataFrames, from the saved records (of ``model``; default: the default model)."""
    from .result_table import frames as to_frames

    return to_frames(list(result_tables(Records(TABLE, model)).values()))


def _paper_column(h: int) -> tuple[int, str]:
    """The paper's column a hop stands for: (index into PAPER_TABLE2's pairs, its name)."""
    return (0, "SimpleQuestions") if h == 1 else (1, "QALD-10")


def _effects() -> tuple[Effect, ...]:
    """The paper's effects checked at every model with records: Table 2's PG&AKV above CoT and above QSM on each
    hop (1-hop against the paper's SimpleQuestions column, 2- and 3-hop against QALD-10), and Table 4's two steps
    (QALD-10 only in the paper, so on 2- and 3-hop)."""
    out = []
    for h in HOPS:
        col, name = _paper_column(h)
        for b in ("cot", "qsm"):
            out.append(Effect(f"PG&AKV above {SHORT[b]}, MetaQA {h}-hop",
                              f"PG&AKV paper, Table 2, GPT-3.5, {name}: PG&AKV {PAPER_TABLE2['pgakv'][col]} vs "
                              f"{SHORT[b]} {PAPER_TABLE2[b][col]}", ("pgakv_metaqa", f"pgakv_{h}hop"),
                              ("pgakv_metaqa", f"{b}_{h}hop")))
    cot, pg, ours = PAPER_TABLE4_QALD
    for h in HOPS[1:]:
        out.append(Effect(f"Pseudo-Graph above CoT, MetaQA {h}-hop",
                          f"PG&AKV paper, Table 4, GPT-3.5, QALD-10: Pseudo-Graph {pg} vs CoT {cot}",
                          ("pgakv_metaqa", f"pgakv_pg_{h}hop"), ("pgakv_metaqa", f"cot_{h}hop")))
        out.append(Effect(f"PG&AKV above Pseudo-Graph, MetaQA {h}-hop",
                          f"PG&AKV paper, Table 4, GPT-3.5, QALD-10: Verification {ours} vs Pseudo-Graph {pg}",
                          ("pgakv_metaqa", f"pgakv_{h}hop"), ("pgakv_metaqa", f"pgakv_pg_{h}hop")))
    return tuple(out)


TABLE = register(Table(
    name="pgakv_metaqa", title="PG&AKV on the MetaQA KB (a real KG), MetaQA dev: Table 2 and Table 4 analogues",
    cells=_cells(), report=report, output="pgakv_metaqa.md", strip=strip, records="pgakv_metaqa",
    source="PG&AKV paper, Tables 2 and 4 (GPT-3.5 rows)", effects=_effects(),
))
