"""Tests of the mixture of unigrams: its two declarations (counts, padded token ids)
fitted by VEM with their closed forms, against numpy / scipy references."""

import os

import numpy as np
import pytest
import scipy.special
import scipy.stats

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
import optax
from numpyro.distributions import constraints
from numpyro.infer import SVI, Predictive, Trace_ELBO
from numpyro.infer.util import log_density

from jaxannot.inference import VEM
from jaxannot.methods.topic_models import mixture_of_unigrams as mu


def _corpus(seed=0, images=40, sizes=(6, 5), topics=2, length=12):
    """Counts sampled ancestrally (numpy) from the model's generative process."""
    rng = np.random.default_rng(seed)
    z = rng.integers(topics, size=images)
    counts = []
    for size in sizes:
        beta = rng.dirichlet(np.full(size, 0.3), size=topics)  # peaked topics
        counts.append(
            np.stack([rng.multinomial(length, beta[k]) for k in z]).astype(np.float32)
        )
    return tuple(counts), z


def _tokens(seed=7, images=50, vocab=11, max_len=8):
    """Padded token ids (-1 = padding) of random lengths and their count matrix."""
    rng = np.random.default_rng(seed)
    tokens = np.full((images, max_len), -1, np.int32)
    for d, n in enumerate(rng.integers(3, max_len + 1, size=images)):
        tokens[d, :n] = rng.integers(0, vocab, size=n)
    counts = np.zeros((images, vocab), np.float32)
    for d in range(images):
        np.add.at(counts[d], tokens[d][tokens[d] >= 0], 1.0)
    return tokens, counts


def _values(params):
    return {k: v for k, v in params.items() if k != "terms"}


def _np_log_joint(values, counts, a=1.0, b=1.1):
    """log p(X, pi, beta) with z summed out, in float64 (numpy / scipy)."""
    pi = np.asarray(values["pi"], np.float64)
    betas = [np.asarray(values[f"beta_{v}"], np.float64) for v in range(len(counts))]
    per_topic = np.log(pi)[None, :] + sum(
        np.asarray(c, np.float64) @ np.log(beta).T
        for c, beta in zip(counts, betas, strict=True)
    )
    prior = scipy.stats.dirichlet.logpdf(pi / pi.sum(), np.full(pi.size, a))
    for beta in betas:
        for row in beta:
            prior += scipy.stats.dirichlet.logpdf(row / row.sum(), np.full(row.size, b))
    return scipy.special.logsumexp(per_topic, axis=1).sum() + prior


def _fit(rng_key, steps, counts, topics, **kw):
    vem = VEM(
        mu.mixture_of_unigrams, "z", m_step=mu.closed_form_m_step, warn_empty=False
    )
    return vem.run(
        rng_key, steps, tuple(map(jnp.asarray, counts)), num_topics=topics,
        progress_bar=False, **kw,
    )  # fmt: skip


def test_generative_declaration_samples_counts():
    given = {
        "pi": jnp.array([[0.5, 0.5]]),
        "beta_0": jnp.full((1, 2, 6), 1 / 6),
        "beta_1": jnp.full((1, 2, 5), 0.2),
    }
    pred = Predictive(mu.mixture_of_unigrams, posterior_samples=given)
    # one compiled program, not one per primitive of an eager call
    out = jax.jit(
        lambda key: pred(
            key,
            num_topics=2,
            vocab_sizes=(6, 5),
            num_images=4,
            lengths_by_view=(jnp.full(4, 7), jnp.full(4, 3)),
            max_length=7,
        )
    )(jax.random.key(0))
    assert out["counts_0"].shape == (1, 4, 6) and out["counts_1"].shape == (1, 4, 5)
    np.testing.assert_array_equal(np.asarray(out["counts_0"][0]).sum(1), 7)
    np.testing.assert_array_equal(np.asarray(out["counts_1"][0]).sum(1), 3)


