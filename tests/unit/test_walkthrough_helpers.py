"""What the walkthrough notebooks (20, 40, 41) call instead of defining helpers of their own: one reader of
the recorded transcripts (kgqa_lib.evaluate.transcripts), the cost of a run from them (KB-BINDER, ToG), the
saved benchmark questions a walkthrough could show instead (split votes, judges that said no at depth 1),
the stage displays (kgqa_lib.evaluate.walkthrough), and the baselines' report tables as data."""

from __future__ import annotations

import json

from kgqa_lib.bench import baselines as BL
from kgqa_lib.evaluate import walkthrough as W
from kgqa_lib.evaluate.transcripts import recorded_calls, recorded_seconds
from kgqa_lib.llm.prompting import load_prompt


def _entry(key, model, messages, text="ok", seconds=10.0, **request):
    return {"key": key, "request": {"model": model, "messages": messages, "temperature": 0.0, "sample_index": 0,
                                    **request},
            "response": {"text": text, "seconds": seconds, "prompt_tokens": 1, "completion_tokens": 1}}


def _write(folder, name, entries):
    (folder / name).write_text("\n".join(json.dumps(e) for e in entries) + "\n\n", encoding="utf-8")


def test_one_reader_of_the_transcripts_filters_by_model_prompt_and_text(tmp_path):
    sys_a, sys_b = [{"role": "system", "content": "A"}], [{"role": "system", "content": "B"}]
    _write(tmp_path, "m.jsonl", [
        _entry("k1", "m", sys_a + [{"role": "user", "content": "Question: one"}], seconds=2.0),
        _entry("k2", "m", sys_b + [{"role": "user", "content": "Question: two"}], seconds=3.0),
        _entry("k1", "m", sys_a + [{"role": "user", "content": "Question: one"}], text="again", seconds=5.0),
        _entry("k3", "other", sys_a + [{"role": "user", "content": "Question: one"}])])
    _write(tmp_path, "n.jsonl", [_entry("k4", "m", [{"role": "user", "content": "no system prompt"}])])
    everything = recorded_calls("m", folder=tmp_path)
    assert [c["key"] for c in everything] == ["k1", "k2", "k4"]  # one per key, the last recording wins
    assert everything[0]["response"]["text"] == "again"
    assert [c["key"] for c in recorded_calls("m", system="A", folder=tmp_path)] == ["k1"]
    assert [c["key"] for c in recorded_calls("m", system={"A", "B"}, contains="two", folder=tmp_path)] == ["k2"]
    assert recorded_calls("nobody", folder=tmp_path) == []
    assert recorded_seconds(recorded_calls("m", system={"A", "B"}, folder=tmp_path)) == 8.0


def test_kbbinder_cost_counts_recorded_drafts_and_what_a_change_costs(tmp_path):
    system = load_prompt("kbbinder_draft").system
    mine = [{"role": "system", "content": system}, {"role": "user", "content": "Q"}]
    other = [{"role": "system", "content": system}, {"role": "user", "content": "another"}]
    _write(tmp_path, "m.jsonl", [_entry(f"k{i}", "m", mine, seconds=60.0 if i == 0 else 30.0, temperature=0.7,
                                        sample_index=i) for i in range(3)]
           + [_entry("o", "m", other, seconds=180.0, temperature=0.7)])
    text = BL.kbbinder_cost(mine, 0.7, 4, "m", folder=tmp_path)
    assert text.startswith("This run: 4 LLM calls (one per draft); 3 are recorded and replayed, 1 run the model (≈ 1 min)")
    # this question's time, the first draft apart (it reads the prompt), and what the estimates use: never one
    # number read as both
    assert ("this question's 3 draft(s) took 120 s: the first 60 s, which includes reading the prompt, the other 2 "
            "together 60 s") in text
    assert "use 75 s a draft: the mean over the 4 recorded KB-BINDER drafts, of 2 prompt(s) whose drafts took 120–180 s" in text
    assert "  SAMPLES = 4: 1 live call(s)" in text and "binding and execution only): 0 live call(s)" in text
    assert ", so the model is not loaded" in BL.kbbinder_cost(mine, 0.7, 3, "m", folder=tmp_path)
    assert "0 are recorded" in BL.kbbinder_cost(mine, 0.7, 1, "m", folder=tmp_path)  # one sample is greedy: not these


