"""Link-LDA: declaration vs fast path, VB monotonicity, sklearn reduction, fold-in."""

import numpy as np
import pytest

import jax
import jax.numpy as jnp
import numpyro.distributions as dist
from numpyro.infer import Predictive
from numpyro.infer.util import log_density

from jaxannot.inference.em import run_em
from jaxannot.methods.topic_models import link_lda as ll
from jaxannot.methods.topic_models import link_lda_vb as llvb


def _corpus(seed=0, images=50, sizes=(12, 7), topics=3, length=15):
    rng = np.random.default_rng(seed)
    theta = rng.dirichlet(np.full(topics, 0.2), images)
    out = []
    for size in sizes:
        beta = rng.dirichlet(np.full(size, 0.2), topics)
        out.append(
            np.stack([rng.multinomial(length, t @ beta) for t in theta]).astype(
                np.float32
            )
        )
    return tuple(out)


def test_token_likelihood_matches_numpyro_and_brute_force_over_token_topics():
    counts = _corpus(images=6)
    rng = np.random.default_rng(1)
    theta = rng.dirichlet(np.ones(3), 6).astype(np.float32)
    betas = [rng.dirichlet(np.ones(c.shape[1]), 3).astype(np.float32) for c in counts]
    values = {"theta": theta, "beta_0": betas[0], "beta_1": betas[1]}

    @jax.jit  # one compiled program, not one per primitive of eager calls
    def densities(values, theta, betas):
        ref, _ = log_density(
            ll.link_lda,
            (counts,),
            dict(num_topics=3, vocab_sizes=(12, 7), alpha=0.5, eta=0.3),
            values,
        )
        prior = dist.Dirichlet(jnp.full(3, 0.5)).log_prob(theta).sum() + sum(
            dist.Dirichlet(jnp.full(b.shape[1], 0.3)).log_prob(b).sum() for b in betas
        )
        return ref, prior, ll.token_log_likelihood(theta, betas, counts).sum()

    ref, prior, fast = densities(values, theta, betas)
    np.testing.assert_allclose(float(ref - prior), float(fast), rtol=1e-5)
    # brute force: each token's topic summed out explicitly, float64
    brute = 0.0
    for d in range(6):
        for b, c in zip(betas, counts, strict=False):
            for w in np.flatnonzero(c[d]):
                brute += c[d, w] * np.log(
                    sum(float(theta[d, k]) * float(b[k, w]) for k in range(3))
                )
    np.testing.assert_allclose(float(fast), brute, rtol=1e-5)


def test_generative_declaration():
    given = {"beta_0": jnp.full((1, 2, 4), 0.25), "theta": jnp.full((1, 3, 2), 0.5)}
    pred = Predictive(ll.link_lda, posterior_samples=given)
    # one compiled program, not one per primitive of an eager call
    out = jax.jit(
        lambda key: pred(
            key,
            num_topics=2,
            vocab_sizes=(4,),
            num_images=3,
            lengths_by_view=(jnp.full(3, 5),),
            max_length=5,
        )
    )(jax.random.key(0))
    np.testing.assert_array_equal(np.asarray(out["counts_0"][0]).sum(1), 5)
    assert out["counts_0"].shape == (1, 3, 4)


def test_padded_bags_reproduce_dense_counts():
    counts = _corpus(images=7)[0]
    ids, vals = ll.to_padded(counts)
    back = np.zeros_like(counts)
    for d in range(7):
        np.add.at(back[d], ids[d], vals[d])
    np.testing.assert_array_equal(back, counts)


@pytest.fixture(scope="module")
def fitted():
    counts = _corpus()
    state, objective = llvb.fit_vb(
        jax.random.key(1), counts, 3, num_iterations=60, num_inner=5
    )
    return counts, state, objective


def test_vb_elbo_improves(fitted):
    # that it never decreases: tests/annotators/test_objectives.py (link-lda,
    # inference=vb)
    _, _, objective = fitted
    assert objective[-1] > objective[0]


def test_single_view_matches_sklearn_batch_lda():
    """Link-LDA with one view is LDA: same fixed point as sklearn's batch VB."""
    from sklearn.decomposition import LatentDirichletAllocation

    counts = _corpus(sizes=(15,), images=80, seed=3)
    state, _ = llvb.fit_vb(
        jax.random.key(0),
        counts,
        3,
        num_iterations=100,
        num_inner=5,
        prior=ll.LDAPrior(alpha=0.3, eta=0.1),
    )
    ours = np.asarray(ll.topic_word(state.lambdas[0]))
    sk = LatentDirichletAllocation(
        n_components=3,
        doc_topic_prior=0.3,
        topic_word_prior=0.1,
        learning_method="batch",
        max_iter=100,
        max_doc_update_iter=20,
        mean_change_tol=1e-6,
        random_state=0,
    ).fit(counts[0])
    theirs = sk.components_ / sk.components_.sum(1, keepdims=True)
    from scipy.optimize import linear_sum_assignment

    cost = np.abs(ours[:, None, :] - theirs[None]).sum(-1)
    r, c = linear_sum_assignment(cost)
    # two VB runs from different starts land on the same well-separated topics
    assert cost[r, c].max() < 0.1, cost[r, c]


