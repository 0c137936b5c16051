"""VEM on declarations a modeller writes: the default start without a closed form,
restarts, nested plates, improper priors, clear errors, Laplace draws."""

import warnings

import numpy as np
import pytest
import scipy.special
import scipy.stats

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
import optax
from numpyro import handlers
from numpyro.distributions import constraints

from jaxannot.inference.max_margin import MaxMargin
from jaxannot.inference.vem.algorithm import VEM, EmptyComponentWarning
from jaxannot.inference.vem.fit_warnings import CollapsedFitWarning

PRIOR_SD = 10.0


def gauss_tags(x, tags, *, num_topics):
    """Diagonal Gaussian features (mean and scale per topic) and Bernoulli tags;
    no closed form is registered for it."""
    pi = numpyro.sample("pi", dist.Dirichlet(jnp.ones(num_topics)))
    with numpyro.plate("topic", num_topics):
        mean = numpyro.sample(
            "mean", dist.Normal(0.0, PRIOR_SD).expand([x.shape[1]]).to_event(1)
        )
        scale = numpyro.sample(
            "scale", dist.LogNormal(0.0, 1.0).expand([x.shape[1]]).to_event(1)
        )
        rho = numpyro.sample(
            "rho", dist.Beta(2.0, 2.0).expand([tags.shape[1]]).to_event(1)
        )
    with numpyro.plate("image", x.shape[0]):
        z = numpyro.sample("z", dist.Categorical(pi))
        numpyro.sample(
            "x",
            dist.Normal(mean[z], scale[z]).to_event(1),
            obs=numpyro.subsample(x, 1),
        )
        numpyro.sample(
            "tags", dist.Bernoulli(rho[z]).to_event(1), obs=numpyro.subsample(tags, 1)
        )


def _five_clusters(n=60, d=4, t=6, k=5, seed=0):
    """Five clusters centred away from the prior's mean (around 5)."""
    rng = np.random.default_rng(seed)
    z = np.arange(n) % k
    centres = 5.0 + rng.normal(0, 3, (k, d))
    x = centres[z] + rng.normal(size=(n, d))
    tags = (rng.random((n, t)) < rng.uniform(0.1, 0.9, (k, t))[z]).astype(np.float32)
    return jnp.asarray(x, jnp.float32), jnp.asarray(tags), z


def _prior_draw(seed, x, tags, k):
    """The old default start: the global sites drawn from their priors (numpy's
    samplers: jax's, run op by op outside a fit, compiled its gamma sampler, 6 s)."""
    rng = np.random.default_rng(seed)
    d, t = x.shape[1], tags.shape[1]
    draws = {
        "pi": rng.dirichlet(np.ones(k)),
        "mean": rng.normal(0.0, PRIOR_SD, (k, d)),
        "scale": rng.lognormal(0.0, 1.0, (k, d)),
        "rho": rng.beta(2.0, 2.0, (k, t)),
    }
    return {s: jnp.asarray(v, jnp.float32) for s, v in draws.items()}


def test_default_start_keeps_every_component():
    x, tags, _ = _five_clusters()
    vem = VEM(gauss_tags, "z", optimizer=optax.adam(0.05), m_steps=5)
    kw = dict(num_topics=5, progress_bar=False)

    def fits(starts):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", EmptyComponentWarning)
            results = [
                vem.run(jax.random.key(s), 30, x, tags, init_params=start, **kw)
                for s, start in enumerate(starts)
            ]
        empties = sum(float(r.posteriors.sum(0).min()) < 0.5 for r in results)
        assert len(caught) == empties  # one warning per emptied fit
        return empties

    assert fits([None] * 10) <= 2  # the default start: >= 8 of 10 keep all five
    assert fits([_prior_draw(s, x, tags, 5) for s in range(10)]) >= 5  # the old start


def test_restarts_keep_the_best_objective(count_compiles):
    # the data, VEM and topics of the test above: its compiled fit is reused
    x, tags, _ = _five_clusters()
    vem = VEM(gauss_tags, "z", optimizer=optax.adam(0.05), m_steps=5)
    kw = dict(num_topics=5, progress_bar=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyComponentWarning)
        all_fits = vem.run_restarts(jax.random.key(0), 3, 10, x, tags, **kw)
        with count_compiles() as compiles:
            best = vem.run(jax.random.key(0), 10, x, tags, restarts=3, **kw)
    finals = [-f.losses[-1] for f in all_fits]
    assert -best.losses[-1] == max(finals)
    assert compiles.count == 0  # the restarts share one compiled fit
    with pytest.raises(ValueError, match="restarts must be an integer >= 1"):
        vem.run(jax.random.key(0), 10, x, tags, restarts=0, **kw)


