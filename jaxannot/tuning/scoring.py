"""Which metric a cross-validation compares, which way is better, and the score of
one setting on one fold (:func:`score_fold`)."""

from __future__ import annotations

import logging
import math
from typing import NamedTuple

import numpy as np

from jaxannot import metrics as _metrics
from jaxannot.annotators.base import Method, get_method
from jaxannot.annotators.hyper_values import Hyper
from jaxannot.data.corpus import Corpus
from jaxannot.data.protocols import Task
from jaxannot.evaluation import evaluate

__all__ = [
    "LOWER_IS_BETTER",
    "FoldScore",
    "available_metrics",
    "default_metric",
    "resolve_metric",
    "score_fold",
]

log = logging.getLogger("jaxannot.tuning")

#: Metrics of :func:`~jaxannot.evaluation.evaluate` where lower is better; higher is
#: better for every other one.
LOWER_IS_BETTER = frozenset(
    {"complete_length", "rmse", "ranking_loss", "coverage", "one_error", "hamming_loss"}
)


def _annotation_metric_names(n: int = 5) -> list[str]:
    """The annotation and multi-label metrics ``evaluate`` reports for word scores."""
    truth = np.eye(n + 1, dtype=np.float32)
    names = list(_metrics.annotation_report(truth, truth, n=n))
    return names + list(_metrics.MULTILABEL_METRICS)


def available_metrics(method: str | Method, corpus: Corpus, n: int = 5) -> list[str]:
    """The metrics :func:`~jaxannot.evaluation.evaluate` reports for ``method`` on
    ``corpus``: the annotation and multi-label metrics
    (:data:`~jaxannot.metrics.MULTILABEL_METRICS`) where it scores words of a corpus
    with words,
    ``classification_accuracy`` where the corpus has classes and the method predicts
    labels (or scores one word per class); ``rmse`` and ``r2`` for a regressor (a
    method with a ``response``)."""
    if isinstance(method, str):
        method = get_method(method)
    if method.response is not None:
        return ["rmse", "r2"]
    names = []
    scores_words = method.score_words is not None and corpus.words is not None
    if scores_words:
        names += _annotation_metric_names(n)
    if corpus.labels is not None and (
        method.predict_labels is not None
        or (scores_words and corpus.num_words == corpus.num_classes)
    ):
        names.append("classification_accuracy")
    return names


def default_metric(method: str | Method, corpus: Corpus) -> str:
    """``rmse`` for a regressor, ``classification_accuracy`` for a classifier (a
    method with ``predict_labels``) on a corpus with classes, ``map`` otherwise."""
    if isinstance(method, str):
        method = get_method(method)
    if method.response is not None:
        return "rmse"
    if method.predict_labels is not None and corpus.labels is not None:
        return "classification_accuracy"
    return "map"


def resolve_metric(method: str | Method, corpus: Corpus, metric: str | None) -> str:
    """``metric``, or :func:`default_metric` when None; ``ValueError`` listing the
    valid names (:func:`available_metrics`) when ``evaluate`` would not report it."""
    if isinstance(method, str):
        method = get_method(method)
    valid = available_metrics(method, corpus)
    if metric is None:
        metric = default_metric(method, corpus)
    if metric not in valid:
        raise ValueError(
            f"unknown metric {metric!r} for {method.name!r} on {corpus.name!r}; "
            f"valid metrics: {', '.join(valid) or '(none)'}"
        )
    return metric


class FoldScore(NamedTuple):
    """What one setting scored on one fold.

    Attributes
    ----------
    value : float
        The compared metric; NaN when the fit diverged.
    metrics : dict
        Every metric :func:`~jaxannot.evaluation.evaluate` reported (``{}`` when the
        fit diverged).
    converged : bool
        False when the fit's info reported ``converged: false`` (a solver stopped at
        its cap).
    """

    value: float
    metrics: dict
    converged: bool


def score_fold(
    method: Method, task: Task, hyper: Hyper, metric: str, seed: int, where: str
) -> FoldScore:
    """Fit ``hyper`` on a fold's ``task`` and score it by ``metric`` (the driver of
    :func:`~jaxannot.evaluation.evaluate`, seeded by ``seed``); a fit that raises
    ``FloatingPointError`` (it diverged) scores NaN, with a warning. ``where`` names
    the fold and the setting in the log. ``ValueError`` when the method does not
    report ``metric``."""
    try:
        result = evaluate(method, task, hyper=hyper, seed=seed)
    except FloatingPointError as err:
        log.warning("%s diverged (%s): scored NaN", where, err)
        return FoldScore(math.nan, {}, True)
    if metric not in result.metrics:
        raise ValueError(
            f"{method.name!r} did not report {metric!r}; it reported: "
            f"{', '.join(result.metrics)}"
        )
    value = result.metrics[metric]
    log.debug("%s: %s = %.4f (fit %.2f s)", where, metric, value, result.fit_seconds)
    info = (result.fitted.info if result.fitted is not None else None) or {}
    return FoldScore(value, dict(result.metrics), info.get("converged") is not False)
