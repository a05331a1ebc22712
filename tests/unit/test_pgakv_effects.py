"""PG&AKV on the model axis: the paper's effects that ``pgakv_test`` checks per model (Tables 2, 3 and 4 as
pairs of existing cells, each claim saying on which questions it is paired), and the label for a reply that only
repeats the few-shot exemplars of its prompt (a failure the method's parser cannot see)."""

from __future__ import annotations

import pytest

from kgqa_lib.bench import core
from kgqa_lib.bench import pgakv as P
from kgqa_lib.evaluate import pgakv_analysis as A
from kgqa_lib.llm.prompting import load_prompt

IO_ECHO = ["Danube", "Wolfgang Amadeus Mozart", "1989", "English", "French", "Italian", "Iron"]  # io.txt's answers


def _record(method_prompts, prediction, error=None, sha=None):
    return {"qid": "q", "error": error, "prediction": prediction, "metrics": {"hits@1": 0.0},
            "config": {"method": "x", "prompts": {p: sha or load_prompt(p).sha for p in method_prompts}}}


# ---------------------------------------------------------------- the echo label
def test_exemplar_answers_are_read_from_the_prompt_files():
    io = P.exemplar_answers("io")
    assert frozenset({"danube"}) in io and frozenset({"english", "french"}) in io and len(io) == 6
    assert set().union(*P.exemplar_answers("cot")) >= {"john travolta", "samuel l jackson", "uma thurman"}
    assert P.exemplar_answers("pgakv_answer") == (frozenset({"danube"}), frozenset({"english", "french"}))
    assert P.exemplar_answers("pgakv_pseudo") == ()  # Cypher's {name: 'Hungary'} is no answer
    assert P.exemplar_answers("io_open") == ()  # prose exemplars


def test_echo_label():
    io = ("io", "io_open")
    assert P.echo_label(_record(io, IO_ECHO)) == P.ECHOED == "echoed_exemplars"
    assert P.echo_label(_record(io, ["danube", "IRON."])) == P.ECHOED  # normalised answers, two exemplars
    assert P.echo_label(_record(io, ["Copenhagen"])) is None  # a real answer
    assert P.echo_label(_record(io, ["Danube", "Copenhagen"])) is None  # not only exemplar answers
    assert P.echo_label(_record(io, [])) is None and P.echo_label(_record(io, [""])) is None  # empty
    assert P.echo_label(_record(io, ["English"])) is None  # one exemplar's answer can be right
    assert P.echo_label(_record(io, ["English", "French"])) is None
    assert P.echo_label(_record(io, IO_ECHO, sha="0" * 12)) is None  # prompt edited since: exemplars unknown
    assert P.echo_label({"prediction": IO_ECHO}) is None  # no prompts recorded
    pg = ("pgakv_pseudo", "pgakv_verify", "pgakv_answer", "pgakv_answer_open")
    assert P.echo_label(_record(pg, ["Danube", "English"])) == P.ECHOED  # the record's own prompts count
    assert P.echo_label(_record(pg, ["Wolfgang Amadeus Mozart", "Iron"])) is None  # io's, not PG&AKV's
    assert P.TABLE.label is P.echo_label and P.TEST_TABLE.label is P.echo_label
    rec = _record(io, IO_ECHO)
    assert core.error_counts([rec, rec, _record(io, ["x"], error="no_braces")], label=P.TABLE.label) == \
        "echoed_exemplars 2, no_braces 1"


def _committed(table, cell, model):
    recs = core.Records(table, model)(cell)
    if not recs:
        pytest.skip(f"no saved records of {cell} for {model}")
    return recs


def test_echo_label_on_the_saved_records():
    """The 0.5B's IO answers on the simple set mostly repeat io.txt's exemplars; the 1.5B's almost never do,
    and a flagged answer is almost never right."""
    small = _committed(P.TABLE, "t2_simple.io", "qwen2.5-0.5b-instruct-q4")
    flagged = [r for r in small if P.echo_label(r)]
    assert len(flagged) > len(small) / 2 and all(not r.get("error") for r in flagged)
    assert sum(r["metrics"]["hits@1"] for r in flagged) <= 0.05 * len(flagged)
    assert core.error_counts(small, label=P.TABLE.label).startswith(f"echoed_exemplars {len(flagged)}")
    default = _committed(P.TABLE, "t2_simple.io", None)
    assert sum(1 for r in default if P.echo_label(r)) <= 0.02 * len(default)


# ---------------------------------------------------------------- the paper's effects
def test_pgakv_test_effects_reference_existing_cells():
    effects = P.TEST_TABLE.effects
    assert len(effects) >= 10
    for e in effects:
        for table, cell in (e.a, e.b):
            assert core.get_table(table).cell(cell).name == cell  # registered table, existing cell
        assert e.a[1].split(".")[0] == e.b[1].split(".")[0]  # one set: paired on the same questions
        assert e.paper.startswith("PG&AKV paper, Table ") and e.sign == 1
    claims = " ".join(e.claim for e in effects)
    # Table 2's best KG-free baseline per column, as the paper prints it: CoT 22.0 (SimpleQuestions), SC 41.1 (QALD-10)
    simple = [e for e in effects if e.a == ("pgakv_t2", "t2_simple.pgakv")]
    multihop = [e for e in effects if e.a == ("pgakv_t2", "t2_multihop.pgakv") and "Table 2" in e.paper]
    assert simple[0].b[1] == "t2_simple.cot" and "CoT 22.0" in simple[0].paper
    assert multihop[0].b[1] == "t2_multihop.sc" and "SC 41.1" in multihop[0].paper
    # Table 4 has no SimpleQuestions column: no Table 4 effect on the simple set
    assert not [e for e in effects if "Table 4" in e.paper and e.a[1].startswith("t2_simple.")]
    assert f"threshold 0.5, {A.NOT_HELD_OUT}" in claims  # the threshold-0.5 runs carry the one label


def test_effects_run_on_the_saved_records_and_say_which_questions():
    default = core.default_key()
    _committed(P.TEST_TABLE, "t2_multihop.pgakv_pg", None)
    rows = core.effects_rows(P.TEST_TABLE, P.TEST_TABLE.models())
    assert rows and len(rows) == len(P.TEST_TABLE.effects)
    assert all(r[default] != "not run" for r in rows)  # every pair has the default model's records
    for e in P.TEST_TABLE.effects:
        part = e.a[1].split(".")[0].removeprefix("t2_")
        a, b = (core.Records(core.get_table(t), None)(c) for t, c in (e.a, e.b))
        both = {r["qid"] for r in a} & {r["qid"] for r in b}
        on_test = both <= A.split_qids(part)[1]
        assert e.claim.endswith("test questions") == on_test, e.claim
        assert ("dev and test questions" in e.claim) == (not on_test), e.claim
