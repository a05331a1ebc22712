"""Live smoke: one question through the real embedded 1.5B model (no recordings involved), so
the suite stays honest that the default works, not only its transcripts."""

import pytest

from kgqa_lib.data.datasets import load_dataset
from kgqa_lib.llm.chat import LLMCache, make_llm
from kgqa_lib.methods import Context, get_method

pytestmark = pytest.mark.live


def test_io_question_through_the_local_model(tmp_path):
    llm = make_llm("local", "live", cache=LLMCache(tmp_path / "c.sqlite", transcripts=None))
    q = load_dataset("tiny:films")[0]  # who directed Inception
    result = get_method("io")(q, Context(llm))
    assert llm.usage.calls == 1 and llm.usage.cache_hits == 0
    assert llm.usage.completion_tokens > 0
    assert result.answers and "nolan" in result.answers[0].lower(), result.response
