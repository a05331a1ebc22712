"""The FuSIC benchmark table (kgqa_lib.bench.fusic): its cells (priority order, one setting changed
per ablation, the task of every run = its dataset's), stripped records (no question text, entity
name, query or answer; the gold-element counts computed at save time; stripping twice changes
nothing) and the report's arithmetic (F1 after k feedback rounds, Table 7 error rates, the funnel)."""

from __future__ import annotations

import json

import pytest

from kgqa_lib.bench import fusic as B


@pytest.fixture(autouse=True)
def _any_size_is_complete(monkeypatch):
    """These tests score a few made-up records per cell: every cell counts as complete at any size here (a
    cell's planned questions, and the report's ``partial k/N`` for a cell still running, are tested in
    test_fusic_report_labels.py)."""
    import dataclasses

    monkeypatch.setattr(B, "CELL_OF", {n: dataclasses.replace(c, planned=1) for n, c in B.CELL_OF.items()})


def _args(cell):
    from kgqa_lib.cli import build_parser

    return build_parser().parse_args(["run", *cell.argv("x.jsonl")])


def test_cells_in_priority_order_with_the_paper_named():
    names = [c.name for c in B.CELLS]
    assert names[:8] == ["metaqa1.fs_dense", "metaqa2.fs_dense", "metaqa3.fs_dense",
                         # the path-depth deviation right after, paired with those: 3-hop only (1-/2-hop withdrawn)
                         "metaqa3.fs_dense_paths3",
                         "metaqa1.zs_dense", "metaqa2.zs_dense", "metaqa3.zs_dense", "gtech.fs_dense"]
    assert names[8:12] == ["metaqa1.fs_naive", "metaqa2.fs_naive", "metaqa3.fs_naive", "gtech.fs_naive"]
    assert len(names) == 128 and [n for n in names if n.endswith(".fs_dense_paths3")] == ["metaqa3.fs_dense_paths3"]
    # withdrawn cells are not cells any more
    assert not {B.cell_name(p, c) for c, pairs in B.WITHDRAWN.items() for p in pairs} & set(names)
    # after the ablations: the shots rows (MetaQA only, 100 first), the rest of Table 2's grid (zero-shot BM25
    # and both; the mini-world pairs' naive, BM25 and both cells), then the deviations
    at = names.index("metaqa1.fs_dense_shots100")
    assert names[at - 1] == "gtech.fs_dense_norr"
    assert names[at:at + 6] == [f"metaqa{h}.fs_dense_shots{n}" for n in (100, 25) for h in (1, 2, 3)]
    assert names[at + 6:at + 14] == [f"{p}.{c}" for c in ("zs_bm25", "zs_both")
                                     for p in ("metaqa1", "metaqa2", "metaqa3", "gtech")]
    assert names[at + 14:at + 24] == [f"{p}.{c}" for p in ("geo2cinema", "cinema2geo")
                                      for c in ("fs_naive", "fs_bm25", "fs_both", "zs_bm25", "zs_both")]
    # then the paper's remaining experiments on MetaQA and GrailQA-Tech: the exemplars in the prompt (sec. 4.2.2),
    # the zero-shot ablations (Table 3), gf-LLM few- and zero-shot (Table 2)
    four = ("metaqa1", "metaqa2", "metaqa3", "gtech")
    assert names[at + 24:at + 56] == [f"{p}.{c}" for c in ("fs_dense_ex0", "fs_dense_ex1", "fs_dense_ex3",
                                                           "zs_dense_sexpr", "zs_dense_noegf", "zs_dense_norr",
                                                           "fs_gfllm", "zs_gfllm") for p in four]
    assert names[at + 56] == "metaqa1.fs_dense_values"
    assert names[-29:-12] == ([f"metaqa{h}.fs_dense_values" for h in (1, 2, 3)]
                              # our feedback against the paper's (sec. 3, A.1.4), where it runs most: GrailQA-Tech
                              + [f"{p}.fs_dense_paperfb" for p in ("metaqa1", "metaqa2", "metaqa3", "gtech")]
                              # the paper's re-ranking path form (A.1.2), on GrailQA's own s-expressions first
                              + [f"{p}.fs_dense_rrsexpr" for p in ("gtech", "metaqa1", "metaqa2", "metaqa3")]
                              + ["metaqa1.fs_dense_sexpr_sqlpaths"]
                              + [f"metaqa{h}.fs_naive_egf" for h in (1, 2, 3)]
                              + ["gtech.fs_naive_dsex", "gtech.fs_dense_dsex"])  # GrailQA's own SPARQL as exemplars
    # every pair: zero- and few-shot with each retriever and the naive baseline (Table 2's grid); IO on MetaQA
    for p in B.PAIRS:
        assert {f"{p}.{c}" for c in ("fs_dense", "fs_bm25", "fs_both", "zs_dense", "zs_bm25", "zs_both", "fs_naive",
                                     "kbbinder_fs", "kbbinder_zs")} <= set(names), p
    assert [n for n in names if n.endswith(".io")] == ["metaqa1.io", "metaqa2.io", "metaqa3.io"]
    # the peers on MetaQA, right after each other: IO, then LangChain's GraphSparqlQAChain
    at = names.index("metaqa1.io")
    assert names[at:at + 6] == [f"metaqa{h}.{c}" for c in ("io", "langchain") for h in (1, 2, 3)]
    assert all(dict(_args(c).set) == {"task": "mw-wd>metaqa"} and c.method == "langchain_sparql" and not c.optional
               for c in B.CELLS if c.name.endswith(".langchain"))
    # KB-BINDER last, on every pair, few-shot then zero-shot
    pairs = ["metaqa1", "metaqa2", "metaqa3", "gtech", "geo2cinema", "cinema2geo"]
    assert names[-12:] == [f"{p}.kbbinder_fs" for p in pairs] + [f"{p}.kbbinder_zs" for p in pairs]
    assert len(set(names)) == len(names)
    assert set(B.PAPER) == set(B.CONFIGS) == set(B.RETRIEVER_NOTE)
    assert all(c.planned == 100 for c in B.CELLS if c.name.startswith("metaqa"))
    assert all(c.planned == 124 for c in B.CELLS if c.name.startswith("gtech"))


