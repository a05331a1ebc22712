"""FuSIC-KBQA (Patidar et al., 2024) at benchmark scale with the local model: analogues of the
paper's Table 1 (how far each target is from its source, no LLM: the measurement ``fusic_table1``),
Table 2 (configurations, zero- and few-shot, KB-BINDER, gf-LLM, the naive FS-ICL baseline), Table 3
(ablations, few- and zero-shot, paired), the EGF-rounds curve and the number of exemplars of sec.
4.2.2, Table 7 (retrieval error rate before and after LLM re-ranking) and the costs per stage
(appendix A.5, Limitations).

Pairs (:mod:`kgqa_lib.methods.fusic.tasks`): ``mw-wd>metaqa`` — the mini-world (Wikidata-style, all
domains) → MetaQA's WikiMovies KB, 100 MetaQA *dev* questions per hop, our reported part of a seeded
dev sample (``fusic:mw-wd>metaqa:test-<N>hop --sample 100``: "test" there names the task's reported
part, not MetaQA's test set, which is not used; ``reported-<N>hop`` loads the same dataset); ``grailqa>grailqa-tech`` (all 124 reported
questions, GrailQA dev questions on a fragment of their gold facts); the mini-world pairs with every
target question outside the pool (our reported part). Every target also has a dev part for choosing
settings (``fusic:<task>:dev``, :func:`~kgqa_lib.methods.fusic.tasks.dev_questions`; none of the
cells runs on it), and the report lists the choices made on the reported questions. Cells are
declared in the order they should run (``kgqa bench run`` runs them in order): the main configuration (one dense retriever, few-shot: the paper's FuSIC(T)) first, then on
MetaQA 3-hop the same with candidate paths of up to 3 relations (``fs_dense_paths3``, the setting
``max_path_hops=3``; the paper enumerates 2-hop paths, so a 3-hop gold path is never a candidate),
paired against its depth-2 cell in the report. Cells taken out of the table are in :data:`WITHDRAWN`,
with the reason the report prints.

Every record is *stripped* (:func:`strip`): ids, metrics, costs, the calls and seconds per stage, the
status of each generation/feedback attempt and whether its query repeats the attempt before's, and —
computed when the record is saved, from the question's gold KB elements — counts only: is the gold
topic linked, are the gold path / relations / types in each retriever's top K, its top k before
re-ranking and the LLM's top k, does the final query use the gold relations. No question text,
entity name, query or answer is kept, so the report regenerates from the records without the data."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from ..evaluate.report import format_gain, paired_gain, summarize
from ..kg.grailqa_fragment import PAPER_TECH_DOMAINS, TECH_DOMAINS
from .baselines import KEEP, RUN_ARGS, kbbinder_profile, strip as strip_baseline, summary_of
from .core import MAX_KEPT_CHARS, Cell, Effect, Records, Table, keep_prediction, register
from .core import partial as cell_partial
from .core import FRAGMENT  # what a row on GrailQA's fragment is: its KB holds the questions' own gold facts
from .result_table import ResultTable, table

# ---------------------------------------------------------------- the cells
# pair: (transfer task, dataset spec, planned questions, further `kgqa run` arguments, label)
PAIRS = {
    **{f"metaqa{h}": ("mw-wd>metaqa", f"fusic:mw-wd>metaqa:test-{h}hop", 100, ("--sample", "100"),
                      f"mini-world (Wikidata-style) → MetaQA dev (our reported part), {h}-hop") for h in (1, 2, 3)},
    "gtech": ("grailqa>grailqa-tech", "fusic:grailqa>grailqa-tech:test", 124, (),
              f"GrailQA non-technical → GrailQA-Tech ({FRAGMENT})"),
    "geo2cinema": ("geo-wd>cinema-fb", "fusic:geo-wd>cinema-fb:test", 80, (),
                   "mini-world geography (Wikidata-style) → cinema (Freebase-style)"),
    "cinema2geo": ("cinema-fb>geo-wd", "fusic:cinema-fb>geo-wd:test", 149, (),
                   "mini-world cinema (Freebase-style) → geography (Wikidata-style)"),
}
#: short names of the pairs, for sentences and legends
SHORT = {"metaqa1": "MetaQA 1-hop", "metaqa2": "MetaQA 2-hop", "metaqa3": "MetaQA 3-hop", "gtech": "GrailQA-Tech",
         "geo2cinema": "geography → cinema", "cinema2geo": "cinema → geography"}


# configuration: (method, --set values besides the task, label)
CONFIGS = {
    "fs_dense": ("fusic", ("shots=5", "retrievers=dense"), "FuSIC, dense retriever (≈ FuSIC(T)), few-shot"),
    "fs_dense_paths3": ("fusic", ("shots=5", "retrievers=dense", "max_path_hops=3"),
                        "FuSIC, dense retriever, few-shot, candidate paths ≤ 3 hops (deviation; the paper's: 2)"),
    "zs_dense": ("fusic", ("shots=0", "retrievers=dense"), "FuSIC, dense retriever (≈ FuSIC(T)), zero-shot"),
    "fs_naive": ("fusic", ("shots=5", "retrievers=none", "egf_rounds=0"),
                 "naive LLM FS-ICL (no retrieval, no feedback), few-shot"),
    "fs_naive_egf": ("fusic", ("shots=5", "retrievers=none"),
                     "naive LLM FS-ICL with FuSIC's feedback rounds (deviation; the paper's baseline has none), few-shot"),
    "fs_bm25": ("fusic", ("shots=5", "retrievers=bm25"), "FuSIC, BM25 alone (second retriever, ≈ FuSIC(P)), few-shot"),
    "fs_both": ("fusic", ("shots=5", "retrievers=bm25,dense"), "FuSIC, BM25 + dense (≈ FuSIC(T,P)), few-shot"),
    "zs_bm25": ("fusic", ("shots=0", "retrievers=bm25"), "FuSIC, BM25 alone (≈ FuSIC(P)), zero-shot"),
    "zs_both": ("fusic", ("shots=0", "retrievers=bm25,dense"), "FuSIC, BM25 + dense (≈ FuSIC(T,P)), zero-shot"),
    "fs_dense_values": ("fusic", ("shots=5", "retrievers=dense", "show_path_values=true"),
                        "FuSIC, dense retriever, few-shot, paths shown with the entities they reach (deviation; the "
                        "paper's: SPARQL programs)"),
    "fs_dense_paperfb": ("fusic", ("shots=5", "retrievers=dense", "feedback=paper"),
                         "FuSIC, dense retriever, few-shot, the paper's feedback (a query with no answer only, one fixed "
                         "message; ours: every failure, with what failed)"),
    "fs_dense_rrsexpr": ("fusic", ("shots=5", "retrievers=dense", "rerank_paths_as=sexpr"),
                         "FuSIC, dense retriever, few-shot, re-ranking reads the paths as s-expressions (the paper's "
                         "form; ours: SPARQL)"),
    "io": ("io", (), "direct answering (IO): the question alone, no KB, no exemplars"),
    "langchain": ("langchain_sparql", (), "LangChain's GraphSparqlQAChain, its default prompts (no exemplars, no "
                                          "entity linking)"),
    "fs_dense_sexpr": ("fusic", ("shots=5", "retrievers=dense", "language=sexpr", "paths_as=logical_form"),
                       "w/o SPARQL (s-expressions)"),
    "fs_dense_sexpr_sqlpaths": ("fusic", ("shots=5", "retrievers=dense", "language=sexpr"),
                                "w/o SPARQL, the paths still shown as SPARQL (deviation)"),
    "fs_dense_noegf": ("fusic", ("shots=5", "retrievers=dense", "egf_rounds=0"), "w/o EGF"),
    "fs_dense_norr": ("fusic", ("shots=5", "retrievers=dense", "rerank=false"), "w/o re-ranking"),
    **{f"fs_dense_shots{n}": ("fusic", (f"shots={n}", "retrievers=dense"),
                              f"FuSIC, dense retriever, {n} target shots (fine-tuning; the same 5 exemplars)")
       for n in (25, 100)},
    "fs_dense_simex": ("fusic", ("shots=5", "retrievers=dense", "exemplar_choice=similarity"),
                       "FuSIC, dense retriever, few-shot, exemplars ordered by similarity to the question (deviation; "
                       "the paper's: static)"),
    "fs_dense_dsex": ("fusic", ("shots=5", "retrievers=dense", "exemplar_sparql=dataset"),
                      "FuSIC, dense retriever, few-shot, exemplars as GrailQA's own gold SPARQL (deviation; the paper's: "
                      "concise SPARQL)"),
    "fs_naive_dsex": ("fusic", ("shots=5", "retrievers=none", "egf_rounds=0", "exemplar_sparql=dataset"),
                      "naive LLM FS-ICL, exemplars as GrailQA's own gold SPARQL (deviation; FuSIC's: concise SPARQL)"),
    "kbbinder_fs": ("kbbinder", ("shots=5",), "KB-BINDER(-R), 6 drafts voted, few-shot"),
    "kbbinder_zs": ("kbbinder", ("shots=0",), "KB-BINDER(-R), 6 drafts voted, zero-shot (source exemplars)"),
    # the number of exemplars in the prompt (sec. 4.2.2); 5 = fs_dense
    **{f"fs_dense_ex{n}": ("fusic", ("shots=5", "retrievers=dense", f"exemplars={n}"),
                           f"FuSIC, dense retriever, few-shot, {n} exemplar{'' if n == 1 else 's'} in the prompt "
                           "(the paper's: 5)") for n in (0, 1, 3)},
    # Table 3's zero-shot ablations: one setting of zs_dense changed each
    "zs_dense_sexpr": ("fusic", ("shots=0", "retrievers=dense", "language=sexpr", "paths_as=logical_form"),
                       "w/o SPARQL (s-expressions), zero-shot"),
    "zs_dense_noegf": ("fusic", ("shots=0", "retrievers=dense", "egf_rounds=0"), "w/o EGF, zero-shot"),
    "zs_dense_norr": ("fusic", ("shots=0", "retrievers=dense", "rerank=false"), "w/o re-ranking, zero-shot"),
    # gf-LLM (Table 2; sec. 4.1, appendix A.3): the same retriever's top k, s-expressions, one call, BM25 exemplars
    **{f"{k}_gfllm": ("fusic", (f"shots={n}", "retrievers=dense", "rerank=false", "egf_rounds=0", "language=sexpr",
                                "paths_as=logical_form", "exemplar_choice=bm25"),
                      f"gf-LLM: the dense retriever's top k, s-expressions, one LLM call, exemplars by BM25, {label}")
       for k, n, label in (("fs", 5, "few-shot"), ("zs", 0, "zero-shot"))},
}
METAQA = ("metaqa1", "metaqa2", "metaqa3")
ABLATIONS = ("fs_dense_sexpr", "fs_dense_noegf", "fs_dense_norr")
#: the number of target shots (below our Table 3 analogue; no row of the paper's Table 3): "shots
#: 0/5/25/100 where the pool allows" — MetaQA only (its reserve, tasks.SHOT_RESERVE; the other targets hold a
#: pool of 10): shots → the cell's configuration
SHOTS = {0: "zs_dense", 5: "fs_dense", 25: "fs_dense_shots25", 100: "fs_dense_shots100"}
#: the cell a configuration's gain is paired against in the Table 2 analogue (default: fs_dense)
#: the number of exemplars in the generation prompt (sec. 4.2.2: the paper's study of shots, FuSIC-KBQA(T,P))
#: → the cell's configuration; all with the retriever fine-tuned on the same 5 target shots
EXEMPLARS = {0: "fs_dense_ex0", 1: "fs_dense_ex1", 3: "fs_dense_ex3", 5: "fs_dense"}
ZS_ABLATIONS = ("zs_dense_sexpr", "zs_dense_noegf", "zs_dense_norr")  # Table 3, zero-shot
GFLLM = {"few-shot": ("fs_gfllm", "fs_dense"), "zero-shot": ("zs_gfllm", "zs_dense")}  # gf-LLM → its FuSIC(T) cell
BASELINE_OF = {"kbbinder_zs": "zs_dense", "zs_bm25": "zs_dense", "zs_both": "zs_dense", "fs_naive_dsex": "fs_naive",
               **{c: "zs_dense" for c in (*ZS_ABLATIONS, "zs_gfllm")}}
MINIWORLD = ("geo2cinema", "cinema2geo")
#: Table 2's main rows, in the order notebook 21's figure shows them (the deviations are in its table only)
MAIN_CONFIGS = ("fs_dense", "zs_dense", "fs_bm25", "zs_bm25", "fs_both", "zs_both", "fs_naive", "kbbinder_fs",
                "kbbinder_zs", "io", "langchain")
#: the rows of the paper's Table 2 among ours (the other cells are deviations, ablations and sweeps)
TABLE2_CONFIGS = (*MAIN_CONFIGS, "fs_gfllm", "zs_gfllm")
#: our labelled deviations from Table 2's configurations (each one setting of a Table 2 row changed), shown in the
#: Table 2 analogue after its rows; the ablations, the target shots and the exemplar counts have their own sections
TABLE2_DEVIATIONS = ("fs_dense_paths3", "fs_dense_values", "fs_dense_paperfb", "fs_dense_rrsexpr", "fs_naive_egf",
                     "fs_naive_dsex", "fs_dense_dsex")
PAPER_PATH_HOPS = 2  # TIARA "enumerates 2-hop paths in the KB from each candidate entity" (appendix A.1.1)
DEPTH = {"fs_dense_paths3": ("fs_dense", 3)}  # deviation cell → (its paper-default cell, max_path_hops)
#: the configurations with one retriever the MetaQA target is checked on ("with one retriever")
TARGET_CONFIGS = ("fs_dense", *DEPTH, "fs_bm25", "zs_dense", "zs_bm25", SHOTS[25], SHOTS[100])
ORDER = (  # priority: the bench runs the cells in this order
    [(p, "fs_dense") for p in METAQA] + [("metaqa3", "fs_dense_paths3")]  # 1-/2-hop: WITHDRAWN
    + [(p, "zs_dense") for p in METAQA] + [("gtech", "fs_dense")]
    + [(p, "fs_naive") for p in (*METAQA, "gtech")]
    + [(p, c) for c in ("fs_bm25", "fs_both") for p in (*METAQA, "gtech")]
    + [(p, c) for p in MINIWORLD for c in ("fs_dense", "zs_dense")] + [("gtech", "zs_dense")]
    + [(p, "io") for p in METAQA]  # a peer number on MetaQA with the same model: one short call
    + [(p, "langchain") for p in METAQA]  # the other peer: LangChain's SPARQL chain, 2-3 calls
    + [(p, c) for c in ABLATIONS for p in (*METAQA, "gtech")]
    + [(p, SHOTS[n]) for n in (100, 25) for p in METAQA]
    # the rest of Table 2's grid: every pair zero- and few-shot with each retriever, the naive baseline
    + [(p, c) for c in ("zs_bm25", "zs_both") for p in (*METAQA, "gtech")]
    + [(p, c) for p in MINIWORLD for c in ("fs_naive", "fs_bm25", "fs_both", "zs_bm25", "zs_both")]
    # the paper's remaining experiments, on MetaQA's hops and GrailQA-Tech: the number of exemplars in the prompt
    # (sec. 4.2.2), the zero-shot ablations (Table 3), gf-LLM few- and zero-shot (Table 2)
    + [(p, EXEMPLARS[n]) for n in (0, 1, 3) for p in (*METAQA, "gtech")]
    + [(p, c) for c in ZS_ABLATIONS for p in (*METAQA, "gtech")]
    + [(p, GFLLM[k][0]) for k in GFLLM for p in (*METAQA, "gtech")]
    + [(p, "fs_dense_values") for p in METAQA]
    + [(p, "fs_dense_paperfb") for p in (*METAQA, "gtech")]  # our feedback measured against the paper's
    + [(p, "fs_dense_rrsexpr") for p in ("gtech", *METAQA)]  # the paper's re-ranking path form, GrailQA's own first
    + [("metaqa1", "fs_dense_sexpr_sqlpaths")]
    + [(p, "fs_naive_egf") for p in METAQA]
    + [("gtech", "fs_naive_dsex"), ("gtech", "fs_dense_dsex")]  # GrailQA's verbose exemplars
    + [(p, "kbbinder_fs") for p in (*METAQA, "gtech")]
    # KB-BINDER on every pair, zero- and few-shot: the same questions as FuSIC's cells
    + [(p, "kbbinder_fs") for p in ("geo2cinema", "cinema2geo")]
    + [(p, "kbbinder_zs") for p in (*METAQA, "gtech", "geo2cinema", "cinema2geo")]
)


def cell_name(pair: str, config: str) -> str:
    return f"{pair}.{config}"


#: deviation cells taken out of the table (configuration → the pairs); their settings stay usable with
#: ``kgqa run --set …``, and the report says why each is not run (:func:`withdrawn_lines`)
WITHDRAWN = {"fs_dense_paths3": ("metaqa1", "metaqa2"), "fs_dense_simex": METAQA}


# FuSIC's cells run the local model with its prefix-state cache (README, LLMs): with the paper's static
# exemplars every generation prompt starts with the same system and exemplar turns, which the cache
# then evaluates once instead of once per question. Named here because it is not in model ids or run
# configs (greedy answers are not guaranteed byte-identical to a run without it).
FUSIC_LLM = "local?prefix_cache=8"


#: deviations of our own beyond the paper's table (its settings each measured, where one is named
#: them: ``show_path_values`` is, so ``fs_dense_values`` is needed): listed and estimated apart
OPTIONAL = {c: "our deviation, beyond the paper's table" for c in
            ("fs_dense_paths3", "fs_dense_sexpr_sqlpaths", "fs_dense_simex", "fs_naive_egf", "fs_dense_dsex",
             "fs_naive_dsex", "fs_dense_paperfb", "fs_dense_rrsexpr")}


def make_cell(pair: str, config: str) -> Cell:
    task, dataset, planned, extra, _ = PAIRS[pair]
    method, sets, _ = CONFIGS[config]
    run_args = RUN_ARGS if method != "fusic" else tuple(FUSIC_LLM if a == "local" else a for a in RUN_ARGS)
    args = [*extra, *run_args] + (["--set", f"task={task}"] if method in ("fusic", "kbbinder", "langchain_sparql")
                                  else [])
    for s in sets:
        args += ["--set", s]
    return Cell(cell_name(pair, config), method, dataset, planned, tuple(args), OPTIONAL.get(config, ""), config)


CELLS = tuple(make_cell(p, c) for p, c in ORDER)
_NAMES = {c.name for c in CELLS}
#: every cell by name: its planned questions decide whether its records are partial (:func:`cell_records`)
CELL_OF = {c.name: c for c in CELLS}
#: the pairs whose target KB is GrailQA's gold-fact fragment (their label says so: :data:`FRAGMENT`)
ON_FRAGMENT = tuple(p for p, v in PAIRS.items() if FRAGMENT in v[4])


def cell_label(name: str) -> str:
    """A cell's name as the first column of the report's per-cell tables shows it: on GrailQA-Tech followed by
    the fragment's note (:data:`FRAGMENT`), as every row on that pair says it (:func:`cell_of` reads it back)."""
    return f"{name} ({FRAGMENT})" if name.split(".")[0] in ON_FRAGMENT else name


def cell_of(label: Any) -> str:
    """The cell name of a per-cell row's first column (:func:`cell_label`)."""
    return str(label).split(" ", 1)[0]


