"""Contrastive-divergence training of a harmonium, shared by the harmonium methods.

:func:`_init_and_train` initializes a harmonium on the encoded views and fits it by
CD; the optimizer of a setting (:func:`_optimizer`), the CD step and its phase
statistics and expected log-potential are built once per setting (bounded caches),
so a second fit with the same setting reuses the compiled loop.
"""

from __future__ import annotations

import numpy as np

import optax

from jaxannot.inference import contrastive_divergence as cd
from jaxannot.methods.harmoniums import harmonium as hm
from jaxannot.runtime.programs import bounded_cache
from jaxannot.runtime.row_buckets import pad_to_bucket


def _init_and_train(k_init, k_fit, kinds, views, totals, hyper):
    """Initialize a harmonium on ``views`` and fit it by CD: ``(params, cd_gaps)``."""
    params = _init(k_init, kinds, views, hyper)
    return _train_cd(k_fit, params, kinds, (tuple(views), tuple(totals)), hyper)


def _optimizer(hyper, num_views: int) -> optax.GradientTransformation:
    """The CD optimizer of ``hyper`` for a harmonium of ``num_views`` views (one
    object per setting, so the compiled CD loop that closes over it is reused)."""
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


def _init(rng_key, kinds, views, hyper):
    return hm.initialize(
        rng_key,
        kinds,
        [v.shape[1] for v in views],
        hyper["topics"],
        weight_scale=hyper["weight_scale"],
        views=[np.asarray(v) for v in views],
    )


def _train_cd(rng_key, params, kinds, images, hyper):
    """CD on ``images`` padded to their row bucket (one compiled loop for the folds
    and the final fit of a cross-validation): ``(params, cd_gaps)``."""
    optimizer = _optimizer(hyper, len(kinds))
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
        optimizer, _phase_statistics(kinds, sweeps), _elp(kinds), batch_size=batch_size
    )


@bounded_cache(64)
def _phase_statistics(kinds: tuple, sweeps: int):
    return hm.cd_phase_statistics(kinds, sweeps)


@bounded_cache(64)
def _elp(kinds: tuple):
    def elp(params, q):
        return hm.expected_log_potential(params, kinds, q)

    return elp
