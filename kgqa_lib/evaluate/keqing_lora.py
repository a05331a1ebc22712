"""Keqing's fine-tuned decomposer at toy scale (notebook 33): the training examples (the mini-world
pool's gold decompositions), four decomposers of the same test questions — in context with the 1.5B
and the 0.5B model, the 0.5B zero-shot, the 0.5B with LoRA adapters — how each decomposition compares
with the gold relation path, and a summary printed from the recorded training and decompositions.

The paper fine-tunes LLaMA-7B with LoRA on its training questions' decompositions (section 3.1;
appendix D, Table 8); it reports no decomposition accuracy, so ours is shown beside its training run
only. The tuned model answers through the record/replay cache like every LLM call: its model id names
the recipe and the training data (:meth:`kgqa_lib.llm.finetune.LoraRecipe.key`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

DECOMPOSERS = ("ICL, 1.5B", "ICL, 0.5B", "zero-shot, 0.5B", "LoRA, 0.5B")
BASE_ID = "qwen2.5-0.5b-hf"  # the 0.5B weights through transformers, without adapters
KG = "miniworld"
# The Keqing paper, appendix D, Table 8, row "Question Decomposition", dataset MetaQA (LoRA on LLaMA-7B).
PAPER_TABLE8 = {"base model": "LLaMA-7B (app. D)", "LoRA rank / α / targets / learning rate": "not given",
                "training examples": 32927, "batch (per device)": 64, "epochs": 3, "training time": "9.5 h",
                "hardware": "two NVIDIA Quadro RTX 8000, 48G each (app. D); 16.5G used"}
OUTCOMES = ("right", "too few hops", "too many hops", "a hop reversed", "another relation", "unparseable")


def training_examples() -> list[tuple[list[dict[str, str]], str]]:
    """(messages, gold decomposition JSON) for every pool question: the decomposition prompt's
    instructions and the question, then the answer the adapters learn."""
    from ..llm.prompting import load_prompt
    from ..methods.keqing import bank_for, format_decomposition, gold_decomposition, pool_for

    bank, system = bank_for(KG), load_prompt("keqing_decompose").system
    return [([{"role": "system", "content": system}, {"role": "user", "content": f"Question: {p.question}"}],
             format_decomposition(gold_decomposition(p, bank))) for p in pool_for(KG)]


def sample_questions(hops: list[int], n_questions: int | None, seed: int) -> list[Any]:
    """``n_questions`` mini-world test questions per hop (None: all), seeded."""
    from ..data.datasets import Dataset
    from ..methods.keqing import keqing_dataset

    test = keqing_dataset(KG).questions
    return [q for h in hops for q in Dataset("h", [x for x in test if x.metadata["hops"] == h]).sample(n_questions, seed)]


def template_overlap(questions: list[Any], n_exemplars: int, embedder) -> str:
    """How new the test questions are to the decomposers: the training pool's question templates, how many test
    questions share one with the pool (every template has pool questions: :func:`~kgqa_lib.methods.keqing.pool_for`),
    and for how many the in-context decomposers' worked examples include a question of the same template."""
    from collections import Counter

    from ..methods.keqing import bank_for, pool_for, select_exemplars

    pool, bank = pool_for(KG), bank_for(KG)
    templates = Counter(p.metadata.get("template") for p in pool)
    shared = [q for q in questions if q.metadata.get("template") in templates]
    shown = sum(any(p.metadata.get("template") == q.metadata.get("template")
                    for p, _ in select_exemplars(q, pool, bank, embedder, n_exemplars)) for q in shared)
    each = sorted(set(templates.values()))
    return (f"The {len(pool)} pool questions the training examples come from hold {len(templates)} question templates "
            f"({'/'.join(map(str, each))} each); {len(shared)} of the {len(questions)} test questions share a template "
            f"with them, and for {shown} of them the in-context decomposers' {n_exemplars} worked examples include a "
            "question of the same template: the test questions are new, their templates are not.")


def record_file(key: str) -> Path:
    """Where a recipe's training record is kept: ``results/bench/keqing_lora_<key>.json``."""
    from ..paths import results_dir

    return results_dir() / "bench" / f"keqing_lora_{key}.json"


def table8(training, recipe, n_examples: int):
    """The paper's Table 8 row (MetaQA, question decomposition) beside our training run (``training``: its
    :class:`~kgqa_lib.llm.finetune.Training` record, None before one is made)."""
    import pandas as pd

    ours = {"base model": "Qwen2.5-0.5B-Instruct",
            "LoRA rank / α / targets / learning rate": f"{recipe.rank} / {recipe.alpha} / "
                                                       f"{', '.join(t.removesuffix('_proj') for t in recipe.targets)} / "
                                                       f"{recipe.lr:g}",
            "training examples": n_examples, "batch (per device)": recipe.batch,
            "epochs": round(recipe.steps * recipe.batch / n_examples, 1),
            "training time": f"{training.seconds:.0f} s (recorded)" if training else "not trained yet",
            "hardware": "CPU, float32"}
    return pd.DataFrame({"Keqing paper, Table 8 (MetaQA)": PAPER_TABLE8, "ours": ours})


