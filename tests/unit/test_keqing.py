"""Keqing: decomposition parsing, the template bank, chain execution, the pipeline with a scripted LLM."""

from __future__ import annotations

import json
import re

import pytest

from kgqa_lib.data.datasets import Question
from kgqa_lib.evaluate.metrics import score
from kgqa_lib.methods import keqing as K


def _q(raw="what films did [Steven Spielberg] direct", path="^directed_by", topic="Steven Spielberg"):
    return Question("x", raw.replace("[", "").replace("]", ""), ["Jaws"], [topic], gold_query={"path": path},
                    metadata={"raw": raw})


# ---- parsing the decomposition -----------------------------------------------------------------
def test_parse_well_formed():
    text = ('[{"question": "which films did [mask] direct", "id": 0, "dep": [-1], "seed_entities": ["Steven Spielberg"]},'
            ' {"question": "what genre is [mask]", "id": 1, "dep": [0], "seed_entities": ["<ANSWER>-0"]}]')
    d = K.parse_decomposition(text)
    assert d.error is None
    assert [(s.id, s.dep, s.seed_entities) for s in d.subquestions] == [(0, [], ["Steven Spielberg"]), (1, [0], ["<ANSWER>-0"])]


def test_parse_repairs_and_counts():
    # prose around it, single quotes, trailing comma, a scalar dep
    text = "Sure! Here it is:\n[{'question': 'who directed [mask]', 'id': 0, 'dep': -1, 'seed_entities': ['Jaws'],},]\nDone."
    d = K.parse_decomposition(text)
    assert d.error == "bad_json_repaired" and d.subquestions[0].question == "who directed [mask]"
    assert d.subquestions[0].dep == [] and d.subquestions[0].seed_entities == ["Jaws"]
    # objects without the enclosing list
    d = K.parse_decomposition('{"question": "who wrote [mask]", "id": 0, "dep": [-1], "seed_entities": ["Heat"]}')
    assert d.error == "bad_json_repaired" and len(d.subquestions) == 1
    # an item without a question is dropped and counted
    d = K.parse_decomposition('[{"id": 0}, {"question": "who wrote [mask]", "id": 1, "dep": [-1], "seed_entities": ["Heat"]}]')
    assert d.error == "bad_item" and [s.id for s in d.subquestions] == [1]
    # duplicate ids are renumbered
    d = K.parse_decomposition('[{"question": "a [mask]", "id": 0, "dep": [-1]}, {"question": "b [mask]", "id": 0, "dep": [0]}]')
    assert d.error == "bad_ids" and [s.id for s in d.subquestions] == [0, 1] and d.subquestions[1].dep == [0]


@pytest.mark.parametrize("garbage", ["", None, "I cannot help with that.", "[1, 2, 3]", "{{{"])
def test_parse_garbage_falls_back_to_the_question(garbage):
    q = _q()
    d = K.parse_decomposition(garbage, q)
    assert d.error == "fallback"
    assert d.subquestions[0].seed_entities == ["Steven Spielberg"] and "[mask]" in d.subquestions[0].question


def test_parse_chain():
    assert K.parse_chain("^directed_by, in_language", ["directed_by", "in_language"]) == (["^directed_by", "in_language"], None)
    assert K.parse_chain("The chain is ^ directed_by then has_genre.", ["directed_by", "has_genre"])[0] == ["^directed_by", "has_genre"]
    assert K.parse_chain("no idea", ["directed_by"]) == ([], "no_chain")


def test_mask_and_masked_text():
    assert K.mask_question("what movies did [Steven Spielberg] direct?") == "what movies did [mask] direct"
    sub = K.SubQuestion(0, "Which films did Steven Spielberg direct?", [], ["Steven Spielberg"])
    assert K.masked_text(sub) == "which films did [mask] direct"
    sub = K.SubQuestion(1, "what genre is <ANSWER>-0", [0], ["<ANSWER>-0"])
    assert K.masked_text(sub) == "what genre is [mask]"


def test_order_puts_dependencies_first():
    subs = [K.SubQuestion(1, "b", [0], ["<ANSWER>-0"]), K.SubQuestion(0, "a", [], ["X"])]
    assert [s.id for s in K.order_subquestions(subs)] == [0, 1]
    cyclic = [K.SubQuestion(0, "a", [1], []), K.SubQuestion(1, "b", [0], [])]
    assert [s.id for s in K.order_subquestions(cyclic)] == [0, 1]


