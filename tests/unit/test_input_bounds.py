"""Values that pass their type but not their range: method settings (declared with their bounds),
the embedded model's options, a reply text no UTF-8 file can hold; and the name the SPARQL client
gives itself. Real HTTP servers on 127.0.0.1 where a server is involved, no mocks."""

from __future__ import annotations

import http.server
import json
import threading

import pytest

from kgqa_lib import cli
from kgqa_lib.errors import UsageError
from kgqa_lib.methods import SettingsError, coerce_settings, method_names, method_settings
from kgqa_lib.servers import FakeChatServer


# ---- settings ---------------------------------------------------------------------------------------
def _number_fields():
    from dataclasses import fields

    for m in method_names():
        for f in fields(method_settings(m)):
            if f.name != "kg" and any(t in str(f.type) for t in ("int", "float")):
                yield m, f


def test_every_number_setting_declares_its_range():
    undeclared = sorted({f"{m}.{f.name}" for m, f in _number_fields() if f.metadata.get("min") is None})
    assert not undeclared, undeclared


@pytest.mark.parametrize("method,key,value", [
    ("sc", "samples", 0), ("io", "max_tokens", -1), ("pgakv", "threshold", "nan"), ("pgakv", "threshold", 1.5),
    ("langchain_sparql", "timeout", "inf"), ("langchain_sparql", "timeout", 0), ("langchain_sparql", "max_rows", -5),
    ("kbbinder", "temperature", "-0.1"), ("tog", "width", 0), ("pgakv", "k_subjects", -1)])
def test_a_value_out_of_range_names_the_range(method, key, value):
    with pytest.raises(SettingsError) as ei:
        coerce_settings({key: value}, method)
    msg = str(ei.value)
    assert f"setting {key!r} of {method} expects" in msg and ("≥" in msg or " in [" in msg) and repr(value) in msg
    with pytest.raises(SettingsError):  # a Context (any method's settings) checks the same range
        coerce_settings({key: value})


def test_the_defaults_and_the_edges_of_each_range_are_accepted():
    for m, f in _number_fields():
        low, high = f.metadata["min"], f.metadata.get("max")
        for value in (f.default, low, high):
            if value is not None:
                assert coerce_settings({f.name: value}, m) == {f.name: value}, (m, f.name, value)
        below = low - (1 if "int" in str(f.type) else 0.001)
        with pytest.raises(SettingsError):
            coerce_settings({f.name: below}, m)


def test_help_settings_shows_the_ranges():
    text = cli.settings_help("pgakv")
    assert "int ≥ 1" in text and "float in [-1, 1]" in text and "int ≥ 0 or None" in text


def test_a_shared_setting_keeps_one_range():
    from dataclasses import dataclass

    from kgqa_lib.methods import Settings, register_method
    from kgqa_lib.methods.base import setting

    @dataclass(frozen=True)
    class Loose(Settings):
        max_tokens: int = setting(8, "tokens", min=0)

    with pytest.raises(TypeError, match="range"):
        register_method("_loose_max_tokens", settings=Loose)
    assert "_loose_max_tokens" not in method_names()


# ---- the embedded model's options --------------------------------------------------------------------
@pytest.mark.parametrize("name,says", [
    ("local?prefix_cache=100000&threads=100000", "prefix_cache expects a whole number ≥ 0 and ≤ 64"),
    ("local?threads=100000", "threads expects a whole number ≥ 1 and ≤ 256"),
    ("local:qwen2.5-0.5b?prefix_cache=65", "≤ 64")])
def test_model_options_are_bounded_and_say_why(name, says):
    from kgqa_lib.llm.chat import split_llm_name

    with pytest.raises(UsageError) as ei:
        split_llm_name(name)
    assert says in str(ei.value) and "memory" in str(ei.value) and "\n" not in str(ei.value)


def test_model_options_within_bounds_and_the_variables_too(monkeypatch):
    from kgqa_lib.llm.chat import default_prefix_cache, default_threads, split_llm_name

    assert split_llm_name("local?prefix_cache=64&threads=256") == ("local", {"prefix_cache": 64, "threads": 256})
    monkeypatch.setenv("KGQA_LLM_PREFIX_CACHE", "1000")
    with pytest.raises(UsageError, match="KGQA_LLM_PREFIX_CACHE expects a whole number ≥ 0 and ≤ 64"):
        default_prefix_cache()
    monkeypatch.setenv("KGQA_LLM_THREADS", "100000")
    with pytest.raises(UsageError, match="KGQA_LLM_THREADS expects a whole number ≥ 1 and ≤ 256"):
        default_threads()


# ---- a reply with a lone surrogate ----------------------------------------------------------------------
def test_a_lone_surrogate_in_a_reply_keeps_the_answer_the_count_and_the_cache(tmp_path, monkeypatch, capsys):
    """An endpoint's JSON may carry ``\\ud800``: the answer is kept (the surrogate replaced by U+FFFD),
    the call counted and cached, so a second run asks the endpoint nothing."""
    for var, sub in (("KGQA_CACHE_DIR", "cache"), ("KGQA_RESULTS_DIR", "results")):
        monkeypatch.setenv(var, str(tmp_path / sub))
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-test")
    ds = tmp_path / "ds.jsonl"
    ds.write_text("".join(json.dumps({"qid": f"q{i}", "question": f"who directed film {i}", "answers": ["Nolan"]}) + "\n"
                          for i in range(3)))
    with FakeChatServer(reply=lambda m: "Answer: {Nolan\ud800}") as server:
        monkeypatch.setenv("KGQA_LLM_BASE_URL", server.base_url)
        argv = ["run", "--method", "io", "--dataset", str(ds), "--llm", "openai:surrogate", "--llm-mode", "auto",
                "--quiet", "--no-transcripts"]
        assert cli.main([*argv, "--out", str(tmp_path / "a.jsonl")]) == 0, capsys.readouterr().err
        assert server.requests == 3
        assert cli.main([*argv, "--out", str(tmp_path / "b.jsonl")]) == 0, capsys.readouterr().err
        assert server.requests == 3, "the replies were not cached"
    first = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text(encoding="utf-8").splitlines()]
    again = [json.loads(line) for line in (tmp_path / "b.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [r["prediction"] for r in first] == [["Nolan\ufffd"]] * 3 and not any(r["error"] for r in first)
    assert [r["llm"]["calls"] for r in first] == [1, 1, 1] and [r["llm"]["cache_hits"] for r in first] == [0, 0, 0]
    assert [r["llm"]["cache_hits"] for r in again] == [1, 1, 1] and again[0]["response"] == first[0]["response"]


# ---- the SPARQL client's name ----------------------------------------------------------------------------
def test_the_sparql_client_names_itself(monkeypatch):
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    from kgqa_lib import __version__
    from kgqa_lib.kg.remote import SparqlKG

    seen = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers.get("content-length", 0)))
            seen.append(self.headers.get("user-agent"))
            body = json.dumps({"head": {"vars": ["s"]}, "results": {"bindings": []}}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/sparql-results+json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        kg = SparqlKG(f"http://127.0.0.1:{srv.server_address[1]}/sparql", "tiny", cache=False)
        kg.sparql("SELECT ?s WHERE { ?s ?p ?o } LIMIT 1")
    finally:
        srv.shutdown()
        srv.server_close()
    assert seen and all(ua == f"kgqa-notebooks/{__version__}" for ua in seen), seen
