"""A numpyro ELBO plus a penalty: :class:`PenalizedELBO`, the base of
:class:`~jaxannot.inference.LaplacianELBO` and
:class:`~jaxannot.inference.MaxMarginELBO`.

The loss is the base ELBO's (any numpyro ELBO, its mutable state kept:
:func:`base_loss_with_mutable_state`) plus the subclass's ``penalty``, each on its own
half of the step's key. The base's per-site terms are added in sorted name order,
so that the loss is the same from process to process.
"""

from __future__ import annotations

import copy
import functools
import operator
from collections.abc import Callable
from typing import Any

import jax
from numpyro.infer.elbo import ELBO

from jaxannot.inference.local_summary import LocalSummary

__all__ = ["PenalizedELBO", "base_loss_with_mutable_state"]


def base_loss_with_mutable_state(
    base: ELBO,
    rng_key: jax.Array,
    param_map: dict,
    model: Callable,
    guide: Callable,
    *args: Any,
    **kwargs: Any,
) -> dict:
    """``base``'s loss and mutable state (None for bases without mutable state).

    Wrappers use this so that ``TraceGraph_ELBO`` and ``TraceEnum_ELBO``, which only
    implement ``loss``, can be wrapped as well as the ELBOs with mutable state.

    Parameters
    ----------
    base : ELBO
        The wrapped ELBO.
    rng_key, param_map, model, guide, *args, **kwargs
        As numpyro's ``ELBO.loss`` takes them.

    Returns
    -------
    dict
        ``{"loss": scalar, "mutable_state": dict or None}``.
    """
    base = _per_site(base)
    if type(base).loss_with_mutable_state is ELBO.loss_with_mutable_state:
        loss = base.loss(rng_key, param_map, model, guide, *args, **kwargs)
        return {"loss": _sum_by_name(loss), "mutable_state": None}
    out = base.loss_with_mutable_state(
        rng_key, param_map, model, guide, *args, **kwargs
    )
    return {**out, "loss": _sum_by_name(out["loss"])}


def _per_site(base: ELBO) -> ELBO:
    """A copy of ``base`` that returns its sites' terms by name (``sum_sites=False``)
    when it can, so that :func:`_sum_by_name` adds them in one order.

    numpyro's ``Trace_ELBO`` adds its sites in the order of a Python ``set`` of their
    names, which changes from process to process with string hashing
    (``PYTHONHASHSEED``): the same fit's loss differed in its last bit at a third of
    the steps between two runs (the gradients, and so the fit, did not).
    """
    if getattr(base, "sum_sites", None) is True:
        base = copy.copy(base)
        base.sum_sites = False
    return base


def _sum_by_name(loss):
    """``loss`` itself, or the sum of a dict of per-site losses in sorted name order."""
    if not isinstance(loss, dict):
        return loss
    return functools.reduce(operator.add, (loss[name] for name in sorted(loss)))


class PenalizedELBO(ELBO):
    """A numpyro ELBO ``self.base`` plus ``self.penalty(rng_key, param_map, model,
    guide, *args, **kwargs)``; subclasses define the penalty (the base's mutable state,
    if any, is kept).
    """

    def loss_with_mutable_state(
        self,
        rng_key: jax.Array,
        param_map: dict,
        model: Callable,
        guide: Callable,
        *args: Any,
        **kwargs: Any,
    ) -> dict:
        """The base ELBO's loss plus :meth:`penalty`, and the base's mutable state.

        Parameters
        ----------
        rng_key, param_map, model, guide, *args, **kwargs
            As :func:`base_loss_with_mutable_state` takes them after ``base``.

        Returns
        -------
        dict
            ``{"loss": scalar, "mutable_state": dict or None}``.
        """
        base_key, pen_key = jax.random.split(rng_key)
        out = base_loss_with_mutable_state(
            self.base, base_key, param_map, model, guide, *args, **kwargs
        )
        pen = self.penalty(pen_key, param_map, model, guide, *args, **kwargs)
        return {"loss": out["loss"] + pen, "mutable_state": out["mutable_state"]}

    def penalty(
        self,
        rng_key: jax.Array,
        param_map: dict,
        model: Callable,
        guide: Callable,
        *args: Any,
        **kwargs: Any,
    ) -> jax.Array:
        """The penalty added to the base's loss (each subclass defines it).

        Parameters
        ----------
        rng_key, param_map, model, guide, *args, **kwargs
            As numpyro's ``ELBO.loss`` takes them.

        Returns
        -------
        jax.Array
            The scalar penalty.
        """
        raise NotImplementedError

    def _check_scorable(self, summary: LocalSummary, site: str) -> None:
        """``ValueError`` when ``site`` is sampled discrete in the guide and the base
        has no score-function term to differentiate through it."""
        if summary.discrete and not self.can_infer_discrete:
            raise ValueError(
                f"site {site!r} is discrete in the guide; {type(self.base).__name__} "
                "has no score-function term, use TraceGraph_ELBO or enumerate it"
            )
