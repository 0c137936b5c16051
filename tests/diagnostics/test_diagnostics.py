"""arviz diagnostics: dims, Hungarian alignment undoing label switching, NUTS/SVI."""

import numpy as np
import pytest

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
import optax
from numpyro.infer import SVI, Trace_ELBO

from jaxannot import diagnostics
from jaxannot.methods.topic_models import mixture_of_unigrams as mu


def _draws(rng, beta, n=200):
    """Noisy draws around fixed topics [K, V] (a stand-in for posterior draws)."""
    noise = rng.normal(0, 0.01, (n,) + beta.shape)
    return np.clip(beta[None] + noise, 1e-6, None)


def test_match_topics_recovers_a_permutation():
    rng = np.random.default_rng(0)
    beta = rng.dirichlet(np.ones(6), 4)
    perm = np.array([2, 0, 3, 1])
    found = diagnostics.match_topics(beta, beta[perm])
    np.testing.assert_allclose(beta[perm][found], beta)


def test_alignment_makes_rhat_meaningful_under_label_switching():
    rng = np.random.default_rng(1)
    beta = rng.dirichlet(np.ones(8), 3)
    pi = np.array([0.5, 0.3, 0.2])
    perm = np.array([1, 2, 0])
    restarts = [
        {
            "beta_0": _draws(rng, beta),
            "pi": np.tile(pi, (200, 1)) + rng.normal(0, 0.01, (200, 3)),
        },
        {
            "beta_0": _draws(rng, beta[perm]),
            "pi": np.tile(pi[perm], (200, 1)) + rng.normal(0, 0.01, (200, 3)),
        },
    ]
    raw = diagnostics.restarts_to_inference_data(restarts)
    aligned = diagnostics.restarts_to_inference_data(
        restarts, topic_axes={"beta_0": 0, "pi": 0}, reference_site="beta_0"
    )
    for idata in (raw, aligned):
        assert idata.posterior["beta_0"].dims[:2] == ("chain", "draw")
        assert (
            idata.posterior.sizes["chain"] == 2 and idata.posterior.sizes["draw"] == 200
        )
    rhat_raw = float(diagnostics.summary(raw, ["pi"])["r_hat"].max())
    rhat_aligned = float(diagnostics.summary(aligned, ["pi"])["r_hat"].max())
    assert rhat_raw > 1.5  # label switching: the chains disagree on every topic
    assert rhat_aligned < 1.05
    assert aligned.posterior.attrs["topic_permutations"][1] == [2, 0, 1]


def test_nuts_on_the_declaration_gives_chain_draw_dims():
    rng = np.random.default_rng(2)
    beta = np.array([[0.7, 0.2, 0.05, 0.05], [0.05, 0.05, 0.2, 0.7]])
    z = rng.integers(2, size=15)
    counts = np.stack([rng.multinomial(10, beta[k]) for k in z]).astype(np.float32)
    draws = diagnostics.nuts_draws(
        jax.random.key(0),
        mu.mixture_of_unigrams,
        (counts,),
        num_topics=2,
        vocab_sizes=(4,),
        marginalize=True,
        num_warmup=100,
        num_samples=100,
        num_chains=2,
    )
    idata = diagnostics.restarts_to_inference_data(
        [{k: v[c] for k, v in draws.items()} for c in range(2)],
        topic_axes={"beta_0": 0, "pi": 0},
        reference_site="beta_0",
    )
    post = idata.posterior
    assert post["beta_0"].shape == (2, 100, 2, 4)
    summ = diagnostics.summary(idata, ["beta_0"])
    assert float(summ["r_hat"].max()) < 1.1  # after alignment the chains agree
    means = post["beta_0"].mean(("chain", "draw")).values
    perm = diagnostics.match_topics(beta, means)
    assert np.abs(means[perm] - beta).max() < 0.15  # posterior means near the truth