# ------------------------------------------------------------------ nested plates
def regions(x, mask, *, num_topics):
    """Region features x [N, R, d] per image (mask [N, R]: which regions exist),
    one topic per image: plate("region") nested in plate("image", dim=-2)."""
    pi = numpyro.sample("pi", dist.Dirichlet(jnp.ones(num_topics)))
    with numpyro.plate("topic", num_topics):
        mean = numpyro.sample(
            "mean", dist.Normal(0.0, 3.0).expand([x.shape[-1]]).to_event(1)
        )
    with numpyro.plate("image", x.shape[0], dim=-2):
        z = numpyro.sample("z", dist.Categorical(pi))  # [N, 1]
        with numpyro.plate("region", x.shape[1], dim=-1):
            x_i = numpyro.subsample(x, event_dim=1)
            with handlers.mask(mask=numpyro.subsample(mask, event_dim=0)):
                numpyro.sample("x", dist.Normal(mean[z], 1.0).to_event(1), obs=x_i)


def test_nested_region_plate_estep_equals_brute_force():
    rng = np.random.default_rng(0)
    n, r, d, k = 11, 4, 2, 3
    x = jnp.asarray(rng.normal(size=(n, r, d)) * 2, jnp.float32)
    mask = jnp.asarray(rng.random((n, r)) < 0.7)
    vem = VEM(regions, "z", chunk_size=4)  # 3 chunks, the last padded
    params = vem.init_params(jax.random.key(0), x, mask, num_topics=k)
    a = np.asarray(vem.local_log_joint(params, x, mask, num_topics=k))
    pi, mean = np.asarray(params["pi"], np.float64), np.asarray(params["mean"])
    ref = np.zeros((n, k))
    for i in range(n):  # z_i enumerated by hand; masked regions add nothing
        for j in range(k):
            lp = scipy.stats.norm.logpdf(np.asarray(x[i]), mean[j], 1.0).sum(-1)
            ref[i, j] = np.log(pi[j]) + (lp * np.asarray(mask[i])).sum()
    np.testing.assert_allclose(a, ref, rtol=1e-5, atol=1e-4)
    res = vem.run(jax.random.key(1), 5, x, mask, num_topics=k, progress_bar=False)
    assert res.posteriors.shape == (n, k) and np.all(np.isfinite(res.losses))
    ref = scipy.special.log_softmax(
        np.asarray(vem.local_log_joint(res.params, x, mask, num_topics=k)), axis=1
    )
    np.testing.assert_allclose(
        np.asarray(vem.posteriors_for(res.params, x, mask, num_topics=k)),
        np.exp(ref),
        atol=1e-6,
    )


def test_a_model_error_is_shown_not_replaced():
    def broken(x, *, num_topics):
        pi = numpyro.sample("pi", dist.Dirichlet(jnp.ones(num_topics)))
        with numpyro.plate("image", x.shape[0]):
            numpyro.sample("z", dist.Categorical(pi))
            # reads x whole, then a typo'd shape: the model's own error
            numpyro.sample("x", dist.Normal(0.0, 1.0), obs=x[:, :2].sum(-1)[:3])

    x = jnp.ones((6, 3))
    with pytest.raises(ValueError, match="Incompatible shapes|broadcast"):
        VEM(broken).run(jax.random.key(0), 1, x, num_topics=2, progress_bar=False)
    with pytest.raises(ValueError, match=r"numpyro.subsample.*|model raised"):
        VEM(broken, chunk_size=2).run(jax.random.key(0), 1, x, num_topics=2)


# ---------------------------------------------------------------- improper priors
def flat_means(x, *, num_topics):
    """Unit-variance Gaussian mixture with improper flat priors on the means."""
    pi = numpyro.sample("pi", dist.Dirichlet(jnp.ones(num_topics)))
    with numpyro.plate("topic", num_topics):
        mean = numpyro.sample(
            "mean", dist.ImproperUniform(constraints.real, (), (x.shape[1],))
        )
    with numpyro.plate("image", x.shape[0]):
        z = numpyro.sample("z", dist.Categorical(pi))
        numpyro.sample(
            "x", dist.Normal(mean[z], 1.0).to_event(1), obs=numpyro.subsample(x, 1)
        )


@pytest.fixture(scope="module")
def flat_fit():
    """Three clusters fitted by VEM under flat priors on the means (L-BFGS M-step),
    shared by the tests that read it (each model is a compile of its own)."""
    x, _, _ = _five_clusters(n=30, k=3, d=2)
    vem = VEM(flat_means, "z", optimizer=optax.lbfgs(), m_steps=100)
    res = vem.run(jax.random.key(0), 3, x, num_topics=3, progress_bar=False)
    return x, vem, res


def test_improper_prior_fits_by_vem(flat_fit):
    x, _, res = flat_fit
    phi = np.asarray(res.posteriors, np.float64)
    # the M-step is maximum likelihood in the means: the weighted averages
    expected = (phi.T @ np.asarray(x)) / phi.sum(0)[:, None]
    np.testing.assert_allclose(np.asarray(res.params["mean"]), expected, rtol=1e-4)