def test_marginal_declaration_and_vem_objective_are_the_log_joint():
    counts, _ = _corpus()
    kwargs = dict(num_topics=3, pi_concentration=1.5, beta_concentration=1.1)
    vem = VEM(mu.mixture_of_unigrams, "z", m_step=mu.closed_form_m_step)
    values = vem.init_params(jax.random.key(1), counts, **kwargs)
    ref = _np_log_joint(values, counts, 1.5, 1.1)
    marginal = jax.jit(  # one compiled program, not one per primitive
        lambda v: log_density(
            mu.mixture_of_unigrams, (counts,), dict(kwargs, marginalize=True), v
        )[0]
    )(values)
    # float32 sums of ~1e3 magnitude: relative 1e-5
    np.testing.assert_allclose(float(marginal), ref, rtol=1e-5)
    # VEM's objective at its first E-step (exact posteriors) is the same log joint
    one = vem.run(
        jax.random.key(0), 1, counts, init_params=values, progress_bar=False, **kwargs
    )
    np.testing.assert_allclose(-float(one.losses[0]), ref, rtol=1e-5)


@pytest.mark.parametrize("declaration", ["counts", "tokens"])
def test_em_objective_never_decreases(declaration):
    tokens, counts = _tokens(seed=3, images=60)
    if declaration == "counts":
        model, data, kw = mu.mixture_of_unigrams, (jnp.asarray(counts),), {}
    else:
        model, data = mu.mixture_of_unigrams_tokens, (jnp.asarray(tokens),)
        kw = {"vocab_sizes": (11,)}
    vem = VEM(model, "z", chunk_size=16, warn_empty=False)
    result = vem.run(
        jax.random.key(0), 50, data, num_topics=4, progress_bar=False, **kw
    )
    objective = -result.losses
    # float32 round-off on a ~1e3 objective: allow 1e-5 relative slack
    assert np.all(np.diff(objective) >= -1e-5 * np.abs(objective[1:]))
    assert objective[-1] > objective[0]


def test_posteriors_match_brute_force_bayes_rule():
    tokens, counts = _tokens(seed=2, images=20)
    values = {
        "pi": jnp.asarray([0.2, 0.5, 0.3]),
        "beta_0": jnp.asarray(np.random.default_rng(4).dirichlet(np.ones(11), 3)),
    }
    pi, beta = (np.asarray(values[k], np.float64) for k in ("pi", "beta_0"))
    ref = np.empty((20, 3))
    for d in range(20):  # Bayes' rule over the token sequence, one token at a time
        joint = pi.copy()
        for w in tokens[d][tokens[d] >= 0]:
            joint = joint * beta[:, w]
        ref[d] = joint / joint.sum()
    by_counts = VEM(
        mu.mixture_of_unigrams, "z", m_step=mu.closed_form_m_step
    ).posteriors_for(values, (jnp.asarray(counts),), num_topics=3)
    by_tokens = VEM(
        mu.mixture_of_unigrams_tokens,
        "z",
        m_step=mu.closed_form_m_step_tokens,
        chunk_size=8,
    ).posteriors_for(values, (jnp.asarray(tokens),), num_topics=3, vocab_sizes=(11,))
    np.testing.assert_allclose(np.asarray(by_counts), ref, atol=1e-5)
    np.testing.assert_allclose(np.asarray(by_tokens), ref, atol=1e-5)


@pytest.mark.parametrize(
    "block", [8, 30, 4096]
)  # 30 images: 4 blocks, the last shifted
def test_token_statistics_are_the_expected_counts(block, monkeypatch):
    monkeypatch.setattr(mu, "STATISTICS_BLOCK", block)
    tokens, counts = _tokens(seed=5, images=30)
    phi = np.random.default_rng(1).dirichlet(np.ones(4), 30).astype(np.float32)
    stats = mu.token_statistics(jnp.asarray(phi), jnp.asarray(tokens), 11)
    np.testing.assert_allclose(np.asarray(stats), phi.T @ counts, rtol=1e-5)