class CellRecords(list):
    """A cell's saved records, knowing the cell (``cell``) and whether it is still running: ``partial`` is
    ``partial k/N`` while the records hold some but not all of its planned questions
    (:func:`~kgqa_lib.bench.core.partial`), else None. A number computed from a partial cell is never shown
    beside the complete cells' numbers: the report prints that text in its place."""

    cell: str = ""
    partial: str | None = None


def cell_records(records: Records, name: str) -> CellRecords:
    """The records of the cell ``name`` (``records``: the saved records by cell name) as :class:`CellRecords`."""
    out = CellRecords(records(name))
    out.cell = name
    c = CELL_OF.get(name)
    out.partial = cell_partial(out, c) if c is not None else None
    return out


def _like(recs: list[dict[str, Any]], rows: list[dict[str, Any]]) -> CellRecords:
    """``rows`` (some of ``recs``) as the same cell's records."""
    out = CellRecords(rows)
    out.cell, out.partial = getattr(recs, "cell", ""), getattr(recs, "partial", None)
    return out


def partial_label(*recs: list[dict[str, Any]]) -> str | None:
    """``partial k/N`` when one of the record lists is a partial cell's (the first's as it is, a later one's
    with its cell's name); None when none is."""
    for i, r in enumerate(recs):
        p = getattr(r, "partial", None)
        if p:
            return p if i == 0 or not getattr(r, "cell", "") else f"{r.cell}: {p}"
    return None

# ---------------------------------------------------------------- the paper's numbers
# Column WebQSP→GrailQA-Tech (W→GI-T) of each table: the paper's target most like ours (a domain
# subset with few relations seen in the source); the paper has no MetaQA and no mini-world.
PAPER_COLUMN = "WebQSP→GrailQA-Tech"
#: Table 3 of the paper (FuSIC-KBQA(T) and its ablations, F1), every column as printed: setting → row → the
#: columns of :data:`PAPER_T3_COLUMNS`; the ablation cells' paper values (:data:`PAPER`) are its W→GI-T column
PAPER_T3_COLUMNS = ("GI→Gp", "GI→W", "W→GI-T", "W→Gp-P")
PAPER_T3 = {
    "zero-shot": {"FuSIC-KBQA(T)": (59.2, 55.9, 68.4, 56.8), "w/o SPARQL": (48.2, 41.2, 60.5, 46.4),
                  "w/o EGF": (55.1, 53.2, 64.4, 54.9), "w/o RR": (58.0, 48.0, 59.5, 52.6)},
    "few-shot": {"FuSIC-KBQA(T)": (60.3, 65.0, 70.8, 52.3), "w/o SPARQL": (53.0, 58.7, 64.3, 53.9),
                 "w/o EGF": (56.5, 62.0, 66.6, 44.0), "w/o RR": (53.7, 61.2, 68.4, 50.5)},
}
_WGIT = PAPER_T3_COLUMNS.index("W→GI-T")


def _t3(setting: str, row: str) -> str:
    """Table 3's W→GI-T value of ``row`` (:data:`PAPER_T3`), as :data:`PAPER` holds values."""
    return f"{PAPER_T3[setting][row][_WGIT]}"


PAPER = {
    "fs_dense": ("Table 2, few-shot, FuSIC-KBQA(T)", "70.8"),
    "fs_dense_paths3": ("Table 2, few-shot, FuSIC-KBQA(T) — with its 2-hop paths: the paper has no 3-hop run", "70.8"),
    "zs_dense": ("Table 2, zero-shot, FuSIC-KBQA(T)", "68.4"),
    "fs_naive": ("sec. 4.2.1 (b), naive LLM FS-ICL", "< 5.0"),
    "fs_naive_egf": ("sec. 4.2.1 (b), naive LLM FS-ICL — without feedback", "< 5.0"),
    "fs_bm25": ("Table 2, few-shot, FuSIC-KBQA(P)", "70.3"),
    "fs_both": ("Table 2, few-shot, FuSIC-KBQA(T,P)", "74.6"),
    "zs_bm25": ("Table 2, zero-shot, FuSIC-KBQA(P)", "65.1"),
    "zs_both": ("Table 2, zero-shot, FuSIC-KBQA(T,P)", "71.4"),
    "fs_dense_values": ("Table 2, few-shot, FuSIC-KBQA(T) — with its paths as SPARQL programs, sec. 3", "70.8"),
    "fs_dense_paperfb": ("Table 2, few-shot, FuSIC-KBQA(T) — with its feedback, sec. 3 and A.1.4", "70.8"),
    "fs_dense_rrsexpr": ("Table 2, few-shot, FuSIC-KBQA(T) — with its re-ranking prompt's s-expression paths, "
                         "A.1.2", "70.8"),
    "io": ("not in the paper", "—"),
    "langchain": ("not in the paper", "—"),
    "fs_dense_sexpr": ("Table 3, few-shot, w/o SPARQL", _t3("few-shot", "w/o SPARQL")),
    "fs_dense_sexpr_sqlpaths": ("Table 3, few-shot, w/o SPARQL", _t3("few-shot", "w/o SPARQL")),
    "fs_dense_noegf": ("Table 3, few-shot, w/o EGF", _t3("few-shot", "w/o EGF")),
    "fs_dense_norr": ("Table 3, few-shot, w/o RR", _t3("few-shot", "w/o RR")),
    "fs_dense_shots25": ("the paper has no 25-shot run; its few-shot runs sample 100 target shots, sec. 4.1", "—"),
    "fs_dense_shots100": ("Table 2, few-shot, FuSIC-KBQA(T) — the paper's 100 target shots", "70.8"),
    "fs_dense_simex": ("sec. 5, exemplar selection: dynamic selection gave \"only minor improvements\" (no number)", "—"),
    "fs_dense_dsex": ("Table 2, few-shot, FuSIC-KBQA(T) — with concise exemplar SPARQL, appendix A.1.3", "70.8"),
    "fs_naive_dsex": ("sec. 4.2.1 (b), naive LLM FS-ICL — its exemplars' form not given; FuSIC's are concise, "
                      "appendix A.1.3", "< 5.0"),
    "kbbinder_fs": ("Table 2, few-shot, KB-Binder", "68.0"),
    "kbbinder_zs": ("Table 2, zero-shot, KB-Binder", "33.6"),
    **{f"fs_dense_ex{n}": (f"sec. 4.2.2, {n} shot{'' if n == 1 else 's'} (exemplars in the prompt), FuSIC-KBQA(T,P)",
                           f"{v}") for n, v in ((0, 73.6), (1, 70.5), (3, 72.3))},
    "zs_dense_sexpr": ("Table 3, zero-shot, w/o SPARQL", _t3("zero-shot", "w/o SPARQL")),
    "zs_dense_noegf": ("Table 3, zero-shot, w/o EGF", _t3("zero-shot", "w/o EGF")),
    "zs_dense_norr": ("Table 3, zero-shot, w/o RR", _t3("zero-shot", "w/o RR")),
    "fs_gfllm": ("Table 2, few-shot, gf-LLM", "61.2"),
    "zs_gfllm": ("Table 2, zero-shot, gf-LLM", "42.8"),
}
# Table 3's FuSIC-KBQA(T) rows repeat Table 2's (W→GI-T, few- and zero-shot): the ablations' references
PAPER_FULL_T3 = float(PAPER["fs_dense"][1])
PAPER_FULL_T3_ZS = float(PAPER["zs_dense"][1])
RETRIEVER_NOTE = {  # what differs, per configuration (the model and shots: see DIFFERS_ALL)
    "fs_dense": "dense = MiniLM bi-encoder fine-tuned on the source and the 5 shots, for TIARA's retriever",
    "fs_dense_paths3": "as fs_dense, but candidate paths of up to 3 relations (max_path_hops=3) for the question and "
                       "its exemplars; the retriever still trained on 2-hop candidates",
    "zs_dense": "dense retriever trained on the source only; exemplars from the source",
    "fs_naive": "the paper reports it only in prose (GPT-4): one generation call, 5 exemplars, no retrieval",
    "fs_naive_egf": "as fs_naive, then up to 4 of FuSIC's execution-guided feedback rounds (its round 0 is fs_naive's "
                    "answer: the same prompt)",
    "fs_bm25": "BM25 (untrained) stands in for Pangu, the paper's second retriever",
    "fs_both": "BM25 + dense for TIARA + Pangu; appendix-A context sizes for two retrievers (3/5/5)",
    "zs_bm25": "BM25 (untrained, so the same as few-shot's) for Pangu; exemplars from the source",
    "zs_both": "BM25 + dense (trained on the source only) for TIARA + Pangu, 3/5/5 per retriever; exemplars from the "
               "source",
    "fs_dense_values": "as fs_dense, but each retrieved path shown with (up to two of) the entities it reaches "
                       "(show_path_values=true; the default shows the paths alone): a one-hop answer is then in the "
                       "context",
    "fs_dense_paperfb": "as fs_dense, but execution-guided feedback as the paper's (feedback=paper): a query that "
                        "returns answers is final, without our check that it uses the question's entity; a failed "
                        "one gets appendix A.1.4's fixed message (\"The generated SPARQL gives an empty answer when "
                        "executed …\") instead of ours, which says what failed and points out a repeated query; our "
                        "row cap (100 answers) stays",
    "fs_dense_rrsexpr": "as fs_dense, but the re-ranking prompt lists each candidate path as an s-expression "
                        "(rerank_paths_as=sexpr: (JOIN (R r) e), the form of appendix A.1.2's prompt, TIARA's paths) "
                        "instead of its SPARQL program, with the same label comment; the generation prompt still "
                        "shows the chosen paths as SPARQL (sec. 3)",
    "langchain": "LangChain's GraphSparqlQAChain (langchain-community 0.4.2) as shipped: its intent, SPARQL-generation "
                 "and answer prompts, the KG's schema as its RdfGraph reads it (every class with an instance, every "
                 "relation), no exemplars, no entity linking, no code-fence stripping, no feedback; on our KG "
                 "read-only (an UPDATE is refused), the local model as its LLM; answer F1 on the entities the "
                 "executed query returned (kgqa_lib.methods.langchain_sparql)",
    "io": "the local model answers from what it knows (our IO prompt, the PG&AKV baseline's); answer F1 against the "
          "gold set like every row",
    "fs_dense_sexpr": "the LLM writes s-expressions, converted to SPARQL by kgqa_lib.kg.sexpr; the retrieved paths "
                      "shown as s-expressions too (paths_as=logical_form: TIARA's own form, which the paper translates "
                      "to SPARQL when the LLM writes SPARQL, appendix A.1.1; its w/o-SPARQL ablation does not say which "
                      "it shows); re-ranking reads SPARQL as in fs_dense",
    "fs_dense_sexpr_sqlpaths": "as fs_dense_sexpr, but the paths shown as SPARQL programs while the LLM writes "
                               "s-expressions (paths_as=sparql)",
    "fs_dense_noegf": "egf_rounds=0: the first query is final",
    "fs_dense_norr": "rerank=false: each retriever's own top k reaches the prompt",
    **{f"fs_dense_shots{n}": f"as fs_dense, but the retriever fine-tuned on {n} target shots (the pool's 10, then "
                             f"{n - 10} more MetaQA dev questions outside the sampled set); the prompt's 5 exemplars are "
                             "fs_dense's" for n in (25, 100)},
    "fs_dense_simex": "as fs_dense, but the 5 target shots ordered by embedding similarity, the closest last "
                      "(the same 5 exemplars, another order; the paper used static exemplars, sec. 5, without "
                      "giving their order: fs_dense's fixed order stands for it)",
    "fs_dense_dsex": "as fs_dense, but the 5 exemplars' SPARQL is GrailQA's own gold query, prefixes shortened "
                     "(exemplar_sparql=dataset: SELECT (?x0 AS ?value) WHERE { SELECT DISTINCT ?x0 … VALUES … FILTER "
                     "… }), not the concise SELECT DISTINCT ?x of the paths and of the paper's exemplars; the 1.5B model "
                     "copies that template",
    "fs_naive_dsex": "as fs_naive, but the 5 exemplars' SPARQL is GrailQA's own gold query (exemplar_sparql=dataset)",
    "kbbinder_fs": "KB-BINDER with the local model and 5 shots (the paper: GPT-4, its 100 target shots as the "
                   "exemplars, as many as fit in the prompt, sec. 4.1 and A.3; \"majority voting with 6 examples\", "
                   "read as 6 drafts)",
    "kbbinder_zs": "KB-BINDER with the local model, exemplars by BM25 from the source questions (the paper: GPT-4, "
                   "the source's training set)",
    **{f"fs_dense_ex{n}": f"as fs_dense (the retriever fine-tuned on the same 5 target shots), but the generation prompt "
                          + (f"shows {n} of them as exemplar{'' if n == 1 else 's'} (the pool's first {n}, in "
                             "the order fs_dense's prompt shows them)" if n else
                             "shows no exemplar: the instructions, the retrieved context and the question")
                          + f" (exemplars={n}); the paper's study varies the exemplars with two retrievers, "
                          "FuSIC-KBQA(T,P), sec. 4.2.2" for n in (0, 1, 3)},
    "zs_dense_sexpr": "as zs_dense, but the LLM writes s-expressions (converted to SPARQL by kgqa_lib.kg.sexpr), the "
                      "retrieved paths shown as s-expressions too (paths_as=logical_form), as fs_dense_sexpr",
    "zs_dense_noegf": "as zs_dense, egf_rounds=0: the first query is final",
    "zs_dense_norr": "as zs_dense, rerank=false: the retriever's own top k reaches the prompt",
    "fs_gfllm": "gf-LLM as the paper runs it (sec. 4.1, appendix A.3, Limitations): the supervised retriever's KB "
                "context as retrieved — ours: the dense retriever of FuSIC(T), trained the same way, its own top k "
                "(rerank=false, no LLM re-ranking) — an s-expression written by the LLM (language=sexpr, the paths "
                "shown as s-expressions, paths_as=logical_form), one LLM call per question (egf_rounds=0), 5 "
                "exemplars picked by BM25 as KB-Binder's, the closest last (exemplar_choice=bm25), among the 5 target "
                "shots the retriever is fine-tuned on, so BM25 only orders them (the paper's gf-LLM picks 5 of its 100 "
                "shots); the paper's gf-LLM drops the synthetic data of Shu and Yu (2024), as this does. A caveat: the "
                "prompt holds the retriever's top-k paths beside its relations and types (TIARA's retrieval includes "
                "paths, appendix A.1.1), where appendix A.7 describes gf-LLM as \"selecting top-k schema elements "
                "directly from the supervised retriever\" and does not say whether paths were among them",
    "zs_gfllm": "as fs_gfllm, zero-shot: the dense retriever of zero-shot FuSIC(T) (trained on the source only), the "
                "5 exemplars picked by BM25 from the source questions",
}
PAIR_NOTE = {
    "metaqa": "no MetaQA in the paper: source and target differ in KB and IRIs here (Wikidata-style P-ids vs MetaQA's "
              "names), but the mini-world labels its film properties with MetaQA's relation names (P57 \"directed by\", "
              "P161 \"starred actors\"), so the relation names carry over (the paper's Table 2 pairs share Freebase)",
    "gtech": "source = GrailQA's non-technical domains (the paper: WebQSP); target = GrailQA-Tech: the paper's 5 domains "
             f"({', '.join(PAPER_TECH_DOMAINS)}, appendix A.4) and {len(TECH_DOMAINS) - len(PAPER_TECH_DOMAINS)} more "
             f"({', '.join(TECH_DOMAINS[len(PAPER_TECH_DOMAINS):])}), from ToG's 1,000-question sample of GrailQA dev "
             "(the paper: test questions from GrailQA dev, shots from its train set, sec. 4.1); our reported part: every "
             "technical-domain question of the sample outside the pool of 10; KB = one fragment of those questions' "
             "gold facts",
    "mw": "our mini-world: domain and schema both change (the paper's Table 2 pairs share Freebase; its "
          "GrailQA→MAKG pair, Table 5, changes the KB too); every question of the target outside its pool of 10 (our "
          "reported part of our own data)",
}
#: what every row does differently from the paper, one item each (:data:`DIFFERS_ALL` in a sentence)
DIFFERS_EVERYWHERE = (
    "the local Qwen2.5-Coder-1.5B (Q4, 8k context) instead of gpt-4-0613",
    "our entity linker (labels, descriptions, degree) instead of TIARA's trained one",
    "5 target shots from a pool of 10 instead of 100 sampled shots (both show 5 exemplars; MetaQA's retriever also on "
    "25 and 100, the shots rows below our Table 3 analogue — the paper's own shots study, sec. 4.2.2, varies the "
    "exemplars in the prompt)",
    "re-ranking shows the candidate paths as SPARQL (the paper's A.1.2 prompt: s-expressions — the setting "
    "rerank_paths_as=sexpr, optional cells fs_dense_rrsexpr)",
    "execution-guided feedback tells the LLM any failure and what failed (the paper: a query with no answer, one fixed "
    "message, sec. 3 and A.1.4 — measured both ways: cells fs_dense_paperfb)",
    f"{min(p[2] for p in PAIRS.values())}–{max(p[2] for p in PAIRS.values())} reported questions per cell instead of "
    "the paper's 500 test instances: on MetaQA, MetaQA dev questions (our reported part of a seeded dev sample; "
    "MetaQA's test set is not used), on GrailQA-Tech GrailQA dev questions and on the mini-world our reported part "
    "(every target question outside the pool)",
)
DIFFERS_ALL = ("Everywhere: " + "; ".join(DIFFERS_EVERYWHERE) + ". The sections \"Which questions\" and \"Choices made "
               "after looking at outcomes on the reported questions\" below say where settings are to be chosen and what "
               "was chosen after looking at outcomes on the reported ones.")
PAPER_T7 = {"few-shot": {"TIARA": 5.0, "FuSIC-KBQA(T)": 3.2, "Pangu": 27.0, "FuSIC-KBQA(P)": 27.0, "FuSIC-KBQA(T,P)": 2.8},
            "zero-shot": {"TIARA": 8.6, "FuSIC-KBQA(T)": 3.2, "Pangu": 47.8, "FuSIC-KBQA(P)": 47.8, "FuSIC-KBQA(T,P)": 2.6}}
PAPER_EGF = {"few-shot": (71.6, 74.4, 74.6, 74.6, 74.6), "zero-shot": (66.7, 68.6, 70.8, 71.2, 71.4)}  # sec. 4.2.2, T,P
#: sec. 4.2.2: exemplars in the prompt → F1, FuSIC-KBQA(T,P), W→GI-T; 0/1/3 from :data:`PAPER`'s exemplar cells, 5 is
#: Table 2's few-shot FuSIC-KBQA(T,P), the same value (:func:`exemplar_study_reading`)
PAPER_SHOTS = {**{n: float(PAPER[c][1]) for n, c in EXEMPLARS.items() if n != 5}, 5: float(PAPER["fs_both"][1])}
PAPER_STAGE_S = {"retrieval": 14.4, "rerank": 9.6, "generation": 14.4, "feedback": 18.9}  # appendix A.5
PAPER_CALLS = 4.7  # Limitations: 3 re-rank + 1 generation + 0.7 EGF calls (GrailQA→WebQSP, one retriever)
TARGET_F1, TARGET_CALLS = 0.80, 4.7  # our target on MetaQA (not the paper's): one retriever, every hop


def naive_note(pair: str) -> str:
    """On MetaQA, why the naive baseline's query can be right without retrieval."""
    if not pair.startswith("metaqa"):
        return ""
    return ("; MetaQA's entity IRIs are its names (e:Dark%20Shadows) and its relations MetaQA's relation names, so a "
            "query can be written from the question and the exemplars alone — the paper's Freebase ids (m.0…) cannot "
            "be guessed")


