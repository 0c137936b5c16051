"""Dual coordinate descent linear SVM vs scikit-learn's LinearSVC (liblinear)."""

import numpy as np
import pytest
from sklearn.svm import LinearSVC

import jax

from jaxannot.solvers import linear_svm
from jaxannot.solvers.linear_svm import fit_linear_svm, primal_objective


def _problem(rng, n=120, d=4, k=3):
    x = rng.normal(size=(n, d)).astype(np.float32)
    y = (x @ rng.normal(size=(d, k)) + 0.7 * rng.normal(size=(n, k)) > 0).astype(
        np.float32
    )
    return x, y


@pytest.mark.parametrize("loss", ["squared_hinge", "hinge"])
def test_matches_sklearn_linearsvc_objective(rng, loss):
    x, y = _problem(rng)
    coef, intercept, info = fit_linear_svm(
        x, y, rng_key=jax.random.key(0), c=5.0, loss=loss, tol=1e-5, max_epochs=3000
    )
    ours = primal_objective(x, y, coef, intercept, c=5.0, loss=loss)
    for k in range(y.shape[1]):
        ref = LinearSVC(C=5.0, loss=loss, tol=1e-8, max_iter=200_000).fit(x, y[:, k])
        theirs = primal_objective(
            x, y[:, k], ref.coef_, ref.intercept_, c=5.0, loss=loss
        )[0]
        # both solve the same strictly convex (L2) / convex (L1) primal to tolerance;
        # float32 accumulation: relative 1e-4
        assert ours[k] == pytest.approx(theirs, rel=1e-4)
        if loss == "squared_hinge":  # strictly convex: the weights agree too
            np.testing.assert_allclose(coef[k], ref.coef_[0], atol=2e-3)
            assert float(intercept[k]) == pytest.approx(ref.intercept_[0], abs=2e-3)
    # strong duality at the optimum: primal == -dual
    np.testing.assert_allclose(ours, -np.array(info["dual_objective"]), rtol=1e-4)


def test_dual_objective_never_increases(rng):
    x, y = _problem(rng, n=60)
    xa = np.concatenate([x, np.ones((len(x), 1), np.float32)], 1)
    ys = np.where(y > 0, 1.0, -1.0).astype(np.float32)
    step = jax.jit(linear_svm.build_kernel(c=5.0, loss="hinge"))
    state = linear_svm.init(60, 5, 3)
    key = jax.random.key(1)
    previous = np.zeros(3)
    for _ in range(15):
        key, sub = jax.random.split(key)
        state, info = step(sub, state, (xa, ys))
        dual = np.asarray(info.dual_objective)
        assert np.all(dual <= previous + 1e-4)  # float32 round-off
        previous = dual
    assert np.all(np.asarray(state.alpha) >= 0) and np.all(np.asarray(state.alpha) <= 5)


def test_fit_compiles_once(rng):
    x, y = _problem(rng, n=50)
    before = linear_svm.TRACE_COUNT["fit"]
    for seed in range(3):
        fit_linear_svm(x, y, rng_key=jax.random.key(seed), max_epochs=50)
    assert linear_svm.TRACE_COUNT["fit"] - before <= 1


def test_a_fit_of_another_tolerance_and_budget_compiles_nothing(rng, count_compiles):
    """The epochs run in the library's runner, the tolerance an argument of its
    loop: one program for any ``tol`` and ``max_epochs``."""
    x, y = _problem(rng, n=50)
    fit_linear_svm(x, y, rng_key=jax.random.key(0), tol=1e-3, max_epochs=50)
    with count_compiles() as counter:
        _, _, info = fit_linear_svm(
            x, y, rng_key=jax.random.key(1), tol=0.05, max_epochs=130
        )
    assert counter.count == 0
    assert 1 <= info["epochs"] <= 130


def test_bad_input(rng):
    x, y = _problem(rng, n=20)
    with pytest.raises(ValueError, match="unknown loss"):
        fit_linear_svm(x, y, rng_key=jax.random.key(0), loss="log")
    with pytest.raises(ValueError, match="C must be positive"):
        fit_linear_svm(x, y, rng_key=jax.random.key(0), c=0.0)
