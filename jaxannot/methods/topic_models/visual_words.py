r"""The visual and text bags that the topic-model annotators read.

The topic models of seed 000 (mixture of unigrams, pLSA-Words, Link-LDA) are
distributions over *counts*: they read the ``bag`` and ``binary`` views of a corpus as
visual-word counts. Real-valued views (colour moments, the scene / yeast feature
vectors of Mulan) are turned into visual words here by **per-dimension quantile
binning**: for dimension :math:`d` the fit corpus's quantiles at
:math:`1/B, \dots, (B-1)/B` cut the axis into :math:`B` bins, and an image emits one
token :math:`(d, b)` per dimension, :math:`b` the bin its value falls in. A view of
:math:`D` real dimensions becomes a binary view of :math:`D B` visual words with
exactly :math:`D` tokens per image. The bin edges are learned on the fit corpus only
and kept in the fitted parameters (``bin_edges``), so new images are binned the same
way. (The seed papers quantize region features with k-means; per-dimension bins keep
the vocabulary interpretable and need no clustering when each image has a single
feature vector.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from jaxannot.annotators.base import Fitted
from jaxannot.data.corpus import Corpus

if TYPE_CHECKING:
    from jaxannot.types import ArrayLike, ArrayTree

__all__ = [
    "visual_views",
    "fit_bin_edges",
    "visual",
    "text",
    "check_topics",
    "check_bins",
    "views_param",
    "edges_param",
    "fitted_visual",
    "fit_views",
    "fitted_with_objective",
]

#: View kinds read directly as visual-word counts.
COUNT_KINDS = ("bag", "binary")


def visual_views(corpus: Corpus, views: str = "") -> list[str]:
    """The views used as visual words (``views``: a comma list, or every view).

    Every view kind is usable: counts as they are, real-valued views through
    :func:`fit_bin_edges`. An unknown name raises ``KeyError`` listing the valid ones.
    """
    if views:
        names = [v.strip() for v in views.split(",") if v.strip()]
        for v in names:
            corpus.view(v)  # KeyError listing the valid views
    else:
        counts = [k for k, kind in corpus.view_kinds.items() if kind in COUNT_KINDS]
        # real-valued views join only when the corpus has no count view
        names = counts or list(corpus.view_kinds)
    if not names:
        raise ValueError(f"corpus {corpus.name!r} has no feature view")
    return names


def check_bins(bins: int) -> None:
    """``bins`` is the number of quantile bins per real dimension (at least 2)."""
    if int(bins) < 2:
        raise ValueError(f"bins must be >= 2 (quantile bins per dimension), got {bins}")


def fit_bin_edges(
    corpus: Corpus, names: Sequence[str], bins: int
) -> dict[str, np.ndarray]:
    """Quantile edges ``[dims, bins - 1]`` of every real-valued view among ``names``."""
    check_bins(bins)
    q = np.linspace(0.0, 1.0, int(bins) + 1)[1:-1]
    edges = {}
    for v in names:
        if corpus.view_kinds[v] in COUNT_KINDS:
            continue
        x = np.asarray(corpus.views[v], np.float64)
        edges[v] = np.quantile(x, q, axis=0).T.astype(np.float32)
    return edges


def _binned(x: np.ndarray, edges: np.ndarray) -> np.ndarray:
    dims, cuts = edges.shape
    bins = cuts + 1
    if x.shape[1] != dims:
        raise ValueError(
            f"a real view has {x.shape[1]} dimensions; the model was fitted on {dims}"
        )
    # bin of x[:, d] among edges[d]: the number of edges strictly below the value
    b = (x[:, :, None] > edges[None, :, :]).sum(-1)
    out = np.zeros((x.shape[0], dims * bins), np.float32)
    rows = np.repeat(np.arange(x.shape[0]), dims)
    out[rows, (np.arange(dims) * bins + b).ravel()] = 1.0
    return out


def visual(
    corpus: Corpus, names: Sequence[str], edges: Mapping[str, np.ndarray] | None = None
) -> tuple[np.ndarray, ...]:
    """The visual views ``names`` of ``corpus`` as count matrices (float32).

    Parameters
    ----------
    corpus : Corpus
    names : sequence of str
        From :func:`visual_views`.
    edges : mapping, optional
        From :func:`fit_bin_edges` (or a fitted model's ``bin_edges``); required for
        every real-valued view among ``names``.
    """
    edges = edges or {}
    out = []
    for v in names:
        x = np.asarray(corpus.views[v], np.float32)
        if corpus.view_kinds[v] not in COUNT_KINDS:
            if v not in edges:
                raise ValueError(f"view {v!r} is real-valued and has no bin edges")
            x = _binned(x, np.asarray(edges[v]))
        out.append(x)
    return tuple(out)


def text(corpus: Corpus) -> np.ndarray:
    """The annotation words as a count matrix; refuses a corpus with none observed."""
    return corpus.observed_words()[1]


def check_topics(topics: int) -> None:
    """At least one topic."""
    if int(topics) < 1:
        raise ValueError(f"topics must be >= 1, got {topics}")


def views_param(hyper: dict) -> list[str]:
    """The visual views a fitted model used (its ``visual_views`` hyper entry)."""
    return [v for v in hyper["visual_views"].split(",") if v]


def edges_param(edges: dict) -> dict | None:
    """The real views' bin edges as a params field (None when there are none)."""
    return dict(edges) if edges else None


def fitted_visual(fitted: Fitted, corpus: Corpus) -> tuple[np.ndarray, ...]:
    """A corpus's visual views as a fitted topic model read them: its views, binned
    with its edges."""
    return visual(corpus, views_param(fitted.hyper), fitted.params.bin_edges)


def fit_views(
    corpus: Corpus, topics: int, views: str, bins: int
) -> tuple[list[str], dict[str, np.ndarray], dict[str, str]]:
    """What every topic-model fit starts with: ``topics`` checked, the visual views
    (:func:`visual_views`) and their bin edges (:func:`fit_bin_edges`) on ``corpus``.

    Returns
    -------
    names : list of str
    edges : dict
    hyper : dict
        The ``visual_views`` entry of the fitted model's hyper-parameters.
    """
    check_topics(topics)
    names = visual_views(corpus, views)
    return names, fit_bin_edges(corpus, names, bins), {"visual_views": ",".join(names)}


def fitted_with_objective(
    method: str, params: ArrayTree, hyper: dict, objective: ArrayLike
) -> Fitted:
    """The :class:`~jaxannot.annotators.Fitted` of a topic model: its ``params``, its
    ``hyper`` (:func:`fit_views`'s) and the per-iteration ``objective`` (an iterable
    of scalars) as floats in its info."""
    return Fitted(method, params, hyper, {"objective": [float(x) for x in objective]})
