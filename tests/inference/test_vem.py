"""Variational EM on declared models: E-step vs brute force, generic vs closed-form
M-step, monotonicity, LapVar transforms vs the loop written out, chunks, compiles."""

import numpy as np
import pytest
import scipy.stats

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
import optax
from numpyro.infer.util import log_density

from jaxannot.graph import knn_graph
from jaxannot.inference import lapvar
from jaxannot.inference.max_margin import MaxMargin
from jaxannot.inference.vem.algorithm import VEM, EmptyComponentWarning
from jaxannot.methods.topic_models import mixture_of_unigrams as mu

PRIOR_SD = 3.0


def gauss_tag_mixture(x, tags, *, num_topics):
    """A mixture the library does not ship: Gaussian features and Bernoulli tags."""
    pi = numpyro.sample("pi", dist.Dirichlet(jnp.ones(num_topics)))
    with numpyro.plate("topic", num_topics):
        mean = numpyro.sample(
            "mean", dist.Normal(0.0, PRIOR_SD).expand([x.shape[1]]).to_event(1)
        )
        rho = numpyro.sample(
            "rho", dist.Beta(2.0, 2.0).expand([tags.shape[1]]).to_event(1)
        )
    with numpyro.plate("image", x.shape[0]):
        z = numpyro.sample("z", dist.Categorical(pi))
        numpyro.sample(
            "x", dist.Normal(mean[z], 1.0).to_event(1), obs=numpyro.subsample(x, 1)
        )
        numpyro.sample(
            "tags", dist.Bernoulli(rho[z]).to_event(1), obs=numpyro.subsample(tags, 1)
        )


def gauss_tag_closed_form(phi, x, tags, **_):
    """MAP M-step of :func:`gauss_tag_mixture` (its three conjugate priors)."""
    nk = phi.sum(0)
    mean = (phi.T @ x) / (nk[:, None] + 1.0 / PRIOR_SD**2)
    rho = (phi.T @ tags + 1.0) / (nk[:, None] + 2.0)
    return {"pi": nk / nk.sum(), "mean": mean, "rho": rho}


def _toy(seed=0, n=40, d=2, t=5, k=3):
    rng = np.random.default_rng(seed)
    z = rng.integers(k, size=n)
    centres = rng.normal(0, 3, (k, d))
    rho = rng.uniform(0.1, 0.9, (k, t))
    x = centres[z] + rng.normal(size=(n, d))
    tags = (rng.random((n, t)) < rho[z]).astype(np.float32)
    return jnp.asarray(x, jnp.float32), jnp.asarray(tags), z


def _brute_force_log_joint(params, x, tags):
    pi, mean, rho = (np.asarray(params[k], np.float64) for k in ("pi", "mean", "rho"))
    x, tags = np.asarray(x, np.float64), np.asarray(tags, np.float64)
    out = np.zeros((x.shape[0], pi.size))
    for i in range(x.shape[0]):
        for k in range(pi.size):
            out[i, k] = (
                np.log(pi[k])
                + scipy.stats.norm.logpdf(x[i], mean[k], 1.0).sum()
                + scipy.stats.bernoulli.logpmf(tags[i], rho[k]).sum()
            )
    return out


def _counts(seed=0, images=60, sizes=(6, 5), topics=3, length=12):
    rng = np.random.default_rng(seed)
    z = rng.integers(topics, size=images)
    counts = []
    for size in sizes:
        beta = rng.dirichlet(np.full(size, 0.3), size=topics)
        counts.append(
            np.stack([rng.multinomial(length, beta[k]) for k in z]).astype(np.float32)
        )
    return tuple(map(jnp.asarray, counts))


def test_generic_estep_equals_brute_force_enumeration():
    x, tags, _ = _toy()
    vem = VEM(gauss_tag_mixture, "z", chunk_size=16)  # 3 chunks, the last padded
    params = vem.init_params(jax.random.key(1), x, tags, num_topics=3)
    a = np.asarray(vem.local_log_joint(params, x, tags, num_topics=3))
    ref = _brute_force_log_joint(params, x, tags)
    np.testing.assert_allclose(a, ref, rtol=1e-6, atol=1e-5)
    phi = np.asarray(vem.posteriors_for(params, x, tags, num_topics=3))
    ref_phi = np.exp(ref - scipy.special.logsumexp(ref, axis=1, keepdims=True))
    np.testing.assert_allclose(phi, ref_phi, atol=1e-6)


