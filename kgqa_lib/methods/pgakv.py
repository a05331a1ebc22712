"""PG&AKV: pseudo-graph generation and atomic knowledge verification (Yang et al.).

Stages, one function each (the notebooks show them cell by cell):

1. :func:`generate_pseudo_graph` — the LLM writes a knowledge plan and Cypher for the knowledge the
   question needs; :func:`cypher_to_triples` executes that Cypher in an in-memory property graph
   (``cypherast``, Neo4j semantics: MERGE de-duplicates, a re-declared variable is the same node,
   repeated CREATE makes duplicates) and reads the triples back → ``G_p``.
2. :func:`semantic_query` — the KG triples around the entities the question and ``G_p`` mention are
   verbalised and embedded; for every pseudo-triple the 10 closest KG triples are kept → ``G_t``.
3. :func:`prune` — keep the top-k subjects by number of retrieved triples (k = subjects in
   ``G_p``), score each by the mean cosine of its triples, drop those under the threshold → ``G_g``.
4. :func:`verify` — the LLM deletes, replaces and adds triples of ``G_p`` using ``G_g`` → ``G_f``.
5. :func:`answer_from_triples` — the answer, from ``G_f``, in braces (factoid) or as prose (open).

LLM output is data: malformed Cypher or triples are recorded in the trace and counted; the
question still gets an answer (from whatever survived).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Literal

from ..data.datasets import Dataset, DatasetError, Question, load_dataset, register
from ..llm.parse import extract_braced_answers
from .base import Context, MethodResult, Settings, Stage, Tracer, register_method, setting
from .baselines import Generation, generate, generate_samples, open_text as _open_text

PTriple = tuple[str, str, str]


# ---------------------------------------------------------------------------------------------
# Settings (``kgqa run --method pgakv --help-settings``)
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class KGAnswerSettings(Settings):
    """What QSM and PG&AKV share: retrieval around the linked entities, then the answer prompt."""

    top_k: int = setting(10, "KG triples retrieved per pseudo-triple (QSM: for the question)", min=1)
    max_candidates: int = setting(3000, "KG triples around the linked entities considered at most", min=1)
    answer_max_tokens: int | None = setting(None, "tokens of the answer (None: 64, 160 for open questions)", min=1)
    use_topic_entities: bool = setting(True, "link the dataset's annotated topic entities (PG&AKV: besides the "
                                             "pseudo-graph's nodes); false with link_question=true: G_base without annotations")
    link_question: bool = setting(False, "also link entity names found in the question text (the longest word spans "
                                         "matching a KG label or alias exactly or normalised; every entity of the label)")
    search_scope: Literal["base", "kg"] = setting(
        "base", "where the top-k triples are searched: base = G_base, the triples around the linked entities (at most "
                "max_candidates); kg = every triple of the KG (the paper's semantic querying over the whole KG; the "
                "KG's triples are embedded once, then cached)")


@dataclass(frozen=True)
class QSMSettings(KGAnswerSettings):
    pass


@dataclass(frozen=True)
class PGAKVSettings(KGAnswerSettings):
    verify: bool = setting(True, "let the LLM verify the pseudo-graph against the ground graph (false: answer from "
                                 "G_g ∪ G_p unverified; the paper's 'Pseudo-Graph' row is kg_context=none)")
    threshold: float = setting(0.7, "pruning: drop subjects whose retrieved triples' mean cosine is under this",
                               min=-1, max=1)
    k_subjects: int | None = setting(None, "pruning: subjects kept (None: the number of subjects in G_p, plus k_extra)",
                                     min=0)
    k_extra: int = setting(0, "pruning: subjects kept beyond the number of subjects in G_p (when k_subjects is None)",
                           min=0)
    kg_context: Literal["ground", "none"] = setting(
        "ground", "none: the paper's Table 4 'Pseudo-Graph' row: the answer sees the pseudo-graph G_p only, no KG "
                  "(no retrieval, pruning or verification; verify=false instead answers from G_g and G_p)")
    ground_limit: int = setting(30, "ground-graph triples shown to the verifier (or kept without verification)", min=0)
    pseudo_max_tokens: int = setting(320, "tokens of the pseudo-graph generation", min=1)
    verify_max_tokens: int = setting(320, "tokens of the verification", min=1)


@dataclass(frozen=True)
class SCSettings(Settings):
    samples: int = setting(3, "CoT samples at temperature 0.7 to vote over", min=1)
    max_tokens: int = setting(256, "tokens per sample", min=1)


# ---------------------------------------------------------------------------------------------
# 1. Pseudo-graph generation
# ---------------------------------------------------------------------------------------------
def generate_pseudo_graph(question: str, ctx: Context) -> Generation:
    """Ask the LLM for a knowledge plan and the Cypher of a pseudo-graph (two worked examples)."""
    return generate(question, ctx, "pgakv_pseudo", PGAKVSettings.of(ctx).pseudo_max_tokens)


_FENCE = re.compile(r"```(?:cypher|sql|neo4j)?\s*\n(.*?)(?:```|$)", re.S | re.I)
_CYPHER_START = re.compile(r"^\s*(CREATE|MERGE|MATCH|WITH|SET|//)", re.I)


def split_plan_and_cypher(text: str) -> tuple[str, str]:
    """The plan is the prose before the Cypher; the Cypher is the first fenced block, or else
    every line that starts like a Cypher clause."""
    m = _FENCE.search(text)
    if m:
        plan = text[:m.start()]
        cypher = m.group(1)
    else:
        lines = text.splitlines()
        idx = next((i for i, line in enumerate(lines) if _CYPHER_START.match(line)), len(lines))
        plan = "\n".join(lines[:idx])
        cypher = "\n".join(line for line in lines[idx:] if _CYPHER_START.match(line) or line.strip().startswith(("(", "-", ",")))
    plan = re.sub(r"^\s*(Plan:)?\s*", "", plan).replace("Cypher:", "").strip()
    return plan, cypher.strip()


@dataclass
class PseudoGraph:
    plan: str
    cypher: str
    triples: list[PTriple] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)  # node names, in creation order
    statements: int = 0  # Cypher statements (split on ';')
    failed_statements: int = 0
    dropped_lines: list[str] = field(default_factory=list)  # lines that could not be parsed, skipped
    errors: list[str] = field(default_factory=list)

    @property
    def error(self) -> str | None:
        if not self.cypher.strip():
            return "no_cypher"
        if not self.triples:
            return "cypher_error" if self.errors else "empty_graph"
        return None

    def as_dict(self) -> dict[str, Any]:
        return {"plan": self.plan, "cypher": self.cypher, "triples": [list(t) for t in self.triples],
                "nodes": self.nodes, "statements": self.statements, "failed_statements": self.failed_statements,
                "dropped_lines": self.dropped_lines, "errors": self.errors, "error": self.error}


def _node_name(node) -> str:
    for key in ("name", "title", "value", "label"):
        if node.props.get(key) not in (None, ""):
            return str(node.props[key])
    if node.props:
        return str(next(iter(node.props.values())))
    return next(iter(sorted(node.labels)), f"node{node.id}")


def _parses(text: str) -> str | None:
    import cypherast

    try:
        cypherast.parse(text, read="neo4j")
        return None
    except Exception as exc:  # cypherast raises ParseError with line/column
        return str(exc).splitlines()[0]


MAX_CYPHER_CHARS = 20_000  # LLM pseudo-graphs are < 1,100 characters (pgakv runs); longer text is cut
WORK_BUDGET = 50_000  # node/relationship scans + creations per response (81 recorded pseudo-graphs: at most 35)
REPAIR_BUDGET = 300_000  # characters re-parsed by the line-by-line repair per response (~1.5 s of cypherast)
# What a pseudo-graph statement may contain (cypherast node kinds): patterns, literals, property
# maps, MATCH/WHERE to find nodes, SET/DELETE/RETURN. Anything else is recorded as an error and not
# executed: it reads outside the graph (LOAD CSV, CALL procedures: cypherast stubs or rejects them
# today) or makes work unbounded by the text (UNWIND/FOREACH/WITH/comprehensions multiply rows:
# "UNWIND [1,2,3] AS i" twenty times is 3^20 rows; + * ^ and replace() grow values: 10^1000000000).
_ALLOWED = {
    "Cypher", "Query", "Create", "Merge", "OnCreate", "OnMatch", "Match", "Where", "Set", "SetItem", "Delete",
    "Remove", "RemoveLabels", "Return", "Order", "Ordered", "Skip", "Limit", "Alias", "Star", "Pattern",
    "PathPattern", "NodePattern", "RelationshipPattern", "LabelExpression", "LabelPredicate", "Identifier",
    "Property", "PropertySelector", "Map", "List", "Literal", "Null", "Boolean", "Integer", "Float", "String",
    "Neg", "Not", "And", "Or", "Xor", "EQ", "NEQ", "LT", "LTE", "GT", "GTE", "In", "StartsWith", "EndsWith",
    "Contains", "IsNull", "Sub", "Div", "Mod", "Case", "Coalesce", "FunctionCall",
}
_GROWING_FUNCTIONS = {"range", "replace"}
_NAMES = {"LoadCsv": "LOAD CSV", "CallSubquery": "CALL { }", "Unwind": "UNWIND", "Foreach": "FOREACH", "With": "WITH",
          "Add": "+", "Mul": "*", "Pow": "^"}


def _refused(text: str) -> str | None:
    """Why a statement is not executed (anything outside ``_ALLOWED``), or None."""
    import cypherast

    try:
        trees = cypherast.parse(text, read="neo4j")
    except Exception:  # noqa: BLE001 - does not parse: nothing will run
        return None
    found, stack = [], list(trees)
    while stack:  # every node, also inside map entries and CASE branches (tuples, which walk() skips)
        n = stack.pop()
        if isinstance(n, (list, tuple)):
            stack.extend(n)
            continue
        if isinstance(n, dict):
            stack.extend(n.values())
            continue
        if not hasattr(type(n), "arg_types"):
            continue
        stack.extend(n.args.values())
        kind = type(n).__name__
        if kind == "CallProcedure":
            found.append(f"CALL {n.name}")
        elif kind == "FunctionCall" and str(n.name).lower() in _GROWING_FUNCTIONS:
            found.append(f"{str(n.name).lower()}()")
        elif kind not in _ALLOWED:
            found.append(_NAMES.get(kind, kind))
    if not found:
        return None
    return f"not executed: {', '.join(sorted(set(found)))} (a pseudo-graph only creates nodes and relationships)"


def _budget_graph(budget: int):
    """cypherast's in-memory graph, counting the nodes and relationships it scans or creates: past
    ``budget`` it raises, so a statement whose MATCHes multiply (``MATCH (a), (b), (c), (d)``) stops."""
    from cypherast.executor import Graph

    class BudgetGraph(Graph):
        def __init__(self) -> None:
            super().__init__()
            self.left = budget

        def _spend(self, n: int) -> None:
            self.left -= n
            if self.left < 0:
                raise RuntimeError(f"work budget exceeded ({budget:,} node/relationship visits): statement stopped")

        def create_node(self, *args, **kwargs):
            self._spend(1)
            return super().create_node(*args, **kwargs)

        def create_rel(self, *args, **kwargs):
            self._spend(1)
            return super().create_rel(*args, **kwargs)

        def all_nodes(self):
            out = super().all_nodes()
            self._spend(1 + len(out))
            return out

        def nodes_with_label(self, label):
            out = super().nodes_with_label(label)
            self._spend(1 + len(out))
            return out

        def out_rels(self, nid, typ=None):
            out = super().out_rels(nid, typ)
            self._spend(1 + len(out))
            return out

        def in_rels(self, nid, typ=None):
            out = super().in_rels(nid, typ)
            self._spend(1 + len(out))
            return out

    return BudgetGraph()


def cypher_to_triples(cypher: str) -> PseudoGraph:
    """Execute LLM-written Cypher in an empty in-memory graph and read back its triples.

    Statements are split on ``;``. A statement that does not parse is repaired line by line:
    lines are added one at a time and a line that breaks the parse is dropped (and listed), so one
    bad line does not lose the rest of the graph. Node properties other than the name become
    triples too (``population: 5380000`` → ``(Norway, population, 5380000)``).

    Bounded work, whatever the text: only the first ``MAX_CYPHER_CHARS`` characters are read,
    statements with what a pseudo-graph never needs (outside ``_ALLOWED``: LOAD CSV, CALL,
    UNWIND, WITH, + * ^, ...) are recorded as errors and not executed, the repair re-parses at most
    ``REPAIR_BUDGET`` characters (later lines are dropped untried), and a statement that scans or creates more than ``WORK_BUDGET``
    nodes/relationships is stopped (an error; what it created before stays)."""
    import cypherast

    pg = PseudoGraph(plan="", cypher=cypher)
    graph = _budget_graph(WORK_BUDGET)
    if len(cypher) > MAX_CYPHER_CHARS:
        pg.errors.append(f"Cypher cut to its first {MAX_CYPHER_CHARS:,} of {len(cypher):,} characters")
        cypher = cypher[:MAX_CYPHER_CHARS]
    statements = [s for s in re.split(r";\s*(?:\n|$)", cypher) if s.strip() and not all(
        line.strip().startswith("//") or not line.strip() for line in s.splitlines())]
    pg.statements = len(statements)
    repair_left = REPAIR_BUDGET
    for stmt in statements:
        text = stmt
        problem = _parses(text)
        if problem:
            pg.errors.append(problem)
            pg.failed_statements += 1
            kept: list[str] = []
            unchecked = 0
            for line in stmt.splitlines():
                if not line.strip() or line.strip().startswith("//"):
                    continue
                candidate = "\n".join(kept + [line])
                if len(candidate) > repair_left:  # each try re-parses the kept lines: quadratic
                    unchecked += 1
                    pg.dropped_lines.append(line.strip())
                    continue
                repair_left -= len(candidate)
                if _parses(candidate) is None:
                    kept.append(line)
                else:
                    pg.dropped_lines.append(line.strip())
            if unchecked:
                pg.errors.append(f"repair budget spent: {unchecked} lines dropped without trying them")
            text = "\n".join(kept)
            if not text.strip():
                continue
        refused = _refused(text)
        if refused:
            pg.errors.append(refused)
            continue
        try:
            for _ in cypherast.run(text, graph=graph, read="neo4j"):
                pass
        except Exception as exc:
            pg.errors.append(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    names = {nid: _node_name(n) for nid, n in graph.nodes.items()}
    pg.nodes = list(dict.fromkeys(names.values()))
    seen = set()
    for rel in graph.relationships.values():
        t = (names[rel.start], rel.type.replace("_", " ").lower(), names[rel.end])
        if t not in seen:
            seen.add(t)
            pg.triples.append(t)
    for nid, node in graph.nodes.items():
        for key, value in node.props.items():
            if key in ("name", "title") or value in (None, ""):
                continue
            t = (names[nid], key.replace("_", " ").lower(), str(value))
            if t not in seen:
                seen.add(t)
                pg.triples.append(t)
    return pg


def parse_pseudo_graph(generation: Generation) -> PseudoGraph:
    """Plan + Cypher out of the response, then the Cypher's triples."""
    plan, cypher = split_plan_and_cypher(generation.text)
    pg = cypher_to_triples(cypher)
    pg.plan = plan
    return pg


