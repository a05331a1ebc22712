"""ToG's ``parse_scored`` reads a reply in time linear in its length (the single pattern it used took
4 s for 20k characters without a score and minutes for 100k), and reads exactly what that pattern read:
the same names and scores, on generated replies mixing names, braces, line breaks and scores."""

from __future__ import annotations

import random
import re

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


class _Counting:
    """A compiled pattern that counts the characters its ``search`` calls can examine."""

    def __init__(self, pattern: re.Pattern) -> None:
        self.pattern, self.scanned = pattern, 0

    def search(self, text: str, pos: int = 0, endpos: int | None = None):
        m = self.pattern.search(text, pos, len(text) if endpos is None else endpos)
        self.scanned += (m.end() if m else (len(text) if endpos is None else endpos)) - pos
        return m


def _work(text: str, monkeypatch) -> tuple[int, int, list]:
    """(characters scanned by the name searches, Python lines run in tog.py, parse_scored's result)."""
    import sys

    from kgqa_lib.methods import tog

    counters = [_Counting(tog._NAME_END), _Counting(tog._NON_SPACE)]
    monkeypatch.setattr(tog, "_NAME_END", counters[0])
    monkeypatch.setattr(tog, "_NON_SPACE", counters[1])
    lines = [0]

    def trace(frame, event, arg):
        if frame.f_code.co_filename != tog.__file__:
            return None
        if event == "line":
            lines[0] += 1
        return trace

    sys.settrace(trace)
    try:
        result = parse_scored(text, ["directed by"])
    finally:
        sys.settrace(None)
        monkeypatch.undo()
    return sum(c.scanned for c in counters), lines[0], result


# shapes that made the single pattern backtrack over every start (quadratic or worse)
LONG = ["A ", "{name ", "(score: 1", "}(score: 1)", "{directed by (Score: 0.9)}\n", "x\n(score: 1)\n", "{ {"]


def test_long_replies_take_linear_work(monkeypatch):
    """The work per character stays bounded as the reply grows 8x: counted, not timed (a loaded machine
    cannot fail it, a quadratic scan cannot pass it)."""
    for unit in LONG:
        per_char = []
        for n in (2_000, 16_000):
            text = unit * (n // len(unit))
            scanned, lines, _ = _work(text, monkeypatch)
            assert scanned <= 4 * len(text), (unit, n, scanned)
            per_char.append(lines / len(text))
        assert per_char[1] <= 1.5 * per_char[0] + 0.01, (unit, per_char)  # linear: same lines per character


def test_a_scored_line_before_a_long_tail_is_read(monkeypatch):
    _, _, (pairs, err) = _work("{directed by (Score: 0.9)}\n" + "A " * 100_000, monkeypatch)
    assert pairs == [("directed by", 0.9)] and err is None


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


def _best_seconds(text: str) -> float:
    import time

    best = float("inf")
    for _ in range(3):
        t = time.process_time()
        parse_scored(text, ["directed by"])
        best = min(best, time.process_time() - t)
    return best


def test_a_reply_16_times_longer_costs_about_16_times_the_cpu():
    """The regular expressions run in C, where the counts above cannot see backtracking: compare the CPU
    time of a reply with that of one 16x longer (a ratio of best-of-3 CPU times, so a slow or busy machine
    does not matter; linear is ~16, the single pattern's backtracking 90-150)."""
    for unit in ("A ", "{name ", "(score: 1", "}(score: 1)"):
        small, large = unit * (2_000 // len(unit)), unit * (32_000 // len(unit))
        ratio = _best_seconds(large) / max(_best_seconds(small), 1e-4)
        assert ratio < 48, (unit, ratio)
