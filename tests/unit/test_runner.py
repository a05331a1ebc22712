import json
import signal
import subprocess
import sys
import textwrap

import pytest

from kgqa_lib.datasets import Dataset, Question
from kgqa_lib.evaluate.report import format_table, report, summarize
from kgqa_lib.evaluate.runner import read_records, run
from kgqa_lib.llm import LLM, LLMCache
from kgqa_lib.methods import Context, MethodResult, register_method


class FixedBackend:
    """Answers '{<last word of the question>}' — a deterministic stand-in for the runner tests."""

    model_id = "fixed"

    def complete(self, req):
        word = req.messages[-1][1].split()[-1]
        return {"text": "{" + word + "}", "prompt_tokens": 7, "completion_tokens": 2, "finish_reason": "stop"}


@register_method("_echo_last_word")
def _echo(q, ctx):
    r = ctx.llm.chat(q.question)
    if "explode" in q.question:
        raise ValueError("boom")
    return MethodResult([r.text.strip("{}")], r.text)


def _ds(n=6):
    qs = [Question(f"q{i}", f"say w{i}", [f"w{i}" if i % 2 == 0 else "other"]) for i in range(n)]
    return Dataset("toy", qs)


def _ctx(tmp_path):
    return Context(LLM(FixedBackend(), "fixed", LLMCache(tmp_path / "c.sqlite", transcripts=None), "auto"))


def test_records_metrics_and_accounting(tmp_path):
    out = tmp_path / "run.jsonl"
    recs = run("_echo_last_word", _ds(), _ctx(tmp_path), out, progress=False)
    assert [r["qid"] for r in recs] == [f"q{i}" for i in range(6)]
    assert [r["metrics"]["hits@1"] for r in recs] == [1.0, 0.0] * 3
    assert recs[0]["llm"]["calls"] == 1 and recs[0]["llm"]["prompt_tokens"] == 7
    row = summarize(recs)
    assert row["hits@1"] == pytest.approx(0.5) and row["calls/q"] == 1 and row["tokens/q"] == 9
    assert "0.500" in format_table(report([out]))


def test_method_exception_is_recorded_and_run_goes_on(tmp_path):
    ds = Dataset("toy", [Question("a", "please explode", ["x"]), Question("b", "say w", ["w"])])
    recs = run("_echo_last_word", ds, _ctx(tmp_path), tmp_path / "r.jsonl", progress=False)
    assert recs[0]["error"].startswith("exception:ValueError") and recs[1]["error"] is None


def test_resume_skips_finished_and_refuses_other_config(tmp_path):
    out = tmp_path / "run.jsonl"
    run("_echo_last_word", _ds(3), _ctx(tmp_path), out, progress=False)
    with open(out, "a") as fh:
        fh.write('{"qid": "q9", "trunc')  # a killed writer's partial line
    ctx = _ctx(tmp_path)
    recs = run("_echo_last_word", _ds(6), ctx, out, progress=False)
    assert ctx.llm.usage.calls == 3  # only q3..q5 ran
    assert sorted(r["qid"] for r in read_records(out)) == [f"q{i}" for i in range(6)]
    assert len(recs) == 6
    ctx2 = _ctx(tmp_path)
    ctx2.settings = {"k": 1}
    with pytest.raises(RuntimeError, match="another configuration"):
        run("_echo_last_word", _ds(6), ctx2, out, progress=False)


@pytest.mark.parametrize("workers", [1, 4])
def test_sigkill_midway_then_resume_loses_and_duplicates_nothing(tmp_path, workers):
    """A real subprocess killed with SIGKILL while it writes (questions in flight on 4 threads too),
    then the same run again."""
    script = tmp_path / "slow_run.py"
    script.write_text(textwrap.dedent(f"""
        import time
        from kgqa_lib.datasets import Dataset, Question
        from kgqa_lib.evaluate.runner import run
        from kgqa_lib.llm import LLM, LLMCache
        from kgqa_lib.methods import Context, MethodResult, register_method

        class Slow:
            model_id = "slow"
            def complete(self, req):
                time.sleep(0.15)
                return {{"text": "{{x}}", "prompt_tokens": 1, "completion_tokens": 1, "finish_reason": "stop"}}

        @register_method("_slow")
        def _slow(q, ctx):
            return MethodResult([ctx.llm.chat(q.question).text.strip("{{}}")])

        ds = Dataset("toy", [Question(f"q{{i}}", f"question {{i}}", ["x"]) for i in range(30)])
        ctx = Context(LLM(Slow(), "slow", LLMCache({str(tmp_path / 'c.sqlite')!r}, transcripts=None), "auto"))
        run("_slow", ds, ctx, {str(tmp_path / 'run.jsonl')!r}, progress=False, workers={workers})
    """))
    proc = subprocess.Popen([sys.executable, str(script)])
    import time

    deadline = time.time() + 30
    while time.time() < deadline and len(read_records(tmp_path / "run.jsonl")) < 8:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done_before = len(read_records(tmp_path / "run.jsonl"))
    assert 8 <= done_before < 30
    subprocess.run([sys.executable, str(script)], check=True)
    qids = [r["qid"] for r in read_records(tmp_path / "run.jsonl")]
    assert sorted(qids) == sorted(f"q{i}" for i in range(30)) and len(qids) == 30


