"""`kgqa bench`: every committed benchmark report is what its committed records (or, for the speed
benchmarks, its committed JSON of measurements) give, byte for byte, without the external data; the tables' commands are what made their records; completeness counts
questions, not config hashes; `run` saves the stripped records and the report batch by batch."""

from __future__ import annotations

import gzip
import json
import subprocess
from pathlib import Path

import pytest

from kgqa_lib import bench
from kgqa_lib.bench import core
from kgqa_lib.bench import keqing as bench_keqing
from kgqa_lib.paths import repo_root


@pytest.fixture(autouse=True)
def _repo_results(monkeypatch):
    monkeypatch.delenv("KGQA_RESULTS_DIR", raising=False)  # the committed results/


def test_every_committed_report_regenerates_byte_identically_without_the_data(monkeypatch):
    monkeypatch.delenv("KGQA_DATA_DIR", raising=False)

    def no_kb(*_):
        raise AssertionError("a report needed the MetaQA KB: its stored ceiling does not match its records")

    monkeypatch.setattr(bench_keqing, "compute_ceiling", no_kb)
    checked = []
    for t in bench.tables():
        if not t.output_path.exists() and not any(t.saved(c).exists() for c in t.cells):
            continue  # a declared table nothing was run for yet
        assert bench.check(t) is None, bench.check(t)
        checked.append(t.name)
    for m in bench.MEASUREMENTS.values():  # the speed benchmarks: each report from its committed JSON
        if m.data_path.exists() or m.output_path.exists():
            assert bench.measure.check(m) is None, bench.measure.check(m)
            checked.append(m.name)
    assert {"pgakv_t2", "pgakv_test", "keqing_metaqa", "embed", "foundation", "scaleout", "distributed", "hostile_queries",
            "hostile_parsers", "fusic_path_depth", "fusic_table1"} <= set(checked)


def test_the_stored_ceiling_is_what_the_kb_gives(data_dir_or_skip, tmp_cache):
    if not (data_dir_or_skip / "metaqa").is_dir():
        pytest.skip("MetaQA not under KGQA_DATA_DIR")
    assert bench_keqing.check_ceiling() == []


def test_saved_records_belong_to_declared_cells():
    """Every saved record file is a cell of its table, or the side file of a cell's re-run under way (`kgqa
    bench run --again`), in a folder of a model the project can name (a stray file would be neither reported
    nor run); a table's folder holds only model folders and its extra files."""
    cells, extra = {}, {}
    for t in bench.tables():
        cells.setdefault(t.records_root, set()).update(f"{c.name}.jsonl.gz" for c in t.cells)
        cells[t.records_root].update(t.again_file(c).name for c in t.cells)
        extra.setdefault(t.records_root, set()).update(t.extra_files)
        assert len({c.name for c in t.cells}) == len(t.cells), t.name
    for folder in (repo_root() / "results" / "bench" / "runs").iterdir():
        assert folder in cells, f"{folder.name}: no benchmark table keeps its records there"
        for p in folder.iterdir():
            if p.is_dir():  # one model's records
                stray = {x.name for x in p.iterdir()} - cells[folder]
                assert not stray, f"{folder.name}/{p.name}: {sorted(stray)} belong to no cell"
            else:
                assert p.name in extra[folder], f"{folder.name}: {p.name} is neither a model folder nor an extra file"
    assert all(t.records_dir.parent == t.records_root for t in bench.tables())


def test_the_recorded_commands_made_the_records():
    """Each cell's `--set` arguments, parsed as `kgqa run` parses them, are the settings its records hold
    (tables whose records an older commit made say so in their provenance, and are not compared). The side
    file of a re-run under way (`--again`) is not the cell's records; it is today's command's, so it is
    compared whatever the provenance."""
    from kgqa_lib.cli import build_parser
    from kgqa_lib.evaluate.runner import read_records
    from kgqa_lib.methods import coerce_settings

    compared = 0
    for t in bench.tables():
        for c in t.cells:
            side = read_records(t.again_file(c))
            recs = side + ([] if t.provenance else core.Records(t)(c.name))
            if not recs:
                continue
            args = build_parser().parse_args(["run", *c.argv("x.jsonl")])
            assert (args.method, args.dataset) == (c.method, c.dataset)
            want = json.loads(json.dumps(coerce_settings(dict(args.set), c.method)))
            for r in recs:
                got = {k: v for k, v in r["config"]["settings"].items() if k != "kg"}
                assert got == want, (t.name, c.name)
                assert r["config"]["dataset"] == c.dataset and r["method"] == c.method
            compared += not t.provenance
    assert compared >= 21


def test_planned_sizes_of_our_own_sets():
    from kgqa_lib.data.datasets import load_dataset

    for c in bench.get_table("pgakv_t2").cells:
        assert c.planned == len(load_dataset(c.dataset)), c.name


def test_completeness_counts_questions_not_config_hashes():
    """keqing_metaqa's records were made at an older commit (another config hash than today's
    command would give): they are complete, and there is nothing to run."""
    t = bench.get_table("keqing_metaqa")
    assert t.provenance
    assert all(core.cell_status(t, c)["complete"] for c in t.cells)
    assert bench.estimate(t) == []


def _fake_table(tmp_path, monkeypatch, planned=5):
    monkeypatch.setenv("KGQA_RESULTS_DIR", str(tmp_path / "results"))
    table = core.Table(name="fake_t", title="fake", cells=(core.Cell("fake_a", "io", "tiny:films", planned, ("--llm-mode", "replay")),),
                       report=lambda rs: f"n={len(rs('fake_a'))}\n", output="fake.md",
                       strip=lambda r: {k: r[k] for k in ("qid", "llm", "seconds", "metrics")})
    return table


