"""``make test`` installs Debian packages (Virtuoso, Chromium) only as root with apt-get, and says so
on its own line before apt-get runs; elsewhere it installs nothing and says which test will skip.
The recipes run against stand-ins for ``id`` and ``apt-get`` (nothing is installed)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from kgqa_lib.paths import repo_root

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def _recipe(tmp_path, target, uid):
    """What ``make TARGET`` printed and ran, in order, with a stand-in apt-get logging its calls into the
    same file as make's output (PATH holds only the stand-ins: no virtuoso-t, no chromium)."""
    fake = tmp_path / "bin"
    fake.mkdir()
    log = tmp_path / "log"
    for name, body in (("id", f"echo {uid}"), ("apt-get", f'echo "apt-get $*" >> "{log}"'), ("invoke-rc.d", "exit 1")):
        (fake / name).write_text(f"#!/bin/sh\n{body}\n")
        (fake / name).chmod(0o755)
    with open(log, "ab") as out:
        subprocess.run([shutil.which("make"), "-s", "-f", str(repo_root() / "Makefile"), target], cwd=tmp_path,
                       env={"PATH": str(fake), "HOME": str(tmp_path)}, stdout=out, stderr=subprocess.PIPE,
                       timeout=60, check=True)
    return log.read_text().splitlines()


@pytest.mark.parametrize("target,package", [("virtuoso", "virtuoso-opensource"), ("chromium", "chromium")])
def test_as_root_it_says_what_it_installs_before_apt_get_runs(tmp_path, target, package):
    lines = _recipe(tmp_path, target, 0)
    first_apt = next(i for i, line in enumerate(lines) if line.startswith("apt-get install"))
    assert first_apt > 0 and package in lines[first_apt], lines
    said = lines[:first_apt]
    assert any(line.startswith("note: installing Debian's") and package in line and "apt-get install" in line
               for line in said), lines


@pytest.mark.parametrize("target", ["virtuoso", "chromium"])
def test_not_root_it_installs_nothing_and_says_the_test_will_skip(tmp_path, target):
    lines = _recipe(tmp_path, target, 1000)
    assert not any(line.startswith("apt-get") for line in lines), lines
    assert len(lines) == 1 and "needs apt-get as root" in lines[0] and "will skip" in lines[0], lines


def test_make_test_installs_them_through_these_targets_only():
    text = (repo_root() / "Makefile").read_text()
    test_rule = next(line for line in text.splitlines() if line.startswith("test:"))
    assert test_rule.split(":", 1)[1].split() == ["setup", "virtuoso", "chromium"]
    body = text.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert "apt-get" not in body