def test_every_run_names_its_datasets_task_and_ablations_change_one_setting():
    from kgqa_lib.methods import coerce_settings

    settings = {}
    for c in B.CELLS:
        a = _args(c)
        s = coerce_settings(dict(a.set), c.method)
        _, task, split = c.dataset.split(":")
        assert split.startswith("test"), c.name  # (the dataset's name is the spec itself)
        assert s.get("task") == (task if c.method != "io" else None), c.name  # IO reads no transfer task
        # FuSIC's cells name the prefix-state cache they run with (not in model ids or configs)
        assert a.llm == ("local?prefix_cache=8" if c.method == "fusic" else "local") and a.no_transcripts
        assert (a.sample == 100) == c.name.startswith("metaqa")
        settings[c.name] = s
    for p in ("metaqa1", "metaqa2", "metaqa3", "gtech", "geo2cinema", "cinema2geo"):
        full = settings[f"{p}.fs_dense"]
        zero = {**full, "shots": 0}
        assert [settings[f"{p}.zs_{r}"] for r in ("dense", "bm25", "both")] == [
            {**zero, "retrievers": r} for r in ("dense", "bm25", "bm25,dense")]
        if p in ("geo2cinema", "cinema2geo"):
            continue
        assert full == {"task": full["task"], "shots": 5, "retrievers": "dense"}
        for a, change in (("fs_dense_sexpr", {"language": "sexpr", "paths_as": "logical_form"}), ("fs_dense_noegf", {"egf_rounds": 0}),
                          ("fs_dense_norr", {"rerank": False})):
            assert settings[f"{p}.{a}"] == {**full, **change}
        assert settings[f"{p}.zs_dense"] == {**full, "shots": 0}
        assert settings[f"{p}.fs_naive"] == {**full, "retrievers": "none", "egf_rounds": 0}  # the paper's: no feedback
        assert settings[f"{p}.fs_both"] == {**full, "retrievers": "bm25,dense"}
        assert settings[f"{p}.kbbinder_fs"] == {"task": full["task"], "shots": 5}
        assert settings[f"{p}.kbbinder_zs"] == {"task": full["task"], "shots": 0}
        if p.startswith("metaqa"):  # the deviation changes the path depth only
            if p == "metaqa3":
                assert settings[f"{p}.fs_dense_paths3"] == {**full, "max_path_hops": 3}
            assert settings[f"{p}.fs_naive_egf"] == {**full, "retrievers": "none"}
            assert settings[f"{p}.fs_dense_values"] == {**full, "show_path_values": True}
            if p == "metaqa1":  # the w/o-SPARQL deviation: the paths stay SPARQL
                assert settings[f"{p}.fs_dense_sexpr_sqlpaths"] == {**full, "language": "sexpr"}
            assert settings[f"{p}.io"] == {}
            assert [settings[f"{p}.{B.SHOTS[n]}"] for n in B.SHOTS] == [{**full, "shots": n} for n in B.SHOTS]
        # the exemplars in the prompt (5: fs_dense itself), the zero-shot ablations, gf-LLM
        assert [settings[f"{p}.{B.EXEMPLARS[n]}"] for n in B.EXEMPLARS] == [
            {**full, "exemplars": n} if n != 5 else full for n in B.EXEMPLARS]
        for a, change in (("zs_dense_sexpr", {"language": "sexpr", "paths_as": "logical_form"}),
                          ("zs_dense_noegf", {"egf_rounds": 0}), ("zs_dense_norr", {"rerank": False})):
            assert settings[f"{p}.{a}"] == {**zero, **change}
        gf = {"retrievers": "dense", "rerank": False, "egf_rounds": 0, "language": "sexpr", "paths_as": "logical_form",
              "exemplar_choice": "bm25"}
        assert settings[f"{p}.fs_gfllm"] == {**full, **gf} and settings[f"{p}.zs_gfllm"] == {**zero, **gf}


NEW = ("fs_dense_ex0", "fs_dense_ex1", "fs_dense_ex3", "zs_dense_sexpr", "zs_dense_noegf", "zs_dense_norr", "fs_gfllm",
       "zs_gfllm")


def test_the_remaining_experiments_are_needed_cells_with_the_papers_values():
    """The exemplar count (sec. 4.2.2), the zero-shot ablations (Table 3) and gf-LLM (Table 2): needed cells
    (not optional) on MetaQA's hops (100 each) and GrailQA-Tech (124), each command one `kgqa run` reads
    (the method's settings accept it), each with the paper's value named by table and row."""
    from kgqa_lib.cli import build_parser
    from kgqa_lib.methods import coerce_settings

    cells = [c for c in B.CELLS if c.config in NEW]
    assert len(cells) == 32 and {c.name.split(".")[0] for c in cells} == {"metaqa1", "metaqa2", "metaqa3", "gtech"}
    for c in cells:
        assert not c.optional and c.planned == (124 if c.name.startswith("gtech") else 100)
        a = build_parser().parse_args(["run", *c.argv("x.jsonl")])
        assert (a.command, a.method, a.dataset) == ("run", "fusic", c.dataset) and a.llm == "local?prefix_cache=8"
        coerce_settings(dict(a.set), "fusic")  # an unknown setting or value would raise
    assert B.EXEMPLARS[5] == "fs_dense" and not any(n.endswith(".fs_dense_ex5") for n in (c.name for c in B.CELLS))
    assert {n: B.PAPER[c][1] for n, c in B.EXEMPLARS.items() if n != 5} == {0: "73.6", 1: "70.5", 3: "72.3"}
    assert {n: str(v) for n, v in B.PAPER_SHOTS.items() if n != 5} == {0: "73.6", 1: "70.5", 3: "72.3"}
    assert all(B.PAPER[c][0].startswith("sec. 4.2.2") for n, c in B.EXEMPLARS.items() if n != 5)
    assert [B.PAPER[a] for a in B.ZS_ABLATIONS] == [("Table 3, zero-shot, w/o SPARQL", "60.5"),
                                                   ("Table 3, zero-shot, w/o EGF", "64.4"),
                                                   ("Table 3, zero-shot, w/o RR", "59.5")]
    assert B.PAPER_FULL_T3_ZS == 68.4 and B.PAPER["zs_dense"][1] == "68.4"
    assert B.PAPER["fs_gfllm"] == ("Table 2, few-shot, gf-LLM", "61.2")
    assert B.PAPER["zs_gfllm"] == ("Table 2, zero-shot, gf-LLM", "42.8")
    assert all(B.BASELINE_OF[c] == "zs_dense" for c in (*B.ZS_ABLATIONS, "zs_gfllm"))


