r"""Shared inner solver of the structured max-margin dual on a working set.

Both :mod:`jaxannot.methods.emml.working_set` (Algorithm 1 of Guo et al. 2016) and the
cutting-plane baseline (:mod:`jaxannot.methods.emml.cutting_plane`) solve the dual (9)

.. math::

    \min_\mu\ \tfrac12 \mu^\top D \mu - \mu^\top S \quad \text{s.t.}\quad
    \sum_{\bar{\mathbf y}} \mu_{i,\bar{\mathbf y}} \le C,\ \mu \ge 0,

restricted to the constraints in a working set (the subproblem (12)). Here
:math:`D_{(i,\bar{\mathbf y}),(j,\tilde{\mathbf y})} = k_{ij} \langle \mathbf d_{i,\bar
{\mathbf y}}, \mathbf d_{j,\tilde{\mathbf y}}\rangle` with :math:`\mathbf d_{i,\bar
{\mathbf y}} = \mathbf y_i - \bar{\mathbf y}` and :math:`S` is the Hamming loss.

Storage. The working set has a fixed capacity of ``P`` slots per VRep
(:class:`WorkingSet`), so every array has a static shape and the whole solve is one
``jit``. We keep the coefficients :math:`B = \sum_{\bar{\mathbf y}} \mu_{i,\bar{\mathbf
y}} \mathbf d_{i,\bar{\mathbf y}}` (``[n, W]``) and the VRep word scores :math:`F = K B`
(``[n, W]``); the gradient of slot :math:`(i,p)` is then :math:`g_{ip} = \mathbf
d_{ip}^\top F_i - l_{ip}` and the dual objective is
:math:`\tfrac12 \langle B, F\rangle -
\sum \mu l`.

Algorithm. Block Gauss--Seidel over VReps: for VRep :math:`i` the variables are its
slots plus a slack :math:`s_i = C - \sum_p \mu_{ip} \ge 0` (gradient 0, no curvature),
so the block feasible set is the scaled simplex :math:`\{\mu_i, s_i \ge 0, \sum_p
\mu_{ip} + s_i = C\}`. Within a block we run SMO with the maximal violating pair
(Keerthi et al. 2001; :mod:`~jaxannot.solvers.simplex_smo`): increase the variable
with the smallest gradient, decrease the one with the largest gradient among those
with positive mass, by the exact line minimizer clipped to the mass available. The
block Hessian is :math:`k_{ii} G_i` with the cached slot Gram matrix
:math:`G_i = [\langle \mathbf d_{ip}, \mathbf d_{iq} \rangle]`. After a block
changes, :math:`B_i` and :math:`F \mathrel{+}= k_{:,i} \Delta B_i` are updated
(O(nW)). Every step is an exact minimization along a
feasible direction, so the dual objective never increases. A block is KKT-optimal to
``tol`` when its maximal violating pair's gradient gap is at most ``tol``; a sweep in
which no block exceeds ``tol`` ends the solve.

References
----------
Z. Guo, Z. Zhang, E. P. Xing, C. Faloutsos. Multimodal Data Mining in a Multimedia
Database Based on Structured Max Margin Learning. ACM TKDD 10(3), 2016 (eq. 9, 12).
S. S. Keerthi, S. K. Shevade, C. Bhattacharyya, K. R. K. Murthy. Improvements to Platt's
SMO algorithm for SVM classifier design. Neural Computation 13(3), 2001.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import jax
import jax.numpy as jnp

from jaxannot.runtime.progress import run_until_stopped
from jaxannot.solvers.simplex_smo import block_gap, smo_block
from jaxannot.types import Array

if TYPE_CHECKING:
    from numpy.typing import DTypeLike

    from jaxannot.types import PRNGKey

__all__ = [
    "loss_augmented_argmax",
    "WorkingSet",
    "SubproblemInfo",
    "empty_working_set",
    "coefficients",
    "dual_objective",
    "slot_gradients",
    "solve_subproblem",
    "most_violated",
    "violator_candidates",
    "add_constraints",
    "is_duplicate",
]


def _descending_order(values: Array, key=None) -> Array:
    """Indices sorting ``values`` in decreasing order; ties by lower index, or in a
    random order drawn from ``key`` when given."""
    if key is None:
        return jnp.argsort(-values, stable=True)
    priority = jax.random.uniform(key, values.shape)
    return jnp.lexsort((priority, -values))


def loss_augmented_argmax(scores: Array, y: Array, key: PRNGKey | None = None) -> Array:
    """The most violated output of one VRep: top-:math:`r` of the augmented scores.

    Maximizes :math:`\\langle \\mathbf f, \\bar{\\mathbf y}\\rangle + l(\\bar{\\mathbf
    y}, \\mathbf y)` over :math:`\\bar{\\mathbf y} \\in \\operatorname{perm}(\\mathbf
    y)`, :math:`r = \\sum_j y_j`. Since :math:`l = 2\\bar{\\mathbf y}^\\top(\\mathbf 1
    - \\mathbf y)` on :math:`\\operatorname{perm}(\\mathbf y)`, the maximizer takes the
    :math:`r` largest :math:`f_j + 2(1 - y_j)` (ties by lower index, or at random
    when ``key`` is given). O(W log W).

    Parameters
    ----------
    scores : Float[Array, "words"]
        Word scores :math:`f_j` of the VRep.
    y : Float[Array, "words"]
        Its 0/1 word vector.
    key : PRNGKey, optional
        Breaks ties among equal augmented scores at random instead of by index (equal
        wrong words are otherwise always resolved towards the lowest index).

    Returns
    -------
    Float[Array, "words"]
        The 0/1 maximizer :math:`\\bar{\\mathbf y}`.
    """
    aug = scores + 2.0 * (1.0 - y)
    order = _descending_order(aug, key)
    ranks = jnp.empty_like(order).at[order].set(jnp.arange(order.shape[0]))
    r = jnp.round(y.sum()).astype(ranks.dtype)
    return (ranks < r).astype(scores.dtype)


class WorkingSet(NamedTuple):
    """Fixed-capacity working set: ``P`` constraint slots per VRep.

    Attributes
    ----------
    deltas : Float[Array, "vreps P words"]
        :math:`\\mathbf d = \\mathbf y_i - \\bar{\\mathbf y}` of each slot.
    losses : Float[Array, "vreps P"]
        Hamming loss :math:`l(\\bar{\\mathbf y}, \\mathbf y_i)` of each slot.
    active : Bool[Array, "vreps P"]
        Whether the slot holds a constraint of the working set B.
    mu : Float[Array, "vreps P"]
        The dual variables (zero on inactive slots).
    gram : Float[Array, "vreps P P"]
        :math:`\\langle \\mathbf d_{ip}, \\mathbf d_{iq}\\rangle` (active slots).
    """

    deltas: Array
    losses: Array
    active: Array
    mu: Array
    gram: Array


class SubproblemInfo(NamedTuple):
    """Diagnostics of one subproblem solve: sweeps run and the final max KKT gap."""

    sweeps: Array
    max_gap: Array


class _SweepCarry(NamedTuple):
    """:func:`solve_subproblem`'s carry: the multipliers, :math:`B`, :math:`F`, the
    last sweep's largest block gap and whether it is at most the tolerance."""

    mu: Array
    coef: Array
    scores: Array
    worst: Array
    stopped: Array


