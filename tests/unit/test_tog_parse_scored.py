"""ToG's ``parse_scored`` reads a reply in time linear in its length (the single pattern it used took
4 s for 20k characters without a score and minutes for 100k), and reads exactly what that pattern read:
the same names and scores, on generated replies mixing names, braces, line breaks and scores."""

from __future__ import annotations

import random
import re
import time

from kgqa_lib.methods.tog import parse_scored

# the pattern the scan must agree with, match for match
PATTERN = re.compile(r"\{?\s*([^{}\n]+?)\s*\(\s*score\s*[:=]?\s*([0-9]*\.?[0-9]+)\s*\)+\s*\}?", re.I)
PIECES = ["{", "}", "\n", " ", "\t", "\r", "(", ")", "x", "a b", "c", "c (reverse)", "(score: 0.5)", "(Score=1)",
          "( score 2 )", "(score: .3))", "(score:1.)", "(score: 0.5)}", "(score:", "0.7", "score", "(SCORE = 12.25)  }",
          "(score:\n1)", "(score 3)\n}", "1. ", "- "]
OPTIONS = ["a b", "c", "c (reverse)", "x"]


def _by_pattern(text: str) -> list[tuple[str, float]]:
    """What parse_scored returned with the pattern (scored names only)."""
    from kgqa_lib.methods.tog import _match

    found: dict[str, float] = {}
    for m in PATTERN.finditer(text):
        opt = _match(m.group(1), OPTIONS)
        if opt is not None and opt not in found:
            found[opt] = max(0.0, float(m.group(2)))
    return sorted(found.items(), key=lambda kv: -kv[1])


def test_long_replies_take_linear_time():
    for text in ("A " * 15000, "{" + "name " * 6000, "(score: " + "1" * 30000, "}(score: 1)" * 3000):
        t = time.perf_counter()
        parse_scored(text, ["directed by"])
        assert time.perf_counter() - t < 1.0, text[:20]
    t = time.perf_counter()
    pairs, err = parse_scored("{directed by (Score: 0.9)}\n" + "A " * 100000, ["directed by"])
    assert time.perf_counter() - t < 2.0 and pairs == [("directed by", 0.9)] and err is None


def test_the_scan_reads_what_the_pattern_read():
    rng = random.Random(0)
    scored = 0
    for _ in range(4000):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 14)))
        want = _by_pattern(text)
        got, err = parse_scored(text, OPTIONS)
        if want:
            scored += 1
            assert (got, err) == (want, None), repr(text)
        else:
            assert err is not None or got == [], repr(text)
    assert scored > 1000  # the generated replies do exercise the scores
