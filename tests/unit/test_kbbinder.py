"""KB-BINDER: drafts, binding (mentions → entities, relation names → relations by embedding,
bounded combinations), execution, the vote; the method through the runner with scripted LLMs."""

from __future__ import annotations

import itertools

import pytest

from kgqa_lib.data.datasets import Dataset, Question, load_dataset
from kgqa_lib.errors import InfrastructureError
from kgqa_lib.evaluate.metrics import score
from kgqa_lib.methods import kbbinder as B


@pytest.fixture(scope="module")
def tiny():
    from kgqa_lib.kg.sources import load_named

    return load_named("tiny")


@pytest.fixture(scope="module")
def embedder(tmp_path_factory):
    import os

    from kgqa_lib.embed.embedder import Embedder

    old = os.environ.get("KGQA_CACHE_DIR")
    os.environ["KGQA_CACHE_DIR"] = str(tmp_path_factory.mktemp("emb"))
    try:
        yield Embedder()
    finally:
        if old is None:
            os.environ.pop("KGQA_CACHE_DIR", None)
        else:
            os.environ["KGQA_CACHE_DIR"] = old


class Scripted:
    """Answers the draft prompt from a table: question → a draft, or a list of drafts (one per
    sample index; the list's last entry repeats)."""

    def __init__(self, table):
        self.table, self.requests = table, []

    def complete(self, request):
        self.requests.append(request)
        q = request.messages[-1][1].split("Question:", 1)[1].strip()
        text = self.table.get(q, "I do not know.")
        if isinstance(text, list):
            text = text[min(request.sample_index, len(text) - 1)]
        return {"text": text, "prompt_tokens": 10, "completion_tokens": 10, "finish_reason": "stop"}


def _ctx(backend, tmp_path, kg, embedder, kg_name="tiny", **settings):
    from kgqa_lib.llm.chat import LLM, LLMCache
    from kgqa_lib.methods import Context

    llm = LLM(backend, "scripted", LLMCache(tmp_path / "llm.sqlite", transcripts=None))
    return Context(llm=llm, kg=kg, embedder=embedder, settings={"kg": kg_name, **settings})


# ---- exemplars ----------------------------------------------------------------------------------
def test_pool_drafts_come_from_the_gold_path(tiny):
    pool = B.exemplar_pool(tiny, "tiny")
    by_qid = {e.qid: e.draft for e in pool}
    assert by_qid["tiny-films-00"] == '(JOIN (R directed_by) "Inception")'
    assert by_qid["tiny-films-04"] == '(JOIN directed_by "Alfonso Cuarón")'
    assert by_qid["tiny-films-05"] == '(JOIN (R directed_by) (JOIN starred_actors "Kate Winslet"))'


def test_select_exemplars_bm25_leaves_the_question_out(tiny):
    pool = B.exemplar_pool(tiny, "tiny")
    q = load_dataset("tiny:films").questions[0]  # who directed Inception
    shots = B.select_exemplars(q, pool, 3, retrieve=True)
    assert len(shots) == 3 and all(e.qid != q.qid for e in shots)
    assert "directed" in shots[-1].question  # the closest comes last, next to the question
    fixed = B.select_exemplars(q, pool, 3, retrieve=False)  # a spread over the pool, whatever the question
    assert len(fixed) == 3 and fixed[0].qid == "tiny-films-01" and len({e.qid for e in fixed}) == 3


def test_metaqa_pool_is_the_keqing_pool_split(data_dir_or_skip):
    from kgqa_lib.kg.sources import load_named
    from kgqa_lib.methods.keqing import keqing_dataset, pool_for

    kg = load_named("metaqa")
    pool = B.exemplar_pool(kg, "metaqa")
    qids = {q.qid for q in pool_for("metaqa")}
    assert pool and {e.qid for e in pool} <= qids
    assert not qids & {q.qid for q in keqing_dataset("metaqa", "2hop").questions}
    assert all(e.draft.startswith("(JOIN") and '"' in e.draft for e in pool[:50])


def test_grailqa_fragment_pool_is_the_keqing_pool_split(data_dir_or_skip):
    from kgqa_lib.kg.sources import load_named
    from kgqa_lib.methods.keqing import GRAILQA_KG, keqing_dataset, pool_for

    kg = load_named(GRAILQA_KG)
    pool = B.exemplar_pool(kg, GRAILQA_KG)
    qids = {q.qid for q in pool_for(GRAILQA_KG)}
    assert len(pool) > 100 and {e.qid for e in pool} <= qids  # GrailQA's own s-expressions, as drafts
    assert not qids & {q.qid for q in keqing_dataset("grailqa").questions}  # keqing:grailqa is never an exemplar
    assert sum(e.draft.startswith("(") for e in pool) == len(pool)


