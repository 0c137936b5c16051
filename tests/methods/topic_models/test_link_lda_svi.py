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
from jaxannot.methods.topic_models import link_lda as ll
from jaxannot.methods.topic_models import link_lda_bags as bags
from jaxannot.methods.topic_models import link_lda_svi as ls
from jaxannot.methods.topic_models import simplex_transforms as st


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
    ids, cnts = bags.padded_bags(counts)

    @jax.jit  # one compiled program, not one per primitive of two eager calls
    def both(values):
        dense, _ = log_density(ll.link_lda, (counts,), kwargs, values)
        padded, _ = log_density(bags.link_lda_bags, (ids, cnts), kwargs, values)
        return dense, padded

    dense, padded = both(values)
    np.testing.assert_allclose(float(padded), float(dense), rtol=1e-5)


def test_at_lam_zero_the_objective_is_the_plain_elbo():
    counts, graph = _two_groups()
    ids, cnts = bags.padded_bags((counts,))
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
    model, guide = bags.link_lda_bags, ls.link_lda_guide
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


def _fit(lam):
    counts, graph = _two_groups()
    ids, cnts = bags.padded_bags((counts,))
    fit = ls.fit_svi(
        jax.random.key(0),
        ids,
        cnts,
        pad_edges(graph, 4 * counts.shape[0]),
        _settings(counts.shape[1], lam),
        num_steps=300,
    )
    return fit, graph


@pytest.fixture(scope="module")
def fits():
    """The fits without and with a penalty (lam 0 and 30) and their graph."""
    (plain, graph), (smooth, _) = _fit(0.0), _fit(30.0)
    return plain, smooth, graph


def test_a_penalty_pulls_neighbours_posteriors_together(fits):
    plain, smooth, graph = fits
    p_plain = float(laplacian_penalty(graph, plain.theta))
    p_smooth = float(laplacian_penalty(graph, smooth.theta))
    assert p_smooth < 0.5 * p_plain, (p_plain, p_smooth)
    # both still separate the two groups' topics (the signal is kept)
    for fit in (plain, smooth):
        first = np.asarray(fit.theta[:20, 0]).mean()
        second = np.asarray(fit.theta[20:, 0]).mean()
        assert abs(first - second) > 0.5


def test_the_loss_decreases_on_average(fits):
    for fit in fits[:2]:  # the plain and the penalized objective
        losses = fit.losses
        assert np.isfinite(losses).all()
        assert losses[-50:].mean() < losses[:50].mean() - 10.0


def test_fold_in_is_batch_independent(fits):
    counts, _ = _two_groups()
    fit = fits[1]
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


def test_a_diverged_fit_raises_naming_the_step_size_and_the_step():
    """A step size of 100 sends the parameters out of float32's range and the loss
    to NaN: an error naming the settings, not NaN topics (before, the fit returned
    them and the metrics failed on NaN scores)."""
    counts, graph = _two_groups(0)
    ids, cnts = bags.padded_bags((counts,))
    settings = ls.SVISettings(4, (counts.shape[1],), 0.01, 1.1, 1.0, 100.0)
    with pytest.raises(
        FloatingPointError, match=r"diverged \(the loss is not finite.*learning_rate"
    ):
        ls.fit_svi(
            jax.random.key(0), ids, cnts, pad_edges(graph, 160), settings, num_steps=50
        )


