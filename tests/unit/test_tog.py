"""Think-on-Graph: beam pruning on a tiny KG with a scripted LLM, the parsers, and a runner smoke test."""

import pytest

from kgqa_lib.data.datasets import Dataset, Question
from kgqa_lib.errors import InfrastructureError
from kgqa_lib.kg.graph import from_triples
from kgqa_lib.llm.chat import LLM, LLMCache, LLMEndpointError
from kgqa_lib.methods import Context, SettingsError, get_method
from kgqa_lib.methods import tog as T

# Nolan directed three films; Inception starred two actors; DiCaprio was born in Los Angeles.
ROWS = [("Inception", "directed_by", "Christopher Nolan"), ("Interstellar", "directed_by", "Christopher Nolan"),
        ("Tenet", "directed_by", "Christopher Nolan"), ("Inception", "starred_actors", "Leonardo DiCaprio"),
        ("Inception", "starred_actors", "Elliot Page"), ("Inception", "release_year", "2010"),
        ("Inception", "has_genre", "Science Fiction"), ("Inception", "in_language", "English"),
        ("Leonardo DiCaprio", "place_of_birth", "Los Angeles"), ("Christopher Nolan", "place_of_birth", "London")]
Q = Question("t1", "Where was the lead actor of Inception born?", ["Los Angeles"], ["Inception"])


@pytest.fixture(scope="module")
def kg():
    return from_triples(ROWS, name="togtiny")


class Scripted:
    """Replies by prompt kind: ``relations``, ``entities``, ``judge``, ``answer``, ``own`` — each a
    list of texts used in turn (the last one repeats); keeps every prompt by kind."""

    def __init__(self, **replies):
        self.replies = {k: list(v) if isinstance(v, (list, tuple)) else [v] for k, v in replies.items()}
        self.prompts: dict[str, list[str]] = {}

    @staticmethod
    def kind(request) -> str:
        system, last = request.messages[0][1], request.messages[-1][1]
        if "Relations:" in last and "Choose" in last:
            return "relations"
        if "Candidates:" in last:
            return "entities"
        if "decide whether knowledge" in system:
            return "judge"
        if last.startswith("Triples:"):
            return "answer"
        return "own"

    def complete(self, request):
        k = self.kind(request)
        self.prompts.setdefault(k, []).append(request.messages[-1][1])
        texts = self.replies.get(k, ["{Nobody}"])
        text = texts.pop(0) if len(texts) > 1 else texts[0]
        if isinstance(text, Exception):
            raise text
        return {"text": text, "prompt_tokens": 11, "completion_tokens": 3, "finish_reason": "stop"}

    def calls(self, k: str) -> int:
        return len(self.prompts.get(k, []))


def _ctx(backend, tmp_path, graph, **settings):
    return Context(llm=LLM(backend, "scripted", LLMCache(tmp_path / "c.sqlite", transcripts=None)), kg=graph,
                   settings=settings)


def _summary(res):
    return next(s.output for s in res.trace if s.name == "summary")


def _steps(res):
    return next(s.output for s in res.trace if s.name == "beam_search").steps


# ---- relation pruning ------------------------------------------------------------------------
def test_relations_are_pruned_to_width_best_first(kg, tmp_path):
    b = Scripted(relations="{in language (Score: 0.1)}\n{starred actors (Score: 0.6)}\n"
                           "{has genre (Score: 0.05)}\n{directed by (Score: 0.25)}",
                 judge="{Yes}. Found.\nAnswer: {Los Angeles}")
    ctx = _ctx(b, tmp_path, kg, width=2, depth=1)
    step = T.explore_depth(Q.question, [T.Path(kg.lookup("Inception")[0][0])], ctx, 1)
    (rp,) = step.relations
    assert rp.candidates == ["directed by", "has genre", "in language", "release year", "starred actors"]
    assert rp.kept == [("starred actors", 0.6), ("directed by", 0.25)]  # width 2, best first
    assert "Relations: directed by; has genre; in language; release year; starred actors" in b.prompts["relations"][0]
    assert "Choose 2 relations." in b.prompts["relations"][0]


def test_relations_shown_are_bounded(kg, tmp_path):
    b = Scripted(relations="{directed by (Score: 1.0)}")
    ctx = _ctx(b, tmp_path, kg)
    cands = T.candidate_relations(kg, [kg.lookup("Inception")[0][0]], set())
    rp = T.prune_relations(Q.question, "Inception", cands, ctx, width=3, max_relations=2)
    assert rp.candidates == ["directed by", "has genre"] and rp.n_available == 5
    assert "in language" not in b.prompts["relations"][0]