def _rec(i):
    return {"qid": f"q{i}", "question": "secret text", "llm": {"calls": 2}, "seconds": 3.0, "metrics": {"hits@1": 1.0}}


def test_estimate_uses_the_records_own_costs(tmp_path, monkeypatch):
    t = _fake_table(tmp_path, monkeypatch)
    runs = tmp_path / "results" / "runs"
    runs.mkdir(parents=True)
    (runs / "fake_a.jsonl").write_text("".join(json.dumps(_rec(i)) + "\n" for i in range(2)))
    assert bench.save(t, runs) == {"fake_a.jsonl": 2}
    (runs / "fake_a.jsonl").unlink()
    [row] = bench.estimate(t)
    assert row["missing"] == 3 and row["llm_calls"] == 6 and row["hours"] == pytest.approx(9 / 3600)
    assert "3 questions missing, ≈ 6 LLM calls" in bench.format_estimate([row])
    saved = [json.loads(x) for x in gzip.decompress(t.saved(t.cells[0]).read_bytes()).decode().splitlines()]
    assert all("question" not in r for r in saved)  # stripped


def test_estimate_counts_cache_hits_at_their_recorded_time_and_prefers_peers_on_the_same_dataset(tmp_path, monkeypatch):
    """A cell resumed on cache hits ran in 0.1 s/q but costs its recorded 10 s/q on a fresh cache; a cell
    with no records is estimated from the cells of its method on its own dataset when there are any."""
    monkeypatch.setenv("KGQA_RESULTS_DIR", str(tmp_path / "results"))
    cells = (core.Cell("a_hit", "io", "d1", 4), core.Cell("b_other", "io", "d2", 4),
             core.Cell("c_new", "io", "d1", 4), core.Cell("d_lone", "io", "d3", 4))
    t = core.Table(name="fake_e", title="fake", cells=cells, report=lambda rs: "", output="fake_e.md")
    runs = tmp_path / "results" / "runs"
    runs.mkdir(parents=True)

    def rec(i, secs, llm_secs, recorded):
        return {"qid": f"q{i}", "seconds": secs, "llm": {"calls": 1, "seconds": llm_secs, "recorded_seconds": recorded}}

    (runs / "a_hit.jsonl").write_text("".join(json.dumps(rec(i, 0.1, 0.0, 10.0)) + "\n" for i in range(2)))
    (runs / "b_other.jsonl").write_text("".join(json.dumps(rec(i, 100.0, 99.0, 99.0)) + "\n" for i in range(2)))
    rows = {r["cell"]: r for r in bench.estimate(t, runs)}
    assert rows["a_hit"]["hours"] == pytest.approx(2 * 10.1 / 3600)  # not 2 × 0.1 s
    assert rows["c_new"]["basis"] == "mean of a_hit" and rows["c_new"]["hours"] == pytest.approx(4 * 10.1 / 3600)
    assert rows["d_lone"]["basis"] == "mean of a_hit, b_other"  # no peer on d3: every cell of the method
    assert "without cache hits" in bench.format_estimate(list(rows.values()))
    assert not any(r["optional"] for r in rows.values()) and "optional" not in bench.format_estimate(list(rows.values()))


def test_estimate_takes_a_configurations_calls_from_its_cells_on_other_datasets(tmp_path, monkeypatch):
    """A configuration's call count travels across datasets (a no-retrieval baseline makes 1 call, not a
    retriever pipeline's 4): a new cell takes the calls/q of its ``config``'s cells elsewhere, at the
    seconds per call of its method's cells on its own dataset (else at the config cells' own seconds)."""
    monkeypatch.setenv("KGQA_RESULTS_DIR", str(tmp_path / "results"))
    cells = (core.Cell("d1.naive", "m", "d1", 4, config="naive"), core.Cell("d2.full", "m", "d2", 4, config="full"),
             core.Cell("d2.naive", "m", "d2", 4, config="naive"), core.Cell("d3.naive", "m", "d3", 4, config="naive"),
             core.Cell("d2.other", "m", "d2", 4))
    t = core.Table(name="fake_c", title="fake", cells=cells, report=lambda rs: "", output="fake_c.md")
    runs = tmp_path / "results" / "runs"
    runs.mkdir(parents=True)

    def rec(i, calls, secs):
        return {"qid": f"q{i}", "seconds": secs, "llm": {"calls": calls}}

    (runs / "d1.naive.jsonl").write_text("".join(json.dumps(rec(i, 1, 2.0)) + "\n" for i in range(4)))
    (runs / "d2.full.jsonl").write_text("".join(json.dumps(rec(i, 4, 40.0)) + "\n" for i in range(2)))
    rows = {r["cell"]: r for r in bench.estimate(t, runs)}
    assert rows["d2.naive"]["llm_calls"] == pytest.approx(4) and rows["d2.naive"]["hours"] == pytest.approx(4 * 10.0 / 3600)
    assert rows["d2.naive"]["basis"] == "calls/q of d1.naive × s/call of d2.full"
    assert rows["d3.naive"]["basis"] == "mean of d1.naive" and rows["d3.naive"]["hours"] == pytest.approx(4 * 2.0 / 3600)
    assert rows["d2.other"]["basis"] == "mean of d2.full"  # no config: its method's cells on its dataset
    assert rows["d2.full"]["basis"] == "d2.full" and "d1.naive" not in rows
    assert "(per-question costs: calls/q of d1.naive × s/call of d2.full)" in bench.format_estimate(list(rows.values()))


