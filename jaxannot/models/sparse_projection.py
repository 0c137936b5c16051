r"""The sparse projection of SFSLS: objective, reweighting and feature ranking.

SFSLS (Shi & Ruan 2015, seed 003) learns a projection ``G`` (features × concepts)
whose rows are sparse in the :math:`\ell_{2,p}` sense, a shared subspace ``U``
(features × r, orthonormal columns) with coefficients ``P``, and soft labels ``F`` of
every training image propagated over a k-NN graph. With the paper's ``X = xᵀ``
(``x`` is ``[images, features]`` here), eq. (8) reads

.. math::

    J(F, G, U, P) = \mathrm{tr}(F^T L F) + \mathrm{tr}((F - Y)^T Q (F - Y))
      + \alpha \big[ \lVert x G - F \rVert_F^2
        + \lambda \sum_i (\lVert g^i \rVert_2^2 + \varepsilon)^{p/2}
        + \mu \lVert G - U P \rVert_F^2 \big]

with ``L`` the graph Laplacian and ``Q`` diagonal, ``Q_ii = ∞`` on labelled images and
``1`` on unlabelled ones. The infinite weight is handled exactly: the labelled rows of
``F`` are pinned to ``Y`` (this module evaluates ``J`` with ``F_l := Y_l``) and only the
unlabelled rows are free. ``ε`` (default ``1e-8``, on the squared row norm) smooths the
non-differentiable point ``g^i = 0``; with ``ε = 0`` it is the paper's
:math:`\lambda \lVert G \rVert_{2,p}^p`.

Reweighting (DESIGN.md, general p). :math:`s \mapsto (s + \varepsilon)^{p/2}` is concave
in :math:`s = \lVert g \rVert^2`, so its tangent at the current iterate majorizes it:

.. math::

    (\lVert g \rVert^2 + \varepsilon)^{p/2} \le \mathrm{const}
      + D_{ii} \lVert g \rVert^2, \qquad
    D_{ii} = \tfrac{p}{2} (\lVert g_t^i \rVert^2 + \varepsilon)^{p/2 - 1}

(``p = ½`` gives the paper's :math:`D_{ii} = 1/(4 \lVert g^i \rVert^{3/2})`). The
surrogate (eq. (12) with ``D`` fixed) replaces the sparsity term by
:math:`\lambda\, \mathrm{tr}(G^T D G)`. Note: the paper writes ``4λ tr(GᵀDG)``; with its
own ``D`` that is four times the tangent and would break the proof of Theorem 1 (whose
Lemma 1 uses the factor ¼), so this module uses the tangent ``λ tr(GᵀDG)``.

References
----------
C. Shi, Q. Ruan. Feature selection with enhanced sparsity for web image annotation
(基于增强稀疏性特征选择的网络图像标注). Journal of Software 26(7):1800-1811, 2015.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

import jax.numpy as jnp

from jaxannot.graph import Graph
from jaxannot.graph import laplacian_matvec as graph_laplacian_matvec
from jaxannot.types import Array

__all__ = [
    "SparseProjection",
    "laplacian_matvec",
    "row_norms",
    "l2p_penalty",
    "reweighting_diagonal",
    "sfsls_objective",
    "surrogate_objective",
    "feature_ranking",
    "select_features",
    "annotation_scores",
]


class SparseProjection(NamedTuple):
    """The blocks of the SFSLS objective.

    Attributes
    ----------
    f : [images, concepts]
        Soft labels of the training images (labelled rows equal ``y``).
    g : [features, concepts]
        The sparse projection; annotation scores are ``x @ g``.
    u : [features, subspace]
        Shared subspace, orthonormal columns.
    p : [subspace, concepts]
        Coefficients in the subspace (``P = Uᵀ G`` at the optimum, eq. (10)).
    """

    f: Array
    g: Array
    u: Array
    p: Array


def laplacian_matvec(senders, receivers, weights, f, num_nodes: int) -> Array:
    r"""``L f = (D − S) f`` for a graph stored as a symmetric edge list:
    :func:`jaxannot.graph.laplacian_matvec` of ``Graph(senders, receivers, weights,
    num_nodes)`` (every undirected edge stored in both directions). O(edges · columns).
    """
    graph = Graph(senders, receivers, weights, num_nodes)
    return graph_laplacian_matvec(graph, f)


def row_norms(g: Array) -> Array:
    """Euclidean norm of every row, :math:`\\lVert g^i \\rVert_2`."""
    return jnp.sqrt(jnp.sum(jnp.square(g), axis=-1))


def l2p_penalty(g: Array, p: float, eps: float = 0.0) -> Array:
    r""":math:`\sum_i (\lVert g^i \rVert^2 + \varepsilon)^{p/2}`; ``eps = 0`` gives
    :math:`\lVert G \rVert_{2,p}^p` (eq. (1) raised to the power p)."""
    return jnp.sum((jnp.sum(jnp.square(g), axis=-1) + eps) ** (p / 2.0))


def reweighting_diagonal(g: Array, p: float, eps: float) -> Array:
    r"""Diagonal of the reweighting matrix, :math:`D_{ii} = \tfrac{p}{2}
    (\lVert g^i\rVert^2 + \varepsilon)^{p/2-1}` (tangent of the concave
    :math:`s \mapsto (s+\varepsilon)^{p/2}`; ``eps > 0`` guards zero rows)."""
    return 0.5 * p * (jnp.sum(jnp.square(g), axis=-1) + eps) ** (0.5 * p - 1.0)


def _pin(f: Array, y: Array, labelled: Array) -> Array:
    return jnp.where(labelled[:, None], y, f)


def _shared_terms(params, x, y, labelled, graph, alpha, mu):
    senders, receivers, weights = graph
    f = _pin(params.f, y, labelled)
    lf = laplacian_matvec(senders, receivers, weights, f, x.shape[0])
    smooth = jnp.sum(f * lf)
    # Q = 1 on unlabelled rows (Y_u = 0); labelled rows are pinned, contributing 0.
    label_fit = jnp.sum(jnp.where(labelled[:, None], 0.0, jnp.square(f - y)))
    residual = jnp.sum(jnp.square(x @ params.g - f))
    subspace = jnp.sum(jnp.square(params.g - params.u @ params.p))
    return smooth + label_fit + alpha * (residual + mu * subspace)


def sfsls_objective(
    params: SparseProjection,
    x: Array,
    y: Array,
    labelled: Array,
    graph: tuple[Array, Array, Array],
    *,
    alpha: float,
    lam: float,
    mu: float,
    p: float,
    eps: float = 1e-8,
) -> Array:
    """The SFSLS objective (8) for general ``p`` (see the module docstring).

    Parameters
    ----------
    params : SparseProjection
        ``f`` ``[n, c]`` (its labelled rows are replaced by ``y``), ``g`` ``[d, c]``,
        ``u`` ``[d, r]``, ``p`` ``[r, c]``.
    x : [n, d]
        Features of the training images (the paper's ``Xᵀ``).
    y : [n, c]
        0/1 concepts; rows of unlabelled images are zero.
    labelled : bool [n]
        Images with infinite weight in ``Q``.
    graph : (senders, receivers, weights)
        Symmetric k-NN graph of the ``n`` images (both directions stored).
    alpha, lam, mu, p, eps : float
        The paper's α, λ, μ, the norm exponent ``p ∈ (0, 1]`` and the zero-row guard.
    """
    shared = _shared_terms(params, x, y, labelled, graph, alpha, mu)
    return shared + alpha * lam * l2p_penalty(params.g, p, eps)


def surrogate_objective(
    params: SparseProjection,
    d_diag: Array,
    x: Array,
    y: Array,
    labelled: Array,
    graph: tuple[Array, Array, Array],
    *,
    alpha: float,
    lam: float,
    mu: float,
) -> Array:
    r"""Eq. (9)/(12) with the reweighting ``D`` fixed: the sparsity term becomes
    :math:`\lambda\,\mathrm{tr}(G^T D G)`. Algorithm 1's closed-form ``P``, ``G``, ``F``
    updates are its stationary points (tested with ``jax.grad``)."""
    shared = _shared_terms(params, x, y, labelled, graph, alpha, mu)
    return shared + alpha * lam * jnp.sum(d_diag[:, None] * jnp.square(params.g))


def feature_ranking(g) -> np.ndarray:
    """Feature indices sorted by decreasing row norm ``‖g^i‖`` (ties by index)."""
    norms = np.asarray(row_norms(jnp.asarray(g)), dtype=np.float64)
    return np.lexsort((np.arange(norms.size), -norms))


def select_features(g, num_features: int) -> np.ndarray:
    """The ``num_features`` top-ranked feature indices (sorted ascending)."""
    norms = np.asarray(g).shape[0]
    if not 1 <= num_features <= norms:
        raise ValueError(f"num_features must be in [1, {norms}], got {num_features}")
    return np.sort(feature_ranking(g)[:num_features])


def annotation_scores(x: Array, g: Array) -> Array:
    """Concept scores ``x G`` (the paper's ``Xᵀ G``), ``[images, concepts]``."""
    return jnp.asarray(x) @ jnp.asarray(g)
