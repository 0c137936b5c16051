"""Approximate k-NN (faiss HNSW) behind knn_search / knn_graph(method=...)."""

from __future__ import annotations

import logging
import sys

import numpy as np
import pytest

from jaxannot.graph import approx_knn, knn_graph, knn_search
from jaxannot.graph.knn import KNN_METHODS

N, D, K = 3000, 16, 10


def _mixture(n=N, d=D, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=3.0, size=(20, d))
    return (centres[rng.integers(0, 20, n)] + rng.normal(size=(n, d))).astype(
        np.float32
    )


@pytest.fixture(scope="module")
def x():
    return _mixture()


@pytest.fixture(scope="module")
def exact(x):
    idx, dist = knn_search(x, x, K, exclude_self=True, method="exact")
    return np.asarray(idx), np.asarray(dist)


def _recall(a, b):
    return np.mean([len(set(r) & set(s)) for r, s in zip(a, b, strict=True)]) / K


def _edges(g):
    senders, receivers = np.asarray(g.senders), np.asarray(g.receivers)
    return set(zip(senders.tolist(), receivers.tolist(), strict=True))


needs_faiss = pytest.mark.skipif(
    not approx_knn.approx_available(), reason="faiss not installed (jaxannot[scale])"
)


@needs_faiss
def test_recall_at_10_and_conventions(x, exact):
    idx, dist = knn_search(x, x, K, exclude_self=True, method="approx")
    idx, dist = np.asarray(idx), np.asarray(dist)
    assert idx.shape == dist.shape == (N, K)
    assert idx.dtype == np.int32 and dist.dtype == np.float32
    assert _recall(idx, exact[0]) >= 0.95
    # exclude_self: no row among its own neighbours, no repeats
    assert not (idx == np.arange(N)[:, None]).any()
    assert all(len(set(r)) == K for r in idx)
    # distances are the true ones, sorted
    true = np.linalg.norm(x[idx] - x[:, None, :], axis=2)
    np.testing.assert_allclose(dist, true, rtol=1e-5, atol=1e-5)
    assert (np.diff(dist, axis=1) >= 0).all()


@needs_faiss
def test_queries_against_database(x):
    rng = np.random.default_rng(1)
    q = x[:500] + rng.normal(scale=0.3, size=(500, D)).astype(np.float32)
    e_idx, e_dist = knn_search(q, x, K, method="exact")
    a_idx, a_dist = knn_search(q, x, K, method="approx")
    assert _recall(np.asarray(a_idx), np.asarray(e_idx)) >= 0.95
    same = np.isclose(np.asarray(a_dist), np.asarray(e_dist), rtol=1e-4, atol=1e-4)
    assert same[:, 0].mean() >= 0.95


@needs_faiss
def test_cosine_recall(x):
    e_idx, e_dist = knn_search(x, x, K, metric="cosine", exclude_self=True)
    a_idx, a_dist = knn_search(
        x, x, K, metric="cosine", exclude_self=True, method="approx"
    )
    assert _recall(np.asarray(a_idx), np.asarray(e_idx)) >= 0.95
    same = np.isclose(np.asarray(a_dist), np.asarray(e_dist), atol=1e-5)
    assert same[:, 0].mean() >= 0.95


@needs_faiss
def test_duplicates_never_return_self():
    base = _mixture(400, d=4, seed=2)
    x = np.concatenate([base, base, base])  # every row has two exact copies
    idx, dist = knn_search(x, x, 5, exclude_self=True, method="approx")
    idx = np.asarray(idx)
    assert not (idx == np.arange(x.shape[0])[:, None]).any()
    assert (np.asarray(dist)[:, :2] == 0).all()  # the two copies come first


@needs_faiss
def test_knn_graph_approx(x):
    g_exact = knn_graph(x, K, weight="binary", method="exact")
    g = knn_graph(x, K, weight="binary", method="approx")
    edges = _edges(g)
    assert len(edges) == g.senders.shape[0] <= 2 * N * K  # no duplicates
    assert edges == {(r, s) for s, r in edges}  # symmetric
    assert not any(s == r for s, r in edges)
    exact_edges = _edges(g_exact)
    assert len(edges & exact_edges) >= 0.95 * len(exact_edges)


