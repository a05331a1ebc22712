import numpy as np
import pytest

from kgqa_lib.embed import Embedder, EmbeddingIndex, cosine_topk


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("emb") / "e.sqlite"


def test_encode_shapes_normalised_and_semantic(shared_cache):
    e = Embedder(cache_path=shared_cache)
    texts = ["Inception directed by Christopher Nolan", "Budapest lies on the Danube", "Parasite released in 2019"]
    idx = EmbeddingIndex(texts, e)
    assert idx.matrix.shape == (3, 384) and idx.matrix.dtype == np.float32
    assert np.allclose(np.linalg.norm(idx.matrix, axis=1), 1.0, atol=1e-5)
    top = idx.search(["Which river flows through Budapest?", "who made the film Inception"], k=1)
    assert top[0][0][1] == texts[1] and top[1][0][1] == texts[0]


def test_cache_shared_across_instances_returns_identical_bytes(shared_cache):
    a = Embedder(cache_path=shared_cache)
    v1 = a.encode(["a sentence to cache", "another one"])
    b = Embedder(cache_path=shared_cache)
    v2 = b.encode(["another one", "a sentence to cache", "another one"])
    assert b.stats.encoded == 0 and b.stats.cached == 3
    assert v2[1].tobytes() == v1[0].tobytes() and v2[0].tobytes() == v1[1].tobytes()


def test_cosine_topk_matches_brute_force_with_ties():
    rng = np.random.default_rng(0)
    m = rng.normal(size=(200, 16)).astype(np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    m[50] = m[10]  # an exact tie: the lower index must come first
    q = m[[10, 3]] + 0.01
    idx, sc = cosine_topk(q, m, 5)
    sims = q @ m.T
    for r in range(2):
        brute = sorted(range(200), key=lambda i: (-sims[r, i], i))[:5]
        assert list(idx[r]) == brute
        assert np.allclose(sc[r], sims[r, brute])
    assert list(idx[0][:2]) == [10, 50]
    one_i, one_s = cosine_topk(q[0], m, 300)
    assert one_i.shape == (200,)
