"""`kgqa bench run prompt_reuse`: every method's recorded requests through three engines, the routes taking
turns; per method and route the seconds, tokens and answers identical to one at a time; the suite line weighs
each measured ratio by the records' seconds per question."""

from __future__ import annotations

from types import SimpleNamespace

from kgqa_lib.bench.speed import reuse


class _Fake:
    def __init__(self, name, seconds, text=None):
        self.model_id, self.engine, self.name = f"m@{name}", f"engine {name}", name
        self.seconds, self.text, self.evaluated, self.calls = seconds, text, 0, []

    def complete(self, request):
        self.calls.append(request)
        self.evaluated += 7
        reply = self.text or request.messages[-1][1].upper()
        return {"text": reply, "prompt_tokens": 10, "completion_tokens": 2}

    def prefix_stats(self):
        return {"evaluated": self.evaluated}


def _call(i, text):
    return {"request": {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": f"q{i}"}],
                        "temperature": 0.0, "top_p": 1.0, "max_tokens": 8, "stop": [], "seed": 0, "sample_index": 0},
            "response": {"text": text, "seconds": 1.0}}


def test_every_request_goes_through_every_route_in_turns_and_is_compared(monkeypatch):
    fakes = {"one": _Fake("one", 2.0), "prefix": _Fake("prefix", 1.0), "server": _Fake("server", 0.5, text="other")}
    monkeypatch.setattr(reuse, "_backends", lambda model, threads: fakes)
    monkeypatch.setattr(reuse, "recorded_sequences", lambda model_id, n: {
        "tog": [_call(i, "Q0" if i == 0 else "x") for i in range(3)], "io": [_call(9, "Q9")]})
    order = []
    monkeypatch.setattr(reuse.time, "perf_counter", _clock(fakes, order))
    monkeypatch.setattr(reuse, "recorded_seconds_per_question", lambda model_id: {
        "tog": {"questions": 10, "seconds": 60.0, "calls": 3}, "qsm": {"questions": 10, "seconds": 3.0, "calls": 1},
        "langchain_sparql": {"questions": 5, "seconds": 12.0, "calls": 2}})
    d = reuse.measure(SimpleNamespace(model="qwen2.5-coder-1.5b", requests=3, threads=1), {})
    assert all(len(f.calls) == 1 + 4 for f in fakes.values())  # the warm-up, then the 4 requests
    assert order[:3] == ["one", "prefix", "server"] and order[3:6] == ["prefix", "server", "one"]  # turns
    tog = d["summary"]["tog"]
    assert tog["one"]["requests"] == 3 and tog["prefix"]["ratio"] == 2.0 and tog["server"]["ratio"] == 4.0
    assert tog["prefix"]["identical_to_one"] == 3 and tog["server"]["identical_to_one"] == 0
    assert tog["one"]["identical_to_recorded"] == 1 and tog["one"]["evaluated"] == 21
    assert tog["server"]["evaluated"] is None  # the server's evaluated tokens are not counted
    s = reuse.suite(d)  # tog 600 s, qsm (IO's ratio) 30 s, langchain 60 s (not measured: its own time)
    assert s["hours"] == round(690 / 3600, 1) and s["routes"]["server"]["ratio"] == round(690 / (150 + 7.5 + 60), 2)
    assert s["routes"]["server"]["identical"] == 0 and s["routes"]["prefix"]["identical"] == 4
    text = reuse.report({**d, "measured_at": "today"})
    assert "| Think-on-Graph | managed llama.cpp server, 1 slot, prompt cache (`server`) | 3 | 30 → — | 0.50 | **4.0×** | 0/3 | 0/3 |" in text
    assert "4/4 measured answers identical" in text and "Neither route keeps every answer" in text


def _clock(fakes, order):
    """perf_counter for the measurement: a route's request takes its fake's seconds (and the order is noted)."""
    state = {"t": 0.0, "open": None}
    by_stats = {id(f): f for f in fakes.values()}

    def clock():
        import inspect

        frame = inspect.currentframe().f_back
        b = frame.f_locals.get("b")
        if b is not None and id(b) in by_stats and state["open"] is None:
            state["open"] = b
            order.append(b.name)
        elif b is not None and state["open"] is b:
            state["t"] += b.seconds
            state["open"] = None
        return state["t"]

    return clock


def test_the_estimate_counts_the_recorded_requests(monkeypatch):
    monkeypatch.setattr(reuse, "recorded_sequences", lambda model_id, n: {"io": [_call(0, "a")] * 2})
    line = reuse.estimate(SimpleNamespace(model="qwen2.5-coder-1.5b", requests=2, threads=0), {})
    assert line.startswith("2 recorded request(s) of qwen2.5-coder-1.5b-instruct-q4_k_m (IO 2), 3 routes")
