"""Crammer–Singer dual solver against scikit-learn's LIBLINEAR solver."""

import numpy as np
import pytest
from sklearn.svm import LinearSVC

import jax
import jax.numpy as jnp

from jaxannot.solvers import multiclass_svm as cs


def _problem(rng, n=60, f=5, t=4):
    centers = rng.normal(0, 1.5, (t, f))
    y = rng.integers(0, t, n)
    x = centers[y] + rng.normal(0, 1.0, (n, f))
    return x.astype(np.float32), y.astype(np.int32)


@pytest.mark.parametrize("shrink", [None, 0.01])
@pytest.mark.parametrize("c", [0.1, 2.0])
def test_objective_matches_sklearn(rng, c, shrink):
    # shrink: epochs on the violators only (per-example costs, as MaxMargin's)
    x, y = _problem(rng)
    cost = c if shrink is None else jnp.full(x.shape[0], c)
    state, info = cs.fit_multiclass_svm(
        jax.random.key(0), x, y, 4, cost, stop=cs.DualStop(3000, 1e-6), shrink=shrink
    )
    ours = float(cs.primal_objective(state.weights, jnp.asarray(x), jnp.asarray(y), c))
    ref = LinearSVC(
        multi_class="crammer_singer",
        C=c,
        fit_intercept=False,
        tol=1e-10,
        max_iter=200_000,
    ).fit(x, y)
    theirs = float(cs.primal_objective(jnp.asarray(ref.coef_, jnp.float32), x, y, c))
    # the primal is strictly convex: both solvers reach the same optimum; float32
    # objective sums over 60 examples, so 1e-4 relative.
    assert ours == pytest.approx(theirs, rel=1e-4)
    np.testing.assert_allclose(state.weights, ref.coef_, atol=5e-3 * max(1, c))
    done = np.isfinite(np.asarray(info.dual))
    # float32 round-off floors the gap near 1e-5 of the objective
    assert float(np.asarray(info.gap)[done][-1]) <= 1e-4 * max(1.0, ours)


#: The shapes and epoch budget of the three tests below: one compiled solver.
SMALL, STOP = 40, cs.DualStop(30, 0.0)


def test_dual_never_increases_and_bounds_primal(rng):
    x, y = _problem(rng, n=SMALL)
    _, info = cs.fit_multiclass_svm(jax.random.key(1), x, y, 4, 1.0, stop=STOP)
    dual = np.asarray(info.dual)
    assert np.all(np.diff(dual) <= 1e-5 * np.abs(dual[:-1]).max())  # float32 slack
    assert np.all(np.asarray(info.primal) + dual >= -1e-4)  # weak duality


def test_separable_data_is_classified(rng):
    x, y = _problem(rng, n=SMALL)
    x = x + 10 * np.eye(5, dtype=np.float32)[y]  # well separated
    state, _ = cs.fit_multiclass_svm(jax.random.key(2), x, y, 4, 10.0, stop=STOP)
    pred = np.asarray(cs.decision_function(state.weights, x)).argmax(1)
    assert (pred == y).all()


def test_a_new_tolerance_does_not_recompile(rng):
    x, y = _problem(rng, n=SMALL)
    fit = cs.fit_multiclass_svm
    fit(jax.random.key(0), x, y, 4, 1.0, stop=cs.DualStop(30, 1e-3))
    size = fit._cache_size()
    _, loose = fit(jax.random.key(0), x, y, 4, 1.0, stop=cs.DualStop(30, 1e-1))
    _, tight = fit(jax.random.key(0), x, y, 4, 1.0, stop=cs.DualStop(30, 0.0))
    assert fit._cache_size() == size
    # the traced tolerance still decides when it stops
    assert np.isnan(np.asarray(loose.gap)).sum() > np.isnan(np.asarray(tight.gap)).sum()


def test_kkt_violations_vanish_at_the_optimum_only(rng):
    x, y = _problem(rng, n=30)
    with jax.enable_x64(True):
        x64 = jnp.asarray(x, jnp.float64)
        state, _ = cs.fit_multiclass_svm(
            jax.random.key(0), x64, y, 4, 1.0, stop=cs.DualStop(5000, 1e-12)
        )
        assert float(cs.kkt_violations(state, x64, y, 1.0).max()) < 1e-6
        zero = cs.init(x64, 4)  # W = 0: every example violates by its hinge, 1
        np.testing.assert_allclose(cs.kkt_violations(zero, x64, y, 1.0), 1.0)
        assert float(cs.kkt_violations(zero, x64, y, jnp.zeros(30)).max()) == 0.0


def test_a_second_fit_of_the_same_shapes_compiles_nothing(rng, count_compiles):
    """The epochs run through the runner's in-program loop: a refit with another
    key, data and epoch budget reuses the program; the budget still bounds it."""
    x, y = _problem(rng, n=SMALL)
    stop = cs.DualStop(30, 0.0, epochs=30)
    cs.fit_multiclass_svm(jax.random.key(0), x, y, 4, 1.0, stop=stop)
    other = np.asarray(2 * x)
    with count_compiles() as again:
        _, info = cs.fit_multiclass_svm(
            jax.random.key(1), other, y, 4, 1.0, stop=cs.DualStop(30, 0.0, epochs=4)
        )
    assert again.count == 0
    ran = np.isfinite(np.asarray(info.gap))
    assert ran[:4].all() and not ran[4:].any()


def test_a_stop_without_an_epoch_budget_shares_the_program(rng, count_compiles):
    """``epochs=None`` is stored as ``max_epochs``: a stop without a budget and one
    with it have one tree structure, so the second solve compiles nothing."""
    x, y = _problem(rng, n=SMALL)
    assert cs.DualStop(30, 0.0).epochs == 30
    cs.fit_multiclass_svm(jax.random.key(0), x, y, 4, 1.0, stop=cs.DualStop(30, 0.0))
    with count_compiles() as again:
        _, info = cs.fit_multiclass_svm(
            jax.random.key(1), x, y, 4, 1.0, stop=cs.DualStop(30, 0.0, epochs=3)
        )
    assert again.count == 0
    assert np.isfinite(np.asarray(info.gap)).sum() == 3


def test_a_stop_keeps_the_leaves_it_is_rebuilt_from():
    """Unflattening does not run ``__init__``: a tree of placeholders (as jax builds
    for shardings and axes) keeps None where ``DualStop(..., epochs=None)`` would
    store ``max_epochs``."""
    blank = jax.tree.map(lambda _: None, cs.DualStop(30, 1e-3, epochs=4))
    assert blank.max_epochs == 30 and blank.tol is None and blank.epochs is None
