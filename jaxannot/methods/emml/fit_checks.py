"""EMML's checks (:mod:`.annotators`): its memory and its fitted params (its
settings are checked by their specs, :mod:`jaxannot.annotators.hyper_spec`).

:func:`check_kernel_memory` refuses a VRep count whose kernel cannot fit
(:data:`KERNEL_COPIES`), and :func:`check_emml_support` checks the fitted params'
support (within :data:`SUPPORT_TOLERANCE`).
"""

from __future__ import annotations

import numpy as np

from jaxannot.inference.support import SupportError, check_finite_tree, check_support
from jaxannot.methods.emml.params import EmmlParams
from jaxannot.runtime.memory import check_square_fits

__all__ = [
    "KERNEL_COPIES",
    "SUPPORT_TOLERANCE",
    "check_emml_support",
    "check_kernel_memory",
]

#: The least positive float32: the kernel width must be at least this.
_TINY = float(np.finfo(np.float32).tiny)
#: Tolerance of the coefficients' bounds and row sums, in units of ``C`` (float32
#: projections onto the capped simplex are exact to about 1e-6 of ``C``).
SUPPORT_TOLERANCE = 1e-3


def check_emml_support(params: EmmlParams, c: float, iteration: int | str) -> None:
    r"""Raise :class:`~jaxannot.inference.support.SupportError` unless EMML's fitted
    ``params`` lie in their support.

    Every floating array must be finite and the kernel width ``gamma`` positive. The
    coefficients :math:`B_i = C\mathbf y_i - \mathbf u_i` of a mixture
    :math:`\mathbf u_i` of the capped simplex :math:`\{0 \le \mathbf u \le C,
    \sum_w u_w = r_i C\}` (both solvers' duals): a VRep's word entries must lie in
    :math:`[0, C]`, its other entries in :math:`[-C, 0]` and each row sum to 0, all
    within ``SUPPORT_TOLERANCE`` of ``C`` (times :math:`\max(r_i, 1)` for the sums).

    Parameters
    ----------
    params : EmmlParams
        The fitted params.
    c : float
        The fit's :math:`C`.
    iteration : int or str
        The solver's last iteration or sweep, for the message.
    """
    check_finite_tree("emml", params, iteration=iteration)
    check_support("emml: gamma", params.gamma, iteration=iteration, lower=_TINY)
    words = np.asarray(params.vrep_words) > 0
    coef = np.asarray(params.coefficients, np.float64)
    tol = SUPPORT_TOLERANCE * float(c)
    check_support(
        "emml: coefficients (signed + on a VRep's words, - on the others)",
        np.where(words, coef, -coef),
        iteration=iteration,
        lower=-tol,
        upper=float(c) + tol,
    )
    off = np.abs(coef.sum(1)) / np.maximum(words.sum(1), 1)
    if off.size and float(off.max()) > tol:
        raise SupportError(
            f"emml: coefficients left their support at iteration {iteration}: a "
            f"VRep's row sums to {float(off.max()):.3g} times its word count, not 0 "
            f"(tolerance {tol:.3g})"
        )


#: Float32 V x V arrays the exact solve holds at its peak (the kernel, its padded
#: copy and the solver's temporaries: 3.6 at 2000 VReps by XLA's memory analysis).
KERNEL_COPIES = 4


def check_kernel_memory(num_vreps: int) -> None:
    """Refuse a VRep count whose kernel and dual (``KERNEL_COPIES`` float32 arrays
    of V x V) cannot fit: XLA's CPU client hangs on a failed allocation rather
    than raising.

    Parameters
    ----------
    num_vreps : int
        The VReps of the fit.

    Raises
    ------
    ValueError
        The arrays would not fit in memory
        (:func:`~jaxannot.runtime.memory.check_square_fits`).
    """
    check_square_fits(num_vreps, KERNEL_COPIES * 4, "vreps", " VReps")
