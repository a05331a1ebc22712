"""Keqing on GrailQA over the shared Freebase fragment: chains from s-expressions, the pool/test
split (disjoint, nothing of a test question in the bank or the exemplars), the template bank, and
the benchmark table's stripped records."""

from __future__ import annotations

import json

import pytest

from kgqa_lib.methods import keqing as K


# ---- chains from s-expressions (no data) ---------------------------------------------------------
@pytest.mark.parametrize("sexpr, want", [
    ("(AND x.play (JOIN x.play.productions m.0abc))", ("m.0abc", ("^x.play.productions",))),
    ("(AND a.b (JOIN (R a.b.c) m.01))", ("m.01", ("a.b.c",))),
    ("(AND a.b (JOIN a.b.c (JOIN (R d.e.f) m.01)))", ("m.01", ("d.e.f", "^a.b.c"))),  # innermost hop first
    ("(JOIN (R a.b.c) g.1x)", ("g.1x", ("a.b.c",))),
])
def test_a_relation_chain_from_one_entity(sexpr, want):
    assert K.sexpr_chain(sexpr) == want


@pytest.mark.parametrize("sexpr", [
    "(AND a.b (AND (JOIN a.b.c m.01) (JOIN a.b.c m.02)))",  # a second entity
    "(AND a.b (JOIN a.b.c (AND d.e (JOIN d.e.f m.01))))",  # a class inside
    "(COUNT (AND a.b (JOIN a.b.c m.01)))",
    "(ARGMAX (AND a.b (JOIN a.b.c m.01)) a.b.d)",
    "(AND a.b (le a.b.c 1990^^http://www.w3.org/2001/XMLSchema#gYear))",
    '(AND a.b (JOIN a.b.c "Paris"))',  # starts from a literal
    "(AND a.b m.01)",
    "(AND a.b (JOIN a.b.c m.01)",  # unbalanced
    "",
])
def test_constraints_and_aggregations_have_no_chain(sexpr):
    assert K.sexpr_chain(sexpr) is None


def test_bracket_mention_whole_words_any_case():
    assert K.bracket_mention("which play is staged by the globe players?", "The Globe Players") == \
        "which play is staged by [the globe players]?"
    assert K.bracket_mention("what is weighing 3 g?", "g") == "what is weighing 3 [g]?"
    assert K.bracket_mention("measured in kilograms?", "Kilogram") is None  # a plural is no verbatim mention
    assert K.bracket_mention("anything", " ") is None


def test_the_instructions_name_movies_only_on_the_movie_kgs():
    from kgqa_lib.llm.prompting import load_prompt

    for name in ("keqing_decompose", "keqing_chain"):
        prompt = load_prompt(name)
        for kg in ("metaqa", "miniworld"):  # the prompt files as they are: recorded calls and config hashes hold
            assert K.domain_system(prompt, kg) == prompt.system
        neutral = K.domain_system(prompt, K.GRAILQA_KG)
        assert "movie" not in neutral and neutral.startswith(("You split a question into", "You map a question to"))
    broken = type(prompt)("x", "You map a film question to …", "", "0")
    with pytest.raises(ValueError, match="no longer says"):
        K.domain_system(broken, "metaqa")


# ---- the split and the bank (KGQA_DATA_DIR) ------------------------------------------------------
@pytest.fixture
def grailqa(data_dir_or_skip):
    if not (data_dir_or_skip / "grailqa" / "grailqa_ToG_1000.json").exists():
        pytest.skip("GrailQA sample not in KGQA_DATA_DIR")
    return K.pool_for(K.GRAILQA_KG), K.keqing_dataset("grailqa").questions


