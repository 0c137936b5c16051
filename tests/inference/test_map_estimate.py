import numpy as np
import pytest

import jax
import numpyro
import numpyro.distributions as dist
import optax
from numpyro.distributions import constraints
from numpyro.infer import init_to_value

from jaxannot.inference.map_estimate import MAP


def normal_mean(y, prior_mean, prior_scale):
    mu = numpyro.sample("mu", dist.Normal(prior_mean, prior_scale))
    with numpyro.plate("data", y.shape[0]):
        numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)


def beta_bernoulli(y, a, b):
    p = numpyro.sample("p", dist.Beta(a, b))
    with numpyro.plate("data", y.shape[0]):
        numpyro.sample("y", dist.Bernoulli(probs=p), obs=y)


def test_normal_mean_equals_the_closed_form_map():
    y = np.random.default_rng(0).normal(2.0, 1.0, size=10).astype(np.float32)
    result = MAP(normal_mean, optax.sgd(0.05)).run(
        jax.random.key(0), 500, y, 1.0, 2.0, progress_bar=False
    )
    expected = (1.0 / 4.0 + y.sum()) / (1.0 / 4.0 + y.size)  # precision-weighted
    assert float(result.params["mu"]) == pytest.approx(expected, abs=1e-4)


def test_beta_bernoulli_equals_the_mode_without_jacobian():
    y = np.r_[np.ones(12), np.zeros(8)].astype(np.float32)
    result = MAP(beta_bernoulli, optax.sgd(0.1)).run(
        jax.random.key(0), 1000, y, 3.0, 2.0, progress_bar=False
    )
    # mode of Beta(3 + 12, 2 + 8) is 14/23; with the logit Jacobian it would be 15/25
    assert float(result.params["p"]) == pytest.approx(14 / 23, abs=1e-4)


def test_losses_are_the_negative_log_joint_and_decrease():
    y = np.r_[np.ones(12), np.zeros(8)].astype(np.float32)
    fitter = MAP(beta_bernoulli, optax.sgd(0.1))
    result = fitter.run(
        jax.random.key(0), 50, y, 3.0, 2.0, init_params={"p": 0.2}, progress_bar=False
    )
    start = float(fitter.loss({"p": 0.2}, y, 3.0, 2.0))
    assert result.losses[0] == pytest.approx(start, rel=1e-6)
    assert np.all(np.diff(result.losses) <= 1e-5)
    final = float(fitter.loss(result.params, y, 3.0, 2.0))
    # the loss on its own is another compiled program than the run's loop: its last
    # bit may round the other way (12.9096375 vs 12.9096365 under LLVM's -O0)
    assert final <= result.losses[-1] + 1e-5


def test_a_second_run_compiles_nothing(count_compiles):
    rng = np.random.default_rng(0)
    fitter = MAP(normal_mean, optax.adam(0.1))
    y1, y2 = (rng.normal(size=8).astype(np.float32) for _ in range(2))
    fitter.run(jax.random.key(0), 20, y1, 0.0, 1.0, progress_bar=False)
    with count_compiles() as c:
        second = fitter.run(jax.random.key(1), 20, y2, 0.0, 1.0, progress_bar=True)
    assert c.count == 0
    assert np.isfinite(second.losses).all()


def test_updates_from_init_are_bit_for_bit_the_run():
    y = np.random.default_rng(1).normal(1.0, 1.0, size=9).astype(np.float32)
    fitter = MAP(flat_normal, optax.adam(0.05))
    result = fitter.run(jax.random.key(0), 7, y, progress_bar=False)
    state = fitter.init(jax.random.key(0), y)
    losses = []
    for _ in range(7):
        state, loss = fitter.update(state, y)
        losses.append(loss)
    np.testing.assert_array_equal(np.stack(losses), result.losses)
    for name in ("mu", "sigma"):
        np.testing.assert_array_equal(
            state.unconstrained[name], result.state.unconstrained[name]
        )
    stepped, ran = (jax.tree.leaves(s.opt_state) for s in (state, result.state))
    assert len(stepped) == len(ran) == 5  # adam: count, two moments of two sites
    for a, b in zip(stepped, ran, strict=True):
        np.testing.assert_array_equal(a, b)


