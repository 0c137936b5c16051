r"""The eigenproblems of ALE (seed 002, §3.2–3.3): per-dimension densities as
histograms of the PCA coordinates, and the eigenfunctions of each dimension's density
(eq. (4)–(6)), the smallest of all dimensions kept; :mod:`.eigenfunctions` fits and
embeds with them.

References
----------
Fergus et al., NIPS 2009; Mantziou et al., IJMIR 2015 (seed 002), §3: cited in full in
:mod:`.eigenfunctions`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from jaxtyping import Float, Integer

import jax
import jax.numpy as jnp

from jaxannot.runtime.memory import check_square_fits
from jaxannot.solvers.generalized_eigen import batched_generalized_eigh_diagonal
from jaxannot.types import Array

__all__ = [
    "DENSITY_FLOOR",
    "EIGH_BYTES",
    "EIGH_COPIES",
    "Eigenfunctions",
    "bin_affinity",
    "check_eigh_memory",
    "chunk_histogram",
    "density_eigenproblem",
    "histograms",
    "solve_and_select_eigenfunctions",
    "solve_eigenfunctions",
]

#: Floor added to normalized histograms (empty bins would make ``P D̂`` singular).
DENSITY_FLOOR = 1e-6

#: Memory budget of one chunk of per-dimension eigenproblems (bytes), and the
#: ``B × B`` float32 arrays one dimension's solve holds at once: XLA's compiled
#: memory analysis of :func:`solve_eigenfunctions` on CPU gives 5.0 (4 temporaries
#: and the eigenvectors) for B = 50 to 800.
EIGH_BYTES = 1 << 30
EIGH_COPIES = 5


class Eigenfunctions(NamedTuple):
    """Selected eigenfunctions tabulated at the bin centres of their dimension."""

    dims: Integer[Array, " c"]  # int32 [c]   dimension a_i of eigenfunction i
    table: Float[Array, "c b"]  # [c, B]     g_i at the B bin centres of dimension a_i
    eigenvalues: Float[Array, " c"]  # [c]  σ_i, ascending
    lo: Float[Array, " c"]  # [c]           first bin's lower edge of dimension a_i
    width: Float[Array, " c"]  # [c]        bin width of dimension a_i


# ------------------------------------------------------------------- histograms
@jax.jit
def chunk_histogram(
    s: Array, mask: Array, lo: Array, width: Array, num_bins_like: Array
) -> Array:
    """Per-dimension counts of the in-range values of ``s [m, N]``: ``[N, B]``."""
    num_bins = num_bins_like.shape[0]
    pos = (s - lo) / width
    inside = (pos >= 0) & (pos <= num_bins) & (mask[:, None] > 0)
    index = jnp.clip(jnp.floor(pos).astype(jnp.int32), 0, num_bins - 1)
    flat = index + num_bins * jnp.arange(s.shape[1], dtype=jnp.int32)[None, :]
    counts = jnp.bincount(
        flat.ravel(),
        weights=inside.ravel().astype(s.dtype),
        length=num_bins * s.shape[1],
    )
    return counts.reshape(s.shape[1], num_bins)


def histograms(
    s: np.ndarray, lo: np.ndarray, hi: np.ndarray, num_bins: int
) -> np.ndarray:
    """Counts ``[N, B]`` of the rows of ``s [n, N]`` in ``B`` bins on ``[lo, hi]``."""
    s, mask = np.asarray(s, np.float32), np.ones(len(s), np.float32)
    width = (np.asarray(hi) - np.asarray(lo)) / num_bins
    return np.asarray(
        chunk_histogram(
            s, mask, jnp.asarray(lo), jnp.asarray(width), jnp.zeros(num_bins)
        )
    )


# ---------------------------------------------------------------- eigenproblem
def bin_affinity(centres: jax.Array, kernel_width: float | jax.Array) -> jax.Array:
    r"""``W̃_ab = exp(−(b_a − b_b)² / 2t²)`` between the bin centres of one dimension."""
    diff = centres[:, None] - centres[None, :]
    return jnp.exp(-(diff**2) / (2.0 * kernel_width**2))


def density_eigenproblem(
    counts: jax.Array, centres: jax.Array, kernel_width: float | jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    r"""The matrices of eq. (4) for one dimension: ``(A, diag(P D̂), p)``.

    ``A = D̃ − P W̃ P`` and the diagonal of ``P D̂`` with ``p`` the floored,
    normalized histogram.
    """
    p = counts / jnp.maximum(counts.sum(), 1.0) + DENSITY_FLOOR
    p = p / p.sum()
    w = bin_affinity(centres, kernel_width)
    pwp = p[:, None] * w * p[None, :]
    d_tilde = pwp.sum(0)  # column sums of P W̃ P
    d_hat = (p[:, None] * w).sum(0)  # column sums of P W̃
    return jnp.diag(d_tilde) - pwp, p * d_hat, p


def _solve_one(counts, centres, kernel_width):
    a, b, p = density_eigenproblem(counts, centres, kernel_width)
    values, vectors = batched_generalized_eigh_diagonal(a[None], b[None])
    values, vectors = values[0], vectors[0]
    # unit second moment under the density, sign fixed by the first bin
    norm = jnp.sqrt((p[:, None] * vectors**2).sum(0))
    vectors = vectors / jnp.maximum(norm, 1e-30)
    sign = jnp.where(vectors[0] < 0, -1.0, 1.0)
    return values, vectors * sign[None, :]


@jax.jit
def solve_eigenfunctions(
    counts: jax.Array, centres: jax.Array, kernel_width: float | jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Eq. (4) for all dimensions at once (``vmap``).

    Parameters
    ----------
    counts, centres : Float[Array, "dims bins"]
        Histogram counts and bin centres of every dimension.
    kernel_width : float
        ``t`` of the bin affinity.

    Returns
    -------
    eigenvalues : Float[Array, "dims bins"]
        Ascending per dimension (the first ≈ 0, constant eigenfunction).
    eigenfunctions : Float[Array, "dims bins bins"]
        ``[k, :, j]`` is eigenfunction ``j`` of dimension ``k`` at the bin centres,
        scaled to ``Σ_b p_b g(b)² = 1``.
    """
    return jax.vmap(_solve_one, in_axes=(0, 0, None))(counts, centres, kernel_width)


