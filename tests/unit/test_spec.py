"""A run is one value: :class:`kgqa_lib.evaluate.spec.RunSpec` parsed from ``kgqa run``'s arguments and
written back (round trip), every benchmark cell a spec whose configuration is the one its saved
records carry, one context builder for the CLI, the cells, the sharded runs and the notebooks, and
the silent defaults of the old wiring turned into one-line errors."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import pytest

from kgqa_lib import bench, cli
from kgqa_lib.bench import core
from kgqa_lib.errors import UsageError, UserError
from kgqa_lib.evaluate.runner import config_hash, read_records
from kgqa_lib.evaluate.spec import (RunOptions, RunSpec, build_context, context_for, parse_run_argv, plan,
                                    run_parser)
from kgqa_lib.methods import coerce_settings, method_info, method_names

CELLS = [(t.name, c) for t in bench.tables() for c in t.cells]


# ---------------------------------------------------------------- the value and its command line
def test_a_spec_round_trips_through_its_command_line():
    spec = RunSpec.from_argv(["--method", "pgakv", "--dataset", "miniworld:simple", "--kg", "miniworld:freebase",
                              "--set", "threshold=0.5", "--set", "verify=False", "--set", "top_k=3",
                              "--llm", "openai:m@http://127.0.0.1:9/v1?rpm=60", "--llm-mode", "replay",
                              "--llm-timeout", "12.5", "--seed", "7", "--sample", "20", "--limit", "10",
                              "--shard", "1/3", "--workers", "4", "--no-transcripts", "--out", "x.jsonl", "--quiet"])
    assert spec.settings == {"threshold": 0.5, "verify": False, "top_k": 3}  # typed: coerced by pgakv's settings
    assert type(spec.settings["threshold"]) is float and spec.settings["verify"] is False
    assert (spec.kg, spec.seed, spec.sample, spec.limit, spec.shard, spec.workers, spec.llm_timeout) == \
        ("miniworld:freebase", 7, 20, 10, (1, 3), 4, 12.5)
    assert RunSpec.from_argv(spec.to_argv()) == spec and hash(RunSpec.from_argv(spec.to_argv())) == hash(spec)
    again, opts = parse_run_argv(spec.to_argv("o.jsonl", overwrite=True, quiet=True))
    assert again == spec and opts == RunOptions("o.jsonl", True, True)
    with pytest.raises(Exception):  # frozen
        spec.seed = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        spec.settings["top_k"] = 4  # type: ignore[index]


@pytest.mark.parametrize("value", ["none", "'quoted'", "\"'twice'\"", "a,b", "1", "", "True", "x=y"])
def test_a_string_setting_round_trips_whatever_it_looks_like(value):
    """A string value that reads as None, a number or a quoted literal comes back as the same string."""
    spec = RunSpec(method="fusic", dataset="fusic:geo-wd>cinema-fb:test", settings={"retrievers": value})
    assert spec.settings["retrievers"] == coerce_settings({"retrievers": value}, "fusic")["retrievers"]
    assert isinstance(spec.settings["retrievers"], str)
    assert RunSpec.from_argv(spec.to_argv()) == spec


def test_an_int_given_to_a_float_setting_stays_an_int_across_the_round_trip():
    """(Old runs stored ``threshold=1`` as 1: the config hash depends on the type.)"""
    for value in (1, 1.0, 0.5):
        spec = RunSpec(method="pgakv", dataset="tiny:films", settings={"threshold": value})
        back = RunSpec.from_argv(spec.to_argv())
        assert back.settings["threshold"] == value and type(back.settings["threshold"]) is type(value)


def test_the_cli_the_cells_and_the_shards_share_one_run_parser():
    sub = next(a for a in cli.build_parser()._actions if a.dest == "command").choices["run"]

    def options(p):
        return sorted((tuple(a.option_strings), a.help, a.default) for a in p._actions if a.option_strings)

    assert options(sub) == options(run_parser())
    text = " ".join(sub.format_help().split())
    assert "--help-settings" in text and "(default: the dataset's own)" in text


# ---------------------------------------------------------------- benchmark cells
def test_every_registered_cell_is_a_spec_whose_settings_coerce():
    assert len(CELLS) >= 200
    for table, c in CELLS:
        spec = c.spec()
        assert (spec.method, spec.dataset) == (c.method, c.dataset), (table, c.name)
        args = cli.build_parser().parse_args(["run", *c.argv("x.jsonl")])
        assert dict(spec.settings) == coerce_settings(dict(args.set), c.method), (table, c.name)
        assert RunSpec.from_argv(spec.to_argv()) == spec, (table, c.name)
        other = c.spec("local:qwen2.5-0.5b", workers=3)  # the model given when the table is run
        assert other.llm.startswith("local:qwen2.5-0.5b") and other.workers == 3
        assert other.replace(llm=spec.llm, workers=1) == spec, (table, c.name)


def test_a_cell_that_is_no_run_fails_when_its_table_registers():
    def table(*cells):
        return core.Table(name="bad_t", title="bad", cells=cells, report=lambda rs: "", output="bad_t.md")

    for cell, says in ((core.Cell("a", "io", "tiny:films", 3, ("--set", "treshold=0.5")), "unknown setting"),
                       (core.Cell("b", "pgakv", "tiny:films", 3, ("--set", "threshold=high")), "expects float"),
                       (core.Cell("c", "io", "tiny:films", 3, ("--out", "x.jsonl")), "the table's"),
                       (core.Cell("d", "io", "tiny:films", 3, ("--kg", "tiny")), "io reads no KG"),
                       (core.Cell("e", "fusic", "fusic:mw-wd>metaqa:test-1hop", 3, ()), "add --set task=mw-wd>metaqa")):
        with pytest.raises(ValueError, match=says) as err:
            core.register(table(cell))
        assert "bad_t" in str(err.value) and f"cell {cell.name}" in str(err.value)
    assert "bad_t" not in core.TABLES


#: Tables whose saved records (or some cells' records) were made by an earlier version of the code, as their
#: provenance says: their configuration is that version's, so today's spec gives another hash
OLDER_RECORDS = {
    ("keqing_metaqa", "keqing_metaqa_1hop"): "made with `--set respond=False` when the default reasoning was `group`",
    ("keqing_metaqa", "keqing_metaqa_2hop"): "made with `--set respond=False` when the default reasoning was `group`",
    ("keqing_metaqa", "keqing_metaqa_3hop"): "made with `--set respond=False` when the default reasoning was `group`",
    ("keqing_grailqa", "keqing_grailqa_oracle"): "saved before `topics=oracle` existed (the oracle was the default)",
}


def _model_llm(records):
    """The LLM name of a model's records folder: the local model whose id they carry, or that model behind
    llama.cpp's server (its id ends in ``@llama-server``)."""
    model_id = records[0]["model_id"]
    if model_id.endswith("@llama-server"):
        return f"server:{model_id.removesuffix('@llama-server')}"
    return f"local:{model_id}"


