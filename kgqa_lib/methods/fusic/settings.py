"""The method's typed settings (``kgqa run --method fusic --help-settings``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..base import Context, Settings, setting



@dataclass(frozen=True)
class FuSICSettings(Settings):
    """``kgqa run --method fusic --help-settings``."""

    task: str = setting("geo-wd>cinema-fb", "the transfer task, source>target (its KGs and questions)")
    shots: int = setting(5, "few-shot examples of the target available to the retrievers (0 = zero-shot); "
                            "up to the pool's 10, MetaQA up to 100 (tasks.SHOT_RESERVE)", min=0)
    retrievers: str = setting("bm25,dense", "comma-separated supervised retrievers: bm25, dense, minilm; 'none' (or "
                                            "'') = the paper's naive LLM FS-ICL baseline: no KB retrieval, question "
                                            "-> SPARQL with the exemplars (sec. 4.2.1)")
    rerank: bool = setting(True, "re-rank the retrieved candidates with the LLM")
    egf_rounds: int = setting(4, "execution-guided feedback rounds after the first query", min=0)
    language: Literal["sparql", "sexpr"] = setting("sparql", "what the LLM writes: SPARQL or s-expressions")
    oracle_linking: bool = setting(False, "link the gold topic entities instead of the question's mentions")
    K: int = setting(10, "candidates each retriever returns per aspect before re-ranking", min=1)
    exemplars: int = setting(5, "exemplars shown in the prompt (the paper's 5, appendix A.1.3; our earlier default: 3)",
                             min=0)
    max_answers: int = setting(100, "answers kept from a query's result", min=1)
    # paper-faithful defaults; each deviation is one of these settings
    show_path_values: bool = setting(False, "show each retrieved path with (up to two of) the entities it reaches, "
                                            "not as a bare SPARQL program (our earlier default; a one-hop answer is then "
                                            "in the context)")
    context_size: Literal["paper", "compact"] = setting(
        "paper", "k per aspect: paper = appendix A.1.3 (one retriever: 5 paths, 10 relations, 10 types; two: 3/5/5); "
                 "compact = our earlier default (5/4/2; two: 3/3/1)")
    rerank_short_lists: bool = setting(True, "re-rank a list of k or fewer candidates too, as the paper's prompts do "
                                             "(3 re-rank calls per retriever); false: keep the retriever's order, no call")
    dense_training: Literal["finetune", "head"] = setting(
        "finetune", "how the dense retriever is trained on the source (and target shots): finetune = the whole MiniLM "
                    "(minutes); head = a linear map over frozen MiniLM embeddings (faster; not the default)")
    max_path_hops: Literal[1, 2, 3] = setting(
        2, "relations on a candidate path (unlabelled CVT/statement nodes walked through uncounted): 2 = the paper "
           "(TIARA enumerates 2-hop paths, appendix A.1.1); 3 reaches MetaQA's 3-hop answers (the walk's third hop "
           "expands a sample of each 2-hop path's nodes, candidates.THIRD_HOP_SAMPLE); the question's and its "
           "exemplars' candidates, not the dense retriever's training data (trained on 2-hop candidates either way)")
    exemplar_choice: Literal["static", "similarity", "bm25"] = setting(
        "static", "which exemplars, in which order: static = the paper (sec. 3 and 5: the target's few shots as "
                  "they are; zero-shot, source questions drawn at random once, with the run's seed); similarity "
                  "= the `exemplars` closest to the question by sentence embedding, closest last (dynamic "
                  "selection, which the paper tried and dropped; our earlier default); bm25 = the closest by "
                  "BM25 over the questions' words, closest last (how the paper's KB-Binder and gf-LLM baselines "
                  "pick theirs, sec. 4.1 and 5)")
    paths_as: Literal["sparql", "logical_form"] = setting(
        "sparql", "how the generation prompt shows the retrieved paths: sparql = as SPARQL programs (sec. 3, "
                  "whatever the LLM writes); logical_form = in the language the LLM writes — with language=sexpr, "
                  "as s-expressions (the paper translates TIARA's s-expression paths to SPARQL, appendix A.1.1; "
                  "its w/o-SPARQL ablation does not say which it shows). Re-ranking: the setting rerank_paths_as")
    rerank_paths_as: Literal["sparql", "sexpr"] = setting(
        "sparql", "how the re-ranking prompt lists the candidate paths: sparql = as SPARQL programs, the form the "
                  "generation prompt shows (ours); sexpr = as s-expressions, (JOIN (R r) e), the form of the paper's "
                  "re-ranking prompt (appendix A.1.2: TIARA's paths); both with the relations' labels as a comment")
    exemplar_sparql: Literal["concise", "dataset"] = setting(
        "concise", "how an exemplar's SPARQL is written when the dataset gives its own logical forms (GrailQA): "
                   "concise = from its s-expression (kg.sexpr.to_sparql: SELECT DISTINCT ?x WHERE { ns:m.… ns:rel ?x "
                   ". }, as the retrieved paths and the paper's exemplars, appendix A.1.3); dataset = GrailQA's own "
                   "gold SPARQL, prefixes shortened (nested SELECT, VALUES, FILTER; our earlier default). Other KBs: "
                   "no effect")
    feedback: Literal["diagnostic", "paper"] = setting(
        "diagnostic", "what execution-guided feedback reacts to and says: diagnostic = any failed execution (no "
                      "query, parse error, unknown id, a query that does not use the question's entity, timeout, no "
                      "rows, more than max_answers rows) is told to the LLM with what failed, and a repeated query is "
                      "pointed out (ours); paper = sec. 3 and appendix A.1.4: a query that "
                      "returns no answer gets the paper's one fixed message, a query that returns answers is final "
                      "(no check that it uses the question's entity); our row cap (max_answers) still applies")
    naive_entities: bool = setting(False, "with retrievers=none: still link the question's entities and show them "
                                          "(our earlier no-retrieval configuration)")

    @property
    def naive(self) -> bool:
        """No retriever: the naive LLM FS-ICL baseline."""
        return self.retrievers.strip().lower() in ("", "none")


def settings_of(ctx: Context) -> dict[str, Any]:
    """The method's settings, defaults filled in (a dict, as the stages take them)."""
    from dataclasses import asdict

    return asdict(FuSICSettings.of(ctx))
