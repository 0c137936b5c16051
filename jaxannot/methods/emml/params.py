"""The fitted parameters of EMML, declared for saving and loading
(:mod:`jaxannot.annotators.persistence`); MBRM's are its
:class:`~jaxannot.methods.emml.mbrm.MBRMParams`."""

from __future__ import annotations

from typing import NamedTuple

from jaxtyping import Bool, Float

from jaxannot.types import Array

__all__ = ["EmmlParams"]


class EmmlParams(NamedTuple):
    """``emml``: the VReps' features ``vrep_features`` [v, d] and words
    ``vrep_words`` [v, w], the dual ``coefficients`` [v, w] of eq. 1, each VRep's
    word scores ``vrep_word_scores`` [v, w] (the §4.1 merge) and the kernel width
    ``gamma``."""

    vrep_features: Float[Array, "v d"]
    vrep_words: Float[Array, "v w"] | Bool[Array, "v w"]
    coefficients: Float[Array, "v w"]
    vrep_word_scores: Float[Array, "v w"]
    gamma: Float[Array, ""]
