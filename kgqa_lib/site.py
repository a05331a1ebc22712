"""A static HTML site of the project, to read it without running it (``kgqa site``).

The committed notebooks with their committed outputs (nothing is executed) become pages through
nbconvert's HTML exporter, with JupyterLab's look (the ``lab`` template) stripped of everything
that would load from the network (require.js, MathJax, Mermaid and the widget manager come from
CDNs in that template; no notebook here uses them). The benchmark reports ``results/bench/*.md``
become pages through nbconvert's own Markdown renderer (the one that renders the notebooks'
Markdown cells), each headed by its table's lines of ``kgqa bench list`` — title, report, the
paper it reproduces, who made its records and how complete they are — read from the tables
registry of :mod:`kgqa_lib.bench`. The index lists the pages by paper and by reader
(researcher, workshop teacher, papermill user); a page of figures and one of the notebooks'
``parameters`` cells complete it.

Links between pages are rewritten from the repository's layout to the site's (a report's
``pgakv_test.md`` → ``pgakv_test.html``, a notebook's ``../figures/x.png`` → the copied figure);
a relative link to a file the site does not hold keeps its text without the link (the build lists
them in ``Site.unlinked``), so every link of the site resolves: :func:`broken_links` checks it.
"""

from __future__ import annotations

import html
import posixpath
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from .errors import UsageError
from .paths import repo_root, results_dir

#: A file in every folder ``kgqa site`` writes: only such a folder is emptied before a new build.
MARKER = ".kgqa-site"

#: (key, heading, what it is, first digits of its notebooks' numbers): the index's paper sections.
PAPERS = (
    ("pgakv", "PG&AKV", "pseudo-graphs written by the LLM, then atomic knowledge verification against the KG", "1"),
    ("fusic", "FuSIC-KBQA", "supervised retrievers, LLM re-ranking, and SPARQL generation with execution feedback", "2"),
    ("keqing", "Keqing", "question decomposition, question templates and logical chains, then reasoning", "3"),
    ("compare", "Comparison and baselines", "the quickstart, the peer baselines (KB-BINDER, Think-on-Graph) and "
                                            "the cross-paper tables", "049"),
    ("measure", "Measurements of the library", "speed and robustness of the embedded KG, the caches, the "
                                               "parsers and the servers on this machine", ""),
)
#: How a report's table names its paper (``Table.source`` / a measurement's title): the first named wins.
_PAPER_NAMES = (("PG&AKV", "pgakv"), ("FuSIC", "fusic"), ("Keqing", "keqing"))


@dataclass
class Page:
    """One page (or copied file) of the site: ``path`` in the site, ``source`` in the repository."""

    path: str
    title: str
    source: str = ""
    kind: str = ""  # notebook | report | raw | figure | page
    group: str = ""  # a key of PAPERS
    info: dict[str, Any] = field(default_factory=dict)
    file: Path | None = None  # where it is read from (results/ may be elsewhere: KGQA_RESULTS_DIR)


@dataclass
class Site:
    out: Path
    pages: list[Page]
    unlinked: list[tuple[str, str]]  # (page, target): relative links to files the site does not hold

    @property
    def index(self) -> Path:
        return self.out / "index.html"


def default_out() -> Path:
    """``build/site/`` of the clone (ignored by git)."""
    return repo_root() / "build" / "site"


# ---------------------------------------------------------------- what the site holds
def _notebook_group(stem: str) -> str:
    for key, _, _, digits in PAPERS:
        if stem[:1] and stem[:1] in digits:
            return key
    return "compare"


def _paper_of(text: str) -> str | None:
    hits = [(text.find(name), key) for name, key in _PAPER_NAMES if name in text]
    return min(hits)[1] if hits else None


def _tables() -> dict[str, Any]:
    """Report file name → its table (paper table or measurement) in the registry."""
    from .bench import measure

    return {t.output: t for t in measure.lookup(None)}


def provenance(table: Any) -> list[str]:
    """The table's lines of ``kgqa bench list`` (saved records only: nothing this machine is running)."""
    from . import bench
    from .bench import measure

    if isinstance(table, measure.Measurement):
        return measure.status_lines(table)
    return bench.status_table(table, None)


def _first_heading(markdown: str) -> str | None:
    for line in markdown.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return None


