"""Several discrete sites in VEM's item plate: item-level sites enumerated jointly
with the local site, sites of a nested plate summed element by element, and the
declarations refused (issue 48, point 2). MACE is in test_vem_data_values.py."""

import itertools

import numpy as np
import pytest

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist

from jaxannot.inference import VEM
from jaxannot.inference.vem.declaration import DeclarationError
from jaxannot.inference.vem.enumeration import MAX_ENUMERATED

Y = jnp.array([[1, 0, 1], [0, 0, 1]], jnp.int32)  # 2 items, 3 positions
PARAMS = {
    "pi": jnp.array([0.5, 0.3, 0.2]),
    "rho": jnp.array(0.3),
    "q": jnp.array([0.2, 0.5, 0.9]),
    "table": jnp.array(np.random.default_rng(0).uniform(0.1, 0.9, (3, 2, 2))),
}


def two_levels(y):
    """Item class ``c`` and flag ``d``; a switch ``s`` per position; y ~ table."""
    pi = numpyro.sample("pi", dist.Dirichlet(jnp.ones(3)))
    rho = numpyro.sample("rho", dist.Beta(2.0, 2.0))
    q = numpyro.sample("q", dist.Beta(2.0, 2.0).expand([3]).to_event(1))
    table = numpyro.sample("table", dist.Beta(1.0, 1.0).expand([3, 2, 2]).to_event(3))
    with numpyro.plate("item", y.shape[0], dim=-2):
        c = numpyro.sample("c", dist.Categorical(pi))
        d = numpyro.sample("d", dist.Bernoulli(rho))
        with numpyro.plate("position", y.shape[1]):
            s = numpyro.sample("s", dist.Bernoulli(q[c]))
            numpyro.sample("y", dist.Bernoulli(table[c, d, s]), obs=y)


def _brute_force(y, pi, rho, q, table):
    """Joint posterior of (c, d) [items, 3, 2], of s [items, positions, 2] and the
    log-likelihood, by explicit sums over every (c, d, s_1, ..., s_J) (float64)."""
    y = np.asarray(y)
    pi, rho, q, table = (np.asarray(v, np.float64) for v in (pi, rho, q, table))
    joint = np.zeros((y.shape[0], 3, 2))
    post_s = np.zeros(y.shape + (2,))
    for i, c, d in itertools.product(range(y.shape[0]), range(3), range(2)):
        for s in itertools.product((0, 1), repeat=y.shape[1]):
            p = pi[c] * (rho if d else 1 - rho)
            for j, sj in enumerate(s):
                t = table[c, d, sj]
                p *= (q[c] if sj else 1 - q[c]) * (t if y[i, j] else 1 - t)
            joint[i, c, d] += p
            for j, sj in enumerate(s):
                post_s[i, j, sj] += p
    evidence = joint.sum((1, 2))
    return (
        joint / evidence[:, None, None],
        post_s / evidence[:, None, None],
        np.log(evidence).sum(),
    )


def test_item_level_and_nested_sites_equal_brute_force_enumeration():
    vem = VEM(two_levels, "c", plate="item")
    got = vem.marginals(PARAMS, Y)
    joint, post_s, log_lik = _brute_force(Y, **PARAMS)
    assert sorted(got) == ["c", "c,d", "d", "s"]
    np.testing.assert_allclose(got["c,d"], joint, atol=1e-5)
    np.testing.assert_allclose(got["c"], joint.sum(2), atol=1e-5)
    np.testing.assert_allclose(got["d"], joint.sum(1), atol=1e-5)
    np.testing.assert_allclose(got["s"], post_s, atol=1e-5)
    a = np.asarray(vem.local_log_joint(PARAMS, Y), np.float64)
    top = a.max(1)
    fitted = (top + np.log(np.exp(a - top[:, None]).sum(1))).sum()
    np.testing.assert_allclose(fitted, log_lik, rtol=1e-5)


def nested_in_two_plate_sets(y):
    pi = numpyro.sample("pi", dist.Dirichlet(jnp.ones(2)))
    with numpyro.plate("item", y.shape[0], dim=-3):
        c = numpyro.sample("c", dist.Categorical(pi))
        with numpyro.plate("position", y.shape[1], dim=-2):
            s = numpyro.sample("s", dist.Bernoulli(0.5))
            with numpyro.plate("rater", y.shape[2], dim=-1):
                t = numpyro.sample("t", dist.Bernoulli(0.5))
                numpyro.sample("y", dist.Bernoulli(0.1 + 0.2 * (c + s + t)), obs=y)


def too_many_values(y):
    pi = numpyro.sample("pi", dist.Dirichlet(jnp.ones(4)))
    with numpyro.plate("item", y.shape[0], dim=-2):
        c = numpyro.sample("c", dist.Categorical(pi))
        d = numpyro.sample("d", dist.Categorical(jnp.ones(300) / 300))
        with numpyro.plate("position", y.shape[1]):
            numpyro.sample("y", dist.Bernoulli(0.1 + 0.2 * c + d / 1000), obs=y)


def test_declarations_vem_cannot_enumerate_are_refused_by_name():
    y3 = jnp.zeros((2, 3, 2), jnp.int32)
    with pytest.raises(DeclarationError) as error:
        VEM(nested_in_two_plate_sets, "c", plate="item").marginals(
            {"pi": jnp.ones(2) / 2}, y3
        )
    message = str(error.value)
    assert "'s' in ['position']" in message
    assert "'t' in ['position', 'rater']" in message
    assert "same plates" in message
    with pytest.raises(DeclarationError) as error:
        VEM(too_many_values, "c", plate="item").marginals({"pi": jnp.ones(4) / 4}, Y)
    message = str(error.value)
    assert "4 ('c') x 300 ('d') = 1200" in message
    assert f"MAX_ENUMERATED = {MAX_ENUMERATED}" in message


def test_an_impossible_item_is_named_with_a_nested_site():
    def poisson_switch(counts):
        pi = numpyro.sample("pi", dist.Dirichlet(jnp.ones(2)))
        rate = numpyro.sample("rate", dist.Gamma(2.0, 1.0).expand([2]).to_event(1))
        with numpyro.plate("item", counts.shape[0], dim=-2):
            z = numpyro.sample("z", dist.Categorical(pi))
            with numpyro.plate("position", counts.shape[1]):
                s = numpyro.sample("s", dist.Bernoulli(0.5))
                numpyro.sample("counts", dist.Poisson(rate[z] * (1 + s)), obs=counts)

    counts = jnp.array([[1.0, 2.0], [3.0, 0.0], [2.0, -1.0], [0.0, 1.0]])
    with (
        numpyro.validation_enabled(False),
        pytest.raises(FloatingPointError, match=r"\(image \[2\] of plate .item.\)"),
    ):
        VEM(poisson_switch, "z", plate="item").run(
            jax.random.key(0), 2, counts, progress_bar=False
        )
