"""Batched generalized symmetric eigen-solves against scipy.linalg.eigh(a, b)."""

import numpy as np
import scipy.linalg

import jax.numpy as jnp

from jaxannot.solvers.generalized_eigen import (
    batched_generalized_eigh,
    batched_generalized_eigh_diagonal,
)


def _random_problems(rng, batch, k):
    m = rng.normal(size=(batch, k, k))
    a = m + np.swapaxes(m, 1, 2)
    b_diag = rng.uniform(0.2, 2.0, size=(batch, k))
    r = rng.normal(size=(batch, k, k))
    b_full = r @ np.swapaxes(r, 1, 2) + k * np.eye(k)
    return a, b_diag, b_full


def _check_against_scipy(a, b, values, vectors):
    # tolerance 1e-4 relative: float32 eigh on well-conditioned 8x8 problems
    for i in range(a.shape[0]):
        ref_vals, ref_vecs = scipy.linalg.eigh(a[i], b[i])
        np.testing.assert_allclose(values[i], ref_vals, rtol=1e-4, atol=1e-4)
        # eigenvectors up to sign, both B-orthonormal
        dots = np.abs((vectors[i] * (b[i] @ ref_vecs)).sum(0))
        np.testing.assert_allclose(dots, 1.0, atol=1e-3)
        gram = vectors[i].T @ b[i] @ vectors[i]
        np.testing.assert_allclose(gram, np.eye(a.shape[1]), atol=1e-4)


def test_diagonal_matches_scipy(rng):
    a, b_diag, _ = _random_problems(rng, 4, 8)
    values, vectors = batched_generalized_eigh_diagonal(
        jnp.asarray(a, jnp.float32), jnp.asarray(b_diag, jnp.float32)
    )
    b = np.stack([np.diag(d) for d in b_diag])
    _check_against_scipy(a, b, np.asarray(values), np.asarray(vectors, np.float64))


def test_dense_matches_scipy(rng):
    a, _, b = _random_problems(rng, 3, 8)
    values, vectors = batched_generalized_eigh(
        jnp.asarray(a, jnp.float32), jnp.asarray(b, jnp.float32)
    )
    _check_against_scipy(a, b, np.asarray(values), np.asarray(vectors, np.float64))
