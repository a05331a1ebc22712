"""FuSIC-KBQA's paper-faithful defaults (issue 20 §1), each deviation a named setting: retrieved
paths shown as SPARQL programs (sec. 3), not with the entities they reach (``show_path_values``);
context sizes of appendix A.1.3 per number of retrievers (``context_size``); 5 exemplars; LLM calls
per question counted per stage the paper's way (Limitations: 3 re-rank calls per retriever + 1
generation + 0–4 feedback calls); the naive LLM FS-ICL baseline of sec. 4.2.1 (``retrievers=none``).
All with a scripted LLM backend."""

from __future__ import annotations

import re

import pytest

from kgqa_lib.methods import coerce_settings
from kgqa_lib.methods import fusic as F
from kgqa_lib.methods.fusic.retrieval import prepared_domain

TASK = "geo-wd>cinema-fb"


class Scripted:
    """Re-ranking prompts get "1, 2, 3"; generation prompts get the next query of ``queries``
    (the last one repeated). Every request is kept."""

    def __init__(self, *queries: str) -> None:
        self.queries, self.requests = list(queries), []

    def complete(self, request):
        self.requests.append(request.messages)
        last = request.messages[-1][1]
        if "Reply with their numbers only" in last:
            text = "1, 2, 3"
        else:
            q = self.queries.pop(0) if len(self.queries) > 1 else self.queries[0]
            text = f"```sparql\n{q}\n```"
        return {"text": text, "prompt_tokens": 10, "completion_tokens": 10, "finish_reason": "stop"}

    def generation_requests(self):
        return [m for m in self.requests if "Reply with their numbers only" not in m[-1][1]]

    def rerank_requests(self):
        return [m for m in self.requests if "Reply with their numbers only" in m[-1][1]]


@pytest.fixture(scope="module")
def one_hop():
    task = F.get_task(TASK)
    q = next(x for x in task.test if x.gold_query.get("path") == "directed_by")
    g = task.target.gold(q)
    return task, q, g.sparql(task.target.profile)


def _run(tmp_path, settings, *queries):
    from kgqa_lib.llm.chat import LLM, LLMCache
    from kgqa_lib.methods import Context

    backend = Scripted(*queries)
    llm = LLM(backend, "scripted", LLMCache(tmp_path / "llm.sqlite", transcripts=None))
    return backend, Context(llm=llm, settings={"task": TASK, **settings})


def _stage(res, name):
    return next(s.output for s in res.trace if s.name == name)


# ---- settings ----------------------------------------------------------------------------------------
def test_paper_defaults_and_named_deviations():
    s = F.FuSICSettings()
    assert (s.exemplars, s.show_path_values, s.context_size, s.rerank_short_lists) == (5, False, "paper", True)
    # appendix A.1.3: one retriever 5 paths / 10 relations / 10 types; two retrievers 3 / 5 / 5
    assert F.context_sizes(1) == {"path": 5, "relation": 10, "type": 10}
    assert F.context_sizes(2) == {"path": 3, "relation": 5, "type": 5}
    assert F.RERANK_K == F.rerank_sizes() == {"path": 5, "relation": 10, "type": 10}  # A.1.2: "five", "ten", "ten"
    # the sizes before issue 20, kept as a setting
    assert F.context_sizes(1, "compact") == {"path": 5, "relation": 4, "type": 2}
    assert F.context_sizes(2, "compact") == {"path": 3, "relation": 3, "type": 1}
    assert coerce_settings({"retrievers": "none", "show_path_values": "true", "context_size": "compact",
                            "rerank_short_lists": "no", "naive_entities": "1"}, "fusic") == \
        {"retrievers": "none", "show_path_values": True, "context_size": "compact", "rerank_short_lists": False,
         "naive_entities": True}
    assert F.FuSICSettings(retrievers="none").naive and F.FuSICSettings(retrievers="").naive
    assert F.make_retrievers("none", TASK, 0) == []


def test_a_path_is_shown_as_its_sparql_program():
    c = F.Candidate("path", "Casablanca → director", "wd:Q1 wdt:P57 ?x .", ("q", ()), ["Michael Curtiz"])
    assert c.display() == "SELECT DISTINCT ?x WHERE { wd:Q1 wdt:P57 ?x . }   # Casablanca → director"
    assert "Michael Curtiz" in c.display(values=True) and "SELECT" not in c.display(values=True)


