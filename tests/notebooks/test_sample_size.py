"""``N_QUESTIONS`` means one thing in every notebook that declares it: the demo's questions per question set,
and its comment names what a set is there (a mini-world set, a hop, a transfer task)."""

from __future__ import annotations

import json
import re

import pytest

from kgqa_lib.notebooks import notebook_paths


def _parameters(path) -> str:
    nb = json.loads(path.read_text())
    return "".join(next(c for c in nb["cells"] if "parameters" in c["metadata"].get("tags", []))["source"])


@pytest.mark.parametrize("path", [p for p in notebook_paths() if re.search(r"^N_QUESTIONS\s*=", _parameters(p), re.M)],
                         ids=lambda p: p.name)
def test_n_questions_is_questions_per_set(path):
    line = re.search(r"^N_QUESTIONS\s*=.*$", _parameters(path), re.M).group(0)
    comment = line.split("#", 1)[1] if "#" in line else ""
    assert "questions per set" in comment and ("set is" in comment or "one set" in comment), \
        f"{line!r}: say 'questions per set' and what a set is in this notebook"
