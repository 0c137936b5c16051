r"""Sparse feature-selection annotators: ``sfsls``, ``sfss`` and ``fsnm``.

``sfsls``
    Semi-supervised sparse feature selection with the :math:`\ell_{2,p}` matrix norm
    and shared subspace learning (Shi & Ruan 2015, seed 003): objective (8) of
    :mod:`jaxannot.methods.sfsls.sparse_projection` solved by Algorithm 1
    (:mod:`jaxannot.methods.sfsls.solver`). The images whose words are observed
    (``corpus.word_mask``) are the labelled ones; the other training images enter
    through the k-NN graph (set ``use_unlabelled=False`` to drop them). Concept scores
    of an image are ``x G + b`` on standardized features, where the per-concept offset
    ``b`` (mean residual on the labelled images) only shifts each concept's column and
    leaves per-concept rankings (MAP) unchanged.
``sfss``
    The ``p = 1`` case (the :math:`\ell_{2,1}` norm, with the same shared subspace and
    graph): sub-space sparsity collaborated feature selection (Ma et al. 2012).
``fsnm``
    Feature selection by joint :math:`\ell_{2,1}` minimization (Nie et al. 2010) on the
    labelled images, then — as in seed 003 §3 — a least-squares regression on the
    selected features gives the scores.

All three rank features by ``‖g^i‖`` (``feature_ranking``) and store it in
``Fitted.params.ranking``.
"""

from __future__ import annotations

import collections
import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

import jax.numpy as jnp

from jaxannot.annotators.base import Fitted, Method, register_words_method
from jaxannot.annotators.hyper_spec import uses_defaults
from jaxannot.data.corpus import Corpus
from jaxannot.data.preprocessing import standardize
from jaxannot.graph import Graph, knn_graph, pad_edges
from jaxannot.inference.support import SupportError, check_finite_tree, check_support
from jaxannot.methods.sfsls.fsnm import fit_fsnm
from jaxannot.methods.sfsls.params import FsnmParams, SfslsParams
from jaxannot.methods.sfsls.solver import fit_sfsls
from jaxannot.methods.sfsls.sparse_projection import (
    SFSLSWeights,
    TrainingImages,
    feature_ranking,
)

if TYPE_CHECKING:
    from jaxannot.types import ArrayTree

__all__ = [
    "SFSLS",
    "SFSS",
    "FSNM",
    "check_fitted_support",
    "ranked_features",
    "selected_features",
]


def _targets(corpus: Corpus) -> tuple[np.ndarray, np.ndarray]:
    mask, words = corpus.observed_words()
    y = (words > 0).astype(np.float32)
    return np.where(mask[:, None], y, 0.0).astype(np.float32), mask


def _scores(fitted: Fitted, corpus: Corpus) -> np.ndarray:
    params = fitted.params
    x = corpus.features(fitted.hyper.get("view", ""))
    mean = np.asarray(params.mean)
    if x.shape[1] != mean.shape[0]:
        raise ValueError(
            f"the corpus has {x.shape[1]} feature dimensions, the fitted model "
            f"{mean.shape[0]}"
        )
    z = (x - mean) / np.asarray(params.std)
    if isinstance(params, FsnmParams):  # regression on the selected features
        z = z[:, np.asarray(params.selected)]
    return np.asarray(z @ np.asarray(params.g) + np.asarray(params.offset))


def ranked_features(fitted: Fitted) -> np.ndarray:
    """Feature indices by decreasing importance ``‖g^i‖``."""
    return np.asarray(fitted.params.ranking)


def selected_features(fitted: Fitted, num_features: int) -> np.ndarray:
    """The ``num_features`` most important features (sorted indices)."""
    ranking = ranked_features(fitted)
    if not 1 <= num_features <= ranking.size:
        raise ValueError(
            f"num_features must be in [1, {ranking.size}], got {num_features}"
        )
    return np.sort(ranking[:num_features])


