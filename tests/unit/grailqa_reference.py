"""A reference oracle for s-expression → SPARQL: GrailQA's own converter, re-implemented.

Behaviour follows ``lisp_to_sparql`` in ``utils/logic_form_util.py`` of GrailQA (Gu et al., 2021,
https://github.com/dki-lab/GrailQA, Apache License 2.0 as the FuSIC-KBQA paper, appendix A.2,
states for that code base), re-written here in our own structure for the equivalence test
``test_sexpr_grailqa.py`` — it is test code, never used by the library. What it does, as the
original does:

- the top-level ARGMAX/ARGMIN's relation argument, when a ``(JOIN …)`` path, is flattened into its
  relations (``(JOIN (R a) b)`` → ``(R a)``, ``b``): the value is read at the end of that chain;
- the expression is linearised bottom-up into numbered sub-programs, sub-program ``i`` binding
  ``?x{i}``; AND/COUNT/ARGMAX merge their arguments' variables into one (the smallest number);
- JOIN writes one triple (an ``m.``/``g.`` argument is an entity, ``#k`` a variable, anything else
  a literal); AND with a name adds ``?x type.object.type class``; a comparison adds a triple to
  ``?y{i}`` and a FILTER; ARGMAX/ARGMIN over a name types the variable with it;
- a typed literal ``v^^T`` becomes ``"v"^^<T>``, with Freebase's ``-08:00`` appended unless T is
  integer, float or dateTime;
- the answer is never one of the entities joined to: ``FILTER (?x != ns:e)`` for each;
- a superlative selects every ``?x`` whose value equals the best one (a sub-query ordered by the
  value with LIMIT 1): ties are all answers.

Two deliberate deviations, both syntax only: COUNT is written ``SELECT (COUNT(DISTINCT ?x) AS
?count)`` (the original's ``SELECT COUNT DISTINCT ?x`` is Virtuoso's dialect and does not parse
elsewhere), and TC (WebQSP's time constraint, absent from GrailQA) is not supported.
"""

from __future__ import annotations

NS = "ns:"
_OPS = {"le": "<=", "lt": "<", "ge": ">=", "gt": ">"}


def _nested(text: str) -> list:
    tokens = text.replace("(", " ( ").replace(")", " ) ").split()
    stack: list[list] = [[]]
    for tok in tokens:
        if tok == "(":
            stack.append([])
        elif tok == ")":
            done = stack.pop()
            stack[-1].append(done)
        else:
            stack[-1].append(tok)
    return stack[0][0]


def _flatten_path(expr: list) -> list:
    out: list = []
    for part in expr:
        if part == "JOIN":
            continue
        if isinstance(part, str) or part[0] == "R":
            out.append(part)
        elif part[0] == "JOIN":
            out += _flatten_path(part)
    return out


def _linearise(expr: list, programs: list[list]) -> str:
    """Sub-programs in post-order; returns the ``#k`` name of ``expr``."""
    args = [(_linearise(a, programs) if isinstance(a, list) and a[0] != "R" else a) for a in expr]
    programs.append(args)
    return f"#{len(programs) - 1}"


def _literal(tok: str) -> str:
    if "^^" not in tok:
        return tok
    value, dtype = tok.split("^^", 1)
    if dtype.split("#")[-1] not in ("integer", "float", "dateTime"):
        value += "-08:00"
    return f'"{value}"^^<{dtype}>'


def _is_entity(tok: str) -> bool:
    return tok[:2] in ("m.", "g.")


class _Vars:
    def __init__(self) -> None:
        self.parent: dict[int, int] = {}

    def root(self, i: int) -> int:
        while i in self.parent:
            i = self.parent[i]
        return i

    def merge(self, a: int, b: int) -> None:
        ra, rb = self.root(a), self.root(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def reference_lisp_to_sparql(lisp: str) -> str:
    expr = _nested(lisp)
    superlative = expr[0] in ("ARGMAX", "ARGMIN")
    if superlative and isinstance(expr[2], list):
        expr = expr[:2] + _flatten_path(expr[2])
    programs: list[list] = []
    _linearise(expr, programs)
    vars_ = _Vars()
    clauses: list[tuple] = []  # ("t", s, p, o) with ("x", i) variables, or ("f", var, text)
    entities: list[str] = []
    order: list[str] = []
    count = False

    def term(tok):
        if isinstance(tok, tuple):
            return tok
        if tok.startswith("#"):
            return ("x", int(tok[1:]))
        if _is_entity(tok):
            entities.append(tok)
            return NS + tok
        return _literal(tok)

    for i, p in enumerate(programs):
        me = ("x", i)
        op = p[0]
        if op == "JOIN":
            rel, arg = p[1], p[2]
            if isinstance(rel, list):  # (R r): arg r ?x
                clauses.append(("t", term(arg), NS + rel[1], me))
            else:
                clauses.append(("t", me, NS + rel, term(arg)))
        elif op == "AND":
            vars_.merge(i, int(p[2][1:]))
            if p[1].startswith("#"):
                vars_.merge(i, int(p[1][1:]))
            else:
                clauses.append(("t", me, NS + "type.object.type", NS + p[1]))
        elif op in _OPS:
            clauses.append(("t", me, NS + p[1], ("y", i)))
            clauses.append(("f", ("y", i), f"{_OPS[op]} {_literal(p[2])}"))
        elif op in ("ARGMAX", "ARGMIN"):
            if p[1].startswith("#"):
                vars_.merge(i, int(p[1][1:]))
            else:
                clauses.append(("t", me, NS + "type.object.type", NS + p[1]))
            rels = p[2:]
            prev = me
            for j, rel in enumerate(rels[:-1]):
                nxt = ("c", j)
                if isinstance(rel, list):
                    clauses.append(("t", nxt, NS + rel[1], prev))
                else:
                    clauses.append(("t", prev, NS + rel, nxt))
                prev = nxt
            clauses.append(("t", prev, NS + rels[-1], ("sk", 0)))
            order = ["ORDER BY ?sk0" if op == "ARGMIN" else "ORDER BY DESC(?sk0)", "LIMIT 1"]
        elif op == "COUNT":
            vars_.merge(i, int(p[1][1:]))
            count = True
        else:
            raise ValueError(f"unsupported operator {op!r}")
    question = vars_.root(len(programs) - 1)

    def show(t) -> str:
        if not isinstance(t, tuple):
            return t
        kind, n = t
        if kind == "x":
            n = vars_.root(n)
            return "?x" if n == question else f"?x{n}"
        return f"?{kind}{n}"

    body = [f"{show(c[1])} {show(c[2])} {show(c[3])} ." if c[0] == "t" else f"FILTER ({show(c[1])} {c[2]})"
            for c in clauses]
    filters = [f"FILTER (?x != ns:{e})" for e in dict.fromkeys(entities)]
    filters.insert(0, "FILTER (!isLiteral(?x) OR lang(?x) = '' OR langMatches(lang(?x), 'en'))".replace(" OR ", " || "))
    head = "PREFIX ns: <http://rdf.freebase.com/ns/>\n"
    if count:
        return head + "SELECT (COUNT(DISTINCT ?x) AS ?count) WHERE {\n" + "\n".join(filters + body) + "\n}"
    if superlative:
        inner = "{SELECT ?sk0 WHERE {\n" + "\n".join(filters + body) + "\n}\n" + "\n".join(order) + "\n}"
        return head + "SELECT DISTINCT ?x WHERE {\n" + "\n".join(body) + "\n" + inner + "\n}"
    return head + "SELECT DISTINCT ?x WHERE {\n" + "\n".join(filters + body) + "\n}"
