"""The fitted parameters of SFSLS, SFSS and FSNM, declared for saving and loading
(:mod:`jaxannot.annotators.persistence`).

All standardize the features by ``mean`` and ``std`` [d], score concepts by
``z @ g + offset`` and rank the features by decreasing ``‖g^i‖`` (``ranking`` [d]).
"""

from __future__ import annotations

from typing import NamedTuple

from jaxtyping import Float, Integer

from jaxannot.types import Array

__all__ = ["FsnmParams", "SfslsParams"]


class SfslsParams(NamedTuple):
    """``sfsls``, ``sfss``: the projection ``g`` [d, w] and shared subspace ``u``
    [d, r]."""

    g: Float[Array, "d w"]
    u: Float[Array, "d r"]
    offset: Float[Array, " w"]
    mean: Float[Array, " d"]
    std: Float[Array, " d"]
    ranking: Integer[Array, " d"]


class FsnmParams(NamedTuple):
    """``fsnm``: the l2,1 selection weights ``w`` [d, w], the ``selected`` features
    [s] and the least squares ``g`` [s, w] on them."""

    w: Float[Array, "d w"]
    g: Float[Array, "s w"]
    selected: Integer[Array, " s"]
    offset: Float[Array, " w"]
    mean: Float[Array, " d"]
    std: Float[Array, " d"]
    ranking: Integer[Array, " d"]
