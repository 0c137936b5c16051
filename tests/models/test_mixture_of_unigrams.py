"""Tests of the mixture of unigrams: declaration vs fast path, EM, compile-once."""

import functools
import os

import numpy as np
import pytest

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
import optax
from numpyro.distributions import constraints
from numpyro.infer import SVI, Predictive, Trace_ELBO
from numpyro.infer.util import log_density

from jaxannot.inference.em import run_em
from jaxannot.models import mixture_em as mem
from jaxannot.models import mixture_of_unigrams as mu


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


def test_generative_declaration_samples_counts():
    given = {
        "pi": jnp.array([[0.5, 0.5]]),
        "beta_0": jnp.full((1, 2, 6), 1 / 6),
        "beta_1": jnp.full((1, 2, 5), 0.2),
    }
    pred = Predictive(mu.mixture_of_unigrams, posterior_samples=given)
    out = pred(
        jax.random.key(0),
        num_topics=2,
        vocab_sizes=(6, 5),
        num_images=4,
        lengths_by_view=(jnp.full(4, 7), jnp.full(4, 3)),
        max_length=7,
    )
    assert out["counts_0"].shape == (1, 4, 6) and out["counts_1"].shape == (1, 4, 5)
    np.testing.assert_array_equal(np.asarray(out["counts_0"][0]).sum(1), 7)
    np.testing.assert_array_equal(np.asarray(out["counts_1"][0]).sum(1), 3)


def test_log_joint_matches_numpyro_log_density():
    counts, _ = _corpus()
    params = mu.init_params(jax.random.key(1), counts, 3, 1.5, 1.1)
    fast = mu.log_joint(params, counts, 1.5, 1.1)
    values = {"pi": jnp.exp(params.log_pi)}
    values.update({f"beta_{v}": jnp.exp(b) for v, b in enumerate(params.log_betas)})
    ref, _ = log_density(
        mu.mixture_of_unigrams,
        (counts,),
        dict(
            num_topics=3,
            vocab_sizes=(6, 5),
            pi_concentration=1.5,
            beta_concentration=1.1,
            marginalize=True,
        ),
        values,
    )
    # float32 sums of ~1e3 magnitude: relative 1e-5
    np.testing.assert_allclose(float(fast), float(ref), rtol=1e-5)


def test_em_objective_never_decreases():
    counts, _ = _corpus(seed=3, topics=3)
    _, objective = mem.fit_em(jax.random.key(0), counts, 4, num_iterations=50)
    diffs = np.diff(objective)
    # float32 round-off on a ~1e3 objective: allow 1e-4 relative slack
    assert np.all(diffs >= -1e-4 * np.abs(objective[1:])), diffs.min()
    assert objective[-1] > objective[0]


def test_posterior_matches_brute_force_bayes_rule():
    counts, _ = _corpus(seed=2)
    params = mu.init_params(jax.random.key(4), counts, 3)
    phi = np.asarray(mu.posterior(params, counts))
    pi = np.exp(np.asarray(params.log_pi, np.float64))
    betas = [np.exp(np.asarray(b, np.float64)) for b in params.log_betas]
    for d in range(5):
        joint = pi * np.prod(
            [
                np.prod(b ** c[d][None, :], axis=1)
                for b, c in zip(betas, counts, strict=False)
            ],
            axis=0,
        )
        np.testing.assert_allclose(phi[d], joint / joint.sum(), atol=1e-5)


def test_svi_on_declaration_reaches_em_optimum():
    counts, _ = _corpus(seed=5, images=30)
    kwargs = dict(
        num_topics=2,
        vocab_sizes=(6, 5),
        pi_concentration=1.0,
        beta_concentration=1.1,
        marginalize=True,
    )
    best = None
    for seed in range(4):  # EM restarts; keep the best local optimum
        params, obj = mem.fit_em(jax.random.key(seed), counts, 2, num_iterations=50)
        final = float(mu.log_joint(params, counts, 1.0, 1.1))
        if best is None or final > best[0]:
            best = (final, params)
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
    result = svi.run(jax.random.key(0), 1500, counts, progress_bar=False, **kwargs)
    med = {
        "pi": result.params["pi_map"],
        "beta_0": result.params["beta_0_map"],
        "beta_1": result.params["beta_1_map"],
    }
    svi_params = mu.MixtureParams(
        jnp.log(med["pi"]), (jnp.log(med["beta_0"]), jnp.log(med["beta_1"]))
    )
    svi_value = float(mu.log_joint(svi_params, counts, 1.0, 1.1))
    # Adam stops near, not at, the optimum: 0.5 nat on a ~-700 log joint
    assert abs(svi_value - best[0]) < 0.5, (svi_value, best[0])
    em_beta = np.exp(np.asarray(best[1].log_betas[0]))
    svi_beta = np.asarray(med["beta_0"])
    err = min(np.abs(em_beta - svi_beta).max(), np.abs(em_beta[::-1] - svi_beta).max())
    assert err < 0.03  # same topics up to label switching


