"""The peer-baseline tables' record stripping and ToG profile (kgqa_lib.bench.baselines)."""

from kgqa_lib.bench import baselines


def _tog_record(qid, stopped, answer_from, scorings, depth=1):
    steps = [{"depth": 1, "entities": [{"called": called, "scores": scores} for called, scores in scorings]}]
    return {"qid": qid, "question": "secret question text", "metrics": {"hits@1": 0.0}, "prediction": ["x"],
            "trace": [{"name": "beam_search", "output": {"steps": steps, "stopped": stopped}, "seconds": 1.0},
                      {"name": "summary", "output": {"stopped": stopped, "answer_from": answer_from, "depth_reached": depth,
                                                     "calls": {"entities": 1}, "llm_calls": 2,
                                                     "errors": {"judge_unparsed": 1}}, "seconds": 0.0}]}


def test_strip_keeps_tog_counts_and_drops_text():
    r = _tog_record("q1", "beam_empty", "own_knowledge", [(True, [0.0, 0.0]), (True, [0.0, 0.4]), (False, [1.0]),
                                                          (True, [0.25, 0.25])])
    s = baselines.strip(r)
    assert "question" not in s and s["prediction"] == ["x"] and s["stripped"] and "gold" not in s
    assert s["summary"]["tog_scorings"] == {"called": 3, "all_zero": 1, "all_equal": 1}
    assert s["summary"]["tog"]["stopped"] == "beam_empty"
    assert all(set(t) == {"name", "seconds"} for t in s["trace"])


def test_tog_profile_counts_sources_stops_and_zero_scorings_on_stripped_and_whole_records():
    whole = [_tog_record("q1", "beam_empty", "own_knowledge", [(True, [0.0, 0.0, 0.0])]),
             _tog_record("q2", "judged_sufficient", "judge", [(True, [0.2, 0.8]), (True, [0.0, 0.0]), (True, [0.3, 0.3])]),
             _tog_record("q3", "beam_empty", "own_knowledge", []),
             _tog_record("q4", "judged_sufficient", "judge", [], depth=2),
             _tog_record("q5", "judged_sufficient", "judge", [])]
    stripped = [baselines.strip(r) for r in whole]
    for recs in (whole, stripped):
        prof = baselines._tog_profile(recs)
        assert prof == ("judge 3, own_knowledge 2; stopped: judged_sufficient 3 (at depth 1: 2, 2: 1), beam_empty 2; "
                        "entity scorings all 0: 2, all equal (> 0): 1, of 4; malformed: judge_unparsed 5"), prof


def test_miniworld_rows_pair_tog_with_the_committed_pgakv_and_qsm_runs_on_its_questions():
    from kgqa_lib.evaluate import pgakv_analysis as pa

    test = sorted(pa.split_qids("simple")[1])[:10]
    llm = {"calls": 3, "prompt_tokens": 900, "completion_tokens": 100, "recorded_seconds": 30.0, "seconds": 30.0,
           "cache_hits": 0}
    tog = [{"qid": q, "metrics": {"hits@1": 1.0}, "prediction": ["x"], "trace": [], "llm": llm, "seconds": 40.0}
           for q in test]
    rows = {r["set"]: r for r in baselines.miniworld_rows(lambda cell: tog if cell == "tog_simple" else [])}
    assert list(rows) == list(pa.SETS)
    simple = rows["simple"]
    assert simple["n"] == 10 and simple["ToG"].startswith("100.0 ") and simple["metric"] == "Hits@1"
    assert (simple["calls/q"], simple["tokens/q"], simple["s/q"]) == ("3.00", "1000", "40.0")
    qsm = pa.restrict(pa.committed_records("simple", "qsm"), set(test))
    assert len(qsm) == 10  # the committed QSM run holds every test question
    gain = 100 * (1 - sum(r["metrics"]["hits@1"] for r in qsm) / 10)
    assert simple["ToG − QSM"].startswith(f"{gain:+.1f} "), (simple["ToG − QSM"], gain)
    assert sum("chosen on dev" in k for k in simple) == 1  # the PG&AKV setting chosen on dev is named once
    multihop = rows["multihop"]
    assert multihop["ToG"] == "not run yet" and multihop["n"] == 0 and multihop["ToG − QSM"] == "—"
    assert rows["open"]["metric"] == "ROUGE-L"
    report = baselines.report_miniworld(lambda cell: tog if cell == "tog_simple" else [])
    assert "| simple | Hits@1 | 100.0 " in report and report.count("\n| ") == 4  # the header and 3 sets


def test_kbbinder_profile_sums_draft_outcomes_on_stripped_and_whole_records():
    whole = [{"qid": "q1", "trace": [{"name": "vote", "output": {"statuses": {"ok": 5, "parse_error": 1},
                                                                  "winner": 0, "tally": [["A", 5]]}}]},
             {"qid": "q2", "trace": [{"name": "vote", "output": {"statuses": {"unbound_relation": 2, "no_answer": 4},
                                                                  "winner": None, "tally": []}}]}]
    for recs in (whole, [baselines.strip(r) for r in whole]):
        assert baselines.kbbinder_profile(recs) == ("drafts 12: ok 5, no_answer 4, unbound_relation 2, parse_error 1 "
                                                    "(malformed 1); no draft answered: 1 of 2 questions")
    assert baselines.kbbinder_profile([{"qid": "q", "trace": []}]) == ""
