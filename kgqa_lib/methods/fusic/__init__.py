"""FuSIC-KBQA: supervised retrievers fused with in-context learning (Patidar et al., 2024).

Stages, one module and one function each (the notebooks show them cell by cell):

1. :mod:`.linking` :func:`link_entities` — question spans matched to KG labels/aliases; ambiguous labels resolved
   by popularity (degree) and the similarity of the entity's description to the question. The
   ``oracle`` switch takes the dataset's gold topic entities instead (for analysis).
2. :mod:`.candidates` :func:`enumerate_candidates` — the KB elements around the linked entities: relation paths up to
   two hops (the paper's; the setting ``max_path_hops=3`` adds 3-hop paths; unlabelled CVT/statement nodes are
   walked through without counting a hop), each
   written as a SPARQL pattern; the relations seen; the classes of the entities the paths reach.
3. :mod:`.retrieval` :func:`retrieve` — each retriever (BM25; a bi-encoder trained on the *source* domain, see
   :mod:`kgqa_lib.embed.retrieval`) ranks every aspect; the top K per aspect are kept.
4. :mod:`.reranking` :func:`rerank` — the LLM picks and orders the k ≪ K most useful of each retriever's aspect.
5. :mod:`.generation` :func:`generate_query` — few-shot prompt: linked entities, every retriever's re-ranked context,
   exemplars (target few-shots, or source questions in the zero-shot setting) → SPARQL (or an
   s-expression in the "w/o SPARQL" variant, converted by :mod:`kgqa_lib.kg.sexpr`).
6. :mod:`.execution` :func:`execute_query` + :func:`egf_loop` — execution-guided feedback: when the query does not
   parse, is not a read-only SELECT, names KB elements that do not exist, returns nothing or far
   too much, the LLM is told so (with its earlier attempts) and asked again, up to 4 rounds.

The pipeline (:mod:`.pipeline`, the registered method ``fusic``) runs them in turn. Transfer
tasks (:mod:`.tasks`, :func:`get_task`) pair a source domain (retriever training data, zero-shot
exemplars) with a target domain (few-shot pool, test questions) on different KG schemas.

Every name is re-exported here: ``from kgqa_lib.methods import fusic as F; F.get_task(...)``.
"""

from __future__ import annotations

from ...kg.sexpr import to_sparql as sexpr_to_sparql  # noqa: F401  (was importable from here)
from .schema import (  # noqa: F401
    MW,
    PROFILES,
    RDFS,
    SchemaProfile,
    _type_iri,
    profile_for,
)
from .linking import (  # noqa: F401
    Linking,
    Mention,
    _STOP,
    _degree,
    _disambiguate,
    _spans,
    link_entities,
)
from .candidates import (  # noqa: F401
    ASPECTS,
    Candidate,
    Candidates,
    Hop,
    _is_cvt,
    _rel_text,
    _steps,
    _walk,
    enumerate_candidates,
    path_pattern,
)
from .gold import (  # noqa: F401
    Gold,
    _mw_hops,
    _mw_ids,
    gold_of,
)
from .tasks import (  # noqa: F401
    DEV_FROM,
    DEV_NONE,
    DEV_PER_HOP,
    DOMAINS,
    Domain,
    EXTERNAL_KGS,
    SHOT_POOL,
    SHOT_RESERVE,
    TASKS,
    Task,
    _domain_questions,
    check_task,
    dataset_task,
    dev_questions,
    dev_size,
    domain_reserve,
    get_task,
    load_domain,
    target_shots,
    task_dataset,
)
from .retrieval import (  # noqa: F401
    Prepared,
    RecordedDense,
    Retrieved,
    _follow,
    _gold_candidates,
    answer_types,
    domain_questions,
    make_retrievers,
    prepare,
    prepared_domain,
    prepared_shots,
    record_path,
    retrieve,
    trained_head,
    trained_retriever,
    training_examples,
    training_spec,
)
from .reranking import (  # noqa: F401
    Reranked,
    _ASPECT_WORDS,
    parse_choice,
    rerank,
    rerank_messages,
    trim,
)
from .settings import (  # noqa: F401
    FuSICSettings,
    settings_of,
)
from .generation import (  # noqa: F401
    CONTEXT_SIZES,
    EXEMPLAR_CHOICES,
    rerank_sizes,
    Exemplar,
    MAX_ANSWER_CHARS,
    RERANK_K,
    _FENCED,
    _SELECT,
    _fence,
    build_messages,
    context_block,
    context_sizes,
    exemplar_order,
    exemplars_for,
    extract_query,
    generate_query,
)
from .execution import (  # noqa: F401
    Attempt,
    Execution,
    _IRI,
    _PATTERN_SPLIT,
    _PNAME,
    _STANDARD,
    _exists,
    _unknown_terms,
    _with_prefixes,
    diagnose_empty,
    egf_loop,
    execute_query,
    feedback_message,
    paper_feedback_message,
    feedback_turn,
)
from .pipeline import (  # noqa: F401
    calls_by_stage,
    fusic,
)
