"""Contrastive-divergence training of a harmonium, shared by the harmonium methods.

:func:`init_and_train` initializes a harmonium on the encoded views and fits it by
CD; the optimizer of a setting (:func:`cd_optimizer`), the CD step and its phase
statistics and expected log-potential are built once per setting (bounded caches),
so a second fit with the same setting reuses the compiled loop.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

import optax

from jaxannot.inference import contrastive_divergence as cd
from jaxannot.methods.harmoniums import harmonium as hm
from jaxannot.runtime.programs import bounded_cache
from jaxannot.runtime.row_buckets import pad_to_bucket

if TYPE_CHECKING:
    from jaxannot.types import PRNGKey


def init_and_train(
    k_init: PRNGKey,
    k_fit: PRNGKey,
    kinds: Sequence[str],
    views: Sequence[np.ndarray],
    totals: Sequence[np.ndarray],
    hyper: Mapping[str, Any],
) -> tuple[hm.HarmoniumParams, np.ndarray]:
    """Initialize a harmonium on ``views`` and fit it by CD: ``(params, cd_gaps)``.

    Parameters
    ----------
    k_init : PRNGKey
        The initial weights' key.
    k_fit : PRNGKey
        CD's key.
    kinds : sequence of str
        Each view's kind (:data:`~.harmonium.VISIBLE_KINDS`).
    views : sequence of numpy.ndarray
        The encoded views, ``[n, d_v]`` each.
    totals : sequence of numpy.ndarray
        Each view's per-image totals (the counts' sums, for the mean field).
    hyper : Mapping
        The method's hyper-parameters (``topics``, ``weight_scale``, the
        optimizer's and CD's settings).

    Returns
    -------
    tuple of (HarmoniumParams, numpy.ndarray)
        The fitted parameters and CD's gap at each step.
    """
    params = init_harmonium(k_init, kinds, views, hyper)
    return train_cd(k_fit, params, kinds, (tuple(views), tuple(totals)), hyper)


def cd_optimizer(
    hyper: Mapping[str, Any], num_views: int
) -> optax.GradientTransformation:
    """The CD optimizer of ``hyper`` for a harmonium of ``num_views`` views (one
    object per setting, so the compiled CD loop that closes over it is reused).

    Parameters
    ----------
    hyper : Mapping
        ``optimizer``, ``learning_rate``, ``weight_decay`` and ``learn_variance``.
    num_views : int
        The harmonium's views.

    Returns
    -------
    optax.GradientTransformation
        The optimizer, weight decay on the weights only, the log-variances frozen
        unless learned.
    """
    return _optimizer_for(
        num_views,
        str(hyper["optimizer"]),
        float(hyper["learning_rate"]),
        float(hyper["weight_decay"]),
        bool(hyper["learn_variance"]),
    )


@bounded_cache(64)
def _optimizer_for(
    num_views: int,
    name: str,
    learning_rate: float,
    weight_decay: float,
    learn_variance: bool,
) -> optax.GradientTransformation:
    base = cd.make_optimizer(name, learning_rate)
    per_view = lambda flag: tuple(flag for _ in range(num_views))
    decay_mask = hm.HarmoniumParams(
        per_view(False), per_view(True), per_view(False), False
    )
    frozen = hm.HarmoniumParams(
        per_view(False), per_view(False), per_view(not learn_variance), False
    )
    parts = []
    if weight_decay > 0:
        parts.append(optax.add_decayed_weights(weight_decay, decay_mask))
    parts += [base, optax.masked(optax.set_to_zero(), frozen)]
    return optax.chain(*parts)


def init_harmonium(
    rng_key: PRNGKey,
    kinds: Sequence[str],
    views: Sequence[np.ndarray],
    hyper: Mapping[str, Any],
) -> hm.HarmoniumParams:
    """A harmonium's start on ``views`` (:func:`~.harmonium.initialize`).

    Parameters
    ----------
    rng_key : PRNGKey
        The weights' key.
    kinds : sequence of str
        Each view's kind.
    views : sequence of numpy.ndarray
        The encoded views, ``[n, d_v]`` each (their margins set the biases).
    hyper : Mapping
        ``topics`` (the hidden units) and ``weight_scale``.

    Returns
    -------
    HarmoniumParams
        The initial parameters.
    """
    return hm.initialize(
        rng_key,
        kinds,
        [v.shape[1] for v in views],
        hyper["topics"],
        weight_scale=hyper["weight_scale"],
        views=[np.asarray(v) for v in views],
    )


def train_cd(
    rng_key: PRNGKey,
    params: hm.HarmoniumParams,
    kinds: Sequence[str],
    images: tuple[tuple, tuple],
    hyper: Mapping[str, Any],
) -> tuple[hm.HarmoniumParams, np.ndarray]:
    """CD on ``images`` padded to their row bucket (one compiled loop for the folds
    and the final fit of a cross-validation): ``(params, cd_gaps)``.

    Parameters
    ----------
    rng_key : PRNGKey
        CD's key.
    params : HarmoniumParams
        The start.
    kinds : sequence of str
        Each view's kind.
    images : tuple of (tuple, tuple)
        ``(views, totals)``: the encoded views and their per-image totals.
    hyper : Mapping
        The optimizer's settings, ``sweeps``, ``batch_size`` and ``steps``.

    Returns
    -------
    tuple of (HarmoniumParams, numpy.ndarray)
        The fitted parameters and CD's gap at each step.
    """
    optimizer = cd_optimizer(hyper, len(kinds))
    kinds = tuple(kinds)
    step = _cd_step(kinds, int(hyper["sweeps"]), hyper["batch_size"] or None, optimizer)
    images, mask = pad_to_bucket(images)
    state, info = cd.fit_cd(
        rng_key,
        cd.init(params, optimizer),
        (images, None),
        step=step,
        num_steps=hyper["steps"],
        mask=mask,
    )
    return state.params, np.asarray(info.cd_gap)


@bounded_cache(64)
def _cd_step(kinds: tuple, sweeps: int, batch_size, optimizer):
    """The plain CD step of a harmonium, built once per setting: a second fit with
    the same setting and shapes reuses :func:`~cd.fit_cd`'s compiled loop."""
    return cd.build_kernel(
        optimizer,
        cached_phase_statistics(kinds, sweeps),
        elp_function(kinds),
        batch_size=batch_size,
    )


@bounded_cache(64)
def cached_phase_statistics(kinds: tuple, sweeps: int) -> Callable:
    """CD's phase statistics (:func:`~.harmonium.cd_phase_statistics`), one
    function per setting so the compiled loops that close over it are reused.

    Parameters
    ----------
    kinds : tuple of str
        Each view's kind.
    sweeps : int
        The free phase's mean-field sweeps.

    Returns
    -------
    Callable
        ``phase_statistics(params, image) -> (q0, q1)``.
    """
    return hm.cd_phase_statistics(kinds, sweeps)


@bounded_cache(64)
def elp_function(kinds: tuple) -> Callable:
    """The expected log-potential of one image for ``kinds``
    (:func:`~.harmonium.expected_log_potential`), one function per setting so the
    compiled loops are reused.

    Parameters
    ----------
    kinds : tuple of str
        Each view's kind.

    Returns
    -------
    Callable
        ``elp(params, q) -> scalar``.
    """

    def elp(params, q):
        return hm.expected_log_potential(params, kinds, q)

    return elp