def test_svi_guide_draws_traces_and_topic_posteriors():
    x = jnp.array([0.5, -1.0, 2.0])

    def model(x):
        with numpyro.plate("image", 3):
            z = numpyro.sample("z", dist.Normal(0.0, 1.0))
            numpyro.sample("x", dist.Normal(z, 1.0), obs=x)

    def guide(x):
        loc = numpyro.param("loc", jnp.zeros(3))
        with numpyro.plate("image", 3):
            numpyro.sample("z", dist.Normal(loc, 0.7))

    svi = SVI(
        model, guide, numpyro.optim.optax_to_numpyro(optax.adam(0.05)), Trace_ELBO()
    )
    res = svi.run(jax.random.key(0), 400, x, progress_bar=False)
    draws = diagnostics.guide_draws(
        jax.random.key(1), guide, res.params, x, num_draws=300, num_chains=2
    )
    assert draws["z"].shape == (2, 300, 3)
    # draws reproduce the guide: mean = loc, sd = 0.7 (MC error ~0.03 for 600 draws)
    np.testing.assert_allclose(draws["z"].mean((0, 1)), res.params["loc"], atol=0.1)
    np.testing.assert_allclose(draws["z"].std((0, 1)), 0.7, atol=0.1)
    traces = diagnostics.objective_traces([[1.0, 2.0, 3.0], [1.5, 2.5]])
    obj = traces.sample_stats["objective"]
    assert obj.dims == ("chain", "draw") and np.isnan(obj.values[1, 2])
    phi = diagnostics.topic_posteriors(jnp.array([[0.2, 0.8], [0.6, 0.4]]))
    assert phi.dims == ("image", "topic") and float(phi.sum()) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="images, topics"):
        diagnostics.topic_posteriors(jnp.ones(3))


def test_diagnose_restarts_aligns_topics_of_a_registered_method():
    from jaxannot.data.synthetic import make_synthetic

    corpus = make_synthetic(seed=3, num_images=150, num_topics=4)
    # text weight 1: the synthetic words and visual words weigh alike (at the
    # default 3, cross-validated on Corel5k, one of the 3 restarts ends in another
    # optimum here, aligned L1 0.65)
    hyper = {"topics": 4, "iterations": 40, "text_weight": 1.0}
    out = diagnostics.diagnose_restarts("mix-unigram", corpus, restarts=3, hyper=hyper)
    assert len(out["final_objective"]) == 3
    # restarts find the same well-separated topics in different orders
    assert max(out["aligned_topic_l1"]) < 0.2
    assert max(out["unaligned_topic_l1"]) > max(out["aligned_topic_l1"])
    assert out["traces"].sample_stats["objective"].dims == ("chain", "draw")
    with pytest.raises(ValueError, match="restarts"):
        diagnostics.diagnose_restarts("mix-unigram", corpus, restarts=1)


def test_diagnose_cli(data_root, tmp_path, capsys):
    import json

    from jaxannot.cli.app import main

    out = tmp_path / "d.json"
    code = main(
        [
            "diagnose",
            "mix-unigram",
            "--dataset",
            "corel5k",
            "--data-dir",
            str(data_root),
            "--restarts",
            "2",
            "--set",
            "topics=5",
            "--set",
            "iterations=10",
            "--json",
            str(out),
        ]
    )
    assert code == 0
    assert "aligned topic L1" in capsys.readouterr().out
    payload = json.loads(out.read_text())
    assert payload["restarts"] == 2 and len(payload["permutations"]) == 2
    assert (
        main(
            [
                "diagnose",
                "empirical",
                "--dataset",
                "corel5k",
                "--data-dir",
                str(data_root),
            ]
        )
        == 2
    )  # no topic-word matrix: a one-line error