def _mentions(text: str, report: str, table: Any = None) -> bool:
    """Does a notebook's text name this report (a file name of results/bench/) or its table: the table's
    records folder or JSON, a `kgqa bench` command with its name, or the name itself quoted (names with
    an underscore only: "fusic" is a word)?"""
    names = [rf"(?<![\w.-]){re.escape(report)}"]
    if table is not None:
        names.append(rf"bench (?:report|run|list|show|rescore) {re.escape(table.name)}\b")
        names.append(rf"runs/{re.escape(getattr(table, 'records', '') or table.name)}/")
        if getattr(table, "data", ""):
            names.append(rf"(?<![\w.-]){re.escape(table.data)}")
        if "_" in table.name:
            names.append(rf"[`'\"]{re.escape(table.name)}[`'\"]")
    return any(re.search(n, text) for n in names)


def collect() -> list[Page]:
    """The pages of the site, from the committed files: notebooks, reports (and the raw files beside
    them), figures, the README, the index and its two lists."""
    import nbformat

    from .notebooks import notebook_paths

    tables = _tables()
    pages: list[Page] = []
    bench = results_dir() / "bench"
    reports = sorted(p for p in bench.glob("*.md") if not p.name.startswith("."))
    for p in notebook_paths():  # (not papermill's hidden copies of a notebook being run)
        nb = nbformat.read(p, as_version=4)
        sources = "\n".join(c.source for c in nb.cells)
        title = next((h for c in nb.cells if c.cell_type == "markdown" for h in [_first_heading(c.source)] if h),
                     p.stem)
        params = [c.source for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
        reads = [r.name for r in reports if _mentions(sources, r.name, tables.get(r.name))]
        pages.append(Page(f"notebooks/{p.stem}.html", title, f"notebooks/{p.name}", "notebook", _notebook_group(p.stem),
                          {"stem": p.stem, "parameters": params[0] if params else None, "reads": reads}, p))
    for p in reports:
        text = p.read_text(encoding="utf-8")
        table = tables.get(p.name)
        if table is None:
            group = _paper_of(text[:2000]) or "compare"
        else:
            group = _paper_of(getattr(table, "source", "") or "") or _paper_of(table.title) or \
                ("compare" if not hasattr(table, "data") else "measure")
        title = _first_heading(text) or (table.title if table else p.stem)
        pages.append(Page(f"reports/{p.stem}.html", title, f"results/bench/{p.name}", "report", group,
                          {"table": table, "provenance": provenance(table) if table else None}, file=p))
    for p in sorted(bench.iterdir()):
        if p.is_file() and p.suffix in (".json", ".csv", ".txt") and not p.name.startswith("."):
            pages.append(Page(f"reports/{p.name}", p.name, f"results/bench/{p.name}", "raw", file=p))
    for p in sorted((repo_root() / "figures").glob("*.png")):  # the committed ones, whatever KGQA_FIGURES_DIR says
        pages.append(Page(f"figures/{p.name}", p.stem, f"figures/{p.name}", "figure", file=p))
    readme = repo_root() / "README.md"
    if readme.is_file():
        pages.append(Page("readme.html", "README: setup, commands and layout", "README.md", "page", file=readme))
    pages += [Page("index.html", "kgqa notebooks", "", "page"), Page("figures.html", "Figures", "", "page"),
              Page("parameters.html", "Notebook parameters (papermill)", "", "page")]
    for nb_page in (p for p in pages if p.kind == "notebook"):  # the reverse: which notebooks show a report
        for r in pages:
            if r.kind == "report" and r.source.rsplit("/", 1)[-1] in nb_page.info["reads"]:
                r.info.setdefault("notebooks", []).append(nb_page)
    return pages


# ---------------------------------------------------------------- links
_ATTR = re.compile(r'(?P<attr>\b(?:href|src))="(?P<url>[^"]*)"')
_ANCHOR = re.compile(r'<a\b(?P<attrs>[^>]*)>')
_INLINE_CODE = re.compile(r"(?<!<pre>)(?<!\">)<code>(?P<name>[^<\s]+)</code>")
_IMAGE = (".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp")


class _Links:
    """Repository paths → site paths, and the rewriting of one page's links."""

    def __init__(self, pages: list[Page], out: Path) -> None:
        self.by_source = {p.source: p.path for p in pages if p.source}
        self.out = out
        self.unlinked: list[tuple[str, str]] = []

    def target(self, source: str, url: str) -> str | None:
        """The repository path a relative ``url`` in the file ``source`` points to."""
        path = url.split("#", 1)[0].split("?", 1)[0]
        if not path:
            return None
        return posixpath.normpath(posixpath.join(posixpath.dirname(source), path))

    def site_url(self, page: str, repo_path: str, fragment: str = "") -> str | None:
        site = self.by_source.get(repo_path)
        if site is None and repo_path.lower().endswith(_IMAGE) and (repo_root() / repo_path).is_file() \
                and not repo_path.startswith(".."):
            site = f"files/{repo_path}"  # an image the site does not list: copied beside it
            dest = self.out / site
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(repo_root() / repo_path, dest)
            self.by_source[repo_path] = site
        if site is None:
            return None
        return posixpath.relpath(site, posixpath.dirname(page) or ".") + fragment

    def rewrite(self, text: str, source: str, page: str) -> str:
        """``text`` (HTML of the file ``source``, shown as ``page``) with its relative links pointing
        into the site; a link to a file the site does not hold keeps its text and loses its href."""
        def attr(m: re.Match) -> str:
            url = html.unescape(m["url"])
            if not url or url.startswith(("#", "data:", "mailto:", "/")) or re.match(r"^[a-zA-Z][\w+.-]*:", url):
                return m[0]
            repo_path = self.target(source, url)
            fragment = "#" + url.split("#", 1)[1] if "#" in url else ""
            new = self.site_url(page, repo_path, fragment) if repo_path else None
            if new is None:
                self.unlinked.append((page, url))
                return f'data-repo-path="{html.escape(url)}" title="{html.escape(url)} (in the repository, not in this site)"'
            return f'{m["attr"]}="{html.escape(new)}"'

        text = _ATTR.sub(attr, text)

        def code(m: re.Match) -> str:  # `pgakv_test.md`, `results/bench/embed.json` → links to their pages
            name = html.unescape(m["name"]).rstrip(".,;:")
            candidates = [posixpath.normpath(name)] if "/" in name else []
            candidates.append(posixpath.normpath(posixpath.join(posixpath.dirname(source), name)))
            for c in candidates:
                if c in self.by_source and not c.startswith(".."):
                    return f'<a href="{html.escape(self.site_url(page, c) or "")}">{m[0]}</a>'
            return m[0]

        return _INLINE_CODE.sub(code, text)


def broken_links(out: Path) -> list[str]:
    """``page: target`` for every relative href/src of the site's HTML pages whose file is missing, or
    whose ``#fragment`` names no element of that page."""
    out = Path(out)
    ids: dict[Path, set[str]] = {}

    def ids_of(p: Path) -> set[str]:  # compared percent-decoded: a browser tries the fragment both ways
        if p not in ids:
            ids[p] = {unquote(html.unescape(i)) for i in re.findall(r'\bid="([^"]+)"', p.read_text(encoding="utf-8"))}
        return ids[p]

    found = []
    for page in sorted(out.rglob("*.html")):
        for m in _ATTR.finditer(page.read_text(encoding="utf-8")):
            url = html.unescape(m["url"])
            if url.startswith(("data:", "mailto:")) or re.match(r"^[a-zA-Z][\w+.-]*:", url):
                continue
            path, _, fragment = url.partition("#")
            target = (page.parent / unquote(path)).resolve() if path else page
            if not target.is_file():
                found.append(f"{page.relative_to(out)}: {url}")
            elif fragment and target.suffix == ".html" and unquote(fragment) not in ids_of(target):
                found.append(f"{page.relative_to(out)}: {url} (no element with that id)")
    return found


# ---------------------------------------------------------------- rendering
CSS = """
:root { --fg: #1f2328; --muted: #59636e; --line: #d1d9e0; --bg-alt: #f6f8fa; --accent: #0550ae; }
body.kgqa-page { font: 15px/1.55 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
  color: var(--fg); margin: 0; }
.kgqa-page main { max-width: 1100px; margin: 0 auto; padding: 1rem 1.5rem 4rem; }
.kgqa-nav { background: #24292f; color: #fff; padding: .45rem 1.5rem; font: 14px/1.5 system-ui, sans-serif;
  display: flex; flex-wrap: wrap; gap: .3rem 1.2rem; align-items: baseline; }
.kgqa-nav a, .kgqa-page .kgqa-nav a { color: #fff; text-decoration: none; }
.kgqa-nav a:hover { text-decoration: underline; }
.kgqa-nav .home { font-weight: 600; } .kgqa-nav .here { color: #d0d7de; }
.kgqa-context { max-width: 1100px; margin: .8rem auto 0; padding: .6rem 1rem; background: var(--bg-alt);
  border: 1px solid var(--line); border-radius: 6px; font: 14px/1.5 system-ui, sans-serif; }
body.jp-Notebook .kgqa-context { margin: .8rem 1rem 0; }
.kgqa-context ul { margin: .2rem 0; padding-left: 1.2rem; }
.kgqa-context a { color: var(--accent); text-decoration: underline; }
.provenance { font: 12.5px/1.45 ui-monospace, "DejaVu Sans Mono", monospace; white-space: pre-wrap;
  margin: .3rem 0; color: var(--muted); }
.kgqa-page table { border-collapse: collapse; margin: .8rem 0; font-size: 13px; display: block; overflow-x: auto; }
.kgqa-page th, .kgqa-page td { border: 1px solid var(--line); padding: .25rem .5rem; vertical-align: top; }
.kgqa-page th { background: var(--bg-alt); position: sticky; top: 0; }
.kgqa-page tr:nth-child(even) td { background: #fbfcfd; }
.kgqa-page code { background: var(--bg-alt); padding: .05rem .3rem; border-radius: 4px; font-size: 90%; }
.kgqa-page pre { background: var(--bg-alt); padding: .6rem; overflow-x: auto; border-radius: 6px; }
.kgqa-page pre code { background: none; padding: 0; }
.kgqa-page a { color: var(--accent); }
.kgqa-page a.anchor-link { display: none; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(320px, 1fr)); gap: 1rem; }
.card { border: 1px solid var(--line); border-radius: 8px; padding: .6rem 1rem; }
.card h3 { margin: .2rem 0 .4rem; }
.list li { margin: .35rem 0; } .muted { color: var(--muted); font-size: 13px; }
.figure { display: inline-block; margin: .5rem; vertical-align: top; max-width: 480px; }
.figure img { max-width: 100%; border: 1px solid var(--line); }
"""

#: The notebook template: JupyterLab's, with every script that loads from a CDN taken out.
NOTEBOOK_TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block extra_css -%}<!--kgqa-site-head-->{%- endblock extra_css -%}
{%- block body_header -%}{{ super() }}<!--kgqa-site-nav-->{%- endblock body_header -%}
"""


def _exporter():
    import jinja2
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(template_name="lab", template_file="kgqa_site.html.j2",
                            extra_loaders=[jinja2.DictLoader({"kgqa_site.html.j2": NOTEBOOK_TEMPLATE})])
    if _quiet_alt_text not in exporter.log.filters:
        exporter.log.addFilter(_quiet_alt_text)
    return exporter


def _quiet_alt_text(record: Any) -> bool:
    """nbconvert gives every output image without alt text a generic one and warns once per notebook:
    the notebooks' figures have none, so that warning is no news here."""
    return "Alternative text is missing" not in record.getMessage()


