r"""Linear SVM by dual coordinate descent (Hsieh et al. 2008, the liblinear solver).

For labels :math:`y_i ∈ \{−1, +1\}` and features :math:`x_i` (augmented with a constant
1 when ``fit_intercept``, which liblinear and scikit-learn's ``LinearSVC`` regularize
like the other weights), the primal problems are

.. math::

    \min_w \tfrac12 \|w\|^2 + C \sum_i \ell(y_i w^T x_i), \qquad
    \ell(m) = \max(0, 1 − m)^2 \;(\text{L2-loss, default}) \text{ or } \max(0, 1 − m)
    \;(\text{L1-loss}),

with the dual :math:`\min_{α} f(α) = \tfrac12 α^T \bar Q α − 1^T α`,
:math:`0 ≤ α_i ≤ U`, :math:`\bar Q = Q + D`, :math:`Q_{ij} = y_i y_j x_i^T x_j`:
``D_ii = 1/(2C)``, ``U = ∞`` for the L2 loss; ``D = 0``, ``U = C`` for the L1 loss.
Coordinate descent keeps :math:`w = Σ_i y_i α_i x_i` and, for each ``i`` in a random
order, takes the exact one-variable step

.. math::

    G = y_i w^T x_i − 1 + D_{ii} α_i, \quad
    α_i ← \min(\max(α_i − G / \bar Q_{ii}, 0), U),

so the dual objective never increases. One ``step`` is one epoch (a ``lax.scan``
over the images in a random order); all ``K`` concepts are trained together (the
per-image update is vectorized over the concept axis). The stopping rule is
liblinear's: the spread ``max PG − min PG`` of the projected gradient over an epoch
below ``tol`` for every concept.

References
----------
Hsieh, C.-J., Chang, K.-W., Lin, C.-J., Keerthi, S. S. and Sundararajan, S., "A dual
coordinate descent method for large-scale linear SVM", ICML 2008.
Fan, R.-E. et al., "LIBLINEAR: a library for large linear classification", JMLR 2008.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

import jax
import jax.numpy as jnp

from jaxannot.runtime.programs import bounded_cache
from jaxannot.runtime.progress import run_steps

if TYPE_CHECKING:
    from jaxannot.types import ArrayLike

__all__ = [
    "LOSSES",
    "SVMState",
    "SVMInfo",
    "init",
    "build_kernel",
    "fit_linear_svm",
    "primal_objective",
    "decision_function",
]

LOSSES = ("squared_hinge", "hinge")


class SVMState(NamedTuple):
    """Dual variables ``alpha [n, K]`` and the weights ``w [K, d]`` they define."""

    alpha: jax.Array
    w: jax.Array


class SVMInfo(NamedTuple):
    """Per concept: the dual objective after the epoch and the epoch's PG spread."""

    dual_objective: jax.Array  # [K]
    violation: jax.Array  # [K]


def _loss_constants(loss: str, c: float) -> tuple[float, float]:
    if loss not in LOSSES:
        raise ValueError(f"unknown loss {loss!r}; valid losses: {list(LOSSES)}")
    if not isinstance(c, jax.core.Tracer) and not c > 0:  # a traced C is not checked
        raise ValueError(f"C must be positive, got {c}")
    if loss == "squared_hinge":
        return 1.0 / (2.0 * c), np.inf
    return 0.0, c


def init(num_images: int, num_features: int, num_concepts: int) -> SVMState:
    """α = 0, w = 0."""
    return SVMState(
        alpha=jnp.zeros((num_images, num_concepts), jnp.float32),
        w=jnp.zeros((num_concepts, num_features), jnp.float32),
    )


