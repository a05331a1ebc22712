"""FuSIC-KBQA's candidate path depth, the setting ``max_path_hops``: 2 = the paper (TIARA enumerates
2-hop paths, appendix A.1.1) and unchanged by default (the candidates are byte for byte what they
were before the setting existed); 3 adds 3-hop paths — the 1- and 2-hop ones unchanged — for the
question and its exemplars, the third hop walked from a bounded sample of each 2-hop path's nodes;
a bad value is one ``error:`` line."""

from __future__ import annotations

import hashlib
import json

import pytest

from kgqa_lib import cli
from kgqa_lib.methods import SettingsError, coerce_settings
from kgqa_lib.methods import fusic as F
from kgqa_lib.methods.fusic import candidates as C

TASK = "geo-wd>cinema-fb"


def _digest(task_name: str, n: int, **kw) -> tuple[str, int]:
    """A hash of the candidates (every aspect's texts, queries, examples) of the first n test questions."""
    t = F.get_task(task_name)
    out = []
    for q in t.test[:n]:
        c = F.enumerate_candidates(t.target.kg_for(q), F.link_entities(q, t.target.kg_for(q), None), t.target.profile, **kw)
        out.append([[x.aspect, x.text, x.query, x.examples] for x in c.paths + c.relations + c.types] + [c.nodes_visited])
    return hashlib.sha256(json.dumps(out).encode()).hexdigest()[:16], sum(len(o) for o in out)


# ---- the setting ----------------------------------------------------------------------------------------
def test_the_default_is_the_papers_two_hops_and_three_is_a_named_setting():
    assert F.FuSICSettings().max_path_hops == 2
    assert coerce_settings({"max_path_hops": "3"}, "fusic") == {"max_path_hops": 3}
    assert coerce_settings({"max_path_hops": 1}, "fusic") == {"max_path_hops": 1}
    assert F.FuSICSettings.of({"max_path_hops": "3"}).max_path_hops == 3
    described = {name: (tp, default, help_) for name, tp, default, help_ in F.FuSICSettings.describe()}
    assert described["max_path_hops"][:2] == ("one of 1, 2, 3", 2) and "paper" in described["max_path_hops"][2]


@pytest.mark.parametrize("value", ["4", "0", "two", "true", "2.0", True, 3.0])
def test_a_bad_depth_is_a_settings_error(value):
    with pytest.raises(SettingsError, match="max_path_hops"):
        coerce_settings({"max_path_hops": value}, "fusic")


