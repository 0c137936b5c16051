"""A joint hyper-parameter search: Optuna's TPE sampler over a space of ranges and
lists, each trial scored by the k-fold cross-validation of :mod:`jaxannot.tuning`,
with fold-wise pruning.

Where :func:`~jaxannot.tuning.cross_validate` fits every setting of a grid, a
search fits ``trials`` settings drawn one after another by the tree-structured Parzen
estimator (TPE, Bergstra et al. 2011), which models the settings scoring in the best
fraction so far apart from the others and draws the next where the ratio of the two
densities is largest; ranges may be continuous, log-scaled or integer, and every key
is searched jointly. The sampler and pruner are Optuna's (Akiba et al. 2019).

Common random numbers
    Every trial is fitted on the same folds (:func:`~jaxannot.data.protocols.kfold_rows`
    seeded by ``seed``, the tasks of :func:`~jaxannot.tuning.fold_tasks`) with the same
    fit seed, as in :func:`~jaxannot.tuning.cross_validate`: a setting scores what
    ``cross_validate`` gives it, and a setting drawn again is not refitted (its fold
    scores are looked up).
Pruning
    After fold ``f`` a trial reports its running mean over folds ``1..f``; Optuna's
    median rule stops it when that mean is worse than the median of the running means
    the earlier trials reported at fold ``f`` (once :data:`PRUNE_AFTER` trials have
    completed; never after the last fold). A pruned trial keeps the scores of the
    folds it reached.
Divergence
    A fit that diverges (``FloatingPointError``) scores NaN: its trial stops there,
    is recorded as failed and is never the best (the sampler leaves failed trials
    out of its model).

References
----------
J. Bergstra, R. Bardenet, Y. Bengio, B. Kégl. Algorithms for hyper-parameter
optimization. NeurIPS 2011.

T. Akiba, S. Sano, T. Yanase, T. Ohta, M. Koyama. Optuna: a next-generation
hyperparameter optimization framework. KDD 2019.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from types import ModuleType
from typing import Any

import numpy as np

from jaxannot.annotators.base import Method, get_method
from jaxannot.annotators.hyper_values import Hyper, check_hyper
from jaxannot.data.corpus import Corpus
from jaxannot.data.protocols import Task
from jaxannot.evaluation import check_applicable
from jaxannot.tuning.cross_validation import best_mean_index, fold_plan, run_fields
from jaxannot.tuning.grid import resolve_fixed
from jaxannot.tuning.results import SearchBudget, SearchResult, TrialResult
from jaxannot.tuning.scoring import (
    FoldScore,
    resolve_metric,
    score_fold,
)
from jaxannot.tuning.space import Range, Space, parse_space

__all__ = ["INSTALL_HINT", "PRUNE_AFTER", "check_budget", "require_optuna", "search"]

log = logging.getLogger("jaxannot.tuning")

#: How to install what :func:`search` needs.
INSTALL_HINT = "pip install 'jaxannot[search]'"

#: Completed trials before the pruner may stop one (Optuna's ``MedianPruner``
#: default): the median of fewer running means is too noisy to stop a trial on.
PRUNE_AFTER = 5


def require_optuna() -> ModuleType:
    """The ``optuna`` module; ``ImportError`` naming the extra to install when it is
    missing."""
    try:
        import optuna
    except ImportError as err:
        raise ImportError(
            f"the hyper-parameter search needs optuna; install it with: {INSTALL_HINT}"
        ) from err
    return optuna


def search(
    method: str | Method,
    corpus: Corpus,
    space: Space | Mapping[str, Range | Sequence[Any]] | Sequence[str],
    *,
    folds: int = 3,
    metric: str | None = None,
    trials: int = 20,
    timeout: float | None = None,
    seed: int = 0,
    prune: bool = True,
    fixed: Hyper | Mapping[str, Any] | Sequence[str] | None = None,
    protocol: str = "inductive",
    labelled_fraction: float | None = None,
    unlabelled: Corpus | None = None,
) -> SearchResult:
    """Search ``space`` jointly with TPE, each trial cross-validated on ``corpus``.

    Parameters
    ----------
    method, corpus
        As :func:`~jaxannot.tuning.cross_validate` takes them.
    space : Space, mapping or list of str
        ``"KEY=LO:HI"``, ``"KEY=LO:HI:log"`` or ``"KEY=V1,V2,..."`` per key, or a
        mapping ``{key: Range or [values]}`` (:func:`~jaxannot.tuning.parse_space`);
        checked against the method's specs before any fit.
    folds : int
        Number of folds, 2 to ``corpus.num_images``.
    metric : str, optional
        What is compared (:func:`~jaxannot.tuning.available_metrics`); default
        :func:`~jaxannot.tuning.default_metric`.
    trials : int
        Trials to run (at least 1).
    timeout : float, optional
        Seconds after the start of the search past which no trial starts (the one
        running finishes).
    seed : int
        Seeds the folds, the labelled subset, every fit's ``rng_key`` and the
        sampler: the same seed gives the same trials.
    prune : bool
        Stop a trial whose running mean after a fold is worse than the median of the
        earlier trials' at that fold (Optuna's ``MedianPruner``).
    fixed : Hyper, mapping or list of ``"key=value"``, optional
        Hyper-parameters held fixed (``--set``); may not repeat a key of ``space``.
    protocol : {"inductive", "transductive"}
        How a fold is turned into a task (:mod:`jaxannot.tuning`).
    labelled_fraction : float in (0, 1], optional
        As for :func:`~jaxannot.tuning.cross_validate`.
    unlabelled : Corpus, optional
        Transductive only: the dataset's images outside ``corpus``
        (:func:`~jaxannot.tuning.unlabelled_images`).

    Returns
    -------
    SearchResult
        Every trial (values, fold scores, state, seconds), the best complete trial
        and the budget.

    Raises
    ------
    ImportError
        optuna is not installed (the message names the extra).
    KeyError
        Unknown method or hyper-parameter (the message lists the valid names).
    ValueError
        A malformed or out-of-spec space, bad ``folds``, ``trials`` or ``timeout``,
        an unknown metric, a method that does not apply to the corpus.

    Examples
    --------
    >>> result = search("knn", corpus, ["k=1:60", "weight=heat,uniform"], trials=30)
    >>> result.best.params  # doctest: +SKIP
    {'k': 23, 'weight': 'heat'}
    """
    optuna = require_optuna()
    start = time.perf_counter()
    if isinstance(method, str):
        method = get_method(method)
    space = parse_space(method, space)
    fixed = resolve_fixed(method, space, fixed, flag="--space")
    metric = resolve_metric(method, corpus, metric)
    check_budget(trials, timeout)
    held_out, tasks = fold_plan(
        corpus, folds, seed, protocol, labelled_fraction, unlabelled
    )
    tasks = list(tasks)  # every trial visits every fold: the tasks are built once
    check_applicable(method, tasks[0])
    result = run_fields(
        method, corpus, metric, held_out, fixed, protocol, labelled_fraction, seed
    )
    higher = result["higher_is_better"]
    run = _Trials(method, tasks, metric, seed, fixed, list(space))
    with _quiet(optuna):
        study, sampler = _study(optuna, higher, seed, prune)
        deadline = None if timeout is None else start + timeout
        _optimise(optuna, study, _distributions(optuna, space), run, trials, deadline)
    return SearchResult(
        **result,
        space=space,
        trials=run.done,
        best_index=_best_complete(run.done, higher),
        sampler={**sampler, "optuna": optuna.__version__},
        budget=SearchBudget(
            trials, timeout, len(run.done), time.perf_counter() - start
        ),
    )


def check_budget(trials: int, timeout: float | None) -> None:
    """``ValueError`` unless ``trials`` is an int >= 1 and ``timeout`` None or a
    finite number of seconds > 0."""
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise ValueError(f"--trials must be an int >= 1, got {trials!r}")
    if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
        raise ValueError(f"--timeout must be a number of seconds > 0, got {timeout}")


def _study(optuna, higher: bool, seed: int, prune: bool):
    """An in-memory study with a seeded TPE sampler and, when ``prune``, the median
    pruner; and their description for the record."""
    pruner = (
        optuna.pruners.MedianPruner(n_startup_trials=PRUNE_AFTER, n_warmup_steps=0)
        if prune
        else optuna.pruners.NopPruner()
    )
    study = optuna.create_study(
        direction="maximize" if higher else "minimize",
        sampler=optuna.samplers.TPESampler(seed=seed),
        pruner=pruner,
    )
    described = {
        "sampler": "TPESampler",
        "seed": seed,
        "pruner": "MedianPruner" if prune else None,
        "prune_after": PRUNE_AFTER if prune else None,
    }
    return study, described


def _optimise(optuna, study, distributions, run, trials, deadline) -> None:
    """Ask the study for a setting, score it (:meth:`_Trials.trial`), tell the
    study its outcome; until ``trials`` have run or the clock passes ``deadline``
    (``time.perf_counter`` seconds; None: no deadline)."""
    higher = study.direction == optuna.study.StudyDirection.MAXIMIZE
    while len(run.done) < trials and (
        deadline is None or time.perf_counter() < deadline
    ):
        trial = study.ask(distributions)
        record = run.trial(trial, len(run.done) + 1)
        _tell(optuna, study, trial, record)
        run.done.append(record)
        _log_trial(record, run.done, trials, run.metric, higher)


def _distributions(optuna, space: Space) -> dict:
    """Optuna's distribution of each key of ``space``."""
    dist = optuna.distributions
    out = {}
    for key, value in space.items():
        if not isinstance(value, Range):
            out[key] = dist.CategoricalDistribution(list(value))
        elif isinstance(value.low, int):
            out[key] = dist.IntDistribution(value.low, value.high, log=value.log)
        else:
            out[key] = dist.FloatDistribution(value.low, value.high, log=value.log)
    return out


