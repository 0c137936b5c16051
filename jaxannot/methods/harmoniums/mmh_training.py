"""An MMH fit as the ``train`` of a harmonium fit, shared by ``mmh`` and
``mmh-regression``.

:func:`mmh_alternation` wraps the max-margin alternation of
:mod:`~jaxannot.methods.harmoniums.max_margin_harmonium` (its model built from the CD
pieces of :mod:`~jaxannot.methods.harmoniums.cd_training` by
:func:`_alternation_args`, the hinge's embedding by :func:`_feature_embed`) and
returns its parameters, predictor and V-step trace.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from jaxannot.methods.harmoniums import harmonium as hm
from jaxannot.methods.harmoniums import max_margin_harmonium as mmh_inf
from jaxannot.methods.harmoniums.cd_training import (
    cached_phase_statistics,
    cd_optimizer,
    elp_function,
)
from jaxannot.runtime.programs import bounded_cache


@bounded_cache(16)
def _feature_embed(num_features: int):
    """``embed(params, image)``: E_q0[h] over the first ``num_features`` views (a
    trailing words wing left out); one function per count, so compiled loops that
    take it as a static argument are reused."""

    def embed(params, image):
        return hm.hidden_mean(params, image[0][:num_features])

    return embed


def _alternation_args(hyper, kinds, num_features: int) -> dict:
    """Keyword arguments shared by the MMH classifier and regressor fits: the model
    (CD pieces, ``embed`` over the first ``num_features`` wings, optimizer), ``c1``,
    ``c2`` and the
    :class:`~jaxannot.methods.harmoniums.max_margin_harmonium.Schedule`."""
    kinds_t = tuple(kinds)
    model = mmh_inf.MMHModel(
        phase_statistics=cached_phase_statistics(kinds_t, int(hyper["sweeps"])),
        expected_log_potential=elp_function(kinds_t),
        embed=_feature_embed(num_features),
        optimizer=cd_optimizer(hyper, len(kinds_t)),
    )
    schedule = mmh_inf.Schedule(
        iterations=hyper["iterations"],
        inner_steps=hyper["inner_steps"],
        pretrain_steps=hyper["pretrain_steps"],
        svm_epochs=hyper["svm_epochs"],
        final_svm_epochs=hyper["final_svm_epochs"],
        batch_size=hyper["batch_size"] or None,
        svm_step=hyper["svm_step"],
    )
    return dict(model=model, c1=hyper["c1"], c2=hyper["c2"], schedule=schedule)


def mmh_alternation(
    solve: Callable,
    hyper: Mapping[str, Any],
    trace: str,
    skip_last: bool = False,
) -> Callable:
    """The ``train`` of :func:`.dwh_annotators.fit_harmonium` for an MMH fit.

    ``solve(rng_key, params, images, model=, c1=, c2=, schedule=)`` is
    :func:`~jaxannot.methods.harmoniums.max_margin_harmonium.fit_mmh_classifier` or
    ``fit_mmh_regressor`` with the response bound; the hinge's (or the SVR's)
    :math:`E_{q_0}[h]` runs over every wing but, with ``skip_last``, the last one
    (``mmh``'s words wing). The V-steps' primal objectives and relative gaps become
    the info ``{trace}_primal`` and ``{trace}_gap``.

    Parameters
    ----------
    solve : Callable
        The MMH fit (classifier or regressor).
    hyper : Mapping
        The method's hyper-parameters (the CD and alternation settings, ``c1``,
        ``c2``).
    trace : str
        The info keys' prefix (``"svm"``, ``"svr"``).
    skip_last : bool, optional
        Leave the last wing out of the response's features.

    Returns
    -------
    Callable
        ``train(rng_key, params, kinds, images) -> (params, extra_params, info)``
        with the predictor as ``extra_params``.
    """

    def train(rng_key, params, kinds, images):
        num_features = len(kinds) - bool(skip_last)
        res = solve(
            rng_key, params, images, **_alternation_args(hyper, kinds, num_features)
        )
        info = {
            f"{trace}_primal": res.trace["svm_primal"].tolist(),
            f"{trace}_gap": res.trace["svm_gap"].tolist(),
        }
        return res.params, {"predictor": res.predictor}, info

    return train
