"""The fine-tuned dense retriever's rankings, recorded (issue 20 §5): a replay whose rankings are
recorded never trains and gets exactly what the model returns (scores to the last bit); a miss
trains; nothing is written unless recording is on, and recording is only ever on for the project's
own data, in a pipeline run whose LLM keeps transcripts (as `kgqa run` does for our own data, and the
notebooks do)."""

from __future__ import annotations

import json

import pytest

from kgqa_lib.methods.fusic import retrieval as FR


@pytest.fixture
def record(tmp_path, monkeypatch):
    path = tmp_path / "retriever_cache" / "fusic_dense.jsonl"
    monkeypatch.setattr(FR, "record_path", lambda: path)
    monkeypatch.setattr(FR, "_RECORD", {})
    return path


class Trainer:
    """Counts trainings; the model is the untrained MiniLM (real scores, no training time)."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self):
        from kgqa_lib.embed.retrieval import DenseRetriever, TrainingReport

        self.calls += 1
        r = DenseRetriever(None, label="dense")
        r.training = [TrainingReport(FR.Path("/x/abc"), 3, 1, 0.5, [1.25], False)]
        return r


TEXTS = ["Casablanca → director", "Casablanca → country of origin", "Casablanca → cast member"]


def test_recorded_rankings_replay_exactly_without_training(record, monkeypatch):
    train = Trainer()
    r = FR.RecordedDense("spec1", train, own=True)
    assert train.calls == 1 and not record.exists()  # no report recorded: trained at once, as before
    r.record = True
    live = r.rank("Who directed Casablanca?", TEXTS, 2)
    assert len(live) == 2
    lines = [json.loads(x) for x in record.read_text().splitlines()]
    assert lines[0] == {"spec": "spec1", "training": [{"path": "abc", "examples": 3, "steps": 1, "seconds": 0.5,
                                                       "losses": [1.25]}]}
    assert set(lines[1]) == {"spec", "key", "ranked"} and "Casablanca" not in record.read_text()  # hashes only
    monkeypatch.setattr(FR, "_RECORD", {})  # a fresh process
    again = Trainer()
    replay = FR.RecordedDense("spec1", again, own=True)
    assert again.calls == 0 and [t.losses for t in replay.training] == [[1.25]]
    assert [(x.index, x.score) for x in replay.rank("Who directed Casablanca?", TEXTS, 2)] == \
        [(x.index, x.score) for x in live]  # exactly, scores included
    assert again.calls == 0
    replay.rank("Who directed Casablanca?", TEXTS, 3)  # another k: a miss trains
    assert again.calls == 1 and len(record.read_text().splitlines()) == 2  # recording off: nothing appended
    assert FR.RecordedDense("other spec", Trainer(), own=True).spec == "other spec"


def test_recording_needs_own_data_and_is_set_by_make_retrievers(record, monkeypatch):
    monkeypatch.setattr(FR, "trained_retriever", lambda task, shots, seed=0: made)
    made = FR.RecordedDense("s", Trainer(), own=False)
    FR.make_retrievers("dense", "geo-wd>cinema-fb", 5, record=True)
    assert made.record is False  # not the project's own data
    made = FR.RecordedDense("s", Trainer(), own=True)
    FR.make_retrievers("dense", "geo-wd>cinema-fb", 5)
    assert made.record is False  # off unless asked
    FR.make_retrievers("dense", "geo-wd>cinema-fb", 5, record=True)
    assert made.record is True
    FR.make_retrievers("dense", "geo-wd>cinema-fb", 5, record=False)
    assert made.record is False


def test_own_data_is_the_mini_world_pairs(data_dir_or_skip):
    from kgqa_lib.methods.fusic import get_task

    assert FR._own_data(get_task("geo-wd>cinema-fb")) and FR._own_data(get_task("cinema-fb>geo-wd"))
    assert not FR._own_data(get_task("mw-wd>metaqa")) and not FR._own_data(get_task("grailqa>grailqa-tech"))


def test_training_spec_names_what_decides_the_model():
    from kgqa_lib.embed.retrieval import TrainingExample

    a = [TrainingExample("q", "pos", ["neg"])]
    b = [TrainingExample("q", "pos", ["other neg"])]
    base = FR.training_spec([a], 2, 0)
    assert base == FR.training_spec([a], 2, 0) and len(base) == 16
    assert len({base, FR.training_spec([b], 2, 0), FR.training_spec([a], 3, 0), FR.training_spec([a], 2, 1),
                FR.training_spec([a, b], 2, 0)}) == 5


@pytest.mark.parametrize("mode,transcripts,expected", [("auto", True, True), ("replay", True, True),
                                                       ("auto", False, False), ("replay", False, False)])
def test_the_pipeline_records_as_its_llm_records_transcripts(record, monkeypatch, tmp_path, mode, transcripts,
                                                             expected):
    from kgqa_lib.data.datasets import Question
    from kgqa_lib.llm.chat import LLM, LLMCache
    from kgqa_lib.methods import Context
    from kgqa_lib.methods.fusic import pipeline

    seen = []

    def fake(names, task, shots, seed=0, dense_training=None, record=None):
        seen.append(record)
        raise RuntimeError("stop here")

    monkeypatch.setattr(pipeline, "make_retrievers", fake)
    monkeypatch.setattr(pipeline, "link_entities", lambda *a, **k: None)
    cache = LLMCache(tmp_path / "llm.sqlite", transcripts=(tmp_path / "transcripts") if transcripts else None)
    ctx = Context(llm=LLM(None, "scripted", cache, mode=mode), settings={"task": "geo-wd>cinema-fb"})
    with pytest.raises(RuntimeError, match="stop here"):
        pipeline.fusic(Question("q1", "Who directed Casablanca?", ["x"]), ctx)
    assert seen == [expected]