@contextlib.contextmanager
def _quiet(optuna) -> Iterator[None]:
    """Optuna's own log lines (a study created, ...) off while searching: the trials
    are logged by :func:`_log_trial`."""
    level = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        yield
    finally:
        optuna.logging.set_verbosity(level)


class _Trials:
    """Runs trials over fixed folds; remembers each (setting, fold) score so that a
    setting drawn again is not refitted."""

    def __init__(self, method, tasks: list[Task], metric, seed, fixed, keys):
        self.method, self.tasks, self.metric, self.seed = method, tasks, metric, seed
        self.fixed, self.keys = fixed, keys
        self.scores: dict[tuple, FoldScore] = {}
        self.done: list[TrialResult] = []

    def hyper(self, params: dict) -> Hyper:
        """The drawn values over the fixed ones, each checked against its spec (a
        log-scale draw may round past a bound)."""
        for key, value in params.items():
            check_hyper(self.method.name, key, value)
        return Hyper(
            self.method.name,
            {**self.fixed, **params},
            given=(*self.fixed.given, *self.keys),
        )

    def trial(self, trial, number: int) -> TrialResult:
        """Score ``trial``'s setting fold by fold, reporting the running mean to
        the pruner; stop when it prunes or a fit diverges."""
        start = time.perf_counter()
        params = {k: trial.params[k] for k in self.keys}
        hyper = self.hyper(params)
        state, scores, reused = "complete", [], 0
        n = len(self.tasks)
        for f, task in enumerate(self.tasks):
            memo = (tuple(params.items()), f)
            reused += memo in self.scores
            if memo not in self.scores:
                where = f"trial {number}, fold {f + 1}/{n} {params}"
                self.scores[memo] = score_fold(
                    self.method, task, hyper, self.metric, self.seed, where
                )
            scores.append(self.scores[memo])
            if math.isnan(scores[-1].value):
                state = "failed"
                break
            trial.report(float(np.mean([s.value for s in scores])), f)
            if f + 1 < n and trial.should_prune():
                state = "pruned"
                break
        return TrialResult(
            params=params,
            hyper=dict(hyper),
            folds=[s.value for s in scores],
            fold_metrics=[s.metrics for s in scores],
            unconverged_folds=[f + 1 for f, s in enumerate(scores) if not s.converged],
            number=number,
            state=state,
            seconds=time.perf_counter() - start,
            reused_folds=reused,
        )


