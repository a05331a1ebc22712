"""PG&AKV stages that need no LLM: Cypher → triples (Neo4j semantics, repair of bad lines),
plan/Cypher splitting, triple parsing, two-step pruning and the Self-Consistency vote."""

from kgqa_lib.methods.pgakv import (PseudoGraph, Retrieval, cypher_to_triples, majority_vote, most_central,
                                    parse_triples, prune, split_plan_and_cypher)

LLM_STYLE = """// the film and its director
CREATE (f:Film {name: 'Inception'}), (d:Person {name: 'Christopher Nolan'})
CREATE (f)-[:DIRECTED_BY]->(d)
CREATE (f)-[:RELEASED_IN {country: 'US'}]->(:Year {name: '2010'});
MERGE (a:Person {name: 'Leonardo DiCaprio'});
MERGE (a:Person {name: 'Leonardo DiCaprio'});
MATCH (f:Film {name: 'Inception'}), (a:Person {name: 'Leonardo DiCaprio'}) CREATE (f)-[:STARRED]->(a);
CREATE (`Les Mis`:`Film Title` {name: 'Les Misérables', year: 2012});
CREATE (g:Genre {name: 'Sci-fi')
CREATE (f2:Film {name: 'Memento'})-[:DIRECTED_BY]->(d2:Person {name: 'Christopher Nolan'})
"""


def test_cypher_with_neo4j_semantics_and_a_syntax_error():
    pg = cypher_to_triples(LLM_STYLE)
    assert ("Inception", "directed by", "Christopher Nolan") in pg.triples
    assert ("Inception", "released in", "2010") in pg.triples
    assert ("Inception", "starred", "Leonardo DiCaprio") in pg.triples  # MERGE found the one node MATCH needs
    assert ("Les Misérables", "year", "2012") in pg.triples  # backtick labels; properties become triples
    assert ("Memento", "directed by", "Christopher Nolan") in pg.triples  # the line after the bad one survives
    assert pg.nodes.count("Leonardo DiCaprio") == 1
    assert pg.failed_statements == 1 and pg.dropped_lines == ["CREATE (g:Genre {name: 'Sci-fi')"]
    assert "line 1" in pg.errors[0] and pg.error is None


def test_merge_dedupes_create_duplicates():
    from cypherast.executor import Graph
    import cypherast

    g = Graph()
    for stmt in ["MERGE (a:P {name: 'X'})", "MERGE (a:P {name: 'X'})", "CREATE (b:P {name: 'Y'})", "CREATE (b:P {name: 'Y'})"]:
        list(cypherast.run(stmt, graph=g, read="neo4j"))
    names = sorted(n.props["name"] for n in g.nodes.values())
    assert names == ["X", "Y", "Y"]


def test_unparseable_cypher_is_an_error_not_a_crash():
    pg = cypher_to_triples("CREATE (a:Person {name: 'Ada')-[:KNOWS]->(b")
    assert pg.triples == [] and pg.error == "cypher_error" and pg.errors
    assert cypher_to_triples("").error == "no_cypher"


def test_split_plan_and_cypher():
    assert split_plan_and_cypher("Plan: the director.\nCypher:\n```cypher\nCREATE (a {name: 'x'})\n```\nthanks") == (
        "the director.", "CREATE (a {name: 'x'})")
    plan, cypher = split_plan_and_cypher("We need X.\nCREATE (a:A {name: 'x'})-[:R]->(b:B {name: 'y'})\nThat is all.")
    assert plan == "We need X." and cypher.startswith("CREATE") and "That is all" not in cypher


def test_parse_triples_counts_other_lines():
    triples, bad = parse_triples("(Norway | population | 5380000 (2020))\n- (Norway | capital | Oslo)\nSome prose.\n")
    assert triples == [("Norway", "population", "5380000 (2020)"), ("Norway", "capital", "Oslo")] and bad == 1


def test_two_step_pruning():
    pg = PseudoGraph("", "", triples=[("A", "r", "x"), ("B", "r", "y")])
    hits = ([{"pseudo": 0, "triple": ("A", "r", f"a{i}"), "subject": "iA", "score": 0.9} for i in range(4)]
            + [{"pseudo": 1, "triple": ("B", "r", f"b{i}"), "subject": "iB", "score": 0.6} for i in range(3)]
            + [{"pseudo": 1, "triple": ("C", "r", "c"), "subject": "iC", "score": 0.99}])
    g = prune(Retrieval([], 8, hits), pg, threshold=0.7)
    assert g.k == 2  # two subjects in the pseudo-graph
    kept = {s["label"]: s["kept"] for s in g.subjects}
    assert kept == {"A": True, "B": False, "C": False}  # B under the threshold, C not in the top-k by count
    assert g.triples[0] == ("A", "r", "a0") and all(t[0] == "A" for t in g.triples)


def test_majority_vote_and_central_sample():
    answers, votes = majority_vote([["Paris"], ["paris"], ["Lyon"]])
    assert answers == ["Paris"] and votes == {"paris": 2, "lyon": 1}
    assert majority_vote([[], []]) == ([], {})
    assert most_central(["the Danube flows to the Black Sea", "the Danube reaches the Black Sea", "cats"]) in (0, 1)


def test_prompts_with_turns_become_a_dialogue():
    from kgqa_lib.llm.prompting import load_prompt

    msgs = load_prompt("pgakv_pseudo").messages(question="Who directed Alien?")
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert msgs[-1]["content"] == "Question: Who directed Alien?"
    assert msgs[2]["content"].startswith("Plan:") and "```cypher" in msgs[2]["content"]
    # a prompt without turn markers stays one system and one user message
    assert [m["role"] for m in load_prompt("io").messages(question="x")] == ["system", "user"]


