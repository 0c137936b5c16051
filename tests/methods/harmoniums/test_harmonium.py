"""Harmonium conditionals against brute-force enumeration of the joint."""

import itertools

import numpy as np
import pytest

import jax
import jax.numpy as jnp

from jaxannot.methods.harmoniums import harmonium as hm


def _params(rng_key, kinds, dims, k=2, scale=0.7):
    params = hm.initialize(rng_key, kinds, dims, k, weight_scale=scale)
    keys = jax.random.split(jax.random.fold_in(rng_key, 1), 3)
    return params._replace(
        visible_bias=tuple(
            0.5 * jax.random.normal(jax.random.fold_in(keys[0], i), (d,))
            for i, d in enumerate(dims)
        ),
        log_variance=tuple(
            0.3 * jax.random.normal(jax.random.fold_in(keys[1], i), (d,))
            for i, d in enumerate(dims)
        ),
        hidden_bias=0.3 * jax.random.normal(keys[2], (k,)),
    )


def test_bernoulli_conditional_matches_enumeration(rng_key):
    """numpyro p(x|h) equals exp(log p~(x,h)) normalized over all x."""
    kinds, dims = ("bernoulli",), (3,)
    params = _params(rng_key, kinds, dims)
    h = jnp.array([0.4, -1.1])
    configs = jnp.array(list(itertools.product([0.0, 1.0], repeat=3)))
    logj = jax.vmap(lambda x: hm.unnormalized_log_joint(params, kinds, (x,), h))(
        configs
    )
    brute = logj - jax.scipy.special.logsumexp(logj)
    (cond,) = hm.conditional_visible(params, kinds, h)
    np.testing.assert_allclose(cond.log_prob(configs), brute, atol=1e-5)  # float32


def test_softmax_and_gaussian_conditionals_match_the_joint(rng_key):
    kinds, dims = ("softmax", "gaussian"), (4, 2)
    params = _params(rng_key, kinds, dims)
    h = jnp.array([0.3, 0.8])
    z = jnp.array([0.2, -0.5])
    # softmax view with N = 1: enumerate the 4 one-hot values
    ys = jnp.eye(4)
    logj = jnp.array([hm.unnormalized_log_joint(params, kinds, (y, z), h) for y in ys])
    cond_y, cond_z = hm.conditional_visible(params, kinds, h, totals=(1, 1))
    np.testing.assert_allclose(
        cond_y.log_prob(ys), logj - jax.scipy.special.logsumexp(logj), atol=1e-5
    )
    # Gaussian view: log-density differences equal log-joint differences
    z2 = jnp.array([-1.0, 0.7])
    y = ys[1]
    d_joint = hm.unnormalized_log_joint(
        params, kinds, (y, z), h
    ) - hm.unnormalized_log_joint(params, kinds, (y, z2), h)
    np.testing.assert_allclose(
        cond_z.log_prob(z) - cond_z.log_prob(z2), d_joint, rtol=1e-5, atol=1e-5
    )
    # hidden conditional: same identity in h
    h2 = jnp.array([-0.6, 1.5])
    ch = hm.conditional_hidden(params, (y, z))
    d_joint = hm.unnormalized_log_joint(
        params, kinds, (y, z), h
    ) - hm.unnormalized_log_joint(params, kinds, (y, z), h2)
    np.testing.assert_allclose(ch.log_prob(h) - ch.log_prob(h2), d_joint, atol=1e-5)


def test_mean_field_means_match_the_conditional_distributions(rng_key):
    kinds, dims = ("bernoulli", "gaussian", "softmax"), (3, 2, 4)
    params = _params(rng_key, kinds, dims)
    views = (jnp.array([1.0, 0, 1]), jnp.array([0.3, -0.2]), jnp.array([0.0, 2, 1, 0]))
    q0 = hm.clamped_state(params, kinds, views)
    q1 = hm.mean_field(params, kinds, q0, (1.0, 1.0, 3.0), num_sweeps=1)
    dists = hm.conditional_visible(params, kinds, q0.hidden, totals=(1, 1, 3))
    for v in range(3):
        np.testing.assert_allclose(q1.means[v], dists[v].mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        q1.hidden, hm.conditional_hidden(params, q1.means).mean, rtol=1e-5, atol=1e-6
    )
    # clamped views do not move
    q2 = hm.mean_field(
        params, kinds, q0, (1.0, 1.0, 3.0), num_sweeps=3, clamp=(True, False, True)
    )
    np.testing.assert_array_equal(q2.means[0], views[0])
    np.testing.assert_array_equal(q2.means[2], views[2])


def test_initialize_matches_margins_and_round_trips(rng_key, rng):
    x = (rng.random((50, 3)) < 0.3).astype(np.float32)
    z = rng.normal(2.0, 3.0, (50, 2)).astype(np.float32)
    params = hm.initialize(rng_key, ("bernoulli", "gaussian"), (3, 2), 4, views=(x, z))
    h0 = jnp.zeros(4)
    np.testing.assert_allclose(
        hm.visible_mean(params, "bernoulli", 0, h0, 1.0),
        np.clip(x.mean(0), 1e-3, 1 - 1e-3),
        rtol=1e-5,
    )
    np.testing.assert_allclose(
        hm.visible_mean(params, "gaussian", 1, h0, 1.0), z.mean(0), rtol=1e-4
    )


def test_bad_kinds_raise(rng_key):
    with pytest.raises(ValueError, match="valid kinds"):
        hm.initialize(rng_key, ("poison",), (3,), 2)
    with pytest.raises(ValueError, match="dims"):
        hm.initialize(rng_key, ("bernoulli",), (3, 4), 2)
