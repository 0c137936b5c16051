"""What ``jaxannot tune`` prints: the table, the best setting and its ``--set`` flags.

:func:`print_tuned` reports a grid's cross-validation, :func:`print_searched` a TPE
search (with the budget it used); both warn where a solver stopped before
converging.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from jaxannot.cli.files import UserError

if TYPE_CHECKING:
    from jaxannot.tuning.results import SearchResult, TuneResult

__all__ = ["print_searched", "print_tuned"]

log = logging.getLogger("jaxannot.cli")


def print_searched(result: SearchResult) -> None:
    """The best settings' table, the budget used, the best setting and its
    ``--set`` flags on stdout; :class:`UserError` when no trial completed."""
    import shlex

    from jaxannot.metrics.tables import format_metric

    counts = result.counts()
    budget = result.budget
    if result.best is None and counts["failed"]:
        raise UserError(
            f"no trial completed: the fits of all {counts['failed']} diverged; "
            "narrow --space (a smaller step size, a stronger regularisation)"
        )
    if result.best is None:
        raise UserError(f"no trial ran within --timeout {budget.timeout:g} s; raise it")
    print(result.table())
    limit = "" if budget.timeout is None else f", timeout {budget.timeout:g} s"
    print(
        f"\n{budget.trials_run} of {budget.trials} trial(s) run{limit}: "
        f"{counts['complete']} complete, {counts['pruned']} pruned, "
        f"{counts['failed']} failed ({budget.seconds:.1f} s)"
    )
    best = result.best
    described = ", ".join(f"{k}={v}" for k, v in best.params.items())
    print(
        f"best {result.metric}: {described}  "
        f"({format_metric(result.metric, best.mean)} ± "
        f"{format_metric(result.metric, best.sd)} over {result.folds} folds, "
        f"trial {best.number})"
    )
    flags = " ".join(f"--set {shlex.quote(f)}" for f in result.set_flags())
    print(f"best: {flags}")
    if best.unconverged_folds:
        log.warning(
            "the best trial's solver stopped before converging on fold(s) %s; those "
            "scores come from an inexact solution",
            ", ".join(map(str, best.unconverged_folds)),
        )


def print_tuned(result: TuneResult) -> None:
    """The table, the best setting and its ``--set`` flags on stdout; a warning for
    each setting whose solver stopped before converging on some fold."""
    import shlex

    from jaxannot.metrics.tables import format_metric

    print(result.table())
    best = result.best
    described = ", ".join(f"{k}={v}" for k, v in best.params.items()) or "(fixed)"
    print(
        f"\nbest {result.metric}: {described}  "
        f"({format_metric(result.metric, best.mean)} ± "
        f"{format_metric(result.metric, best.sd)} over {result.folds} folds)"
    )
    flags = " ".join(f"--set {shlex.quote(f)}" for f in result.set_flags())
    print(f"best: {flags}".rstrip())
    for r in result.results:
        if r.unconverged_folds:
            log.warning(
                "%s: the solver stopped before converging on fold(s) %s; those scores "
                "come from an inexact solution",
                ", ".join(f"{k}={v}" for k, v in r.params.items()) or "(fixed)",
                ", ".join(map(str, r.unconverged_folds)),
            )
