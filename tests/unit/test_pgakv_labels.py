"""What notebooks 11–14 print about PG&AKV, in words a reader can check: one label for the threshold chosen on dev
among pre-screened candidates, Table 3's threshold caveat and its asymmetry, whether CVT nodes explain the
Freebase-like losses (counted from the gold paths), Think-on-Graph's stops in plain words, the Cypher table beside
the paper's rate, the verification-error share beside QALD-10 only, the cosine bands by value, and the dev margin
read from its paired CI."""

from __future__ import annotations

import json

import pytest

from kgqa_lib.bench import pgakv as P
from kgqa_lib.data.datasets import Question
from kgqa_lib.evaluate import pgakv_analysis as A


def _q(form: dict) -> Question:
    return Question("q", "?", ["x"], [], gold_query={"form": json.dumps(form)})


# ---------------------------------------------------------------- one label
def test_the_threshold_chosen_on_pre_screened_candidates_has_one_label_everywhere():
    label = A.NOT_HELD_OUT
    assert label.endswith(A.NOT_HELD_OUT_TAG) and P.KNOWN_TEST == label
    assert P.run_label("pgakv_thr05", "pgakv_thr05") == f"PG&AKV (threshold 0.5, {label})"
    assert P.run_label("pgakv", "pgakv_thr05") == A.ROWS["pgakv"]  # the clean row keeps its name
    on = P.OnTest()
    assert on.chosen == "pgakv_thr05" and on.name("pgakv_thr05") == P.run_label("pgakv_thr05", "pgakv_thr05")
    texts = [P.summary_main_results(), P.summary_ablations(), P.summary_errors(), P.summary_kg_sources(),
             P.headline_kg_sources()[0], *(e.claim for e in P.TEST_TABLE.effects)]
    assert all("chosen with knowledge" not in t and "(chosen on dev)" not in t for t in texts)
    assert all(label in t for t in texts[:4])
    bars = [b["label"] for b in P.table2_panels()[0]["bars"]]
    assert f"PG&AKV 0.5 ({A.NOT_HELD_OUT_TAG})" in bars and not any(b.endswith("(dev)") for b in bars)
    rows = [r[0] for r in P.test_tables()["table2"].rows]
    assert not any("*" in r or "kg_context" in r for r in rows)  # no Markdown emphasis or settings jargon in a label


def test_the_ablation_headline_leads_with_the_clean_row():
    metric, value = P.headline_ablations()
    assert "threshold 0.7" in metric and A.CLEAN_ROW in metric and "0.5" not in metric
    table4 = P.test_tables()["table4"]
    assert table4.columns[6] == "Verification 0.7 − Pseudo-Graph"  # the paper's threshold before the tuned one
    summary = P.summary_ablations()
    assert summary.index("threshold 0.7") < summary.index(A.NOT_HELD_OUT)


# ---------------------------------------------------------------- Table 3
def test_table_3_prints_how_its_threshold_was_set_and_which_way_that_leans():
    caveat = P.schema_caveat()
    assert f"threshold {P.SCHEMA_THRESHOLD} ({A.NOT_HELD_OUT})" in caveat and P.SCHEMA_ASYMMETRY in caveat
    assert "Wikidata-like records only" in P.SCHEMA_ASYMMETRY
    report = P.test_report_text()
    assert caveat in report[report.index("## The paper's Table 3"):]  # the report says it in the same words
    second = P.summary_kg_sources().splitlines()[1]
    assert second.startswith("Freebase-like minus Wikidata-like") and P.SCHEMA_ASYMMETRY in second


def test_a_cvt_on_the_gold_path_is_read_from_the_gold_logical_form():
    assert A.cvt_on_gold_path(_q({"type": "path", "path": ["starred_actors"], "topic": "t"}))
    assert A.cvt_on_gold_path(_q({"type": "path", "path": ["^starred_actors"], "topic": "t"}))
    assert A.cvt_on_gold_path(_q({"type": "value_at", "attr": "population", "year": 2000, "topic": "t"}))
    assert not A.cvt_on_gold_path(_q({"type": "path", "path": ["capital"], "topic": "t"}))
    assert not A.cvt_on_gold_path(Question("q", "?", ["x"], []))  # no gold form: nothing to read


def test_schema_losses_count_the_questions_lost_and_those_with_a_cvt_on_their_path():
    from kgqa_lib.data.datasets import load_dataset

    qs = load_dataset("miniworld:simple:test")
    cvt = [q.qid for q in qs if A.cvt_on_gold_path(q)]
    plain = [q.qid for q in qs if not A.cvt_on_gold_path(q)]
    assert cvt and plain
    rec = lambda qid, hit: {"qid": qid, "metrics": {"hits@1": hit}}  # noqa: E731
    lost = {cvt[0], plain[0], plain[1]}
    wd = [rec(q.qid, 1.0) for q in qs]
    fb = [rec(q.qid, 0.0 if q.qid in lost else 1.0) for q in qs]
    fb[[r["qid"] for r in fb].index(cvt[1])]["metrics"]["hits@1"] = 1.0
    wd[[r["qid"] for r in wd].index(cvt[1])]["metrics"]["hits@1"] = 0.0  # one gained over the Freebase-like schema
    c = A.schema_losses("simple", wd, fb)
    assert c == {"questions": len(qs), "via CVT": len(cvt), "lost": 3, "lost via CVT": 1, "gained": 1,
                 "gained via CVT": 1}