def _pair_note(pair: str) -> str:
    return PAIR_NOTE["metaqa" if pair.startswith("metaqa") else "gtech" if pair == "gtech" else "mw"]


# ---------------------------------------------------------------- stripping
def _stage(r: dict[str, Any], name: str) -> Any:
    return next((s.get("output") for s in r.get("trace") or [] if s.get("name") == name), None)


def _question_gold(r: dict[str, Any]):
    """(domain, gold) of a record's question — a test, pool or dev question of its task — from its task
    (needs KGQA_DATA_DIR for external targets: records are stripped when they are saved, with the
    data); None when unknown."""
    from ..data.datasets import DatasetNotFound
    from ..methods.fusic import answer_types, dev_questions, get_task

    settings = (r.get("config") or {}).get("settings") or {}
    try:
        task = get_task(settings["task"], (r.get("config") or {}).get("seed", 0))
    except (KeyError, ValueError, DatasetNotFound):
        return None
    seed = (r.get("config") or {}).get("seed", 0)
    q = next((x for x in task.test + task.pool if x.qid == r.get("qid")), None) or next(
        (x for x in dev_questions(settings["task"], seed) if x.qid == r.get("qid")), None)
    gold = task.target.gold(q) if q is not None else None
    if gold is None:
        return None
    gold.types = gold.types or answer_types(task.target, gold, task.target.kg_for(q))
    return task.target, gold


def gold_analysis(r: dict[str, Any]) -> dict[str, Any] | None:
    """Counts about the question's gold KB elements in a FuSIC record's trace: the gold topic linked;
    per retriever and aspect (paths, relations, types with a gold element), are *all* gold elements
    in its top K, in its own top k (before re-ranking) and in the LLM's top k (after; None without
    re-ranking), k being the context size; how many gold relations the final query uses."""
    from ..methods.fusic import context_sizes, path_pattern

    found = _question_gold(r)
    if found is None:
        return None
    dom, gold = found
    prof = dom.profile
    wanted = {"path": {path_pattern(prof.compact(gold.topics[0]), gold.hops, prof)} if gold.path_key() else set(),
              "relation": {prof.compact(x) for x in gold.relations}, "type": {prof.compact(t) for t in gold.types}}
    linking = _stage(r, "link_entities") or {}
    linked = {m.get("iri") for m in linking.get("mentions") or []}
    retrieved = _stage(r, "retrieve") or []
    settings = (r.get("config") or {}).get("settings") or {}
    sizes = context_sizes(len({x["retriever"] for x in retrieved}), settings.get("context_size", "paper"))
    rows = []
    for x in retrieved:
        want = wanted[x["aspect"]]
        if not want:
            continue
        top = [i["query"] for i in x["items"]]
        k = sizes[x["aspect"]]
        rr = _stage(r, f"rerank:{x['retriever']}:{x['aspect']}")
        rows.append({"retriever": x["retriever"], "aspect": x["aspect"], "top_K": want <= set(top),
                     "before": want <= set(top[:k]), "after": None if rr is None else want <= set(rr["items"][:k])})
    attempts = _stage(r, "generate_and_execute") or []
    sparql = (attempts[-1].get("sparql") or "") if attempts else ""
    return {"topic_linked": bool(linking) and set(gold.topics) <= linked, "mentions": len(linked),
            "gold_hops": len(gold.hops), "retrieval": rows,
            "query_gold_relations": [sum(f"<{x}>" in sparql for x in gold.relations), len(gold.relations)],
            "query_relation_patterns": relation_patterns(sparql) if sparql else None}


def _path_length(p: Any) -> int:
    """Relations a predicate walks: an IRI 1 (``rdf:type`` 0), a property path ``a/b`` the sum of
    its steps, ``a|b`` the longest, ``^a``/``a*`` their inner path, ``!a`` and a variable one step."""
    from rdflib import RDF, URIRef, Variable
    from rdflib import paths as P

    if isinstance(p, URIRef):
        return int(p != RDF.type)
    if isinstance(p, P.SequencePath):
        return sum(_path_length(a) for a in p.args)
    if isinstance(p, P.AlternativePath):
        return max((_path_length(a) for a in p.args), default=0)
    if isinstance(p, P.InvPath):
        return _path_length(p.arg)
    if isinstance(p, P.MulPath):
        return _path_length(p.path)
    return int(isinstance(p, (Variable, P.NegatedPath)))


def relation_patterns(sparql: str) -> int | None:
    """Relations a (prefix-free) query's triple patterns walk — a predicate IRI other than
    ``rdf:type`` or a variable 1, a property path its length (:func:`_path_length`) — anywhere in it
    (OPTIONAL, UNION, subqueries); None when rdflib cannot read it. Compared with the
    gold path's length it tells a query that walks more (or fewer) relations than the question needs."""
    from rdflib.plugins.sparql import prepareQuery
    from rdflib.plugins.sparql.parserutils import CompValue

    try:
        algebra = prepareQuery(sparql).algebra
    except Exception:  # noqa: BLE001 — the LLM's text: any parse failure means "unknown"
        return None
    n, todo = 0, [algebra]
    while todo:
        node = todo.pop()
        if isinstance(node, CompValue):
            if node.name == "BGP":
                n += sum(_path_length(p) for _, p, _ in node["triples"])
            todo.extend(node.values())
        elif isinstance(node, (list, tuple)):
            todo.extend(node)
    return n


