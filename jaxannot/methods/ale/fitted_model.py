"""The ALE model of the ALE-family methods as fitted, saved and checked.

:func:`fit_ale_model` fits it from a method's hyper-parameters,
:func:`ale_to_params` and :func:`ale_from_params` turn it into its saved form and
back, and :func:`check_fitted_support` checks a method's fitted params.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

import jax.numpy as jnp

from jaxannot.inference.support import check_finite_tree, check_support
from jaxannot.methods.ale.eigenfunctions import ALEModel, PCAModel, fit_ale
from jaxannot.methods.ale.eigenproblem import Eigenfunctions

if TYPE_CHECKING:
    from jaxannot.types import ArrayTree

__all__ = ["check_fitted_support", "ale_to_params", "ale_from_params", "fit_ale_model"]

#: The least positive float32: widths and scales must be at least this.
_TINY = float(np.finfo(np.float32).tiny)


def check_fitted_support(
    name: str, params: ArrayTree, iteration: int | str = "end of fit"
) -> None:
    """Raise :class:`~jaxannot.inference.support.SupportError` unless the fitted
    ``params`` of an ALE-family method lie in their support.

    Every floating array must be finite (PCA, eigenfunction tables and eigenvalues,
    detectors, fit scores, kept fit images); the PCA variances must be
    non-negative; the ALE kernel width, the eigenfunctions' bin widths and the
    features' ``scale`` (BSVM, GSF) positive, since each divides.

    Parameters
    ----------
    name : str
        The method, for the message.
    params : NamedTuple
        Its params (:mod:`jaxannot.methods.ale.params`).
    iteration : int or str
        What produced them, for the message.
    """
    check_finite_tree(name, params, iteration=iteration)
    ale = getattr(params, "ale", None)
    if ale is not None:
        check_support(
            f"{name}: ale.pca.variances", ale.pca.variances, iteration=iteration
        )
        for site, value in (
            ("ale.kernel_width", ale.kernel_width),
            ("ale.eigenfunctions.width", ale.eigenfunctions.width),
        ):
            check_support(f"{name}: {site}", value, iteration=iteration, lower=_TINY)
    scale = getattr(params, "scale", None)
    if scale is not None:
        check_support(f"{name}: scale", scale, iteration=iteration, lower=_TINY)


def ale_to_params(model: ALEModel) -> ALEModel:
    """``model`` as saved: numpy arrays, the count and width 0-d arrays.

    Parameters
    ----------
    model : ALEModel
        A fitted ALE model.

    Returns
    -------
    ALEModel
        The same model with array leaves only.
    """
    return ALEModel(
        PCAModel(*map(np.asarray, model.pca)),
        Eigenfunctions(*map(np.asarray, model.eigenfunctions)),
        np.asarray(model.kernel_width, np.float32),
    )


def ale_from_params(saved: ALEModel) -> ALEModel:
    """Inverse of :func:`ale_to_params`.

    Parameters
    ----------
    saved : ALEModel
        A model as saved (array leaves).

    Returns
    -------
    ALEModel
        The model to compute with: the PCA's count an ``int``, the kernel width a
        ``float``, the eigenfunctions JAX arrays.
    """
    p = saved.pca
    pca = PCAModel(
        np.asarray(p.mean),
        np.asarray(p.components),
        np.asarray(p.variances),
        int(p.count),
    )
    eig = Eigenfunctions(*map(jnp.asarray, saved.eigenfunctions))
    return ALEModel(pca, eig, float(saved.kernel_width))


def fit_ale_model(
    x: np.ndarray, hyper: Mapping[str, Any], pca: PCAModel | None = None
) -> ALEModel:
    """The ALE embedding of ``x`` with the method's hyper-parameters.

    Parameters
    ----------
    x : numpy.ndarray
        The images' features ``[n, f]``.
    hyper : Mapping
        ``pca``, ``bins``, ``eigenvectors``, ``bandwidth`` and ``clip``.
    pca : PCAModel, optional
        A PCA already fitted to reuse (default: fitted on ``x``).

    Returns
    -------
    ALEModel
        The PCA, the eigenfunctions and the kernel width (:func:`fit_ale`).
    """
    return fit_ale(
        x,
        n_components=int(hyper["pca"]),
        num_bins=int(hyper["bins"]),
        num_eigenfunctions=int(hyper["eigenvectors"]),
        bandwidth=float(hyper["bandwidth"]),
        clip=float(hyper["clip"]),
        pca=pca,
    )
