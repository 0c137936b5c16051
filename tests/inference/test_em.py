"""The generic EM drivers on a toy kernel with a known fixed point."""

from typing import NamedTuple

import numpy as np

import jax
import jax.numpy as jnp

from jaxannot.inference.em import run_em, run_em_until_converged, run_until_small_change


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


def noisy_step(rng_key, x, target):
    """The halving step plus a draw from its key."""
    x = (x + target) / 2 + 0.01 * jax.random.normal(rng_key, x.shape)
    return x, Info(-((x - target) ** 2).sum())


def test_run_em_is_the_scan_over_split_keys_bit_for_bit():
    """Step ``t`` takes the ``t``-th key of ``split(rng_key, n)``, past the runner's
    first slice of steps too."""
    key, target = jax.random.key(3), jnp.ones(3)

    @jax.jit
    def scanned(x):
        keys = jax.random.split(key, 100)
        return jax.lax.scan(lambda c, k: noisy_step(k, c, target), x, keys)

    x, info = run_em(key, jnp.zeros(3), target, step=noisy_step, num_iterations=100)
    ref_x, ref_info = scanned(jnp.zeros(3))
    np.testing.assert_array_equal(np.asarray(x), np.asarray(ref_x))
    np.testing.assert_array_equal(info.objective, np.asarray(ref_info.objective))
    assert info.num_iterations == 100


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


class _Halving(NamedTuple):
    value: jax.Array
    objective: jax.Array
    iteration: jax.Array


class _HalvingInfo(NamedTuple):
    objective: jax.Array
    relative_change: jax.Array


def _halve(st):
    new = st.objective / 2
    change = jnp.abs(st.objective - new) / jnp.abs(st.objective)
    return _Halving(new, new, st.iteration + 1), _HalvingInfo(new, change)


def test_run_until_small_change_stops_at_tol_or_the_cap():
    start = _Halving(jnp.float32(8.0), jnp.float32(8.0), jnp.int32(0))
    # every step halves: relative change 0.5 > tol, so only the cap stops it
    st, hist = run_until_small_change(_halve, start, 0.4, max_iterations=3)
    assert int(st.iteration) == 3
    np.testing.assert_array_equal(np.asarray(hist), [8.0, 4.0, 2.0, 1.0])
    # change 0.5 <= tol: stops after the first step, the rest of the history NaN
    st, hist = run_until_small_change(_halve, start, 0.5, max_iterations=5)
    assert int(st.iteration) == 1
    np.testing.assert_array_equal(np.asarray(hist)[:2], [8.0, 4.0])
    assert np.isnan(np.asarray(hist)[2:]).all()


def test_run_until_converged_runs_the_budget_and_compiles_once(count_compiles):
    """A tolerance of 0 never stops it: every iteration of the budget runs; another
    key, start and tolerance compile nothing."""
    args = (jnp.zeros(3), jnp.ones(3))
    _, trace = run_em_until_converged(
        jax.random.key(0), *args, jnp.float32(0.0), step=noisy_step, max_iterations=30
    )
    assert int(trace.num_iterations) == 30
    assert np.isfinite(np.asarray(trace.objective)).all()
    with count_compiles() as again:
        _, trace = run_em_until_converged(
            jax.random.key(1),
            jnp.ones(3),
            args[1],
            jnp.float32(0.5),
            step=noisy_step,
            max_iterations=30,
        )
    assert again.count == 0
    assert 2 <= int(trace.num_iterations) < 30
