"""What the walkthroughs 10, 20 and 30 call to show a stage: the stages exposed by name (Keqing's retrieval and
reasoning of one sub-question, FuSIC's re-ranking prompt) do what the whole method does, and the displays
(kgqa_lib.evaluate.walkthrough, the reasoning-path drawing, the cell legend, the call recorder) say what they
claim."""

from __future__ import annotations

from types import SimpleNamespace as NS

from kgqa_lib.evaluate import walkthrough as W


# ---------------------------------------------------------------- small texts
def test_answers_are_listed_whole_or_counted():
    assert W.some_of(list("abc"), 3) == "['a', 'b', 'c']"
    assert W.some_of(list("abcd"), 2) == "['a', 'b'] + 2 more"
    from kgqa_lib.methods.fusic.execution import Attempt, Execution

    films = [f"Film {i}" for i in range(12)]
    attempts = [Attempt(0, "SELECT ?x", Execution("SELECT ?x", "", "ok", films[:6], 6))]
    assert W.fusic_rounds(attempts).splitlines()[0] == f"── round 0: ok, 6 answers: {films[:6]}"  # all six
    attempts = [Attempt(0, "SELECT ?x", Execution("SELECT ?x", "", "ok", films, 12))]
    assert W.fusic_rounds(attempts).splitlines()[0].endswith(f"12 answers: {films[:10]} + 2 more")


def test_prompt_turns_label_the_roles_and_count_what_is_left_out():
    messages = [{"role": "system", "content": "Write SPARQL."}]
    for i in (1, 2, 3):
        messages += [{"role": "user", "content": f"Question: q{i}"}, {"role": "assistant", "content": f"SELECT {i}"}]
    messages.append({"role": "user", "content": "Question: mine\n"})
    text = W.prompt_turns(messages)
    assert text.startswith("[system]\nWrite SPARQL.\n\n[user · exemplar 1 of 3]\nQuestion: q1\n\n"
                           "[assistant · exemplar 1 of 3]\nSELECT 1")
    assert "(… 4 more messages: further exemplar turns)" in text and "q2" not in text
    assert text.endswith("[user · the question]\nQuestion: mine")
    two = W.prompt_turns([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}])
    assert two == "[system]\nS\n\n[user · the question]\nU"


def test_rerank_sizes_say_when_reranking_only_reorders():
    lines = W.rerank_sizes_note(10, {"path": 5, "relation": 10}).splitlines()
    assert lines[0] == "path: K = 10 in, k = 5 kept: selects and orders"
    assert lines[1].startswith("relation: K = 10 in, k = 10 kept: k = K here, so re-ranking only reorders")


def test_cypher_statements_count_the_clauses_inside_a_statement():
    from kgqa_lib.methods.pgakv import cypher_to_triples

    pg = cypher_to_triples("CREATE (a:Country {name: 'Laos'})\nCREATE (b:Country {name: 'France'})\n"
                           "CREATE (a)-[:has_area]->(:Number {name: '1'})\nmerge (b)-[:has_area]->(:Number {name: '2'})")
    text = W.cypher_statements(pg)
    assert text.startswith("statements (the Cypher split on ';'): 1, holding 4 clause lines (CREATE × 3, MERGE × 1)")
    assert "repaired line by line): 0; dropped lines: none; errors: none" in text


def test_verifier_facts_say_the_order_and_the_limit():
    ground = NS(triples=[("a", "r", str(i)) for i in range(40)])
    assert W.verifier_facts(ground, 30).endswith("at most ground_limit = 30 triples: 30 of 40 shown.")
    assert "best first" in W.verifier_facts(ground, 30) and "6 of 6" in W.verifier_facts(NS(triples=[1] * 6), 30)


def test_stage_functions_read_the_trace_names_from_the_method():
    from kgqa_lib.methods import get_method

    pg = W.stage_functions(get_method("pgakv"))
    assert pg["cypher_to_triples"] == "parse_pseudo_graph" and pg["answer"] == "answer_from_triples"
    assert pg["parse_answers"] == "extract_braced_answers" and pg["verify"] == "verify"
    assert W.stage_functions(get_method("keqing"))["decompose"] == "decompose"