def test_split_sizes_and_disjointness(grailqa):
    """Measured (the module docstring): pool 600, test 400; 901 chain questions; 41 test questions
    without a chain."""
    from kgqa_lib.data.datasets import load_dataset

    pool, test = grailqa
    assert (len(pool), len(test)) == (600, 400)
    assert not {q.qid for q in pool} & {q.qid for q in test}
    assert len({q.qid for q in pool} | {q.qid for q in test}) == len(load_dataset("grailqa:fragment")) == 1000
    assert [q.qid for q in K.keqing_dataset("grailqa", "pool").questions] == [q.qid for q in pool]
    assert sum(bool(K.gold_chain(q)) for q in pool + test) == 901
    assert sum(not q.metadata["chain"] for q in test) == 41
    for lv in ("i.i.d.", "compositional", "zero-shot"):  # stratified by level: 60 % of each in the pool
        n_pool = sum(q.metadata["level"] == lv for q in pool)
        assert abs(n_pool - 0.6 * (n_pool + sum(q.metadata["level"] == lv for q in test))) <= 1, lv
    with pytest.raises(ValueError):
        K.keqing_dataset("grailqa", "1hop")


def test_chains_reach_the_recomputed_gold(grailqa):
    """The chain read from the s-expression, walked from the topic entity on the fragment, gives the
    gold answers (measured: 900 of 901 exactly; the other a superset, its answer class dropped)."""
    from kgqa_lib.data.grailqa import FB
    from kgqa_lib.kg.sources import load_named

    kg = load_named(K.GRAILQA_KG)
    exact = superset = 0
    for q in grailqa[0] + grailqa[1]:
        if not q.metadata["chain"]:
            assert K.gold_chain(q) == () and "path" not in q.gold_query
            continue
        eid, chain = K.sexpr_chain(q.gold_query["s_expression"])
        name = next(n["friendly_name"] for n in q.metadata["graph_query"]["nodes"] if n.get("id") == eid)
        assert chain == K.gold_chain(q) and q.topic_entities == [name]
        got = {K._label(kg, v) for v in kg.follow_path(FB + eid, list(chain))}
        exact += got == set(q.answers)
        superset += got > set(q.answers)
    assert exact >= 895 and exact + superset == 901


def test_nothing_of_a_test_question_reaches_the_bank_or_the_exemplars(grailqa):
    pool, test = grailqa
    assert not {q.question.lower() for q in pool} & {q.question.lower() for q in test}  # disjoint by text too
    bank = K.bank_for(K.GRAILQA_KG)
    from_pool = {(K.mask_question(q.metadata["raw"]), K.gold_chain(q)) for q in pool
                 if len(K.gold_chain(q)) == 1 and "raw" in q.metadata}
    assert all(t.source == "pool" for t in bank.templates)  # no mini-world phrasings
    for t in bank.templates:  # every template, and each of its chains, is a pool question's
        assert all((t.text, c) in from_pool for c in t.chains), t.text
    test_only = {K.gold_chain(q) for q in test if len(K.gold_chain(q)) == 1} - {c for _, c in from_pool}
    assert test_only and not test_only & set(bank.canonical)  # relations only test questions use: not in the bank
    covered = [q for q in test if q.metadata["chain"] and all((h,) in bank.canonical for h in K.gold_chain(q))]
    assert (len(bank), len(bank.canonical), len(covered)) == (388, 267, 170)  # the module docstring's numbers
    usable = [p for p in pool if K.gold_decomposition(p, bank)]
    assert len(usable) == 432 and all(p.metadata["chain"] for p in usable)  # exemplars: pool chain questions
    pool_ids = {p.qid for p in pool}
    for q in test[::20]:  # (the similarity selection, the default, is checked on a run below)
        shots = K.select_exemplars(q, pool, bank, None, n=4, by="fixed")
        assert len(shots) == 4 and all(p.qid in pool_ids for p, _ in shots)


