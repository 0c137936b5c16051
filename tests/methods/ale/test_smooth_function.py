"""Smooth function (seed 002 eq. 7) against a direct minimization of its objective."""

import numpy as np
import pytest
import scipy.optimize

import jax.numpy as jnp

from jaxannot.methods.ale.smooth_function import (
    accumulate,
    fit_smooth_function,
    init_statistics,
    smooth_scores,
    solve_smooth_function,
)


def _objective(alpha, u, y, sigma, lam, labelled):
    ua = np.concatenate([u, np.ones((len(u), 1))], 1)
    resid = ua @ alpha - y
    return alpha[:-1] @ (sigma * alpha[:-1]) + lam * (labelled * resid**2).sum()


def test_solution_minimizes_objective(rng):
    n, c, k = 40, 6, 3
    u = rng.normal(size=(n, c))
    y = (rng.uniform(size=(n, k)) > 0.6).astype(np.float32)
    sigma = np.sort(rng.uniform(0.01, 1.0, size=c))
    labelled = rng.uniform(size=n) > 0.3
    alpha = fit_smooth_function(u, y, sigma, lam=3.0, labelled=labelled)
    ys = np.where(y > 0, 1.0, -1.0)
    for j in range(k):
        ref = scipy.optimize.minimize(
            _objective,
            np.zeros(c + 1),
            args=(u, ys[:, j], sigma, 3.0, labelled),
            method="BFGS",
            options={"gtol": 1e-9},
        ).x
        # float32 statistics, float64 solve: 1e-3
        np.testing.assert_allclose(alpha[:, j], ref, atol=1e-3)
    # unlabelled rows carry no weight: changing their labels changes nothing
    y2 = y.copy()
    y2[~labelled] = 1.0 - y2[~labelled]
    np.testing.assert_allclose(
        fit_smooth_function(u, y2, sigma, lam=3.0, labelled=labelled), alpha, atol=1e-5
    )


def test_streaming_statistics_equal_one_shot(rng):
    u = rng.normal(size=(90, 5)).astype(np.float32)
    y = np.where(rng.uniform(size=(90, 2)) > 0.5, 1.0, -1.0).astype(np.float32)
    w = np.full(90, 100.0, np.float32)
    stats = init_statistics(5, 2)
    for start in range(0, 90, 30):
        sl = slice(start, start + 30)
        stats = accumulate(
            stats, jnp.asarray(u[sl]), jnp.asarray(y[sl]), jnp.asarray(w[sl])
        )
    sigma = np.linspace(0.1, 0.5, 5)
    streamed = solve_smooth_function(stats, sigma)
    one_shot = fit_smooth_function(u, y, sigma, lam=100.0)
    np.testing.assert_allclose(streamed, one_shot, rtol=1e-4, atol=1e-5)
    assert smooth_scores(u, streamed).shape == (90, 2)


def test_large_lambda_tends_to_least_squares(rng):
    u = rng.normal(size=(50, 4))
    y = (rng.uniform(size=(50, 1)) > 0.5).astype(np.float32)
    alpha = fit_smooth_function(u, y, np.ones(4), lam=1e6)
    ua = np.concatenate([u, np.ones((50, 1))], 1)
    ref, *_ = np.linalg.lstsq(ua, np.where(y > 0, 1.0, -1.0), rcond=None)
    np.testing.assert_allclose(alpha, ref, atol=1e-3)


def test_bad_lambda(rng):
    with pytest.raises(ValueError, match="lam"):
        fit_smooth_function(np.ones((3, 2)), np.ones((3, 1)), np.ones(2), lam=0.0)
