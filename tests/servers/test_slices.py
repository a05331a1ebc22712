"""Per-question slices cut from a real Oxigraph server on 127.0.0.1 loaded with fixtures shaped
like Wikidata (wd:/wdt: IRIs, statement nodes, rdfs:label@en beside other languages) and like
Freebase (ns: mids, type.object.name@en, CVT nodes) — the mini-world, rewritten into those
namespaces by the test (no external data)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kgqa_lib.data.datasets import Dataset, Question
from kgqa_lib.paths import data_dir
from kgqa_lib.kg.remote import open_sparql_kg
from kgqa_lib.servers import OxigraphServer
from kgqa_lib.kg.slices import SliceMissing, build_slice, load_slices, slice_kg, slice_path

pytestmark = pytest.mark.server
MW = "http://kgqa.local/miniworld/"
NAMES = ("rdf-schema#label>", "core#altLabel>", "schema.org/description>", "type.object.name>",
         "common.topic.alias>", "common.topic.description>")


def shaped_like(schema: str, out: Path) -> Path:
    """The mini-world in real Wikidata / Freebase namespaces, names tagged @en, and a German label
    beside each English one (the slices must keep English only)."""
    src = (data_dir() / "miniworld" / f"kg_{schema}.nt").read_text(encoding="utf-8")
    if schema == "wikidata":
        src = src.replace(MW + "wd/statement/", "http://www.wikidata.org/entity/statement/").replace(MW + "wd/", "http://www.wikidata.org/")
    else:
        src = src.replace(MW + "fb/", "http://rdf.freebase.com/ns/")
    lines = []
    for line in src.splitlines():
        m = re.match(r'^(<[^>]+> <[^>]+>) ("(?:[^"\\]|\\.)*") \.$', line)
        if m and m.group(1).endswith(NAMES):
            lines.append(f"{m.group(1)} {m.group(2)}@en .")
            if m.group(1).endswith(("label>", "name>")):
                lines.append(f'{m.group(1)} "{m.group(2)[1:-1]} (de)"@de .')
        else:
            lines.append(line)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


@pytest.fixture(scope="module", params=["wikidata", "freebase"])
def server(request, tmp_path_factory):
    schema = request.param
    path = shaped_like(schema, tmp_path_factory.mktemp(schema) / f"{schema}.nt")
    with OxigraphServer([path]) as srv:
        yield schema, srv


def _topics(schema: str, remote) -> list[str]:
    if schema == "wikidata":
        return ["Q3684", "Q16777"]
    hits = [remote.lookup(n)[0][0] for n in ("John Jumper", "Turing Award")]
    return [h.rsplit("/", 1)[-1] for h in hits]  # mids: m.…


def test_slices_reload_identically(server, tmp_cache):
    schema, srv = server
    spec = srv.kg_url(schema)
    remote = open_sparql_kg(spec, cache=False)
    topics = _topics(schema, remote)
    assert all(t.startswith("Q" if schema == "wikidata" else "m.") for t in topics)
    for topic in topics:
        info = build_slice(spec, topic, depth=1, fanout=500)
        assert not info.cached and info.triples > 5 and info.capped_nodes == 0
        kg = load_slices([info.path], schema)
        iri = remote.profile.entity_ns + topic
        assert set(kg.triples_around(iri)) == set(remote.triples_around(iri))
        assert kg.label(iri) == remote.label(iri) and "(de)" not in kg.label(iri)
        assert kg.lookup(remote.label(iri))[0][0] == iri  # exact lookup on @en labels
        again = build_slice(spec, topic, depth=1, fanout=500)
        assert again.cached and again.path == info.path
        before = Path(info.path).read_bytes()
        assert build_slice(spec, topic, depth=1, fanout=500, refresh=True).path == info.path
        assert Path(info.path).read_bytes() == before  # deterministic bytes


def test_depth_two_and_fanout_caps(server, tmp_cache):
    schema, srv = server
    spec = srv.kg_url(schema)
    remote = open_sparql_kg(spec, cache=False)
    topic = _topics(schema, remote)[0]
    one = build_slice(spec, topic, depth=1, fanout=500)
    two = build_slice(spec, topic, depth=2, fanout=500)
    lines1 = set(Path(one.path).read_text().splitlines())
    lines2 = set(Path(two.path).read_text().splitlines())
    assert lines1 < lines2 and two.nodes > one.nodes
    kg = load_slices([two.path], schema)
    iri = remote.profile.entity_ns + topic
    for t in remote.triples_around(iri)[:10]:  # every 2-hop walk through the slice matches the server
        if t.o.literal or t.s.iri != iri:
            continue
        rel = t.r.iri.rsplit("/", 1)[-1]
        for t2 in remote.triples_around(t.o.iri, direction="out")[:5]:
            path = [rel, t2.r.iri.rsplit("/", 1)[-1]]
            assert sorted(kg.follow_path(iri, path)) == sorted(remote.follow_path(iri, path))
    capped = build_slice(spec, topic, depth=1, fanout=2)
    assert capped.capped_nodes == 1 and capped.path != one.path
    assert len([line for line in Path(capped.path).read_text().splitlines() if not line.split(" ", 2)[1].endswith(NAMES)]) <= 4


def test_offline_use_and_cli(server, tmp_cache, tmp_path):
    schema, srv = server
    spec = srv.kg_url(schema)
    remote = open_sparql_kg(spec, cache=False)
    topics = _topics(schema, remote)
    qs = [Question(f"q{i}", f"question about {t}", ["x"], metadata={"topic_ids": [t], "profile": schema})
          for i, t in enumerate(topics)]
    path = tmp_path / "qs.jsonl"
    path.write_text("".join(json.dumps(q.as_dict()) + "\n" for q in qs))
    r = subprocess.run([sys.executable, "-m", "kgqa_lib.cli", "slices", "build", "--dataset", str(path), "--kg", spec],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-1500:]
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["entities"] == len(topics) and summary["built"] == len(topics) and summary["triples"] > 10
    kg = slice_kg(Dataset("t", qs), spec, build=False)  # offline: only the cache is read
    lines = {line for t in topics for line in Path(slice_path(spec, t, 1, 100)).read_text().splitlines()}
    assert len(kg) == len(lines) > 10
    with pytest.raises(SliceMissing, match="kgqa slices build"):
        slice_kg(Dataset("t", qs), spec, depth=2, fanout=7, build=False)
