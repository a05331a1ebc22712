"""S-expressions (GrailQA's logical forms) → SPARQL, for FuSIC-KBQA's "w/o SPARQL" variant.

The language (Gu et al., 2021), over sets of entities:

- an entity (``wd:Q64904``, ``ns:m.0264904``, ``<http://…>``) or a literal (``1994``, ``"Paris"``)
  is the set holding just it;
- ``(JOIN r X)`` = {x | (x, r, y) for some y in X}; ``(JOIN (R r) X)`` = {x | (y, r, x), y in X};
- ``(AND A B)`` = A ∩ B; ``(COUNT A)`` = |A|;
- ``(ARGMAX A r)`` / ``(ARGMIN A r)`` = the members of A with the largest / smallest value of r
  (all of them when several tie, as GrailQA's own converter returns); ``r`` may be a relation path
  ``(JOIN r1 r2)`` / ``(JOIN (R r1) r2)`` (the value of r2 on the node r1 reaches), and ``A`` may be
  a bare class (every instance of it);
- ``(lt r v)``, ``(le r v)``, ``(gt r v)``, ``(ge r v)`` = {x | (x, r, w), w < v …};
- extension (not in GrailQA, needed for "which is longer, A or B?"): ``(OR A B)`` = A ∪ B.

Values: numbers, quoted strings, and GrailQA's typed literals ``2008-05-08^^http://www.w3.org/2001/XMLSchema#date``
(or ``"…"^^xsd:date``), written ``"2008-05-08-08:00"^^<…#date>``: like GrailQA's converter, a date
without a timezone gets Freebase's ``-08:00`` (``timezone=``; integers, floats and dateTimes do not).
The answer never includes an entity the expression starts from (GrailQA's ``FILTER (?x != e)``):
"which games share a publisher with X" does not answer X, nor count it.

:func:`parse_sexpr` and :func:`to_sparql` raise :class:`SExprError` with a message the LLM can act
on (the execution-guided feedback shows it); :func:`extract_sexpr` pulls the first balanced
expression out of chatty output and never raises.
"""

from __future__ import annotations

import itertools
import re
from typing import Union

Node = Union[str, list]

COMPARATORS = {"lt": "<", "le": "<=", "gt": ">", "ge": ">="}
OPERATORS = {"JOIN", "R", "AND", "OR", "COUNT", "ARGMAX", "ARGMIN", *COMPARATORS}
_TOKEN = re.compile(r'\(|\)|"(?:[^"\\]|\\.)*"(?:\^\^[^\s()]+|@[A-Za-z][\w-]*)?|[^\s()]+')
FREEBASE_TIMEZONE = "-08:00"  # GrailQA's converter writes dates in Freebase's timezone
_NO_TIMEZONE_TYPES = ("integer", "int", "float", "double", "decimal", "dateTime", "boolean", "string")
_XSD = "http://www.w3.org/2001/XMLSchema#"
MAX_DEPTH = 100  # deeper nesting is an error, not a RecursionError (GrailQA's forms nest < 10 deep)


class SExprError(ValueError):
    """The s-expression does not parse or uses an operator wrongly."""


def parse_sexpr(text: str) -> Node:
    """``(JOIN (R r) e)`` → ``["JOIN", ["R", "r"], "e"]``."""
    tokens = _TOKEN.findall(text or "")
    if not tokens:
        raise SExprError("empty s-expression")
    pos = 0

    def read(depth: int = 0) -> Node:
        nonlocal pos
        if depth > MAX_DEPTH:
            raise SExprError(f"the expression nests more than {MAX_DEPTH} levels deep")
        if pos >= len(tokens):
            raise SExprError("unbalanced parentheses: the expression ends too early")
        tok = tokens[pos]
        pos += 1
        if tok == ")":
            raise SExprError("unexpected ')'")
        if tok != "(":
            return tok
        items: list[Node] = []
        while pos < len(tokens) and tokens[pos] != ")":
            items.append(read(depth + 1))
        if pos >= len(tokens):
            raise SExprError("unbalanced parentheses: a '(' is never closed")
        pos += 1
        if not items:
            raise SExprError("empty parentheses '()'")
        return items

    node = read()
    if pos != len(tokens):
        raise SExprError(f"text after the expression: {' '.join(tokens[pos:pos + 5])!r}")
    return node


def extract_sexpr(text: object) -> str:
    """The first balanced ``( … )`` whose head is an operator (code fences and prose around it
    ignored); ``""`` when there is none. One pass with a stack of open parentheses (linear time:
    an unbalanced ``((((…`` of any length is cheap)."""
    t = re.sub(r"```[a-zA-Z]*", "", str(text or ""))
    stack: list[int] = []
    best: tuple[int, int] | None = None  # the earliest '(' whose balanced span starts with an operator
    for i, ch in enumerate(t):
        if ch == "(":
            stack.append(i)
        elif ch == ")" and stack:
            start = stack.pop()
            if (best is None or start < best[0]) and _head(t, start, i) in OPERATORS:
                best = (start, i)
    return t[best[0]:best[1] + 1] if best else ""