# ---------------------------------------------------------------- to_inference_data
@pytest.fixture(scope="module")
def vem_restarts():
    """Four 10-step VEM restarts of the mixture of unigrams (K = 3, 30 images);
    seeds 1 and 3 find restart 0's optimum with its topics in another order."""
    from jaxannot.inference.vem.algorithm import VEM

    rng = np.random.default_rng(0)
    z = rng.integers(3, size=30)
    beta = rng.dirichlet(np.full(8, 0.2), size=3)
    counts = np.stack([rng.multinomial(20, beta[k]) for k in z])
    vem = VEM(mu.mixture_of_unigrams, "z", m_step=mu.closed_form_m_step)
    return [
        vem.run(
            jax.random.key(s),
            10,
            (jnp.asarray(counts, jnp.float32),),
            num_topics=3,
            progress_bar=False,
        )
        for s in range(4)
    ]


def test_vem_restarts_are_aligned_chains_on_their_posteriors(vem_restarts):
    import arviz as az
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    idata = diagnostics.to_inference_data(vem_restarts)
    post = idata.posterior
    assert post["beta_0"].dims == ("chain", "draw", "topic", "beta_0_dim_1")
    assert post["beta_0"].shape == (4, 1, 3, 8)
    assert post["z_probs"].dims == ("chain", "draw", "image", "topic")
    perms = np.array(post.attrs["topic_permutations"])
    assert perms[0].tolist() == [0, 1, 2]
    assert (perms != np.arange(3)).any()  # label switching happened
    for r, (fit, p) in enumerate(zip(vem_restarts, perms, strict=True)):
        # the recorded permutation is the one applied, to globals and posteriors
        np.testing.assert_array_equal(post["pi"][r, 0], fit.params["pi"][p])
        np.testing.assert_array_equal(post["z_probs"][r, 0], fit.posteriors[:, p])
    raw = np.stack([np.asarray(f.params["beta_0"]) for f in vem_restarts])
    aligned = post["beta_0"].values[:, 0]
    assert np.abs(raw - raw[0]).max() > 0.1  # unaligned restarts disagree
    assert np.abs(aligned - aligned[0]).max() < 1e-4  # aligned: the same topics
    stats = idata.sample_stats
    assert stats["loss"].dims == ("chain", "draw", "step")
    assert stats["loss"].shape == (4, 1, 10)
    np.testing.assert_allclose(
        stats["final_loss"].values[:, 0], [f.losses[-1] for f in vem_restarts]
    )
    summ = az.summary(idata, var_names=["pi", "beta_0"])
    assert "pi[0]" in summ.index and "beta_0[2, 7]" in summ.index
    assert len(az.summary(idata)) == 3 + 3 * 8 + 30 * 3  # pi, beta_0, z_probs
    axes = az.plot_trace(idata)  # one row per variable: beta_0, pi, z_probs
    assert axes.shape == (3, 2)
    plt.close("all")
    # sites named explicitly; no local posteriors
    only_pi = diagnostics.to_inference_data(
        vem_restarts, topic_axes={"pi": 0}, local_site=None
    )
    assert "z_probs" not in only_pi.posterior
    assert only_pi.posterior["beta_0"].dims[2] == "beta_0_dim_0"  # not permuted
    np.testing.assert_array_equal(only_pi.posterior["beta_0"].values[:, 0], raw)


