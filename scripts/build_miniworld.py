"""Build the mini-world from its hand-written sources: both RDF schemas and the question sets.

  python scripts/build_miniworld.py          # (re)write data/miniworld/*.nt, ids.json, questions/*.jsonl
  python scripts/build_miniworld.py --check  # rebuild in memory and fail if any committed file differs

Questions are instantiated from logical forms over the facts (phrasings written by us, several per
form); every gold answer is the result of the form's gold SPARQL on the built graph, and the
Wikidata-like and Freebase-like graphs must return the same answers."""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import defaultdict
from pathlib import Path

from kgqa_lib.data import miniworld as mw
from kgqa_lib.kg.graph import load_rdf
from kgqa_lib.kg.sources import load_miniworld_kg

SEED = 0
# The spare set: geography and technology questions no other set asks, never reported (FuSIC's dev part of
# the cinema → geography pair, kgqa_lib.methods.fusic.tasks.DEV_SETS): the simple and multi-hop forms again
# on further topics of those domains, drawn with a seed of their own, up to SPARE_PER_FORM per form.
SPARE_SEED = 1
SPARE_TOPICS = ("g_", "t_")
SPARE_PER_FORM = 2

# --- phrasings, written by us: {s} = subject label, {o} = object label ------------------------
SIMPLE = {
    "capital": ["What is the capital of {s}?", "Which city is the capital of {s}?", "Name the capital city of {s}."],
    "continent": ["On which continent is {s}?", "{s} lies on which continent?"],
    "official_language": ["What is an official language of {s}?", "Which language is official in {s}?"],
    "currency": ["What currency is used in {s}?", "Which currency do people pay with in {s}?"],
    "flows_through": ["Which countries does the {s} flow through?", "Through which countries does the {s} run?"],
    "mouth": ["Where does the {s} flow into?", "Into which body of water does the {s} empty?"],
    "length_km": ["How long is the {s}, in kilometres?", "What is the length of the {s} in km?"],
    "elevation_m": ["How high is {s}, in metres?", "What is the elevation of {s}?"],
    "part_of_range": ["Which mountain range is {s} part of?", "In which range does {s} stand?"],
    "area_km2": ["What is the area of {s} in square kilometres?", "How large is {s}, in km²?"],
    "directed_by": ["Who directed {s}?", "Who was the director of the film {s}?", "{s} was directed by whom?"],
    "written_by": ["Who wrote the screenplay for {s}?", "Who are the credited writers of {s}?"],
    "starred_actors": ["Who starred in {s}?", "Which actors appear in {s}?"],
    "release_year": ["When was {s} released?", "In what year did {s} come out?"],
    "has_genre": ["What genre is {s}?", "How would you classify the film {s} by genre?"],
    "in_language": ["What language is {s} in?", "In which language was {s} made?"],
    "place_of_birth": ["Where was {s} born?", "In which city was {s} born?"],
    "birth_year": ["In which year was {s} born?", "When was {s} born?"],
    "citizenship": ["What is the nationality of {s}?", "Which country is {s} a citizen of?"],
    "occupation": ["What is {s}'s profession?", "What does {s} do for a living?"],
    "award_received": ["Which awards has {s} received?", "What prizes did {s} win?"],
    "educated_at": ["Where did {s} study?", "Which university did {s} attend?"],
    "notable_work": ["What is {s} known for?", "Name a notable work of {s}."],
    "developer": ["Who developed {s}?", "Which company is behind {s}?"],
    "founded_by": ["Who founded {s}?", "Who were the founders of {s}?"],
    "headquarters": ["Where is {s} headquartered?", "In which city are the headquarters of {s}?"],
    "founded_year": ["When was {s} founded?", "In which year was {s} established?"],
    "successor": ["What succeeded {s}?", "What came after {s}?"],
    "programming_language": ["In which programming language is {s} written?", "What language was {s} programmed in?"],
    "country": ["In which country is {s}?", "Which country is {s} in?"],
    "^directed_by": ["Which films did {s} direct?", "Name the movies directed by {s}."],
    "^starred_actors": ["Which films did {s} act in?", "In which movies does {s} appear?"],
    "^flows_through": ["Which rivers flow through {s}?"],
    "^mouth": ["Which rivers flow into the {s}?"],
    "^developer": ["What products has {s} developed?"],
    "^place_of_birth": ["Who was born in {s}?", "Which people in the graph were born in {s}?"],
    "^headquarters": ["Which organizations are headquartered in {s}?"],
}

