"""SFSLS objective pieces against dense numpy references and the majorization bound."""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import laplacian as scipy_laplacian
from threadpoolctl import threadpool_limits

import jax
import jax.numpy as jnp

from jaxannot.graph import Graph
from jaxannot.methods.sfsls.sparse_projection import (
    SFSLSWeights,
    SparseProjection,
    TrainingImages,
    annotation_scores,
    feature_ranking,
    l2p_penalty,
    reweighting_diagonal,
    select_features,
    sfsls_objective,
    surrogate_objective,
)


@pytest.fixture(autouse=True, scope="module")
def _single_thread_blas():
    """OpenBLAS worker threads make LAPACK calls ~40x slower on the loaded 2-core CI
    machine; the d x d Cholesky factorizations run single-threaded here."""
    with threadpool_limits(1, user_api="blas"):
        yield


def _random_graph(rng, n, k=3):
    """Symmetric k-NN-like graph with random positive weights (scipy only)."""
    rows = np.repeat(np.arange(n), k)
    cols = (rows + rng.integers(1, n, size=rows.size)) % n
    s = sp.coo_matrix((rng.uniform(0.1, 1.0, rows.size), (rows, cols)), shape=(n, n))
    s = (s + s.T).tocoo()
    edges = (s.row.astype(np.int32), s.col.astype(np.int32), s.data.astype(np.float32))
    return s, Graph(*edges, n)


def test_reweighting_is_the_papers_d_at_half():
    g = jnp.array([[3.0, 4.0], [0.6, 0.8]])  # row norms 5 and 1
    d = reweighting_diagonal(g, 0.5, 0.0)
    np.testing.assert_allclose(d, [1 / (4 * 5**1.5), 0.25], rtol=1e-6)
    # zero rows are guarded by eps: finite weights
    assert np.all(np.isfinite(reweighting_diagonal(jnp.zeros((2, 3)), 0.5, 1e-8)))


@pytest.mark.parametrize("p", [0.1, 0.5, 1.0])
def test_tangent_majorizes_the_l2p_penalty(p, rng):
    eps = 1e-6
    g_t = jnp.asarray(rng.normal(size=(7, 3)))
    d = reweighting_diagonal(g_t, p, eps)
    # tangent: gradient of the penalty at g_t is 2 D g_t
    grad = jax.grad(lambda g: l2p_penalty(g, p, eps))(g_t)
    np.testing.assert_allclose(grad, 2 * d[:, None] * g_t, rtol=1e-4)
    base = l2p_penalty(g_t, p, eps) - jnp.sum(d[:, None] * g_t**2)
    for _ in range(20):
        g = jnp.asarray(rng.normal(size=(7, 3)) * rng.uniform(0, 3))
        bound = base + jnp.sum(d[:, None] * g**2)
        assert l2p_penalty(g, p, eps) <= bound * (1 + 1e-5) + 1e-6


def test_objective_matches_dense_formula(rng):
    n, d, c, r = 10, 4, 3, 2
    s, graph = _random_graph(rng, n)
    lap = scipy_laplacian(s.toarray())
    x = rng.normal(size=(n, d))
    labelled = np.arange(n) < 4
    y = np.where(labelled[:, None], rng.integers(0, 2, (n, c)), 0).astype(float)
    f = rng.normal(size=(n, c))
    g = rng.normal(size=(d, c))
    u = np.linalg.qr(rng.normal(size=(d, r)))[0]
    p_mat = rng.normal(size=(r, c))
    alpha, lam, mu, p = 0.7, 0.3, 1.3, 0.5
    # paper eq. (8) with Q = diag(inf on labelled, 1 else) handled by pinning F_l = Y_l
    fp = np.where(labelled[:, None], y, f)
    ref = (
        np.trace(fp.T @ lap @ fp)
        + np.sum((fp - y)[~labelled] ** 2)
        + alpha
        * (
            np.sum((x @ g - fp) ** 2)
            + lam * np.sum(np.linalg.norm(g, axis=1) ** p)
            + mu * np.sum((g - u @ p_mat) ** 2)
        )
    )
    params = SparseProjection(*(jnp.asarray(a, jnp.float32) for a in (f, g, u, p_mat)))
    images = TrainingImages(
        jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.float32), labelled, graph
    )
    weights = SFSLSWeights(alpha=alpha, lam=lam, mu=mu, p=p, eps=0.0)
    got = sfsls_objective(params, images, weights)
    np.testing.assert_allclose(got, ref, rtol=1e-5)
    # the surrogate touches the objective where D was computed (up to the constant)
    dvec = reweighting_diagonal(params.g, p, 0.0)
    sur = surrogate_objective(params, dvec, images, weights)
    const = alpha * lam * (1 - p / 2) * np.sum(np.linalg.norm(g, axis=1) ** p)
    np.testing.assert_allclose(sur + const, ref, rtol=1e-5)


def test_ranking_selection_and_scores():
    g = np.array([[0.0, 0.0], [3.0, 4.0], [1.0, 0.0], [0.0, 1.0], [0.0, 5.0]])
    # norms 0, 5, 1, 1, 5: ties broken by index
    np.testing.assert_array_equal(feature_ranking(g), [1, 4, 2, 3, 0])
    np.testing.assert_array_equal(select_features(g, 3), [1, 2, 4])
    with pytest.raises(ValueError, match="num_features"):
        select_features(g, 6)
    x = np.ones((2, 5))
    np.testing.assert_allclose(annotation_scores(x, g), x @ g)


def test_weights_are_validated_as_float32_scalars():
    got = SFSLSWeights(alpha=0.5, lam=2, mu=1.0, p=1.0).validated()
    assert all(v.dtype == jnp.float32 and v.shape == () for v in got)
    assert float(got.eps) == np.float32(1e-8)
    for bad, match in (
        (dict(p=0.0), "p must be"),
        (dict(p=1.5), "p must be"),
        (dict(alpha=0.0), "alpha must be"),
        (dict(lam=-1.0), "lam must be"),
        (dict(mu=-1.0), "mu must be"),
        (dict(eps=0.0), "eps must be"),
    ):
        with pytest.raises(ValueError, match=match):
            SFSLSWeights(
                **{**dict(alpha=1.0, lam=1.0, mu=1.0, p=0.5), **bad}
            ).validated()
