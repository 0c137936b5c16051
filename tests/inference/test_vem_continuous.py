"""Real-valued per-item sites (issue 48, point 3): a Laplace local factor in VEM.

The item difficulty and logistic random effects models of Paun et al. (2018),
written as numpyro's annotation example writes them (sizes from the data, ``theta``
decentred by ``LocScaleReparam(0)``), on the data of ``test_vem_data_values.py``.
The references: each item's local maximum found by ``scipy.optimize`` on the log
density written here in NumPy, and its Laplace term from the Hessian in closed
form."""

import importlib.util
import itertools
import pathlib

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import log_softmax, logsumexp

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from numpyro import handlers
from numpyro.infer.reparam import LocScaleReparam
from numpyro.ops.indexing import Vindex

from jaxannot.inference import VEM
from jaxannot.inference.vem.declaration import DeclarationError

ITERATIONS = 30


def _data_module():
    """``test_vem_data_values.py``, whose annotations these tests reuse."""
    path = pathlib.Path(__file__).with_name("test_vem_data_values.py")
    spec = importlib.util.spec_from_file_location("_vem_data_values", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_DATA = _data_module()
POSITIONS = _DATA.POSITIONS


def item_difficulty(annotations):
    """A logit vector per item around its class's mean, ``theta`` decentred."""
    num_classes = int(np.max(annotations)) + 1
    num_items, num_positions = annotations.shape
    with numpyro.plate("class", num_classes):
        eta = numpyro.sample(
            "eta", dist.Normal(0, 1).expand([num_classes - 1]).to_event(1)
        )
        chi = numpyro.sample(
            "Chi", dist.HalfNormal(1).expand([num_classes - 1]).to_event(1)
        )
    pi = numpyro.sample("pi", dist.Dirichlet(jnp.ones(num_classes)))
    with numpyro.plate("item", num_items, dim=-2):
        c = numpyro.sample("c", dist.Categorical(pi), infer={"enumerate": "parallel"})
        with handlers.reparam(config={"theta": LocScaleReparam(0)}):
            theta = numpyro.sample("theta", dist.Normal(eta[c], chi[c]).to_event(1))
            theta = jnp.pad(theta, [(0, 0)] * (jnp.ndim(theta) - 1) + [(0, 1)])
        with numpyro.plate("position", num_positions):
            numpyro.sample("y", dist.Categorical(logits=theta), obs=annotations)


def logistic_random_effects(positions, annotations):
    """Annotator-by-class logits ``beta`` minus an item effect ``theta``."""
    num_annotators = int(np.max(positions)) + 1
    num_classes = int(np.max(annotations)) + 1
    num_items, num_positions = annotations.shape
    with numpyro.plate("class", num_classes):
        zeta = numpyro.sample(
            "zeta", dist.Normal(0, 1).expand([num_classes - 1]).to_event(1)
        )
        omega = numpyro.sample(
            "Omega", dist.HalfNormal(1).expand([num_classes - 1]).to_event(1)
        )
        chi = numpyro.sample(
            "Chi", dist.HalfNormal(1).expand([num_classes - 1]).to_event(1)
        )
    with numpyro.plate("annotator", num_annotators, dim=-2):
        with numpyro.plate("class", num_classes):
            with handlers.reparam(config={"beta": LocScaleReparam(0)}):
                beta = numpyro.sample("beta", dist.Normal(zeta, omega).to_event(1))
                beta = jnp.pad(beta, [(0, 0)] * (jnp.ndim(beta) - 1) + [(0, 1)])
    pi = numpyro.sample("pi", dist.Dirichlet(jnp.ones(num_classes)))
    with numpyro.plate("item", num_items, dim=-2):
        c = numpyro.sample("c", dist.Categorical(pi), infer={"enumerate": "parallel"})
        with handlers.reparam(config={"theta": LocScaleReparam(0)}):
            theta = numpyro.sample("theta", dist.Normal(0, chi[c]).to_event(1))
            theta = jnp.pad(theta, [(0, 0)] * (jnp.ndim(theta) - 1) + [(0, 1)])
        with numpyro.plate("position", num_positions):
            logits = Vindex(beta)[positions, c, :] - theta
            numpyro.sample("y", dist.Categorical(logits=logits), obs=annotations)


def _pad(x):
    return np.concatenate([x, np.zeros(x.shape[:-1] + (1,))], -1)


def _laplace_reference(labels, base, slope, log_prior):
    """``(u_hat, a)`` of one item and class: the maximum of ``f(u) = log N(u; 0, I)
    + sum_j log softmax(base_j + pad(slope * u))[y_j] + log_prior`` (scipy), and
    Laplace's ``f(u_hat) + D/2 log 2 pi - 1/2 log|-H|``."""
    d = slope.size

    def f(u):
        logits = base + _pad(slope * u)
        normal = -0.5 * u @ u - 0.5 * d * np.log(2 * np.pi)
        return normal + log_softmax(logits, -1)[np.arange(len(labels)), labels].sum()

    def grad(u):
        p = np.exp(log_softmax(base + _pad(slope * u), -1))
        return -u + slope * (np.eye(base.shape[1])[labels] - p).sum(0)[:d]

    def minus_hessian(u):
        p = np.exp(log_softmax(base + _pad(slope * u), -1))[:, :d]
        fisher = sum(np.diag(q) - np.outer(q, q) for q in p)
        return np.eye(d) + slope[:, None] * fisher * slope[None, :]

    opt = minimize(
        lambda u: -f(u),
        np.zeros(d),
        jac=lambda u: -grad(u),
        hess=minus_hessian,
        method="trust-exact",
        tol=1e-12,
    )
    u = opt.x
    a = f(u) + log_prior + 0.5 * d * np.log(2 * np.pi)
    return u, a - 0.5 * np.linalg.slogdet(minus_hessian(u))[1]


def _agreement(posteriors, truth):
    pred = np.asarray(posteriors).argmax(1)
    return max(
        float(np.mean(pred == np.asarray(p)[truth]))
        for p in itertools.permutations(range(4))
    )


@pytest.fixture(scope="module")
def data():
    y, truth = _DATA._annotations()
    return np.asarray(y), truth


def _fit(model, args):
    vem = VEM(model, "c", plate="item")
    return vem, vem.run(jax.random.key(0), ITERATIONS, *args, progress_bar=False)


def _check_fit(result, truth):
    objective = -np.asarray(result.losses, np.float64)
    assert np.all(np.isfinite(objective))
    assert np.diff(objective).min() > -1e-3  # float32 round-off only
    assert objective[-1] > objective[0] + 1.0
    assert _agreement(result.posteriors, truth) >= 0.9


# A fit compiles the Newton loop with its Laplace gradient into the E-step, the
# start's L-BFGS and the M-step (~20 s of CPU each): the fits run with -m slow;
# the local maxima below need one compile of ``marginals`` per model.
@pytest.mark.slow
def test_item_difficulty_fits_with_defaults_and_em_never_decreases_it(data):
    _check_fit(_fit(item_difficulty, (data[0],))[1], data[1])


@pytest.mark.slow
def test_logistic_random_effects_fits_with_defaults(data):
    _check_fit(_fit(logistic_random_effects, (POSITIONS, data[0]))[1], data[1])


def _check_local_maxima(found, y, p, base_and_slope):
    """The first three items' local maxima and posteriors against scipy's."""
    for i in range(3):
        us, a = [], []
        for k in range(4):
            base, slope = base_and_slope(k)
            u, ak = _laplace_reference(y[i], base, slope, np.log(p["pi"][k]))
            us.append(u)
            a.append(ak)
        theta = np.asarray(found["theta_decentered"][i]).reshape(4, 3)
        np.testing.assert_allclose(theta, np.array(us), atol=1e-4)
        posterior = np.exp(np.array(a) - logsumexp(a))
        np.testing.assert_allclose(found["c"][i], posterior, atol=1e-4)


def _params(**shapes):
    """Global values away from the origin: positive scales, a simplex ``pi``."""
    rng = np.random.default_rng(0)
    p = {k: rng.normal(size=v) for k, v in shapes.items()}
    p.update({k: rng.uniform(0.5, 1.5, v) for k, v in shapes.items() if k[0].isupper()})
    p["pi"] = rng.dirichlet(np.ones(4))
    return p


def test_item_difficulty_local_maxima_equal_scipy_on_three_items(data):
    y = data[0]
    p = _params(eta=(4, 3), Chi=(4, 3))
    vem = VEM(item_difficulty, "c", plate="item")
    found = vem.marginals({k: jnp.asarray(v) for k, v in p.items()}, y)
    _check_local_maxima(
        found, y, p, lambda k: (np.tile(_pad(p["eta"][k]), (7, 1)), p["Chi"][k])
    )


def test_logistic_random_effects_local_maxima_equal_scipy_on_three_items(data):
    y = data[0]
    p = _params(zeta=(4, 3), Omega=(4, 3), Chi=(4, 3), beta_decentered=(5, 4, 3))
    vem = VEM(logistic_random_effects, "c", plate="item")
    found = vem.marginals({k: jnp.asarray(v) for k, v in p.items()}, POSITIONS, y)

    def base_and_slope(k):
        beta = _pad(p["zeta"][k] + p["Omega"][k] * p["beta_decentered"][:, k])
        return beta[POSITIONS], -p["Chi"][k]

    _check_local_maxima(found, y, p, base_and_slope)


def _nested_theta(annotations):
    pi = numpyro.sample("pi", dist.Dirichlet(jnp.ones(4)))
    with numpyro.plate("item", annotations.shape[0], dim=-2):
        numpyro.sample("c", dist.Categorical(pi))
        with numpyro.plate("position", annotations.shape[1]):
            theta = numpyro.sample("theta", dist.Normal(0.0, 1.0))
            numpyro.sample("y", dist.Normal(theta, 1.0), obs=annotations)


def _positive_theta(annotations):
    pi = numpyro.sample("pi", dist.Dirichlet(jnp.ones(4)))
    with numpyro.plate("item", annotations.shape[0], dim=-2):
        numpyro.sample("c", dist.Categorical(pi))
        numpyro.sample("h", dist.HalfNormal(1.0))
        with numpyro.plate("position", annotations.shape[1]):
            numpyro.sample("y", dist.Categorical(pi), obs=annotations)


def _theta_and_discrete(annotations):
    pi = numpyro.sample("pi", dist.Dirichlet(jnp.ones(4)))
    with numpyro.plate("item", annotations.shape[0], dim=-2):
        numpyro.sample("c", dist.Categorical(pi))
        numpyro.sample("d", dist.Bernoulli(0.5))
        numpyro.sample("theta", dist.Normal(0.0, 1.0))
        with numpyro.plate("position", annotations.shape[1]):
            numpyro.sample("y", dist.Categorical(pi), obs=annotations)


@pytest.mark.parametrize(
    "model, words",
    [
        (_nested_theta, ["['theta'] (Normal)", "item plate only"]),
        (_positive_theta, ["['h'] (HalfNormal)", "real-valued"]),
        (_theta_and_discrete, ["real-valued sites ['theta']", "discrete sites ['d']"]),
    ],
)
def test_continuous_sites_vem_cannot_fit_are_refused_by_name(model, words, data):
    y = jnp.asarray(data[0])
    with pytest.raises(DeclarationError) as error:
        VEM(model, "c", plate="item").marginals({"pi": jnp.ones(4) / 4}, y)
    for word in words:
        assert word in str(error.value)
