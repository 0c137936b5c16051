"""The closed-form M-step of Dirichlet and Beta sites and the Newton step of Normal
ones in VEM's generic M-step (:mod:`jaxannot.inference.vem.conjugate`, issue 48
point 4; :mod:`jaxannot.inference.vem.newton`, issue 43 point 2), checked against
the conjugate updates written out in NumPy, the optax M-step and scipy.
Dawid–Skene's Dirichlet sites against a reference EM: ``test_vem_data_values.py``."""

import importlib
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.optimize
from scipy.special import logsumexp

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
import optax

from jaxannot.inference import VEM
from jaxannot.inference.vem import fit, initial
from jaxannot.inference.vem.conjugate import conjugate_sites, conjugate_update
from jaxannot.inference.vem.layout import Whole
from jaxannot.inference.vem.m_step import optax_steps
from jaxannot.inference.vem.newton import newton_update

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


def test_the_dirichlet_and_beta_sites_get_their_map_given_the_posteriors(data):
    x, y, start = data
    vem = VEM(model, "z", plate="item")
    setup, dynamic = vem.declared.setup((x, y), {"k": 3})
    whole = Whole(setup)
    assert (
        conjugate_sites(VEM(model, "z", plate="item", conjugate=False), whole, ()) == {}
    )
    found = []

    @jax.jit
    def update(values, phi, dynamic):  # as in the M-step: the sites read at trace time
        found.append(conjugate_sites(vem, whole, dynamic))
        return conjugate_update(vem.declared, whole, values, phi, dynamic, found[0])

    phi = _posteriors(x, y, start)
    proposal, kept = update(start, jnp.asarray(phi, jnp.float32), dynamic)
    assert found == [{"pi": "dirichlet", "p": "beta", "m": "normal"}]
    assert all(bool(k) for k in kept.values()) and set(kept) == {"pi", "p", "m"}
    n = phi.sum(0)
    p = (phi.T @ x + ALPHA - 1) / (n[:, None] + ALPHA + BETA - 2)
    np.testing.assert_allclose(proposal["p"], p, atol=2e-6)
    np.testing.assert_allclose(proposal["pi"], (n + 1) / (n.sum() + 3), atol=2e-6)
    # Normal(0, 5) prior, unit-variance Normal likelihood: the posterior mean
    np.testing.assert_allclose(proposal["m"], phi.T @ y / (n + 1 / 25), atol=2e-5)


def test_normal_sites_past_the_newton_limit_take_the_optax_steps(data):
    """At most ``MAX_COORDINATES`` Normal coordinates get Newton steps (each costs
    a pass of the log joint): ``m`` of 17 components is left to the optax steps."""
    x, y, _ = data
    vem = VEM(model, "z", plate="item")
    found = []
    for k in (16, 17):
        setup, dynamic = vem.declared.setup((x, y), {"k": k})
        whole = Whole(setup)
        jax.jit(  # as in the M-step: read at trace time
            lambda dynamic, whole=whole: found.append(
                conjugate_sites(vem, whole, dynamic).get("m")
            )
        )(dynamic)
    assert found == ["normal", None]


def _scipy_maximum(fun, x0):
    """scipy's L-BFGS-B on ``-fun`` (float32 values, JAX gradients)."""

    def negative(v):
        value, grad = jax.value_and_grad(fun)(jnp.asarray(v, jnp.float32))
        return -float(value), -np.asarray(grad, np.float64)

    return scipy.optimize.minimize(negative, x0, jac=True, method="L-BFGS-B").x


def test_the_normal_sites_newton_step_finds_what_optax_and_scipy_find(data):
    """The Normal site's M-step objective, quadratic here: Newton's proposal is its
    maximum, the one the optax M-step reaches with many steps and scipy finds."""
    x, y, start = data
    vem = VEM(model, "z", plate="item")
    setup, dynamic = vem.declared.setup((x, y), {"k": 3})
    whole = Whole(setup)
    phi = jnp.asarray(_posteriors(x, y, start), jnp.float32)
    values = {k: jnp.asarray(v) for k, v in start.items()}

    def expected(m):
        return whole.expected(vem.declared, {**values, "m": m}, phi, dynamic)

    newton = jax.jit(newton_update, static_argnums=0)(
        lambda v: expected(v["m"]), {"m": values["m"]}
    )["m"]
    adam = SimpleNamespace(optimizer=optax.adam(0.05), m_steps=3000)
    opt_state = adam.optimizer.init(values["m"])
    by_optax, _ = jax.jit(
        lambda m, state: optax_steps(adam, lambda u: -expected(u), m, state)
    )(values["m"], opt_state)
    np.testing.assert_allclose(newton, by_optax, atol=1e-3)
    np.testing.assert_allclose(newton, _scipy_maximum(expected, start["m"]), atol=1e-3)
    assert not np.allclose(newton, start["m"], atol=0.1)  # it moved


