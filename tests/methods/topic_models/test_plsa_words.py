"""pLSA-Words: declaration vs fast path, monotone stages, fold-in vs brute force."""

import numpy as np
import pytest
import scipy.optimize

import jax
import jax.numpy as jnp
import numpyro.distributions as dist
from numpyro.infer.util import log_density

from jaxannot.methods.topic_models import plsa_words as pw


def _corpus(seed=0, images=40):
    rng = np.random.default_rng(seed)
    theta = rng.dirichlet(np.full(3, 0.3), images)
    bt = rng.dirichlet(np.full(10, 0.2), 3)
    bv = rng.dirichlet(np.full(14, 0.2), 3)
    text = np.stack([rng.multinomial(4, t @ bt) for t in theta]).astype(np.float32)
    vis = np.stack([rng.multinomial(12, t @ bv) for t in theta]).astype(np.float32)
    return text, vis


def test_log_likelihood_matches_numpyro_declaration():
    text, vis = _corpus(images=8)
    rng = np.random.default_rng(1)
    theta = rng.dirichlet(np.ones(3), 8).astype(np.float32)
    bt = rng.dirichlet(np.ones(10), 3).astype(np.float32)
    bv = rng.dirichlet(np.ones(14), 3).astype(np.float32)
    ref, _ = log_density(
        pw.plsa,
        ((text, vis),),
        dict(num_topics=3),
        {"theta": theta, "beta_0": bt, "beta_1": bv},
    )
    flat = (
        8 * dist.Dirichlet(jnp.ones(3)).log_prob(theta[0])
        + 3 * dist.Dirichlet(jnp.ones(10)).log_prob(bt[0])
        + 3 * dist.Dirichlet(jnp.ones(14)).log_prob(bv[0])
    )  # constants
    fast = pw.log_likelihood(theta, (bt, bv), (text, vis))
    np.testing.assert_allclose(float(ref - flat), float(fast), rtol=1e-5)


def test_both_stages_improve():
    # that they never decrease: tests/annotators/test_objectives.py (plsa-words)
    text, vis = _corpus()
    state, obj = pw.fit_plsa_words(jax.random.key(0), text, vis, 3, num_iterations=40)
    assert obj["text"][-1] > obj["text"][0] and obj["visual"][-1] > obj["visual"][0]
    np.testing.assert_allclose(np.asarray(state.theta).sum(1), 1.0, atol=1e-5)


def test_fold_in_matches_scipy_maximum_likelihood():
    text, vis = _corpus(seed=2)
    state, _ = pw.fit_plsa_words(jax.random.key(1), text, vis, 3, num_iterations=40)
    beta = np.asarray(state.betas[1], np.float64)
    theta, obj = pw.fold_in(state.betas[1], vis[:3], num_iterations=500)
    assert np.all(np.diff(obj) >= -1e-5 * np.abs(obj[1:]))
    for d in range(3):

        def neg(logits, counts=vis[d]):
            t = np.exp(logits - logits.max())
            t /= t.sum()
            return -(counts * np.log(t @ beta)).sum()

        res = scipy.optimize.minimize(
            neg,
            np.zeros(3),
            method="Nelder-Mead",
            options=dict(xatol=1e-9, fatol=1e-12, maxiter=20000),
        )
        # EM converges slowly along flat directions: compare likelihoods (1e-3 nat)
        assert neg(np.log(np.asarray(theta[d], np.float64) + 1e-300)) <= res.fun + 1e-3


def test_bad_input():
    text, vis = _corpus()
    with pytest.raises(ValueError, match="num_topics"):
        pw.fit_plsa_words(jax.random.key(0), text, vis, 0)
    with pytest.raises(ValueError, match="smoothing"):
        pw.fit_plsa_words(jax.random.key(0), text, vis, 2, smoothing=-1.0)


def test_large_counts_keep_the_simplex():
    # issue 50's audit: pLSA-Words rebuilds its expected counts from the
    # responsibilities every EM step (no subtraction, nothing carried); with counts
    # in the thousands on a few words θ and β stay on the simplex, which
    # fit_plsa_words checks before returning them
    rng = np.random.default_rng(0)
    theta = rng.dirichlet(np.full(3, 0.1), 300)
    bt, bv = rng.dirichlet(np.full(4, 0.1), 3), rng.dirichlet(np.full(5, 0.1), 3)
    text = np.stack([rng.multinomial(5000, t @ bt) for t in theta]).astype(np.float32)
    vis = np.stack([rng.multinomial(8000, t @ bv) for t in theta]).astype(np.float32)
    state, obj = pw.fit_plsa_words(jax.random.key(0), text, vis, 3, num_iterations=30)
    for x in (state.theta, *state.betas):
        assert float(x.min()) >= 0.0
        np.testing.assert_allclose(np.asarray(x).sum(-1), 1.0, atol=1e-5)
    assert np.all(np.isfinite(obj["text"])) and np.all(np.isfinite(obj["visual"]))