# ---- the template bank -------------------------------------------------------------------------
def test_bank_assigns_each_chain_its_most_frequent_template():
    pool = [_q("what films did [A] direct"), _q("what films did [B] direct"), _q("[C] directed which movies"),
            _q("who directed [Jaws]", "directed_by", "Jaws"),
            _q("what films did [D] direct", "^written_by", "D")]  # a noisy label: outvoted
    bank = K.build_template_bank(pool)
    assert bank.canonical[("^directed_by",)] == "what films did [mask] direct"
    by_text = {t.text: t for t in bank.templates}
    assert by_text["what films did [mask] direct"].chains[0] == ("^directed_by",)
    assert by_text["[mask] directed which movies"].chains == (("^directed_by",),)
    canonical = K.build_template_bank(pool, phrasings="canonical")
    assert "[mask] directed which movies" not in {t.text for t in canonical.templates}


def test_miniworld_split_and_bank_cover_every_hop():
    pool, test = K.pool_for("miniworld"), K.keqing_dataset("miniworld").questions
    assert pool and test and not ({q.qid for q in pool} & {q.qid for q in test})
    bank = K.bank_for("miniworld")
    needed = {(c,) for q in test for c in K.gold_chain(q)}
    assert needed <= set(bank.canonical), needed - set(bank.canonical)
    # every pool question gets a gold decomposition (it is what the exemplars show)
    assert all(K.gold_decomposition(q, bank) for q in pool)


def test_gold_chains_reach_the_gold_answers():
    """Executing the gold chain hop by hop, topic excluded at every hop, gives the gold answers."""
    from kgqa_lib.kg.sources import load_named

    kg = load_named("miniworld")
    ds = K.keqing_dataset("miniworld")
    exact = 0
    for q in ds.questions:
        topic = {v for t in q.topic_entities for v in K.link_seed(t, kg)}
        assert topic, q.topic_entities
        frontier = sorted(topic)
        for hop in K.gold_chain(q):
            groups = K.retrieve_candidates(kg, "miniworld", frontier, [(hop,)], topic)
            frontier = groups[0].tails
        got = {K._label(kg, v) for v in frontier}
        exact += got == set(q.answers)
    assert exact == len(ds.questions), f"{exact}/{len(ds.questions)}"


# ---- the pipeline, with a scripted LLM -----------------------------------------------------------
class Scripted:
    """Decomposes every question into its gold sub-questions (read from a table), answers the
    reasoning prompt with prose (malformed), and summarises the log in one sentence."""

    def __init__(self, decompositions: dict[str, str]) -> None:
        self.decompositions, self.calls = decompositions, []

    def complete(self, request):
        last = request.messages[-1][1]
        self.calls.append(last[:30])
        if last.startswith("Question:") and "Steps:" in last:
            text = "The answer is found by following the steps."
        elif "Which group answers" in last:
            text = "The second looks right to me"
        else:
            q = last.split("Question:", 1)[1].strip()
            text = self.decompositions.get(q, "no idea")
        return {"text": text, "prompt_tokens": 10, "completion_tokens": 10, "finish_reason": "stop"}


def _run(q, backend, tmp_path, **settings):
    from kgqa_lib.embed.embedder import Embedder
    from kgqa_lib.kg.sources import load_named
    from kgqa_lib.llm.chat import LLM, LLMCache
    from kgqa_lib.methods import Context

    llm = LLM(backend, "scripted", LLMCache(tmp_path / "llm.sqlite", transcripts=None))
    ctx = Context(llm=llm, kg=load_named("miniworld"), embedder=Embedder(), settings={"kg": "miniworld", **settings})
    return K.keqing(q, ctx)


def test_pipeline_answers_from_a_correct_decomposition(tmp_path, tmp_cache):
    from kgqa_lib.evaluate.diagnostics import decomposition_of, diagnose
    from kgqa_lib.evaluate.runner import _jsonable

    bank = K.bank_for("miniworld")
    ds = K.keqing_dataset("miniworld")
    qs = [next(q for q in ds.questions if q.metadata["hops"] == h) for h in (1, 2, 3)]
    table = {q.question: K.format_decomposition(K.gold_decomposition(q, bank)) for q in qs}
    for q in qs:
        res = _run(q, Scripted(table), tmp_path)
        assert score(res.answers, q.answers)["hits@1"] == 1.0, (q.question, res.answers, q.answers)
        assert "decomposition_check" not in [s.name for s in res.trace]  # the method reads no gold
        check = decomposition_of({"diagnostics": diagnose("keqing", q, _jsonable(res.trace))})
        assert check["correct"], check
        assert res.response == "The answer is found by following the steps."


def test_pipeline_survives_a_malformed_decomposition(tmp_path, tmp_cache):
    q = next(q for q in K.keqing_dataset("miniworld").questions if q.metadata["hops"] == 1)
    res = _run(q, Scripted({}), tmp_path, respond=False)
    assert res.error == "fallback"
    dec = next(s.output for s in res.trace if s.name == "decompose")
    assert dec.subquestions[0].seed_entities == q.topic_entities


