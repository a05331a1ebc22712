"""A notebook demo's cost sentence: answers, LLM calls, replayed ones and the live time, from the records."""

from __future__ import annotations

from kgqa_lib.evaluate.report import cost_line
from kgqa_lib.llm.chat import ChatResult, Usage


def _record(calls: int, hits: int, recorded_s: float, seconds: float, llm_s: float) -> dict:
    return {"qid": "q", "metrics": {}, "seconds": seconds,
            "llm": {"calls": calls, "cache_hits": hits, "prompt_tokens": 10, "completion_tokens": 5,
                    "recorded_seconds": recorded_s, "seconds": llm_s}}


def _reply(hit: bool, recorded_s: float) -> ChatResult:
    return ChatResult(text="x", prompt_tokens=1, completion_tokens=1, finish_reason="stop", seconds=0.0,
                      recorded_seconds=recorded_s, cache_hit=hit, key="k")


def test_records_give_answers_calls_replays_and_live_minutes():
    # live: recorded LLM time (300 + 200 s) plus time outside the LLM (2 s + 1 s wall minus 0.5 s each in the LLM)
    recs = [_record(3, 3, 300.0, 2.0, 0.5), _record(2, 1, 200.0, 1.0, 0.5)]
    assert cost_line(recs) == "demo: 2 answers, 5 LLM calls (4 replayed from the recordings); live they took 8 min"


def test_usage_outside_the_records_is_added():
    recs = [_record(3, 3, 300.0, 2.0, 0.5)]
    usage = Usage(calls=4, cache_hits=2, recorded_seconds=600.0)
    assert cost_line(recs, "mini-world replay", usage) == \
        "mini-world replay: 1 answer, 7 LLM calls (5 replayed from the recordings); live they took 15 min"


def test_replies_alone_short_times_in_seconds():
    line = cost_line(label="this walkthrough", usage=[_reply(True, 60.0), _reply(False, 46.0)])
    assert line == "this walkthrough: 2 LLM calls (1 replayed from the recordings); live they took 106 s"
    assert cost_line() == "demo: 0 LLM calls (0 replayed from the recordings); live they took 0 s"
