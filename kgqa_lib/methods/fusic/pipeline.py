"""The pipeline: every stage in turn for one question (the registered method ``fusic``)."""

from __future__ import annotations

from typing import Any, Sequence

from ...data.datasets import Question
from ..base import Context, MethodResult, Stage, Tracer, register_method
from .candidates import enumerate_candidates
from .execution import egf_loop
from .generation import build_messages, context_block, context_sizes, exemplars_for, rerank_sizes
from .linking import link_entities
from .reranking import Reranked, rerank, trim
from .retrieval import make_retrievers, retrieve
from .settings import FuSICSettings, settings_of
from .tasks import check_task, get_task


def calls_by_stage(stages: Sequence[Stage]) -> dict[str, Any]:
    """LLM calls and seconds per stage of one question, the paper's way (Limitations: 3 re-rank calls
    per retriever + 1 generation + 0–4 feedback calls, "4.7 API calls on average" with one retriever;
    appendix A.5: retrieval 14.4 s, re-ranking 9.6 s, generation 14.4 s, EGF 18.9 s per question).
    Read from the stages' outputs, so a saved record's trace gives the same numbers."""
    by_name = {s.name: s for s in stages}
    reranks = [s for s in stages if s.name.startswith("rerank:")]
    per_retriever: dict[str, int] = {}
    for s in reranks:
        per_retriever[s.output.retriever] = per_retriever.get(s.output.retriever, 0) + int(s.output.called)
    gen = by_name.get("generate_and_execute")
    attempts = list(gen.output) if gen else []
    calls = {"rerank": sum(per_retriever.values()), "generation": min(1, len(attempts)),
             "feedback": max(0, len(attempts) - 1)}
    seconds = {"retrieval": sum(by_name[n].seconds for n in ("link_entities", "enumerate_candidates", "retrieve")
                                if n in by_name),
               "rerank": sum(s.seconds for s in reranks),
               "exemplars": by_name["exemplars"].seconds if "exemplars" in by_name else 0.0,
               "generation": attempts[0].seconds if attempts else 0.0,
               "feedback": sum(a.seconds for a in attempts[1:])}
    return {"calls": {**calls, "total": sum(calls.values())}, "rerank_calls_by_retriever": per_retriever,
            "seconds": {k: round(v, 4) for k, v in seconds.items()}}


def check_run(dataset: str, settings: Any) -> None:
    """A ``fusic:TASK:…`` dataset is run with its own task (given, or the default when it is that)."""
    check_task(dataset, FuSICSettings.of(settings).task, "fusic", default="task" not in settings)


@register_method("fusic", prompts=("fusic_rerank", "fusic_sparql", "fusic_sexpr", "fusic_naive"), settings=FuSICSettings,
                 needs=("embedder",), check=check_run)
def fusic(q: Question, ctx: Context) -> MethodResult:
    """FuSIC-KBQA on a transfer task (``kgqa run --method fusic --help-settings``). With
    ``retrievers=none``: the paper's naive LLM FS-ICL baseline (sec. 4.2.1) — no entity linking,
    no retrieval, no re-ranking; the question and the exemplars (question → SPARQL) in one
    generation call, then execution-guided feedback as for FuSIC. The trace ends with
    ``calls_by_stage`` (see :func:`calls_by_stage`)."""
    st = FuSICSettings.of(ctx)
    s = settings_of(ctx)
    task = get_task(s["task"], ctx.seed)
    dom = task.target
    kg = dom.kg_for(q)
    tr = Tracer()
    embedder = ctx.embedder
    naive = st.naive
    linking = None
    if not naive or st.naive_entities:
        linking = tr.record("link_entities", link_entities, q, kg, embedder, oracle=s["oracle_linking"],
                            topic_iris=(dom.gold(q).topics if s["oracle_linking"] and dom.gold(q) else ()))
    # the fine-tuned retriever's rankings are recorded when the LLM's transcripts are (own data only)
    recording = getattr(getattr(ctx.llm, "cache", None), "transcripts", None) is not None
    retrievers = [] if naive else make_retrievers(s["retrievers"], s["task"], s["shots"], ctx.seed, st.dense_training,
                                                  record=recording)
    sizes = context_sizes(len(retrievers), st.context_size)
    contexts: list[Reranked] = []
    if retrievers:
        cands = tr.record("enumerate_candidates", enumerate_candidates, kg, linking, dom.profile,
                          max_hops=st.max_path_hops)
        retrieved = tr.record("retrieve", retrieve, q.question, cands, retrievers, s["K"])
        if s["rerank"]:  # re-rank to a fixed k (shared by every configuration), then cut to the context size
            keep = rerank_sizes(st.context_size)
            ranked = [tr.record(f"rerank:{r.retriever}:{r.aspect}", rerank, q.question, r, ctx, keep[r.aspect],
                                profile=dom.profile)
                      for r in retrieved]
        else:
            ranked = [Reranked(r.retriever, r.aspect, [c for c, _ in r.items], []) for r in retrieved]
        contexts = trim(ranked, sizes)
    paths_in = s["language"] if st.paths_as == "logical_form" else "sparql"
    context = context_block(linking, contexts, dom.profile, show_values=st.show_path_values, paths_in=paths_in)
    shots = tr.record("exemplars", exemplars_for, q, task, s["shots"], s["language"], retrievers, s["exemplars"],
                      sizes, embedder, show_values=st.show_path_values, naive=naive and not st.naive_entities,
                      max_hops=st.max_path_hops, choice=st.exemplar_choice, seed=ctx.seed, paths_in=paths_in,
                      sparql_form=st.exemplar_sparql)
    messages = build_messages(q.question, context, shots, s["language"], dom.profile,
                              naive=naive and not st.naive_entities, paths_in=paths_in)
    entities = linking.entities if linking is not None else []
    attempts = tr.record("generate_and_execute", egf_loop, messages, kg, dom.profile, ctx, s["language"],
                         s["egf_rounds"], entities)
    tr.stages.append(Stage("calls_by_stage", calls_by_stage(tr.stages)))
    final = attempts[-1].execution
    error = None if final.ok else f"query_{final.status}"
    return MethodResult(final.answers if final.ok else [], final.sparql or attempts[-1].response, tr.stages, error)
