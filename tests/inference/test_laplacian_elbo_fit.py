"""``fit_laplacian`` (issue 43, point 3): a ``LaplacianELBO`` fit compiled once, its
weight dynamic; ``"auto"`` the loss's default. (``"auto"`` itself, through
``choose_lam``: tests/inference/test_laplacian_elbo_lam.py.)"""

import numpy as np
import pytest

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
import optax
from numpyro.infer import Trace_ELBO, TraceEnum_ELBO

from jaxannot.graph import knn_graph, to_scipy
from jaxannot.inference import LaplacianELBO, fit_laplacian

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


def test_a_second_fit_at_another_weight_compiles_nothing(count_compiles):
    fits, compiled = {}, []
    for lam in (0.7, 0.2):  # new loss, graph and optimizer objects, equal values
        loss = LaplacianELBO(Trace_ELBO(), "z", _chain(), lam)
        with count_compiles() as compiles:
            fits[lam] = fit_laplacian(
                loss, jax.random.key(0), model, guide, optax.adam(0.05), 1500, X
            )
        compiled.append(compiles.count)
    assert compiled[0] > 0 and compiled[1] == 0, compiled
    # each at its own weight: the stationarity condition (1/sd^2 + 1) loc
    # + 4 lam L loc = x (the penalty over ordered pairs), solved directly
    adjacency = to_scipy(_chain()).toarray()
    laplacian = np.diag(adjacency.sum(1)) - adjacency
    for lam, fit in fits.items():
        assert fit.path is None and fit.loss.lams == {"z": lam}
        a = (1 / PRIOR_SD**2 + 1) * np.eye(X.size) + 4 * lam * laplacian
        exact = np.linalg.solve(a, X)
        np.testing.assert_allclose(fit.params["loc"], exact, atol=0.02)
        assert fit.losses.shape == (1500,)


def test_defaults_and_refusals():
    graph = _chain()
    assert LaplacianELBO(TraceEnum_ELBO(), "z", graph).lam == "auto"  # the default
    per_site = LaplacianELBO(TraceEnum_ELBO(), {"z": 0.5}, graph)
    assert per_site.lams == {"z": 0.5} and per_site.lam is None  # a loss already
    with pytest.raises(ValueError, match="one site name"):
        LaplacianELBO(TraceEnum_ELBO(), ["z", "w"], graph)
    auto = LaplacianELBO(Trace_ELBO(), "z", graph)
    with pytest.raises(ValueError, match="fit_laplacian"):
        auto.loss(jax.random.key(0), {}, model, guide, X)
    with pytest.raises(TypeError, match="LaplacianELBO"):
        fit_laplacian(Trace_ELBO(), jax.random.key(0), model, guide, None, 1, X)
    with pytest.raises(ValueError, match="num_steps"):
        fit_laplacian(auto, jax.random.key(0), model, guide, None, 0, X)
