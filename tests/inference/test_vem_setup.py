"""VEM's set-up traces the model on shapes only, never on the full data.

Setting up a fit (structure, chunking, layout, initial values) used to run the model
eagerly on every image; it now traces it under ``jax.eval_shape``. These tests assert
it structurally: every call of the model that sees the full arrays sees tracers."""

import numpy as np

import jax
import jax.numpy as jnp

from jaxannot.graph import knn_graph
from jaxannot.inference import lapvar
from jaxannot.inference.vem.algorithm import VEM
from jaxannot.inference.vem.declaration import inspect_model
from jaxannot.inference.vem.declared import CHUNK_SIZE, ONE_CHUNK, chunk_for
from jaxannot.inference.vem.model_call import ModelCall
from jaxannot.methods.topic_models import mixture_of_unigrams as mu


def _counts(n=24, seed=0):
    rng = np.random.default_rng(seed)
    return (
        jnp.asarray(rng.poisson(1.0, (n, 5)).astype(np.float32)),
        jnp.asarray(rng.poisson(1.0, (n, 7)).astype(np.float32)),
    )


def test_no_model_call_evaluates_the_full_data():
    calls = []

    def model(counts_by_view, **kwargs):
        calls.append(isinstance(counts_by_view[0], jax.core.Tracer))
        return mu.mixture_of_unigrams(counts_by_view, **kwargs)

    counts = _counts()
    graph = knn_graph(np.concatenate([np.asarray(c) for c in counts], 1), 4)
    vem = VEM(
        model,
        "z",
        m_step=mu.closed_form_m_step,
        estep=lapvar.LapVar1(graph, 1.0),
        chunk_size=8,
    )
    result = vem.run(jax.random.key(0), 3, counts, num_topics=3, progress_bar=False)
    assert calls and all(calls), f"{calls.count(False)} eager calls on the data"
    assert np.all(np.isfinite(result.losses))


def test_inspect_reads_the_structure_without_values():
    counts = _counts(n=11)
    s = inspect_model(
        mu.mixture_of_unigrams, "z", "image", (counts,), {"num_topics": 4}
    )
    assert (s.globals_, s.num_images, s.num_values) == (
        ("pi", "beta_0", "beta_1"),
        11,
        4,
    )


def test_the_log_prior_ignores_float32_rounding_off_the_simplex():
    counts = (jnp.ones((6, 300)),)
    vem = VEM(mu.mixture_of_unigrams, "z", m_step=mu.closed_form_m_step)
    setup, _ = vem.declared.setup((counts,), {"num_topics": 2})
    beta = np.full((2, 300), 1 / 300, np.float32)
    beta[:, 0] += 3e-6  # rows sum to 1 + 3e-6, past numpyro's 1e-6 simplex check
    values = {"pi": jnp.array([0.5, 0.5]), "beta_0": jnp.asarray(beta)}
    call = ModelCall(vem.declared, setup, (counts,), {"num_topics": 2})
    assert np.isfinite(call.log_prior(values))


def test_a_small_fit_runs_in_one_chunk_a_large_one_in_chunks_of_1024():
    """``chunk_size=None``: one chunk where the arguments' elements times K are at
    most ``ONE_CHUNK``, else ``CHUNK_SIZE``; a given ``chunk_size`` is kept."""
    small = _counts(n=1500)  # 1500 * 12 elements, times 4 values: one chunk
    setup, _ = VEM(mu.mixture_of_unigrams).declared.setup((small,), {"num_topics": 4})
    assert (setup.chunk, setup.num_chunks) == (1500, 1)
    given = VEM(mu.mixture_of_unigrams, chunk_size=512).declared
    setup, _ = given.setup((small,), {"num_topics": 4})
    assert (setup.chunk, setup.num_chunks) == (512, 3)
    n = ONE_CHUNK // (12 * 4)  # the most images of 12 elements in one chunk

    def shapes(n):
        return tuple(jax.ShapeDtypeStruct((n, c.shape[1]), c.dtype) for c in small)

    assert chunk_for(None, n, 4, shapes(n)) == n
    assert chunk_for(None, n + 1, 4, shapes(n + 1)) == CHUNK_SIZE
    assert chunk_for(None, 100, 4, shapes(100)) == 100