MULTIHOP = [  # (form without topic, phrasings with {s}, topic class)
    ({"type": "path", "path": ["place_of_birth", "country"]}, ["In which country was {s} born?", "{s} was born in which country?"], "person"),
    ({"type": "path", "path": ["place_of_birth", "country", "capital"]}, ["What is the capital of the country where {s} was born?"], "person"),
    ({"type": "path", "path": ["country", "continent"]}, ["On which continent is {s}?", "Which continent is {s} on?"], "city"),
    ({"type": "path", "path": ["^directed_by", "release_year"]}, ["When were the films directed by {s} released?", "In which years did films by {s} come out?"], "person"),
    ({"type": "path", "path": ["^starred_actors", "directed_by"]}, ["Who directed the films that {s} starred in?", "Which directors has {s} worked with as an actor?"], "person"),
    ({"type": "path", "path": ["directed_by", "^directed_by"]}, ["Which other films were made by the director of {s}?"], "film"),
    ({"type": "path", "path": ["directed_by", "place_of_birth"]}, ["Where was the director of {s} born?"], "film"),
    ({"type": "path", "path": ["directed_by", "educated_at"]}, ["Where did the director of {s} study?"], "film"),
    ({"type": "path", "path": ["developer", "founded_by"]}, ["Who founded the company that developed {s}?"], "product"),
    ({"type": "path", "path": ["developer", "headquarters"]}, ["Where is the company that makes {s} headquartered?"], "product"),
    ({"type": "path", "path": ["successor", "successor"]}, ["What came after the successor of {s}?"], "product"),
    ({"type": "path", "path": ["capital", "^place_of_birth"]}, ["Who was born in the capital of {s}?"], "country"),
    ({"type": "path", "path": ["flows_through", "capital"]}, ["What are the capitals of the countries the {s} flows through?"], "river"),
    ({"type": "path", "path": ["flows_through", "official_language"]}, ["Which languages are official in the countries the {s} flows through?"], "river"),
    ({"type": "path", "path": ["mouth", "^mouth"]}, ["Which other rivers flow into the same body of water as the {s}?"], "river"),
    ({"type": "path", "path": ["country", "capital"]}, ["What is the capital of the country where {s} lies?"], "mountain"),
    ({"type": "argmax", "path": ["^country"], "attr": "elevation_m"}, ["What is the highest mountain in {s}?", "Which is the tallest peak in {s}?"], "country"),
    ({"type": "count", "path": ["flows_through"]}, ["How many countries does the {s} flow through?"], "river"),
    ({"type": "count", "path": ["^directed_by"]}, ["How many films in the graph did {s} direct?"], "person"),
    ({"type": "count", "path": ["shares_border_with"]}, ["How many countries does {s} border?", "With how many countries does {s} share a border?"], "country"),
    ({"type": "argmax", "path": ["^flows_through"], "attr": "length_km"}, ["What is the longest river flowing through {s}?"], "country"),
    ({"type": "argmax", "path": ["^part_of_range"], "attr": "elevation_m"}, ["What is the highest mountain of the {s}?"], "mountain_range"),
    ({"type": "argmax", "path": ["shares_border_with"], "attr": "area_km2"}, ["Which neighbour of {s} has the largest area?"], "country"),
    ({"type": "argmin", "path": ["^directed_by"], "attr": "release_year"}, ["What is the earliest film by {s}?", "Which film did {s} direct first?"], "person"),
]
COMPARE = [
    ("river", "length_km", "max", "Which is longer, the {a} or the {b}?"),
    ("country", "area_km2", "max", "Which country is larger by area, {a} or {b}?"),
    ("mountain", "elevation_m", "max", "Which is higher, {a} or {b}?"),
    ("film", "release_year", "min", "Which film came out first, {a} or {b}?"),
]