# ------------------------------------------------------------------ sfsls / sfss
#: The last few k-NN graphs, keyed by the exact features and ``k``: a hyper-parameter
#: sweep or cross-validation refits on the same training images many times.
_GRAPH_CACHE: collections.OrderedDict = collections.OrderedDict()
_GRAPH_CACHE_SIZE = 4


def _knn_graph(z: np.ndarray, k: int) -> Graph:
    """Heat-kernel k-NN graph of ``z``, edges padded to ``2 n k`` (memoized on the
    bytes of ``z``)."""
    z = np.ascontiguousarray(z, dtype=np.float32)
    key = (z.shape, k, hashlib.sha1(z.tobytes()).hexdigest())
    if key in _GRAPH_CACHE:
        _GRAPH_CACHE.move_to_end(key)
        return _GRAPH_CACHE[key]
    graph = pad_edges(knn_graph(z, k, weight="heat"), 2 * z.shape[0] * k)
    _GRAPH_CACHE[key] = graph
    while len(_GRAPH_CACHE) > _GRAPH_CACHE_SIZE:
        _GRAPH_CACHE.popitem(last=False)
    return graph


def _subspace_fit(name: str, **fixed: float) -> Callable[..., Fitted]:
    """The fit of ``name``, ``sfsls`` or its case ``sfss`` (``fixed``: ``p = 1``), by
    Algorithm 1 with the hyper-parameters of ``name``'s table.

    The defaults were chosen by 3-fold cross-validation on training images (scene at
    10% and 100% labelled, Corel5k): see docs/sfsls.md, "Defaults".
    """

    @uses_defaults(name, **fixed)
    def fit(
        corpus: Corpus,
        *,
        rng_key=None,
        p: float,
        alpha: float,
        lam: float,
        mu: float,
        subspace: int,
        neighbors: int,
        iterations: int,
        tol: float,
        eps: float,
        use_unlabelled: bool,
        view: str,
    ) -> Fitted:
        del rng_key  # deterministic (ridge start)
        y, labelled = _targets(corpus)
        x = corpus.features(view)
        if not use_unlabelled:
            x, y, labelled = x[labelled], y[labelled], labelled[labelled]
        z, mean, std = standardize(x, eps=1e-8)
        c = y.shape[1]
        r = subspace if subspace > 0 else max(1, min(c - 1, z.shape[1]))
        k = min(neighbors, z.shape[0] - 1)
        images = TrainingImages(z, y, labelled, _knn_graph(z, max(k, 1)))
        weights = SFSLSWeights(alpha=alpha, lam=lam, mu=mu, p=p, eps=eps)
        state, history, cg_residual = fit_sfsls(
            images, weights, subspace=r, max_iter=iterations, tol=tol
        )
        g = np.asarray(state.params.g)
        offset = (y[labelled] - z[labelled] @ g).mean(axis=0)
        history = np.asarray(history)
        params = SfslsParams(
            g=g,
            u=np.asarray(state.params.u),
            offset=offset.astype(np.float32),
            mean=mean,
            std=std,
            ranking=feature_ranking(g).astype(np.int32),
        )
        info = {
            "objective": [float(v) for v in history[np.isfinite(history)]],
            "iterations": int(state.iteration),
            "cg_residual": float(cg_residual),
        }
        check_fitted_support(name, params, info["iterations"])
        return Fitted(name, params, {}, info)

    return fit


#: The least positive float32: a feature's ``std`` must be at least this.
_TINY = float(np.finfo(np.float32).tiny)


