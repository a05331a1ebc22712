"""The ``throughput`` measurement table: the recorded prompt groups it measures, its summary, target and
report from a JSON (no model), and (when the 0.5B GGUF is present) a tiny run end to end through
``kgqa bench run`` into a temporary results folder."""

from __future__ import annotations

import json

import pytest

from kgqa_lib.bench import measure
from kgqa_lib.bench.speed import throughput as T
from kgqa_lib.cli import main

RECORDED = "qwen2.5-coder-1.5b-instruct-q4_k_m"


@pytest.fixture
def results(tmp_path, monkeypatch):
    monkeypatch.setenv("KGQA_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setenv("KGQA_CACHE_DIR", str(tmp_path / "cache"))
    for var in ("KGQA_LLM_BATCH", "KGQA_LLM_BATCH_ROWS", "KGQA_LLM_PREFIX_CACHE"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path / "results" / "bench"


def test_the_recorded_groups_are_one_prompts_samples():
    groups = T.recorded_groups(RECORDED)
    assert groups["sc"] and groups["kbbinder"]
    for method, want in (("sc", 3), ("kbbinder", 6)):
        for g in groups[method]:
            assert sorted(g["recorded"]) == list(range(want)) and g["temperature"] == 0.7
            assert all(isinstance(s["text"], str) for s in g["recorded"].values())
    assert len(T.recorded_groups(RECORDED, limit=1)["sc"]) == 1


class FakeBackend:
    """Answers ``answer<sample index>`` (``first`` differs for sample 0), counting like LocalBackend."""

    def __init__(self, model_id, rows=None, first="answer0"):
        self.model_id, self.rows, self.first = model_id, rows, first
        self.stats = {"evaluated": 0, "decode_calls": 0, "decode_rows": 0}

    def prefix_stats(self):
        return dict(self.stats)

    def _answer(self, r):
        return {"text": self.first if r.sample_index == 0 else f"answer{r.sample_index}", "prompt_tokens": 50,
                "completion_tokens": 4, "finish_reason": "stop"}

    def complete(self, r):
        self.stats["evaluated"] += 50
        return self._answer(r)

    def complete_many(self, reqs):
        self.stats["evaluated"] += 51
        self.stats["decode_calls"] += 4
        self.stats["decode_rows"] += 4 * min(self.rows, len(reqs))
        return [self._answer(r) for r in reqs]


def test_a_group_through_every_route_with_fake_backends():
    group = {"method": "kbbinder", "source": "transcript", "messages": [["user", "q"]], "temperature": 0.7,
             "top_p": 1.0, "max_tokens": 128, "stop": [], "seed": 0,
             "recorded": {i: {"text": f"answer{i}", "seconds": 2.0} for i in range(6)}}
    backends = {None: FakeBackend("m"), 3: FakeBackend("m", 3), 6: FakeBackend("m@batched", 6, first="other")}
    g = T._measure_group(group, backends, 0, True, "together")
    assert list(g["routes"]) == ["rows3", "rows6", "one"]  # the routes decoded together went first
    one, exact, fast = g["routes"]["one"], g["routes"]["rows3"], g["routes"]["rows6"]
    assert (one["evaluated"], exact["evaluated"], exact["decode_rows"], fast["decode_rows"]) == (300, 51, 12, 24)
    assert (one["identical_to_recorded"], exact["identical_to_one"], fast["identical_to_one"]) == (6, 6, 5)
    assert fast["identical_to_recorded"] == 5 and g["recorded_seconds"] == 12.0 and g["max_tokens"] == 128
    sc = dict(group, method="sc", recorded={i: None for i in range(3)})  # no recording (built, not recorded)
    g = T._measure_group(sc, backends, 8, True, "one")
    assert list(g["routes"]) == ["one", "rows3"] and g["max_tokens"] == 8  # 3 samples never fill 6 rows
    assert "identical_to_recorded" not in g["routes"]["one"] and "recorded_seconds" not in g


def _group(method, samples, one, together, same, rows="rows3"):
    route = {"seconds": together, "prompt_tokens": 100 * samples, "evaluated": 101, "completion_tokens": 20 * samples,
             "decode_calls": 10, "decode_rows": 10 * min(3, samples), "identical_to_one": same, "other_cpu": 0.0}
    return {"method": method, "source": "transcript", "samples": samples, "max_tokens": 256,
            "routes": {"one": {"seconds": one, "prompt_tokens": 100 * samples, "evaluated": 100 + samples - 1,
                               "completion_tokens": 20 * samples, "other_cpu": 0.0}, rows: route}}


def _data(groups):
    d = {"model": "qwen2.5-0.5b", "model_id": "qwen2.5-0.5b-instruct-q4", "recorded": RECORDED, "threads": 2,
         "rows": [3, 6], "exact_rows": 3, "sequences": 6, "max_tokens": 8, "compared_to_recorded": False,
         "engines": {}, "model_ids": {"one": "m", "rows3": "m", "rows6": "m@batched"}, "minutes": 1.0,
         "load_average": [0.1, 0.2], "other_cpu": 0.01, "groups": groups, "recorded_per_question": {
             "sc": {"questions": 3, "seconds": 11.7, "calls": 3.0}, "keqing": {"questions": 2, "seconds": 18.5,
                                                                            "calls": 2.5}},
         "measured_at": "2026-11-29 03:00", "machine": {"cpus": 2, "python": "3.11", "platform": "Linux"}}
    d["summary"] = T.summarise(groups)
    return d


def test_summary_target_and_report():
    groups = [_group("sc", 3, 30.0, 12.0, 3), _group("sc", 3, 30.0, 18.0, 3),
              _group("kbbinder", 6, 40.0, 20.0, 6), _group("kbbinder", 6, 40.0, 10.0, 4, rows="rows6")]
    d = _data(groups)
    s = d["summary"]
    assert s["sc"]["rows3"]["ratio"] == 2.0 and s["sc"]["rows3"]["identical_to_one"] == 6
    assert s["kbbinder"]["rows3"]["ratio"] == 2.0 and s["kbbinder"]["rows6"]["ratio"] == 4.0
    assert s["kbbinder"]["one"]["seconds_per_question"] == 40.0
    assert T.verdict(d)  # both reach 2x with every answer identical (rows6 is faster but not identical)
    groups[0]["routes"]["rows3"]["identical_to_one"] = 2
    d = _data(groups)
    assert not T.verdict(d)  # one answer of SC differs: not met, whatever the speed
    text = T.report(d)
    assert "**not met**" in text and "5/6" in text and "one request per step: no batching route" in text
    assert "| Self-Consistency (3 CoT samples) | one request at a time | 2 × 3 |" in text
    assert "`m@batched`" in text


def test_report_regenerates_from_the_json(results, capsys):
    d = _data([_group("sc", 3, 30.0, 25.0, 3), _group("kbbinder", 6, 40.0, 30.0, 6)])
    m = measure.MEASUREMENTS["throughput"]
    results.mkdir(parents=True)
    (results / m.data).write_text(json.dumps(d))
    assert main(["bench", "report", "throughput"]) == 0
    assert measure.check(m) is None and "**not met**" in (results / m.output).read_text()


def _gguf_or_skip():
    from kgqa_lib.llm import models

    try:
        models.model_path("qwen2.5-0.5b", progress=False)
    except Exception as exc:  # noqa: BLE001 - the parts are not installed: say so
        pytest.skip(f"embedded 0.5B model not available: {exc}")
    pytest.importorskip("llama_cpp")


@pytest.mark.live
def test_a_tiny_measurement_end_to_end(results, capsys):
    """One recorded SC and one KB-BINDER prompt, answers capped at 4 tokens, with the 0.5B model: three
    routes, the exact one identical to one at a time, the JSON and its report written and consistent."""
    _gguf_or_skip()
    code = main(["bench", "run", "throughput", "--model", "qwen2.5-0.5b", "--recorded", RECORDED, "--groups", "1",
                 "--kbbinder-metaqa", "0", "--max-tokens", "4", "--threads", "2", "--yes"])
    out = capsys.readouterr().out
    m = measure.MEASUREMENTS["throughput"]
    d = json.loads((results / m.data).read_text())
    assert code == (0 if T.verdict(d) else 1), out
    assert measure.check(m) is None
    assert [g["method"] for g in d["groups"]] == ["sc", "kbbinder"] and not d["compared_to_recorded"]
    sc, kbb = d["groups"]
    assert set(sc["routes"]) == {"one", "rows3"} and set(kbb["routes"]) == {"one", "rows3", "rows6"}
    for g in d["groups"]:
        exact = g["routes"]["rows3"]
        assert exact["identical_to_one"] == g["samples"]
        assert exact["evaluated"] <= g["routes"]["one"]["evaluated"]  # the prompt once, its last token again once
        assert exact["decode_rows"] <= 3 * exact["decode_calls"]
    assert d["model_ids"]["rows6"].endswith("@batched") and d["model_ids"]["rows3"] == "qwen2.5-0.5b-instruct-q4"
    assert "LLM throughput" in (results / m.output).read_text()


def test_the_whole_suite_with_the_fastest_identical_route():
    """The suite's hours apply each method's fastest route that keeps the model id and gave identical answers;
    a faster route under another model id (more rows) or with one answer different does not count."""
    groups = [_group("sc", 3, 30.0, 15.0, 3), _group("kbbinder", 6, 40.0, 20.0, 6),
              _group("kbbinder", 6, 40.0, 10.0, 6, rows="rows6")]
    s = T.summarise(groups)
    assert T.fastest_identical(s, 3) == {"sc": (2.0, "rows3"), "kbbinder": (2.0, "rows3")}
    assert T.fastest_identical(s, 6)["kbbinder"] == (4.0, "rows6")
    per_q = {"sc": {"questions": 10, "seconds": 36.0, "calls": 3.0}, "kbbinder": {"questions": 10, "seconds": 36.0,
                                                                               "calls": 6.0},
             "keqing": {"questions": 20, "seconds": 36.0, "calls": 2.5}}
    p = T.suite_projection(per_q, s, 3)
    assert (p["questions"], p["hours"], p["fastest_hours"], p["ratio"]) == (40, 0.4, 0.3, 1.33)
    assert p["batchable_share"] == 0.5 and p["bound"] == 2.0
    groups[0]["routes"]["rows3"]["identical_to_one"] = 2  # one SC answer differs: SC has no identical route
    p = T.suite_projection(per_q, T.summarise(groups), 3)
    assert p["routes"] == {"kbbinder": (2.0, "rows3")} and p["ratio"] == round(40 * 36 / (30 * 36 + 10 * 18), 2)
    assert T.suite_projection({}, s, 3) is None


def test_the_report_and_the_listing_say_what_the_whole_suite_gains(results, monkeypatch):
    d = _data([_group("sc", 3, 30.0, 15.0, 3), _group("kbbinder", 6, 40.0, 30.0, 6)])
    text = T.report(d)
    assert "The whole suite: the committed records of `qwen2.5-0.5b-instruct-q4` hold 5 questions" in text
    assert "(target ≥ 1.3×: **met**)" in text  # (3 × 11.7 s of SC at 2×, 2 × 18.5 s of Keqing as they were)
    assert "at most 1.95× faster" in text and "decodes 6 samples of 20.0 tokens" in text
    monkeypatch.setattr(T, "recorded_seconds_per_question",
                        lambda model_id: {"sc": {"questions": 100, "seconds": 10.0, "calls": 3.0}})
    [line] = T.suite_status(d)
    assert "hold 100 questions" in line and "0.3 h one request at a time" in line and "**2.0×**" in line
    results.mkdir(parents=True)
    (results / "throughput.json").write_text(json.dumps(d))
    assert "regenerating every table:" in "\n".join(measure.status_lines(measure.MEASUREMENTS["throughput"]))