def test_an_update_after_a_run_compiles_nothing(count_compiles):
    """The update runs the run's compiled loop, and a run after updates too."""
    rng = np.random.default_rng(2)
    fitter = MAP(normal_mean, optax.adam(0.1))
    y1, y2 = (rng.normal(size=6).astype(np.float32) for _ in range(2))
    result = fitter.run(jax.random.key(0), 5, y1, 0.0, 1.0, progress_bar=False)
    with count_compiles() as c:
        state, loss = fitter.update(result.state, y2, 0.0, 1.0)
        state, loss = fitter.update(state, y2, 0.0, 1.0)
    assert c.count == 0
    assert np.isfinite(loss)
    with count_compiles() as c:
        fitter.run(jax.random.key(1), 5, y2, 0.0, 1.0, progress_bar=False)
    assert c.count == 0


def test_bad_models_and_init_params_raise_clear_errors():
    def all_observed(y):
        numpyro.sample("y", dist.Normal(0.0, 1.0), obs=y)

    def discrete(y):
        k = numpyro.sample("k", dist.Poisson(3.0))
        numpyro.sample("y", dist.Normal(k, 1.0), obs=y)

    y = np.zeros(3, np.float32)
    with pytest.raises(ValueError, match="no latent sample sites"):
        MAP(all_observed).run(jax.random.key(0), 1, y, progress_bar=False)
    with pytest.raises(ValueError, match="discrete"):
        MAP(discrete).run(jax.random.key(0), 1, y, progress_bar=False)
    with pytest.raises(KeyError, match="latent sites: \\['mu'\\]"):
        MAP(normal_mean).run(
            jax.random.key(0), 1, y, 0.0, 1.0, init_params={"sigma": 1.0}
        )


def flat_normal(y):
    """Improper flat priors on the mean (real) and the scale (positive)."""
    mu = numpyro.sample("mu", dist.ImproperUniform(constraints.real, (), ()))
    sigma = numpyro.sample("sigma", dist.ImproperUniform(constraints.positive, (), ()))
    with numpyro.plate("data", y.shape[0]):
        numpyro.sample("y", dist.Normal(mu, sigma), obs=y)


def test_improper_priors_give_the_maximum_likelihood_estimate():
    y = np.random.default_rng(3).normal(2.0, 1.5, size=20).astype(np.float32)
    result = MAP(flat_normal, optax.adam(0.05)).run(
        jax.random.key(0), 4000, y, progress_bar=False
    )
    # the log joint is the log likelihood: the MLE (mean, ddof-0 sd)
    np.testing.assert_allclose(float(result.params["mu"]), y.mean(), rtol=1e-4)
    np.testing.assert_allclose(float(result.params["sigma"]), y.std(), rtol=1e-4)


@pytest.mark.parametrize("num_steps", [0, -3])
def test_fewer_than_one_step_is_a_value_error_as_in_svi(num_steps):
    y = np.zeros(3, np.float32)
    for progress_bar in (False, True):
        with pytest.raises(ValueError, match=f"num_steps must be .* got {num_steps}"):
            MAP(normal_mean).run(
                jax.random.key(0), num_steps, y, 0.0, 1.0, progress_bar=progress_bar
            )


@pytest.mark.parametrize("num_steps", [10.7, 10.0, True, "10"])
def test_a_step_count_that_is_not_an_integer_is_refused(num_steps):
    y = np.zeros(3, np.float32)
    kind = type(num_steps).__name__
    with pytest.raises(TypeError, match=f"num_steps must be an integer.*\\({kind}\\)"):
        MAP(normal_mean).run(jax.random.key(0), num_steps, y, 0.0, 1.0)