def _markdown(text: str) -> str:
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    return markdown2html_mistune(text)


def _e(text: Any) -> str:
    return html.escape(str(text))


def _href(page: Page, target: Page | str) -> str:
    path = target.path if isinstance(target, Page) else target
    return _e(posixpath.relpath(path, posixpath.dirname(page.path) or "."))


def _nav(page: Page, pages: list[Page]) -> str:
    groups = {k: h for k, h, _, _ in PAPERS}
    links = [f'<a class="home" href="{_href(page, "index.html")}">kgqa notebooks</a>']
    if page.group:
        links.append(f'<a href="{_href(page, "index.html")}#paper-{page.group}">{_e(groups[page.group])}</a>')
    if page.path != "index.html":
        links.append(f'<span class="here">{_e(page.title)}</span>')
    if page.kind == "notebook":
        nbs = [p for p in pages if p.kind == "notebook"]
        i = nbs.index(page)
        if i > 0:
            links.append(f'<a href="{_href(page, nbs[i - 1])}">← {_e(nbs[i - 1].info["stem"])}</a>')
        if i + 1 < len(nbs):
            links.append(f'<a href="{_href(page, nbs[i + 1])}">{_e(nbs[i + 1].info["stem"])} →</a>')
    links += [f'<a href="{_href(page, "figures.html")}">figures</a>',
              f'<a href="{_href(page, "parameters.html")}">parameters</a>']
    if any(p.path == "readme.html" for p in pages):
        links.append(f'<a href="{_href(page, "readme.html")}">README</a>')
    return '<nav class="kgqa-nav">' + "\n".join(links) + "</nav>"


