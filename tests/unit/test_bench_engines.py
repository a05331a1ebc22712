"""`kgqa bench run engines`: one engine with every thread vs k engines (processes) splitting the recorded requests
round-robin. The split, the summary and report computed from the JSON (the conclusion follows the walls), the
estimate, the registration, and the child protocol end to end with a fake engine class (no model is loaded)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from types import SimpleNamespace

import pytest

from kgqa_lib.bench import measure
from kgqa_lib.bench.speed import engines as E
from kgqa_lib.bench.speed import reuse
from kgqa_lib.cli import main
from kgqa_lib.errors import UserError

FAKE = '''
import os, time

from kgqa_lib.errors import SetupError


class FakeEngine:
    """Answers the last message upper-cased after 20 ms; with one thread it answers "q3" otherwise (an engine
    whose threads change an answer). Every request is logged with the time it arrived."""

    def __init__(self, model, n_threads=1, batch=0, prefix_cache=0):
        if model == "missing":
            raise SetupError("the model file is missing: run `kgqa doctor`")
        self.model_id, self.n_threads = "fake-" + model, n_threads
        self.engine = f"fake engine ({n_threads} thread(s))"

    def complete(self, request):
        last = request.messages[-1][1]
        log = os.environ.get("FAKE_ENGINE_LOG")
        if log:
            with open(log, "a") as fh:
                fh.write(f"{time.time()} {last}\\n")
        time.sleep(0.02)
        text = "other" if last == "q3" and self.n_threads == 1 else last.upper()
        return {"text": text, "prompt_tokens": len(last), "completion_tokens": 1}
'''


@pytest.fixture
def fake(tmp_path):
    """The fake engine's module on the children's path: (backend spec, environment, log file)."""
    (tmp_path / "fake_engine.py").write_text(textwrap.dedent(FAKE))
    log = tmp_path / "log.txt"
    path = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    return "fake_engine:FakeEngine", {**os.environ, "PYTHONPATH": path, "FAKE_ENGINE_LOG": str(log)}, log


def _call(i, text):
    return {"request": {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": f"q{i}"}],
                        "temperature": 0.0, "top_p": 1.0, "max_tokens": 8, "stop": [], "seed": 0, "sample_index": 0},
            "response": {"text": text, "seconds": 30.0}}


SEQUENCES = {"io": [_call(i, f"Q{i}") for i in range(3)], "tog": [_call(i, "x") for i in range(3, 7)]}


def test_the_split_deals_every_request_once_round_robin_keeping_the_order():
    todo = E.ordered(SEQUENCES)
    assert [(t["method"], t["index"]) for t in todo] == [("io", 0), ("io", 1), ("io", 2)] + [("tog", i) for i in range(4)]
    assert list(todo[0]["request"]["messages"]) == [("system", "s"), ("user", "q0")] and "model_id" not in todo[0]["request"]
    for k in (1, 2, 3, 8):
        parts = E.split(todo, k)
        assert len(parts) == k
        dealt = [(t["method"], t["index"]) for p in parts for t in p]
        assert sorted(dealt) == sorted((t["method"], t["index"]) for t in todo)  # each exactly once
        for j, p in enumerate(parts):
            assert p == todo[j::k]  # engine j: positions j, j+k, …, in order
            for m in SEQUENCES:  # within a method: every k-th request, ascending
                idx = [t["index"] for t in p if t["method"] == m]
                assert idx == sorted(idx) and all(b - a == k for a, b in zip(idx, idx[1:]))


def _rows(items, seconds, text=lambda m, i: f"{m}{i}"):
    return [{"method": m, "index": i, "seconds": seconds, "text": text(m, i)} for m, i in items]


def _data(one_wall, split_walls, one_s=1.0, split_s=1.6, suite=True):
    """A measurement of 2 methods × 2 requests: one engine (2 threads) and 2 engines (1 thread)."""
    items = [("io", 0), ("io", 1), ("tog", 0), ("tog", 1)]
    routes = {"one": {"engines": 1, "threads_each": 2, "engine": "e2"}, "split2": {"engines": 2, "threads_each": 1,
                                                                                "engine": "e1"}}
    runs = [{"order": ["one", "split2"], "routes": {
        "one": {"wall": one_wall, "other_cpu": 0.01, "engines": [{"wall": one_wall, "rows": _rows(items, one_s)}]},
        "split2": {"wall": max(split_walls), "other_cpu": 0.02, "engines": [
            {"wall": split_walls[0], "rows": _rows(items[0::2], split_s)},
            {"wall": split_walls[1], "rows": _rows(items[1::2], split_s, lambda m, i: "changed" if m == "tog" else f"{m}{i}")}]}}}]
    recorded = {(m, i): f"{m}{i}" if i == 0 else "r" for m, i in items}
    d = {"model": "qwen2.5-coder-1.5b", "model_id": "mid-q4", "threads": 2, "requests": 2, "repeats": 1,
         "routes": routes, "minutes": 0.2, "load_average": [0.5, 0.75], "other_cpu": 0.04, "measured_at": "today",
         "machine": {"cpus": 2}, **E.summarise(runs, routes, recorded),
         "recorded_per_question": {"io": {"questions": 10, "seconds": 36.0, "calls": 1},
                                   "langchain_sparql": {"questions": 10, "seconds": 36.0, "calls": 1}} if suite else {}}
    return json.loads(json.dumps(d))


def test_the_summary_ratios_and_identical_answers():
    d = _data(4.0, (3.0, 5.0))
    one, sp = d["summary"]["one"], d["summary"]["split2"]
    assert one["io"] == {"requests": 2, "answers": 2, "seconds": 2.0, "ratio": 1.0, "identical_to_one": 2,
                         "identical_to_recorded": 1}
    # per method, from each request's seconds: one engine 2.0 s vs (2 × 1.6 s) / 2 engines
    assert sp["io"]["seconds"] == 3.2 and sp["io"]["ratio"] == round(2.0 / 1.6, 2)
    assert sp["tog"]["identical_to_one"] == 1 and sp["tog"]["identical_to_recorded"] == 1  # tog 1 changed
    assert d["totals"]["split2"] == {"wall": 5.0, "ratio": 0.8, "answers": 4, "identical_to_one": 3,
                                     "identical_to_recorded": 2}
    assert d["walls"][0]["routes"]["split2"] == {"wall": 5.0, "engine_walls": [3.0, 5.0], "other_cpu": 0.02}


def test_the_report_prints_the_json_and_its_conclusion_follows_the_walls():
    slow = E.report(_data(4.0, (3.0, 5.0)))
    assert slow.startswith("# One engine with every core, or several engines splitting the questions\n")
    assert "`mid-q4`" in slow and "first 2 recorded requests" in slow and "running together (2 engines × 1 thread(s))" in slow
    assert "| 2 engines × 1 thread(s) | IO | 2 | 1.60 | 0.80 | **1.25×** | 2/2 | 1/2 |" in slow
    assert "| 2 engines × 1 thread(s) | **all (wall)** | 4 |  | 1.25 | **0.8×** | 3/4 | 2/4 |" in slow
    assert "| one engine, 2 thread(s) | **all (wall)** | 4 |  | 1.00 | 1 | — | 2/4 |" in slow
    assert "wall 5.0 s (engines finished after 3.0, 5.0 s)" in slow and "Engine: e1." in slow
    # suite: 0.2 h with one engine; IO at 1.25×, the unmeasured langchain_sparql at the route's 0.8×
    hours = (360 / 1.25 + 360 / 0.8) / 3600
    assert f"2 engines × 1 thread(s) ≈ {round(hours, 1)} h (**{round(720 / (hours * 3600), 2)}×**, 3/4 measured" in slow
    assert "**one engine with all 2 thread(s)** answers more questions per hour: 2 engines × 1 thread(s) ran at 0.8×" \
           in slow
    assert "load average 0.5 → 0.75, other processes used 4 % of the CPU" in slow and "on 2 CPUs" in slow
    fast = E.report(_data(6.0, (3.0, 5.0), suite=False))
    assert "**splitting the questions** answers more questions per hour: 2 engines × 1 thread(s) ran at 1.2× the " \
           "rate of one engine, 2 thread(s)" in fast
    assert "The whole suite" not in fast and "one engine with all" not in fast


def test_the_estimate_counts_requests_routes_and_model_loads(monkeypatch):
    monkeypatch.setattr(reuse, "recorded_sequences", lambda model_id, n: SEQUENCES)
    line = E.estimate(SimpleNamespace(model="qwen2.5-coder-1.5b", requests=4, threads=0, engines=[2, 3], repeats=2), {})
    assert line.startswith("7 recorded request(s) of qwen2.5-coder-1.5b-instruct-q4_k_m (IO 3, Think-on-Graph 4), "
                           "3 routes (one engine; 2 engines, 3 engines) × 2 repeat(s): they took 4 min when recorded, "
                           "so ≈ 21 min if every route runs at that speed, plus 12 model loads")


def test_registered_listed_and_estimated_without_running(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KGQA_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setattr(reuse, "recorded_sequences", lambda model_id, n: SEQUENCES)
    m = measure.MEASUREMENTS["engines"]
    assert (m.data, m.output) == ("engines.json", "engines.md")
    assert main(["bench", "list"]) == 0
    assert "\nengines: one engine with every core vs several engines" in capsys.readouterr().out
    assert main(["bench", "list", "engines"]) == 0
    out = capsys.readouterr().out
    assert "results/bench/engines.json (not measured yet)" in out
    for shown in ("--model qwen2.5-coder-1.5b", "--requests 4", "--threads 0", "--engines 2", "--repeats 1"):
        assert shown in out
    assert main(["bench", "run", "engines", "--engines", "2,4"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("engines: 7 recorded request(s)") and "3 routes" in out and "nothing was run" in out
    assert not (tmp_path / "results").exists()
    assert measure.parse_options(m, []).engines == [2]
    with pytest.raises(UserError, match="expects numbers ≥ 2"):
        measure.parse_options(m, ["--engines", "1"])


def _child(fake, part, tmp_path, threads=2, model="m"):
    backend, env, _ = fake
    (tmp_path / "req.json").write_text(json.dumps(part))
    return subprocess.Popen([sys.executable, "-c", E._BOOT, str(E.CHILD), "--model", model, "--threads", str(threads),
                             "--requests", str(tmp_path / "req.json"), "--out", str(tmp_path / "out.json"),
                             "--backend", backend], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)


def test_a_child_loads_warms_up_and_waits_for_go(fake, tmp_path):
    todo = E.ordered(SEQUENCES)[:2]
    p = _child(fake, todo, tmp_path)
    try:
        ready = json.loads(p.stdout.readline())
        assert ready["ready"] and ready["engine"] == "fake engine (2 thread(s))" and ready["model_id"] == "fake-m"
        time.sleep(0.3)
        assert fake[2].read_text().split()[1:] == ["Hi"] and not (tmp_path / "out.json").exists()  # only the warm-up
        p.stdin.write("go\n")
        p.stdin.close()
        assert p.wait(timeout=60) == 0
    finally:
        if p.poll() is None:
            p.kill()
    out = json.loads((tmp_path / "out.json").read_text())
    assert [(r["method"], r["index"], r["text"]) for r in out["rows"]] == [("io", 0, "Q0"), ("io", 1, "Q1")]
    assert all(r["seconds"] >= 0.02 for r in out["rows"]) and out["seconds"] >= 0.04
    assert {"prompt_tokens", "completion_tokens"} <= set(out["rows"][0])
    p = _child(fake, todo, tmp_path)  # no go (the parent gave up): nothing answered
    json.loads(p.stdout.readline())
    p.stdin.close()
    assert p.wait(timeout=60) == 1


def test_an_engine_that_cannot_start_is_one_line(fake, tmp_path):
    with pytest.raises(UserError, match="an engine process could not start: SetupError: the model file is missing"):
        E.run_engines("missing", [E.ordered(SEQUENCES)], 2, backend=fake[0], env=fake[1])


def test_the_measurement_end_to_end_with_fake_engines(fake, monkeypatch):
    backend, env, log = fake
    monkeypatch.setattr(reuse, "recorded_sequences", lambda model_id, n: SEQUENCES)
    monkeypatch.setattr(E, "recorded_seconds_per_question", lambda model_id: {"io": {"questions": 4, "seconds": 9.0,
                                                                                     "calls": 1}})
    d = E.measure(SimpleNamespace(model="qwen2.5-coder-1.5b", requests=4, threads=2, engines=[2], repeats=2), {},
                  backend=backend, env=env)
    assert d["routes"] == {"one": {"engines": 1, "threads_each": 2, "engine": "fake engine (2 thread(s))"},
                           "split2": {"engines": 2, "threads_each": 1, "engine": "fake engine (1 thread(s))"}}
    assert [w["order"] for w in d["walls"]] == [["one", "split2"], ["split2", "one"]]  # turns going first
    for w in d["walls"]:
        split = w["routes"]["split2"]
        assert len(split["engine_walls"]) == 2 and split["wall"] == max(split["engine_walls"]) > 0
        assert w["routes"]["one"]["wall"] >= 7 * 0.02  # 7 requests one after another
    assert d["totals"]["split2"]["answers"] == 14 and d["totals"]["split2"]["identical_to_one"] == 12  # q3 × 2
    assert d["totals"]["one"]["identical_to_recorded"] == 6  # Q0..Q2, twice
    assert d["summary"]["split2"]["tog"]["identical_to_one"] == 6 and d["summary"]["one"]["tog"]["requests"] == 4
    # every request answered once per route and repeat (and the 2 + 2 × 2 warm-ups)
    asked = [line.split()[1] for line in log.read_text().splitlines()]
    assert asked.count("Hi") == 6 and all(asked.count(f"q{i}") == 4 for i in range(7))
    assert d["load_average"] and "other_cpu" in d and d["recorded_per_question"]["io"]["questions"] == 4
    text = E.report({**json.loads(json.dumps(d)), "measured_at": "now", "machine": {"cpus": 2}})
    assert "| 2 engines × 1 thread(s) | Think-on-Graph | 4 |" in text and "12/14" in text
