"""The fitted parameters of SFSLS, SFSS and FSNM, declared for saving and loading
(:mod:`jaxannot.annotators.persistence`).

All standardize the features by ``mean`` and ``std`` [d], score concepts by
``z @ g + offset`` and rank the features by decreasing ``‖g^i‖`` (``ranking`` [d]).
"""

from __future__ import annotations

from typing import NamedTuple

from jax.typing import ArrayLike

__all__ = ["FsnmParams", "SfslsParams"]


class SfslsParams(NamedTuple):
    """``sfsls``, ``sfss``: the projection ``g`` [d, w] and shared subspace ``u``
    [d, r]."""

    g: ArrayLike
    u: ArrayLike
    offset: ArrayLike
    mean: ArrayLike
    std: ArrayLike
    ranking: ArrayLike

    spec = {
        "g": "f[d,w]",
        "u": "f[d,r]",
        "offset": "f[w]",
        "mean": "f[d]",
        "std": "f[d]",
        "ranking": "iu[d]",
    }


class FsnmParams(NamedTuple):
    """``fsnm``: the l2,1 selection weights ``w`` [d, w], the ``selected`` features
    [s] and the least squares ``g`` [s, w] on them."""

    w: ArrayLike
    g: ArrayLike
    selected: ArrayLike
    offset: ArrayLike
    mean: ArrayLike
    std: ArrayLike
    ranking: ArrayLike

    spec = {
        "w": "f[d,w]",
        "g": "f[s,w]",
        "selected": "iu[s]",
        "offset": "f[w]",
        "mean": "f[d]",
        "std": "f[d]",
        "ranking": "iu[d]",
    }