def _document(page: Page, pages: list[Page], body: str) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{_e(page.title)}</title>\n<link rel=\"stylesheet\" href=\"{_href(page, 'site.css')}\">\n"
            f"</head>\n<body class=\"kgqa-page\">\n{_nav(page, pages)}\n<main>\n{body}\n</main>\n</body>\n</html>\n")


def _notebook_context(page: Page, pages: list[Page]) -> str:
    stem = page.info["stem"]
    reports = [p for p in pages if p.kind == "report" and p.source.rsplit("/", 1)[-1] in page.info["reads"]]
    figures = [p for p in pages if p.kind == "figure" and p.title.startswith(stem + "__")]
    parts = [f"<div><b>{_e(page.source)}</b>, with its committed outputs (not executed for this page). "
             f"Run it: <code>jupyter lab {_e(page.source)}</code>, or "
             f"<code>kgqa reproduce --only {_e(stem)}</code>"
             + (f' (its <a href="{_href(page, "parameters.html")}#{_e(stem)}">parameters</a>)'
                if page.info["parameters"] is not None else "") + ".</div>"]
    if reports:
        parts.append("<div>Benchmark reports it reads: " + ", ".join(
            f'<a href="{_href(page, r)}">{_e(r.source.rsplit("/", 1)[-1])}</a>' for r in reports) + "</div>")
    if figures:
        parts.append(f'<div>Figures it writes: <a href="{_href(page, "figures.html")}#{_e(stem)}">'
                     f'{len(figures)} in figures/</a></div>')
    return '<div class="kgqa-context">' + "\n".join(parts) + "</div>"


