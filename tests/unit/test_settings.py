"""Typed method settings (issue 18, item 5): one settings class per method, values coerced the same
way from ``--set`` strings, notebook parameters and Python; typos and bad values are errors; the
run config hash of the committed benchmark records is unchanged."""

from __future__ import annotations

import gzip
import json
import re

import pytest

from kgqa_lib.methods import Context, SettingsError, coerce_settings, method_names, method_settings
from kgqa_lib.paths import repo_root


def test_false_is_false_everywhere():
    """``--set oracle_linking=false`` turned oracle linking ON ("false" is truthy); ``rerank=false``
    and ``verify=false`` were ignored."""
    from kgqa_lib.methods import fusic

    s = fusic.settings_of(Context(llm=None, settings={"oracle_linking": "false", "rerank": "false"}))
    assert s["oracle_linking"] is False and s["rerank"] is False
    assert Context(llm=None, settings={"verify": "false"}).get("verify") is False
    for text, value in [("TRUE", True), ("Yes", True), ("on", True), ("1", True), ("False", False), ("no", False),
                        ("OFF", False), ("0", False), (True, True), (0, False)]:
        assert coerce_settings({"verify": text}, "pgakv") == {"verify": value}


def test_a_typo_is_an_error_listing_the_valid_keys():
    with pytest.raises(SettingsError, match=r"did you mean 'threshold'\?.*valid settings: .*top_k"):
        Context(llm=None, settings={"treshold": 0.9})
    with pytest.raises(ValueError, match=r"unknown setting 'treshold' for pgakv .*threshold, top_k"):
        coerce_settings({"treshold": "0.9"}, "pgakv")
    with pytest.raises(SettingsError, match="unknown setting 'K' for io; valid settings: kg, max_tokens"):
        coerce_settings({"K": 1}, "io")


@pytest.mark.parametrize("key,value,expects", [
    ("verify", "maybe", "bool"), ("top_k", "ten", "int"), ("top_k", 2.5, "int"), ("top_k", True, "int"),
    ("threshold", "high", "float"), ("k_subjects", "some", "int or None"), ("mode", "chian", "one of 'decompose'"),
    ("retrievers", 3, "str"), ("samples", "3.5", "int")])
def test_a_bad_value_names_the_key_the_type_and_the_value(key, value, expects):
    with pytest.raises(SettingsError) as ei:
        Context(llm=None, settings={key: value})
    msg = str(ei.value)
    assert f"setting {key!r}" in msg and expects in msg and repr(value) in msg and "\n" not in msg


def test_values_are_parsed_from_text():
    got = coerce_settings({"threshold": "0.5", "k_subjects": "None", "top_k": "3", "answer_max_tokens": "null",
                           "verify": "False", "kg": "miniworld"}, "pgakv")
    assert got == {"threshold": 0.5, "k_subjects": None, "top_k": 3, "answer_max_tokens": None, "verify": False,
                   "kg": "miniworld"}
    assert coerce_settings({"retrievers": '""'}, "fusic") == {"retrievers": ""}  # the naive baseline, quoted
    import numpy as np

    got = coerce_settings({"K": np.int64(3), "threshold": np.float64(0.5)})  # a notebook sweep over numpy values
    assert got == {"K": 3, "threshold": 0.5} and type(got["K"]) is int and type(got["threshold"]) is float
    assert coerce_settings({"retrievers": "bm25,dense", "shots": "0", "language": "sexpr"}, "fusic") == \
        {"retrievers": "bm25,dense", "shots": 0, "language": "sexpr"}


def test_only_given_keys_are_kept_so_the_config_hash_is_unchanged():
    ctx = Context(llm=None, settings={"threshold": 0.5})
    assert ctx.settings == {"threshold": 0.5}  # no defaults added to the hashed dict
    assert json.dumps(coerce_settings({"threshold": 1}, "pgakv")) == '{"threshold": 1}'  # an int stays an int


def _committed_configs():
    for f in sorted((repo_root() / "results" / "bench" / "runs").glob("*/*/*.jsonl.gz")):
        with gzip.open(f, "rt", encoding="utf-8") as fh:
            for line in fh:
                yield f.name, json.loads(line)["config"]


def test_committed_benchmark_settings_coerce_to_themselves():
    """Resumes of results/bench/runs/** must still match: coercion maps the settings the committed
    records hold to the same values and types (so the same JSON, so the same config hash)."""
    from kgqa_lib.evaluate.runner import config_hash

    seen = 0
    for name, config in _committed_configs():
        for of in (None, config["method"]):
            got = coerce_settings(config["settings"], of)
            assert json.dumps(got, sort_keys=True) == json.dumps(config["settings"], sort_keys=True), name
        assert config_hash({**config, "settings": Context(llm=None, settings=config["settings"]).settings}) == \
            config_hash(config)
        seen += 1
    assert seen > 0


def test_the_benchmark_commands_set_what_the_records_hold():
    """The pgakv_t2 bench table runs `--set threshold=0.5 --set verify=False`; the records hold 0.5 and false."""
    from kgqa_lib.cli import build_parser

    args = build_parser().parse_args(["run", "--method", "pgakv", "--dataset", "miniworld:simple",
                                      "--set", "threshold=0.5", "--set", "verify=False"])
    got = coerce_settings(dict(args.set), "pgakv")
    assert json.dumps(got) == json.dumps({"threshold": 0.5, "verify": False})


@pytest.mark.parametrize("settings", [  # what the notebooks pass (grep notebooks/*.ipynb for `settings=`)
    {"kg": "miniworld", "K": 1}, {"verify": False}, {"threshold": 0.5}, {"k_subjects": 2}, {"kg": "miniworld"},
    {"task": "geo-wd>cinema-fb", "shots": 5, "retrievers": "bm25,dense"}, {"task": "geo-wd>cinema-fb", "shots": 0,
    "retrievers": "", "egf_rounds": 2}, {"kg": "miniworld", "respond": False, "K": 3}, {"kg": "miniworld",
    "respond": False, "mode": "chain"}, {"kg": "miniworld", "K": 1, "exemplars": 4, "select": "fixed"}])
def test_notebook_settings_are_accepted_unchanged(settings):
    assert Context(llm=None, settings=settings).settings == settings


def test_every_method_has_a_settings_class_with_help():
    for m in method_names():
        rows = method_settings(m).describe()
        assert rows[0][0] == "kg" and all(h for *_, h in rows), m


def test_methods_read_settings_only_through_their_settings_class():
    """No method reads a raw setting any more (``ctx.get("verify", True)`` took the string "false" as true)."""
    folder = repo_root() / "kgqa_lib" / "methods"
    raw = re.compile(r"ctx\.get\(|ctx\.settings\[|\.settings\.get\(")
    offenders = [f"{p.name}:{i}" for p in folder.glob("*.py") if p.name != "base.py"
                 for i, line in enumerate(p.read_text().splitlines(), 1) if raw.search(line)]
    assert not offenders, offenders
