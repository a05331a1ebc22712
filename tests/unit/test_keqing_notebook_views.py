"""What notebooks 31 and 32 print beside Keqing's tables, from the library: shares in points (the reports keep
fractions), each table's legend (the report's own text, one place), the wording of Fig. 6 and of the parts
beyond the figures derived from the paired 95% CIs, the parts' rows without their long column, the model
axis without the repeated metric, Table 2's sample sizes and the WebQSP coverage — on synthetic stripped
records in a temporary results folder."""

from __future__ import annotations

import gzip
import json

import pandas as pd
import pytest

from kgqa_lib.bench import core
from kgqa_lib.bench import keqing as K
from kgqa_lib.bench import keqing_grailqa as G
from kgqa_lib.bench.result_table import table


def _rec(qid: str, hit: float, *, gold_selected: int | None = None, reasoning: list[dict] | None = None) -> dict:
    return {"qid": qid, "kind": "factoid", "metrics": {"hits@1": hit, "f1": hit}, "seconds": 5.0,
            "prediction": ["x"] if hit else [], "error": None,
            "llm": {"calls": 3, "prompt_tokens": 700, "completion_tokens": 100, "recorded_seconds": 4.0, "seconds": 4.0,
                    "cache_hits": 0},
            "diagnostics": {"decomposition": {"predicted_chain": ["r"], "chain_correct": True, "seed_correct": True,
                                              "correct": True}},
            "selection": {"n_gold": 1, "gold_in_candidates": 1, "n_candidates": 3, "candidates_listed": 3,
                          "gold_selected": int(hit) if gold_selected is None else gold_selected, "n_selected": 2},
            "reasoning": reasoning or [{"mode": "select", "n_candidates": 3, "calls": 1}],
            "stages": {"calls": {"decompose": 1, "reasoning": 1, "respond": 1}},
            "response_check": {"names_top1": bool(hit)}}


def _save(t: core.Table, cell: str, records: list[dict]) -> None:
    t.records_dir.mkdir(parents=True, exist_ok=True)
    with gzip.open(t.records_dir / f"{cell}.jsonl.gz", "wt", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in records)


@pytest.fixture
def results(tmp_path, monkeypatch):
    monkeypatch.setenv("KGQA_RESULTS_DIR", str(tmp_path))
    monkeypatch.setattr(K, "compute_ceiling", lambda hops, qids: (float("nan"), 0))
    monkeypatch.setattr(K, "gold_chains_of", lambda hops: None)
    return tmp_path


# ---------------------------------------------------------------- points
def test_in_points_rewrites_the_shares_of_the_named_columns_only():
    t = table("t", "T", ["hops", "Hits@1 [95% CI]", "chain right / seed right", "paper", "calls/q", "gain"],
              [[1, "0.970 [0.940, 0.990]", "0.99 / 1.00 (n=100 / 38)", "0.778 (0.725)", "2.38", "+1.0 [+0.0, +3.0]"],
               [2, "not run yet", "— / 1.00 (n=1)", "—", "1.00", ""]])
    out = K.in_points(t, ("Hits@1 [95% CI]", "chain right / seed right", "paper"))
    assert out.rows[0] == (1, "97.0 [94.0, 99.0]", "99 / 100 (n=100 / 38)", "77.8 (72.5)", "2.38", "+1.0 [+0.0, +3.0]")
    assert out.rows[1] == (2, "not run yet", "— / 100 (n=1)", "—", "1.00", "")  # calls/q is no share: as it was
    assert out.columns == t.columns and out.title == t.title


def test_gold_selected_can_stand_above_hits_at_1_as_the_legend_says(results):
    """A selection that keeps the gold answer below a wrong one: `gold selected` counts it, Hits@1 does not."""
    for h in K.HOPS:
        _save(K.TABLE_FULL, f"keqing_full_{h}hop", [_rec(f"m{h}-{i}", float(i >= 10), gold_selected=1)
                                                     for i in range(200)])
    full = K.frames("keqing_full")
    assert full["selection"].loc[1, "gold selected"] == "100.0"
    assert full["four_stages"].loc[1, "Hits@1 [95% CI]"].startswith("95.0 [")
    assert "at any rank" in K.legend("selection") and "Hits@1 counts the first answer only" in K.legend("selection")


# ---------------------------------------------------------------- legends: the reports' own text
def test_each_legend_is_the_text_its_report_prints(results):
    full_text = K.report_full(core.Records(K.TABLE_FULL))
    for name in ("four_stages", "selection", "disagreements"):
        assert K.LEGENDS[name] in full_text and K.legend(name).endswith(K.LEGENDS[name])
    for column in ("`gain`", "`seed linked right`", "`(n=…)`", "`decomposition acc. (chain)`"):
        assert column in K.legend("four_stages")
    for column in ("`fell back to all`", "`over bound`", "`response names the top answer`"):
        assert column in K.legend("selection")
    assert K.legend("four_stages").startswith(K.POINTS_NOTE) and not K.legend("disagreements").startswith(K.POINTS_NOTE)
    abl_text = K.report_ablations(core.Records(K.TABLE_ABLATIONS))
    assert all(note in abl_text for note in K.ABLATION_NOTES.values()) and K.LAST_NOTE in abl_text
    shown = K.legend("ablations", ["n", "gain over default", "calls/q"])
    assert "`gain over default`" in shown and "`calls/q`" in shown and "`candidates / sub-q`" not in shown
    assert K.PARTS_LEGEND in abl_text and all(f"`what it changed`: {c}" in abl_text for c in K.CHANGED.values())
    grail = G.report(lambda cell: [])
    for part in (G.QUESTIONS_LEGEND, G.SETTINGS_LEGEND, G.PAPER_COLUMNS, G.EM_NOTE):
        assert part in grail
    assert G.SETTINGS_LEGEND in G.legend("settings") and G.QUESTIONS_LEGEND in G.legend("linked")
    assert "as fractions" not in G.legend("settings") and G.legend("linked_levels").startswith(K.POINTS_NOTE)


