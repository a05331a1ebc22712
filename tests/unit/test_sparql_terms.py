"""Issue 49, items 1 and 6: terms written into the library's own SPARQL, replies that are not
SPARQL JSON, and secrets in an endpoint URL.

- ``iri_term``/``literal_term`` (``kgqa_lib.kg.sparql_guard``) write a value as exactly one IRI or
  string token, or refuse it (``UnsafeTerm``): hostile names from the probe report, quotes,
  backslashes, newlines, ``\\uXXXX`` sequences, lone surrogates;
- every query the remote backend builds from hostile data passes the read-only guard, and the
  value stays inside one token (no SERVICE reaches the server);
- an HTTP 200 whose body is not SPARQL JSON is that question's error, not an outage;
- ``?apikey=``/``?key=``/``?token=`` values never reach names, reprs, messages or run settings.
"""

from __future__ import annotations

import json

import pytest

from kgqa_lib.errors import InfrastructureError
from kgqa_lib.kg.sparql_guard import (UnsafeTerm, guard_query, iri_term, is_iri, literal_term, tokenize)

SVC = "http://127.0.0.1:9/sparql"
INJECT = f" }} SERVICE <{SVC}> {{ ?s ?p ?o }} }} #"
HOSTILE = [
    "http://x>" + INJECT,  # the probe report's name (N1)
    "https://x>" + INJECT,
    "urn:x>" + INJECT,
    'x"' + INJECT,
    'x\\"' + INJECT,
    "x\\" + INJECT,
    "x\n" + INJECT + "\n",
    "x\r" + INJECT + "\r",
    "x'''" + INJECT,
    "x\\u0022" + INJECT,
    "http://x\\u003E" + INJECT,
    "http://x/a b>" + INJECT,
    "directed_by> ?t" + INJECT,
    "x\x00\x1f\x7f" + INJECT,
]


def _one_token(text: str, kind: str) -> str:
    toks = tokenize(f"SELECT * WHERE {{ VALUES ?v {{ {text} }} }}")
    inner = [t for t in toks if t.kind in ("iri", "string")]
    assert len(inner) == 1 and inner[0].kind == kind and inner[0].text == text, (text, toks)
    return inner[0].text


# ---- the two helpers -------------------------------------------------------------------------
@pytest.mark.parametrize("value", HOSTILE)
def test_a_hostile_name_is_never_an_iri(value):
    assert not is_iri(value)
    with pytest.raises(UnsafeTerm):
        iri_term(value)


@pytest.mark.parametrize("bad", ["", "x", "/relative/path", "http://a b", "http://a\tb", "http://a\nb", "http://a<b",
                                 "http://a>b", 'http://a"b', "http://a{b", "http://a}b", "http://a|b", "http://a^b",
                                 "http://a`b", "http://a\\b", "http://a\x00b", "http://a\x7f\ud800", 5, None,
                                 "http://x/" + "a" * 2000])
def test_iri_term_refuses_what_is_not_one_iri_token(bad):
    with pytest.raises(UnsafeTerm):
        iri_term(bad)


@pytest.mark.parametrize("iri", ["http://www.wikidata.org/entity/Q42", "http://rdf.freebase.com/ns/m.0abc",
                                 "urn:isbn:0451450523", "https://ex.org/a%20b?x=1#frag", "http://ex.org/ünï/🙂",
                                 "http://ex.org/it's(a)~[b]!$&*+,;=:@"])
def test_iri_term_writes_a_real_iri_exactly(iri):
    assert iri_term(iri) == f"<{iri}>"
    assert _one_token(iri_term(iri), "iri") == f"<{iri}>"


@pytest.mark.parametrize("value", [v for v in HOSTILE if "\\u" not in v] + [
    'A "quoted" label', "back\\slash\\", "tab\there", "\b\f", "it's", "'''", '"""', "# not a comment", "<not-an-iri>",
    "{ } . ; , ( )", "ünïcödé 🙂", "", "\\n literally", "C:\\users\\x", "SELECT * WHERE { ?s ?p ?o }"])
def test_literal_term_keeps_every_value_inside_one_string(value):
    lit = literal_term(value)
    assert _one_token(lit, "string") == lit
    assert "\n" not in lit and "\r" not in lit  # STRING_LITERAL2 holds no raw line end
    assert json.loads(lit, strict=False) == value  # the ECHARs used are JSON's too: it decodes back exactly
    tagged = literal_term(value, "en")
    assert tagged == lit + "@en"
    assert guard_query(f"SELECT ?s WHERE {{ VALUES ?l {{ {lit} {tagged} }} ?s ?p ?l }}").form == "SELECT"


def test_literal_term_escapes_per_the_grammar():
    assert literal_term('a"b\\c\nd\re\tf\bg\fh') == '"a\\"b\\\\c\\nd\\re\\tf\\bg\\fh"'
    assert literal_term("Inception") == '"Inception"' and literal_term("x", "en-GB") == '"x"@en-GB'