def test_tog_calls_and_cost_from_the_transcripts(tmp_path):
    assert BL.tog_max_calls(2, 2, "tog", 1) == 12 and BL.tog_max_calls(3, 3, "tog", 1) == 32
    assert BL.tog_max_calls(2, 2, "tog-r", 1) == 6 and BL.tog_max_calls(2, 1, "tog", 2) == 8
    p = {n: load_prompt(f"tog_{n}").system for n in ("relations", "entities", "judge")}
    ask = lambda kind, key, text, s: _entry(key, "m", [{"role": "system", "content": p[kind]},  # noqa: E731
                                                       {"role": "user", "content": "Question: Q?\nmore"}], text, s)
    _write(tmp_path, "m.jsonl", [ask("relations", "a", "{r (Score: 1)}", 100.0), ask("entities", "b", "0.5", 50.0),
                                 ask("judge", "c", "{No}. not yet", 30.0), ask("relations", "d", "x", 20.0),
                                 ask("judge", "e", "{Yes}. Answer: {A}", 40.0)])
    assert [k for k, _, _ in BL.tog_recorded("Q?", "m", tmp_path)] == ["relations", "entities", "judge", "relations", "judge"]
    text = BL.tog_cost("Q?", 1, 2, 2, "tog", "m", folder=tmp_path)
    assert text.startswith("Recorded for this question: 5 ToG calls (relations 2, judge 2, entities 1), 240 s")
    assert "the recorded judge said yes at depth 2" in text and "at most 12 calls" in text
    assert "DEPTH < 2: ≤ 1 live call" in text and "WIDTH = 3: all live, at most 19 calls" in text
    assert "no recorded judgement says yes" in BL.tog_cost("other?", 1, 2, 2, "tog", "m", folder=tmp_path)


def test_saved_questions_a_walkthrough_could_show_instead():
    vote = lambda qid, st, sets, f1=1.0: {"qid": qid, "metrics": {"f1": f1}, "summary": {"vote": {  # noqa: E731
        "statuses": st, "answer_sets": sets, "winning_votes": 3}}}
    recs = [vote("same", {"ok": 6}, 1), vote("split", {"ok": 6}, 2), vote("unbound", {"ok": 5, "unbound_entity": 1}, 1)]
    assert [x["qid"] for x in BL.split_votes(recs)] == ["split", "unbound"]
    tog = lambda qid, depth, stopped, floor=None: {"qid": qid, "metrics": {"hits@1": 1.0}, "summary": {"tog": {  # noqa: E731
        "depth_reached": depth, "stopped": stopped, "answer_from": "judge", "llm_calls": 7,
        **({"min_depth": floor} if floor else {})}}}
    recs = [tog("yes1", 1, "judged_sufficient"), tog("no1", 2, "judged_sufficient"), tog("floor", 2, "judged_sufficient", 2)]
    assert [x["qid"] for x in BL.judged_no_first(recs)] == ["no1"]  # the depth floor's searches were not judged at 1


