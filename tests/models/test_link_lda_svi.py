"""Link-LDA by SVI with a Laplacian penalty: the padded declaration against the
dense one, the penalty's zero at lam = 0, smoothing on a graph that carries signal,
the loss trace, the fold-in's batch independence."""

import numpy as np
import pytest

import jax
import jax.numpy as jnp
from numpyro.infer import Trace_ELBO
from numpyro.infer.util import log_density

from jaxannot.graph import Graph, laplacian_penalty, pad_edges
from jaxannot.models import link_lda as ll
from jaxannot.models import link_lda_svi as ls


def _two_groups(seed=0, images=40, vocab=12, length=6):
    """Half the images draw their words from the first half of the vocabulary, half
    from the second; the graph links the images of each group in a ring."""
    rng = np.random.default_rng(seed)
    half = vocab // 2
    counts = np.zeros((images, vocab), np.float32)
    group = np.arange(images) >= images // 2
    for d in range(images):
        words = rng.integers(0, half, length) + (half if group[d] else 0)
        np.add.at(counts[d], words, 1.0)
    members = [np.flatnonzero(~group), np.flatnonzero(group)]
    senders = np.concatenate([m for m in members] + [np.roll(m, 1) for m in members])
    receivers = np.concatenate([np.roll(m, 1) for m in members] + [m for m in members])
    graph = Graph(
        senders.astype(np.int32),
        receivers.astype(np.int32),
        np.ones(senders.size, np.float32),
        images,
    )
    return counts, graph


def _settings(vocab, lam, topics=2):
    return ls.SVISettings(topics, (vocab,), 0.5, 1.1, lam, 0.05)


def test_padded_declaration_has_the_dense_declarations_log_density():
    rng = np.random.default_rng(1)
    counts = (
        rng.poisson(0.7, (5, 9)).astype(np.float32),
        rng.poisson(0.4, (5, 6)).astype(np.float32),
    )
    values = {
        "theta": rng.dirichlet(np.ones(3), 5).astype(np.float32),
        "beta_0": rng.dirichlet(np.ones(9), 3).astype(np.float32),
        "beta_1": rng.dirichlet(np.ones(6), 3).astype(np.float32),
    }
    kwargs = dict(num_topics=3, vocab_sizes=(9, 6), alpha=0.5, eta=1.3)
    dense, _ = log_density(ll.link_lda, (counts,), kwargs, values)
    ids, cnts = ls.padded_bags(counts)
    padded, _ = log_density(ls.link_lda_bags, (ids, cnts), kwargs, values)
    np.testing.assert_allclose(float(padded), float(dense), rtol=1e-5)


def test_at_lam_zero_the_objective_is_the_plain_elbo():
    counts, graph = _two_groups()
    ids, cnts = ls.padded_bags((counts,))
    settings = _settings(counts.shape[1], lam=0.0)
    svi = ls.make_svi(settings, graph)
    key = jax.random.key(3)
    rng = np.random.default_rng(0)
    params = {
        "theta_loc": jnp.asarray(rng.normal(size=(40, 1)), jnp.float32),
        "theta_scale": jnp.full((40, 1), 0.2),
        "beta_map_0": jnp.asarray(rng.dirichlet(np.ones(12), 2), jnp.float32),
    }
    kwargs = dict(num_topics=2, vocab_sizes=(12,), alpha=0.5, eta=1.1)
    model, guide = ls.link_lda_bags, ls.link_lda_guide
    penalized = svi.loss.loss(key, params, model, guide, ids, cnts, **kwargs)
    # the wrapper hands the base ELBO the first half of its key
    base_key = jax.random.split(key)[0]
    plain = Trace_ELBO().loss(base_key, params, model, guide, ids, cnts, **kwargs)
    assert float(penalized) == float(plain)
    # with lam > 0 the same call adds lam times the penalty on SB(theta_loc)
    svi_lam = ls.make_svi(_settings(12, lam=7.0), graph)
    more = svi_lam.loss.loss(key, params, model, guide, ids, cnts, **kwargs)
    theta = jax.nn.sigmoid(params["theta_loc"])  # SB for K = 2: (sigmoid, 1 - .)
    q = jnp.concatenate([theta, 1 - theta], 1)
    expected = float(plain) + 7.0 * float(laplacian_penalty(graph, q))
    np.testing.assert_allclose(float(more), expected, rtol=1e-5)


def _fit(lam, seed=0, steps=300):
    counts, graph = _two_groups(seed)
    ids, cnts = ls.padded_bags((counts,))
    fit = ls.fit_svi(
        jax.random.key(seed),
        ids,
        cnts,
        pad_edges(graph, 4 * counts.shape[0]),
        _settings(counts.shape[1], lam),
        num_steps=steps,
    )
    return fit, graph


def test_a_penalty_pulls_neighbours_posteriors_together():
    plain, graph = _fit(0.0)
    smooth, _ = _fit(30.0)
    p_plain = float(laplacian_penalty(graph, plain.theta))
    p_smooth = float(laplacian_penalty(graph, smooth.theta))
    assert p_smooth < 0.5 * p_plain, (p_plain, p_smooth)
    # both still separate the two groups' topics (the signal is kept)
    for fit in (plain, smooth):
        first = np.asarray(fit.theta[:20, 0]).mean()
        second = np.asarray(fit.theta[20:, 0]).mean()
        assert abs(first - second) > 0.5


def test_the_loss_decreases_on_average():
    fit, _ = _fit(1.0, seed=2)
    losses = fit.losses
    assert np.isfinite(losses).all()
    assert losses[-50:].mean() < losses[:50].mean() - 10.0


def test_fold_in_is_batch_independent():
    counts, _ = _two_groups()
    fit, _ = _fit(1.0)
    full = ls.fold_in(fit.betas, (jnp.asarray(counts),), 0.5, 20)
    part = ls.fold_in(fit.betas, (jnp.asarray(counts[5:9]),), 0.5, 20)
    np.testing.assert_allclose(np.asarray(part), np.asarray(full[5:9]), rtol=1e-5)


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(num_topics=0), "num_topics"),
        (dict(alpha=0.0), "alpha"),
        (dict(eta=0.5), "eta must be >= 1"),
        (dict(lam=-1.0), "lam"),
        (dict(learning_rate=0.0), "learning_rate"),
    ],
)
def test_bad_settings_are_refused_by_name(change, message):
    with pytest.raises(ValueError, match=message):
        _settings(12, 0.0)._replace(**change).check()


def test_a_diverged_fit_raises_naming_alpha_and_the_step():
    """A small alpha with a large step sends the draws of theta into float32
    underflow and the loss to NaN: an error naming the settings, not NaN topics
    (before, the fit returned them and the metrics failed on NaN scores)."""
    counts, graph = _two_groups(0)
    ids, cnts = ls.padded_bags((counts,))
    settings = ls.SVISettings(4, (counts.shape[1],), 0.01, 1.1, 1.0, 1.0)
    with pytest.raises(FloatingPointError, match=r"diverged \(the loss is not finite"):
        ls.fit_svi(
            jax.random.key(0), ids, cnts, pad_edges(graph, 160), settings, num_steps=50
        )