def test_a_path_as_an_s_expression_walks_the_same_path_as_its_sparql_program():
    """Every candidate path of a few questions, on both mini-world schemas: its s-expression (the setting
    paths_as=logical_form with language=sexpr) executed through the s-expression converter gives the
    answers its SPARQL program gives (the topic entity aside)."""
    from kgqa_lib.methods.fusic.candidates import path_sexpr

    checked = 0
    for name in ("geo-wd>cinema-fb", "cinema-fb>geo-wd"):
        dom = F.get_task(name).target
        for p in prepared_domain(dom.name)[:6]:
            for c in p.candidates.paths[:15]:
                s_expr = c.display(profile=dom.profile).split("   # ")[0]
                assert s_expr == path_sexpr(dom.profile.compact(c.key[0]), c.key[1], dom.profile)
                by_sexpr = F.execute_query(s_expr, dom.kg, dom.profile, language="sexpr", max_answers=5000)
                by_sparql = F.execute_query(c.program(), dom.kg, dom.profile, max_answers=5000)
                topic = {dom.kg.label(c.key[0])}  # (GrailQA's converter leaves the topic out of "sharing r with e")
                assert by_sparql.ok and set(by_sexpr.answers) - topic == set(by_sparql.answers) - topic, s_expr
                checked += 1
    assert checked >= 100


def test_w_o_sparql_shows_the_paths_as_s_expressions_with_paths_as_logical_form(tmp_path, one_hop, tmp_cache):
    task, q, good = one_hop
    runs = {}
    for paths_as in ("sparql", "logical_form"):
        backend, ctx = _run(tmp_path / paths_as, {"shots": 5, "retrievers": "bm25", "language": "sexpr",
                                                  "paths_as": paths_as}, good)
        F.fusic(q, ctx)
        runs[paths_as] = backend
    for paths_as, backend in runs.items():
        gen = backend.generation_requests()[0]
        system = gen[0][1]
        turns = [c for role, c in gen if role == "user"]  # the exemplars' turns, then the question's
        paths = [ln.strip() for t in turns for ln in t.splitlines() if ln.startswith("  ")]
        assert paths and len(turns) == 6
        if paths_as == "sparql":
            assert "(as SPARQL queries)" in system and all(p.startswith("SELECT DISTINCT ?x WHERE {") for p in paths)
        else:
            assert "(as s-expressions)" in system and "SPARQL queries" not in system
            assert all(p.startswith("(JOIN ") for p in paths)
        # re-ranking reads the SPARQL programs either way (its calls are fs_dense's)
        rr = [m[-1][1] for m in backend.rerank_requests()]
        assert any("SELECT DISTINCT ?x WHERE {" in t for t in rr) and not any("(JOIN " in t for t in rr)
    assert runs["sparql"].rerank_requests() == runs["logical_form"].rerank_requests()


# ---- the generation prompt -----------------------------------------------------------------------------
def _context_of(messages):
    """The question's own part of the generation prompt (the last user turn)."""
    return messages[-1][1]


def test_prompt_shows_programs_not_values_unless_show_path_values(tmp_path, one_hop, tmp_cache):
    task, q, good = one_hop
    answer = q.answers[0]
    backend, ctx = _run(tmp_path / "a", {"shots": 0, "retrievers": "bm25"}, good)
    res = F.fusic(q, ctx)
    assert res.error is None
    prompt = _context_of(backend.generation_requests()[0])
    paths = [ln.strip() for ln in prompt.splitlines() if ln.startswith("  ")]
    assert paths and all(p.startswith("SELECT DISTINCT ?x WHERE {") for p in paths)
    assert "[e.g." not in prompt and answer not in prompt  # the one-hop answer is not handed over
    for m in backend.rerank_requests():  # re-ranking sees the programs too
        assert "[e.g." not in m[-1][1]
    exemplar_turns = [c for role, c in backend.generation_requests()[0] if role == "user"][:-1]
    assert exemplar_turns and all("[e.g." not in c for c in exemplar_turns)

    backend, ctx = _run(tmp_path / "b", {"shots": 0, "retrievers": "bm25", "show_path_values": True}, good)
    F.fusic(q, ctx)
    prompt = _context_of(backend.generation_requests()[0])
    assert "[e.g." in prompt and answer in prompt  # the behaviour before issue 20


@pytest.mark.parametrize("retrievers,sizes", [("bm25", {"Paths": 5, "Relations": 10, "Types": 10}),
                                              ("bm25,minilm", {"Paths": 3, "Relations": 5, "Types": 5})])
