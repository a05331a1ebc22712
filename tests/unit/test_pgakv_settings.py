"""PG&AKV and QSM settings of issue 23, with a scripted LLM on the mini-world: the paper's Table 4
"Pseudo-Graph" variant (kg_context=none: no KG triple reaches any prompt) and G_base built without
the dataset's topic-entity annotations (use_topic_entities=false, link_question=true)."""

import pytest

from kgqa_lib.data.datasets import Question
from kgqa_lib.methods import pgakv as P

SKETCH = """Plan: the capital.
```cypher
CREATE (d:Country {name: 'The Danish realm'})-[:CAPITAL]->(c:City {name: 'Kobenhaven city'})
```"""


class Scripted:
    """Replies by prompt kind (pseudo-graph, verification, answer) and keeps every prompt's messages."""

    def __init__(self, answer="{Copenhagen}"):
        self.answer, self.calls = answer, []

    def complete(self, request):
        text = "\n".join(content for _, content in request.messages)
        self.calls.append(text)
        if "cypher" in text.lower() and "Question:" in request.messages[-1][1] and len(self.calls) == 1:
            reply = SKETCH
        elif "ground" in text.lower() and len(self.calls) == 2:
            reply = "(Denmark | capital | Copenhagen)"
        else:
            reply = self.answer
        return {"text": reply, "prompt_tokens": 5, "completion_tokens": 2, "finish_reason": "stop"}


class NoKG:
    """A knowledge graph that fails the test when anything touches it."""

    def __getattr__(self, name):
        raise AssertionError(f"the KG was used: {name}")


def _ctx(backend, tmp_path, kg, embedder, **settings):
    from kgqa_lib.llm.chat import LLM, LLMCache
    from kgqa_lib.methods import Context

    return Context(llm=LLM(backend, "scripted", LLMCache(tmp_path / "llm.sqlite", transcripts=None)), kg=kg,
                   embedder=embedder, settings={"kg": "miniworld", **settings})


@pytest.fixture(scope="module")
def kg():
    from kgqa_lib.kg.sources import load_named

    return load_named("miniworld")


Q = Question("mw-simple-000", "What is the capital of Denmark?", ["Copenhagen"], ["Denmark"])


def test_pseudo_graph_variant_answers_from_the_sketch_alone(tmp_path, tmp_cache):
    llm = Scripted()
    res = P.pgakv(Q, _ctx(llm, tmp_path, NoKG(), NoKG(), kg_context="none"))
    assert [s.name for s in res.trace] == ["generate_pseudo_graph", "cypher_to_triples", "answer", "parse_answers"]
    assert len(llm.calls) == 2 and res.answers == ["Copenhagen"]
    sketch = P.format_triples([("The Danish realm", "capital", "Kobenhaven city")])
    assert sketch in llm.calls[1]  # the answer prompt holds the pseudo-graph (and the KG was never touched)


def test_pseudo_graph_variant_sees_no_kg_triple_even_when_a_kg_is_given(tmp_path, tmp_cache, kg):
    from kgqa_lib.embed.embedder import Embedder

    full, none = Scripted(), Scripted()
    res = P.pgakv(Q, _ctx(full, tmp_path / "a", kg, Embedder(), threshold=0.0, verify=False))
    ground = next(s.output for s in res.trace if s.name == "prune").triples
    assert ("Denmark", "capital", "Copenhagen") in ground
    assert all(f"({s} | {r} | {o})" in full.calls[1] for s, r, o in ground)  # without kg_context=none: KG facts shown
    res = P.pgakv(Q, _ctx(none, tmp_path / "b", kg, Embedder(), threshold=0.0, verify=False, kg_context="none"))
    assert "semantic_query" not in [s.name for s in res.trace] and len(none.calls) == 2
    assert not any(f"({s} | {r} | {o})" in c for s, r, o in ground for c in none.calls)  # with it: none


def test_settings_validate():
    from kgqa_lib.methods import SettingsError, coerce_settings

    assert coerce_settings({"kg_context": "none", "link_question": "true"}, "pgakv") == {
        "kg_context": "none", "link_question": True}
    assert coerce_settings({"use_topic_entities": "false", "link_question": "yes"}, "qsm") == {
        "use_topic_entities": False, "link_question": True}
    with pytest.raises(SettingsError, match="kg_context"):
        coerce_settings({"kg_context": "wikidata"}, "pgakv")


def test_question_entities_link_without_annotations(kg):
    labels = [kg.label(e) for e in P.question_entities("Who directed Casablanca?", kg)]
    assert labels == ["Casablanca", "Casablanca"]  # the film and the city: pruning picks among namesakes
    assert [kg.label(e) for e in P.question_entities("What is the capital of Denmark?", kg)] == ["Denmark"]


@pytest.mark.parametrize("method", ["qsm", "pgakv"])
def test_g_base_without_annotations(method, tmp_path, tmp_cache, kg):
    """Without the annotation and with a sketch whose names match no label, nothing is retrieved;
    linking the question's names finds Denmark again, as the annotation did."""
    from kgqa_lib.embed.embedder import Embedder

    fn, stage = (P.qsm, "match_question") if method == "qsm" else (P.pgakv, "semantic_query")
    emb = Embedder()

    def seeds(tag, **settings):
        res = fn(Q, _ctx(Scripted(), tmp_path / tag, kg, emb, **settings))
        out = next(s.output for s in res.trace if s.name == stage)
        return out.seeds, [tuple(h["triple"]) for h in out.hits]

    annotated, hits = seeds("a")
    assert annotated == ["Denmark"] and ("Denmark", "capital", "Copenhagen") in hits
    assert seeds("b", use_topic_entities=False) == ([], [])
    linked, hits = seeds("c", use_topic_entities=False, link_question=True)
    assert linked == ["Denmark"] and ("Denmark", "capital", "Copenhagen") in hits