@pytest.mark.parametrize("model", ["mixture_of_unigrams", "gauss_tag_mixture"])
def test_generic_m_step_reaches_the_closed_form_optimum(model):
    if model == "mixture_of_unigrams":
        fn, args, kwargs = mu.mixture_of_unigrams, (_counts(),), {"num_topics": 3}
        closed = mu.closed_form_m_step
    else:
        x, tags, _ = _toy()
        fn, args, kwargs = gauss_tag_mixture, (x, tags), {"num_topics": 3}
        closed = gauss_tag_closed_form
    start = VEM(fn, "z", m_step=closed).init_params(jax.random.key(0), *args, **kwargs)
    generic = VEM(fn, "z", optimizer=optax.lbfgs(), m_steps=200)
    result = generic.run(
        jax.random.key(2), 1, *args, init_params=start, progress_bar=False, **kwargs
    )
    expected = closed(result.posteriors, *args, **kwargs)
    for name, value in expected.items():
        np.testing.assert_allclose(
            np.asarray(result.params[name]), np.asarray(value), rtol=1e-4, atol=1e-6
        )


def test_closed_form_objective_never_decreases_and_beats_generic_start():
    counts = _counts(seed=3)
    vem = VEM(mu.mixture_of_unigrams, "z", m_step=mu.closed_form_m_step)
    result = vem.run(jax.random.key(0), 40, counts, num_topics=4, progress_bar=False)
    objective = -result.losses
    assert np.all(np.diff(objective) >= -1e-5 * np.abs(objective[1:]))
    assert objective[-1] > objective[0] + 1.0
    # the reported objective is the marginal log joint (numpyro's log density of
    # the declaration with z summed out) at the parameters entering the E-step
    values = {k: v for k, v in result.params.items() if k != "terms"}
    again = vem.run(
        jax.random.key(0), 1, counts, num_topics=4, init_params=values,
        progress_bar=False,
    )  # fmt: skip
    marginal, _ = log_density(
        mu.mixture_of_unigrams,
        (counts,),
        dict(num_topics=4, marginalize=True),
        values,
    )
    np.testing.assert_allclose(-again.losses[0], float(marginal), rtol=1e-5)


def _reference_em(key, values, counts, graph, algorithm, iterations, tolerance):
    """VEM with a LapVar E-step written out as a Python loop over lapvar's E-step
    kernels and the closed-form M-step: VEM's keys, objective, stopping rule and
    best iterate, with the log joint computed by hand (log pi + n @ log beta^T)."""
    lam, gamma = jnp.float32(0.7), jnp.float32(0.5)
    table = lapvar.neighbour_table(
        graph, schedule="colouring" if algorithm == "lapvar1" else "sequential"
    )
    prior = dist.Dirichlet(jnp.ones(3)).log_prob

    def log_joint(values):
        out = jnp.log(values["pi"])[None, :]
        for v, c in enumerate(counts):
            out = out + c @ jnp.log(values[f"beta_{v}"]).T
        return out

    def log_prior(values):
        betas = sum(
            dist.Dirichlet(jnp.full(c.shape[1], 1.1))
            .log_prob(values[f"beta_{v}"])
            .sum()
            for v, c in enumerate(counts)
        )
        return prior(values["pi"]) + betas

    phi = jax.nn.softmax(log_joint(values), axis=-1)
    key = jax.random.split(key)[1]  # VEM's loop key
    objective, best, best_obj = [], None, -np.inf
    for t in range(iterations):
        key, sub = jax.random.split(key)
        a = log_joint(values)
        if algorithm == "lapvar1":
            sweep_key = jax.random.split(sub, 1)[0]
            phi = lapvar.lapvar1_sweep(sweep_key, phi, a, table, lam, 10)
            q = lapvar.regularized_objective(phi, a, table, lam)
        else:
            phi, q = lapvar.lapvar2_estep(a, table, lam, gamma, 10)
        obj = float(q + log_prior(values))
        objective.append(obj)
        values = mu.closed_form_m_step(phi, counts)
        improved = t == 0 or obj > best_obj + tolerance * abs(best_obj)
        if algorithm == "lapvar2" and not improved:
            break
        best, best_obj = (values, phi), obj
    return best, np.asarray(objective)