def empty_working_set(
    num_vreps: int, num_words: int, capacity: int, dtype: DTypeLike
) -> WorkingSet:
    """An empty working set (all slots inactive, :math:`\\mu = 0`)."""
    return WorkingSet(
        deltas=jnp.zeros((num_vreps, capacity, num_words), dtype),
        losses=jnp.zeros((num_vreps, capacity), dtype),
        active=jnp.zeros((num_vreps, capacity), bool),
        mu=jnp.zeros((num_vreps, capacity), dtype),
        gram=jnp.zeros((num_vreps, capacity, capacity), dtype),
    )


def coefficients(ws: WorkingSet) -> Array:
    """:math:`B_i = \\sum_p \\mu_{ip} \\mathbf d_{ip}` (``[vreps, words]``)."""
    return jnp.einsum("np,npw->nw", ws.mu, ws.deltas)


def dual_objective(ws: WorkingSet, coef: Array, scores: Array) -> Array:
    """:math:`\\tfrac12 \\mu^\\top D\\mu - \\mu^\\top S
    = \\tfrac12\\langle B, F\\rangle -
    \\sum \\mu l`."""
    return 0.5 * jnp.vdot(coef, scores) - jnp.vdot(ws.mu, ws.losses)


def slot_gradients(ws: WorkingSet, scores: Array) -> Array:
    """:math:`g_{ip} = \\mathbf d_{ip}^\\top F_i - l_{ip}` for every slot."""
    return jnp.einsum("npw,nw->np", ws.deltas, scores) - ws.losses