def test_the_new_sections_read_not_run_yet_then_pair_the_records():
    full = [_fake(f"q{i}", 1.0, 1) for i in range(10)]
    half = [_fake(f"q{i}", 1.0 if i < 5 else 0.0, 1) for i in range(10)]
    text = B.report(lambda c: {}.get(c, []))
    ex = text.split("## Number of exemplars in the prompt")[1].split("\n## ")[0]
    zs = text.split("## Table 3 analogue, zero-shot")[1].split("\n## ")[0]
    gf = text.split("## gf-LLM")[1].split("\n## ")[0]
    # 16 empty cells in the exemplar table, plus its closing reading, which has nothing to pair yet
    assert ex.count("not run yet") == 17 and zs.count("not run yet") == 24 and gf.count("not run yet") == 16
    assert ex.rstrip().endswith("(sec. 4.2.2; n − 5 exemplars, paired, points, the same pairs): not run yet.")
    assert "0 → 73.6, 1 → 70.5, 3 → 72.3, 5 → 74.6" in ex and "FuSIC-KBQA(T) 68.4" in zs
    assert "| 59.5 (Table 3, zero-shot, w/o RR) | -8.9 |" in zs
    assert "| 42.8 (Table 2, zero-shot, gf-LLM) | +25.6 (Table 2, zero-shot, FuSIC-KBQA(T): 68.4) |" in gf
    assert "| 61.2 (Table 2, few-shot, gf-LLM) | +9.6 (Table 2, few-shot, FuSIC-KBQA(T): 70.8) |" in gf
    have = {"gtech.fs_dense": full, "gtech.fs_dense_ex1": half, "gtech.zs_dense": full, "gtech.zs_dense_norr": half,
            "gtech.zs_gfllm": half[:8]}
    text = B.report(lambda c: have.get(c, []))
    ex = text.split("## Number of exemplars in the prompt")[1].split("\n## ")[0]
    row = next(x for x in ex.splitlines() if "| gtech.fs_dense_ex1 |" in x)
    assert "| 1 | gtech.fs_dense_ex1 | 10 | 50.0 [" in row and "| -50.0 [" in row and row.endswith("(n=10) | 70.5 | -4.1 |")  # the paper: 1 shot − 5 shots
    zs = text.split("## Table 3 analogue, zero-shot")[1].split("\n## ")[0]
    row = next(x for x in zs.splitlines() if x.startswith("| GrailQA") and "w/o re-ranking, zero-shot" in x)
    assert "| 10 | 100.0 [" in row and "| -50.0 [" in row and row.endswith("| 59.5 (Table 3, zero-shot, w/o RR) | -8.9 |")
    gf = text.split("## gf-LLM")[1].split("\n## ")[0]
    row = next(x for x in gf.splitlines() if x.startswith("| GrailQA") and "| zero-shot |" in x)
    cells = [x.strip() for x in row.split("|")[1:-1]]
    assert cells[2] == "8" and cells[3].startswith("62.5 [") and cells[4].startswith("100.0 [")  # on the 8 shared
    assert cells[5].startswith("+37.5 [") and cells[5].endswith("(n=8)")  # FuSIC(T) − gf-LLM, as the paper's
    few = next(x for x in gf.splitlines() if x.startswith("| GrailQA") and "| few-shot |" in x)
    assert "| — | not run yet | 100.0 [" in few  # without gf-LLM records: FuSIC(T) on all of its questions
    # the few-shot Table 3 analogue is as it was, the zero-shot half beside it
    gains = B.ablation_gains(lambda c: have.get(c, []), "zero-shot")
    by = {(g["pair"], g["ablation"]): g for g in gains}
    assert set(by) == {(p, a) for p in (*B.METAQA, "gtech") for a in B.ZS_ABLATIONS}
    assert by["gtech", "zs_dense_norr"]["gain"][0] == pytest.approx(-0.5)
    assert by["gtech", "zs_dense_norr"]["paper − full"] == pytest.approx(59.5 - 68.4)
    assert {a for _, a in {(g["pair"], g["ablation"]) for g in B.ablation_gains(lambda c: [])}} == {
        *B.ABLATIONS, "fs_dense_sexpr_sqlpaths"}


def test_the_report_shows_table1_beside_the_papers_rows(monkeypatch):
    from kgqa_lib.bench import fusic_table1 as T1

    monkeypatch.setattr("kgqa_lib.bench.measure.read", lambda m: {})  # never measured
    text = B.report(lambda c: [])
    assert "Not computed yet: `kgqa bench run fusic_table1 --yes`" in text.split("## Table 1 analogue")[1]
    row = {"pair": "gtech", "label": "GrailQA non-technical → GrailQA-Tech", "n_source": 865, "n_target": 124,
           "js_base": 2.0, "domain_js": 0.5, "new_relation_pct": 100.0, "new_relation_name_pct": 100.0,
           "function_js": 0.0312, "relations_source": 1.306, "relations_target": 1.605, "similarity_nearest": 0.381,
           "similarity_mean": 0.087, "tokens_source": 10.88, "tokens_target": 10.6,
           "generalization": {"I": 4, "C": 3, "Z": 117}}
    lines = T1.section({"encoder": "all-MiniLM-L6-v2", "shots": 5, "rows": [row]})
    assert ("| GrailQA non-technical → GrailQA-Tech | 865 / 124 | 0.50 (0.35) | 100.0 (100.0) | 0.03 (0.02) | "
            "1.31 / 1.60 | 0.38 (0.09) | 10.9 / 10.6 | 4 / 3 / 117 |") in lines
    assert "| paper, Table 1, row WebQSP→GrailQA-Tech | — | 0.68 | 99.3 | 0.11 | 1.52 / 1.46 | 0.23 | 6.6 / 10.9 | I,C,Z |" \
        in lines
    assert [x for x in lines if x.startswith("| paper, Table 1, row ")] == [
        f"| paper, Table 1, row {k} | — | " + " | ".join(v) + " |" for k in (
            "GrailQA→GraphQA", "GrailQA→WebQSP", "WebQSP→GrailQA-Tech", "WebQSP→GraphQA-Pop") for v in [T1.PAPER_T1[k]]]