def test_reasoning_chooses_among_groups_and_counts_a_bad_choice(tmp_path):
    from kgqa_lib.llm.chat import LLM, LLMCache
    from kgqa_lib.methods import Context

    groups = [K.CandidateGroup(("directed_by",), [("Jaws", "directed by", "Steven Spielberg")], ["e:spielberg"]),
              K.CandidateGroup(("written_by",), [], []),
              K.CandidateGroup(("written_by",), [("Jaws", "written by", "Peter Benchley")], ["e:benchley"])]

    class Reply:
        def __init__(self, text):
            self.text, self.prompts = text, []

        def complete(self, request):
            self.prompts.append(request.messages[-1][1])
            return {"text": self.text, "prompt_tokens": 5, "completion_tokens": 2, "finish_reason": "stop"}

    for text, chosen, error in [("3", [2], None), ("Group 3, then 1", [2, 0], None),
                                ("2", [0], "bad_choice"), ("the first one", [0], "bad_choice")]:
        backend = Reply(text)
        ctx = Context(llm=LLM(backend, "scripted", LLMCache(tmp_path / f"{len(text)}{text[:3]}.sqlite", transcripts=None)))
        r = K.reason("who wrote Jaws", groups, ctx)
        assert (r.chosen, r.error, r.called) == (chosen, error, True), text
        assert "1. (Jaws | directed by | Steven Spielberg)" in backend.prompts[0] and "\n2." not in backend.prompts[0]
    # one non-empty group: nothing to choose, no call
    r = K.reason("who directed Jaws", groups[:2], Context(llm=None))
    assert (r.chosen, r.answers, r.called) == ([0], ["e:spielberg"], False)
    assert K.reason("x", groups[1:2], Context(llm=None)).error == "no_candidates"


class _Reply:
    """A backend that answers every call with the next scripted text and keeps the prompts."""

    def __init__(self, *texts):
        self.texts, self.prompts = list(texts), []

    def complete(self, request):
        self.prompts.append(request.messages[-1][1])
        text = self.texts.pop(0) if len(self.texts) > 1 else self.texts[0]
        return {"text": text, "prompt_tokens": 5, "completion_tokens": 2, "finish_reason": "stop"}


def _ctx(backend, tmp_path, name):
    from kgqa_lib.llm.chat import LLM, LLMCache
    from kgqa_lib.methods import Context

    return Context(llm=LLM(backend, "scripted", LLMCache(tmp_path / f"{name}.sqlite", transcripts=None)))


def _films():
    # "which films did [mask] direct" from Spielberg: the chain ^directed_by reaches three films
    return [K.CandidateGroup(("^directed_by",), [("Steven Spielberg", "^directed by", t) for t in ("Jaws", "Duel", "Hook")],
                             ["e:jaws", "e:duel", "e:hook"], ["e:jaws", "e:duel", "e:hook"])]


def test_candidate_facts_are_verbalised_as_the_kg_states_them():
    g = _films()[0]
    assert K.verbalise(g, 0, "rules") == "(Jaws, directed by, Steven Spielberg)"  # the inverse hop turned round
    assert K.verbalise(g, 1, "text") == "Duel directed by Steven Spielberg."
    fwd = K.CandidateGroup(("written_by",), [("Jaws", "written by", "Peter Benchley")], ["e:b"], ["e:b"])
    assert K.verbalise(fwd, 0, "rules") == "(Jaws, written by, Peter Benchley)"
    two = K.CandidateGroup(("^directed_by", "has_genre"), [("Jaws", "x", "Thriller")], ["e:t"], ["e:t"])
    assert K.verbalise(two, 0) == "(Jaws, directed by / has genre, Thriller)"
    facts = K.candidate_facts(_films() + [fwd], [0, 1])
    assert [f[0] for f in facts] == ["e:jaws", "e:duel", "e:hook", "e:b"]


@pytest.mark.parametrize("text,names,as_list", [
    ('["Jaws", "Hook"]', ["Jaws", "Hook"], True),
    ("Answer: ['Jaws', 'Hook'] because", ["Jaws", "Hook"], True),
    ('["Jaws", Hook]', ["Jaws", "Hook"], True),  # broken JSON: split by commas
    ("Jaws\nHook", ["Jaws", "Hook"], False),
    ("[]", [], True),
    ("", None, False),
    (None, None, False),
])
def test_parse_selection(text, names, as_list):
    assert K.parse_selection(text) == (names, as_list)


def test_match_selection_maps_labels_and_counts_made_up_names():
    facts = K.candidate_facts(_films(), [0])
    iris, labels, unmatched = K.match_selection(["jaws ", "HOOK.", "Schindler's List", "Steven Spielberg"], facts)
    assert (iris, labels, unmatched) == (["e:jaws", "e:hook"], ["Jaws", "Hook"], 2)