# MetaQA-style templates over the film domain (Keqing): id → (relation path, phrasings with [X])
TEMPLATES = {
    "movie_to_director": (["directed_by"], ["who directed [X]", "[X] was directed by who", "who is the director of [X]"]),
    "movie_to_actor": (["starred_actors"], ["who acted in [X]", "who are the actors in [X]"]),
    "movie_to_year": (["release_year"], ["when was [X] released", "what year did [X] come out"]),
    "movie_to_genre": (["has_genre"], ["what genre is [X]", "what type of film is [X]"]),
    "movie_to_language": (["in_language"], ["what language is [X] in", "which language is spoken in [X]"]),
    "director_to_movie": (["^directed_by"], ["what films did [X] direct", "which movies were directed by [X]"]),
    "actor_to_movie": (["^starred_actors"], ["what movies did [X] act in", "which films star [X]"]),
    "director_to_movie_to_year": (["^directed_by", "release_year"], ["when were the films directed by [X] released", "the movies directed by [X] came out in which years"]),
    "actor_to_movie_to_director": (["^starred_actors", "directed_by"], ["who directed the films starring [X]", "the movies [X] acted in were directed by who"]),
    "movie_to_director_to_movie": (["directed_by", "^directed_by"], ["which films share the director of [X]", "what other movies did the director of [X] make"]),
    "movie_to_actor_to_movie": (["starred_actors", "^starred_actors"], ["which films share actors with [X]", "the actors of [X] also appear in which movies"]),
    "writer_to_movie_to_genre": (["^written_by", "has_genre"], ["what genres are the films written by [X]", "the movies written by [X] are of which genres"]),
    "movie_to_director_to_movie_to_actor": (["directed_by", "^directed_by", "starred_actors"], ["who acted in the other films by the director of [X]"]),
    "actor_to_movie_to_director_to_movie": (["^starred_actors", "directed_by", "^directed_by"], ["which films were made by the directors of the movies starring [X]"]),
}


# Countries whose land borders are all in the graph: border counts and "largest neighbour"
# questions are asked only about these, so their gold answers are also true of the real world.
BORDERS_COMPLETE = set(("g_germany g_netherlands g_belgium g_luxembourg g_switzerland g_liechtenstein g_austria "
                        "g_czech_republic g_slovakia g_hungary g_slovenia g_romania g_moldova g_ukraine g_norway g_sweden "
                        "g_finland g_denmark g_portugal g_united_kingdom g_ireland g_india g_mongolia g_north_korea "
                        "g_south_korea g_nepal g_bhutan g_bangladesh g_myanmar g_laos g_cambodia g_vietnam g_united_states "
                        "g_argentina g_chile g_peru g_bolivia g_paraguay g_uruguay g_ecuador g_rwanda g_burundi g_uganda "
                        "g_lebanon g_lesotho").split())
RECENT = 2023  # facts dated this year or later are newer than the default model's training data