def test_token_statistics_count_no_id_past_the_vocabulary():
    tokens, counts = _tokens(seed=5, images=30)
    past = np.where(tokens == 3, 11, tokens)  # word 3 becomes an id past V = 11
    counts[:, 3] = 0.0
    phi = np.random.default_rng(1).dirichlet(np.ones(4), 30).astype(np.float32)
    stats = mu.token_statistics(jnp.asarray(phi), jnp.asarray(past), 11)
    np.testing.assert_allclose(np.asarray(stats), phi.T @ counts, rtol=1e-5)


def _two_views(seed0=7, seed1=8):
    """Two views of different vocabularies and lengths, as counts and as token ids."""
    (t0, c0), (t1, c1) = _tokens(seed=seed0), _tokens(seed=seed1, vocab=6, max_len=5)
    return (jnp.asarray(t0), jnp.asarray(t1)), (jnp.asarray(c0), jnp.asarray(c1))


#: the fits of the two-view corpus: its shapes and settings are the compiled ones
TWO_VIEWS = dict(num_topics=3, pi_concentration=1.2, beta_concentration=1.3)
SIZES = dict(vocab_sizes=(11, 6))


@pytest.fixture(scope="module")
def two_view_fits():
    """The VEMs of the two declarations (closed forms, chunks of 16 images: the last
    of four chunks padded) and their 8-iteration fits of :func:`_two_views`."""
    tokens, counts = _two_views()
    vems = {
        "counts": VEM(
            mu.mixture_of_unigrams, "z", m_step=mu.closed_form_m_step, chunk_size=16
        ),
        "tokens": VEM(
            mu.mixture_of_unigrams_tokens,
            "z",
            m_step=mu.closed_form_m_step_tokens,
            chunk_size=16,
        ),
    }
    fits = {
        "counts": vems["counts"].run(
            jax.random.key(3), 8, counts, progress_bar=False, **TWO_VIEWS
        ),
        "tokens": vems["tokens"].run(
            jax.random.key(3), 8, tokens, progress_bar=False, **SIZES, **TWO_VIEWS
        ),
    }
    return tokens, vems, fits


def test_token_declaration_fits_as_the_count_declaration(two_view_fits):
    tokens, _, fits = two_view_fits
    by_counts, by_tokens = fits["counts"], fits["tokens"]
    # two float32 programs (each start compiled with its fit): round-off of 1e-5
    # compounds over 8 iterations (measured 1.2e-5 on a posterior)
    np.testing.assert_allclose(by_tokens.losses, by_counts.losses, rtol=1e-5)
    np.testing.assert_allclose(
        np.asarray(by_tokens.posteriors), np.asarray(by_counts.posteriors), atol=3e-5
    )
    for site in ("pi", "beta_0", "beta_1"):
        np.testing.assert_allclose(
            np.asarray(by_tokens.params[site]),
            np.asarray(by_counts.params[site]),
            atol=3e-5,
        )
    # the tokens' closed form is the generic M-step's optimum too
    generic = VEM(
        mu.mixture_of_unigrams_tokens,
        "z",
        optimizer=optax.lbfgs(),
        m_steps=200,
    ).run(
        jax.random.key(2),
        1,
        tokens,
        init_params=_values(by_tokens.params),
        progress_bar=False,
        **SIZES,
        **TWO_VIEWS,
    )
    closed = mu.closed_form_m_step_tokens(
        generic.posteriors, tokens, **SIZES, **TWO_VIEWS
    )
    for site, value in closed.items():
        np.testing.assert_allclose(
            np.asarray(generic.params[site]), np.asarray(value), rtol=1e-4, atol=1e-6
        )


