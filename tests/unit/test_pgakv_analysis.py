"""The analysis of finished PG&AKV runs, on synthetic records: the pruning chosen on dev questions only,
cells read on the test questions of complete runs, the paper's verification-error share, the QSM
comparison, the paper's own gains and where an interval lies. (The reports and the notebooks' tables
built from these: tests/unit/test_bench_pgakv.py.)"""

import pytest

from kgqa_lib.evaluate import pgakv_analysis as A
from kgqa_lib.methods.pgakv import PseudoGraph, Retrieval, prune


def _rec(qid, hit, kind="factoid", gold=("Georgian lari",), trace=None):
    metrics = {"rouge_l": hit} if kind == "open" else {"hits@1": hit}
    return {"qid": qid, "gold": list(gold), "kind": kind, "metrics": metrics, "error": None, "seconds": 1.0,
            "llm": {"calls": 1, "prompt_tokens": 1, "completion_tokens": 1, "recorded_seconds": 1.0, "cache_hits": 0},
            "trace": trace or []}


def _loader(right: dict[tuple[str, str], set[str]]):
    """Every question of every set in every run; right[(set, run)] holds the qids answered right."""
    qids = {s: sorted(A.split_qids(s)[0] | A.split_qids(s)[1]) for s in A.SETS}
    return lambda s, run: [_rec(q, float(q in right.get((s, run), set())), "open" if s == "open" else "factoid")
                           for q in qids[s]]


def test_pruning_is_chosen_on_dev_questions_only():
    dev = {s: A.split_qids(s)[0] for s in A.FACTOID}
    test = {s: A.split_qids(s)[1] for s in A.FACTOID}
    # 0.5 wins on dev by one question; 0.7 wins every test question: the choice must not see the test
    right = {(s, "pgakv"): set(test[s]) for s in A.FACTOID}
    right |= {(s, "pgakv_thr05"): set() for s in A.FACTOID}
    right[("simple", "pgakv_thr05")] = {sorted(dev["simple"])[0]}
    choice = A.choose_pruning(_loader(right))
    assert choice["choice"] == {"threshold": 0.5, "k_extra": 0, "k": "#subjects(G_p)", "run": "pgakv_thr05"}
    assert choice["dev"][0.5, 0]["pooled"] == (1, 74) and choice["dev"][0.7, 0]["pooled"] == (0, 74)
    assert choice["dev_sizes"] == {"simple": 48, "multihop": 26}
    # a tie keeps the paper's 0.7
    right[("simple", "pgakv")] = {sorted(dev["simple"])[1]}
    assert A.choose_pruning(_loader(right))["choice"]["threshold"] == 0.7


def test_top_k_is_chosen_from_its_dev_only_run():
    dev = {s: sorted(A.split_qids(s)[0]) for s in A.FACTOID}
    test = {s: A.split_qids(s)[1] for s in A.FACTOID}
    right = {(s, "pgakv"): set(test[s]) for s in A.FACTOID} | {(s, "pgakv_thr05"): {dev[s][0]} for s in A.FACTOID}
    right |= {(s, "pgakv_thr05_k1"): set(test[s]) for s in A.FACTOID}  # k+1 right on every test question

    def loader(k1_dev: bool):
        full = _loader(right)

        def load(s, run):  # k+1 ran on the test questions (``<run>``) and, if k1_dev, on dev (``<run>_dev``)
            if run == "pgakv_thr05_k1":
                return [r for r in full(s, run) if r["qid"] in test[s]]
            if run == "pgakv_thr05_k1_dev":
                return [r for r in full(s, run) if r["qid"] in set(dev[s])] if k1_dev else []
            return full(s, run)
        return load

    # no k+1 run on dev: the choice is among the thresholds; its test records are never read for it
    choice = A.choose_pruning(loader(False))
    assert choice["choice"]["run"] == "pgakv_thr05" and (0.5, 1) not in choice["dev"]
    # the dev-only run of k+1 wins by one pooled dev question
    right |= {(s, "pgakv_thr05_k1_dev"): {dev[s][0]} for s in A.FACTOID}
    right[("simple", "pgakv_thr05_k1_dev")].add(dev["simple"][1])
    choice = A.choose_pruning(loader(True))
    assert choice["choice"] == {"threshold": 0.5, "k_extra": 1, "k": "#subjects(G_p)+1", "run": "pgakv_thr05_k1"}
    assert choice["dev"][0.5, 1]["pooled"] == (3, 74) and A.choice_margin(choice) == 1
    # a tie between the two k at 0.5 keeps the paper's k
    right[("simple", "pgakv_thr05_k1_dev")] = {dev["simple"][0]}
    assert A.choose_pruning(loader(True))["choice"]["run"] == "pgakv_thr05"
    # a dev run still going (some dev questions missing) is not compared, even when it leads so far
    right[("simple", "pgakv_thr05_k1_dev")] = set(dev["simple"][:10])
    partial = loader(True)

    def going(s, run):
        recs = partial(s, run)
        return recs[:20] if run == "pgakv_thr05_k1_dev" and s == "simple" else recs

    assert (0.5, 1) not in A.choose_pruning(going)["dev"]
    # complete_only judges a dev-only run by the dev split (its test coverage is 0 by design)
    assert A.complete_only(partial)("multihop", "pgakv_thr05_k1_dev") and not A.complete_only(going)("simple", "pgakv_thr05_k1_dev")
    assert A.split_coverage("simple", "pgakv_thr05_k1_dev", going) == (20, 48)