def test_em_compiles_once():
    counts, _ = _corpus()
    traces = []
    step = mem.build_em_kernel()

    def counted(key, state, data):
        traces.append(1)
        return step(key, state, data)

    state = mem.MixtureEMState(mu.init_params(jax.random.key(0), counts, 3))
    data = (tuple(jnp.asarray(c) for c in counts), jnp.float32(1.0), jnp.float32(1.1))
    run_em(jax.random.key(1), state, data, step=counted, num_iterations=25)
    data2 = (
        tuple(jnp.asarray(c) + 1.0 for c in counts),
        jnp.float32(1.2),
        jnp.float32(1.3),
    )
    run_em(jax.random.key(2), state, data2, step=counted, num_iterations=25)
    assert len(traces) == 1
    # and the public driver reuses one compiled loop for new data of the same shape
    before = run_em._cache_size()
    mem.fit_em(jax.random.key(0), counts, 3, num_iterations=7)
    mem.fit_em(jax.random.key(1), tuple(c + 1 for c in counts), 3, num_iterations=7)
    assert run_em._cache_size() == before + 1


def test_bad_input_raises():
    counts, _ = _corpus()
    with pytest.raises(ValueError, match="beta_concentration"):
        mem.fit_em(
            jax.random.key(0), counts, 2, prior=mem.MixturePrior(beta_concentration=1.0)
        )
    with pytest.raises(ValueError, match="pi_concentration"):
        mem.fit_em_tokens(
            jax.random.key(0),
            np.zeros((2, 3), np.int32),
            4,
            2,
            prior=mem.MixturePrior(pi_concentration=0.5),
        )
    with pytest.raises(ValueError, match="num_topics"):
        mem.fit_em(jax.random.key(0), counts, 0)


def test_tolerance_stops_early():
    counts, _ = _corpus()
    _, objective = mem.fit_em(
        jax.random.key(0), counts, 2, num_iterations=300, tolerance=1e-6
    )
    assert 2 <= objective.size < 300
    assert np.all(np.isfinite(objective))


def test_token_stream_em_matches_dense_counts_em():
    rng = np.random.default_rng(7)
    lengths = rng.integers(3, 9, size=50)
    tokens = np.full((50, 8), -1, np.int32)
    for d, n in enumerate(lengths):
        tokens[d, :n] = rng.integers(0, 11, size=n)
    counts = np.zeros((50, 11), np.float32)
    for d in range(50):
        np.add.at(counts[d], tokens[d][tokens[d] >= 0], 1.0)
    key = jax.random.key(3)
    params, obj = mem.fit_em_tokens(key, tokens, 11, 3, chunk_size=16, num_iterations=8)
    assert np.all(np.diff(obj) >= -1e-5 * np.abs(obj[1:]))
    # reference: the dense path from the same start, one objective per iteration
    noise = 0.5 * jax.random.normal(key, (3, 11))
    start = mu.MixtureParams(
        jnp.full(3, -jnp.log(3.0)),
        (noise - jax.scipy.special.logsumexp(noise, -1, keepdims=True),),
    )
    state, info = run_em(
        jax.random.key(0),
        mem.MixtureEMState(start),
        ((jnp.asarray(counts),), jnp.float32(1.0), jnp.float32(1.1)),
        step=mem.build_em_kernel(),
        num_iterations=8,
    )
    np.testing.assert_allclose(obj, np.asarray(info.objective), rtol=1e-5)
    np.testing.assert_allclose(
        np.asarray(params.log_betas[0]),
        np.asarray(state.params.log_betas[0]),
        atol=1e-4,
    )


def test_token_stream_em_on_two_devices_equals_one():
    if jax.device_count() < 2:
        if os.environ.get("CI") == "true":
            raise RuntimeError("needs two devices (make test sets them)")
        pytest.skip("needs two devices")
    rng = np.random.default_rng(8)
    tokens = np.full((51, 6), -1, np.int32)  # 51 images, chunks of 15 -> 16 split
    for d, n in enumerate(rng.integers(2, 7, size=51)):
        tokens[d, :n] = rng.integers(0, 9, size=n)
    fit = functools.partial(
        mem.fit_em_tokens,
        jax.random.key(1),
        tokens,
        9,
        3,
        chunk_size=15,
        num_iterations=6,
    )
    one_params, one = fit()
    two_params, two = fit(devices=jax.devices())
    np.testing.assert_allclose(two, one, rtol=1e-5)
    np.testing.assert_allclose(
        np.exp(np.asarray(two_params.log_betas[0])),
        np.exp(np.asarray(one_params.log_betas[0])),
        rtol=1e-5,
    )
