"""PG&AKV (Li et al.), Table 2 on the full mini-world sets: IO, CoT, SC, QSM and PG&AKV × simple /
multi-hop / open, the gains the paper claims, costs, PG&AKV variants end to end, the Cypher the
local model writes, where the gold answer is lost, and pruning re-scored offline.

The mini-world is our own data, so the records are saved whole (``results/bench/runs/pgakv_t2/``)."""

from __future__ import annotations

from ..evaluate.report import best_baseline_gain, format_gain, paired_gain, summarize
from ..evaluate.pgakv_analysis import ERROR_STAGES, attribute_error, gold_funnel, pruning_sweep
from ..methods.pgakv import cypher_statistics, stage_output
from .core import Cell, Records, Table, register

SETS = ("simple", "multihop", "open")
METHODS = ("io", "cot", "sc", "qsm", "pgakv")
KG_FREE = ("io", "cot", "sc")
VARIANTS = {"pgakv_thr05": "threshold 0.5", "pgakv_noverify": "no verification",
            "pgakv_thr05_noverify": "threshold 0.5, no verification"}  # cells t2_<set>.<variant>
VARIANT_SETTINGS = {"pgakv_thr05": ("threshold=0.5",), "pgakv_noverify": ("verify=False",),
                    "pgakv_thr05_noverify": ("threshold=0.5", "verify=False")}
CLAIM = {"simple": 7.5, "multihop": 7.5, "open": 11.5}  # the paper's abstract: minimum gains over the baselines
SIZES = {"simple": 161, "multihop": 88, "open": 50}  # the whole mini-world sets
RUN_ARGS = ("--llm-mode", "auto", "--no-transcripts")  # the local model (default --llm)


