"""The peer-baseline tables' record stripping and ToG profile (kgqa_lib.bench.baselines)."""

from kgqa_lib.bench import baselines, core


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


def test_depth_floor_cells_run_tog_on_the_same_questions_with_min_depth_from_the_command():
    from kgqa_lib.bench import core
    from kgqa_lib.cli import build_parser
    from kgqa_lib.methods import coerce_settings

    cells = {c.name: c for c in core.get_table("baselines_metaqa").cells}
    for h in baselines.FLOOR_HOPS:
        tog, floor = cells[f"tog_metaqa_{h}hop"], cells[f"tog_floor_metaqa_{h}hop"]
        assert (floor.method, floor.dataset, floor.planned) == (tog.method, tog.dataset, tog.planned) == \
            ("tog", f"keqing:metaqa:{h}hop", 100)
        assert floor.args[:len(tog.args)] == tog.args and floor.args[len(tog.args):] == ("--set", f"min_depth={h}")
        args = build_parser().parse_args(["run", *floor.argv("x.jsonl")])
        assert coerce_settings(dict(args.set), "tog") == {"min_depth": h}
        assert not build_parser().parse_args(["run", *tog.argv("x.jsonl")]).set  # ToG as published: no setting


def _scored(qid, hit, stopped="judged_sufficient", depth=2, floor=None):
    summary = {"tog": {"stopped": stopped, "answer_from": "judge", "depth_reached": depth, "calls": {"judge": 1},
                       "llm_calls": 3, "errors": {}, **({"min_depth": floor, "judge_skipped": floor - 1} if floor else {})}}
    return {"qid": qid, "metrics": {"hits@1": hit, "f1": hit, "exact_match": hit}, "summary": summary,
            "llm": {"calls": 3, "prompt_tokens": 100, "completion_tokens": 10, "recorded_seconds": 9.0, "seconds": 9.0,
                    "cache_hits": 0}, "seconds": 10.0}


def test_the_floor_section_pairs_tog_both_ways_and_reads_not_run_yet_without_records():
    pub = [_scored(f"q{i}", float(i < 2), depth=1) for i in range(10)]
    keq = [_scored(f"q{i}", 1.0) for i in range(10)]
    records = lambda floor: (lambda cell: pub if cell.startswith("tog_metaqa") else  # noqa: E731
                             floor if cell.startswith("tog_floor") else [])
    keqing = lambda cell: keq  # noqa: E731
    text = "\n".join(baselines.floor_section(records([]), keqing))
    assert "## ToG with a depth floor (a deviation from ToG)" in text and "asked at every depth" in text
    rows = [line for line in text.splitlines() if line.startswith("| 2 ") or line.startswith("| 3 ")]
    assert len(rows) == 4
    assert all("not run yet" in r for r in rows if "tog_floor_metaqa" in r)
    assert all("| 10 | 20.0 [" in r for r in rows if "`tog_metaqa" in r)
    floor = [_scored(f"q{i}", float(i < 7), depth=3, floor=2) for i in range(5)]  # 5 of the 10 questions so far
    text = "\n".join(baselines.floor_section(records(floor), keqing))
    row = next(r for r in text.splitlines() if "`tog_floor_metaqa_2hop`" in r)
    running = "| 5 (floor cell partial 5/100: the same questions both ways) |"  # a floor cell still running says so
    assert f"{running} 100.0 [" in row and "+60.0 [" in row and "(n=5)" in row  # paired on the 5 shared questions
    assert "judge skipped (depth floor 2): at 5 depths" in row
    published = next(r for r in text.splitlines() if "`tog_metaqa_2hop`" in r)
    assert f"{running} 40.0 [" in published  # the published row on the floor's questions
    assert "- 2-hop: the floor cell is still running (partial 5/100); no conclusion yet." in text  # no words yet
    pub = [_scored(f"q{i}", float(i < 10), depth=1) for i in range(100)]
    keq = [_scored(f"q{i}", 1.0) for i in range(100)]
    floor = [_scored(f"q{i}", float(i < 50), depth=3, floor=2) for i in range(100)]  # complete: +40 for ToG
    words = baselines.floor_conclusion(records(floor), keqing)
    assert words[0].startswith("- 2-hop (n=100): the floor moves ToG's Hits@1 +40.0 [")
    assert "as published and +50.0 [" in words[0] and "accounts for part of ToG's deficit" in words[0]


def test_strip_keeps_the_depth_floor_counts_only_when_set():
    r = _tog_record("q1", "judged_sufficient", "judge", [], depth=2)
    assert set(baselines.strip(r)["summary"]["tog"]) == {"stopped", "answer_from", "depth_reached", "calls",
                                                        "llm_calls", "errors"}
    r["trace"][-1]["output"] |= {"min_depth": 2, "judge_skipped": 1}
    tog = baselines.strip(r)["summary"]["tog"]
    assert (tog["min_depth"], tog["judge_skipped"]) == (2, 1)


