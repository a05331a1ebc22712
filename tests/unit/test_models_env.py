import re
from pathlib import Path

import pytest

from kgqa_lib.llm import models
from kgqa_lib.paths import repo_root


def test_part_files_found_through_metadata_in_order():
    spec = models.get_spec("qwen2.5-coder-1.5b")
    parts = models.part_files(spec)
    assert len(parts) == 22
    assert [int(re.search(r"part(\d+)", p.name).group(1)) for p in parts] == list(range(1, 23))
    assert sum(p.stat().st_size for p in parts) == spec.size


def test_assembled_model_is_verified():
    path = models.model_path("qwen2.5-coder-1.5b", progress=False)
    marker = path.with_suffix(".sha256").read_text().strip()
    assert marker == models.get_spec("default").sha256
    assert path.stat().st_size == 1_117_320_768


def test_missing_parts_say_what_to_install():
    spec = models.LocalModelSpec("ghost", "ghost", "ghost.gguf", "no-such-model-part{i}", "1.0", 2, 10, "0" * 64)
    with pytest.raises(models.ModelNotAvailable) as ei:
        models.part_files(spec)
    assert "pip install no-such-model-part1==1.0 no-such-model-part2==1.0" in str(ei.value)


def test_environment_yml_installs_requirements_txt():
    env = (repo_root() / "environment.yml").read_text()
    req = (repo_root() / "requirements.txt").read_text().splitlines()
    assert "python=3.11" in env
    assert "-r requirements.txt" in env and "-c constraints.txt" in env
    pins = [l for l in req if l and not l.startswith("#")]
    assert pins[0] == "torch==2.13.0", "torch must come first in requirements.txt"
    torch_env = re.findall(r"torch==[\w.+]+", env)
    assert torch_env == ["torch==2.13.0"]
    assert all("==" in p for p in pins), "every requirement is pinned"


def test_ci_runs_the_readme_test_command():
    readme = (repo_root() / "README.md").read_text()
    ci = (repo_root() / ".ci" / "run").read_text()
    cmds = re.findall(r"^\s*(make \w+)\s*$", ci, flags=re.M)
    assert cmds == ["make test"]
    assert "make test" in readme and "make reproduce" in readme
