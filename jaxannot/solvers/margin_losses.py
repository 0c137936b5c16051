r"""The margin losses of :class:`~jaxannot.inference.MaxMargin` and their targets.

Binary hinge :math:`\max(0, 1 - y s)`, Crammer--Singer
:math:`\max_y[\Delta(y, y_i) + s_y - s_{y_i}]` and Vapnik's
:math:`\epsilon`-insensitive :math:`\max(0, |y - s| - \epsilon)`, per image, and the
coding of a label vector (with unlabelled images) into the targets each loss takes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

import jax
import jax.numpy as jnp

from jaxannot.types import Array

if TYPE_CHECKING:
    from jaxannot.types import ArrayLike

__all__ = [
    "hinge_loss",
    "crammer_singer_loss",
    "epsilon_insensitive_loss",
    "label_targets",
]


def hinge_loss(scores: Array, targets: Array) -> Array:
    r""":math:`\max(0, 1 - y s)` per image; ``scores`` [B], ``targets`` [B] in ±1."""
    return jnp.maximum(0.0, 1.0 - targets * scores)


def crammer_singer_loss(scores: Array, targets: Array) -> Array:
    r""":math:`\max_y[\Delta(y, y_i) + s_y - s_{y_i}]` per image; ``scores`` [B, T]."""
    margin = 1.0 - jax.nn.one_hot(targets, scores.shape[-1], dtype=scores.dtype)
    true = jnp.take_along_axis(scores, targets[:, None], axis=-1)
    return jnp.max(margin + scores - true, axis=-1)


def epsilon_insensitive_loss(scores: Array, targets: Array, epsilon: float) -> Array:
    r""":math:`\max(0, |y - s| - \epsilon)` per image; ``scores``, ``targets`` [B]."""
    return jnp.maximum(0.0, jnp.abs(targets - scores) - epsilon)


def _classification_targets(labels: np.ndarray, loss: str):
    """(targets, mask) for integer labels; -1 or NaN marks an unlabelled image."""
    unlabelled = np.isnan(labels) | (labels == -1)
    known = labels[~unlabelled]
    if np.any(known != np.round(known)):
        raise ValueError(f"{loss} labels must be integers (-1 = unlabelled)")
    if loss == "crammer_singer":
        if np.any(known < 0):
            raise ValueError("crammer_singer labels must be >= 0 (-1 = unlabelled)")
        return np.where(unlabelled, 0, labels).astype(np.int32), ~unlabelled
    # hinge: {0, 1} coding when a 0 appears (then -1 = unlabelled), else {-1, +1}
    if np.any(labels == 0):
        if np.any(~np.isin(known, (0, 1))):
            raise ValueError(
                "hinge labels coded {0, 1} must be 0, 1 or -1 (unlabelled)"
            )
        return np.where(unlabelled, 0.0, 2.0 * labels - 1.0), ~unlabelled
    unlabelled = np.isnan(labels)
    if np.any(~np.isin(labels[~unlabelled], (-1, 1))):
        raise ValueError(
            "hinge labels must be in {-1, +1} (NaN = unlabelled) or {0, 1}"
        )
    return np.where(unlabelled, 0.0, labels), ~unlabelled


def label_targets(labels: ArrayLike, loss: str) -> tuple[np.ndarray, np.ndarray]:
    """``(targets, mask)`` of a label vector for ``loss`` (NaN / -1 = unlabelled);
    ``ValueError`` for labels the loss cannot take."""
    labels = np.asarray(labels, np.float64)
    if labels.ndim != 1:
        raise ValueError(f"labels must be a 1-D array [N], got shape {labels.shape}")
    if loss == "epsilon_insensitive":
        unlabelled = np.isnan(labels)
        targets, mask = np.where(unlabelled, 0.0, labels), ~unlabelled
    else:
        targets, mask = _classification_targets(labels, loss)
    if not mask.any():
        raise ValueError("labels: no labelled image")
    return targets, mask