def test_select_candidates_keeps_the_llm_subset(tmp_path):
    backend = _Reply('["Duel", "Jurassic Park"]')
    r = K.select_candidates("which films did Steven Spielberg direct", _films(), _ctx(backend, tmp_path, "a"))
    assert (r.answers, r.selected, r.unmatched, r.error, r.calls, r.mode) == (["e:duel"], ["Duel"], 1, None, 1, "select")
    assert r.n_candidates == 3 and r.candidates == ["Jaws", "Duel", "Hook"]
    prompt = backend.prompts[0]
    assert "(Jaws, directed by, Steven Spielberg)\n(Duel, directed by, Steven Spielberg)" in prompt
    assert prompt.rstrip().endswith("Question: which films did Steven Spielberg direct")


@pytest.mark.parametrize("text,error", [("[]", "select_empty"), ("I don't know", "select_unmatched"),
                                        ('["Jurassic Park"]', "select_unmatched"), ("", "select_empty")])
def test_select_candidates_falls_back_to_all_and_says_why(tmp_path, text, error):
    r = K.select_candidates("q", _films(), _ctx(_Reply(text), tmp_path, f"b{len(text)}"))
    assert (r.answers, r.error, r.called) == (["e:jaws", "e:duel", "e:hook"], error, True)


def test_select_candidates_makes_no_call_for_one_candidate_entity(tmp_path):
    """With one candidate entity a selection could only keep it (an empty or unmatched one falls back to it)."""
    one = [K.CandidateGroup(("^directed_by",), [("Steven Spielberg", "^directed by", "Jaws")], ["e:jaws"], ["e:jaws"]),
           K.CandidateGroup(("^written_by",), [("Steven Spielberg", "^written by", "Jaws")], ["e:jaws"], ["e:jaws"])]
    backend = _Reply('["Duel"]')
    r = K.select_candidates("which films did Steven Spielberg direct", one, _ctx(backend, tmp_path, "one"))
    assert (r.answers, r.selected, r.calls, r.called, r.error, r.n_candidates) == (["e:jaws"], ["Jaws"], 0, False, None, 1)
    assert backend.prompts == []


def test_select_candidates_bound(tmp_path):
    from kgqa_lib.methods import Context

    # one group above the bound: every candidate kept, no call
    r = K.select_candidates("q", _films(), Context(llm=None), max_candidates=2)
    assert (r.answers, r.over_bound, r.called, r.calls) == (["e:jaws", "e:duel", "e:hook"], True, False, 0)
    # two groups above the bound: the group choice first, then the selection within the chosen group
    other = K.CandidateGroup(("written_by",), [("Jaws", "written by", "Peter Benchley"), ("Jaws", "written by", "Carl Gottlieb")],
                             ["e:b", "e:g"], ["e:b", "e:g"])
    backend = _Reply("2", '["Peter Benchley"]')
    r = K.select_candidates("who wrote Jaws", _films() + [other], _ctx(backend, tmp_path, "c"), max_candidates=4)
    assert (r.chosen, r.answers, r.calls, r.over_bound, r.n_candidates) == ([1], ["e:b"], 2, False, 5)
    assert "Which group answers" in backend.prompts[0] and "(Jaws, written by, Peter Benchley)" in backend.prompts[1]
    # the group choice leaves one candidate entity: no selection call after it
    single = K.CandidateGroup(("written_by",), [("Jaws", "written by", "Peter Benchley")], ["e:b"], ["e:b"])
    backend = _Reply("2")
    r = K.select_candidates("who wrote Jaws", _films() + [single], _ctx(backend, tmp_path, "d"), max_candidates=3)
    assert (r.chosen, r.answers, r.calls, r.n_candidates) == ([1], ["e:b"], 1, 4) and len(backend.prompts) == 1
    assert K.select_candidates("q", [K.CandidateGroup(("x",), [], [])], Context(llm=None)).error == "no_candidates"


def test_keep_all_and_unknown_modes(tmp_path):
    r = K.keep_all("q", _films())
    assert (r.answers, r.called, r.mode) == (["e:jaws", "e:duel", "e:hook"], False, "all")
    with pytest.raises(ValueError, match="unknown candidate format"):
        K.select_candidates("q", _films(), None, fmt="prose")


