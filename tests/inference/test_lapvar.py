"""Tests of LapVar1 / LapVar2 against brute-force references on tiny graphs."""

from typing import NamedTuple

import numpy as np
import pytest
import scipy.optimize

import jax
import jax.numpy as jnp

from jaxannot.inference import lapvar
from jaxannot.models import mixture_of_unigrams as mu


class _Graph(NamedTuple):
    """Minimal stand-in with the jaxannot.graph.Graph fields."""

    senders: np.ndarray
    receivers: np.ndarray
    weights: np.ndarray
    num_nodes: int


def _random_graph(n, p, seed):
    rng = np.random.default_rng(seed)
    dense = np.triu(rng.random((n, n)) < p, 1) * rng.uniform(0.2, 1.5, (n, n))
    dense = dense + dense.T
    s, r = np.nonzero(dense)
    return _Graph(s, r, dense[s, r].astype(np.float32), n), dense


def _q_dense(phi, a, dense, lam):
    phi = np.asarray(phi, np.float64)
    diff = ((phi[:, None, :] - phi[None, :, :]) ** 2).sum(-1)
    ent = (phi * a).sum() - (phi * np.log(np.maximum(phi, 1e-300))).sum()
    return ent - lam * 0.5 * (dense * diff).sum()


def test_colour_classes_are_independent_sets_covering_each_node_once():
    g, dense = _random_graph(30, 0.2, 0)
    table = lapvar.neighbour_table(g)
    classes = np.asarray(table.classes)
    members = classes[classes < 30]
    np.testing.assert_array_equal(np.sort(members), np.arange(30))
    for row in classes:
        row = row[row < 30]
        assert dense[np.ix_(row, row)].sum() == 0
    seq = lapvar.neighbour_table(g, schedule="sequential")
    assert seq.classes.shape == (30, 1)
    with pytest.raises(ValueError, match="schedule"):
        lapvar.neighbour_table(g, schedule="bogus")


def test_penalty_matches_dense_formula():
    g, dense = _random_graph(15, 0.3, 1)
    phi = np.random.default_rng(2).dirichlet(np.ones(4), 15).astype(np.float32)
    table = lapvar.neighbour_table(g)
    diff = ((phi[:, None] - phi[None]) ** 2).sum(-1)
    ref = 0.5 * (dense * diff).sum()
    np.testing.assert_allclose(
        float(lapvar.laplacian_penalty(jnp.asarray(phi), table)), ref, rtol=1e-5
    )


def test_newton_update_reaches_the_local_maximum():
    rng = np.random.default_rng(3)
    a = rng.normal(0, 2, 5).astype(np.float32)
    m = rng.dirichlet(np.ones(5)).astype(np.float32) * 2.0
    d, lam = 2.0, 1.5
    start = jnp.full(5, 0.2)
    phi = lapvar.newton_update(
        start, jnp.asarray(a), jnp.asarray(m), d, lam, num_steps=30
    )

    def neg(logits):
        p = np.exp(logits - logits.max())
        p /= p.sum()
        return -(p @ a - (p * np.log(p)).sum() - lam * (d * p @ p - 2 * p @ m))

    res = scipy.optimize.minimize(neg, np.zeros(5), method="BFGS", tol=1e-12)
    ref = np.exp(res.x - res.x.max())
    ref /= ref.sum()
    np.testing.assert_allclose(np.asarray(phi), ref, atol=2e-4)  # float32 Newton


def test_lambda_zero_sweep_is_plain_vi():
    g, _ = _random_graph(20, 0.3, 4)
    table = lapvar.neighbour_table(g)
    a = jax.random.normal(jax.random.key(0), (20, 3)) * 2
    phi0 = jnp.full((20, 3), 1 / 3)
    phi = lapvar.lapvar1_sweep(
        jax.random.key(1), phi0, a, table, 0.0, num_newton_steps=20
    )
    np.testing.assert_allclose(
        np.asarray(phi), np.asarray(jax.nn.softmax(a)), atol=1e-4
    )