# ------------------------------------------------------------------------ errors
def test_clear_errors_for_bad_inputs():
    # the data and VEM of the default-start test: the NaN is found by a fit, whose
    # compiled program that test has made
    x, tags, z = _five_clusters()
    vem = VEM(gauss_tags, "z", optimizer=optax.adam(0.05), m_steps=5)
    kw = dict(num_topics=5, progress_bar=False)
    with pytest.raises(ValueError, match="num_steps must be an integer >= 1"):
        vem.run(jax.random.key(0), 0, x, tags, **kw)
    bad = VEM(gauss_tags, "z", terms=[MaxMargin(jnp.asarray(z[:10]), c=1.0)])
    with pytest.raises(ValueError, match="10 labels but plate 'image' has 60"):
        bad.run(jax.random.key(0), 1, x, tags, **kw)
    with pytest.raises(ValueError, match=r"positional argument 0 \(1 NaN of 240\)"):
        vem.run(jax.random.key(0), 2, x.at[3, 1].set(jnp.nan), tags, **kw)
    # values of the model's shapes written out (the default start is a fit of its own)
    params = {
        "pi": jnp.full(5, 1 / 5),
        "mean": jnp.zeros((5, 4)),
        "scale": jnp.ones((5, 4)),
        "rho": jnp.full((5, 6), 0.5),
    }
    wrong = dict(params, mean=params["mean"][:2])
    with pytest.raises(ValueError, match=r"mean has shape \(2, 4\), the model's"):
        vem.run(jax.random.key(0), 1, x, tags, init_params=wrong, **kw)
    partial = {k: v for k, v in params.items() if k != "rho"}
    with pytest.raises(ValueError, match=r"params lacks the global sites \['rho'\]"):
        vem.posteriors_for(partial, x, tags, num_topics=5)


def test_nan_arising_mid_fit_names_the_iteration_and_step():
    def drifting(x, *, num_topics):
        pi = numpyro.sample("pi", dist.Dirichlet(jnp.ones(num_topics)))
        with numpyro.plate("topic", num_topics):
            mean = numpyro.sample("mean", dist.Normal(0.0, 10.0))
        # a log density that is NaN once a mean passes 2 (the data sit at 5)
        numpyro.factor("guard", jnp.where(mean.max() > 2.0, jnp.nan, 0.0))
        with numpyro.plate("image", x.shape[0]):
            z = numpyro.sample("z", dist.Categorical(pi))
            numpyro.sample("x", dist.Normal(mean[z], 1.0), obs=numpyro.subsample(x, 0))

    x = jnp.full(8, 5.0)
    vem = VEM(drifting, "z", optimizer=optax.sgd(0.01))
    start = {"pi": jnp.full(2, 0.5), "mean": jnp.zeros(2)}
    kw = dict(num_topics=2, progress_bar=False)
    with pytest.raises(FloatingPointError, match=r"EM iteration [1-9]\d*, E-step") as e:
        vem.run(jax.random.key(0), 50, x, init_params=start, **kw)
    message = str(e.value)
    at = int(message.split("EM iteration ")[1].split(",")[0])
    # the fault is each iteration's info, not state: a fit up to it runs clean, and
    # one resumed from there, or an update, meets it at the same EM iteration
    with pytest.warns(CollapsedFitWarning):  # eight equal images: one posterior
        before = vem.run(jax.random.key(0), at, x, init_params=start, **kw)
    assert np.all(np.isfinite(before.losses)) and int(before.state.iteration) == at
    with pytest.raises(FloatingPointError) as resumed:
        vem.run(jax.random.key(0), 5, x, init_state=before.state, **kw)
    assert str(resumed.value) == message
    with pytest.raises(FloatingPointError, match=f"EM iteration {at}, E-step"):
        vem.update(before.state, x, num_topics=2)


# ------------------------------------------------------------------ Laplace draws
def test_laplace_draws_match_the_conjugate_posterior_of_the_means(flat_fit):
    # the fit of the improper-prior test (its compiled program): under flat priors
    # exp(E) in the means is Gaussian with precision n_k, centred at the M-step
    x, vem, res = flat_fit
    res = vem.laplace_draws(jax.random.key(1), res, 4000, x, num_topics=3)
    nk = np.asarray(res.posteriors, np.float64).sum(0)
    draws = np.asarray(res.draws["mean"])
    assert draws.shape == (4000, 3, 2)
    np.testing.assert_allclose(
        draws.std(0),
        np.broadcast_to(1 / np.sqrt(nk)[:, None], (3, 2)),
        rtol=0.1,
    )  # 4000 draws: the sd's Monte Carlo error is ~1 %
    np.testing.assert_allclose(draws.mean(0), res.params["mean"], atol=0.05)
    assert res.draw_posteriors.shape == (4000, 30, 3)