def test_planned_sizes_are_the_datasets(data_dir_or_skip):
    from kgqa_lib.data.datasets import load_dataset

    for c in B.CELLS:
        a = _args(c)
        assert len(load_dataset(c.dataset, sample=a.sample, seed=a.seed)) == c.planned, c.name


# ---- stripped records from a real run of the pipeline (scripted LLM) -----------------------------------
class Scripted:
    """Re-ranking: "2, 1"; generation: an unanchored query first, then ``good``."""

    def __init__(self, good: str) -> None:
        self.queries = ["SELECT ?x WHERE { ?x ?p ?o } LIMIT 0", good]

    def complete(self, request):
        if "Reply with their numbers only" in request.messages[-1][1]:
            text = "2, 1"
        else:
            text = f"```sparql\n{self.queries.pop(0) if len(self.queries) > 1 else self.queries[0]}\n```"
        return {"text": text, "prompt_tokens": 10, "completion_tokens": 10, "finish_reason": "stop"}


def _record(tmp_path, task_name: str, q, settings: dict):
    from kgqa_lib.data.datasets import Dataset
    from kgqa_lib.evaluate.runner import run
    from kgqa_lib.llm.chat import LLM, LLMCache
    from kgqa_lib.methods import Context
    from kgqa_lib.methods import fusic as F

    t = F.get_task(task_name)
    good = t.target.gold(q).sparql(t.target.profile)
    llm = LLM(Scripted(good), "scripted", LLMCache(tmp_path / "llm.sqlite", transcripts=None))
    ctx = Context(llm=llm, settings={"task": task_name, **settings})
    out = tmp_path / "run.jsonl"
    run("fusic", Dataset("fusic:x", [q]), ctx, out, progress=False)
    return json.loads(out.read_text().splitlines()[-1])


def _secrets(q, r) -> list[str]:
    """What a stripped record must not hold: the question's text (its gold answers are not kept as gold:
    the record keeps the method's own prediction and queries, which a right answer shares)."""
    return [q.question]


@pytest.mark.parametrize("task_name,retrievers,external", [("geo-wd>cinema-fb", "bm25,minilm", False),
                                                           ("mw-wd>metaqa", "bm25", True)])
def test_stripped_record_holds_counts_not_text(tmp_path, tmp_cache, request, task_name, retrievers, external):
    from kgqa_lib.methods import fusic as F

    if external:
        request.getfixturevalue("data_dir_or_skip")
    from kgqa_lib.embed.embedder import Embedder

    t = F.get_task(task_name)
    emb = Embedder()
    q = next(x for x in t.test if len(t.target.gold(x).hops) == 1
             and set(t.target.gold(x).topics) <= set(F.link_entities(x, t.target.kg, emb).entities))
    r = _record(tmp_path, task_name, q, {"shots": 5, "retrievers": retrievers})
    assert r["metrics"]["f1"] == 1.0 and r["prediction"]
    s = B.strip(r)
    text = json.dumps(s, ensure_ascii=False)
    for secret in _secrets(q, r):
        assert secret not in text, secret
    assert s["stripped"] and s["prediction"] == r["prediction"] and "trace" not in s and "question" not in s
    assert "gold" not in s and "answers" not in s
    assert all(a["query"] for a in s["attempts"])  # the SPARQL the method wrote, kept for review
    assert [a["status"] for a in s["attempts"]] == ["unanchored", "ok"]
    assert [a["repeat"] for a in s["attempts"]] == [False, False]  # the feedback round wrote another query
    assert s["stages"]["calls"]["generation"] == 1 and s["stages"]["calls"]["feedback"] == 1
    ga = s["gold_analysis"]
    assert ga["topic_linked"] and ga["gold_hops"] == 1 and ga["query_gold_relations"] == [1, 1]
    assert ga["query_relation_patterns"] == 1  # the scripted query is the gold one
    assert {x["retriever"] for x in ga["retrieval"]} == set(retrievers.split(","))
    assert {x["aspect"] for x in ga["retrieval"]} >= {"path", "relation"}
    assert all(isinstance(x[k], bool) for x in ga["retrieval"] for k in ("top_K", "before", "after"))
    assert B.strip(s) == s  # restored, then saved again
    assert B.f1_after_rounds([s]) == [0.0, 1.0, 1.0, 1.0, 1.0]


def test_kbbinder_records_are_stripped_like_the_baselines():
    r = {"method": "kbbinder", "qid": "q", "question": "secret", "gold": ["A"], "prediction": ["A"], "metrics": {"f1": 1.0},
         "trace": [{"name": "vote", "output": {"statuses": {"ok": 6}, "winner": 0, "tally": [["A", 6]]}, "seconds": 0.1}]}
    s = B.strip(r)
    assert "secret" not in json.dumps(s) and "gold" not in s and "tally" not in json.dumps(s)
    assert s["prediction"] == ["A"]  # the method's own answer is kept (for review and re-scoring), the gold is not
    assert s["summary"]["vote"]["winning_votes"] == 6 and B.strip(s) == s