def test_each_cell_gives_the_config_and_hash_its_saved_records_carry(data_dir_or_skip, tmp_path, monkeypatch):
    """For every table with saved records, per model: the configuration ``build_context`` + the runner
    would write for the cell (:meth:`RunPlan.config`, the runner's ``run_config``) is the records' own, and so
    is its hash. Cells whose records an earlier version made (the table's provenance) are skipped, named."""
    import functools

    from kgqa_lib.data import datasets

    monkeypatch.setenv("KGQA_CACHE_DIR", str(tmp_path / "cache"))  # a FuSIC task's KG store is built here
    monkeypatch.delenv("KGQA_LLM", raising=False)
    monkeypatch.setattr(datasets, "load_dataset", functools.lru_cache(maxsize=None)(datasets.load_dataset))
    compared, skipped = 0, []
    for t in bench.tables():
        for model in t.models():
            recs_of = core.Records(t, model)
            for c in t.cells:
                recs = recs_of(c.name)
                if not recs:
                    continue
                spec = c.spec(None if model == core.default_key() else _model_llm(recs))
                config = plan(spec).config()
                hashes = {r.get("config_hash") for r in recs}
                if hashes != {config_hash(config)} or any(r["config"] != config for r in recs):
                    assert (t.name, c.name) in OLDER_RECORDS and t.provenance, \
                        (t.name, model, c.name, config, recs[0]["config"])
                    skipped.append((t.name, c.name))
                    continue
                compared += 1
    assert compared >= 150, compared
    assert set(skipped) <= set(OLDER_RECORDS)


