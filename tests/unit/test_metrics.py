"""Hand-worked examples for kgqa_lib.evaluate.metrics."""

import math

import numpy as np
import pytest

from kgqa_lib.evaluate import metrics as M
from kgqa_lib.evaluate.metrics import (any_hit, bootstrap_ci, exact_set_match, hits_at_1, lenient_match,
                                       normalize_answer, rouge_l, score, set_prf)


@pytest.mark.parametrize("raw, norm", [
    ("  The Dark Knight! ", "dark knight"),
    ("Amélie", "amelie"),
    ("Pedro Almodóvar", "pedro almodovar"),
    ("Song Kang-ho", "song kangho"),  # SQuAD deletes punctuation
    ("U.S.", "us"),
    ("1,000", "1000"),
    ("“Roma”", "roma"),  # Unicode quotes are punctuation too
    ("A Beautiful Mind", "beautiful mind"),
    ("An  American\tin Paris", "american in paris"),
    ("Theatre", "theatre"),  # articles only as whole words
    ("the", ""),
    (None, ""),
    (1999, "1999"),
])
def test_normalisation(raw, norm):
    assert normalize_answer(raw) == norm


def test_hits_at_1_uses_only_the_first_prediction():
    assert hits_at_1(["Christopher Nolan", "x"], ["christopher nolan"]) == 1.0
    assert hits_at_1(["x", "Christopher Nolan"], ["Christopher Nolan"]) == 0.0
    assert hits_at_1([], ["a"]) == 0.0
    assert hits_at_1(["The"], ["a"]) == 0.0  # both normalise to "", which is never a hit
    assert hits_at_1(["the Hague"], ["Hague"]) == 1.0


def test_any_hit():
    assert any_hit(["x", "Christopher Nolan"], ["Christopher Nolan"]) == 1.0
    assert any_hit(["x", "y"], ["Christopher Nolan"]) == 0.0
    assert any_hit([], []) == 0.0


def test_set_metrics():
    assert exact_set_match(["Roma", "Gravity"], ["gravity", "roma"]) == 1.0
    assert exact_set_match(["Roma", "roma!"], ["Roma"]) == 1.0  # duplicates after normalisation
    assert exact_set_match(["Roma"], ["Gravity", "Roma"]) == 0.0
    assert exact_set_match([], []) == 1.0
    # P = {roma, avatar}, G = {roma, gravity, children of men}: tp = 1 → p = 1/2, r = 1/3, f1 = 2/5
    p, r, f = set_prf(["Roma", "Avatar"], ["Roma", "Gravity", "Children of Men"])
    assert p == 0.5 and r == pytest.approx(1 / 3) and f == pytest.approx(0.4)
    assert set_prf(["Roma"], ["Roma"]) == (1.0, 1.0, 1.0)
    assert set_prf(["x"], ["y"]) == (0.0, 0.0, 0.0)
    assert set_prf([], []) == (1.0, 1.0, 1.0)
    assert set_prf(["x"], []) == (0.0, 0.0, 0.0)
    assert set_prf([], ["x"]) == (0.0, 0.0, 0.0)


def test_lenient_match_is_guarded():
    assert lenient_match(["Barack Obama"], ["Obama"]) == 1.0  # gold inside prediction
    assert lenient_match(["Obama"], ["Barack Obama"]) == 1.0  # prediction inside gold
    assert lenient_match(["President Barack Obama"], ["Barack Obama"]) == 1.0
    assert lenient_match(["The answer is: Barack Obama."], ["barack obama"]) == 1.0
    # the abuse: short strings "hitting" a longer answer
    assert lenient_match(["a"], ["Barack Obama"]) == 0.0
    assert lenient_match(["the"], ["The Hague"]) == 0.0
    assert lenient_match(["b"], ["Barack Obama"]) == 0.0
    assert lenient_match(["Ob"], ["Barack Obama"]) == 0.0  # not a whole word
    assert lenient_match(["Jr"], ["Martin Luther King Jr."]) == 0.0  # a whole word, but < 3 characters
    assert lenient_match(["H"], ["Barack H. Obama"]) == 0.0
    assert lenient_match(["King"], ["Martin Luther King Jr."]) == 1.0  # 4 characters, a whole word
    assert lenient_match(["ama"], ["Barack Obama"]) == 0.0  # not on a word boundary
    assert lenient_match(["Obamacare"], ["Obama"]) == 0.0
    assert lenient_match(["UK"], ["uk"]) == 1.0  # equality always counts, short or not
    assert lenient_match(["born in 1942"], ["42"]) == 0.0
    assert lenient_match([], ["Obama"]) == 0.0