# ---- the report's arithmetic ---------------------------------------------------------------------------
def _fake(qid, f1, attempts, retrieval=None, linked=True, hops=1):
    calls = {"rerank": 2, "generation": 1, "feedback": attempts - 1}
    return {"qid": qid, "metrics": {"f1": f1}, "seconds": 10.0, "error": None,
            "llm": {"calls": sum(calls.values()), "prompt_tokens": 100, "completion_tokens": 10, "recorded_seconds": 8.0,
                    "seconds": 8.0, "cache_hits": 0},
            "stages": {"calls": {**calls, "total": sum(calls.values())},
                       "seconds": {"retrieval": 1.0, "rerank": 2.0, "exemplars": 0.5, "generation": 3.0, "feedback": 4.0}},
            "attempts": [{"status": "empty"}] * (attempts - 1) + [{"status": "ok" if f1 else "empty"}],
            "gold_analysis": {"topic_linked": linked, "mentions": 1, "gold_hops": hops, "retrieval": retrieval or [],
                              "query_gold_relations": [1, 1]}}


def _ret(name, aspect, top_k, before, after):
    return {"retriever": name, "aspect": aspect, "top_K": top_k, "before": before, "after": after}


def test_f1_after_rounds_error_rates_and_funnel():
    recs = [_fake("a", 1.0, 1, [_ret("dense", "path", True, True, True), _ret("dense", "relation", True, False, True)]),
            _fake("b", 0.5, 3, [_ret("dense", "path", True, False, False), _ret("dense", "relation", True, True, True)]),
            _fake("c", 0.0, 5, [_ret("dense", "path", False, False, False)], linked=False, hops=3)]
    assert B.f1_after_rounds(recs) == [1 / 3, 1 / 3, 0.5, 0.5, 0.5]
    rows = {(x["retriever"], x["aspect"]): x for x in B.error_rates(recs)}
    assert rows["dense", "path"] == {"retriever": "dense", "aspect": "path", "n": 3, "top_K": 1 / 3, "before": 2 / 3,
                                     "after": 2 / 3}
    assert rows["dense", "relation"]["before"] == 0.5 and rows["dense", "relation"]["after"] == 0.0
    assert rows["dense", "all aspects"]["before"] == 1.0 and rows["dense", "all aspects"]["after"] == 2 / 3
    both = [_fake("d", 1.0, 1, [_ret("bm25", "path", False, False, False), _ret("dense", "path", True, True, None)])]
    rows = {(x["retriever"], x["aspect"]): x for x in B.error_rates(both)}
    assert rows["all retrievers", "path"]["before"] == 0.0 and rows["all retrievers", "path"]["after"] is None
    f = B.funnel(recs)
    assert f == {"n": 3, "analysed": 3, "topic linked": 2, "gold path short enough": 2, "gold path in top K": 2,
                 "gold path in prompt": 1, "query answered": 2, "F1 = 1": 1}
    assert B.funnel(recs, 3)["gold path short enough"] == 3  # max_path_hops=3: the 3-hop gold path is a candidate


def test_feedback_rounds_that_repeat_their_query_are_counted():
    gen = lambda *atts: {"qid": "q", "metrics": {"f1": 0.0}, "trace": [  # noqa: E731
        {"name": "generate_and_execute", "output": [dict(a, status="empty", rows=0, seconds=1.0) for a in atts]}]}
    q1, q2 = {"query": "SELECT ?x WHERE { e:A r:b ?x }"}, {"query": "SELECT ?x WHERE { ?x r:b e:A }"}
    r = B.strip(gen(q1, dict(q1, query=q1["query"].replace(" ", "  ")), q2, q2, {"query": "", "response": "no idea"},
                    {"query": "", "response": "no  idea"}))
    assert [a["repeat"] for a in r["attempts"]] == [False, True, False, True, False, True]
    assert "idea" not in json.dumps(r)  # the model's prose is not kept; the queries it wrote are
    assert [a["query"] for a in r["attempts"]][:3] == [q1["query"], q1["query"].replace(" ", "  "), q2["query"]]
    assert B.feedback_repeats([r, B.strip(gen(q1))]) == (3, 5)
    old = dict(r, attempts=[{k: v for k, v in a.items() if k != "repeat"} for a in r["attempts"]])
    assert B.feedback_repeats([old]) == (None, 5)  # saved before `repeat` was kept: not guessed


def test_relation_patterns_and_query_lengths():
    a, b, t = "<http://x/a>", "<http://x/b>", "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>"
    assert B.relation_patterns(f"SELECT ?x WHERE {{ ?v {a} <http://x/e> . ?v {a} ?x . ?x {t} <http://x/T> }}") == 2
    assert B.relation_patterns(f"SELECT ?x WHERE {{ {{ ?x {a} ?y }} UNION {{ ?x {b} ?y OPTIONAL {{ ?y {a}/^{b} ?z }} }} }}") == 4
    assert B.relation_patterns(f"SELECT (COUNT(?x) AS ?n) WHERE {{ {{ SELECT ?x WHERE {{ ?x ?p ?y }} }} }}") == 1
    assert B.relation_patterns("SELECT ?x WHERE { e:X r:p ?x }") is None and B.relation_patterns("no query") is None

    def rec(f1, hops, k, in_prompt=True):
        return {"metrics": {"f1": f1}, "gold_analysis": {"gold_hops": hops, "query_relation_patterns": k, "retrieval": [
            _ret("dense", "path", True, in_prompt, in_prompt)]}}
    recs = [rec(1.0, 1, 2), rec(0.0, 1, 2), rec(0.5, 2, 2), rec(0.0, 2, 1), rec(0.0, 1, None), rec(0.0, 1, 3, False)]
    assert B.query_lengths(recs) == {"n": 4, "longer": 1, "shorter": 1, "same": 1, "unread": 1}
    old = rec(0.0, 1, 2)
    del old["gold_analysis"]["query_relation_patterns"]
    assert B.query_lengths([old, *recs]) is None  # saved before the count was kept: not guessed