# ---- the pipeline and the benchmark table's records ---------------------------------------------
class Scripted:
    """Decomposes a question as the table says; any other prompt gets prose (a malformed selection,
    which falls back to every candidate; a one-sentence response)."""

    def __init__(self, decompositions: dict[str, str]) -> None:
        self.decompositions = decompositions
        self.systems: list[str] = []

    def complete(self, request):
        self.systems.append(request.messages[0][1])
        last = request.messages[-1][1]
        q = last.split("Question:", 1)[-1].strip()
        text = self.decompositions.get(q, "The steps found it.")
        return {"text": text, "prompt_tokens": 10, "completion_tokens": 10, "finish_reason": "stop"}


def test_a_run_record_is_stripped_of_text_and_names(grailqa, tmp_path, tmp_cache):
    from kgqa_lib.bench import get_table
    from kgqa_lib.bench.keqing_grailqa import gold_chain_score, strip
    from kgqa_lib.data.datasets import Dataset
    from kgqa_lib.embed.embedder import Embedder
    from kgqa_lib.evaluate.runner import read_records, run
    from kgqa_lib.kg.sources import load_named
    from kgqa_lib.llm.chat import LLM, LLMCache
    from kgqa_lib.methods import Context

    pool, test = grailqa
    bank = K.bank_for(K.GRAILQA_KG)
    kg = load_named(K.GRAILQA_KG)
    covered = next(q for q in test if len(K.gold_chain(q)) == 1 and K.gold_decomposition(q, bank)
                   and gold_chain_score(q, kg)["hits@1"] == 1.0)  # (not one whose answer shares the topic's name)
    other = next(q for q in test if not q.metadata["chain"])
    table = {covered.question: K.format_decomposition(K.gold_decomposition(covered, bank))}
    scripted = Scripted(table)
    llm = LLM(scripted, "scripted", LLMCache(tmp_path / "llm.sqlite", transcripts=None))
    ctx = Context(llm=llm, kg=kg, embedder=Embedder(), settings={"kg": K.GRAILQA_KG})
    out = tmp_path / "run.jsonl"
    run("keqing", Dataset("keqing:grailqa", [covered, other], K.GRAILQA_KG), ctx, out, progress=False)
    recs = read_records(out)
    assert recs[0]["metrics"]["hits@1"] == 1.0, recs[0]["prediction"]
    decomposition_systems = [m for m in scripted.systems if m.startswith("You split a question")]
    assert len(decomposition_systems) == 2  # one per question, neither about movies
    assert all(m.startswith("You split a question into simple") and "movie" not in m for m in decomposition_systems)
    shots = next(s["output"] for s in recs[0]["trace"] if s["name"] == "select_exemplars")
    assert shots and set(shots) <= {p.question for p in pool} and covered.question not in shots
    stripped = [strip(r) for r in recs]
    g = stripped[0]["grailqa"]
    assert g["chain"] and g["covered"] and g["hops"] == 1 and g["level"] == covered.metadata["level"]
    assert g["decomposition"] == {"chain_correct": True, "seed_correct": True, "correct": True}
    assert g["gold_chain"]["hits@1"] == 1.0
    # the default links the topics from the text (a `topics` stage); the stripped record counts what it linked
    topics = next(s["output"] for s in recs[0]["trace"] if s["name"] == "topics")
    assert topics["source"] == "linked" and topics["mentions"]
    assert g["topics"]["chain_topic_linked"] and g["topics"]["gold_linked"] <= g["topics"]["gold"] == 1
    assert stripped[1]["grailqa"] == {"level": other.metadata["level"], "chain": False, "hops": 0,
                                      "topics": stripped[1]["grailqa"]["topics"]}
    assert set(stripped[1]["grailqa"]["topics"]) == {"linked", "gold", "gold_linked"}  # counts only
    # no text and no names besides the prediction, which records keep since issue 46 §4 (the method's own
    # output: a right answer names the gold)
    assert [r["prediction"] for r in stripped] == [r["prediction"] for r in recs]
    text = json.dumps([{k: v for k, v in r.items() if k != "prediction"} for r in stripped], ensure_ascii=False).lower()
    for q in (covered, other):
        for secret in [q.question, *q.answers, *q.topic_entities]:
            assert len(secret) < 5 or secret.lower() not in text, secret
    assert "not run yet" in get_table("keqing_grailqa").report(lambda cell: [])


