"""The results of :func:`jaxannot.tuning.cross_validate`: one :class:`SettingResult`
per setting of the grid, gathered in a :class:`TuneResult` (the CLI's JSON); and of
:func:`jaxannot.tuning.search`: one :class:`TrialResult` per trial, gathered in a
:class:`SearchResult`."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import numpy as np

import jax

from jaxannot.metrics.tables import TABLE_METRICS, align_columns, format_metric

__all__ = [
    "TRIAL_STATES",
    "SearchBudget",
    "SearchResult",
    "SettingResult",
    "TrialResult",
    "TuneResult",
]


@dataclasses.dataclass(frozen=True)
class SettingResult:
    """The cross-validated score of one setting of the grid.

    Attributes
    ----------
    params : dict
        The grid values of this setting.
    hyper : dict
        Every hyper-parameter it was fitted with (defaults, fixed, params).
    folds : list of float
        The metric on each held-out fold.
    fold_metrics : list of dict
        Every metric on each held-out fold.
    unconverged_folds : list of int
        The folds (1-based) whose fit reported ``converged: false`` in its info: a
        solver that stopped at its cap, whose scores come from an inexact solution.
    """

    params: dict
    hyper: dict
    folds: list[float]
    fold_metrics: list[dict]
    unconverged_folds: list[int] = dataclasses.field(default_factory=list)

    @property
    def mean(self) -> float:
        return float(np.mean(self.folds))

    @property
    def sd(self) -> float:
        """Sample standard deviation over the folds (``ddof=1``)."""
        return float(np.std(self.folds, ddof=1)) if len(self.folds) > 1 else 0.0

    @property
    def metrics_mean(self) -> dict[str, float]:
        keys = dict.fromkeys(k for m in self.fold_metrics for k in m)
        return {
            k: float(np.mean([m.get(k, np.nan) for m in self.fold_metrics]))
            for k in keys
        }

    def as_json(self) -> dict[str, Any]:
        """The JSON of this setting; a NaN (a fold whose fit diverged) is ``null``."""
        return {
            "params": dict(self.params),
            "mean": _finite(self.mean),
            "sd": _finite(self.sd),
            "folds": [_finite(v) for v in self.folds],
            "metrics_mean": {k: _finite(v) for k, v in self.metrics_mean.items()},
            "unconverged_folds": list(self.unconverged_folds),
        }


@dataclasses.dataclass(frozen=True)
class _Run:
    """What was cross-validated, the fields that begin both a :class:`TuneResult` and
    a :class:`SearchResult`.

    Attributes
    ----------
    method, dataset, protocol, metric : str
    higher_is_better : bool
        Direction of ``metric`` (False for ``complete_length``).
    folds : int
    held_out : list of int arrays
        Held-out rows of each fold, into the corpus cross-validated (the same for
        every setting or trial).
    """

    method: str
    dataset: str
    protocol: str
    metric: str
    higher_is_better: bool
    folds: int
    held_out: list[np.ndarray]


@dataclasses.dataclass(frozen=True)
class TuneResult(_Run):
    """The outcome of :func:`cross_validate` (``as_json`` gives the CLI's JSON).

    Attributes
    ----------
    method, dataset, protocol, metric, higher_is_better, folds, held_out
        What was cross-validated (:class:`_Run`).
    grid : dict
        ``{key: [values]}``.
    fixed : dict
        Hyper-parameters fixed for every setting (``--set``).
    results : list of SettingResult
        One per setting, in the order of the grid's Cartesian product.
    best_index : int
        Index of the best setting in ``results`` (the first among equals).
    labelled_fraction : float or None
    seed : int
    n_images : int
        Number of training images cross-validated.
    seconds : float
        Wall time of the cross-validation.
    """

    grid: dict
    fixed: dict
    results: list[SettingResult]
    best_index: int
    labelled_fraction: float | None
    seed: int
    n_images: int
    seconds: float

    @property
    def best(self) -> SettingResult:
        return self.results[self.best_index]

    def table(self) -> str:
        """One row per setting: its grid values, the metric's mean ± sd over the
        folds, the other table metrics' means; ``*`` marks the best."""
        seen = {c for r in self.results for c in r.metrics_mean}
        others = [c for c in TABLE_METRICS if c in seen and c != self.metric]
        keys = list(self.grid) or ["setting"]
        arrow = "higher" if self.higher_is_better else "lower"
        lines = [[*keys, f"{self.metric} mean ± sd ({arrow} better)", *others, ""]]
        m = self.metric
        for i, r in enumerate(self.results):
            params = [str(r.params[k]) for k in self.grid] or ["fixed"]
            score = f"{format_metric(m, r.mean)} ± {format_metric(m, r.sd)}"
            means = [format_metric(c, r.metrics_mean.get(c)) for c in others]
            lines.append([*params, score, *means, "*" if i == self.best_index else ""])
        return align_columns(lines, left=len(keys))

    def set_flags(self) -> list[str]:
        """``key=value`` of the best setting and the fixed hyper-parameters, ready
        for ``--set``."""
        both = {**self.best.params, **self.fixed}
        return [f"{k}={_flag_value(v)}" for k, v in both.items()]

    def as_json(self) -> dict[str, Any]:
        return _run_json(
            self,
            {"grid": {k: list(v) for k, v in self.grid.items()}},
            {
                "seconds": self.seconds,
                "results": [r.as_json() for r in self.results],
                "best": _best_json(self.best, self.set_flags()),
            },
        )


def _run_json(run, searched: dict, outcome: dict) -> dict[str, Any]:
    """The JSON of a :class:`TuneResult` or :class:`SearchResult`: what was run
    (``searched``: its grid or space) and on what, then ``outcome``, then the
    platform."""
    return {
        "method": run.method,
        "dataset": run.dataset,
        "protocol": run.protocol,
        "folds": run.folds,
        "metric": run.metric,
        "higher_is_better": run.higher_is_better,
        **searched,
        "fixed": dict(run.fixed),
        "labelled_fraction": run.labelled_fraction,
        "seed": run.seed,
        "n_images": run.n_images,
        **outcome,
        "platform": platform(),
    }


def _best_json(best: SettingResult, flags: list[str]) -> dict[str, Any]:
    """The best setting's JSON with its checked hyper-parameters and ``--set`` flags."""
    return {**best.as_json(), "hyper": dict(best.hyper), "set": flags}


def platform() -> dict[str, Any]:
    """Where the fits ran: jax's version, backend and device kind, the CPU count."""
    return {
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "device": jax.devices()[0].device_kind,
        "cpus": os.cpu_count(),
    }


def _finite(v: float) -> float | None:
    """``v`` as a float, or None for NaN (JSON has no NaN)."""
    return None if np.isnan(v) else float(v)


def _flag_value(v: Any) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


#: The states of a search's trial: every fold scored; stopped by the pruner after
#: some folds; stopped by a fit that diverged (its score NaN).
TRIAL_STATES = ("complete", "pruned", "failed")


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrialResult(SettingResult):
    """One trial of :func:`~jaxannot.tuning.search`: a :class:`SettingResult` over
    the folds it reached.

    Attributes
    ----------
    number : int
        The trial's number, from 1, in the order run.
    state : str
        One of :data:`TRIAL_STATES`. A pruned or failed trial keeps the scores of
        the folds it reached (``folds``); its ``mean`` is theirs, never the best.
    seconds : float
        Wall time of the trial.
    reused_folds : int
        Folds whose score was that of an earlier trial of the same setting (the
        folds and seeds being the same, it is the same number), not fitted again.
    """

    number: int
    state: str
    seconds: float
    reused_folds: int = 0

    def __post_init__(self) -> None:
        if self.state not in TRIAL_STATES:
            raise ValueError(
                f"unknown trial state {self.state!r}; valid: {', '.join(TRIAL_STATES)}"
            )

    def as_json(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "state": self.state,
            **super().as_json(),
            "seconds": self.seconds,
            "reused_folds": self.reused_folds,
        }


@dataclasses.dataclass(frozen=True)
class SearchBudget:
    """What a search was allowed and what it used.

    Attributes
    ----------
    trials : int
        Trials asked for.
    timeout : float or None
        Seconds after which no trial starts (a running one finishes).
    trials_run : int
        Trials run: ``trials`` unless the timeout came first.
    seconds : float
        Wall time of the whole search.
    """

    trials: int
    timeout: float | None
    trials_run: int
    seconds: float

    def as_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class SearchResult(_Run):
    """The outcome of :func:`~jaxannot.tuning.search` (``as_json`` gives the CLI's
    JSON, with every trial).

    Attributes
    ----------
    method, dataset, protocol, metric, higher_is_better, folds, held_out
        What was cross-validated (:class:`_Run`).
    space : Space
        What was searched.
    fixed : dict
        Hyper-parameters fixed for every trial (``--set``).
    trials : list of TrialResult
        Every trial, in the order run.
    best_index : int or None
        Index in ``trials`` of the complete trial with the best mean (the first
        among equals); None when no trial completed.
    sampler : dict
        The sampler and pruner and their settings, with optuna's version.
    budget : SearchBudget
    labelled_fraction : float or None
    seed : int
    n_images : int
    """

    space: Any
    fixed: dict
    trials: list[TrialResult]
    best_index: int | None
    sampler: dict
    budget: SearchBudget
    labelled_fraction: float | None
    seed: int
    n_images: int

    @property
    def best(self) -> TrialResult | None:
        return None if self.best_index is None else self.trials[self.best_index]

    @property
    def seconds(self) -> float:
        return self.budget.seconds

    def counts(self) -> dict[str, int]:
        """How many trials ended in each state."""
        return {s: sum(t.state == s for t in self.trials) for s in TRIAL_STATES}

    def ranked(self) -> list[TrialResult]:
        """The complete trials, best first (ties in the order run), each setting
        once (the first trial that drew it)."""
        sign = 1.0 if self.higher_is_better else -1.0
        first: dict[tuple, TrialResult] = {}
        for t in self.trials:
            if t.state == "complete":
                first.setdefault(tuple(t.params.items()), t)
        return sorted(first.values(), key=lambda t: -sign * t.mean)

    def table(self, top: int = 10) -> str:
        """The ``top`` best settings among the complete trials (:meth:`ranked`):
        trial number, values, the metric's mean ± sd over the folds, the other
        table metrics' means, seconds; ``*`` marks the best."""
        rows = self.ranked()[:top]
        seen = {c for r in rows for c in r.metrics_mean}
        others = [c for c in TABLE_METRICS if c in seen and c != self.metric]
        keys = list(self.space)
        arrow = "higher" if self.higher_is_better else "lower"
        m = self.metric
        lines = [["trial", *keys, f"{m} mean ± sd ({arrow} better)", *others, "s", ""]]
        for r in rows:
            score = f"{format_metric(m, r.mean)} ± {format_metric(m, r.sd)}"
            lines.append([
                str(r.number),
                *(_cell(r.params[k]) for k in keys),
                score,
                *(format_metric(c, r.metrics_mean.get(c)) for c in others),
                f"{r.seconds:.1f}",
                "*" if r is self.best else "",
            ])  # fmt: skip
        return align_columns(lines, left=1 + len(keys))

    def set_flags(self) -> list[str]:
        """``key=value`` of the best trial and the fixed hyper-parameters, ready for
        ``--set`` (empty when no trial completed)."""
        if self.best is None:
            return []
        both = {**self.best.params, **self.fixed}
        return [f"{k}={_flag_value(v)}" for k, v in both.items()]

    def as_json(self) -> dict[str, Any]:
        best = None if self.best is None else _best_json(self.best, self.set_flags())
        return _run_json(
            self,
            {"space": self.space.as_json()},
            {
                "sampler": dict(self.sampler),
                "budget": self.budget.as_json(),
                "counts": self.counts(),
                "trials": [t.as_json() for t in self.trials],
                "best": best,
            },
        )


def _cell(v: Any) -> str:
    """A drawn value in a table: floats to 4 significant digits."""
    return f"{v:.4g}" if isinstance(v, float) else str(v)
