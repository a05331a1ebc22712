"""The static site's builder (``kgqa site``, :mod:`kgqa_lib.site`) without a browser: on a small
repository of its own (two notebooks, reports, a figure, links of every kind), then on the
committed tree (every notebook and report has a page, every link resolves, nothing loads from the
network, each report carries its table's lines of ``kgqa bench list``)."""

from __future__ import annotations

import base64
import html
import json
import re
import struct
import zlib
from pathlib import Path

import pytest

from kgqa_lib import site as site_mod
from kgqa_lib.errors import UsageError
from kgqa_lib.paths import repo_root


def png(width: int = 4, height: int = 3) -> bytes:
    """A small valid RGB PNG."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    rows = b"".join(b"\0" + b"\x20\x60\xc0" * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def notebook(cells: list[dict]) -> str:
    return json.dumps({"cells": cells, "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                                   "language": "python"}},
                       "nbformat": 4, "nbformat_minor": 5})


def md(i: int, text: str) -> dict:
    return {"cell_type": "markdown", "id": f"m{i}", "metadata": {}, "source": text}


def code(i: int, text: str, outputs: list | None = None, tags: list | None = None) -> dict:
    return {"cell_type": "code", "id": f"c{i}", "execution_count": i, "metadata": {"tags": tags or []},
            "source": text, "outputs": outputs or []}


@pytest.fixture
def small_repo(tmp_path, monkeypatch):
    """A repository of its own: KGQA_HOME points at it, results/ and figures/ are its own."""
    root = tmp_path / "repo"
    for d in ("notebooks", "results/bench", "figures"):
        (root / d).mkdir(parents=True)
    image = base64.b64encode(png()).decode()
    (root / "notebooks" / "10_demo_walkthrough.ipynb").write_text(notebook([
        md(0, "# 10 · Demo walkthrough\n\nThe [report](../results/bench/demo.md), the [results](11_demo_results.ipynb#Section), "
              "[the code](../kgqa_lib/cli.py), an [outside page](https://example.org/x), [above](#10-·-Demo-walkthrough)\n\n"
              "![the figure](../figures/10_demo__fig.png)"),
        code(1, 'N_QUESTIONS = 3  # questions\nLLM = "local"', tags=["parameters"]),
        code(2, "plot()", [{"output_type": "display_data", "metadata": {},
                             "data": {"image/png": image, "text/plain": "<Figure>"}}]),
    ]), encoding="utf-8")
    (root / "notebooks" / "11_demo_results.ipynb").write_text(notebook([
        md(0, "# 11 · Demo results\n\nReads `results/bench/demo.md` and the records in `results/bench/runs/demo/`.\n\n"
              "## Section\n\ntext"),
        code(1, "print(1)", [{"output_type": "stream", "name": "stdout", "text": "1\n"}]),
    ]), encoding="utf-8")
    bench = root / "results" / "bench"
    (bench / "demo.md").write_text(
        "# Demo report\n\nSee `other.md`, [the other one](other.md#Other-heading), the raw numbers `demo.json` and "
        "![a figure](../../figures/10_demo__fig.png).\n\n| a | b |\n|---|---|\n| 1 | 2 |\n", encoding="utf-8")
    (bench / "other.md").write_text("# Other report\n\n## Other heading\n\nback to [demo](demo.md)\n", encoding="utf-8")
    (bench / "demo.json").write_text('{"x": 1}\n', encoding="utf-8")
    # two reports named as tables of the registry: a measurement (with its JSON) and a paper table
    (bench / "embed.md").write_text("# Embedding cache\n\nnumbers\n", encoding="utf-8")
    (bench / "embed.json").write_text(json.dumps({"measured_at": "2026-01-01", "machine": {"cpus": 2}}), encoding="utf-8")
    (bench / "pgakv_test.md").write_text("# PG&AKV test splits\n\nnumbers\n", encoding="utf-8")
    (root / "figures" / "10_demo__fig.png").write_bytes(png())
    (root / "README.md").write_text("# Demo\n\nStart with [the walkthrough](notebooks/10_demo_walkthrough.ipynb).\n",
                                    encoding="utf-8")
    monkeypatch.setenv("KGQA_HOME", str(root))
    monkeypatch.delenv("KGQA_RESULTS_DIR", raising=False)
    return root


def read(out: Path, page: str) -> str:
    return (out / page).read_text(encoding="utf-8")


def test_pages_links_and_provenance_on_a_small_repository(small_repo, tmp_path):
    s = site_mod.build(tmp_path / "site")
    out = s.out
    assert s.index == out / "index.html" and s.index.is_file()
    for page in ("notebooks/10_demo_walkthrough.html", "notebooks/11_demo_results.html", "reports/demo.html",
                 "reports/other.html", "reports/embed.html", "reports/pgakv_test.html", "reports/demo.json",
                 "figures/10_demo__fig.png", "figures.html", "parameters.html", "readme.html", "site.css"):
        assert (out / page).is_file(), page
    assert site_mod.broken_links(out) == []

    walk = read(out, "notebooks/10_demo_walkthrough.html")
    assert 'href="../reports/demo.html"' in walk
    assert 'href="11_demo_results.html#Section"' in walk
    assert 'src="../figures/10_demo__fig.png"' in walk
    assert 'href="https://example.org/x"' in walk  # an outside link stays a link (nothing loads it)
    assert "../kgqa_lib/cli.py" not in re.findall(r'href="([^"]*)"', walk)  # not in the site: text, no link
    assert ("notebooks/10_demo_walkthrough.html", "../kgqa_lib/cli.py") in s.unlinked
    assert "data:image/png;base64," in walk  # the output's figure, embedded
    assert 'href="../index.html"' in walk and 'href="11_demo_results.html">11_demo_results →' in walk  # the nav

    demo = read(out, "reports/demo.html")
    assert '<a href="other.html"><code>other.md</code></a>' in demo
    assert 'href="other.html#Other-heading"' in demo and '<a href="demo.json"><code>demo.json</code></a>' in demo
    assert 'src="../figures/10_demo__fig.png"' in demo and "<table>" in demo
    assert 'href="../notebooks/11_demo_results.html"' in demo  # the notebook that names this report
    assert "not a table of the benchmark registry" in demo

    from kgqa_lib import bench
    from kgqa_lib.bench import measure

    embed, pgakv = measure.MEASUREMENTS["embed"], bench.get_table("pgakv_test")
    embed_page, pgakv_page = read(out, "reports/embed.html"), read(out, "reports/pgakv_test.html")
    assert html.escape(f"embed: {embed.title}") in embed_page and "measured 2026-01-01" in embed_page
    assert "kgqa bench report embed" in embed_page
    assert html.escape(pgakv.title) in pgakv_page and html.escape(pgakv.source) in pgakv_page
    assert "0/%d cells complete" % len(pgakv.cells) in pgakv_page  # this repository has no saved records

    index = read(out, "index.html")
    for page in ("notebooks/10_demo_walkthrough.html", "notebooks/11_demo_results.html", "reports/demo.html",
                 "reports/embed.html", "figures.html", "parameters.html", "readme.html"):
        assert f'href="{page}"' in index, page
    for key in ("pgakv", "compare", "measure"):
        assert f'id="paper-{key}"' in index
    for reader in ("researcher", "teacher", "papermill"):
        assert f'id="reader-{reader}"' in index
    pgakv_section = index.split('id="paper-pgakv"')[1].split("<h3")[0]
    assert "10_demo_walkthrough.html" in pgakv_section and "reports/pgakv_test.html" in pgakv_section
    assert "reports/embed.html" in index.split('id="paper-measure"')[1]

    params = read(out, "parameters.html")
    assert "N_QUESTIONS = 3  # questions" in params and 'id="10_demo_walkthrough"' in params
    assert 'href="notebooks/10_demo_walkthrough.html"' in read(out, "readme.html")
    assert 'src="figures/10_demo__fig.png"' in read(out, "figures.html")


def test_no_page_loads_anything_from_the_network(small_repo, tmp_path):
    out = site_mod.build(tmp_path / "site").out
    for page in out.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        for tag in re.findall(r"<(?:script|link|img|iframe|source|video|audio)\b[^>]*>", text):
            assert not re.search(r'\b(?:src|href)="(?:[a-z]+:)?//', tag), (page.name, tag)
        assert not re.search(r"cdnjs|unpkg|mathjax|require\.js|@import", text, re.I), page.name


def test_the_link_checker_finds_a_missing_page_and_a_missing_anchor(small_repo, tmp_path):
    out = site_mod.build(tmp_path / "site").out
    (out / "reports" / "other.html").unlink()
    (out / "extra.html").write_text('<a href="index.html#nowhere">x</a> <img src="figures/none.png">', encoding="utf-8")
    found = site_mod.broken_links(out)
    assert "reports/demo.html: other.html#Other-heading" in found
    assert "extra.html: index.html#nowhere (no element with that id)" in found
    assert "extra.html: figures/none.png" in found


def test_the_output_folder_is_replaced_only_when_kgqa_site_wrote_it(small_repo, tmp_path):
    out = tmp_path / "site"
    site_mod.build(out)
    (out / "stale.html").write_text("old", encoding="utf-8")
    site_mod.build(out)  # an earlier build: emptied first
    assert not (out / "stale.html").exists() and (out / "index.html").is_file()
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep me", encoding="utf-8")
    with pytest.raises(UsageError, match="not written by `kgqa site`"):
        site_mod.build(other)
    assert (other / "notes.txt").read_text(encoding="utf-8") == "keep me"


def test_the_command_prints_the_index(small_repo, tmp_path, capsys):
    from kgqa_lib.cli import main

    assert main(["site", "--out", str(tmp_path / "s")]) == 0
    printed = capsys.readouterr()
    assert printed.out.strip().endswith(str(tmp_path / "s" / "index.html"))
    assert "2 notebooks, 4 reports, 1 figures" in printed.out
    assert "../kgqa_lib/cli.py" in printed.err  # the link left as text is named
    (tmp_path / "f").write_text("x", encoding="utf-8")
    assert main(["site", "--out", str(tmp_path / "f")]) == 2
    assert "is a file" in capsys.readouterr().err


# ---------------------------------------------------------------- the committed tree
def test_the_committed_tree_every_notebook_and_report_has_a_page(real_site):
    out = real_site.out
    root = repo_root()
    index = read(out, "index.html")
    notebooks = [p for p in sorted((root / "notebooks").glob("*.ipynb")) if not p.name.startswith(".")]
    reports = [p for p in sorted((root / "results" / "bench").glob("*.md")) if not p.name.startswith(".")]
    assert notebooks and reports
    for nb in notebooks:
        assert (out / "notebooks" / f"{nb.stem}.html").is_file() and f'href="notebooks/{nb.stem}.html"' in index
    for r in reports:
        assert (out / "reports" / f"{r.stem}.html").is_file() and f'href="reports/{r.stem}.html"' in index
    for f in (root / "figures").glob("*.png"):
        assert (out / "figures" / f.name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f.name
    assert site_mod.broken_links(out) == []


def test_the_committed_tree_each_report_carries_its_tables_provenance(real_site):
    from kgqa_lib.bench import measure

    out = real_site.out
    index = read(out, "index.html")
    for table in measure.lookup(None):
        if not (repo_root() / "results" / "bench" / table.output).exists():
            continue
        page = read(out, f"reports/{Path(table.output).stem}.html")
        first = html.escape(site_mod.provenance(table)[0])
        assert first in page and first in index, table.name
        assert f"kgqa bench report {table.name}" in page
    # the notebooks' figures are embedded in their pages
    assert "data:image/png;base64," in read(out, "notebooks/11_pgakv_main_results.html")
