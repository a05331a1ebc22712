import json
import os
import signal
import subprocess
import sys
import re
import textwrap
from pathlib import Path
import time

import pytest

from kgqa_lib.data.datasets import Dataset, Question
from kgqa_lib.evaluate.report import format_table, report, summarize
from kgqa_lib.evaluate.runner import read_records, run
from kgqa_lib.llm.chat import LLM, LLMCache
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
        from kgqa_lib.data.datasets import Dataset, Question
        from kgqa_lib.evaluate.runner import run
        from kgqa_lib.llm.chat import LLM, LLMCache
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
    # a save that dies while writing (disk full, killed) leaves the previous copy whole
    import pathlib

    import pytest

    f.write_text(f.read_text() + json.dumps({"qid": "3", "metrics": {"hits@1": 0.0}}) + "\n")
    real = pathlib.Path.write_bytes

    def half_then_fail(self, data):
        real(self, data[: len(data) // 2])
        raise OSError("No space left on device")

    pathlib.Path.write_bytes = half_then_fail
    try:
        with pytest.raises(OSError):
            save_runs([f], saved, strip)
    finally:
        pathlib.Path.write_bytes = real
    assert (saved / "a.jsonl.gz").read_bytes() == first
    f.write_text("".join(f.read_text().splitlines(keepends=True)[:3]))
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


# ---- issue 18: runs that cannot lie ------------------------------------------------------------
from kgqa_lib.evaluate import runner as R  # noqa: E402


class _Outage:
    """A switchable endpoint: while ``down``, every question hits an infrastructure error."""

    def __init__(self, error_cls, down=True, only=None):
        self.error_cls, self.down, self.only, self.calls = error_cls, down, only, 0


def _outage_method(name, outage):
    @register_method(name)
    def _m(q, ctx):
        outage.calls += 1
        if outage.down and (outage.only is None or q.qid in outage.only):
            time.sleep(0.05)  # the client's retries, much shortened
            raise outage.error_cls("SPARQL endpoint http://127.0.0.1:9/query did not answer: connection failed")
        r = ctx.llm.chat(q.question)
        return MethodResult([r.text.strip("{}")], r.text)

    return name


@pytest.mark.parametrize("workers", [1, 3])
def test_endpoint_outage_is_not_an_answer_and_resume_retries(tmp_path, workers):
    """Today every question is recorded as `exception:EndpointError`, scored 0, and skipped by a resume."""
    from kgqa_lib.kg.remote import EndpointError

    outage = _Outage(EndpointError)
    method = _outage_method(f"_outage_{workers}", outage)
    out = tmp_path / "run.jsonl"
    with pytest.raises(Exception) as ei:
        run(method, _ds(12), _ctx(tmp_path), out, progress=False, workers=workers)
    assert read_records(out) == [], "an outage was recorded as answers"
    assert type(ei.value).__name__ == "RunIncomplete"
    msg = str(ei.value)
    assert msg.startswith("12 questions not answered") and "\n" not in msg, msg
    assert "SPARQL endpoint http://127.0.0.1:9/query" in msg and "re-run the same command to retry them" in msg
    assert f"stopped after {R.MAX_CONSECUTIVE_OUTAGES} failures in a row" in msg
    assert outage.calls < 12  # an endpoint that is down is not tried on every question
    assert ei.value.records == [] and len(ei.value.not_answered) == 12
    outage.down = False  # the server is back: the same command answers every question
    recs = run(method, _ds(12), _ctx(tmp_path), out, progress=False, workers=workers)
    assert [r["qid"] for r in recs] == [f"q{i}" for i in range(12)] and all(r["error"] is None for r in recs)
    assert len(read_records(out)) == 12


def test_isolated_outage_goes_on_and_is_retried(tmp_path):
    from kgqa_lib.llm.chat import LLMEndpointError

    outage = _Outage(LLMEndpointError, only={"q2"})
    method = _outage_method("_outage_one", outage)
    out = tmp_path / "run.jsonl"
    with pytest.raises(Exception, match=r"^1 question not answered: .*re-run the same command") as ei:
        try:
            run(method, _ds(6), _ctx(tmp_path), out, progress=False)
        finally:
            assert summarize(read_records(out))["n"] == 5, "the outage was scored"  # not scored, not counted
    assert ei.value.not_answered == ["q2"] and len(ei.value.records) == 5
    outage.down = False
    ctx = _ctx(tmp_path)
    assert len(run(method, _ds(6), ctx, out, progress=False)) == 6 and ctx.llm.usage.calls == 1


def test_replay_miss_is_not_an_answer_and_says_how_to_record(tmp_path):
    replay = Context(LLM(None, "fixed", LLMCache(tmp_path / "empty.sqlite", transcripts=None), "replay"))
    out = tmp_path / "run.jsonl"
    with pytest.raises(Exception) as ei:
        run("_echo_last_word", _ds(6), replay, out, progress=False)
    msg = str(ei.value)
    assert "\n" not in msg and re.search(r"^6 questions not answered.*no recorded response of fixed.*--llm-mode auto", msg), msg
    from kgqa_lib.llm.chat import ReplayMiss

    assert isinstance(ei.value.__cause__, ReplayMiss) and read_records(out) == []


def test_runs_from_the_old_runner_with_outage_records_are_retried(tmp_path):
    out = tmp_path / "run.jsonl"
    run("_echo_last_word", _ds(3), _ctx(tmp_path), out, progress=False)
    recs = read_records(out)
    recs[1] = {**recs[1], "prediction": [], "metrics": {"hits@1": 0.0},
               "error": "exception:EndpointError: SPARQL endpoint http://x/query did not answer"}
    out.write_text("".join(json.dumps(r) + "\n" for r in recs))
    ctx = _ctx(tmp_path)
    again = run("_echo_last_word", _ds(3), ctx, out, progress=False)
    assert ctx.llm.usage.calls == 1 and again[1]["error"] is None and len(read_records(out, dedupe=False)) == 3


def test_method_failures_stay_scored_answers(tmp_path):
    from kgqa_lib.kg.graph import QueryTimeout

    @register_method("_timeout_is_the_query")
    def _m(q, ctx):
        raise QueryTimeout("SPARQL query exceeded 10.0 s")

    recs = run("_timeout_is_the_query", _ds(2), _ctx(tmp_path), tmp_path / "r.jsonl", progress=False)
    assert [r["error"].split(":")[1] for r in recs] == ["QueryTimeout"] * 2


def test_fusic_execution_lets_an_endpoint_outage_through():
    from kgqa_lib.methods.fusic import PROFILES, execute_query
    from kgqa_lib.kg.remote import EndpointError

    class DownKG:
        def sparql(self, *a, **k):
            raise EndpointError("SPARQL endpoint http://127.0.0.1:9/query did not answer")

        def has_term(self, iri):
            return True

    with pytest.raises(EndpointError):  # not a "parse_error" status fed back to the LLM and scored
        execute_query("SELECT ?x WHERE { ?x ?p ?o }", DownKG(), PROFILES["tiny"])


def test_a_failing_kg_store_is_not_an_answer_and_resume_retries(tmp_path):
    """A lane opened the MetaQA store while another rebuilt it: 52 questions were recorded as
    `exception:RuntimeError: Corruption: block checksum mismatch …`, scored 0 and skipped by resumes."""
    down = {"on": True}

    @register_method("_store_corrupt")
    def _m(q, ctx):
        if down["on"]:
            raise RuntimeError("Corruption: block checksum mismatch: stored = 1, computed = 2, type = 4  in /c/kg/metaqa/000014.sst")
        r = ctx.llm.chat(q.question)
        return MethodResult([r.text.strip("{}")], r.text)

    out = tmp_path / "run.jsonl"
    with pytest.raises(R.RunIncomplete) as ei:
        run("_store_corrupt", _ds(6), _ctx(tmp_path), out, progress=False)
    msg = str(ei.value)
    assert read_records(out) == [] and "\n" not in msg
    assert msg.startswith(f"6 questions not answered (stopped after {R.MAX_CONSECUTIVE_OUTAGES} failures in a row)"), msg
    assert "the embedded KG store failed (Corruption: block checksum mismatch" in msg, msg
    down["on"] = False
    assert [r["error"] for r in run("_store_corrupt", _ds(6), _ctx(tmp_path), out, progress=False)] == [None] * 6


@pytest.mark.parametrize("error", ["exception:RuntimeError: Corruption: block checksum mismatch: stored = 1",
                                   "exception:OSError: the query failed in the store: RuntimeError: IO error: EIO"])
def test_records_of_a_failing_store_from_the_old_runner_are_retried(tmp_path, error):
    out = tmp_path / "run.jsonl"
    run("_echo_last_word", _ds(3), _ctx(tmp_path), out, progress=False)
    recs = read_records(out)
    recs[2] = {**recs[2], "prediction": [], "metrics": {"hits@1": 0.0}, "error": error}
    out.write_text("".join(json.dumps(r) + "\n" for r in recs))
    ctx = _ctx(tmp_path)
    again = run("_echo_last_word", _ds(3), ctx, out, progress=False)
    assert ctx.llm.usage.calls == 1 and again[2]["error"] is None and len(read_records(out, dedupe=False)) == 3


def test_a_query_error_that_only_mentions_corruption_stays_the_methods():
    from kgqa_lib.kg.graph import KGStoreError, store_failure

    assert store_failure(ValueError("Corruption: x")) is None  # not the store's exception type
    assert store_failure(RuntimeError("the film 'Corruption: a love story' has no year")) is None
    assert store_failure(OSError("the query failed in the store: RuntimeError: Type error")) is None
    inner = RuntimeError("IO error: No space left on device")
    try:
        try:
            raise inner
        except RuntimeError as exc:
            raise KeyError("lookup") from exc
    except KeyError as outer:
        found = store_failure(outer)
    assert isinstance(found, KGStoreError) and found.__cause__ is not None and "No space left" in found.short()


def test_fusic_execution_lets_a_failing_kg_store_through(tmp_path):
    """An EmbeddedKG whose worker reports a RocksDB corruption raises KGStoreError, which the FuSIC
    execution (KB-BINDER's too) lets through instead of feeding it back to the LLM as a parse error."""
    from kgqa_lib.kg.graph import KGStoreError, load_rdf
    from kgqa_lib.methods.fusic import PROFILES, execute_query

    (tmp_path / "a.nt").write_text('<http://ex/a> <http://ex/p> <http://ex/b> .\n')
    kg = load_rdf(tmp_path / "a.nt", store_dir=tmp_path / "store")
    assert kg.sparql("SELECT ?o WHERE { <http://ex/a> <http://ex/p> ?o }").rows == [{"o": "http://ex/b"}]

    class Broken:
        def run(self, *a, **k):
            return {"error": "RuntimeError", "message": "Corruption: block checksum mismatch in /x/000014.sst"}

    kg._workers = Broken()
    with pytest.raises(KGStoreError, match=r"the KG store at .*store failed: .*Corruption.* delete .* run again"):
        kg.sparql("SELECT ?o WHERE { ?s ?p ?o }")

    class HasTerms:
        def __init__(self, kg):
            self.kg = kg

        def sparql(self, *a, **k):
            return self.kg.sparql(*a, **k)

        def has_term(self, iri):
            return True

    with pytest.raises(KGStoreError):
        execute_query("SELECT ?x WHERE { ?x ?p ?o }", HasTerms(kg), PROFILES["tiny"])


class _Crash(BaseException):
    pass


def test_overwrite_keeps_the_old_file_until_a_new_answer_exists(tmp_path):
    out = tmp_path / "run.jsonl"
    run("_echo_last_word", _ds(3), _ctx(tmp_path), out, progress=False)
    old = out.read_bytes()

    @register_method("_crash_first")
    def _crash(q, ctx):
        raise _Crash()

    with pytest.raises(_Crash):  # a crash (kill, ^C) before the first new answer
        run("_crash_first", _ds(3), _ctx(tmp_path), out, progress=False, overwrite=True)
    assert out.read_bytes() == old
    from kgqa_lib.kg.remote import EndpointError

    method = _outage_method("_outage_overwrite", _Outage(EndpointError))
    with pytest.raises(R.RunIncomplete):  # an outage: nothing answered, the old run stays
        run(method, _ds(3), _ctx(tmp_path), out, progress=False, overwrite=True)
    assert out.read_bytes() == old
    ctx = _ctx(tmp_path)
    ctx.settings = {"k": 2}  # another configuration: what --overwrite is for
    recs = run("_echo_last_word", _ds(2), ctx, out, progress=False, overwrite=True)
    assert [r["qid"] for r in read_records(out)] == ["q0", "q1"] and recs[0]["config"]["settings"] == {"k": 2}
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("run.")) == ["run.jsonl"]


_LOCK_SCRIPT = """
import sys, time
from kgqa_lib.data.datasets import Dataset, Question
from kgqa_lib.evaluate.runner import run
from kgqa_lib.llm.chat import LLM, LLMCache
from kgqa_lib.methods import Context, MethodResult, register_method

class Slow:
    model_id = "slow"
    def complete(self, req):
        time.sleep(0.25)
        return {"text": "{x}", "prompt_tokens": 1, "completion_tokens": 1, "finish_reason": "stop"}

@register_method("_slow")
def _slow(q, ctx):
    return MethodResult([ctx.llm.chat(q.question).text.strip("{}")])

ds = Dataset("toy", [Question(f"q{i}", f"question {i}", ["x"]) for i in range(30)])
ctx = Context(LLM(Slow(), "slow", LLMCache(sys.argv[2], transcripts=None), "auto"))
run("_slow", ds, ctx, sys.argv[1], progress=False)
"""


def test_second_writer_is_refused_with_the_holders_pid(tmp_path):
    import time

    script = tmp_path / "slow.py"
    script.write_text(_LOCK_SCRIPT)
    out = tmp_path / "run.jsonl"
    import kgqa_lib

    env = {**os.environ, "PYTHONPATH": str(Path(kgqa_lib.__file__).parents[1])}  # this checkout's library
    proc = subprocess.Popen([sys.executable, str(script), str(out), str(tmp_path / "a.sqlite")], env=env)
    try:
        deadline = time.time() + 60
        while time.time() < deadline and not read_records(out):
            time.sleep(0.05)
        assert read_records(out), "the first run did not start"
        second = subprocess.run([sys.executable, str(script), str(out), str(tmp_path / "b.sqlite")],
                                capture_output=True, text=True, timeout=120, env=env)
        assert second.returncode != 0 and f"process {proc.pid}" in second.stderr, second.stderr[-800:]
        assert "RunLocked" in second.stderr
        assert proc.wait(timeout=120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    qids = [r["qid"] for r in read_records(out, dedupe=False)]
    assert len(qids) == 30 and len(set(qids)) == 30
    assert not (tmp_path / "run.jsonl.lock").exists()  # released
    run("_echo_last_word", _ds(2), _ctx(tmp_path), tmp_path / "other.jsonl", progress=False)  # the lock is free


def test_cli_second_writer_exits_2(tmp_path, capsys):
    from kgqa_lib.cli import main

    out = tmp_path / "run.jsonl"
    lock = R._RunLock(out).acquire()  # held by "another run"
    try:
        code = main(["run", "--method", "io", "--dataset", "tiny:films", "--llm-mode", "replay", "--quiet",
                     "--no-transcripts", "--out", str(out)])
    finally:
        lock.release()
    err = capsys.readouterr().err
    assert code == 2 and f"process {os.getpid()}" in err and "another run" in err and err.count("\n") == 1
    assert not out.exists()


def test_report_counts_each_question_once(tmp_path, capsys):
    out = tmp_path / "run.jsonl"
    run("_echo_last_word", _ds(10), _ctx(tmp_path), out, progress=False)
    lines = out.read_text().splitlines()
    first = [json.loads(x) for x in lines]
    second = [{**r, "metrics": {**r["metrics"], "hits@1": 1.0}} for r in first]  # a second writer, later
    out.write_text("".join(json.dumps(r) + "\n" for r in first + second))
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        df = report([out])
    assert df["n"].tolist() == [10] and df["hits@1"].tolist() == [1.0]  # each question once, the last record wins
    assert any("10 duplicate" in str(w.message) for w in seen)
    with pytest.warns(R.DuplicateRecordsWarning):
        assert len(read_records(out)) == 10
    from kgqa_lib.cli import main

    assert main(["report", str(out)]) == 0
    cap = capsys.readouterr()
    assert "| 10 |" in cap.out and "10 duplicate record(s)" in cap.err


def test_resume_rescores_changed_gold_without_calling_the_llm(tmp_path):
    out = tmp_path / "run.jsonl"
    run("_echo_last_word", _ds(4), _ctx(tmp_path), out, progress=False)
    assert [r["metrics"]["hits@1"] for r in read_records(out)] == [1.0, 0.0, 1.0, 0.0]
    ds = _ds(4)
    ds.questions[1].answers[:] = ["w1"]  # the gold of q1 was corrected
    ctx = _ctx(tmp_path)
    recs = run("_echo_last_word", ds, ctx, out, progress=False)
    assert [r["metrics"]["hits@1"] for r in recs] == [1.0, 1.0, 1.0, 0.0], "the changed gold was not re-scored"
    assert ctx.llm.usage.calls == 0 and recs.rescored == 1
    stored = read_records(out, dedupe=False)
    assert len(stored) == 4 and stored[1]["gold"] == ["w1"] and stored[1]["question_hash"] == recs[1]["question_hash"]
    ctx = _ctx(tmp_path)
    assert run("_echo_last_word", ds, ctx, out, progress=False).rescored == 0 and ctx.llm.usage.calls == 0


# ---- gold-based diagnostics: computed by the runner after the method, never by the method --------
@register_method("_echo_traced")
def _echo_traced(q, ctx):
    from kgqa_lib.methods.base import Stage

    r = ctx.llm.chat(q.question)
    return MethodResult([r.text.strip("{}")], r.text, [Stage("guess", {"word": r.text.strip("{}")})])


def test_runner_attaches_diagnostics_from_the_trace_and_the_gold(tmp_path, monkeypatch):
    from kgqa_lib.evaluate import diagnostics

    seen = []

    def word_is_gold(q, trace, kg=None):
        seen.append(q.qid)
        return {"guess_is_gold": trace[0]["output"]["word"] in q.answers}

    monkeypatch.setitem(diagnostics.DIAGNOSTICS, "_echo_traced", word_is_gold)
    out = tmp_path / "run.jsonl"
    recs = run("_echo_traced", _ds(4), _ctx(tmp_path), out, progress=False)
    assert [r["diagnostics"] for r in recs] == [{"guess_is_gold": g} for g in (True, False, True, False)]
    assert read_records(out)[1]["diagnostics"] == {"guess_is_gold": False}
    assert "diagnostics" not in run("_echo_last_word", _ds(2), _ctx(tmp_path), tmp_path / "plain.jsonl",
                                    progress=False)[0]  # a method without diagnostics: records as before
    ds = _ds(4)
    ds.questions[1].answers[:] = ["w1"]  # the gold changed: re-scored on resume, diagnostics too
    recs = run("_echo_traced", ds, _ctx(tmp_path), out, progress=False)
    assert recs.rescored == 1 and recs[1]["diagnostics"] == {"guess_is_gold": True}


def test_decomposition_of_reads_the_diagnostics_or_an_old_records_trace_stage():
    from kgqa_lib.evaluate.diagnostics import decomposition_of

    new = {"diagnostics": {"decomposition": {"predicted_chain": ["a"], "gold_chain": ["a", "b"], "chain_correct": False,
                                             "seed_named": True, "seed_correct": True, "correct": False}}}
    old = {"trace": [{"name": "decomposition_check", "output": {"predicted_chain": ["a"], "gold_chain": ["a"],
                                                                 "correct": True}}]}
    assert decomposition_of(new) == {"predicted_chain": ["a"], "gold_chain": ["a", "b"], "correct": False}
    assert decomposition_of(old) == {"predicted_chain": ["a"], "gold_chain": ["a"], "correct": True}
    assert decomposition_of({"trace": []}) is None


def test_records_to_df_one_row_per_record(tmp_path):
    from kgqa_lib.evaluate.runner import records_to_df

    out = tmp_path / "run.jsonl"
    recs = run("_echo_last_word", _ds(3), _ctx(tmp_path), out, progress=False)
    df = recs.to_df()
    assert list(df["qid"]) == ["q0", "q1", "q2"] and list(df["gold"]) == ["w0", "other", "w2"]
    assert list(df["prediction"]) == ["w0", "w1", "w2"] and list(df["hits@1"]) == [1.0, 0.0, 1.0]
    assert list(df["calls"]) == [1, 1, 1] and list(df["tokens"]) == [9, 9, 9]
    assert read_records(out).to_df().equals(df)
    assert records_to_df(recs, join=None)["gold"][1] == ["other"]
    stripped = records_to_df([{"qid": "x", "metrics": {"hits@1": 1.0}}])  # a benchmark's stripped copy
    assert stripped.loc[0, "question"] is None and stripped.loc[0, "hits@1"] == 1.0
    assert list(records_to_df([]).columns[:5]) == ["qid", "question", "gold", "prediction", "error"]


def test_method_result_to_df_is_the_trace():
    from kgqa_lib.methods.base import Stage

    res = MethodResult(["x"], "", [Stage("a", None, 0.12345), Stage("b", None, 1.0)])
    assert res.to_df().values.tolist() == [["a", 0.123], ["b", 1.0]] and list(res.to_df().columns) == ["stage", "seconds"]
