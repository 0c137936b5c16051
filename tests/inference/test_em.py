"""The generic EM drivers on a toy kernel with a known fixed point."""

from typing import NamedTuple

import numpy as np

import jax
import jax.numpy as jnp

from jaxannot.inference.em import run_em, run_em_until_converged


class Info(NamedTuple):
    objective: jax.Array


TRACES = []


def halving_step(rng_key, x, target):
    """x <- (x + target) / 2: objective -(x - target)^2 rises to 0 geometrically."""
    TRACES.append(1)
    return (x + target) / 2, Info(-((x - target) ** 2).sum())


def test_run_em_scans_and_compiles_once():
    TRACES.clear()
    x, info = run_em(
        jax.random.key(0),
        jnp.zeros(3),
        jnp.ones(3),
        step=halving_step,
        num_iterations=20,
    )
    np.testing.assert_allclose(np.asarray(x), 1 - 0.5**20, rtol=1e-6)
    np.testing.assert_allclose(
        np.asarray(info.objective), [-3 * 0.25**t for t in range(20)], rtol=1e-5
    )
    run_em(
        jax.random.key(1),
        jnp.ones(3),
        2 * jnp.ones(3),
        step=halving_step,
        num_iterations=20,
    )
    assert len(TRACES) == 1


def offset_step(rng_key, x, target):
    """Same update; objective -(x - target)^2 - 1 converges to -1 (relative steps
    shrink by 4 each iteration)."""
    return (x + target) / 2, Info(-((x - target) ** 2).sum() - 1.0)


def test_run_until_converged_stops_at_the_tolerance():
    x, trace = run_em_until_converged(
        jax.random.key(0),
        jnp.zeros(2),
        jnp.ones(2),
        jnp.float32(1e-3),
        step=offset_step,
        max_iterations=100,
    )
    t = int(trace.num_iterations)
    obj = np.asarray(trace.objective, np.float64)
    rel = np.abs(np.diff(obj[:t])) / np.abs(obj[: t - 1])
    assert 2 < t < 100
    assert rel[-1] <= 1e-3 < rel[-2]  # stopped at the first small relative change
    assert np.all(np.isnan(obj[t:]))