def _search_record():
    step = {"depth": 1, "frontier": ["Jason Flemyng"], "n_candidates": 4,
            "relations": [{"called": False, "candidates": ["starred actors (reverse)"], "entity": "Jason Flemyng",
                           "error": None, "kept": [["starred actors (reverse)", 1.0]], "n_available": 1, "text": "raw"}],
            "entities": [{"called": True, "candidates": ["Bruiser", "Shifty"], "error": None, "n_available": 2,
                          "relation": "Jason Flemyng, starred actors (reverse)", "scores": [0.0, 0.7],
                          "text": "{Bruiser (Score: 0.0)} secret question text"}],
            "beam": [{"x": 1}], "beam_triples": [[["Shifty", "starred actors", "Jason Flemyng"]]],
            "judgement": {"sufficient": True, "answers": ["Shifty"], "text": "secret question text", "error": None}}
    draft = {"draft": {"index": 0, "text": "secret question text (join ?x m.actor)", "sexpr": "(JOIN r e)", "error": None,
                       "message": "", "slots": [["entity", "e"]]},
             "status": "ok", "bindings": [{"slot": "e"}], "n_candidates": 2,
             "candidates": [{"sexpr": "(JOIN r1 e1)", "score": 0.9, "choice": 0}, {"sexpr": "(JOIN r2 e1)"}],
             "executions": [{"sexpr": "(JOIN r1 e1)", "status": "ok", "n": 3}], "winner": "(JOIN r1 e1)", "answers": ["a"]}
    return {"qid": "q1", "question": "secret question text", "gold": ["Shifty"], "metrics": {"hits@1": 1.0},
            "prediction": ["Shifty"],
            "trace": [{"name": "link_topic_entities", "output": {"names": ["Jason Flemyng"]}, "seconds": 0.1},
                      {"name": "beam_search", "output": {"steps": [step], "stopped": "judged_sufficient"}, "seconds": 1.0},
                      {"name": "answer_from_own_knowledge", "output": {"prompt": "secret question text"}, "seconds": 0.0},
                      {"name": "ground_0", "output": draft, "seconds": 0.2}]}


def test_strip_keeps_what_tog_and_kbbinder_produced_without_prompts_question_or_gold():
    """A stripped record keeps ToG's search depth by depth and KB-BINDER's drafts (what the method produced), so
    `kgqa bench show` can show a question's path; never the prompt, the question text or the gold answers."""
    from kgqa_lib.bench.inspect import method_outputs

    s = baselines.strip(_search_record())
    assert "secret question text" not in repr(s) and "gold" not in s
    [step] = s["tog_search"]
    assert step["relations"] == [{"entity": "Jason Flemyng", "kept": [["starred actors (reverse)", 1.0]], "error": None}]
    assert step["entities"][0]["candidates"] == ["Bruiser", "Shifty"] and step["entities"][0]["scores"] == [0.0, 0.7]
    assert step["beam"] == [[["Shifty", "starred actors", "Jason Flemyng"]]]
    assert step["judgement"] == {"sufficient": True, "error": None}
    [draft] = s["kbbinder_drafts"]
    assert draft["wrote"] == "(JOIN r e)" and draft["answered_by"] == "(JOIN r1 e1)" and draft["status"] == "ok"
    assert draft["candidates"] == ["(JOIN r1 e1)", "(JOIN r2 e1)"] and draft["executions"][0] == {
        "form": "(JOIN r1 e1)", "status": "ok", "n": 3}
    from test_saved_records_hold_no_gold import gold_fields  # (tests/unit is on the path under pytest)
    assert not gold_fields(s)  # nothing a gold scan of the saved records would flag
    shown = dict(method_outputs(s))
    assert shown["ToG depth 1"] == ("relations kept: Jason Flemyng: starred actors (reverse) (1); entities scored: "
                                    "Jason Flemyng, starred actors (reverse): Bruiser (0), Shifty (0.7); beam: Shifty "
                                    "—starred actors→ Jason Flemyng; judge: sufficient")
    assert shown["draft 0"].startswith("wrote (JOIN r e); ok; answered by (JOIN r1 e1); 2 candidate forms")
    echo = _search_record()  # a draft that repeats the question is not kept; a long one is cut
    echo["trace"][3]["output"]["draft"]["sexpr"] = "(JOIN secret question text)"
    echo["trace"][3]["output"]["winner"] = "x" * 1000
    [d] = baselines.strip(echo)["kbbinder_drafts"]
    assert d["wrote"] is None and len(d["answered_by"]) == core.MAX_KEPT_CHARS
    many = _search_record()
    many["trace"][1]["output"]["steps"][0]["beam_triples"] *= 30
    assert len(baselines.strip(many)["tog_search"][0]["beam"]) == baselines.MAX_KEPT_ITEMS