def test_incoming_relations_are_shown_reversed_and_walk_backwards(kg, tmp_path):
    nolan = kg.lookup("Christopher Nolan")[0][0]
    names = [c.name for c in T.candidate_relations(kg, [nolan], set())]
    assert names == ["directed by (reverse)", "place of birth"]
    path = T.Path(nolan, [T.Hop(kg.relation_iri("directed_by"), "directed by (reverse)", True,
                                [(nolan, kg.lookup("Tenet")[0][0])])])
    assert path.triples(kg) == [("Tenet", "directed by", "Christopher Nolan")]  # the KG's own direction


# ---- entity scoring and the beam ----------------------------------------------------------------
def test_entity_scores_times_relation_scores_keep_the_top_width_paths(kg, tmp_path):
    b = Scripted(relations="{starred actors (Score: 0.7)}\n{directed by (Score: 0.3)}",
                 entities="{Leonardo DiCaprio (Score: 0.9)}\n{Elliot Page (Score: 0.1)}")
    ctx = _ctx(b, tmp_path, kg, width=2)
    step = T.explore_depth(Q.question, [T.Path(kg.lookup("Inception")[0][0])], ctx, 1)
    assert b.calls("entities") == 1  # "directed by" reaches one entity: its score, no call
    (es,) = [e for e in step.entities if e.called]
    assert es.candidates == ["Elliot Page", "Leonardo DiCaprio"] or es.candidates == ["Leonardo DiCaprio", "Elliot Page"]
    assert step.n_candidates == 3
    assert [(round(p.score, 2), p.triples(kg)[-1][2]) for p in step.beam] == [(0.63, "Leonardo DiCaprio"),
                                                                             (0.3, "Christopher Nolan")]


def test_entities_scored_zero_are_dropped_and_the_beam_may_empty(kg, tmp_path):
    b = Scripted(relations="{starred actors (Score: 1.0)}",
                 entities="{Leonardo DiCaprio (Score: 0.0)}\n{Elliot Page (Score: 0.0)}")
    step = T.explore_depth(Q.question, [T.Path(kg.lookup("Inception")[0][0])], _ctx(b, tmp_path, kg), 1)
    assert step.n_candidates == 2 and step.beam == []


def test_entity_candidates_per_prompt_are_bounded(kg, tmp_path):
    b = Scripted(relations="{directed by (reverse) (Score: 1.0)}", entities="{Tenet (Score: 1.0)}")
    ctx = _ctx(b, tmp_path, kg, max_entities=1)
    nolan = kg.lookup("Christopher Nolan")[0][0]
    step = T.explore_depth("Which films did Nolan direct?", [T.Path(nolan)], ctx, 1)
    assert b.calls("entities") == 0 and len(step.beam) == 1  # one shown: no scoring call
    assert step.entities[0].n_available == 3 and len(step.entities[0].candidates) == 1


# ---- the judgement, the depth limit and the fallback ---------------------------------------------
def test_the_judge_stops_the_search_and_answers(kg, tmp_path):
    b = Scripted(relations=["{starred actors (Score: 1.0)}", "{place of birth (Score: 1.0)}"],
                 entities="{Leonardo DiCaprio (Score: 1.0)}\n{Elliot Page (Score: 0.0)}",
                 judge=["{No}. Only the actor.", "{Yes}. He was born there.\nAnswer: {Los Angeles}"])
    res = get_method("tog")(Q, _ctx(b, tmp_path, kg))
    assert res.answers == ["Los Angeles"] and res.error is None
    s = _summary(res)
    assert s["stopped"] == "judged_sufficient" and s["depth_reached"] == 2 and s["answer_from"] == "judge"
    # depth 2: DiCaprio has one relation left (the path's own Inception excluded): no pruning call
    assert s["calls"] == {"relations": 1, "entities": 1, "judge": 2} and s["llm_calls"] == 4
    assert b.calls("answer") == b.calls("own") == 0
    assert "(Leonardo DiCaprio | place of birth | Los Angeles)" in b.prompts["judge"][1]
    assert "(Inception | starred actors | Leonardo DiCaprio)" in b.prompts["judge"][1]