def build_kernel(
    *, c: float = 5.0, loss: str = "squared_hinge"
) -> Callable[..., tuple[SVMState, SVMInfo]]:
    """One epoch of dual coordinate descent, ``step(rng_key, state, (x, y[, mask]))``.

    ``x [n, d]`` (already augmented with the intercept column if wanted),
    ``y [n, K]`` in ``{−1, +1}`` and an optional ``mask [n]``: rows where it is 0
    (padding) are never updated and do not count in the stopping criterion.
    """
    diag, upper = _loss_constants(loss, c)

    def step(rng_key, state: SVMState, data) -> tuple[SVMState, SVMInfo]:
        x, y = data[0], data[1]
        n = x.shape[0]
        mask = data[2] if len(data) > 2 else jnp.ones(n, x.dtype)
        qbar = jnp.where(mask > 0, (x * x).sum(1) + diag, 0.0)  # [n]; 0 = padding
        # a random order of the real rows (padding sorts last and is a no-op); each
        # row is visited once per epoch, so the epoch is a scan over permuted rows
        order = jnp.argsort(jnp.where(mask > 0, jax.random.uniform(rng_key, (n,)), 2.0))

        def body(carry, row):
            w, pg_max, pg_min = carry
            xi, yi, ai, qi = row
            grad = yi * (w @ xi) - 1.0 + diag * ai
            pg = jnp.where(
                ai <= 0.0,
                jnp.minimum(grad, 0.0),
                jnp.where(ai >= upper, jnp.maximum(grad, 0.0), grad),
            )
            real = qi > 0
            new = jnp.clip(ai - grad / jnp.where(real, qi, 1.0), 0.0, upper)
            new = jnp.where(real, new, ai)
            w = w + ((new - ai) * yi)[:, None] * xi[None, :]
            pg_max = jnp.where(real, jnp.maximum(pg_max, pg), pg_max)
            pg_min = jnp.where(real, jnp.minimum(pg_min, pg), pg_min)
            return (w, pg_max, pg_min), new

        k = y.shape[1]
        rows = (x[order], y[order], state.alpha[order], qbar[order])
        init_carry = (state.w, jnp.full(k, -jnp.inf), jnp.full(k, jnp.inf))
        (w, pg_max, pg_min), new = jax.lax.scan(body, init_carry, rows)
        alpha = state.alpha.at[order].set(new)
        dual = 0.5 * (w * w).sum(1) + 0.5 * diag * (alpha**2).sum(0) - alpha.sum(0)
        return SVMState(alpha, w), SVMInfo(dual, pg_max - pg_min)

    return step


def _augment(x: jax.Array, fit_intercept: bool) -> jax.Array:
    if not fit_intercept:
        return x
    return jnp.concatenate([x, jnp.ones((x.shape[0], 1), x.dtype)], axis=1)


def _signed(y) -> jax.Array:
    y = jnp.asarray(y, jnp.float32)
    if y.ndim == 1:
        y = y[:, None]
    return jnp.where(y > 0, 1.0, -1.0)


def fit_linear_svm(
    x: ArrayLike,
    y: ArrayLike,
    *,
    rng_key: jax.Array,
    c: float = 5.0,
    loss: str = "squared_hinge",
    fit_intercept: bool = True,
    tol: float = 1e-3,
    max_epochs: int = 200,
) -> tuple[jax.Array, jax.Array, dict]:
    """Train ``K`` one-vs-rest linear SVMs on ``x [n, d]`` with labels ``y [n, K]``.

    Parameters
    ----------
    x : array [n, d]
    y : array [n, K] or [n]
        Positive where > 0 (``{0, 1}`` or ``{−1, +1}`` both work).
    rng_key : PRNG key
        Drives the coordinate order of each epoch.
    c : float
        ``C`` (seed 002 uses 5).
    loss : {"squared_hinge", "hinge"}
        L2-loss (liblinear ``-s 1``, scikit-learn ``LinearSVC`` default) or L1-loss
        (``-s 3``).
    fit_intercept : bool
        Append a constant-1 feature (regularized, as in liblinear).
    tol : float
        Stop when every concept's projected-gradient spread is below ``tol``.
    max_epochs : int

    Returns
    -------
    coef : Float[Array, "concepts features"]
    intercept : Float[Array, "concepts"]
    info : dict
        ``epochs``, final ``violation`` and ``dual_objective`` per concept.
    """
    if max_epochs < 1:
        raise ValueError(f"max_epochs must be >= 1, got {max_epochs}")
    x = jnp.asarray(x, jnp.float32)
    y = _signed(y)
    if x.ndim != 2 or y.shape[0] != x.shape[0]:
        raise ValueError(f"x must be [n, d] and y [n, K]; got {x.shape} and {y.shape}")
    xa = _augment(x, fit_intercept)
    # pad the image axis to a size bucket so that fits on similar sizes share one
    # compilation; padded rows are masked out (α stays 0, w is untouched)
    n = xa.shape[0]
    padded = _bucket(n)
    xa = jnp.pad(xa, ((0, padded - n), (0, 0)))
    y = jnp.pad(y, ((0, padded - n), (0, 0)), constant_values=1.0)
    mask = (jnp.arange(padded) < n).astype(xa.dtype)
    state, info, epochs = _run(
        rng_key,
        xa,
        y,
        mask,
        c=float(c),
        loss=loss,
        tol=float(tol),
        max_epochs=int(max_epochs),
    )
    w = state.w
    coef = w[:, : x.shape[1]]
    intercept = w[:, -1] if fit_intercept else jnp.zeros(w.shape[0])
    return (
        coef,
        intercept,
        {
            "epochs": int(epochs),
            "violation": np.asarray(info.violation).tolist(),
            "dual_objective": np.asarray(info.dual_objective).tolist(),
        },
    )