def _tell(optuna, study, trial, record: TrialResult) -> None:
    """Close ``trial`` in the study with ``record``'s outcome."""
    states = optuna.trial.TrialState
    if record.state == "complete":
        study.tell(trial, record.mean)
    elif record.state == "pruned":
        study.tell(trial, state=states.PRUNED)
    else:
        study.tell(trial, state=states.FAIL)


def _best_complete(done: Sequence[TrialResult], higher: bool) -> int | None:
    """Index of the complete trial with the best mean (the first among equals);
    None when no trial completed."""
    means = [t.mean if t.state == "complete" else math.nan for t in done]
    if all(math.isnan(m) for m in means):
        return None
    return best_mean_index(means, higher)


def _log_trial(record, done, trials: int, metric: str, higher: bool) -> None:
    """One progress line per trial: its values, state and score, and the best so
    far."""
    values = ", ".join(f"{k}={_short(v)}" for k, v in record.params.items())
    reached = len(record.folds)
    if record.state == "complete":
        outcome = f"{metric} {record.mean:.4f}"
    elif record.state == "pruned":
        outcome = f"pruned after {reached} fold(s) at {metric} {record.mean:.4f}"
    else:
        outcome = f"failed: diverged on fold {reached}"
    best = _best_complete(done, higher)
    so_far = "" if best is None else f"; best {done[best].mean:.4f} (trial {best + 1})"
    log.info(
        "trial %d/%d: %s: %s (%.1f s)%s",
        record.number, trials, values, outcome, record.seconds, so_far,
    )  # fmt: skip


def _short(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)