def test_report_from_records_and_not_run_yet():
    full = [_fake(f"q{i}", 1.0 if i % 2 else 0.0, 1 + i % 3, [_ret("dense", "path", True, True, bool(i % 2))])
            for i in range(10)]
    noegf = [dict(r, attempts=r["attempts"][:1]) for r in full]
    have = {"metaqa1.fs_dense": full, "metaqa1.fs_dense_noegf": noegf}
    text = B.report(lambda cell: have.get(cell, []))
    assert text.count("not run yet") > 30
    assert "| metaqa1.fs_dense | 10 | 2.00 | 1.00 | 0.90 | 3.90 | 1.0 | 2.0 | 0.5 | 3.0 | 4.0 |" in text
    assert "F1 50.0, 3.90 LLM calls/q (re-rank + generation + feedback) — not met (n=10)" in text
    assert "70.8 (Table 2, few-shot, FuSIC-KBQA(T))" in text and "64.3 (Table 3, few-shot, w/o SPARQL)" in text
    assert f"| metaqa1.fs_dense | 10 | {' | '.join(f'{100 * v:.1f}' for v in B.f1_after_rounds(full))} | 9 (not saved) |" in text
    repeats = [dict(r, attempts=[dict(a, repeat=i > 0) for i, a in enumerate(r["attempts"])]) for r in full]
    text = B.report(lambda cell: {"metaqa1.fs_dense": repeats, "metaqa1.fs_dense_noegf": noegf}.get(cell, []))
    assert f"| {' | '.join(f'{100 * v:.1f}' for v in B.f1_after_rounds(full))} | 9 (9) | 50.0 vs round 0 " in text
    assert "| metaqa1.fs_dense | dense | path | 10 | 0.0 | 0.0 | 50.0 |" in text
    assert "| 10 | 10 | 10 | 10 | 10 | 5 | 5 | 5 | 0: 0 / 0 / 0 |" in text  # the funnel, then the query lengths
    held = [dict(r, gold_analysis=dict(r["gold_analysis"], retrieval=[_ret("dense", "path", True, True, True)]))
            for r in full]  # every prompt held the gold path: the 5 with F1 0 were lost at generation
    assert "| 10 | 10 | 10 | 10 | 10 | 10 | 5 | 5 | not saved |" in B.report(lambda c: {"metaqa1.fs_dense": held}.get(c, []))
    for i, r in enumerate(held):
        r["gold_analysis"]["query_relation_patterns"] = 1 + i % 3  # F1 0 at i = 0, 2, 4, 6, 8: 1, 3, 2, 1, 3 relations
    assert "| 10 | 10 | 10 | 10 | 10 | 10 | 5 | 5 | 5: 3 / 0 / 2 |" in B.report(lambda c: {"metaqa1.fs_dense": held}.get(c, []))


def test_the_depth_deviation_is_reported_paired_with_the_paper_default():
    two = [_fake(f"q{i}", 0.0, 2, [_ret("dense", "path", False, False, False)], hops=3) for i in range(10)]
    three = [_fake(f"q{i}", 1.0 if i < 6 else 0.0, 1, [_ret("dense", "path", i < 8, i < 7, i < 6)], hops=3)
             for i in range(10)]
    have = {"metaqa3.fs_dense": two, "metaqa3.fs_dense_paths3": three}
    text = B.report(lambda cell: have.get(cell, []))
    section = text.split("## Candidate path depth")[1].split("\n## ")[0]
    row = next(x for x in section.splitlines() if x.startswith("| mini-world (Wikidata-style) → MetaQA dev (our reported part), 3-hop"))
    cells = [x.strip() for x in row.split("|")[1:-1]]
    assert cells[1] == "10" and cells[2].startswith("0.0 [") and cells[3].startswith("60.0 [")
    assert cells[4].startswith("+60.0") and cells[4].endswith("(n=10)")
    assert cells[5] == "0/10 / 8/10" and cells[6] == "0/10 / 6/10" and cells[7] == "4.00 / 3.00"
    assert cells[9] == "70.8 (Table 2, few-shot, FuSIC-KBQA(T))" and "appendix A.1.1" in section
    assert "not run yet" not in section and "1-hop" not in section  # 3-hop only: 1-/2-hop withdrawn
    # the MetaQA target lists both configurations; the funnel counts the 3-hop path as a candidate only at depth 3
    assert "- FuSIC, dense retriever, few-shot, candidate paths ≤ 3 hops (deviation; the paper's: 2):" in text
    assert "| mini-world (Wikidata-style) → MetaQA dev (our reported part), 3-hop | dense, paths ≤ 2 relations (the paper's) | 10 | 10 | 10 | 0 |" in text
    assert "| mini-world (Wikidata-style) → MetaQA dev (our reported part), 3-hop | dense, paths ≤ 3 relations | 10 | 10 | 10 | 10 | 8 | 6 |" in text
    # a deviation cell holding fewer questions meets the paper-default cell on its own questions, in every column
    two[0], two[1] = (_fake(f"q{i}", 1.0, 5, [_ret("dense", "path", False, False, False)], hops=3) for i in (0, 1))
    text = B.report(lambda cell: {"metaqa3.fs_dense": two, "metaqa3.fs_dense_paths3": three[:4]}.get(cell, []))
    row = next(x for x in text.split("## Candidate path depth")[1].splitlines()
               if x.startswith("| mini-world (Wikidata-style) → MetaQA dev (our reported part), 3-hop"))
    cells = [x.strip() for x in row.split("|")[1:-1]]
    assert cells[1] == "4" and cells[2].startswith("50.0 [") and cells[3].startswith("100.0 [")
    assert cells[4].startswith("+50.0") and cells[4].endswith("(n=4)")
    assert cells[5] == "0/4 / 4/4" and cells[7] == "5.50 / 3.00"  # all 10 would read 4.60