# ---- drafts -------------------------------------------------------------------------------------
def test_parse_draft_slots():
    d = B.parse_draft('Sure: (JOIN (R directed_by) (JOIN starring "Tom Hardy")) done')
    assert d.error is None and d.sexpr == '(JOIN (R directed_by) (JOIN starring "Tom Hardy"))'
    assert [(s.kind, s.text) for s in d.slots] == [("relation", "directed_by"), ("relation", "starring"), ("entity", "Tom Hardy")]
    d = B.parse_draft('(AND film.film (JOIN (R film.film.release_year) (lt film.film.runtime 100)))')
    assert [(s.kind, s.text) for s in d.slots] == [("class", "film.film"), ("relation", "film.film.release_year"),
                                                   ("relation", "film.film.runtime")]
    d = B.parse_draft('(COUNT (JOIN directed_by "Nolan"))')  # the same relation twice is one slot
    assert d.error is None and len(d.slots) == 2


@pytest.mark.parametrize("text,error", [("I cannot answer that.", "no_sexpr"), ("", "no_sexpr"), (None, "no_sexpr"),
                                        ("(JOIN r " * 120 + '"X"' + ")" * 120, "parse_error"),
                                        ("(JOIN directed_by)", "bad_form"), ("(AND a b)", "bad_form"),
                                        ("(ARGMAX (JOIN r \"x\") (R r))", "bad_form")])
def test_malformed_drafts_are_counted_not_raised(text, error):
    d = B.parse_draft(text)
    assert d.error == error and d.slots == []


# ---- binding ------------------------------------------------------------------------------------
def test_mentions_bind_exact_then_fuzzy(tiny):
    exact, fuzzy, year, none = B.bind_entities(["Inception", "Incepton", "1999", "Zzqx Wvvb"], tiny, k=2)
    assert exact[0].label == "Inception" and exact[0].score == 1.0 and len(exact) == 1
    assert fuzzy and fuzzy[0].label == "Inception" and fuzzy[0].score < 1.0
    assert year == [B.Option("1999", "1999", 0.5)]  # a number no entity is named: a literal
    assert len(none) <= 2  # fuzzy lookup may still propose something; never more than k


def test_relation_names_bind_by_embedding(tiny, embedder):
    cat = B.catalogue(tiny, embedder)
    assert sorted(cat.names) == ["directed_by", "has_genre", "in_language", "release_year", "starred_actors", "written_by"]
    verbatim, director, actor, language = B.bind_relations(["directed_by", "director", "actors", "language"], cat,
                                                           embedder, k=3)
    assert verbatim[0].label == "directed_by" and verbatim[0].score == pytest.approx(1.0, abs=1e-4)
    assert director[0].label == "directed_by" and len(director) == 3
    assert actor[0].label == "starred_actors"
    assert language[0].label == "in_language"
    assert all(a.score >= b.score for a, b in zip(director, director[1:]))


def test_best_combinations_are_the_bounded_top_of_the_product():
    scores = [[0.9, 0.5, 0.4, 0.1, 0.0], [1.0, 0.7, 0.65, 0.2], [0.99, 0.3, 0.2]]
    got = B.best_combinations(scores, 7)
    brute = sorted(((sum(s[i] for s, i in zip(scores, idx)), idx) for idx in itertools.product(*[range(len(s)) for s in scores])),
                   key=lambda t: (-t[0], t[1]))
    assert len(got) == 7 and [round(s, 6) for s, _ in got] == [round(s, 6) for s, _ in brute[:7]]
    assert B.best_combinations(scores, 1000) and len(B.best_combinations(scores, 1000)) == 5 * 4 * 3
    assert B.best_combinations([[1.0], []], 5) == []  # an unbound slot: no candidate
    # 20 slots of 3 options (3^20 combinations) stay cheap: only the bound is explored
    assert len(B.best_combinations([[1.0, 0.5, 0.2]] * 20, 10)) == 10


def test_candidates_substitute_every_slot(tiny, embedder):
    d = B.parse_draft('(JOIN (R director) (JOIN starring "Kate Winslet"))')
    bindings = B.bind(d, tiny, embedder, entity_k=2, relation_k=3)
    cands = B.candidates(d, bindings, bound=5)
    assert len(cands) == 5 and all('"' not in c.sexpr and "director" not in c.sexpr for c in cands)
    assert cands[0].choice == ["directed_by", "starred_actors", "Kate Winslet"]
    assert [c.score for c in cands] == sorted((c.score for c in cands), reverse=True)


def test_ground_executes_until_one_answers(tiny, embedder):
    d = B.parse_draft('(JOIN (R director) (JOIN starring "Kate Winslet"))')
    out = B.ground(d, tiny, embedder, B._profile("tiny"))
    assert out.status == "ok" and out.answers == ["James Cameron"]
    assert out.executions[-1]["status"] == "ok" and out.winner == out.executions[-1]["sexpr"]
    assert B.ground(B.parse_draft('(JOIN (R directed_by) "Qqqq Zzzzzz Xxxx")'), tiny, embedder, B._profile("tiny"),
                    entity_k=1).status in ("unbound_entity", "no_answer")
    assert B.ground(B.parse_draft("no idea"), tiny, embedder, B._profile("tiny")).status == "no_sexpr"