def test_log_space_stick_breaking_jacobian_matches_autodiff_and_numpyro(rng):
    """The log-Jacobian against the log |det| of jax's Jacobian of the first K − 1
    outputs (the simplex's free coordinates) and against numpyro's formula, where
    no output underflows."""
    from numpyro.distributions.transforms import StickBreakingTransform

    x = jnp.asarray(rng.normal(scale=2.0, size=(3, 5)), jnp.float32)
    t = st.LogSpaceStickBreaking()

    @jax.jit  # one compiled program, not one per primitive of eager calls
    def both(x):
        y = t(x)
        return (
            t.log_abs_det_jacobian(x, y),
            StickBreakingTransform().log_abs_det_jacobian(x, y),
        )

    ours, numpyros = (np.asarray(a) for a in both(x))
    np.testing.assert_allclose(ours, numpyros, rtol=1e-5)
    jacobian = jax.jit(jax.jacobian(lambda v: t(v)[:-1]))  # one program, 3 rows
    for row in range(3):
        jac = jacobian(x[row])
        np.testing.assert_allclose(
            ours[row], np.linalg.slogdet(np.asarray(jac, np.float64))[1], rtol=1e-4
        )


def test_log_space_stick_breaking_stays_finite_where_the_draw_underflows():
    """Sticks of x ≈ 30 leave the last coordinates below float32's range: numpyro's
    log-Jacobian (the log of the output) is -inf there, the log-space one is the
    finite sum of its float64 value."""
    from numpyro.distributions.transforms import StickBreakingTransform

    x = jnp.full((1, 8), 30.0, jnp.float32)
    y = StickBreakingTransform()(x)
    assert float(y.min()) == 0.0
    assert not np.isfinite(
        float(StickBreakingTransform().log_abs_det_jacobian(x, y)[0])
    )
    ours = float(st.LogSpaceStickBreaking().log_abs_det_jacobian(x, y)[0])
    xs = 30.0 - np.log(8 - np.arange(8))  # float64 reference
    log_z, log_1mz = -np.logaddexp(0, -xs), -np.logaddexp(0, xs)
    ref = np.sum(log_z + np.cumsum(log_1mz) - log_1mz + log_1mz)
    np.testing.assert_allclose(ours, ref, rtol=1e-5)


def test_simplex_floor_is_a_bijection_with_the_stated_jacobian(rng):
    floor = st.SimplexFloor(1e-3)  # large enough for float32 to see it
    x = jnp.asarray(rng.dirichlet(np.full(4, 0.2), size=3), jnp.float32)
    x = x.at[0, 1].set(0.0).at[0].divide(x[0].sum())

    @jax.jit  # one compiled program, not one per primitive of eager calls
    def checks(x):
        y = floor(x)
        free = jax.jacobian(lambda v: floor(jnp.append(v, 1.0 - v.sum()))[:-1])
        return y, floor.inv(y), free(x[1, :-1]), floor.log_abs_det_jacobian(x[1], y[1])

    y, back, jac, log_det = checks(x)
    np.testing.assert_allclose(np.asarray(y.sum(-1)), 1.0, rtol=1e-6)
    assert float(y.min()) >= 1e-3 / (1 + 4e-3) * (1 - 1e-6)
    np.testing.assert_allclose(np.asarray(back), np.asarray(x), atol=1e-6)
    np.testing.assert_allclose(
        float(log_det),
        np.linalg.slogdet(np.asarray(jac, np.float64))[1],
        rtol=1e-5,
    )


def test_a_small_alpha_fits_where_the_draws_underflow():
    """alpha = 0.001 with a large step: draws of theta fall below float32's range
    (before the log-space Jacobian, the same fit at alpha = 0.01 diverged from step
    7); the fit now ends with finite topics, a finite loss at every step, and the
    two groups of images apart."""
    counts, graph = _two_groups(0)
    ids, cnts = bags.padded_bags((counts,))
    settings = ls.SVISettings(4, (counts.shape[1],), 0.001, 1.1, 1.0, 1.0)
    fit = ls.fit_svi(
        jax.random.key(0), ids, cnts, pad_edges(graph, 160), settings, num_steps=50
    )
    assert np.isfinite(fit.losses).all()
    theta = np.asarray(fit.theta)
    assert np.isfinite(theta).all() and float(theta.min()) > 0.0
    first, second = theta[:20].mean(0), theta[20:].mean(0)
    assert np.abs(first - second).sum() > 0.5
