r"""Approximate Laplacian Eigenmaps (ALE): the eigenfunction representation of seed 002.
Steps 2 to 5 below (histograms, eigenproblems, selection) are in :mod:`.eigenproblem`.

Instead of the eigenvectors of the ``n × n`` normalized graph Laplacian of the images
(seed 002 eq. 1–3), ALE (Fergus, Weiss & Torralba 2009; Mantziou et al. 2015 §3.2)
approximates them by eigenfunctions of the *density* of the data, one feature dimension
at a time:

1. **PCA** to ``N`` dimensions, ``s = (x − μ) R`` (streaming: the covariance is
   accumulated over chunks, so ``n`` may exceed memory). With ``standardize`` the
   PCA runs on the correlation matrix (each input feature scaled to unit variance).
2. Per dimension ``k``, a ``B``-bin **histogram** of ``s_k`` on ``[lo_k, hi_k]``, the
   ``clip`` and ``1 − clip`` quantiles (a clipped margin, so outliers do not stretch the
   bins); values outside fall out of the histogram and are clamped when interpolated.
   ``P = diag(p)`` with ``p`` the normalized histogram (a floor of ``1e-6`` guards
   empty bins, whose ``P D̂`` entry would otherwise be zero).
3. The ``B × B`` heat-kernel **affinity** between bin centres,
   ``W̃_ab = exp(−(b_a − b_b)² / 2t²)``, with one kernel width ``t`` shared by all
   dimensions (eq. 1 splits over the dimensions of the rotated data, so the widths are
   the same; dimensions of small spread then get large eigenvalues and are rarely
   selected — as they should).
4. The **generalized eigenproblem** of eq. (4),
   ``(D̃ − P W̃ P) g = σ P D̂ g``, ``D̃ = diag(1ᵀ P W̃ P)``, ``D̂ = diag(1ᵀ P W̃)``,
   solved for all dimensions at once (``vmap``). The column sums of ``P W̃`` are
   ``W̃ p``, so ``P D̂ = D̃``: eq. (4) is the random-walk normalized Laplacian of the
   ``B``-node graph with weights ``p_a W̃_ab p_b``, the limit of eq. (3) as
   ``n → ∞``. ``P D̂`` is diagonal and positive, so the problem reduces to a standard
   symmetric one (:mod:`jaxannot.solvers.generalized_eigen`).
5. **Selection**: each dimension's smallest eigenvalue (``σ = 0``, the constant
   eigenfunction) is dropped; the ``c_D`` smallest of the remaining ``N (B − 1)``
   eigenvalues, across dimensions, are kept, with their dimension ``a_i``.
   Each kept eigenfunction is scaled to unit second moment under the density,
   ``Σ_b p_b g(b)² = 1``, so the columns of ``U`` have mean square ≈ 1, and signed so
   that ``g(b_0) ≥ 0``.
6. **Interpolation** (eq. 8): ``U_i = g_i(b⁰) + (g_i(b¹) − g_i(b⁰)) (s_{a_i} − b⁰) /
   (b¹ − b⁰)`` between the bin centres around ``s_{a_i}`` (clamped beyond the first
   and last centre). Written for one image and ``vmap``-ped; applied in batches, it
   gives both ALE's ``U`` (for the images the eigenfunctions were computed from) and
   IALE's (for new images, with the stored eigenfunctions, seed 002 §3.4).

References
----------
Fergus, R., Weiss, Y. and Torralba, A., "Semi-supervised learning in gigantic image
collections", NIPS 2009.
Mantziou, E., Papadopoulos, S. and Kompatsiaris, Y., "Learning to detect concepts with
Approximate Laplacian Eigenmaps in large-scale and online settings", IJMIR 2015
(seed 002), §3, eq. (1)–(8).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import NamedTuple

import numpy as np
from jaxtyping import Float, Integer

import jax
import jax.numpy as jnp

from jaxannot.methods.ale.eigenproblem import (
    Eigenfunctions,
    check_eigh_memory,
    chunk_histogram,
    solve_and_select_eigenfunctions,
)
from jaxannot.types import Array

__all__ = [
    "PCAModel",
    "ALEModel",
    "ChunkSource",
    "array_chunks",
    "fit_pca",
    "interpolate_one",
    "fit_ale",
    "ale_embed",
]

#: ``chunks()`` returns a fresh iterator over ``[m, D]`` arrays (one data pass).
ChunkSource = Callable[[], Iterator[np.ndarray]]


class PCAModel(NamedTuple):
    """``s = (x − mean) @ components``; ``variances`` of the ``s`` columns."""

    mean: Float[Array, " d"]
    components: Float[Array, "d p"]  # divided by the feature std when standardized
    variances: Float[Array, " p"]
    count: Integer[Array, ""]


class ALEModel(NamedTuple):
    """Everything IALE needs to embed new images: PCA + eigenfunctions."""

    pca: PCAModel
    eigenfunctions: Eigenfunctions
    kernel_width: Float[Array, ""]


# --------------------------------------------------------------------- chunking
def array_chunks(x: np.ndarray, chunk_size: int) -> ChunkSource:
    """A :data:`ChunkSource` over the rows of an in-memory array."""
    x = np.asarray(x)

    def chunks() -> Iterator[np.ndarray]:
        for start in range(0, x.shape[0], chunk_size):
            yield x[start : start + chunk_size]

    return chunks


def _effective_chunk(data, chunk_size: int) -> int:
    """Chunks never larger than an in-memory array (avoids padding tiny inputs)."""
    if callable(data):
        return chunk_size
    return max(1, min(chunk_size, np.shape(data)[0]))


def _as_source(data: np.ndarray | ChunkSource, chunk_size: int) -> ChunkSource:
    if callable(data):
        return data
    data = np.asarray(data)
    if data.ndim != 2:
        raise ValueError(f"features must be 2-D [images, dims], got {data.shape}")
    return array_chunks(data, chunk_size)


def _padded(chunk: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Pad a chunk to ``size`` rows (so jitted passes compile once) and its mask."""
    chunk = np.asarray(chunk, dtype=np.float32)
    m = chunk.shape[0]
    if m > size:
        raise ValueError(f"chunk of {m} rows exceeds chunk_size={size}")
    mask = np.zeros(size, dtype=np.float32)
    mask[:m] = 1.0
    if m < size:
        chunk = np.concatenate(
            [chunk, np.zeros((size - m, chunk.shape[1]), np.float32)]
        )
    return chunk, mask