def solve_subproblem(
    kernel: Array,
    ws: WorkingSet,
    coef: Array,
    c: float,
    tol: float,
    max_sweeps: int,
    max_smo_steps: int | None = None,
) -> tuple[WorkingSet, Array, Array, SubproblemInfo]:
    """Solve the dual restricted to the working set (eq. 12), warm-started at ``ws.mu``.

    Parameters
    ----------
    kernel : Float[Array, "vreps vreps"]
        Input kernel :math:`k_{ij}` between VReps.
    ws : WorkingSet
    coef : Float[Array, "vreps words"]
        :math:`B` consistent with ``ws.mu``.
    c : float
        The box constant :math:`C`.
    tol : float
        KKT tolerance on each block's maximal-violating-pair gradient gap.
    max_sweeps : int
        Upper bound on block Gauss--Seidel sweeps.
    max_smo_steps : int, optional
        SMO steps per block visit (default ``20 * (P + 1)``).

    Returns
    -------
    ws, coef, scores, SubproblemInfo
        The new multipliers, :math:`B`, :math:`F = KB` and diagnostics.

    Notes
    -----
    The sweeps run through the library's in-program runner
    (:func:`~jaxannot.runtime.progress.run_until_stopped`); the visits of one sweep
    are a ``fori_loop`` over the blocks (one Gauss--Seidel pass, no stopping rule).
    """
    n, p = ws.mu.shape
    if max_smo_steps is None:
        max_smo_steps = 20 * (p + 1)
    scores = kernel @ coef

    def visit(i, carry):
        mu, coef, scores, worst = carry
        d_i = ws.deltas[i]
        active_i = ws.active[i]
        grad_i = d_i @ scores[i] - ws.losses[i]
        slack = jnp.maximum(c - jnp.sum(mu[i]), 0.0)
        mu_e = jnp.concatenate([mu[i], slack[None]])
        g_e = jnp.concatenate([grad_i, jnp.zeros((1,), grad_i.dtype)])
        up_ok = jnp.concatenate([active_i, jnp.ones((1,), bool)])
        gap = block_gap(mu_e, g_e, up_ok)

        def update(args):
            mu, coef, scores = args
            new = smo_block(
                mu[i], grad_i, ws.gram[i], active_i, kernel[i, i], c, tol, max_smo_steps
            )
            db = (new - mu[i]) @ d_i
            return (
                mu.at[i].set(new),
                coef.at[i].add(db),
                scores + kernel[:, i, None] * db[None, :],
            )

        mu, coef, scores = jax.lax.cond(
            gap > tol, update, lambda args: args, (mu, coef, scores)
        )
        return mu, coef, scores, jnp.maximum(worst, gap)

    def sweep(t: Array, carry: _SweepCarry) -> tuple[_SweepCarry, tuple]:
        del t
        zero = jnp.zeros((), carry.scores.dtype)
        mu, coef, scores, worst = jax.lax.fori_loop(
            0, n, visit, (carry.mu, carry.coef, carry.scores, zero)
        )
        return _SweepCarry(mu, coef, scores, worst, ~(worst > tol)), ()

    inf = jnp.asarray(jnp.inf, scores.dtype)
    start = _SweepCarry(ws.mu, coef, scores, inf, ~(inf > tol))
    carry, _, sweeps = run_until_stopped(sweep, start, max_sweeps)
    info = SubproblemInfo(sweeps, carry.worst)
    return ws._replace(mu=carry.mu), carry.coef, carry.scores, info


def _row_keys(key, n: int):
    return None if key is None else jax.random.split(key, n)


def most_violated(
    scores: Array, words: Array, key: PRNGKey | None = None
) -> tuple[Array, Array]:
    """Per VRep, the loss-augmented maximizer :math:`\\bar{\\mathbf y}^*` and its
    gradient :math:`g^* = F_i^\\top(\\mathbf y_i - \\bar{\\mathbf y}^*) -
    l(\\bar{\\mathbf y}^*, \\mathbf y_i)` (the minimum over
    :math:`\\operatorname{perm}(\\mathbf y_i)`). Ties by lower word index, or at
    random (one draw per VRep) when ``key`` is given."""
    keys = _row_keys(key, scores.shape[0])
    if keys is None:
        ybar = jax.vmap(loss_augmented_argmax)(scores, words)
    else:
        ybar = jax.vmap(loss_augmented_argmax)(scores, words, keys)
    delta = words - ybar
    loss = jnp.abs(delta).sum(-1)
    grad = (delta * scores).sum(-1) - loss
    return ybar, grad