def test_lapvar1_sweeps_never_decrease_q_and_reach_the_global_maximum():
    n, k, lam = 12, 3, 0.8
    g, dense = _random_graph(n, 0.35, 5)
    table = lapvar.neighbour_table(g)
    a = np.asarray(jax.random.normal(jax.random.key(2), (n, k)) * 2.0)
    phi = jax.nn.softmax(jnp.asarray(a))
    qs = [float(lapvar.regularized_objective(phi, a, table, lam))]
    keys = jax.random.split(jax.random.key(3), 25)
    for key in keys:
        phi = lapvar.lapvar1_sweep(key, phi, jnp.asarray(a), table, lam)
        qs.append(float(lapvar.regularized_objective(phi, a, table, lam)))
    assert np.all(np.diff(qs) >= -1e-5 * np.abs(qs[1:])), np.diff(qs)  # float32 sums

    def neg(flat):  # Q is strictly concave: one global maximum (scipy reference)
        logits = flat.reshape(n, k)
        p = np.exp(logits - logits.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        return -_q_dense(p, a, dense, lam)

    res = scipy.optimize.minimize(
        neg,
        a.ravel().astype(np.float64),
        method="L-BFGS-B",
        options=dict(maxiter=5000, ftol=1e-14, gtol=1e-10),
    )
    np.testing.assert_allclose(qs[-1], -res.fun, rtol=1e-5)
    np.testing.assert_allclose(_q_dense(phi, a, dense, lam), qs[-1], rtol=1e-5)


def test_lapvar2_never_worse_than_plain_vi_and_smooths():
    n, k, lam = 20, 3, 2.0
    g, _ = _random_graph(n, 0.3, 6)
    table = lapvar.neighbour_table(g)
    a = jax.random.normal(jax.random.key(4), (n, k))
    phi, q = lapvar.lapvar2_estep(a, table, lam, 0.5, num_smoothing=15)
    vi = jax.nn.softmax(a)
    q_vi = lapvar.regularized_objective(vi, a, table, lam)
    assert float(q) >= float(q_vi)
    assert float(lapvar.laplacian_penalty(phi, table)) < float(
        lapvar.laplacian_penalty(vi, table)
    )
    np.testing.assert_allclose(
        float(lapvar.regularized_objective(phi, a, table, lam)), float(q), rtol=1e-6
    )


def _mixture_problem(seed=0, n=40):
    rng = np.random.default_rng(seed)
    z = rng.integers(2, size=n)
    beta = rng.dirichlet(np.full(8, 0.3), size=2)
    counts = np.stack([rng.multinomial(6, beta[k]) for k in z]).astype(np.float32)
    order = np.argsort(z)
    edges = [(order[i], order[i + 1]) for i in range(n - 1)]
    s = np.array([e[0] for e in edges] + [e[1] for e in edges])
    r = np.array([e[1] for e in edges] + [e[0] for e in edges])
    return (jnp.asarray(counts),), _Graph(s, r, np.ones(s.size, np.float32), n)


def _lt(params, data):
    return mu.linear_terms(params, data[0])


def _ms(phi, data):
    return mu.m_step(phi, data[0], data[1], data[2])


def _lp(params, data):
    return mu.log_prior(params, data[1], data[2])


def test_regularized_em_objective_never_decreases_and_compiles_once():
    counts, g = _mixture_problem()
    table = lapvar.neighbour_table(g)
    params = mu.init_params(jax.random.key(0), counts, 3)
    data = (counts, jnp.float32(1.0), jnp.float32(1.1))
    traces = []

    def counted_lt(params, data):
        traces.append(1)
        return _lt(params, data)

    for seed in range(2):
        state, obj, t = lapvar.fit_regularized_em(
            jax.random.key(seed),
            params,
            data,
            table,
            0.5,
            0.5,
            0.0,
            linear_terms=counted_lt,
            m_step=_ms,
            log_prior=_lp,
            algorithm="lapvar1",
            num_iterations=15,
        )
        obj = np.asarray(obj)[: int(t)]
        assert int(t) == 15
        assert np.all(np.diff(obj) >= -1e-5 * np.abs(obj[1:])), np.diff(obj)
    # traced once for the initial φ and once inside the loop body; never again
    assert len(traces) == 2


def test_regularized_em_lapvar2_stops_when_q_stops_improving():
    counts, g = _mixture_problem(1)
    table = lapvar.neighbour_table(g)
    params = mu.init_params(jax.random.key(1), counts, 3)
    data = (counts, jnp.float32(1.0), jnp.float32(1.1))
    state, obj, t = lapvar.fit_regularized_em(
        jax.random.key(0),
        params,
        data,
        table,
        0.5,
        0.5,
        1e-4,
        linear_terms=_lt,
        m_step=_ms,
        log_prior=_lp,
        algorithm="lapvar2",
        num_iterations=200,
    )
    t = int(t)
    trace = np.asarray(obj)
    obj = trace[:t]
    assert 2 <= t < 200
    assert np.all(np.isfinite(obj)) and np.all(np.isnan(trace[t:]))
    tol = 1e-4
    # every iteration before the last improved on the best so far by the tolerance,
    # and the loop stopped at the first that did not
    for i in range(1, t - 1):
        assert obj[i] > obj[:i].max() + tol * abs(obj[:i].max()), (i, obj)
    assert obj[t - 1] <= obj[: t - 1].max() + tol * abs(obj[: t - 1].max()), obj
    assert np.argmax(obj) == t - 2
    # the returned state is the best iterate (fitted at iteration t - 2), not the
    # last: the E-step run from its parameters reproduces the objective recorded at
    # the stopping iteration t - 1 (which started from exactly those parameters)
    a = _lt(state.params, data)
    _, q = lapvar.lapvar2_estep(a, table, 0.5, 0.5)
    np.testing.assert_allclose(
        float(q + _lp(state.params, data)), obj[t - 1], rtol=1e-5
    )
    # and it equals the final state of a run capped at the best iteration
    capped, capped_obj, capped_t = lapvar.fit_regularized_em(
        jax.random.key(0),
        params,
        data,
        table,
        0.5,
        0.5,
        tol,
        linear_terms=_lt,
        m_step=_ms,
        log_prior=_lp,
        algorithm="lapvar2",
        num_iterations=t - 1,
    )
    assert int(capped_t) == t - 1
    np.testing.assert_allclose(np.asarray(capped_obj), obj[: t - 1], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(capped.phi), np.asarray(state.phi), atol=1e-6)
    np.testing.assert_allclose(np.asarray(state.phi).sum(1), 1.0, atol=1e-5)