def _head(t: str, start: int, end: int) -> str:
    """The operator word after the ``(`` at ``start`` (up to a space or ``(``, within ``t[start:end + 1]``);
    anything longer than an operator is cut (it cannot be one)."""
    i = start + 1
    while i <= end and t[i].isspace():
        i += 1
    j = i
    while j <= end and t[j] not in " (" and j - i <= 8:
        j += 1
    return t[i:j]


def _is_value(tok: str) -> bool:
    return tok.startswith('"') or "^^" in tok or bool(re.fullmatch(r"-?\d+(\.\d+)?([eE][+-]?\d+)?", tok))


def _typed(tok: str, timezone: str | None) -> str:
    """``2008-05-08^^http://…#date`` / ``"2008-05-08"^^xsd:date`` → ``"2008-05-08-08:00"^^<http://…#date>``."""
    value, _, dtype = tok.rpartition("^^")
    value = value[1:-1] if len(value) >= 2 and value[0] == value[-1] == '"' else value
    if not value or not dtype or '"' in value or "\\" in value:
        raise SExprError(f"{tok!r} is not a typed value (write it as 2008-05-08^^http://www.w3.org/2001/XMLSchema#date)")
    if dtype.startswith("<") and dtype.endswith(">"):
        dtype = dtype[1:-1]
    elif dtype.startswith("xsd:"):
        dtype = _XSD + dtype[4:]
    if not re.fullmatch(r"https?://[^\s<>\"{}|^`\\]+", dtype):
        raise SExprError(f"{tok!r}: the type after ^^ must be a full IRI such as http://www.w3.org/2001/XMLSchema#date")
    local = re.split(r"[#/]", dtype)[-1]
    if timezone and local not in _NO_TIMEZONE_TYPES and not re.search(r"(Z|[+-]\d\d:\d\d)$", value):
        value += timezone
    return f'"{value}"^^<{dtype}>'


def _term(tok: Node, timezone: str | None = FREEBASE_TIMEZONE) -> str:
    if not isinstance(tok, str):
        raise SExprError(f"expected an entity, relation or value, got {to_text(tok)!r}")
    if "^^" in tok:
        return _typed(tok, timezone)
    if tok.startswith('"') or re.fullmatch(r"-?\d+(\.\d+)?([eE][+-]?\d+)?", tok) or tok.startswith("<") or ":" in tok:
        return tok
    raise SExprError(f"{tok!r} is neither an entity/relation id (prefix:name) nor a value")


def to_sparql(expr: Node | str, prefixes: dict[str, str] | None = None, type_predicate: str | None = None,
              timezone: str | None = FREEBASE_TIMEZONE) -> str:
    """A SELECT query whose first variable is the expression's value. In ``(AND T X)`` and
    ``(ARGMAX T r)`` a bare name ``T`` is a class (``x type_predicate T``), as in GrailQA.
    ``timezone``: appended to typed date values that have none (``None``: write them as given)."""
    try:
        return _to_sparql(expr, prefixes, type_predicate, timezone)
    except RecursionError:  # a parsed tree handed in directly may still nest too deeply
        raise SExprError(f"the expression nests more than {MAX_DEPTH} levels deep") from None


def _to_sparql(expr: Node | str, prefixes: dict[str, str] | None, type_predicate: str | None,
               timezone: str | None) -> str:
    node = parse_sexpr(expr) if isinstance(expr, str) else expr
    fresh = _Fresh(type_predicate, timezone)
    pre = "".join(f"PREFIX {p}: <{ns}>\n" for p, ns in (prefixes or {}).items())
    if isinstance(node, list) and (not node or not isinstance(node[0], str)):
        raise SExprError(f"an expression starts with an operator name, not {to_text(node)!r}")
    if isinstance(node, list) and node[0] == "COUNT":
        if len(node) != 2:
            raise SExprError("COUNT takes one argument")
        body = _set(node[1], "?x", fresh) + _exclusions(fresh)
        return f"{pre}SELECT (COUNT(DISTINCT ?x) AS ?count) WHERE {{ {' '.join(body)} }}"
    if isinstance(node, list) and node[0] in ("ARGMAX", "ARGMIN"):
        if len(node) != 3:
            raise SExprError(f"{node[0]} takes a set and a relation")
        members = _members(node[1], fresh)
        path = _relation_path(node[2])
        hops, var = [], "?x"
        for i, (rel, inverse) in enumerate(path):
            nxt = "?value" if i == len(path) - 1 else next(fresh)
            hops.append(f"{nxt} {_term(rel)} {var} ." if inverse else f"{var} {_term(rel)} {nxt} .")
            var = nxt
        body = members + hops + _exclusions(fresh)
        # the best value first (a sub-query), then every member that has it: ties are all answers
        best = f"{{ SELECT ?value WHERE {{ {' '.join(body)} }} ORDER BY {'DESC' if node[0] == 'ARGMAX' else 'ASC'}(?value) LIMIT 1 }}"
        return f"{pre}SELECT DISTINCT ?x WHERE {{ {best} {' '.join(body)} }}"
    body = _set(node, "?x", fresh) + _exclusions(fresh)
    return f"{pre}SELECT DISTINCT ?x WHERE {{ {' '.join(body)} }}"