@pytest.mark.parametrize("value", ["x\\u0022 }", "a\\U0000003E", "\\u007B", "x\ud800y", "a" * 2001, 3])
def test_literal_term_refuses_what_cannot_be_written_unambiguously(value):
    with pytest.raises(UnsafeTerm):
        literal_term(value)


@pytest.mark.parametrize("lang", ["", "en us", 'en"', "en}", "-en", "en@x"])
def test_literal_term_refuses_a_bad_language_tag(lang):
    with pytest.raises(UnsafeTerm):
        literal_term("x", lang)


# ---- every query the remote backend builds from data ------------------------------------------
def _capturing_kg(monkeypatch, **kw):
    from kgqa_lib.kg.remote import SparqlKG

    kg = SparqlKG("http://127.0.0.1:9/sparql", "miniworld:wikidata", cache=False, **kw)
    sent: list[str] = []

    def post(query, timeout):
        sent.append(query)
        if query.lstrip().upper().startswith("ASK"):
            return '{"head": {}, "boolean": false}'
        if "COUNT(*)" in query:
            return '{"head": {"vars": ["n"]}, "results": {"bindings": [{"n": {"type": "literal", "value": "1"}}]}}'
        return '{"head": {"vars": []}, "results": {"bindings": []}}'

    monkeypatch.setattr(kg, "_post", post)
    return kg, sent


def test_every_data_built_query_passes_the_guard(monkeypatch):
    """Each caller of ``lookup`` and each IRI-taking method, with every hostile name: what reaches
    the HTTP layer is a query the read-only guard accepts, without a SERVICE."""
    from kgqa_lib.bench.speed.hostile_queries import hostile_labels, label_callers

    kg, sent = _capturing_kg(monkeypatch)
    big, sent_big = _capturing_kg(monkeypatch, index_limit=0)
    names = [v for _, v in hostile_labels(9)] + HOSTILE
    for caller, call in label_callers(kg, big):
        for value in names:
            call(value)  # nothing raises: an unsafe name is a plain label or skipped
    queries = sent + sent_big
    assert len(queries) > 50
    for q in queries:
        assert guard_query(q).form in ("SELECT", "ASK"), q
        assert not any(t.kind == "word" and t.text.upper() == "SERVICE" for t in tokenize(q)), q


def test_a_label_that_looks_like_an_iri_is_looked_up_as_a_label(monkeypatch):
    kg, sent = _capturing_kg(monkeypatch)
    kg._exact_subjects("http://x> } #")
    assert '"http://x> } #"' in sent[-1] and '"http://x> } #"@en' in sent[-1]


# ---- replies ------------------------------------------------------------------------------------
@pytest.mark.parametrize("body", ['{"head":{"vars":["s"]},"results":{"bindings":[Empty HTTP request',
                                  "<html><body>Service unavailable</body></html>", "", "[]", '"x"', "null",
                                  '{"results": 5}', '{"results": {"bindings": [1]}}',
                                  '{"results": {"bindings": [{"s": "x"}]}}', '{"boolean": "yes"}'])
def test_a_reply_that_is_not_sparql_json_is_the_questions_error(monkeypatch, body):
    """The probe's SERVICE query came back cut short (HTTP 200); classed as an outage, it stopped
    the run with exit 3, and again on every resume. One query's bad answer is that question's error."""
    from kgqa_lib.kg.remote import MalformedReply, SparqlKG

    kg = SparqlKG("http://127.0.0.1:9/sparql", "wikidata", cache=False)
    monkeypatch.setattr(kg, "_post", lambda query, timeout: body)
    with pytest.raises(MalformedReply, match="not SPARQL JSON") as err:
        kg.sparql("SELECT ?s WHERE { ?s ?p ?o }")
    assert not isinstance(err.value, InfrastructureError)
    with pytest.raises(MalformedReply):
        kg.triples_around("http://www.wikidata.org/entity/Q1")


def test_a_bad_reply_is_recorded_and_the_run_goes_on(monkeypatch, tmp_path):
    """Through the runner: every question gets a record with the error; no outage, the run finishes."""
    from kgqa_lib.data.datasets import Dataset, Question
    from kgqa_lib.evaluate.runner import read_records, run
    from kgqa_lib.kg.remote import SparqlKG
    from kgqa_lib.llm.chat import LLM, LLMCache
    from kgqa_lib.methods import Context, MethodResult, register_method

    class NoLLM:
        model_id = "none"

        def complete(self, req):  # pragma: no cover - the method below never calls the LLM
            raise AssertionError("no LLM call expected")

    kg = SparqlKG("http://127.0.0.1:9/sparql", "wikidata", cache=False)
    monkeypatch.setattr(kg, "_post", lambda query, timeout: '{"head":{"vars":["s"]},"results":{"bindings":[Empty')

    @register_method("_lookup_bad_reply")
    def method(q, ctx):
        ctx.kg.lookup(q.topic_entities[0])
        return MethodResult([], "")

    ds = Dataset("t", [Question(f"q{i}", "?", ["a"], topic_entities=["Some Name"]) for i in range(4)])
    ctx = Context(LLM(NoLLM(), "none", LLMCache(tmp_path / "c.sqlite", transcripts=None), "auto"), kg=kg)
    out = tmp_path / "r.jsonl"
    recs = run("_lookup_bad_reply", ds, ctx, out, progress=False)
    assert [r["qid"] for r in recs] == ["q0", "q1", "q2", "q3"]
    assert all("MalformedReply" in r["error"] for r in read_records(out))


