"""sklearn scorers for the annotation metrics of :mod:`jaxannot.metrics`."""

from __future__ import annotations

import re

import numpy as np
from sklearn.metrics import make_scorer

from jaxannot import metrics

__all__ = ["scorer", "scorer_names"]

# name -> metric of (scores, truth) ; the "@n" ones take n
_PLAIN = {
    "map": metrics.mean_average_precision,
    "miap": metrics.mean_interpolated_average_precision,
    "accuracy": metrics.annotation_accuracy,
    "complete_length": metrics.complete_length,
}
_IMAGE_AT_N = ("precision", "recall", "f1")  # image_prf_at_n's tuple order
_WORD_AT_N = {
    "word_precision": "precision",
    "word_recall": "recall",
    "word_f1": "f1",
    "n_plus": "n_plus",
}
#: lower is better for these
_LOWER_IS_BETTER = frozenset({"complete_length"})


def scorer_names(n: int = 5) -> list[str]:
    """The names :func:`scorer` accepts.

    Parameters
    ----------
    n : int
        The cut-off shown in the ``@n`` names (any positive ``n`` works).

    Returns
    -------
    list of str
        The plain names, then the ``@n`` ones.
    """
    at_n = [f"{m}@{n}" for m in (*_IMAGE_AT_N, *_WORD_AT_N)]
    return [*_PLAIN, *at_n]


def _annotation_metric(y_true, y_score, *, metric: str, n: int = 0) -> float:
    """``metric`` of word scores ``y_score`` against the word matrix ``y_true``
    (sklearn's argument order: truth first)."""
    truth = y_true.toarray() if hasattr(y_true, "toarray") else np.asarray(y_true)
    if truth.ndim != 2:
        raise ValueError(
            f"annotation scorers need a 2-D (n_images, n_words) Y, got {truth.shape}"
        )
    if metric in _PLAIN:
        return float(_PLAIN[metric](y_score, truth))
    if metric in _IMAGE_AT_N:
        p_r_f1 = metrics.image_prf_at_n(y_score, truth, n)
        return float(p_r_f1[_IMAGE_AT_N.index(metric)])
    return float(metrics.word_prf_at_n(y_score, truth, n)[_WORD_AT_N[metric]])


def scorer(name: str):
    """An sklearn scorer for the annotation metric ``name``.

    The scorer ranks the words of ``estimator.decision_function(X)`` (so it works
    with every :mod:`jaxannot.sklearn` annotator, and with a ``Pipeline`` ending in
    one) and compares them with ``Y``, the ``(n_images, n_words)`` word matrix.

    Parameters
    ----------
    name : str
        ``map``, ``miap``, ``accuracy``, ``complete_length`` (lower is better: the
        scorer returns its negative, as sklearn's ``neg_*`` scorers), or one of
        ``precision@N``, ``recall@N``, ``f1@N`` (per image, top ``N`` words),
        ``word_precision@N``, ``word_recall@N``, ``word_f1@N``, ``n_plus@N`` (per
        word) for a positive integer ``N``. The metrics are those of
        :func:`jaxannot.metrics.annotation_report`.

    Returns
    -------
    callable
        ``scorer(estimator, X, Y) -> float``, greater is better, for
        ``GridSearchCV(scoring=...)``, ``cross_val_score`` and the like.

    Raises
    ------
    ValueError
        For an unknown name; the message lists the valid ones.

    Examples
    --------
    >>> from jaxannot.sklearn import scorer
    >>> s = scorer("word_f1@5")
    """
    text = name if isinstance(name, str) else ""
    match = re.fullmatch(r"([a-z_0-9]+)@([0-9]+)", text)
    if text in _PLAIN:
        kwargs = {"metric": name}
    elif match and int(match[2]) >= 1 and (match[1] in _IMAGE_AT_N + tuple(_WORD_AT_N)):
        kwargs = {"metric": match[1], "n": int(match[2])}
    else:
        valid = ", ".join(scorer_names()).replace("@5", "@N")
        raise ValueError(f"unknown scorer {name!r}; valid: {valid} (N >= 1)")
    return make_scorer(
        _annotation_metric,
        response_method="decision_function",
        greater_is_better=name not in _LOWER_IS_BETTER,
        **kwargs,
    )