def test_vem_bad_inputs_are_rejected(vem_restarts):
    from jaxannot.inference.vem.algorithm import VEMResult

    fit = vem_restarts[0]
    one = diagnostics.to_inference_data(fit)  # a single fit is one chain
    assert one.posterior.sizes["chain"] == 1
    with pytest.raises(ValueError, match="empty"):
        diagnostics.to_inference_data([])
    fewer_topics = VEMResult(
        {"pi": fit.params["pi"][:2], "beta_0": fit.params["beta_0"][:2], "terms": ()},
        fit.posteriors[:, :2],
        fit.losses,
    )
    with pytest.raises(ValueError, match="differs in shape"):
        diagnostics.to_inference_data([fit, fewer_topics])
    other_model = VEMResult({"pi": fit.params["pi"]}, fit.posteriors, fit.losses)
    with pytest.raises(ValueError, match="one model"):
        diagnostics.to_inference_data([fit, other_model])
    with pytest.raises(ValueError, match="VEMResult"):
        diagnostics.to_inference_data([fit, {"pi": 1.0}])
    with pytest.raises(ValueError, match="topic axis 1 of site 'beta_0'"):
        diagnostics.to_inference_data(fit, topic_axes={"beta_0": 1})
    with pytest.raises(ValueError, match="not a global site"):
        diagnostics.to_inference_data(fit, topic_axes={"theta": 0})
    with pytest.raises(ValueError, match="SVI"):
        diagnostics.to_inference_data(fit, rng_key=jax.random.key(0))
    with pytest.raises(TypeError, match="VEMResult"):
        diagnostics.to_inference_data(fit.params)


def test_svi_result_to_inference_data_keeps_the_global_sites():
    import arviz as az

    from numpyro.infer.autoguide import AutoNormal

    x = jnp.array([0.5, -1.0, 2.0, 1.5])

    def model(x):
        loc = numpyro.sample("loc", dist.Normal(0.0, 3.0))
        with numpyro.plate("image", x.shape[0]):
            z = numpyro.sample("z", dist.Normal(loc, 1.0))
            numpyro.sample("x", dist.Normal(z, 1.0), obs=x)

    guide = AutoNormal(model)
    svi = SVI(model, guide, numpyro.optim.Adam(0.05), Trace_ELBO())
    res = svi.run(jax.random.key(0), 30, x, progress_bar=False)
    idata = diagnostics.to_inference_data(
        res, guide=guide, model_args=(x,), rng_key=jax.random.key(1), num_draws=50
    )
    assert list(idata.posterior.data_vars) == ["loc"]  # z is per image
    assert idata.posterior["loc"].shape == (1, 50)
    loss = idata.sample_stats["loss"]
    assert loss.dims == ("chain", "draw", "step") and loss.shape == (1, 1, 30)
    np.testing.assert_allclose(loss.values[0, 0], res.losses)
    assert "loc" in az.summary(idata).index
    every = diagnostics.to_inference_data(
        res, guide=guide, model_args=(x,), rng_key=jax.random.key(1), plate=None
    )
    assert every.posterior["z"].shape == (1, 200, 4)
    with pytest.raises(ValueError, match="rng_key"):
        diagnostics.to_inference_data(res, guide=guide, model_args=(x,))
    with pytest.raises(ValueError, match="guide"):
        diagnostics.to_inference_data(res, rng_key=jax.random.key(1))
    keyed = dict(guide=guide, model_args=(x,), rng_key=jax.random.key(1))
    with pytest.raises(ValueError, match="topic axis 0 of site 'loc'"):
        diagnostics.to_inference_data(res, topic_axes={"loc": 0}, **keyed)
    with pytest.raises(ValueError, match="'z', not a kept site"):
        diagnostics.to_inference_data(res, topic_axes={"z": 0}, **keyed)


