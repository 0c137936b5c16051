"""Feature preprocessing shared by several method families."""

from __future__ import annotations

import numpy as np

__all__ = ["standardize"]


def standardize(
    x: np.ndarray, eps: float = 1e-12
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``x`` standardized per column: ``(z, mean, scale)`` with ``z = (x - mean) /
    scale``; ``mean`` and ``scale`` are float32, a standard deviation ``<= eps``
    becomes a scale of 1."""
    mean = x.mean(0).astype(np.float32)
    sd = x.std(0)
    scale = np.where(sd > eps, sd, 1.0).astype(np.float32)
    return (x - mean) / scale, mean, scale
