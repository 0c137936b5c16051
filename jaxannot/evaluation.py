"""Run a registered method on a :class:`~jaxannot.data.Task` and measure it.

The driver is the same for every method: fit on ``task.train``, score ``task.test``
(or, under the transductive protocol, the fit corpus itself through
``score_fit_corpus`` when the method has it), keep the evaluation rows, and compute the
annotation metrics of :func:`jaxannot.metrics.annotation_report`, the multi-label
metrics of :func:`jaxannot.metrics.multilabel_report` and, where the dataset has
classes, the classification accuracy.

Bipartition rule: the bipartition metrics (micro, macro and example F1, precision,
recall; Hamming loss) annotate every scored image with its ``k`` top-scored words
(ties: the lower word index first), ``k`` the mean number of words of the training
images whose words are observed, rounded half up, at least 1
(:func:`jaxannot.metrics.bipartition_k`); ``k`` is in the JSON (``bipartition``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import time
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

import jax

from jaxannot import metrics
from jaxannot.annotators.base import Fitted, Method, get_method
from jaxannot.annotators.hyper_values import Hyper, fit_parsed, parse_hyper
from jaxannot.data.protocols import Task
from jaxannot.metrics.tables import (
    TABLE_METRICS,
    align_columns,
    check_columns,
    format_metric,
    format_table,
    metric_names,
)
from jaxannot.runtime.checkpoint import checkpointing

__all__ = [
    "TABLE_METRICS",
    "check_columns",
    "metric_names",
    "Evaluation",
    "align_columns",
    "check_applicable",
    "evaluate",
    "format_metric",
    "format_table",
]

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """The outcome of one evaluation run (``as_json`` gives the CLI's JSON)."""

    method: str
    dataset: str
    protocol: str
    params: dict
    metrics: dict
    fit_seconds: float
    predict_seconds: float
    n_train: int
    n_test: int
    n_words: int
    fitted: Fitted | None = None
    bipartition: dict | None = None

    def as_json(self) -> dict[str, Any]:
        """The evaluation as a JSON-ready dict (``fitted`` dropped, ``info`` made safe).

        Returns
        -------
        dict
            Field name -> value, with ``info`` the fitted model's info (or ``{}``).
        """
        out = dataclasses.asdict(self)
        out.pop("fitted")
        info = self.fitted.info if self.fitted is not None else {}
        out["info"] = _jsonable(info or {})
        return out


def _jsonable(value):
    """``value`` with numpy/JAX scalars and arrays turned into Python numbers/lists
    (and anything else into its ``str``), so ``json.dumps`` accepts it."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if hasattr(value, "tolist"):  # numpy / JAX arrays and scalars
        return _jsonable(np.asarray(value).tolist())
    return str(value)


def check_applicable(method: Method, task: Task, n: int = 5) -> None:
    """Raise ``ValueError`` when the dataset lacks what the method needs, or has
    fewer than ``n`` words for the @``n`` annotation metrics of a word scorer.

    Parameters
    ----------
    method : Method
        The registered method to run.
    task : Task
        The train/test split it would run on.
    n : int
        The ``n`` of the @``n`` annotation metrics.
    """
    name = task.train.name
    if "words" in method.needs and task.train.words is None:
        raise ValueError(
            f"method {method.name!r} needs annotation words; {name!r} has none"
        )
    if "labels" in method.needs and task.train.labels is None:
        raise ValueError(
            f"method {method.name!r} needs class labels; dataset {name!r} has none "
            "(use an annotation method, e.g. knn)"
        )
    if method.score_words is None and method.predict_labels is None:
        raise ValueError(
            f"method {method.name!r} neither scores words nor predicts labels"
        )
    words = task.train.num_words
    if method.score_words is not None and task.truth_words is not None and words < n:
        raise ValueError(
            f"dataset {name!r} has {words} word(s) (tags); the annotation metrics "
            f"rank the top {n} words of each image, so they need at least {n}"
        )


def _block(tree) -> None:
    for leaf in jax.tree_util.tree_leaves(tree):
        if hasattr(leaf, "block_until_ready"):
            leaf.block_until_ready()


@contextlib.contextmanager
def _checkpoints(folder, every, method: Method, task: Task, params, seed):
    """A :func:`~jaxannot.runtime.checkpoint.checkpointing` block for this fit
    (none when ``folder`` is None); its tag names the method, settings, seed and
    data, so a folder of another fit is refused."""
    if folder is None:
        yield None
        return
    tag = json.dumps(
        [method.name, _jsonable(params), seed, task.train.name, task.protocol,
         task.train.num_images, task.train.num_words],
        sort_keys=True,
    )  # fmt: skip
    with checkpointing(folder, every=every, tag=tag) as session:
        yield session
    for run, step in session.resumed:
        log.info("checkpoint: step loop %d resumed at step %d", run, step)
    if session.runs == 0:
        log.warning(
            "method %r has no step loop to checkpoint: nothing was saved", method.name
        )


def evaluate(
    method: str | Method,
    task: Task,
    *,
    hyper: Hyper | Mapping[str, Any] | list[str] | None = None,
    seed: int = 0,
    n: int = 5,
    checkpoint: str | os.PathLike | None = None,
    checkpoint_every: int = 10,
) -> Evaluation:
    """Fit ``method`` on ``task.train`` and measure it on the evaluation rows.

    Parameters
    ----------
    method : str or Method
        A registered method or its name.
    task : Task
        From :func:`jaxannot.data.make_task`.
    hyper : Hyper, mapping or list of ``"key=value"``
        Hyper-parameters overriding the method's defaults: a
        :class:`~jaxannot.annotators.Hyper` from
        :func:`~jaxannot.annotators.parse_hyper` is used as it is, anything else is
        parsed and checked here (once).
    seed : int
        Seeds the method's ``rng_key``.
    n : int
        Annotation length for the @N metrics (5 in the Corel5k literature).
    checkpoint : path, optional
        Folder where the fit's step loops save their state every
        ``checkpoint_every`` steps; an interrupted call started again with the same
        arguments resumes from it and gives the same result
        (:mod:`jaxannot.runtime.checkpoint`). A folder written by another fit is
        refused. Methods without a step loop save nothing (logged as a warning).
    checkpoint_every : int
        Steps between checkpoints.

    Returns
    -------
    Evaluation

    Notes
    -----
    Logs the fit and the scoring at DEBUG (logger ``jaxannot.evaluation``): callers
    that run many evaluations (cross-validation) stay quiet at INFO.
    """
    if isinstance(method, str):
        method = get_method(method)
    check_applicable(method, task, n)
    params = parse_hyper(method, hyper if hyper is not None else {})
    fitted, fit_seconds = _fit(method, task, params, seed, checkpoint, checkpoint_every)

    start = time.perf_counter()
    rows = np.asarray(task.eval_rows)
    predicted = _predict(method, fitted, task, rows)
    predict_seconds = time.perf_counter() - start
    log.debug("scored %d images in %.2f s", rows.size, predict_seconds)

    results, bipartition = _measure(method, task, predicted, n)
    return Evaluation(
        method=method.name,
        dataset=task.train.name,
        protocol=task.protocol,
        params=dict(params),
        metrics={k: float(v) for k, v in results.items()},
        fit_seconds=fit_seconds,
        predict_seconds=predict_seconds,
        n_train=int(task.train.num_images),
        n_test=int(rows.size),
        n_words=int(task.train.num_words),
        fitted=fitted,
        bipartition=bipartition,
    )


def _fit(method: Method, task: Task, params: Hyper, seed, checkpoint, every):
    """``method`` fitted on ``task.train`` with ``params`` (checkpointed in the
    folder ``checkpoint`` when given), and the seconds it took."""
    log.debug("fitting %s on %d images: %s", method.name, task.train.num_images, params)
    start = time.perf_counter()
    with _checkpoints(checkpoint, every, method, task, params, seed):
        fitted = fit_parsed(
            method, task.train, rng_key=jax.random.key(seed), hyper=params
        )
        _block(fitted.params)
    fit_seconds = time.perf_counter() - start
    log.debug("fitted %s in %.2f s", method.name, fit_seconds)
    return fitted, fit_seconds


class _Predicted(NamedTuple):
    """What a fitted method says of the evaluation rows: word scores, class labels,
    and (predicted, true) values of a regressor; None where it says nothing."""

    scores: np.ndarray | None
    labels: np.ndarray | None
    regression: tuple[np.ndarray, np.ndarray] | None


def _predict(method: Method, fitted: Fitted, task: Task, rows) -> _Predicted:
    """Word scores of the evaluation ``rows`` (through ``score_fit_corpus`` under
    the transductive protocol, where the method has it), their class labels, or a
    regressor's predictions beside the true responses."""
    scores = labels = regression = None
    if method.score_words is not None and task.truth_words is not None:
        if task.transductive and method.score_fit_corpus is not None:
            scores = method.score_fit_corpus(fitted)
        else:
            scores = method.score_words(fitted, task.test)
        scores = np.asarray(scores)[rows]
    if method.response is not None:
        truth = method.response(fitted, task.test)
        if truth is not None:
            truth = np.asarray(truth, np.float64)[rows]
        elif task.truth_labels is not None:  # the response is the class label
            labels = np.asarray(task.truth_labels)
            truth = np.where(labels >= 0, labels, np.nan).astype(np.float64)
        if truth is not None and np.isfinite(truth).any():
            predicted = np.asarray(method.predict_labels(fitted, task.test))[rows]
            known = np.isfinite(truth)
            regression = (predicted[known], truth[known])
    elif method.predict_labels is not None and task.truth_labels is not None:
        labels = np.asarray(method.predict_labels(fitted, task.test))[rows]
    return _Predicted(scores, labels, regression)


def _measure(method: Method, task: Task, predicted: _Predicted, n: int):
    """The metrics of ``predicted`` against the task's truth, and the bipartition
    rule (None without word scores)."""
    scores, labels, regression = predicted
    results: dict[str, float] = {}
    bipartition = None
    if scores is not None:
        results.update(metrics.annotation_report(scores, task.truth_words, n=n))
        bipartition = _bipartition(task)
        results.update(
            metrics.multilabel_report(scores, task.truth_words, bipartition["k"])
        )
    if regression is not None:
        results.update(metrics.regression_report(*regression))
    elif task.truth_labels is not None and method.response is None:
        if (
            labels is None
            and scores is not None
            and scores.shape[1] == task.train.num_classes
        ):
            labels = np.argmax(scores, axis=1)  # words are the one-hot classes
        if labels is not None:
            results["classification_accuracy"] = metrics.classification_accuracy(
                labels, task.truth_labels
            )
    return results, bipartition


def _bipartition(task: Task) -> dict:
    """The top-k rule of the bipartition metrics: ``k`` from the label cardinality
    of the training images whose words are observed."""
    words = np.asarray(task.train.words)
    if task.train.word_mask is not None:
        words = words[np.asarray(task.train.word_mask)]
    k = metrics.bipartition_k(words)
    cardinality = float(np.mean(np.sum(words > 0, axis=1)))
    return {"rule": "top-k", "k": k, "train_label_cardinality": cardinality}