def test_optional_cells_are_listed_and_estimated_apart(tmp_path, monkeypatch):
    """A deviation beyond what a table needs (``Cell.optional``) is marked in `kgqa bench list` and its
    questions and hours are split from those the table needs."""
    monkeypatch.setenv("KGQA_RESULTS_DIR", str(tmp_path / "results"))
    cells = (core.Cell("need", "io", "d1", 4), core.Cell("extra", "io", "d1", 2, optional="a deviation of ours"))
    t = core.Table(name="fake_o", title="fake", cells=cells, report=lambda rs: "", output="fake_o.md")
    runs = tmp_path / "results" / "runs"
    runs.mkdir(parents=True)
    (runs / "need.jsonl").write_text(json.dumps({"qid": "q0", "seconds": 36.0, "llm": {"calls": 1}}) + "\n")
    text = bench.format_estimate(bench.estimate(t, runs))
    assert "extra: 2 questions missing" in text and text.splitlines()[1].endswith("(optional)")
    assert text.splitlines()[-1] == ("  of which the cells the table needs: 3 questions, ≈ 0.0 h; the 1 optional cells "
                                     "(deviations beyond what the table needs): 2 questions, ≈ 0.0 h")
    listing = "\n".join(core.status_table(t, runs))
    assert "0/2 cells complete, 0/6 questions (cells the table needs: 0/1 complete)" in listing  # saved ones count
    assert "1 more answered in results/runs/, not saved yet" in listing
    assert "optional: a deviation of ours" in listing.splitlines()[-1]


def test_run_resumes_and_saves_every_batch(tmp_path, monkeypatch):
    t = _fake_table(tmp_path, monkeypatch)
    runs = tmp_path / "results" / "runs"
    runs.mkdir(parents=True)
    (runs / "fake_a.jsonl").write_text(json.dumps(_rec(0)) + "\n")
    bench.save(t, runs)
    (runs / "fake_a.jsonl").unlink()  # a fresh machine: only the saved records
    seen = []

    class FakeRun:  # `kgqa run` appending the missing questions, two per poll
        def __init__(self, argv, env=None):
            self.out = argv[argv.index("--out") + 1]
            assert argv[argv.index("--dataset") + 1] == "tiny:films" and "--llm-mode" in argv
            seen.append(sum(1 for _ in open(self.out)))  # restored before the run started
            self.next = seen[0]

        def wait(self, timeout=None):
            if self.next >= 5:
                return 0
            with open(self.out, "a") as fh:
                for i in range(self.next, min(5, self.next + 2)):
                    fh.write(json.dumps(_rec(i)) + "\n")
            self.next += 2
            raise subprocess.TimeoutExpired("kgqa", timeout)

    monkeypatch.setattr(core.subprocess, "Popen", FakeRun)
    saves = []
    real_save = core.save
    monkeypatch.setattr(core, "save", lambda *a, **k: saves.append(1) or real_save(*a, **k))
    assert bench.run(t, runs, batch=2, poll=0, echo=lambda _: None) == 0
    assert seen == [1] and len(saves) >= 2
    assert t.output_path.read_text() == "n=5\n" and bench.check(t) is None
    assert bench.estimate(t) == []


