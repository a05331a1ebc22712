"""What notebooks 21 and 22 print of the FuSIC records and measurements (kgqa_lib.bench.fusic, fusic_paths,
fusic_table1), each sentence computed: one effect has one interval whichever way a table states it; the ablation
lists follow one rule on the paired CIs and are complete; the paper's Table 3 is read from its numbers; MetaQA
3-hop beyond the candidate paths; the cost figure's bars at live seconds; the ids' legend; the zero-shot point of
the shots axis named as what it is; the path-depth measurement's linker caveat."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from kgqa_lib.bench import fusic as B  # noqa: E402
from kgqa_lib.bench import fusic_paths as P  # noqa: E402
from kgqa_lib.bench import fusic_table1 as T1  # noqa: E402
from kgqa_lib.bench.core import default_key, effects_rows  # noqa: E402


@pytest.fixture(autouse=True)
def _any_size_is_complete(monkeypatch):
    """Made-up records of any size count as complete cells (planned sizes: test_fusic_report_labels.py)."""
    import dataclasses

    monkeypatch.setattr(B, "CELL_OF", {n: dataclasses.replace(c, planned=1) for n, c in B.CELL_OF.items()})


def _rec(qid, f1, attempts=1, hops=1, relation_in_prompt=True, calls=None, seconds=None, llm=None):
    stage_calls = calls or {"rerank": 2, "generation": 1, "feedback": attempts - 1}
    return {"qid": qid, "metrics": {"f1": f1, "hits@1": f1}, "seconds": 10.0, "error": None,
            "llm": llm or {"calls": 3, "prompt_tokens": 100, "completion_tokens": 10, "recorded_seconds": 8.0,
                           "seconds": 8.0, "cache_hits": 0},
            "stages": {"calls": {**stage_calls, "total": sum(stage_calls.values())},
                       "seconds": seconds or {"retrieval": 1.0, "rerank": 2.0, "exemplars": 0.5, "generation": 3.0,
                                              "feedback": 0.0}},
            "attempts": [{"status": "ok", "repeat": False}] * attempts,
            "gold_analysis": {"topic_linked": True, "mentions": 1, "gold_hops": hops, "query_gold_relations": [1, 1],
                              "query_relation_patterns": hops,
                              "retrieval": [{"retriever": "dense", "aspect": "path", "top_K": hops <= 2,
                                             "before": hops <= 2, "after": hops <= 2},
                                            {"retriever": "dense", "aspect": "relation", "top_K": True, "before": True,
                                             "after": relation_in_prompt}]}}


def test_one_effect_has_one_interval_whichever_way_a_table_states_it(monkeypatch):
    """Few- minus zero-shot FuSIC(T) (the table's effect, the model axis) and zero- minus few-shot (the summary, the
    Table 2 analogue, the shots rows): the same interval, negated — though the two cells hold their questions in
    different orders, which would make two bootstrap intervals differ."""
    few = [_rec(f"q{i}", float(i % 3 == 0)) for i in range(30)]
    zero = [_rec(f"q{i}", float(i % 2 == 0)) for i in reversed(range(30))]
    have = {"metaqa1.fs_dense": few, "metaqa1.zs_dense": zero}
    records = lambda c: have.get(c, [])  # noqa: E731
    a, b = B.cell_records(records, "metaqa1.fs_dense"), B.cell_records(records, "metaqa1.zs_dense")
    fz, zf = B.paired_f1(a, b), B.paired_f1(b, a)
    assert (zf[0], zf[1], zf[2], zf[3]) == (-fz[0], -fz[2], -fz[1], fz[3])
    from kgqa_lib.evaluate.report import format_gain, paired_gain

    assert format_gain(paired_gain(b, a, "f1")) != format_gain(zf)  # the bootstrap's order matters: hence one place
    # the model axis reads the saved records: give it these
    monkeypatch.setattr("kgqa_lib.bench.core.Records.__call__", lambda self, cell: have.get(cell, []))
    axis = next(r for r in effects_rows(B.TABLE, [default_key()]) if "1-hop" in r["effect"])
    assert axis[default_key()].startswith(f"{format_gain(fz)} (n=30)")
    summary = B.summary_transfer(records)
    assert f"MetaQA 1-hop {format_gain(fz)}" in summary
    assert "None of these numbers is a held-out estimate" in summary  # settings were chosen on these questions
    assert f"zero-shot —/—/—/— (the paper: {B.PAPER['kbbinder_zs'][1]})" in summary  # KB-BINDER zero-shot, no cells
    t = B.result_tables(records)
    zs_row = next(r for r in t["table2"].rows if r[0] == B.PAIRS["metaqa1"][4] and r[1] == B.CONFIGS["zs_dense"][2])
    assert zs_row[4] == f"{format_gain(zf)} (n=30)"
    shots = next(r for r in t["shots"].rows if r[0] == B.PAIRS["metaqa1"][4] and r[2] == "metaqa1.zs_dense")
    assert shots[5] == f"{format_gain(zf)} (n=30)"


def test_the_ablation_lists_follow_one_rule_and_hold_every_pair_once():
    import random

    rng = random.Random(1)
    have = {}
    for p in (*B.METAQA, "gtech"):
        have[f"{p}.fs_dense"] = [_rec(f"q{i}", float(i % 2)) for i in range(40)]
        for a in B.ABLATIONS:
            k = rng.choice((0.0, 0.1, 0.5, 0.9, 1.0))
            have[f"{p}.{a}"] = [_rec(f"q{i}", float(i % 2) if rng.random() > k else float(rng.random() < 0.5))
                                for i in range(40)]
    records = lambda c: have.get(c, [])  # noqa: E731
    gains = {(g["pair"], g["ablation"]): g["gain"] for g in B.ablation_gains(records)}
    text = B._reversals(gains, (*B.METAQA, "gtech"))
    said = text.split("Ours, by each paired 95% CI:\n- ", 1)[1].split("\n- ")  # one item per list
    from kgqa_lib.evaluate.report import format_gain

    assert all(gains[(p, a)] for p in (*B.METAQA, "gtech") for a in B.ABLATIONS)
    for (p, a), g in gains.items():
        if a not in B.ABLATIONS:
            continue
        entry = f"{B.SHORT[p]} {format_gain(g)}"
        side = B.ablation_side(g)
        sentence = next(x for x in said if x.lower().startswith(B.SIDES[side].lower()))
        assert entry in sentence, (p, a, side)
        assert all(entry not in x for x in said if x != sentence)  # in one list only
    # the rule: the CI decides gains / costs, the mean (as shown) the unclear ones
    assert B.ablation_side((0.0004, -0.01, 0.02, 9)) == "unclear, 0"  # +0.0 shown: at 0, not above it
    assert B.ablation_side((0.02, 0.0001, 0.05, 9)) == "gains"


def test_the_papers_table3_is_read_from_its_numbers(monkeypatch):
    assert {a: B.PAPER[c][1] for a, c in (("w/o SPARQL", "fs_dense_sexpr"), ("w/o EGF", "fs_dense_noegf"),
                                          ("w/o RR", "fs_dense_norr"))} == \
        {a: f"{B.PAPER_T3['few-shot'][a][2]}" for a in ("w/o SPARQL", "w/o EGF", "w/o RR")}
    assert B.PAPER_T3["few-shot"]["FuSIC-KBQA(T)"][2] == B.PAPER_FULL_T3
    assert B.PAPER_T3["zero-shot"]["FuSIC-KBQA(T)"][2] == B.PAPER_FULL_T3_ZS
    said = B.paper_table3_reading()
    assert "costs points in 23 of its 24 cases; not in w/o SPARQL, few-shot, W→Gp-P (53.9 vs the full model's 52.3" in said
    assert "every ablation costs points, few- and zero-shot" in said
    rows = {**B.PAPER_T3["few-shot"], "w/o EGF": (56.5, 62.0, 71.0, 44.0)}  # had w/o EGF not cost on W→GI-T
    monkeypatch.setitem(B.PAPER_T3, "few-shot", rows)
    said = B.paper_table3_reading()
    assert "in 22 of its 24 cases" in said and "w/o EGF, few-shot, W→GI-T (71.0 vs the full model's 70.8)" in said
    assert "not every ablation costs points either" in said


def test_metaqa_3hop_beyond_the_candidates_is_counted_not_typed():
    recs = ([_rec(f"q{i}", 1.0, hops=3) for i in range(3)] + [_rec("q3", 1.0, attempts=2, hops=3, relation_in_prompt=False)]
            + [_rec(f"q{i}", 0.0, hops=3) for i in range(4, 10)])
    b = B.beyond_candidates(recs)
    assert b == {"n": 10, "beyond": 10, "F1 = 1": 4, "relations in prompt": 3, "first query": 3}
    have = {"metaqa3.fs_dense": recs}
    text = B.beyond_candidates_sentence(lambda c: have.get(c, []))
    assert text.startswith("On MetaQA 3-hop the gold path is a candidate for 0 of 10 questions")
    assert "reaches F1 = 1 on 4 of the 10 whose gold path is longer (F1 40.0)" in text
    assert "on 3 of those 4 every gold relation was in the prompt" in text and "3 with its first query" in text
    assert "lost before the LLM" not in B.summary_transfer(lambda c: have.get(c, []))


def test_the_ids_legend_decodes_every_configuration_pair_and_model():
    text = B.legend()
    for c in B.CONFIGS:
        assert all(part in B.NAME_PARTS for part in B.name_parts(c)), c
    assert all(f"  {p}: {v[4]}" in text for p, v in B.PAIRS.items())
    assert "fusic:mw-wd>metaqa:reported-<N>hop" in text and "MetaQA dev questions" in text
    assert "qwen2.5-coder-1.5b-instruct-q4_k_m" in text and "qwen2.5-0.5b-instruct-q4" in text
    assert B.name_parts("fs_dense_ex3") == ["fs", "dense", "exN"] and B.name_parts("fs_bm25") == ["fs", "bm25"]


def test_the_deviations_print_as_a_list_with_the_naive_baseline_on_metaqa():
    text = B.deviation_lines(B.TABLE2_CONFIGS)
    lines = text.splitlines()
    assert lines[0] == "Every row:" and all(f"- {x}" in lines for x in B.DIFFERS_EVERYWHERE)
    assert max(len(x.split()) for x in lines) < 200  # no one long paragraph
    assert "MetaQA's entity IRIs are its names" in text and text.count("- ") >= len(B.TABLE2_CONFIGS) + 6
    assert "MetaQA's entity IRIs" not in B.deviation_lines(("fs_dense",))
    assert B.DIFFERS_ALL.startswith("Everywhere: " + "; ".join(B.DIFFERS_EVERYWHERE) + ".")  # the report's sentence


def test_user_facing_fusic_text_states_settings_not_history():
    have = {f"{p}.fs_dense": [_rec("q0", 1.0)] for p in B.PAIRS}
    text = "\n".join(B.choices_section(B.cell_reader(lambda c: have.get(c, []))) + [
        *(v[2] for v in B.CONFIGS.values()), *B.RETRIEVER_NOTE.values(), B.report(lambda c: have.get(c, []))])
    for words in ("earlier prompt", "earlier runs", "was reworked", "one this project set", "was rewritten",
                  "linker rework", "our earlier", "from now on", "held-out part"):
        assert words not in text, words
    assert f"F1 ≥ {100 * B.TARGET_F1:.1f} on every hop with one retriever at ≤ {B.TARGET_CALLS} LLM calls" in text
    assert B.T2_GAIN == "− FuSIC(T), paired (other zero-shot rows: − FuSIC(T) zero-shot)" and B.T2_GAIN in B.TABLE2_COLUMNS
    assert "zs_dense" not in B.BASELINE_OF  # FuSIC(T) zero-shot itself is paired against FuSIC(T) few-shot


def test_the_zero_shot_point_of_the_shots_axis_says_its_exemplars_are_the_sources():
    full = [_rec(f"q{i}", 1.0) for i in range(4)]
    have = {f"{p}.{c}": full for p in B.METAQA for c in ("fs_dense", "zs_dense", "fs_both")}
    fig = B.figure_ablations(lambda c: have.get(c, []))
    _, rounds, shots = fig.axes
    assert [t.get_text() for t in shots.get_xticklabels()][0] == "0\nzero-shot\n(source exemplars)"
    # the feedback-rounds panel: FuSIC(T) few- and zero-shot and FuSIC(T,P) few-shot per hop, and the paper's two
    assert sum(len(line.get_xdata()) == 5 for line in rounds.lines) == 9 + 2
    assert any("FuSIC(T,P), few-shot" in t.get_text() for t in rounds.get_legend().get_texts())


def test_table7_main_cells_stand_beside_the_papers_table7():
    retrieval = [{"retriever": "dense", "aspect": "path", "top_K": True, "before": True, "after": True}]
    have = {"metaqa1.fs_dense": [dict(_rec("a", 1.0), gold_analysis={**_rec("a", 1.0)["gold_analysis"],
                                                                     "retrieval": retrieval})]}
    t = B.table7_beside_paper(B.result_tables(lambda c: have.get(c, []))["table7"])
    row = t.rows[0]
    assert B.cell_of(row[0]) == "metaqa1.fs_dense" and row[-1] == "few-shot: TIARA 5.0 → FuSIC-KBQA(T) 3.2"
    assert t.columns[-1].startswith("paper, Table 7 (W→GI-T)")


def _measurement(linked):
    return {"dataset": "fusic:mw-wd>metaqa:test-<N>hop --sample 100 --seed 0",
            "rows": [{"hops": h, "max_path_hops": d, "n": 3, "topic linked": linked[h - 1]} for h in (1, 2, 3)
                     for d in (2, 3)]}


def test_the_path_depth_measurement_names_its_questions_and_says_when_its_links_differ():
    assert "`fusic:mw-wd>metaqa:reported-<N>hop --sample 100 --seed 0`" in P.questions_line(_measurement((3, 3, 3)))
    assert "MetaQA dev questions" in P.questions_line(_measurement((3, 3, 3)))
    cells = {f"metaqa{h}.fs_dense": [_rec(f"q{i}", 1.0) for i in range(3)] for h in (1, 2, 3)}
    records = lambda c: cells.get(c, [])  # noqa: E731
    same = P.linker_caveat(_measurement((3, 3, 3)), records)
    assert "1-hop 3 vs 3, 2-hop 3 vs 3, 3-hop 3 vs 3. The same on every hop." in same
    other = P.linker_caveat(_measurement((2, 3, 3)), records)
    assert "1-hop 2 vs 3" in other and "They differ on 1-hop" in other and "another version of the entity linker" in other
    assert "not complete yet" in P.linker_caveat(_measurement((2, 3, 3)), lambda c: [])
    counts, cpu = P.depth_frames({"rows": [{"hops": 1, "max_path_hops": 2, "n": 3, "topic linked": 3,
                                            "enumerate CPU s/q": 0.1}]})
    assert list(counts.columns) == ["n", "topic linked"] and list(cpu.columns) == ["enumerate CPU s/q"]


def test_table1_says_why_the_papers_column_stands_beside_ours():
    data = {"rows": [{"new_relation_pct": 100.0, "new_relation_name_pct": 13.0},
                     {"new_relation_pct": 100.0, "new_relation_name_pct": 82.5}]}
    said = T1.paper_column_reading(data, B.PAPER_COLUMN)
    assert said.startswith("The paper's values beside ours are its column WebQSP→GrailQA-Tech, its Table 1 row with "
                           "the most target questions using a relation new to the source (99.3%)")
    assert "ours: 100.0% by KB relation id (13.0–82.5% by relation name)" in said
    other = T1.paper_column_reading(data, "GrailQA→WebQSP")
    assert "its Table 1 row WebQSP→GrailQA-Tech is the one" in other
    assert "not computed yet" in T1.paper_column_reading({}, B.PAPER_COLUMN)