class Facts:
    """The sources as adjacency lists, to choose questions that have answers."""

    def __init__(self, src: mw.Source) -> None:
        self.src = src
        self.shared = defaultdict(int)
        for e in src.entities.values():
            self.shared[e.label] += 1
        self.out = defaultdict(list)
        for f in src.facts:
            self.out[(f.s, f.p)].append(f.o)
            if not mw.PROPERTIES[f.p][3]:
                self.out[(f.o, "^" + f.p)].append(f.s)
            if f.p in mw.SYMMETRIC:
                self.out[(f.o, f.p)].append(f.s)

    def dated(self, key: str, prop: str) -> list[tuple[str, str]]:
        """(value, year) pairs of a dated property in time order, e.g. each award with its year."""
        return sorted({(f.o, f.year) for f in self.src.facts if f.s == key and f.p == prop and f.year},
                      key=lambda vy: (int(vy[1]), vy[0]))

    def walk(self, topic: str, path: list[str]) -> list[str]:
        cur = [topic]
        for p in path:  # the topic is excluded at every hop, as in the gold SPARQL
            cur = [o for o in dict.fromkeys(o for c in cur for o in self.out.get((c, p), [])) if o != topic]
        return cur

    def of_class(self, cls: str) -> list[str]:
        return sorted(k for k, e in self.src.entities.items() if e.cls == cls)

    def label(self, key: str) -> str:
        return self.src.entities[key].label if key in self.src.entities else key

    def mention(self, key: str) -> str:
        """How a question names the entity: its label, plus its description when the label is shared."""
        e = self.src.entities[key]
        if self.shared[e.label] > 1:
            return f"{e.label} ({e.description})"
        return _the(e.label) if e.cls == "country" else e.label


def gold(form: dict, kgs: dict, schemas: dict) -> list[str]:
    """Run the form's gold SPARQL on both schemas; they must agree."""
    answers = {}
    for name, kg in kgs.items():
        res = kg.sparql(mw.sparql(form, schemas[name]), timeout=30)
        answers[name] = sorted({r["answer"] for r in res if "answer" in r})
    if answers["wikidata"] != answers["freebase"]:
        raise AssertionError(f"schemas disagree on {form}: {answers}")
    return answers["wikidata"]


