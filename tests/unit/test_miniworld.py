"""The mini-world: sources check, both schemas answer every gold query with the stored answers,
and the committed files are exactly what the generator writes."""

import json
import subprocess
import sys

import pytest

from kgqa_lib.data import miniworld as mw
from kgqa_lib.data.datasets import load_dataset
from kgqa_lib.kg.sources import load_miniworld_kg
from kgqa_lib.paths import repo_root

SETS = {"simple": 60, "multihop": 60, "open": 40, "templated": 60}
built = (mw.out_dir() / "kg_wikidata.nt").exists()
pytestmark = pytest.mark.skipif(not built, reason="mini-world not built yet")


@pytest.fixture(scope="module")
def kgs():
    return {"wikidata": load_miniworld_kg("wikidata"), "freebase": load_miniworld_kg("freebase")}


@pytest.fixture(scope="module")
def src():
    return mw.read_source()


def test_sources_check_and_sizes(src):
    assert src.problems == []
    assert len(src.entities) >= 400 and len(src.facts) >= 2000
    for e in src.entities.values():
        assert e.label and e.description


def test_committed_files_match_the_generator():
    r = subprocess.run([sys.executable, str(repo_root() / "scripts" / "build_miniworld.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("name", sorted(SETS))
def test_question_sets(name, kgs):
    ds = load_dataset(f"miniworld:{name}")
    assert len(ds) >= SETS[name]
    assert len({q.qid for q in ds}) == len(ds)
    ids = json.loads((mw.out_dir() / "ids.json").read_text())
    for q in ds:
        assert q.question and q.answers
        for key in q.metadata["topic_keys"]:
            assert key in ids
            for schema, kg in kgs.items():
                assert kg.labels(kg.entity_ns + ids[key][schema]), f"{key} has no label in {schema}"
        if name == "open":
            assert len(q.answers) == 3
            continue
        for schema, kg in kgs.items():
            res = kg.sparql(q.gold_query[f"sparql_{schema}"])
            assert sorted({r["answer"] for r in res}) == sorted(q.answers), (schema, q.question)


def test_templated_has_templates_and_paths():
    ds = load_dataset("miniworld:templated")
    assert len({q.metadata["template"] for q in ds}) >= 10
    assert all(q.gold_query.get("path") for q in ds)


def test_cvt_makes_one_hop_two(kgs):
    ids = json.loads((mw.out_dir() / "ids.json").read_text())
    film = next(q for q in load_dataset("miniworld:simple") if q.metadata.get("property") == "starred_actors")
    key = film.metadata["topic_keys"][0]
    wd = kgs["wikidata"].follow_path(kgs["wikidata"].entity_ns + ids[key]["wikidata"], ["P161"])
    fb = kgs["freebase"].follow_path(kgs["freebase"].entity_ns + ids[key]["freebase"],
                                     ["film.film.starring", "film.performance.actor"])
    assert sorted(kgs["wikidata"].label(x) for x in wd) == sorted(kgs["freebase"].label(x) for x in fb) == sorted(film.answers)


def test_no_dangling_ids(kgs):
    for schema, kg in kgs.items():
        res = kg.sparql("SELECT (COUNT(DISTINCT ?o) AS ?n) WHERE { ?s ?p ?o . FILTER(isIRI(?o)) "
                        f"FILTER NOT EXISTS {{ ?o <{kg.label_predicate}> ?l }} FILTER NOT EXISTS {{ ?o ?q ?z }} }}")
        assert res[0]["n"] == "0", schema


def test_templated_paths_walk_to_the_answers_in_both_schemas(kgs):
    """Keqing's logical chains: the template's relation path, written in either schema's relations
    (a CVT hop is two relations in the Freebase-like one), walks from the topic to the gold answers."""
    ids = json.loads((mw.out_dir() / "ids.json").read_text())
    for q in load_dataset("miniworld:templated"):
        path = q.gold_query["path"].split(" / ")
        key = q.metadata["topic_keys"][0]
        for schema, kg in kgs.items():
            ends = kg.follow_path(kg.entity_ns + ids[key][schema], mw.schema_path(path, schema))
            got = sorted({kg.label(x) or str(x) for x in ends})
            assert got == sorted(q.answers), (schema, q.question)


def test_schema_path_expands_cvt_hops():
    assert mw.schema_path(["^starred_actors", "directed_by"], "wikidata") == ["^P161", "P57"]
    assert mw.schema_path(["^starred_actors", "directed_by"], "freebase") == [
        "^film.performance.actor", "^film.film.starring", "film.film.directed_by"]
    with pytest.raises(ValueError):
        mw.schema_path(["directed_by"], "dbpedia")


def test_data_readme_counts_match_the_build():
    """data/README.md states each set's size; it must be the size the generator wrote."""
    stats = json.loads((mw.out_dir() / "stats.json").read_text())
    rows = {line.split("`")[1]: line.split("|")[3].strip()
            for line in (repo_root() / "data" / "README.md").read_text().splitlines() if line.startswith("| `miniworld:")}
    assert {k.split(":")[1]: int(v) for k, v in rows.items()} == stats["questions"]
    readme = (repo_root() / "data" / "README.md").read_text()
    assert f"{stats['entities']:,}" in readme and f"{stats['facts']:,}" in readme