def test_vem_restarts_with_draws_give_finite_rhat_that_flags_another_optimum():
    import arviz as az
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from jaxannot.inference.vem.algorithm import VEM

    rng = np.random.default_rng(0)
    z = rng.integers(3, size=30)
    beta = rng.dirichlet(np.full(8, 0.2), size=3)
    counts = (
        jnp.asarray(np.stack([rng.multinomial(20, beta[k]) for k in z]), jnp.float32),
    )
    vem = VEM(mu.mixture_of_unigrams, "z", m_step=mu.closed_form_m_step)
    kw = dict(num_topics=3, progress_bar=False)
    fits = vem.run_restarts(jax.random.key(0), 4, 10, counts, num_draws=100, **kw)
    assert np.ptp([f.losses[-1] for f in fits]) < 1e-3  # one optimum, four times
    idata = diagnostics.to_inference_data(fits)
    assert idata.posterior["pi"].shape == (4, 100, 3)
    assert idata.posterior["z_probs"].shape == (4, 100, 30, 3)
    summ = az.summary(idata, var_names=["pi", "beta_0"])
    assert np.isfinite(summ["r_hat"]).all() and np.isfinite(summ["ess_bulk"]).all()
    assert summ["r_hat"].max() < 1.05  # chains of one optimum agree
    assert summ["ess_bulk"].min() > 100  # independent draws: most of the 400 count
    axes = az.plot_trace(idata, var_names=["pi"])
    assert len(axes[0, 1].get_lines()) == 4 * 3  # a trace per chain and topic
    plt.close("all")
    # a restart stopped after one EM iteration sits elsewhere: R-hat says so
    early = vem.run(jax.random.key(9), 1, counts, **kw)
    early = vem.laplace_draws(jax.random.key(1), early, 100, counts, num_topics=3)
    mixed = diagnostics.to_inference_data([*fits[:3], early])
    assert az.summary(mixed, var_names=["beta_0"])["r_hat"].max() > 1.2
    with pytest.raises(ValueError, match="no draws but others do"):
        diagnostics.to_inference_data([fits[0], fits[1]._replace(draws=None)])


def _normal_mean(x):
    """loc | x is Normal: precision 1/9 + n, mean sum(x) / (1/9 + n)."""
    loc = numpyro.sample("loc", dist.Normal(0.0, 3.0))
    with numpyro.plate("image", x.shape[0]):
        numpyro.sample("x", dist.Normal(loc, 1.0), obs=x)


def _two_modes(x):
    """x ~ Normal(loc^2, 0.1): optima at loc = +-2 for x = 4 (the start's sign)."""
    loc = numpyro.sample("loc", dist.Normal(0.0, 3.0))
    with numpyro.plate("image", x.shape[0]):
        numpyro.sample("x", dist.Normal(loc**2, 0.1), obs=x)


def _svi(model):
    from numpyro.infer.autoguide import AutoNormal

    guide = AutoNormal(model)  # init_to_uniform: the key picks the start
    adam = optax.adam(optax.exponential_decay(0.1, 1, 0.99))  # settles at the end
    return SVI(model, guide, numpyro.optim.optax_to_numpyro(adam), Trace_ELBO())


def _idata(svi, fits, x):
    return diagnostics.to_inference_data(
        fits, guide=svi.guide, model_args=(x,), rng_key=jax.random.key(1), num_draws=200
    )


@pytest.fixture(scope="module")
def normal_mean_restarts():
    """Three 400-step SVI restarts of ``_normal_mean`` on four values: the SVI, its
    fits and the data."""
    x = jnp.array([0.5, -1.0, 2.0, 1.5])
    svi = _svi(_normal_mean)
    return svi, diagnostics.svi_restarts(svi, jax.random.key(0), 3, 400, x), x


def test_svi_restarts_are_chains_whose_rhat_compares_their_optima(
    normal_mean_restarts,
):
    import arviz as az

    svi, fits, x = normal_mean_restarts
    idata = _idata(svi, fits, x)
    assert idata.posterior["loc"].shape == (3, 200)  # chains = restarts
    means = idata.posterior["loc"].values.mean(1)
    precision = 1 / 9 + x.size
    np.testing.assert_allclose(means, float(x.sum()) / precision, atol=0.15)
    stats = idata.sample_stats
    assert stats["loss"].shape == (3, 1, 400)
    np.testing.assert_allclose(
        stats["final_loss"].values[:, 0], [f.losses[-1] for f in fits]
    )
    summ = az.summary(idata)
    assert np.isfinite(summ["r_hat"]).all() and np.isfinite(summ["ess_bulk"]).all()
    assert summ.loc["loc", "r_hat"] < 1.05  # one optimum, three times
    assert summ.loc["loc", "ess_bulk"] > 400  # independent draws: most of 600
    # two modes, loc = +-2; fits started on either side stop at either: R-hat says so
    x = jnp.full(4, 4.0)
    svi = _svi(_two_modes)
    fits = [
        svi.run(key, 400, x, progress_bar=False, init_params={"loc_auto_loc": start})
        for key, start in zip(
            jax.random.split(jax.random.key(0)), [1.5, -1.5], strict=True
        )
    ]
    split = _idata(svi, fits, x)
    np.testing.assert_allclose(split.posterior["loc"].values.mean(1), [2, -2], atol=0.1)
    # two chains that share no value: the rank-normalized R-hat is at its ceiling
    assert az.summary(split).loc["loc", "r_hat"] > 1.5