def report(records: Records) -> str:
    load = lambda s, m: records(f"t2_{s}.{m}")  # noqa: E731  ([] when not run)
    rows, lines = {(s, m): summarize(load(s, m)) for s in SETS for m in METHODS if load(s, m)}, []
    metric = {s: "rouge_l" if s == "open" else "hits@1" for s in SETS}
    lines.append("# PG&AKV on the full mini-world sets (local Qwen2.5-Coder-1.5B)\n")
    lines.append("Every question of each set, dev and test together: the threshold-0.5 variant was found from the offline "
                 "sweep at the end of this report, on these same questions. The results to cite — every number on the test "
                 "split, with the paper's threshold 0.7 as the clean row — are in `pgakv_test.md`; the threshold chosen on "
                 "the dev split there is not held out, since its candidate was found here on all questions, test included.\n")
    lines.append("Hits@1 (simple, multihop) and ROUGE-L (open), 95% bootstrap CI; n = questions done.\n")
    lines.append("| method | " + " | ".join(f"{s} ({metric[s]})" for s in SETS) + " |")
    lines.append("|---|" + "---|" * len(SETS))
    for m in METHODS:
        cells = []
        for s in SETS:
            r = rows.get((s, m))
            cells.append("—" if r is None else f"{r[metric[s]]:.3f} [{r[metric[s] + '_ci'][0]:.3f}, {r[metric[s] + '_ci'][1]:.3f}] (n={r['n']})")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    lines.append("\n## PG&AKV minus the best baseline, in points (the paper claims at least +7.5 / +11.5)\n")
    lines.append("Gains with a paired bootstrap 95% CI over the same questions.\n")
    lines.append("| set | PG&AKV | best KG-free (IO/CoT/SC) | gain [95% CI] | QSM | gain over QSM [95% CI] | paper's minimum gain |")
    lines.append("|---|---|---|---|---|---|---|")
    for s in SETS:
        pg, kg_free = load(s, "pgakv"), {m: load(s, m) for m in KG_FREE if load(s, m)}
        if not pg or not kg_free:
            lines.append(f"| {s} | — | — | — | — | — | {CLAIM[s]} |")
            continue
        best, best_mean, gain = best_baseline_gain(pg, kg_free, metric[s])
        q = rows.get((s, "qsm"))
        qsm = f"{100 * q[metric[s]]:.1f} | {format_gain(paired_gain(pg, load(s, 'qsm'), metric[s]))}" if q else "— | —"
        lines.append(f"| {s} | {100 * rows[s, 'pgakv'][metric[s]]:.1f} | {100 * best_mean:.1f} ({best}) | {format_gain(gain)} | "
                     f"{qsm} | +{CLAIM[s]} |")
    lines.append("\n## Cost per question\n")
    lines.append("| set | method | n | errors | calls/q | tokens/q | s/q | LLM s/q (recorded) | outside LLM s/q | outside share |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|")
    for (s, m), r in rows.items():
        lines.append(f"| {s} | {m} | {r['n']} | {r['errors']} | {r['calls/q']:.2f} | {r['tokens/q']:.0f} | {r['s/q']:.2f} | "
                     f"{r['llm_s/q (recorded)']:.2f} | {r['outside_llm_s/q']:.3f} | {r['outside_share']:.3f} |")
    variants = {(v, s): load(s, v) for v in VARIANTS for s in SETS if s != "open" and load(s, v)}
    if variants:
        lines.append("\n## PG&AKV variants end to end: pruning threshold 0.5, no verification, both\n")
        lines.append("Against the full method (threshold 0.7, with verification) on the same questions, paired bootstrap 95% "
                     "CIs in points. `same sketch`: questions whose pseudo-graph reply is byte-identical to the full run's "
                     "(the first LLM call does not depend on these settings). `gold in G_g`: full run → variant.\n")
        lines.append("| variant | set | n | same sketch | full PG&AKV | variant | gain over full | gain over best KG-free "
                     "| gain over QSM | gold in G_g | tokens/q | LLM s/q |")
        lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
        hit = lambda rs: 100 * sum(r["metrics"]["hits@1"] for r in rs) / max(1, len(rs))  # noqa: E731
        gg = lambda rs: sum(gold_funnel(r)["G_g"] for r in rs) / max(1, len(rs))  # noqa: E731
        for (v, s), recs in variants.items():
            qids = {r["qid"] for r in recs}
            full = [r for r in load(s, "pgakv") if r["qid"] in qids]
            best, _, gain = best_baseline_gain(recs, {m: load(s, m) for m in KG_FREE}, "hits@1")
            row = summarize(recs)
            sketch = {r["qid"]: stage_output(r, "generate_pseudo_graph")["text"] for r in full}
            same_sketch = sum(stage_output(r, "generate_pseudo_graph")["text"] == sketch.get(r["qid"]) for r in recs)
            lines.append(f"| {VARIANTS[v]} | {s} | {len(recs)} | {same_sketch}/{len(recs)} | {hit(full):.1f} | {hit(recs):.1f} | "
                         f"{format_gain(paired_gain(recs, full, 'hits@1'))} | {format_gain(gain)} ({best}) | "
                         f"{format_gain(paired_gain(recs, load(s, 'qsm'), 'hits@1'))} | {gg(full):.3f} → {gg(recs):.3f} | "
                         f"{row['tokens/q']:.0f} | {row['llm_s/q (recorded)']:.1f} |")
    pg = [rec for s in SETS for rec in load(s, "pgakv")]
    if pg:
        lines.append("\n## Cypher written by the local model (all PG&AKV questions above)\n")
        lines.append("| measure | value |")
        lines.append("|---|---|")
        for k, v in cypher_statistics(pg).items():
            lines.append(f"| {k} | {v} |")
    factoid = {s: load(s, "pgakv") for s in SETS if s != "open" and load(s, "pgakv")}
    if factoid:
        lines.append("\n## Where the gold answer is lost (factoid sets, from each record's trace)\n")
        lines.append("Share of questions whose graph at each stage holds a gold answer: sketch `G_p`, retrieved `G_t` "
                     "(top-10 KG triples per sketch triple), ground graph `G_g` after pruning, verified graph `G_f`.\n")
        lines.append("| set | n | G_p | G_t | G_g | G_f | Hits@1 |")
        lines.append("|---|---|---|---|---|---|---|")
        for s, recs in factoid.items():
            f = [gold_funnel(r) for r in recs]
            share = {g: sum(x[g] for x in f) / len(f) for g in ("G_p", "G_t", "G_g", "G_f")}
            hits = sum(r["metrics"]["hits@1"] for r in recs) / len(recs)
            lines.append(f"| {s} | {len(recs)} | " + " | ".join(f"{share[g]:.3f}" for g in share) + f" | {hits:.3f} |")
        lines.append("\nEach wrong answer attributed to the first stage that lost the gold answer (`verification` here: "
                     "`G_g` held it, `G_f` does not — trace-only; notebook 14 also measures the paper's counterfactual "
                     "definition against a run without verification).\n")
        lines.append("| set | wrong | " + " | ".join(ERROR_STAGES) + " |")
        lines.append("|---|---|" + "---|" * len(ERROR_STAGES))
        for s, recs in factoid.items():
            causes = [c for c in (attribute_error(r) for r in recs) if c]
            lines.append(f"| {s} | {len(causes)} | " + " | ".join(
                f"{causes.count(c)} ({causes.count(c) / max(1, len(causes)):.0%})" for c in ERROR_STAGES) + " |")
        lines.append("\n## Pruning re-scored offline (no LLM call): gold answer kept in `G_g`\n")
        lines.append("The paper's setting is k = subjects of `G_p`, threshold 0.7 (mean cosine of a subject's retrieved triples).\n")
        sweep = {s: pruning_sweep(recs) for s, recs in factoid.items()}
        lines.append("| k | threshold | " + " | ".join(f"{s}: gold in G_g | {s}: triples/q" for s in sweep) + " |")
        lines.append("|---|---|" + "---|---|" * len(sweep))
        first = next(iter(sweep.values()))
        for i, row in enumerate(first):
            lines.append(f"| {row['k']} | {row['threshold']} | " + " | ".join(
                f"{rows_[i]['gold in G_g']:.3f} | {rows_[i]['ground triples/q']}" for rows_ in sweep.values()) + " |")
    return "\n".join(lines) + "\n"