def test_the_last_sub_question_has_no_one_hop_cell():
    assert K.LAST_LABEL not in K._hop_cells(1) and K.LAST_LABEL in K._hop_cells(2)
    assert "1-hop question has one sub-question" in K.LAST_NOTE


# ---------------------------------------------------------------- wording from the paired CIs
def _chain(*rows):
    return pd.DataFrame([{"hops": h, "gain": g, "gain_low": lo, "gain_high": hi, "n": 100} for h, g, lo, hi in rows]
                        ).set_index("hops")


def test_fig6_wording_follows_the_intervals():
    level = K.fig6_wording(_chain((1, 0.0, 0.0, 0.0), (2, 1.0, 0.0, 3.0), (3, 3.0, 0.0, 6.0)))
    assert level == ("it does not reproduce the paper's lead for sub-questions: the chain scores level or higher, every "
                     "paired 95% CI reaching 0")
    assert "level or lower" in K.fig6_wording(_chain((2, -1.0, -3.0, 0.0), (3, -2.0, -5.0, 1.0)))
    mixed = K.fig6_wording(_chain((1, -4.0, -7.0, -1.0), (2, 3.0, 1.0, 6.0), (3, 1.0, -1.0, 3.0)))
    assert mixed == ("the paper's lead for sub-questions holds at 1-hop (paired 95% CI below 0); it goes the other way "
                     "from the paper at 2-hop (the chain ahead, paired 95% CI above 0); unclear at 3-hop (paired 95% CI "
                     "reaching 0)")


def test_the_expectation_of_a_part_holds_fails_or_is_unclear_by_its_interval():
    gains = {1: (-0.06, -0.11, -0.02, 100), 2: (-0.01, -0.05, 0.02, 100), 3: None}
    text = K.expectation(K.DENSE_LABEL, gains)
    assert text.startswith("Expected: Hits@1 ≥ the default")
    assert "1-hop fails, -6.0 [-11.0, -2.0] points (the paired 95% CI on the other side of 0)" in text
    assert "2-hop unclear, -1.0 [-5.0, +2.0] points (the paired 95% CI reaching 0)" in text
    assert "3-hop not run yet" in text and "`what it changed`" in text
    # candidates as text are expected below the default: the same interval then holds
    assert "1-hop holds, -6.0 [-11.0, -2.0] points (the paired 95% CI on the expected side of 0)" in \
        K.expectation(K.TEXT_LABEL, gains)


def test_parts_view_drops_the_long_columns_and_prints_them_below(results):
    for h in K.HOPS:
        _save(K.TABLE_FULL, f"keqing_full_{h}hop", [_rec(f"m{h}-{i}", 1.0) for i in range(200)])
    dense = [{"mode": "select", "n_candidates": 3, "n_answers": 2, "dense": 2, "dense_selected": 1, "calls": 1}]
    _save(K.TABLE_ABLATIONS, "keqing_dense_1hop", [_rec(f"m1-{i}", float(i >= 6), reasoning=dense) for i in range(100)])
    parts = K.frames("keqing_ablations")["parts"]
    view, notes = K.parts_view(parts, K.DENSE_LABEL)
    assert list(view.columns) == ["paired n", "default Hits@1", "Hits@1", "difference [95% CI]"]
    assert view.loc[1, "default Hits@1"] == "100.0" and view.loc[1, "Hits@1"] == "94.0"  # points
    assert all(len(line) <= 110 for line in notes.splitlines())
    flat = " ".join(notes.split())  # wrapped to 110 characters
    assert "1-hop fails, -6.0 [" in flat and "2-hop not run yet" in flat
    assert "1-hop: 2.0 supplement candidates in 100 sub-questions" in flat


# ---------------------------------------------------------------- Table 2's samples, the model axis, WebQSP
def test_table2_samples_say_which_rows_stand_on_which_questions(results):
    from kgqa_lib.bench import baselines as B

    for h in K.HOPS:
        _save(K.TABLE_FULL, f"keqing_full_{h}hop", [_rec(f"m{h}-{i}", 1.0) for i in range(200)])
        for m in ("kbbinder", "tog"):
            _save(B.TABLE_METAQA, f"{m}_metaqa_{h}hop", [_rec(f"m{h}-{i}", 1.0) for i in range(100)])
    text = K.table2_samples()
    assert "Keqing 200, KB-BINDER 100, Think-on-Graph 100 questions per hop, the baselines' all among Keqing's" in text


def test_models_view_moves_the_shared_metric_to_the_caption(results):
    frame, caption = K.models_view(["keqing_full"], ["local:qwen2.5-0.5b"])
    assert "metric" not in frame.columns and caption.startswith("metric: hits@1")
    assert frame.index.names == ["table", "cell"]


def test_webqsp_line_counts_k_of_n():
    line = G.webqsp_line({"parses": 98, "covered": 1, "1-hop": 61, "2-hop": 37})
    assert line == ("WebQSP parses with an inferential chain: 98 (61 one-hop, 37 two-hop); the GrailQA pool's template "
                    "bank holds every chain relation of 1 of the 98.")
