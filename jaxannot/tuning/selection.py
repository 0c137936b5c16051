"""Reading a default off a cross-validation: the one-standard-error rule.

:func:`smallest_within_one_se` is the ``rule = "smallest_within_1se"`` of
``hyper_defaults.toml`` (:data:`jaxannot.annotators.hyper_spec.RULES`): for a size
whose cost grows with it (histogram bins, eigenfunctions), the smallest value
whose cross-validated score lies within one standard error of the best's rather
than the best itself, which on a plateau is decided by noise.
:func:`incumbent_within_one_se` is ``rule = "incumbent_within_1se"``: for a setting
with no simpler or cheaper end (a step size, an optimizer), the default the run was
made at, unless the best beats it by more than that standard error — so that a
re-run of the coordinate search does not move a default on fold noise; a run over
several keys at once is read as one setting (the incumbent combination, or the best).

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
    return min(v for (v,) in _within(results, (key,), higher_is_better))


def incumbent_within_one_se(
    results: Sequence[Mapping[str, Any]],
    key: str | Sequence[str],
    higher_is_better: bool,
    incumbent: Any,
) -> Any:
    r"""``incumbent`` when its score is within one standard error of the best
    setting's (as in :func:`smallest_within_one_se`), else the best value.

    A run over several keys at once (a joint grid, e.g. learning rate × optimizer)
    is read jointly: ``key`` names its keys, ``incumbent`` maps each to the default
    the run was made at, and the combination is kept or replaced as one setting —
    so that a joint winner that beats today's combination by less than the best's
    standard error does not move any of its keys.

    Parameters
    ----------
    results : sequence of mappings
        A run's ``results``, over ``key`` alone (or exactly the keys ``key`` names).
    key : str or sequence of str
        The hyper-parameter (any type), or the keys of a joint run.
    higher_is_better : bool
    incumbent
        The default the run was made at (the record's ``defaults_at_run[key]``),
        or, for a joint run, a mapping from each key to it; it must be one of the
        run's settings.

    Returns
    -------
    The value; for a joint run, a dict from each key to its value.
    """
    keys = (key,) if isinstance(key, str) else tuple(key)
    want = (incumbent,) if isinstance(key, str) else tuple(incumbent[k] for k in keys)
    within = _within(results, keys, higher_is_better)
    settings = [tuple(r["params"][k] for k in keys) for r in results]
    if not any(_same_all(s, want) for s in settings):
        raise ValueError(f"the incumbent {incumbent!r} is not in the run over {key!r}")
    chosen = want if any(_same_all(s, want) for s in within) else within[0]
    return chosen[0] if isinstance(key, str) else dict(zip(keys, chosen, strict=True))


def _same(a: Any, b: Any) -> bool:
    """Equal values, a bool never equal to a number (``True == 1`` in Python)."""
    return isinstance(a, bool) == isinstance(b, bool) and a == b


def _same_all(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))


def _within(results, keys: tuple[str, ...], higher_is_better: bool) -> list[tuple]:
    """The settings (tuples over ``keys``) within one standard error of the best
    setting's score, the best first."""
    sign = 1.0 if higher_is_better else -1.0
    rows = [r for r in results if r["mean"] is not None and not math.isnan(r["mean"])]
    if not rows:
        raise ValueError("no setting has a score")
    if any(set(r["params"]) != set(keys) for r in rows):
        shown = keys[0] if len(keys) == 1 else keys
        raise ValueError(f"the rule needs a run over {shown!r} alone")
    best = max(rows, key=lambda r: sign * r["mean"])
    folds = np.asarray(best["folds"], float)
    se = folds.std(ddof=1) / math.sqrt(folds.size) if folds.size > 1 else 0.0
    return [tuple(best["params"][k] for k in keys)] + [
        tuple(row["params"][k] for k in keys)
        for row in rows
        if row is not best and sign * (row["mean"] - best["mean"]) >= -se
    ]