def make_questions(src, kgs, schemas, rng) -> dict[str, list[dict]]:
    F = Facts(src)
    sets: dict[str, list[dict]] = {"simple": [], "multihop": [], "templated": [], "open": [], "spare": []}

    def add(name, question, form, topic_keys, kind="factoid", meta=None, answers=None):
        if answers is None:
            answers = gold(form, kgs, schemas)
            if not answers:
                return False
        # a shared label is told apart by its description, which must not give the answer away
        told = " ".join(src.entities[k].description.lower() for k in topic_keys if F.shared[F.label(k)] > 1)
        if any(a.lower() in told for a in answers):
            return False
        question = question[0].upper() + question[1:]
        rec = {
            "qid": f"mw-{name}-{len(sets[name]):03d}", "question": question, "answers": answers,
            "topic_entities": [F.label(k) for k in topic_keys], "kind": kind,
            "gold_query": {"form": json.dumps(form, sort_keys=True),
                           "sparql_wikidata": mw.sparql(form, schemas["wikidata"]) if form else "",
                           "sparql_freebase": mw.sparql(form, schemas["freebase"]) if form else ""},
            "metadata": {"topic_keys": topic_keys, **(meta or {})},
        }
        if form and form.get("path"):
            rec["gold_query"]["path"] = " / ".join(form["path"])
        sets[name].append(rec)
        return True

    # simple: up to 3 facts per property/direction, spread over subjects
    for prop, phrasings in SIMPLE.items():
        subjects = sorted({s for (s, p) in F.out if p == prop})
        rng.shuffle(subjects)
        for i, s in enumerate(subjects[:3]):
            form = {"type": "path", "topic": s, "path": [prop]}
            add("simple", phrasings[i % len(phrasings)].format(s=F.mention(s)), form, [s], meta={"property": prop})
    # dated values (time-varying facts)
    dated = sorted({f.s for f in src.facts if f.p == "population" and f.year})
    rng.shuffle(dated)
    for s in dated[:6]:
        years = sorted({f.year for f in src.facts if f.s == s and f.p == "population"})
        y = years[0]
        form = {"type": "value_at", "topic": s, "attr": "population", "year": int(y)}
        add("simple", f"What was the population of {F.mention(s)} in {y}?", form, [s], meta={"property": "population", "temporal": True})
    # the latest dated value, and dated entity values (awards by year)
    for s in dated[6:10]:
        y = max({f.year for f in src.facts if f.s == s and f.p == "population"})
        form = {"type": "value_at", "topic": s, "attr": "population", "year": int(y)}
        add("simple", f"How many people lived in {F.mention(s)} in {y}?", form, [s],
            meta={"property": "population", "temporal": True, "recent": int(y) >= RECENT})
    honours = sorted({(f.s, f.year) for f in src.facts if f.p == "award_received" and f.year})
    rng.shuffle(honours)
    for s, y in sorted(honours, key=lambda h: -int(h[1]))[:6]:
        form = {"type": "value_at", "topic": s, "attr": "award_received", "year": int(y)}
        add("simple", f"Which award did {F.mention(s)} receive in {y}?", form, [s],
            meta={"property": "award_received", "temporal": True, "recent": int(y) >= RECENT})
    # facts newer than the model: who made the works released in RECENT or later
    recent = sorted({f.s for f in src.facts if f.p == "release_year" and int(float(f.o)) >= RECENT})
    rng.shuffle(recent)
    for i, s in enumerate(recent[:12]):
        prop = "developer" if src.entities[s].cls == "product" else "directed_by"
        if F.out.get((s, prop)):
            form = {"type": "path", "topic": s, "path": [prop]}
            add("simple", SIMPLE[prop][i % len(SIMPLE[prop])].format(s=F.mention(s)), form, [s],
                meta={"property": prop, "recent": True})
    # ambiguous names: entities sharing a label, told apart by their description
    by_label = defaultdict(list)
    for k, e in src.entities.items():
        by_label[e.label].append(k)
    for label, keys in sorted(by_label.items()):
        if len(keys) < 2:
            continue
        for s in sorted(keys):
            for prop in sorted((p for p in SIMPLE if F.out.get((s, p))), key=lambda p: p.startswith("^")):
                form = {"type": "path", "topic": s, "path": [prop]}
                if add("simple", SIMPLE[prop][0].format(s=F.mention(s)), form, [s],
                       meta={"property": prop, "ambiguous": True, "same_label": sorted(keys)}):
                    break
    # multihop: path / count / superlative forms, then comparisons
    for base, phrasings, cls in MULTIHOP:
        topics = F.of_class(cls)
        if "shares_border_with" in base["path"]:
            topics = [t for t in topics if t in BORDERS_COMPLETE]
        rng.shuffle(topics)
        n = 0
        for t in topics:
            cands = F.walk(t, base["path"])
            if not cands or (base["type"] in ("argmax", "argmin") and len(cands) < 2):
                continue
            form = {**base, "topic": t}
            if add("multihop", phrasings[n % len(phrasings)].format(s=F.mention(t)), form, [t],
                   meta={"hops": len(base["path"]), "form": base["type"]}):
                n += 1
            if n == 3:
                break
    for cls, attr, order, phrasing in COMPARE:
        ents = [e for e in F.of_class(cls) if F.out.get((e, attr))]
        rng.shuffle(ents)
        for a, b in list(zip(ents[::2], ents[1::2]))[:4]:
            va, vb = float(F.out[(a, attr)][0]), float(F.out[(b, attr)][0])
            if va == vb:
                continue
            form = {"type": "compare", "entities": [a, b], "attr": attr, "order": order}
            add("multihop", phrasing.format(a=F.mention(a), b=F.mention(b)), form, [a, b], meta={"hops": 1, "form": "compare"})
    # templated (film domain, MetaQA-style, Keqing)
    classes = {"movie": "film", "director": "person", "actor": "person", "writer": "person"}
    for tid, (path, phrasings) in TEMPLATES.items():
        start = classes[tid.split("_to_")[0]]
        topics = [t for t in F.of_class(start) if F.walk(t, path)]
        rng.shuffle(topics)
        for i, t in enumerate(topics[:5]):
            form = {"type": "path", "topic": t, "path": path}
            text = phrasings[i % len(phrasings)].replace("[X]", F.mention(t))
            add("templated", text, form, [t], meta={"template": tid, "hops": len(path),
                                                    "raw": phrasings[i % len(phrasings)].replace("[X]", f"[{F.mention(t)}]")})
    # open-ended: references written from the KG facts in three styles
    sets["open"] = open_questions(F, rng)
    asked = {q["gold_query"].get("form", "") for qs in sets.values() for q in qs}
    asked_topics = {k for qs in sets.values() for q in qs for k in q["metadata"].get("topic_keys") or []}
    spare_questions(F, add, asked, random.Random(SPARE_SEED), asked_topics)
    return sets