def local_normal(y):
    """A global mean and one latent value per image."""
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    with numpyro.plate("image", y.shape[0]):
        z = numpyro.sample("z", dist.Normal(mu, 1.0))
        numpyro.sample("y", dist.Normal(z, 1.0), obs=y)


def test_a_per_image_latent_site_is_refused_unless_the_check_is_off():
    y = np.array([1.0, 2.0, 3.0], np.float32)
    with pytest.raises(ValueError, match=r"\['z'\] are inside plate 'image'.*VEM.*SVI"):
        MAP(local_normal).run(jax.random.key(0), 1, y, progress_bar=False)
    # plate=None: the joint mode, z_i = (y_i + mu) / 2 and mu = sum(z) / (n + 1)
    joint = MAP(local_normal, optax.sgd(0.1), plate=None).run(
        jax.random.key(0), 2000, y, progress_bar=False
    )
    mu = float(joint.params["mu"])
    assert mu == pytest.approx(y.sum() / (y.size + 2), abs=1e-4)
    np.testing.assert_allclose(joint.params["z"], (y + mu) / 2, atol=1e-4)


#: whether each call of :func:`positive_and_simplex` saw its data as values (run op by
#: op) or as a tracer (traced, compiled)
CALLS: list = []


def positive_and_simplex(y, upper):
    CALLS.append(not isinstance(y, jax.core.Tracer))
    scale = numpyro.sample("scale", dist.HalfNormal(2.0).expand([3]).to_event(1))
    weights = numpyro.sample("weights", dist.Dirichlet(np.ones(3, np.float32)))
    bound = numpyro.sample("bound", dist.Uniform(0.0, upper))
    with numpyro.plate("data", y.shape[0]):
        numpyro.sample("y", dist.Normal(weights @ scale * bound, 1.0), obs=y)


def test_a_start_given_for_every_site_does_not_run_the_model_op_by_op():
    """Every site given: the supports come from an abstract trace, and the start,
    the losses and the result are bit for bit those of running the model (the way a
    start that leaves a site to the init strategy still goes)."""
    y = np.linspace(0.0, 2.0, 7).astype(np.float32)
    given = {
        "scale": np.array([0.5, 1.0, 2.0], np.float32),
        "weights": np.array([0.2, 0.3, 0.5], np.float32),
        "bound": np.float32(1.5),
    }
    CALLS.clear()
    fast = MAP(positive_and_simplex, optax.adam(0.05)).run(
        jax.random.key(0), 5, y, 4.0, init_params=given, progress_bar=False
    )
    assert CALLS and not any(CALLS)  # traced only
    CALLS.clear()
    eager = MAP(
        positive_and_simplex,
        optax.adam(0.05),
        init_strategy=init_to_value(values=given),
    ).run(jax.random.key(0), 5, y, 4.0, progress_bar=False)
    assert any(CALLS)  # the strategy's start runs the model
    for name in given:
        np.testing.assert_array_equal(fast.params[name], eager.params[name])
        np.testing.assert_array_equal(
            fast.state.unconstrained[name], eager.state.unconstrained[name]
        )
    np.testing.assert_array_equal(fast.losses, eager.losses)


def test_a_support_that_depends_on_a_site_runs_the_model():
    def dependent(y):
        top = numpyro.sample("top", dist.HalfNormal(1.0))
        low = numpyro.sample("low", dist.Uniform(0.0, top))
        numpyro.sample("y", dist.Normal(low, 1.0), obs=y)

    given = {"top": np.float32(2.0), "low": np.float32(0.5)}
    y = np.float32(0.3)
    _, supports = MAP(dependent)._start(jax.random.key(0), (y,), {}, given)
    assert supports is None  # the interval (0, top) is known by running the model
    result = MAP(dependent).run(
        jax.random.key(0), 3, y, init_params=given, progress_bar=False
    )
    assert 0.0 < float(result.params["low"]) < float(result.params["top"])