def test_context_sizes_and_calls_per_retriever_count(tmp_path, one_hop, tmp_cache, retrievers, sizes):
    task, q, good = one_hop
    backend, ctx = _run(tmp_path, {"shots": 5, "retrievers": retrievers, "K": 12}, good)
    res = F.fusic(q, ctx)
    n = len(retrievers.split(","))
    gen = backend.generation_requests()[0]
    prompt = _context_of(gen)
    for title, k in sizes.items():
        for i in range(1, n + 1):
            head = f"{title} (retriever {i}):"
            assert head in prompt
            if title == "Paths":
                block = prompt.split(head)[1].splitlines()[1:]
                got = next((i for i, ln in enumerate(block) if not ln.startswith("  ")), len(block))
                assert got == k  # enough candidate paths around a film to fill the context
            else:
                line = next(ln for ln in prompt.splitlines() if ln.startswith(head))
                assert 1 <= len(line[len(head):].split("; ")) <= k
    assert len([m for m in gen if m[0] == "assistant"]) == 5  # the paper's 5 exemplars
    calls = _stage(res, "calls_by_stage")
    reranks = [s.output for s in res.trace if s.name.startswith("rerank:")]
    assert len(reranks) == 3 * n and all(r.called for r in reranks)  # 3 re-rank calls per retriever
    assert calls["calls"] == {"rerank": 3 * n, "generation": 1, "feedback": 0, "total": 3 * n + 1}
    assert calls["calls"]["total"] == len(backend.requests)
    assert set(calls["rerank_calls_by_retriever"].values()) == {3}
    assert set(calls["seconds"]) == {"retrieval", "rerank", "exemplars", "generation", "feedback"}


def test_short_lists_are_not_sent_when_asked(tmp_path, one_hop, tmp_cache):
    task, q, good = one_hop
    backend, ctx = _run(tmp_path, {"shots": 0, "retrievers": "bm25", "rerank_short_lists": False}, good)
    res = F.fusic(q, ctx)
    reranks = [s.output for s in res.trace if s.name.startswith("rerank:")]
    # K = 10 candidates: only the paths (k = 5) need choosing; relations and types (k = 10) keep BM25's order
    assert [r.called for r in reranks] == [True, False, False]
    assert _stage(res, "calls_by_stage")["calls"]["rerank"] == 1 == len(backend.rerank_requests())


# ---- the naive LLM FS-ICL baseline ----------------------------------------------------------------------
def test_naive_fsicl_is_one_generation_call_plus_feedback(tmp_path, one_hop, tmp_cache):
    task, q, good = one_hop
    prof = task.target.profile
    g = task.target.gold(q)
    bad = f"SELECT ?x WHERE {{ ?x {prof.compact(g.hops[0][0])} {prof.compact(g.topics[0])} . }}"  # backwards: empty
    backend, ctx = _run(tmp_path, {"shots": 5, "retrievers": "none"}, bad, good)
    res = F.fusic(q, ctx)
    assert res.error is None and res.answers
    assert len(backend.requests) == 2 and not backend.rerank_requests()
    names = [s.name for s in res.trace]
    assert not any(n.startswith(("rerank", "link_entities", "enumerate_candidates", "retrieve")) for n in names)
    assert _stage(res, "calls_by_stage")["calls"] == {"rerank": 0, "generation": 1, "feedback": 1, "total": 2}
    first = backend.generation_requests()[0]
    assert len([m for m in first if m[0] == "assistant"]) == 5  # 5 question → SPARQL exemplars
    text = "\n".join(c for _, c in first)
    assert "Entities:" not in text and "Paths (" not in text  # no KB retrieval at all
    assert _context_of(first).strip() == f"Question: {q.question}"
    assert re.search(r"SELECT", [c for r, c in first if r == "assistant"][0])

    # feedback rounds are capped by egf_rounds: 1 + 2 calls at most
    backend, ctx = _run(tmp_path / "r", {"retrievers": "none", "egf_rounds": 2}, "INSERT DATA { ns:m.1 ns:x ns:m.2 }")
    res = F.fusic(q, ctx)
    assert len(backend.requests) == 3 and res.error == "query_rejected"
    assert _stage(res, "calls_by_stage")["calls"] == {"rerank": 0, "generation": 1, "feedback": 2, "total": 3}


def test_no_retrieval_with_entities_is_the_old_configuration(tmp_path, one_hop, tmp_cache):
    task, q, good = one_hop
    backend, ctx = _run(tmp_path, {"shots": 0, "retrievers": "", "naive_entities": True}, good)
    res = F.fusic(q, ctx)
    assert res.error is None and len(backend.requests) == 1
    prompt = _context_of(backend.generation_requests()[0])
    assert "Entities: " in prompt and "Paths (" not in prompt