def check_fitted_support(name: str, params: ArrayTree, iteration: int | str) -> None:
    """Raise :class:`~jaxannot.inference.support.SupportError` unless the fitted
    ``params`` of ``sfsls``, ``sfss`` or ``fsnm`` lie in their support.

    Every floating array must be finite (``g``, ``u``, ``w``, ``offset``, ``mean``:
    a NaN ``g`` also scrambles the feature ranking); the features' ``std`` positive
    (they are divided by it); the shared subspace ``u`` orthonormal,
    every entry of ``UᵀU`` within 1e-3 of the identity's (Algorithm 1 orthonormalizes it
    by QR; the objective depends on its span only).

    Parameters
    ----------
    name : str
        The method, for the message.
    params : SfslsParams or FsnmParams
        Its fitted params.
    iteration : int or str
        The solver's last iteration, for the message.
    """
    check_finite_tree(name, params, iteration=iteration)
    check_support(f"{name}: std", params.std, iteration=iteration, lower=_TINY)
    u = getattr(params, "u", None)
    if u is not None and np.size(u):
        u = np.asarray(u, np.float64)
        off = float(np.abs(u.T @ u - np.eye(u.shape[1])).max())
        if off > 1e-3:
            raise SupportError(
                f"{name}: u left its support at iteration {iteration}: its columns "
                f"are {off:.3g} away from orthonormal (tolerance 0.001)"
            )


def _embed(fitted: Fitted, corpus: Corpus) -> np.ndarray:
    x = corpus.features(fitted.hyper.get("view", ""))
    z = (x - np.asarray(fitted.params.mean)) / np.asarray(fitted.params.std)
    return z @ np.asarray(fitted.params.u)


def _register_subspace(name: str, fit, summary: str, estimator_name: str) -> Method:
    """Register a method fitted by Algorithm 1 (``sfsls`` or its ``p = 1`` case
    ``sfss``): its parameters, scores and embedding are those of
    :func:`_subspace_fit`."""
    return register_words_method(
        name,
        fit,
        summary,
        params=SfslsParams,
        monotone={"objective": "decreases"},  # Algorithm 1
        score_words=_scores,
        embed=_embed,
        estimator_name=estimator_name,
    )


SFSLS = _register_subspace(
    "sfsls",
    _subspace_fit("sfsls"),
    "semi-supervised l2,p sparse feature selection + shared subspace (Shi & Ruan 2015)",
    "SFSLS",
)


SFSS = _register_subspace(
    "sfss",
    _subspace_fit("sfss", p=1.0),
    "semi-supervised l2,1 sparse feature selection + shared subspace "
    "(SFSS, Ma et al. 2012)",
    "SFSS",
)


# ------------------------------------------------------------------------- fsnm
@uses_defaults("fsnm")
def _fsnm_fit(
    corpus: Corpus,
    *,
    rng_key=None,
    gamma: float,
    selected: float,
    ridge: float,
    iterations: int,
    tol: float,
    view: str,
) -> Fitted:
    del rng_key  # deterministic
    y, labelled = _targets(corpus)
    x = corpus.features(view)[labelled]
    y = y[labelled]
    z, mean, std = standardize(x, eps=1e-8)
    state, history = fit_fsnm(z, y, gamma=gamma, max_iter=iterations, tol=tol)
    ranking = feature_ranking(np.asarray(state.w)).astype(np.int32)
    keep = np.sort(ranking[: max(1, int(round(selected * z.shape[1])))])
    zs = jnp.asarray(z[:, keep])
    yc = y - y.mean(axis=0)
    gram = zs.T @ zs + ridge * zs.shape[0] * jnp.eye(keep.size)
    g = np.linalg.solve(np.asarray(gram, np.float64), np.asarray(zs.T @ yc, np.float64))
    offset = y.mean(axis=0) - np.asarray(zs).mean(axis=0) @ g
    history = np.asarray(history)
    params = FsnmParams(
        w=np.asarray(state.w),
        g=g.astype(np.float32),
        selected=keep.astype(np.int32),
        offset=offset.astype(np.float32),
        mean=mean,
        std=std,
        ranking=ranking,
    )
    check_fitted_support("fsnm", params, int(state.iteration))
    return Fitted(
        "fsnm",
        params,
        {},
        {
            "objective": [float(v) for v in history[np.isfinite(history)]],
            "iterations": int(state.iteration),
        },
    )


FSNM = register_words_method(
    "fsnm",
    _fsnm_fit,
    "joint l2,1 feature selection (Nie et al. 2010) + least squares on the "
    "selected features",
    params=FsnmParams,
    monotone={"objective": "decreases"},
    score_words=_scores,
    estimator_name="FSNM",
)