# -------------------------------------------------------------------------- PCA
@jax.jit
def _chunk_moments(x: jax.Array, mask: jax.Array) -> tuple[jax.Array, ...]:
    count = mask.sum()
    mean = (mask @ x) / jnp.maximum(count, 1.0)
    centred = (x - mean) * mask[:, None]
    return count, mean, centred.T @ centred


def fit_pca(
    data: np.ndarray | ChunkSource,
    n_components: int,
    *,
    standardize: bool = True,
    chunk_size: int = 65536,
) -> PCAModel:
    r"""PCA from a covariance accumulated over chunks (one pass).

    Each chunk's mean and centred scatter are computed in float32 (jit) and merged in
    float64 with the pairwise update of Chan, Golub & LeVeque (1979):
    :math:`M = M_a + M_b + δδ^T n_a n_b / n`, :math:`δ = μ_b − μ_a`.

    Parameters
    ----------
    data : array [n, D] or ChunkSource
    n_components : int
        ``N``; clamped to ``D``.
    standardize : bool
        PCA of the correlation matrix (unit-variance features) instead of the
        covariance; the scaling is folded into ``components``.
    chunk_size : int
        Rows per chunk (chunks are padded to it, so the pass compiles once).
    """
    chunk_size = _effective_chunk(data, chunk_size)
    source = _as_source(data, chunk_size)
    n, mean, scatter = 0.0, None, None
    for chunk in source():
        chunk = np.asarray(chunk)
        for start in range(0, chunk.shape[0], chunk_size):
            xb, mb = _padded(chunk[start : start + chunk_size], chunk_size)
            cb, mub, mb2 = (np.asarray(v, np.float64) for v in _chunk_moments(xb, mb))
            cb = float(cb)
            if cb == 0:
                continue
            if mean is None:
                n, mean, scatter = cb, mub, mb2
                continue
            total = n + cb
            delta = mub - mean
            scatter = scatter + mb2 + np.outer(delta, delta) * (n * cb / total)
            mean = mean + delta * (cb / total)
            n = total
    if mean is None or n < 2:
        raise ValueError("PCA needs at least two images")
    cov = scatter / (n - 1)
    scale = np.ones_like(mean)
    if standardize:
        sd = np.sqrt(np.diag(cov))
        scale = np.where(sd > 1e-12, sd, 1.0)
        cov = cov / np.outer(scale, scale)
    n_components = int(min(n_components, cov.shape[0]))
    values, vectors = np.linalg.eigh(cov)
    order = np.argsort(values)[::-1][:n_components]
    vectors = vectors[:, order]
    # deterministic signs: the largest-magnitude loading of each component is positive
    signs = np.sign(vectors[np.abs(vectors).argmax(0), np.arange(n_components)])
    vectors = vectors * np.where(signs == 0, 1.0, signs)
    components = (vectors / scale[:, None]).astype(np.float32)
    return PCAModel(
        mean=mean.astype(np.float32),
        components=components,
        variances=np.maximum(values[order], 0.0).astype(np.float32),
        count=int(n),
    )