def _stripped(qid, level, hits, f1, chain=True, covered=True, right=True):
    g = {"level": level, "chain": chain, "hops": 1 if chain else 0}
    if chain:
        g.update(covered=covered, decomposition={"chain_correct": right, "seed_correct": True, "correct": right},
                 gold_chain={"hits@1": 1.0, "f1": 1.0})
    llm = {"calls": 3, "prompt_tokens": 500, "completion_tokens": 100, "recorded_seconds": 9.0, "cache_hits": 0}
    return {"qid": qid, "grailqa": g, "metrics": {"hits@1": hits, "f1": f1},
            "prediction": ["(answered)"] if hits else [], "seconds": 10.0, "llm": llm,
            "stages": {"calls": {"decompose": 1, "reasoning": 1, "respond": 1}},
            "trace": [{"name": "decompose", "output": {"error": None}}]}


def test_report_from_stripped_records_by_level_and_kind():
    """The report reads only the stripped fields (no data): rows by level, chain / non-chain, covered."""
    from kgqa_lib.bench.keqing_grailqa import report

    recs = [_stripped("a", "i.i.d.", 1.0, 1.0), _stripped("b", "zero-shot", 0.0, 0.0, covered=False, right=False),
            _stripped("c", "compositional", 0.0, 0.5, chain=False), _stripped("d", "zero-shot", 1.0, 1.0)]
    text = report(lambda cell: recs)
    rows: dict[str, str] = {}
    for line in text.splitlines():  # the first table's rows (the decomposition table has an `all` row too)
        if line.startswith("| "):
            rows.setdefault(line.split(" | ")[0].lstrip("| "), line)
    assert rows["all"].startswith("| all | 4 | 1.000 | 0.500 [") and "| 0.778 (0.725) | 0.560 (0.506) |" in rows["all"]
    assert rows["zero-shot"].startswith("| zero-shot | 2 | 0.500 | 0.500 [") and "0.747 (0.675)" in rows["zero-shot"]
    assert rows["non-chain"].startswith("| non-chain | 1 | 0.250 | 0.000 [0.000, 0.000] | 0.500 [0.500, 0.500] | — |")
    assert rows["— covered"].startswith("| — covered | 2 | 0.500 | 1.000 [1.000, 1.000] |")
    assert "| all | 3 | 0.667 [" in text  # decomposition: two of the three chain questions right
    assert "| 4 | 3.00 (1.00 + 1.00 + 1.00) | 600 | 10.00 / 10.00 | 0 | 2 |" in text
    assert "not run yet" not in text


def test_report_shows_the_linked_default_and_the_oracle_beside_it():
    """Two cells: linked topics (the default) and the ORACLE (`topics=oracle`), each labelled; a cell not
    run reads `not run yet`; with both, the paired linked − oracle difference."""
    from kgqa_lib.bench import get_table
    from kgqa_lib.bench.keqing_grailqa import LINKED, ORACLE, report

    t = get_table("keqing_grailqa")
    assert [c.name for c in t.cells][:2] == [LINKED, ORACLE]
    assert "topics" not in " ".join(t.cells[0].args) and ("--set", "topics=oracle") == t.cells[1].args[4:6]
    assert t.provenance and ORACLE in t.provenance  # the oracle cell's records predate the setting
    recs = [_stripped("a", "i.i.d.", 1.0, 1.0), _stripped("b", "zero-shot", 0.0, 0.0)]
    only_oracle = report(lambda cell: recs if cell == ORACLE else [])
    rows = [line for line in only_oracle.splitlines() if line.startswith(("| linked", "| ORACLE"))]
    assert rows[0].startswith(f"| linked (default) | `{LINKED}` | 0 | not run yet |")
    assert rows[1].startswith(f"| ORACLE: gold topic | `{ORACLE}` | 2 | 0.500 [")
    assert "## ORACLE topics (`topics=oracle`" in only_oracle and "not run yet (keqing_grailqa.jsonl)" in only_oracle
    linked = [dict(r, grailqa=dict(r["grailqa"], topics={"linked": 1, "gold": 1, "gold_linked": 1,
                                                          "chain_topic_linked": r["qid"] == "a"})) for r in recs]
    linked[1]["metrics"] = {"hits@1": 1.0, "f1": 1.0}
    both = report(lambda cell: recs if cell == ORACLE else linked)
    row = next(line for line in both.splitlines() if line.startswith("| linked (default)"))
    assert "| 1/2 | +50.0 [" in row and "not run yet" not in both