# ---- the vote -----------------------------------------------------------------------------------
def _outcome(answers, status="ok"):
    return B.Outcome(B.Draft(0, ""), answers=answers, status=status if answers else "no_answer")


def test_vote_majority_over_answer_sets():
    outs = [_outcome(["A"]), _outcome(["B", "C"]), _outcome(["c", "b"]), _outcome([]), _outcome(["A"]),
            _outcome(["the B", "C"])]
    v = B.vote(outs)
    assert v.answers == ["B", "C"] and v.winner == 1  # {b, c} three times (case, order, "the" ignored)
    assert v.tally[0][1] == 3 and v.statuses == {"ok": 5, "no_answer": 1}


def test_vote_tie_goes_to_the_earliest_and_nothing_is_empty():
    v = B.vote([_outcome([]), _outcome(["X"]), _outcome(["Y"])])
    assert v.answers == ["X"] and v.winner == 1
    v = B.vote([_outcome([]), B.Outcome(B.Draft(1, "", error="no_sexpr"), status="no_sexpr")])
    assert v.answers == [] and v.winner is None and v.statuses == {"no_answer": 1, "no_sexpr": 1}


# ---- the method ---------------------------------------------------------------------------------
def test_self_consistency_samples_are_distinct_and_voted(tiny, embedder, tmp_path):
    q = load_dataset("tiny:films").questions[5]  # who directed the films that Kate Winslet starred in
    right = '(JOIN (R directed_by) (JOIN starred_actors "Kate Winslet"))'
    drafts = ["garbage", '(JOIN written_by "Kate Winslet")', right, "(JOIN x)", right, '(JOIN (R director) (JOIN starring "Kate Winslet"))']
    backend = Scripted({q.question: drafts})
    res = B.kbbinder(q, _ctx(backend, tmp_path, tiny, embedder))
    assert res.answers == ["James Cameron"] and res.error is None
    assert [r.sample_index for r in backend.requests] == list(range(6))
    assert all(r.temperature > 0 for r in backend.requests)
    v = next(s.output for s in res.trace if s.name == "vote")
    assert v.statuses["no_sexpr"] == 1 and v.statuses["bad_form"] == 1 and v.statuses["ok"] == 3
    assert [s.name for s in res.trace][:2] == ["select_exemplars", "draft"]
    # the exemplars are (question, draft) turns before the question
    msgs = backend.requests[0].messages
    assert msgs[0][0] == "system" and msgs[2][0] == "assistant" and msgs[2][1].startswith("(")


def test_only_malformed_drafts_give_an_error_category(tiny, embedder, tmp_path):
    q = load_dataset("tiny:films").questions[0]
    res = B.kbbinder(q, _ctx(Scripted({q.question: "no idea"}), tmp_path, tiny, embedder, samples=1))
    assert res.answers == [] and res.error == "no_sexpr"


def test_infrastructure_errors_propagate(tiny, embedder, tmp_path):
    class Down:
        def __init__(self, kg):
            self._inner = kg

        def __getattr__(self, name):
            return getattr(self._inner, name)

        def sparql(self, *a, **k):
            raise InfrastructureError("SPARQL endpoint down")

    q = load_dataset("tiny:films").questions[0]
    backend = Scripted({q.question: '(JOIN (R directed_by) "Inception")'})
    with pytest.raises(InfrastructureError):
        B.kbbinder(q, _ctx(backend, tmp_path, Down(tiny), embedder, samples=1))


def test_runner_smoke_on_the_miniworld(tmp_path, embedder):
    """Two mini-world questions through `run`, the LLM writing the gold drafts."""
    from kgqa_lib.evaluate.runner import run
    from kgqa_lib.kg.sources import load_named
    from kgqa_lib.methods.keqing import keqing_dataset

    kg = load_named("miniworld")
    test = keqing_dataset("miniworld").questions
    qs = [next(q for q in test if q.metadata["hops"] == h) for h in (1, 3)]
    table = {e.question: e.draft for e in B.exemplars_from(qs, lambda q: kg, "miniworld", B._profile("miniworld"))}
    assert len(table) == 2
    ctx = _ctx(Scripted(table), tmp_path, kg, embedder, "miniworld", samples=2)
    recs = run("kbbinder", Dataset("mw", qs, kg="miniworld"), ctx, tmp_path / "run.jsonl", progress=False)
    assert len(recs) == 2
    for q, r in zip(qs, recs):
        assert r["error"] is None and score(r["prediction"], q.answers)["hits@1"] == 1.0, r