@jax.jit
def _project(x: jax.Array, mean: jax.Array, components: jax.Array) -> jax.Array:
    return (x - mean) @ components


# --------------------------------------------------------------- interpolation
def interpolate_one(s: jax.Array, eig: Eigenfunctions) -> jax.Array:
    r"""Eq. (8) for one image: ``U [c]`` from its PCA coordinates ``s [N]``.

    Bin centres are ``lo + (b + ½) width``; between the two centres around
    ``s_{a_i}`` the eigenfunction is linearly interpolated, beyond the outer centres
    it is clamped to the edge value.
    """
    num_bins = eig.table.shape[1]
    x = s[eig.dims]
    pos = (x - eig.lo) / eig.width - 0.5
    left = jnp.clip(jnp.floor(pos).astype(jnp.int32), 0, num_bins - 2)
    frac = jnp.clip(pos - left, 0.0, 1.0)
    g0 = jnp.take_along_axis(eig.table, left[:, None], axis=1)[:, 0]
    g1 = jnp.take_along_axis(eig.table, left[:, None] + 1, axis=1)[:, 0]
    return g0 + (g1 - g0) * frac


@jax.jit
def _embed_batch(x, mean, components, eig):
    s = _project(x, mean, components)
    return jax.vmap(interpolate_one, in_axes=(0, None))(s, eig)


# ------------------------------------------------------------------------ fit
def _histogram_ranges(source, pca, num_bins, clip, chunk_size, sample_size, seed):
    """Pass 2 of :func:`fit_ale`: each PCA dimension's histogram range from a seeded
    random sample of at most ``sample_size`` projected rows (the ``clip`` and ``1 −
    clip`` quantiles) within the exact minimum / maximum; ``(lo, bin width)``."""
    mean, comps = jnp.asarray(pca.mean), jnp.asarray(pca.components)
    dims = comps.shape[1]
    rng = np.random.default_rng(seed)
    keep_prob = min(1.0, sample_size / max(pca.count, 1))
    sample, lo_seen, hi_seen = [], np.full(dims, np.inf), np.full(dims, -np.inf)
    for chunk in source():
        chunk = np.asarray(chunk)
        for start in range(0, chunk.shape[0], chunk_size):
            part = chunk[start : start + chunk_size]
            xb, mb = _padded(part, chunk_size)
            s = np.asarray(_project(xb, mean, comps))[: len(part)]
            lo_seen = np.minimum(lo_seen, s.min(0))
            hi_seen = np.maximum(hi_seen, s.max(0))
            pick = rng.random(len(part)) < keep_prob
            sample.append(s[pick])
    sample = np.concatenate(sample) if sample else np.zeros((0, dims), np.float32)
    if clip > 0 and len(sample) > 0:
        lo = np.maximum(np.quantile(sample, clip, axis=0), lo_seen)
        hi = np.minimum(np.quantile(sample, 1.0 - clip, axis=0), hi_seen)
    else:
        lo, hi = lo_seen, hi_seen
    span = hi - lo
    tiny = span <= 1e-12 * np.maximum(1.0, np.abs(lo))
    lo, hi = np.where(tiny, lo - 0.5, lo), np.where(tiny, hi + 0.5, hi)
    width = ((hi - lo) / num_bins).astype(np.float32)
    return lo.astype(np.float32), width


