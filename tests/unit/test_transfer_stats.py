"""Table 1 of FuSIC-KBQA for a transfer pair (kgqa_lib.evaluate.transfer_stats): each statistic's
arithmetic on a tiny hand-made pair, then a logical form read from our mini-world data and a whole
pair's statistics computed from it (a fake encoder: no model)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kgqa_lib.evaluate import transfer_stats as S


def lf(relations, domains, function="none", names=None, classes=(), template=""):
    return S.LogicalForm(tuple(relations), tuple(names or relations), tuple(domains), function, tuple(classes),
                         template or "/".join(relations))


def test_js_divergence_bits_and_nats():
    p = {"film": 3, "people": 1}
    assert S.js_divergence(p, p) == 0.0
    assert S.js_divergence(p, {"film": 6, "people": 2}) == pytest.approx(0.0)  # counts are normalised
    assert S.js_divergence({"a": 1}, {"b": 1}) == pytest.approx(1.0)  # disjoint: 1 bit
    assert S.js_divergence({"a": 1, "b": 1}, {"c": 1}) == pytest.approx(1.0)
    assert S.js_divergence({"a": 1}, {"b": 1}, base=math.e) == pytest.approx(math.log(2))
    # by hand: p = (1, 0), q = (½, ½), m = (¾, ¼): ½ log2(4/3) + ½ (½ log2(2/3) + ½ log2 2)
    want = 0.5 * math.log2(4 / 3) + 0.5 * (0.5 * math.log2(2 / 3) + 0.5)
    assert S.js_divergence({"a": 1}, {"a": 1, "b": 1}) == pytest.approx(want) == pytest.approx(0.3113, abs=1e-4)
    assert S.js_divergence({"a": 1}, {"a": 1, "b": 1}) == pytest.approx(S.js_divergence({"a": 1, "b": 1}, {"a": 1}))
    with pytest.raises(ValueError):
        S.js_divergence({}, {"a": 1})


def test_each_statistic_on_a_tiny_pair():
    source = [lf(["r1"], ["film"]), lf(["r1", "r2"], ["film", "people"]), lf(["r3"], ["people"], "count")]
    target = [lf(["r1"], ["film"]), lf(["r4", "r1"], ["music"]), lf(["r2", "r5"], ["film"], "argmax")]
    # domains: a question with k domains counts 1/k: source film 1.5, people 1.5
    assert S.domain_distribution(source) == {"film": 0.5, "people": 0.5}
    assert S.domain_distribution(target) == pytest.approx({"film": 2 / 3, "music": 1 / 3})
    assert S.function_distribution(source) == pytest.approx({"none": 2 / 3, "count": 1 / 3})
    # new relations: the 2nd (r4) and 3rd (r5) target questions use one the source never does
    assert S.new_relation_share(target, source) == pytest.approx(2 / 3)
    assert S.new_relation_share(source, source) == 0.0
    renamed = [lf(["x:1"], ["film"], names=["r1"]), lf(["x:9"], ["film"], names=["r9"])]
    assert S.new_relation_share(renamed, source) == 1.0 and S.new_relation_share(renamed, source, by="names") == 0.5
    assert S.mean_relations(source) == pytest.approx(4 / 3) and S.mean_relations(target) == pytest.approx(5 / 3)
    assert S.mean_tokens(["who directed it", "a b c d e"]) == 4.0
    # similarity: target rows against source rows (unit vectors)
    src = np.array([[1.0, 0.0], [0.0, 1.0]])
    tgt = np.array([[1.0, 0.0], [math.sqrt(0.5), math.sqrt(0.5)]])
    nearest, mean = S.similarities(tgt, src)
    assert nearest == pytest.approx((1 + math.sqrt(0.5)) / 2) and mean == pytest.approx((1 + 0 + 2 * math.sqrt(0.5)) / 4)
    # generalization against the shots: Z = an unseen schema item, I = a shot's template, else C
    shots = [lf(["r1"], ["film"]), lf(["r2", "r3"], ["film"])]
    gen = [lf(["r1"], ["film"]), lf(["r3", "r2"], ["film"]), lf(["r1", "r9"], ["film"]),
           lf(["r1"], ["film"], classes=["film.film"])]
    assert S.generalization(gen, shots) == {"I": 1, "C": 1, "Z": 2}


def test_table1_statistics_puts_them_together():
    source = [lf(["r1"], ["film"]), lf(["r2"], ["people"], "count")]
    target = [lf(["r1"], ["film"]), lf(["r3", "r1"], ["film"])]
    vec = {"a b": [1.0, 0.0], "c d e f": [0.0, 1.0], "a b c": [1.0, 0.0], "x y z": [0.0, 1.0]}
    out = S.table1_statistics(["a b", "c d e f"], source, ["a b c", "x y z"], target, shots=[target[0]],
                              encode=lambda texts: np.array([vec[t] for t in texts]))
    assert out["n_source"] == out["n_target"] == 2 and out["n_shots"] == 1 and out["js_base"] == 2.0
    assert out["domain_js"] == pytest.approx(S.js_divergence({"film": 1, "people": 1}, {"film": 1}))
    assert out["function_js"] == pytest.approx(S.js_divergence({"none": 1, "count": 1}, {"none": 1}))
    assert out["new_relation_pct"] == out["new_relation_name_pct"] == 50.0
    assert (out["relations_source"], out["relations_target"]) == (1.0, 1.5)
    assert (out["similarity_nearest"], out["similarity_mean"]) == (1.0, 0.5)
    assert (out["tokens_source"], out["tokens_target"]) == (3.0, 3.0)
    assert out["generalization"] == {"I": 1, "C": 0, "Z": 1}


def test_logical_forms_of_our_data():
    """Read from the mini-world's gold forms: KB relation ids (a dated value walks 3), schema-neutral names,
    the Freebase domain of each relation (the Wikidata-style schema through its Freebase-style twins),
    GrailQA's functions; a GrailQA-shaped question from its graph query and s-expression."""
    import json

    from kgqa_lib.data.datasets import Question
    from kgqa_lib.methods.fusic import get_task

    t = get_task("geo-wd>cinema-fb")
    forms = {}
    for dom in (t.source, t.target):
        for q in dom.questions:
            x = S.logical_form(q, dom.kg_name, dom.gold(q))
            form = q.gold_query.get("form")
            kind = (json.loads(form) if isinstance(form, str) else form or {"type": "path"})["type"]
            if x is not None:
                forms.setdefault((dom.kg_name, kind), x)
    wd_value = forms["miniworld:wikidata", "value_at"]
    assert len(wd_value.relations) == 3 and wd_value.names == ("population",) and wd_value.domains == ("location",)
    assert all(r.startswith("http://kgqa.local/miniworld/wd/") for r in wd_value.relations)
    assert forms["miniworld:wikidata", "count"].function == "count"
    assert forms["miniworld:wikidata", "compare"].function in ("argmax", "argmin")
    fb = forms["miniworld:freebase", "path"]
    assert all(r.startswith("http://kgqa.local/miniworld/fb/") for r in fb.relations) and fb.domains[0] in ("film", "people")
    assert S.freebase_domain("film.film.directed_by") == "film" and S.freebase_domain("base.product.successor") == "base.product"
    q = Question("g1", "what software has the genre feed reader?", [], gold_query={
        "s_expression": "(AND computer.software (AND (JOIN computer.software.software_genre m.075x5v) "
                        "(le computer.software.first_released 2001^^http://www.w3.org/2001/XMLSchema#gYear)))"},
        metadata={"graph_query": {"nodes": [], "edges": [{"relation": "computer.software.software_genre"},
                                                          {"relation": "computer.software.first_released"}]},
                  "function": "<=", "domains": ["computer"]})
    g = S.logical_form(q, "grailqa-fragment")
    assert g.relations == ("computer.software.software_genre", "computer.software.first_released")
    assert g.classes == ("computer.software",) and g.function == "<=" and g.domains == ("computer",)
    assert g.template == "(AND computer.software (AND (JOIN computer.software.software_genre ENT) " \
                         "(le computer.software.first_released LIT)))"


def test_a_pair_of_our_own_from_the_data():
    """geo-wd>cinema-fb: the schemas differ, so every KB relation id of the target is new; by name some carry
    over. A fake encoder stands for the model (every question the same vector: similarity 1)."""
    out = S.task_statistics("geo-wd>cinema-fb", encode=lambda texts: np.ones((len(texts), 1)))
    assert out["new_relation_pct"] == 100.0 and 0 < out["new_relation_name_pct"] < 100
    assert out["n_target"] == 80 and out["n_shots"] == 5 and sum(out["generalization"].values()) == 80
    assert 0 < out["domain_js"] < 1 and 0 <= out["function_js"] < 1
    assert out["similarity_nearest"] == pytest.approx(1.0) and out["similarity_mean"] == pytest.approx(1.0)
