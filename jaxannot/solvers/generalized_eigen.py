"""Batched generalized symmetric eigen-solves ``A g = σ B g``.

Two forms are provided, each written for one problem and ``vmap``-ped over a leading
batch axis (the feature dimensions of ALE, seed 002 eq. 4):

- :func:`generalized_eigh_diagonal` — ``B`` diagonal and positive. The problem reduces
  to the standard symmetric problem ``M v = σ v`` with
  ``M = B^{-1/2} A B^{-1/2}`` and ``g = B^{-1/2} v``; the eigenvectors come out
  ``B``-orthonormal (``Gᵀ B G = I``), as ``scipy.linalg.eigh(a, b)`` returns them.
- :func:`generalized_eigh` — ``B`` dense symmetric positive definite, reduced through
  its Cholesky factor ``B = L Lᵀ``: ``M = L^{-1} A L^{-T}``, ``g = L^{-T} v``.

Eigenvalues are returned in ascending order (the convention of ``jnp.linalg.eigh`` and
``scipy.linalg.eigh``).

References
----------
Golub, G. H. and Van Loan, C. F., *Matrix Computations*, 4th ed., §8.7 (the symmetric-
definite problem), 2013.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.linalg import solve_triangular

__all__ = [
    "generalized_eigh_diagonal",
    "generalized_eigh",
    "batched_generalized_eigh_diagonal",
    "batched_generalized_eigh",
]


def generalized_eigh_diagonal(a: jax.Array, b_diag: jax.Array) -> tuple[jax.Array, ...]:
    r"""Solve ``a g = σ diag(b) g`` for one symmetric ``a`` and positive diagonal ``b``.

    With :math:`S = \mathrm{diag}(b)^{-1/2}`, the symmetric matrix :math:`M = S a S`
    has the same eigenvalues, and :math:`g = S v` for its eigenvectors :math:`v`.

    Parameters
    ----------
    a : Float[Array, "k k"]
        Symmetric matrix (symmetrized again here against round-off).
    b_diag : Float[Array, "k"]
        Strictly positive diagonal of ``B``. The caller guards zeros (e.g. empty
        histogram bins in ALE) — a zero entry makes the problem singular.

    Returns
    -------
    eigenvalues : Float[Array, "k"]
        Ascending.
    eigenvectors : Float[Array, "k k"]
        Column ``j`` is the eigenvector of eigenvalue ``j``, ``B``-orthonormal.
    """
    scale = jax.lax.rsqrt(b_diag)
    m = scale[:, None] * a * scale[None, :]
    m = 0.5 * (m + m.T)
    values, vectors = jnp.linalg.eigh(m)
    return values, scale[:, None] * vectors


def generalized_eigh(a: jax.Array, b: jax.Array) -> tuple[jax.Array, ...]:
    r"""Solve ``a g = σ b g`` for symmetric ``a`` and symmetric positive definite ``b``.

    With the Cholesky factor :math:`b = L L^T`, :math:`M = L^{-1} a L^{-T}` is
    symmetric with the same eigenvalues, and :math:`g = L^{-T} v`.

    Parameters
    ----------
    a, b : Float[Array, "k k"]

    Returns
    -------
    eigenvalues : Float[Array, "k"]
        Ascending.
    eigenvectors : Float[Array, "k k"]
        ``b``-orthonormal columns.
    """
    chol = jnp.linalg.cholesky(0.5 * (b + b.T))
    left = solve_triangular(chol, 0.5 * (a + a.T), lower=True)
    m = solve_triangular(chol, left.T, lower=True)
    m = 0.5 * (m + m.T)
    values, vectors = jnp.linalg.eigh(m)
    return values, solve_triangular(chol.T, vectors, lower=False)


#: ``generalized_eigh_diagonal`` batched: ``a [n, k, k]``, ``b [n, k]``.
batched_generalized_eigh_diagonal = jax.jit(jax.vmap(generalized_eigh_diagonal))

#: ``generalized_eigh`` over a leading batch axis: ``a [n, k, k]``, ``b [n, k, k]``.
batched_generalized_eigh = jax.jit(jax.vmap(generalized_eigh))