def test_newton_steps_reach_a_concave_maximum_and_skip_a_convex_one():
    """A logistic regression's weights with a Normal prior (concave, not quadratic):
    the Newton steps reach scipy's maximum; on a convex function (no maximum) the
    values stay."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(50, 3)).astype(np.float32)
    sign = np.where(rng.uniform(size=50) < 0.5, 1.0, -1.0).astype(np.float32)

    def log_posterior(w):
        return jnp.sum(jax.nn.log_sigmoid(sign * (x @ w))) - 0.5 * jnp.sum(w**2)

    found = newton_update(lambda v: log_posterior(v["w"]), {"w": jnp.zeros(3)})
    np.testing.assert_allclose(
        found["w"], _scipy_maximum(log_posterior, np.zeros(3)), atol=1e-4
    )
    convex = newton_update(lambda v: jnp.sum(v["a"] ** 2), {"a": jnp.ones(2)})
    np.testing.assert_array_equal(convex["a"], np.ones(2, np.float32))


def annotations(y, *, k):
    """The multinomial annotation model (Paun et al. 2018): every global site a
    Dirichlet, the start's posteriors the majority vote (no k-means compiled)."""
    pi = numpyro.sample("pi", dist.Dirichlet(jnp.full(k, 2.0)))
    with numpyro.plate("class", k):
        zeta = numpyro.sample("zeta", dist.Dirichlet(jnp.full(k, 2.0)))
    with numpyro.plate("item", y.shape[0], dim=-2):
        z = numpyro.sample("z", dist.Categorical(pi))
        with numpyro.plate("position", y.shape[1]):
            numpyro.sample("y", dist.Categorical(zeta[z]), obs=y)


def _never_kept(*args):
    proposal = conjugate_update(*args)[0]
    return proposal, dict.fromkeys(proposal, jnp.bool_(False))


def test_a_start_of_conjugate_sites_is_their_closed_form_or_lbfgs(monkeypatch):
    """Every global site conjugate: the default start's M-step is the closed form,
    at the optimum L-BFGS finds from the same posteriors (the start redone by L-BFGS
    where the closed form is not kept, here always)."""
    y = np.random.default_rng(0).integers(0, 3, (30, 5)).astype(np.int32)
    key = jax.random.key(0)
    closed = VEM(annotations, "z", plate="item").init_params(key, y, k=3)

    for module in (initial, fit):  # the start's M-step and the loop's
        monkeypatch.setattr(module, "conjugate_update", _never_kept)
    vem = VEM(annotations, "z", plate="item", chunk_size=1000)  # compiled anew
    by_lbfgs = vem.init_params(key, y, k=3)
    state = vem.init(key, y, k=3)  # its start: from the first key init splits
    again = vem.init_params(jax.random.split(key)[0], y, k=3)
    for site in ("pi", "zeta"):
        assert not np.array_equal(closed[site], by_lbfgs[site])
        np.testing.assert_allclose(closed[site], by_lbfgs[site], atol=1e-3)
        np.testing.assert_array_equal(state.params[site], again[site])


def test_a_closed_form_not_kept_mid_fit_redoes_the_fit_with_the_full_step(
    monkeypatch,
):
    """Every global site conjugate: the compiled loop has no optax M-step; an
    iteration whose closed form is not kept (here: never) stops it, and the fit is
    redone with the full step, the generic M-step's optax steps where needed. The
    start, as in the test above (its programs)."""
    y = np.random.default_rng(0).integers(0, 3, (30, 5)).astype(np.int32)
    for module in (initial, fit):  # the start's M-step and the loop's
        monkeypatch.setattr(module, "conjugate_update", _never_kept)
    loops = []
    run_module = importlib.import_module("jaxannot.inference.vem.run")
    run_steps = run_module.run_steps

    def counted(step, *args, **kwargs):
        loops.append(step)
        return run_steps(step, *args, **kwargs)

    monkeypatch.setattr(run_module, "run_steps", counted)
    vem = VEM(annotations, "z", plate="item", chunk_size=1000)
    result = vem.run(jax.random.key(0), 3, y, k=3, progress_bar=False)
    assert len(loops) == 2 and loops[0] is not loops[1]  # conjugate-only, full
    objective = -np.asarray(result.losses)
    assert np.all(np.isfinite(objective)) and np.all(np.diff(objective) >= -1e-3)
