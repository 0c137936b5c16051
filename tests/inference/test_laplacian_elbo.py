"""The generic Laplacian ELBO on a model the library does not ship (declared here)."""

import numpy as np
import pytest

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
import optax
from numpyro.distributions import constraints
from numpyro.infer import SVI, Trace_ELBO

from jaxannot.graph import knn_graph, laplacian_penalty, to_scipy
from jaxannot.inference.laplacian_elbo import (
    LaplacianELBO,
    local_distribution,
    penalty,
)

PRIOR_SD = 3.0
X = np.array([-2.0, 1.5, -0.5, 2.5, 0.0, -1.0, 3.0, 1.0], np.float32)


def model(x):
    """Per-image latent z_i ~ N(0, 3^2), observation x_i ~ N(z_i, 1)."""
    with numpyro.plate("image", x.shape[0]):
        z = numpyro.sample("z", dist.Normal(0.0, PRIOR_SD))
        numpyro.sample("x", dist.Normal(z, 1.0), obs=x)


def guide(x):
    """Normal guide with free locations and a small fixed scale (low-noise ELBO)."""
    loc = numpyro.param("loc", jnp.zeros(x.shape[0]))
    with numpyro.plate("image", x.shape[0]):
        numpyro.sample("z", dist.Normal(loc, 0.01))


def _chain():
    return knn_graph(np.arange(X.size, dtype=np.float32)[:, None], 1, weight="binary")


def _fit(lam, steps=1500):
    loss = LaplacianELBO(Trace_ELBO(), "z", _chain(), lam)
    svi = SVI(model, guide, numpyro.optim.optax_to_numpyro(optax.adam(0.05)), loss)
    result = svi.run(jax.random.key(0), steps, X, progress_bar=False)
    return np.asarray(result.params["loc"])


def test_penalty_matches_graph_module_and_closed_form_optimum():
    g = _chain()
    q = jnp.asarray(X)[:, None]
    np.testing.assert_allclose(
        float(penalty(g, q)), float(laplacian_penalty(g, q)), rtol=1e-6
    )
    lam = 0.7
    loc = _fit(lam)
    # stationarity: (1/sd^2 + 1) loc + 4 lam L loc = x  (penalty over ordered pairs)
    lap = to_scipy(g)
    lap = np.diag(np.asarray(lap.sum(1)).ravel()) - lap.toarray()
    a = (1 / PRIOR_SD**2 + 1) * np.eye(X.size) + 4 * lam * lap
    exact = np.linalg.solve(a, X)
    np.testing.assert_allclose(loc, exact, atol=0.02)  # Adam + 0.01-scale MC noise


def test_neighbours_are_pulled_together_as_lambda_grows():
    g = _chain()
    spreads = [
        float(penalty(g, jnp.asarray(_fit(lam, 800))[:, None]))
        for lam in (0.0, 0.3, 3.0)
    ]
    assert spreads[0] > spreads[1] > spreads[2]
    assert spreads[2] < 0.1 * spreads[0]


def test_local_distribution_of_categorical_and_dirichlet_guides():
    def cat_guide():
        p = numpyro.param(
            "p", jnp.array([[0.2, 0.8], [0.6, 0.4]]), constraint=constraints.simplex
        )
        with numpyro.plate("image", 2):
            numpyro.sample("z", dist.Categorical(p))

    def dir_guide():
        c = numpyro.param(
            "c", jnp.array([[1.0, 3.0], [2.0, 2.0]]), constraint=constraints.positive
        )
        with numpyro.plate("image", 2):
            numpyro.sample("theta", dist.Dirichlet(c))

    key = jax.random.key(0)
    q = local_distribution(key, cat_guide, {}, "z")
    np.testing.assert_allclose(np.asarray(q), [[0.2, 0.8], [0.6, 0.4]], rtol=1e-6)
    q = local_distribution(key, dir_guide, {}, "theta")
    np.testing.assert_allclose(np.asarray(q), [[0.25, 0.75], [0.5, 0.5]], rtol=1e-6)
    with pytest.raises(KeyError, match="theta"):
        local_distribution(key, dir_guide, {}, "zz")
    with pytest.raises(ValueError, match="distance"):
        LaplacianELBO(Trace_ELBO(), "z", _chain(), 1.0, distance="l1")