def test_verification_error_share_is_the_papers_counterfactual():
    full = [_rec("a", 0.0), _rec("b", 0.0), _rec("c", 0.0), _rec("d", 1.0), _rec("e", 0.0)]
    without = [_rec("a", 1.0), _rec("b", 0.0), _rec("c", 0.0), _rec("d", 0.0)]  # "e" was not run without
    trace = lambda: [{"name": "cypher_to_triples", "output": {"triples": []}}]  # noqa: E731
    for r in full:
        r["trace"] = trace()
    v = A.verification_error_share(full, without)
    assert (v["wrong"], v["introduced"], v["qids"]) == (3, 1, ["a"]) and v["share"] == pytest.approx(1 / 3)
    assert v["trace stage of those"] == {"Cypher": 1}


def _pg_record(qid, hits, gold=("Georgian lari",), hit=0.0, threshold=0.7):
    pg = PseudoGraph("", "CREATE ...", triples=[("Georgia", "currency", "Lari")])
    ret = Retrieval([], len(hits), hits)
    return _rec(qid, hit, gold=gold, trace=[
        {"name": "cypher_to_triples", "output": pg.as_dict()},
        {"name": "semantic_query", "output": ret.as_dict()},
        {"name": "prune", "output": prune(ret, pg, threshold=threshold).as_dict()},
        {"name": "verify", "output": {"triples": [["Georgia", "currency", "Lari"]]}}])


def _hits(subject, label, objs, score):
    return [{"pseudo": 0, "triple": (label, "r", o), "subject": subject, "score": score} for o in objs]


def test_qsm_wins_names_the_stage_and_the_pruning_cause():
    under = _pg_record("under", _hits("iGE", "Georgia", ["Georgian lari", "Tbilisi"], 0.6))  # top-k, under 0.7
    outranked = _pg_record("outranked", _hits("iAZ", "Azerbaijan", ["a", "b", "c"], 0.9)
                           + _hits("iGE", "Georgia", ["Georgian lari"], 0.8))  # over 0.7, not in the top 1
    kept = _pg_record("kept", _hits("iGE", "Georgia", ["Georgian lari"], 0.8))  # G_g holds it: lost later
    assert A.pruning_loss(under) == "threshold" and A.pruning_loss(outranked) == "top-k"
    qsm = [_rec(q, 1.0, trace=[{"name": "match_question", "output": {"hits": [{"score": 0.75}]}}])
           for q in ("under", "outranked", "kept")]
    w = A.qsm_wins([under, outranked, kept], qsm, thresholds=(0.5, 0.0))
    assert w["qsm right, pgakv wrong"] == 3 and w["stage"] == {"pruning": 2, "verification": 1}
    assert w["pruning cause"] == {"threshold": 1, "top-k": 1}
    assert w["kept in G_g when re-pruned at"] == {0.5: 1, 0.0: 1}  # the threshold loss comes back; top-k stays lost
    assert w["gold subject mean cosine"]["0.6–0.7"] == 1 and w["gold subject mean cosine"]["≥ 0.7"] == 1


def test_a_run_still_in_progress_reads_as_not_run():
    test = sorted(A.split_qids("simple")[1])
    full = _loader({("simple", "pgakv_pg"): set(test)})
    partial = lambda s, run: full(s, run)[:20] if run == "pgakv_pg" else full(s, run)  # noqa: E731
    assert A.complete_only(partial)("simple", "pgakv_pg") == []
    assert A.cell_on_test("simple", "pgakv_pg", partial).startswith("not run yet (")
    assert A.cell_on_test("simple", "pgakv_pg", full) == f"100.0 [100.0, 100.0] (n={len(test)})"
    assert A.gain_on_test("simple", "pgakv_pg", "cot", partial) == "—"
    assert A.gain_on_test("simple", "pgakv_pg", "cot", full).startswith("+100.0 [+100.0, +100.0]")


def test_verification_changes_counts_kept_removed_corrected_and_added():
    def trace(sketch, ground, final, deleted, added):
        return [{"name": "cypher_to_triples", "output": {"triples": sketch}}, {"name": "prune", "output": {"triples": ground}},
                {"name": "verify", "output": {"triples": final, "deleted": deleted, "added": added}}]

    a, b, c = ["Tbilisi", "country", "Georgia"], ["Georgia", "currency", "Euro"], ["Georgia", "currency", "Georgian lari"]
    rec = _rec("q1", 1.0, trace=trace([a, b], [c], [a, c], [b], [c]))
    rec["response"] = "Georgian lari"
    base = _rec("q1", 0.0)
    base["response"] = "Euro"
    got = A.verification_changes([rec], [base])
    assert (got["kept"], got["removed"], got["corrected"], got["added"], got["added from G_g"]) == (1, 0, 1, 1, 1)
    assert (got["answer text differs from the Pseudo-Graph run"], got["Hits@1 above the Pseudo-Graph run"],
            got["Hits@1 below the Pseudo-Graph run"]) == (1, 1, 0)  # each row names the run it compares with