def test_save_and_restore_runs(tmp_path):
    import json

    from kgqa_lib.evaluate.runner import read_records, restore_runs, save_runs

    runs, saved = tmp_path / "runs", tmp_path / "saved"
    runs.mkdir()
    f = runs / "a.jsonl"
    f.write_text("".join(json.dumps({"qid": str(i), "question": "secret", "metrics": {"hits@1": 1.0}}) + "\n" for i in range(3)))
    strip = lambda r: {k: v for k, v in r.items() if k != "question"}  # noqa: E731
    assert save_runs([f], saved, strip) == {"a.jsonl": 3}
    first = (saved / "a.jsonl.gz").read_bytes()
    save_runs([f], saved, strip)
    assert (saved / "a.jsonl.gz").read_bytes() == first  # deterministic: no diff when nothing changed
    assert restore_runs(saved, runs) == {"a.jsonl": "kept (exists)"}
    f.unlink()
    assert restore_runs(saved, runs) == {"a.jsonl": "restored"}
    assert [r["qid"] for r in read_records(f)] == ["0", "1", "2"] and all("question" not in r for r in read_records(f))
    # the saved copy reads like the run file itself
    assert read_records(saved / "a.jsonl.gz") == read_records(f)


def test_paired_gain_matches_questions_by_qid():
    from kgqa_lib.evaluate.report import paired_gain

    a = [{"qid": str(i), "metrics": {"hits@1": 1.0 if i < 6 else 0.0}} for i in range(10)]
    b = [{"qid": str(i), "metrics": {"hits@1": 1.0 if i < 3 else 0.0}} for i in reversed(range(10))]  # other order
    mean, lo, hi, n = paired_gain(a, b, "hits@1")
    assert n == 10 and abs(mean - 0.3) < 1e-9 and lo <= 0.3 <= hi and lo >= 0.0  # never worse on any question
    # a question only one run answered is left out
    assert paired_gain(a + [{"qid": "x", "metrics": {"hits@1": 1.0}}], b, "hits@1")[3] == 10
    assert paired_gain(a, a, "hits@1")[:3] == (0.0, 0.0, 0.0)


def test_best_baseline_gain_picks_the_best_on_the_same_questions():
    from kgqa_lib.evaluate.report import best_baseline_gain, format_gain

    rec = lambda qid, v: {"qid": qid, "metrics": {"hits@1": v}}  # noqa: E731
    method = [rec(str(i), 1.0) for i in range(4)]
    io = [rec("0", 1.0), rec("1", 1.0), rec("2", 0.0), rec("3", 0.0), rec("x", 1.0)]  # "x": not a shared question
    cot = [rec("0", 1.0), rec("1", 1.0), rec("2", 0.0), rec("3", 0.0)]  # ties with io → io, the first named
    sc = [rec(str(i), 0.0) for i in range(4)]
    best, mean, gain = best_baseline_gain(method, {"io": io, "cot": cot, "sc": sc}, "hits@1")
    assert (best, mean, gain[0], gain[3]) == ("io", 0.5, 0.5, 4)
    assert best_baseline_gain(method, {"sc": sc, "cot": cot}, "hits@1")[0] == "cot"
    assert format_gain((0.099, 0.043, 0.155, 161)) == "+9.9 [+4.3, +15.5]"
    assert format_gain((-0.023, -0.08, 0.023, 88)) == "-2.3 [-8.0, +2.3]"