def test_svi_restarts_of_an_autoguide_start_apart():
    """numpyro's autoguides fix their start on the first init; each restart draws
    its own (issue 43): with a zero step size every fit stays at its start."""
    from numpyro.infer.autoguide import AutoDelta, AutoGuideList, AutoNormal

    x = jnp.full(4, 4.0)
    still = numpyro.optim.optax_to_numpyro(optax.sgd(0.0))
    svi = SVI(_two_modes, AutoNormal(_two_modes), still, Trace_ELBO())
    fits = diagnostics.svi_restarts(svi, jax.random.key(0), 3, 1, x)
    assert len({float(f.params["loc_auto_loc"]) for f in fits}) == 3
    guides = AutoGuideList(_two_modes)
    guides.append(AutoDelta(_two_modes))
    svi = SVI(_two_modes, guides, still, Trace_ELBO())
    fits = diagnostics.svi_restarts(svi, jax.random.key(0), 2, 1, x)
    assert len({float(f.params["loc_auto_loc"]) for f in fits}) == 2


def test_svi_restarts_average_out_adams_jitter_and_keep_distinct_optima():
    """At a constant Adam step the last iterates of restarts at one optimum jitter
    more than the guide is wide; their tail averages agree (issue 43)."""
    import arviz as az

    from numpyro.infer.autoguide import AutoNormal

    x = jax.random.normal(jax.random.key(3), (400,)) + 1.0  # posterior sd 0.05
    adam = numpyro.optim.optax_to_numpyro(optax.adam(0.1))
    svi = SVI(_normal_mean, AutoNormal(_normal_mean), adam, Trace_ELBO())
    last = diagnostics.svi_restarts(svi, jax.random.key(4), 3, 400, x, tail_average=0)
    fits = diagnostics.svi_restarts(svi, jax.random.key(4), 3, 400, x)
    # reference: the same steps one by one from the last restart's start
    state = svi.init(jax.random.split(jax.random.key(4), 3)[-1], x)
    step, iterates = jax.jit(svi.update), []
    for _ in range(400):
        state, _ = step(state, x)
        iterates.append(svi.optim.get_params(state.optim_state))
    for fit, tail in ((last[-1], iterates[-1:]), (fits[-1], iterates[200:])):
        mean = jax.tree.map(lambda *p: jnp.mean(jnp.stack(p), 0), *tail)
        for name, value in svi.constrain_fn(mean).items():
            np.testing.assert_allclose(fit.params[name], value, rtol=1e-5)
    rhat = {
        k: az.summary(_idata(svi, f, x)).loc["loc", "r_hat"]
        for k, f in (("last", last), ("average", fits))
    }
    assert rhat["last"] > 1.15 and rhat["average"] < 1.05, rhat  # 1.34, 1.00
    # two optima, loc = +-2: the averages of restarts that split still disagree
    x = jnp.full(4, 4.0)
    adam = numpyro.optim.optax_to_numpyro(optax.adam(0.05))
    svi = SVI(_two_modes, AutoNormal(_two_modes), adam, Trace_ELBO())
    fits = diagnostics.svi_restarts(svi, jax.random.key(1), 3, 300, x)
    locs = [float(f.params["loc_auto_loc"]) for f in fits]
    np.testing.assert_allclose(np.abs(locs), 2.0, atol=0.01)
    assert min(locs) < 0 < max(locs)
    assert az.summary(_idata(svi, fits, x)).loc["loc", "r_hat"] > 1.5