def spare_questions(F: Facts, add, asked: set[str], rng, asked_topics: set[str] = frozenset()) -> None:
    """The spare set (:data:`SPARE_SEED`): the simple and multi-hop forms again on geography and technology topics
    no other set asks about (neither the form nor its topic), up to :data:`SPARE_PER_FORM` questions per form."""
    def take(forms_and_texts, meta) -> None:
        n = 0
        for form, text in forms_and_texts:
            if json.dumps(form, sort_keys=True) in asked or form["topic"] in asked_topics:
                continue
            if add("spare", text, form, [form["topic"]], meta=meta):
                n += 1
            if n == SPARE_PER_FORM:
                return

    for prop, phrasings in SIMPLE.items():
        subjects = sorted(s for (s, p) in F.out if p == prop and s.startswith(SPARE_TOPICS))
        rng.shuffle(subjects)
        take((({"type": "path", "topic": s, "path": [prop]}, phrasings[i % len(phrasings)].format(s=F.mention(s)))
              for i, s in enumerate(subjects)), {"property": prop})
    for base, phrasings, cls in MULTIHOP:
        topics = [t for t in F.of_class(cls) if t.startswith(SPARE_TOPICS)
                  and ("shares_border_with" not in base["path"] or t in BORDERS_COMPLETE)]
        rng.shuffle(topics)
        topics = [t for t in topics if len(F.walk(t, base["path"])) >= (2 if base["type"] in ("argmax", "argmin") else 1)]
        take((({**base, "topic": t}, phrasings[i % len(phrasings)].format(s=F.mention(t))) for i, t in enumerate(topics)),
             {"hops": len(base["path"]), "form": base["type"]})


THE = {"United States", "United Kingdom", "Netherlands", "Czech Republic", "Democratic Republic of the Congo",
       "Republic of the Congo"}


def _the(label: str) -> str:
    return "the " + label if label in THE else label


def _join(xs: list[str]) -> str:
    xs = list(xs)
    return xs[0] if len(xs) == 1 else ", ".join(xs[:-1]) + " and " + xs[-1]