def test_run_with_procs_runs_cells_at_once_with_fewer_threads_each(tmp_path, monkeypatch):
    """--procs 2: two cells' `kgqa run` at once, each told to use half the cores (KGQA_LLM_THREADS); each
    cell's records saved to its own file; after a failing cell no new cell starts, the running one finishes."""
    monkeypatch.setenv("KGQA_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setattr("kgqa_lib.llm.chat.default_threads", lambda: 4)
    names = ("fake_a", "fake_b", "fake_c", "fake_d", "fake_e")
    t = core.Table(name="fake_p", title="fake", cells=tuple(core.Cell(n, "io", "tiny:films", 4, ("--llm-mode", "replay"))
                                                           for n in names),
                   report=lambda rs: "".join(f"{n}={len(rs(n))}\n" for n in names), output="fake_p.md",
                   strip=lambda r: {k: r[k] for k in ("qid", "llm", "seconds", "metrics")})
    runs = tmp_path / "results" / "runs"
    runs.mkdir(parents=True)
    started, running, most = [], set(), [0]

    class FakeRun:  # appends one question per poll; fake_c fails after its first question
        def __init__(self, argv, env=None):
            self.out = Path(argv[argv.index("--out") + 1])
            self.name, self.n = self.out.stem, 0
            assert env is not None and env["KGQA_LLM_THREADS"] == "2"
            started.append(self.name)
            running.add(self.name)
            most[0] = max(most[0], len(running))

        def wait(self, timeout=None):
            if self.name == "fake_c" and self.n == 1:
                running.discard(self.name)
                return 3
            if self.n >= 4:
                running.discard(self.name)
                return 0
            with open(self.out, "a") as fh:
                fh.write(json.dumps(_rec(self.n)) + "\n")
            self.n += 1
            raise subprocess.TimeoutExpired("kgqa", timeout)

    monkeypatch.setattr(core.subprocess, "Popen", FakeRun)
    assert bench.run(t, runs, batch=2, poll=0, echo=lambda _: None, procs=2) == 3
    # a and b together; then c and d; c fails, so e never starts while d runs to its end
    assert most[0] == 2 and started == ["fake_a", "fake_b", "fake_c", "fake_d"]
    saved = {n: len(gzip.decompress(t.saved(c).read_bytes()).decode().splitlines())
             for n, c in zip(names, t.cells) if t.saved(c).exists()}
    assert saved == {"fake_a": 4, "fake_b": 4, "fake_c": 1, "fake_d": 4}
    assert t.output_path.read_text() == "fake_a=4\nfake_b=4\nfake_c=1\nfake_d=4\nfake_e=0\n"


def test_cli_bench_list_report_check_and_run_estimate(capsys):
    from kgqa_lib.cli import main

    assert main(["bench", "list", "pgakv_t2"]) == 0
    out = capsys.readouterr().out
    assert "21/21 cells complete" in out and "t2_simple.io" in out
    assert main(["bench", "report", "--check", "pgakv_t2", "keqing_metaqa"]) == 0
    assert main(["bench", "run", "pgakv_t2"]) == 0
    assert "nothing to run" in capsys.readouterr().out
    assert main(["bench", "run", "no_such_table"]) == 2
    assert capsys.readouterr().err.startswith("error: unknown benchmark table 'no_such_table'")


def test_cli_bench_run_cells_picks_cells_and_names_a_typo(capsys, tmp_path, monkeypatch):
    from kgqa_lib.cli import main

    monkeypatch.setenv("KGQA_RESULTS_DIR", str(tmp_path / "results"))  # no records: every cell is still to run
    assert main(["bench", "run", "fusic", "--cells", "metaqa2.fs_dense", "gtech.fs_naive"]) == 0
    out = capsys.readouterr().out
    estimated = [ln.split(":")[0].strip() for ln in out.splitlines() if ln.startswith("  ")]  # one line per cell
    assert estimated == ["metaqa2.fs_dense", "gtech.fs_naive"]  # (a cost may still be the mean of another cell's)
    assert "--cells metaqa2.fs_dense gtech.fs_naive --yes" in out
    assert main(["bench", "run", "fusic", "--cells", "metaqa1.fs_dnse"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: fusic has no cell 'metaqa1.fs_dnse' (did you mean 'metaqa1.fs_dense'?)")


def test_restored_records_are_not_stripped_twice(tmp_path, monkeypatch):
    """A resumed run on a fresh machine restores the stripped records into the live file; saving
    again must keep what only the full record could give (a strip function is not idempotent)."""
    monkeypatch.setenv("KGQA_RESULTS_DIR", str(tmp_path / "results"))
    strip = lambda r: {"qid": r["qid"], "words": len(r["question"].split()), "stripped": True}  # noqa: E731
    t = core.Table(name="fake_s", title="fake", cells=(core.Cell("fake_s", "io", "tiny:films", 2),),
                   report=lambda rs: "", output="fake_s.md", strip=strip)
    runs = tmp_path / "results" / "runs"
    runs.mkdir(parents=True)
    (runs / "fake_s.jsonl").write_text(json.dumps(_rec(0)) + "\n")
    bench.save(t, runs)
    (runs / "fake_s.jsonl").unlink()
    bench.restore(t, runs)
    with open(runs / "fake_s.jsonl", "a") as fh:
        fh.write(json.dumps(_rec(1)) + "\n")  # the resumed run's next question
    bench.save(t, runs)
    assert [r["words"] for r in core.Records(t)("fake_s")] == [2, 2]


def test_printed_commands_are_shell_quoted():
    cell = core.Cell("x", "fusic", "fusic:mw-wd>metaqa:test-1hop", 1, ("--set", "task=mw-wd>metaqa"))
    assert "--dataset 'fusic:mw-wd>metaqa:test-1hop'" in cell.command() and "'task=mw-wd>metaqa'" in cell.command()


def test_keqing_report_reads_the_diagnostics_of_new_records_like_the_trace_stage_of_old_ones(tmp_path):
    """The decomposition check left the method (issue 19 §4): a record now carries it under
    ``diagnostics``; the stripped copy keeps its predicted path and flags (not the gold path), and the
    report counts it as it counted the old ``decomposition_check`` stage."""
    from kgqa_lib.bench import keqing as BK

    base = {"qid": "q", "kind": "factoid", "metrics": {"hits@1": 1.0}, "error": None, "seconds": 1.0,
            "llm": {"calls": 1}, "question": "which films did [Someone] direct", "prediction": ["A Film"]}
    old = {**base, "trace": [{"name": "decomposition_check", "output": {"predicted_chain": ["^directed_by"],
                                                                       "gold_chain": ["directed_by"], "correct": False}},
                             {"name": "decompose", "output": {"error": None, "text": "…"}}]}
    new = {**base, "trace": [{"name": "decompose", "output": {"error": None, "text": "…"}}],
           "diagnostics": {"decomposition": {"predicted_chain": ["^directed_by"], "gold_chain": ["directed_by"],
                                             "chain_correct": False, "seed_named": True, "seed_correct": True,
                                             "correct": False}}}
    s_old, s_new = BK.strip(old), BK.strip(new)
    assert "question" not in s_new and s_new["diagnostics"] == {"decomposition": {
        "predicted_chain": ["^directed_by"], "chain_correct": False, "seed_named": True, "seed_correct": True,
        "correct": False}}
    assert s_old["trace"][0]["output"] == {"predicted_chain": ["^directed_by"], "correct": False}
    assert BK._chain_right(BK._decomposition(s_old)) is BK._chain_right(BK._decomposition(s_new)) is False


def test_keqing_report_names_why_the_four_stages_lose_a_question(tmp_path, monkeypatch):
    """keqing_full's disagreement section: a question right with decomposition only and wrong with the
    four stages is attributed from the stripped records (decomposition, earlier selection, last selection);
    the gold paths of the losses come from the data (here a stand-in), kept as a tally beside the records."""
    def rec(qid, hit, pred=("r1",), sel=None):
        return {"qid": qid, "metrics": {"hits@1": hit}, "diagnostics": {"decomposition": {"predicted_chain": list(pred)}},
                "selection": sel or {}}

    base = [rec(f"q{i}", 1.0) for i in range(5)] + [rec("q5", 0.0)]
    full = [rec("q0", 1.0), rec("q1", 0.0, pred=("r2",)),
            rec("q2", 0.0, sel={"gold_in_candidates": 0}), rec("q3", 0.0, sel={"gold_in_candidates": 2, "gold_selected": 0}),
            rec("q4", 0.0, sel={"gold_in_candidates": 2, "gold_selected": 1}), rec("q5", 1.0)]
    causes = [bench_keqing.lost_cause(f, b) for f, b in zip(full[1:5], base[1:5])]
    assert causes == ["decomposition differs", "an earlier selection dropped the path", "the last selection left gold out",
                      "gold selected, not first"]

    class Dec:  # the decomposition-only records, as Records gives them
        def __call__(self, name):
            return base if name == "keqing_metaqa_2hop" else []

    monkeypatch.setattr(bench_keqing, "gold_chains_of", lambda hops: {f"q{i}": ("r1",) for i in range(6)})
    [row] = [line for line in bench_keqing._disagreements({2: full}, Dec(), tmp_path) if line.startswith("| 2 ")]
    assert row.startswith("| 2 | 6 | 4 | 1 |") and row.endswith("| r1 4 |")
    monkeypatch.setattr(bench_keqing, "gold_chains_of", lambda hops: None)  # without the data: the kept tally
    assert [line for line in bench_keqing._disagreements({2: full}, Dec(), tmp_path) if line.startswith("| 2 ")] == [row]
    [row] = [line for line in bench_keqing._disagreements({2: full[:3]}, Dec(), tmp_path) if line.startswith("| 2 ")]
    assert row.endswith(f"| {bench_keqing.NEEDS_DATA} |")


def test_keqing_parts_cells_and_their_rows_beside_the_default():
    """The dense supplement, candidates as text and the released code: 100 per hop in keqing_ablations, each a
    `--set` of one setting (the default's arguments otherwise); their report section pairs each with the
    keqing_full records of the same questions, reads `not run yet` without records, and the stripped
    records keep the supplement's counts."""
    t = bench.get_table("keqing_ablations")
    default = {c.name: c for c in bench.get_table("keqing_full").cells}
    for prefix, setting, _ in bench_keqing.PARTS:
        for h in bench_keqing.HOPS:
            c = t.cell(f"{prefix}_{h}hop")
            assert c.planned == 100 and c.args == ("--sample", "100", "--llm", "local", "--set", setting, "--no-transcripts")
            assert default[f"keqing_full_{h}hop"].args == ("--sample", "200", "--llm", "local", "--no-transcripts")

    def rec(qid, hit, reasoning, calls=3):
        return {"qid": qid, "metrics": {"hits@1": hit, "f1": hit}, "reasoning": reasoning, "llm": {"calls": calls},
                "seconds": 1.0}

    base = [rec("a", 0.0, []), rec("b", 1.0, []), rec("c", 1.0, [])]
    dense = [rec("a", 1.0, [{"mode": "select", "n_candidates": 11, "n_answers": 1, "dense": 10, "dense_selected": 1,
                             "calls": 1}]),
             rec("b", 1.0, [{"mode": "select", "n_candidates": 3, "n_answers": 2, "dense": 2, "dense_selected": 0,
                             "calls": 1}])]
    released = [rec("a", 1.0, [{"mode": "released", "calls": 4, "over_bound": True}], calls=5)]
    cells = {"keqing_dense_1hop": dense, "keqing_released_2hop": released}
    fulls = {"keqing_full_1hop": base, "keqing_full_2hop": base}
    lines = bench_keqing._parts(lambda name: cells.get(name, []), lambda name: fulls.get(name, []))
    rows = {(r.split(" | ")[0].lstrip("| "), r.split(" | ")[1]): r for r in lines if r.startswith("| ") and "hops" not in r}
    assert len(rows) == 9 and sum("not run yet" in r for r in rows.values()) == 7
    d = rows[("1", "dense supplement, 10 triples (sec. 3.2)")]
    assert d.startswith("| 1 | dense supplement, 10 triples (sec. 3.2) | 2 | 0.500 | 1.000 | +50.0 [")
    assert "6.0 supplement candidates in 2 sub-questions; 1 of their 3 answers from it; 1 of 2 questions answered with one" in d
    r = rows[("2", "as released by its authors (1-hop facts, no response)")]
    assert "| 1 | 0.000 | 1.000 |" in r and "4.00 reasoning calls/q; sub-questions with a seed over the bound: 1" in r
    assert bench_keqing.supplement_stats(base) == "no sub-question got a supplement"
    # the released code's row: a seed to check, no template chain
    dec = {"diagnostics": {"decomposition": {"predicted_chain": [], "gold_chain": ["r"], "chain_correct": False,
                                             "seed_correct": True}}}
    llm = {"calls": 5, "prompt_tokens": 50, "completion_tokens": 5, "recorded_seconds": 1.0, "cache_hits": 0}
    cells = bench_keqing._ablation_cells("released", [dict(released[0], **dec, stages={"calls": {"reasoning": 4}},
                                                           llm=llm, prediction=["x"])], [], chains=False)
    t = bench_keqing.table("ablations", "", bench_keqing.ABLATION_COLUMNS, [cells])  # the report's rows are a table's
    assert t.frame().loc["released", "chain right / seed right"] == "— / 1.00 (n=1)"
    assert "| — / 1.00 (n=1) |" in bench_keqing._md(t).splitlines()[2]
    # strip_full keeps the supplement's counts, and adds nothing to a record without them
    trace = [{"name": "execute_plan", "output": [[{"reasoning": {"mode": "select", "n_candidates": 3, "dense": 2,
                                                                 "dense_selected": 1}}], None]}]
    stripped = bench_keqing.strip_full({"qid": "a", "metrics": {}, "llm": {"calls": 1}, "trace": trace})
    assert stripped["reasoning"][0]["dense"] == 2 and stripped["reasoning"][0]["dense_selected"] == 1
    del trace[0]["output"][0][0]["reasoning"]["dense"], trace[0]["output"][0][0]["reasoning"]["dense_selected"]
    assert "dense" not in bench_keqing.strip_full({"qid": "a", "metrics": {}, "llm": {"calls": 1}, "trace": trace})["reasoning"][0]


# ---------------------------------------------------------------- the model as an axis of every table
def test_model_keys_and_the_llm_swap():
    assert core.model_key("local") == core.default_key() == "qwen2.5-coder-1.5b-instruct-q4_k_m"
    assert core.model_key("local:qwen2.5-0.5b") == "qwen2.5-0.5b-instruct-q4"
    assert core.model_key("openai:m@http://127.0.0.1:8000/v1") == "openai_m_http___127.0.0.1_8000_v1"
    assert core.swap_llm("local?prefix_cache=8", "local:qwen2.5-0.5b") == "local:qwen2.5-0.5b?prefix_cache=8"
    assert core.swap_llm("local?prefix_cache=8", "openai:m@http://h:1/v1") == "openai:m@http://h:1/v1"
    assert core.swap_llm("local?prefix_cache=8", "local:qwen2.5-0.5b?threads=1") == "local:qwen2.5-0.5b?threads=1"
    cell = core.Cell("x", "io", "tiny:films", 3, ("--llm", "local", "--no-transcripts"))
    argv = cell.argv("o.jsonl", "local:qwen2.5-0.5b", workers=4)
    assert argv[argv.index("--llm") + 1] == "local:qwen2.5-0.5b" and argv[argv.index("--workers") + 1] == "4"
    assert cell.argv("o.jsonl") == ["--method", "io", "--dataset", "tiny:films", "--llm", "local", "--no-transcripts",
                                    "--out", "o.jsonl"]
    from kgqa_lib.errors import UsageError

    for bad in ("nonsense", "local:nonsense", "openai:m@ftp://h"):
        with pytest.raises(UsageError):
            core.model_key(bad)


def _model_table(tmp_path, monkeypatch):
    monkeypatch.setenv("KGQA_RESULTS_DIR", str(tmp_path / "results"))
    cells = (core.Cell("m_a", "io", "tiny:films", 3, ("--llm", "local")), core.Cell("m_b", "io", "tiny:films", 3, ("--llm", "local")))
    return core.Table(name="fake_m", title="fake", cells=cells, report=lambda rs: f"n={len(rs('m_a'))}\n",
                      output="fake_m.md")


def _write(folder, cell, hits):
    folder.mkdir(parents=True, exist_ok=True)
    with gzip.open(folder / f"{cell}.jsonl.gz", "wt", encoding="utf-8") as fh:
        for i, h in enumerate(hits):
            fh.write(json.dumps({"qid": f"q{i}", "metrics": {"hits@1": h}, "seconds": 2.0, "engine": "test engine",
                                "llm": {"calls": 1, "prompt_tokens": 10, "completion_tokens": 5, "seconds": 1.0,
                                        "recorded_seconds": 1.0, "cache_hits": 0}}) + "\n")


def test_records_per_model_and_the_models_section(tmp_path, monkeypatch):
    """Each model's records live in their own folder; the report's main body reads the default model's,
    and a models section (only when another model has records) shows every model per cell with the
    paired difference on the questions both answered."""
    t = _model_table(tmp_path, monkeypatch)
    _write(t.model_dir(), "m_a", [1, 1, 0])
    only_default = core.render(t)
    assert only_default == "n=3\n" and t.models() == [core.default_key()]
    small = core.model_key("local:qwen2.5-0.5b")
    _write(t.model_dir(small), "m_a", [0, 1])
    assert t.models() == [core.default_key(), small]
    text = core.render(t)
    assert text.startswith("n=3\n") and "## Models" in text and "test engine" in text
    row = next(line for line in text.splitlines() if line.startswith("| m_a |"))
    assert "66.7" in row and "50.0" in row and "-50.0" in row and "(n=2)" in row  # paired on q0, q1: (0-1 + 1-1)/2
    assert "| m_b |" not in text  # no other model ran it
    assert core.cell_status(t, t.cells[0], model=small)["present"] == 2
    listing = "\n".join(core.status_table(t))
    assert f"model {small}: 0/2 cells complete, 2/6 questions" in listing


def test_the_models_section_counts_the_same_answers_where_predictions_are_kept(tmp_path, monkeypatch):
    """How many answers differ between two models, or one model served by two engines: the prediction as a
    set of normalised answers, on the questions both kept it for; records without predictions say so."""
    t = _model_table(tmp_path, monkeypatch)
    _write(t.model_dir(), "m_a", [1, 1, 0])
    other = "model-x@llama-server"

    def rec(i, pred, stripped=True):
        return {"qid": f"q{i}", "prediction": pred, "stripped": stripped}

    base = [rec(0, ["Paris", "Rome"]), rec(1, ["Oslo"]), rec(2, ["(answered)"])]
    assert core.same_answers([rec(0, [" rome", "paris"]), rec(1, ["Bergen"]), rec(2, ["x"]), rec(3, ["y"])],
                             base) == (1, 2)  # q2's default record keeps no prediction, q3 only one side answered
    assert core.same_answers([rec(2, ["x"])], base) is None
    assert core.same_answers([rec(0, [])], [rec(0, [])]) == (1, 1)  # both returned nothing: the same answer
    t.model_dir(other).mkdir(parents=True)
    llm = {"calls": 1, "prompt_tokens": 10, "completion_tokens": 5, "seconds": 1.0, "recorded_seconds": 1.0,
           "cache_hits": 0}
    with gzip.open(t.model_dir(other) / "m_a.jsonl.gz", "wt", encoding="utf-8") as fh:
        fh.writelines(json.dumps({**r, "metrics": {"hits@1": 1.0}, "seconds": 1.0, "llm": llm}) + "\n" for r in base)
    row = next(r for r in core.models_rows(t, [other]) if r["cell"] == "m_a")
    assert row[f"{other}: same answer as {core.default_key()}"] == "— (predictions not kept)"  # the default's: none
    with gzip.open(t.model_dir() / "m_a.jsonl.gz", "wt", encoding="utf-8") as fh:  # now the default's keep theirs
        fh.writelines(json.dumps({**rec(i, p), "metrics": {"hits@1": 1.0}, "seconds": 1.0, "llm": llm}) + "\n"
                      for i, p in enumerate([["paris", "ROME"], ["Bergen"], ["z"]]))
    row = next(r for r in core.models_rows(t, [other]) if r["cell"] == "m_a")
    assert row[f"{other}: same answer as {core.default_key()}"] == "1 of 2"  # q0 the same, q1 not; q2 not kept
    assert "| 1 of 2 |" in core.render(t)
    assert row[f"{other}: errors"] == "none"
    assert core.error_counts([{"error": "b"}, {"error": "a"}, {"error": "b"}, {"error": None}, {"error": "c"},
                              {"error": "d"}]) == "b 2, a 1, c 1, other 1"
    assert core.error_counts([]) == "—"


def test_estimate_for_another_model_uses_the_default_models_calls_and_tokens(tmp_path, monkeypatch):
    t = _model_table(tmp_path, monkeypatch)
    _write(t.model_dir(), "m_a", [1, 1, 1])
    small = core.model_key("local:qwen2.5-0.5b")
    rows = core.estimate(t, model=small)
    a = next(r for r in rows if r["cell"] == "m_a")
    assert a["missing"] == 3 and a["llm_calls"] == 3 and a["tokens"] == 45 and a["at_default_rate"]
    text = core.format_estimate(rows)
    assert "depends on its speed" in text and "M tokens" in text


def test_bench_run_with_another_model_estimates_and_refuses_unknown_models(tmp_path, monkeypatch, capsys):
    from kgqa_lib.cli import main

    before = sorted(p for p in (repo_root() / "results").rglob("*"))
    for table in ("keqing_full", "pgakv_test"):  # whether the 0.5B's records are complete or not
        assert main(["bench", "run", table, "--llm", "local:qwen2.5-0.5b"]) == 0
        out = capsys.readouterr().out
        assert out.startswith(f"{table} with qwen2.5-0.5b-instruct-q4: ")
        k = core.completeness(bench.get_table(table), runs=core.runs_dir(), model="qwen2.5-0.5b-instruct-q4")  # as the CLI
        if k["complete"] == k["cells"]:
            assert "nothing to run: every cell has its planned questions" in out
            continue
        assert "nothing was run" in out and f"--llm local:qwen2.5-0.5b" in out
        if any(r["present"] == 0 for r in k["rows"]):  # costs from the 1.5B's records of the same cells
            assert "LLM calls" in out and "depends on its speed" in out
    assert sorted(p for p in (repo_root() / "results").rglob("*")) == before  # an estimate writes nothing
    assert main(["bench", "run", "keqing_full", "--llm", "nonsense"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1


def test_models_frame_shows_a_model_without_records_as_not_run(tmp_path, monkeypatch):
    t = _model_table(tmp_path, monkeypatch)
    monkeypatch.setitem(core.TABLES, t.name, t)
    _write(t.model_dir(), "m_a", [1, 1, 0])
    small = core.model_key("local:qwen2.5-0.5b")
    frame = core.models_frame([t.name], models=["local:qwen2.5-0.5b"], short=False)
    assert list(frame["cell"]) == ["(every cell)"] and list(frame[small]) == ["not run"]
    _write(t.model_dir(small), "m_a", [0, 1])
    frame = core.models_frame([t.name], models=["local:qwen2.5-0.5b"], short=False)
    # a cell still running shows how far it is, never a score beside a complete cell's on other questions
    assert list(frame["cell"]) == ["m_a"] and frame[small][0] == "partial 2/3"
    assert frame[f"{small} − {core.default_key()} (paired)"][0].startswith("-50.0")  # paired: the same questions
    assert core.models_coverage(t, [small]) == [f"- {small}: 0 of {len(t.cells)} cells complete, 1 partial; not run yet: "
                                                + ", ".join(f"`{c.name}`" for c in t.cells if c.name != "m_a") + "."]
    _write(t.model_dir(small), "m_a", [0, 1, 1])
    frame = core.models_frame([t.name], models=["local:qwen2.5-0.5b"], short=False)
    assert frame[small][0].startswith("66.7") and frame[f"{small} − {core.default_key()} (paired)"][0].startswith("+0.0")
    assert f"{small}: errors" not in frame.columns  # the answers' columns only when asked
    assert core.models_frame([t.name]).shape[0] == 1 and core.models_frame([t.name], only=True).empty  # (no models named)
    wide = core.models_frame([t.name], models=["local:qwen2.5-0.5b"], answers=True, short=False)
    assert wide[f"{small}: errors"][0] == "none" and f"{small}: same answer as {core.default_key()}" in wide.columns
    shown = core.models_frame([t.name], models=["local:qwen2.5-0.5b"])  # notebooks: the models' short names
    assert shown["qwen2.5-0.5b"][0].startswith("66.7") and "qwen2.5-0.5b − qwen2.5-coder-1.5b (paired)" in shown.columns


def test_cell_names_are_unique_across_tables():
    """Live run files of every table share one folder per model (results/runs/[<model>/]<cell>.jsonl)."""
    from collections import Counter

    names = Counter(c.name for t in bench.tables() for c in t.cells)
    assert not [n for n, k in names.items() if k > 1]


def test_the_papers_effects_per_model(tmp_path, monkeypatch):
    """A table's effects (a − b, paired) are checked for every model: holds when the CI lies on the paper's side
    of 0, reversed on the other, unclear across 0, not run without both cells; the models section shows them."""
    t = _model_table(tmp_path, monkeypatch)
    t = core.Table(**{**t.__dict__, "effects": (core.Effect("a above b", "paper, Table 9: 2 vs 1", ("fake_m", "m_a"),
                                                            ("fake_m", "m_b")),), "report": lambda rs: "# fake\n\nbody\n"})
    monkeypatch.setitem(core.TABLES, "fake_m", t)
    d, small = core.default_key(), core.model_key("local:qwen2.5-0.5b")
    _write(t.model_dir(), "m_a", [1] * 20)
    _write(t.model_dir(), "m_b", [0] * 20)  # a − b = +100 for the default model: holds
    _write(t.model_dir(small), "m_a", [0] * 20)
    _write(t.model_dir(small), "m_b", [1] * 20)  # −100 for the small one: reversed
    [row] = core.effects_rows(t, [d, small])
    assert row[d] == "+100.0 [+100.0, +100.0] (n=20): holds" and row[small].endswith("(n=20): reversed")
    assert row["across"] == f"flips (holds: {d}; reversed: {small})"
    assert row[f"{small} − {d}"] == "-200.0 [-200.0, -200.0] (n=20)"  # how much the model changes the effect
    _write(t.model_dir(small), "m_b", [0, 1] * 10)
    _write(t.model_dir(small), "m_a", [1, 0] * 10)  # a − b alternates +1/−1: the CI spans 0
    assert core.effects_rows(t, [d, small])[0][small].endswith(": unclear")
    flipped = core.Table(**{**t.__dict__, "effects": (core.Effect("b above a", "p", ("fake_m", "m_a"), ("fake_m", "m_b"),
                                                                  sign=-1),)})
    assert core.effects_rows(flipped, [d])[0][d].endswith(": reversed")
    assert core.effects_rows(t, [d, "other-model"])[0]["other-model"] == "not run"
    assert core.effects_rows(t, [d, "other-model"])[0]["across"] == f"holds ({d} only)"
    text = core.render(t)
    assert text.splitlines()[2].startswith(f"Model: `{d}` (served by: ") and f"`{small}` (section *Models*)" in text
    assert "### The papers' effects at each model" in text and "| a above b | paper, Table 9: 2 vs 1 | m_a − m_b |" in text
    assert core.effect_verdict(None, 1) == "not run"
    frame = core.effects_frame(["fake_m"], models=["local:qwen2.5-0.5b"], brief=True)
    assert len(frame) == 1 and "paper" not in frame.columns and frame["across"][0].endswith("unclear: qwen2.5-0.5b")
    assert "qwen2.5-0.5b" in frame.columns and small not in " ".join(map(str, frame.to_numpy().ravel()))
    keys = core.effects_frame(["fake_m"], models=["local:qwen2.5-0.5b"], brief=True, short=False)
    assert keys["across"][0].endswith(f"unclear: {small}") and small in keys.columns
    _write(t.model_dir(small), "m_b", [1, 0] * 10)  # the same score on every question: no difference
    assert core.effects_rows(t, [d, small])[0][small] == "+0.0 [+0.0, +0.0] (n=20): no difference"
    _write(t.model_dir(small), "m_b", [0, 1] * 10)
    twice = core.Table(**{**t.__dict__, "name": "fake_m2"})  # an effect two tables declare is shown once
    monkeypatch.setitem(core.TABLES, "fake_m2", twice)
    assert len(core.effects_frame(["fake_m", "fake_m2"])) == 1
    _write(t.model_dir(small), "m_a", [1, 0])  # 2 of the 3 planned questions: a cell still running
    row = core.effects_rows(t, [d, small])[0]
    assert row[small].endswith("(partial 2/3: not counted across models yet)") and row["across"] == f"holds ({d} only)"


def test_every_effect_names_registered_cells():
    for t in core.tables():
        for e in t.effects:
            for table, cell in (e.a, e.b):
                assert core.get_table(table).cell(cell).name == cell, (t.name, e.claim)
            assert e.sign in (1, -1) and e.paper
