"""`kgqa bench queue FILE [--yes]`: the `kgqa bench run` lines of a file, one after the other. Every line is
checked before any runs (a refused line names itself, nothing is run); without --yes only the estimates; a
line that fails does not stop the ones after it; a stop ends the queue and the same command resumes it."""

from __future__ import annotations

import pytest

from kgqa_lib.bench import core
from kgqa_lib.cli import main
from test_bench_again import _read, _table, fake_run  # noqa: F401  (fake_run: a fixture)


def _queue(tmp_path, text):
    path = tmp_path / "queue.txt"
    path.write_text(text)
    return str(path)


def test_lines_run_in_order_after_the_estimates_and_a_rerun_resumes(tmp_path, monkeypatch, capsys, fake_run):
    t = _table(tmp_path, monkeypatch)
    q = _queue(tmp_path, f"# the cells of the fake table\n\nkgqa bench run {t.name} --cells fake_c\n"
                         f"{t.name} --again   # the complete cells whose records lack predictions: fake_a\n")
    before = sorted((tmp_path / "results").rglob("*"))
    assert main(["bench", "queue", q]) == 0
    out = capsys.readouterr().out
    assert "fake_c" in out and "fake_a: re-run: 5 questions (its records lack predictions)" in out
    assert f"nothing was run: add --yes to run these 2 line(s) in order (`kgqa bench queue {q} --yes`)" in out
    assert fake_run.started == [] and sorted((tmp_path / "results").rglob("*")) == before

    assert main(["bench", "queue", q, "--yes"]) == 0
    out = capsys.readouterr().out
    runs = tmp_path / "results" / "runs"
    # line 2 re-runs every complete cell whose records lack predictions: fake_a, and fake_c (2 of its 5 records
    # were saved by older code) now that line 1 completed it
    assert [o for o, _ in fake_run.started] == [str(runs / f) for f in ("fake_c.jsonl", "fake_a.again.jsonl",
                                                                        "fake_c.again.jsonl")]
    assert f"[1/2] kgqa bench run {t.name} --cells fake_c --yes" in out
    assert "queue done: 2 of 2 line(s) ended well" in out
    assert len(_read(t.saved(t.cell("fake_c")))) == 5
    assert all(r["prediction"] != ["(answered)"] for r in _read(t.saved(t.cell("fake_a"))))  # replaced
    fake_run.started.clear()
    assert main(["bench", "queue", q, "--yes"]) == 0  # again: everything is complete, nothing runs (an --again
    # line without --cells re-runs only records that lack predictions; with --cells it would re-run those cells)
    assert fake_run.started == []


def test_a_stop_ends_the_queue_and_a_failing_line_does_not(tmp_path, monkeypatch, capsys, fake_run):
    t = _table(tmp_path, monkeypatch)
    q = _queue(tmp_path, f"{t.name} --cells fake_c\n{t.name} --again\n")
    fake_run.stop_at = 3  # killed with the first line's cell at 3 of 5
    assert main(["bench", "queue", q, "--yes"]) == 128 + 15
    out = capsys.readouterr().out
    assert f"queue stopped at line 1; `kgqa bench queue {q} --yes` resumes it" in out
    assert [o for o, _ in fake_run.started] == [str(tmp_path / "results" / "runs" / "fake_c.jsonl")]

    calls = []
    real = main

    def failing_first(argv):  # the first line's run ends with an error; the second still runs
        calls.append(argv)
        return 1 if argv[-3:] == ["--cells", "fake_c", "--yes"] else real(argv)

    monkeypatch.setattr("kgqa_lib.cli.main", failing_first)
    from kgqa_lib import cli

    fake_run.stop_at = None
    assert cli.cmd_bench_queue(cli.build_parser().parse_args(["bench", "queue", q, "--yes"])) == 1
    out = capsys.readouterr().out
    assert "line 1 ended with exit code 1; the queue goes on" in out
    assert "queue done: 1 of 2 line(s) ended well; failed: line 1 (exit 1)" in out
    assert all(r["prediction"] != ["(answered)"] for r in _read(t.saved(t.cell("fake_a"))))


@pytest.mark.parametrize("text, said", [
    ("no_such_table\n", "queue.txt:1: unknown benchmark table 'no_such_table'"),
    ("# ok\nrerun_t --cells fake_zz\n", "queue.txt:2: "),
    ("rerun_t --yes\n", "queue.txt:1: leave --yes out of the lines"),
    ("rerun_t --frobnicate 'x\n", "queue.txt:1: No closing quotation"),
    ("rerun_t --cells fake_c\nrerun_t --cells fake_a fake_c --again\n", "queue.txt:2: --again re-runs complete cells only"),
    ("# nothing\n\n", "names no run"),
])
def test_a_refused_line_names_itself_and_nothing_runs(tmp_path, monkeypatch, capsys, fake_run, text, said):
    t = _table(tmp_path, monkeypatch)
    before = {p: p.read_bytes() for p in (tmp_path / "results").rglob("*") if p.is_file()}
    q = _queue(tmp_path, text)
    assert main(["bench", "queue", q, "--yes"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and said in err and len(err.strip().splitlines()) == 1, err
    assert fake_run.started == []
    assert {p: p.read_bytes() for p in (tmp_path / "results").rglob("*") if p.is_file()} == before
    assert t.name == "rerun_t"


def test_an_unreadable_queue_file_is_one_line(tmp_path, capsys):
    assert main(["bench", "queue", str(tmp_path / "missing.txt")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot read the queue file") and len(err.strip().splitlines()) == 1


def test_the_file_is_read_again_before_each_line(tmp_path, monkeypatch, capsys, fake_run):
    """Lines added, removed or moved while the queue runs take effect at the next line; a line runs once per
    time it stands in the file; an added line that `kgqa bench run` refuses is said and left out."""
    t = _table(tmp_path, monkeypatch)
    q = _queue(tmp_path, f"{t.name} --cells fake_c\n{t.name} --cells fake_b\n")
    from kgqa_lib import cli

    real, calls = cli.main, []

    def editing(argv):  # while the first line runs, the file is rewritten: line 2 removed, two lines added
        calls.append(argv)
        if argv[-3:] == ["--cells", "fake_c", "--yes"]:
            _queue(tmp_path, f"{t.name} --cells fake_c\n{t.name} --cells no_such_cell\n{t.name} --again\n")
        return 0 if argv[-1] == "--yes" else real(argv)

    monkeypatch.setattr("kgqa_lib.cli.main", editing)
    assert cli.cmd_bench_queue(cli.build_parser().parse_args(["bench", "queue", q, "--yes"])) == 2
    out = capsys.readouterr().out
    runs = [a[3:-1] for a in calls if a[-1] == "--yes"]
    assert runs == [["--cells", "fake_c"], ["--again"]]  # fake_b was removed before it ran; fake_c ran once
    assert "[1/2] kgqa bench run rerun_t --cells fake_c --yes" in out
    assert "line 2 was added and is refused: " in out and "the queue goes on without it" in out
    assert "[2/2] kgqa bench run rerun_t --again --yes" in out
    assert "queue done: 2 of 3 line(s) ended well; failed: line 2 (exit 2)" in out