def _histogram_pass(source, pca, lo, width, num_bins, chunk_size) -> jax.Array:
    """Pass 3 of :func:`fit_ale`: the per-dimension histograms ``[N, B]``."""
    mean, comps = jnp.asarray(pca.mean), jnp.asarray(pca.components)
    counts = jnp.zeros((comps.shape[1], num_bins), jnp.float32)
    like = jnp.zeros(num_bins)
    for chunk in source():
        chunk = np.asarray(chunk)
        for start in range(0, chunk.shape[0], chunk_size):
            xb, mb = _padded(chunk[start : start + chunk_size], chunk_size)
            s = _project(xb, mean, comps)
            counts = counts + chunk_histogram(s, mb, lo, width, like)
    return counts


def fit_ale(
    data: np.ndarray | ChunkSource,
    *,
    n_components: int = 100,
    num_bins: int = 50,
    num_eigenfunctions: int = 500,
    bandwidth: float = 0.25,
    clip: float = 0.005,
    standardize: bool = True,
    chunk_size: int = 65536,
    sample_size: int = 100_000,
    seed: int = 0,
    pca: PCAModel | None = None,
) -> ALEModel:
    r"""Fit ALE's eigenfunctions from images given in memory or as chunks (3 passes).

    Pass 1 accumulates the covariance (PCA); pass 2 keeps a seeded random sample of at
    most ``sample_size`` projected rows for the clipping quantiles and the exact
    per-dimension minimum / maximum; pass 3 accumulates the histograms. Memory is
    ``O(chunk_size · D + sample_size · N + N B + c_D B)`` whatever ``n``, plus
    about ``max(EIGH_BYTES, 20 B²)`` bytes for the eigenproblems
    (:func:`~jaxannot.methods.ale.eigenproblem.solve_and_select_eigenfunctions`).

    Parameters
    ----------
    data : array [n, D] or ChunkSource
    n_components : int
        PCA dimensions ``N`` (clamped to ``D``).
    num_bins : int
        ``B`` (the paper uses 50).
    num_eigenfunctions : int
        ``c_D`` (the paper uses 500); clamped to ``N (B − 1)``.
    bandwidth : float
        Kernel width ``t`` of eq. (1) relative to the standard deviation of the first
        principal component.
    clip : float
        Quantile clipped at each end of every dimension's histogram range.
    standardize : bool
        PCA on the correlation matrix.
    pca : PCAModel, optional
        A PCA already fitted (skips pass 1; ALE re-uses IALE's rotation).
    """
    if num_bins < 3:
        raise ValueError(f"num_bins must be at least 3, got {num_bins}")
    check_eigh_memory(num_bins)
    if not 0.0 <= clip < 0.5:
        raise ValueError(f"clip must be in [0, 0.5), got {clip}")
    if bandwidth <= 0:
        raise ValueError(f"bandwidth must be positive, got {bandwidth}")
    chunk_size = _effective_chunk(data, chunk_size)
    source = _as_source(data, chunk_size)
    if pca is None:
        pca = fit_pca(
            source, n_components, standardize=standardize, chunk_size=chunk_size
        )
    lo, width = _histogram_ranges(
        source, pca, num_bins, clip, chunk_size, sample_size, seed
    )
    counts = _histogram_pass(source, pca, lo, width, num_bins, chunk_size)
    kernel_width = float(bandwidth * np.sqrt(max(pca.variances[0], 1e-12)))
    centres = lo[:, None] + (np.arange(num_bins) + 0.5)[None, :] * width[:, None]
    eig = solve_and_select_eigenfunctions(
        counts, centres, kernel_width, lo, width, num_eigenfunctions
    )
    return ALEModel(pca=pca, eigenfunctions=eig, kernel_width=kernel_width)


def ale_embed(
    model: ALEModel, data: np.ndarray | ChunkSource, *, batch_size: int = 4096
) -> np.ndarray:
    """``U [n, c_D]`` for images given in memory or as chunks, in batches (eq. 8).

    Batches are padded to ``batch_size`` so the embedding compiles once.
    """
    batch_size = _effective_chunk(data, batch_size)
    source = _as_source(data, batch_size)
    mean, comps = jnp.asarray(model.pca.mean), jnp.asarray(model.pca.components)
    out = []
    for chunk in source():
        chunk = np.asarray(chunk)
        for start in range(0, chunk.shape[0], batch_size):
            part = chunk[start : start + batch_size]
            xb, _ = _padded(part, batch_size)
            u = _embed_batch(jnp.asarray(xb), mean, comps, model.eigenfunctions)
            out.append(np.asarray(u)[: len(part)])
    c = model.eigenfunctions.table.shape[0]
    return np.concatenate(out) if out else np.zeros((0, c), np.float32)
