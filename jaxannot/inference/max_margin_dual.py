r"""Exact dual M-step of the weights of a max-margin term.

For :class:`~jaxannot.inference.max_margin.MaxMargin` with ``solver="dual"`` a
variational-EM driver re-solves the predictor's weights after each M-step on all
images' features :math:`f_i`, minimizing

.. math::
    \tfrac12 \big(\|W\|^2 + \|b\|^2\big) + C \sum_{i \text{ labelled}}
    \ell\big(W f_i + b, y_i\big)

by the dual coordinate descent of the loss: Crammer–Singer's
(:mod:`~jaxannot.solvers.multiclass_svm`), the binary L1-loss SVM's
(:mod:`~jaxannot.solvers.linear_svm`) or the ε-SVR's (:mod:`~jaxannot.solvers.svr`),
warm-started from the previous M-step's duals. The bias is the weight of a unit
feature column.

References
----------
K. Crammer, Y. Singer. On the Algorithmic Implementation of Multiclass Kernel-Based
Vector Machines. JMLR 2, 2001.
C.-J. Hsieh, K.-W. Chang, C.-J. Lin, S. S. Keerthi, S. Sundararajan. A Dual
Coordinate Descent Method for Large-scale Linear SVM. ICML 2008.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxannot.runtime.progress import Keyed, run_until_stopped
from jaxannot.solvers import linear_svm, multiclass_svm, svr
from jaxannot.types import Array, ArrayTree, PRNGKey

__all__ = ["DUAL_STOP", "SHRINK", "dual_update", "solve_dual", "warm_state"]

#: Dual solves stop once the relative duality gap (liblinear's projected-gradient
#: spread for the binary hinge) is below ``tol``, or after ``max_epochs`` epochs. A
#: relative gap of 1e-4 puts the objective within 1e-4 (relative) of its minimum;
#: warm-started from the previous M-step's duals, a solve takes few epochs.
DUAL_STOP = multiclass_svm.DualStop(max_epochs=1000, tol=1e-4)
#: Crammer–Singer epochs visit only the examples whose optimality violation exceeds
#: this fraction of the largest (``multiclass_svm.build_kernel``'s ``shrink``): on
#: the benchmark's 2000 images a sixth of the visits of full epochs.
SHRINK = 0.01


def _with_bias_column(term: Any, features_all: Array) -> tuple[Array, Array]:
    """The features with a unit column (the bias is its weight), and the term's
    labelled-image mask in their dtype."""
    x = jnp.concatenate(
        [features_all, jnp.ones((features_all.shape[0], 1), features_all.dtype)],
        axis=1,
    )
    return x, term._mask.astype(x.dtype)


def solve_dual(
    term: Any,
    rng_key: PRNGKey,
    features_all: Array,
    *,
    stop: multiclass_svm.DualStop = DUAL_STOP,
    init_state: tuple | None = None,
) -> tuple[tuple, tuple | Array]:
    """Minimize :meth:`MaxMargin.objective` in the weights by the loss's dual solver.

    The features get a unit column (the bias is its weight) and the unlabelled
    images weigh nothing: cost 0 for Crammer–Singer, a zero row (target 0) for the
    ε-SVR, masked rows for the binary hinge — no gather, so the shapes do not
    depend on which images are labelled and the labels stay traced data.

    Parameters
    ----------
    term : MaxMargin
        The term whose weights are solved for.
    rng_key : PRNGKey
        The visiting orders' key.
    features_all : float array [N, dim]
        Features of every image of the fit.
    stop : multiclass_svm.DualStop
        Epoch budget (``max_epochs`` static, ``epochs`` traced) and relative
        duality gap (the binary hinge: projected-gradient spread) to stop at.
    init_state : optional
        Warm start: the solver's state of an earlier call (``CSState``,
        ``SVRState`` or ``linear_svm.SVMState`` on the ``[N, dim + 1]``
        features).

    Returns
    -------
    (state, info)
        The solver's final state (``state.weights``: ``[T, dim + 1]`` for
        Crammer–Singer, ``[dim + 1]`` for the ε-SVR; ``state.w`` ``[1, dim +
        1]`` for the binary hinge) and its per-epoch info.
    """
    x, mask = _with_bias_column(term, features_all)
    if term.loss == "crammer_singer":
        return multiclass_svm.fit_multiclass_svm(
            rng_key,
            x,
            term._targets,
            term.num_outputs,
            term.c * mask,
            stop=stop,
            init_state=init_state,
            shrink=SHRINK,
        )
    if term.loss == "epsilon_insensitive":
        return svr.fit_svr(
            rng_key,
            x * mask[:, None],
            term._targets.astype(x.dtype) * mask,
            1.0,
            term.c,
            term.epsilon,
            stop=stop,
            init_state=init_state,
        )
    y = term._targets.astype(x.dtype)
    return binary_hinge(rng_key, x, y, mask, term.c, stop, init_state)


def dual_update(term: Any, features_all: Array, params: ArrayTree) -> dict[str, Array]:
    """Minimizer of :meth:`MaxMargin.objective` in the weights, by a dual solver.

    Parameters
    ----------
    term : MaxMargin
        The term whose weights are solved for.
    features_all : float array [N, dim]
        Features of every image of the fit (unlabelled rows are ignored).
    params : dict
        The current weights (they fix the output dtype) and, when they have
        ``"duals"`` (:meth:`MaxMargin.init` with ``solver="dual"``), the duals of the
        previous solve: the solve starts from them (warm start; the weights are
        rebuilt from them on the new features) instead of from zero.

    Returns
    -------
    dict
        ``{"weights", "bias"}`` (plus the new ``"duals"`` when ``params`` has
        them) from Crammer–Singer's, the binary L1-loss SVM's or the ε-SVR's
        dual coordinate descent, stopped by ``DUAL_STOP`` (a relative duality gap
        of ``1e-4`` or 1000 epochs; the visiting order uses a fixed key, which
        changes the path, not the optimum).
    """
    if not isinstance(term.c, jax.core.Tracer) and term.c == 0:
        return jax.tree.map(jnp.zeros_like, params)  # the solvers need C > 0
    warm = None
    if "duals" in params:
        warm = warm_state(term, features_all, params["duals"])
    state, _ = solve_dual(term, jax.random.key(0), features_all, init_state=warm)
    if term.loss == "crammer_singer":
        augmented, duals = state.weights, state.alpha
    elif term.loss == "epsilon_insensitive":
        augmented, duals = state.weights[None], state.beta[:, None]
    else:
        augmented, duals = state.w, state.alpha
    dtype = params["weights"].dtype
    augmented = augmented.astype(dtype)
    out = {"weights": augmented[:, :-1], "bias": augmented[:, -1]}
    if "duals" in params:
        out["duals"] = duals.astype(params["duals"].dtype)
    return out


def warm_state(term: Any, features_all: Array, duals: Array) -> tuple:
    """``term``'s dual solver's state from earlier duals ``[N, num_outputs]`` on new
    features: the duals, clipped into the box of this term's costs (an EM
    iteration does not change it; a changed :math:`C` may), and the weights they
    define on ``features_all`` (Crammer–Singer :math:`W = \\alpha^\\top x`, binary
    hinge :math:`w = \\sum_i \\alpha_i y_i x_i`, ε-SVR :math:`w = \\sum_i \\beta_i
    x_i`, with the unit column of the bias).

    Parameters
    ----------
    term : MaxMargin
        The term.
    features_all : jax.Array [N, dim]
        Features of every image.
    duals : jax.Array [N, num_outputs]
        Earlier duals.

    Returns
    -------
    tuple
        The solver's state (``CSState``, ``SVRState`` or ``SVMState``).
    """
    x, mask = _with_bias_column(term, features_all)
    cost = term.c * mask
    duals = jnp.asarray(duals, x.dtype)
    if term.loss == "crammer_singer":
        caps = cost[:, None] * jax.nn.one_hot(
            term._targets, term.num_outputs, dtype=x.dtype
        )
        slack = 1e-5 * (1.0 + term.c)  # rounding of the sums; an infeasible
        feasible = (jnp.abs(jnp.sum(duals, axis=1)) <= slack) & jnp.all(
            duals <= caps + slack, axis=1
        )  # row (another C, another label) restarts from 0
        alpha = jnp.where(feasible[:, None], jnp.minimum(duals, caps), 0.0)
        return multiclass_svm.CSState(alpha, alpha.T @ x)
    if term.loss == "epsilon_insensitive":
        beta = jnp.clip(duals[:, 0], -cost, cost)
        return svr.SVRState(beta, beta @ (x * mask[:, None]))
    alpha = jnp.clip(duals, 0.0, cost[:, None])
    y = term._targets.astype(x.dtype)
    return linear_svm.SVMState(alpha, ((alpha[:, 0] * y) @ x)[None])


class _HingeCarry(NamedTuple):
    """:func:`binary_hinge`'s carry: the solver's state and whether the last
    epoch's violation is at most the tolerance."""

    state: linear_svm.SVMState
    stopped: Array