def _bucket(n: int) -> int:
    """Next power of two (at least 64) up to 4096, then the next multiple of 4096."""
    if n <= 4096:
        return max(64, 1 << (n - 1).bit_length())
    return -(-n // 4096) * 4096


TRACE_COUNT = {"fit": 0}


class _Epochs(NamedTuple):
    """The runner's carry: the key chain, the solver's state, the epochs run and
    whether every concept's violation has reached the tolerance."""

    rng_key: jax.Array
    state: SVMState
    epochs: jax.Array
    stopped: jax.Array


@bounded_cache(16)
def _epoch_step(c: float, loss: str) -> Callable:
    """One epoch as :func:`~jaxannot.runtime.progress.run_steps`'s ``step(t, carry,
    (x, y, mask, tol))``, built once per ``(c, loss)``; an epoch after the stop
    changes nothing (NaN info)."""
    kernel = build_kernel(c=c, loss=loss)

    def step(t, carry: _Epochs, data):
        del t
        TRACE_COUNT["fit"] += 1  # compile-once tests count traces here
        x, y, mask, tol = data

        def epoch(_):
            rng_key, sub = jax.random.split(carry.rng_key)
            state, info = kernel(sub, carry.state, (x, y, mask))
            stopped = jnp.max(info.violation) <= tol
            return _Epochs(rng_key, state, carry.epochs + 1, stopped), info

        def idle(_):
            shapes = jax.eval_shape(epoch, None)[1]
            nan = jax.tree.map(lambda a: jnp.full(a.shape, jnp.nan, a.dtype), shapes)
            return carry, nan

        return jax.lax.cond(carry.stopped, idle, epoch, None)

    return step


def _float32_at_most(tol: float) -> np.float32:
    """The largest float32 ``<= tol``: ``v <= tol`` for a float32 ``v`` compared in
    float32, as the host compared it in float64."""
    low = np.float32(tol)
    return np.nextafter(low, np.float32(-np.inf)) if float(low) > tol else low


def _run(rng_key, x, y, mask, *, c, loss, tol, max_epochs):
    """Epochs until every concept's violation is ``<= tol``, through the library's
    runner (one compiled loop; the host stops after the slice where it holds)."""
    state = init(x.shape[0], x.shape[1], y.shape[1])
    carry = _Epochs(rng_key, state, jnp.int32(0), jnp.bool_(False))
    carry, trace = run_steps(
        _epoch_step(c, loss),
        carry,
        max_epochs,
        progress_bar=False,
        desc="linear SVM",
        data=(x, y, mask, _float32_at_most(tol)),
        done=lambda carry: bool(carry.stopped),
    )
    epochs = int(carry.epochs)
    return carry.state, jax.tree.map(lambda a: a[epochs - 1], trace), epochs


def decision_function(x: ArrayLike, coef: ArrayLike, intercept: ArrayLike) -> jax.Array:
    """Scores ``x @ coefᵀ + intercept``, ``[n, K]``."""
    return jnp.asarray(x, jnp.float32) @ jnp.asarray(coef).T + jnp.asarray(intercept)


def primal_objective(
    x: ArrayLike,
    y: ArrayLike,
    coef: ArrayLike,
    intercept: ArrayLike,
    *,
    c: float = 5.0,
    loss: str = "squared_hinge",
    fit_intercept: bool = True,
) -> np.ndarray:
    """The primal objective per concept (the intercept regularized as in liblinear)."""
    y = np.asarray(_signed(y))
    margins = y * np.asarray(decision_function(x, coef, intercept))
    hinge = np.maximum(0.0, 1.0 - margins)
    penalty = hinge**2 if loss == "squared_hinge" else hinge
    reg = 0.5 * (np.asarray(coef) ** 2).sum(1)
    if fit_intercept:
        reg = reg + 0.5 * np.asarray(intercept) ** 2
    return reg + c * penalty.sum(0)