def open_questions(F: Facts, rng) -> list[dict]:
    out = []

    def add(question, refs, topic_keys, meta):
        out.append({"qid": f"mw-open-{len(out):03d}", "question": question, "answers": refs,
                    "topic_entities": [F.label(k) for k in topic_keys], "kind": "open",
                    "gold_query": {}, "metadata": {"topic_keys": topic_keys, **meta}})

    L = F.label
    for r in sorted(F.of_class("river"), key=lambda k: L(k))[:10]:
        through = [_the(L(c)) for c in F.out.get((r, "flows_through"), [])]
        length = F.out.get((r, "length_km"), [])
        mouth = [L(m) for m in F.out.get((r, "mouth"), [])]
        if not through or not length:
            continue
        tail = f" and flows into the {_join(mouth)}" if mouth else ""
        add(f"Tell me about the river {F.mention(r)}.", [
            f"The {L(r)} is a river about {length[0]} km long that flows through {_join(through)}{tail}.",
            f"About {length[0]} kilometres long, the {L(r)} runs through {_join(through)}{tail}.",
            f"{L(r)}: length {length[0]} km; countries: {_join(through)}" + (f"; mouth: {_join(mouth)}." if mouth else "."),
        ], [r], {"style": "describe", "domain": "geography"})
    for d in F.of_class("person"):
        films = F.out.get((d, "^directed_by"), [])
        if len(films) < 2:
            continue
        dated = sorted((F.out.get((f, "release_year"), ["?"])[0], L(f)) for f in films)
        lst = [f"{t} ({y})" for y, t in dated]
        add(f"Which films has {F.mention(d)} directed, and when were they released?", [
            f"{L(d)} directed {_join(lst)}.",
            f"Films directed by {L(d)} include " + _join([f"{t}, released in {y}" for y, t in dated]) + ".",
            f"{_join([t for _, t in dated])} were directed by {L(d)}; they came out in {_join([y for y, _ in dated])}.",
        ], [d], {"style": "list", "domain": "films"})
        if sum(1 for q in out if q["metadata"]["style"] == "list") >= 10:
            break
    countries = [c for c in F.of_class("country") if F.out.get((c, "area_km2")) and F.out.get((c, "capital"))]
    rng.shuffle(countries)
    for a, b in list(zip(countries[::2], countries[1::2]))[:10]:
        aa, ab = F.out[(a, "area_km2")][0], F.out[(b, "area_km2")][0]
        bigger = L(a) if float(aa) > float(ab) else L(b)
        add(f"Compare {F.mention(a)} and {F.mention(b)}.", [
            f"{L(a)} has its capital in {L(F.out[(a, 'capital')][0])} and an area of {aa} km², while the capital of {L(b)} is "
            f"{L(F.out[(b, 'capital')][0])} and its area is {ab} km²; {bigger} is the larger of the two.",
            f"{bigger} is larger: {L(a)} covers {aa} km² and {L(b)} covers {ab} km². Their capitals are "
            f"{L(F.out[(a, 'capital')][0])} and {L(F.out[(b, 'capital')][0])}.",
            f"{L(a)}: capital {L(F.out[(a, 'capital')][0])}, area {aa} km². {L(b)}: capital {L(F.out[(b, 'capital')][0])}, area {ab} km².",
        ], [a, b], {"style": "compare", "domain": "geography"})
    winners = [p for p in F.of_class("person") if F.out.get((p, "award_received"))]
    winners.sort(key=lambda p: (-max(int(y) for _, y in F.dated(p, "award_received")), p))
    for p in winners[:10]:
        won = F.dated(p, "award_received")
        items = [f"the {L(a)} in {y}" for a, y in won]
        add(f"Which major awards has {F.mention(p)} won, and when?", [
            f"{L(p)} won {_join(items)}.",
            f"{L(p)} received " + _join([f"the {L(a)} ({y})" for a, y in won]) + ".",
            "; ".join(f"{y}: {L(a)}" for a, y in won) + f" — these are the awards of {L(p)}.",
        ], [p], {"style": "awards", "domain": "people"})
    recent = sorted({k for k in F.of_class("product") if any(int(float(y)) >= 2023 for y in F.out.get((k, "release_year"), []))})
    for p in recent[:10]:
        y = F.out[(p, "release_year")][0]
        dev = [L(d) for d in F.out.get((p, "developer"), [])]
        prev = [L(x) for x in F.out.get((p, "^successor"), [])]
        prev_txt = f" It succeeded {_join(prev)}." if prev else ""
        add(f"What is {F.mention(p)}?", [
            f"{L(p)} is a product by {_join(dev) or 'an unknown developer'} released in {y}.{prev_txt}",
            f"Released in {y}, {L(p)} was developed by {_join(dev) or 'an unknown developer'}.{prev_txt}",
            f"{L(p)}: developer {_join(dev) or 'unknown'}, release year {y}" + (f", successor of {_join(prev)}." if prev else "."),
        ], [p], {"style": "new_knowledge", "domain": "technology"})
    return out