def test_pipeline_selects_candidates_by_default(tmp_path, tmp_cache):
    """The default pipeline makes the paper's selection call for every sub-question with candidates."""
    bank = K.bank_for("miniworld")
    q = next(q for q in K.keqing_dataset("miniworld").questions if q.metadata["hops"] == 2)
    res = _run(q, Scripted({q.question: K.format_decomposition(K.gold_decomposition(q, bank))}), tmp_path, respond=False)
    steps = next(s.output for s in res.trace if s.name == "execute_plan")[0]
    assert len(steps) == 2 and all(st.reasoning.mode == "select" and st.reasoning.called for st in steps)
    # the scripted model selects nothing usable: every step falls back to all candidates and says so
    assert res.error == "select_unmatched" and score(res.answers, q.answers)["hits@1"] == 1.0


def test_reason_steps_last_selects_only_at_the_last_sub_question(tmp_path, tmp_cache):
    """reason_steps=last: earlier sub-questions keep every entity their chains reach (no call); the
    last one makes the paper's selection call."""
    bank = K.bank_for("miniworld")
    q = next(q for q in K.keqing_dataset("miniworld").questions if q.metadata["hops"] == 2)
    res = _run(q, Scripted({q.question: K.format_decomposition(K.gold_decomposition(q, bank))}), tmp_path, respond=False,
               reason_steps="last")
    steps = next(s.output for s in res.trace if s.name == "execute_plan")[0]
    assert [st.reasoning.mode for st in steps] == ["all", "select"] and not steps[0].reasoning.called
    assert score(res.answers, q.answers)["hits@1"] == 1.0


def test_decomposition_only_is_one_named_setting(tmp_path, tmp_cache):
    """decomposition_only=true is reasoning=group respond=false: no selection call, no response call."""
    bank = K.bank_for("miniworld")
    q = next(q for q in K.keqing_dataset("miniworld").questions if q.metadata["hops"] == 2)
    table = {q.question: K.format_decomposition(K.gold_decomposition(q, bank))}
    one, two = Scripted(table), Scripted(table)
    a = _run(q, one, tmp_path / "a", decomposition_only=True)
    b = _run(q, two, tmp_path / "b", reasoning="group", respond=False)
    assert a.answers == b.answers and one.calls == two.calls and len(one.calls) == 1  # the decomposition only
    assert "respond" not in [s.name for s in a.trace]


class ChainWriter(Scripted):
    """Writes the gold relation chain when asked for one (Fig. 6's prompt), else as Scripted."""

    def __init__(self, chains: dict[str, str]) -> None:
        super().__init__({})
        self.chains = chains

    def complete(self, request):
        if "chain of knowledge-graph relations" in request.messages[0][1]:
            q = request.messages[-1][1].split("Question:", 1)[1].strip()
            self.calls.append("chain")
            return {"text": self.chains.get(q, "no idea"), "prompt_tokens": 10, "completion_tokens": 5,
                    "finish_reason": "stop"}
        return super().complete(request)


def test_chain_mode_keeps_candidate_reasoning_and_the_response(tmp_path, tmp_cache):
    """Fig. 6's ablation replaces decomposition and retrieval only: the written chain's candidates go
    through the selection call and the answer through the response, as in the default pipeline."""
    q = next(q for q in K.keqing_dataset("miniworld").questions if q.metadata["hops"] == 2)
    backend = ChainWriter({q.question: ", ".join(K.gold_chain(q))})
    res = _run(q, backend, tmp_path, mode="chain")
    names = [s.name for s in res.trace]
    assert names[-3:] == ["generate_chain", "execute_plan", "respond"] and "decompose" not in names
    [step] = next(s.output for s in res.trace if s.name == "execute_plan")[0]
    assert step.match.chains == [tuple(K.gold_chain(q))] and step.reasoning.mode == "select"
    assert score(res.answers, q.answers)["hits@1"] == 1.0
    assert res.response == "The answer is found by following the steps."
    assert backend.calls[0] == "chain" and len(backend.calls) == 2 + int(step.reasoning.called)


# ---- MetaQA (KGQA_DATA_DIR) ----------------------------------------------------------------------
def test_metaqa_split_and_bank(data_dir_or_skip):
    pool = K.pool_for("metaqa")
    test = K.keqing_dataset("metaqa", "2hop").questions
    assert not ({q.qid for q in pool} & {q.qid for q in test})
    bank = K.bank_for("metaqa")
    hops = {(c,) for q in pool for c in K.gold_chain(q)}
    assert hops <= set(bank.canonical)
    assert len(bank.canonical) >= 13
    print(json.dumps({"templates": len(bank), "chains": len(bank.canonical)}))


def test_chains_over_relations_the_kg_lacks_are_left_out():
    from kgqa_lib.kg.sources import load_named

    assert K.relation_path("miniworld", ("has_tags",)) is None  # the mini-world has no tags
    bank = K.bank_for("miniworld")
    assert all(K.relation_path("miniworld", c) is not None for t in bank.templates for c in t.chains)
    kg = load_named("miniworld")
    seed = K.link_seed("Jaws", kg)
    groups = K.retrieve_candidates(kg, "miniworld", seed, [("has_tags",), ("directed_by",)], set(seed))
    assert groups[0].tails == [] and [K._label(kg, v) for v in groups[1].tails] == ["Steven Spielberg"]