def test_auto_below_threshold_is_exact(x):
    assert N < approx_knn.APPROX_MIN_POINTS
    for kw in ({"exclude_self": True}, {}):
        a = knn_search(x, x, K, method="auto", **kw)
        b = knn_search(x, x, K, method="exact", **kw)
        for u, v in zip(a, b, strict=True):
            np.testing.assert_array_equal(np.asarray(u), np.asarray(v))
    ga, gb = knn_graph(x, K, method="auto"), knn_graph(x, K, method="exact")
    for field in ("senders", "receivers", "weights"):
        np.testing.assert_array_equal(
            np.asarray(getattr(ga, field)), np.asarray(getattr(gb, field))
        )


@needs_faiss
def test_auto_at_threshold_uses_the_index(x, monkeypatch):
    calls = []
    original = approx_knn.approx_knn_search

    def spy(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(approx_knn, "APPROX_MIN_POINTS", N)
    monkeypatch.setattr(approx_knn, "approx_knn_search", spy)
    knn_search(x, x, K, exclude_self=True)
    assert calls
    knn_search(x[:10], x, K)  # a few queries stay exact
    assert len(calls) == 1


def test_unknown_method_lists_valid_ones(x):
    for fn in (
        lambda: knn_search(x, x, K, method="hnsw"),
        lambda: knn_graph(x, K, method="hnsw"),
    ):
        with pytest.raises(ValueError, match="hnsw") as err:
            fn()
        assert all(m in str(err.value) for m in KNN_METHODS)


def test_unsupported_metric_for_the_index(x):
    with pytest.raises(ValueError, match="euclidean, cosine"):
        approx_knn.approx_knn_search(x, x, K, metric="manhattan")


def test_missing_faiss(x, monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "faiss", None)  # import faiss -> ImportError
    with pytest.raises(ImportError, match=r'pip install "jaxannot\[scale\]"'):
        knn_search(x, x, K, method="approx")
    monkeypatch.setattr(approx_knn, "APPROX_MIN_POINTS", N)
    with caplog.at_level(logging.WARNING, logger=approx_knn.__name__):
        a = knn_search(x, x, K, exclude_self=True, method="auto")
    assert "falls back to the exact search" in caplog.text
    b = knn_search(x, x, K, exclude_self=True, method="exact")
    np.testing.assert_array_equal(np.asarray(a[0]), np.asarray(b[0]))


@needs_faiss
def test_ivf_recall_and_conventions(x, exact):
    # a small nlist for the tiny sample: 3000 rows, 16 cells, 4 scanned per query
    idx, dist = approx_knn.approx_knn_search(
        x, x, K, exclude_self=True, index="ivf", nlist=16, nprobe=4
    )
    assert idx.dtype == np.int32 and dist.dtype == np.float32
    assert _recall(idx, exact[0]) >= 0.99
    assert not (idx == np.arange(N)[:, None]).any()
    true = np.linalg.norm(x[idx] - x[:, None, :], axis=2)
    np.testing.assert_allclose(dist, true, rtol=1e-5, atol=1e-5)
    assert (np.diff(dist, axis=1) >= 0).all()


@needs_faiss
def test_auto_index_switches_to_ivf(monkeypatch, x, exact):
    assert approx_knn.ivf_cells(10_000) == 200  # round(2 sqrt(n))
    monkeypatch.setattr(approx_knn, "IVF_MIN_POINTS", N)
    cells = []  # the IVF index asks for its cells; one cell: an exact scan
    monkeypatch.setattr(approx_knn, "ivf_cells", lambda n: cells.append(n) or 1)
    idx, _ = approx_knn.approx_knn_search(x, x, K, exclude_self=True)
    assert cells == [N]
    assert _recall(idx, exact[0]) == 1.0
    monkeypatch.setattr(approx_knn, "IVF_MIN_POINTS", N + 1)
    approx_knn.approx_knn_search(x[:500], x[:500], K, exclude_self=True)
    assert cells == [N]  # below the threshold: HNSW


def test_unknown_index_is_refused(x):
    with pytest.raises(ValueError, match="hnsw, ivf"):
        approx_knn.approx_knn_search(x, x, K, index="flat")