def build_all() -> dict[str, str]:
    """Return {relative path: content} of every generated file."""
    src = mw.read_source()
    if src.problems:
        raise SystemExit("source problems:\n  " + "\n  ".join(src.problems[:50]))
    schemas = {"wikidata": mw.wikidata_schema(src), "freebase": mw.freebase_schema(src)}
    files = {
        "kg_wikidata.nt": "\n".join(mw.to_wikidata(src, schemas["wikidata"])) + "\n",
        "kg_freebase.nt": "\n".join(mw.to_freebase(src, schemas["freebase"])) + "\n",
        "ontology.nt": "\n".join(mw.ontology(schemas["wikidata"])) + "\n",
        "ids.json": json.dumps({k: {n: s.ids[k] for n, s in schemas.items()} for k in sorted(src.entities)},
                               indent=0, sort_keys=True) + "\n",
    }
    import tempfile

    tmp = Path(tempfile.mkdtemp())
    kgs = {}
    for name in schemas:
        (tmp / f"{name}.nt").write_text(files[f"kg_{name}.nt"] + files["ontology.nt"], encoding="utf-8")
        kgs[name] = load_miniworld_kg(name, path=tmp / f"{name}.nt")
    sets = make_questions(src, kgs, schemas, random.Random(SEED))
    for name, qs in sets.items():
        files[f"questions/{name}.jsonl"] = "".join(json.dumps(q, ensure_ascii=False, sort_keys=True) + "\n" for q in qs)
    files["stats.json"] = json.dumps(stats(src, files, sets), indent=1, sort_keys=True) + "\n"
    return files


def stats(src, files, sets) -> dict:
    """Counts for data/README.md, recomputed on every build (and compared by --check)."""
    def count(xs):
        out = defaultdict(int)
        for x in xs:
            out[x] += 1
        return dict(sorted(out.items()))

    domain_of = {"g": "geography", "f": "films", "p": "people", "t": "technology"}
    return {
        "entities": len(src.entities),
        "facts": len(src.facts),
        "entities_by_class": count(e.cls for e in src.entities.values()),
        "entities_by_domain": count(domain_of[k[0]] for k in src.entities),
        "facts_by_property": count(f.p for f in src.facts),
        "dated_facts": sum(1 for f in src.facts if f.year),
        "facts_from_2023_on": sum(1 for f in src.facts if (f.year and int(f.year) >= RECENT)
                                  or (f.p in ("release_year", "founded_year") and int(float(f.o)) >= RECENT)),
        "shared_labels": sorted({e.label for e in src.entities.values()
                                 if sum(1 for x in src.entities.values() if x.label == e.label) > 1}),
        "triples": {name: files[f"kg_{name}.nt"].count("\n") for name in ("wikidata", "freebase")},
        "questions": {name: len(qs) for name, qs in sets.items()},
        "questions_by_domain": {name: count(domain_of[q["metadata"]["topic_keys"][0][0]] for q in qs)
                                for name, qs in sets.items()},
        "multihop_forms": count(q["metadata"].get("form", "path") for q in sets["multihop"]),
        "simple_recent": sum(1 for q in sets["simple"] if q["metadata"].get("recent")),
        "simple_ambiguous": sum(1 for q in sets["simple"] if q["metadata"].get("ambiguous")),
        "templates": len({q["metadata"]["template"] for q in sets["templated"]}),
        "open_styles": count(q["metadata"]["style"] for q in sets["open"]),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--check", action="store_true", help="fail if a committed file differs from a fresh build")
    args = ap.parse_args()
    files = build_all()
    root = mw.out_dir()
    stale = []
    for rel, content in files.items():
        path = root / rel
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != content:
                stale.append(rel)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8")
    for rel, content in files.items():
        print(f"{rel:28s} {content.count(chr(10)):6d} lines")
    if stale:
        print("stale (run scripts/build_miniworld.py):", ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