# ---- gold-based diagnostics, computed after the method (kgqa_lib.evaluate.diagnostics) ----------
def test_decomposition_diagnostic_counts_the_seed(tmp_path, tmp_cache):
    """A right chain from a wrong seed is not a correct decomposition (issue 21 §5)."""
    from kgqa_lib.evaluate.diagnostics import keqing_decomposition
    from kgqa_lib.evaluate.runner import _jsonable
    from kgqa_lib.kg.sources import load_named

    kg = load_named("miniworld")
    bank = K.bank_for("miniworld")
    q = next(q for q in K.keqing_dataset("miniworld").questions if q.metadata["hops"] == 2)
    gold = K.gold_decomposition(q, bank)
    res = _run(q, Scripted({q.question: K.format_decomposition(gold)}), tmp_path, respond=False)
    d = keqing_decomposition(q, _jsonable(res.trace), kg)
    assert d["chain_correct"] and d["seed_correct"] and d["correct"]
    assert keqing_decomposition(q, _jsonable(res.trace))["correct"]  # by name, without the KG

    other = next(t for t in ("Paris", "Berlin", "Canada") if kg.lookup(t, fuzzy=False, limit=1) and t not in q.topic_entities)
    wrong = [K.SubQuestion(s.id, s.question, s.dep, [other] if i == 0 else s.seed_entities) for i, s in enumerate(gold)]
    res = _run(q, Scripted({q.question: K.format_decomposition(wrong)}), tmp_path / "w", respond=False)
    d = keqing_decomposition(q, _jsonable(res.trace), kg)
    assert d["chain_correct"] and not d["seed_correct"] and not d["correct"]


# ---- the dense supplement of sec. 3.2 (dense_supplement) ------------------------------------------
class Selector(Scripted):
    """As Scripted, and answers a selection prompt with the names ``pick`` gives for its question (the
    prompts it saw are kept)."""

    def __init__(self, decompositions: dict[str, str], pick) -> None:
        super().__init__(decompositions)
        self.pick, self.selections = pick, []

    def complete(self, request):
        last = request.messages[-1][1]
        if last.startswith("Context:"):
            self.selections.append(last)
            self.calls.append("select")
            names = self.pick(last.split("Question:", 1)[1].strip(), last)
            return {"text": json.dumps(names), "prompt_tokens": 10, "completion_tokens": 5, "finish_reason": "stop"}
        return super().complete(request)


def test_dense_supplement_ranks_the_seeds_triples_by_similarity():
    """The supplement: triples around the seeds, ranked by cosine with the sub-question, one per entity,
    never a seed, the topic or an entity the chains reached; facts read as the KG states them."""
    from kgqa_lib.embed.embedder import Embedder
    from kgqa_lib.kg.sources import load_named

    kg, emb = load_named("miniworld"), Embedder()
    jaws = K.link_seed("Jaws", kg)[0]
    spielberg = K.link_seed("Steven Spielberg", kg)[0]
    g = K.dense_supplement(kg, "who directed Jaws", [jaws], {jaws}, set(), emb, 4)
    assert g.chain == (K.DENSE,) and len(g.tails) == 4 == len(set(g.tails)) and jaws not in g.tails
    assert g.tails[0] == spielberg and g.scores == sorted(g.scores, reverse=True)
    assert K.verbalise(g, 0) == "(Jaws, directed by, Steven Spielberg)" and K.verbalise(g, 0, "text") == \
        "Jaws directed by Steven Spielberg."
    # the chains' candidates and the topic are never supplemented; an inverse fact reads as the KG states it
    h = K.dense_supplement(kg, "who directed Jaws", [jaws], {jaws, spielberg}, set(g.tails[1:3]), emb, 20)
    assert not {spielberg, *g.tails[1:3]} & set(h.tails) and len(h.tails) == len(K.one_hop_facts(kg, jaws)[0].tails) - 3
    assert "(Steven Spielberg, notable work, Jaws)" not in [K.verbalise(h, i) for i in range(len(h.tails))]  # reaches him
    films = K.dense_supplement(kg, "which films did Steven Spielberg direct", [spielberg], set(), set(), emb, 3)
    assert all(K.verbalise(films, i).endswith("Steven Spielberg)") or K.verbalise(films, i).startswith("(Steven Spielberg,")
               for i in range(3))
    assert K.dense_supplement(kg, "x", [jaws], set(), set(), emb, 0).tails == []
    assert K.dense_supplement(kg, "x", ["1975"], set(), set(), emb, 3).tails == []  # a literal has no triples