def binary_hinge(
    rng_key: PRNGKey,
    x: Array,
    y: Array,
    mask: Array,
    c: float | Array,
    stop: multiclass_svm.DualStop,
    init_state: linear_svm.SVMState | None,
) -> tuple[linear_svm.SVMState, Array]:
    """The L1-loss SVM by :mod:`linear_svm`'s dual epochs on the rows where ``mask``
    is 1, until the projected-gradient spread is ``<= stop.tol`` or
    ``min(stop.epochs, stop.max_epochs)`` epochs; returns ``(SVMState, violation
    per epoch)``. The epochs run through the library's in-program runner
    (:func:`~jaxannot.runtime.progress.run_until_stopped`, epoch ``t`` visiting in
    the order drawn from ``fold_in(rng_key, t)``).

    Parameters
    ----------
    rng_key : PRNGKey
        The visiting orders' key.
    x : jax.Array [N, dim + 1]
        Features with the unit column.
    y : jax.Array [N]
        Targets, ±1.
    mask : jax.Array [N]
        1 for the labelled rows.
    c : float or jax.Array
        The cost :math:`C`.
    stop : multiclass_svm.DualStop
        Epoch budget and tolerance.
    init_state : linear_svm.SVMState or None
        Warm start.

    Returns
    -------
    tuple of (linear_svm.SVMState, jax.Array)
        The state and the violation per epoch [stop.max_epochs] (NaN after the end).
    """
    start = init_state
    if start is None:
        start = linear_svm.SVMState(
            jnp.zeros((x.shape[0], 1), x.dtype), jnp.zeros((1, x.shape[1]), x.dtype)
        )
    step = linear_svm.build_kernel(c=c, loss="hinge")

    def kernel(key: PRNGKey, carry: _HingeCarry, tol) -> tuple[_HingeCarry, Array]:
        state, info = step(key, carry.state, (x, y[:, None], mask))
        violation = info.violation[0]
        return _HingeCarry(state, ~(violation > tol)), violation

    inf = jnp.array(jnp.inf, x.dtype)
    carry, trace, _ = run_until_stopped(
        Keyed(kernel),
        _HingeCarry(start, ~(inf > stop.tol)),
        stop.max_epochs,
        data=(rng_key, (stop.tol,)),
        budget=stop.epochs,
    )
    return carry.state, trace
