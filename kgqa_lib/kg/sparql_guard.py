"""The read-only guard for SPARQL the LLM writes.

A query is run only when **two independent readings** of the text agree that it is a plain
SELECT/ASK with no SERVICE, no update and no Virtuoso extension:

1. one tokenizer pass (:func:`tokenize`) that reads ``#`` comments, ``'…'`` ``"…"`` ``'''…'''``
   ``\"\"\"…\"\"\"`` strings and ``<…>`` IRIs *in order*, the way the engines' lexers do. It measures
   the bracket nesting **before** any parser sees the text (pyparsing recurses per bracket and
   Oxigraph's parser overflows the C stack at ~3000 levels) and finds bare keywords (``SERVICE``,
   ``INSERT``, Virtuoso's ``DEFINE`` …) — ``?add``, ``?with``, ``ex:Create`` are not keywords;
2. rdflib's SPARQL 1.1 grammar (``parseQuery``) and a walk of its whole syntax tree: the query
   form must be ``SelectQuery``/``AskQuery`` and no ``ServiceGraphPattern`` may occur anywhere
   (subqueries, OPTIONAL, UNION, MINUS, FILTER EXISTS…). The syntax tree is walked rather than
   rdflib's algebra because ``translateQuery`` needs every prefix declared, and FuSIC checks the
   LLM's query before it adds the KB's prefixes.

Where the two lexers could disagree, the text is made unambiguous first: a carriage return ends
a comment for Oxigraph but not for rdflib (so ``\\r`` is normalised to ``\\n``, and the normalised
text is what gets executed: :func:`guard_query` returns it), and rdflib expands ``\\uXXXX`` escapes
everywhere while Oxigraph does so only inside strings and IRIs (such queries are refused).

Parse cost (measured, 2-core VM): ~10 ms for a typical 7-line query with rdflib 7.6 / pyparsing
3.3 — small beside an LLM call; results are memoised per query text.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from functools import lru_cache


class QueryRejected(ValueError):
    """The query is not a read-only SELECT/ASK, or it does not parse."""


class QuerySyntaxError(QueryRejected):
    """The query does not parse as SPARQL 1.1 (rdflib's grammar): a typo, a truncated answer, or
    engine-specific syntax (Virtuoso, Blazegraph/Wikidata extensions), which is not run either."""


MAX_QUERY_DEPTH = 64  # pyoxigraph's parser overflows the C stack (a segfault) at ~3000 nested brackets
MAX_QUERY_CHARS = 100_000  # an LLM query is a few hundred characters; pyparsing time grows with length
# rdflib's parser (pyparsing, with its shared packrat cache) is not thread-safe: two threads parsing
# at once get spurious errors ("Param.postParse2() missing 1 required positional argument",
# "Expected SelectQuery, found 'WHERE'"). Runs with --workers parse in several threads.
_PARSE_LOCK = threading.Lock()

# Bare words that never occur in a read-only SPARQL query: the update forms, federation, and
# Virtuoso's pragmas. Named in the error message when found outside strings, comments and IRIs.
_UPDATE_WORDS = ("INSERT", "DELETE", "LOAD", "CLEAR", "DROP", "CREATE", "COPY", "MOVE", "ADD", "WITH")
# Virtuoso's built-in function namespaces: ``bif:`` and ``sql:`` reach server functions (files, HTTP).
_VIRTUOSO_PREFIXES = ("bif", "sql")
_VIRTUOSO_NS = "http://www.openlinksw.com/schemas/"
_ESCAPE = re.compile(r"\\u[0-9a-f]{4}", re.I)  # rdflib's expandUnicodeEscapes pattern (\\U matches too)

# What may stand between ``<`` and ``>`` (SPARQL 1.1's IRIREF, N-Triples' too): anything but
# < > " { } | ^ ` \ and the characters up to U+0020 (controls and the space).
_IRI_CHARS = r'[^<>"{}|^`\\\x00-\x20]'
_IRI = re.compile("<" + _IRI_CHARS + "*>")
_IRI_VALUE = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:" + _IRI_CHARS + "*")  # absolute: a scheme first
_VAR = re.compile(r"[?$][\w\u00b7\u0300-\u036f\u203f-\u2040]+")
_PNAME = re.compile(r"(?:[^\W\d_][\w\-.]*)?:[\w\-.:%\\\u00b7]*")  # ex:Create, :x, wd:Q1 (a final '.' is not part)
_BARE = re.compile(r"[^\W\d]\w*")  # keywords, function names, a, true
_NUMBER = re.compile(r"\d*\.?\d+(?:[eE][+-]?\d+)?")


@dataclass(frozen=True)
class Token:
    kind: str  # comment | string | iri | var | word | open | close | punct
    text: str
    pos: int


def tokenize(query: str) -> list[Token]:
    """One left-to-right pass over a SPARQL text. Raises :class:`QueryRejected` for an unterminated
    string or IRI-less garbage the engines would reject anyway (so no later check is fooled)."""
    out: list[Token] = []
    i, n = 0, len(query)
    while i < n:
        ch = query[i]
        if ch.isspace():
            i += 1
            continue
        if ch == "#":
            j = query.find("\n", i)
            j = n if j < 0 else j
            out.append(Token("comment", query[i:j], i))
            i = j
        elif ch in "'\"":
            long_q = query.startswith(ch * 3, i)
            delim = ch * 3 if long_q else ch
            j = i + len(delim)
            while True:
                if j >= n:
                    raise QuerySyntaxError("the query has an unterminated string literal; close every quote")
                c = query[j]
                if c == "\\":
                    j += 2
                    continue
                if not long_q and c == "\n":
                    raise QuerySyntaxError("the query has a string literal broken across lines; use '''…''' or close the quote")
                if query.startswith(delim, j):  # the first closing delimiter ends it, as the grammar's regex does
                    j += len(delim)
                    break
                j += 1
            out.append(Token("string", query[i:j], i))
            i = j
        elif ch == "<" and (m := _IRI.match(query, i)):
            out.append(Token("iri", m.group(), i))
            i = m.end()
        elif ch in "?$" and (m := _VAR.match(query, i)):
            out.append(Token("var", m.group(), i))
            i = m.end()
        elif m := _PNAME.match(query, i):
            text = m.group().rstrip(".") or ":"  # PN_LOCAL never ends with '.': that one ends the triple
            out.append(Token("word", text, i))
            i += len(text)
        elif m := _BARE.match(query, i):
            out.append(Token("word", m.group(), i))
            i = m.end()
        elif ch.isdigit() or (ch == "." and i + 1 < n and query[i + 1].isdigit()):
            m = _NUMBER.match(query, i)
            out.append(Token("number", m.group(), i))
            i = m.end()
        else:
            kind = "open" if ch in "({[" else "close" if ch in ")}]" else "punct"
            out.append(Token(kind, ch, i))
            i += 1
    return out


def nesting_depth(query: str) -> int:
    """The deepest bracket nesting (``(``, ``{``, ``[``) of a query, counting only brackets that
    are code — not those inside strings, comments or IRIs. An unreadable text (an unterminated
    string) is measured bracket by bracket, so a deep one is still reported as deep."""
    try:
        tokens = tokenize(query.replace("\r\n", "\n").replace("\r", "\n"))
    except QueryRejected:
        tokens = [Token("open" if c in "({[" else "close", c, 0) for c in query if c in "({[)}]"]
    depth = deepest = 0
    for t in tokens:
        if t.kind == "open":
            depth += 1
            deepest = max(deepest, depth)
        elif t.kind == "close":
            depth = max(0, depth - 1)
    return deepest


@dataclass(frozen=True)
class GuardedQuery:
    form: str  # SELECT | ASK
    text: str  # the text to execute (line ends normalised), exactly what was checked


def _walk(node, seen: set[str]) -> None:
    from rdflib.plugins.sparql.parserutils import CompValue

    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, CompValue):
            seen.add(n.name)
        if isinstance(n, dict):
            stack.extend(n.values())
        elif isinstance(n, (list, tuple)) or (hasattr(n, "as_list") and not isinstance(n, str)):
            stack.extend(n)


def _parse_error_message(exc: Exception) -> str:
    msg = " ".join(str(exc).split())
    return msg[:200]


@lru_cache(maxsize=2048)
def guard_query(query: str) -> GuardedQuery:
    """Check a query the LLM wrote; return its form and the text to execute, or raise
    :class:`QueryRejected` with a one-line reason (see the module docstring for the rules)."""
    if not isinstance(query, str) or not query.strip():
        raise QueryRejected("the query is empty; write a SELECT or ASK query")
    if len(query) > MAX_QUERY_CHARS:
        raise QueryRejected(f"the query is {len(query)} characters long (limit {MAX_QUERY_CHARS}); write a shorter query")
    if _ESCAPE.search(query):
        raise QueryRejected("the query contains a \\uXXXX escape, which SPARQL parsers read differently; "
                            "write the character itself")
    text = query.replace("\r\n", "\n").replace("\r", "\n")
    depth = nesting_depth(text)
    if depth > MAX_QUERY_DEPTH:
        raise QueryRejected(f"the query nests brackets {depth} levels deep (limit {MAX_QUERY_DEPTH}); write a flat query")
    tokens = tokenize(text)
    for t in tokens:
        word = t.text.upper()
        if t.kind == "word" and ":" not in t.text:
            if word == "DEFINE":
                raise QueryRejected("Virtuoso DEFINE pragmas are not SPARQL and are not run; remove the DEFINE line")
            if word == "SERVICE":
                raise QueryRejected("SERVICE (federated queries to other endpoints) is not allowed; query this KG only")
            if word in _UPDATE_WORDS:
                raise QueryRejected(f"only read-only SELECT/ASK queries are run; found {word}")
        elif t.kind == "word" and t.text.split(":", 1)[0].lower() in _VIRTUOSO_PREFIXES:
            raise QueryRejected(f"Virtuoso built-in functions ({t.text.split(':', 1)[0]}:) are not allowed; "
                                "use standard SPARQL functions")
        elif t.kind == "iri" and t.text[1:].startswith(_VIRTUOSO_NS):
            raise QueryRejected("Virtuoso built-in functions (openlinksw schemas) are not allowed; use standard SPARQL functions")
    from rdflib.plugins.sparql.parser import parseQuery

    try:
        with _PARSE_LOCK:
            parsed = parseQuery(text)
    except RecursionError:
        raise QueryRejected("the query nests too deeply to parse; write a flat query") from None
    except Exception as exc:  # noqa: BLE001 - pyparsing's ParseException and rdflib's own errors
        first = next((t.text.upper() for t in tokens if t.kind == "word" and ":" not in t.text
                      and t.text.upper() not in ("PREFIX", "BASE")), "")
        if first in ("CONSTRUCT", "DESCRIBE"):
            raise QueryRejected(f"only SELECT/ASK queries are run; got {first}") from None
        raise QuerySyntaxError(f"SPARQL does not parse: {_parse_error_message(exc)}") from None
    seen: set[str] = set()
    _walk(parsed, seen)
    if "ServiceGraphPattern" in seen:  # unreachable while the token check holds; kept as the second reading
        raise QueryRejected("SERVICE (federated queries to other endpoints) is not allowed; query this KG only")
    form = {"SelectQuery": "SELECT", "AskQuery": "ASK"}.get(getattr(parsed[1], "name", ""))
    if form is None:
        got = getattr(parsed[1], "name", "nothing").replace("Query", "").upper()
        raise QueryRejected(f"only SELECT/ASK queries are run; got {got}")
    return GuardedQuery(form, text)


def check_read_only(query: str) -> str:
    """The query form (``SELECT``/``ASK``) of an accepted query; raises :class:`QueryRejected`."""
    return guard_query(query).form


# --------------------------------------------------------------------------------------------
# Terms written into the library's own queries
# --------------------------------------------------------------------------------------------
# The library builds queries from data (labels, mentions, seeds, relation names, IRIs read back
# from an endpoint): every such value is written by these two functions and nowhere else, and the
# whole query then passes guard_query like any other (kgqa_lib.kg.remote). A value that cannot be
# written as the term asked for raises UnsafeTerm, and the caller skips it: it is never spliced.

MAX_TERM_CHARS = 2000  # no IRI or label is longer; a batch of 200 terms stays far below MAX_QUERY_CHARS
_SURROGATE = re.compile("[\ud800-\udfff]")  # a lone surrogate cannot be sent (UTF-8) nor read back
_LANGTAG = re.compile(r"[A-Za-z]+(?:-[A-Za-z0-9]+)*")
# SPARQL 1.1's ECHAR: the escapes a "…" literal may hold. '"', '\\', LF and CR must be escaped
# (STRING_LITERAL2 excludes them); tab, backspace and form feed are escaped for readability.
_ECHAR = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"})


class UnsafeTerm(QueryRejected):
    """A value that cannot be written into a query as the term asked for (an "IRI" with a space or a
    ``>``, a label holding a ``\\uXXXX`` sequence...). The caller skips it (no KG term is named so)."""


def _plain(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise UnsafeTerm(f"{what} must be a string, not {type(value).__name__}")
    if len(value) > MAX_TERM_CHARS:
        raise UnsafeTerm(f"{what} is {len(value)} characters long (limit {MAX_TERM_CHARS})")
    if _SURROGATE.search(value):
        raise UnsafeTerm(f"{what} holds a lone surrogate (not Unicode text)")
    return value


def is_iri(value: object) -> bool:
    """Whether :func:`iri_term` can write ``value``: an absolute IRI (``scheme:…``) of at most
    :data:`MAX_TERM_CHARS` characters, none of them ``< > " { } | ^`` backtick, backslash, a control
    character or whitespace (SPARQL's IRIREF), and no lone surrogate."""
    return (isinstance(value, str) and len(value) <= MAX_TERM_CHARS and _IRI_VALUE.fullmatch(value) is not None
            and not _SURROGATE.search(value))


def iri_term(value: str) -> str:
    """``<value>``, or :class:`UnsafeTerm` when ``value`` is not an IRI that SPARQL reads as one
    token (see :func:`is_iri`). Nothing is escaped or percent-encoded: an IRI read from a KG is
    written back exactly, and one that would need escaping is not an IRI of any KG."""
    if not is_iri(value):
        shown = value[:60] if isinstance(value, str) else type(value).__name__
        raise UnsafeTerm(f"not an IRI that can be written into a query: {shown!r}")
    return f"<{value}>"


def literal_term(value: str, lang: str | None = None) -> str:
    """A ``"…"`` string literal holding exactly ``value`` (``"…"@lang`` with a language tag), escaped
    per SPARQL 1.1's grammar: ``\\`` → ``\\\\``, ``"`` → ``\\"``, LF/CR/tab/backspace/form feed →
    ``\\n \\r \\t \\b \\f``; every other character is written as itself (``'``, ``<``, ``}``, ``#``
    are plain text inside the quotes). :class:`UnsafeTerm` for a value holding a ``\\uXXXX``
    sequence (SPARQL expands such codepoint escapes before parsing, and engines disagree on
    where; :func:`guard_query` refuses them), a lone surrogate, more than :data:`MAX_TERM_CHARS`
    characters, or a malformed language tag."""
    _plain(value, "a literal")
    if _ESCAPE.search(value):
        raise UnsafeTerm("a literal holding a \\uXXXX sequence cannot be written unambiguously")
    text = '"' + value.translate(_ECHAR) + '"'
    if lang is None:
        return text
    if not isinstance(lang, str) or not _LANGTAG.fullmatch(lang):
        raise UnsafeTerm(f"not a language tag: {lang!r}")
    return f"{text}@{lang}"


def cap_limit(query: str, cap: int) -> str:
    """A SELECT whose own LIMIT is at most ``cap``: a bigger one is rewritten down to it, a missing
    one is added (before a trailing VALUES block). Works on the code tokens at bracket depth 0, so
    a LIMIT inside a string, a comment or a subquery is never mistaken for the query's own."""
    depth, top = 0, []
    tokens = tokenize(query)
    for t in tokens:
        if t.kind == "open":
            depth += 1
        elif t.kind == "close":
            depth = max(0, depth - 1)
        elif depth == 0 and t.kind in ("word", "number"):
            top.append(t)
    for k, t in enumerate(top):
        if t.kind == "word" and t.text.upper() == "LIMIT" and k + 1 < len(top) and top[k + 1].kind == "number":
            num = top[k + 1]
            if num.text.isdigit() and int(num.text) <= cap:
                return query
            return query[:num.pos] + str(cap) + query[num.pos + len(num.text):]
    values = next((t for t in top if t.kind == "word" and t.text.upper() == "VALUES"), None)
    if values is not None:
        return f"{query[:values.pos]}\nLIMIT {cap}\n{query[values.pos:]}"
    return f"{query.rstrip()}\nLIMIT {cap}"
