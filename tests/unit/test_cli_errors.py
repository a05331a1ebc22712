"""Bad command lines, settings, data files and setups (issue 18, item 6): each one is a single line
``error: …`` on stderr naming the problem and the fix, exit code 2, no traceback, and nothing
written (no run file, no cache file). Runs in-process through ``kgqa_lib.cli.main``; nothing here
calls a model (``--llm-mode replay``, tiny datasets)."""

from __future__ import annotations

import pytest

from kgqa_lib import cli
from kgqa_lib.paths import data_dir

RUN = ["run", "--method", "io", "--dataset", "tiny:films", "--llm-mode", "replay", "--quiet"]
PG = ["run", "--method", "pgakv", "--dataset", "tiny:films", "--llm-mode", "replay", "--quiet"]


def _garbage(tmp):
    (tmp / "garbage.jsonl").write_text("this is not JSON\n{also not\n")


def _underspecified(tmp):
    (tmp / "thin.jsonl").write_text('{"qid": "q1", "question": "who directed Inception"}\n')


def _binary(tmp):
    (tmp / "binary.jsonl").write_bytes(b"\xff\xfe\x00garbage\x80\n")


def _cache_is_a_file(tmp, monkeypatch):
    (tmp / "cachefile").write_text("not a folder")
    monkeypatch.setenv("KGQA_CACHE_DIR", str(tmp / "cachefile"))