# ---- secrets in the URL (N9) --------------------------------------------------------------------
SECRET = "QSECRET-5f1d"


@pytest.mark.parametrize("url", [f"http://127.0.0.1:9/sparql?apikey={SECRET}", f"https://h.org/q?key={SECRET}&format=json",
                                 f"https://h.org/q?default-graph-uri=http://g&token={SECRET}",
                                 f"https://h.org/q?access_token={SECRET}", f"https://h.org/q?api_key={SECRET}#x",
                                 f"https://h.org/q?{SECRET}", f"https://u:{SECRET}@h.org/q",
                                 f"sparql+http://127.0.0.1:9/sparql?apikey={SECRET}#profile=tiny",
                                 f"slices:sparql+https://u:{SECRET}@h.org/q?sig={SECRET}#profile=wikidata&depth=1"])
def test_redact_url_hides_query_string_secrets(url):
    from kgqa_lib.kg.remote import redact_url

    shown = redact_url(url)
    assert SECRET not in shown and "***" in shown
    assert shown.split("://", 1)[0] == url.split("://", 1)[0]  # the scheme (and a KG spec's prefix) stays
    assert ("#" in shown) == ("#" in url) and shown.split("#")[1:] == url.split("#")[1:]  # the options stay
    if "format=json" in url:
        assert "format=json" in shown and "key=***" in shown
    if "default-graph-uri" in url:
        assert "default-graph-uri=http://g" in shown


@pytest.mark.parametrize("url", ["sparql+http://127.0.0.1:7878/query#profile=miniworld", "miniworld:wikidata", "metaqa",
                                 "https://query.wikidata.org/sparql", "http://h/q?default-graph-uri=http%3A%2F%2Fg",
                                 "slices:sparql+https://query.wikidata.org/sparql#profile=wikidata&depth=1"])
def test_redact_url_leaves_a_url_without_secrets_unchanged(url):
    from kgqa_lib.kg.remote import redact_url

    assert redact_url(url) == url  # run records' settings.kg stay byte-identical


def test_no_query_string_secret_in_names_messages_or_errors():
    from kgqa_lib.kg.remote import EndpointError, SparqlKG, open_sparql_kg, parse_kg_url
    from kgqa_lib.servers import free_port

    spec = f"sparql+http://127.0.0.1:{free_port()}/sparql?apikey={SECRET}#profile=tiny"
    kg = open_sparql_kg(spec, cache=False)
    kg.retries, kg.backoff = 0, 0.01
    assert SECRET not in kg.name and SECRET not in repr(kg)
    with pytest.raises(EndpointError) as err:
        kg.sparql("ASK {}")
    assert SECRET not in str(err.value) and SECRET not in err.value.short()
    for bad in (f"sparql+http://h/q?apikey={SECRET}#profil=x", f"sparql+http://h/q?apikey={SECRET}#engine=nope"):
        with pytest.raises(ValueError) as err:
            parse_kg_url(bad)
        assert SECRET not in str(err.value) and "apikey=***" in str(err.value)
    odd = SparqlKG(f"htp://h/q?apikey={SECRET}", "tiny", cache=False)  # requests: "No connection adapters … for 'htp://…'"
    with pytest.raises(EndpointError) as err:
        odd.sparql("ASK {}")
    assert SECRET not in str(err.value)


# ---- the guard under threads ----------------------------------------------------------------
def test_the_guard_parses_correctly_from_several_threads():
    """Every query the remote backend sends now passes the guard, from the runner's worker threads
    (``--workers``). rdflib's pyparsing grammar is not thread-safe: two first parses at once broke
    it for the rest of the process (every later query "does not parse"). A fresh interpreter, so
    the first parses are concurrent."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent('''
        import threading
        from kgqa_lib.kg.sparql_guard import guard_query
        errors = []
        def work(k):
            for i in range(25):
                try:
                    guard_query(f'SELECT ?o WHERE {{ <http://e/{k}_{i}> <http://p> ?o . '
                                f'FILTER(!isLiteral(?o) || lang(?o) = "" || langMatches(lang(?o), "en")) }}')
                except Exception as exc:
                    errors.append(str(exc)[:100])
        threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        print(len(errors), errors[:1])
    ''')
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-1000:]
    assert out.stdout.startswith("0 "), out.stdout