CELLS = tuple(Cell(f"t2_{s}.{m}", m, f"miniworld:{s}", SIZES[s], RUN_ARGS) for s in SETS for m in METHODS) + tuple(
    Cell(f"t2_{s}.{v}", "pgakv", f"miniworld:{s}", SIZES[s],
         tuple(a for kv in VARIANT_SETTINGS[v] for a in ("--set", kv)) + RUN_ARGS)
    for v in VARIANTS for s in ("multihop", "simple"))

TABLE = register(Table(
    name="pgakv_t2", title="PG&AKV on the full mini-world sets (local Qwen2.5-Coder-1.5B)", cells=CELLS,
    report=report, output="pgakv_table2.md", records="pgakv_t2",
    source="PG&AKV paper, Table 2 (and the abstract's minimum gains)",
))


# ---------------------------------------------------------------------------------------------
# Issue 23: the test splits (settings chosen on dev), the paper's Table 4 and Table 3, and G_base
# without the dataset's topic-entity annotations. Cells share the folder of pgakv_t2 (the loader of
# kgqa_lib.evaluate.pgakv_analysis reads ``t2_<set>.<run>``); the Table 2 baselines and the
# threshold runs on simple/multi-hop are the full-set cells above, restricted to the test qids.
TEST_SIZES = {"simple": 113, "multihop": 62, "open": 50}  # kgqa_lib.data.datasets.split_dev_test, seed 0
DEV_SIZES = {"simple": 48, "multihop": 26}
CHOSEN = ("--set", "threshold=0.5")  # chosen on dev (results/bench/pgakv_test.md, first section)
NO_ANNOTATION = ("--set", "use_topic_entities=false", "--set", "link_question=true")
TEST_CELLS = (
    # Table 4: CoT → Pseudo-Graph (no KG) → full method
    *(Cell(f"t2_{s}.pgakv_pg", "pgakv", f"miniworld:{s}:test", TEST_SIZES[s], ("--set", "kg_context=none") + RUN_ARGS)
      for s in SETS),
    # the chosen threshold on the open set (all test)
    Cell("t2_open.pgakv_thr05", "pgakv", "miniworld:open:test", TEST_SIZES["open"], CHOSEN + RUN_ARGS),
    # G_base without the annotations: PG&AKV (chosen threshold) and QSM
    *(Cell(f"t2_{s}.pgakv_thr05_noann", "pgakv", f"miniworld:{s}:test", TEST_SIZES[s], CHOSEN + NO_ANNOTATION + RUN_ARGS)
      for s in ("simple", "multihop")),
    *(Cell(f"t2_{s}.qsm_noann", "qsm", f"miniworld:{s}:test", TEST_SIZES[s], NO_ANNOTATION + RUN_ARGS)
      for s in ("simple", "multihop")),
    # Table 3: the same questions over the Freebase-like schema (chosen threshold)
    *(Cell(f"t2_{s}.pgakv_thr05_fb", "pgakv", f"miniworld:{s}:test", TEST_SIZES[s],
           ("--kg", "miniworld:freebase") + CHOSEN + RUN_ARGS) for s in ("simple", "open")),
    # top-k on dev: one subject more than G_p has, at 0.5 — the setting the dev proxy points to (gold kept in
    # G_g 39/48 and 15/26 dev questions vs 32/48 and 12/26). Dev questions only: the choice is made there
    # (evaluate.pgakv_analysis.choose_pruning reads them as the dev records of (0.5, k+1)); its test runs
    # follow only if it wins
    *(Cell(f"t2_{s}.pgakv_thr05_k1_dev", "pgakv", f"miniworld:{s}:dev", DEV_SIZES[s],
           CHOSEN + ("--set", "k_extra=1") + RUN_ARGS) for s in ("simple", "multihop")),
)


def test_report(records: Records) -> str:
    from ..evaluate import pgakv_analysis as pa

    load = lambda s, run: records(f"t2_{s}.{run}")  # noqa: E731
    return pa.test_split_report(load)


TEST_TABLE = register(Table(
    name="pgakv_test",
    title="PG&AKV on the mini-world test splits: Table 2 (pruning chosen on dev, not held out), Tables 3 and 4, no annotations",
    cells=TEST_CELLS, report=test_report, output="pgakv_test.md", records="pgakv_t2",
    source="PG&AKV paper, Tables 2, 3 and 4",
))
