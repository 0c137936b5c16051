"""The fitted parameters of EMML, declared for saving and loading
(:mod:`jaxannot.annotators.persistence`); MBRM's are its
:class:`~jaxannot.methods.emml.mbrm.MBRMParams`."""

from __future__ import annotations

from typing import NamedTuple

from jax.typing import ArrayLike

__all__ = ["EmmlParams"]


class EmmlParams(NamedTuple):
    """``emml``: the VReps' features ``vrep_features`` [v, d] and words
    ``vrep_words`` [v, w], the dual ``coefficients`` [v, w] of eq. 1, each VRep's
    word scores ``vrep_word_scores`` [v, w] (the §4.1 merge) and the kernel width
    ``gamma``."""

    vrep_features: ArrayLike
    vrep_words: ArrayLike
    coefficients: ArrayLike
    vrep_word_scores: ArrayLike
    gamma: ArrayLike

    spec = {
        "vrep_features": "f[v,d]",
        "vrep_words": "fb[v,w]",
        "coefficients": "f[v,w]",
        "vrep_word_scores": "f[v,w]",
        "gamma": "f[]",
    }
