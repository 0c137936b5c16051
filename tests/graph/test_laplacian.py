"""Laplacian operators vs scipy.sparse.csgraph, the penalty vs a brute-force loop."""

import numpy as np
import pytest
import scipy.sparse
import scipy.sparse.csgraph

import jax
import jax.numpy as jnp
from jax.test_util import check_grads

from jaxannot.graph import (
    SYM_KL_EPS,
    adjacency_matvec,
    degree,
    from_scipy,
    induced_subgraph,
    knn_graph,
    laplacian_diagonal,
    laplacian_matvec,
    laplacian_penalty,
    normalized_laplacian_matvec,
    to_scipy,
)

# float32 sums of O(10) terms of O(1): 1e-5 relative error budget.
RTOL = 1e-5


@pytest.fixture
def graph(rng):
    x = rng.normal(size=(25, 4)).astype(np.float32)
    return knn_graph(x, 3, weight="heat")


def _dense(g):
    return to_scipy(g).toarray().astype(np.float64)


def test_operators_match_scipy(graph, rng):
    s = _dense(graph)
    f = rng.normal(size=(25, 3))
    lap = scipy.sparse.csgraph.laplacian(s)
    np.testing.assert_allclose(np.asarray(degree(graph)), s.sum(1), rtol=RTOL)
    np.testing.assert_allclose(
        np.asarray(adjacency_matvec(graph, f)), s @ f, rtol=1e-4, atol=1e-5
    )
    np.testing.assert_allclose(
        np.asarray(laplacian_matvec(graph, f)), lap @ f, rtol=1e-4, atol=1e-5
    )
    np.testing.assert_allclose(
        np.asarray(laplacian_matvec(graph, f[:, 0])),
        lap @ f[:, 0],
        rtol=1e-4,
        atol=1e-5,
    )


def test_normalized_laplacian_matches_scipy_with_isolated_node(rng):
    s = np.abs(rng.normal(size=(8, 8)))
    s = np.triu(s * (rng.random((8, 8)) < 0.5), 1)
    s = s + s.T
    s[5, :] = s[:, 5] = 0.0  # isolated node
    g = from_scipy(scipy.sparse.csr_matrix(s))
    f = rng.normal(size=(8, 2))
    ref = scipy.sparse.csgraph.laplacian(s, normed=True) @ f
    np.testing.assert_allclose(
        np.asarray(normalized_laplacian_matvec(g, f)), ref, rtol=1e-4, atol=1e-5
    )
    np.testing.assert_allclose(_dense(g), s, rtol=1e-6)


def _brute_penalty(s, q, distance):
    total = 0.0
    for i in range(len(q)):
        for j in range(len(q)):
            if distance == "sq_euclidean":
                d = np.sum((q[i] - q[j]) ** 2)
            else:
                lp, lq = (
                    np.log(np.maximum(q[i], SYM_KL_EPS)),
                    np.log(np.maximum(q[j], SYM_KL_EPS)),
                )
                d = np.sum(q[i] * (lp - lq)) + np.sum(q[j] * (lq - lp))
            total += s[i, j] * d
    return total


@pytest.mark.parametrize("distance", ["sq_euclidean", "sym_kl"])
def test_penalty_matches_double_loop(graph, rng, distance):
    q = rng.dirichlet(np.ones(5), size=25)
    q[0, 2] = 0.0  # a zero probability: guarded by SYM_KL_EPS, stays finite
    q[0] /= q[0].sum()
    got = float(laplacian_penalty(graph, q.astype(np.float32), distance))
    ref = _brute_penalty(
        _dense(graph), q.astype(np.float32).astype(np.float64), distance
    )
    assert np.isfinite(got)
    np.testing.assert_allclose(got, ref, rtol=1e-4)


def test_penalty_gradient_closed_form(graph, rng):
    # P = sum_ij S_ij |q_i - q_j|^2 (ordered pairs) = 2 R, dR/dq_i = 2 (L q)_i,
    # so dP/dq = 4 L q.
    q = jnp.asarray(rng.dirichlet(np.ones(4), size=25), jnp.float32)
    grad = jax.grad(laplacian_penalty, argnums=1)(graph, q)
    np.testing.assert_allclose(
        np.asarray(grad),
        4 * np.asarray(laplacian_matvec(graph, q)),
        rtol=1e-4,
        atol=1e-5,
    )
    s = _dense(graph)
    np.testing.assert_allclose(
        float(laplacian_penalty(graph, q)),
        2
        * np.trace(
            np.asarray(q, np.float64).T
            @ scipy.sparse.csgraph.laplacian(s)
            @ np.asarray(q, np.float64)
        ),
        rtol=1e-4,
    )


