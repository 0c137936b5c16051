"""Checks that a fit's parameters lie in their model's support before it returns them.

A fit whose float32 arithmetic drifted (issue 50: CVB0's topic-word counts turned
negative at 100,000 images) must not hand back parameters outside the support: any
score computed from them is wrong or NaN. :func:`check_support` costs one reduction
per bound (one more for a simplex; on the device for a jax array, in numpy for a host
one) and raises :class:`SupportError`, naming the site and the iteration, when an
array is not finite, leaves its bounds or has rows off the simplex;
:func:`check_finite_tree` checks every floating leaf of a params tree on the host.
:func:`first_failing` finds the first iteration of a per-iteration trace of minima
that left the support.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

if TYPE_CHECKING:
    from jaxannot.types import ArrayTree

__all__ = ["SupportError", "check_finite_tree", "check_support", "first_failing"]


class SupportError(FloatingPointError):
    """A fit's parameter left its support (non-finite, below its bound or off the
    simplex)."""


def check_support(
    site: str,
    value: ArrayLike,
    *,
    iteration: int | str,
    lower: float | None = 0.0,
    upper: float | None = None,
    simplex_axis: int | None = None,
    atol: float = 1e-3,
) -> None:
    """Raise :class:`SupportError` unless ``value`` lies in its support.

    Parameters
    ----------
    site : str
        What the array is, for the message (e.g. ``"link-lda cvb0: lambdas[0]"``).
    value : array
        The parameter (a jax array is reduced on its device and only scalars come
        back; anything else is read with numpy on the host).
    iteration : int or str
        The iteration that produced it, for the message.
    lower : float, optional
        Every entry must be ``>= lower`` (exactly; None: no bound).
    upper : float, optional
        Every entry must be ``<= upper`` (exactly; None, the default: no bound).
    simplex_axis : int, optional
        The rows along this axis must sum to 1 within ``atol``.
    atol : float
        Tolerance of the simplex sums.

    Raises
    ------
    SupportError
        When an entry is NaN or infinite, below ``lower``, above ``upper``, or a
        row's sum is off 1.
    """
    # host arrays stay on the host (numpy: no device copy, no compile)
    xp = jnp if isinstance(value, jax.Array) else np
    x = xp.asarray(value)
    where = f"{site} left its support at iteration {iteration}"
    finite = bool(xp.isfinite(x).all())
    if not finite:
        raise SupportError(f"{where}: it holds NaN or infinite values")
    if lower is not None and x.size:
        low = float(x.min())
        if low < lower:
            raise SupportError(f"{where}: its minimum {low:.6g} is below {lower:.6g}")
    if upper is not None and x.size:
        high = float(x.max())
        if high > upper:
            raise SupportError(f"{where}: its maximum {high:.6g} is above {upper:.6g}")
    if simplex_axis is not None and x.size:
        off = float(xp.abs(x.sum(simplex_axis) - 1.0).max())
        if off > atol:
            raise SupportError(
                f"{where}: a row's sum is {off:.3g} away from 1 (tolerance {atol:.3g})"
            )


def first_failing(trace: ArrayLike, lower: float = 0.0) -> int | None:
    """Index of the first entry of a per-iteration trace of minima that is below
    ``lower`` or not finite (None when every one is in the support).

    Parameters
    ----------
    trace : array_like [iterations]
        Minima per iteration.
    lower : float
        The support's lower bound.

    Returns
    -------
    int or None
        The first failing index.
    """
    bad = np.flatnonzero(~(np.asarray(trace, np.float64) >= lower))
    return int(bad[0]) if bad.size else None


def check_finite_tree(site: str, tree: ArrayTree, *, iteration: int | str) -> None:
    """Raise :class:`SupportError` unless every floating leaf of ``tree`` is finite.

    The leaves are read on the host (numpy: no compile); integer, boolean and
    non-array leaves are skipped.

    Parameters
    ----------
    site : str
        What the tree is (e.g. ``"dwh"``); each leaf is named by its path below it
        (``"dwh: .harmonium.weights[0]"``).
    tree : pytree
        The parameters (a params NamedTuple, dicts, tuples; None leaves are skipped).
    iteration : int or str
        The iteration that produced it, for the message.

    Raises
    ------
    SupportError
        Naming the first leaf that holds a NaN or an infinite value.
    """
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        x = np.asarray(leaf)
        if x.dtype.kind in "fc" and not np.isfinite(x).all():
            raise SupportError(
                f"{site}: {jax.tree_util.keystr(path)} left its support at iteration "
                f"{iteration}: it holds NaN or infinite values"
            )