def _head(lines: list[str]) -> list[str]:
    """The table's own lines of ``kgqa bench list``, without its cells or options (indented deeper)."""
    return [ln for ln in lines if not ln.startswith("    ") and not ln.startswith("  options")]


def _report_context(page: Page) -> str:
    table = page.info["table"]
    if table is None:
        text = (f"<div><b>{_e(page.source)}</b>: not a table of the benchmark registry (<code>kgqa bench list</code> "
                "does not list it), so it is not regenerated from saved records.</div>")
    else:
        lines = page.info["provenance"]
        head, rest = _head(lines), [ln for ln in lines if ln not in _head(lines)]
        how = (f"<code>kgqa bench report {_e(table.name)}</code> regenerates it from "
               + (f"<code>results/bench/{_e(table.data)}</code>" if hasattr(table, "data") else
                  f"the saved records in <code>results/bench/runs/{_e(table.records or table.name)}/</code>"))
        text = (f"<div><b>{_e(page.source)}</b> — table <code>{_e(table.name)}</code> of <code>kgqa bench list</code>; "
                f"{how}.</div>\n<div class=\"provenance\">{_e(chr(10).join(head))}</div>")
        if rest:
            text += (f"<details><summary>{len(rest)} lines more: " + ("cells and their completeness" if
                     hasattr(table, "cells") else "the measurement's options") + "</summary>"
                     f"<div class=\"provenance\">{_e(chr(10).join(rest))}</div></details>")
    nbs = page.info.get("notebooks", [])
    if nbs:
        text += "<div>Notebooks that read it: " + ", ".join(
            f'<a href="{_href(page, n)}">{_e(n.info["stem"])}</a>' for n in nbs) + "</div>"
    return '<div class="kgqa-context">' + text + "</div>"


def _report_item(page: Page, r: Page) -> str:
    table = r.info["table"]
    lines = _head(r.info["provenance"]) if table is not None else \
        [f"{r.source}: not a table of the benchmark registry (kgqa bench list)"]
    return (f'<li><a href="{_href(page, r)}">{_e(r.title)}</a> <span class="muted">{_e(r.source.rsplit("/", 1)[-1])}'
            f'</span><div class="provenance">{_e(chr(10).join(lines))}</div></li>')


def _notebook_item(page: Page, n: Page) -> str:
    return f'<li><a href="{_href(page, n)}">{_e(n.title)}</a> <span class="muted">{_e(n.info["stem"])}</span></li>'


