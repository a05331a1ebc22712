"""``make clean-venv`` removes $(VENV) only when it is a folder inside the clone: a VENV given on the
command line that points elsewhere (or at the clone itself) is refused and left alone."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from kgqa_lib.paths import repo_root

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def _clean(clone, venv):
    return subprocess.run(["make", "-s", "-f", str(repo_root() / "Makefile"), "clean-venv", f"VENV={venv}"], cwd=clone,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("venv", ["{outside}", "../outside", ".", "", ".venv/../..", "{clone}"])
def test_a_venv_outside_the_clone_is_refused(tmp_path, venv):
    clone, outside = tmp_path / "clone", tmp_path / "outside"
    (clone / ".venv").mkdir(parents=True)
    outside.mkdir()
    (outside / "precious").write_text("keep me")
    done = _clean(clone, venv.format(outside=outside, clone=clone))
    assert done.returncode != 0 and "refusing to remove" in done.stdout
    assert (outside / "precious").read_text() == "keep me" and (clone / ".venv").is_dir()


@pytest.mark.parametrize("venv", [".venv' {outside} '", "x' {outside} '", ".venv\" {outside} \"", ".venv; rm -rf {outside}"])
def test_a_quote_in_venv_cannot_name_another_folder(tmp_path, venv):
    """The path is one argument whatever it holds: a quote cannot close it and add a second one."""
    clone, outside = tmp_path / "clone", tmp_path / "outside"
    (clone / ".venv").mkdir(parents=True)
    outside.mkdir()
    (outside / "precious").write_text("keep me")
    _clean(clone, venv.format(outside=outside))
    assert (outside / "precious").read_text() == "keep me" and (clone / ".venv").is_dir()


@pytest.mark.parametrize("venv", [".venv", "{clone}/.venv", "envs/py311"])
def test_a_venv_inside_the_clone_is_removed(tmp_path, venv):
    clone = tmp_path / "clone"
    target = clone / (".venv" if ".venv" in venv else "envs/py311")
    (target / "bin").mkdir(parents=True)
    done = _clean(clone, venv.format(clone=clone))
    assert done.returncode == 0, done.stdout + done.stderr
    assert not target.exists() and clone.is_dir()