def _no_api_key(tmp, monkeypatch):
    for var in ("OPENAI_API_KEY", "KGQA_LLM_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)


def _earlier_run(tmp, monkeypatch):
    """A run file written by an earlier run of another configuration (and the cache it left)."""
    assert cli.main([*RUN, "--limit", "1", "--out", str(tmp / "out" / "run.jsonl")]) == 0


_Q = '{"qid": "q%d", "question": "who directed Inception", "answers": ["Christopher Nolan"]%s}'


def _inputs(tmp, monkeypatch=None):
    """Small files of every kind the bad inputs below name: datasets with one fault each, files that
    are not what a command reads, a text file where a folder is expected and a folder."""
    (tmp / "text.txt").write_text("not a database, not a folder\n")
    (tmp / "adir").mkdir()
    (tmp / "empty.jsonl").write_text("")
    (tmp / "bin.jsonl").write_bytes(b"\xff\xfe\x00\x80 binary\n")
    (tmp / "notgz.jsonl.gz").write_text("this is not gzip\n")
    (tmp / "ds_ok3.jsonl").write_text("".join(_Q % (i, "") + "\n" for i in range(3)))
    faults = {"qidlist": '{"qid": ["q1"], "question": "who directed Inception", "answers": ["Christopher Nolan"]}',
              "qiddict": '{"qid": {"id": 1}, "question": "who directed Inception", "answers": ["Christopher Nolan"]}',
              "answers_nonstr": '{"qid": "q1", "question": "who directed Inception", "answers": [1, null, {"a": 1}]}',
              "kind_weird": _Q % (1, ', "kind": "weird"'),
              "topic_str": _Q % (1, ', "topic_entities": "Inception"')}
    for name, line in faults.items():
        (tmp / f"ds_{name}.jsonl").write_text(_Q % (0, "") + "\n" + line + "\n")
    (tmp / "ds_bom.jsonl").write_text("\ufeff" + _Q % (0, "") + "\n", encoding="utf-8")


def _run_and_inputs(tmp, monkeypatch):
    _inputs(tmp)
    _earlier_run(tmp, monkeypatch)


def _run_missing_seconds(tmp, monkeypatch):
    """A run file whose records lost a field a report sums."""
    import json

    _earlier_run(tmp, monkeypatch)
    recs = [json.loads(line) for line in (tmp / "out" / "run.jsonl").read_text().splitlines()]
    (tmp / "run_missing_seconds.jsonl").write_text("".join(
        json.dumps({k: v for k, v in r.items() if k != "seconds"}) + "\n" for r in recs))


def _journal_bogus(tmp, monkeypatch):
    monkeypatch.setenv("KGQA_SQLITE_JOURNAL", "bogus")


def _data_dir_empty(tmp, monkeypatch):
    (tmp / "datasets").mkdir()
    monkeypatch.setenv("KGQA_DATA_DIR", str(tmp / "datasets"))


def _data_dir_is_a_file(tmp, monkeypatch):
    _inputs(tmp)
    monkeypatch.setenv("KGQA_DATA_DIR", str(tmp / "text.txt"))


def _ds(name):
    return ["run", "--method", "io", "--dataset", f"{{tmp}}/{name}", "--llm-mode", "replay", "--quiet", "--out",
            "{tmp}/results/x.jsonl"]


LC = ["run", "--method", "langchain_sparql", "--dataset", "miniworld:simple", "--limit", "1", "--kg", "miniworld",
      "--llm-mode", "replay", "--quiet", "--out", "{tmp}/results/lc.jsonl"]


def _caches(tmp, monkeypatch=None):
    """What ``kgqa cache merge`` may be given by mistake: a text file, SQLite files that are not this
    project's cache or hold entries that cannot be trusted, a real cache and a copy of it cut in half,
    and a text file of the user's where the merged cache should go."""
    import sqlite3

    from kgqa_lib.llm.chat import ChatRequest, LLMCache

    _inputs(tmp)
    cols = ("key TEXT PRIMARY KEY, model_id TEXT, request TEXT, text TEXT, prompt_tokens INTEGER, "
            "completion_tokens INTEGER, finish_reason TEXT, seconds REAL")
    for name, *sql in (
            ("foreign.sqlite", "CREATE TABLE things (a TEXT)", "INSERT INTO things VALUES ('x')"),
            ("wrongcols.sqlite", "CREATE TABLE responses (a TEXT, b TEXT)", "INSERT INTO responses VALUES ('x', 'y')"),
            ("badrequest.sqlite", f"CREATE TABLE responses ({cols})", "CREATE TABLE pending (key TEXT PRIMARY KEY)",
             "INSERT INTO responses VALUES ('k1', 'm', 'not json', 't', 1, 1, 'stop', 0.1)",
             "INSERT INTO pending VALUES ('k1')"),
            ("nullmodel.sqlite", f"CREATE TABLE responses ({cols})", "CREATE TABLE pending (key TEXT PRIMARY KEY)",
             "INSERT INTO responses VALUES ('k2', NULL, '{}', NULL, NULL, NULL, NULL, NULL)",
             "INSERT INTO pending VALUES ('k2')")):
        con = sqlite3.connect(tmp / name)
        for statement in sql:
            con.execute(statement)
        con.commit()
        con.close()
    cache = LLMCache(tmp / "good.sqlite", transcripts=None)
    for i in range(40):
        cache.put(ChatRequest("openai:m", (("user", f"question {i} " + "x" * 2000),)),
                  {"text": "y" * 2000, "prompt_tokens": 1, "completion_tokens": 1})
    cache._conn().close()  # (the last connection: its pages are checkpointed into the file)
    data = (tmp / "good.sqlite").read_bytes()
    (tmp / "half.db").write_bytes(data[: len(data) // 2])  # (not named .sqlite: the tree check reads those)
    (tmp / "mynotes.txt").write_text("my notes, not a cache\n")


_HELD = []  # run locks held by a setup (released after the test)


@pytest.fixture(autouse=True)
def _release_held_locks():
    yield
    while _HELD:
        _HELD.pop().release()


def _written_by_another_run(tmp, monkeypatch):
    """Another ``kgqa run`` is writing out/run.jsonl (it made the cache); link.jsonl is a symlink to it."""
    from kgqa_lib.evaluate import runner

    _earlier_run(tmp, monkeypatch)
    (tmp / "link.jsonl").symlink_to(tmp / "out" / "run.jsonl")
    _HELD.append(runner._RunLock(tmp / "out" / "run.jsonl").acquire())


def _truncated_measurement(tmp, monkeypatch):
    """A measurement's JSON cut short, as a kill during its write would leave it."""
    from kgqa_lib.paths import repo_root

    (tmp / "results" / "bench").mkdir(parents=True)
    (tmp / "results" / "bench" / "embed.json").write_bytes((repo_root() / "results" / "bench" / "embed.json").read_bytes()[:300])


def _kg(url):
    return ["run", "--method", "qsm", "--dataset", "tiny:films", "--kg", url, "--llm-mode", "replay", "--quiet", "--out",
            "{tmp}/results/x.jsonl"]


def _merge(*sources, into="{tmp}/mc/a.sqlite", transcripts="{tmp}/mc/tr"):
    return ["cache", "merge", *sources, "--into", into, "--transcripts", transcripts]


#: ``python -m kgqa_lib.distributed`` (the Dask driver), not ``kgqa``
DIST = "-m kgqa_lib.distributed"
DIST_RUN = [DIST, "run", "--out", "{tmp}/results/d.jsonl"]


# (id, argv (``{tmp}`` is the test's folder), setup, what the message must say)
CASES = [
    ("garbage-jsonl", ["run", "--method", "io", "--dataset", "{tmp}/garbage.jsonl", "--llm-mode", "replay"], _garbage,
     "line 1: not JSON"),
    ("underspecified-jsonl", ["run", "--method", "io", "--dataset", "{tmp}/thin.jsonl", "--llm-mode", "replay"],
     _underspecified, "missing answers"),
    ("binary-jsonl", ["run", "--method", "io", "--dataset", "{tmp}/binary.jsonl", "--llm-mode", "replay"], _binary,
     "not UTF-8"),
    ("missing-jsonl", ["run", "--method", "io", "--dataset", "{tmp}/nothere.jsonl", "--llm-mode", "replay"], None,
     "not found"),
    ("sample-negative", [*RUN, "--sample", "-1"], None, "--sample: expects a number ≥ 1, got -1"),
    ("sample-zero", [*RUN, "--sample", "0"], None, "--sample: expects a number ≥ 1, got 0"),
    ("dataset-extra-part", ["run", "--method", "io", "--dataset", "tiny:films:dev:extra", "--llm-mode", "replay"], None,
     "tiny takes at most 2 part(s)"),
    ("cache-dir-is-a-file", RUN, _cache_is_a_file, "KGQA_CACHE_DIR="),
    ("no-api-key", ["run", "--method", "io", "--dataset", "tiny:films", "--llm", "openai:gpt-4o-mini", "--llm-mode",
                    "auto"], _no_api_key, "set OPENAI_API_KEY"),
    ("config-mismatch", [*RUN, "--limit", "1", "--set", "max_tokens=32", "--out", "{tmp}/out/run.jsonl"], _earlier_run,
     "holds records of another configuration"),
    ("limit-negative", [*RUN, "--limit", "-8"], None, "--limit: expects a number ≥ 1, got -8"),
    ("limit-zero", [*RUN, "--limit", "0"], None, "--limit: expects a number ≥ 1"),
    ("workers-zero", [*RUN, "--workers", "0"], None, "--workers: expects a number ≥ 1, got 0"),
    ("workers-negative", [*RUN, "--workers", "-5"], None, "--workers: expects a number ≥ 1, got -5"),
    ("workers-not-a-number", [*RUN, "--workers", "many"], None, "--workers: expects a whole number"),
    ("unknown-set-key", [*PG, "--set", "treshold=0.9"], None, "unknown setting 'treshold' for pgakv (did you mean 'threshold'?)"),
    ("set-key-of-another-method", [*RUN, "--set", "threshold=0.5"], None, "unknown setting 'threshold' for io"),
    ("bad-bool", [*PG, "--set", "verify=maybe"], None, "setting 'verify' of pgakv expects bool"),
    ("bad-int", [*PG, "--set", "top_k=ten"], None, "setting 'top_k' of pgakv expects int, got 'ten'"),
    ("bad-float", [*PG, "--set", "threshold=high"], None, "setting 'threshold' of pgakv expects float"),
    ("bad-choice", ["run", "--method", "keqing", "--dataset", "keqing:miniworld", "--llm-mode", "replay", "--set",
                    "mode=chian"], None, "expects one of 'decompose', 'chain'"),
    ("set-without-equals", [*PG, "--set", "threshold"], None, "--set: expects KEY=VALUE"),
    ("report-missing-file", ["report", "{tmp}/no-such-run.jsonl"], None, "no run file"),
    ("reproduce-only-nomatch", ["reproduce", "--only", "nomatch", "--llm-mode", "replay"], None,
     "--only nomatch matches no notebook"),
    ("grid-without-values", ["reproduce", "--only", "00_quick", "--grid", "N_QUESTIONS"], None, "--grid: expects KEY=V1,V2"),
    ("grid-empty-values", ["reproduce", "--only", "00_quick", "--grid", "N_QUESTIONS="], None, "--grid: expects KEY=V1,V2"),
    ("unknown-method", ["run", "--method", "nope", "--dataset", "tiny:films", "--llm-mode", "replay"], None,
     "Unknown method 'nope'; known:"),
    ("unknown-dataset", ["run", "--method", "io", "--dataset", "nope:x", "--llm-mode", "replay"], None,
     "Unknown dataset 'nope:x'; known:"),
    ("unknown-llm-backend", ["run", "--method", "io", "--dataset", "tiny:films", "--llm", "anthropic:claude"], None,
     "use 'local', 'local:<model>', 'openai:<model>'"),
    ("unknown-local-model", ["run", "--method", "io", "--dataset", "tiny:films", "--llm", "local:llama-70b"], None,
     "Unknown local model"),
    ("unknown-kg", ["run", "--method", "qsm", "--dataset", "tiny:films", "--kg", "nowhere", "--llm-mode", "replay"], None,
     "Unknown KG 'nowhere'"),
    ("unknown-llm-mode", [*RUN, "--llm-mode", "record"], None, "invalid choice: 'record'"),
    ("run-without-dataset", ["run", "--method", "io"], None, "needs --dataset"),
    ("help-settings-unknown-method", ["run", "--method", "nope", "--help-settings"], None, "Unknown method 'nope'"),
    ("bench-unknown-table", ["bench", "run", "embedd", "--yes"], None, "unknown benchmark table 'embedd'; known:"),
    ("bench-option-too-small", ["bench", "run", "embed", "--n", "0", "--yes"], None,
     "argument --n: expects numbers ≥ 1, got 0"),
    ("bench-option-not-a-number", ["bench", "run", "distributed", "--workers", "1,two", "--yes"], None,
     "argument --workers: expects a whole number, got 'two'"),
    ("bench-unknown-option", ["bench", "run", "embed", "--nn", "5", "--yes"], None, "unrecognized arguments: --nn 5"),
    ("bench-unknown-section", ["bench", "run", "scaleout", "--only", "servers,gpu", "--yes"], None,
     "argument --only: expects items of concurrency,servers,metaqa, got 'gpu'"),
    ("bench-paper-table-option", ["bench", "run", "pgakv_t2", "--n", "5"], None, "table pgakv_t2 takes no options"),
    ("bench-list-option", ["bench", "list", "--n", "5"], None, "unrecognized arguments: --n ("),
    # datasets
    ("metaqa-unknown-hops", ["run", "--method", "io", "--dataset", "metaqa:7hop:dev", "--llm-mode", "replay"], None,
     "Unknown MetaQA set '7hop'"),
    ("miniworld-unknown-part", ["run", "--method", "io", "--dataset", "miniworld:nosuchpart", "--llm-mode", "replay"],
     None, "nosuchpart.jsonl not found"),
    ("empty-jsonl", _ds("empty.jsonl"), _inputs, "holds no questions"),
    ("dataset-is-a-folder", _ds("adir/"), _inputs, "is not a file"),
    ("dataset-qid-a-list", _ds("ds_qidlist.jsonl"), _inputs, "ds_qidlist.jsonl, line 2: 'qid' must be a string"),
    ("dataset-qid-an-object", _ds("ds_qiddict.jsonl"), _inputs, "ds_qiddict.jsonl, line 2: 'qid' must be a string"),
    ("dataset-answers-not-strings", _ds("ds_answers_nonstr.jsonl"), _inputs,
     "ds_answers_nonstr.jsonl, line 2: 'answers' must be a list of strings"),
    ("dataset-unknown-kind", _ds("ds_kind_weird.jsonl"), _inputs, "line 2: unknown question kind 'weird'"),
    ("dataset-topic-entities-a-string", ["run", "--method", "qsm", "--kg", "tiny", *_ds("ds_topic_str.jsonl")[3:]],
     _inputs, "ds_topic_str.jsonl, line 2: 'topic_entities' must be a list of strings"),
    ("dataset-with-bom", _ds("ds_bom.jsonl"), _inputs, "BOM"),
    ("fusic-unknown-task", ["run", "--method", "io", "--dataset", "fusic:a>b", "--llm-mode", "replay"], None,
     "Unknown transfer task 'a>b'"),
    ("metaqa-unknown-split", ["run", "--method", "io", "--dataset", "metaqa:1hop:nosplit", "--llm-mode", "replay"],
     _data_dir_empty, "qa_nosplit_1hop.txt not found"),
    ("data-dir-is-a-file", ["run", "--method", "io", "--dataset", "metaqa:1hop:dev", "--llm-mode", "replay"],
     _data_dir_is_a_file, "KGQA_DATA_DIR="),
    # run options
    ("shard-out-of-range", [*RUN, "--shard", "3/2"], None, "--shard: expects i/n with 0 ≤ i < n"),
    ("shard-negative", [*RUN, "--shard", "-1/0"], None, "--shard: expected one argument"),
    ("shard-of-zero", [*RUN, "--shard", "0/0"], None, "--shard: expects i/n with 0 ≤ i < n"),
    ("shard-without-slash", [*RUN, "--shard", "1"], None, "--shard: expects i/n with 0 ≤ i < n"),
    ("shard-not-numbers", [*RUN, "--shard", "a/b"], None, "--shard: expects i/n with 0 ≤ i < n"),
    ("shard-float-count", [*RUN, "--shard", "0/1e3"], None, "--shard: expects i/n with 0 ≤ i < n"),
    ("shard-into-another-config", [*RUN, "--limit", "1", "--shard", "0/2", "--set", "max_tokens=32", "--out",
                                   "{tmp}/out/run.jsonl"], _earlier_run, "holds records of another configuration"),
    ("seed-not-a-number", [*RUN, "--seed", "abc"], None, "--seed: invalid int value: 'abc'"),
    ("run-out-under-a-file", [*RUN, "--out", "{tmp}/text.txt/run.jsonl"], _inputs,
     "text.txt' is a file, not a folder"),
    ("run-out-a-folder", [*RUN, "--out", "{tmp}/adir"], _inputs, "adir' is a folder: give the path of a file"),
    ("run-out-a-gzip-name", [*RUN, "--out", "{tmp}/results/run.jsonl.gz"], None,
     "run.jsonl.gz' is a gzip name: a run is written as plain JSONL"),
    ("llm-rate-zero", [*RUN, "--llm", "openai:fake?rpm=0"], None, "rpm expects a positive number (per minute)"),
    ("llm-rate-infinite", [*RUN, "--llm", "openai:fake?rpm=1e999"], None, "rpm expects a positive number"),
    ("llm-unknown-option", [*RUN, "--llm", "openai:fake?nope=1"], None, "unknown option 'nope' in the LLM name"),
    ("local-prefix-cache-too-big", [*RUN, "--llm", "local?prefix_cache=100000&threads=100000"], None,
     "prefix_cache expects a whole number ≥ 0 and ≤ 64"),
    ("local-threads-too-many", [*RUN, "--llm", "local?threads=100000"], None, "threads expects a whole number ≥ 1 and ≤"),
    ("sqlite-journal-unknown", RUN, _journal_bogus, "KGQA_SQLITE_JOURNAL='bogus' is not a journal mode"),
    # settings out of their range
    ("set-max-tokens-negative", [*RUN, "--set", "max_tokens=-1"], None,
     "setting 'max_tokens' of io expects int ≥ 1, got '-1'"),
    ("set-samples-zero", ["run", "--method", "sc", *RUN[3:], "--set", "samples=0"], None,
     "setting 'samples' of sc expects int ≥ 1, got '0'"),
    ("set-threshold-nan", [*PG, "--set", "threshold=nan"], None,
     "setting 'threshold' of pgakv expects float in [-1, 1], got 'nan'"),
    ("set-timeout-infinite", [*LC, "--set", "timeout=inf"], None,
     "setting 'timeout' of langchain_sparql expects float ≥ 0.1 (finite), got 'inf'"),
    ("set-max-rows-negative", [*LC, "--set", "max_rows=-5"], None,
     "setting 'max_rows' of langchain_sparql expects int ≥ 1, got '-5'"),
    ("set-kg-not-a-setting", [*RUN, "--set", "kg=../../x", "--out", "{tmp}/results/x.jsonl"], None,
     "the KG is not a setting: give it with --kg ../../x"),
    # report
    ("report-a-dataset-file", ["report", "{tmp}/ds_ok3.jsonl"], _inputs, "ds_ok3.jsonl is not a run file"),
    ("report-run-missing-fields", ["report", "{tmp}/run_missing_seconds.jsonl"], _run_missing_seconds,
     "has no number 'seconds'"),
    ("report-binary-file", ["report", "{tmp}/bin.jsonl"], _inputs, "bin.jsonl is not a run file: not UTF-8"),
    ("report-not-gzip", ["report", "{tmp}/notgz.jsonl.gz"], _inputs, "is not a run file: not a readable gzip file"),
    ("report-unknown-metric", ["report", "{tmp}/out/run.jsonl", "--metrics", "nosuch"], _earlier_run,
     "--metrics: unknown metric 'nosuch'; known: hits@1, any_hit"),
    ("report-out-under-a-file", ["report", "{tmp}/out/run.jsonl", "--out", "{tmp}/text.txt/r.md"], _run_and_inputs,
     "text.txt' is a file, not a folder"),
    # other commands
    ("notebooks-check-missing", ["notebooks", "check", "{tmp}/nope.ipynb"], None, "no notebook"),
    ("notebooks-check-a-jsonl", ["notebooks", "check", "{tmp}/ds_ok3.jsonl"], _inputs, "ds_ok3.jsonl is not a notebook"),
    ("workshop-out-a-file", ["workshop", "--out", "{tmp}/text.txt"], _inputs, "text.txt' is a file, not a folder"),
    ("slices-build-not-sparql", ["slices", "build", "--dataset", "tiny:films", "--kg", "tiny"], None,
     "not a SPARQL KG URL: 'tiny'"),
    ("model-verify-traversal-name", ["model", "verify", "--name", "../../etc/passwd"], None,
     "Unknown local model '../../etc/passwd'"),
    ("cache-stats-with-a-file", ["cache", "stats", "{tmp}/text.txt"], _inputs, "kgqa cache stats takes no files"),
    ("reproduce-index-out-of-range", ["reproduce", "--index", "5"], None, "--index 5 is out of range"),
    ("reproduce-index-negative", ["reproduce", "--index", "-1"], None, "--index: expects a number ≥ 0, got -1"),
    ("bench-list-unknown-table", ["bench", "list", "nosuchtable"], None, "unknown benchmark table 'nosuchtable'"),
    ("bench-run-unknown-cell", ["bench", "run", "pgakv_t2", "--cells", "nosuchcell"], None,
     "pgakv_t2 has no cell 'nosuchcell'"),
    ("bench-run-two-tables-one-unknown", ["bench", "run", "pgakv_t2", "keqing_t2"], None,
     "unknown benchmark table 'keqing_t2'"),
    ("bench-report-traversal-name", ["bench", "report", "../../etc/passwd"], None,
     "unknown benchmark table '../../etc/passwd'"),
    ("bench-run-traversal-cell", ["bench", "run", "pgakv_t2", "--cells", "../../x"], None,
     "pgakv_t2 has no cell '../../x'"),
    ("bench-check-unknown-table", ["bench", "report", "--check", "nosuch"], None, "unknown benchmark table 'nosuch'"),
    ("bench-measurement-cells", ["bench", "run", "embed", "--cells", "x"], None, "embed is a measurement table"),
    # KG URLs: checked before any question is asked
    ("kg-bad-scheme", _kg("sparql+htp:/x#profile=tiny"), None, "needs an http(s) endpoint with a host"),
    ("kg-timeout-not-a-number", _kg("sparql+http://127.0.0.1:9/q#profile=tiny&timeout=abc"), None, "timeout='abc'"),
    ("kg-workers-zero", _kg("sparql+http://127.0.0.1:9/q#profile=tiny&workers=0"), None,
     "workers='0' in 'sparql+http://127.0.0.1:9/q#profile=tiny&workers=0' expects a whole number ≥ 1"),
    ("kg-negative-fanout-and-timeout", _kg("sparql+http://127.0.0.1:9/q#profile=tiny&fanout=-1&timeout=-5"), None,
     "expects"),
    ("kg-workers-negative", _kg("sparql+http://127.0.0.1:9/q#profile=tiny&workers=-1"), None, "workers='-1'"),
    ("kg-bad-ipv6", _kg("sparql+http://[::1/x#profile=tiny"), None, "is not a URL (Invalid IPv6 URL)"),
    # cache merge
    ("merge-a-text-file", _merge("{tmp}/text.txt"), _caches, "text.txt (file is not a database)"),
    ("merge-a-foreign-sqlite", _merge("{tmp}/foreign.sqlite"), _caches, "foreign.sqlite is not an LLM cache"),
    ("merge-wrong-columns", _merge("{tmp}/wrongcols.sqlite"), _caches, "wrongcols.sqlite is not an LLM cache of this project"),
    ("merge-request-not-json", _merge("{tmp}/badrequest.sqlite"), _caches,
     "badrequest.sqlite holds no entry that can be trusted"),
    ("merge-null-fields", _merge("{tmp}/nullmodel.sqlite"), _caches, "nullmodel.sqlite holds no entry that can be trusted"),
    ("merge-a-binary-jsonl", _merge("{tmp}/bin.jsonl"), _caches, "bin.jsonl holds no entry that can be trusted"),
    ("merge-a-folder", _merge("{tmp}/adir"), _caches, "no cache file"),
    ("merge-into-a-folder", _merge("{tmp}/foreign.sqlite", into="{tmp}/adir"), _caches, "is a folder"),
    ("merge-transcripts-a-file", _merge("{tmp}/good.sqlite", transcripts="{tmp}/text.txt"), _caches,
     "text.txt' is not a folder"),
    ("merge-a-truncated-cache", _merge("{tmp}/half.db"), _caches, "half.db (database disk image is malformed)"),
    ("merge-into-a-text-file", ["cache", "merge", "--into", "{tmp}/mynotes.txt", "--transcripts", "{tmp}/mc/tr"], _caches,
     "mynotes.txt' is not an SQLite file"),
    # the Dask driver
    ("distributed-zero-shards", [*DIST_RUN, "--shards", "0", "--", "--method", "io", "--dataset", "tiny:films"], None,
     "shards must be ≥ 1, got 0"),
    ("distributed-zero-workers", [*DIST_RUN, "--shards", "2", "--workers", "0", "--", "--method", "io", "--dataset",
                                  "tiny:films", "--llm", "openai:fake"], None, "workers must be ≥ 1, got 0"),
    ("distributed-per-shard-without-root", [*DIST_RUN, "--shards", "2", "--cache", "per-shard", "--", "--method", "io",
                                            "--dataset", "tiny:films"], None, "needs cache_root"),
    ("distributed-without-kgqa-arguments", [*DIST_RUN, "--shards", "2"], None, "no kgqa run arguments"),
    # parameters no notebook declares
    ("reproduce-set-undeclared", ["reproduce", "--only", "00_quick", "--set", "NOSUCHPARAM=1", "--out", "{tmp}/rp"], None,
     "no selected notebook declares NOSUCHPARAM"),
    ("reproduce-grid-typo", ["reproduce", "--only", "00_quick", "--grid", "N_QUESTINS=4,50", "--out", "{tmp}/rp"], None,
     "no selected notebook declares N_QUESTINS"),
    # a run file written by another run, reached through a symlink
    ("run-out-a-symlink-to-a-running-run", [*RUN, "--limit", "1", "--out", "{tmp}/link.jsonl"], _written_by_another_run,
     "is being written by another run"),
]


def _content(p):
    """A file's bytes; a SQLite database's rows (a checkpoint of its write-ahead log on close rewrites
    the file's bytes without changing a row)."""
    if p.suffix != ".sqlite":
        return p.read_bytes()
    import sqlite3

    con = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
    try:
        return "\n".join(con.iterdump())
    finally:
        con.close()


def _tree(root):
    """Every file under ``root`` (SQLite's transient -wal/-shm journals aside), with its content."""
    return {p.relative_to(root).as_posix(): _content(p) for p in sorted(root.rglob("*"))
            if p.is_file() and not p.name.endswith(("-wal", "-shm", "-journal"))}


def _transcripts():
    return {p.name: p.stat().st_size for p in (data_dir() / "llm_cache").glob("*.jsonl")}


HANG_S = 120  # seconds a bad input may take before the test calls it a hang


class _Hang(BaseException):
    """Raised in the main thread of a command past :data:`HANG_S`: not an ``Exception``, so a command's
    own ``except Exception`` (a runner recording a question's error and going on to the next) cannot
    swallow it."""


def _main(argv, hang_s=HANG_S):
    """``kgqa ARGV`` (or ``python -m kgqa_lib.distributed ARGV[1:]``) in this process; a command still
    running after ``hang_s`` fails the test (a hang) instead of holding the suite: SIGALRM raises
    :class:`_Hang` and again every 5 s (a wait in a ``finally`` is broken too), and a command that still
    does not return within 60 s more ends the test process with every thread's stack
    (``faulthandler``)."""
    import faulthandler
    import signal
    import sys

    def hang(signum, frame):
        raise _Hang(f"{' '.join(argv)} still running after {hang_s} s")

    old = signal.signal(signal.SIGALRM, hang)
    signal.setitimer(signal.ITIMER_REAL, hang_s, 5)
    faulthandler.dump_traceback_later(hang_s + 60, exit=True, file=sys.__stderr__)
    try:
        if argv[:1] == [DIST]:
            from kgqa_lib import distributed

            return distributed.main(argv[1:])
        return cli.main(argv)
    except _Hang as exc:
        raise AssertionError(str(exc)) from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        faulthandler.cancel_dump_traceback_later()
        signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize("name,argv,setup,says", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(name, argv, setup, says, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KGQA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("KGQA_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setenv("KGQA_TABLES_DIR", str(tmp_path / "tables"))
    monkeypatch.setenv("KGQA_FIGURES_DIR", str(tmp_path / "figures"))
    monkeypatch.setenv("KGQA_LLM_MODE", "replay")
    if setup is not None:
        setup(tmp_path, monkeypatch) if setup.__code__.co_argcount == 2 else setup(tmp_path)
    capsys.readouterr()
    before, transcripts = _tree(tmp_path), _transcripts()
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]

    code = _main(argv)

    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2, f"exit {code}, stderr: {err}"
    assert len(lines) == 1, f"not one line: {err!r}"
    assert lines[0].startswith("error: ") and "Traceback" not in err, err
    assert says in lines[0], f"{says!r} not in {lines[0]!r}"
    assert _tree(tmp_path) == before, "the failed command wrote or changed a file"
    assert _transcripts() == transcripts


def _fake_endpoint(tmp, monkeypatch):
    monkeypatch.setenv("KGQA_LLM_BASE_URL", "http://127.0.0.1:9/v1")  # never called: replay


def _no_endpoint(tmp, monkeypatch):
    for var in ("KGQA_LLM_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)


_OUT = ["--quiet", "--limit", "3", "--out", "{tmp}/results/x.jsonl"]
# The command was right, the infrastructure was not: one line, exit 3, and no record of an answer
OUTAGES = [
    ("kg-closed-port", ["run", "--method", "qsm", "--dataset", "tiny:films", "--llm-mode", "replay", "--kg",
                        "sparql+http://127.0.0.1:9/sparql#profile=tiny", *_OUT], None,
     "SPARQL endpoint http://127.0.0.1:9/sparql unreachable"),
    ("replay-miss", ["run", "--method", "io", "--dataset", "tiny:films", "--llm", "openai:never-recorded", "--llm-mode",
                     "replay", *_OUT], _fake_endpoint, "no recorded response of openai:never-recorded"),
    ("replay-miss-default-url", ["run", "--method", "io", "--dataset", "tiny:films", "--llm", "openai:gpt-4o-mini",
                                 "--llm-mode", "replay", *_OUT], _no_endpoint, "no recorded response of openai:gpt-4o-mini"),
]


def _env(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for var, sub in (("KGQA_CACHE_DIR", "cache"), ("KGQA_RESULTS_DIR", "results"), ("KGQA_TABLES_DIR", "tables"),
                     ("KGQA_FIGURES_DIR", "figures")):
        monkeypatch.setenv(var, str(tmp_path / sub))
    monkeypatch.setenv("KGQA_LLM_MODE", "replay")


@pytest.mark.parametrize("name,argv,setup,says", OUTAGES, ids=[c[0] for c in OUTAGES])
def test_an_outage_is_one_line_exit_3_and_records_no_answer(name, argv, setup, says, tmp_path, monkeypatch, capsys):
    _env(tmp_path, monkeypatch)
    if setup is not None:
        setup(tmp_path, monkeypatch)
    transcripts = _transcripts()

    code = cli.main([a.replace("{tmp}", str(tmp_path)) for a in argv])

    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 3, f"exit {code}, stderr: {err}"
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    assert says in lines[0] and "not answered" in lines[0], lines[0]
    out = tmp_path / "results" / "x.jsonl"
    assert not out.exists() or not out.read_text().strip(), "an outage was recorded as an answer"
    assert _transcripts() == transcripts


class _FillsUp:
    """A run file on a disk that fills up: the first ``room`` lines are written, the next is cut
    half-way by ENOSPC (as a full disk leaves it)."""

    def __init__(self, fh, path, state):
        self._fh, self._path, self._state = fh, path, state

    def write(self, text):
        if self._state["room"] <= 0:
            self._fh.write(text[: len(text) // 2])
            self._fh.flush()
            import errno

            raise OSError(errno.ENOSPC, "No space left on device", str(self._path))
        self._state["room"] -= 1
        return self._fh.write(text)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._fh.close()

    def __getattr__(self, name):
        return getattr(self._fh, name)


def test_a_full_disk_under_the_run_file_is_one_line_exit_3_and_loses_no_answer(tmp_path, monkeypatch, capsys):
    import builtins
    import json
    from pathlib import Path

    from kgqa_lib.evaluate import runner

    _env(tmp_path, monkeypatch)
    out = tmp_path / "out" / "run.jsonl"
    state = {"room": 1}

    def open_(path, mode="r", *args, **kwargs):
        fh = builtins.open(path, mode, *args, **kwargs)
        return _FillsUp(fh, path, state) if Path(path) == out and "a" in mode else fh

    monkeypatch.setattr(runner, "open", open_, raising=False)
    argv = [*RUN, "--limit", "3", "--out", str(out)]
    assert cli.main(argv) == 3
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    assert "No space left on device" in lines[0] and str(out) in lines[0] and "free space" in lines[0], lines[0]
    assert len(runner.read_records(out)) == 1  # the answer cut by the full disk is not counted as written

    monkeypatch.setattr(runner, "open", builtins.open, raising=False)  # space freed: the same command resumes
    assert cli.main(argv) == 0
    recs = []
    for line in out.read_text().splitlines():
        try:
            recs.append(json.loads(line))
        except ValueError:  # the line the full disk cut: skipped, as a resume skips it
            pass
    assert len(recs) == 3 and len({r["qid"] for r in recs}) == 3, "an answer was lost or written twice"


def test_the_table_has_the_twenty_kinds_of_the_issue():
    assert len(CASES) >= 20 and len({c[0] for c in CASES}) == len(CASES)


def test_a_truncated_measurement_json_is_one_line_and_breaks_no_other_table(tmp_path, monkeypatch, capsys):
    """The one measurement's commands name the file and the fix in one line (``bench report`` and
    its ``--check`` exit 1, as for any report that does not regenerate); the listing of every other
    table goes on (exit 0)."""
    _env(tmp_path, monkeypatch)
    _truncated_measurement(tmp_path, monkeypatch)
    before = _tree(tmp_path)
    for argv, expected in ((["bench", "report", "--check", "embed"], 1), (["bench", "report", "embed"], 1),
                           (["bench", "list", "embed"], 0), (["bench", "list"], 0)):
        code = cli.main(argv)
        out, err = capsys.readouterr()
        said = [line for line in (out + err).splitlines() if "error:" in line]
        assert code == expected, (argv, code, out, err)
        assert "Traceback" not in out + err and len(said) == 1, (argv, said)
        assert "embed.json is not a valid JSON file" in said[0] and "kgqa bench run embed" in said[0], said
    assert "\npgakv_t2: " in "\n" + out and "\nhostile_queries: " in out  # the other tables still listed
    assert _tree(tmp_path) == before


#: The inputs the 2026-11-28 reliability probe tried (its table 2.2, B1–B102 less its 9 controls, and 5 of
#: its section 2.1) → the case here that tries each again: an id of CASES (exit 2), of OUTAGES (exit 3), or
#: a test of its own.
BAD_INPUTS = {
    "B1": "unknown-method", "B2": "metaqa-unknown-hops", "B3": "unknown-dataset", "B4": "miniworld-unknown-part",
    "B5": "dataset-extra-part", "B6": "missing-jsonl", "B7": "empty-jsonl", "B8": "binary-jsonl",
    "B9": "limit-negative", "B10": "sample-negative", "B11": "workers-zero", "B12": "kg-closed-port",
    "B13": "kg-bad-scheme", "B14": "unknown-set-key", "B15": "cache-dir-is-a-file", "B16": "no-api-key",
    "B17": "report-missing-file", "B18": "report-a-dataset-file", "B19": "notebooks-check-missing",
    "B20": "reproduce-only-nomatch", "B21": "grid-without-values", "B22": "run-out-under-a-file",
    "B23": "shard-out-of-range", "B24": "shard-negative", "B25": "shard-of-zero", "B26": "shard-without-slash",
    "B27": "shard-not-numbers", "B29": "shard-float-count", "B30": "bench-list-unknown-table",
    "B31": "bench-run-unknown-cell", "B32": "bench-run-two-tables-one-unknown", "B33": "bench-report-traversal-name",
    "B34": "bench-run-traversal-cell", "B35": "merge-a-text-file", "B36": "merge-a-foreign-sqlite",
    "B37": "merge-wrong-columns", "B38": "merge-request-not-json", "B39": "merge-null-fields",
    "B40": "merge-a-binary-jsonl", "B41": "merge-a-folder", "B42": "merge-into-a-folder",
    "B43": "cache-stats-with-a-file", "B44": "report-binary-file", "B45": "report-not-gzip",
    "B46": "report-unknown-metric", "B47": "report-out-under-a-file", "B48": "run-out-a-folder",
    "B49": "dataset-qid-a-list", "B50": "dataset-qid-an-object", "B51": "dataset-answers-not-strings",
    "B52": "dataset-unknown-kind", "B53": "dataset-topic-entities-a-string", "B54": "dataset-with-bom",
    "B55": "kg-timeout-not-a-number", "B56": "kg-workers-zero", "B57": "kg-negative-fanout-and-timeout",
    "B58": "llm-rate-zero", "B59": "llm-unknown-option", "B60": "sqlite-journal-unknown",
    "B62": "reproduce-index-out-of-range", "B63": "reproduce-index-negative", "B64": "workshop-out-a-file",
    "B65": "model-verify-traversal-name", "B66": "slices-build-not-sparql", "B67": "set-max-tokens-negative",
    "B68": "set-samples-zero", "B69": "set-threshold-nan", "B70": "distributed-zero-shards",
    "B71": "distributed-zero-workers", "B72": "distributed-per-shard-without-root", "B74": "seed-not-a-number",
    "B76": "replay-miss", "B77": "set-kg-not-a-setting", "B79": "reproduce-set-undeclared",
    "B81": "kg-workers-negative", "B82": "kg-bad-ipv6",
    "B84": "llm-rate-infinite", "B86": "merge-transcripts-a-file", "B87": "bench-check-unknown-table",
    "B88": "fusic-unknown-task", "B89": "metaqa-unknown-split", "B90": "data-dir-is-a-file",
    "B91": "report-run-missing-fields", "B92": "notebooks-check-a-jsonl", "B93": "dataset-is-a-folder",
    "B95": "distributed-without-kgqa-arguments", "B96": "shard-into-another-config",
    "B98": "bench-measurement-cells", "B100": "replay-miss-default-url", "B101": "set-timeout-infinite",
    "B102": "set-max-rows-negative",
    "P-R9": "reproduce-grid-typo", "P-C3": "merge-a-truncated-cache", "P-C4": "merge-into-a-text-file",
    "P-R4": "run-out-a-symlink-to-a-running-run",
    "P-BJ": "test_a_truncated_measurement_json_is_one_line_and_breaks_no_other_table",
}
#: Inputs of that probe accepted by design, and why.
ACCEPTED = {
    "B75": "`kgqa doctor` is a checklist: it prints every check and exits 1 naming the ones to fix, an unusable "
           "--kg among them",
    "B83": "`openai:` with no model name is the endpoint's default model ($KGQA_LLM_MODEL, else gpt-4o-mini)",
}
#: The probe's controls (inputs that should work): not bad inputs.
CONTROLS = {"B28", "B61", "B73", "B78", "B80", "B85", "B94", "B97", "B99"}


def test_every_bad_input_of_the_probe_is_tried_or_accepted_by_design():
    tried = set(BAD_INPUTS) | set(ACCEPTED)
    expected = {f"B{i}" for i in range(1, 103)} - CONTROLS | {"P-R9", "P-C3", "P-C4", "P-R4", "P-BJ"}
    assert not set(BAD_INPUTS) & set(ACCEPTED)
    assert tried == expected and len(tried) == 98, sorted(tried ^ expected)
    assert set(ACCEPTED) == {"B75", "B83"} and all(ACCEPTED.values())
    ids = {c[0] for c in CASES} | {c[0] for c in OUTAGES}
    unknown = {k: v for k, v in BAD_INPUTS.items() if v not in ids and not callable(globals().get(v))}
    assert not unknown, unknown
    assert len(set(BAD_INPUTS.values())) == len(BAD_INPUTS), "two inputs name one case"


def test_a_local_base_url_needs_no_key_openai_s_own_does(monkeypatch):
    from kgqa_lib.errors import SetupError
    from kgqa_lib.llm.chat import check_llm

    for var in ("OPENAI_API_KEY", "KGQA_LLM_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    check_llm("openai:m", "replay")  # replay needs no key
    with pytest.raises(SetupError, match="set OPENAI_API_KEY"):
        check_llm("openai:m", "auto")
    monkeypatch.setenv("KGQA_LLM_BASE_URL", "https://api.openai.com/v1/")
    with pytest.raises(SetupError, match="set OPENAI_API_KEY"):
        check_llm("openai:m", "live")
    monkeypatch.setenv("KGQA_LLM_BASE_URL", "http://127.0.0.1:8000/v1")
    check_llm("openai:m", "auto")


def test_help_settings_lists_every_field_and_exits_0(capsys):
    from kgqa_lib.methods import method_names, method_settings

    for method in method_names():
        assert cli.main(["run", "--method", method, "--help-settings"]) == 0
        out = capsys.readouterr().out
        for name, type_, default, help_ in method_settings(method).describe():
            assert help_, f"{method}.{name} has no help"
            line = next(line for line in out.splitlines() if line.split()[:1] == [name])
            assert type_ in line and repr(default) in line and help_ in line


def test_reproduce_grid_and_set_values_are_python_literals():
    parser = cli.build_parser()
    args = parser.parse_args(["reproduce", "--grid", "N=4,50", "--grid", "LLM=local,openai:m", "--set", "X=None",
                              "--set", "Y=a=b"])
    assert cli._parse_grid(args.grid) == {"N": [4, 50], "LLM": ["local", "openai:m"]}
    assert cli._parse_set(args.set) == {"X": None, "Y": "a=b"}


def test_a_hang_the_command_would_swallow_still_fails_the_test(monkeypatch):
    """The hang guard of the table above: a command that takes every ``Exception`` for a question's error
    and waits again (as a run whose every question blocks would) is still stopped and fails."""
    import threading
    import time

    def stuck(argv):
        while True:
            try:
                threading.Event().wait()
            except Exception:  # noqa: BLE001 (what a runner does with a question's error)
                pass

    monkeypatch.setattr(cli, "main", stuck)
    t = time.monotonic()
    with pytest.raises(AssertionError, match="run --method io still running after 1 s"):
        _main(["run", "--method", "io"], hang_s=1)
    assert time.monotonic() - t < 10
