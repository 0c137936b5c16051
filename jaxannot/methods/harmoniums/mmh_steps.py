r"""The pieces of MMH's two steps (seed 001 §4): the features the V-step sees and the
Θ-step's extra terms.

The V-step (a linear SVM or SVR dual) sees every image's expected prediction rule
:math:`[\bar h_d, 1]` with :math:`\bar h_d = E_{q_0}[h \mid x_d]` (:func:`embed_all`,
:func:`with_offset`), raw or standardized; :func:`to_raw` folds the weights of the
standardized problem back onto the raw features and :func:`last_primal_and_gap` reads
the solver's trace. The Θ-step adds to the CD surrogate the hinge of P1
(:func:`classification_extra_loss`, through
:class:`~jaxannot.inference.max_margin.MaxMargin`'s ``penalty``) or the Lagrangian term
of P2's eq. (11) (:func:`regression_extra_loss`). The alternation itself is
:mod:`jaxannot.methods.harmoniums.max_margin_harmonium`.

References
----------
N. Chen, J. Zhu, F. Sun, E. P. Xing. Large-Margin Predictive Latent Subspace Learning
for Multiview Data Analysis. IEEE TPAMI 34(12), 2012, §4.1–4.2.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

import jax
import jax.numpy as jnp

from jaxannot.types import Array

if TYPE_CHECKING:
    from jaxannot.methods.harmoniums.harmonium import HarmoniumParams
    from jaxannot.types import ArrayTree

__all__ = [
    "with_offset",
    "term_params",
    "classification_extra_loss",
    "regression_extra_loss",
    "to_raw",
    "embed_all",
    "check_features",
    "last_primal_and_gap",
    "standardized_start",
    "masked_moments",
]


def with_offset(features: Array) -> Array:
    """Append the constant unit dimension of seed 001 footnote 3: ``[..., K+1]``."""
    ones = jnp.ones(features.shape[:-1] + (1,), features.dtype)
    return jnp.concatenate([features, ones], axis=-1)


def term_params(weights: Array) -> dict[str, Array]:
    """``V`` ``[..., K+1]`` (offset last) as the params of
    :class:`~jaxannot.inference.max_margin.MaxMargin`.

    Returns ``{"weights": V[..., :K], "bias": V[..., K]}``.
    """
    return {"weights": weights[..., :-1], "bias": weights[..., -1]}


def _hidden(embed, params, images, center, scale):
    """:math:`(\\bar h_d - \\text{center}) / \\text{scale}`, ``[D, K]``."""
    hidden = jax.vmap(embed, in_axes=(None, 0))(params, images)
    return (hidden - center) / scale


def classification_extra_loss(embed: Callable) -> Callable:
    r"""The Θ-step's hinge term of P1, averaged over the ``D`` images.

    Parameters
    ----------
    embed : callable
        ``embed(params, image) -> [K]``, :math:`E_{q_0}[h]`.

    Returns
    -------
    callable
        ``extra_loss(params, (images, (term, weight, V, center, scale)))`` =
        ``weight * term.penalty(term_params(V), f, arange(D))`` on the features
        :math:`f_d = (\bar h_d - \text{center}) / \text{scale}`, with ``term`` a
        :class:`~jaxannot.inference.max_margin.MaxMargin`
        (``loss="crammer_singer"``) and ``V`` ``[T, K+1]`` (offset last). With
        ``term = MaxMargin(labels, C_2 / C_1)`` and ``weight`` :math:`= C_1 / D`
        this is :math:`\frac{C_2}{D}\sum_d \max_y[\Delta\ell_d(y)
        + (V_y - V_{y_d})^\top [f_d, 1]]`. The term (its labels and cost) is data,
        not a constant of the compiled step, so a fit on other labels or at other
        :math:`C_1, C_2` reuses it.
    """

    def extra(params, data, mask=None):
        # padded rows (``mask`` 0, :mod:`jaxannot.runtime.row_buckets`) carry the
        # label -1 of an unlabelled image: the term's penalty leaves them out
        images, (term, weight, weights, center, scale) = data
        hidden = _hidden(embed, params, images, center, scale)
        index = jnp.arange(hidden.shape[0])
        return weight * term.penalty(term_params(weights), hidden, index)

    return extra


def regression_extra_loss(embed: Callable) -> Callable:
    """``extra_loss(params, (images, (beta, V, center, scale)), mask=None)`` =
    :math:`-\\frac1D\\sum_d \\beta_d V^\\top f_d` with :math:`f_d = [(\\bar h_d -
    \\text{center}) / \\text{scale}, 1]` (its gradient is eq. 11's extra term); with
    a row ``mask`` :math:`m_d` the sum runs over :math:`m_d \\beta_d` and
    :math:`D = \\sum_d m_d`."""

    def extra(params, data, mask=None):
        images, (beta, weights, center, scale) = data
        feats = with_offset(_hidden(embed, params, images, center, scale))
        if mask is None:
            return -jnp.mean(beta * (feats @ weights))
        return -jnp.sum(mask * beta * (feats @ weights)) / jnp.sum(mask)

    return extra


def to_raw(weights: Array, center: Array, scale: Array) -> Array:
    """Fold the standardization into V: the same scores on ``[h, 1]``."""
    lin = weights[..., :-1] / scale
    offset = weights[..., -1] - lin @ center
    return jnp.concatenate([lin, offset[..., None]], axis=-1)


def masked_moments(values: Array, mask: Array | None = None) -> tuple[Array, Array]:
    r"""Mean and standard deviation over the rows whose ``mask`` is 1.

    .. math::

        \mu = \frac{\sum_d m_d v_d}{\sum_d m_d}, \qquad
        \sigma = \Big(\frac{\sum_d m_d (v_d - \mu)^2}{\sum_d m_d}\Big)^{1/2}

    (``values.mean(0), values.std(0)`` when ``mask`` is None): the moments of the
    real rows of an array padded to a row bucket
    (:mod:`jaxannot.runtime.row_buckets`).

    Parameters
    ----------
    values : [D, K] array
        The rows.
    mask : [D] array, optional
        1 on the real rows, 0 on padded ones.

    Returns
    -------
    (mean, std) : tuple of [K] arrays
    """
    if mask is None:
        return values.mean(0), values.std(0)
    weights = mask[:, None] / jnp.sum(mask)
    mean = jnp.sum(weights * values, axis=0)
    return mean, jnp.sqrt(jnp.sum(weights * (values - mean) ** 2, axis=0))


@functools.partial(jax.jit, static_argnames=("embed", "standardize"))
def embed_all(
    params: HarmoniumParams,
    images: ArrayTree,
    embed: Callable[[HarmoniumParams, ArrayTree], Array],
    standardize: bool,
    mask: Array | None = None,
) -> tuple[Array, tuple[Array, Array]]:
    """``([E_q0[h], 1]`` standardized or raw, ``(center, scale))`` of every image
    (center and scale over the real ones, ``mask`` 1, of images padded to a row
    bucket: :func:`masked_moments`)."""
    hidden = jax.vmap(embed, in_axes=(None, 0))(params, images)
    if standardize:
        center, std = masked_moments(hidden, mask)
        scale = std + 1e-6
    else:
        center, scale = jnp.zeros_like(hidden[0]), jnp.ones_like(hidden[0])
    return with_offset((hidden - center) / scale), (center, scale)


def check_features(feats: Array, when: str) -> None:
    """Raise ``FloatingPointError`` when the V-step's features are not finite (the
    Θ-step diverged): an SVM on them would return NaN weights without a word."""
    if not bool(jnp.isfinite(feats).all()):
        raise FloatingPointError(f"the hidden features E[h] are not finite {when}")


def last_primal_and_gap(trace: ArrayTree) -> tuple[float, float]:
    """Primal objective and relative duality gap at the last epoch run."""
    primal, gap = np.asarray(trace.primal), np.asarray(trace.gap)
    ok = np.isfinite(primal)
    if not ok.any():
        raise FloatingPointError("the SVM's primal objective is not finite")
    value = float(primal[ok][-1])
    return value, float(gap[ok][-1]) / max(1.0, abs(value))


def standardized_start(feats: Array, mask: Array | None = None) -> Array:
    """``[(F - m) / s, 1]`` of ``feats = [F, 1]`` (mean / std over the images, the
    real ones of a ``mask``: :func:`masked_moments`)."""
    hidden = feats[:, :-1]
    mean, std = masked_moments(hidden, mask)
    return with_offset((hidden - mean) / (std + 1e-6))
