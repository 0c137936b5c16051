"""``LaplacianELBO`` adds its base's site terms in one order in every process.

numpyro's ``Trace_ELBO`` sums the sites in the order of a Python ``set`` of their
names, which string hashing (``PYTHONHASHSEED``) changes from process to process; a
fit's recorded loss then differed in its last bit between two runs. Three factor
sites whose sum depends on the order in float32 (``(1e8 + 1) - 1e8`` is 0, ``(1e8 -
1e8) + 1`` is 1) show it: the loss is evaluated in child processes with different
hash seeds and must be the same, and equal to the sum in sorted name order (this
process and a child with ``PYTHONHASHSEED=0``, which added them in another order).
"""

import os
import subprocess
import sys

import numpy as np

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from numpyro.infer import Trace_ELBO

from jaxannot.graph import knn_graph
from jaxannot.inference.laplacian_elbo import LaplacianELBO

_HERE = os.path.dirname(os.path.abspath(__file__))


def model():
    with numpyro.plate("image", 3):
        numpyro.sample("z", dist.Normal(0.0, 1.0))
    numpyro.factor("big", jnp.float32(1e8))
    numpyro.factor("minus_big", jnp.float32(-1e8))
    numpyro.factor("one", jnp.float32(1.0))


def guide():
    with numpyro.plate("image", 3):
        numpyro.sample("z", dist.Delta(jnp.zeros(3)))


def loss() -> float:
    """The penalized loss (``lam = 0``: the base's alone) of ``model`` / ``guide``."""
    graph = knn_graph(jnp.arange(3.0)[:, None], 1)
    elbo = LaplacianELBO(Trace_ELBO(), "z", graph, lam=0.0)
    return float(elbo.loss(jax.random.key(0), {}, model, guide))


def _child_loss(hash_seed: str) -> float:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "JAX_PLATFORMS": "cpu"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [_HERE, env.get("PYTHONPATH")]))
    code = "import test_laplacian_elbo_order as t; print(repr(t.loss()))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


def test_the_loss_is_the_same_under_any_string_hashing():
    here, child = loss(), _child_loss("0")
    # sorted names: big, minus_big, one, z -> ((1e8 - 1e8) + 1) + log p(z = 0)
    # (the Delta guide's log q is 0); another order loses the 1 or log p(z) in 1e8
    expected = -(1.0 + 3 * -0.5 * np.log(2 * np.pi))
    assert here == child, (here, child)
    np.testing.assert_allclose(here, expected, rtol=1e-6)
