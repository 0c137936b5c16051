"""Hyper-parameter tuning by k-fold cross-validation on the training images.

:func:`cross_validate` scores every setting of a grid of hyper-parameters by k-fold
cross-validation of the *training* images only — the dataset's test images are never
part of a fold — with the driver of :func:`jaxannot.evaluation.evaluate`: each fold is
turned into a :class:`~jaxannot.data.Task` and evaluated exactly as ``jaxannot
evaluate`` evaluates a dataset.

Folds
    The training images are shuffled by ``numpy.random.RandomState(seed)`` and cut into
    ``folds`` contiguous chunks (the first ``n % folds`` one image larger): the same
    folds as ``sklearn.model_selection.KFold(folds, shuffle=True, random_state=seed)``.
    No stratification.
``inductive``
    Fold ``f``'s task is ``make_task(others, fold_f, protocol="inductive", ...)``: fit
    on the other folds (the words of a seeded random ``labelled_fraction`` of them
    observed, default 1), score the held-out fold from its features.
``transductive``
    As ``jaxannot evaluate --protocol transductive`` builds its task (seed 000): the
    fit corpus is *every* image of the dataset — the training images followed by the
    ``unlabelled`` ones (the test split, or what :func:`training_images` keeps out),
    which enter with their words and labels removed — and the words of
    ``labelled_fraction`` (default 0.25, as ``make_task``) of *all* those images are
    observed; the scored rows are the images whose words are hidden. To never use a
    held-out image's words, fold ``f`` draws its labelled images (seeded by ``(seed,
    f)``) among the training images outside fold ``f`` and scores every training image
    left unlabelled (fold ``f`` and the rest); the unlabelled images are fitted on but
    never labelled nor scored. So a fold has the density of observed words and the
    graph over all images of the evaluation, and its scored images are hidden
    training images.

Every setting is fitted on the same folds with the same seed (common random numbers),
so differences between settings are not fold noise.
"""

from __future__ import annotations

import itertools
import logging
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from jaxannot import metrics as _metrics
from jaxannot.annotators.base import Method, get_method, parse_hyper
from jaxannot.annotators.hyper_spec import spec_for
from jaxannot.data.corpus import Corpus
from jaxannot.data.protocols import (
    PROTOCOLS,
    Task,
    concatenate,
    kfold_rows,
    make_task,
)
from jaxannot.evaluation import check_applicable, evaluate
from jaxannot.tuning.results import SettingResult, TuneResult

__all__ = [
    "LOWER_IS_BETTER",
    "SettingResult",
    "TuneResult",
    "available_metrics",
    "cross_validate",
    "default_metric",
    "fold_tasks",
    "kfold_rows",
    "parse_grid",
    "resolve_fixed",
    "resolve_metric",
    "training_images",
    "unlabelled_images",
]

log = logging.getLogger(__name__)

#: Metrics of :func:`~jaxannot.evaluation.evaluate` where lower is better; higher is
#: better for every other one.
LOWER_IS_BETTER = frozenset(
    {"complete_length", "rmse", "ranking_loss", "coverage", "one_error", "hamming_loss"}
)


# ------------------------------------------------------------------- settings
def parse_grid(
    method: str | Method, specs: Sequence[str] | Mapping[str, Sequence[Any]]
) -> dict[str, list]:
    """Parse ``--grid key=v1,v2`` strings (or a mapping) into typed value lists.

    Parameters
    ----------
    method : str or Method
        Decides the valid keys and the value types (those of its defaults, as
        :func:`~jaxannot.annotators.parse_hyper` parses ``--set``).
    specs : list of ``"key=v1,v2,..."`` or mapping ``{key: [values]}``
        A value of a comma-list hyper-parameter (tagprop's ``distances``) joins
        its items with ``+``: ``distances=cosine,cosine+idf`` is two settings.

    Returns
    -------
    dict
        ``{key: [typed values]}`` in the order given.

    Raises
    ------
    ValueError
        A spec without ``=``, an empty value, a key given twice, a value listed twice.
    KeyError
        An unknown hyper-parameter (the message lists the valid ones).
    """
    if isinstance(method, str):
        method = get_method(method)
    if isinstance(specs, Mapping):
        items = [(k, list(v)) for k, v in specs.items()]
    else:
        items = []
        for text in specs:
            if "=" not in text:
                raise ValueError(f"--grid expects key=v1,v2,..., got {text!r}")
            key, values = text.split("=", 1)
            key = key.strip()
            if not key:
                raise ValueError(f"--grid {text!r} has no hyper-parameter name")
            spec = spec_for(method.name, key)
            values = [v.strip() for v in values.split(",")]
            if spec is not None and spec.comma_list:  # a list value: a+b means "a,b"
                values = [v.replace("+", ",") for v in values]
            items.append((key, values))
    grid: dict[str, list] = {}
    for key, values in items:
        if key in grid:
            raise ValueError(f"--grid {key} is given twice; list its values once")
        if not values or any(isinstance(v, str) and not v for v in values):
            raise ValueError(f"--grid {key} has an empty value (expected {key}=v1,v2)")
        typed = [parse_hyper(method, {key: v})[key] for v in values]
        for i, v in enumerate(typed):
            if v in typed[:i]:
                raise ValueError(f"--grid {key} lists the value {v!r} twice")
        grid[key] = typed
    return grid