def decomposers(icl_llm, tuned, tok, key: str, cache, mode: str, n_exemplars: int) -> dict[str, tuple[Any, int]]:
    """The four decomposers, name → (LLM, worked examples shown): ``icl_llm`` (the pipeline's 1.5B model) in
    context; the 0.5B weights of ``tuned`` with its adapters off, in context and zero-shot; the tuned model
    zero-shot. ``tuned`` None (not loaded): the 0.5B decomposers answer from the recordings only."""
    from ..llm.finetune import tuned_llm

    base = tuned_llm(BASE_ID, tuned, tok, cache, mode, adapters=False)
    return {"ICL, 1.5B": (icl_llm, n_exemplars), "ICL, 0.5B": (base, n_exemplars), "zero-shot, 0.5B": (base, 0),
            "LoRA, 0.5B": (tuned_llm(f"{BASE_ID}+lora-{key}", tuned, tok, cache, mode), 0)}


def decompose_all(decomposers: dict[str, tuple[Any, int]], questions: list[Any], embedder, seed: int = 0):
    """Every decomposer on every question: a DataFrame (decomposer, qid, hops, correct — the top-1 template
    sequence equals the gold relation path —, parse error, predicted chain, the model's output) and the
    LLM usage per decomposer."""
    import pandas as pd

    from ..llm.chat import track_usage
    from ..methods import Context
    from ..methods.keqing import (bank_for, decompose, gold_chain, match_templates, order_subquestions, pool_for,
                                  select_exemplars)

    bank, pool = bank_for(KG), pool_for(KG)
    rows, usage = [], {}
    for name, (llm, n_shots) in decomposers.items():
        ctx = Context(llm=llm, embedder=embedder, seed=seed)
        with track_usage() as usage[name]:
            for q in questions:
                shots = select_exemplars(q, pool, bank, embedder, n_shots) if n_shots else []
                dec = decompose(q, ctx, shots)
                matches = match_templates(order_subquestions(dec.subquestions), bank, embedder, 1)
                predicted = tuple(c for m in matches for c in (m.chains[0] if m.chains else ()))
                rows.append((name, q.qid, q.metadata["hops"], predicted == gold_chain(q), dec.error or "",
                             " / ".join(predicted), dec.text))
    return pd.DataFrame(rows, columns=["decomposer", "qid", "hops", "correct", "parse", "predicted chain", "output"]), usage


def outcome(predicted: str, gold: tuple[str, ...], parse: str = "", correct: bool | None = None) -> str:
    """How a decomposition's top-1 template sequence (``predicted``, ``"a / ^b"``) compares with the gold
    relation path: right, too few or too many hops, a hop reversed (the right relation, the wrong
    direction), another relation, or unparseable output."""
    pred = tuple(predicted.split(" / ")) if predicted else ()
    if parse == "fallback":
        return "unparseable"
    if correct if correct is not None else pred == tuple(gold):
        return "right"
    if len(pred) != len(gold):
        return "too few hops" if len(pred) < len(gold) else "too many hops"
    return "a hop reversed" if any(p != g and p.lstrip("^") == g.lstrip("^") for p, g in zip(pred, gold)) else \
        "another relation"


def with_outcomes(runs, questions):
    """``runs`` with an ``outcome`` column (:func:`outcome`) and ``multi-hop``."""
    from ..methods.keqing import gold_chain

    gold = {q.qid: gold_chain(q) for q in questions}
    return runs.assign(outcome=[outcome(r["predicted chain"], gold[r["qid"]], r["parse"], bool(r["correct"]))
                                for _, r in runs.iterrows()], **{"multi-hop": runs["hops"] > 1})


def accuracy(runs):
    """Decomposition accuracy per decomposer, in points with its 95% Wilson interval: by hop and over all
    (each column names its n), and the count of unparseable outputs."""
    import pandas as pd

    from .metrics import wilson_interval

    def cell(ok) -> str:
        k, n = int(ok.sum()), len(ok)
        low, high = wilson_interval(k, n)
        return f"{100 * k / n:.1f} [{100 * low:.1f}, {100 * high:.1f}]" if n else "—"

    order = list(dict.fromkeys(runs["decomposer"]))
    cols = {}
    for h in sorted(runs["hops"].unique()):
        part = runs[runs["hops"] == h]
        cols[f"{h}-hop (n={part['qid'].nunique()})"] = part.groupby("decomposer")["correct"].apply(cell)
    cols[f"all (n={runs['qid'].nunique()})"] = runs.groupby("decomposer")["correct"].apply(cell)
    cols["unparseable outputs"] = runs.groupby("decomposer")["parse"].apply(lambda s: int((s == "fallback").sum()))
    out = pd.DataFrame(cols).loc[order]
    out.index.name = "decomposer"
    return out


