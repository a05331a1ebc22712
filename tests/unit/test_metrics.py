import math

import pytest

from kgqa_lib.evaluate.metrics import (any_hit, bootstrap_ci, exact_set_match, hits_at_1, lenient_match,
                                       normalize_answer, rouge_l, score, set_prf)


def test_normalisation():
    assert normalize_answer("  The Dark Knight! ") == "dark knight"
    assert normalize_answer("Amélie") == "amelie"
    assert normalize_answer("Song Kang-ho") == "song kang ho"
    assert normalize_answer(None) == ""


def test_hits_at_1_uses_only_the_first_prediction():
    assert hits_at_1(["Christopher Nolan", "x"], ["christopher nolan"]) == 1.0
    assert hits_at_1(["x", "Christopher Nolan"], ["Christopher Nolan"]) == 0.0
    assert any_hit(["x", "Christopher Nolan"], ["Christopher Nolan"]) == 1.0
    assert hits_at_1([], ["a"]) == 0.0


def test_set_metrics():
    assert exact_set_match(["Roma", "Gravity"], ["gravity", "roma"]) == 1.0
    assert exact_set_match(["Roma"], ["Gravity", "Roma"]) == 0.0
    p, r, f = set_prf(["Roma", "Avatar"], ["Roma", "Gravity", "Children of Men"])
    assert (p, r) == (0.5, pytest.approx(1 / 3)) and f == pytest.approx(0.4)
    assert set_prf([], []) == (1.0, 1.0, 1.0)
    assert set_prf(["x"], []) == (0.0, 0.0, 0.0)


def test_lenient_match_is_guarded():
    assert lenient_match(["Barack Obama"], ["Obama"]) == 1.0
    assert lenient_match(["President Barack Obama"], ["Barack Obama"]) == 1.0
    assert lenient_match(["a"], ["Barack Obama"]) == 0.0
    assert lenient_match(["the"], ["The Hague"]) == 0.0
    assert lenient_match(["Ob"], ["Barack Obama"]) == 0.0
    assert lenient_match(["Obamacare"], ["Obama"]) == 0.0  # word boundaries


def test_rouge_l():
    assert rouge_l("the danube flows through budapest", ["The Danube flows through Budapest."]) == pytest.approx(1.0)
    assert rouge_l("", ["x"]) == 0.0
    lo = rouge_l("rivers in europe", ["The Danube flows through Budapest."])
    assert 0.0 <= lo < 0.3
    assert rouge_l("danube", ["nothing alike", "Danube"]) == pytest.approx(1.0)  # max over references


def test_bootstrap_ci():
    vals = [1, 0, 1, 1, 0, 1, 0, 1, 1, 1]
    m, lo, hi = bootstrap_ci(vals, seed=3)
    assert m == pytest.approx(0.7) and lo <= m <= hi and 0.3 <= lo and hi <= 1.0
    assert bootstrap_ci(vals, seed=3) == (m, lo, hi)
    assert bootstrap_ci([0.5]) == (0.5, 0.5, 0.5)
    assert all(math.isnan(x) for x in bootstrap_ci([]))


def test_score_kinds():
    s = score(["Roma"], ["Roma", "Gravity"])
    assert s["hits@1"] == 1.0 and s["exact_match"] == 0.0 and s["recall"] == 0.5
    o = score([], ["Budapest lies on the Danube."], kind="open", response="Budapest lies on the Danube.")
    assert o == {"rouge_l": pytest.approx(1.0)}