def test_svi_on_declaration_reaches_em_optimum():
    counts, _ = _corpus(seed=5, images=30)
    kwargs = dict(
        num_topics=2,
        vocab_sizes=(6, 5),
        pi_concentration=1.0,
        beta_concentration=1.1,
        marginalize=True,
    )
    # EM restarts; keep the best local optimum
    em = _fit(jax.random.key(0), 50, counts, 2, restarts=4)
    best = _np_log_joint(em.params, counts)
    init = [
        np.random.default_rng(9).dirichlet(np.ones(v), 2).astype(np.float32)
        for v in (6, 5)
    ]

    def guide(counts, *, num_topics, vocab_sizes, **_):
        """A MAP (point-mass) guide for every global site of the declaration."""
        pi = numpyro.param(
            "pi_map",
            jnp.full(num_topics, 1.0 / num_topics),
            constraint=constraints.simplex,
        )
        numpyro.sample("pi", dist.Delta(pi, event_dim=1))
        with numpyro.plate("topic", num_topics):
            for v in range(len(vocab_sizes)):
                b = numpyro.param(
                    f"beta_{v}_map", init[v], constraint=constraints.simplex
                )
                numpyro.sample(f"beta_{v}", dist.Delta(b, event_dim=1))

    svi = SVI(
        mu.mixture_of_unigrams,
        guide,
        numpyro.optim.optax_to_numpyro(optax.adam(0.05)),
        Trace_ELBO(),
    )
    # SVI's start in one compiled program, not one per primitive of an eager init
    start = jax.jit(lambda key: svi.init(key, counts, **kwargs))(jax.random.key(0))
    result = svi.run(
        jax.random.key(0), 1500, counts, progress_bar=False, init_state=start, **kwargs
    )
    med = {
        "pi": result.params["pi_map"],
        "beta_0": result.params["beta_0_map"],
        "beta_1": result.params["beta_1_map"],
    }
    svi_value = _np_log_joint(med, counts)
    # Adam stops near, not at, the optimum: 0.5 nat on a ~-700 log joint
    assert abs(svi_value - best) < 0.5, (svi_value, best)
    em_beta = np.asarray(em.params["beta_0"])
    svi_beta = np.asarray(med["beta_0"])
    err = min(np.abs(em_beta - svi_beta).max(), np.abs(em_beta[::-1] - svi_beta).max())
    assert err < 0.03  # same topics up to label switching


@pytest.mark.parametrize("declaration", ["counts", "tokens"])
def test_a_second_fit_of_the_same_shapes_compiles_nothing(
    declaration, two_view_fits, count_compiles
):
    # the module fixture compiled the first fit; other data of the same shapes
    tokens, counts = _two_views(seed0=2, seed1=9)
    data, kw = (counts, {}) if declaration == "counts" else (tokens, SIZES)
    vem = two_view_fits[1][declaration]
    with count_compiles() as counter:
        vem.run(jax.random.key(1), 8, data, progress_bar=False, **kw, **TWO_VIEWS)
    assert counter.count == 0


def test_a_fit_is_the_fit_from_its_init_state(two_view_fits):
    # issue 46: a fit's start skips the fold-in of its posteriors (the exact E-step
    # never reads them); VEM.init still folds them in, and the fit from that state
    # is the fit, bit for bit
    tokens, vems, fits = two_view_fits
    vem, kw = vems["tokens"], dict(SIZES, **TWO_VIEWS)
    state = vem.init(jax.random.key(3), tokens, **kw)
    want = vem.posteriors_for(state.params, tokens, **kw)
    np.testing.assert_allclose(np.asarray(state.posteriors), want, atol=1e-6)
    resumed = vem.run(
        jax.random.key(3), 8, tokens, init_state=state, progress_bar=False, **kw
    )
    fit = fits["tokens"]
    np.testing.assert_array_equal(np.asarray(resumed.losses), np.asarray(fit.losses))
    np.testing.assert_array_equal(
        np.asarray(resumed.posteriors), np.asarray(fit.posteriors)
    )
    for site in ("pi", "beta_0", "beta_1"):
        np.testing.assert_array_equal(resumed.params[site], fit.params[site])


def test_bad_input_raises():
    tokens, _ = _tokens()
    with pytest.raises(ValueError, match="vocab_sizes has 2 entries for 1 views"):
        closed = mu.closed_form_m_step_tokens
        VEM(mu.mixture_of_unigrams_tokens, "z", m_step=closed).run(
            jax.random.key(0), 1, (jnp.asarray(tokens),), num_topics=2,
            vocab_sizes=(11, 4),
        )  # fmt: skip


