r"""The exact EMML solver: the dual (9) of Guo et al. (2016) over per-VRep mixtures.

The dual objective and the loss are linear in :math:`\bar{\mathbf y}`, so VRep
:math:`i`'s multipliers enter only through their mixture :math:`\mathbf u_i =
\sum_{\bar{\mathbf y}} \mu_{i,\bar{\mathbf y}}\bar{\mathbf y}`, a point of the
capped simplex :math:`\{0 \le \mathbf u \le C, \sum_w u_w = r_i C\}`. Block
Gauss--Seidel over VReps with exact Euclidean projections onto that set
(:func:`~jaxannot.methods.emml.capped_simplex.project_capped_simplex`) solves the dual
with no working set (no cap on the active constraints, unlike Algorithm 1 of
:mod:`.emml`), and reports its KKT violation, Frank--Wolfe duality gap and whether it
converged.

References
----------
Z. Guo, Z. Zhang, E. P. Xing, C. Faloutsos. Multimodal Data Mining in a Multimedia
Database Based on Structured Max Margin Learning. ACM TKDD 10(3), 2016 (Section 3).
Z.-Q. Luo, P. Tseng. On the convergence of the coordinate descent method for convex
differentiable minimization. J. Optim. Theory Appl. 72(1):7--35, 1992.
W. Wang, C. Lu. Projection onto the capped simplex. arXiv:1503.01002, 2015.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxannot.methods.emml.capped_simplex import project_capped_simplex
from jaxannot.methods.emml.structured_output import StructuredData
from jaxannot.types import Array

#: VReps per blocked score update of :func:`fit_emml_exact`: the fastest of 1, 16,
#: 64 and 256 at 2000 and 3000 VReps on two CPU cores
#: (``benchmarks/emml_exact_blocks.py``).
SCORE_BLOCK = 64

__all__ = [
    "ExactState",
    "fit_emml_exact",
    "mixture_objective",
    "uncoupled_mixtures",
    "mixture_state",
]


class ExactState(NamedTuple):
    """Solution of the dual (9) in mixture form (:func:`fit_emml_exact`).

    Attributes
    ----------
    mixtures : Float[Array, "vreps words"]
        :math:`\\mathbf u_i = \\sum_{\\bar{\\mathbf y}} \\mu_{i,\\bar{\\mathbf y}}
        \\bar{\\mathbf y}` with the slack counted as :math:`\\bar{\\mathbf y} =
        \\mathbf y_i`, a point of :math:`C\\operatorname{conv}(\\operatorname{perm}
        (\\mathbf y_i)) = \\{0 \\le \\mathbf u \\le C, \\sum_w u_w = r_i C\\}`.
    coefficients : Float[Array, "vreps words"]
        :math:`B_i = C\\mathbf y_i - \\mathbf u_i` (as :attr:`EMMLState.coefficients`).
    scores : Float[Array, "vreps words"]
        :math:`F = K B`.
    objective : Float[Array, ""]
        Dual objective (9).
    sweeps : Int[Array, ""]
        Block sweeps run.
    max_violation : Float[Array, ""]
        Largest KKT violation over VReps, in loss units (see :func:`fit_emml_exact`).
    duality_gap : Float[Array, ""]
        Frank--Wolfe gap :math:`\\sum_i \\max_{\\mathbf z \\in C\\Delta_i}
        \\langle \\mathbf a_i, \\mathbf z - \\mathbf u_i\\rangle \\ge`
        objective :math:`-` optimum.
    converged : Bool[Array, ""]
        ``max_violation <= tolerance``.
    """

    mixtures: Array
    coefficients: Array
    scores: Array
    objective: Array
    sweeps: Array
    max_violation: Array
    duality_gap: Array
    converged: Array


def _block_violation(u: Array, a: Array, cap: Array) -> Array:
    """Largest gain of moving mass from word :math:`w'` (``u > 0``) to word :math:`w`
    (``u < cap``): :math:`\\max a_w - \\min a_{w'}` (0 when none)."""
    can_up = u < cap
    can_down = u > 0
    up = jnp.max(jnp.where(can_up, a, -jnp.inf), axis=-1)
    down = jnp.min(jnp.where(can_down, a, jnp.inf), axis=-1)
    return jnp.maximum(up - down, 0.0)


def _frank_wolfe_gap(u: Array, a: Array, r: Array, cap: Array) -> Array:
    """Per VRep :math:`C \\cdot(\\text{sum of the } r_i \\text{ largest } a) - \\langle
    \\mathbf a, \\mathbf u\\rangle` (the best vertex is the most violated output)."""
    ranked = -jnp.sort(-a, axis=-1)
    top = jnp.arange(a.shape[-1])[None, :] < r[:, None]
    return cap * jnp.sum(jnp.where(top, ranked, 0.0), axis=-1) - jnp.sum(a * u, -1)


def mixture_objective(data: StructuredData, u: Array, c) -> Array:
    """Dual objective (9) at mixtures ``u``:
    :math:`\\tfrac12 \\langle B, KB\\rangle - 2\\sum_i \\langle \\mathbf u_i,
    \\mathbf 1 - \\mathbf y_i\\rangle`, :math:`B = C Y - U`."""
    b = c * data.words - u
    return 0.5 * jnp.vdot(b, data.kernel @ b) - 2.0 * jnp.vdot(u, 1.0 - data.words)


class _Padded(NamedTuple):
    """The problem padded with empty VReps to whole blocks (never visited)."""

    kernel: Array
    words: Array
    sizes: Array  # r_i, the words of each VRep
    diag: Array  # k_ii, floored at the smallest positive number
    penalty: Array  # 2 (1 - y_i), the loss part of a_i
    real: Array  # False on the padded VReps


def _pad(data: StructuredData, total: int) -> _Padded:
    """``data`` padded to ``total`` VReps."""
    kernel, words = data.kernel, data.words
    n = words.shape[0]
    pad = total - n
    padded_kernel = jnp.pad(kernel, ((0, pad), (0, pad)))
    padded_words = jnp.pad(words, ((0, pad), (0, 0)))
    return _Padded(
        kernel=padded_kernel,
        words=padded_words,
        sizes=jnp.sum(padded_words, axis=-1),
        diag=jnp.maximum(jnp.diag(padded_kernel), jnp.finfo(kernel.dtype).tiny),
        penalty=2.0 * (1.0 - padded_words),
        real=jnp.arange(total) < n,
    )


def _visit_block(b, carry, *, problem: _Padded, block: int, c, tolerance):
    """Visit block ``b`` of :func:`fit_emml_exact`'s sweep: one projection per VRep
    whose KKT violation exceeds ``tolerance``, the block's rows of :math:`F` updated
    after each, every row once at the end. ``carry = (u, F, worst violation)``."""
    padded_kernel, penalty, real = problem.kernel, problem.penalty, problem.real
    diag, r = problem.diag, problem.sizes
    u, scores, worst = carry
    start = b * block
    columns = jax.lax.dynamic_slice_in_dim(padded_kernel, start, block, axis=1)
    within = jax.lax.dynamic_slice_in_dim(columns, start, block, axis=0)
    scores_b = jax.lax.dynamic_slice_in_dim(scores, start, block)
    u_b = jax.lax.dynamic_slice_in_dim(u, start, block)

    def visit(j, carry):
        u_b, scores_b, steps, worst = carry
        i = start + j
        a_i = scores_b[j] + penalty[i]
        gap = jnp.where(real[i], _block_violation(u_b[j], a_i, c), 0.0)

        def update(args):
            u_b, scores_b, steps = args
            new = project_capped_simplex(u_b[j] + a_i / diag[i], r[i] * c, c)
            db = u_b[j] - new  # B_i = C y_i - u_i
            return (
                u_b.at[j].set(new),
                scores_b + within[:, j, None] * db[None, :],
                steps.at[j].set(db),
            )

        u_b, scores_b, steps = jax.lax.cond(
            gap > tolerance, update, lambda x: x, (u_b, scores_b, steps)
        )
        return u_b, scores_b, steps, jnp.maximum(worst, gap)

    steps = jnp.zeros((block, problem.words.shape[1]), padded_kernel.dtype)
    u_b, _, steps, worst = jax.lax.fori_loop(
        0, block, visit, (u_b, scores_b, steps, worst)
    )
    u = jax.lax.dynamic_update_slice_in_dim(u, u_b, start, axis=0)
    return u, scores + columns @ steps, worst


@functools.partial(jax.jit, static_argnames=("max_sweeps", "block"))
def fit_emml_exact(
    data: StructuredData,
    c: float = 1.0,
    tolerance: float = 1e-3,
    *,
    max_sweeps: int = 2000,
    block: int = SCORE_BLOCK,
) -> tuple[ExactState, Array]:
    r"""Solve the dual (9) exactly, with every output of every VRep available.

    **Why a mixture is enough.** On :math:`\operatorname{perm}(\mathbf y_i)` both
    the joint feature map and the Hamming loss are linear in :math:`\bar{\mathbf y}`:
    :math:`\Phi(\mathbf x, \bar{\mathbf y}) = \sum_j \bar y_j \Phi(\mathbf x,
    \mathbf e_j)` and :math:`l(\bar{\mathbf y}, \mathbf y_i) = 2\bar{\mathbf
    y}^\top(\mathbf 1 - \mathbf y_i)`. Count the slack :math:`C - \sum_{\bar{\mathbf
    y}}\mu_{i,\bar{\mathbf y}}` as mass on :math:`\bar{\mathbf y} = \mathbf y_i`
    (it contributes nothing), so VRep :math:`i` has total mass :math:`C`. The dual
    objective depends on :math:`\mu` only through

    .. math::

        \mathbf u_i = \sum_{\bar{\mathbf y}} \mu_{i,\bar{\mathbf y}} \bar{\mathbf y},
        \qquad B_i = C\mathbf y_i - \mathbf u_i, \qquad \mu^\top S = 2\sum_i
        \mathbf u_i^\top(\mathbf 1 - \mathbf y_i),

    and as :math:`\mu_i` ranges over its scaled simplex, :math:`\mathbf u_i` ranges
    over :math:`C\operatorname{conv}(\operatorname{perm}(\mathbf y_i))`, the scaled
    hypersimplex :math:`C\Delta_i = \{0 \le u_w \le C, \sum_w u_w = r_i C\}` (its
    vertices are exactly the 0/1 vectors with :math:`r_i` ones). So (9) equals

    .. math::

        \min_{\mathbf u_i \in C\Delta_i}\ \tfrac12 \langle B, K B\rangle
        - 2\sum_i \mathbf u_i^\top(\mathbf 1 - \mathbf y_i),

    the same optimum, the same :math:`B` (hence the same word scores), and any
    :math:`\mu` realizing :math:`\mathbf u` (a Carathéodory decomposition, at most
    :math:`W + 1` outputs per VRep) is optimal for (9). Nothing is enumerated and no
    working set can overflow: a VRep whose optimum spreads its mass over all its wrong
    words simply has all of them in the support of :math:`\mathbf u_i`.

    **Algorithm.** Block Gauss--Seidel over VReps with *exact* block minimization. In
    block :math:`i` the Hessian is :math:`k_{ii} I`, so the block minimizer is one
    projection, :math:`\mathbf u_i \leftarrow \Pi_{C\Delta_i}(\mathbf u_i + \mathbf
    a_i / k_{ii})` with :math:`\mathbf a_i = F_i + 2(\mathbf 1 - \mathbf y_i)`, the
    loss-augmented scores (minus the gradient), computed by
    :func:`~jaxannot.methods.emml.capped_simplex.project_capped_simplex`. Every step
    is an exact block minimization, so the objective never increases, and block
    coordinate descent on a convex QP with separable constraints converges to the
    optimum (Luo & Tseng 1992). :math:`F = KB` is recomputed at every sweep's start,
    :math:`F \mathrel{+}= k_{:,i}\Delta B_i` within it.

    **KKT / stopping.** :math:`\mathbf u_i` is block-optimal iff it maximizes
    :math:`\langle\mathbf a_i, \cdot\rangle` over :math:`C\Delta_i` — the KKT
    conditions (10) of (9) in mixture form (every output carrying mass is a most
    violated one). Its violation is the maximal violating pair of words,
    :math:`\max_{u_w < C} a_w - \min_{u_{w'} > 0} a_{w'}` (the gain per unit mass of
    swapping :math:`w'` for :math:`w` in an output of VRep :math:`i`); the solve stops
    when a whole sweep finds every VRep within ``tolerance`` (nothing then moves). The
    Frank--Wolfe gap :math:`\sum_i (C\cdot\text{top-}r_i(\mathbf a_i) - \langle
    \mathbf a_i, \mathbf u_i\rangle)` bounds objective :math:`-` optimum and is
    reported.

    **Blocked score updates.** Visiting VRep :math:`i` needs only row :math:`i` of
    :math:`F`. The VReps are visited in the same order in blocks of ``block``: within
    a block only the block's rows of :math:`F` follow each step (:math:`F_b
    \mathrel{+}= K_{b,i}\Delta B_i`), and once per block every row takes the
    block's steps in one product, :math:`F \mathrel{+}= K_{:,b}\,\Delta B_b`. The
    iterates are those of the one-VRep-at-a-time updates (``block = 1``) up to
    rounding, while the :math:`O(N^2 W)` work per sweep runs as :math:`N/\text{block}`
    matrix products instead of :math:`N` memory-bound rank-one updates of all of
    :math:`F` (Corel5k, 3000 VReps, 374 words, two CPU cores: 110 ms per sweep at
    ``block = 64``, 168 ms at ``block = 1``; ``benchmarks/emml_exact_blocks.py``).
    The objective after each sweep is read off the carried :math:`F`.

    Parameters
    ----------
    data : StructuredData
        ``kernel`` positive semi-definite with a positive diagonal.
    c, tolerance : float
        :math:`C` and the KKT tolerance in loss units (traced).
    max_sweeps : int
        Static cap on block sweeps.
    block : int
        VReps per score update (static; ``min(block, N)`` is used). Changes only
        the rounding, not the algorithm.

    Returns
    -------
    state : ExactState
    objectives : Float[Array, "max_sweeps"]
        Dual objective after each sweep (NaN past ``state.sweeps``).

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> y = jnp.array([[1., 0., 0.], [0., 1., 0.]])
    >>> state, _ = fit_emml_exact(StructuredData(jnp.eye(2), y), c=1.0)
    >>> bool(state.converged)
    True
    """
    n, dtype = data.words.shape[0], data.kernel.dtype
    c = jnp.asarray(c, dtype)
    tolerance = jnp.asarray(tolerance, dtype)
    if block < 1:
        raise ValueError(f"block must be >= 1, got {block}")
    block = min(block, n)
    num_blocks = -(-n // block)
    padded = _pad(data, num_blocks * block)
    padded_kernel, padded_words, penalty = padded.kernel, padded.words, padded.penalty
    visit_block = functools.partial(
        _visit_block, problem=padded, block=block, c=c, tolerance=tolerance
    )

    def cond(carry):
        _, worst, sweeps, _ = carry
        return (worst > tolerance) & (sweeps < max_sweeps)

    def sweep(carry):
        u, _, sweeps, trace = carry
        scores = padded_kernel @ (c * padded_words - u)
        u, scores, worst = jax.lax.fori_loop(
            0, num_blocks, visit_block, (u, scores, jnp.zeros((), dtype))
        )
        # the dual objective from the carried F = KB (padded rows have B = 0)
        b = c * padded_words - u
        objective = 0.5 * jnp.vdot(b, scores) - jnp.vdot(u, penalty)
        trace = trace.at[sweeps].set(objective)
        return u, worst, sweeps + 1, trace

    u0 = c * padded_words  # mu = 0: all mass on the slack
    init_carry = (
        u0,
        jnp.asarray(jnp.inf, dtype),
        jnp.zeros((), jnp.int32),
        jnp.full((max_sweeps,), jnp.nan, dtype),
    )
    u, _, sweeps, trace = jax.lax.while_loop(cond, sweep, init_carry)
    return mixture_state(data, u[:n], c, tolerance, sweeps), trace


def mixture_state(
    data: StructuredData, u: Array, c, tolerance, sweeps: Array | int = 0
) -> ExactState:
    """The :class:`ExactState` of mixtures ``u``: coefficients, scores, dual
    objective, KKT violation and Frank--Wolfe gap under ``data.kernel``.

    Parameters
    ----------
    data : StructuredData
    u : Float[Array, "vreps words"]
        A feasible point, every row in :math:`C\\Delta_i`.
    c, tolerance : float
        :math:`C` and the KKT tolerance (loss units).
    sweeps : int
        Recorded as :attr:`ExactState.sweeps`.
    """
    dtype = data.kernel.dtype
    c = jnp.asarray(c, dtype)
    coef = c * data.words - u
    scores = data.kernel @ coef
    a = scores + 2.0 * (1.0 - data.words)
    violation = jnp.max(_block_violation(u, a, c))
    return ExactState(
        mixtures=u,
        coefficients=coef,
        scores=scores,
        objective=mixture_objective(data, u, c),
        sweeps=jnp.asarray(sweeps, jnp.int32),
        max_violation=violation,
        duality_gap=jnp.sum(_frank_wolfe_gap(u, a, jnp.sum(data.words, -1), c)),
        converged=violation <= tolerance,
    )


def uncoupled_mixtures(words: Array, c, diagonal: Array) -> Array:
    r"""The optimum of the dual (9) when the kernel is diagonal: no solve.

    With :math:`K = \operatorname{diag}(d)` the VReps decouple. By symmetry VRep
    :math:`i` (:math:`r_i` of :math:`W` words) moves the same mass :math:`s` off each
    true word and spreads it evenly over its :math:`W - r_i` wrong words:
    :math:`B_i = s\,(\mathbf y_i - \tfrac{r_i}{W - r_i}(\mathbf 1 - \mathbf y_i))`,
    objective :math:`\tfrac12 d_i r_i s^2 W / (W - r_i) - 2 r_i s`, minimized over
    :math:`0 \le s \le \min(C, C (W - r_i)/r_i)` (both caps of
    :math:`C\Delta_i`) at

    .. math::

        s^* = \min\Big(\frac{2 (W - r_i)}{d_i W},\ C,\
        \frac{C (W - r_i)}{r_i}\Big).

    With :math:`C = 1`, :math:`d_i = 1` and :math:`r_i \le W/2`, :math:`B = Y -
    \tfrac{r}{W - r}(1 - Y)`. Under a non-diagonal kernel this point is feasible
    but not optimal; :func:`mixture_state` says how far it is (KKT violation,
    duality gap).

    Parameters
    ----------
    words : Float[Array, "vreps words"]
        0/1 word vectors, each with at least one word and one wrong word.
    c : float
        :math:`C`.
    diagonal : Float[Array, "vreps"]
        :math:`d_i = k_{ii} > 0`.

    Returns
    -------
    u : Float[Array, "vreps words"]
        The mixtures :math:`\mathbf u_i = C\mathbf y_i - B_i`.
    """
    w = words.shape[-1]
    r = jnp.sum(words, axis=-1)
    wrong = jnp.maximum(w - r, 1.0)
    s = jnp.minimum(jnp.minimum(2.0 * wrong / (diagonal * w), c), c * wrong / r)
    coef = s[:, None] * (words - (r / wrong)[:, None] * (1.0 - words))
    return c * words - coef