@pytest.mark.parametrize("algorithm", ["lapvar1", "lapvar2"])
def test_lapvar_through_vem_equals_the_loop_written_out(algorithm):
    counts = _counts()
    feats = np.concatenate([np.asarray(c) for c in counts], 1)
    graph = knn_graph(feats, 4, weight="heat", t=3.0)
    start = VEM(mu.mixture_of_unigrams, "z", m_step=mu.closed_form_m_step).init_params(
        jax.random.key(3), counts, num_topics=3
    )
    key = jax.random.key(5)
    tolerance = 1e-6 if algorithm == "lapvar2" else 0.0  # LapVar1 runs every step
    (ref_values, ref_phi), objective = _reference_em(
        key, start, counts, graph, algorithm, 15, tolerance
    )
    # the written-out loop takes lam on the raw graph (no mean-degree scale); the
    # held-out check (two more fits, a warning at most) is not part of the loop
    options = dict(scale="none", heldout_check=False)
    estep = (
        lapvar.LapVar1(graph, 0.7, **options)
        if algorithm == "lapvar1"
        else lapvar.LapVar2(graph, 0.7, **options)
    )
    result = VEM(
        mu.mixture_of_unigrams, "z", m_step=mu.closed_form_m_step, estep=estep
    ).run(
        key,
        15,
        counts,
        num_topics=3,
        init_params=start,
        tolerance=tolerance,
        progress_bar=False,
    )
    np.testing.assert_allclose(
        np.asarray(result.posteriors), np.asarray(ref_phi), atol=1e-5
    )
    for v in range(2):
        np.testing.assert_allclose(
            np.asarray(result.params[f"beta_{v}"]),
            np.asarray(ref_values[f"beta_{v}"]),
            atol=1e-5,
        )
    run = objective.size
    assert np.sum(~np.isnan(result.losses)) == run
    # the same fixed point; mid-run, float32 round-off in two programs can tip a
    # LapVar1 line search the other way
    np.testing.assert_allclose(-result.losses[run - 1], objective[run - 1], rtol=1e-5)
    np.testing.assert_allclose(-result.losses[:run], objective[:run], rtol=1e-3)


def test_chunks_and_progress_bar_do_not_change_the_fit():
    # 60 images: 9 chunks of 7, the last padded; one chunk at the default size (and
    # the compiled fit of the max-margin tests' plain VEM, equal to this one)
    x, tags, _ = _toy(n=60)
    closed = gauss_tag_closed_form
    whole = VEM(gauss_tag_mixture, "z", m_step=closed)
    chunked = VEM(gauss_tag_mixture, "z", chunk_size=7, m_step=closed)
    a = whole.run(jax.random.key(0), 8, x, tags, num_topics=3, progress_bar=False)
    b = chunked.run(jax.random.key(0), 8, x, tags, num_topics=3, progress_bar=True)
    np.testing.assert_allclose(a.losses, b.losses, rtol=1e-5)
    np.testing.assert_allclose(
        np.asarray(a.posteriors), np.asarray(b.posteriors), atol=1e-5
    )


def test_a_second_run_compiles_nothing(count_compiles):
    counts = _counts()
    graph = knn_graph(np.concatenate([np.asarray(c) for c in counts], 1), 4)
    vem = VEM(
        mu.mixture_of_unigrams,
        "z",
        m_step=mu.closed_form_m_step,
        estep=lapvar.LapVar1(graph, 1.0),
    )
    vem.run(jax.random.key(0), 3, counts, num_topics=3, progress_bar=False)
    other = _counts(seed=9)
    # a new graph of the same shape and a new weight reuse the compiled fit
    vem = VEM(  # a new VEM, equal to the first: it shares the compiled fit
        mu.mixture_of_unigrams,
        "z",
        m_step=mu.closed_form_m_step,
        estep=lapvar.LapVar1(graph, 0.5),
    )
    # the graph is of the first counts: held out over every image of the other
    # counts (five folds), its neighbours predict them worse than the prior
    with count_compiles() as c, pytest.warns(UserWarning, match="says nothing"):
        vem.run(jax.random.key(1), 3, other, num_topics=3, progress_bar=False)
        vem.run(jax.random.key(2), 3, other, num_topics=3, progress_bar=True)
    assert c.count == 0


def test_max_margin_term_separates_the_classes():
    x, tags, z = _toy(seed=4, n=60, k=3)
    labels = jnp.asarray(z, jnp.int32)
    plain = VEM(gauss_tag_mixture, "z", m_step=gauss_tag_closed_form)
    margin = VEM(
        gauss_tag_mixture,
        "z",
        m_step=gauss_tag_closed_form,
        terms=[MaxMargin(labels, c=1.0, loss="crammer_singer")],
        m_steps=20,
    )
    res = margin.run(jax.random.key(0), 30, x, tags, num_topics=3, progress_bar=False)
    pred = np.asarray(margin.predict(res, x, tags, num_topics=3))
    assert np.mean(pred == np.asarray(z)) > 0.9
    base = plain.run(jax.random.key(0), 30, x, tags, num_topics=3, progress_bar=False)
    assert base.params["terms"] == ()
    with pytest.raises(ValueError, match="no extra terms"):
        plain.predict(base, x, tags, num_topics=3)


