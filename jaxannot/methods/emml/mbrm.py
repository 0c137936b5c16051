r"""MBRM: the multiple-Bernoulli relevance model (Feng, Manmatha & Lavrenko 2004).

Every training image :math:`J` is a "relevance" component. A query image is a set of
regions :math:`r`, and

.. math::

    P(J \mid I_q) \propto P(J) \prod_{r \in I_q} K(r, J), \qquad
    K(r, J) = \frac1{|J|} \sum_{r' \in J} \exp\Big(-\frac{\lVert r - r'\rVert^2}{2\beta}
    \Big), \qquad P(w \mid I_q) = \sum_J P(J \mid I_q)\, P_V(w \mid J),

with a uniform :math:`P(J)` and a Gaussian kernel of bandwidth (variance)
:math:`\beta` (its normalizing constant is common to every :math:`J` and cancels).
Two region kernels:

- ``"gaussian"`` (real features): one region per image, its global feature vector, so
  :math:`\log K = -\lVert \mathbf x - \mathbf x_J\rVert^2 / 2\beta`;
- ``"regions"`` (bag-of-blobs features, e.g. Corel5k): each counted blob is a region,
  represented by its one-hot vector (the blob's token is all the dataset gives), so two
  different blobs are at squared distance 2 and
  :math:`K(b, J) = (n_{bJ} + (|J| - n_{bJ})\, e^{-1/\beta}) / |J|`.

Everything is computed in the log domain: :math:`\log P(I_q \mid J) = \sum_r
\log K(r, J)` (the bag kernel by ``logaddexp``), normalized over the training images by
a streaming log-sum-exp, so nothing underflows however small :math:`\beta` is or
however many regions an image has. The word model is the smoothed multiple-Bernoulli

.. math::

    P_V(w \mid J) = \frac{\mu\, \delta_{w,J} + N_w}{\mu + N},

where :math:`\delta_{w,J} = 1` when :math:`w` annotates :math:`J`, :math:`N_w` is the
number of training images annotated with :math:`w` and :math:`N` the number of training
images. Annotation ranks words by :math:`P(w \mid \mathbf x)`. A word query ranks the
database images by :math:`P(w \mid \mathbf x_t)`, i.e. the annotation probabilities of
every database image: the cost of a query grows linearly with the database (the point
of comparison of EMML §5.3).

References
----------
S. L. Feng, R. Manmatha, V. Lavrenko. Multiple Bernoulli relevance models for image and
video annotation. CVPR 2004.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from jaxtyping import Float

import jax
import jax.numpy as jnp

from jaxannot.inference.support import check_support
from jaxannot.types import Array, ArrayLike

__all__ = [
    "MBRMParams",
    "fit_mbrm",
    "default_bandwidth",
    "KERNELS",
    "bandwidth_scale",
    "region_log_kernel",
    "select_bandwidth",
    "extend_past_edges",
    "mbrm_word_probabilities",
]

KERNELS = ("gaussian", "regions")


def default_bandwidth(features: ArrayLike, neighbours: int = 10) -> float:
    """:math:`\\beta` = mean squared distance to the ``neighbours``-th nearest training
    image over a sample of at most 500 images (a local scale, so the density is
    dominated by near neighbours), floored at 1e-6. (The old default of the
    ``"gaussian"`` kernel; :func:`select_bandwidth` now picks it by validation.)"""
    x = np.asarray(features, np.float64)
    sample = x[:500]
    d2 = ((sample**2).sum(1)[:, None] + (x**2).sum(1)[None] - 2 * sample @ x.T).clip(0)
    k = min(neighbours, x.shape[0] - 1)
    if k < 1:
        return 1.0
    kth = np.sort(d2, axis=1)[:, k]
    return float(max(kth.mean(), 1e-6))


def bandwidth_scale(features: ArrayLike, kernel: str = "gaussian") -> float:
    """The scale that :func:`select_bandwidth`'s grid multiplies: the median squared
    distance between two regions. ``"regions"``: 2 (two different one-hot blobs);
    ``"gaussian"``: the median over pairs of distinct images among the first 500,
    floored at 1e-6."""
    _check_kernel(kernel)
    if kernel == "regions":
        return 2.0
    x = np.asarray(features, np.float64)[:500]
    d2 = ((x**2).sum(1)[:, None] + (x**2).sum(1)[None] - 2 * x @ x.T).clip(0)
    off = d2[np.triu_indices(len(x), k=1)]
    return float(max(np.median(off), 1e-6)) if off.size else 1.0


def region_log_kernel(features: ArrayLike, bandwidth: float) -> np.ndarray:
    """:math:`\\log K(b, J)` ``[train, dims]`` of the ``"regions"`` kernel.

    ``features`` are blob counts :math:`n_{bJ}`; :math:`K(b, J) = (n_{bJ} + (|J| -
    n_{bJ}) e^{-1/\\beta}) / |J|`, computed as a ``logaddexp`` (exact for any
    :math:`\\beta > 0`). An image with no blobs has :math:`K = e^{-1/\\beta}`.
    """
    n = np.asarray(features, np.float64)
    if np.any(n < 0):
        raise ValueError("the 'regions' kernel needs non-negative blob counts")
    size = np.maximum(n.sum(1, keepdims=True), 1.0)
    with np.errstate(divide="ignore"):
        out = np.logaddexp(np.log(n), np.log(size - n) - 1.0 / bandwidth) - np.log(size)
    return out.astype(np.float32)


def _check_kernel(kernel):
    if kernel not in KERNELS:
        raise ValueError(f"unknown kernel {kernel!r}; expected one of {KERNELS}")


class MBRMParams(NamedTuple):
    """The relevance model: training features, Bernoulli word model, bandwidth.

    Attributes
    ----------
    features : Float[Array, "n d"]
        The n training images' d features.
    word_probabilities : Float[Array, "n w"]
        :math:`P_V(w \\mid J)`.
    bandwidth : Float[Array, ""]
        Kernel variance :math:`\\beta`.
    log_region_kernel : Float[Array, "n d"] or None
        :math:`\\log K(b, J)` of the ``"regions"`` kernel (:func:`region_log_kernel`);
        ``None`` for the ``"gaussian"`` kernel on the global feature vectors. A saved
        model leaves it out (it is rebuilt from the features).
    """

    features: Float[Array, "n d"]
    word_probabilities: Float[Array, "n w"]
    bandwidth: Float[Array, ""]
    log_region_kernel: Float[Array, "n d"] | None = None


def fit_mbrm(
    features: ArrayLike,
    words: ArrayLike,
    *,
    bandwidth: float | None = None,
    smoothing: float | None = None,
    kernel: str = "gaussian",
) -> MBRMParams:
    """Build the relevance model from annotated training images.

    Parameters
    ----------
    features : [train, dims]
        Real feature vectors (``kernel="gaussian"``) or blob counts (``"regions"``).
    words : [train, words]
        Counts or 0/1 (binarized).
    bandwidth : float, optional
        :math:`\\beta` (default :func:`default_bandwidth`; the annotator ``mbrm``
        chooses it by :func:`select_bandwidth` instead).
    smoothing : float, optional
        :math:`\\mu > 0` of the Bernoulli model. The own annotation of :math:`J` gets
        weight :math:`\\mu / (\\mu + N)`; the default :math:`\\mu = 9N` gives it 0.9
        (with :math:`\\mu \\ll N` the model collapses to the word prior).
    kernel : ``"gaussian"`` or ``"regions"``
        The region kernel (module docstring).

    Raises
    ------
    SupportError
        If a word probability is not finite or outside [0, 1]
        (:func:`jaxannot.inference.support.check_support`).
    """
    _check_kernel(kernel)
    x = np.asarray(features, np.float32)
    y = (np.asarray(words) > 0).astype(np.float32)
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"features have {x.shape[0]} rows but words {y.shape[0]}")
    n = x.shape[0]
    if smoothing is None:
        smoothing = 9.0 * n
    if smoothing <= 0:
        raise ValueError(f"smoothing must be > 0, got {smoothing}")
    counts = y.sum(0)
    probs = (smoothing * y + counts[None]) / (smoothing + n)
    beta = default_bandwidth(x) if bandwidth is None else float(bandwidth)
    if beta <= 0:
        raise ValueError(f"bandwidth must be > 0, got {beta}")
    check_support("mbrm: word_probabilities", probs, iteration="closed form", upper=1.0)
    table = None
    if kernel == "regions":
        table = jnp.asarray(region_log_kernel(x, beta))
    return MBRMParams(
        jnp.asarray(x),
        jnp.asarray(probs, jnp.float32),
        jnp.asarray(beta, jnp.float32),
        table,
    )


def select_bandwidth(
    features: ArrayLike,
    words: ArrayLike,
    *,
    kernel: str = "gaussian",
    smoothing: float | None = None,
    factors: tuple[float, ...] = tuple(2.0**k for k in range(-10, 2)),
    folds: int = 3,
    metric: str = "word_f1@5",
    seed: int = 0,
    max_extensions: int = 8,
) -> tuple[float, dict]:
    """Choose :math:`\\beta` by ``folds``-fold cross-validation on the given
    (training) images only.

    The grid is ``factors`` x :func:`bandwidth_scale`; each fold fits on the other
    folds (same ``smoothing`` rule) and scores its held-out images; the bandwidth with
    the best mean ``metric`` (``"map"``: word MAP, images ranked per word, or
    ``"word_f1@5"``, with 5 clipped to the number of words) wins, the smaller one on
    ties. A best value at an end of the grid
    extends it past that end (:func:`extend_past_edges`, at most ``max_extensions``
    values). Held-out images without words are ignored by the metrics. Returns
    ``(beta, info)`` with the grid scored and its scores.
    """
    from jaxannot.data.protocols import kfold_rows
    from jaxannot.metrics import mean_average_precision, word_prf_at_n

    if metric not in ("map", "word_f1@5"):
        raise ValueError(f"unknown metric {metric!r}; expected 'map' or 'word_f1@5'")
    x = np.asarray(features, np.float32)
    y = (np.asarray(words) > 0).astype(np.float32)
    scale = bandwidth_scale(x, kernel)
    held = kfold_rows(x.shape[0], folds, seed)
    # the annotation length, clipped to the vocabulary (as knn clips k): a problem
    # with fewer than 5 words marks all of them
    top = min(5, y.shape[1])

    def fold_scores(beta: float) -> np.ndarray:
        out = np.zeros(folds)
        for k, rows in enumerate(held):
            train = np.ones(x.shape[0], bool)
            train[rows] = False
            params = fit_mbrm(
                x[train], y[train], bandwidth=beta, smoothing=smoothing, kernel=kernel
            )
            pred = np.asarray(mbrm_word_probabilities(params, x[rows]))
            if metric == "map":
                out[k] = mean_average_precision(pred, y[rows])
            else:
                out[k] = word_prf_at_n(pred, y[rows], top)["f1"]
        return out

    grid, means = extend_past_edges(
        lambda b: float(fold_scores(b).mean()),
        [float(f * scale) for f in factors],
        max_steps=max_extensions,
    )
    best = int(np.flatnonzero(means >= means.max() - 1e-12)[0])
    info = {
        "bandwidth_scale": scale,
        "bandwidth_grid": grid,
        f"validation_{metric}": [float(m) for m in means],
        "folds": folds,
        "grid_extended": len(grid) - len(factors),
    }
    return grid[best], info


def extend_past_edges(
    score: Callable[[float], float], grid: list[float], *, max_steps: int = 8
) -> tuple[list[float], np.ndarray]:
    """Score a geometric ``grid`` and extend it while its best value is at an end.

    The grid's ratio (``grid[1] / grid[0]``) gives the next value below the low end
    or above the high end, whichever holds the best mean (the smaller on ties); at
    most ``max_steps`` values are added, so a best value at an end of the returned
    grid means the cap was reached.

    Parameters
    ----------
    score : callable
        ``score(value) -> float``, higher is better.
    grid : list of float
        Increasing, geometric, at least two values.
    max_steps : int
        Most values added.

    Returns
    -------
    grid : list of float
        The grid scored, increasing.
    means : ndarray
        Its scores.
    """
    grid = list(grid)
    ratio = grid[1] / grid[0]
    means = [score(b) for b in grid]
    for _ in range(max_steps):
        best = int(np.flatnonzero(np.asarray(means) >= max(means) - 1e-12)[0])
        if best == 0:
            grid.insert(0, grid[0] / ratio)
            means.insert(0, score(grid[0]))
        elif best == len(grid) - 1:
            grid.append(grid[-1] * ratio)
            means.append(score(grid[-1]))
        else:
            break
    return grid, np.asarray(means)


def _log_weights(train, queries, beta):
    d2 = (
        (queries**2).sum(1)[:, None]
        + (train**2).sum(1)[None, :]
        - 2.0 * queries @ train.T
    )
    return -jnp.maximum(d2, 0.0) / (2.0 * beta)


@functools.partial(jax.jit, static_argnames=("block_size",))
def mbrm_word_probabilities(
    params: MBRMParams, queries: ArrayLike, block_size: int = 8192
) -> Array:
    """:math:`P(w \\mid \\mathbf x)` for each query ``[queries, words]``.

    :math:`P(J \\mid I_q)` is the softmax over :math:`J` of :math:`\\log P(I_q \\mid J)`
    (module docstring). A streaming log-sum-exp over blocks of ``block_size`` training
    images keeps memory at ``queries x block_size``; the cost is linear in the number
    of training images.

    For the ``"regions"`` kernel the log-likelihood is split as

    .. math::

        \\log P(I_q \\mid J) = -\\frac{c_{qJ}}{\\beta} + f_{qJ}, \\qquad
        c_{qJ} = \\sum_{b:\\, n_{bJ} = 0} q_b, \\qquad
        f_{qJ} = \\sum_{b:\\, n_{bJ} > 0} q_b \\log K(b, J),

    the count :math:`c` of the query's blobs that :math:`J` lacks (an integer, exact in
    float32) and a sum of small logs. The softmax is taken relative to the smallest
    count seen so far, :math:`-(c_{qJ} - c^{\\min}_q)/\\beta + f_{qJ}`: one float32
    sum of terms of size :math:`1/\\beta` (16,384 at :math:`\\beta = 2^{-14}`) would
    lose the small logs to rounding, and which images win would then depend on the
    CPU's summation order.
    """
    q = jnp.atleast_2d(jnp.asarray(queries, jnp.float32))
    x, p = params.features, params.word_probabilities
    n = x.shape[0]
    bs = min(block_size, n)
    nb = -(-n // bs)
    pad = nb * bs - n

    def blocks(a):
        return jnp.concatenate([a, jnp.zeros((pad, a.shape[1]), a.dtype)]).reshape(
            nb, bs, -1
        )

    valid = (jnp.arange(nb * bs) < n).reshape(nb, bs)
    regions = params.log_region_kernel is not None
    table = params.log_region_kernel if regions else x
    inverse = 1.0 / jnp.asarray(params.bandwidth, jnp.float32)

    def counts_and_logs(xk, tk, vk):
        """``(c, f)`` of the block (module docstring); ``c = 0`` for the gaussian."""
        if not regions:
            lw = _log_weights(xk, q, params.bandwidth)
            return jnp.zeros_like(lw), jnp.where(vk[None], lw, -jnp.inf)
        lacks = xk == 0
        c = q @ lacks.T.astype(jnp.float32)
        f = q @ jnp.where(lacks, 0.0, tk).T
        return jnp.where(vk[None], c, jnp.inf), jnp.where(vk[None], f, -jnp.inf)

    def body(carry, blk):
        c_min, m, acc, z = carry
        xk, tk, pk, vk = blk
        c, f = counts_and_logs(xk, tk, vk)
        c_new = jnp.minimum(c_min, c.min(1))
        lw = f - (c - c_new[:, None]) * inverse
        # the weights so far, relative to the new smallest count
        m_old = jnp.where(c_min == c_new, m, m - (c_min - c_new) * inverse)
        m_new = jnp.maximum(m_old, lw.max(1))
        scale = jnp.exp(m_old - m_new)
        w = jnp.exp(lw - m_new[:, None])
        return (c_new, m_new, acc * scale[:, None] + w @ pk, z * scale + w.sum(1)), None

    init = (
        jnp.full((q.shape[0],), jnp.inf, jnp.float32),
        jnp.full((q.shape[0],), -jnp.inf, jnp.float32),
        jnp.zeros((q.shape[0], p.shape[1]), jnp.float32),
        jnp.zeros((q.shape[0],), jnp.float32),
    )
    (_, _, acc, z), _ = jax.lax.scan(
        body, init, (blocks(x), blocks(table), blocks(p), valid)
    )
    return acc / z[:, None]