def violator_candidates(
    scores: Array, words: Array, num: int, key: PRNGKey | None = None
) -> tuple[Array, Array]:
    r"""``num`` distinct outputs per VRep, in decreasing loss-augmented score.

    Candidate 0 is the most violated :math:`\bar{\mathbf y}^*` (top-:math:`r_i` of
    :math:`F_{ij} + 2(1-y_{ij})`); it keeps some of the true words and brings in
    :math:`t` wrong ones. Candidate :math:`k` keeps the same true words and brings in
    the wrong words ranked :math:`kt, \dots, (k+1)t - 1` among the wrong words — the
    next competitors, which the optimum typically has to push down as well. Each is
    in :math:`\operatorname{perm}(\mathbf y_i)`; whether it violates (13) is tested by
    the caller. Ties among equal scores go to the lower word index, or, when ``key``
    is given, are broken at random (the same draw for all candidates of a VRep).

    Returns
    -------
    ybar : Float[Array, "num vreps words"]
    grad : Float[Array, "num vreps"]
        :math:`g = F_i^\top(\mathbf y_i - \bar{\mathbf y}) - l(\bar{\mathbf y},
        \mathbf y_i)` of each candidate.
    """
    n = scores.shape[0]
    keys = _row_keys(key, n)
    best, _ = most_violated(scores, words, key)
    aug = scores + 2.0 * (1.0 - words)
    wrong = words <= 0
    if keys is None:
        priority = jnp.zeros_like(aug)  # lexsort then falls back to the index
    else:
        priority = jax.vmap(lambda k: jax.random.uniform(k, aug.shape[1:]))(keys)
    # most_violated split the same key the same way: its top-r and the ranking
    # below agree on how ties are broken

    def one(aug_i, wrong_i, best_i, prio_i):
        keep = best_i * (1.0 - wrong_i)  # the true words kept by the best candidate
        t = jnp.sum(best_i * wrong_i)
        masked = jnp.where(wrong_i, aug_i, -jnp.inf)
        order = jnp.lexsort((prio_i, -masked))
        rank = jnp.empty_like(order).at[order].set(jnp.arange(order.shape[0]))
        rank = rank.astype(aug_i.dtype)
        n_wrong = jnp.sum(wrong_i)

        def cand(k):
            lo, hi = k * t, (k + 1) * t
            sel = wrong_i & (rank >= lo) & (rank < hi) & (hi <= n_wrong)
            ok = hi <= n_wrong
            return jnp.where(ok, keep + sel.astype(aug_i.dtype), best_i)

        return jax.vmap(cand)(jnp.arange(num, dtype=aug_i.dtype))

    ybar = jax.vmap(one)(aug, wrong, best, priority)  # [vreps, num, words]
    ybar = jnp.swapaxes(ybar, 0, 1)
    delta = words[None] - ybar
    grad = (delta * scores[None]).sum(-1) - jnp.abs(delta).sum(-1)
    return ybar, grad


def add_constraints(
    ws: WorkingSet, words: Array, ybar: Array, add: Array
) -> tuple[WorkingSet, Array]:
    """Put :math:`\\bar{\\mathbf y}_i` into a free slot of VRep ``i`` where ``add[i]``.

    The new slot starts at :math:`\\mu = 0` (so the objective is unchanged) and its
    Gram row is computed against the VRep's other slots. Returns the new working set
    and the number of requested additions that found no free slot (overflow).
    """

    def one(deltas, losses, active, mu, gram, y, yb, a):
        free = ~active
        has_free = jnp.any(free)
        slot = jnp.argmax(free)
        write = a & has_free
        d = y - yb
        row = deltas @ d
        row = row.at[slot].set(jnp.sum(d * d))
        deltas = jnp.where(write, deltas.at[slot].set(d), deltas)
        losses = jnp.where(write, losses.at[slot].set(jnp.abs(d).sum()), losses)
        active = jnp.where(write, active.at[slot].set(True), active)
        mu = jnp.where(write, mu.at[slot].set(0.0), mu)
        new_gram = gram.at[slot, :].set(row).at[:, slot].set(row)
        gram = jnp.where(write, new_gram, gram)
        return deltas, losses, active, mu, gram, a & ~has_free

    deltas, losses, active, mu, gram, over = jax.vmap(one)(
        ws.deltas, ws.losses, ws.active, ws.mu, ws.gram, words, ybar, add
    )
    return WorkingSet(deltas, losses, active, mu, gram), jnp.sum(over)


def is_duplicate(ws: WorkingSet, words: Array, ybar: Array) -> Array:
    """Whether :math:`\\mathbf y_i - \\bar{\\mathbf y}_i` is an active slot."""
    d = (words - ybar)[:, None, :]
    same = jnp.all(ws.deltas == d, axis=-1) & ws.active
    return jnp.any(same, axis=-1)