def test_tolerance_stops_early():
    counts, _ = _corpus()
    result = _fit(jax.random.key(0), 300, counts, 2, tolerance=1e-6)
    run = np.isfinite(result.losses)
    assert 2 <= run.sum() < 300
    assert np.all(run[: run.sum()]) and not np.any(run[run.sum() :])


def test_token_fit_on_two_devices_equals_one():
    if jax.device_count() < 2:
        if os.environ.get("CI") == "true":
            raise RuntimeError("needs two devices (make test sets them)")
        pytest.skip("needs two devices")
    tokens, _ = _tokens(seed=8, images=51, vocab=9, max_len=6)

    def fit(devices):
        vem = VEM(
            mu.mixture_of_unigrams_tokens,
            "z",
            m_step=mu.closed_form_m_step_tokens,
            chunk_size=15,
            devices=devices,
        )
        return vem.run(
            jax.random.key(1), 6, (jnp.asarray(tokens),), num_topics=3,
            vocab_sizes=(9,), progress_bar=False,
        )  # fmt: skip

    one, two = fit(None), fit(jax.devices())
    np.testing.assert_allclose(two.losses, one.losses, rtol=1e-5)
    np.testing.assert_allclose(
        np.asarray(two.params["beta_0"]), np.asarray(one.params["beta_0"]), rtol=1e-5
    )
    np.testing.assert_allclose(
        np.asarray(two.posteriors), np.asarray(one.posteriors), atol=1e-5
    )


def test_token_statistics_keep_large_counts_exact_and_non_negative():
    # issue 50's audit: the mixture's topic-word counts are sums of non-negative
    # terms rebuilt from the posteriors (nothing is subtracted, nothing carried
    # between iterations); with counts in the tens of thousands over several blocks
    # they stay >= 0 and within float32 accumulation error (1.2e-4 relative here,
    # relative also for the tiny counts) of a float64 sum
    rng = np.random.default_rng(0)
    images, length, vocab = 9000, 40, 3
    tokens = rng.integers(0, vocab, size=(images, length)).astype(np.int32)
    tokens[::7, -5:] = -1  # some padding
    phi = rng.dirichlet(np.full(4, 0.05), images).astype(np.float32)
    phi[:, 3] *= 1e-4  # one topic with tiny counts next to those of the others
    counts = np.zeros((images, vocab))
    for w in range(vocab):
        counts[:, w] = (tokens == w).sum(1)
    stats = np.asarray(mu.token_statistics(jnp.asarray(phi), jnp.asarray(tokens), 3))
    want = phi.astype(np.float64).T @ counts
    assert want.max() > 2e4 and want.min() < 1e1
    assert stats.min() >= 0.0
    np.testing.assert_allclose(stats, want, rtol=5e-4)


