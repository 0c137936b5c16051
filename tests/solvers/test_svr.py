"""ε-insensitive SVR dual solver against scikit-learn and a generic QP (cvxpy)."""

import cvxpy as cp
import numpy as np
import pytest
from sklearn.svm import LinearSVR

import jax
import jax.numpy as jnp

from jaxannot.solvers import svr
from jaxannot.solvers.multiclass_svm import DualStop


def _problem(rng, n=50, f=4):
    x = rng.normal(size=(n, f))
    y = x @ rng.normal(size=f) + 0.3 * rng.normal(size=n)
    return x.astype(np.float32), y.astype(np.float32)


@pytest.mark.parametrize(("c1", "c2", "eps"), [(0.5, 1.0, 0.1), (1.0, 0.05, 0.3)])
def test_objective_matches_sklearn_and_qp(rng, c1, c2, eps):
    x, y = _problem(rng)
    state, info = svr.fit_svr(
        jax.random.key(0), x, y, c1, c2, eps, stop=DualStop(500, 1e-7)
    )
    ours = float(svr.primal_objective(state.weights, x, y, c1, c2, eps))
    ref = LinearSVR(
        C=c2 / c1,
        epsilon=eps,
        loss="epsilon_insensitive",
        fit_intercept=False,
        dual=True,
        tol=1e-10,
        max_iter=200_000,
    ).fit(x, y)
    theirs = float(
        svr.primal_objective(jnp.asarray(ref.coef_, jnp.float32), x, y, c1, c2, eps)
    )
    v = cp.Variable(x.shape[1])
    qp = cp.Problem(
        cp.Minimize(
            0.5 * c1 * cp.sum_squares(v)
            + c2 * cp.sum(cp.pos(cp.abs(y.astype(float) - x.astype(float) @ v) - eps))
        )
    )
    qp.solve()
    # float32 sums over 50 examples; the QP solver's own accuracy is ~1e-6 relative
    assert ours == pytest.approx(qp.value, rel=1e-4)
    assert ours <= theirs * (1 + 1e-4)
    np.testing.assert_allclose(state.weights, v.value, atol=2e-3)
    mu, mu_star = svr.multipliers(state)
    assert float(jnp.max(mu)) <= c2 + 1e-6 and float(jnp.max(mu_star)) <= c2 + 1e-6
    assert float(jnp.max(mu * mu_star)) == 0.0  # at most one multiplier active
    # eq. (12): V = (1/C1) Σ (mu − mu*) h
    np.testing.assert_allclose(state.weights, (mu - mu_star) @ x / c1, atol=1e-4)


def test_dual_never_increases(rng):
    x, y = _problem(rng, n=30)
    _, info = svr.fit_svr(
        jax.random.key(1), x, y, 1.0, 1.0, 0.1, stop=DualStop(25, 0.0)
    )
    dual = np.asarray(info.dual)
    assert np.all(np.diff(dual) <= 1e-5 * np.abs(dual).max())
    assert np.all(np.asarray(info.primal) + dual >= -1e-4)