# ---- exemplars: the paper's static ones, similarity as a named deviation --------------------------------
def _exemplar_questions(gen):
    """The exemplar questions of a generation prompt, in prompt order (the user turns before the last)."""
    return [c for role, c in gen if role == "user"][:-1]


def test_static_exemplars_are_the_same_for_every_question(tmp_path, tmp_cache):
    """Paper sec. 3 ("few-shot exemplars from the target"; zero-shot "randomly selected exemplars from the
    source") and sec. 5 (dynamic selection dropped): by default every question of a run gets the same
    exemplars in the same order, so its generation prompts share the system and exemplar turns."""
    assert F.FuSICSettings().exemplar_choice == "static"
    task = F.get_task(TASK)
    qs = task.test[:3]
    for shots in (5, 0):
        prompts = []
        for i, q in enumerate(qs):
            backend, ctx = _run(tmp_path / f"s{shots}-{i}", {"shots": shots, "retrievers": "none"}, "SELECT ?x WHERE {}")
            F.fusic(q, ctx)
            prompts.append(_exemplar_questions(backend.generation_requests()[0]))
        assert len(prompts[0]) == 5 and prompts[0] == prompts[1] == prompts[2]
    # few-shot: the target's first 5 shots, in the pool's order
    pool = [p.question for p in prepared_domain(
        task.target.name, tuple(x.qid for x in task.pool[:5]))]
    assert F.exemplar_order(qs[0], pool, 5, "static") == [0, 1, 2, 3, 4]
    # zero-shot: a seeded draw from the source, independent of the question and of the pool's order
    src = [p.question for p in prepared_domain(task.source.name)]
    a = F.exemplar_order(qs[0], src, 5, "static", seed=0, shots=False)
    assert a == F.exemplar_order(qs[1], src, 5, "static", seed=0, shots=False)
    assert {src[i].qid for i in a} == {list(reversed(src))[i].qid for i in
                                        F.exemplar_order(qs[0], list(reversed(src)), 5, "static", seed=0, shots=False)}
    assert a != F.exemplar_order(qs[0], src, 5, "static", seed=1, shots=False)  # another seed, another draw


def test_similarity_exemplars_are_the_closest_last(tmp_path, tmp_cache):
    """The deviation exemplar_choice=similarity: the same 5 few-shot exemplars, the closest last (right
    before the question); an unknown choice is an error."""
    task = F.get_task(TASK)
    q = task.test[0]
    backend, ctx = _run(tmp_path / "sim", {"shots": 5, "retrievers": "none", "exemplar_choice": "similarity"},
                        "SELECT ?x WHERE {}")
    F.fusic(q, ctx)
    sim = _exemplar_questions(backend.generation_requests()[0])
    backend, ctx = _run(tmp_path / "static", {"shots": 5, "retrievers": "none"}, "SELECT ?x WHERE {}")
    F.fusic(q, ctx)
    static = _exemplar_questions(backend.generation_requests()[0])
    assert sorted(sim) == sorted(static)  # few-shot: the same shots, maybe another order
    from kgqa_lib.embed.embedder import Embedder

    pool = [p.question for p in prepared_domain(
        task.target.name, tuple(x.qid for x in task.pool[:5]))]
    vecs = Embedder().encode([q.question] + [p.question for p in pool])
    closest = pool[int((vecs[1:] @ vecs[0]).argmax())].question
    assert closest in sim[-1]
    with pytest.raises(ValueError, match="exemplar choice"):
        F.exemplar_order(q, pool, 5, "random")


def _source_pool(task):
    """The zero-shot exemplar pool as :func:`exemplars_for` filters it (a gold SPARQL form)."""
    return [p for p in prepared_domain(task.source.name)
            if p.gold is not None and p.gold.sparql(task.source.profile)]