@pytest.mark.parametrize("unrolled", [64, 3])  # 3: the bags of 8 slots gathered whole
def test_token_bag_is_the_sum_of_numpyro_categoricals(unrolled, monkeypatch):
    # issue 46: a bag's log mass is numpyro's Categorical summed over its filled
    # slots, at one vector, at a batch of vectors and under vmap over the topics
    # (how VEM evaluates a chunk: its own batching rule, rows of log beta's
    # transpose), whose derivative is the plain lookup's
    monkeypatch.setattr(mu, "UNROLLED_SLOTS", unrolled)
    rng = np.random.default_rng(0)
    beta = jnp.asarray(rng.dirichlet(np.ones(11), 4).astype(np.float32))
    tokens, counts = _tokens(seed=9, images=6)
    ids = jnp.asarray(tokens)

    def categorical(probs):  # [..., 11] -> the bags' sums, padding dropped
        per_slot = dist.Categorical(probs[..., None, :]).log_prob(jnp.maximum(ids, 0))
        return jnp.where(ids >= 0, per_slot, 0.0).sum(-1)

    @jax.jit  # each comparison one compiled program, not one per primitive
    def both(probs):
        return mu.TokenBag(probs, 8).log_prob(ids), categorical(probs)

    for probs in (beta[2], beta[jnp.arange(6) % 4]):
        np.testing.assert_allclose(*both(probs), rtol=1e-6)

    def per_topic(log_mass, log_beta):
        return jax.vmap(lambda row: log_mass(row, ids), out_axes=1)(log_beta)

    def plain(row, ids):  # numpyro's Categorical, under an ordinary vmap
        return categorical(jnp.exp(row))

    log_beta = jnp.log(beta)
    got, want, grad = jax.jit(
        lambda lb: (
            per_topic(mu.bag_log_mass, lb),
            per_topic(plain, lb),
            jax.grad(lambda x: (per_topic(mu.bag_log_mass, x) ** 2).sum())(lb),
        )
    )(log_beta)
    assert got.shape == (6, 4)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    dense = np.asarray(counts) @ np.asarray(log_beta).T  # [images, topics]
    np.testing.assert_allclose(got, dense, rtol=1e-5)
    # d/d log_beta of sum_dk a_dk^2 = 2 sum_d a_dk n_dw
    np.testing.assert_allclose(grad, 2 * (dense.T @ np.asarray(counts)), rtol=1e-5)


def test_float32_iteration_matches_float64_on_a_larger_corpus():
    # issue 46: the fit accumulates in float32 (the E-step's per-chunk log joints
    # and logsumexps, the M-step's scatter-added topic-word counts over blocks);
    # one EM iteration of the token declaration on 12,000 images of ~20 tokens
    # (chunks of 4,096 images and statistics blocks of 4,096, the last of each
    # partial) against the same iteration in float64 (numpy / scipy). Measured:
    # the objective (~-1.1e6) 2e-8 relative, beta 8e-6 relative (entries down to
    # ~2e-6: words a topic seldom draws), pi 4e-6; asserted with a margin of about 10
    rng = np.random.default_rng(11)
    images, vocab, topics, max_len = 12_000, 200, 6, 25
    beta_true = rng.dirichlet(np.full(vocab, 0.1), topics)
    z = rng.integers(topics, size=images)
    lengths = rng.integers(15, max_len + 1, size=images)
    tokens = np.full((images, max_len), -1, np.int32)
    counts = np.zeros((images, vocab))
    for d in range(images):
        tokens[d, : lengths[d]] = rng.choice(vocab, lengths[d], p=beta_true[z[d]])
        np.add.at(counts[d], tokens[d, : lengths[d]], 1.0)
    kwargs = dict(num_topics=topics, vocab_sizes=(vocab,), beta_concentration=1.1)
    vem = VEM(
        mu.mixture_of_unigrams_tokens,
        "z",
        m_step=mu.closed_form_m_step_tokens,
        chunk_size=4096,
        warn_empty=False,
    )
    data = (jnp.asarray(tokens),)
    start = vem.init_params(jax.random.key(0), data, **kwargs)
    one = vem.run(
        jax.random.key(0), 1, data, init_params=start, progress_bar=False, **kwargs
    )
    # float64: the E-step at the start, then the closed-form M-step
    pi = np.asarray(start["pi"], np.float64)
    log_beta = np.log(np.asarray(start["beta_0"], np.float64))
    a = np.log(pi) + counts @ log_beta.T
    phi = np.exp(a - scipy.special.logsumexp(a, axis=1, keepdims=True))
    want_objective = _np_log_joint(start, (counts,), 1.0, 1.1)
    stats = phi.T @ counts + 0.1
    want_beta = stats / stats.sum(1, keepdims=True)
    want_pi = phi.sum(0) / images
    assert abs(want_objective) > 1e5
    np.testing.assert_allclose(-float(one.losses[0]), want_objective, rtol=2e-7)
    np.testing.assert_allclose(np.asarray(one.params["beta_0"]), want_beta, rtol=1e-4)
    np.testing.assert_allclose(np.asarray(one.params["pi"]), want_pi, rtol=3e-5)