def _one_hop_question():
    q = next(q for q in K.keqing_dataset("miniworld").questions if q.metadata["hops"] == 1 and K.gold_chain(q) == ("directed_by",))
    return q, {q.question: K.format_decomposition(K.gold_decomposition(q, K.bank_for("miniworld")))}


def test_pipeline_with_the_dense_supplement(tmp_path, tmp_cache):
    """dense_supplement=N adds N supplement candidates to the chain's (within the room reason_max leaves):
    a sub-question with one chain candidate then gets the selection call; a selection that names nothing
    usable falls back to the chain's candidates, not the supplement's; 0 is the default pipeline."""
    q, table = _one_hop_question()
    base, zero = Scripted(table), Scripted(table)
    a = _run(q, base, tmp_path / "a", respond=False)
    b = _run(q, zero, tmp_path / "b", respond=False, dense_supplement=0)
    assert a.answers == b.answers == q.answers and base.calls == zero.calls and len(base.calls) == 1  # no selection
    [step] = next(s.output for s in a.trace if s.name == "execute_plan")[0]
    assert [g.chain for g in step.groups] == [("directed_by",)] and "dense" not in step.reasoning.as_dict()

    def pick(question, prompt):  # the supplement's first fact's object: a wrong answer
        return [re.findall(r"^\((.*), (.*), (.*)\)$", prompt, re.M)[1][2]]

    llm = Selector(table, pick)
    res = _run(q, llm, tmp_path / "c", respond=False, dense_supplement=3)
    [step] = next(s.output for s in res.trace if s.name == "execute_plan")[0]
    dense = step.groups[-1]
    assert step.groups[-1].chain == (K.DENSE,) and len(dense.tails) == 3 and llm.calls[-1] == "select"
    facts = llm.selections[0].split("Question:")[0]
    assert all(K.verbalise(dense, i) in facts for i in range(3)) and facts.count("\n(") == 4  # 1 chain + 3 facts
    r = step.reasoning
    assert (r.dense, r.dense_selected, r.n_candidates, r.called) == (3, 1, 4, True) and res.answers != q.answers
    assert r.as_dict()["dense"] == 3
    # nothing usable selected: the chain's candidate, not the supplement's
    res = _run(q, Selector(table, lambda question, prompt: ["Nobody"]), tmp_path / "d", respond=False, dense_supplement=3)
    [step] = next(s.output for s in res.trace if s.name == "execute_plan")[0]
    assert res.answers == q.answers and step.reasoning.error == "select_unmatched" and step.reasoning.dense_selected == 0
    # the room under reason_max: one chain candidate, reason_max 2 → one supplement triple
    res = _run(q, Selector(table, lambda question, prompt: ["Nobody"]), tmp_path / "e", respond=False,
               dense_supplement=3, reason_max=2)
    [step] = next(s.output for s in res.trace if s.name == "execute_plan")[0]
    assert len(step.groups[-1].tails) == 1 and step.reasoning.n_candidates == 2
    with pytest.raises(ValueError, match="mode=chain"):
        _run(q, Scripted(table), tmp_path / "f", mode="chain", dense_supplement=3)


def test_candidates_as_text_serialise_the_facts(tmp_path, tmp_cache):
    """candidates=text (sec. 3.3's second way): the selection prompt holds the facts as sentences."""
    q = next(q for q in K.keqing_dataset("miniworld").questions if q.metadata["hops"] == 2)
    table = {q.question: K.format_decomposition(K.gold_decomposition(q, K.bank_for("miniworld")))}
    llm = Selector(table, lambda question, prompt: [])
    _run(q, llm, tmp_path, respond=False, candidates="text")
    assert llm.selections and all("\n(" not in p and re.search(r"\w\. \w", p) for p in llm.selections)


# ---- Keqing as released by its authors (pipeline=released) ----------------------------------------
def test_one_hop_facts_every_relation_and_the_bound():
    from kgqa_lib.kg.sources import load_named

    kg = load_named("miniworld")
    jaws = K.link_seed("Jaws", kg)[0]
    g, n, rels = K.one_hop_facts(kg, jaws)
    facts = [K.verbalise(g, i) for i in range(len(g.reached))]
    assert n == len(facts) == len(set(facts)) and rels == len({K.verbalise(g, i).split(", ")[1] for i in range(n)})
    assert "(Jaws, directed by, Steven Spielberg)" in facts and "(Steven Spielberg, notable work, Jaws)" in facts
    small, n2, _ = K.one_hop_facts(kg, jaws, 3)  # one fact of each of the first three relations
    assert n2 == n and len(small.reached) == 3 and len({K.verbalise(small, i).split(", ")[1] for i in range(3)}) == 3