def test_rouge_l():
    assert rouge_l("the danube flows through budapest", ["The Danube flows through Budapest."]) == pytest.approx(1.0)
    # LCS("danube flows", "the danube flows through budapest") = 2: P = 2/2, R = 2/5 → F = 4/7
    assert rouge_l("danube flows", ["the danube flows through budapest"]) == pytest.approx(4 / 7)
    # stemming: "flowing" and "flows" both stem to "flow"
    assert rouge_l("danube flowing", ["danube flows"]) == pytest.approx(1.0)
    assert rouge_l("", ["x"]) == 0.0
    assert rouge_l("   ", ["x"]) == 0.0
    assert rouge_l("x", []) == 0.0
    assert rouge_l("rivers in europe", ["The Danube flows through Budapest."]) == 0.0
    assert rouge_l("danube", ["nothing alike", "Danube"]) == pytest.approx(1.0)  # max over references


def test_bootstrap_ci():
    vals = [1, 0, 1, 1, 0, 1, 0, 1, 1, 1]
    m, lo, hi = bootstrap_ci(vals, seed=3)
    assert m == pytest.approx(0.7) and lo <= m <= hi and 0.3 <= lo < m < hi <= 1.0
    assert bootstrap_ci(vals, seed=3) == (m, lo, hi)  # deterministic
    cont = [0.1, 0.9, 0.35, 0.6, 0.2, 0.75, 0.05, 0.5]
    assert bootstrap_ci(cont, seed=1) == bootstrap_ci(cont, seed=1)
    assert bootstrap_ci(cont, seed=1) != bootstrap_ci(cont, seed=2)  # the seed matters
    m90, lo90, hi90 = bootstrap_ci(vals, seed=3, confidence=0.9)
    assert lo <= lo90 and hi90 <= hi  # a narrower level gives a narrower interval
    assert bootstrap_ci([0.5]) == (0.5, 0.5, 0.5)
    assert bootstrap_ci([2.0, 2.0, 2.0]) == (2.0, 2.0, 2.0)
    assert all(math.isnan(x) for x in bootstrap_ci([]))
    assert bootstrap_ci([None, 1.0, None]) == (1.0, 1.0, 1.0)
    # the same computation by hand
    rng = np.random.default_rng(3)
    x = np.asarray(vals, dtype=float)
    means = x[rng.integers(0, 10, size=(1000, 10))].mean(axis=1)
    assert (lo, hi) == pytest.approx(tuple(np.quantile(means, [0.025, 0.975])))
    big = bootstrap_ci(list(np.random.default_rng(0).random(5000)), n_resamples=600)
    assert big[1] < big[0] < big[2] and big[2] - big[1] < 0.03


def test_score_kinds():
    s = score(["Roma"], ["Roma", "Gravity"])
    assert set(s) == set(M.FACTOID_KEYS)
    assert s["hits@1"] == 1.0 and s["any_hit"] == 1.0 and s["exact_match"] == 0.0
    assert s["precision"] == 1.0 and s["recall"] == 0.5 and s["f1"] == pytest.approx(2 / 3)
    assert s["lenient"] == 1.0
    o = score([], ["Budapest lies on the Danube."], kind="open", response="Budapest lies on the Danube.")
    assert o == {"rouge_l": pytest.approx(1.0)}
    # without a response the joined predictions are scored
    o2 = score(["Budapest", "Danube"], ["Budapest Danube"], kind="open")
    assert o2["rouge_l"] == pytest.approx(1.0)
    assert score([], ["x"], kind="open") == {"rouge_l": 0.0}
    with pytest.raises(ValueError):
        score(["x"], ["x"], kind="multiple-choice")


def test_package_exports_the_metrics():
    import kgqa_lib.evaluate as ev

    for name in M.__all__:
        assert getattr(ev, name) is getattr(M, name)
