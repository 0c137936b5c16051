"""The warnings of a VEM fit that leaves a component empty or every image alike.

:func:`warn_empty` warns (:class:`EmptyComponentWarning`) when a value of the local
site has (almost) no image, and (:class:`CollapsedFitWarning`, through
:func:`warn_collapsed`) when the local posteriors of all images are (almost) the
same (:func:`posterior_spread`).
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np

import jax

if TYPE_CHECKING:
    from jaxannot.types import ArrayLike

__all__ = ["CollapsedFitWarning", "EmptyComponentWarning", "warn_collapsed"]

#: A component whose posteriors sum to less than this many images explains no
#: image: it is reported as empty (half an image: below any image's share).
EMPTY_MASS = 0.5

#: Posteriors whose mean total-variation distance from their average is below this
#: tell the images apart by less than 5 %: the components explain every image alike.
COLLAPSE_SPREAD = 0.05
#: Rows of each block :func:`posterior_spread` works on in float64 (4 MiB at K=8).
_ROWS = 1 << 16

#: Empty components a warning lists by index (the rest are counted), so that a
#: warning stays under 300 characters however many components are empty.
MAX_LISTED = 8


class EmptyComponentWarning(UserWarning):
    """A fit left a value of the local site with (almost) no image."""


class CollapsedFitWarning(EmptyComponentWarning):
    """A fit gave every image (almost) the same local posterior: its components are
    the same, or the posteriors uniform (e.g. a graph penalty too strong)."""


def posterior_spread(posteriors: ArrayLike) -> float:
    r"""Mean total-variation distance of the images' posteriors from their average,
    :math:`\frac1N\sum_i \tfrac12\lVert\phi_i - \bar\phi\rVert_1` (0: every image
    alike; at most :math:`1 - 1/K`).

    Parameters
    ----------
    posteriors : array_like [N, K]
        Posteriors.

    Returns
    -------
    float
        The spread.
    """
    phi = np.asarray(jax.device_get(posteriors))
    mean = phi.mean(0, dtype=np.float64)
    total = 0.0
    for start in range(0, phi.shape[0], _ROWS):  # float64 work of one block at a time
        block = phi[start : start + _ROWS] - mean
        total += np.abs(block, out=block).sum()
    return 0.5 * total / max(phi.shape[0], 1)


def warn_collapsed(
    posteriors: ArrayLike, label: str = "the fit", stacklevel: int = 3
) -> bool:
    """Warn (:class:`CollapsedFitWarning`) when the posteriors [N, K] of N >= 2
    images over K >= 2 values have a spread (:func:`posterior_spread`) below
    ``COLLAPSE_SPREAD``; returns whether it warned.

    Parameters
    ----------
    posteriors : array_like [N, K]
        Posteriors.
    label : str
        The fit's name, for the message.
    stacklevel : int
        The warning's stack level.

    Returns
    -------
    bool
        Whether it warned.
    """
    n, k = np.shape(posteriors)
    if n < 2 or k < 2:
        return False
    spread = posterior_spread(posteriors)
    if spread >= COLLAPSE_SPREAD:
        return False
    warnings.warn(
        f"{label} collapsed: the images' posteriors differ from their mean by "
        f"{spread:.2g} (total variation, below {COLLAPSE_SPREAD}): every image is "
        "explained alike. With a graph penalty lower lam; else try restarts=..., "
        "fewer components or init_params=...",
        CollapsedFitWarning,
        stacklevel=stacklevel,
    )
    return True


def warn_empty(
    posteriors: ArrayLike, label: str = "the fit", stacklevel: int = 3
) -> None:
    """Warn when some value of the local site has posterior mass < ``EMPTY_MASS``,
    or, instead (one warning a fit; it is an :class:`EmptyComponentWarning` too),
    when the posteriors of all images are alike (:func:`warn_collapsed`).

    Parameters
    ----------
    posteriors, label
        As :func:`warn_collapsed` takes them.
    stacklevel : int
        ``warnings.warn``'s stacklevel, pointing at the user's call.
    """
    host = np.asarray(jax.device_get(posteriors))  # one copy for both checks
    if warn_collapsed(host, label, stacklevel=stacklevel + 1):
        return
    mass = host.sum(0)
    empty = np.flatnonzero(mass < EMPTY_MASS)
    if empty.size:
        shown = ", ".join(str(k) for k in empty[:MAX_LISTED])
        more = (
            f", ... ({empty.size - MAX_LISTED} more)" if empty.size > MAX_LISTED else ""
        )
        warnings.warn(
            f"{label} left {empty.size} of {mass.size} components with less than "
            f"{EMPTY_MASS} images of posterior mass: [{shown}{more}]. Try "
            "restarts=..., fewer components, or another start (init_params=...)",
            EmptyComponentWarning,
            stacklevel=stacklevel,
        )