# ---------------------------------------------------------------- Keqing: one sub-question, as the plan runs it
def test_one_sub_question_by_stage_is_the_plans_step(tmp_cache):
    from kgqa_lib.embed.embedder import Embedder
    from kgqa_lib.kg.sources import load_named
    from kgqa_lib.methods import Context
    from kgqa_lib.methods import keqing as K

    bank = K.bank_for("miniworld")
    q = next(q for q in K.keqing_dataset("miniworld").questions if q.metadata["hops"] == 3)
    subs = K.gold_decomposition(q, bank)
    ctx = Context(llm=None, kg=load_named("miniworld"), embedder=Embedder(), settings={"kg": "miniworld"})
    steps, _ = K.execute_plan(q, subs, bank, ctx, "miniworld", 1, "all")
    topic = K.linked_topics(q, ctx.kg)
    matches = K.match_templates(K.order_subquestions(subs), bank, ctx.embedder, 1)
    answers: dict[int, list[str]] = {}
    for st, m in zip(steps, matches):
        seeds, _ = K.resolve_seeds(st.sub, answers, topic, ctx.kg)
        shown, groups = K.retrieve_step(st.sub, seeds, m, ctx, "miniworld", topic, "all")
        r = K.reason_step(shown, groups, ctx, st.sub.id, "all")
        assert seeds == st.seeds and shown == st.reasoning.question and r.answers == st.reasoning.answers
        assert [g.triples for g in groups] == [g.triples for g in st.groups]
        answers[st.sub.id] = r.answers
    # every edge of the drawing: the chain from each seed (retrieval keeps one triple per reached entity)
    second = steps[1]
    pairs = K.reached_from(ctx.kg, "miniworld", second.seeds, second.groups[0].chain, topic)
    assert {v for _, v in pairs} == set(second.groups[0].reached) and len(pairs) >= len(second.groups[0].reached)


def test_keqing_layers_with_the_kg_draw_an_edge_from_every_seed():
    class KG:  # two films by one director: the director is reached twice
        edges = {("ex://f1", "directed_by"): ["ex://d"], ("ex://f2", "directed_by"): ["ex://d"]}

        def follow_path(self, node, rels, exclude_seed=True):
            return self.edges.get((node, rels[0]), [])

    g = NS(triples=[("F1", "directed by", "D")], reached=["ex://d"], chain=("directed_by",), stated=[])
    steps = [NS(seeds=["ex://f1", "ex://f2"], sub=NS(id=0), groups=[g], reasoning=NS(answers=["ex://d"], chosen=[0]))]
    label = {"ex://f1": "F1", "ex://f2": "F2", "ex://d": "D"}.get
    layers, edges, _ = W.keqing_layers(steps, label, KG(), "other", set())
    assert layers == [["F1", "F2"], ["D"]] and edges == [(0, "F1", "D"), (0, "F2", "D")]
    assert W.keqing_layers(steps, label)[1] == [(0, "F1", "D")]  # without the KG: the group's one triple


def test_the_reasoning_path_draws_unselected_candidates_grey_and_names_every_gold_answer():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from kgqa_lib import viz

    gold = ["A", "B", "C", "D", "E"]
    fig, (ax, bx) = plt.subplots(1, 2)
    viz.draw_reasoning_path(ax, [["T"], ["A", "X", "E" + viz.NOT_SELECTED]],
                            [(0, "T", "A"), (0, "T", "X"), (0, "T", "E" + viz.NOT_SELECTED)], highlight=gold, max_named=None)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["gold answer (A, B, C, D, E)", "(not selected): a candidate the step did not keep"]
    boxes = {t.get_text(): t.get_bbox_patch() for t in ax.texts if t.get_bbox_patch()}
    dropped = next(p for name, p in boxes.items() if name.startswith("E"))
    assert dropped.get_linestyle() == "--" and boxes["X"].get_linestyle() == "-"
    assert dropped.get_facecolor() == boxes["A"].get_facecolor()  # a gold answer the step dropped stays gold
    arrows = [a for a in ax.texts if type(a).__name__ == "Annotation"]
    assert len(arrows) == 3 and sum(a.arrow_patch.get_linestyle() == "--" for a in arrows) == 1
    viz.draw_reasoning_path(bx, [["T"], ["A"]], [(0, "T", "A")], highlight=gold)  # the default still cuts the names
    assert [t.get_text() for t in bx.get_legend().get_texts()] == ["gold answer (A, B, C … and 2 more)"]
    plt.close(fig)


