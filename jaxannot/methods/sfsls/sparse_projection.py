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

from jaxannot.graph import Graph, laplacian_matvec
from jaxannot.types import Array, ArrayLike

__all__ = [
    "SparseProjection",
    "SFSLSWeights",
    "TrainingImages",
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


class SFSLSWeights(NamedTuple):
    r"""The constants of the SFSLS objective (8) (Shi & Ruan 2015),

    .. math::

        J = \mathrm{tr}(F^T L F) + \mathrm{tr}((F - Y)^T Q (F - Y))
          + \alpha \big[ \lVert x G - F \rVert_F^2
            + \lambda \sum_i (\lVert g^i \rVert_2^2 + \varepsilon)^{p/2}
            + \mu \lVert G - U P \rVert_F^2 \big].

    Attributes
    ----------
    alpha : float > 0
        α, the weight of the regression block (fit ``x G ≈ F``, its sparsity and its
        subspace terms) against the graph smoothness and label fit of ``F``.
    lam : float > 0
        λ, the weight of the row sparsity of ``G``.
    mu : float > 0
        μ, the weight of the shared subspace term ``‖G − UP‖²_F``.
    p : float in (0, 1]
        Exponent of the :math:`\ell_{2,p}` norm: ``1`` is :math:`\ell_{2,1}` (SFSS),
        smaller values select fewer features.
    eps : float > 0, default 1e-8
        ε on the squared row norm, smoothing the non-differentiable ``g^i = 0`` (the
        reweighting :func:`reweighting_diagonal` needs it; the objective alone also
        accepts ``0``, the paper's :math:`\lambda \lVert G \rVert_{2,p}^p`).
    """

    alpha: ArrayLike
    lam: ArrayLike
    mu: ArrayLike
    p: ArrayLike
    eps: ArrayLike = 1e-8

    def validated(self) -> SFSLSWeights:
        """These weights as float32 scalars (traced by the solver, so sweeps do not
        recompile), after checking the ranges above.

        Raises
        ------
        ValueError
            ``p`` outside ``(0, 1]`` or ``alpha``, ``lam``, ``mu``, ``eps`` not > 0.
        """
        if not 0.0 < self.p <= 1.0:
            raise ValueError(f"p must be in (0, 1], got {self.p}")
        for name in ("alpha", "lam", "mu", "eps"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        return SFSLSWeights(*(jnp.asarray(v, jnp.float32) for v in self))


class TrainingImages(NamedTuple):
    """The training images that objective (8) is defined on (the paper's ``X``, ``Y``,
    ``Q`` and ``L``).

    Attributes
    ----------
    x : [n, d]
        Features (the paper's ``Xᵀ``).
    y : [n, c]
        0/1 concepts; rows of unlabelled images are zero.
    labelled : bool [n]
        Images with infinite weight in ``Q`` (their rows of ``F`` are pinned to ``y``).
    graph : Graph
        Symmetric k-NN graph of the ``n`` images (``graph.num_nodes == n``); ``L`` is
        its Laplacian.
    """

    x: ArrayLike
    y: ArrayLike
    labelled: ArrayLike
    graph: Graph

    def validated(self) -> TrainingImages:
        """These images as float32 ``x`` and ``y``, bool ``labelled`` and a graph with
        int32 endpoints and float32 weights, after checking their shapes.

        Raises
        ------
        ValueError
            ``y`` not ``[n, c]``, ``labelled`` not ``[n]`` or ``graph.num_nodes != n``
            (``n`` the rows of ``x``).
        TypeError
            ``graph`` not a :class:`jaxannot.graph.Graph`.
        """
        x = jnp.asarray(self.x, jnp.float32)
        n = x.shape[0]
        y = jnp.asarray(self.y, jnp.float32)
        if y.ndim != 2 or y.shape[0] != n:
            raise ValueError(f"y must be [images={n}, concepts], got {y.shape}")
        labelled = jnp.asarray(self.labelled, bool)
        if labelled.shape != (n,):
            raise ValueError(f"labelled must be [images={n}], got {labelled.shape}")
        graph = self.graph
        if not isinstance(graph, Graph):
            raise TypeError(f"graph must be a jaxannot.graph.Graph, got {type(graph)}")
        if graph.num_nodes != n:
            raise ValueError(
                f"graph must have num_nodes = images = {n}, got {graph.num_nodes}"
            )
        graph = Graph(
            jnp.asarray(graph.senders, jnp.int32),
            jnp.asarray(graph.receivers, jnp.int32),
            jnp.asarray(graph.weights, jnp.float32),
            n,
        )
        return TrainingImages(x, y, labelled, graph)


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


def _shared_terms(params, images: TrainingImages, weights: SFSLSWeights):
    """Every term of (8) but the sparsity one (pinning the labelled rows of ``F``)."""
    x, y, labelled, graph = images
    f = jnp.where(labelled[:, None], y, params.f)
    smooth = jnp.sum(f * laplacian_matvec(graph, f))
    # Q = 1 on unlabelled rows (Y_u = 0); labelled rows are pinned, contributing 0.
    label_fit = jnp.sum(jnp.where(labelled[:, None], 0.0, jnp.square(f - y)))
    residual = jnp.sum(jnp.square(x @ params.g - f))
    subspace = jnp.sum(jnp.square(params.g - params.u @ params.p))
    return smooth + label_fit + weights.alpha * (residual + weights.mu * subspace)


def sfsls_objective(
    params: SparseProjection, images: TrainingImages, weights: SFSLSWeights
) -> Array:
    """The SFSLS objective (8) for general ``p`` (see the module docstring).

    Parameters
    ----------
    params : SparseProjection
        ``f`` ``[n, c]`` (its labelled rows are replaced by ``images.y``), ``g``
        ``[d, c]``, ``u`` ``[d, r]``, ``p`` ``[r, c]``.
    images : TrainingImages
        ``x``, ``y``, ``labelled`` and the k-NN ``graph`` of the ``n`` images.
    weights : SFSLSWeights
        The paper's α, λ, μ, the norm exponent ``p`` and the zero-row guard ε.
    """
    shared = _shared_terms(params, images, weights)
    penalty = l2p_penalty(params.g, weights.p, weights.eps)
    return shared + weights.alpha * weights.lam * penalty


def surrogate_objective(
    params: SparseProjection,
    d_diag: Array,
    images: TrainingImages,
    weights: SFSLSWeights,
) -> Array:
    r"""Eq. (9)/(12) with the reweighting ``D`` (diagonal ``d_diag`` [d], from
    :func:`reweighting_diagonal`) fixed: the sparsity term becomes
    :math:`\lambda\,\mathrm{tr}(G^T D G)` (``weights.p`` and ``weights.eps`` enter
    through ``D`` only). Algorithm 1's closed-form ``P``, ``G``, ``F`` updates are its
    stationary points (tested with ``jax.grad``)."""
    shared = _shared_terms(params, images, weights)
    sparsity = jnp.sum(d_diag[:, None] * jnp.square(params.g))
    return shared + weights.alpha * weights.lam * sparsity


def feature_ranking(g: ArrayLike) -> np.ndarray:
    """Feature indices sorted by decreasing row norm ``‖g^i‖`` (ties by index)."""
    norms = np.asarray(row_norms(jnp.asarray(g)), dtype=np.float64)
    return np.lexsort((np.arange(norms.size), -norms))


def select_features(g: ArrayLike, num_features: int) -> np.ndarray:
    """The ``num_features`` top-ranked feature indices (sorted ascending)."""
    norms = np.asarray(g).shape[0]
    if not 1 <= num_features <= norms:
        raise ValueError(f"num_features must be in [1, {norms}], got {num_features}")
    return np.sort(feature_ranking(g)[:num_features])


def annotation_scores(x: Array, g: Array) -> Array:
    """Concept scores ``x G`` (the paper's ``Xᵀ G``), ``[images, concepts]``."""
    return jnp.asarray(x) @ jnp.asarray(g)