def test_yes_without_an_answer_asks_for_the_answer(kg, tmp_path):
    b = Scripted(relations="{release year (Score: 1.0)}", judge="{Yes}. The year is there.",
                 answer="{2010}")
    res = get_method("tog")(Question("t2", "When was Inception released?", ["2010"], ["Inception"]),
                            _ctx(b, tmp_path, kg))
    assert res.answers == ["2010"] and _summary(res)["answer_from"] == "paths" and b.calls("answer") == 1


def test_depth_limit_then_own_knowledge_fallback(kg, tmp_path):
    b = Scripted(relations=["{starred actors (Score: 1.0)}", "{place of birth (Score: 1.0)}"],
                 entities="{Leonardo DiCaprio (Score: 0.6)}\n{Elliot Page (Score: 0.4)}",
                 judge="{No}. Not enough.", own="He was born in LA.\nAnswer: {Los Angeles}")
    res = get_method("tog")(Q, _ctx(b, tmp_path, kg, depth=2))
    s = _summary(res)
    assert s["stopped"] == "max_depth" and s["depth_reached"] == 2 and s["answer_from"] == "own_knowledge"
    assert b.calls("judge") == 2 and b.calls("own") == 1 and b.calls("answer") == 0
    assert res.answers == ["Los Angeles"]


def test_depth_limit_with_fallback_paths_answers_from_the_paths(kg, tmp_path):
    b = Scripted(relations="{starred actors (Score: 1.0)}",
                 entities="{Leonardo DiCaprio (Score: 0.6)}\n{Elliot Page (Score: 0.4)}",
                 judge="{No}. Not enough.", answer="{Los Angeles}")
    res = get_method("tog")(Q, _ctx(b, tmp_path, kg, depth=1, fallback="paths"))
    assert _summary(res)["stopped"] == "max_depth" and _summary(res)["answer_from"] == "paths"
    assert b.calls("own") == 0 and "(Inception | starred actors | Leonardo DiCaprio)" in b.prompts["answer"][0]
    assert res.answers == ["Los Angeles"]


def test_no_topic_entity_answers_from_own_knowledge(kg, tmp_path):
    b = Scripted(own="Answer: {Paris}")
    res = get_method("tog")(Question("t3", "Capital of France?", ["Paris"], []), _ctx(b, tmp_path, kg))
    assert res.answers == ["Paris"] and res.error == "no_topic_entity" and b.calls("relations") == 0


def test_open_questions_get_prose(kg, tmp_path):
    b = Scripted(relations="{directed by (Score: 1.0)}", judge="{Yes}. Enough.",
                 answer="Inception is a film by Christopher Nolan.")
    res = get_method("tog")(Question("t4", "Tell me about Inception.", ["ref"], ["Inception"], kind="open"),
                            _ctx(b, tmp_path, kg))
    assert res.answers == ["Inception is a film by Christopher Nolan."] and res.error is None
    assert b.calls("answer") == 1 and "(Inception | directed by | Christopher Nolan)" in b.prompts["answer"][0]


# ---- the depth floor (min_depth): a deviation from ToG, off by default --------------------------------
# The judge says Yes at once, as the 1.5B judge does on most MetaQA 2-hop questions at depth 1.
_EAGER = dict(relations=["{starred actors (Score: 1.0)}", "{place of birth (Score: 1.0)}"],
              entities="{Leonardo DiCaprio (Score: 1.0)}\n{Elliot Page (Score: 0.0)}",
              judge="{Yes}. The actor is there.\nAnswer: {Leonardo DiCaprio}")
_TOG_STEP_KEYS = {"depth", "frontier", "relations", "entities", "n_candidates", "beam", "beam_triples", "judgement"}
_TOG_SUMMARY_KEYS = {"stopped", "answer_from", "depth_reached", "calls", "llm_calls", "errors"}


def _trace(res):
    return [{k: v for k, v in s.as_dict().items() if k != "seconds"} for s in res.trace]


