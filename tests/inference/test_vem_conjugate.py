"""The closed-form M-step of Dirichlet and Beta sites in VEM's generic M-step
(:mod:`jaxannot.inference.vem.conjugate`, issue 48 point 4), checked against the
conjugate updates written out in NumPy. Dawid–Skene's Dirichlet sites against a
reference EM: ``test_vem_data_values.py``."""

import numpy as np
import pytest
from scipy.special import logsumexp

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist

from jaxannot.inference import VEM

ALPHA, BETA = 2.0, 3.0  # the Beta prior of p: alpha > 1, so the prior counts too


def model(x, y, *, k):
    """Issue 43's Bernoulli mixture with a Gaussian covariate, proper priors."""
    pi = numpyro.sample("pi", dist.Dirichlet(jnp.full(k, 2.0)))
    with numpyro.plate("component", k):
        p = numpyro.sample("p", dist.Beta(ALPHA, BETA).expand([x.shape[1]]).to_event(1))
        m = numpyro.sample("m", dist.Normal(0.0, 5.0))
    with numpyro.plate("item", x.shape[0]):
        z = numpyro.sample("z", dist.Categorical(pi))
        numpyro.sample("x", dist.Bernoulli(p[z]).to_event(1), obs=x)
        numpyro.sample("y", dist.Normal(m[z], 1.0), obs=y)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    z = rng.integers(0, 3, 30)
    x = (rng.uniform(size=(30, 4)) < rng.uniform(size=(3, 4))[z]).astype(np.float32)
    y = (2.0 * z + rng.normal(size=30)).astype(np.float32)
    start = {
        "pi": np.array([0.5, 0.3, 0.2], np.float32),
        "p": rng.uniform(0.2, 0.8, (3, 4)).astype(np.float32),
        "m": np.array([-1.0, 1.0, 3.0], np.float32),
    }
    return x, y, start


def _posteriors(x, y, start):
    """Exact posteriors of z under ``start`` (float64)."""
    p, pi, m = (np.asarray(start[k], np.float64) for k in ("p", "pi", "m"))
    a = np.log(pi) + x @ np.log(p).T + (1 - x) @ np.log1p(-p).T
    a = a - 0.5 * (y[:, None] - m) ** 2
    return np.exp(a - logsumexp(a, axis=1, keepdims=True))


def test_one_m_step_gives_the_dirichlet_and_beta_sites_their_map(data):
    x, y, start = data
    vem = VEM(model, "z", plate="item")
    fit = vem.run(jax.random.key(0), 1, x, y, k=3, init_params=start)
    phi = _posteriors(x, y, start)
    n = phi.sum(0)
    p = (phi.T @ x + ALPHA - 1) / (n[:, None] + ALPHA + BETA - 2)
    np.testing.assert_allclose(fit.params["p"], p, atol=2e-6)
    np.testing.assert_allclose(fit.params["pi"], (n + 1) / (n.sum() + 3), atol=2e-6)
    # m has no closed form here: it took the optax steps
    assert np.all(np.asarray(fit.params["m"]) != start["m"])