def test_bm25_exemplars_are_the_closest_by_bm25_last(tmp_path, tmp_cache):
    """exemplar_choice=bm25 (gf-LLM's and KB-Binder's dynamic selection, FuSIC paper sec. 4.1 and 5): the
    `exemplars` best by BM25 between the questions, the closest last; few-shot, the 5 target shots
    reordered; zero-shot, 5 of the whole source drawn for this question."""
    from kgqa_lib.embed.retrieval import BM25Retriever

    task = F.get_task(TASK)
    q = task.test[0]
    pool = [p.question for p in prepared_domain(task.target.name, tuple(x.qid for x in task.pool[:5]))]
    best = [r.index for r in BM25Retriever().rank(q.question, [p.question for p in pool])]
    assert F.exemplar_order(q, pool, 5, "bm25") == list(reversed(best))
    assert F.exemplar_order(q, pool, 2, "bm25") == list(reversed(best[:2]))
    prompts = {}
    for choice in ("static", "bm25"):
        backend, ctx = _run(tmp_path / choice, {"shots": 5, "retrievers": "none", "exemplar_choice": choice},
                            "SELECT ?x WHERE {}")
        F.fusic(q, ctx)
        prompts[choice] = _exemplar_questions(backend.generation_requests()[0])
    assert sorted(prompts["bm25"]) == sorted(prompts["static"])  # the same 5 shots
    assert [x.split("\n")[0] for x in prompts["bm25"]] == [f"Question: {pool[i].question}" for i in reversed(best)]
    # zero-shot: the source questions closest by BM25, not a seeded draw
    src = _source_pool(task)
    top = [r.index for r in BM25Retriever().rank(q.question, [p.question.question for p in src], k=5)]
    backend, ctx = _run(tmp_path / "zs", {"shots": 0, "retrievers": "none", "exemplar_choice": "bm25"},
                        "SELECT ?x WHERE {}")
    F.fusic(q, ctx)
    got = [x.split("\n")[0] for x in _exemplar_questions(backend.generation_requests()[0])]
    assert got == [f"Question: {src[i].question.question}" for i in reversed(top)]
    other = next(x for x in task.test if x.question.split()[-1] != q.question.split()[-1])
    assert F.exemplar_order(q, [p.question for p in src], 5, "bm25", shots=False) != \
        F.exemplar_order(other, [p.question for p in src], 5, "bm25", shots=False)  # each question its own


@pytest.mark.parametrize("n", [0, 1, 3])
def test_fewer_exemplars_show_the_first_n_shots_with_the_same_context(tmp_path, one_hop, tmp_cache, n):
    """The exemplar-count cells (sec. 4.2.2): exemplars=n shows the pool's first n of the 5 static shots
    (0: no exemplar turn), each turn as the 5-exemplar prompt shows it and in its order, with the
    question's context unchanged."""
    task, q, good = one_hop
    prompts = {}
    for k in (n, 5):
        backend, ctx = _run(tmp_path / str(k), {"shots": 5, "retrievers": "bm25", "exemplars": k}, good)
        F.fusic(q, ctx)
        prompts[k] = backend.generation_requests()[0]
    few, five = prompts[n], prompts[5]
    assert len([m for m in few if m[0] == "assistant"]) == n
    first = {f"Question: {x.question}" for x in task.pool[:n]}
    assert _exemplar_questions(few) == [t for t in _exemplar_questions(five) if t.split("\n")[0] in first]
    assert few[0] == five[0] and _context_of(few) == _context_of(five)


def test_gf_llm_is_one_call_on_the_retrievers_own_top_k_in_s_expressions(tmp_path, one_hop, tmp_cache):
    """The gf-LLM cells' settings (FuSIC paper sec. 4.1, appendix A.3, Limitations: the supervised
    retriever's context as retrieved, s-expressions, one LLM call, BM25 exemplars), here with BM25 as the
    retriever (the cells: dense): no re-ranking call, no feedback even when the query fails, the paths
    shown are the retriever's own top 5 as s-expressions."""
    task, q, good = one_hop
    gf = {"shots": 5, "retrievers": "bm25", "rerank": False, "egf_rounds": 0, "language": "sexpr",
          "paths_as": "logical_form", "exemplar_choice": "bm25"}
    backend, ctx = _run(tmp_path, gf, "(JOIN (R ns:nothing.here) ns:m.0)")
    res = F.fusic(q, ctx)
    assert len(backend.requests) == 1 and not backend.rerank_requests() and res.error
    assert _stage(res, "calls_by_stage")["calls"] == {"rerank": 0, "generation": 1, "feedback": 0, "total": 1}
    gen = backend.generation_requests()[0]
    assert "(as s-expressions)" in gen[0][1] and len([m for m in gen if m[0] == "assistant"]) == 5
    shown = [ln.strip().split("   # ")[0] for ln in _context_of(gen).splitlines() if ln.startswith("  ")]
    [paths] = [r for r in _stage(res, "retrieve") if r.aspect == "path"]
    prof = task.target.profile
    assert shown == [c.display(profile=prof).split("   # ")[0] for c, _ in paths.items[:5]]
    assert all(x.startswith("(JOIN ") for x in shown)