def test_svi_restarts_bad_inputs_are_rejected(vem_restarts, normal_mean_restarts):
    svi, fits, x = normal_mean_restarts
    guide = svi.guide
    with pytest.raises(ValueError, match="num_restarts must be an integer >= 2"):
        diagnostics.svi_restarts(svi, jax.random.key(0), 1, 10, x)
    with pytest.raises(TypeError, match=r"num_steps .* got 2.5 \(float\)"):
        diagnostics.svi_restarts(svi, jax.random.key(0), 2, 2.5, x)
    with pytest.raises(ValueError, match=r"tail_average .* in \[0, 1\], got 1.5"):
        diagnostics.svi_restarts(svi, jax.random.key(0), 2, 10, x, tail_average=1.5)
    with pytest.raises(ValueError, match="pass progress_bar=False"):
        diagnostics.svi_restarts(svi, jax.random.key(0), 2, 10, x, progress_bar=True)
    with pytest.raises(TypeError, match="num_draws"):
        diagnostics.to_inference_data(
            fits, guide=guide, model_args=(x,), rng_key=jax.random.key(1), num_draws=1.5
        )
    with pytest.raises(ValueError, match="every restart must be a VEMResult"):
        diagnostics.to_inference_data([fits[0], vem_restarts[0]])


def _two_components(x):
    """Two component means (topics) and their weights; x are never read."""
    numpyro.sample("locs", dist.Normal(0.0, 3.0).expand([2]).to_event(1))
    numpyro.sample("weights", dist.Dirichlet(jnp.ones(2)))


def test_svi_restarts_with_switched_labels_are_aligned_before_rhat():
    import arviz as az

    from numpyro.infer.autoguide import AutoNormal
    from numpyro.infer.svi import SVIRunResult

    guide = AutoNormal(_two_components)
    SVI(_two_components, guide, numpyro.optim.Adam(0.1), Trace_ELBO()).init(
        jax.random.key(0), None
    )  # sets the guide up; the fits below are built by hand
    fit = {
        "locs_auto_loc": jnp.array([2.0, -2.0]),
        "locs_auto_scale": jnp.array([0.1, 0.1]),
        "weights_auto_loc": jnp.array([1.0]),  # stick-breaking: weights (0.73, 0.27)
        "weights_auto_scale": jnp.array([0.01]),
    }
    switched = dict(fit, locs_auto_loc=fit["locs_auto_loc"][::-1])
    switched["weights_auto_loc"] = -fit["weights_auto_loc"]  # (0.27, 0.73)
    fits = [SVIRunResult(p, None, jnp.zeros(3)) for p in (fit, fit, switched)]
    kw = dict(guide=guide, model_args=(None,), rng_key=jax.random.key(1))
    raw = diagnostics.to_inference_data(fits, **kw)
    assert az.summary(raw, var_names=["locs"])["r_hat"].min() > 1.5
    idata = diagnostics.to_inference_data(
        fits, topic_axes={"locs": 0, "weights": 0}, **kw
    )
    assert idata.posterior.attrs["topic_permutations"] == [[0, 1], [0, 1], [1, 0]]
    np.testing.assert_allclose(
        idata.posterior["weights"].values.mean(1), [[0.73, 0.27]] * 3, atol=0.01
    )
    assert az.summary(idata)["r_hat"].max() < 1.05
    with pytest.raises(ValueError, match="axis 1 of site 'weights' is out of range"):
        diagnostics.to_inference_data(fits, topic_axes={"locs": 0, "weights": 1}, **kw)
