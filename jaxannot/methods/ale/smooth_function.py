r"""The smooth function of seed 002 eq. (7): graph-smooth detectors from eigenvectors.

With the approximate Laplacian eigenvectors ``U [n, c]`` and their eigenvalues
``Σ = diag(σ)``, a detector ``f = U α`` that agrees with the labels and is smooth on
the graph minimizes

.. math::

    α^T Σ α + \sum_i Λ_{ii} (u_i^T α − y_i)^2,
    \qquad Λ_{ii} = λ \text{ if image } i \text{ is labelled, else } 0,

(the smoothness :math:`f^T L f` of eq. 5 is :math:`α^T Σ α` for ``B``-orthonormal
eigenvectors), whose normal equations are eq. (7):

.. math::

    (Σ + U^T Λ U)\, α = U^T Λ y .

All ``K`` concepts share the matrix, so one factorization solves them together.
A constant column with eigenvalue 0 (the trivial eigenvector of every graph Laplacian)
is appended to ``U`` so ``f`` has a free offset. The sufficient statistics
``Uᵀ Λ U`` and ``Uᵀ Λ y`` are sums over images, accumulated over chunks for streaming
fits; the ``c × c`` solve is done in float64 (the matrix mixes eigenvalues ~1e-3 with
``λ n``-sized Gram entries).

References
----------
Fergus, R., Weiss, Y. and Torralba, A., "Semi-supervised learning in gigantic image
collections", NIPS 2009, eq. (3).
Mantziou, E. et al., IJMIR 2015 (seed 002), eq. (5)–(7).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import scipy.linalg

import jax
import jax.numpy as jnp

if TYPE_CHECKING:
    from jaxannot.types import ArrayLike

__all__ = [
    "SmoothStatistics",
    "init_statistics",
    "accumulate",
    "solve_smooth_function",
    "fit_smooth_function",
    "smooth_scores",
]


class SmoothStatistics(NamedTuple):
    """``gram = Uᵀ Λ U`` and ``rhs = Uᵀ Λ y`` (``U`` with its constant column)."""

    gram: jax.Array  # [c + 1, c + 1]
    rhs: jax.Array  # [c + 1, K]


def _with_constant(u: jax.Array) -> jax.Array:
    return jnp.concatenate([u, jnp.ones((u.shape[0], 1), u.dtype)], axis=1)


def init_statistics(num_eigenvectors: int, num_concepts: int) -> SmoothStatistics:
    c = num_eigenvectors + 1
    return SmoothStatistics(
        jnp.zeros((c, c), jnp.float32), jnp.zeros((c, num_concepts), jnp.float32)
    )


@jax.jit
def accumulate(
    stats: SmoothStatistics, u: jax.Array, y: jax.Array, weight: jax.Array
) -> SmoothStatistics:
    """Add a chunk: ``u [m, c]``, ``y [m, K]``, ``weight [m]`` (λ or 0 per image)."""
    ua = _with_constant(u)
    weighted = ua * weight[:, None]
    return SmoothStatistics(stats.gram + weighted.T @ ua, stats.rhs + weighted.T @ y)


def solve_smooth_function(
    stats: SmoothStatistics, eigenvalues: ArrayLike
) -> np.ndarray:
    """Solve eq. (7) for all concepts: ``α [c + 1, K]`` (last row: the offset)."""
    sigma = np.concatenate(
        [np.maximum(np.asarray(eigenvalues, np.float64), 0.0), [0.0]]
    )
    gram = np.asarray(stats.gram, np.float64)
    matrix = np.diag(sigma) + 0.5 * (gram + gram.T)
    # relative jitter keeps the factorization defined when no image is labelled
    # on some eigenvector's support (σ of the constant column is 0)
    matrix[np.diag_indices_from(matrix)] += 1e-9 * max(np.trace(matrix), 1.0)
    rhs = np.asarray(stats.rhs, np.float64)
    try:
        alpha = scipy.linalg.solve(matrix, rhs, assume_a="pos")
    except (np.linalg.LinAlgError, scipy.linalg.LinAlgWarning):
        # the float32 Gram of a rank-deficient U (fewer labelled images than
        # eigenvectors) can lose definiteness by round-off: least squares instead
        alpha = scipy.linalg.lstsq(matrix, rhs)[0]
    return alpha.astype(np.float32)


def fit_smooth_function(
    u: ArrayLike,
    y: ArrayLike,
    eigenvalues: ArrayLike,
    *,
    lam: float = 100.0,
    labelled: ArrayLike | None = None,
) -> np.ndarray:
    """Eq. (7) on in-memory ``u [n, c]``, labels ``y [n, K]`` (``{0,1}`` → ``±1``).

    Parameters
    ----------
    u : array [n, c]
        Approximate eigenvectors of the images.
    y : array [n, K]
        Concept indicators (positive where > 0).
    eigenvalues : array [c]
        ``σ`` of the columns of ``u``.
    lam : float
        ``λ`` (seed 002 uses 100).
    labelled : bool array [n], optional
        Which images carry labels (``Λ_ii = λ``); all by default.

    Returns
    -------
    alpha : array [c + 1, K]
    """
    if lam <= 0:
        raise ValueError(f"lam must be positive, got {lam}")
    u = jnp.asarray(u, jnp.float32)
    y = jnp.where(jnp.asarray(y) > 0, 1.0, -1.0).astype(jnp.float32)
    if y.ndim == 1:
        y = y[:, None]
    if labelled is None:
        labelled = np.ones(u.shape[0], bool)
    weight = jnp.asarray(np.asarray(labelled, np.float32) * lam)
    stats = accumulate(init_statistics(u.shape[1], y.shape[1]), u, y, weight)
    return solve_smooth_function(stats, eigenvalues)


def smooth_scores(u: ArrayLike, alpha: ArrayLike) -> jax.Array:
    """``f = [U, 1] α``, ``[n, K]``."""
    return _with_constant(jnp.asarray(u, jnp.float32)) @ jnp.asarray(alpha)
