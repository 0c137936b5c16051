"""The fitted parameters of ``ensemble``, declared for saving and loading
(:mod:`jaxannot.annotators.persistence`)."""

from __future__ import annotations

from typing import Annotated, Any, NamedTuple

from jaxtyping import Float

from jaxannot.annotators.typed_params import MethodParams
from jaxannot.types import Array

__all__ = ["EnsembleParams"]


class EnsembleParams(NamedTuple):
    """A fusion of fitted base methods.

    Attributes
    ----------
    weights : [b]
        The chosen weight of each base, in the order of the ``bases``
        hyper-parameter.
    prior : [w]
        Each word's training frequency plus 1 / N (the reweighting's
        :math:`\\hat p(w)`).
    thresholds : [w]
        Each word's threshold on the fused distribution, fitted on the
        out-of-fold scores of every training image (the per-word annotation rule,
        :mod:`~jaxannot.methods.ensemble.words`).
    bases : dict
        Base specification (``name`` or ``name:key=value:...``) -> the params of
        that base fitted on every training image.
    """

    weights: Float[Array, " b"]
    prior: Float[Array, " w"]
    thresholds: Float[Array, " w"]
    bases: Annotated[dict[str, Any], MethodParams()]