def test_bad_models_and_inputs_raise_clear_errors():
    x, tags, _ = _toy(n=10)

    def no_plate(x):
        numpyro.sample("m", dist.Normal(0, 1))

    def continuous_local(x):
        with numpyro.plate("image", x.shape[0]):
            numpyro.sample("z", dist.Normal(0, 1))

    def two_locals(x):
        pi = numpyro.sample("pi", dist.Dirichlet(jnp.ones(2)))
        with numpyro.plate("image", x.shape[0]):
            numpyro.sample("z", dist.Categorical(pi))
            numpyro.sample("h", dist.Gamma(1.0, 1.0))  # not real-valued: refused

    def no_subsample(x):
        pi = numpyro.sample("pi", dist.Dirichlet(jnp.ones(2)))
        with numpyro.plate("image", x.shape[0]):
            z = numpyro.sample("z", dist.Categorical(pi))
            numpyro.sample("x", dist.Normal(1.0 * z, 1.0), obs=x[:, 0])  # not via plate

    with pytest.raises(ValueError, match="no plate 'image'"):
        VEM(no_plate).run(jax.random.key(0), 1, x)
    with pytest.raises(ValueError, match="must be Categorical"):
        VEM(continuous_local).run(jax.random.key(0), 1, x)
    with pytest.raises(ValueError, match=r"also has \['h'\]"):
        VEM(two_locals).run(jax.random.key(0), 1, x)
    with pytest.raises(ValueError, match="no site 'w'"):
        VEM(two_locals, local_site="w").run(jax.random.key(0), 1, x)
    with pytest.raises(ValueError, match="numpyro.subsample"):
        VEM(no_subsample, chunk_size=4).run(jax.random.key(0), 1, x)
    with pytest.raises(TypeError, match="m_step must be a callable"):
        VEM(gauss_tag_mixture, m_step="fast")
    graph = knn_graph(np.asarray(x), 3)
    with pytest.raises(ValueError, match="9 nodes but plate 'image' has 10"):
        small = knn_graph(np.asarray(x)[:9], 3)
        VEM(gauss_tag_mixture, estep=lapvar.LapVar1(small, 1.0)).run(
            jax.random.key(0), 1, x, tags, num_topics=2
        )
    # without the held-out check (two fits run before the start is read)
    with pytest.raises(ValueError, match="lacks the global sites"):
        VEM(
            gauss_tag_mixture, estep=lapvar.LapVar1(graph, 1.0, heldout_check=False)
        ).run(jax.random.key(0), 1, x, tags, num_topics=2, init_params={"pi": None})


def test_an_emptied_topic_keeps_the_objective_finite():
    # two true topics fitted with eight: most topics lose every image, pi_k -> 0 under
    # the Dirichlet(1) prior (numpyro's Dirichlet log density would be log 0 * 0 = NaN)
    rng = np.random.default_rng(0)
    z = rng.integers(2, size=12)
    beta = np.array([[0.9, 0.05, 0.03, 0.02], [0.02, 0.03, 0.05, 0.9]])
    counts = (
        jnp.asarray(np.stack([rng.multinomial(30, beta[k]) for k in z]), jnp.float32),
    )
    vem = VEM(mu.mixture_of_unigrams, "z", m_step=mu.closed_form_m_step)
    with pytest.warns(EmptyComponentWarning, match="components with less than"):
        result = vem.run(
            jax.random.key(0), 40, counts, num_topics=8, progress_bar=False
        )
    assert float(result.params["pi"].min()) < 1e-20  # a topic did empty
    assert np.all(np.isfinite(result.losses))
    assert np.all(np.diff(result.losses) <= 1e-5 * np.abs(result.losses[1:]))


def test_max_margin_term_with_the_dual_solver_is_refit_exactly():
    x, tags, z = _toy(seed=4, n=60, k=3)
    term = MaxMargin(jnp.asarray(z, jnp.int32), c=1.0, solver="dual")
    vem = VEM(gauss_tag_mixture, "z", m_step=gauss_tag_closed_form, terms=[term])
    res = vem.run(jax.random.key(0), 10, x, tags, num_topics=3, progress_bar=False)
    # after the last M-step the weights are the exact SVM on the posteriors they saw
    again = term.dual_update(res.posteriors, term.init(jax.random.key(1), 3))
    np.testing.assert_allclose(
        float(term.objective(res.params["terms"][0], res.posteriors)),
        float(term.objective(again, res.posteriors)),
        rtol=1e-4,
    )
    pred = np.asarray(vem.predict(res, x, tags, num_topics=3))
    assert np.mean(pred == np.asarray(z)) > 0.9