@pytest.mark.parametrize("lost, cvt, words", [(0, 0, "no question is lost"), (3, 3, "CVT nodes can explain each of them"),
                                              (3, 0, "CVT nodes explain none of them"),
                                              (3, 1, "CVT nodes can explain at most 1 of them; the other 2 lose")])
def test_the_cvt_sentence_says_what_the_counts_show(monkeypatch, lost, cvt, words):
    monkeypatch.setattr(A, "schema_losses", lambda *a: {"questions": 113, "via CVT": 20, "lost": lost, "lost via CVT": cvt,
                                                        "gained": 2, "gained via CVT": 0})
    text = P.schema_losses_text()
    assert words in text and f"{cvt} of those {lost}" in text and "(20 of all 113 do)" in text
    assert P.schema_losses_text(lambda s, run: []).endswith("not run yet.")


def test_the_committed_cvt_count_is_the_records():
    on = P.OnTest()
    wd, fb = (on("simple", A.SCHEMA_RUNS[k]) for k in ("wikidata", "freebase"))
    c = A.schema_losses("simple", wd, fb)
    right = lambda recs: {r["qid"] for r in recs if r["metrics"]["hits@1"] == 1.0}  # noqa: E731
    assert c["lost"] == len(right(wd) - right(fb)) and 0 < c["lost via CVT"] < c["lost"]
    assert f"{c['lost via CVT']} of those {c['lost']}" in P.summary_kg_sources()


# ---------------------------------------------------------------- plain words, units, the paper's columns
def test_think_on_graph_is_described_in_plain_words():
    summary = lambda stopped, source, depth: {"tog": {"stopped": stopped, "answer_from": source,  # noqa: E731
                                                      "depth_reached": depth}, "tog_scorings": {"called": 2, "all_zero": 1,
                                                                                                "all_equal": 1}}
    recs = [{"qid": f"q{i}", "summary": summary(*s)} for i, s in enumerate(
        [("judged_sufficient", "judge", 1), ("judged_sufficient", "judge", 2), ("max_depth", "own_knowledge", 3),
         ("beam_empty", "paths", 2)])]
    text = P.tog_profile(recs)
    assert text.startswith("4 questions: answered 2 by the judge as it stopped the search")
    assert "the judge found the paths sufficient (2: 1 at depth 1, 1 at depth 2)" in text
    assert "the depth limit was reached (1)" in text and "no candidate entity was left (1)" in text
    assert "of 8 entity-scoring calls, 4 rated every candidate 0 and 4 rated all candidates alike" in text
    assert not any(name in text for name in ("judged_sufficient", "own_knowledge", "beam_empty", "max_depth"))
    rows = P.tog_rows()
    assert rows and all(P.TOG_HOW in r and "judged_sufficient" not in r[P.TOG_HOW] for r in rows)


def test_the_cypher_table_prints_counts_as_integers_and_the_papers_rate_where_it_measured_it():
    frame = P.cypher_table().frame()
    assert frame.loc["outputs"].tolist() == [str(n) for n in P.TEST_SIZES.values()]
    paper = frame.loc[next(i for i in frame.index if i.startswith("paper: Cypher error rate"))]
    assert paper["simple"] == paper["multihop"] == str(A.PAPER_CYPHER_ERROR_RATE) and paper["open"] == ""
    assert "statements not parsed as written (%)" in frame.index
    errors = P.summary_errors()
    assert "do not parse as written" in errors and "counts Cypher written in error" in errors


def test_the_papers_verification_share_sits_beside_its_qald_10_column_only():
    rows = P.verification_table().rows
    assert {r[0] for r in rows} == {"simple", "multihop"}
    assert all((r[-1] != "") == (r[0] == "multihop") for r in rows)


def test_cosine_bands_read_by_value_and_the_legend_defines_the_columns():
    cells = [r[5] for r in P.test_tables()["qsm_wins"].rows]
    assert cells and all([c.split(",")[i].strip().split(" ")[0] for i in range(4)] == ["<", "0.5–0.6", "0.6–0.7", "≥"]
                         for c in cells)
    legend = P.qsm_wins_note()
    assert "`both`, every such subject was outside the k and under 0.7" in legend and "`threshold's share`:" in legend
    assert "is a Sentence-BERT model" in legend and "is not the paper's" not in legend


def test_the_variants_and_verifier_tables_keep_one_unit():
    variants = P.variants_table().rows
    assert all("." not in str(r[5]) for r in variants if r[5])  # percent of the questions, as whole numbers
    note = P.variants_note()
    first = next(r for r in variants if "→" in str(r[5]))
    a, b = first[5].split(" → ")
    assert f"{a} of every 100 in the full method's G_g, {b} in the variant's" in note
    verifier = P.verifier_table().rows
    assert all(" %)" in r[3] and " of " in r[4] for r in verifier)


def test_the_dev_choice_says_its_strength_from_the_paired_ci():
    text = P.choice_text()
    gain = A.choice_gain(A.committed_records, A.choose_pruning(proxy=False))
    assert gain is not None and A.side(gain) == 0 and "does not exclude 0: weak evidence" in text
    assert P._strength((0.05, 0.01, 0.09, 74)).endswith("lies on one side of 0: dev tells the two settings apart).")