def test_depth_floor_skips_the_judge_until_min_depth_and_the_search_goes_on(kg, tmp_path):
    b = Scripted(**_EAGER)
    res = get_method("tog")(Q, _ctx(b, tmp_path, kg, min_depth=2))
    steps, s = _steps(res), _summary(res)
    assert len(steps) == 2 and steps[0].judgement is None and steps[1].judgement is not None
    assert b.calls("judge") == 1  # not at depth 1; at depth 2, on the depth-2 paths
    assert "(Leonardo DiCaprio | place of birth | Los Angeles)" in b.prompts["judge"][0]
    assert steps[0].judge_skipped.startswith("depth floor: depth 1 < min_depth 2") and "deviation" in steps[0].judge_skipped
    assert steps[1].judge_skipped is None
    d = steps[0].as_dict()
    assert d["judge_skipped"] == steps[0].judge_skipped and d["judgement"] is None and "judge_skipped" not in steps[1].as_dict()
    assert s["stopped"] == "judged_sufficient" and s["depth_reached"] == 2 and s["answer_from"] == "judge"
    assert s["min_depth"] == 2 and s["judge_skipped"] == 1
    assert s["calls"] == {"relations": 1, "entities": 1, "judge": 1} and s["llm_calls"] == 3  # a skipped judge is no call


def test_without_the_floor_the_same_judge_stops_at_depth_1(kg, tmp_path):
    b = Scripted(**_EAGER)
    res = get_method("tog")(Q, _ctx(b, tmp_path, kg))
    s = _summary(res)
    assert s["stopped"] == "judged_sufficient" and s["depth_reached"] == 1 and b.calls("judge") == 1
    assert res.answers == ["Leonardo DiCaprio"]


def test_the_default_trace_is_tog_as_before_and_min_depth_0_or_1_changes_nothing(kg, tmp_path):
    traces = []
    for i, extra in enumerate(({}, {"min_depth": 0}, {"min_depth": 1})):
        b = Scripted(relations=["{starred actors (Score: 1.0)}", "{place of birth (Score: 1.0)}"],
                     entities="{Leonardo DiCaprio (Score: 1.0)}\n{Elliot Page (Score: 0.0)}",
                     judge=["{No}. Only the actor.", "{Yes}. He was born there.\nAnswer: {Los Angeles}"])
        res = get_method("tog")(Q, _ctx(b, tmp_path / str(i), kg, **extra))
        traces.append(_trace(res))
        if not extra:
            search = next(s for s in traces[0] if s["name"] == "beam_search")["output"]
            assert all(set(st) == _TOG_STEP_KEYS for st in search["steps"])  # no key of the floor's
            assert set(_summary(res)) == _TOG_SUMMARY_KEYS and b.calls("judge") == 2
    assert traces[0] == traces[1]
    assert [st for st in traces[2] if st["name"] != "summary"] == [st for st in traces[0] if st["name"] != "summary"]
    assert {k: v for k, v in traces[2][-1]["output"].items() if k not in ("min_depth", "judge_skipped")} == \
        traces[0][-1]["output"] and traces[2][-1]["output"]["judge_skipped"] == 0


def test_depth_floor_beam_empty_and_depth_limit_stay_meaningful(kg, tmp_path):
    # under a floor of 3 the beam empties at depth 3 (Los Angeles leads nowhere new): ToG's half stop, from the
    # depth-2 paths; the judge was skipped at depths 1 and 2 and never asked
    b = Scripted(relations="{starred actors (Score: 1.0)}",
                 entities="{Leonardo DiCaprio (Score: 1.0)}\n{Elliot Page (Score: 0.5)}",
                 judge="{Yes}. Enough.\nAnswer: {x}", answer="{Los Angeles}")
    res = get_method("tog")(Q, _ctx(b, tmp_path, kg, min_depth=3))
    s, steps = _summary(res), _steps(res)
    assert b.calls("judge") == 0 and s["calls"]["judge"] == 0
    assert s["stopped"] == "beam_empty" and s["depth_reached"] == 3 and s["answer_from"] == "paths"
    assert s["judge_skipped"] == 2 and [st.judge_skipped is not None for st in steps] == [True, True, False]
    assert steps[-1].beam == [] and "(Leonardo DiCaprio | place of birth | Los Angeles)" in b.prompts["answer"][0]
    assert res.answers == ["Los Angeles"]
    # the floor at the depth limit: the judge is asked at the last depth only, and its No ends in ToG's fallback
    b2 = Scripted(relations=["{starred actors (Score: 1.0)}", "{place of birth (Score: 1.0)}"],
                  entities="{Leonardo DiCaprio (Score: 0.6)}\n{Elliot Page (Score: 0.4)}",
                  judge="{No}. Not enough.", own="Answer: {Los Angeles}")
    res2 = get_method("tog")(Q, _ctx(b2, tmp_path / "2", kg, depth=2, min_depth=2))
    s2 = _summary(res2)
    assert b2.calls("judge") == 1 and s2["stopped"] == "max_depth" and s2["depth_reached"] == 2
    assert s2["answer_from"] == "own_knowledge" and s2["judge_skipped"] == 1


