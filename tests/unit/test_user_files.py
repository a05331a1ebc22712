"""Nothing of the user's touched: a KG ``store_dir`` that is not ours is refused (never deleted),
edited workshop copies are kept, the embedder's offline switch does not leak into the process, and
the model folder follows ``XDG_CACHE_HOME``."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from kgqa_lib.kg import graph as kg
from kgqa_lib.paths import data_dir, model_dir, user_cache_dir

TINY = data_dir() / "tiny" / "kb.txt"


# ---- item 10: store_dir --------------------------------------------------------------------------
@pytest.mark.parametrize("loader", ["metaqa", "rdf"])
def test_a_store_dir_holding_user_files_is_refused_and_kept(tmp_path, loader):
    store = tmp_path / "my-folder"
    store.mkdir()
    (store / "thesis.tex").write_text("three years of work")
    (store / "figures").mkdir()
    (store / "figures" / "fig1.png").write_bytes(b"\x89PNG")
    with pytest.raises(FileExistsError) as ei:
        if loader == "metaqa":
            kg.load_metaqa_kb(TINY, store_dir=store)
        else:
            kg.load_rdf(data_dir() / "miniworld" / "ontology.nt", store_dir=store)
    msg = str(ei.value)
    assert "\n" not in msg and str(store) in msg and "not a kgqa KG store" in msg and "empty or new folder" in msg
    assert (store / "thesis.tex").read_text() == "three years of work"  # survived
    assert (store / "figures" / "fig1.png").exists()


def test_a_store_dir_that_is_a_file_is_refused(tmp_path):
    f = tmp_path / "notes.txt"
    f.write_text("mine")
    with pytest.raises(FileExistsError):
        kg.load_metaqa_kb(TINY, store_dir=f)
    assert f.read_text() == "mine"


def test_new_empty_and_our_own_store_dirs_are_built(tmp_path):
    new = kg.load_metaqa_kb(TINY, store_dir=tmp_path / "new" / "store")  # does not exist yet
    (tmp_path / "empty").mkdir()
    empty = kg.load_metaqa_kb(TINY, store_dir=tmp_path / "empty")
    assert len(new) == len(empty) > 0
    assert (tmp_path / "empty" / ".kgqa-source").exists()
    # ours, from an older source (stale .kgqa-source): rebuilt as before
    old = tmp_path / "stale"
    old.mkdir()
    (old / ".kgqa-source").write_text("0" * 16)
    (old / "000001.sst").write_text("leftover")
    assert len(kg.load_metaqa_kb(TINY, store_dir=old)) == len(new)
    assert not (old / "000001.sst").exists()
    # ours, interrupted before the first build finished (only the claim): rebuilt too
    claimed = tmp_path / "interrupted"
    claimed.mkdir()
    (claimed / ".kgqa-store").write_text("")
    (claimed / "LOCK").write_text("")
    assert len(kg.load_metaqa_kb(TINY, store_dir=claimed)) == len(new)


# ---- item 14: workshop copies --------------------------------------------------------------------
def test_workshop_keeps_edited_copies_unless_forced(tmp_path):
    from kgqa_lib.doctor import make_workshop

    ws = tmp_path / "ws"
    first = make_workshop(ws)
    assert first.written and not first.kept
    edited, untouched = first.written[0], first.written[1]
    nb = json.loads(edited.read_text())
    nb["cells"].append({"cell_type": "markdown", "id": "mine", "metadata": {}, "source": ["my notes"]})
    edited.write_text(json.dumps(nb))
    mine = edited.read_bytes()

    again = make_workshop(ws)
    assert again.kept == [edited] and edited.read_bytes() == mine  # the participant's work is kept
    assert untouched in again.written and len(again.copies) == len(first.written)

    # a copy generated from an older version of the notebook (not edited) is updated
    stale = b'{"cells": [], "generated": "by an older kgqa workshop"}\n'
    untouched.write_bytes(stale)
    manifest = ws / ".kgqa-workshop.json"
    m = json.loads(manifest.read_text())
    m[untouched.name] = hashlib.sha256(stale).hexdigest()
    manifest.write_text(json.dumps(m))
    assert untouched in make_workshop(ws).written and untouched.read_bytes() != stale

    forced = make_workshop(ws, force=True)
    assert not forced.kept and edited.read_bytes() != mine


def test_workshop_cli_says_which_copies_were_kept(tmp_path):
    import subprocess
    import sys

    ws = tmp_path / "ws"
    cmd = [sys.executable, "-m", "kgqa_lib.cli", "workshop", "--out", str(ws)]
    assert subprocess.run(cmd, capture_output=True, text=True, timeout=120).returncode == 0
    target = sorted(ws.glob("*.ipynb"))[0]
    target.write_text(target.read_text().replace('"cells": [', '"cells": [\n', 1) + " ")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and f"kept 1 edited copies (not overwritten): {target.name}" in r.stdout
    assert "--force" in r.stdout


# ---- item 14: the embedder's offline switch ------------------------------------------------------
_HF = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


def test_embedder_leaves_the_process_environment_alone(tmp_path, monkeypatch):
    from kgqa_lib.embed.embedder import Embedder

    for name in _HF:
        monkeypatch.delenv(name, raising=False)
    from huggingface_hub import constants

    from kgqa_lib.embed.embedder import sentence_transformer_class

    sentence_transformer_class()  # torch sets a few KMP_*/TORCH* variables of its own when imported
    before, const = dict(os.environ), constants.HF_HUB_OFFLINE
    emb = Embedder(cache_path=tmp_path / "e.sqlite")
    assert emb.encode(["Budapest lies on the Danube"]).shape == (1, 384)  # the model was loaded
    assert dict(os.environ) == before
    assert constants.HF_HUB_OFFLINE == const  # not switched off for the rest of the process either


def test_hf_offline_is_scoped_and_restores_user_values(monkeypatch):
    from huggingface_hub import constants

    from kgqa_lib.embed.embedder import hf_offline

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    const = constants.HF_HUB_OFFLINE
    with hf_offline():
        assert os.environ["HF_HUB_OFFLINE"] == os.environ["TRANSFORMERS_OFFLINE"] == "1"
        assert constants.HF_HUB_OFFLINE is True
    assert os.environ["HF_HUB_OFFLINE"] == "0" and "TRANSFORMERS_OFFLINE" not in os.environ
    assert constants.HF_HUB_OFFLINE == const


# ---- item 14: cache folders follow XDG_CACHE_HOME --------------------------------------------------
def test_model_dir_follows_xdg_cache_home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("KGQA_MODEL_DIR", raising=False)
    monkeypatch.delenv("KGQA_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert model_dir() == tmp_path / "xdg" / "kgqa" / "models"
    assert user_cache_dir() == tmp_path / "xdg" / "kgqa"  # the same rule for every cache folder
    monkeypatch.setenv("KGQA_CACHE_DIR", str(tmp_path / "throwaway"))  # does not move the models
    assert model_dir() == tmp_path / "xdg" / "kgqa" / "models"
    monkeypatch.setenv("KGQA_MODEL_DIR", str(tmp_path / "models"))  # the explicit variable wins
    assert model_dir() == tmp_path / "models"
    monkeypatch.delenv("KGQA_MODEL_DIR")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert model_dir() == home / ".cache" / "kgqa" / "models"


def test_models_assembled_at_the_old_default_are_used_where_they_are(tmp_path, monkeypatch):
    home = tmp_path / "home"
    legacy = home / ".cache" / "kgqa" / "models"
    legacy.mkdir(parents=True)
    (legacy / "model.gguf").write_bytes(b"GGUF")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("KGQA_MODEL_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert model_dir() == legacy  # not re-assembled (1 GB) in the new place, not moved
    assert (legacy / "model.gguf").read_bytes() == b"GGUF"
