"""No committed file under results/, notebooks/ or data/ holds a path of the machine that wrote it
(a home folder, /root, /work, /tmp/…, C:\\Users\\…): they leak user names and never resolve on
another machine. Text files are read as they are, ``.gz`` run records decompressed. System install
locations (``/usr/bin/virtuoso-t``) are not machine paths and are allowed."""

from __future__ import annotations

import gzip
import re
import subprocess
from pathlib import Path

from kgqa_lib.paths import repo_root

FOLDERS = ("results", "notebooks", "data")
# a path starts a token: not part of a URL or an IRI (``http://x.org/home/…``, ``<…/tmp/…>``)
_START = r"(?<![\w.%~/:-])"
MACHINE_PATH = re.compile(
    _START + r"(?:/root(?=[/\s\"'`,;)\]]|$)|/home/\w|/Users/\w|/work/\w|/tmp/\w|/var/folders/|/private/var/)"
    r"|\b[A-Za-z]:\\\\?(?:Users|Documents and Settings)\\", re.M)


def _committed_files(root: Path) -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", "-z", *FOLDERS], cwd=root, capture_output=True, check=True)
        files = [root / p for p in out.stdout.decode().split("\0") if p]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: every file there
        files = [p for d in FOLDERS for p in (root / d).rglob("*") if p.is_file()]
    return sorted(p for p in files if p.is_file())


def _text(path: Path) -> str | None:
    raw = path.read_bytes()
    if path.suffix == ".gz":
        raw = gzip.decompress(raw)
    if b"\0" in raw[:8192]:  # binary (an image, a SQLite file): not scanned
        return None
    return raw.decode("utf-8", "replace")


def find_machine_paths(files: list[Path], root: Path) -> list[str]:
    hits = []
    for path in files:
        text = _text(path)
        if text is None:
            continue
        for m in MACHINE_PATH.finditer(text):
            line_no = text.count("\n", 0, m.start()) + 1
            line = text.splitlines()[line_no - 1]
            col = m.start() - (text.rfind("\n", 0, m.start()) + 1)
            hits.append(f"{path.relative_to(root)}:{line_no}: …{line[max(0, col - 40):col + 60].strip()}…")
    return hits


def test_the_scanner_finds_machine_paths_and_ignores_iris(tmp_path):
    bad = {"a.json": '{"cache_file": "/root/.cache/kgqa/x.sqlite"}', "b.md": "see /home/alice/kgqa/run.jsonl",
           "c.txt": r"C:\Users\bob\kgqa", "d.ipynb": '"text": ["wrote /tmp/pytest-of-root/x.csv\\n"]',
           "e.csv": "x,/work/main/results/a.csv"}
    ok = {"f.nt": "<http://kgqa.local/home/entity/x> <http://x.org/root> <http://x.org/tmp/a> .",
          "g.md": "Virtuoso: /usr/bin/virtuoso-t; a tmp/ folder; ~/.cache/kgqa; <user cache>/bench/x.sqlite"}
    for name, text in {**bad, **ok}.items():
        (tmp_path / name).write_text(text)
    with gzip.open(tmp_path / "h.jsonl.gz", "wt") as fh:
        fh.write('{"out": "/home/carol/r.jsonl"}\n')
    hits = find_machine_paths(sorted(tmp_path.iterdir()), tmp_path)
    assert sorted({h.split(":")[0] for h in hits}) == sorted([*bad, "h.jsonl.gz"])


def test_no_committed_file_holds_a_machine_path():
    root = repo_root()
    files = _committed_files(root)
    assert len(files) > 20  # the scan really saw the committed files
    hits = find_machine_paths(files, root)
    assert not hits, ("machine-specific paths in committed files (write repo-relative paths, or "
                      "'<user cache>/…'; see kgqa_lib.paths.shown_path):\n" + "\n".join(hits))


def test_shown_path_never_gives_a_machine_path(tmp_path, monkeypatch):
    """What writers (the embed benchmark's ``cache_file``) put into committed files."""
    from kgqa_lib.paths import shown_path

    monkeypatch.setenv("KGQA_CACHE_DIR", str(tmp_path / "cache"))
    assert shown_path(tmp_path / "cache" / "bench" / "e.sqlite") == "<user cache>/bench/e.sqlite"
    assert shown_path(repo_root() / "results" / "bench" / "embed.json") == "results/bench/embed.json"
    assert shown_path("/home/alice/elsewhere/x.sqlite") == "x.sqlite"
    for p in (tmp_path / "cache" / "x", repo_root() / "data", "/home/alice/x"):
        assert not MACHINE_PATH.search(shown_path(p))