def test_min_depth_beyond_the_depth_limit_is_an_error(kg, tmp_path):
    with pytest.raises(ValueError, match="min_depth"):
        get_method("tog")(Q, _ctx(Scripted(), tmp_path, kg, depth=2, min_depth=3))
    assert T.ToGSettings.of({"min_depth": "2"}).min_depth == 2 and T.ToGSettings().min_depth == 0
    assert T.judge_skip(1, 2) and T.judge_skip(2, 2) is None and T.judge_skip(1, 0) is None


# ---- ToG-R --------------------------------------------------------------------------------------
def test_tog_r_keeps_every_entity_of_the_kept_relations_without_scoring(kg, tmp_path):
    b = Scripted(relations=["{directed by (Score: 0.8)}\n{starred actors (Score: 0.2)}",
                            "{place of birth (Score: 1.0)}", "{place of birth (Score: 1.0)}",
                            "{directed by (reverse) (Score: 1.0)}"],
                 judge="{No}. More.", own="Answer: {x}")
    res = get_method("tog")(Q, _ctx(b, tmp_path, kg, variant="tog-r", depth=2))
    steps = _steps(res)
    assert b.calls("entities") == 0 and all(not e for e in (st.entities for st in steps))
    first = steps[0].beam
    assert [p.hops[-1].name for p in first] == ["directed by", "starred actors"]
    assert sorted(kg.label(t) for t in first[1].tails()) == ["Elliot Page", "Leonardo DiCaprio"]  # all kept
    # depth 2: one relation pruning per path, over its tail set (the set's only relation: no call)
    assert sorted(steps[1].frontier) == ["Christopher Nolan", "Elliot Page, Leonardo DiCaprio"] or \
        sorted(steps[1].frontier) == ["Christopher Nolan", "Leonardo DiCaprio, Elliot Page"]
    assert b.calls("relations") == 2 and [len(rp.candidates) for rp in steps[1].relations] == [2, 1]
    assert _summary(res)["calls"]["entities"] == 0


def test_tog_r_entities_per_hop_are_bounded(kg, tmp_path):
    b = Scripted(relations="{directed by (reverse) (Score: 1.0)}")
    nolan = kg.lookup("Christopher Nolan")[0][0]
    s = T.ToGSettings(variant="tog-r", max_entities=2)
    step = T.explore_depth("Which films did Nolan direct?", [T.Path(nolan)], _ctx(b, tmp_path, kg), 1, s)
    assert len(step.beam[0].tails()) == 2
    again = T.explore_depth("Which films did Nolan direct?", [T.Path(nolan)], _ctx(b, tmp_path, kg), 1, s)
    assert again.beam[0].tails() == step.beam[0].tails()  # the sample is the same on every run


# ---- malformed output is counted, never fatal; infrastructure errors propagate --------------------
def test_malformed_outputs_are_counted_and_the_run_goes_on(kg, tmp_path):
    b = Scripted(relations=["I would look at the actors.", "{starred actors}\n{directed by}"],
                 entities="DiCaprio seems likely",
                 judge="Hmm, hard to say.", own="Answer: {Los Angeles}")
    res = get_method("tog")(Q, _ctx(b, tmp_path, kg, depth=1))
    assert res.error == "relations_unmatched" and _summary(res)["errors"] == {"relations_unmatched": 1}
    res2 = get_method("tog")(Question("t5", "Who starred in Inception, again?", [], ["Inception"]),
                             _ctx(b, tmp_path / "2", kg, depth=1))
    errs = _summary(res2)["errors"]
    assert errs == {"relations_no_scores": 1, "entity_scores_malformed": 1, "judge_unparsed": 1}
    step = _steps(res2)[0]
    assert step.relations[0].kept == [("starred actors", 0.5), ("directed by", 0.5)]
    assert [round(x, 2) for x in step.entities[0].scores] == [0.25, 0.25]  # equal scores × 0.5
    assert res2.answers == ["Los Angeles"]  # judged "no" → depth limit → own knowledge


def test_infrastructure_errors_propagate(kg, tmp_path):
    b = Scripted(relations=LLMEndpointError("endpoint http://x down"))
    with pytest.raises(InfrastructureError):
        get_method("tog")(Q, _ctx(b, tmp_path, kg))


