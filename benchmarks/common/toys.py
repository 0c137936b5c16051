"""The numpyro toys of the VEM benchmarks (``benchmarks.scale.first_fit``,
``benchmarks.scale.m_steps``, ``benchmarks.claims.vem_default_start``) and of the
tests of a first fit's cost (``tests/inference/test_vem_compile_cost.py``,
``tests/inference/test_vem_cold_start.py``): each model written once.

The imports are inside the functions: a script that selects a device
(:func:`benchmarks.common.device.use_device`) does so before JAX is used.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol


class Counter(Protocol):
    """A call counter: ``n`` goes up by one each time the model's Python runs."""

    n: int


def bernoulli_covariate_model(calls: Counter | None = None) -> Callable:
    """Issue 43's first model: K components of D Bernoulli features and a
    unit-variance Gaussian covariate per item, plate ``"item"``, classes ``"z"``.

    Parameters
    ----------
    calls : Counter, optional
        Counts the runs of the model's Python (``calls.n += 1`` per run). It is
        held by identity in the model's closure, so counting changes no compiled
        program's key.

    Returns
    -------
    callable
        ``model(x, y, *, k)``, a new function object (nothing compiled for it yet):
        ``x`` (items, D) in {0, 1}, ``y`` (items,).
    """
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    def model(x, y, *, k):
        if calls is not None:
            calls.n += 1
        pi = numpyro.sample("pi", dist.Dirichlet(jnp.ones(k)))
        with numpyro.plate("component", k):
            p = numpyro.sample(
                "p", dist.Beta(1.0, 1.0).expand([x.shape[1]]).to_event(1)
            )
            m = numpyro.sample("m", dist.Normal(0.0, 5.0))
        with numpyro.plate("item", x.shape[0]):
            z = numpyro.sample("z", dist.Categorical(pi))
            x_i = numpyro.subsample(x, event_dim=1)
            y_i = numpyro.subsample(y, event_dim=0)
            numpyro.sample("x", dist.Bernoulli(p[z]).to_event(1), obs=x_i)
            numpyro.sample("y", dist.Normal(m[z], 1.0), obs=y_i)

    return model


def bernoulli_covariate_toy() -> tuple[Callable, tuple[Any, Any]]:
    """Issue 43's first model and data: ``(model, (x, y))``, K = 4 components of
    D = 30 Bernoulli features, 2000 items drawn from it (seed 0) as NumPy float32
    arrays.

    Returns
    -------
    tuple
        :func:`bernoulli_covariate_model` and its data ``(x, y)``.
    """
    import numpy as np

    rng = np.random.default_rng(0)
    probs, means = rng.uniform(0.1, 0.9, (4, 30)), rng.normal(0.0, 3.0, 4)
    z = rng.integers(0, 4, 2000)
    x = (rng.uniform(size=(2000, 30)) < probs[z]).astype(np.float32)
    y = (means[z] + rng.normal(size=2000)).astype(np.float32)
    return bernoulli_covariate_model(), (x, y)


def gaussian_toy() -> tuple[Callable, Any]:
    """The toy's model and data: a K = 6 Gaussian mixture declared in numpyro and
    2000 images of 2 features drawn from it (seed 0); the toy of
    ``benchmarks.scale.first_fit`` and ``benchmarks.scale.m_steps``."""
    import numpy as np

    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    def mixture(x, *, k):
        pi = numpyro.sample("pi", dist.Dirichlet(jnp.ones(k)))
        with numpyro.plate("component", k):
            mu = numpyro.sample(
                "mu", dist.Normal(0.0, 5.0).expand([x.shape[1]]).to_event(1)
            )
        with numpyro.plate("image", x.shape[0]):
            z = numpyro.sample("z", dist.Categorical(pi))
            x_i = numpyro.subsample(x, event_dim=1)
            numpyro.sample("x", dist.Normal(mu[z], 1.0).to_event(1), obs=x_i)

    rng = np.random.default_rng(0)
    centers = rng.normal(0.0, 3.0, (6, 2))
    x = centers[rng.integers(0, 6, 2000)] + rng.normal(size=(2000, 2))
    return mixture, jnp.asarray(x, jnp.float32)
