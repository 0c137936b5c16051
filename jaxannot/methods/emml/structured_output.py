r"""The structured-output model of EMML: VReps, joint feature map, kernels, loss.

EMML (Guo, Zhang, Xing & Faloutsos 2016) learns a max-margin map from *visual
representatives* (VReps) to word sets. The training data are VRep--word pairs
:math:`(\mathbf x_i, \mathbf y_i)_{i=1}^n`, :math:`\mathbf y_i \in \{0,1\}^W`, and the
output space of pair :math:`i` is :math:`\operatorname{perm}(\mathbf y_i)`, the binary
vectors with as many ones as :math:`\mathbf y_i` (eq. 3).

Joint feature map (eq. 2) — a tensor product of the word vector and the image feature
map :math:`\phi`:

.. math::

    \Phi(\mathbf x, \bar{\mathbf y}) = \sum_{j=1}^W \bar y_j\, \Phi(\mathbf x,
    \mathbf e_j) = \bar{\mathbf y} \otimes \phi(\mathbf x),

so that with :math:`k(\mathbf x, \mathbf x') = \langle\phi(\mathbf x),
\phi(\mathbf x')\rangle` and :math:`\Phi_{i,\mathbf y_i,\bar{\mathbf y}} =
\Phi_i(\mathbf y_i) - \Phi_i(\bar{\mathbf y})` the joint kernel of the dual (7) is

.. math::

    K((\mathbf x_i, \bar{\mathbf y}), (\mathbf x_j, \tilde{\mathbf y})) =
    k(\mathbf x_i, \mathbf x_j)\, \langle \mathbf y_i - \bar{\mathbf y},
    \mathbf y_j - \tilde{\mathbf y}\rangle .

The weight vector (8) is :math:`\alpha = \sum_i \phi(\mathbf x_i) \otimes
\mathbf b_i` with the per-VRep *coefficients* :math:`\mathbf b_i = \sum_{\bar{\mathbf
y}} \mu_{i,\bar{\mathbf y}} (\mathbf y_i - \bar{\mathbf y})`, and the score of word
:math:`j` for an image :math:`\mathbf x` (eq. 1) is :math:`f(\mathbf x, \mathbf e_j) =
\sum_i k(\mathbf x, \mathbf x_i)\, b_{ij}`.

Loss: Hamming distance :math:`l(\bar{\mathbf y}, \mathbf y) = \sum_j |\bar y_j - y_j|`.
Inside :math:`\operatorname{perm}(\mathbf y_i)` swapping :math:`t` words costs
:math:`2t`, i.e. :math:`l = 2\,\bar{\mathbf y}^\top (\mathbf 1 - \mathbf y_i)`, so the
most violated constraint for VRep :math:`i` is the top-:math:`r_i` selection of the
loss-augmented scores :math:`F_{ij} + 2(1 - y_{ij})`
(:func:`~jaxannot.solvers.qp.loss_augmented_argmax`) and
:math:`\operatorname{perm}(\mathbf y_i)` is never enumerated.

Patent notice: the EMML method is the subject of US patent 8,463,053 B1 (related: US
8,923,630 and US 10,007,679). This implementation is provided for research; check the
patents' status before any commercial use.

References
----------
Z. Guo, Z. Zhang, E. P. Xing, C. Faloutsos. Multimodal Data Mining in a Multimedia
Database Based on Structured Max Margin Learning. ACM TKDD 10(3), 2016.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

import jax
import jax.numpy as jnp

from jaxannot.types import Array, ArrayLike, PRNGKey

__all__ = [
    "KERNELS",
    "StructuredData",
    "VReps",
    "random_vreps",
    "kmeans_vreps",
    "kernel_matrix",
    "default_gamma",
    "joint_feature_map",
    "joint_kernel",
    "hamming_loss",
    "word_scores",
]


class StructuredData(NamedTuple):
    """The training problem: VRep kernel and word vectors.

    Row :math:`i` is VRep :math:`i` of the problem (5); its outputs
    :math:`\\operatorname{perm}(\\mathbf y_i)` are the 0/1 vectors with as many words,
    :math:`r_i = \\sum_w y_{iw}`, as :math:`\\mathbf y_i`.

    Attributes
    ----------
    kernel : Float[Array, "vreps vreps"]
        :math:`k(\\mathbf x_i, \\mathbf x_j)` (positive semi-definite).
    words : Float[Array, "vreps words"]
        0/1 word vectors :math:`\\mathbf y_i`, each with at least one word.
    """

    kernel: Array
    words: Array


KERNELS = ("linear", "rbf")


class VReps(NamedTuple):
    """VRep--word pairs :math:`(\\mathbf x_i, \\mathbf y_i)`.

    Attributes
    ----------
    features : Float[Array, "vreps dims"]
        The VReps' feature vectors :math:`\\mathbf x_i`.
    words : Float[Array, "vreps words"]
        Their 0/1 word vectors :math:`\\mathbf y_i` (each with at least one word).
    """

    features: Array
    words: Array


def _binary_words(words: ArrayLike) -> np.ndarray:
    return (np.asarray(words) > 0).astype(np.float32)


def random_vreps(
    rng_key: PRNGKey, features: ArrayLike, words: ArrayLike, num_vreps: int
) -> VReps:
    """The paper's simple VReps: ``num_vreps`` randomly chosen annotated images.

    Parameters
    ----------
    rng_key : PRNGKey
    features : [images, dims]
    words : [images, words]
        Counts or 0/1; binarized. Images with no word are never chosen.
    num_vreps : int
        How many; all annotated images when larger than their number.
    """
    features = np.asarray(features, np.float32)
    words = _binary_words(words)
    rows = np.flatnonzero(words.sum(1) > 0)
    if rows.size == 0:
        raise ValueError("no image has any word: cannot build VReps")
    if num_vreps < 1:
        raise ValueError(f"num_vreps must be >= 1, got {num_vreps}")
    chosen = np.asarray(jax.random.permutation(rng_key, rows.size))[:num_vreps]
    rows = np.sort(rows[chosen])
    return VReps(jnp.asarray(features[rows]), jnp.asarray(words[rows]))


def kmeans_vreps(
    rng_key: PRNGKey,
    features: ArrayLike,
    words: ArrayLike,
    num_vreps: int,
    *,
    num_iters: int = 20,
    word_rule: str = "majority",
) -> VReps:
    """VReps as k-means centroids of the features, words from their members.

    Lloyd's algorithm (k-means++-free random initialization from distinct images,
    ``num_iters`` iterations, empty clusters keep their previous centre). The words
    of a centroid are the words of its members: ``"union"`` keeps every word that
    occurs in a member, ``"majority"`` the words present in at least half of the
    members (falling back to the most frequent word so that no VRep is empty).

    Parameters
    ----------
    rng_key : PRNGKey
    features, words : [images, dims], [images, words]
    num_vreps : int
    num_iters : int
    word_rule : {"majority", "union"}
    """
    if word_rule not in ("majority", "union"):
        raise ValueError(f"word_rule must be 'majority' or 'union', got {word_rule!r}")
    x = np.asarray(features, np.float32)
    y = _binary_words(words)
    keep = y.sum(1) > 0
    x, y = x[keep], y[keep]
    if x.shape[0] == 0:
        raise ValueError("no image has any word: cannot build VReps")
    k = min(num_vreps, x.shape[0])
    init = np.asarray(jax.random.permutation(rng_key, x.shape[0]))[:k]
    centres, assign = _lloyd(jnp.asarray(x), jnp.asarray(x[init]), num_iters)
    assign = np.asarray(assign)
    counts = np.bincount(assign, minlength=k).astype(np.float32)
    freq = np.zeros((k, y.shape[1]), np.float32)
    np.add.at(freq, assign, y)
    used = counts > 0
    if word_rule == "union":
        vw = (freq > 0).astype(np.float32)
    else:
        vw = (freq >= 0.5 * np.maximum(counts, 1)[:, None]).astype(np.float32)
        empty = vw.sum(1) == 0
        vw[empty, freq[empty].argmax(1)] = 1.0
    return VReps(jnp.asarray(np.asarray(centres)[used]), jnp.asarray(vw[used]))


@jax.jit
def _lloyd_step(x, centres):
    d2 = _sq_dists(x, centres)
    assign = jnp.argmin(d2, axis=1)
    one_hot = jax.nn.one_hot(assign, centres.shape[0], dtype=x.dtype)
    counts = one_hot.sum(0)
    sums = one_hot.T @ x
    new = jnp.where(
        counts[:, None] > 0, sums / jnp.maximum(counts, 1)[:, None], centres
    )
    return new, assign


def _lloyd(x, centres, num_iters):
    assign = None
    for _ in range(max(num_iters, 1)):
        centres, assign = _lloyd_step(x, centres)
    return centres, assign


def _sq_dists(a: Array, b: Array) -> Array:
    d2 = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * a @ b.T
    return jnp.maximum(d2, 0.0)


def default_gamma(features: ArrayLike) -> float:
    """RBF width by the median heuristic: ``1 / median ||x_i - x_j||^2`` (pairs of a
    sample of at most 1000 rows)."""
    x = np.asarray(features, np.float64)[:1000]
    d2 = np.asarray(_sq_dists(jnp.asarray(x), jnp.asarray(x)))
    off = d2[~np.eye(len(x), dtype=bool)]
    med = float(np.median(off)) if off.size else 1.0
    return 1.0 / med if med > 0 else 1.0


def kernel_matrix(a: ArrayLike, b: ArrayLike, kernel: str, gamma: float = 1.0) -> Array:
    """The input kernel :math:`k(\\mathbf a_p, \\mathbf b_q)` for all pairs.

    ``"linear"``: :math:`\\langle a, b\\rangle`; ``"rbf"``: :math:`\\exp(-\\gamma
    \\|a - b\\|^2)`.
    """
    a, b = jnp.asarray(a), jnp.asarray(b)
    if kernel == "linear":
        return a @ b.T
    if kernel == "rbf":
        return jnp.exp(-gamma * _sq_dists(a, b))
    raise ValueError(f"unknown kernel {kernel!r}; valid: {', '.join(KERNELS)}")


def joint_feature_map(phi_x: ArrayLike, ybar: ArrayLike) -> Array:
    """Explicit :math:`\\Phi(\\mathbf x, \\bar{\\mathbf y}) = \\bar{\\mathbf y} \\otimes
    \\phi(\\mathbf x)`, flattened (for finite feature maps, e.g. the linear kernel)."""
    return jnp.outer(jnp.asarray(ybar), jnp.asarray(phi_x)).reshape(-1)


def joint_kernel(
    k_ij: Array, y_i: Array, ybar: Array, y_j: Array, ytilde: Array
) -> Array:
    """:math:`K((\\mathbf x_i,\\bar{\\mathbf y}),(\\mathbf x_j,\\tilde{\\mathbf y})) =
    k_{ij} \\langle \\mathbf y_i - \\bar{\\mathbf y}, \\mathbf y_j - \\tilde{\\mathbf
    y}\\rangle`."""
    return k_ij * jnp.dot(y_i - ybar, y_j - ytilde)


def hamming_loss(ybar: ArrayLike, y: ArrayLike) -> Array:
    """Number of differing entries, :math:`\\sum_j |\\bar y_j - y_j|`."""
    return jnp.abs(jnp.asarray(ybar) - jnp.asarray(y)).sum(-1)


def word_scores(kernel_rows: Array, coefficients: Array) -> Array:
    """Eq. (1): :math:`f(\\mathbf x, \\mathbf e_j) = \\sum_i k(\\mathbf x, \\mathbf x_i)
    b_{ij}` for a batch of images (``kernel_rows`` ``[images, vreps]``)."""
    return kernel_rows @ coefficients