def test_settings_are_typed():
    with pytest.raises(SettingsError):
        Context(llm=None, settings={"variant": "tog-x"})
    assert T.ToGSettings.of({"width": "2", "fallback": "paths"}) == T.ToGSettings(width=2, fallback="paths")


# ---- parsers ------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, want, err", [
    ("{a b (Score: 0.4))}: because\n2. {c (Score: 0.6)}", [("c", 0.6), ("a b", 0.4)], None),
    ("1. a b (score = .5)\n- the c relation (Score: 0.5)", [("a b", 0.5), ("c", 0.5)], None),
    ("{zzz (Score: 0.9)}", [], "unmatched"),
    ("", [], "empty"),
    (None, [], "empty"),
    ("{c}", [("c", 1.0)], "no_scores"),
])
def test_parse_scored(text, want, err):
    assert T.parse_scored(text, ["a b", "c", "c (reverse)"]) == (want, err)


def test_parse_scored_tells_a_relation_from_its_reverse():
    assert T.parse_scored("{c (reverse) (Score: 0.7)}\n{c (Score: 0.3)}", ["c", "c (reverse)"])[0] == \
        [("c (reverse)", 0.7), ("c", 0.3)]


def test_parse_entity_scores():
    assert T.parse_entity_scores("0.0, 1.0, 0.0", ["x", "y", "z"]) == ([0.0, 1.0, 0.0], None)
    assert T.parse_entity_scores("{y (Score: 0.8)}", ["x", "y"]) == ([0.0, 0.8], None)
    assert T.parse_entity_scores("no idea", ["x", "y"]) == ([0.5, 0.5], "entity_scores_malformed")


@pytest.mark.parametrize("text, sufficient, answers, err", [
    ("{Yes}. Because.\nAnswer: {Los Angeles}, {LA}", True, ["Los Angeles", "LA"], None),
    ("{No}. Not yet. Answer: {x}", False, [], None),
    ("yes - the triples say so {Paris}", True, ["Paris"], None),
    ("I am not sure", False, [], "judge_unparsed"),
    ("", False, [], "judge_empty"),
    ("{Yes}.", True, [], None),
])
def test_parse_judgement(text, sufficient, answers, err):
    j = T.parse_judgement(text)
    assert (j.sufficient, j.answers, j.error) == (sufficient, answers, err)


# ---- runner smoke test on two mini-world questions ----------------------------------------------------
def test_runner_smoke_on_two_miniworld_questions(tmp_path):
    from kgqa_lib.data.datasets import load_dataset
    from kgqa_lib.evaluate.runner import run
    from kgqa_lib.kg.sources import load_named

    multi = load_dataset("miniworld:multihop").questions[0]  # In which country was Billy Zane born?
    opened = load_dataset("miniworld:open").questions[0]
    b = Scripted(relations=["{place of birth (Score: 0.9)}\n{citizenship (Score: 0.1)}",  # from Billy Zane
                            "{country (Score: 1.0)}", "{capital (Score: 1.0)}",  # from Chicago, United States
                            "{instance of (Score: 1.0)}"],  # from each "Amazon" (the river, the company)
                 judge=["{No}. Only the city.", "{Yes}. Chicago is in the United States.\nAnswer: {United States}",
                        "{Yes}. Enough."],
                 answer="The Amazon is a long river in South America.")
    ctx = _ctx(b, tmp_path, load_named("miniworld"), kg="miniworld")
    recs = run("tog", Dataset("mw2", [multi, opened]), ctx, tmp_path / "run.jsonl", progress=False)
    assert [r["qid"] for r in recs] == [multi.qid, opened.qid]
    assert recs[0]["prediction"] == ["United States"] and recs[0]["metrics"]["hits@1"] == 1.0
    assert recs[0]["llm"]["calls"] >= 3 and recs[0]["error"] is None
    assert recs[1]["prediction"] == ["The Amazon is a long river in South America."]
    assert all(any(s["name"] == "summary" for s in r["trace"]) for r in recs)


def test_kgqa_run_gives_tog_its_kg():
    from kgqa_lib.cli import settings_help
    from kgqa_lib.methods import method_info

    assert "kg" in method_info("tog").needs  # the run builder gives it the dataset's KG (or --kg)
    text = settings_help("tog")
    assert "variant" in text and "fallback" in text and "max_relations" in text
    assert "min_depth" in text and "deviation from ToG" in text