AUDIENCES = (
    ("researcher", "Researchers",
     "Each paper's walkthrough shows one question through every stage; its results notebooks, listed here, "
     "read the saved benchmark records, and the reports by paper below are headed by the table they belong to, "
     "the paper's table they reproduce, and who made their records. To step through a notebook yourself: <code>make setup</code>, "
     "then <code>.venv/bin/jupyter lab notebooks/</code>.",
     lambda p: p.kind == "notebook" and not p.info["stem"].startswith("00") and not p.info["stem"].endswith("walkthrough")),
    ("teacher", "Workshop teachers",
     "The quickstart and the walkthroughs run offline, without an API key: every LLM answer is replayed from the "
     "committed transcripts. <code>make workshop</code> writes copies without outputs to <code>workshop/</code> and "
     "<code>kgqa doctor</code> checks a laptop's setup (model, encoder, transcripts) — see the README page.",
     lambda p: p.kind == "notebook" and (p.info["stem"].startswith("00") or p.info["stem"].endswith("walkthrough"))),
    ("papermill", "Papermill users",
     "Every notebook has one cell tagged <code>parameters</code> with literal values: the parameters page lists "
     "them. <code>kgqa reproduce --only NAME --set KEY=VALUE</code> runs notebooks with papermill (copies with "
     "parameters go to <code>results/reproduce/</code>), <code>--grid KEY=V1,V2</code> sweeps a parameter, and "
     "plain <code>papermill notebooks/NAME.ipynb out.ipynb -p KEY VALUE</code> works from any folder.",
     lambda p: p.path == "parameters.html"),
)


def _index(page: Page, pages: list[Page]) -> str:
    nbs = [p for p in pages if p.kind == "notebook"]
    reports = [p for p in pages if p.kind == "report"]
    start = [n for n in nbs if n.info["stem"].startswith("00")]
    body = ["<h1>kgqa notebooks</h1>",
            "<p>LLM + knowledge-graph question answering, three papers step by step — <b>PG&amp;AKV</b>, "
            "<b>FuSIC-KBQA</b> and <b>Keqing</b> — with their baselines and benchmark tables. These pages show the "
            f"committed notebooks with their committed outputs ({len(nbs)} notebooks; nothing was executed to make "
            f"them) and the benchmark reports of <code>results/bench/</code> ({len(reports)} reports), each with the "
            "table it belongs to and where its numbers come from. Built by <code>kgqa site</code>; everything here "
            "loads offline.</p>"]
    if start:
        body.append("<p>Start here: " + ", ".join(f'<a href="{_href(page, n)}">{_e(n.title)}</a>' for n in start)
                    + ".</p>")
    body.append('<h2 id="by-reader">By reader</h2><div class="cards">')
    for key, heading, text, picks in AUDIENCES:
        chosen = [p for p in pages if picks(p)]
        body.append(f'<div class="card" id="reader-{key}"><h3>{_e(heading)}</h3><p>{text}</p><ul class="list">'
                    + "".join(f'<li><a href="{_href(page, p)}">{_e(p.title)}</a></li>' for p in chosen)
                    + "</ul></div>")
    body.append("</div>")
    body.append('<h2 id="by-paper">By paper</h2>')
    for key, heading, what, _ in PAPERS:
        g_nbs = [n for n in nbs if n.group == key]
        g_reports = [r for r in reports if r.group == key]
        if not g_nbs and not g_reports:
            continue
        body.append(f'<h3 id="paper-{key}">{_e(heading)}</h3><p class="muted">{_e(what)}</p>')
        if g_nbs:
            body.append("<h4>Notebooks</h4><ul class=\"list\">" + "".join(_notebook_item(page, n) for n in g_nbs)
                        + "</ul>")
        if g_reports:
            body.append("<h4>Benchmark reports</h4><ul class=\"list\">"
                        + "".join(_report_item(page, r) for r in g_reports) + "</ul>")
    body.append(f'<h2 id="more">More</h2><ul class="list"><li><a href="{_href(page, "figures.html")}">All figures</a> '
                f'({sum(p.kind == "figure" for p in pages)} in <code>figures/</code>, by notebook)</li>'
                f'<li><a href="{_href(page, "parameters.html")}">Notebook parameters</a></li>'
                + (f'<li><a href="{_href(page, "readme.html")}">README</a>: setup, the <code>kgqa</code> command, '
                   "layout</li>" if any(p.path == "readme.html" for p in pages) else "") + "</ul>")
    return "\n".join(body)


