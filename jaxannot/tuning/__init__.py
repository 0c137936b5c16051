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

The submodules: :mod:`~jaxannot.tuning.grid` (the settings, parsed and checked once),
:mod:`~jaxannot.tuning.folds` (the folds as tasks), :mod:`~jaxannot.tuning.scoring`
(the metric compared), :mod:`~jaxannot.tuning.cross_validation` (the driver),
:mod:`~jaxannot.tuning.results` and :mod:`~jaxannot.tuning.selection` (the
one-standard-error rule). :func:`search` (:mod:`~jaxannot.tuning.hyper_search`,
needs the ``search`` extra: optuna) draws settings from a space of ranges and lists
(:mod:`~jaxannot.tuning.space`) with TPE instead of fitting a whole grid, on the
same folds, pruning a trial fold by fold.
"""

from jaxannot.data.protocols import kfold_rows
from jaxannot.tuning.cross_validation import cross_validate
from jaxannot.tuning.folds import fold_tasks, training_images, unlabelled_images
from jaxannot.tuning.grid import Grid, parse_grid, resolve_fixed
from jaxannot.tuning.hyper_search import search
from jaxannot.tuning.results import (
    SearchBudget,
    SearchResult,
    SettingResult,
    TrialResult,
    TuneResult,
)
from jaxannot.tuning.scoring import (
    LOWER_IS_BETTER,
    available_metrics,
    default_metric,
    resolve_metric,
)
from jaxannot.tuning.space import Range, Space, parse_space

__all__ = [
    "Grid",
    "LOWER_IS_BETTER",
    "Range",
    "SearchBudget",
    "SearchResult",
    "SettingResult",
    "Space",
    "TrialResult",
    "TuneResult",
    "available_metrics",
    "cross_validate",
    "default_metric",
    "fold_tasks",
    "kfold_rows",
    "parse_grid",
    "parse_space",
    "resolve_fixed",
    "resolve_metric",
    "search",
    "training_images",
    "unlabelled_images",
]