def test_report_shows_the_dense_supplement_beside_the_linked_default():
    """The third cell: the default (linked topics) with the dense supplement, its paired difference against
    the linked default, its details and what the supplement gave; `not run yet` without records, `partial k/N`
    (unscored) while it runs."""
    from kgqa_lib.bench import get_table
    from kgqa_lib.bench.keqing import DENSE_N
    from kgqa_lib.bench.keqing_grailqa import DENSE, LINKED, report

    t = get_table("keqing_grailqa")
    assert [c.name for c in t.cells] == [LINKED, "keqing_grailqa_oracle", DENSE]
    assert t.cell(DENSE).args == ("--sample", "200", "--llm", "local", "--set", f"dense_supplement={DENSE_N}",
                                  "--no-transcripts")
    assert t.cell(LINKED).args == ("--sample", "200", "--llm", "local", "--no-transcripts")  # the default, unchanged
    empty = report(lambda cell: [])
    assert f"| linked + dense supplement | `{DENSE}` | 0 | not run yet |" in empty
    assert f"## Linked topics with the dense supplement (sec. 3.2, `dense_supplement={DENSE_N}`)" in empty
    linked = [_stripped(f"{x}{i}", lv, h, h) for i in range(100) for x, lv, h in (("a", "i.i.d.", 0.0),
                                                                                  ("b", "zero-shot", 1.0))]
    dense = [dict(r, metrics={"hits@1": 1.0, "f1": 1.0},
                  reasoning=[{"mode": "select", "n_answers": 1, "dense": 4,
                              "dense_selected": int(r["qid"].startswith("a"))}])
             for r in linked]
    running = report(lambda cell: {LINKED: linked, DENSE: dense[:2]}.get(cell, []))  # 2 of its 200: still running
    row = next(line for line in running.splitlines() if line.startswith("| linked + dense supplement"))
    assert f"| `{DENSE}` | 0 | partial 2/200 |" in row and "The supplement:" not in running
    text = report(lambda cell: {LINKED: linked, DENSE: dense}.get(cell, []))
    row = next(line for line in text.splitlines() if line.startswith("| linked + dense supplement"))
    assert f"| `{DENSE}` | 200 | 1.000 [" in row and "| +50.0 [" in row
    assert "The supplement: 4.0 supplement candidates in 200 sub-questions; 100 of their 200 answers from it; 100 of " \
           "200 questions answered with one." in text
    # the notebook's reading: the caveat always; the answers once the cell is complete
    from kgqa_lib.bench.keqing_grailqa import dense_reading

    said = dense_reading(lambda cell: {LINKED: linked, DENSE: dense[:2]}.get(cell, []))
    assert said.startswith("On this fragment the supplement is flattered:") and "Answers from the supplement" not in said
    said = dense_reading(lambda cell: {LINKED: linked, DENSE: dense}.get(cell, [])).splitlines()
    assert said[1].startswith("Answers from the supplement: 100 of the 200 questions this cell answers right at Hits@1 "
                              "hold a supplement candidate among their final answers; 100 of the 100 it answers right")
