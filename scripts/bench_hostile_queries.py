"""Hostile SPARQL against both backends: accepted or rejected, network calls, mutations, wall time.

Issue 18's acceptance: the hostile-query set (the SERVICE-in-comment bypass, DEFINE, LOAD,
INSERT/DELETE, a 3000-deep nesting, a cross product that would run for minutes, ``LIMIT 50000000``)
gives 0 network calls, 0 mutations, and every query ends within its timeout + 1 s. Run::

    .venv/bin/python scripts/bench_hostile_queries.py            # writes results/bench/hostile_queries.md
    .venv/bin/python scripts/bench_hostile_queries.py --timeout 2 --no-remote

Backends: the embedded mini-world (Wikidata-like, ~10k triples; queries run in a killable worker
process) and, unless ``--no-remote``, the same KG behind the project's Oxigraph server on
127.0.0.1. A TCP listener on 127.0.0.1 stands for "the network": a SERVICE query names it, and
every connection it receives is counted. Mutations: the number of triples and a hash of the
embedded store before/after; ``COUNT(*)`` on the endpoint. ``cpu after`` is the CPU time this
process used in the second after the query returned (a leaked query thread shows up there).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kgqa_lib.kg.graph import QueryRejected, QueryTimeout  # noqa: E402
from kgqa_lib.kg.sources import load_named  # noqa: E402
from kgqa_lib.paths import data_dir, repo_root  # noqa: E402


class Listener:
    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.count = 0
        self._stop = False
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.count += 1
            conn.close()


def hostile(port: int) -> list[tuple[str, str]]:
    svc = f"http://127.0.0.1:{port}/sparql"
    return [
        ("SERVICE hidden by a ''' comment (the bypass)",
         f"SELECT ?s ?o WHERE {{\n  ?s ?p ?o . # see '''\n  SERVICE <{svc}> {{ ?x ?y ?z }}\n  # '''\n}} LIMIT 5"),
        ("SERVICE in FILTER EXISTS", f"SELECT * WHERE {{ ?s ?p ?o FILTER EXISTS {{ SERVICE <{svc}> {{ ?s ?p ?o }} }} }}"),
        ("SERVICE after 1. (lexer trick)", f"SELECT * WHERE {{ ?s ?p 1.SERVICE <{svc}> {{ ?a ?b ?c }} }}"),
        ("SERVICE after a CR-ended comment", f"SELECT * WHERE {{ ?s ?p ?o # c\rSERVICE <{svc}> {{ ?a ?b ?c }} }}"),
        ("DEFINE pragma", "DEFINE input:inference 'urn:rules' SELECT * WHERE { ?s ?p ?o }"),
        ("DEFINE hidden by a ''' comment", "# '''\nDEFINE sql:log-enable 3\n# '''\nSELECT * WHERE { ?s ?p ?o }"),
        ("LOAD", f"LOAD <{svc}/data.ttl>"),
        ("INSERT DATA", "INSERT DATA { <http://a> <http://b> <http://c> }"),
        ("INSERT hidden by a ''' comment",
         "SELECT * WHERE { ?s ?p ?o } # '''\nINSERT DATA { <http://a> <http://b> <http://c> }\n# '''"),
        ("DELETE WHERE", "DELETE WHERE { ?s ?p ?o }"),
        ("DELETE/INSERT WHERE", "DELETE { ?s ?p ?o } INSERT { ?s ?p 1 } WHERE { ?s ?p ?o }"),
        ("CLEAR ALL", "CLEAR ALL"),
        ("3000-deep nesting", "SELECT * WHERE " + "{" * 3000 + "?s ?p ?o" + "}" * 3000),
        ("3000-deep nesting, unclosed", "SELECT * WHERE " + "{" * 3000),
        ("cross product (minutes)", "SELECT (COUNT(*) AS ?n) WHERE { ?a ?p ?b . ?c ?q ?d . ?e ?r ?f }"),
        ("LIMIT 50000000", "SELECT ?a ?c WHERE { ?a ?p ?b . ?c ?q ?d } LIMIT 50000000"),
        ("ORDER BY … LIMIT 50000000", "SELECT ?a ?c WHERE { ?a ?p ?b . ?c ?q ?d } ORDER BY ?a ?c LIMIT 50000000"),
    ]


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


def fingerprint_embedded(kg) -> tuple[int, int]:
    quads = sorted(str(q) for q in kg.store)
    return len(quads), hash(tuple(quads))


def run_one(kg, query: str, timeout: float, max_rows: int) -> tuple[str, float, float, str]:
    t = time.perf_counter()
    try:
        res = kg.sparql(query, timeout=timeout, max_rows=max_rows)
        outcome, detail = "accepted", f"{len(res.rows)} rows" + (" (capped)" if res.truncated else "")
    except QueryTimeout:
        outcome, detail = "accepted", "timeout: stopped"
    except QueryRejected as exc:
        outcome, detail = "rejected", str(exc)[:70]
    wall = time.perf_counter() - t
    c0 = _cpu()
    time.sleep(1.0)
    return outcome, wall, _cpu() - c0, detail


def bench(kg, name: str, listener: Listener, timeout: float, max_rows: int, mutations, sent=None) -> list[str]:
    rows = []
    kg.sparql("ASK { ?s ?p ?o }")  # warm: the worker / the HTTP session
    for label, query in hostile(listener.port):
        before_net, before_mut = listener.count, mutations()
        before_sent = sent() if sent else 0
        outcome, wall, cpu_after, detail = run_one(kg, query, timeout, max_rows)
        time.sleep(0.2)
        net = listener.count - before_net
        extra = f" | {sent() - before_sent}" if sent else ""  # before the mutation check sends its own query
        mut = "0" if mutations() == before_mut else "CHANGED"
        ok = wall <= timeout + 1.0 and net == 0 and mut == "0"
        rows.append(f"| {name} | {label} | {outcome} | {net} | {mut}{extra} | {wall:.2f} / {timeout:.0f} | {cpu_after:.2f} | "
                    f"{'yes' if ok else '**NO**'} | {detail.replace('|', '/')} |")
        print(rows[-1], flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--timeout", type=float, default=3.0)
    ap.add_argument("--max-rows", type=int, default=100)
    ap.add_argument("--no-remote", action="store_true")
    ap.add_argument("--out", default=str(repo_root() / "results" / "bench" / "hostile_queries.md"))
    args = ap.parse_args()
    listener = Listener()
    kg = load_named("miniworld:wikidata")
    header = ("| backend | query | verdict | network calls | mutations | wall s / timeout | cpu after (s) | "
              "within timeout + 1 s, 0 calls, 0 mutations | detail |")
    rows = bench(kg, "embedded", listener, args.timeout, args.max_rows, lambda: fingerprint_embedded(kg))
    remote_rows: list[str] = []
    if not args.no_remote:
        from kgqa_lib.kg.remote import open_sparql_kg
        from kgqa_lib.servers import OxigraphServer

        files = [data_dir() / "miniworld" / "kg_wikidata.nt", data_dir() / "miniworld" / "ontology.nt"]
        with OxigraphServer(files) as srv:
            remote = open_sparql_kg(srv.kg_url("miniworld:wikidata"), cache=False)
            remote.retries = 2

            def count() -> str:
                return remote._select("SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }").rows[0]["n"]

            remote_rows = bench(remote, "oxigraph server", listener, args.timeout, args.max_rows, count,
                                sent=lambda: remote.stats["sent"])
    lines = [
        "# Hostile SPARQL queries (issue 18, items 7-8)",
        "",
        "Written by `scripts/bench_hostile_queries.py` (timeout "
        f"{args.timeout:.0f} s, row cap {args.max_rows}). Network calls: connections to a listener on 127.0.0.1 "
        "that the SERVICE queries name. Mutations: triples + hash of the embedded store, `COUNT(*)` on the endpoint. "
        "`cpu after`: CPU this process used in the second after the query returned. On the endpoint, a "
        "timed-out query is not retried and its LIMIT is capped at the row cap + 1; Oxigraph's server takes "
        "no per-query timeout parameter (only `--timeout-s` at start), so it may still finish a timed-out "
        "query server-side.",
        "",
        header,
        "|" + "---|" * 9,
        *rows,
    ]
    if remote_rows:
        lines += ["", header.replace("| mutations |", "| mutations | requests sent |"), "|" + "---|" * 10, *remote_rows]
    ok = all("| yes |" in r for r in rows + remote_rows)
    lines += ["", f"All within timeout + 1 s with 0 network calls and 0 mutations: **{'yes' if ok else 'NO'}**", ""]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines), encoding="utf-8")
    print(f"wrote {Path(args.out).relative_to(repo_root())}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