def test_released_pipeline(tmp_path, tmp_cache):
    """pipeline=released: after the decomposition, every 1-hop fact of each seed is read by the LLM, one
    call per seed whose facts hold several relations (none for one relation); the answers are the union
    over the seeds less the seeds of the sub-question depended on; names outside the facts are dropped;
    no templates, no response call."""
    from kgqa_lib.kg.sources import load_named

    kg = load_named("miniworld")
    bank = K.bank_for("miniworld")
    q = next(q for q in K.keqing_dataset("miniworld").questions if q.metadata["hops"] == 2)
    gold = K.gold_decomposition(q, bank)
    table = {q.question: K.format_decomposition(gold)}
    topic = K.link_seed(q.topic_entities[0], kg)[0]
    first = {K._label(kg, v) for v in kg.follow_path(topic, K.relation_path("miniworld", K.gold_chain(q)[:1]))}

    def pick(question, prompt):
        if f"[{q.topic_entities[0]}]" in question:  # the first sub-question: its gold answers, a made-up name
            return sorted(first) + ["Nobody At All"]
        return [re.findall(r"^\((.*?), release year, (.*)\)$", prompt, re.M)[0][1], q.topic_entities[0]]

    llm = Selector(table, pick)
    res = _run(q, llm, tmp_path, pipeline="released", respond=True)  # respond is ignored: no response step
    names = [s.name for s in res.trace]
    assert "respond" not in names and res.response.startswith("Step 1:")
    steps = next(s.output for s in res.trace if s.name == "execute_plan")[0]
    assert [st.match.chains for st in steps] == [[], []] and all(g.chain == (K.ONE_HOP,) for st in steps for g in st.groups)
    s1, s2 = steps
    assert s1.reasoning.mode == "released" and s1.reasoning.calls == 1 and s1.reasoning.unmatched == 1
    assert {K._label(kg, v) for v in s1.reasoning.answers} == first
    facts = llm.selections[0].split("Question:")[0]
    g, n, _ = K.one_hop_facts(kg, topic)
    assert all(K.verbalise(g, i) in facts for i in range(n))  # every 1-hop fact of the seed
    assert f"[{q.topic_entities[0]}]" in llm.selections[0].split("Question:")[1]  # the seed's name in brackets
    # one call per seed of the second sub-question with several relations; the topic (the seed of the
    # sub-question it depends on) is never an answer
    several = [v for v in s1.reasoning.answers if K.one_hop_facts(kg, v)[2] > 1]
    assert s2.reasoning.calls == len(several) == len(llm.selections) - 1 and len(s2.groups) == len(s1.reasoning.answers)
    assert topic not in s2.reasoning.answers and score(res.answers, q.answers)["hits@1"] == 1.0
    assert llm.calls.count("select") == 1 + len(several) and len(llm.calls) == 2 + len(several)  # + the decomposition
    # the bound on the seeds one sub-question reads
    res = _run(q, Selector(table, pick), tmp_path / "s", pipeline="released", released_seeds=1)
    steps = next(s.output for s in res.trace if s.name == "execute_plan")[0]
    assert len(steps[1].groups) == 1 and len(steps[1].seeds) == len(s1.reasoning.answers)
    with pytest.raises(ValueError, match="pipeline=released"):
        _run(q, Scripted(table), tmp_path / "x", pipeline="released", dense_supplement=2)


def test_released_reasoning_one_relation_no_call_and_empty_is_empty(tmp_path):
    from kgqa_lib.kg.sources import load_named
    from kgqa_lib.llm.chat import LLM, LLMCache
    from kgqa_lib.methods import Context

    kg = load_named("miniworld")
    backend = _Reply("[]")
    ctx = Context(llm=LLM(backend, "scripted", LLMCache(tmp_path / "r.sqlite", transcripts=None)), kg=kg)
    jaws = K.link_seed("Jaws", kg)[0]
    g, r = K.reason_released("who directed [mask]", jaws, ctx)
    assert (r.answers, r.error, r.calls, r.question) == ([], "select_empty", 1, "who directed [Jaws]")  # no fallback
    assert "Question: who directed [Jaws]" in backend.prompts[0]
    one = next(v for v in K.one_hop_facts(kg, jaws)[0].tails if "://" in v and K.one_hop_facts(kg, v)[2] == 1)
    g, r = K.reason_released("what is [mask]", one, ctx)
    assert r.calls == 0 and not r.called and r.answers == g.tails and len(backend.prompts) == 1
    g, r = K.reason_released("who directed [mask]", jaws, ctx, max_facts=3)
    assert r.over_bound and len(g.reached) == 3