def figure_multihop(runs):
    """What the headline counts, as a figure: per decomposer, the multi-hop (2- and 3-hop) test questions
    decomposed right, in points with the 95% Wilson interval and "k of n" on the bar."""
    import matplotlib.pyplot as plt

    from .metrics import wilson_interval

    multi = runs[runs["hops"] > 1]
    order = list(dict.fromkeys(runs["decomposer"]))
    rows = [(name, int(multi[multi["decomposer"] == name]["correct"].sum()), int((multi["decomposer"] == name).sum()))
            for name in order]
    fig, ax = plt.subplots(figsize=(5.8, 0.45 * len(rows) + 1.3))
    for y, (name, k, n) in enumerate(rows):
        low, high = (100 * x for x in wilson_interval(k, n))
        share = 100 * k / n if n else 0.0
        ax.barh(y, share, 0.6, color="#55A868" if name.startswith("LoRA") else "#4C72B0" if name.startswith("ICL")
                else "#999999", xerr=[[share - low], [high - share]] if n else None, capsize=3, ecolor="0.3")
        ax.text(min(high if n else share, 100.0) + 2, y, f"{k} of {n}", va="center", fontsize=8)
    ax.set_yticks(range(len(rows)), [name for name, _, _ in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set(xlim=(0, 120), xlabel="multi-hop questions decomposed right, points (95% Wilson interval)")
    ax.set_xticks([0, 20, 40, 60, 80, 100])  # room right of 100 for the counts, no tick above it
    ax.set_title(f"Decomposers of the mini-world multi-hop test questions (2- and 3-hop, n={multi['qid'].nunique()})",
                 fontsize=9)
    ax.xaxis.label.set_fontsize(8)
    fig.tight_layout()
    return fig


def outcome_table(runs, questions):
    """Per decomposer, 1-hop and multi-hop questions: how many decompositions had each outcome."""
    import pandas as pd

    o = with_outcomes(runs, questions)
    t = pd.crosstab([o["decomposer"], o["multi-hop"].map({False: "1-hop", True: "multi-hop"}).rename("questions")],
                    o["outcome"])
    return t.reindex(list(dict.fromkeys(runs["decomposer"])), level=0)[[c for c in OUTCOMES if c in t.columns]]


def summary(runs, questions, training, n_exemplars: int) -> str:
    """Notebook 33's summary from the recorded training and decompositions: the training beside the paper's
    Table 8, what the adapters do to multi-hop decomposition against the same weights without them, in-context
    decomposition, and whether the tuned and in-context 0.5B's 95% Wilson intervals separate."""
    o = with_outcomes(runs, questions)
    multi = sum(q.metadata["hops"] > 1 for q in questions)
    one = len(questions) - multi
    right = lambda name, mh: int(((o["decomposer"] == name) & (o["multi-hop"] == mh) & (o["outcome"] == "right")).sum())  # noqa: E731
    lora, zero = right("LoRA, 0.5B", True), right("zero-shot, 0.5B", True)
    trained = (f"Trained on {training.examples} pool decompositions for {training.steps} steps ({training.seconds:.0f} s "
               f"on CPU; the paper's Table 8: {PAPER_TABLE8['training examples']:,} MetaQA examples, "
               f"{PAPER_TABLE8['epochs']} epochs, {PAPER_TABLE8['training time']} on GPUs), the LoRA 0.5B decomposer"
               if training else "The LoRA 0.5B decomposer")
    out = [f"{trained} gets {right('LoRA, 0.5B', False)} of {one} one-hop and {lora} of {multi} multi-hop test "
           "questions right (the top-1 templates give the gold relation path)."]
    errors = o[(o["decomposer"] == "LoRA, 0.5B") & o["multi-hop"] & (o["outcome"] != "right")]["outcome"].value_counts()
    gain = ("no gain" if lora == zero else f"{lora - zero} more right" if lora > zero else f"{zero - lora} fewer right")
    out.append(f"The same weights without the adapters, zero-shot, get {zero} of {multi} multi-hop right: the adapters "
               f"show {gain} here" + (f" (the tuned model's multi-hop errors: {', '.join(f'{k} {v}' for k, v in errors.items())})"
                                      if len(errors) else "") + ".")
    icl = right("ICL, 0.5B", True)
    out.append(f"In context, with {n_exemplars} worked examples and no training, the untuned 0.5B gets "
               f"{icl} of {multi} multi-hop right and the 1.5B {right('ICL, 1.5B', True)} of {multi}.")
    out.append(f"With {len(questions)} test questions these are examples, not rates: " + _apart(lora, icl, multi) +
               f"; with a 0.5B model and {training.examples if training else len(training_examples())} training "
               "examples it does not test the paper's choice to fine-tune its decomposer rather than prompt it "
               "(sec. 3.1).")
    return " ".join(out)


def _apart(tuned: int, icl: int, n: int) -> str:
    """Whether the 95% Wilson intervals of the tuned and the in-context 0.5B (``k`` of ``n`` multi-hop) overlap."""
    from .metrics import wilson_interval

    (t_lo, t_hi), (c_lo, c_hi) = wilson_interval(tuned, n), wilson_interval(icl, n)
    both = (f"{tuned} of {n} tuned (95% Wilson interval {100 * t_lo:.0f}–{100 * t_hi:.0f}%) against {icl} of {n} "
            f"in context ({100 * c_lo:.0f}–{100 * c_hi:.0f}%)")
    if t_hi < c_lo or c_hi < t_lo:
        return f"{both} are apart, so the in-context 0.5B is {'ahead' if icl > tuned else 'behind'} on these questions only"
    return f"{both} overlap, so these questions do not separate the tuned and the in-context 0.5B"


HEADLINE_DECOMPOSERS = ("LoRA, 0.5B", "zero-shot, 0.5B", "ICL, 0.5B")  # in the order :func:`headline` names them


def headline(runs, n_exemplars: int) -> tuple[str, str]:
    """Notebook 33's headline metric: the multi-hop test questions each 0.5B decomposer gets right — tuned with
    LoRA (no examples), the same weights zero-shot without the adapters, and in context with ``n_exemplars``."""
    multi = runs[runs["hops"] > 1]
    right = lambda name: int(multi[multi["decomposer"] == name]["correct"].sum())  # noqa: E731
    n = multi["qid"].nunique()
    return _headline_metric(n_exemplars), " / ".join(f"{right(name)} of {n}" for name in HEADLINE_DECOMPOSERS)


def _headline_metric(n_exemplars: int) -> str:
    return ("Keqing decomposer, multi-hop mini-world test questions decomposed right (the top-1 templates give the gold "
            f"relation path): LoRA-tuned 0.5B / the same 0.5B zero-shot / in context with {n_exemplars} worked examples")


def _recorded(hops: list[int], n_questions: int | None, seed: int, recipe, n_exemplars: int, llm: str):
    """(runs, questions, training record or None), the decompositions replayed from the transcripts (no model
    loaded); raises the replay's error when these settings are not recorded."""
    from ..embed.embedder import Embedder
    from ..llm.chat import LLMCache, make_llm
    from ..llm.finetune import Training

    examples = training_examples()
    key = recipe.key(examples)
    path = record_file(key)
    training = Training.load(path) if path.exists() else None
    questions = sample_questions(hops, n_questions, seed)
    llms = decomposers(make_llm(llm, "replay"), None, None, key, LLMCache(), "replay", n_exemplars)
    runs, _ = decompose_all(llms, questions, Embedder(), seed)
    return runs, questions, training


def _not_recorded(exc: Exception) -> str:
    return f"These settings are not recorded yet ({type(exc).__name__}: {str(exc).splitlines()[0][:160]})"


def recorded_summary(hops: list[int], n_questions: int | None, seed: int, recipe, n_exemplars: int,
                     llm: str = "local") -> str:
    """:func:`summary` from what is recorded only (the training record, the decompositions in the
    transcripts: replayed, no model loaded), or what is missing when these settings are not recorded."""
    from ..errors import InfrastructureError, UserError

    try:
        runs, questions, training = _recorded(hops, n_questions, seed, recipe, n_exemplars, llm)
    except (InfrastructureError, UserError) as exc:
        return (f"{_not_recorded(exc)}: the notebook runs them below (LLM_MODE auto or live; TRAIN=True trains), then "
                "this summary reads them.")
    return summary(runs, questions, training, n_exemplars)


def recorded_headline(hops: list[int], n_questions: int | None, seed: int, recipe, n_exemplars: int,
                      llm: str = "local") -> tuple[str, str]:
    """:func:`headline` from the recorded decompositions (replayed, no model loaded), or what is missing."""
    from ..errors import InfrastructureError, UserError

    try:
        runs, _, _ = _recorded(hops, n_questions, seed, recipe, n_exemplars, llm)
    except (InfrastructureError, UserError) as exc:
        return _headline_metric(n_exemplars), _not_recorded(exc)
    return headline(runs, n_exemplars)