def test_kbbinder_rows_pair_like_for_like_and_count_their_drafts():
    def kb(qid, f1, statuses):
        r = _fake(qid, f1, 1)
        r["summary"] = {"vote": {"statuses": statuses, "winner": 0 if statuses.get("ok") else None}}
        return r

    zs_kb = [kb(f"q{i}", 1.0, {"ok": 4, "bad_form": 1, "no_sexpr": 1}) if i < 6 else kb(f"q{i}", 0.0, {"no_answer": 6})
             for i in range(10)]
    zs_fusic = [_fake(f"q{i}", 0.5, 1) for i in range(10)]
    fs_fusic = [_fake(f"q{i}", 0.0, 1) for i in range(10)]

    def row(text, config_label):
        line = next(x for x in text.splitlines() if x.startswith("| mini-world (Wikidata-style) → MetaQA dev (our reported part), 1-hop | "
                                                                  + config_label + " |"))
        return [x.strip() for x in line.split("|")[1:-1]]

    label = B.CONFIGS["kbbinder_zs"][2]
    text = B.report(lambda c: {"metaqa1.kbbinder_zs": zs_kb, "metaqa1.fs_dense": fs_fusic}.get(c, []))
    assert row(text, label)[4] == "—"  # zero-shot KB-BINDER is never paired with few-shot FuSIC
    text = B.report(lambda c: {"metaqa1.kbbinder_zs": zs_kb, "metaqa1.fs_dense": fs_fusic,
                               "metaqa1.zs_dense": zs_fusic}.get(c, []))
    assert row(text, label)[4].startswith("+10.0 [") and row(text, label)[4].endswith("(n=10)")  # 60.0 − 50.0
    assert row(text, B.CONFIGS["zs_dense"][2])[4].startswith("+50.0 [")  # zero-shot FuSIC − few-shot FuSIC
    assert ("| metaqa1.kbbinder_zs | 10 | drafts 60: ok 24, no_answer 24, no_sexpr 6, bad_form 6 (malformed 12); "
            "no draft answered: 4 of 10 questions |") in text


def test_the_shots_rows_pair_each_count_with_five_shots():
    five = [_fake(f"q{i}", 0.5, 1) for i in range(10)]
    hundred = [_fake(f"q{i}", 1.0 if i < 8 else 0.0, 1) for i in range(10)]
    text = B.report(lambda c: {"metaqa2.fs_dense": five, "metaqa2.fs_dense_shots100": hundred}.get(c, []))
    section = text.split("### Number of target shots (MetaQA)")[1].split("\n## ")[0]
    rows = {int(r[1].split(":")[0]): r for r in ([x.strip() for x in line.split("|")[1:-1]]
                                                 for line in section.splitlines() if "MetaQA dev (our reported part), 2-hop" in line)}
    assert sorted(rows) == [0, 5, 25, 100]
    # the 0-shot row is the zero-shot cell, whose prompt shows source exemplars: it says so
    assert rows[0][1] == "0: zero-shot (source exemplars)" and rows[0][2] == "metaqa2.zs_dense" and rows[5][1] == "5"
    assert rows[5][2:4] == ["metaqa2.fs_dense", "10"] and rows[5][5] == "—"
    assert rows[100][2:4] == ["metaqa2.fs_dense_shots100", "10"] and rows[100][4].startswith("80.0 [")
    assert rows[100][5].startswith("+30.0 [") and rows[100][5].endswith("(n=10)")  # 80.0 − 50.0, paired
    assert rows[0][4] == rows[25][4] == "not run yet" and rows[0][5] == rows[25][5] == "—"
    assert "0 → 73.6, 1 → 70.5, 3 → 72.3, 5 → 74.6" in section and section.count("not run yet") == 10


def test_the_naive_rows_say_why_metaqa_needs_no_retrieval():
    """The paper's naive FS-ICL baseline has no feedback (fs_naive); ours with FuSIC's rounds is a named
    deviation (fs_naive_egf). On MetaQA the row says why a query can be right without retrieval."""
    naive = [_fake(f"q{i}", 1.0 if i < 6 else 0.0, 1) for i in range(10)]
    text = B.report(lambda c: {"metaqa1.fs_naive": naive, "gtech.fs_naive": naive}.get(c, []))
    rows = [x for x in text.splitlines() if f"| {B.CONFIGS['fs_naive'][2]} |" in x]
    assert len(rows) == 6 and "| 60.0 [" in rows[0]
    egf = [x for x in text.splitlines() if f"| {B.CONFIGS['fs_naive_egf'][2]} |" in x]
    assert len(egf) == 3 and all("not run yet" in x for x in egf)
    # the deviation table says it once, for both naive configurations on MetaQA only
    why = [x for x in text.splitlines() if "MetaQA's entity IRIs are its names" in x]
    assert len(why) == 1 and why[0].startswith(f"| `fs_naive` {B.CONFIGS['fs_naive'][2]}; `fs_naive_egf` ")
    assert "— on MetaQA |" in why[0]
    feedback = text.split("## F1 after 0..4")[1].split("\n## ")[0]
    assert "| metaqa1.fs_naive |" not in feedback and "| metaqa1.fs_naive_egf | not run yet" in feedback


def test_cost_table_counts_questions_without_a_rerank_call():
    """A list of at most one candidate is not re-ranked; the cost table says how many questions made
    no re-rank call (— where the configuration never re-ranks)."""
    def rec(qid, rerank):
        r = _fake(qid, 1.0, 1)
        r["stages"]["calls"].update(rerank=rerank, total=rerank + 1)
        return r

    dense = [rec("a", 0), rec("b", 3), rec("c", 0)]
    norr = [rec("a", 0), rec("b", 0)]
    text = B.report(lambda c: {"gtech.fs_dense": dense, "gtech.fs_dense_norr": norr}.get(c, []))
    cost = text.split("## Cost per question by stage", 1)[1].split("## Table 3", 1)[0]
    row = next(line for line in cost.splitlines() if line.startswith(f"| {B.cell_label('gtech.fs_dense')} |"))
    assert row.startswith(f"| {B.cell_label('gtech.fs_dense')} | 3 | 1.00 |") and row.endswith("| 2 |"), row
    row = next(line for line in cost.splitlines() if line.startswith(f"| {B.cell_label('gtech.fs_dense_norr')} |"))
    assert row.endswith("| — |"), row