def check_eigh_memory(num_bins: int) -> None:
    """Refuse a bin count whose single-dimension eigenproblem (``EIGH_COPIES``
    float32 arrays of B x B) cannot fit: XLA's CPU client hangs, rather than
    raising, when an allocation inside the eigensolver fails."""
    check_square_fits(num_bins, EIGH_COPIES * 4, "num_bins", " (the paper uses 50)")


def solve_and_select_eigenfunctions(
    counts: np.ndarray,
    centres: np.ndarray,
    kernel_width: float,
    lo: np.ndarray,
    width: np.ndarray,
    num_eigenfunctions: int,
    *,
    max_bytes: int = EIGH_BYTES,
) -> Eigenfunctions:
    r"""Eq. (4) for every dimension, keeping the ``c_D`` smallest non-trivial
    eigenvalues across dimensions, in memory bounded by ``max_bytes``.

    Each dimension's first (smallest, constant) eigenfunction is dropped; ties are
    broken by dimension then order. ``num_eigenfunctions`` is clamped to
    ``dims × (bins − 1)``.

    The dimensions are solved in chunks (:func:`solve_eigenfunctions` on at most
    ``max_bytes / (EIGH_COPIES · 4 B²)`` dimensions at a time, every chunk padded to
    the same shape so one compilation serves all), and after each chunk only the
    ``c_D`` best candidates so far are kept with their tables. The smallest ``c_D``
    of a union are among the smallest ``c_D`` of each part, so the result equals
    one solve over every dimension; the memory is ``O(chunk · B² + c_D · B)`` rather
    than ``O(N B²)`` (``N = 200`` dimensions of ``B = 1600`` bins would need 8 GB
    for the tables alone, several times that inside the eigensolver).

    Parameters
    ----------
    counts, centres, kernel_width
        As for :func:`solve_eigenfunctions`.
    lo, width : Float[Array, "dims"]
        First bin's lower edge and bin width of every dimension.
    num_eigenfunctions : int
        ``c_D``.
    max_bytes : int
        Memory budget of one chunk's solve.

    Returns
    -------
    Eigenfunctions
        Ordered by ascending eigenvalue.
    """
    counts = np.asarray(counts, np.float32)
    centres = np.asarray(centres, np.float32)
    dims, bins = counts.shape
    count = int(min(num_eigenfunctions, dims * (bins - 1)))
    step = int(min(dims, max(1, max_bytes // (EIGH_COPIES * 4 * bins * bins))))
    values = np.zeros(0, np.float32)  # kept candidates, in (dimension, order) order
    dim_index = np.zeros(0, np.int64)
    eig_index = np.zeros(0, np.int64)
    table = np.zeros((0, bins), np.float32)
    for start in range(0, dims, step):
        stop = min(start + step, dims)
        pad = ((0, step - (stop - start)), (0, 0))
        chunk_values, functions = solve_eigenfunctions(
            jnp.asarray(np.pad(counts[start:stop], pad)),
            jnp.asarray(np.pad(centres[start:stop], pad, mode="edge")),
            kernel_width,
        )
        nontrivial = np.asarray(chunk_values)[: stop - start, 1:].ravel()
        pooled = np.concatenate([values, nontrivial])
        keep = np.sort(np.argsort(pooled, kind="stable")[:count])
        old, new = keep[keep < len(values)], keep[keep >= len(values)] - len(values)
        new_dim, new_eig = np.divmod(new, bins - 1)
        new_eig = new_eig + 1
        new_table = np.asarray(functions[new_dim, :, new_eig], np.float32)
        values = pooled[keep]
        dim_index = np.concatenate([dim_index[old], start + new_dim])
        eig_index = np.concatenate([eig_index[old], new_eig])
        table = np.concatenate([table[old], new_table.reshape(-1, bins)])
    order = np.argsort(values, kind="stable")
    dim_index = dim_index[order]
    return Eigenfunctions(
        dims=jnp.asarray(dim_index, jnp.int32),
        table=jnp.asarray(table[order], jnp.float32),
        eigenvalues=jnp.asarray(values[order], jnp.float32),
        lo=jnp.asarray(np.asarray(lo)[dim_index], jnp.float32),
        width=jnp.asarray(np.asarray(width)[dim_index], jnp.float32),
    )