def _settings(grid: Mapping[str, Sequence]) -> list[dict]:
    keys = list(grid)
    return [
        dict(zip(keys, combo, strict=True))
        for combo in itertools.product(*grid.values())
    ]


# -------------------------------------------------------------------- metrics
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


def resolve_fixed(
    method: str | Method,
    grid: Mapping[str, Sequence[Any]],
    fixed: Mapping[str, Any] | Sequence[str] | None,
) -> dict:
    """The fixed hyper-parameters (``--set``) parsed to their types, in the order
    given; ``ValueError`` when one is also a key of ``grid``."""
    if isinstance(method, str):
        method = get_method(method)
    parsed = parse_hyper(method, fixed or [])  # validates keys and values
    keys = (
        list(fixed)
        if isinstance(fixed, Mapping)
        else [s.split("=", 1)[0].strip() for s in fixed or []]
    )
    both = [k for k in keys if k in grid]
    if both:
        raise ValueError(
            f"hyper-parameter {both[0]!r} is both in --grid and --set; give it once"
        )
    return {k: parsed[k] for k in keys}


# ---------------------------------------------------------------------- folds
def training_images(train: Corpus, test: Corpus | None, *, seed: int = 0) -> Corpus:
    """The images ``jaxannot evaluate --seed seed`` fits on, all words observed.

    ``train`` itself for a dataset with a split; for one without (``test=None``) the
    seeded random 70% that :func:`~jaxannot.data.make_task` keeps for training, so the
    images it holds out for testing never enter a fold. ``test`` is not used otherwise.
    """
    if test is not None:
        return train
    return make_task(train, None, protocol="inductive", seed=seed).train


def unlabelled_images(train: Corpus, test: Corpus | None, *, seed: int = 0) -> Corpus:
    """The images :func:`training_images` keeps out, words and labels hidden.

    ``test`` for a dataset with a split, the seeded random 30% that
    :func:`~jaxannot.data.make_task` holds out for one without. A transductive
    cross-validation fits on them (as the transductive protocol fits on every image)
    and never reads their words.
    """
    if test is None:
        test = make_task(train, None, protocol="inductive", seed=seed).test
    return test.with_hidden(np.ones(test.num_images, dtype=bool))


def fold_tasks(
    corpus: Corpus,
    held_out: Sequence[np.ndarray],
    *,
    protocol: str = "inductive",
    labelled_fraction: float | None = None,
    seed: int = 0,
    unlabelled: Corpus | None = None,
) -> Iterator[Task]:
    """Yield the :class:`~jaxannot.data.Task` of each fold (module docstring).

    Parameters
    ----------
    corpus : Corpus
        The training images (:func:`training_images`).
    held_out : sequence of int arrays
        Held-out rows of each fold (:func:`kfold_rows`).
    protocol : {"inductive", "transductive"}
    labelled_fraction : float in (0, 1], optional
        Inductive: fraction of the other folds' images whose words are observed
        (default 1). Transductive: fraction of all images (``corpus`` and
        ``unlabelled``) whose words are observed, below 1 (default 0.25).
    seed : int
        Seeds the labelled subset.
    unlabelled : Corpus, optional
        Transductive only: the dataset's other images (:func:`unlabelled_images`),
        fitted on with their words hidden, never scored.

    Raises
    ------
    ValueError
        An unknown protocol; ``unlabelled`` under ``inductive``; a transductive
        labelled fraction of 1 or one that needs more labelled images than the
        training images outside a fold.
    """
    if protocol not in PROTOCOLS:
        raise ValueError(
            f"unknown protocol {protocol!r}; valid protocols: {list(PROTOCOLS)}"
        )
    if protocol == "transductive":
        yield from _transductive_fold_tasks(
            corpus, held_out, labelled_fraction, seed, unlabelled
        )
        return
    if unlabelled is not None:
        raise ValueError(
            "unlabelled images only take part in the transductive protocol"
        )
    if labelled_fraction is None:
        labelled_fraction = 1.0
    for rows in held_out:
        is_held = np.zeros(corpus.num_images, dtype=bool)
        is_held[rows] = True
        yield make_task(
            corpus.subset(~is_held),
            corpus.subset(is_held),
            protocol="inductive",
            labelled_fraction=labelled_fraction,
            seed=seed,
        )


