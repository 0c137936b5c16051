"""Reading a default off a cross-validation: the one-standard-error rule.

:func:`smallest_within_one_se` is the ``rule = "smallest_within_1se"`` of
``hyper_defaults.toml`` (:data:`jaxannot.annotators.hyper_spec.RULES`): for a size
whose cost grows with it (histogram bins, eigenfunctions), the smallest value
whose cross-validated score lies within one standard error of the best's rather
than the best itself, which on a plateau is decided by noise.
:func:`incumbent_within_one_se` is ``rule = "incumbent_within_1se"``: for a setting
with no simpler or cheaper end (a step size, an optimizer), the default the run was
made at, unless the best beats it by more than that standard error — so that a
re-run of the coordinate search does not move a default on fold noise.

References
----------
T. Hastie, R. Tibshirani, J. Friedman. The Elements of Statistical Learning, 2nd ed.,
Springer 2009, sec. 7.10 (the one-standard-error rule).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["incumbent_within_one_se", "smallest_within_one_se"]


def smallest_within_one_se(
    results: Sequence[Mapping[str, Any]], key: str, higher_is_better: bool
) -> Any:
    r"""The smallest value of ``key`` within one standard error of the best setting.

    Hastie et al.'s rule (ESL sec. 7.10): with :math:`s_{v,f}` the score of value
    :math:`v` on fold :math:`f` of :math:`F`, :math:`\bar s_v` its mean and :math:`b`
    the setting of the best mean, value :math:`v` is within one standard error when

    .. math::
        \pm(\bar s_v - \bar s_b) \ge -\mathrm{SE}_b, \qquad
        \mathrm{SE}_b = \frac{\mathrm{sd}_f(s_{b,f})}{\sqrt{F}}

    (sign: + when higher is better; sd with ``ddof = 1``): the standard error of the
    best setting's cross-validated score, so that a value is kept out only when it
    trails the best by more than the best's own estimate is uncertain. A setting with
    a NaN score (diverged) is never within.

    Parameters
    ----------
    results : sequence of mappings
        A run's ``results`` (``jaxannot tune --json``): each with ``params`` (one
        key, ``key``), ``folds`` (per-fold scores) and ``mean``.
    key : str
        The hyper-parameter, numeric.
    higher_is_better : bool

    Returns
    -------
    The value.
    """
    return min(_within(results, key, higher_is_better))


def incumbent_within_one_se(
    results: Sequence[Mapping[str, Any]],
    key: str,
    higher_is_better: bool,
    incumbent: Any,
) -> Any:
    r"""``incumbent`` when its score is within one standard error of the best
    setting's (as in :func:`smallest_within_one_se`), else the best value.

    Parameters
    ----------
    results : sequence of mappings
        A run's ``results``, over ``key`` alone.
    key : str
        The hyper-parameter (any type).
    higher_is_better : bool
    incumbent
        The default the run was made at (the record's ``defaults_at_run[key]``); it
        must be one of the run's values.

    Returns
    -------
    The value.
    """
    within = _within(results, key, higher_is_better)
    if not any(_same(v, incumbent) for v in (r["params"][key] for r in results)):
        raise ValueError(f"the incumbent {incumbent!r} is not in the run over {key!r}")
    if any(_same(v, incumbent) for v in within):
        return incumbent
    return within[0]


def _same(a: Any, b: Any) -> bool:
    """Equal values, a bool never equal to a number (``True == 1`` in Python)."""
    return isinstance(a, bool) == isinstance(b, bool) and a == b


def _within(results, key: str, higher_is_better: bool) -> list:
    """The values within one standard error of the best setting's score, the best
    first."""
    sign = 1.0 if higher_is_better else -1.0
    rows = [r for r in results if r["mean"] is not None and not math.isnan(r["mean"])]
    if not rows:
        raise ValueError("no setting has a score")
    if any(set(r["params"]) != {key} for r in rows):
        raise ValueError(f"the rule needs a run over {key!r} alone")
    best = max(rows, key=lambda r: sign * r["mean"])
    folds = np.asarray(best["folds"], float)
    se = folds.std(ddof=1) / math.sqrt(folds.size) if folds.size > 1 else 0.0
    return [best["params"][key]] + [
        row["params"][key]
        for row in rows
        if row is not best and sign * (row["mean"] - best["mean"]) >= -se
    ]
