"""The static site (``kgqa site``) in a real headless browser: Debian's Chromium, driven over the
DevTools protocol (tests/site/headless.py). Every page of the site built from the committed tree
loads from file:// with no console error, no uncaught exception and no request outside the site;
every <img> has decoded (naturalWidth > 0); every link inside the site points at a file that exists
(and, with a #fragment, at an element of that page). Screenshots of the index and of a results page
are saved beside the site, and copied to $KGQA_SITE_SCREENSHOTS when it is set.

Skips, saying why, where no Chromium is installed (`make test` installs Debian's package when it can)."""

from __future__ import annotations

import os
import shutil
import struct
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from headless import Browser, find_browser  # noqa: E402

BROWSER = find_browser()
pytestmark = pytest.mark.skipif(
    BROWSER is None, reason="no headless browser: install Debian's chromium (`apt-get install chromium`, which "
                            "`make test` does when it runs as root) or set KGQA_CHROMIUM to a Chrome/Chromium binary")

IMAGES = "Array.from(document.images).map(i => ({src: i.src.slice(0, 80), width: i.naturalWidth, complete: i.complete}))"
LINKS = "Array.from(document.querySelectorAll('a[href]')).map(a => a.href)"
IDS = "Array.from(document.querySelectorAll('[id]')).map(e => e.id)"


@pytest.fixture(scope="module")
def browser():
    with Browser(BROWSER) as b:
        yield b


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])


def test_every_page_loads_offline_without_errors_with_its_images_and_links(real_site, browser):
    out = real_site.out
    pages = sorted(out.rglob("*.html"))
    assert len(pages) > 30
    problems, fragments, ids = [], [], {}
    for page in pages:
        name = page.relative_to(out).as_posix()
        tab = browser.open(page.as_uri())
        try:
            problems += [f"{name}: {e}" for e in tab.severe()]
            problems += [f"{name}: requested {u}" for u in tab.requests() if not u.startswith(("file:", "data:"))]
            problems += [f"{name}: image not loaded {i['src']}" for i in tab.evaluate(IMAGES)
                         if not i["complete"] or i["width"] <= 0]
            links = tab.evaluate(LINKS)
            ids[page.resolve()] = {unquote(i) for i in tab.evaluate(IDS)}
        finally:
            tab.close()
        for href in links:
            url = urlsplit(href)
            if url.scheme != "file":
                continue  # outside links (the README's) are navigation only: nothing loads them
            target = Path(unquote(url.path)).resolve()
            if not target.is_file():
                problems.append(f"{name}: link to a missing file {href}")
            elif url.fragment and target.suffix == ".html":
                fragments.append((name, target, unquote(url.fragment)))
    missing = problems + [f"{name}: no element #{fragment} in {target.relative_to(out.resolve())}"
                          for name, target, fragment in fragments if fragment not in ids.get(target, set())]
    assert not missing, "\n".join(missing[:40])


def test_screenshots_of_the_index_and_a_results_page(real_site, browser):
    out = real_site.out
    shots = out.parent / "screenshots"
    shots.mkdir(exist_ok=True)
    saved = []
    for page, name in (("index.html", "index.png"), ("reports/pgakv_test.html", "report_pgakv_test.png"),
                       ("notebooks/11_pgakv_main_results.html", "notebook_11_pgakv_main_results.png")):
        tab = browser.open((out / page).as_uri())
        try:
            assert tab.evaluate("document.querySelector('nav.kgqa-nav a.home') !== null"), page
            path = tab.screenshot(shots / name, full_page=page == "index.html")
        finally:
            tab.close()
        width, height = png_size(path)
        assert width >= 800 and height >= 600, (page, width, height)
        saved.append(path)
    where = os.environ.get("KGQA_SITE_SCREENSHOTS")
    if where:
        Path(where).mkdir(parents=True, exist_ok=True)
        for p in saved:
            shutil.copyfile(p, Path(where) / p.name)