def _transductive_fold_tasks(corpus, held_out, labelled_fraction, seed, unlabelled):
    if labelled_fraction is None:
        labelled_fraction = 0.25
    if not 0.0 < labelled_fraction < 1.0:
        raise ValueError(
            "the transductive protocol needs a labelled fraction in (0, 1), got "
            f"{labelled_fraction}"
        )
    n_train = corpus.num_images
    n_all = n_train + (0 if unlabelled is None else unlabelled.num_images)
    count = max(1, int(round(labelled_fraction * n_all)))
    largest = max(len(rows) for rows in held_out)  # checked before any fit
    if count > n_train - largest:
        raise ValueError(
            f"labelled fraction {labelled_fraction} of the {n_all} images needs "
            f"{count} labelled training images outside each fold, and a fold leaves "
            f"only {n_train - largest}; lower --labelled-fraction or raise --folds"
        )
    for f, rows in enumerate(held_out):
        candidates = np.setdiff1d(np.arange(n_train), rows)
        rng = np.random.default_rng((seed, f))
        observed = np.zeros(n_train, dtype=bool)
        observed[rng.choice(candidates, size=count, replace=False)] = True
        full = corpus.with_hidden(~observed)
        if unlabelled is not None:
            hidden = np.ones(unlabelled.num_images, dtype=bool)
            full = concatenate(full, unlabelled.with_hidden(hidden))
        eval_rows = np.flatnonzero(~observed)
        words, labels = corpus.words, corpus.labels
        yield Task(
            train=full,
            test=full,
            eval_rows=eval_rows,
            truth_words=None if words is None else np.asarray(words)[eval_rows],
            truth_labels=None if labels is None else np.asarray(labels)[eval_rows],
            protocol="transductive",
            labelled_fraction=labelled_fraction,
            seed=seed,
        )


def _best_index(means: Sequence[float], higher_is_better: bool) -> int:
    """Index of the best mean (the first among equals; NaN is never best)."""
    sign = 1.0 if higher_is_better else -1.0
    keyed = [sign * m if not math.isnan(m) else -math.inf for m in means]
    return int(np.argmax(keyed))


