"""A run file damaged by this machine — a line a full disk or a kill cut inside a multi-byte character,
bytes that are not text — does not stop the next run: the damaged lines are skipped like any cut line,
and the same command answers every question not recorded whole, once each. Runs in-process through
``kgqa_lib.cli.main`` on the committed transcripts (``--llm-mode replay``); nothing calls a model."""

from __future__ import annotations

import json

from kgqa_lib import cli
from kgqa_lib.evaluate.runner import read_records

RUN = ["run", "--method", "io", "--dataset", "tiny:films", "--llm-mode", "replay", "--quiet", "--limit", "3"]


def _env(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for var, sub in (("KGQA_CACHE_DIR", "cache"), ("KGQA_RESULTS_DIR", "results"), ("KGQA_TABLES_DIR", "tables"),
                     ("KGQA_FIGURES_DIR", "figures")):
        monkeypatch.setenv(var, str(tmp_path / sub))
    monkeypatch.setenv("KGQA_LLM_MODE", "replay")


def _answers(out):
    recs = []
    for raw in out.read_bytes().splitlines():
        try:
            recs.append(json.loads(raw.decode("utf-8")))
        except ValueError:
            pass
    return recs


def test_a_line_cut_inside_a_multibyte_character_is_skipped_and_its_question_answered(tmp_path, monkeypatch, capsys):
    _env(tmp_path, monkeypatch)
    out = tmp_path / "out" / "run.jsonl"
    assert cli.main([*RUN, "--out", str(out)]) == 0, capsys.readouterr().err
    lines = out.read_bytes().splitlines(keepends=True)
    assert len(lines) == 3
    second = json.loads(lines[1])
    second["response"] = "Amélie " + second["response"]  # a non-ASCII character, written as UTF-8 (two bytes) …
    whole = json.dumps(second, ensure_ascii=False, sort_keys=True).encode("utf-8")
    cut = whole[: whole.index("é".encode("utf-8")) + 1]  # … cut after its first byte, as a full disk leaves it
    out.write_bytes(lines[0] + cut)
    assert [r["qid"] for r in read_records(out)] == [json.loads(lines[0])["qid"]]

    capsys.readouterr()
    assert cli.main([*RUN, "--out", str(out)]) == 0, capsys.readouterr().err
    recs = _answers(out)
    assert len(recs) == 3 and len({r["qid"] for r in recs}) == 3, "a question was lost or answered twice"
    assert len(read_records(out)) == 3


def test_bytes_that_are_not_text_in_a_run_file_do_not_stop_the_run(tmp_path, monkeypatch, capsys):
    _env(tmp_path, monkeypatch)
    out = tmp_path / "out" / "run.jsonl"
    out.parent.mkdir(parents=True)
    out.write_bytes(b"\xff\xfe\x00garbage\x80\n")
    assert cli.main([*RUN, "--out", str(out)]) == 0, capsys.readouterr().err
    assert len(read_records(out)) == 3
