"""VEM shaped like numpyro's SVI, and every site and argument a modeller writes.

``init`` / ``update`` / ``run`` and resuming from a result's state; ``numpyro.param``
globals; ``init_params`` checked by name, shape and support; counts that are not
integers; compile counts of a first fit and of a fit of another length; shape errors
of the model named with the arguments."""

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from numpyro.distributions import constraints

from jaxannot.inference import VEM, VEMState
from jaxannot.inference.vem.steps import ExactEStep


def gauss_mixture(x, *, k):
    pi = numpyro.sample("pi", dist.Dirichlet(jnp.ones(k)))
    with numpyro.plate("component", k):
        mu = numpyro.sample(
            "mu", dist.Normal(0.0, 5.0).expand([x.shape[1]]).to_event(1)
        )
    with numpyro.plate("image", x.shape[0]):
        z = numpyro.sample("z", dist.Categorical(pi))
        x_i = numpyro.subsample(x, event_dim=1)
        numpyro.sample("x", dist.Normal(mu[z], 1.0).to_event(1), obs=x_i)


def param_mixture(x, *, k):
    """The same mixture with its means as ``numpyro.param`` (no prior)."""
    pi = numpyro.sample("pi", dist.Dirichlet(jnp.ones(k)))
    mu = numpyro.param("mu", jnp.zeros((k, x.shape[1])))
    with numpyro.plate("image", x.shape[0]):
        z = numpyro.sample("z", dist.Categorical(pi))
        x_i = numpyro.subsample(x, event_dim=1)
        numpyro.sample("x", dist.Normal(mu[z], 1.0).to_event(1), obs=x_i)


#: images of the tests that fit ``VEM(gauss_mixture, "z")`` on a few images: one size,
#: so that one compiled fit (the images are a compiled shape) serves them all
FEW = 60


def _data(n=300, k=3, seed=0):
    rng = np.random.default_rng(seed)
    centers = np.array([[-6.0, 0.0], [0.0, 6.0], [6.0, 0.0]])[:k]
    labels = rng.integers(0, k, n)
    x = centers[labels] + rng.normal(size=(n, 2))
    return jnp.asarray(x, jnp.float32), labels


def test_a_param_global_is_fitted():
    x, labels = _data()
    result = VEM(param_mixture, "z").run(
        jax.random.key(0), 60, x, k=3, progress_bar=False
    )
    mu = np.asarray(result.params["mu"])
    assert not np.allclose(mu, 0.0), "the param site kept its initial value"
    pred = np.asarray(result.posteriors).argmax(1)
    assert adjusted_rand_score(labels, pred) > 0.9


def test_a_param_with_a_constraint_stays_on_it():
    def scaled(x, *, k):
        pi = numpyro.sample("pi", dist.Dirichlet(jnp.ones(k)))
        mu = numpyro.sample("mu", dist.Normal(0.0, 5.0).expand([k, x.shape[1]]))
        sigma = numpyro.param("sigma", jnp.ones(()), constraint=constraints.positive)
        with numpyro.plate("image", x.shape[0]):
            z = numpyro.sample("z", dist.Categorical(pi))
            x_i = numpyro.subsample(x, event_dim=1)
            numpyro.sample("x", dist.Normal(mu[z], sigma).to_event(1), obs=x_i)

    x, _ = _data()
    result = VEM(scaled, "z").run(
        jax.random.key(1), 80, 3.0 * x, k=3, progress_bar=False
    )
    # the data's within-cluster scale is 3: a fitted sigma moves there from 1
    assert 2.0 < float(result.params["sigma"]) < 4.0


def test_init_params_are_checked_by_name_shape_and_support():
    x, _ = _data(n=FEW)
    vem = VEM(gauss_mixture, "z")
    good = {
        "pi": jnp.ones(3) / 3,
        "mu": jnp.asarray([[-6.0, 0.0], [0.0, 6.0], [6.0, 0.0]]),
    }
    with pytest.raises(ValueError, match=r"unknown sites \['means'\].*\['pi', 'mu'\]"):
        vem.run(jax.random.key(0), 2, x, k=3, init_params={**good, "means": 0.0})
    with pytest.raises(ValueError, match="mu has shape \\(2, 2\\), the model's is"):
        vem.run(
            jax.random.key(0), 2, x, k=3, init_params={**good, "mu": jnp.zeros((2, 2))}
        )
    with pytest.raises(ValueError, match="off their sites' supports: pi"):
        vem.run(jax.random.key(0), 2, x, k=3, init_params={**good, "pi": jnp.ones(3)})
    result = vem.run(jax.random.key(0), 2, x, k=3, init_params=good, progress_bar=False)
    assert np.all(np.isfinite(result.losses))


@pytest.mark.parametrize("bad", [10.7, True, "10", None])
def test_counts_must_be_integers(bad):
    x, _ = _data(n=20)
    vem = VEM(gauss_mixture, "z")
    with pytest.raises(TypeError, match="num_steps must be an integer >= 1"):
        vem.run(jax.random.key(0), bad, x, k=3)
    with pytest.raises(TypeError, match="m_steps must be an integer"):
        VEM(gauss_mixture, "z", m_steps=bad)


def test_an_estep_without_the_protocol_is_refused():
    with pytest.raises(TypeError, match="lacks the E-step protocol"):
        VEM(gauss_mixture, "z", estep=lambda phi: phi)
    with pytest.raises(TypeError, match=r"terms\[0\] \(int\) lacks the term protocol"):
        VEM(gauss_mixture, "z", terms=[3])