# ---------------------------------------------------------------------- driver
def cross_validate(
    method: str | Method,
    corpus: Corpus,
    grid: Mapping[str, Sequence[Any]] | Sequence[str],
    *,
    folds: int = 5,
    metric: str | None = None,
    protocol: str = "inductive",
    labelled_fraction: float | None = None,
    seed: int = 0,
    fixed: Mapping[str, Any] | Sequence[str] | None = None,
    progress: bool = False,
    unlabelled: Corpus | None = None,
) -> TuneResult:
    """Score every setting of ``grid`` by k-fold cross-validation on ``corpus``.

    Parameters
    ----------
    method : str or Method
        A registered method or its name.
    corpus : Corpus
        The training images only (see :func:`training_images`); all of them must have
        their words / labels, which the folds hide as needed.
    grid : mapping ``{key: [values]}`` or list of ``"key=v1,v2"``
        Every combination (Cartesian product, in order) is a setting. Values are
        parsed to the type of the hyper-parameter's default, like ``--set``. An empty
        grid cross-validates the single setting ``fixed``.
    folds : int
        Number of folds, 2 to ``corpus.num_images``.
    metric : str, optional
        What is compared: a metric reported by :func:`~jaxannot.evaluation.evaluate`
        (:func:`available_metrics`); default :func:`default_metric`. Higher is better
        except for those in :data:`LOWER_IS_BETTER`.
    protocol : {"inductive", "transductive"}
        How a fold is turned into a task (module docstring).
    labelled_fraction : float in (0, 1], optional
        Inductive: fraction of the fit folds' images with observed words (default 1).
        Transductive: fraction of all images, ``unlabelled`` included, with observed
        words (default 0.25, as ``jaxannot evaluate``).
    seed : int
        Seeds the folds, the labelled subset and every fit's ``rng_key``.
    fixed : mapping or list of ``"key=value"``, optional
        Hyper-parameters held fixed (``--set``); may not repeat a grid key.
    progress : bool
        Show a tqdm bar over the (setting x fold) fits on stderr.
    unlabelled : Corpus, optional
        Transductive only: the dataset's images outside ``corpus``
        (:func:`unlabelled_images`), fitted on with their words hidden and never
        scored, so that a fold's fit spans every image as the evaluation's does.

    Returns
    -------
    TuneResult
        A fit that raises ``FloatingPointError`` (it diverged) scores NaN on its
        fold, with a warning naming the setting; NaN is never the best.

    Raises
    ------
    KeyError
        Unknown method or hyper-parameter (the message lists the valid names).
    ValueError
        A malformed grid, bad ``folds``, an unknown metric (the message lists the
        valid ones), a method that does not apply to the corpus.
    """
    from tqdm.auto import tqdm

    start = time.perf_counter()
    if isinstance(method, str):
        method = get_method(method)
    grid = parse_grid(method, grid)
    fixed = resolve_fixed(method, grid, fixed)
    metric = resolve_metric(method, corpus, metric)
    held_out = kfold_rows(corpus.num_images, folds, seed)
    settings = _settings(grid)
    hypers = [parse_hyper(method, {**fixed, **s}) for s in settings]
    scores: list[list[float]] = [[] for _ in settings]
    reports: list[list[dict]] = [[] for _ in settings]
    unconverged: list[list[int]] = [[] for _ in settings]

    bar = tqdm(
        total=len(settings) * folds,
        desc=f"tune {method.name}",
        unit="fit",
        disable=not progress,
    )
    try:
        tasks = fold_tasks(
            corpus,
            held_out,
            protocol=protocol,
            labelled_fraction=labelled_fraction,
            seed=seed,
            unlabelled=unlabelled,
        )
        for f, task in enumerate(tasks):
            if f == 0:
                check_applicable(method, task)
            for i, hyper in enumerate(hypers):
                try:
                    result = evaluate(method, task, hyper=hyper, seed=seed)
                except FloatingPointError as err:
                    log.warning(
                        "fold %d/%d, setting %s diverged (%s): scored NaN",
                        f + 1,
                        folds,
                        settings[i],
                        err,
                    )
                    scores[i].append(math.nan)
                    reports[i].append({})
                    bar.update(1)
                    continue
                if metric not in result.metrics:
                    raise ValueError(
                        f"{method.name!r} did not report {metric!r}; it reported: "
                        f"{', '.join(result.metrics)}"
                    )
                log.debug(
                    "fold %d/%d, setting %d/%d: %s = %.4f (fit %.2f s)",
                    f + 1,
                    folds,
                    i + 1,
                    len(hypers),
                    metric,
                    result.metrics[metric],
                    result.fit_seconds,
                )
                scores[i].append(result.metrics[metric])
                reports[i].append(dict(result.metrics))
                info = result.fitted.info if result.fitted is not None else {}
                if (info or {}).get("converged") is False:
                    unconverged[i].append(f + 1)
                bar.update(1)
    finally:
        bar.close()

    results = [
        SettingResult(params=s, hyper=h, folds=sc, fold_metrics=rp, unconverged_folds=u)
        for s, h, sc, rp, u in zip(
            settings, hypers, scores, reports, unconverged, strict=True
        )
    ]
    higher = metric not in LOWER_IS_BETTER
    return TuneResult(
        method=method.name,
        dataset=corpus.name,
        protocol=protocol,
        metric=metric,
        higher_is_better=higher,
        folds=folds,
        held_out=held_out,
        grid=grid,
        fixed=fixed,
        results=results,
        best_index=_best_index([r.mean for r in results], higher),
        labelled_fraction=labelled_fraction,
        seed=seed,
        n_images=corpus.num_images,
        seconds=time.perf_counter() - start,
    )