@pytest.mark.parametrize("value", ["4", "two"])
def test_a_bad_depth_on_the_command_line_is_one_error_line(value, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for var, sub in (("KGQA_CACHE_DIR", "cache"), ("KGQA_RESULTS_DIR", "results"), ("KGQA_TABLES_DIR", "tables")):
        monkeypatch.setenv(var, str(tmp_path / sub))
    code = cli.main(["run", "--method", "fusic", "--dataset", f"fusic:{TASK}:test", "--llm-mode", "replay", "--quiet",
                     "--limit", "1", "--set", f"max_path_hops={value}", "--out", str(tmp_path / "out.jsonl")])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith("error: ") and "max_path_hops" in lines[0] and "one of 1, 2, 3" in lines[0], lines[0]
    assert not (tmp_path / "out.jsonl").exists()


# ---- the candidates ------------------------------------------------------------------------------------
# The candidates of the first 12 test questions as the code enumerated them before the setting existed.
BEFORE = {"geo-wd>cinema-fb": ("7aad7e66fb9e175f", 806), "cinema-fb>geo-wd": ("0ffbd79eb9c75f3a", 699)}


@pytest.mark.parametrize("task_name", sorted(BEFORE))
def test_the_default_candidates_are_unchanged(task_name):
    assert _digest(task_name, 12) == BEFORE[task_name]
    assert _digest(task_name, 12, max_hops=2) == BEFORE[task_name]


@pytest.fixture(scope="module")
def walked():
    """(question, linking, depth-2 candidates, depth-3 candidates) of a 2-hop mini-world question."""
    t = F.get_task(TASK)
    q = next(x for x in t.test if len(t.target.gold(x).hops) == 2)
    linking = F.link_entities(q, t.target.kg, None)
    return (t, q, linking, F.enumerate_candidates(t.target.kg, linking, t.target.profile),
            F.enumerate_candidates(t.target.kg, linking, t.target.profile, max_hops=3))


def _steps(c) -> int:
    """Steps of a path candidate (relations, and the CVT/statement steps walked through)."""
    return len(c.key[1])


def test_depth_three_adds_three_hop_paths_and_keeps_the_rest(walked):
    t, _, linking, two, three = walked
    keys2, keys3 = [c.key for c in two.paths], [c.key for c in three.paths]
    assert set(keys2) < set(keys3)
    assert all(_steps(c) >= 3 for c in three.paths if c.key not in set(keys2))  # the new ones: 3 relations or more
    # the depth-2 candidates, in their order, texts and examples
    assert [(c.text, c.examples) for c in three.paths if c.key in set(keys2)] == [(c.text, c.examples) for c in two.paths]
    depth1 = F.enumerate_candidates(t.target.kg, linking, t.target.profile, max_hops=1)
    assert {c.key for c in depth1.paths} < set(keys2)


class _StarKG:
    """seed → 200 hubs (r1) → each 200 leaves (r2) → each one node (r3): 40 000 leaves at hop 2."""

    def __init__(self) -> None:
        self.reads: list[str] = []

    def triples_around(self, node, direction="both", limit=None):
        from kgqa_lib.kg.graph import Term, Triple

        self.reads.append(node)
        t = lambda s, r, o: Triple(Term(s, s), Term(r, r), Term(o, o))  # noqa: E731
        if node == "seed":
            out = [t("seed", "r1", f"hub{i}") for i in range(200)]
        elif ".leaf" in node:
            out = [t(node, "r3", f"{node}.end")]
        elif node.startswith("hub"):
            out = [t(node, "r2", f"{node}.leaf{j}") for j in range(200)]
        else:
            out = []
        return out[:limit] if limit else out

    def labels(self, iri):
        return [iri]


def test_the_third_hop_walks_a_bounded_sample_of_each_path(monkeypatch):
    kg = _StarKG()
    paths = C._walk(kg, "seed", None, 3, third_hop_sample=20)
    assert (("r1", False), ("r2", False), ("r3", False)) in paths
    leaves = [n for n in kg.reads if ".leaf" in n]
    assert len(leaves) == 20  # of the 40 000 nodes the 2-hop path reaches (the fanout lets 300 × … through)
    kg2 = _StarKG()
    assert set(C._walk(kg2, "seed", None, 2)) == {(("r1", False),), (("r1", False), ("r2", False))}
    assert not [n for n in kg2.reads if ".leaf" in n]  # depth 2: hop-2 nodes are never walked on


# ---- threaded through the pipeline and the recall measurement -----------------------------------------------
class Scripted:
    def __init__(self, query: str) -> None:
        self.query = query

    def complete(self, request):
        last = request.messages[-1][1]
        text = "1, 2, 3" if "Reply with their numbers only" in last else f"```sparql\n{self.query}\n```"
        return {"text": text, "prompt_tokens": 10, "completion_tokens": 10, "finish_reason": "stop"}


def _ctx(tmp_path, query, **settings):
    from kgqa_lib.llm.chat import LLM, LLMCache
    from kgqa_lib.methods import Context

    llm = LLM(Scripted(query), "scripted", LLMCache(tmp_path / "llm.sqlite", transcripts=None))
    return Context(llm=llm, settings={"task": TASK, "shots": 5, "retrievers": "bm25", **settings})


def test_the_pipeline_and_its_exemplars_enumerate_to_the_setting(tmp_path, tmp_cache, walked):
    t, q, _, two, three = walked
    good = t.target.gold(q).sparql(t.target.profile)
    out = {}
    for d in (2, 3):
        res = F.fusic(q, _ctx(tmp_path / str(d), good, max_path_hops=d))
        cands = next(s.output for s in res.trace if s.name == "enumerate_candidates")
        out[d] = cands, next(s.output for s in res.trace if s.name == "exemplars")
    assert out[2][0].as_dict()["paths"] == len(two.paths) and out[3][0].as_dict()["paths"] == len(three.paths)
    qids = tuple(x.qid for x in t.pool[:5])
    pool = {d: {c.key for p in F.prepared_domain(t.target.name, qids, max_hops=d) for c in p.candidates.paths}
            for d in (2, 3)}
    assert pool[2] < pool[3]  # the exemplars' candidates deepen with the question's
    assert [e.question for e in out[2][1]] == [e.question for e in out[3][1]]  # the same exemplars…
    assert [e.context for e in out[2][1]] != [e.context for e in out[3][1]]  # …with their own (deeper) candidates


def test_retrieval_recall_enumerates_to_the_setting_and_reports_top_k(tmp_path, tmp_cache, walked):
    from kgqa_lib.evaluate.fusic_recall import retrieval_recall

    t, q, *_ = walked
    bm25 = F.make_retrievers("bm25", TASK, 0)
    rows = {d: retrieval_recall(q, t, bm25, _ctx(tmp_path, "", max_path_hops=d), rerank_with_llm=False, ks=(3, 5))
            for d in (2, 3)}
    path = {d: next(r for r in rows[d] if r["aspect"] == "path") for d in (2, 3)}
    assert path[2]["in candidates"] and path[3]["in candidates"]  # a 2-hop gold path: a candidate either way
    assert {"in top 3", "in top 5", "in top K"} <= set(path[3])
    assert path[3]["in top 3"] <= path[3]["in top 5"] <= path[3]["in top K"]


def test_a_metaqa_three_hop_gold_path_is_a_candidate_only_at_depth_three(data_dir_or_skip):
    from kgqa_lib.data.datasets import DatasetNotFound

    try:
        t = F.get_task("mw-wd>metaqa")
    except DatasetNotFound:
        pytest.skip("MetaQA not under KGQA_DATA_DIR")
    q = next(x for x in t.test if x.metadata.get("hops") == 3)
    gold = t.target.gold(q)
    linking = F.link_entities(q, t.target.kg, None, oracle=True, topic_iris=gold.topics)
    keys = {d: {c.key for c in F.enumerate_candidates(t.target.kg, linking, t.target.profile, max_hops=d).paths}
            for d in (2, 3)}
    assert gold.path_key() not in keys[2] and gold.path_key() in keys[3]


def test_the_path_depth_measurement_is_a_bench_table(capsys):
    """``kgqa bench run fusic_path_depth`` without --yes: the estimate from the committed JSON, nothing
    measured or written; its report is regenerated from that JSON (``test_bench`` checks the bytes)."""
    from kgqa_lib.bench import measure
    from kgqa_lib.cli import main

    m = measure.MEASUREMENTS["fusic_path_depth"]
    before = m.data_path.read_bytes()
    assert main(["bench", "run", "fusic_path_depth", "--n", "5", "--hops", "3"]) == 0
    out = capsys.readouterr().out
    assert "5 questions × 1 hop(s) × 2 depth(s)" in out and "CPU s per question as last measured" in out
    assert "nothing was run" in out and m.data_path.read_bytes() == before
    assert main(["bench", "run", "fusic_path_depth", "--depths", "two"]) == 2
    assert "error: argument --depths: expects a whole number, got 'two'" in capsys.readouterr().err
