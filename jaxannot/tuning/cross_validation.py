"""The cross-validation driver: every setting of a grid scored on every fold by
:func:`jaxannot.evaluation.evaluate` (the fold rules: :mod:`jaxannot.tuning`)."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from jaxannot.annotators.base import Method, get_method
from jaxannot.annotators.hyper_values import Hyper
from jaxannot.data.corpus import Corpus
from jaxannot.data.protocols import Task, kfold_rows
from jaxannot.evaluation import check_applicable
from jaxannot.tuning.folds import fold_tasks
from jaxannot.tuning.grid import parse_grid, resolve_fixed
from jaxannot.tuning.results import SettingResult, TuneResult
from jaxannot.tuning.scoring import LOWER_IS_BETTER, resolve_metric, score_fold

__all__ = ["best_mean_index", "cross_validate", "fold_plan", "run_fields"]


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
    fixed: Hyper | Mapping[str, Any] | Sequence[str] | None = None,
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
    grid : Grid, mapping ``{key: [values]}`` or list of ``"key=v1,v2"``
        Every combination (Cartesian product, in order) is a setting. Values are
        parsed to the type of the hyper-parameter's default, like ``--set``
        (:func:`parse_grid`; a :class:`Grid` is taken as it is). An empty grid
        cross-validates the single setting ``fixed``.
    folds : int
        Number of folds, 2 to ``corpus.num_images``.
    metric : str, optional
        What is compared: a metric reported by :func:`~jaxannot.evaluation.evaluate`
        (:func:`available_metrics`); default :func:`default_metric`. Higher is better
        except for those in :data:`LOWER_IS_BETTER`.
    protocol : {"inductive", "transductive"}
        How a fold is turned into a task (:mod:`jaxannot.tuning`).
    labelled_fraction : float in (0, 1], optional
        Inductive: fraction of the fit folds' images with observed words (default 1).
        Transductive: fraction of all images, ``unlabelled`` included, with observed
        words (default 0.25, as ``jaxannot evaluate``).
    seed : int
        Seeds the folds, the labelled subset and every fit's ``rng_key``.
    fixed : Hyper, mapping or list of ``"key=value"``, optional
        Hyper-parameters held fixed (``--set``; :func:`resolve_fixed`, a
        :class:`~jaxannot.annotators.Hyper` is taken as it is); may not repeat a
        grid key.
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
    held_out, tasks = fold_plan(
        corpus, folds, seed, protocol, labelled_fraction, unlabelled
    )
    settings = _Settings(grid.settings(fixed), list(grid))
    total = len(settings.hypers) * folds
    desc = f"tune {method.name}"
    with tqdm(total=total, desc=desc, unit="fit", disable=not progress) as bar:
        for f, task in enumerate(tasks):
            if f == 0:
                check_applicable(method, task)
            settings.score_fold(method, task, (f, folds), metric, seed, bar.update)
    results = settings.results()
    run = run_fields(
        method, corpus, metric, held_out, fixed, protocol, labelled_fraction, seed
    )
    return TuneResult(
        **run,
        grid=grid,
        results=results,
        best_index=best_mean_index([r.mean for r in results], run["higher_is_better"]),
        seconds=time.perf_counter() - start,
    )


def fold_plan(
    corpus: Corpus,
    folds: int,
    seed: int,
    protocol: str,
    labelled_fraction: float | None,
    unlabelled: Corpus | None,
) -> tuple[list[np.ndarray], Iterator[Task]]:
    """The held-out rows of each fold (:func:`~jaxannot.data.protocols.kfold_rows`)
    and the lazy iterator of the folds' tasks (:func:`~jaxannot.tuning.fold_tasks`),
    shared by :func:`cross_validate` and :func:`~jaxannot.tuning.search`.

    Parameters
    ----------
    corpus : Corpus
        The corpus cross-validated.
    folds : int
        The number of folds.
    seed : int
        The seed of the folds and of each fold's protocol.
    protocol : str
        ``"inductive"`` or ``"transductive"``.
    labelled_fraction : float or None
        The share of images with observed words (see :func:`cross_validate`; None:
        the protocol's default).
    unlabelled : Corpus or None
        Transductive only: the dataset's images outside ``corpus``, fitted on with
        their words hidden.

    Returns
    -------
    tuple of (list of numpy.ndarray, iterator of Task)
        The held-out rows of each fold and the folds' tasks, built one at a time.
    """
    held_out = kfold_rows(corpus.num_images, folds, seed)
    tasks = fold_tasks(
        corpus,
        held_out,
        protocol=protocol,
        labelled_fraction=labelled_fraction,
        seed=seed,
        unlabelled=unlabelled,
    )
    return held_out, tasks


def run_fields(
    method: Method,
    corpus: Corpus,
    metric: str,
    held_out: list[np.ndarray],
    fixed: Hyper,
    protocol: str,
    labelled_fraction: float | None,
    seed: int,
) -> dict[str, Any]:
    """The fields of a :class:`TuneResult` or a :class:`SearchResult` that say what
    was cross-validated and how: the method, data, folds, metric, the fixed
    hyper-parameters, the protocol and the seed.

    Parameters
    ----------
    method : Method
        The method.
    corpus : Corpus
        The corpus.
    metric : str
        The metric the settings are ranked by.
    held_out : list of numpy.ndarray
        The held-out rows of each fold.
    fixed : Hyper
        The hyper-parameters held fixed (those given are recorded).
    protocol : str
        The protocol of the folds.
    labelled_fraction : float or None
        The share of images with observed words.
    seed : int
        The seed.

    Returns
    -------
    dict
        Field name -> value.
    """
    return {
        "method": method.name,
        "dataset": corpus.name,
        "protocol": protocol,
        "metric": metric,
        "higher_is_better": metric not in LOWER_IS_BETTER,
        "folds": len(held_out),
        "held_out": held_out,
        "fixed": {k: fixed[k] for k in fixed.given},
        "labelled_fraction": labelled_fraction,
        "seed": seed,
        "n_images": corpus.num_images,
    }


@dataclasses.dataclass
class _Settings:
    """The settings of a grid (their checked hyper-parameters) and what each scored
    on the folds so far."""

    hypers: list[Hyper]
    keys: list[str]
    scores: list[list[float]] = dataclasses.field(default_factory=list)
    reports: list[list[dict]] = dataclasses.field(default_factory=list)
    unconverged: list[list[int]] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        for field in (self.scores, self.reports, self.unconverged):
            field.extend([] for _ in self.hypers)

    def params(self, i: int) -> dict:
        """The grid values of setting ``i``."""
        return {k: self.hypers[i][k] for k in self.keys}

    def score_fold(self, method, task: Task, fold, metric, seed, done) -> None:
        """Evaluate every setting on ``task``, fold ``fold = (index, count)``
        (:func:`~jaxannot.tuning.scoring.score_fold`: a diverged fit scores NaN);
        ``done(1)`` after each fit."""
        f, folds = fold
        for i, hyper in enumerate(self.hypers):
            where = f"fold {f + 1}/{folds}, setting {i + 1}/{len(self.hypers)}"
            score = score_fold(
                method, task, hyper, metric, seed, f"{where} {self.params(i)}"
            )
            self.scores[i].append(score.value)
            self.reports[i].append(score.metrics)
            if not score.converged:
                self.unconverged[i].append(f + 1)
            done(1)

    def results(self) -> list[SettingResult]:
        """One :class:`SettingResult` per setting, in the grid's order."""
        return [
            SettingResult(
                params=self.params(i),
                hyper=dict(hyper),
                folds=self.scores[i],
                fold_metrics=self.reports[i],
                unconverged_folds=self.unconverged[i],
            )
            for i, hyper in enumerate(self.hypers)
        ]


def best_mean_index(means: Sequence[float], higher_is_better: bool) -> int:
    """Index of the best mean (the first among equals; NaN is never best).

    Parameters
    ----------
    means : sequence of float
        The settings' mean scores.
    higher_is_better : bool
        Whether the metric is maximized.

    Returns
    -------
    int
        The index of the best.
    """
    sign = 1.0 if higher_is_better else -1.0
    keyed = [sign * m if not math.isnan(m) else -math.inf for m in means]
    return int(np.argmax(keyed))