# ---------------------------------------------------------------- FuSIC: the re-ranking prompt, the cells' legend
def test_rerank_sends_the_messages_rerank_messages_shows(tmp_path):
    from kgqa_lib.llm.chat import LLM, LLMCache
    from kgqa_lib.methods import Context
    from kgqa_lib.methods.fusic import Candidate, Retrieved, rerank, rerank_messages

    class Reply:
        def __init__(self):
            self.messages = []

        def complete(self, request):
            self.messages.append(request.messages)
            return {"text": "2, 1", "prompt_tokens": 5, "completion_tokens": 2, "finish_reason": "stop"}

    backend = Reply()
    ctx = Context(llm=LLM(backend, "scripted", LLMCache(tmp_path / "r.sqlite", transcripts=None)))
    items = [(Candidate("relation", f"rel {i}", f"ns:r{i}", f"r{i}"), 1.0 - i / 10) for i in range(3)]
    shown = rerank_messages("who?", Retrieved("bm25", "relation", items), ctx, 2)
    r = rerank("who?", Retrieved("bm25", "relation", items), ctx, 2)
    assert [tuple(m) for m in backend.messages[0]] == [(m["role"], m["content"]) for m in shown]
    assert "1. ns:r0 (rel 0)" in shown[-1]["content"] and r.picked == [2, 1]
    assert rerank_messages("who?", Retrieved("bm25", "relation", items[:1]), ctx, 2) is None  # one candidate: no call


def test_cell_legend_names_pair_and_configuration():
    from kgqa_lib.bench import fusic as F

    text = F.cell_legend(["geo2cinema.fs_bm25", "geo2cinema.zs_both", "geo2cinema.fs_bm25"])
    lines = text.splitlines()
    assert len(lines) == 2 and lines[0] == f"  geo2cinema.fs_bm25: {F.PAIRS['geo2cinema'][4]}; {F.CONFIGS['fs_bm25'][2]}"
    assert "zero-shot" in lines[1] and "BM25 + dense" in lines[1]


def test_call_recorder_counts_a_repeated_prompt_once():
    from kgqa_lib.notebooks import CallRecorder

    class Echo:
        def chat(self, messages, **kwargs):
            return NS(text=messages[-1]["content"])

    llm = CallRecorder(Echo())
    for text in ("a", "b", "a"):
        llm.chat([{"role": "user", "content": text}])
    assert len(llm.calls) == 3 and [m[-1]["content"] for m, _ in llm.distinct()] == ["a", "b"]


def test_fusic_training_explains_the_examples_of_each_few_shot_question():
    import pandas as pd

    from kgqa_lib.methods.fusic import get_task, prepared_shots, training_examples

    task = "geo-wd>cinema-fb"
    reports = [NS(as_dict=lambda: {"examples": 9, "steps": 2, "first_loss": 2.0, "last_loss": 1.0}) for _ in range(2)]
    dense = NS(name="dense", training=reports)
    frame, note = W.fusic_training([NS(name="bm25"), dense], task, 2, 0)
    assert isinstance(frame, pd.DataFrame) and list(frame.index) == ["source domain", "target few shots"]
    assert frame.loc["source domain", "questions"] == len(get_task(task, 0).source.questions)
    per_q = [len(training_examples([p])) for p in prepared_shots(task, 2)]
    assert f"The 2 few-shot questions give {per_q[0]} + {per_q[1]} = {sum(per_q)}." in note
    assert "loss" not in note  # not the fine-tuned MiniLM: its training is not described
    assert W.fusic_training([NS(name="bm25")], task, 2, 0) == (None, "No trained dense retriever among the retrievers.")
