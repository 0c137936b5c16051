"""Compiled VEM programs are keyed by value, not identity (issue 43, point 1).

An optax optimizer, a :class:`~jaxannot.inference.MaxMargin` term, a
``functools.partial`` model or a model defined inside the fitting function, built
anew for the second fit with equal values, reuses the first fit's programs: the
second fit compiles nothing. Values that differ still get programs of their own."""

import functools

import numpy as np

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
import optax

from jaxannot.inference import VEM, MaxMargin
from jaxannot.runtime.static_key import Identity, value_key


def mixture(x, *, k, scale=1.0):
    pi = numpyro.sample("pi", dist.Dirichlet(jnp.ones(k)))
    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0).expand([k, x.shape[1]]).to_event(2))
    with numpyro.plate("image", x.shape[0]):
        z = numpyro.sample("z", dist.Categorical(pi))
        x_i = numpyro.subsample(x, event_dim=1)
        numpyro.sample("x", dist.Normal(mu[z], scale).to_event(1), obs=x_i)


def _data(n=24):
    rng = np.random.default_rng(0)
    centers = np.repeat([[-5.0, 0.0], [5.0, 0.0]], n // 2, 0)
    return jnp.asarray(centers + rng.normal(size=(n, 2)), jnp.float32)


def _second_fit_compiles(fit, count_compiles) -> int:
    fit()
    with count_compiles() as compiles:
        fit()
    return compiles.count


def _run(vem, x):
    return vem.run(jax.random.key(0), 2, x, k=2, progress_bar=False)


def test_an_equal_optimizer_built_anew_compiles_nothing(count_compiles):
    x = _data()

    def fit():  # the README's pattern: the optimizer built inside the fit
        return _run(VEM(mixture, "z", optimizer=optax.adam(0.03)), x)

    assert _second_fit_compiles(fit, count_compiles) == 0


def test_an_equal_max_margin_term_built_anew_compiles_nothing(count_compiles):
    x = _data()

    def fit():
        labels = jnp.asarray(np.repeat([0, 1], 12))  # a new array, equal content
        return _run(VEM(mixture, "z", terms=[MaxMargin(labels, c=1.0)]), x)

    assert _second_fit_compiles(fit, count_compiles) == 0


def test_an_equal_partial_model_compiles_nothing(count_compiles):
    x = _data()

    def fit():
        return _run(VEM(functools.partial(mixture, scale=2.0), "z"), x)

    assert _second_fit_compiles(fit, count_compiles) == 0


def test_a_model_defined_inside_the_fit_compiles_nothing(count_compiles):
    x = _data()

    def fit(scale=1.5):
        def model(x, *, k):  # a new closure per call, of the same code and value
            mixture(x, k=k, scale=scale)

        return _run(VEM(model, "z"), x)

    assert _second_fit_compiles(fit, count_compiles) == 0


def test_values_that_differ_get_their_own_keys():
    def closure(scale):
        def model(x, *, k):
            mixture(x, k=k, scale=scale)

        return model

    assert value_key(closure(2.0)) == value_key(closure(2.0))
    assert value_key(closure(2.0)) != value_key(closure(3.0))
    assert value_key(closure(2)) != value_key(closure(2.0))  # they trace apart
    part = functools.partial(mixture, scale=2.0)
    assert value_key(part) == value_key(functools.partial(mixture, scale=2.0))
    assert value_key(part) != value_key(functools.partial(mixture, scale=3.0))
    assert value_key(optax.adam(0.05)) == value_key(optax.adam(0.05))
    assert value_key(optax.adam(0.05)) != value_key(optax.adam(0.1))
    assert value_key(optax.adam(0.05)) != value_key(optax.sgd(0.05))
    assert VEM(part, "z") == VEM(functools.partial(mixture, scale=2.0), "z")
    assert VEM(part, "z") != VEM(functools.partial(mixture, scale=3.0), "z")
    labels = np.array([0, 1, 1, 0, 1])
    assert MaxMargin(labels, c=1.0) == MaxMargin(labels.copy(), c=1.0)
    assert hash(MaxMargin(labels, c=1.0)) == hash(MaxMargin(labels.copy(), c=1.0))
    assert MaxMargin(labels, c=1.0) != MaxMargin(labels, c=2.0)
    assert MaxMargin(labels, c=1.0) != MaxMargin(labels[::-1].copy(), c=1.0)
    # what cannot be read by value is keyed by identity, never shared wrongly
    thing = {1, 2}
    assert value_key(thing) == Identity(thing) != Identity({1, 2})


def test_a_closure_over_another_value_fits_its_own_value():
    x = 3.0 * _data()

    def fit(scale):
        def model(x, *, k):
            mixture(x, k=k, scale=scale)

        start = {"pi": jnp.full(2, 0.5), "mu": jnp.asarray([[-1.0, 0.0], [1.0, 0.0]])}
        state = VEM(model, "z").init(jax.random.key(0), x, k=2, init_params=start)
        return np.asarray(state.posteriors)

    # the posteriors depend on the bound scale: a shared program would repeat them
    assert np.abs(fit(1.0) - fit(4.0)).max() > 0.1