def test_update_is_one_step_of_run_and_a_state_resumes_a_fit():
    x, _ = _data(n=FEW)
    vem = VEM(gauss_mixture, "z")
    whole = vem.run(jax.random.key(0), 9, x, k=3, progress_bar=False)
    state = vem.init(jax.random.key(0), x, k=3)
    assert isinstance(state, VEMState)
    losses = []
    for _ in range(4):
        state, loss = vem.update(state, x, k=3)
        losses.append(float(loss))
    assert int(state.iteration) == 4
    np.testing.assert_allclose(losses, whole.losses[:4], rtol=1e-5)
    # the update is run's step in run's compiled loop: the same state, bit for bit
    four = vem.run(jax.random.key(0), 4, x, k=3, progress_bar=False).state
    for got, want in zip(jax.tree.leaves(state), jax.tree.leaves(four), strict=True):
        if jnp.issubdtype(got.dtype, jax.dtypes.prng_key):
            got, want = jax.random.key_data(got), jax.random.key_data(want)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    rest = vem.run(jax.random.key(5), 5, x, k=3, init_state=state, progress_bar=False)
    np.testing.assert_allclose(rest.losses, whole.losses[4:], rtol=1e-5)
    np.testing.assert_allclose(
        np.asarray(rest.posteriors), np.asarray(whole.posteriors), atol=1e-5
    )
    assert int(rest.state.iteration) == 9
    with pytest.raises(ValueError, match="init_state's posteriors have shape"):
        vem.run(jax.random.key(0), 2, x[: FEW // 2], k=3, init_state=state)


def test_an_update_after_a_run_compiles_nothing(count_compiles):
    def fresh(x, *, k):  # a model no other test has compiled
        gauss_mixture(x, k=k)

    x, _ = _data(n=FEW)
    vem = VEM(fresh, "z")
    state = vem.run(jax.random.key(0), 3, x, k=3, progress_bar=False).state
    with count_compiles() as update:
        state, loss = vem.update(state, x, k=3)
    assert update.count == 0, f"{update.count} compiles for an update after a run"
    assert int(state.iteration) == 4 and np.isfinite(loss)


def test_first_fit_compiles_few_programs_and_another_length_none(count_compiles):
    def fresh(x, *, k):  # a model no other test has compiled
        gauss_mixture(x, k=k)

    x, _ = _data(n=200)
    with count_compiles() as first:
        VEM(fresh, "z").run(jax.random.key(0), 30, x, k=3, progress_bar=False)
    assert first.count <= 10, f"{first.count} compiles on a first fit"
    with count_compiles() as other:
        VEM(fresh, "z").run(jax.random.key(1), 17, x, k=3, progress_bar=True)
        VEM(fresh, "z").run(jax.random.key(2), 100, x, k=3, progress_bar=False)
    assert other.count == 0, f"{other.count} compiles for another num_steps"


def test_equal_vems_share_their_compiled_fit():
    assert VEM(gauss_mixture, "z") == VEM(gauss_mixture, "z")
    assert VEM(gauss_mixture, "z") != VEM(gauss_mixture, "z", m_steps=2)
    assert VEM(gauss_mixture, "z", estep=ExactEStep()) == VEM(gauss_mixture, "z")


def test_data_of_another_feature_count_is_named():
    x, _ = _data(n=FEW)
    vem = VEM(gauss_mixture, "z")
    fit = vem.run(jax.random.key(0), 3, x, k=3, progress_bar=False)
    wide = jnp.concatenate([x, x], axis=1)
    with pytest.raises(
        ValueError, match=r"mu has shape \(3, 2\), the model's is \(3, 4\)"
    ):
        vem.posteriors_for(fit.params, wide, k=3)


def test_a_mask_of_the_wrong_shape_is_named():
    def masked(x, mask, *, k):
        pi = numpyro.sample("pi", dist.Dirichlet(jnp.ones(k)))
        mu = numpyro.sample("mu", dist.Normal(0.0, 5.0).expand([k, x.shape[1]]))
        with numpyro.plate("image", x.shape[0]):
            z = numpyro.sample("z", dist.Categorical(pi))
            with numpyro.handlers.mask(mask=mask):
                numpyro.sample("x", dist.Normal(mu[z], 1.0).to_event(1), obs=x)

    x, _ = _data(n=12)
    with pytest.raises(ValueError, match=r"positional argument 1 \[7\].*a mask has"):
        VEM(masked, "z").run(jax.random.key(0), 2, x, jnp.ones(7, bool), k=3)


def test_an_observation_outside_its_support_names_the_image_and_site():
    def poisson_mixture(counts, *, k):
        pi = numpyro.sample("pi", dist.Dirichlet(jnp.ones(k)))
        rate = numpyro.sample("rate", dist.Gamma(2.0, 1.0).expand([k]))
        with numpyro.plate("image", counts.shape[0]):
            z = numpyro.sample("z", dist.Categorical(pi))
            c = numpyro.subsample(counts, event_dim=0)
            numpyro.sample("counts", dist.Poisson(rate[z]), obs=c)

    counts = jnp.asarray(np.r_[np.arange(10.0), -1.0, 3.0], jnp.float32)
    with (
        numpyro.validation_enabled(False),
        pytest.raises(
            FloatingPointError,
            match=r"\(image \[10\] of plate .image.: sites \[.counts.\]\)",
        ),
    ):
        VEM(poisson_mixture, "z", m_step=None).run(
            jax.random.key(0),
            2,
            counts,
            k=2,
            progress_bar=False,
            init_params={"pi": jnp.ones(2) / 2, "rate": jnp.ones(2)},
        )