def _members(node: Node, fresh: "_Fresh") -> list[str]:
    """The set an ARGMAX/ARGMIN ranges over: a set expression, or a bare class (GrailQA's
    ``(ARGMAX rail.locomotive …)``: every instance), which without a type predicate stays a name."""
    if isinstance(node, str) and fresh.type_predicate and not _is_value(node):
        return [f"?x {fresh.type_predicate} {_term(node)} ."]
    return _set(node, "?x", fresh)


def _relation_path(node: Node) -> list[tuple[str, bool]]:
    """``r`` / ``(R r)`` / ``(JOIN (R r1) r2)`` (nested to any length) → [(relation, inverse), …]."""
    if isinstance(node, str):
        return [(node, False)]
    if node and node[0] == "R" and len(node) == 2 and isinstance(node[1], str):
        return [(node[1], True)]
    if node and node[0] == "JOIN" and len(node) == 3:
        return _relation_path(node[1]) + _relation_path(node[2])
    raise SExprError(f"the value to rank by must be a relation, (R relation) or (JOIN relation relation), "
                     f"not {to_text(node)!r}")


def _exclusions(fresh: "_Fresh") -> list[str]:
    """The answer is never one of the entities the expression starts from (GrailQA's converter)."""
    return [f"FILTER(?x != {e})" for e in dict.fromkeys(fresh.entities)]


class _Fresh:
    def __init__(self, type_predicate: str | None, timezone: str | None = FREEBASE_TIMEZONE) -> None:
        self.count, self.type_predicate, self.timezone = itertools.count(), type_predicate, timezone
        self.entities: list[str] = []  # entities joined to (excluded from the answers)

    def __next__(self) -> str:
        return f"?v{next(self.count)}"


def _set(node: Node, var: str, fresh: _Fresh) -> list[str]:
    """Graph patterns that bind ``var`` to the members of the set ``node``."""
    if isinstance(node, str):
        return [f"VALUES {var} {{ {_term(node, fresh.timezone)} }}"]
    if not node or not isinstance(node[0], str):
        raise SExprError(f"an expression starts with an operator name, not {to_text(node)!r}")
    op, args = node[0], node[1:]
    if op == "JOIN":
        if len(args) != 2:
            raise SExprError("JOIN takes a relation and a set")
        rel, arg = args
        inverse = isinstance(rel, list) and rel[0] == "R"
        if isinstance(rel, list) and (rel[0] != "R" or len(rel) != 2):
            raise SExprError("a relation is a name or (R name)")
        r = _term(rel[1] if inverse else rel)
        if isinstance(arg, str):
            other, inner = _term(arg, fresh.timezone), []
            if not _is_value(arg):
                fresh.entities.append(other)
        else:
            other = next(fresh)
            inner = _set(arg, other, fresh)
        return inner + [f"{other} {r} {var} ." if inverse else f"{var} {r} {other} ."]
    if op == "AND":
        if len(args) != 2:
            raise SExprError("AND takes two sets")
        a, b = args
        if isinstance(a, str) and not isinstance(b, str):  # (AND class set): the set first
            a, b = b, a
        if not isinstance(b, str):
            return _set(a, var, fresh) + _set(b, var, fresh)
        if fresh.type_predicate:
            return _set(a, var, fresh) + [f"{var} {fresh.type_predicate} {_term(b)} ."]
        return _set(a, var, fresh) + [f"FILTER({var} = {_term(b)})"]
    if op == "OR":
        if not args or not all(isinstance(a, str) for a in args):
            raise SExprError("OR takes entities (OR e1 e2 …)")
        return [f"VALUES {var} {{ {' '.join(_term(a) for a in args)} }}"]
    if op in COMPARATORS:
        if len(args) != 2:
            raise SExprError(f"{op} takes a relation and a value")
        v = next(fresh)
        return [f"{var} {_term(args[0])} {v} .", f"FILTER({v} {COMPARATORS[op]} {_term(args[1], fresh.timezone)})"]
    if op in ("COUNT", "ARGMAX", "ARGMIN"):
        raise SExprError(f"{op} may only be the outermost operator")
    raise SExprError(f"unknown operator {op!r}; use {', '.join(sorted(OPERATORS))}")


def to_text(node: Node) -> str:
    return node if isinstance(node, str) else "(" + " ".join(to_text(n) for n in node) + ")"