@pytest.mark.parametrize("distance", ["sq_euclidean", "sym_kl"])
def test_penalty_check_grads(rng, distance):
    x = rng.normal(size=(8, 2)).astype(np.float32)
    g = knn_graph(x, 2)
    q = jnp.asarray(rng.dirichlet(np.ones(3) * 5, size=8), jnp.float32)
    # float32 finite differences: eps=1e-3 and tol 2e-2 (check_grads' float32 default
    # scale) since sym_kl has 1/q curvature.
    check_grads(
        lambda v: laplacian_penalty(g, v, distance),
        (q,),
        order=2,
        modes=("rev",),
        eps=1e-3,
        atol=2e-2,
        rtol=2e-2,
    )


def test_operators_jit_once(graph, rng):
    traces = []

    @jax.jit
    def step(g, f):
        traces.append(1)
        return laplacian_matvec(g, f) + normalized_laplacian_matvec(g, f)

    f = jnp.asarray(rng.normal(size=(25, 2)), jnp.float32)
    for _ in range(3):
        f = step(graph, f) * 0.1
    assert len(traces) == 1


def test_penalty_and_from_scipy_errors(graph):
    with pytest.raises(ValueError, match="valid choices"):
        laplacian_penalty(graph, jnp.ones((25, 2)), "l1")
    with pytest.raises(ValueError, match="num_nodes"):
        laplacian_penalty(graph, jnp.ones((24, 2)))
    with pytest.raises(ValueError, match="symmetric"):
        from_scipy(np.array([[0.0, 1.0], [0.0, 0.0]]))
    # the diagonal is dropped (no self loops)
    g = from_scipy(np.array([[5.0, 1.0], [1.0, 0.0]]))
    assert np.asarray(g.senders).tolist() == [0, 1] and g.num_edges == 2
    np.testing.assert_allclose(np.asarray(degree(g)), [1.0, 1.0])
    with pytest.raises(ValueError, match="square"):
        from_scipy(np.zeros((2, 3)))


def test_pad_edges_adds_zero_weight_self_loops_that_change_nothing():
    import numpy as np

    from jaxannot.graph import knn_graph, laplacian_matvec, pad_edges

    x = np.random.default_rng(0).normal(size=(30, 3)).astype(np.float32)
    g = knn_graph(x, 4, weight="heat")
    padded = pad_edges(g, 2 * 30 * 4)
    assert padded.num_edges == 240 and padded.num_nodes == g.num_nodes
    extra = slice(g.num_edges, None)
    assert np.all(np.asarray(padded.weights)[extra] == 0)
    assert np.all(np.asarray(padded.senders)[extra] == 0)
    f = np.random.default_rng(1).normal(size=(30, 2)).astype(np.float32)
    np.testing.assert_allclose(laplacian_matvec(padded, f), laplacian_matvec(g, f))
    assert pad_edges(g, 5).num_edges == g.num_edges  # never truncates


def test_laplacian_diagonal_matches_scipy_with_self_loops(graph):
    s = _dense(graph)
    s[3, 3] = 0.7  # a self-loop: in the degree and in S alike
    g = from_scipy(scipy.sparse.csr_matrix(s))
    lap = np.diag(s.sum(1)) - s
    np.testing.assert_allclose(laplacian_diagonal(g), np.diag(lap), rtol=RTOL)


def test_induced_subgraph_is_the_dense_submatrix(graph):
    index = np.array([7, 2, 19, 0, 11, 4])
    sub = induced_subgraph(graph, jnp.asarray(index))
    assert sub.num_nodes == index.size
    assert sub.senders.shape == graph.senders.shape  # static shapes under jit
    np.testing.assert_allclose(
        _dense(sub), _dense(graph)[np.ix_(index, index)], rtol=RTOL
    )
    jitted = jax.jit(induced_subgraph)(graph, jnp.asarray(index))
    np.testing.assert_allclose(_dense(jitted), _dense(sub))