# ---------------------------------------------------------------- the one builder
def _env(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for var, sub in (("KGQA_CACHE_DIR", "cache"), ("KGQA_RESULTS_DIR", "results")):
        monkeypatch.setenv(var, str(tmp_path / sub))
    monkeypatch.setenv("KGQA_LLM_MODE", "replay")


def test_the_runner_writes_the_config_the_builder_says(tmp_path, monkeypatch):
    _env(tmp_path, monkeypatch)
    spec = RunSpec(method="io", dataset="tiny:films", limit=2, llm_mode="replay")
    built = build_context(spec)
    assert built.ctx.kg is None and built.ctx.embedder is None and built.plan.transcripts  # our own data
    records = built.run(tmp_path / "io.jsonl", progress=False)
    assert len(records) == 2
    for r in read_records(tmp_path / "io.jsonl"):
        assert r["config"] == built.config() == plan(spec).config()
        assert r["config_hash"] == config_hash(built.config())
    assert cli.main(["run", *spec.to_argv(tmp_path / "cli.jsonl", quiet=True)]) == 0  # `kgqa run`: the same run
    assert {r["config_hash"] for r in read_records(tmp_path / "cli.jsonl")} == {config_hash(built.config())}


def test_a_kg_method_gets_the_dataset_s_kg_and_its_name(tmp_path, monkeypatch):
    _env(tmp_path, monkeypatch)
    built = build_context(RunSpec(method="qsm", dataset="tiny:films", llm_mode="replay"))
    assert built.ctx.kg is not None and built.ctx.embedder is not None and built.ctx.settings == {"kg": "tiny"}
    assert built.config()["settings"] == {"kg": "tiny"}
    tog = build_context(RunSpec(method="tog", dataset="tiny:films", kg="miniworld", llm_mode="replay"))
    assert tog.ctx.settings == {"kg": "miniworld"} and tog.ctx.embedder is None  # tog needs no encoder
    fusic = plan(RunSpec(method="fusic", dataset="miniworld:simple"))
    assert fusic.kg is None and fusic.settings == {}  # FuSIC's KGs are its task's
    lc = plan(RunSpec(method="langchain_sparql", dataset="miniworld:simple", kg="miniworld"))
    assert lc.kg == "miniworld" and lc.settings == {"kg": "miniworld"}


def test_capabilities_are_declared_where_the_methods_register():
    needs = {m: (method_info(m).needs, method_info(m).uses) for m in method_names()}
    assert needs["pgakv"] == needs["qsm"] == needs["keqing"] == needs["kbbinder"] == (("kg", "embedder"), ())
    assert needs["tog"] == (("kg",), ()) and needs["fusic"] == (("embedder",), ())
    assert needs["langchain_sparql"] == ((), ("kg",))
    assert all(needs[m] == ((), ()) for m in ("io", "cot", "sc"))
    assert not hasattr(cli, "KG_METHODS") and not hasattr(cli, "default_kg")


def test_context_for_is_what_notebooks_built_by_hand(tmp_path, monkeypatch):
    """Notebook 31's ``Context(llm=…, kg=load_named("miniworld"), embedder=Embedder(), settings={"kg":
    "miniworld", "K": K}, seed=SEED)`` in one call, from the dataset's name or a loaded dataset."""
    from kgqa_lib.data.datasets import load_dataset
    from kgqa_lib.llm.chat import make_llm

    _env(tmp_path, monkeypatch)
    ctx = context_for("keqing", "keqing:miniworld", llm="local", llm_mode="replay", K=2, seed=3)
    assert ctx.settings == {"K": 2, "kg": "miniworld"} and ctx.seed == 3
    assert ctx.kg is not None and ctx.embedder is not None and ctx.llm.model_id == "qwen2.5-coder-1.5b-instruct-q4_k_m"
    llm = make_llm("local", "replay")
    shared = context_for("pgakv", load_dataset("miniworld:multihop"), llm=llm, settings={"verify": False})
    assert shared.llm is llm and shared.settings == {"verify": False, "kg": "miniworld"}
    assert context_for("io", "tiny:films", llm=llm).kg is None


def test_a_notebook_shares_the_kg_and_encoder_it_loaded_once(tmp_path, monkeypatch):
    """``graph``/``embedder``: objects loaded once serve every run of a notebook; nothing is loaded again, each is
    given only to a method that reads it, and the run's settings and config are those of the built context."""
    from kgqa_lib.data.datasets import load_dataset
    from kgqa_lib.embed import embedder as embed_mod
    from kgqa_lib.kg import sources
    from kgqa_lib.llm.chat import make_llm

    _env(tmp_path, monkeypatch)
    ds, llm = load_dataset("tiny:films"), make_llm("local", "replay")
    graph, encoder = sources.load_named("tiny"), embed_mod.Embedder()
    built = context_for("qsm", ds, llm=llm, seed=2)  # loads its own
    monkeypatch.setattr(embed_mod, "Embedder", lambda *a, **k: pytest.fail("an encoder was made again"))
    shared = {"llm": llm, "graph": graph, "embedder": encoder, "seed": 2}
    fusic = context_for("fusic", "fusic:geo-wd>cinema-fb:test", **shared)  # (its check loads its task's KGs)
    assert fusic.kg is None and fusic.embedder is encoder
    monkeypatch.setattr(sources, "load_named", lambda *a, **k: pytest.fail("the KG was loaded again"))
    qsm = context_for("qsm", ds, **shared)
    assert qsm.kg is graph and qsm.embedder is encoder and qsm.llm is llm
    assert (qsm.settings, qsm.seed) == (built.settings, built.seed) == ({"kg": "tiny"}, 2)
    tog = context_for("tog", ds, kg="tiny", width=2, **shared)
    assert tog.kg is graph and tog.embedder is None and tog.settings == {"kg": "tiny", "width": 2}
    io = context_for("io", ds, **shared)
    assert io.kg is None and io.embedder is None and io.settings == {}
    with pytest.raises(UsageError, match="io reads no KG"):  # a KG's name is still a choice of the run
        context_for("io", ds, kg="tiny", **shared)


# ---------------------------------------------------------------- silent defaults are errors
def _dataset_without_kg(tmp):
    (tmp / "mine.jsonl").write_text('{"qid": "q1", "question": "who directed Inception", '
                                    '"answers": ["Christopher Nolan"]}\n')


def _dataset_on_wikidata(tmp):
    (tmp / "wd.jsonl").write_text('{"qid": "q1", "question": "who directed Inception", '
                                  '"answers": ["Christopher Nolan"]}\n')


RUN = ["--llm-mode", "replay", "--quiet", "--out", "{tmp}/results/x.jsonl"]
ERRORS = [
    ("dataset-names-no-kg", ["--method", "qsm", "--dataset", "{tmp}/mine.jsonl"], _dataset_without_kg,
     "qsm asks its questions against a KG and {tmp}/mine.jsonl names none: give one with --kg"),
    ("keqing-kg-without-pool", ["--method", "keqing", "--dataset", "tiny:films"], None,
     "Keqing has no question pool for the KG 'tiny'"),
    ("keqing-endpoint-of-another-schema", ["--method", "keqing", "--dataset", "keqing:miniworld", "--kg",
                                           "sparql+http://127.0.0.1:9/q#profile=wikidata"], None,
     "Keqing has no question pool for the KG 'wikidata'"),
    ("fusic-default-task-not-the-dataset-s", ["--method", "fusic", "--dataset", "fusic:cinema-fb>geo-wd:test"], None,
     "holds questions of the transfer task cinema-fb>geo-wd, but fusic would run the task geo-wd>cinema-fb (its "
     "default)"),
    ("fusic-task-not-the-dataset-s", ["--method", "fusic", "--dataset", "fusic:mw-wd>metaqa:test-1hop", "--set",
                                      "task=geo-wd>cinema-fb"], None, "add --set task=mw-wd>metaqa"),
    ("kbbinder-task-not-the-dataset-s", ["--method", "kbbinder", "--dataset", "fusic:geo-wd>cinema-fb:test", "--set",
                                         "task=cinema-fb>geo-wd"], None, "add --set task=geo-wd>cinema-fb"),
    ("kbbinder-kg-without-pool", ["--method", "kbbinder", "--dataset", "miniworld:simple", "--kg", "grailqa"], None,
     "kbbinder has no exemplar pool for KG 'grailqa'"),
    ("langchain-without-kg", ["--method", "langchain_sparql", "--dataset", "miniworld:simple"], None,
     "langchain_sparql needs a KG"),
    ("kg-for-a-method-without-kg", ["--method", "io", "--dataset", "tiny:films", "--kg", "tiny"], None,
     "io reads no KG: drop --kg tiny"),
    ("kg-for-fusic", ["--method", "fusic", "--dataset", "fusic:geo-wd>cinema-fb:test", "--kg", "miniworld"], None,
     "its KGs come from its transfer task"),
    ("kg-as-a-setting", ["--method", "pgakv", "--dataset", "tiny:films", "--set", "kg=metaqa"], None,
     "give it with --kg metaqa"),
]


@pytest.mark.parametrize("name,argv,setup,says", ERRORS, ids=[e[0] for e in ERRORS])
def test_a_silent_default_is_now_one_line_exit_2_and_writes_nothing(name, argv, setup, says, tmp_path, monkeypatch,
                                                                     capsys):
    _env(tmp_path, monkeypatch)
    if setup is not None:
        setup(tmp_path)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    code = cli.main(["run", *[a.replace("{tmp}", str(tmp_path)) for a in argv + RUN]])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error: "), err
    assert says.replace("{tmp}", str(tmp_path)) in err[0], err[0]
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before, "the failed command wrote a file"


def test_a_dataset_on_a_kg_without_an_embedded_copy_says_how_to_give_one():
    from kgqa_lib.data.datasets import Dataset, Question
    from kgqa_lib.evaluate.spec import resolve_kg

    ds = Dataset("qald10:tog", [Question("q1", "who?", ["x"])], kg="wikidata")
    with pytest.raises(UsageError, match=r"asked against wikidata, which has no embedded copy: give an endpoint"):
        resolve_kg(RunSpec(method="qsm", dataset="qald10:tog"), ds)
    assert resolve_kg(RunSpec(method="qsm", dataset="qald10:tog", kg="slices:sparql+http://h:1/q#profile=wikidata"),
                      ds).startswith("slices:")


def test_keqing_and_kbbinder_pools_refuse_a_kg_they_have_none_for():
    from kgqa_lib.methods import kbbinder, keqing

    assert [keqing.pool_kg(k) for k in ("metaqa", "grailqa-fragment", "miniworld", "miniworld:freebase")] == \
        ["metaqa", "grailqa-fragment", "miniworld", "miniworld"]
    for bad in ("tiny", "wikidata", "grailqa"):
        with pytest.raises(UserError, match="no question pool"):
            keqing.pool_for(bad)
    assert kbbinder.own_pool("tiny") == "tiny" and kbbinder.own_pool("miniworld:freebase") == "miniworld"
    with pytest.raises(UserError, match="no exemplar pool"):
        kbbinder.own_pool("freebase")


# ---------------------------------------------------------------- sharded runs
def test_sharded_runs_are_the_spec_with_each_shard(tmp_path, monkeypatch):
    """``distributed.run_sharded`` checks the run before a cluster starts, and each shard's command is the
    same spec with its shard and file."""
    from kgqa_lib import distributed

    started = []

    class Client:
        def submit(self, fn, name, argv, env, submitted, key=None, pure=None):
            return distributed.TaskResult(name, list(argv), 0, 0.0, 0.0, "w")

        def gather(self, futures):
            return futures

    @contextmanager
    def client(address=None, workers=2):
        started.append(1)
        yield Client(), 0.0

    monkeypatch.setattr(distributed, "client", client)
    args = ["--method", "io", "--dataset", "tiny:films", "--set", "max_tokens=32", "--llm", "openai:m", "--shard",
            "0/9", "--out", "ignored.jsonl", "--overwrite"]
    res = distributed.run_sharded(args, 3, tmp_path / "run.jsonl")
    want = RunSpec.from_argv(args)
    for i, (t, path) in enumerate(zip(res.tasks, res.files)):
        assert t.argv[0] == "run"
        spec, opts = parse_run_argv(t.argv[1:])
        assert spec == want.replace(shard=(i, 3)) and opts == RunOptions(str(path), True, True)
    assert distributed.run_sharded(want, 2, tmp_path / "r2.jsonl").tasks[1].argv[1:] == \
        want.replace(shard=(1, 2)).to_argv(tmp_path / "r2__shard1of2.jsonl", quiet=True)
    started.clear()
    with pytest.raises(UserError, match="unknown setting 'treshold'"):
        distributed.run_sharded(["--method", "pgakv", "--dataset", "tiny:films", "--set", "treshold=1"], 2,
                                tmp_path / "bad.jsonl")
    assert not started, "a bad run started a cluster"


def test_a_cell_is_launched_as_its_spec(tmp_path, monkeypatch):
    """``kgqa bench run``: each cell's ``kgqa run`` is its spec with the model and workers it is run with."""
    monkeypatch.setenv("KGQA_RESULTS_DIR", str(tmp_path / "results"))
    cell = core.Cell("s_io", "io", "tiny:films", 2, ("--limit", "2", "--llm", "local?prefix_cache=4",
                                                      "--llm-mode", "replay", "--no-transcripts"))
    t = core.Table(name="spec_t", title="spec", cells=(cell,), report=lambda rs: "", output="spec_t.md")
    seen = []

    class FakeRun:
        def __init__(self, argv, env=None):
            seen.append(argv)

        def wait(self, timeout=None):
            return 0

    monkeypatch.setattr(core.subprocess, "Popen", FakeRun)
    assert core.run(t, llm="local:qwen2.5-0.5b", workers=2, poll=0, echo=lambda _: None) == 0
    (argv,) = seen
    assert argv[1:4] == ["-m", "kgqa_lib.cli", "run"]
    spec, opts = parse_run_argv(argv[4:])
    assert spec == cell.spec("local:qwen2.5-0.5b", 2) and spec.llm == "local:qwen2.5-0.5b?prefix_cache=4"
    assert Path(opts.out) == core.live_dir(None, core.model_key("local:qwen2.5-0.5b")) / "s_io.jsonl"
