"""Files under results/bench/ are replaced whole, and one damaged measurement JSON does not stop
`kgqa bench list` / `report` for the other tables.

- a write that fails midway (a full disk, simulated: the file's write stores half the text, then
  ENOSPC) leaves the old report / JSON as it was, and no temporary file;
- with results/bench/embed.json cut short, `kgqa bench list` lists every table (embed: one error line
  naming the file and what to do), `kgqa bench report --check embed` says it in one line (exit 1)."""

from __future__ import annotations

import builtins
import errno
import io
import json

import pytest

from kgqa_lib import cli
from kgqa_lib.bench import core, measure
from kgqa_lib.paths import repo_root


@pytest.fixture
def results(tmp_path, monkeypatch):
    monkeypatch.setenv("KGQA_RESULTS_DIR", str(tmp_path / "results"))
    (tmp_path / "results" / "bench").mkdir(parents=True)
    return tmp_path / "results"


def _disk_full_after_half(monkeypatch, folder):
    """Every file opened for writing under ``folder`` takes half of what is written, then fails (ENOSPC)."""
    real = io.open

    def fake_open(file, mode="r", *args, **kwargs):
        fh = real(file, mode, *args, **kwargs)
        if "w" in mode and str(file).startswith(str(folder)):
            write = fh.write

            def half(text):
                write(text[: len(text) // 2])
                fh.flush()
                raise OSError(errno.ENOSPC, "No space left on device")

            fh.write = half
        return fh

    monkeypatch.setattr(io, "open", fake_open)
    monkeypatch.setattr(builtins, "open", fake_open)


def test_a_report_written_onto_a_full_disk_keeps_the_old_one(results, monkeypatch):
    table = core.Table(name="atomic_t", title="atomic", cells=(core.Cell("c", "io", "tiny:films", 1),),
                       report=lambda rs: "new report\n" * 1000, output="atomic_t.md")
    old = "the committed report\n"
    table.output_path.write_text(old)
    with monkeypatch.context() as patched, pytest.raises(OSError):
        _disk_full_after_half(patched, results)
        core.write_report(table)
    assert table.output_path.read_text() == old
    assert [p.name for p in table.output_path.parent.iterdir()] == ["atomic_t.md"]  # no temporary file left


def test_a_measurement_json_written_onto_a_full_disk_keeps_the_old_one(results, monkeypatch):
    m = measure.MEASUREMENTS["embed"]
    old = {"note": "the committed measurements"}
    m.data_path.write_text(json.dumps(old))
    with monkeypatch.context() as patched, pytest.raises(OSError):
        _disk_full_after_half(patched, results)
        measure.write_json(m, {"rows": list(range(5000))})
    assert json.loads(m.data_path.read_text()) == old
    assert [p.name for p in m.data_path.parent.iterdir()] == [m.data_path.name]


def test_a_truncated_measurement_json_breaks_only_its_own_table(results, capsys):
    committed = (repo_root() / "results" / "bench" / "embed.json").read_text(encoding="utf-8")
    (results / "bench" / "embed.json").write_text(committed[:300], encoding="utf-8")

    assert cli.main(["bench", "list"]) == 0
    out = capsys.readouterr().out
    assert "pgakv_t2:" in out and "hostile_queries:" in out  # the other tables, before and after it
    [error] = [line for line in out.splitlines() if "error:" in line]
    assert "embed.json is not a valid JSON file" in error and "kgqa bench run embed" in error

    assert cli.main(["bench", "list", "embed"]) == 0
    assert "embed.json is not a valid JSON file" in capsys.readouterr().out

    assert cli.main(["bench", "report", "--check", "embed"]) == 1
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("embed: error:") and "embed.json" in lines[0]


def test_a_table_named_after_the_options_is_said_so(results, capsys):
    assert cli.main(["bench", "run", "pgakv_t2", "--yes", "pgakv_test"]) == 2
    err = capsys.readouterr().err
    assert "name the tables before the options (`kgqa bench run pgakv_t2 pgakv_test --yes`)" in err
