"""The fitted parameters of the harmonium methods, declared for saving and loading
(:mod:`jaxannot.annotators.persistence`).

``scaling`` holds, for each real-valued view by name, the mean and standard deviation
that standardize it (None when no view is real-valued).
"""

from __future__ import annotations

from typing import NamedTuple

from jaxtyping import Float

from jaxannot.methods.harmoniums.harmonium import HarmoniumParams
from jaxannot.types import Array

__all__ = [
    "ClassifierParams",
    "DwhParams",
    "RegressorParams",
    "SvmParams",
    "ViewScaling",
]


class ViewScaling(NamedTuple):
    """``(x - mean) / std`` standardizes a real-valued view (both [d])."""

    mean: Float[Array, " d"]
    std: Float[Array, " d"]


class DwhParams(NamedTuple):
    """``dwh``, ``twh``: the harmonium and the views' scaling."""

    harmonium: HarmoniumParams
    scaling: dict[str, ViewScaling] | None = None


class ClassifierParams(NamedTuple):
    """``dwh-svm``, ``mmh``: the harmonium, the linear read-out ``predictor``
    [classes, k + 1] of its latent means (an offset column last) and the views'
    scaling."""

    harmonium: HarmoniumParams
    predictor: Float[Array, "_ _"]
    scaling: dict[str, ViewScaling] | None = None


class RegressorParams(NamedTuple):
    """``mmh-regression``: the harmonium, the ε-SVR weights ``predictor`` [k + 1] on
    its latent means (the offset last) and the views' scaling."""

    harmonium: HarmoniumParams
    predictor: Float[Array, " _"]
    scaling: dict[str, ViewScaling] | None = None


class SvmParams(NamedTuple):
    """``svm``: the Crammer-Singer weights ``predictor`` [classes, d + 1] on the
    concatenated standardized views and their scaling."""

    predictor: Float[Array, "c _"]
    scaling: dict[str, ViewScaling] | None = None