def test_cypher_statistics_counts_the_stage_outputs():
    from kgqa_lib.methods.pgakv import cypher_statistics

    def rec(cypher):
        return {"trace": [{"name": "cypher_to_triples", "output": cypher_to_triples(cypher).as_dict()}]}

    stats = cypher_statistics([rec(LLM_STYLE), rec(""), rec("CREATE (a:Person {name: 'Ada')")])
    assert stats["outputs"] == 3 and stats["with >=1 triple"] == 1
    assert stats["no Cypher in reply"] == 1 and stats["Cypher but no triples"] == 1
    assert stats["statements repaired line by line"] == 2 and stats["lines dropped"] == 2


def _record(gold, sketch, hits, verified, prediction):
    """A PG&AKV run record as the runner writes it, reduced to what the analysis reads."""
    pg = PseudoGraph("", "CREATE ...", triples=sketch)
    ground = prune(Retrieval([], len(hits), hits), pg)
    hit = 1.0 if prediction and prediction[0] in gold else 0.0
    return {"qid": "q", "gold": gold, "metrics": {"hits@1": hit}, "trace": [
        {"name": "cypher_to_triples", "output": pg.as_dict()},
        {"name": "semantic_query", "output": Retrieval([], len(hits), hits).as_dict()},
        {"name": "prune", "output": ground.as_dict()},
        {"name": "verify", "output": {"triples": [list(t) for t in verified]}},
    ]}


def _hits(subject, triples, score):
    return [{"pseudo": 0, "triple": t, "subject": subject, "score": score} for t in triples]


def test_attribute_error_names_the_first_stage_that_lost_the_gold_answer():
    from kgqa_lib.evaluate.pgakv_analysis import attribute_error, gold_funnel

    sketch = [("Georgia", "currency", "Lari")]
    good = _hits("iGE", [("Georgia", "currency", "Georgian lari"), ("Georgia", "capital", "Tbilisi")], 0.8)
    weak = _hits("iGE", [("Georgia", "currency", "Georgian lari"), ("Georgia", "capital", "Tbilisi")], 0.5)
    gold = ["Georgian lari"]
    right = _record(gold, sketch, good, [("Georgia", "currency", "Georgian lari")], ["Georgian lari"])
    assert attribute_error(right) is None and gold_funnel(right) == {"G_p": False, "G_t": True, "G_g": True, "G_f": True}
    assert attribute_error(_record(gold, [], good, [], [])) == "Cypher"
    assert attribute_error(_record(gold, sketch, _hits("iX", [("X", "r", "y")], 0.9), sketch, ["Lari"])) == "linking/retrieval"
    assert attribute_error(_record(gold, sketch, weak, sketch, ["Lari"])) == "pruning"  # mean 0.5 < 0.7
    dropped = _record(gold, sketch, good, sketch, ["Lari"])
    assert attribute_error(dropped) == "verification"  # G_g had it, G_f does not
    kept_but_missed = _record(gold, sketch, good, [("Georgia", "currency", "Georgian lari")], ["Tbilisi"])
    assert attribute_error(kept_but_missed) == "answering"
    # the paper's counterfactual reading: right without verification → the verifier introduced the error
    assert attribute_error(kept_but_missed, no_verify={"qid": "q", "metrics": {"hits@1": 1.0}}) == "verification"
    assert attribute_error(dropped, no_verify={"qid": "q", "metrics": {"hits@1": 0.0}}) == "answering"


def test_pruning_sweep_rescores_recorded_retrieval_without_the_llm():
    from kgqa_lib.evaluate.pgakv_analysis import pruning_sweep
    from kgqa_lib.methods.pgakv import reprune

    sketch = [("Georgia", "currency", "Lari")]
    hits = (_hits("iGE", [("Georgia", "capital", "Tbilisi"), ("Georgia", "area", "69700")], 0.55)
            + _hits("iGE", [("Georgia", "currency", "Georgian lari")], 0.75)
            + _hits("iAZ", [("Azerbaijan", "currency", "Azerbaijani manat")], 0.6))
    rec = _record(["Georgian lari"], sketch, hits, sketch, ["Lari"])
    assert reprune(rec).triples == []  # mean 0.617 < 0.7: the paper's setting drops Georgia
    assert ("Georgia", "currency", "Georgian lari") in reprune(rec, threshold=0.6).triples
    assert {s["label"] for s in reprune(rec, threshold=0.0, extra_k=1).subjects if s["kept"]} == {"Georgia", "Azerbaijan"}
    rows = {(r["k"], r["threshold"]): r for r in pruning_sweep([rec], thresholds=(0.6, 0.7), extra_ks=(0, 1))}
    assert rows["#subjects(G_p)", 0.7]["gold in G_g"] == 0.0 and rows["#subjects(G_p)", 0.6]["gold in G_g"] == 1.0
    assert rows["#subjects(G_p)+1", 0.6]["ground triples/q"] == 4.0  # Azerbaijan (0.6) joins at k=2


def test_a_run_without_verification_has_no_verified_graph():
    from kgqa_lib.evaluate.pgakv_analysis import attribute_error, gold_funnel

    sketch = [("Georgia", "currency", "Lari")]
    rec = _record(["Georgian lari"], sketch, _hits("iGE", [("Georgia", "currency", "Georgian lari")], 0.8), [], ["Lari"])
    rec["trace"] = [s for s in rec["trace"] if s["name"] != "verify"]
    assert gold_funnel(rec)["G_f"] is None and gold_funnel(rec)["G_g"] is True
    assert attribute_error(rec) == "answering"  # the answer prompt saw the gold fact in G_g