def test_ablation_gains_pair_each_ablation_with_full_on_shared_questions():
    full = [_fake(f"q{i}", 1.0, 1) for i in range(10)]
    sexpr = [_fake(f"q{i}", 1.0 if i < 6 else 0.0, 1) for i in range(8)]  # 8 of the 10 questions, 6 right
    gains = B.ablation_gains(lambda c: {"gtech.fs_dense": full, "gtech.fs_dense_sexpr": sexpr}.get(c, []))
    by = {(g["pair"], g["ablation"]): g for g in gains}
    assert set(by) >= {(p, a) for p in (*B.METAQA, "gtech") for a in B.ABLATIONS}
    mean, lo, hi, n = by["gtech", "fs_dense_sexpr"]["gain"]
    assert n == 8 and mean == pytest.approx(-0.25) and lo <= mean <= hi  # (6 − 8) / 8
    assert by["gtech", "fs_dense_sexpr"]["paper − full"] == pytest.approx(64.3 - 70.8)
    assert by["gtech", "fs_dense_noegf"]["gain"] is None and by["metaqa1", "fs_dense_sexpr"]["gain"] is None


def test_figures_draw_what_the_records_hold():
    """Notebook 21's panels: a bar for each complete cell and the status written for the others; notebook
    22's figure: one bar per ablation with records, one feedback curve per cell with records, the shots
    still to run named in the title."""
    import matplotlib

    matplotlib.use("Agg")
    import pandas as pd

    from kgqa_lib.bench.overview import plot_panels, row

    rows = pd.DataFrame([row("FuSIC-KBQA", "set A", "m1", "f1", [_fake(f"q{i}", 1.0, 1) for i in range(3)], 3, 70.8),
                         row("FuSIC-KBQA", "set A", "m2", "f1", [_fake("q0", 1.0, 1)], 3),
                         row("FuSIC-KBQA", "set B", "m1", "f1", [], 3)])
    fig = plot_panels(rows, "t", ncols=2, methods=["m1", "m2"])
    a, b = fig.axes[:2]
    assert len(a.patches) == 1 and a.patches[0].get_width() == pytest.approx(100.0)
    assert {t.get_text() for t in a.texts} == {"100.0", "partial 1/3"} and [t.get_text() for t in b.texts] == ["not run", "not run on this set"]
    assert any(list(line.get_xdata()) == [70.8, 70.8] for line in a.lines)  # the paper's tick
    full = [_fake(f"q{i}", 1.0, 1 + i % 2) for i in range(4)]
    have = {"metaqa1.fs_dense_norr": full, **{f"{p}.{c}": full for p in B.METAQA for c in ("fs_dense", "zs_dense")}}
    fig = B.figure_ablations(lambda c: have.get(c, []))
    t3, rounds, shots = fig.axes
    assert len(t3.patches) == 1
    assert sum(len(line.get_xdata()) == 5 for line in rounds.lines) == 6 + 2  # ours: fs and zs per hop; the paper's two
    assert [len(c.lines[0].get_xdata()) for c in shots.containers] == [2, 2, 2]  # a 0 → 5 shots line per hop
    assert shots.get_title() == "Target shots (not run yet: 25, 100)"


def test_withdrawn_cells_keep_their_settings_and_the_report_gives_each_reason():
    """A withdrawn deviation is no cell, but its setting still runs with `kgqa run`, and the report's "Not run"
    section names every withdrawn cell with its reason, the path depth's numbers from its committed measurement."""
    from kgqa_lib.methods import coerce_settings

    for config, pairs in B.WITHDRAWN.items():
        for p in pairs:
            c = B.make_cell(p, config)
            assert coerce_settings(dict(_args(c).set), c.method)["retrievers"] == "dense"
    assert coerce_settings(dict(_args(B.make_cell("metaqa1", "fs_dense_simex")).set), "fusic")["exemplar_choice"] \
        == "similarity"
    recs = [{**_fake(f"q{i}", 1.0, 1), "seconds": 36.0} for i in range(4)]
    text = B.report(lambda c: recs if c.endswith(".fs_dense") and c.startswith("metaqa") else [])
    tail = text.split("## Not run")[1].split("\n## ")[0]
    assert "`fs_dense_paths3` on MetaQA 1-hop, MetaQA 2-hop (withdrawn)" in tail
    assert "`fs_dense_simex` on MetaQA 1-hop, MetaQA 2-hop, MetaQA 3-hop (withdrawn" in tail
    assert "recorded 36 s a question its 300 questions would take ≈ 3.0 h" in tail
    from kgqa_lib.bench.fusic_paths import TABLE as DEPTH
    from kgqa_lib.bench.measure import read

    rows = {(r["hops"], r["max_path_hops"]): r for r in read(DEPTH)["rows"]}
    one = f"1-hop: gold path among the candidates {rows[1, 2]['gold path in candidates']} → " \
          f"{rows[1, 3]['gold path in candidates']} of 100"
    assert one in tail
    goal = text.split("## A target on MetaQA")[1].split("\n## ")[0]
    assert "2-hop: no cell: withdrawn (see Not run, below)" in goal


def test_the_metaqa_target_counts_every_one_retriever_configuration():
    """BM25 alone is one retriever too (the paper's FuSIC(P)): the MetaQA target lists it, few- and zero-shot, and
    the funnel has its rows beside the dense retriever's."""
    bm25 = [_fake(f"q{i}", 1.0 if i < 9 else 0.0, 1, [_ret("bm25", "path", True, True, True)]) for i in range(10)]
    text = B.report(lambda c: {"metaqa1.fs_bm25": bm25}.get(c, []))
    goal = text.split("## A target on MetaQA")[1].split("\n## ")[0]
    assert goal.count("- FuSIC, BM25 alone") == 2 and goal.count("- FuSIC, dense retriever") == 5  # fs, paths3, zs,
    assert "- FuSIC, dense retriever, 100 target shots" in goal  # and 25 and 100 target shots (the paper's 100)
    assert "MetaQA dev (our reported part), 1-hop: F1 90.0, 3.00 LLM calls/q (re-rank + generation + feedback) — met (n=10)" in goal
    assert "| mini-world (Wikidata-style) → MetaQA dev (our reported part), 1-hop | BM25 alone, paths ≤ 2 relations (the paper's) | 10 | 10 | 10 | 10 | 10 | 10 | 9 | 9 | not saved |" in goal