def cypher_statistics(records: list[dict[str, Any]]) -> dict[str, Any]:
    """How the pseudo-graph Cypher of a PG&AKV run fared: from the ``cypher_to_triples`` stage of
    each run record (used by `14_pgakv_errors` and the `pgakv_t2` bench report)."""
    outs = [next(s["output"] for s in r["trace"] if s["name"] == "cypher_to_triples") for r in records]
    statements = sum(o["statements"] for o in outs)
    failed = sum(o["failed_statements"] for o in outs)
    return {
        "outputs": len(outs),
        "with >=1 triple": sum(1 for o in outs if o["triples"]),
        "no Cypher in reply": sum(1 for o in outs if o["error"] == "no_cypher"),
        "Cypher but no triples": sum(1 for o in outs if o["error"] in ("cypher_error", "empty_graph")),
        "statements": statements,
        "statements parsed as written": statements - failed,
        "statements repaired line by line": failed,
        "lines dropped": sum(len(o["dropped_lines"]) for o in outs),
        "mean triples per sketch": round(sum(len(o["triples"]) for o in outs) / max(1, len(outs)), 2),
    }


# ---------------------------------------------------------------------------------------------
# Reading finished runs: a stage's output, and pruning run again on recorded retrieval (no LLM call)
# ---------------------------------------------------------------------------------------------
def stage_output(record: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The output of stage ``name`` in a run record's trace (``None`` if the run skipped it)."""
    return next((s["output"] for s in record["trace"] if s["name"] == name), None)


def reprune(record: dict[str, Any], k: int | None = None, threshold: float = 0.7,
            extra_k: int = 0) -> GroundGraph:
    """Step 3 again on a finished record's retrieved triples, with other settings (no LLM call):
    ``k`` subjects (None: subjects of ``G_p``, plus ``extra_k``) and the mean-cosine ``threshold``."""
    pg_out = stage_output(record, "cypher_to_triples")
    pg = PseudoGraph("", pg_out["cypher"], [tuple(t) for t in pg_out["triples"]])
    if k is None:
        k = max(1, len({s for s, _, _ in pg.triples})) + extra_k
    sq = stage_output(record, "semantic_query")
    return prune(Retrieval(sq["seeds"], sq["candidates"], sq["hits"]), pg, k, threshold)


# ---------------------------------------------------------------------------------------------
# 2. Semantic querying
# ---------------------------------------------------------------------------------------------
def verbalise_triple(t: PTriple) -> str:
    return f"{t[0]} {t[1]} {t[2]}"


def link_entities(names: list[str], kg) -> list[str]:
    """KG entities whose label (or alias) matches a name: exact or normalised, or fuzzy ≥ 0.9."""
    out: list[str] = []
    for name in names:
        if not name or len(name) < 2 or name.isdigit():
            continue
        for iri, score, _ in kg.lookup(name, limit=3):
            if score >= 0.9 and iri not in out:
                out.append(iri)
    return out


def question_entities(question: str, kg) -> list[str]:
    """KG entities named in the question text, without the dataset's annotations: the longest word
    spans that match a label or alias exactly or normalised (one-word spans capitalised; the span
    linker of :func:`kgqa_lib.methods.fusic.link_entities`), every entity sharing the label — as
    the pruning's top-k step is what picks among namesakes. Nodes without a fact (a relation's own
    node, labelled "capital") are left out."""
    from .fusic import link_entities as link_spans

    link = link_spans(Question("", question, []), kg, None)
    return list(dict.fromkeys(c["iri"] for m in link.mentions for c in m.candidates if c["degree"] > 0))


def base_seeds(question: Question, names: list[str], kg, s: KGAnswerSettings) -> list[str]:
    """The entities ``G_base`` is built around: the annotated topic entities (``use_topic_entities``)
    and ``names`` (the pseudo-graph's nodes) linked by label, then, with ``link_question``, the
    entities the question text names (:func:`question_entities`)."""
    seeds = link_entities((list(question.topic_entities) if s.use_topic_entities else []) + list(names), kg)
    if s.link_question:
        seeds += [e for e in question_entities(question.question, kg) if e not in seeds]
    return seeds


@dataclass
class Retrieval:
    seeds: list[str]  # linked entity labels
    candidates: int  # KG triples searched
    hits: list[dict[str, Any]]  # {pseudo, triple (s, r, o), subject iri, score}

    def as_dict(self) -> dict[str, Any]:
        return {"seeds": self.seeds, "candidates": self.candidates, "hits": self.hits}


def subgraph(kg, seeds: list[str], max_triples: int = 3000) -> list:
    """The neighbourhood the paper extracts per question: triples around the linked entities, in
    both directions, plus the outgoing triples of their neighbours (two hops), capped."""
    triples, seen = [], set()

    def add(ts):
        for t in ts:
            key = (t.s.iri, t.r.iri, t.o.iri)
            if key not in seen and len(triples) < max_triples:
                seen.add(key)
                triples.append(t)

    for e in seeds:
        add(kg.triples_around(e, "both"))
    for t in list(triples):
        for node in (t.s, t.o):
            if not node.literal and node.iri not in seeds:
                add(kg.triples_around(node.iri, "out", limit=40))
    return triples


_KG_INDEXES: dict[tuple[int, int], tuple[list, Any]] = {}  # (id(kg), id(embedder)) → (triples, EmbeddingIndex)


def kg_index(kg, embedder) -> tuple[list, Any]:
    """Every triple of ``kg`` (``kg.all_triples()``) and their embedding index, built once per process
    (the embeddings come from the embedder's on-disk cache after the first time)."""
    from ..embed.embedder import EmbeddingIndex

    key = (id(kg), id(embedder))
    if key not in _KG_INDEXES:
        if not hasattr(kg, "all_triples"):
            raise ValueError(f"search_scope=kg needs a KG that can list its triples (an embedded KG); "
                             f"{type(kg).__name__} cannot: use search_scope=base")
        triples = kg.all_triples()
        texts = [kg.verbalise(t, "sentence").rstrip(".") for t in triples]
        _KG_INDEXES[key] = (triples, EmbeddingIndex(texts, embedder, progress=len(texts) > 20000))
    return _KG_INDEXES[key]


def semantic_query(question: Question, pg: PseudoGraph, ctx: Context, top_k: int = 10) -> Retrieval:
    """Top-``top_k`` KG triples per pseudo-triple by cosine of Sentence-BERT embeddings, searched in
    ``G_base`` (``search_scope=base``) or in the whole KG (``search_scope=kg``)."""
    from ..embed.embedder import EmbeddingIndex

    kg, embedder = ctx.kg, ctx.embedder
    s = PGAKVSettings.of(ctx)
    seeds = base_seeds(question, pg.nodes, kg, s)
    if s.search_scope == "kg":
        cands, index = kg_index(kg, embedder)
    else:
        cands, index = subgraph(kg, seeds, s.max_candidates), None
    if not cands or not pg.triples:
        return Retrieval([kg.label(s) for s in seeds], len(cands), [])
    if index is None:
        index = EmbeddingIndex([kg.verbalise(t, "sentence").rstrip(".") for t in cands], embedder)
    results = index.search([verbalise_triple(t) for t in pg.triples], k=top_k)
    hits = []
    for i, res in enumerate(results):
        for j, _, score in res:
            t = cands[j]
            hits.append({"pseudo": i, "triple": (t.s.label, t.r.label, t.o.label), "subject": t.s.iri,
                         "score": round(float(score), 4)})
    return Retrieval([kg.label(s) for s in seeds], len(cands), hits)


# ---------------------------------------------------------------------------------------------
# 3. Two-step pruning
# ---------------------------------------------------------------------------------------------
@dataclass
class GroundGraph:
    subjects: list[dict[str, Any]]  # {subject, label, count, mean_score, kept}
    triples: list[PTriple]
    k: int
    threshold: float

    def as_dict(self) -> dict[str, Any]:
        return {"subjects": self.subjects, "triples": [list(t) for t in self.triples], "k": self.k,
                "threshold": self.threshold}


def prune(retrieval: Retrieval, pg: PseudoGraph, k: int | None = None, threshold: float = 0.7,
          extra_k: int = 0) -> GroundGraph:
    """Step 1: keep the ``k`` subjects with the most retrieved triples (``k`` = number of distinct
    subjects in ``G_p``, plus ``extra_k``). Step 2: drop subjects whose mean cosine is under ``threshold``. The ground
    graph lists the kept subjects' triples, best subject first."""
    if k is None:
        k = max(1, len({s for s, _, _ in pg.triples})) + extra_k
    by_subject: dict[str, list[dict]] = defaultdict(list)
    for h in retrieval.hits:
        by_subject[h["subject"]].append(h)
    ranked = sorted(by_subject.items(), key=lambda kv: (-len(kv[1]), -max(h["score"] for h in kv[1]), kv[0]))
    subjects, triples = [], []
    for rank, (subj, hs) in enumerate(ranked):
        mean = sum(h["score"] for h in hs) / len(hs)
        kept = rank < k and mean >= threshold
        subjects.append({"subject": subj, "label": hs[0]["triple"][0], "count": len(hs),
                         "mean_score": round(mean, 4), "kept": kept, "in_top_k": rank < k})
    order = sorted((s for s in subjects if s["kept"]), key=lambda s: -s["mean_score"])
    for s in order:
        seen = []
        for h in sorted(by_subject[s["subject"]], key=lambda h: -h["score"]):
            t = tuple(h["triple"])
            if t not in seen:
                seen.append(t)
        triples.extend(seen)
    return GroundGraph(subjects, triples, k, threshold)


# ---------------------------------------------------------------------------------------------
# 4. Verification, 5. answer
# ---------------------------------------------------------------------------------------------
def format_triples(triples: list[PTriple]) -> str:
    return "\n".join(f"({s} | {r} | {o})" for s, r, o in triples) or "(none)"


def parse_triples(text: str) -> tuple[list[PTriple], int]:
    """``(s | r | o)`` lines → triples; returns the triples and the number of lines that were not triples."""
    out, bad = [], 0
    for line in text.splitlines():
        line = re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", line).strip()
        if not line:
            continue
        if line.startswith("(") and line.endswith(")"):
            line = line[1:-1]
        parts = [p.strip() for p in line.split("|")]
        if len(parts) == 3 and all(parts):
            t = (parts[0], parts[1], parts[2])
            if t not in out:
                out.append(t)
        else:
            bad += 1
    return out, bad


@dataclass
class Verification:
    generation: Generation
    triples: list[PTriple]
    unparsed_lines: int
    deleted: list[PTriple]
    added: list[PTriple]

    def as_dict(self) -> dict[str, Any]:
        return {"generation": self.generation.as_dict(), "triples": [list(t) for t in self.triples],
                "unparsed_lines": self.unparsed_lines, "deleted": [list(t) for t in self.deleted],
                "added": [list(t) for t in self.added]}


def verify(question: str, pg: PseudoGraph, ground: GroundGraph, ctx: Context) -> Verification:
    """The LLM keeps, deletes, replaces and adds triples of ``G_p`` using the ground graph ``G_g``."""
    from ..llm.prompting import load_prompt

    prompt = load_prompt("pgakv_verify")
    s = PGAKVSettings.of(ctx)
    limit = s.ground_limit
    if not pg.triples and not ground.triples:  # nothing to check: no LLM call
        return Verification(Generation("", "", 0, 0, True), [], 0, [], [])
    messages = prompt.messages(question=question, pseudo_graph=format_triples(pg.triples),
                               ground_graph=format_triples(ground.triples[:limit]))
    r = ctx.llm.chat(messages, max_tokens=s.verify_max_tokens, temperature=0.0, seed=ctx.seed)
    gen = Generation(messages[-1]["content"], r.text, r.prompt_tokens, r.completion_tokens, r.cache_hit)
    triples, bad = parse_triples(r.text)
    if not triples:  # nothing usable: fall back to the ground graph, then the pseudo-graph (counted as unparsed)
        triples = list(ground.triples[:limit]) or list(pg.triples)
    key = lambda t: tuple(x.lower() for x in t)  # noqa: E731
    before, after = {key(t) for t in pg.triples}, {key(t) for t in triples}
    return Verification(gen, triples, bad, [t for t in pg.triples if key(t) not in after],
                        [t for t in triples if key(t) not in before])


def answer_from_triples(question: Question, triples: list[PTriple], ctx: Context) -> Generation:
    """Answer from the verified graph ``G_f``: braces for factoid questions, prose for open ones."""
    from ..llm.prompting import load_prompt

    name = "pgakv_answer_open" if question.kind == "open" else "pgakv_answer"
    messages = load_prompt(name).messages(triples=format_triples(triples), question=question.question)
    max_tokens = KGAnswerSettings.of(ctx).answer_max_tokens
    max_tokens = (160 if question.kind == "open" else 64) if max_tokens is None else max_tokens
    r = ctx.llm.chat(messages, max_tokens=max_tokens, temperature=0.0, seed=ctx.seed)
    return Generation(messages[-1]["content"], r.text, r.prompt_tokens, r.completion_tokens, r.cache_hit)


def _final(question: Question, gen: Generation, tr: Tracer) -> MethodResult:
    if question.kind == "open":
        text = gen.text.strip()
        return MethodResult([text] if text else [], text, tr.stages, None if text else "empty")
    parsed = tr.record("parse_answers", extract_braced_answers, gen.text)
    return MethodResult(parsed.items, gen.text, tr.stages, parsed.error)


def _require_kg(ctx: Context, method: str) -> None:
    if ctx.kg is None or ctx.embedder is None:
        raise ValueError(f"{method} needs a knowledge graph and an embedder: Context(llm=..., kg=load_named(...), "
                         "embedder=Embedder()), or `kgqa run --kg miniworld`")


@register_method("pgakv", prompts=("pgakv_pseudo", "pgakv_verify", "pgakv_answer", "pgakv_answer_open"),
                 settings=PGAKVSettings, needs=("kg", "embedder"))
def pgakv(q: Question, ctx: Context) -> MethodResult:
    """The full method. Settings: ``verify`` (default True; False = the pseudo-graph-only ablation,
    answering from ``G_g`` ∪ ``G_p``), ``top_k`` (10), ``threshold`` (0.7), ``k_subjects`` (None:
    the number of subjects in ``G_p``), ``use_topic_entities`` (True), ``link_question`` (False),
    ``kg_context`` (``ground``; ``none``: the paper's Table 4 "Pseudo-Graph" row, answering from ``G_p``
    alone — no KG is needed)."""
    s = PGAKVSettings.of(ctx)
    if s.kg_context != "none":
        _require_kg(ctx, "pgakv")
    tr = Tracer()
    gen = tr.record("generate_pseudo_graph", generate_pseudo_graph, q.question, ctx)
    pg = tr.record("cypher_to_triples", parse_pseudo_graph, gen)
    if s.kg_context == "none":  # the paper's Table 4 "Pseudo-Graph": the model's own graph, no KG
        final = list(pg.triples)
    else:
        ret = tr.record("semantic_query", semantic_query, q, pg, ctx, s.top_k)
        ground = tr.record("prune", prune, ret, pg, s.k_subjects, s.threshold, s.k_extra)
        if s.verify:
            final = tr.record("verify", verify, q.question, pg, ground, ctx).triples
        else:
            final = list(ground.triples[:s.ground_limit]) + [t for t in pg.triples if t not in ground.triples]
    gen_a = tr.record("answer", answer_from_triples, q, final, ctx)
    res = _final(q, gen_a, tr)
    if res.error is None and pg.error:
        res.error = pg.error  # counted as malformed Cypher, although an answer was still produced
    return res


# ---------------------------------------------------------------------------------------------
# Baselines of the paper beyond IO/CoT: Self-Consistency and question semantic matching
# ---------------------------------------------------------------------------------------------
def majority_vote(answer_lists: list[list[str]]) -> tuple[list[str], dict[str, int]]:
    """The answer set given most often (by its normalised first answer); ties → earliest sample."""
    from ..text import normalize_answer as normalize

    votes = Counter(normalize(a[0]) for a in answer_lists if a)
    if not votes:
        return [], {}
    best = max(votes.values())
    for a in answer_lists:
        if a and votes[normalize(a[0])] == best:
            return a, dict(votes)
    return [], dict(votes)


def most_central(texts: list[str]) -> int:
    """For open answers: the sample with the highest mean ROUGE-L to the other samples."""
    from ..text import rouge_l

    if len(texts) < 2:
        return 0
    scores = [sum(rouge_l(t, [u]) for j, u in enumerate(texts) if j != i) for i, t in enumerate(texts)]
    return max(range(len(texts)), key=lambda i: (scores[i], -i))


@register_method("sc", prompts=("cot", "cot_open"), settings=SCSettings)
def self_consistency(q: Question, ctx: Context) -> MethodResult:
    """Self-Consistency: ``samples`` (3) CoT answers at temperature 0.7 — each a distinct cache
    entry (its sample index is part of the key) — then a majority vote."""
    tr = Tracer()
    s = SCSettings.of(ctx)
    n = s.samples
    name = "cot_open" if q.kind == "open" else "cot"
    gens = []
    for i, (gen, seconds) in enumerate(generate_samples(q.question, ctx, name, s.max_tokens, 0.7, n)):
        tr.stages.append(Stage(f"sample_{i}", gen, seconds))  # one stage per sample, timed by its LLM call
        gens.append(gen)
    if q.kind == "open":
        texts = [_open_text(g.text) for g in gens]
        best = tr.record("vote", most_central, texts)
        return MethodResult([texts[best]] if texts[best] else [], texts[best], tr.stages, None if texts[best] else "empty")
    parsed = [extract_braced_answers(g.text) for g in gens]
    answers, votes = tr.record("vote", majority_vote, [p.items for p in parsed])
    error = None if answers else "malformed"
    return MethodResult(answers, "\n---\n".join(g.text for g in gens), tr.stages, error)


def match_question(question: Question, ctx: Context, top_n: int = 10) -> Retrieval:
    """QSM: embed the question itself and take the ``top_n`` closest KG triples around the
    entities it names."""
    from ..embed.embedder import EmbeddingIndex

    kg, s = ctx.kg, QSMSettings.of(ctx)
    seeds = base_seeds(question, [], kg, s)
    if s.search_scope == "kg":  # the whole KG, as PG&AKV's semantic querying with the same setting
        cands, index = kg_index(kg, ctx.embedder)
    else:
        cands, index = subgraph(kg, seeds, s.max_candidates), None
    if not cands:
        return Retrieval([kg.label(s) for s in seeds], 0, [])
    if index is None:
        index = EmbeddingIndex([kg.verbalise(t, "sentence").rstrip(".") for t in cands], ctx.embedder)
    hits = [{"pseudo": -1, "triple": (cands[j].s.label, cands[j].r.label, cands[j].o.label),
             "subject": cands[j].s.iri, "score": round(float(s), 4)} for j, _, s in index.search(question.question, k=top_n)[0]]
    return Retrieval([kg.label(s) for s in seeds], len(cands), hits)


@register_method("qsm", prompts=("pgakv_answer", "pgakv_answer_open"), settings=QSMSettings, needs=("kg", "embedder"))
def qsm(q: Question, ctx: Context) -> MethodResult:
    """Question semantic matching: the question's top-10 KG triples, then the same answer prompt."""
    _require_kg(ctx, "qsm")
    tr = Tracer()
    ret = tr.record("match_question", match_question, q, ctx, QSMSettings.of(ctx).top_k)
    triples = [tuple(h["triple"]) for h in ret.hits]
    gen = tr.record("answer", answer_from_triples, q, triples, ctx)
    return _final(q, gen, tr)


# ---------------------------------------------------------------------------------------------
# PG&AKV on the MetaQA KB: a dev part for its settings
# ---------------------------------------------------------------------------------------------
def metaqa_dev_line(i: int) -> bool:
    """The MetaQA dev lines PG&AKV chooses its settings on: every tenth line — the lines the Keqing
    benchmark keeps as its pool, disjoint from the reported questions (the reported MetaQA questions of every table
    are drawn from the other lines, ``keqing:metaqa:Nhop``)."""
    return i % 10 == 0


def pgakv_dataset(source: str = "metaqa", part: str = "1hop", split: str = "dev") -> Dataset:
    """``pgakv:metaqa:2hop:dev``: the MetaQA dev questions of the lines :func:`metaqa_dev_line` keeps
    (sample them with ``--sample``); disjoint from every reported MetaQA question."""
    if source != "metaqa" or split != "dev" or part not in ("1hop", "2hop", "3hop"):
        raise DatasetError(f"pgakv:{source}:{part}:{split} is no dataset: use pgakv:metaqa:1hop:dev, "
                           "pgakv:metaqa:2hop:dev or pgakv:metaqa:3hop:dev")
    ds = load_dataset(f"metaqa:{part}:dev")
    return Dataset(f"pgakv:metaqa:{part}:dev", [q for i, q in enumerate(ds.questions) if metaqa_dev_line(i)],
                   kg="metaqa", source_files=ds.source_files)


register("pgakv", pgakv_dataset)