def test_the_baselines_reports_render_their_tables():
    rec = lambda qid, hits: {"qid": qid, "metrics": {"hits@1": hits, "f1": hits, "exact_match": hits}, "seconds": 5.0,  # noqa: E731
                             "llm": {"calls": 2, "prompt_tokens": 10, "completion_tokens": 1, "recorded_seconds": 4.0,
                                     "seconds": 4.0, "cache_hits": 0},
                             "summary": {"tog": {"stopped": "judged_sufficient", "answer_from": "judge", "depth_reached": 1}}}
    records = lambda cell: [rec("x1", 1.0), rec("x2", 0.0)] if cell == "tog_metaqa_2hop" else []  # noqa: E731
    tables = BL.result_tables_metaqa(records)
    text = BL.report_metaqa(records)
    assert set(tables) == {"metaqa", "floor"}
    assert tables["metaqa"].markdown() in text and tables["floor"].markdown() in text
    row = tables["metaqa"].frame().reset_index().set_index(["hops", "method"]).loc[(2, "tog")]
    assert row["n"] == 2 and row["Hits@1 [95% CI]"].startswith("50.0 [") and row["calls/q"] == "2.00"
    empty = next(line for line in text.splitlines() if line.startswith("| 1 | kbbinder | 0 |"))
    assert empty.endswith("| 93.5 |  |  |  |  |")  # a row without records: empty cost and profile cells, like any row
    assert BL.miniworld_table(lambda cell: []).markdown() in BL.report_miniworld(lambda cell: [])


def test_stage_displays_of_the_walkthroughs():
    from kgqa_lib.methods.fusic.execution import Attempt, Execution

    attempts = [Attempt(0, "SELECT ?x WHERE { }", Execution("SELECT ?x WHERE { }", "", "empty", message="No rows.")),
                Attempt(1, "SELECT ?x WHERE { e:A r:b ?x }", Execution("SELECT ?x WHERE { e:A r:b ?x }", "", "ok", ["B"], 1))]
    text = W.fusic_rounds(attempts)
    assert text.splitlines()[:3] == ["── round 0: empty", "SELECT ?x WHERE { }", "feedback sent → No rows."]
    assert "── round 1: ok, 1 answers: ['B']" in text and text.count("feedback sent") == 1
    assert "gives an empty answer" in W.fusic_rounds(attempts, feedback="paper")

    from kgqa_lib.methods.tog import DepthStep, EntityScoring, Hop, Path, RelationPruning

    hop = Hop("r", "directed by", False, [("t", "M")])
    back = Hop("s", "starred actors (reverse)", True, [("t", "A")])
    step = DepthStep(1, ["T"], [RelationPruning("T", ["directed by", "starred actors"], [("directed by", 0.8)], called=True)],
                     [EntityScoring("T, directed by", ["M"], [0.8])], 2,
                     [Path("t", [hop], 0.8), Path("t", [back], 0.1)], [[("T", "directed by", "M")], [("A", "starred actors", "T")]])
    assert W.tog_relations(step).iloc[0]["kept (score)"] == "directed by (0.80)"
    assert W.tog_entities(step).iloc[0]["candidates (path score)"] == "M (0.80)"
    many = DepthStep(1, ["T"], [RelationPruning("T", [f"relation {i}" for i in range(9)], [], called=False)],
                     [EntityScoring("T, r", [f"Country {i}" for i in range(12)], [0.0] * 12)], 0, [], [])
    cell = W.tog_entities(many).iloc[0]["candidates (path score)"]
    assert cell == "Country 0 (0.00), Country 1 (0.00), Country 2 (0.00), … and 9 more"  # whole names that fit in 80
    assert len(cell) <= 90  # within the notebooks' display.max_colwidth, so pandas cuts nothing
    assert W.tog_relations(many, width=40).iloc[0]["relations (first few)"] == "relation 0; relation 1; … and 7 more"
    assert W.first_and_count(["a", "b"], 5) == "a, b" and W.first_and_count(["a" * 50, "b"], 10) == "a" * 50 + ", … and 1 more"
    assert list(W.tog_beam(step)["path"]) == ["(T | directed by | M)", "(A | starred actors | T)"]
    layers, edges, titles = W.tog_layers([step], ["T"])
    assert layers == [["T"], ["M", "A"]] and edges == [(0, "T", "M"), (0, "T", "A")]
    assert titles == ["topic entity", "depth 1: directed by, starred actors (reverse)"]
    assert W.tog_layers([step], ["T"], look=step)[2][-1].startswith("depth 1 (a look past the stop)")