def test_the_papers_gains_are_read_by_table_row_and_column():
    assert A.paper_gain("simple", "best KG-free") == (12.3, "Table 2, column SimpleQuestions: Ours − CoT")
    assert A.paper_gain("multihop", "best KG-free") == (7.5, "Table 2, column QALD-10: Ours − SC")
    assert A.paper_gain("multihop", "qsm") == (14.4, "Table 2, column QALD-10: Ours − QSM")
    assert A.paper_gain("open", "best KG-free") == (14.3, "Table 4, column Nature Questions: Verification − CoT")
    assert A.paper_gain("open", "qsm")[0] is None  # Table 2's Nature Questions column is not in our copy
    assert A.paper_ablation_gain(A.PAPER_TABLE4, "multihop", "pgakv_pg", "cot") == 3.9
    assert A.paper_ablation_gain(A.PAPER_TABLE5, "open", "pgakv", "pgakv_pg") == 14.8
    assert A.paper_ablation_gain(A.PAPER_TABLE4, "simple", "pgakv", "cot") is None  # no SimpleQuestions column


def test_a_verdict_says_where_the_interval_lies():
    assert A.side((0.1, 0.02, 0.2, 50)) == 1 and A.side((-0.1, -0.2, -0.01, 50)) == -1
    assert A.side((0.0, -0.1, 0.1, 50)) == 0 and A.side(None) == 0
    assert A.verdict((0.1, 0.02, 0.2, 50), claim=7.5) == "wholly above zero; the claimed minimum is inside it"
    assert A.verdict((0.1, 0.09, 0.2, 50), claim=7.5) == "wholly above zero; it lies wholly above the claimed minimum"
    assert A.verdict((0.0, -0.1, 0.05, 50), claim=7.5) == "compatible with zero; it lies wholly below the claimed minimum"


def test_retrieval_scores_split_by_whether_the_triple_holds_a_gold_answer():
    rec = _pg_record("q", _hits("iGE", "Georgia", ["Georgian lari", "Tbilisi"], 0.6) + _hits("iAZ", "Azerbaijan", ["x"], 0.9))
    got = A.retrieval_scores([rec])
    assert got == {"holds a gold answer": [0.6], "no gold answer": [0.6, 0.9]}
    # the gold triple ties one other (half) and is below the second: probability 0.25
    said = A.score_separation(got)
    assert "0.60 for the 1 triples holding a gold answer, 0.75 for the 2 others" in said
    assert "with probability 0.25 (" in said and said.endswith("the cosine hardly separates them.")
    assert "probability 1.00 (" in A.score_separation({"holds a gold answer": [0.9], "no gold answer": [0.1, 0.2]})
    assert A.score_separation({"holds a gold answer": [], "no gold answer": [0.5]}).startswith("Too few")


def test_the_demo_grid_is_methods_by_sets_with_the_sets_metric(tmp_path):
    import json

    def write(name, recs):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps(r | {"method": name.split("__")[1], "dataset": name.split("__")[0]}) + "\n"
                                for r in recs))
        return path

    paths = {("miniworld:simple", "io"): write("s__io", [_rec("a", 1.0), _rec("b", 0.0)]),
             ("miniworld:simple", "qsm"): write("s__qsm", [_rec("a", 1.0), _rec("b", 1.0)]),
             ("miniworld:open", "io"): write("o__io", [_rec("c", 0.4, "open")]),
             ("miniworld:open", "qsm"): write("o__qsm", [_rec("c", 0.6, "open")])}
    _, grid = A.demo_grid(paths, methods=["qsm", "io"])
    assert list(grid.index) == ["qsm", "io"]
    assert list(grid.columns) == ["miniworld:simple (Hits@1)", "miniworld:open (ROUGE-L)"]
    assert grid.loc["qsm", "miniworld:simple (Hits@1)"].startswith("1.00 [") and grid.loc["io", "miniworld:open (ROUGE-L)"].startswith("0.40")



def test_pruning_outcome_counts_ground_triples_and_empty_ground_graphs():
    kept = _pg_record("kept", _hits("iGE", "Georgia", ["Georgian lari"], 0.8), hit=1.0)
    empty = _pg_record("empty", _hits("iGE", "Georgia", ["Georgian lari"], 0.5))  # under the 0.7 threshold
    assert A.pruning_outcome([kept, empty]) == {"questions": 2, "hits@1": 0.5, "ground triples / q": 0.5,
                                                "empty ground graphs": 1}
