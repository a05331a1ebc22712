"""A setup found wrong only when a question uses it — a bad environment variable read at the first
query, a missing optional part — is the command's error, not that question's answer: the run stops
at once, records nothing for it, and ``kgqa run`` says so in one line with exit code 2. That holds
when a library wraps the error in one of its own (LangChain turns any query failure into
``ValueError("Generated SPARQL statement is invalid …")``), and with several workers. A method's
own failure is still that question's recorded error."""

from __future__ import annotations

import pytest

from kgqa_lib import cli
from kgqa_lib.data.datasets import Dataset, Question
from kgqa_lib.errors import SetupError
from kgqa_lib.evaluate.runner import read_records, run
from kgqa_lib.llm.chat import LLM, LLMCache
from kgqa_lib.methods import Context, MethodResult, register_method

SAYS = "KGQA_EXAMPLE_MB must be a whole number of megabytes, got 'abc'"


class _Echo:
    model_id = "setup-stand-in"

    def complete(self, req):
        return {"text": "{x}", "prompt_tokens": 1, "completion_tokens": 1, "finish_reason": "stop"}


@register_method("_setup_fails")
def _setup_fails(q, ctx):
    if q.qid == "q1":  # the first question that needs the bad setting
        raise SetupError(SAYS)
    return MethodResult(["x"], "{x}")


@register_method("_setup_fails_wrapped")
def _setup_fails_wrapped(q, ctx):
    try:
        raise SetupError(SAYS)
    except Exception as exc:  # noqa: BLE001 (as LangChain's query step does)
        raise ValueError(f"Generated SPARQL statement is invalid\n{exc}") from None


@register_method("_fails_itself")
def _fails_itself(q, ctx):
    raise ValueError("the reply had no braces")


def _ctx(tmp_path):
    return Context(LLM(_Echo(), "setup-stand-in", LLMCache(tmp_path / "c.sqlite", transcripts=None), "auto"))


def _ds(n=4):
    return Dataset("setup", [Question(f"q{i}", f"say x {i}", ["x"]) for i in range(n)])


@pytest.mark.parametrize("method,workers", [("_setup_fails", 1), ("_setup_fails", 2), ("_setup_fails_wrapped", 1),
                                            ("_setup_fails_wrapped", 3)])
def test_a_setup_error_met_by_a_question_stops_the_run_and_is_never_recorded(tmp_path, method, workers):
    out = tmp_path / "run.jsonl"
    with pytest.raises(SetupError, match="KGQA_EXAMPLE_MB must be"):
        run(method, _ds(), _ctx(tmp_path), out, progress=False, workers=workers)
    recs = read_records(out)
    assert not any("SetupError" in str(r.get("error")) or "KGQA_EXAMPLE_MB" in str(r.get("error")) for r in recs), recs
    if method == "_setup_fails" and workers == 1:
        assert [r["qid"] for r in recs] == ["q0"]  # the question answered before it is kept


def test_a_method_s_own_failure_is_still_the_question_s_error(tmp_path):
    recs = run("_fails_itself", _ds(2), _ctx(tmp_path), tmp_path / "run.jsonl", progress=False)
    assert [r["error"] for r in recs] == ["exception:ValueError: the reply had no braces"] * 2


def test_kgqa_run_with_a_bad_query_memory_bound_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    """LangChain's SPARQL peer on the embedded mini-world KG (its first reply replayed from the committed
    transcripts): the query worker reads ``KGQA_QUERY_MEMORY_MB`` when the first query starts it."""
    pytest.importorskip("langchain_community")
    for var, sub in (("KGQA_CACHE_DIR", "cache"), ("KGQA_RESULTS_DIR", "results")):
        monkeypatch.setenv(var, str(tmp_path / sub))
    monkeypatch.setenv("KGQA_QUERY_MEMORY_MB", "abc")
    out = tmp_path / "results" / "lc.jsonl"
    code = cli.main(["run", "--method", "langchain_sparql", "--dataset", "miniworld:simple", "--limit", "2", "--kg",
                     "miniworld", "--llm-mode", "replay", "--quiet", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("error: KGQA_QUERY_MEMORY_MB must be a whole number of megabytes"), err
    assert not read_records(out), "a setup error was recorded as an answer"