def test_fold_in_recovers_training_posterior_and_compiles_once(fitted):
    counts, state, _ = fitted
    gamma = llvb.fold_in(state.lambdas, counts, 0.1, num_inner=100)
    t1 = np.asarray(gamma / gamma.sum(1, keepdims=True))
    t0 = np.asarray(state.gamma / state.gamma.sum(1, keepdims=True))
    # the per-image E-step is not convex (alpha < 1): started at the training
    # posterior, fold-in stays there; from its default start it reaches a fixed point
    warm = llvb.fold_in(state.lambdas, counts, 0.1, num_inner=100, gamma0=state.gamma)
    tw = np.asarray(warm / warm.sum(1, keepdims=True))
    exp_b = tuple(jnp.exp(llvb.expected_log_dirichlet(lam)) for lam in state.lambdas)
    # jitted: one program (num_inner a traced loop bound), not one per jnp op
    dense = jax.jit(jax.vmap(llvb.image_estep, in_axes=(0, 0, None, None, None)))
    cj = tuple(jnp.asarray(c) for c in counts)
    elbo_train = np.asarray(dense(state.gamma, cj, exp_b, 0.1, 0)[3])
    elbo_warm = np.asarray(dense(warm, cj, exp_b, 0.1, 0)[3])
    # coordinate ascent from the training γ: every image's ELBO rises (float32 slack)
    assert np.all(elbo_warm >= elbo_train - 1e-3 * np.abs(elbo_train))
    assert np.abs(tw - t0).max(1).mean() < 0.03  # and stays close on average
    assert np.mean(np.abs(t1 - t0).max(1) < 0.05) >= 0.5
    again = llvb.fold_in(state.lambdas, counts, 0.1, num_inner=100)
    np.testing.assert_allclose(np.asarray(again), np.asarray(gamma), rtol=1e-5)
    g2 = dense(gamma, cj, exp_b, 0.1, 1)[0]
    np.testing.assert_allclose(np.asarray(g2), np.asarray(gamma), atol=1e-2)
    traces = []
    step = llvb.build_vb_kernel(3)

    def counted(k, s, d):
        traces.append(1)
        return step(k, s, d)

    ids, cnts = zip(*(ll.to_padded(c) for c in counts), strict=False)
    ids = tuple(map(jnp.asarray, ids))
    cnts = tuple(map(jnp.asarray, cnts))
    st = llvb.init_state(jax.random.key(0), (12, 7), cnts, 3, jnp.float32(0.1))
    data = (ids, cnts, jnp.float32(0.1), jnp.float32(0.01))
    run_em(jax.random.key(0), st, data, step=counted, num_iterations=5)
    run_em(jax.random.key(1), st, data, step=counted, num_iterations=5)
    assert len(traces) == 1


def test_fast_digamma_matches_scipy():
    from scipy.special import digamma

    x = np.logspace(-3, 5, 2001)
    ours = np.asarray(llvb._digamma(jnp.asarray(x, jnp.float32)), np.float64)
    ref = digamma(np.asarray(x, np.float32).astype(np.float64))
    np.testing.assert_allclose(ours, ref, rtol=2e-6, atol=2e-6)


def test_batched_padded_estep_matches_per_image_dense_estep():
    counts = _corpus(images=9, seed=4)
    rng = np.random.default_rng(2)
    exp_b = tuple(
        jnp.asarray(rng.dirichlet(np.ones(c.shape[1]), 3), jnp.float32) for c in counts
    )
    gamma0 = jnp.asarray(rng.gamma(2.0, 1.0, (9, 3)), jnp.float32)
    # jitted: one program (num_inner a traced loop bound), not one per jnp op
    dense = jax.jit(jax.vmap(llvb.image_estep, in_axes=(0, 0, None, None, None)))
    g_ref, t_ref, r_ref, l_ref = dense(
        gamma0, tuple(map(jnp.asarray, counts)), exp_b, 0.1, 4
    )
    ids, cnts = zip(*(ll.to_padded(c) for c in counts), strict=False)
    ids = tuple(map(jnp.asarray, ids))
    g, t, r, local = jax.jit(llvb._batch_estep)(
        gamma0, llvb._gather(exp_b, ids), tuple(map(jnp.asarray, cnts)), 0.1, 4
    )
    np.testing.assert_allclose(np.asarray(g), np.asarray(g_ref), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(t), np.asarray(t_ref), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(local), np.asarray(l_ref), rtol=1e-5)
    for rv, rd, i, c in zip(r, r_ref, ids, cnts, strict=False):
        # padded ratio of each (image, word) slot = dense ratio at that word
        picked = np.take_along_axis(np.asarray(rd), np.asarray(i), axis=1)
        np.testing.assert_allclose(
            np.asarray(rv), np.where(c > 0, picked, 0.0), rtol=1e-5
        )


def test_fit_continues_from_a_state():
    counts = _corpus(images=30, seed=5)
    key = jax.random.key(3)
    whole, obj = llvb.fit_vb(key, counts, 3, num_iterations=8, num_inner=3)
    half, first = llvb.fit_vb(key, counts, 3, num_iterations=4, num_inner=3)
    rest, second = llvb.fit_vb(
        key, counts, 3, num_iterations=4, num_inner=3, state=half
    )
    np.testing.assert_allclose(np.concatenate([first, second]), obj, rtol=1e-5)
    for a, b in zip(rest.lambdas, whole.lambdas, strict=False):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4)


@pytest.mark.parametrize("prior", [ll.LDAPrior(alpha=0.0), ll.LDAPrior(eta=-1.0)])
def test_fit_rejects_a_prior_without_positive_concentrations(prior):
    with pytest.raises(ValueError, match="alpha and eta must be > 0"):
        llvb.fit_vb(jax.random.key(0), _corpus(images=4), 3, prior=prior)
