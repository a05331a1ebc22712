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
     "use 'local', 'local:<model>', 'openai:<model>' or"),
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

    code = cli.main(argv)

    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2, f"exit {code}, stderr: {err}"
    assert len(lines) == 1, f"not one line: {err!r}"
    assert lines[0].startswith("error: ") and "Traceback" not in err, err
    assert says in lines[0], f"{says!r} not in {lines[0]!r}"
    assert _tree(tmp_path) == before, "the failed command wrote or changed a file"
    assert _transcripts() == transcripts


def test_the_table_has_the_twenty_kinds_of_the_issue():
    assert len(CASES) >= 20 and len({c[0] for c in CASES}) == len(CASES)


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