def _same_query(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two attempts wrote the same query (whitespace aside); without a query on either side, the
    same reply."""
    qa, qb = (" ".join((x.get("query") or "").split()) for x in (a, b))
    if qa and qb:
        return qa == qb
    return not qa and not qb and " ".join((a.get("response") or "").split()) == " ".join((b.get("response") or "").split())


def strip(r: dict[str, Any]) -> dict[str, Any]:
    """A record without benchmark text: see the module's doc. KB-BINDER's records as the baselines'.
    A record stripped already (restored from the saved records, then saved again) is kept as it is."""
    if r.get("stripped"):
        return r
    if r.get("method") in ("kbbinder", "io", "langchain_sparql"):
        return strip_baseline(r)
    out = {k: r[k] for k in KEEP if k in r}
    keep_prediction(out, r)
    out["stripped"] = True
    out["stages"] = _stage(r, "calls_by_stage")
    attempts = _stage(r, "generate_and_execute") or []
    out["attempts"] = [{"status": a.get("status"), "rows": a.get("rows"), "seconds": a.get("seconds"),
                        "repeat": i > 0 and _same_query(attempts[i - 1], a),
                        "query": (a.get("query") or "")[:4 * MAX_KEPT_CHARS]}  # the SPARQL the method wrote
                       for i, a in enumerate(attempts)]
    out["rerank"] = [{"retriever": s["output"].get("retriever"), "aspect": s["output"].get("aspect"),
                      "called": s["output"].get("called"), "error": s["output"].get("error"),
                      "n": len(s["output"].get("items") or [])}
                     for s in r.get("trace") or [] if s.get("name", "").startswith("rerank:")]
    out["gold_analysis"] = gold_analysis(r) if r.get("trace") else None
    return out


# ---------------------------------------------------------------- report helpers
def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def _f1(recs: list[dict[str, Any]]) -> str:
    """F1 [95% CI] in points; ``partial k/N`` for a cell still running (:class:`CellRecords`)."""
    if not recs:
        return "not run yet"
    if partial_label(recs):
        return partial_label(recs)
    row = summarize(recs, ["f1"])
    lo, hi = row["f1_ci"]
    return f"{_pct(row['f1'])} [{_pct(lo)}, {_pct(hi)}]"


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def _stage_means(recs: list[dict[str, Any]]) -> tuple[dict[str, float], dict[str, float]]:
    """Mean LLM calls and seconds per stage (FuSIC records: calls_by_stage)."""
    st = [r["stages"] for r in recs if r.get("stages")]
    calls = {k: _mean([s["calls"][k] for s in st]) for k in ("rerank", "generation", "feedback", "total")} if st else {}
    secs = {k: _mean([s["seconds"][k] for s in st]) for k in ("retrieval", "rerank", "exemplars", "generation", "feedback")} \
        if st else {}
    return calls, secs


def effect_cells() -> set[tuple[str, str]]:
    """The (a, b) cells of :data:`TABLE`'s effects, each stated as a − b (the model axis, notebook 21)."""
    return {(e.a[1], e.b[1]) for e in TABLE.effects if e.a[0] == e.b[0] == TABLE.name}


def paired_f1(recs: list[dict[str, Any]], base: list[dict[str, Any]]) -> tuple[float, float, float, int]:
    """:func:`~kgqa_lib.evaluate.report.paired_gain` of ``recs`` over ``base`` in F1 — but when the two cells
    (:class:`CellRecords`' ``cell``) are an effect of the table stated the other way round (:func:`effect_cells`),
    the negation of that effect's difference: one effect, one interval, whichever way a table states it (the
    bootstrap resamples the questions in the first list's order, so the two directions would differ slightly)."""
    if (getattr(base, "cell", ""), getattr(recs, "cell", "")) in effect_cells():
        mean, lo, hi, n = paired_gain(base, recs, "f1")
        return -mean, -hi, -lo, n
    return paired_gain(recs, base, "f1")


def _gain(recs: list[dict[str, Any]], base: list[dict[str, Any]]) -> str:
    """``recs`` − ``base`` in F1, paired (points, bootstrap 95% CI, n: :func:`paired_f1`); ``partial k/N`` when
    either is a cell still running (:func:`partial_label`)."""
    if not recs or not base:
        return "—"
    if partial_label(recs, base):
        return partial_label(recs, base)
    g = paired_f1(recs, base)
    return f"{format_gain(g)} (n={g[3]})" if g[3] else "—"


def attempts_of(r: dict[str, Any]) -> list[dict[str, Any]]:
    """A FuSIC record's generation attempts (first query, then one per feedback round): a stripped
    record's ``attempts``, a whole record's ``generate_and_execute`` stage; [] for other methods."""
    return r["attempts"] if "attempts" in r else (_stage(r, "generate_and_execute") or [])


def f1_after_rounds(recs: list[dict[str, Any]], rounds: int = 4) -> list[float]:
    """Answer F1 had the run stopped after 0..``rounds`` feedback rounds: a question whose final
    attempt came at round j keeps its F1 from round j on (the rounds before it returned no answer).
    Stripped and whole records alike."""
    return [_mean([r["metrics"]["f1"] if len(attempts_of(r) or [None]) - 1 <= k else 0.0 for r in recs])
            for k in range(rounds + 1)]


def feedback_stats(recs: list[dict[str, Any]]) -> dict[str, float]:
    """Feedback rounds per question and the share of questions whose final query returned answers
    (status ``ok``), over the records with attempts (NaN without any: IO, KB-BINDER)."""
    tried = [attempts_of(r) for r in recs if attempts_of(r)]
    return {"feedback rounds/q": _mean([len(a) - 1 for a in tried]),
            "final query ok": _mean([float(a[-1].get("status") == "ok") for a in tried])}


def feedback_repeats(recs: list[dict[str, Any]]) -> tuple[int | None, int]:
    """(feedback rounds whose query repeats the round before's, feedback rounds); the first is None
    when a record saved before ``repeat`` was kept has feedback rounds."""
    rounds = [a for r in recs for a in attempts_of(r)[1:]]
    if any("repeat" not in a for a in rounds):
        return None, len(rounds)
    return sum(bool(a["repeat"]) for a in rounds), len(rounds)


def error_rates(recs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Table 7 analogue: per retriever (and, with several, all of them together) and aspect (and all
    aspects together), the share of questions whose gold elements are not all in the top K, the
    retriever's top k, the LLM's top k. With several retrievers an aspect counts as found when one
    of them has all its gold elements (a gold set split across the lists counts as missed).
    Questions without a gold analysis are left out."""
    per: dict[tuple[str, str], dict[str, list[bool]]] = {}
    for r in recs:
        ga = r.get("gold_analysis")
        if not ga or not ga["retrieval"]:
            continue
        rows = ga["retrieval"]
        names = sorted({x["retriever"] for x in rows})
        groups = {n: [x for x in rows if x["retriever"] == n] for n in names}
        if len(names) > 1:
            groups["all retrievers"] = rows
        for name, xs in groups.items():
            for aspect in ("path", "relation", "type", "all aspects"):
                ys = xs if aspect == "all aspects" else [x for x in xs if x["aspect"] == aspect]
                if not ys:
                    continue
                by_aspect: dict[str, list[dict[str, Any]]] = {}
                for y in ys:
                    by_aspect.setdefault(y["aspect"], []).append(y)
                d = per.setdefault((name, aspect), {"top_K": [], "before": [], "after": []})
                for key in ("top_K", "before", "after"):
                    if any(y[key] is None for y in ys):
                        continue
                    # found when, for every aspect, some retriever of the group has all its gold elements
                    d[key].append(all(any(y[key] for y in g) for g in by_aspect.values()))
    return [{"retriever": n, "aspect": a, "n": len(d["top_K"]),
             **{k: _mean([float(not v) for v in d[k]]) if d[k] else None for k in ("top_K", "before", "after")}}
            for (n, a), d in sorted(per.items(), key=lambda kv: (kv[0][0] == "all retrievers", kv[0][0],
                                                                  ("path", "relation", "type", "all aspects").index(kv[0][1])))]


def _gold_path_in(g: dict[str, Any], where: str) -> bool:
    """A record's gold path in a retriever's top K (``top_K``) or in the prompt (``prompt``: the LLM's
    top k after re-ranking, the retriever's own top k without it)."""
    key = where if where != "prompt" else "after" if any(x["after"] is not None for x in g["retrieval"]) else "before"
    return any(x["aspect"] == "path" and x[key] for x in g["retrieval"])


def funnel(recs: list[dict[str, Any]], max_hops: int = 2) -> dict[str, int]:
    """Where the answers are lost (one retriever): gold topic linked → gold path short enough to be a
    candidate (≤ ``max_hops`` relations, the setting ``max_path_hops``; a CVT step of GrailQA's is
    walked through, so there this undercounts) → in the top K → in the prompt (LLM's top k) → the
    final query returned answers → F1 = 1."""
    ga = [r.get("gold_analysis") for r in recs]
    ok = [bool(r.get("attempts")) and r["attempts"][-1]["status"] == "ok" for r in recs]
    return {"n": len(recs), "analysed": sum(1 for g in ga if g),
            "topic linked": sum(1 for g in ga if g and g["topic_linked"]),
            "gold path short enough": sum(1 for g in ga if g and 0 < g["gold_hops"] <= max_hops),
            "gold path in top K": sum(1 for g in ga if g and _gold_path_in(g, "top_K")),
            "gold path in prompt": sum(1 for g in ga if g and _gold_path_in(g, "prompt")),
            "query answered": sum(ok),
            "F1 = 1": sum(1 for r in recs if r["metrics"].get("f1") == 1.0)}


def query_lengths(recs: list[dict[str, Any]]) -> dict[str, int] | None:
    """The questions whose prompt held the gold path and whose F1 is < 1, by how many relations the
    final query walks against the gold path (:func:`relation_patterns` vs ``gold_hops``): ``longer``,
    ``shorter``, ``same``, ``unread`` (no query, or rdflib cannot read it). None when a record saved
    before the count was kept is among them."""
    out = {"n": 0, "longer": 0, "shorter": 0, "same": 0, "unread": 0}
    for r in recs:
        g = r.get("gold_analysis")
        if not g or r["metrics"].get("f1") == 1.0 or not _gold_path_in(g, "prompt"):
            continue
        if "query_relation_patterns" not in g:
            return None
        k, out["n"] = g["query_relation_patterns"], out["n"] + 1
        out["unread" if k is None else "longer" if k > g["gold_hops"] else "shorter" if k < g["gold_hops"] else "same"] += 1
    return out


# ---------------------------------------------------------------- the report
def _on_shared(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``a`` and ``b`` kept to the questions (qids) both hold."""
    ids = {r["qid"] for r in a} & {r["qid"] for r in b}
    return _like(a, [r for r in a if r["qid"] in ids]), _like(b, [r for r in b if r["qid"] in ids])


def _share(recs: list[dict[str, Any]], key: str, hops: int) -> str:
    """Questions whose gold path is in the top K (``key`` top_K) / the prompt (``prompt``), of n."""
    if not recs:
        return "—"
    f = funnel(recs, hops)
    return f"{f['gold path in top K' if key == 'top_K' else 'gold path in prompt']}/{f['n']}"


# ---------------------------------------------------------------- the report's tables, as data
def _md(t: ResultTable, tail: str | None = None) -> str:
    """The report's pipe table of ``t`` (:meth:`ResultTable.markdown`), with a row's trailing empty cells
    — a cell without records: ``| cell | not run yet | | |`` — written ``" |"`` each, or ``tail`` for all
    of them, as the report has always laid such rows out."""
    lines = t.markdown().splitlines()[:2]
    for r in t.rows:
        cells = [str(c) for c in r]
        k = len(cells)
        while k > 1 and cells[k - 1] == "":
            k -= 1
        blank = len(cells) - k
        lines.append("| " + " | ".join(cells[:k]) + " |" + ((" |" * blank if tail is None else tail) if blank else ""))
    return "\n".join(lines)


def depth_table(rec) -> ResultTable:
    """The candidate path depth, measured both ways: each ``max_path_hops=3`` cell paired against its
    paper-default (2-hop) cell over the same questions — F1, the gold path in the top K and in the
    prompt, LLM calls and seconds per question (retrieval = linking + enumeration + ranking)."""
    where, value = PAPER["fs_dense"]
    rows = []
    for pair, config in [(p, d) for p in PAIRS for d in DEPTH if cell_name(p, d) in _NAMES]:
        base_config, hops = DEPTH[config]
        base, recs = rec(pair, base_config), rec(pair, config)
        if partial_label(recs, base):  # a cell still running: no number until it is complete
            rows.append([PAIRS[pair][4], partial_label(recs, base), *[""] * 7, f"{value} ({where})"])
            continue
        if recs and base:  # every column on the questions both cells hold
            base, recs = _on_shared(base, recs)
        calls = [(_stage_means(r)[0].get("total") if r else None) for r in (base, recs)]
        secs = [(_stage_means(r)[1].get("retrieval") if r else None) for r in (base, recs)]
        two = lambda xs, fmt: " / ".join("—" if x is None else fmt.format(x) for x in xs)  # noqa: E731
        rows.append([PAIRS[pair][4], len(recs), _f1(base), _f1(recs), _gain(recs, base),
                     f"{_share(base, 'top_K', 2)} / {_share(recs, 'top_K', hops)}",
                     f"{_share(base, 'prompt', 2)} / {_share(recs, 'prompt', hops)}", two(calls, "{:.2f}"),
                     two(secs, "{:.1f}"), f"{value} ({where})"])
    return table("depth", "Candidate path depth: the deviation `max_path_hops=3`, paired against the paper's 2",
                 ["pair", "n (paired)", "F1 paths ≤ 2", "F1 paths ≤ 3", "≤ 3 − ≤ 2 (paired)",
                  "gold path in top K (≤ 2 / ≤ 3)", "gold path in prompt (≤ 2 / ≤ 3)", "LLM calls/q (≤ 2 / ≤ 3)",
                  "s/q retrieval, wall time beside the LLM (≤ 2 / ≤ 3)", "paper"], rows)


def depth_section(t: ResultTable) -> list[str]:
    where, value = PAPER["fs_dense"]
    return ["", f"## {t.title}", "",
            "The paper's TIARA retriever \"enumerates 2-hop paths in the KB from each candidate entity\" (appendix A.1.1), "
            f"so a 3-hop MetaQA gold path is never a candidate. Paper: {where}, column {PAPER_COLUMN}: {value} — with "
            "2-hop paths; the paper has no 3-hop run. Both cells use the same retriever (trained on 2-hop candidates); "
            "the deviation enumerates up to 3 relations for the question and its exemplars. Paired over the same "
            "questions: every column of a row is on the questions both cells hold (n); while either cell is still running "
            "the row reads `partial k/N` instead of its numbers. The gain is ≤ 3 minus ≤ 2 (points, bootstrap 95% CI). "
            "The retrieval seconds are wall time recorded while the LLM shared the two cores; the same without the "
            "LLM (gold path among the candidates and in each retriever's own top 3/5/10, enumeration seconds alone): "
            "`kgqa bench run fusic_path_depth` → results/bench/fusic_path_depth.md.", "", _md(t)]


def shots_label(n: int) -> str:
    """A row of the target shots (:data:`SHOTS`) as tables and figures name it: 0 is the zero-shot cell, whose
    prompt shows source exemplars (the others show the same 5 target exemplars)."""
    return "0: zero-shot (source exemplars)" if n == 0 else str(n)


def shots_table(rec) -> ResultTable:
    """The number of target shots (MetaQA, :data:`SHOTS`): each count's F1 and its gain over the
    5-shot cell, paired over the same questions."""
    rows = []
    for p in METAQA:
        five = rec(p, SHOTS[5])
        for n, config in SHOTS.items():
            recs = rec(p, config)
            rows.append([PAIRS[p][4], shots_label(n), cell_name(p, config), len(recs), _f1(recs),
                         "—" if n == 5 else _gain(recs, five)])
    return table("shots", "Number of target shots (MetaQA)",
                 ["pair", "target shots", "cell", "n", "F1 [95% CI]", "− 5 shots (paired) [95% CI]"], rows)


def shots_section(t: ResultTable) -> list[str]:
    return ["", f"### {t.title}", "",
            "The target shots the dense retriever is fine-tuned on (0 = zero-shot: trained on the source only, source "
            "exemplars); from 5 shots on the prompt shows the same 5 target exemplars (the pool's first five), so the "
            "rows differ in fine-tuning only. 25 and 100: the pool's 10 and then further MetaQA dev questions outside "
            "the sampled question set (none is a reported question). Paper, column W→GI-T, FuSIC-KBQA(T): zero-shot "
            f"{PAPER['zs_dense'][1]} and few-shot {PAPER['fs_dense'][1]} (Table 2; its few-shot runs sample 100 target "
            "shots, sec. 4.1). Its own study of shots (sec. 4.2.2, FuSIC-KBQA(T,P)) varies the exemplars in the prompt: "
            + ", ".join(f"{k} → {v}" for k, v in PAPER_SHOTS.items()) + ". " + exemplar_study_reading(), "", _md(t)]


def exemplar_study_reading() -> str:
    """What the paper's numbers say of its study of shots (sec. 4.2.2), which does not say whether the retrievers
    stay fine-tuned on the target shots: its 5-shot value against Table 2's few-shot FuSIC-KBQA(T,P), its 0-shot
    value against Table 2's zero-shot one (from :data:`PAPER_SHOTS` and :data:`PAPER`), and the other reading of
    "0 shots" (sec. 3's zero-shot substitution of source exemplars)."""
    (few_where, few), (zero_where, zero) = PAPER["fs_both"], PAPER["zs_both"]
    five, none = PAPER_SHOTS[5], PAPER_SHOTS[0]
    same = lambda a, b: "equals" if a == float(b) else "differs from"  # noqa: E731
    kept = five == float(few) and none != float(zero)
    return (f"Sec. 4.2.2 does not say whether the retrievers stay fine-tuned: its 5-shot value ({five}) "
            f"{same(five, few)} {few_where} ({few}) and its 0-shot value ({none}) {same(none, zero)} {zero_where} "
            f"({zero})" + (", so the study reads as the few-shot runs with the fine-tuning kept and fewer exemplars "
                           "shown" if kept else ", so the numbers do not tell whether the fine-tuning was kept")
            + ". Its \"0 shots\" could also mean source exemplars in their place (sec. 3's zero-shot substitution of "
            "the target exemplars); our 0-exemplar cells show none.")


def _said_gain(recs: list[dict[str, Any]], base: list[dict[str, Any]]) -> str:
    """:func:`_gain` for a sentence: a cell still running says so instead of a number."""
    p = partial_label(recs, base)
    return f"not shown until its cell is complete ({p})" if p else _gain(recs, base)


def _hops_gains(rec, config: str, against: str = "fs_dense") -> str:
    """``config`` − ``against`` on MetaQA, per hop, paired (points, bootstrap 95% CI)."""
    return "; ".join(f"{h}-hop {_said_gain(rec(p, config), rec(p, against))}" for h, p in enumerate(METAQA, 1))


def questions_table(rec) -> ResultTable:
    """Which target questions each pair holds, as three disjoint parts: the few shots, the reported
    questions (every cell's) and the dev part no cell runs on, where settings are to be chosen
    (:func:`~kgqa_lib.methods.fusic.tasks.dev_questions`); its size per pair, and why a target has none."""
    from ..methods.fusic import tasks as T

    rows = []
    for pair, (task, _, _, _, label) in PAIRS.items():
        tgt = T.TASKS[task][1].partition("@")[0]
        hops = METAQA.index(pair) + 1 if pair in METAQA else None
        n_dev = T.dev_size(task, hops)
        spec = f"`fusic:{task}:dev" + (f"-{hops}hop`" if hops else "`") if n_dev else "—"
        shots = f"{T.SHOT_POOL}" + (f" + {T.SHOT_RESERVE[tgt]} reserve" if tgt in T.SHOT_RESERVE else "")
        where = T.DEV_FROM[tgt] if n_dev else T.DEV_NONE[tgt]
        full = rec(pair, "fs_dense")
        rows.append([label, partial_label(full) or len({r["qid"] for r in full}), shots, n_dev, spec, where])
    return table("questions", "Which questions: the few shots, the reported part, the dev part",
                 ["pair", "reported questions", "few shots", "dev part", "its dataset",
                  "where the dev part comes from, or why there is none"], rows)


def questions_section(t: ResultTable) -> list[str]:
    from ..methods.fusic import tasks as T

    return ["", f"## {t.title}", "",
            "Each pair's target questions fall in three disjoint parts: the few shots (a pool of "
            f"{T.SHOT_POOL}; MetaQA also holds a reserve of {T.SHOT_RESERVE['metaqa']} more for the 25- and 100-shot "
            "rows), the "
            "reported questions every cell of this report is scored on, and a dev part no cell has run on, reserved "
            "for choosing settings. Disjoint by question id and text; the dev part also asks no gold "
            "query that a reported question, a shot or a source question asks. Every MetaQA question here is a MetaQA "
            f"dev question (MetaQA's test set is not used): the reported part is a seeded sample of "
            f"{PAIRS[METAQA[0]][2]} per hop from a seeded sample of {T.METAQA_PER_HOP} MetaQA dev questions per hop, "
            "outside the pool, the cells' dataset `fusic:mw-wd>metaqa:test-<N>hop --sample 100` (`test` there names "
            "the task's reported part; `fusic:mw-wd>metaqa:reported-<N>hop` loads the same questions under the same "
            "name). GrailQA-Tech's questions are GrailQA dev "
            "questions; the mini-world's, our reported part of our own data. The MetaQA dev part, like every MetaQA "
            "dev question, was among the questions the linker's spans below were chosen on; no FuSIC setting was "
            "tried on it.", "", _md(t)]


def choices_section(rec) -> list[str]:
    """The choices made after looking at outcomes on the reported questions (so no FuSIC number here
    is a held-out estimate), each with what the records show of it."""
    full = [rec(p, "fs_dense") for p in METAQA]
    per_hop = "/".join(partial_label(r) or str(len(r)) for r in full)
    linked = "/".join(partial_label(r) or str(funnel(r)["topic linked"]) for r in full)
    return ["", "## Choices made after looking at outcomes on the reported questions", "",
            "The FuSIC numbers in this report are not held-out estimates: the choices below were made after looking at "
            "outcomes on the same questions the tables report. Some move toward the paper (its exemplars are concise "
            "SPARQL, appendix A.1.3), so this is not one-sided tuning.", "",
            "- GrailQA-Tech exemplars: the 5 exemplars' SPARQL is the concise form of the paper's exemplars, chosen over "
            "GrailQA's own nested gold query (`exemplar_sparql=dataset`) after the GrailQA-Tech cells showed the 1.5B "
            "model copying the nested query. The nested-query exemplars are kept as deviation cells (paired, points): "
            "FuSIC few-shot with them minus with the concise ones "
            f"{_said_gain(rec('gtech', 'fs_dense_dsex'), rec('gtech', 'fs_dense'))}; the naive "
            f"baseline {_said_gain(rec('gtech', 'fs_naive_dsex'), rec('gtech', 'fs_naive'))}.",
            "- The entity linker's spans (word n-grams of up to 12 words, as film titles run long) were chosen while "
            "measuring how often MetaQA's gold topic entity is among the linked spans over the whole MetaQA dev file, "
            "which holds the reported MetaQA questions, using their gold topic annotations. With them the gold topic is "
            f"linked on {linked} of the {per_hop} reported questions per hop (FuSIC few-shot, dense retriever).",
            "- Each of these settings was also tried on the same "
            f"{per_hop} reported questions per hop "
            "and compared there (paired over the same questions, minus FuSIC few-shot with the dense retriever): the "
            "paths shown with the entities they reach (`show_path_values=true`; the default shows the paths alone): "
            f"{_hops_gains(rec, 'fs_dense_values')}; the paper's feedback instead of ours (ours "
            f"kept): {_hops_gains(rec, 'fs_dense_paperfb')}; the retriever fine-tuned on 25 target shots: "
            f"{_hops_gains(rec, SHOTS[25])}; on 100: {_hops_gains(rec, SHOTS[100])}."]


#: Table 3's two halves: setting → (the full cell's configuration, its ablations, the paper's full value)
T3 = {"few-shot": ("fs_dense", ABLATIONS, PAPER_FULL_T3), "zero-shot": ("zs_dense", ZS_ABLATIONS, PAPER_FULL_T3_ZS)}


def ablation_gains(records: Records, setting: str = "few-shot") -> list[dict[str, Any]]:
    """The Table 3 analogue as data: per pair (MetaQA's hops, GrailQA-Tech) and ablation, the records of
    FuSIC(T) (``full``: few-shot, or zero-shot with ``setting="zero-shot"``) and of the ablation, ``gain``
    = :func:`paired_gain` of the ablation over full in F1 (mean, low, high, n; None when either cell has
    no records, either is still running — ``partial`` then says which, :func:`partial_label` — or they
    share no question), and the paper's ablation − full (Table 3, W→GI-T, the same setting) as
    ``paper − full`` (points)."""
    full_config, ablations, paper_full = T3[setting]
    out = []
    for p in (*METAQA, "gtech"):
        full = cell_records(records, cell_name(p, full_config))
        more = tuple(d for d in ("fs_dense_sexpr_sqlpaths",) if cell_name(p, d) in _NAMES) if setting == "few-shot" else ()
        for a in ablations + more:
            recs = cell_records(records, cell_name(p, a))
            gain = paired_f1(recs, full) if recs and full and not partial_label(recs, full) else None
            out.append({"pair": p, "ablation": a, "full": full, "records": recs,
                        "gain": gain if gain and gain[3] else None, "partial": partial_label(recs, full),
                        "paper − full": float(PAPER[a][1]) - paper_full})
    return out



def ablations_table(records: Records, setting: str = "few-shot") -> ResultTable:
    """One half of the Table 3 analogue (:func:`ablation_gains`): per pair and ablation, the questions both
    cells hold, FuSIC(T) and the ablation on them, the paired difference and the paper's."""
    rows = []
    for g in ablation_gains(records, setting):
        p, a, full, recs = g["pair"], g["ablation"], g["full"], g["records"]
        where, value = PAPER[a]
        paper, diff = f"{value} ({where})", f"{g['paper − full']:+.1f}"
        if g["gain"] is None:  # not run, or still running (a partial cell: its label, no number)
            rows.append([PAIRS[p][4], CONFIGS[a][2], "—", _f1(full), _f1(recs), g["partial"] or "—", paper, diff])
            continue
        qids = {r["qid"] for r in recs} & {r["qid"] for r in full}
        same = lambda rs: [r for r in rs if r["qid"] in qids]  # noqa: E731
        rows.append([PAIRS[p][4], CONFIGS[a][2], len(qids), _f1(same(full)), _f1(same(recs)),
                     f"{format_gain(g['gain'])} (n={g['gain'][3]})", paper, diff])
    name, title = (("table3", "Table 3 analogue: ablations of FuSIC(T) few-shot, paired over the same questions")
                   if setting == "few-shot" else
                   ("table3_zero_shot", "Table 3 analogue, zero-shot: ablations of FuSIC(T) zero-shot, paired over the "
                                        "same questions"))
    return table(name, title, ["pair", "ablation", "n paired", "full F1", "ablation F1", "ablation − full [95% CI]",
                               "paper", "paper − full"], rows)


def exemplars_table(rec) -> ResultTable:
    """The number of exemplars in the generation prompt (:data:`EXEMPLARS`, sec. 4.2.2): each count's F1
    and its gain over 5 exemplars (``fs_dense``), paired over the same questions, beside the paper's."""
    rows = []
    for p in (*METAQA, "gtech"):
        five = rec(p, EXEMPLARS[5])
        for n, config in EXEMPLARS.items():
            recs = rec(p, config)
            rows.append([PAIRS[p][4], n, cell_name(p, config), len(recs), _f1(recs),
                         "—" if n == 5 else _gain(recs, five), PAPER_SHOTS[n],
                         "—" if n == 5 else f"{PAPER_SHOTS[n] - PAPER_SHOTS[5]:+.1f}"])
    return table("exemplars", "Number of exemplars in the prompt (sec. 4.2.2), paired over the same questions",
                 ["pair", "exemplars", "cell", "n", "F1 [95% CI]", "− 5 exemplars (paired) [95% CI]",
                  "paper (sec. 4.2.2, FuSIC-KBQA(T,P), W→GI-T)", "paper − 5 exemplars"], rows)


def exemplars_section(t: ResultTable) -> list[str]:
    paper = ", ".join(f"{k} → {v}" for k, v in PAPER_SHOTS.items())
    return ["", f"## {t.title}", "",
            "The paper's study of shots (sec. 4.2.2, WebQSP→GrailQA-Tech, FuSIC-KBQA(T,P), few-shot) varies the "
            f"exemplars shown in the prompt — exemplars → F1: {paper} — and finds fewer shots usable when the "
            "exemplars are diverse. " + exemplar_study_reading() + " Ours: FuSIC(T) few-shot (the dense retriever, "
            "fine-tuned on the same 5 target shots in every row), the prompt showing n of the 5: the pool's first n, "
            "each as the 5-exemplar prompt shows it (0: none; MetaQA's pool is dealt over the hops, so 1 exemplar is a "
            "1-hop question and 3 are one per hop). 5 is `fs_dense`. Each row's gain is n exemplars minus 5 on the "
            "same questions; the paper's difference is its n-shot value minus its 5-shot one.", "", _md(t)]


def gfllm_table(rec) -> ResultTable:
    """gf-LLM (:data:`GFLLM`) against FuSIC(T) on the same questions, few- and zero-shot, beside the
    paper's difference (Table 2, W→GI-T)."""
    rows = []
    for p in (*METAQA, "gtech"):
        for setting, (config, full_config) in GFLLM.items():
            gf, full = rec(p, config), rec(p, full_config)
            shared = bool(gf and full) and not partial_label(gf, full)
            if shared:  # on the questions both hold (without gf-LLM records, or while one runs: FuSIC(T) on its own)
                gf, full = _on_shared(gf, full)
            (where, value), (_, full_value) = PAPER[config], PAPER[full_config]
            rows.append([PAIRS[p][4], setting, len(gf) if shared else "—", _f1(gf), _f1(full), _gain(full, gf),
                         f"{value} ({where})",
                         f"{float(full_value) - float(value):+.1f} ({PAPER[full_config][0]}: {full_value})"])
    return table("gfllm", "gf-LLM (Table 2's retrieve-then-generate baseline) against FuSIC(T), paired over the same "
                          "questions",
                 ["pair", "setting", "n paired", "gf-LLM F1", "FuSIC(T) F1", "FuSIC(T) − gf-LLM (paired) [95% CI]",
                  "paper: gf-LLM", "paper: FuSIC(T) − gf-LLM"], rows)


def gfllm_section(t: ResultTable) -> list[str]:
    return ["", f"## {t.title}", "",
            "gf-LLM in the paper (sec. 4.1, appendix A.3, Limitations) is the retrieve-then-generate model of Shu and "
            "Yu (2024) without its synthetic data: the same supervised retriever as FuSIC-KBQA(T) (TIARA, trained "
            "the same way) gives the KB context — its own top k, no LLM re-ranking — and the LLM writes an "
            "s-expression with in-context exemplars picked by BM25 as KB-Binder's, in one call (no execution "
            "feedback). Ours: `" + "`, `".join(GFLLM[k][0] for k in GFLLM) + "`, the dense retriever of FuSIC(T)'s "
            "cells. Two caveats. Its prompt holds the retriever's top-k paths beside its relations and types (TIARA's "
            "retrieval includes paths, appendix A.1.1), where appendix A.7 describes gf-LLM as \"selecting top-k "
            "schema elements directly from the supervised retriever\" and does not say whether paths were among them. "
            "Few-shot, BM25 picks its 5 exemplars among the 5 target shots the retriever is fine-tuned on, so it only "
            "reorders them (the paper's gf-LLM picks 5 of its 100 shots). The gain here is FuSIC(T) minus gf-LLM, as "
            "the paper's; the Table 2 analogue shows the same pairs the other way round, gf-LLM minus FuSIC(T) (each "
            "of its rows minus FuSIC(T)).", "", _md(t)]


def table1_section() -> list[str]:
    """Table 1 for our pairs, from the committed numbers of the measurement ``fusic_table1``
    (:mod:`kgqa_lib.bench.fusic_table1`), beside the paper's rows."""
    from .fusic_table1 import TABLE as T1, section
    from .measure import read

    return section(read(T1))


def langchain_table(records: Records) -> ResultTable:
    """What LangChain's chain did with each question (its records' ``langchain`` summary): the outcome of
    its query and what the generated queries looked like."""
    from ..methods.langchain_sparql import STATUSES

    rows = []
    for p in METAQA:
        name = cell_name(p, "langchain")
        recs = cell_records(records, name)
        if not recs or recs.partial:
            rows.append([cell_label(name), recs.partial or "not run yet", "", "", "", "", "", ""])
            continue
        lc = [summary_of(r).get("langchain") or {} for r in recs]
        outcome = Counter(x.get("status") or "none" for x in lc)
        order = [k for k in (*STATUSES, "none") if outcome.get(k)]
        rows.append([cell_label(name), len(recs), _f1(recs), _pct(_mean([r["metrics"]["hits@1"] for r in recs])),
                     ", ".join(f"{k} {outcome[k]}" for k in order), sum(bool(x.get("fenced")) for x in lc),
                     sum("foaf" in (x.get("prefixes") or []) for x in lc), sum(bool(x.get("update_keyword")) for x in lc)])
    return table("langchain", "LangChain's GraphSparqlQAChain on MetaQA (a peer): what its queries did",
                 ["cell", "n", "F1 [95% CI]", "Hits@1", "outcome", "code fence", "foaf:", "INSERT / DELETE"], rows)


#: what the LangChain table's columns count (the report and notebook 21 print it)
LANGCHAIN_LEGEND = (
    "Counts of questions. Outcome: `no_intent` (the intent call answered neither SELECT nor UPDATE: the chain stops), "
    "`update_refused` (UPDATE intent: the chain would write to the KG; refused), `parse_error`, `rejected` (not a "
    "read-only query), `timeout`, `empty` (no rows), `ok` (rows: scored). Shape: the generated query wrapped in a "
    "code fence (the chain passes it to the KG as it is), declaring the prefix `foaf:` (the prompt's example), "
    "containing INSERT or DELETE.")


def short_labels(t: ResultTable) -> ResultTable:
    """``t`` with each pair's long label (``PAIRS[pair][4]``, the report's) shortened to :data:`SHORT`'s (``MetaQA
    1-hop``, ``GrailQA-Tech``): a notebook's table then fits the page; the legend names each pair in full."""
    from dataclasses import replace

    short = {v[4]: SHORT[p] for p, v in PAIRS.items() if p in SHORT}
    return replace(t, rows=tuple(tuple(short.get(c, c) if isinstance(c, str) else c for c in r) for r in t.rows))


def langchain_reading(t: ResultTable) -> str:
    """What the LangChain table says, from its rows: how many of the chain's queries came wrapped in a code fence
    (which the chain does not strip), how many did not parse or were refused as writes, and how many returned rows."""
    rows = [dict(zip(t.columns, r)) for r in t.rows if isinstance(r[1], int)]
    if not rows:
        return ""
    n = sum(r["n"] for r in rows)
    outcomes = Counter()
    for r in rows:
        for part in str(r["outcome"]).split(", "):
            name, _, k = part.rpartition(" ")
            if k.isdigit():
                outcomes[name] += int(k)
    fenced = sum(int(r["code fence"]) for r in rows)
    return (f"Of the {n} questions, {fenced} got a query wrapped in a code fence (which the chain passes to the KG as "
            f"it is); {outcomes['parse_error']} got a query that did not parse, {outcomes['update_refused']} one that "
            f"asked to write to the KG (refused), and {outcomes['ok']} one that returned rows.")


def langchain_section(t: ResultTable) -> list[str]:
    return ["", f"## {t.title}", "", LANGCHAIN_LEGEND, "", _md(t), "", langchain_reading(t)]


#: the Table 2 analogue's paired column: each row minus the FuSIC(T) cell it is compared with (:data:`BASELINE_OF`)
T2_GAIN = "− FuSIC(T), paired (other zero-shot rows: − FuSIC(T) zero-shot)"


def table2_table(rec) -> ResultTable:
    """The Table 2 analogue: the cells of Table 2's configurations and of our deviations from them
    (:data:`TABLE2_CONFIGS`, :data:`TABLE2_DEVIATIONS`; the ablations, target shots and exemplar counts have
    their own tables), each cell's F1, its paired gain — the row minus the FuSIC(T) cell it is compared with
    (:data:`BASELINE_OF`) —, the paper's value and its cost per question (what differs from the paper:
    :func:`deviations_table`, each deviation once)."""
    rows = []
    for c in CELLS:
        pair, config = c.name.split(".")
        if config not in (*TABLE2_CONFIGS, *TABLE2_DEVIATIONS):
            continue
        recs = rec(pair, config)
        where, value = PAPER[config]
        row = summarize(recs) if recs and not partial_label(recs) else None  # a cell still running: no costs yet
        cost = ([f"{row['calls/q']:.2f}", f"{row['tokens/q']:.0f}", f"{row['s/q']:.1f}", row["cache_hits"]] if row
                else ["", "", "", ""])
        against = BASELINE_OF.get(config, "fs_dense")  # like for like: zero-shot KB-BINDER against zero-shot FuSIC
        base = rec(pair, against) if config != against else []
        rows.append([PAIRS[pair][4], CONFIGS[config][2], len(recs), _f1(recs), _gain(recs, base), f"{value} ({where})",
                     *cost])
    return table("table2", "Table 2 analogue: configurations, zero- and few-shot, KB-BINDER, gf-LLM, naive FS-ICL, "
                           "our deviations",
                 ["pair", "configuration", "n", "F1 [95% CI]",
                  T2_GAIN, "paper (W→GI-T)",
                  "calls/q", "tokens/q", "s/q", "cache hits"], rows)


def _pairs_of(configs: tuple[str, ...] | list[str]) -> str:
    """The pairs the cells of ``configs`` run on, in words (``every pair`` when all of them)."""
    on = [p for p in PAIRS if any(cell_name(p, c) in _NAMES for c in configs)]
    return "every pair" if len(on) == len(PAIRS) else ", ".join(SHORT[p] for p in on)


def deviations_table() -> ResultTable:
    """What differs from the paper beyond what every row shares (:data:`DIFFERS_ALL`), each deviation once
    with the cells it applies to (in the Table 2 analogue and the sections after it): per pair (:data:`PAIR_NOTE`), per configuration
    (:data:`RETRIEVER_NOTE`; configurations with the same note share a row) and the naive baseline on MetaQA."""
    rows = []
    for note in PAIR_NOTE.values():
        pairs = [p for p in PAIRS if _pair_note(p) == note]
        rows.append([f"every configuration on {', '.join(SHORT[p] for p in pairs)}", note])
    run = [c for c in CONFIGS if any(cell_name(p, c) in _NAMES for p in PAIRS)]
    by_note: dict[str, list[str]] = {}
    for c in run:
        by_note.setdefault(RETRIEVER_NOTE[c], []).append(c)
    for note, configs in by_note.items():
        rows.append([f"{'; '.join(f'`{c}` {CONFIGS[c][2]}' for c in configs)} — {_pairs_of(configs)}", note])
    naive = [c for c in run if c.startswith("fs_naive") and any(cell_name(p, c) in _NAMES for p in METAQA)]
    if naive:
        rows.append([f"{'; '.join(f'`{c}` {CONFIGS[c][2]}' for c in naive)} — on MetaQA",
                     naive_note(METAQA[0]).removeprefix("; ")])
    return table("deviations", "What differs from the paper, row by row",
                 ["applies to (the rows of the Table 2 analogue and of the sections below)", "what differs"], rows)


def withdrawn_lines(rec) -> list[str]:
    """Why each :data:`WITHDRAWN` cell is not run, with the numbers behind the reason: the committed
    path-depth measurement (no LLM, :mod:`kgqa_lib.bench.fusic_paths`) and fs_dense's recorded seconds."""
    from .fusic_paths import TABLE as PATH_DEPTH
    from .measure import read

    depth = {(r["hops"], r["max_path_hops"]): r for r in read(PATH_DEPTH).get("rows", [])}

    def at_depth(h: int) -> str:
        a, b = depth.get((h, 2)), depth.get((h, 3))
        if not (a and b):
            return f"{h}-hop not measured yet (`kgqa bench run fusic_path_depth`)"
        return (f"{h}-hop: gold path among the candidates {a['gold path in candidates']} → "
                f"{b['gold path in candidates']} of {a['n']}, in the dense few-shot retriever's top 5 "
                f"{a['dense few-shot top 5']} → {b['dense few-shot top 5']}, candidate paths per question "
                f"{a['paths/q mean']} → {b['paths/q mean']}")

    hops = [int(p[-1]) for p in WITHDRAWN["fs_dense_paths3"]]
    three = depth.get((3, 2)), depth.get((3, 3))
    kept = (f" (gold path among the candidates {three[0]['gold path in candidates']} → "
            f"{three[1]['gold path in candidates']} of {three[0]['n']})" if all(three) else "")
    secs = [r["seconds"] for p in WITHDRAWN["fs_dense_simex"] for r in rec(p, "fs_dense")
            if r.get("seconds") and not partial_label(rec(p, "fs_dense"))]
    cost = (f"; at fs_dense's recorded {_mean(secs):.0f} s a question its "
            f"{sum(PAIRS[p][2] for p in WITHDRAWN['fs_dense_simex'])} questions would take "
            f"≈ {_mean(secs) * sum(PAIRS[p][2] for p in WITHDRAWN['fs_dense_simex']) / 3600:.1f} h of model time, "
            "spent on the paper's own experiments instead" if secs else "")
    return [
        f"- `fs_dense_paths3` on {', '.join(SHORT[p] for p in WITHDRAWN['fs_dense_paths3'])} (withdrawn): a gold path of "
        "one or two relations is a candidate at the paper's depth already; the path-depth measurement (no LLM) shows "
        f"that depth 3 adds none and crowds the retriever's top k — {'; '.join(at_depth(h) for h in hops)}. The 3-hop "
        f"cell stays, where depth 3 makes the gold path a candidate{kept}.",
        f"- `fs_dense_simex` on {', '.join(SHORT[p] for p in WITHDRAWN['fs_dense_simex'])} (withdrawn; "
        f"{CONFIGS['fs_dense_simex'][2]}): the paper's exemplars are static and it reports dynamic selection only in "
        "words (\"only minor improvements\", sec. 5), so no paper number stands beside it" + cost
        + ". `kgqa run … --set exemplar_choice=similarity` still runs it.",
    ]


def target_table(rec) -> ResultTable:
    """A target this project set on MetaQA, not the paper's (F1 ≥ :data:`TARGET_F1` on every hop at ≤
    :data:`TARGET_CALLS` LLM calls per question):
    per one-retriever configuration and hop, its F1, LLM calls per question and whether it meets it."""
    rows = []
    for config in TARGET_CONFIGS:
        for p in METAQA:
            recs = rec(p, config)
            if cell_name(p, config) not in _NAMES:
                rows.append([CONFIGS[config][2], PAIRS[p][4], "", "", "no cell: withdrawn (see Not run, below)", 0])
                continue
            if not recs or recs.partial:  # a cell still running: its F1 is not the hop's yet
                rows.append([CONFIGS[config][2], PAIRS[p][4], "", "", recs.partial or "not run yet", len(recs)])
                continue
            f1 = summarize(recs, ["f1"])["f1"]
            calls = _stage_means(recs)[0].get("total", float("nan"))
            met = "met" if f1 >= TARGET_F1 and calls <= TARGET_CALLS else "not met"
            rows.append([CONFIGS[config][2], PAIRS[p][4], _pct(f1), f"{calls:.2f}", met, len(recs)])
    return table("target", f"A target on MetaQA: F1 ≥ {100 * TARGET_F1:.1f} on every hop with one retriever at ≤ "
                           f"{TARGET_CALLS} LLM calls per question",
                 ["configuration", "pair", "F1", "LLM calls/q (re-rank + generation + feedback)", "target", "n"], rows)


def _target_lines(t: ResultTable) -> list[str]:
    """The target table as the report's list: a configuration, then one line per hop."""
    lines, last = [], None
    for config, pair, f1, calls, met, n in t.rows:
        if config != last:
            lines.append(f"- {config}:")
            last = config
        lines.append(f"  - {pair}: {met}" if f1 == "" else
                     f"  - {pair}: F1 {f1}, {calls} LLM calls/q (re-rank + generation + feedback) — {met} (n={n})")
    return lines


def funnel_table(rec) -> ResultTable:
    """Where the answers are lost (:func:`funnel`, :func:`query_lengths`), few-shot, one retriever."""
    rows = []
    for p in (*METAQA, "gtech"):
        for config in ("fs_dense", *(d for d in DEPTH if cell_name(p, d) in _NAMES), "fs_bm25"):
            recs = rec(p, config)
            hops = DEPTH[config][1] if config in DEPTH else 2
            label = ("BM25 alone, " if config == "fs_bm25" else "dense, ") + f"paths ≤ {hops} relations" + (
                " (the paper's)" if hops == 2 else "")
            if not recs or recs.partial:
                rows.append([PAIRS[p][4], label, recs.partial or "not run yet", *[""] * 8])
                continue
            f, ql = funnel(recs, hops), query_lengths(recs)
            lengths = "not saved" if ql is None else (f"{ql['n']}: {ql['longer']} / {ql['shorter']} / {ql['same']}"
                                                      + (f" / {ql['unread']}" if ql["unread"] else ""))
            rows.append([PAIRS[p][4], label, *f.values(), lengths])
    return table("funnel", "Where the answers are lost (few-shot, one retriever)",
                 ["pair", "configuration", "n", "analysed", "topic linked",
                  "gold path short enough (≤ max_path_hops relations)", "gold path in top K", "gold path in prompt",
                  "query answered", "F1 = 1", "gold path in prompt, F1 < 1: the final query walks more / fewer / as "
                  "many relations as the gold path (/ unreadable)"], rows)


def kbbinder_table(records: Records) -> ResultTable:
    """KB-BINDER's drafts by outcome per cell (:func:`~kgqa_lib.bench.baselines.kbbinder_profile`)."""
    rows = []
    for c in CELLS:
        if c.name.split(".")[1].startswith("kbbinder"):
            recs = cell_records(records, c.name)
            rows.append([cell_label(c.name), len(recs), recs.partial or kbbinder_profile(recs) or "not run yet"])
    return table("kbbinder", "KB-BINDER's drafts by outcome", ["cell", "n", "drafts by outcome"], rows)


def cost_table(records: Records) -> ResultTable:
    """LLM calls and seconds per question by stage, per cell (:func:`_stage_means`), and the questions
    that made no re-rank call."""
    rows = []
    for c in CELLS:
        recs = cell_records(records, c.name)
        calls, secs = _stage_means(recs) if recs and not recs.partial else ({}, {})
        if not calls:
            rows.append([cell_label(c.name), recs.partial or ("not run yet" if not recs else len(recs)), *[""] * 10])
            continue
        method, sets, _ = CONFIGS[c.name.split(".")[1]]
        reranks = method == "fusic" and not {"rerank=false", "retrievers=none"} & set(sets)
        none = sum(((r.get("stages") or {}).get("calls") or {}).get("rerank") == 0 for r in recs) if reranks else "—"
        rows.append([cell_label(c.name), len(recs), *(f"{v:.2f}" for v in calls.values()),
                     *(f"{v:.1f}" for v in secs.values()), none])
    return table("cost", "Cost per question by stage",
                 ["cell", "n", "calls: re-rank", "generation", "feedback", "total", "s: retrieval", "re-rank",
                  "exemplars", "generation", "feedback", "no re-rank call"], rows)


def rounds_table(records: Records) -> ResultTable:
    """F1 after 0..4 feedback rounds per FuSIC cell with feedback (:func:`f1_after_rounds`), its feedback
    rounds and those that repeat the round before's query (:func:`feedback_repeats`), and for FuSIC(T)
    few-shot the check against its w/o-EGF cell on the same questions."""
    rows = []
    for c in CELLS:
        pair, config = c.name.split(".")
        recs = cell_records(records, c.name)
        if CONFIGS[config][0] != "fusic" or "egf_rounds=0" in CONFIGS[config][1]:  # (w/o EGF, the naive baseline)
            continue
        if not recs or recs.partial:
            rows.append([cell_label(c.name), recs.partial or "not run yet", *[""] * 7])
            continue
        noegf = cell_records(records, cell_name(pair, "fs_dense_noegf")) if config == "fs_dense" else CellRecords()
        qids = {r["qid"] for r in noegf} & {r["qid"] for r in recs}
        both = [r for r in recs if r["qid"] in qids]
        check = noegf.partial or ((f"{_pct(_mean([r['metrics']['f1'] for r in noegf if r['qid'] in qids]))} vs round 0 "
                                   f"{_pct(f1_after_rounds(both)[0])} (n={len(both)})") if both else "—")
        same, rounds = feedback_repeats(recs)
        repeats = f"{rounds} ({'not saved' if same is None else same})" if rounds else "0"
        rows.append([cell_label(c.name), len(recs), *(_pct(v) for v in f1_after_rounds(recs)), repeats, check])
    return table("rounds", "F1 after 0..4 feedback rounds (from each record's attempts)",
                 ["cell", "n", "round 0", "1", "2", "3", "4", "feedback rounds (same query as the round before)",
                  "w/o EGF cell (same questions)"], rows)


def table7_table(records: Records) -> ResultTable:
    """The Table 7 analogue (:func:`error_rates`): per FuSIC cell with retrieval, retriever and aspect."""
    fmt = lambda v: "—" if v is None else _pct(v)  # noqa: E731
    rows = []
    for c in CELLS:
        config = c.name.split(".")[1]
        if CONFIGS[config][0] != "fusic" or config.startswith("fs_naive"):
            continue
        recs = cell_records(records, c.name)
        found = error_rates(recs) if recs and not recs.partial else []
        if not found:
            rows.append([cell_label(c.name), recs.partial or ("not run yet" if not recs else "no gold analysis"),
                         *[""] * 5])
        rows += [[cell_label(c.name), x["retriever"], x["aspect"], x["n"], fmt(x["top_K"]), fmt(x["before"]),
                  fmt(x["after"])] for x in found]
    return table("table7", "Table 7 analogue: retrieval error rate (%) before and after LLM re-ranking",
                 ["cell", "retriever", "aspect", "n", "not in top K", "not in top k (before re-ranking)",
                  "not in LLM top k (after)"], rows)


def cell_reader(records: Records):
    """``(pair, config) → records`` of a cell, each marked partial while the cell is running
    (:func:`cell_records`): how every section of the report, and a notebook showing one, reads the cells."""
    return lambda p, c: cell_records(records, cell_name(p, c))


def result_tables(records: Records) -> dict[str, ResultTable]:
    """Every table of the report, as data (``.frame()`` for a notebook; the report renders the same
    values), by name: questions, table2, deviations, target, funnel, depth, kbbinder, langchain, cost, table3,
    shots, exemplars, table3_zero_shot, gfllm, rounds, table7."""
    rec = cell_reader(records)
    out = [questions_table(rec), table2_table(rec), deviations_table(), target_table(rec), funnel_table(rec),
           depth_table(rec), kbbinder_table(records), langchain_table(records), cost_table(records),
           ablations_table(records),
           shots_table(rec), exemplars_table(rec), ablations_table(records, "zero-shot"), gfllm_table(rec),
           rounds_table(records), table7_table(records)]
    return {t.name: t for t in out}


def report(records: Records) -> str:
    rec = cell_reader(records)
    t = result_tables(records)
    lines = ["# FuSIC-KBQA at benchmark scale (local model)", "",
             "Answer F1 in points with a bootstrap 95% CI; gains paired over the same questions (bootstrap 95% CI, "
             f"points). The paper's numbers are from its column {PAPER_COLUMN} (W→GI-T), named by table and row. "
             "A cell still running (it holds some but not all of its planned questions) reads `partial k/N` wherever "
             "a number computed from it would stand — its F1, gains, costs, counts — until it is complete. Every row "
             f"on GrailQA-Tech says \"{FRAGMENT}\": its KB is one fragment holding the questions' own gold facts. "
             + DIFFERS_ALL]
    lines += questions_section(t["questions"]) + choices_section(rec) + table1_section()
    lines += ["", f"## {t['table2'].title}", "",
              "The paper's Table 2 configurations (FuSIC(T), (P) and (T,P), KB-BINDER, gf-LLM, the naive baseline), "
              "our peers on MetaQA (IO, LangChain), then our deviations from those rows, each labelled; the ablations, "
              "the target shots and the exemplar counts have their own sections below (every cell's costs: \"Cost per "
              "question by stage\"). The paired column is each row minus the cell it is compared with: FuSIC(T) "
              "few-shot; for a zero-shot row other than FuSIC(T)'s own, FuSIC(T) zero-shot; for `fs_naive_dsex`, the "
              "naive baseline. For gf-LLM that is gf-LLM − FuSIC(T); its own section shows FuSIC(T) − gf-LLM, as the paper "
              "states the gap.", "", _md(t["table2"], tail="  | | |  |"), "",
              f"### {t['deviations'].title}", "",
              "Beyond what every row shares (above), each deviation once, with the rows it applies to: by pair, "
              "by configuration (its cell suffix, then the pairs it runs on), and the naive baseline on MetaQA.", "",
              _md(t["deviations"])]
    lines += ["", f"## {t['target'].title}", "",
              "A target this project set for FuSIC on MetaQA (the paper has no MetaQA column). A configuration meets "
              "it only on all three hops at once. Every configuration with one retriever counts: "
              "the dense retriever (the paper's FuSIC(T)) and BM25 alone (FuSIC(P)), few- and zero-shot, with the "
              "paper's candidate paths (≤ 2 relations), the dense few-shot deviation with paths ≤ 3 relations "
              "(`max_path_hops=3`, which MetaQA's 3-hop questions need), and the dense retriever fine-tuned on 25 and "
              "100 target shots (the paper's few-shot runs sample 100).", ""] + _target_lines(t["target"])
    lines += ["", "Where the answers are lost (few-shot, one retriever: dense, and BM25 alone; counts of questions; a gold "
              "path is a candidate only when it has at most `max_path_hops` relations — 2 as TIARA's enumeration, so a 3-hop MetaQA path is "
              "never one, 3 in the deviation; our walk passes through a CVT node without counting a step, which the "
              "paper does not describe, so on GrailQA-Tech this column undercounts the candidates). The last column "
              "looks at the generation step alone: of the questions whose prompt held the gold path and whose F1 is "
              "below 1, how many relations the final query walks against the gold path's (triple patterns other than "
              "rdf:type, property-path steps; on GrailQA a constraint's or a type's relation counts too):", "",
              _md(t["funnel"])]
    lines += depth_section(t["depth"])
    lines += ["", f"## {t['kbbinder'].title}", "",
              "Each question's 6 sampled drafts (FuSIC appendix A.3), summed over the cell: `ok` (a bound candidate "
              "returned answers), `no_answer` (no bound candidate did), `unbound_*` (a mention or name bound to nothing), "
              "and the malformed ones, counted and never fatal: `no_sexpr` (no s-expression in the reply), `parse_error`, "
              "`bad_form` (outside the grammar). The vote is over the `ok` drafts' answer sets.", "", _md(t["kbbinder"])]
    lines += langchain_section(t["langchain"])
    lines += ["", f"## {t['cost'].title}", "",
              f"LLM calls counted the paper's way (Limitations: {PAPER_CALLS} calls per question = 3 re-rank (one "
              "retriever's three aspects; \"the number of API calls increases with additional retrievers\") + 1 "
              "generation + 0.7 feedback on GrailQA→WebQSP; MetaQA has no entity types, so one retriever makes "
              "2 re-rank calls there). Seconds per stage from the trace (appendix A.5, GPT-4 with one retriever: "
              + ", ".join(f"{k} {v} s" for k, v in PAPER_STAGE_S.items())
              + "). Our machine: 2 CPU cores shared with other runs; cached LLM calls (cache hits) take no model time. "
              "A retrieved list of at most one candidate is not re-ranked (there is nothing to order): the last column "
              "counts the questions that made no re-rank call at all, as on GrailQA-Tech's fragment, where an entity "
              "has only the edges of the questions' gold facts.", "", _md(t["cost"])]
    lines += ["", f"## {t['table3'].title}", "",
              f"Paper: Table 3, few-shot, column W→GI-T: FuSIC-KBQA(T) {PAPER_FULL_T3}; the paper's difference is the "
              "ablation's value minus that.", "", _md(t["table3"])]
    lines += shots_section(t["shots"]) + exemplars_section(t["exemplars"]) + ["", exemplars_sentence(records)]
    lines += ["", f"## {t['table3_zero_shot'].title}", "",
              f"Paper: Table 3, zero-shot, column W→GI-T: FuSIC-KBQA(T) {PAPER_FULL_T3_ZS}; the paper's difference is "
              "the ablation's value minus that. Each ablation changes one setting of the zero-shot cell (`zs_dense`: "
              "the retriever trained on the source only, exemplars drawn from the source).", "",
              _md(t["table3_zero_shot"])]
    lines += gfllm_section(t["gfllm"])
    lines += ["", f"## {t['rounds'].title}", "",
              "A question whose query first returned answers at round j scores its F1 from round j on (0 before). Paper, "
              "sec. 4.2.2 (FuSIC-KBQA(T,P), W→GI-T): few-shot " + " → ".join(map(str, PAPER_EGF["few-shot"]))
              + " (rounds 3 and 4: the paper's \"does not improve thereafter\")"
              + "; zero-shot " + " → ".join(map(str, PAPER_EGF["zero-shot"])) + ". `w/o EGF` cell: the same questions "
              "run with egf_rounds=0 (its F1 should equal round 0: the first call is the same prompt). Feedback rounds: "
              "all the cell's, and those whose query is the round before's again (whitespace aside): a round that "
              "repeats its query cannot change the answer.", "", _md(t["rounds"])]
    lines += ["", f"## {t['table7'].title}", "",
              "Share of questions whose gold KB elements (entities excluded) are not all in: the retriever's top K (10), "
              "its own top k (the context size: one retriever 5 paths / 10 relations / 10 types, two 3/5/5), the LLM's "
              "top k. Aspects without a gold element are left out (MetaQA has no types). Paper, Table 7, column W→GI-T "
              "(all aspects; the supervised model's retrieval ≈ before, FuSIC's ≈ after): few-shot "
              + ", ".join(f"{k} {v}" for k, v in PAPER_T7["few-shot"].items()) + "; zero-shot "
              + ", ".join(f"{k} {v}" for k, v in PAPER_T7["zero-shot"].items()) + ".", "", _md(t["table7"])]
    lines += ["", "## Not run", "", "Cells withdrawn from the table, each with its reason:", ""] + withdrawn_lines(rec)
    lines += ["", "Not run either: shots 25/100 on GrailQA-Tech and the mini-world (their targets hold a pool of 10 questions; "
              "MetaQA has a reserve), FuSIC(T,P) EGF curve beyond what the `fs_both` cells give, the number of "
              "exemplars with two retrievers (the paper's FuSIC(T,P); ours: the dense retriever alone). "
              "Settings with no benchmark cell (unit-tested only): `context_size=compact`, `rerank_short_lists=false`, "
              "`naive_entities`, `dense_training=head` — the alternatives to the defaults other than `show_path_values` "
              "(cell `fs_dense_values`)."]
    return "\n".join(lines) + "\n"


def _few_above_zero() -> str:
    """The paper's few- against zero-shot FuSIC-KBQA(T), every column of Table 3 (:data:`PAPER_T3`): the effect
    the model axis checks."""
    pairs = list(zip(PAPER_T3["few-shot"]["FuSIC-KBQA(T)"], PAPER_T3["zero-shot"]["FuSIC-KBQA(T)"]))
    above, other = [p for p in pairs if p[0] > p[1]], [p for p in pairs if p[0] <= p[1]]
    said = lambda ps: ", ".join(f"{f} vs {z}" for f, z in ps)  # noqa: E731
    return (f"FuSIC-KBQA paper, Table 3, FuSIC-KBQA(T): few-shot above zero-shot on {len(above)} of its {len(pairs)} "
            f"pairs ({said(above)}" + (f"; {said(other)} the other way" if other else "") + ")")


TABLE = register(Table(
    name="fusic", title="FuSIC-KBQA: Tables 1, 2, 3, 7 analogues on MetaQA, GrailQA-Tech and the mini-world (local model)",
    cells=CELLS, report=report, output="fusic.md", strip=strip, records="fusic", metric="f1", row_label=cell_label,
    source="FuSIC-KBQA paper, Tables 1, 2, 3, 7, sec. 4.2.2, appendix A.5",
    effects=tuple(Effect(f"few-shot above zero-shot, MetaQA {h}-hop", _few_above_zero(),
                         ("fusic", f"metaqa{h}.fs_dense"), ("fusic", f"metaqa{h}.zs_dense")) for h in (1, 2, 3)),
))


def frames(model: str | None = None) -> dict[str, Any]:
    """The report's tables as DataFrames, from the saved records (of ``model``; default: the default model)."""
    return {name: t.frame() for name, t in result_tables(Records(TABLE, model)).items()}


#: the feedback-rounds panel's curves (:func:`figure_ablations`): configuration → line style, and its name there
ROUND_CURVES = {"fs_dense": "-", "zs_dense": ":", "fs_both": "--"}
ROUND_NAMES = {"fs_dense": "FuSIC(T), few-shot", "zs_dense": "FuSIC(T), zero-shot", "fs_both": "FuSIC(T,P), few-shot"}


def figure_ablations(records: Records):
    """Notebook 22's figure from the records (cells still running read as not run: pass
    ``complete_records``): Table 3's paired differences per pair with the paper's as black ticks; the F1
    gained over round 0 after 1..4 feedback rounds, few- and zero-shot FuSIC(T) and few-shot FuSIC(T,P)
    (:data:`ROUND_CURVES`), with the paper's FuSIC(T,P) curves (sec. 4.2.2); F1 against the target shots the dense retriever is fine-tuned on (MetaQA). One colour per
    pair throughout. Returns the figure."""
    import matplotlib.pyplot as plt

    pairs = [*METAQA, "gtech"]
    fig, axes = plt.subplots(1, 3, figsize=(15, 5), gridspec_kw={"width_ratios": [1.3, 1, 1]})
    ax, width, gains = axes[0], 0.8 / len(pairs), [g for g in ablation_gains(records) if g["ablation"] in ABLATIONS]
    for g in gains:
        i, j = ABLATIONS.index(g["ablation"]), pairs.index(g["pair"])
        x = i - 0.4 + width * (j + 0.5)
        if g["gain"] is None:
            ax.text(x, 0.5, "not run", rotation=90, fontsize=6, color="0.5", ha="center")
            continue
        d, lo, hi = (100 * v for v in g["gain"][:3])
        ax.bar(x, d, width, color=f"C{j}", yerr=[[d - lo], [hi - d]], capsize=2, ecolor="0.4")
    for i, a in enumerate(ABLATIONS):
        paper = next(g["paper − full"] for g in gains if g["ablation"] == a)
        ax.plot([i - 0.42, i + 0.42], [paper] * 2, color="black", lw=2)
    ax.axhline(0, color="0.3", lw=0.8)
    ax.set_xticks(range(len(ABLATIONS)), [CONFIGS[a][2] for a in ABLATIONS], fontsize=8)
    ax.set_ylabel("ablation − FuSIC(T) few-shot\n(F1 points, paired, 95% CI)", fontsize=8)
    ax.set_title("Table 3: one component removed (black: the paper's difference)", fontsize=9)

    ax = axes[1]
    for j, p in enumerate(pairs):
        for config, style in ROUND_CURVES.items():
            recs = records(cell_name(p, config))
            if recs:
                curve = f1_after_rounds(recs)
                ax.plot(range(5), [100 * (v - curve[0]) for v in curve], style, marker="o", ms=3, color=f"C{j}")
    for k, style in (("few-shot", "-"), ("zero-shot", ":")):
        ax.plot(range(5), [v - PAPER_EGF[k][0] for v in PAPER_EGF[k]], style, color="black", lw=1.5,
                label=f"paper, FuSIC(T,P), {k}")
    for config, style in ROUND_CURVES.items():
        ax.plot([], [], style, color="C0", label=f"ours, {ROUND_NAMES[config]} (colour: pair)")
    ax.axhline(0, color="0.3", lw=0.8)
    ax.set_xticks(range(5))
    ax.set_xlabel("feedback rounds allowed", fontsize=8)
    ax.set_ylabel("F1 gained over round 0 (points)", fontsize=8)
    ax.set_title("What feedback rounds add (sec. 4.2.2)", fontsize=9)
    ax.legend(fontsize=6.5, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)

    ax, shots, missing = axes[2], list(SHOTS), []
    for j, p in enumerate(METAQA):
        pts = []
        for k, n in enumerate(shots):
            recs = records(cell_name(p, SHOTS[n]))
            if not recs:
                missing.append(n)
                continue
            s = summarize(recs, ["f1"])
            pts.append((k + (j - 1) * 0.06, 100 * s["f1"], 100 * s["f1_ci"][0], 100 * s["f1_ci"][1]))
        if pts:
            x, f, lo, hi = zip(*pts)
            ax.errorbar(x, f, yerr=[[a - b for a, b in zip(f, lo)], [b - a for a, b in zip(f, hi)]], marker="o", ms=3,
                        capsize=2, color=f"C{j}")
    ax.set_xticks(range(len(shots)), [shots_label(n).replace(": ", "\n").replace(" (", "\n(") for n in shots], fontsize=7)
    ax.set_xlabel("target shots the dense retriever is fine-tuned on\n(MetaQA; from 5 on, the same 5 exemplars)",
                  fontsize=8)
    ax.set_ylabel("answer F1 (points, 95% CI)", fontsize=8)
    ax.set_ylim(0, 100)
    late = sorted(set(missing))
    ax.set_title("Target shots" + (f" (not run yet: {', '.join(map(str, late))})" if late else ""), fontsize=9)
    handles = [plt.Rectangle((0, 0), 1, 1, color=f"C{j}") for j in range(len(pairs))]
    fig.legend(handles, [SHORT[p] for p in pairs], loc="lower center", ncol=len(pairs), fontsize=7.5, frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return fig


# ---------------------------------------------------------------- what the notebooks show of it
#: the columns of the Table 2 analogue a notebook shows per pair (the report has the costs too; what differs:
#: :func:`deviations_table`)
TABLE2_COLUMNS = ("configuration", "n", "F1 [95% CI]", T2_GAIN,
                  "paper (W→GI-T)")


def sub_tables(t: ResultTable, columns: tuple[str, ...] | None = None,
               configs: tuple[str, ...] | None = None) -> dict[str, Any]:
    """``t`` split by its first column (a pair): ``{value: DataFrame of its rows}`` in order, with only
    ``columns`` (default all) and, with ``configs``, only the rows of those configurations (its
    ``configuration`` column) — a long table shown whole, one part at a time."""
    df = t.frame()
    if configs is not None:
        df = df[df["configuration"].isin([CONFIGS[c][2] for c in configs])]
    cols = list(columns or df.columns)
    return {k: df.loc[[k], cols].reset_index(drop=True) for k in dict.fromkeys(df.index)}


def only_configs(t: ResultTable, configs: tuple[str, ...]) -> ResultTable:
    """``t`` (a table with a row per cell, the cell's name first: ``metaqa1.fs_dense``) kept to the rows of
    ``configs``, in ``t``'s order: a long per-cell table's main rows."""
    return table(t.name, t.title, t.columns, [r for r in t.rows if cell_of(r[0]).split(".")[-1] in configs])


#: what each part of a configuration's name means (digits read as N): the cell names' legend (:func:`legend`)
NAME_PARTS = {
    "fs": "few-shot: the retriever fine-tuned on the source and the 5 target shots, 5 target exemplars in the prompt",
    "zs": "zero-shot: the retriever trained on the source only, exemplars from the source",
    "dense": "the dense retriever, a MiniLM bi-encoder (≈ FuSIC(T): the paper's TIARA)",
    "bm25": "BM25 alone (≈ FuSIC(P): for the paper's Pangu)",
    "both": "BM25 + dense (≈ FuSIC(T,P))",
    "naive": "the naive LLM FS-ICL baseline: no retrieval",
    "egf": "with FuSIC's execution-guided feedback (EGF) rounds",
    "noegf": "w/o EGF: the first query is final",
    "norr": "w/o re-ranking (RR): the retriever's own top k reaches the prompt",
    "sexpr": "w/o SPARQL: the LLM writes s-expressions",
    "sqlpaths": "the paths still shown as SPARQL",
    "rrsexpr": "re-ranking reads the paths as s-expressions (the paper's form)",
    "paperfb": "the paper's feedback (one fixed message)",
    "values": "the paths shown with the entities they reach",
    "pathsN": "candidate paths of up to N relations (the paper's: 2)",
    "dsex": "exemplars as GrailQA's own gold SPARQL",
    "simex": "exemplars ordered by similarity to the question",
    "shotsN": "the retriever fine-tuned on N target shots (the same 5 exemplars)",
    "exN": "N exemplars in the prompt (of the 5 target shots)",
    "gfllm": "gf-LLM: the retriever's own top k, s-expressions, one LLM call",
    "kbbinder": "KB-BINDER(-R), 6 drafts voted",
    "io": "direct answering (IO): the question alone, no KB",
    "langchain": "LangChain's GraphSparqlQAChain, its default prompts",
}


def name_parts(config: str) -> list[str]:
    """A configuration's name as :data:`NAME_PARTS` keys (``fs_dense_ex3`` → fs, dense, exN)."""
    return [x if x in NAME_PARTS else re.sub(r"\d+$", "N", x) for x in config.split("_")]


def cell_legend(names) -> str:
    """What each of the cells ``names`` (``<pair>.<configuration>``) is, one line each: its pair's and its
    configuration's labels (:data:`PAIRS`, :data:`CONFIGS`) — the ids of a few cells a notebook shows; the
    whole key is :func:`legend`."""
    lines = []
    for name in dict.fromkeys(names):
        pair, config = name.split(".", 1)
        lines.append(f"  {name}: {PAIRS[pair][4]}; {CONFIGS[config][2]}")
    return "\n".join(lines)


def legend() -> str:
    """What the ids in the tables and figures mean: a cell ``<pair>.<configuration>``, each pair, each part of a
    configuration's name (:data:`NAME_PARTS`), the datasets' names for MetaQA's questions and the model ids —
    printed once per notebook near its first table."""
    from ..llm.models import DEFAULT_LOCAL_MODEL, LOCAL_MODELS
    from ..methods.fusic.tasks import REPORTED

    lines = ["How to read the ids: a cell is <pair>.<configuration> (metaqa1.fs_dense: FuSIC(T) few-shot on MetaQA "
             "1-hop).", "Pairs:"]
    lines += [f"  {p}: {v[4]}" for p, v in PAIRS.items()]
    lines += ["Configurations, by the parts of their names:"]
    lines += [f"  {k}: {v}" for k, v in NAME_PARTS.items()]
    lines += [f"Datasets: fusic:mw-wd>metaqa:test-<N>hop (also fusic:mw-wd>metaqa:{REPORTED}-<N>hop) holds MetaQA dev "
              "questions, our reported part; `test` there names the transfer task's reported part (MetaQA's test set "
              "is not used).", "Models:"]
    lines += [f"  {m.model_id}: the local model {m.name}, 4-bit GGUF" + (" (the default: every cell's)" if
                                                                          m.name == DEFAULT_LOCAL_MODEL else "")
              for m in LOCAL_MODELS.values()]
    return "\n".join(lines)


def deviation_lines(configs: tuple[str, ...]) -> str:
    """What differs from the paper, as a list: every row's deviations (:data:`DIFFERS_EVERYWHERE`), each pair's
    (:data:`PAIR_NOTE`), each of ``configs``' (:data:`RETRIEVER_NOTE`) and, when the naive baseline is among them,
    why it can answer on MetaQA (:func:`naive_note`)."""
    lines = ["Every row:"] + [f"- {x}" for x in DIFFERS_EVERYWHERE]
    lines += ["Per pair:"] + [f"- {', '.join(SHORT[p] for p in PAIRS if _pair_note(p) == note)}: {note}"
                              for note in PAIR_NOTE.values()]
    lines += ["Per configuration:"] + [f"- {CONFIGS[c][2]}: {RETRIEVER_NOTE[c]}" for c in configs]
    if "fs_naive" in configs:
        lines.append(f"- {CONFIGS['fs_naive'][2]}, on MetaQA: {naive_note(METAQA[0]).removeprefix('; ')}")
    return "\n".join(lines)


#: the funnel's columns (:func:`funnel`), for a reader
FUNNEL_NOTE = ("n: the cell's questions; analysed: those with a gold analysis (the question's gold topic, path, "
               "relations and types read when the record was saved) — the columns up to \"gold path in prompt\" count "
               "among these, \"query answered\" and \"F1 = 1\" among all n; the last column looks at generation alone.")


#: Table 7's main cells: FuSIC(T) few- and zero-shot (the dense retriever) and FuSIC(T,P) few-shot (both)
T7_MAIN = {"fs_dense": "dense", "zs_dense": "dense", "fs_both": "all retrievers"}


def table7_main(t7: ResultTable) -> ResultTable:
    """The main cells of the Table 7 analogue (:data:`T7_MAIN`, all aspects together): the rows of
    ``t7`` — the report's table — for FuSIC(T) and FuSIC(T,P), per pair."""
    rows = sorted((r for r in t7.rows if r[2] == "all aspects" and T7_MAIN.get(cell_of(r[0]).split(".")[1]) == r[1]),
                  key=lambda r: (list(PAIRS).index(cell_of(r[0]).split(".")[0]),
                                 list(T7_MAIN).index(cell_of(r[0]).split(".")[1])))
    return table("table7_main", "Table 7 analogue, main cells: gold elements (all aspects) not in the top K, the "
                                "retriever's top k and the LLM's top k (% of questions)", t7.columns, rows)


#: the paper's Table 7 rows (:data:`PAPER_T7`) beside each main cell: setting, the supervised retrievers (≈ our
#: retriever's top k, before re-ranking) and the FuSIC row (≈ the LLM's top k, after)
T7_PAPER = {"fs_dense": ("few-shot", ("TIARA",), "FuSIC-KBQA(T)"), "zs_dense": ("zero-shot", ("TIARA",), "FuSIC-KBQA(T)"),
            "fs_both": ("few-shot", ("TIARA", "Pangu"), "FuSIC-KBQA(T,P)")}


def table7_beside_paper(t7: ResultTable) -> ResultTable:
    """:func:`table7_main` with the paper's Table 7 (column W→GI-T, all aspects) beside each row: its supervised
    retrievers' error rate → FuSIC's (:data:`T7_PAPER`)."""
    main = table7_main(t7)
    rows = []
    for r in main.rows:
        setting, before, after = T7_PAPER[cell_of(r[0]).split(".")[1]]
        paper = PAPER_T7[setting]
        rows.append([*r, f"{setting}: " + ", ".join(f"{x} {paper[x]}" for x in before) + f" → {after} {paper[after]}"])
    return table("table7_main", main.title + ", beside the paper's Table 7 (W→GI-T)",
                 [*main.columns, "paper, Table 7 (W→GI-T): supervised retrievers → FuSIC"], rows)


def table7_reading(t7: ResultTable) -> str:
    """What :func:`table7_main` shows of the LLM's re-ranking, from its rows: in how many of the main cells it lowers
    the share of questions missing gold elements (the retriever's top k → the LLM's top k), raises it or leaves
    it, beside appendix A.6's "LLM re-ranking always significantly boosts retrieval performance"."""
    main = table7_main(t7)
    moves = [float(r[-1]) - float(r[-2]) for r in main.rows if "—" not in (r[-1], r[-2]) and "" not in (r[-1], r[-2])]
    if not moves:
        return ""
    lower, higher = sum(m < 0 for m in moves), sum(m > 0 for m in moves)
    none = [cell_of(r[0]) for r in main.rows if r[-3] not in ("—", "") and float(r[-3]) == 100.0]
    return (f"Re-ranking by the LLM lowers the share of questions missing gold elements in {lower} of the "
            f"{len(moves)} main cells, raises it in {higher} and leaves it in {len(moves) - lower - higher} "
            "(the retriever's top k → the LLM's top k); the paper (appendix A.6): \"LLM re-ranking always "
            "significantly boosts retrieval performance\"."
            + (f" In {', '.join(none)} no question has its gold elements in the top K, so re-ranking has nothing to "
               "bring back." if none else ""))


def figure_table7(t7: ResultTable):
    """A heatmap of :func:`table7_main`: one row per cell, the retrieval error rate (%) in the top K,
    before and after LLM re-ranking, with the paper's FuSIC(T) few-shot value in the title."""
    import matplotlib.pyplot as plt
    import numpy as np

    main = table7_main(t7)
    labels = [f"{cell_of(r[0])} ({r[1]}, n={r[3]})" for r in main.rows]
    values = np.array([[float(c) if c not in ("—", "") else np.nan for c in r[4:]] for r in main.rows])
    fig, ax = plt.subplots(figsize=(7.5, 0.32 * len(labels) + 1.6))
    im = ax.imshow(values, cmap="Reds", vmin=0, vmax=100, aspect="auto")
    for (i, j), v in np.ndenumerate(values):
        ax.text(j, i, "—" if np.isnan(v) else f"{v:.0f}", ha="center", va="center", fontsize=7,
                color="white" if v > 60 else "black")
    ax.set_xticks(range(3), ["top K (10)", "top k, before\nre-ranking", "LLM's top k,\nafter re-ranking"], fontsize=8)
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    fig.colorbar(im, ax=ax, label="gold elements missing (% of questions)")
    paper = PAPER_T7["few-shot"]
    ax.set_title(f"Table 7 analogue: retrieval error rate (paper, few-shot W→GI-T: TIARA {paper['TIARA']}, "
                 f"FuSIC(T) {paper['FuSIC-KBQA(T)']})", fontsize=8.5)
    fig.tight_layout()
    return fig


def live_seconds(recs: list[dict[str, Any]]) -> tuple[float, float] | None:
    """(mean seconds per question a live run takes, share of LLM calls answered from the cache) for
    FuSIC records: the LLM-free stages (retrieval, exemplars) as measured plus every LLM call's live
    seconds (``llm.recorded_seconds``, which a cache hit carries from its recording); None without them."""
    rows = [r for r in recs if r.get("stages") and (r.get("llm") or {}).get("recorded_seconds") is not None]
    if not rows:
        return None
    live = _mean([r["stages"]["seconds"]["retrieval"] + r["stages"]["seconds"]["exemplars"]
                  + r["llm"]["recorded_seconds"] for r in rows])
    calls = sum(r["llm"].get("calls", 0) for r in rows)
    return live, (sum(r["llm"].get("cache_hits", 0) for r in rows) / calls if calls else 0.0)


#: the stages of a question's seconds (:func:`_stage_means`), the LLM's among them (the others make no LLM call)
STAGES = ("retrieval", "rerank", "exemplars", "generation", "feedback")
LLM_STAGES = ("rerank", "generation", "feedback")


def live_stage_seconds(recs: list[dict[str, Any]]) -> dict[str, float] | None:
    """Mean seconds per question by stage (:data:`STAGES`) as a live run takes them: each stage as measured, plus
    the recorded seconds of the LLM calls this run answered from the cache (``llm.recorded_seconds`` −
    ``llm.seconds``), which took none here. A record keeps no stage of each cache hit, so its hits are placed in
    the LLM stages whose calls ran fastest per call (a hit takes ~0 s), as many in a stage as it made calls, and
    the cached seconds are shared among them by those hits. Sums to :func:`live_seconds`' total up to the
    non-LLM work inside the LLM stages; None without records that hold their stages and recorded seconds."""
    rows = [r for r in recs if r.get("stages") and (r.get("llm") or {}).get("recorded_seconds") is not None]
    if not rows:
        return None
    out = {k: 0.0 for k in STAGES}
    for r in rows:
        secs, calls, llm = r["stages"]["seconds"], r["stages"]["calls"], r["llm"]
        for k in STAGES:
            out[k] += secs.get(k) or 0.0
        cached, hits = max(0.0, llm["recorded_seconds"] - (llm.get("seconds") or 0.0)), llm.get("cache_hits") or 0
        placed: dict[str, int] = {}
        for k in sorted((k for k in LLM_STAGES if calls.get(k)), key=lambda k: (secs.get(k) or 0.0) / calls[k]):
            placed[k] = min(hits - sum(placed.values()), calls[k])
        if cached and not sum(placed.values()):  # no hit counted, yet seconds recorded elsewhere: by calls
            placed = {k: calls.get(k) or 0 for k in LLM_STAGES}
        total = sum(placed.values())
        for k, n in placed.items():
            out[k] += cached * n / total if total else 0.0
    return {k: v / len(rows) for k, v in out.items()}


def figure_costs(cost: ResultTable, configs: tuple[str, ...] = ("fs_dense", "zs_dense", "fs_both"),
                 records: Records | None = None):
    """Seconds per question by stage as stacked bars, one bar per cell of ``configs``, beside the paper's appendix
    A.5 (GPT-4, one retriever). With ``records`` each bar is what a question takes live (:func:`live_stage_seconds`:
    a call answered from the cache at its recorded seconds) and its label says the share of calls answered from
    the cache; without, the report's cost table ``cost`` (this run's seconds, a cache hit none). A stage no bar
    shows (under 0.5% of the widest bar) is left out of the legend."""
    import matplotlib.pyplot as plt

    stages = ("retrieval", "re-rank", "exemplars", "generation", "feedback")
    rows = sorted((r for r in cost.rows if cell_of(r[0]).split(".")[1] in configs and r[6] != ""),
                  key=lambda r: (list(PAIRS).index(cell_of(r[0]).split(".")[0]), configs.index(cell_of(r[0]).split(".")[1])))
    bars = [("paper, A.5 (GPT-4)", [PAPER_STAGE_S["retrieval"], PAPER_STAGE_S["rerank"], 0.0,
                                    PAPER_STAGE_S["generation"], PAPER_STAGE_S["feedback"]])]
    for r in rows:
        recs = records(cell_of(r[0])) if records is not None else []
        live, share = live_stage_seconds(recs), live_seconds(recs)
        label = f"{cell_of(r[0])} (n={r[1]}" + (f", {share[1]:.0%} of calls from the cache" if live and share else "") + ")"
        bars.append((label, [live[k] for k in STAGES] if live else [float(x) for x in r[6:11]]))
    fig, ax = plt.subplots(figsize=(8, 0.3 * len(bars) + 1.8))
    left = [0.0] * len(bars)
    widest = max(sum(b[1]) for b in bars) or 1.0
    for k, stage in enumerate(stages):
        widths = [b[1][k] for b in bars]
        ax.barh(range(len(bars)), widths, left=left, color=f"C{k}",
                label=stage if max(widths) >= 0.005 * widest else "_nolegend_")
        left = [a + b for a, b in zip(left, widths)]
    ax.set_yticks(range(len(bars)), [b[0] for b in bars], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("seconds per question as a live run takes them (wall time on 2 shared CPU cores"
                  + ("; a call answered from the cache at its recorded seconds)" if records is not None else
                     "; this run: a call answered from the cache takes none)"), fontsize=8)
    ax.set_title("Cost per question by stage: FuSIC(T) few- and zero-shot, FuSIC(T,P) few-shot", fontsize=9)
    ax.legend(fontsize=7, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.12), frameon=False)
    fig.tight_layout()
    return fig


def costs_reading(records: Records, pairs: tuple[str, ...] = (*METAQA, "gtech")) -> str:
    """The seconds behind :func:`figure_costs` for FuSIC(T) few-shot, as a live run takes them per question
    (:func:`live_stage_seconds`), stage by stage and per pair, beside the paper's appendix A.5; empty without records."""
    cells = {p: cell_records(records, cell_name(p, "fs_dense")) for p in pairs}
    live = {p: live_stage_seconds(recs) for p, recs in cells.items() if recs and not recs.partial}  # never a running cell
    live = {p: v for p, v in live.items() if v}
    if not live:
        return ""
    names = {"retrieval": "retrieval", "rerank": "re-ranking", "exemplars": "exemplars", "generation": "generation",
             "feedback": "feedback"}
    per = lambda k: "/".join(f"{v[k]:.1f}" for v in live.values())  # noqa: E731
    return (f"FuSIC(T) few-shot, seconds a question takes live by stage ({', '.join(SHORT[p] for p in live)}): "
            + "; ".join(f"{names[k]} {per(k)}" for k in names)
            + "; sum " + "/".join(f"{sum(v.values()):.1f}" for v in live.values())
            + ". The paper (appendix A.5, GPT-4, one retriever): "
            + "; ".join(f"{names[k]} {PAPER_STAGE_S[k]}" for k in names if k in PAPER_STAGE_S)
            + f"; sum {sum(PAPER_STAGE_S.values()):.1f}.")


def _f1_of(records: Records, pair: str, config: str) -> float | None:
    """A cell's F1 in points; None without records or while it runs (a partial cell's F1 is not shown)."""
    recs = cell_records(records, cell_name(pair, config))
    return 100 * _mean([r["metrics"]["f1"] for r in recs]) if recs and not recs.partial else None


def _pts(values: list[float | None], sign: bool = False) -> str:
    return "/".join("—" if v is None else f"{v:+.1f}" if sign else f"{v:.1f}" for v in values)


def _paired(records: Records, pair: str, config: str, against: str) -> tuple[float, float, float, int] | None:
    a, b = cell_records(records, cell_name(pair, config)), cell_records(records, cell_name(pair, against))
    g = paired_f1(a, b) if a and b and not partial_label(a, b) else None
    return g if g and g[3] else None


def headline_transfer(records: Records) -> tuple[str, str]:
    """Notebook 21's headline metric: FuSIC(T) few-shot answer F1 on MetaQA dev 1/2/3-hop and GrailQA-Tech."""
    return ("FuSIC(T) few-shot answer F1, MetaQA dev (our reported part) 1/2/3-hop and GrailQA-Tech",
            _pts([_f1_of(records, p, "fs_dense") for p in (*METAQA, "gtech")]))


def headline_ablations(records: Records) -> tuple[str, str]:
    """Notebook 22's headline metric: what execution-guided feedback (EGF) gains, FuSIC(T) few-shot minus its
    Table 3 ablation *w/o EGF*, paired answer F1 in points on MetaQA dev 1/2/3-hop and GrailQA-Tech."""
    gains = [_paired(records, p, "fs_dense", "fs_dense_noegf") for p in (*METAQA, "gtech")]
    return ("FuSIC(T) few-shot, EGF's gain (full − w/o EGF), paired answer F1 points, MetaQA dev (our reported part) "
            "1/2/3-hop and GrailQA-Tech (gold-fact fragment)",
            " / ".join(f"{format_gain(g)} (n={g[3]})" if g else "—" for g in gains))


def _by_ci(gains: dict[str, tuple[float, float, float, int] | None]) -> dict[str, list[str]]:
    """Pairs by where their paired 95% CI lies: ``above`` 0, ``below`` 0, ``includes`` 0 (no records: left out)."""
    out: dict[str, list[str]] = {"above": [], "below": [], "includes": []}
    for p, g in gains.items():
        if g:
            out["above" if g[1] > 0 else "below" if g[2] < 0 else "includes"].append(SHORT[p])
    return out


def shots_reading(records: Records) -> str:
    """What the target-shots table says: the retriever fine-tuned on 25 and on 100 MetaQA target shots against 5
    (the same 5 exemplars in the prompt), paired per hop, and whether more shots move F1 the same way on every hop
    (by the paired 95% CIs). Empty until a pair of cells holds its records."""
    said, sides = [], []
    for n in (25, 100):
        gains = {p: _paired(records, p, SHOTS[n], SHOTS[5]) for p in METAQA}
        if any(gains.values()):
            said.append(f"{n} shots " + ", ".join(f"{SHORT[p]} {format_gain(g) if g else 'not run yet'}"
                                                   for p, g in gains.items()))
            sides += [k for k, v in _by_ci(gains).items() for _ in v]
    if not said:
        return ""
    counts = {k: sides.count(k) for k in ("above", "below", "includes")}
    verdict = ("more shots help on every hop" if counts["above"] == len(sides) else
               "more shots hurt on every hop" if counts["below"] == len(sides) else
               "no direction holds across the hops" if counts["above"] and counts["below"] else
               "no hop shows a difference its 95% CI can tell from 0" if counts["includes"] == len(sides) else
               "the hops disagree")
    return ("The retriever fine-tuned on more MetaQA target shots, minus 5 shots (paired F1, points; the same 5 "
            "exemplars in the prompt): " + "; ".join(said) + f". Of these {len(sides)} differences, {counts['above']} lie "
            f"above 0, {counts['below']} below and {counts['includes']} include 0 (95% CIs): {verdict}. The paper "
            "reports no shots study of the retriever; its few-shot runs sample 100 target shots (sec. 4.1).")


def _on(names: list[str]) -> str:
    return ", ".join(names) or "no pair"


def summary_transfer(records: Records) -> str:
    """Notebook 21's summary, from the records: FuSIC(T) few-shot on MetaQA and GrailQA-Tech beside the
    paper's Table 2; what retrieval adds over the naive baseline and KB-BINDER; few- against zero-shot FuSIC(T)
    on MetaQA and GrailQA-Tech (on MetaQA, the table's effects, :func:`effect_cells`) and a second retriever
    against one, each said as the paired 95% CI says it (as in the paper, the other way, unclear); MetaQA 3-hop
    beyond the candidate paths (:func:`beyond_candidates_sentence`); FuSIC(T) against gf-LLM
    (:func:`gfllm_sentence`). "—" or "not run yet" where a cell has no records. One paragraph per line (printed by
    :func:`kgqa_lib.notebooks.say`)."""
    four = (*METAQA, "gtech")
    f1 = lambda c: _pts([_f1_of(records, p, c) for p in four])  # noqa: E731
    naive = _by_ci({p: _paired(records, p, "fs_dense", "fs_naive") for p in four})
    both = _by_ci({p: _paired(records, p, "fs_both", "fs_dense") for p in four})
    fz = {p: _paired(records, p, "fs_dense", "zs_dense") for p in four}
    side = lambda g: ("as in the paper" if g[1] > 0 else "the other way from the paper" if g[2] < 0  # noqa: E731
                      else "unclear (95% CI including 0)")
    (t_few, t_zero), (tp_few, t_few_again) = ((PAPER["fs_dense"][1], PAPER["zs_dense"][1]),
                                              (PAPER["fs_both"][1], PAPER["fs_dense"][1]))
    parts = [f"FuSIC(T) few-shot (one dense retriever, the local 1.5B model) scores answer F1 {f1('fs_dense')} on "
             f"MetaQA dev (our reported part) 1/2/3-hop and GrailQA-Tech, against the paper's {PAPER['fs_dense'][1]} "
             f"on {PAPER_COLUMN} with gpt-4-0613. None of these numbers is a held-out estimate: settings, GrailQA-Tech's "
             "exemplar form among them, were chosen after looking at outcomes on these questions (the report's section "
             "on those choices).",
             f"Without retrieval (the naive FS-ICL baseline) F1 is {f1('fs_naive')} (the paper: {PAPER['fs_naive'][1]}; "
             "MetaQA's entity IRIs are their names, so there a query can be written without retrieval): "
             f"FuSIC(T) few-shot is above it on {_on(naive['above'])} (paired 95% CIs above 0)"
             + (f", not clearly on {_on(naive['includes'] + naive['below'])}" if naive["includes"] + naive["below"] else "")
             + f"; KB-BINDER few-shot scores {f1('kbbinder_fs')} (the paper: {PAPER['kbbinder_fs'][1]}), zero-shot "
             f"{f1('kbbinder_zs')} (the paper: {PAPER['kbbinder_zs'][1]}).",
             ("Few-shot minus zero-shot FuSIC(T), paired (the paper, W→GI-T: "
              f"{t_few} vs {t_zero}): " + "; ".join(f"{SHORT[p]} {format_gain(g)}, {side(g)}" if g else
                                                  f"{SHORT[p]} not run yet" for p, g in fz.items()) + "."),
             f"A second retriever (BM25 + dense, the paper's (T,P): {tp_few}, "
             f"{'above' if float(tp_few) > float(t_few_again) else 'not above'} its (T) {t_few_again}), paired against "
             f"FuSIC(T) few-shot: above it on {_on(both['above'])}, below on {_on(both['below'])} (95% CIs excluding 0)"
             + (f", unclear on {_on(both['includes'])}" if both["includes"] else "") + "."]
    parts.append(gfllm_sentence(records))
    three = cell_records(records, cell_name("metaqa3", "fs_dense"))
    if three and not three.partial:
        parts.append(beyond_candidates_sentence(records))
    return "\n".join(parts)


def gfllm_sentence(records: Records, pairs: tuple[str, ...] = (*METAQA, "gtech")) -> str:
    """Notebook 21's sentence on gf-LLM (:data:`GFLLM`): per setting, FuSIC(T) minus gf-LLM paired over the same
    questions on each pair, said as its 95% CI says it (as in the paper: FuSIC(T) above gf-LLM), beside the
    paper's Table 2 difference — once every cell of the setting is complete, else :func:`unfinished`'s words and
    no number. One list item (a ``- `` line) per setting."""
    said = []
    for setting, (config, full) in GFLLM.items():
        paper = float(PAPER[full][1]) - float(PAPER[config][1])
        head = f"{setting[0].upper()}{setting[1:]} (the paper: {paper:+.1f}):"
        state = unfinished(records, (config,), pairs) or unfinished(records, (full,), pairs)
        if state:
            said.append(f"{head} {state}.")
            continue
        gains = {p: _paired(records, p, full, config) for p in pairs}
        by = _by_ci(gains)
        said.append(f"{head} " + ", ".join(f"{SHORT[p]} {format_gain(g)}" for p, g in gains.items() if g)
                    + f": FuSIC(T) above gf-LLM, as in the paper, on {_on(by['above'])}, below it, the other way, on "
                      f"{_on(by['below'])}" + (f", unclear (95% CI including 0) on {_on(by['includes'])}"
                                                 if by["includes"] else "") + ".")
    return ("FuSIC(T) minus gf-LLM (the same dense retriever's own top k, s-expressions, one LLM call; paired answer "
            "F1, points):" + "".join(f"\n- {x}" for x in said))


def beyond_candidates(recs: list[dict[str, Any]], max_hops: int = 2) -> dict[str, int]:
    """How a cell answers the questions whose gold path is longer than any candidate path (more than
    ``max_hops`` relations, :func:`funnel`): ``n`` of the cell's questions, ``beyond`` such questions, of those
    ``F1 = 1``, of these ``relations in prompt`` (every gold relation among the prompt's relations: the
    LLM's top k, the retriever's own without re-ranking) and ``first query`` (answered by the first query, before
    any feedback round)."""
    def relations_in_prompt(g: dict[str, Any]) -> bool:
        key = "after" if any(x["after"] is not None for x in g["retrieval"]) else "before"
        return any(x["aspect"] == "relation" and x[key] for x in g["retrieval"])

    far = [r for r in recs if (r.get("gold_analysis") or {}).get("gold_hops", 0) > max_hops]
    right = [r for r in far if r["metrics"].get("f1") == 1.0]
    return {"n": len(recs), "beyond": len(far), "F1 = 1": len(right),
            "relations in prompt": sum(relations_in_prompt(r["gold_analysis"]) for r in right),
            "first query": sum(len(attempts_of(r)) == 1 for r in right)}


def beyond_candidates_sentence(records: Records, pair: str = "metaqa3") -> str:
    """Notebook 21's sentence on MetaQA 3-hop, from :func:`funnel` and :func:`beyond_candidates` of FuSIC(T) and
    FuSIC(P) few-shot: how often the gold path is a candidate at the paper's depth, and what the model answers
    without it."""
    dense, bm25 = (cell_records(records, cell_name(pair, c)) for c in ("fs_dense", "fs_bm25"))
    hops = PAPER_PATH_HOPS
    f, b = funnel(dense, hops), beyond_candidates(dense, hops)
    other = beyond_candidates(bm25, hops) if bm25 and not bm25.partial else None
    text = (f"On {SHORT[pair]} the gold path is a candidate for {f['gold path short enough']} of {f['n']} questions "
            f"(the paper's candidate paths have at most {hops} relations), yet FuSIC(T) few-shot reaches F1 = 1 on "
            f"{b['F1 = 1']} of the {b['beyond']} whose gold path is longer (F1 "
            f"{_pct(_mean([r['metrics']['f1'] for r in dense]))}"
            + (f"; FuSIC(P): {other['F1 = 1']} of {other['beyond']}" if other else "") + ")")
    if b["F1 = 1"]:
        text += (f": on {b['relations in prompt']} of those {b['F1 = 1']} every gold relation was in the prompt and the "
                 f"model wrote the longer query itself; {b['first query']} with its first query, before any feedback "
                 "round")
    return text + "."


#: what the paper itself says of an ablation in :data:`PAPER_T3` that does not cost points: (setting, row, column)
PAPER_T3_SAID = {("few-shot", "w/o SPARQL", "W→Gp-P"): "sec. 4.2.2: the biggest gain comes from SPARQL \"except for "
                                                          "the few-shot setting in the fourth dataset\""}


def paper_table3_reading() -> str:
    """The paper's Table 3 in words, from :data:`PAPER_T3`: in how many of its cases (setting × ablation × column)
    removing a component costs points, the cases where it does not (with what the paper says of them,
    :data:`PAPER_T3_SAID`), and whether every ablation costs points in column W→GI-T, the one ours are compared
    with."""
    cases = [(setting, row, col, v, rows["FuSIC-KBQA(T)"][i]) for setting, rows in PAPER_T3.items()
             for row, values in rows.items() if row != "FuSIC-KBQA(T)" for i, (col, v) in enumerate(zip(PAPER_T3_COLUMNS, values))]
    kept = [c for c in cases if c[3] >= c[4]]
    ours = [c for c in kept if c[2] == PAPER_T3_COLUMNS[_WGIT]]
    text = (f"In the paper's Table 3 (FuSIC-KBQA(T), {len(PAPER_T3_COLUMNS)} source→target columns, few- and zero-shot) "
            f"removing a component costs points in {len(cases) - len(kept)} of its {len(cases)} cases")
    if kept:
        text += "; not in " + "; ".join(
            f"{row}, {setting}, {col} ({v} vs the full model's {full}" + (f"; {PAPER_T3_SAID[setting, row, col]}"
                                                                   if (setting, row, col) in PAPER_T3_SAID else "") + ")"
            for setting, row, col, v, full in kept)
    return text + (f". In its column {PAPER_T3_COLUMNS[_WGIT]}, the one ours are compared with, "
                   + ("every ablation costs points, few- and zero-shot." if not ours else
                      "not every ablation costs points either."))


#: where one ablation's paired difference (ablation − full) stands against the paper, by its 95% CI, in the words of
#: the summary: :func:`ablation_side`'s keys, in the order the summary lists them
SIDES = {"gains": "the other way from the paper, removing the component gains (95% CI above 0)",
         "costs": "as in the paper, removing the component costs points (95% CI below 0)",
         "unclear, above 0": "unclear (95% CI including 0), above 0 in the mean",
         "unclear, below 0": "unclear (95% CI including 0), below 0 in the mean",
         "unclear, 0": "unclear (95% CI including 0), 0 in the mean",
         "same": "no difference: every question scored the same with and without the component"}


def ablation_side(gain: tuple[float, float, float, int] | None) -> str | None:
    """Where one ablation's paired difference (ablation − full, :func:`ablation_gains`) stands against the paper's
    Table 3, by one rule on its 95% CI (as :func:`~kgqa_lib.bench.core.effect_verdict`): ``gains`` (CI above 0: the
    other way from the paper), ``costs`` (CI below 0: as the paper), else ``unclear, above 0`` / ``unclear, below
    0`` / ``unclear, 0`` by the sign of its mean rounded to the 0.1 point shown; ``same`` when the interval is the
    single point 0 (every question scored the same); None without a pair of cells."""
    if not gain:
        return None
    mean, lo, hi, _ = gain
    if mean == lo == hi == 0:
        return "same"
    if lo > 0:
        return "gains"
    if hi < 0:
        return "costs"
    shown = round(100 * mean, 1)
    return "unclear, above 0" if shown > 0 else "unclear, below 0" if shown < 0 else "unclear, 0"


def _sides(gains: dict[tuple[str, str], Any], pairs: tuple[str, ...], ablations: tuple[str, ...]
           ) -> tuple[list[str], bool]:
    """Every pair × ablation of ``ablations`` with a paired difference in exactly one list of :data:`SIDES`
    (:func:`ablation_side`), each with its difference and 95% CI: the lists' sentences (items of a list,
    :func:`_listed`) and whether any removal gains (a 95% CI above 0)."""
    lists = {side: [] for side in SIDES}
    for a in ablations:
        for side in SIDES:
            on = [(p, gains[(p, a)]) for p in pairs if ablation_side(gains.get((p, a))) == side]
            if on:
                lists[side].append(f"{CONFIGS[a][2]} on " + ", ".join(f"{SHORT[p]} {format_gain(g)}" for p, g in on))
    said = [f"{SIDES[side][0].upper()}{SIDES[side][1:]}: {'; '.join(items)}." for side, items in lists.items() if items]
    return said, bool(lists["gains"])


def _listed(head: str, said: list[str], any_gain: bool) -> str:
    """``head`` followed by :func:`_sides`' sentences as a list, one ``- `` line each (the last one says so when no
    removal gains), as :func:`kgqa_lib.notebooks.say` prints it."""
    items = said + ([] if any_gain else ["Removing a component gains on no pair (no 95% CI above 0)."])
    return head + "".join(f"\n- {x}" for x in items)


def _reversals(gains: dict[tuple[str, str], Any], pairs: tuple[str, ...]) -> str:
    """Table 3 in words against the paper (:func:`paper_table3_reading`): every pair × ablation with a paired
    difference in exactly one list of :data:`SIDES` (:func:`_sides`), each with its difference and 95% CI."""
    said, any_gain = _sides(gains, pairs, ABLATIONS)
    if not said:
        return paper_table3_reading() + " Ours against it: not run yet (no ablation paired with its full cell)."
    return _listed(paper_table3_reading() + " Ours, by each paired 95% CI:", said, any_gain)


def unfinished(records: Records, configs: tuple[str, ...], pairs: tuple[str, ...] = (*METAQA, "gtech")) -> str | None:
    """None when every cell of ``configs`` on ``pairs`` is complete; else what a summary says in place of a
    conclusion: ``not run yet`` (no records in any of them) or ``still running (k of N cells complete)`` (a
    cell without records or still running, :func:`cell_records`, counts as not complete)."""
    recs = [cell_records(records, cell_name(p, c)) for c in configs for p in pairs]
    done = sum(1 for r in recs if r and not r.partial)
    if done == len(recs):
        return None
    return f"still running ({done} of {len(recs)} cells complete)" if any(recs) else "not run yet"


def _zero_shot_and_exemplars(records: Records, pairs: tuple[str, ...]) -> list[str]:
    """Notebook 22's summary on Table 3's zero-shot half and the number of exemplars in the prompt (sec.
    4.2.2): their paired differences beside the paper's once every cell of each is complete (the zero-shot ones
    also sorted by their 95% CI, :func:`_sides`, as the few-shot half), else :func:`unfinished`'s words and no
    number."""
    zs = "Table 3's zero-shot half (FuSIC(T) zero-shot with one component removed, paired, points, MetaQA 1/2/3-hop " \
         "and GrailQA-Tech): "
    state = unfinished(records, ZS_ABLATIONS, pairs) or unfinished(records, ("zs_dense",), pairs)
    if state:
        zs += state + "."
    else:
        gains = {(g["pair"], g["ablation"]): g["gain"] for g in ablation_gains(records, "zero-shot")}
        zs += "; ".join(f"{CONFIGS[a][2]} {_pts([100 * gains[(p, a)][0] if gains[(p, a)] else None for p in pairs], True)}"
                        f" (the paper: {float(PAPER[a][1]) - PAPER_FULL_T3_ZS:+.1f})" for a in ZS_ABLATIONS) + "."
        said, any_gain = _sides(gains, pairs, ZS_ABLATIONS)
        zs = _listed(zs + " Zero-shot, by each paired 95% CI:", said, any_gain)
    return [zs, exemplars_sentence(records, pairs)]


def exemplars_sentence(records: Records, pairs: tuple[str, ...] = (*METAQA, "gtech")) -> str:
    """Notebook 22's sentence on the number of exemplars in the prompt (sec. 4.2.2): once every cell of the study
    is complete, one list item (a ``- `` line) per count n — n exemplars minus 5 paired over the same questions on
    each pair, the pairs sorted by where the 95% CI lies, beside the paper's difference — and a last item setting
    the paper's range against ours; else :func:`unfinished`'s words and no number."""
    head = "Fewer exemplars in the prompt (sec. 4.2.2; n − 5 exemplars, paired, points, the same pairs): "
    fewer = tuple(c for n, c in EXEMPLARS.items() if n != 5)
    state = unfinished(records, fewer, pairs) or unfinished(records, (EXEMPLARS[5],), pairs)
    if state:
        return head + state + "."
    said, ours, inside = [], [], {}
    for n, c in EXEMPLARS.items():
        if n == 5:
            continue
        gains = {p: _paired(records, p, c, EXEMPLARS[5]) for p in pairs}
        ours += [100 * g[0] for g in gains.values() if g]
        for p, g in gains.items():  # the paper's difference inside our paired 95% CI
            if g and 100 * g[1] <= PAPER_SHOTS[n] - PAPER_SHOTS[5] <= 100 * g[2]:
                inside.setdefault(p, []).append(str(n))
        by = _by_ci(gains)
        said.append(f"{n} (the paper, FuSIC-KBQA(T,P): {PAPER_SHOTS[n] - PAPER_SHOTS[5]:+.1f}): "
                    + ", ".join(f"{SHORT[p]} {format_gain(g)}" for p, g in gains.items() if g)
                    + f": below 5 exemplars on {_on(by['below'])}, above on {_on(by['above'])}"
                    + (f", unclear (95% CI including 0) on {_on(by['includes'])}" if by["includes"] else "") + ".")
    paper = [PAPER_SHOTS[n] - PAPER_SHOTS[5] for n in EXEMPLARS if n != 5]
    if ours:
        said.append(f"The paper's differences lie between {min(paper):+.1f} and {max(paper):+.1f} points; ours between "
                    f"{min(ours):+.1f} and {max(ours):+.1f}. The paper's difference lies inside our paired 95% CI on "
                    + ("; ".join(f"{SHORT[p]} at {' and '.join(ns)} exemplar{'s' if ns != ['1'] else ''}"
                                 for p, ns in inside.items()) or "no pair at any count") + ".")
    return head.rstrip(": ") + ":" + "".join(f"\n- {x}" for x in said)


def summary_ablations(records: Records) -> str:
    """Notebook 22's summary, from the records: Table 3's paired differences per ablation beside the
    paper's, where ours goes the other way, the zero-shot ablations and the number of exemplars (or that
    they are still running), what the feedback rounds do (and how many repeat their query), and Table 7's
    error rate before and after the LLM's re-ranking. One paragraph per line (printed by
    :func:`kgqa_lib.notebooks.say`)."""
    pairs = (*METAQA, "gtech")
    gains = {(g["pair"], g["ablation"]): g["gain"] for g in ablation_gains(records)}
    parts = ["Removing one component of FuSIC(T) few-shot changes F1 by (paired, points, MetaQA 1/2/3-hop and "
             "GrailQA-Tech): " + "; ".join(
                 f"{CONFIGS[a][2]} {_pts([100 * gains[(p, a)][0] if gains[(p, a)] else None for p in pairs], True)} "
                 f"(the paper: {float(PAPER[a][1]) - PAPER_FULL_T3:+.1f})" for a in ABLATIONS) + ".",
             _reversals(gains, pairs), *_zero_shot_and_exemplars(records, pairs)]
    rep = []
    for p in METAQA:
        full = cell_records(records, cell_name(p, "fs_dense"))
        same, n = feedback_repeats(full) if not full.partial else (None, 0)
        if n:
            rep.append(f"{'?' if same is None else same} of {n} on {p[-1]}-hop")
    one = cell_records(records, cell_name("metaqa1", "fs_dense"))
    curve = f1_after_rounds(one) if one and not one.partial else None
    both = cell_records(records, cell_name("metaqa1", "fs_both"))
    curve_tp = f1_after_rounds(both) if both and not both.partial else None
    parts.append("Feedback: " + (f"on MetaQA 1-hop F1 goes {_pct(curve[0])} → {_pct(curve[-1])} from round 0 to 4 with "
                                 "FuSIC(T)"
                                 + (f" and {_pct(curve_tp[0])} → {_pct(curve_tp[-1])} with both retrievers, the "
                                    "paper's setting here" if curve_tp else "")
                                 + f" (the paper, (T,P): {PAPER_EGF['few-shot'][0]} → {PAPER_EGF['few-shot'][-1]}); "
                                 if curve else "")
                 + ("feedback rounds that repeat the query before them, which cannot change the answer: "
                    + ", ".join(rep) + "." if rep else "no feedback rounds recorded yet."))
    t7 = [r for r in table7_main(table7_table(records)).rows if cell_of(r[0]).split(".")[1] == "fs_dense"]
    if t7:
        parts.append("Table 7 (FuSIC(T) few-shot, % of questions missing a gold element, the retriever's top k → the "
                     "LLM's): " + ", ".join(f"{SHORT[cell_of(r[0]).split('.')[0]]} {r[5]} → {r[6]}" for r in t7)
                     + f"; the paper: TIARA {PAPER_T7['few-shot']['TIARA']} → FuSIC(T) "
                       f"{PAPER_T7['few-shot']['FuSIC-KBQA(T)']}.")
    return "\n".join(parts)


def feedback_rescues(records: Records, pairs: tuple[str, ...] = MINIWORLD,
                     configs: tuple[str, ...] = ("fs_both", "fs_dense", "fs_bm25", "zs_both", "zs_dense", "zs_bm25")
                     ) -> list[dict[str, Any]]:
    """Questions on which execution-guided feedback rescued the query: the first attempt failed, a later
    one answered and the answer scored F1 = 1 — per cell of ``pairs`` × ``configs`` (the mini-world pairs:
    our own questions, which a walkthrough may show): cell, qid, each attempt's status, LLM calls."""
    found = []
    for p in pairs:
        for c in configs:
            for r in records(cell_name(p, c)):
                a = attempts_of(r)
                if len(a) > 1 and a[0].get("status") != "ok" and r["metrics"].get("f1") == 1.0:
                    found.append({"cell": cell_name(p, c), "task": PAIRS[p][0], "qid": r["qid"],
                                  "attempts": [x.get("status") for x in a], "LLM calls": r["llm"]["calls"]})
    return found
