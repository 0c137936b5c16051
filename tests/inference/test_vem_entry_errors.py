"""Mistakes refused in one clear line at construction or at ``run``'s entry (issue
43, point 5): each message names the argument, what was expected and what came,
and the fix; warnings stay under 300 characters."""

import warnings

import numpy as np
import pytest
import scipy.sparse

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
import optax
from numpyro.infer import SVI, TraceEnum_ELBO

from jaxannot.graph import from_scipy
from jaxannot.inference import VEM, LapVar1, LapVar2
from jaxannot.inference.laplacian_elbo import LaplacianELBO
from jaxannot.inference.vem.fit_warnings import EmptyComponentWarning, warn_empty
from jaxannot.methods.topic_models import mixture_of_unigrams as mu

MAX_WARNING = 300


def _counts(n=20):
    rng = np.random.default_rng(0)
    return [jnp.asarray(rng.poisson(2.0, size=(n, 6)), jnp.float32)]


def _vem(**kwargs):
    return VEM(mu.mixture_of_unigrams, "z", m_step=mu.closed_form_m_step, **kwargs)


def _run(vem, counts, key=None, **kwargs):
    key = jax.random.key(0) if key is None else key
    options = dict(num_topics=2, progress_bar=False)
    options.update(kwargs)
    return vem.run(key, 2, counts, **options)


def test_an_optimizer_that_is_not_optax_is_refused_at_construction():
    with pytest.raises(TypeError, match=r"optimizer: expected an optax\..*str 'adam'"):
        _vem(optimizer="adam")
    _vem(optimizer=optax.sgd(0.1))  # accepted


def test_an_int_key_is_refused_at_run_entry():
    with pytest.raises(TypeError, match=r"rng_key: expected one PRNG key, got int 0"):
        _run(_vem(), _counts(), key=0)
    with pytest.raises(TypeError, match=r"pass jax\.random\.key\(0\)"):
        _vem().init(0, _counts(), num_topics=2)


def test_a_negative_tolerance_is_refused_at_run_entry():
    with pytest.raises(ValueError, match=r"tolerance: expected a finite number >= 0"):
        _run(_vem(), _counts(), tolerance=-1)
    with pytest.raises(TypeError, match="tolerance: expected a number"):
        _run(_vem(), _counts(), tolerance="1e-6")


def test_no_images_is_a_value_error_naming_the_argument():
    with pytest.raises(
        ValueError, match=r"positional argument 0\[0\] has shape \[0, 6\]"
    ):
        _run(_vem(), [c[:0] for c in _counts()])


def test_zero_topics_is_a_value_error_naming_the_argument():
    with pytest.raises(ValueError, match="argument 'num_topics' = 0.*num_topics >= 1"):
        _run(_vem(), _counts(), num_topics=0)


def test_a_count_given_as_a_0d_array_asks_for_an_int():
    with pytest.raises(TypeError) as error:
        _run(_vem(), _counts(), num_topics=jnp.array(4))
    message = str(error.value)
    assert message.startswith("argument 'num_topics': expected a Python int")
    assert "num_topics=4 rather than jnp.array(4)" in message
    assert "\n" not in message


def test_many_empty_components_warn_in_few_characters():
    phi = np.zeros((50, 2000), np.float32)
    phi[np.arange(50), np.arange(50) % 4] = 1.0  # 4 used, 1996 empty
    with pytest.warns(EmptyComponentWarning) as record:
        warn_empty(phi)
    message = str(record[0].message)
    assert len(message) < MAX_WARNING, len(message)
    assert "1996 of 2000 components" in message and "(1988 more)" in message
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        warn_empty(np.full((50, 2000), 1 / 2000, np.float32))  # collapsed
    assert len(record) == 1 and len(str(record[0].message)) < MAX_WARNING


def test_lapvar_takes_an_adjacency_matrix_or_refuses_clearly():
    ring = np.roll(np.eye(6), 1, axis=1)
    adjacency = ring + ring.T
    graph = from_scipy(adjacency)
    for kind in (LapVar1, LapVar2):
        expected = kind(graph, 0.5)
        for given in (
            adjacency,
            jnp.asarray(adjacency),
            scipy.sparse.csr_matrix(ring + ring.T),
        ):
            estep = kind(given, 0.5)
            assert (
                estep.num_nodes == 6 and estep.effective_lam == expected.effective_lam
            )
            for a, b in zip(
                jax.tree.leaves(estep.arrays),
                jax.tree.leaves(expected.arrays),
                strict=True,
            ):
                np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert LapVar1(np.eye(200)).num_nodes == 200  # the call: accepted
    with pytest.raises(
        TypeError, match=r"graph: expected a jaxannot\.graph\.Graph.*list"
    ):
        LapVar1([[0, 1], [1, 0]])
    with pytest.raises(ValueError, match=r"graph: adjacency must be symmetric"):
        LapVar1(np.triu(np.ones((3, 3))))


def _enumerated(x):
    loc = numpyro.sample("mu", dist.Normal(0.0, 3.0).expand([2]).to_event(1))
    with numpyro.plate("image", x.shape[0]):
        z = numpyro.sample(
            "z",
            dist.Categorical(probs=jnp.full(2, 0.5)),
            infer={"enumerate": "parallel"},
        )
        numpyro.sample("x", dist.Normal(loc[z], 1.0), obs=x)


def _globals(x):
    loc = numpyro.param("mu_loc", jnp.array([-1.0, 1.0]))
    numpyro.sample("mu", dist.Delta(loc, event_dim=1))


def test_laplacian_elbo_with_a_graph_of_another_size_names_both_sizes():
    pytest.importorskip("funsor")  # numpyro's TraceEnum_ELBO needs funsor
    ring = np.roll(np.eye(9), 1, axis=1)  # 9 nodes for 6 images
    graph = from_scipy(ring + ring.T)  # no k-NN search to compile
    loss = LaplacianELBO(TraceEnum_ELBO(), "z", graph, 1.0)
    svi = SVI(
        _enumerated, _globals, numpyro.optim.optax_to_numpyro(optax.adam(0.05)), loss
    )
    with pytest.raises(ValueError, match=r"graph: expected num_nodes=6 .* got 9"):
        svi.run(jax.random.key(0), 2, jnp.arange(6.0), progress_bar=False)