def _figures(page: Page, pages: list[Page]) -> str:
    nbs = {p.info["stem"]: p for p in pages if p.kind == "notebook"}
    figs = [p for p in pages if p.kind == "figure"]
    body = ["<h1>Figures</h1>", "<p>The PNG files the notebooks write to <code>figures/</code> (the same pictures "
            "are embedded in each notebook page's outputs), grouped by notebook.</p>"]
    by_nb: dict[str, list[Page]] = {}
    for f in figs:
        by_nb.setdefault(f.title.split("__", 1)[0], []).append(f)
    for stem, fs in by_nb.items():
        nb = nbs.get(stem)
        head = f'<a href="{_href(page, nb)}">{_e(nb.title)}</a>' if nb else _e(stem)
        body.append(f'<h2 id="{_e(stem)}">{head}</h2>')
        body += [f'<figure class="figure"><img src="{_href(page, f)}" alt="{_e(f.title)}">'
                 f"<figcaption><code>{_e(f.path)}</code></figcaption></figure>" for f in fs]
    return "\n".join(body)


def _parameters(page: Page, pages: list[Page]) -> str:
    body = ["<h1>Notebook parameters</h1>",
            "<p>Each notebook's cell tagged <code>parameters</code>, as committed. Override any of them with "
            "<code>kgqa reproduce --only NAME --set KEY=VALUE</code> (or <code>--grid KEY=V1,V2</code>; outputs go to "
            "<code>results/reproduce/&lt;params&gt;/</code>, the committed notebooks are not touched), or with "
            "<code>papermill notebooks/NAME.ipynb out.ipynb -p KEY VALUE</code>.</p>"]
    for n in (p for p in pages if p.kind == "notebook"):
        src = n.info["parameters"]
        body.append(f'<h2 id="{_e(n.info["stem"])}"><a href="{_href(page, n)}">{_e(n.title)}</a></h2>')
        body.append(f"<pre><code>{_e(src)}</code></pre>" if src is not None
                    else '<p class="muted">no cell tagged parameters</p>')
    return "\n".join(body)


# ---------------------------------------------------------------- the build
def _prepare(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out} is a file: give a folder for the site (default build/site/)")
    if out.is_dir() and any(out.iterdir()):
        if not (out / MARKER).is_file():
            raise UsageError(f"{out} is not empty and was not written by `kgqa site`: give a new or empty folder "
                             "(--out DIR)")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text("written by `kgqa site`; the next build empties this folder\n", encoding="utf-8")


def build(out: str | Path | None = None) -> Site:
    """Write the site to ``out`` (default :func:`default_out`) and return what it holds."""
    import nbformat

    out = Path(out).expanduser().resolve() if out is not None else default_out()
    _prepare(out)
    pages = collect()
    links = _Links(pages, out)

    def write(page: Page, text: str) -> None:
        dest = out / page.path
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text, encoding="utf-8")

    (out / "site.css").write_text(CSS.lstrip(), encoding="utf-8")
    exporter = _exporter()
    for page in pages:
        if page.kind in ("raw", "figure"):
            (out / page.path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(page.file, out / page.path)
        elif page.kind == "notebook":
            nb = nbformat.read(page.file, as_version=4)
            body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": page.title}})
            body = links.rewrite(body, page.source, page.path)  # the notebook's own links; then the site's
            body = body.replace("<!--kgqa-site-head-->", f'<link rel="stylesheet" href="{_href(page, "site.css")}">', 1)
            write(page, body.replace("<!--kgqa-site-nav-->", _nav(page, pages) + _notebook_context(page, pages), 1))
        elif page.kind == "report":
            text = page.file.read_text(encoding="utf-8")
            body = links.rewrite(_markdown(text), page.source, page.path)
            write(page, _document(page, pages, _report_context(page) + "\n" + body))
        elif page.path == "readme.html":
            text = page.file.read_text(encoding="utf-8")
            write(page, _document(page, pages, links.rewrite(_markdown(text), "README.md", page.path)))
    for page, render in (("index.html", _index), ("figures.html", _figures), ("parameters.html", _parameters)):
        p = next(x for x in pages if x.path == page)
        write(p, _document(p, pages, render(p, pages)))
    return Site(out, pages, links.unlinked)