def test_kbbinder_layers_keep_drafts_that_disagree_apart_and_end_in_the_vote():
    from kgqa_lib.methods.kbbinder import Candidate, Draft, Outcome, vote

    fwd, back = '(JOIN (R directed_by) "O")', '(JOIN directed_by "O")'
    cands = {s: [Candidate(f"{s}#{i}", 2.0 - i, [rel, "O"]) for i, rel in enumerate(("directed_by", "written_by"))]
             for s in (fwd, back)}

    def outcome(i, s):
        if s == fwd:
            return Outcome(Draft(i, s, s), [], cands[s], [{"sexpr": f"{s}#0", "status": "ok", "n": 1}], ["Nolan"], f"{s}#0", "ok")
        return Outcome(Draft(i, s, s), [], cands[s], [{"sexpr": c.sexpr, "status": "empty", "n": 0} for c in cands[s]])

    outcomes = [outcome(0, fwd), outcome(1, back), outcome(2, fwd), outcome(3, back), Outcome(Draft(4, "?", error="no_sexpr"),
                                                                                                  status="no_sexpr")]
    layers, edges, titles = W.kbbinder_layers(outcomes, vote(outcomes))
    assert layers[0] == [f"drafts 0, 2: {fwd}", f"drafts 1, 3: {back}", "draft 4: no_sexpr"]  # each direction its own box
    assert layers[1] == ["d0: directed_by / O → ok: 1 answer", "d0: written_by / O → not run",
                         "d1: directed_by / O → empty", "d1: written_by / O → empty"]
    assert layers[2:] == [["Nolan (2 votes)", "no answer (3 drafts)"], ["Nolan"]]
    assert (1, layers[1][0], "Nolan (2 votes)") in edges and (2, "Nolan (2 votes)", "Nolan") in edges
    assert (1, layers[1][1], "Nolan (2 votes)") not in edges  # not run: no answer set
    assert {(1, layers[1][k], "no answer (3 drafts)") for k in (2, 3)} <= set(edges)
    assert titles[-1] == "the vote's answer" and len(W.kbbinder_layers(outcomes)[0]) == 3  # no vote, no column


def test_graph_drawings_have_a_gold_legend():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from kgqa_lib import viz

    fig, (a, b, c, d) = plt.subplots(1, 4)
    viz.draw_reasoning_path(a, [["Kenya"], ["Nolan (2 votes)"], ["Nolan"]], [(0, "Kenya", "Nolan (2 votes)")], highlight=["nolan"])
    assert [t.get_text() for t in a.get_legend().get_texts()] == ["gold answer (nolan)"]
    boxes = {t.get_text(): t.get_bbox_patch().get_facecolor() for t in a.texts if t.get_bbox_patch()}
    assert boxes["Nolan (2 votes)"] == boxes["Nolan"] != boxes["Kenya"]  # a vote count's box is gold too
    viz.draw_reasoning_path(b, [["Kenya"], ["Nairobi"]], [(0, "Kenya", "Nairobi")], highlight=["Mount Kenya"])
    assert [t.get_text() for t in b.get_legend().get_texts()] == ["gold answer not in this drawing: Mount Kenya"]
    viz.draw_triples(c, [("Kenya", "capital", "Nairobi")], highlight=["Nairobi"])
    assert [t.get_text() for t in c.get_legend().get_texts()] == ["gold answer (Nairobi)"]
    viz.draw_triples(d, [("Kenya", "capital", "Nairobi")])
    assert d.get_legend() is None  # no gold given, none claimed
    assert viz.is_gold("Nolan (3 votes)", ["NOLAN"]) and not viz.is_gold("Nolanville", ["Nolan"])
    plt.close(fig)
