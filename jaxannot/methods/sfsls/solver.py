r"""Algorithm 1 of SFSLS: the reweighted :math:`\ell_{2,p}` solver, jit-compiled.

Minimizes the objective (8) of :mod:`jaxannot.methods.sfsls.sparse_projection` for any
``p ∈ (0, 1]``. Each iteration fixes the reweighting ``D`` at the current ``G`` and
minimizes the surrogate (12) *jointly* over ``F, G, U, P`` in closed form:

1. ``D_ii = (p/2)(‖g^i‖² + ε)^{p/2−1}``;
2. ``C = XXᵀ + λD + μI − α X_u R_u⁻¹ X_uᵀ``, ``K = I − μC⁻¹``,
   ``H = C⁻¹ Z Zᵀ C⁻¹`` (eqs. (19)–(22));
3. ``U`` = the top-``r`` generalized eigenvectors of ``H u = η K u`` (maximizer of the
   trace ratio (22); the objective depends on ``span(U)`` only, orthonormalized by QR).
   ``H = v vᵀ`` has rank ``≤ c`` and ``K⁻¹ = C (C − μI)⁻¹``, so the eigenvectors with
   ``η > 0`` are ``(C − μI)⁻¹ Z β`` with ``β`` from a ``c × c`` eigenproblem; hence
   ``r ≤ c`` and no ``d × d`` eigen-decomposition is needed;
4. ``G = J⁻¹ Z`` with ``J⁻¹ = C⁻¹ + μ C⁻¹U (UᵀKU)⁻¹ UᵀC⁻¹`` (Sherman–Morrison–Woodbury,
   eq. (20)), ``P = UᵀG`` (eq. (10)), ``F_u = R_u⁻¹(α X_uᵀ G − L_ul Y_l)`` (eq. (16)).

Exact infinite ``Q`` on labelled images. The labelled rows of ``F`` are pinned to ``Y``;
eliminating them turns the paper's ``R = L + Q + αI`` into its unlabelled block
``R_u = L_uu + (1 + α) I`` (the limit ``Q_ll → ∞`` of the paper's formulas, checked in
the tests against a large finite constant), and the paper's ``X R⁻¹ Q Y`` into
``Z = X_l Y_l − X_u R_u⁻¹ L_ul Y_l``.

Cost. ``R_u`` does not change across iterations, so ``W = R_u⁻¹ X_uᵀ`` (``d + c``
right-hand sides) is solved once, by Jacobi-preconditioned conjugate gradients on the
sparse Laplacian (O(nnz · d) per CG sweep, never an ``n × n`` matrix). Every
iteration is then O(d³) for two ``d × d`` Cholesky factorizations, O(n d c) for ``F``
and O(nnz · c) for the objective. ``C ≻ μI`` (since ``α R_u⁻¹ ≺ I``), so ``K`` is
positive definite.

Monotonicity (Theorem 1). The step is the global minimizer of the surrogate, which
majorizes (8) and touches it at the current ``G``, so the reported objective never
increases (up to float32 rounding).

References
----------
C. Shi, Q. Ruan. Feature selection with enhanced sparsity for web image annotation.
Journal of Software 26(7):1800-1811, 2015 (Algorithm 1, Theorem 1).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl

from jaxannot.graph import laplacian_diagonal, laplacian_matvec
from jaxannot.inference.em import run_until_small_change
from jaxannot.methods.sfsls.sparse_projection import (
    SFSLSWeights,
    SparseProjection,
    TrainingImages,
    reweighting_diagonal,
    sfsls_objective,
)
from jaxannot.runtime.progress import run_until_stopped
from jaxannot.types import Array, ArrayLike

__all__ = [
    "SFSLSData",
    "SFSLSState",
    "SFSLSInfo",
    "block_pcg",
    "prepare",
    "init",
    "build_kernel",
    "fit_sfsls",
    "TRACE_COUNT",
]

#: Python-side trace counter of the SFSLS step (compile-once tests read it).
TRACE_COUNT = {"step": 0}


class SFSLSData(NamedTuple):
    """Everything Algorithm 1 needs, computed once per fit by :func:`prepare`.

    ``images`` (float32 ``x`` [n, d], ``y`` [n, c] with zero rows where unlabelled,
    ``labelled`` bool [n], the k-NN ``graph``), ``gram = XXᵀ`` [d, d],
    ``m = X_u R_u⁻¹ X_uᵀ`` [d, d], ``w = R_u⁻¹ X_uᵀ`` [n, d] (zero labelled rows),
    ``f_base`` [n, c] (``Y_l`` on labelled rows, ``−R_u⁻¹ L_ul Y_l`` elsewhere),
    ``z = X f_base`` [d, c], ``cg_residual`` (max relative CG residual).
    """

    images: TrainingImages
    gram: Array
    m: Array
    w: Array
    f_base: Array
    z: Array
    cg_residual: Array


class SFSLSState(NamedTuple):
    """Current blocks, objective (8) and iteration count."""

    params: SparseProjection
    objective: Array
    iteration: Array


class SFSLSInfo(NamedTuple):
    """Per-step diagnostics: objective (8) after the step, the top generalized
    eigenvalues of ``(H, K)`` and the relative change of ``G``."""

    objective: Array
    eigenvalues: Array
    relative_change: Array


# --------------------------------------------------------------------------- CG
class _PCGCarry(NamedTuple):
    """:func:`block_pcg`'s carry: the solutions, residuals, search directions,
    :math:`r^\top z` per column and whether every residual is small enough."""

    x: Array
    r: Array
    p: Array
    rz: Array
    stopped: Array


def block_pcg(
    matvec: Callable[[Array], Array],
    b: Array,
    inv_diag: Array,
    *,
    tol: float,
    maxiter: int,
) -> tuple[Array, Array]:
    """Jacobi-preconditioned conjugate gradients, one independent solve per column.

    Parameters
    ----------
    matvec : callable ``[n, k] -> [n, k]``
        A symmetric positive definite operator applied column-wise.
    b : [n, k]
        Right-hand sides.
    inv_diag : [n]
        Inverse of the operator's diagonal (the preconditioner).
    tol : float
        Stop when every column has ``‖r‖ ≤ tol ‖b‖``.
    maxiter : int

    Returns
    -------
    x : [n, k]
    residual : scalar, the largest relative residual reached.

    Notes
    -----
    The iterations run through the library's in-program runner
    (:func:`~jaxannot.runtime.progress.run_until_stopped`).
    """
    bnorm = jnp.linalg.norm(b, axis=0)
    bnorm = jnp.where(bnorm > 0, bnorm, 1.0)
    z0 = inv_diag[:, None] * b

    def rel(r):
        return jnp.max(jnp.linalg.norm(r, axis=0) / bnorm)

    def iteration(t: Array, state: _PCGCarry) -> tuple[_PCGCarry, tuple]:
        del t
        x, r, p, rz, _ = state
        ap = matvec(p)
        pap = jnp.sum(p * ap, axis=0)
        step = jnp.where(pap > 0, rz / jnp.where(pap > 0, pap, 1.0), 0.0)
        x = x + step * p
        r = r - step * ap
        z = inv_diag[:, None] * r
        rz_new = jnp.sum(r * z, axis=0)
        beta = jnp.where(rz > 0, rz_new / jnp.where(rz > 0, rz, 1.0), 0.0)
        return _PCGCarry(x, r, z + beta * p, rz_new, ~(rel(r) > tol)), ()

    rz0 = jnp.sum(b * z0, axis=0)
    start = _PCGCarry(jnp.zeros_like(b), b, z0, rz0, ~(rel(b) > tol))
    state, _, _ = run_until_stopped(iteration, start, maxiter)
    return state.x, rel(state.r)


# ---------------------------------------------------------------- precompute
def prepare(
    images: TrainingImages,
    weights: SFSLSWeights,
    *,
    cg_tol: float = 1e-5,
    cg_maxiter: int = 500,
) -> SFSLSData:
    """Once-per-fit quantities of Algorithm 1 (steps 2–4 and the fixed parts of 6).

    Solves ``R_u [W, T] = [X_uᵀ, L_ul Y_l]`` by :func:`block_pcg`, where
    ``R_u = L_uu + (1 + α) I`` acts on the unlabelled rows (the labelled rows get the
    identity so the masked operator stays SPD and shapes stay fixed for every labelled
    fraction). Only ``weights.alpha`` enters.
    """
    labelled, graph = images.labelled, images.graph
    x = jnp.asarray(images.x, jnp.float32)
    y = jnp.where(labelled[:, None], jnp.asarray(images.y, jnp.float32), 0.0)
    free = (~labelled).astype(x.dtype)[:, None]

    def op(v):
        lv = laplacian_matvec(graph, free * v)
        return free * (lv + (1.0 + weights.alpha) * v) + (1.0 - free) * v

    diag = jnp.where(labelled, 1.0, laplacian_diagonal(graph) + 1.0 + weights.alpha)
    rhs = jnp.concatenate([free * x, free * laplacian_matvec(graph, y)], axis=1)
    sol, residual = block_pcg(op, rhs, 1.0 / diag, tol=cg_tol, maxiter=cg_maxiter)
    d = x.shape[1]
    w, t = sol[:, :d] * free, sol[:, d:] * free
    m = x.T @ w
    f_base = y - t
    return SFSLSData(
        images=TrainingImages(x, y, labelled, graph),
        gram=x.T @ x,
        m=0.5 * (m + m.T),
        w=w,
        f_base=f_base,
        z=x.T @ f_base,
        cg_residual=residual,
    )


def _sym(a):
    return 0.5 * (a + a.T)


def _top_subspace(a: Array, subspace: int) -> Array:
    """Top-``subspace`` left singular vectors of ``a`` (``subspace ≤`` its columns)."""
    return jnp.linalg.svd(a, full_matrices=False)[0][:, :subspace]


def init(
    data: SFSLSData, weights: SFSLSWeights, subspace: int, g_init: Array | None = None
) -> SFSLSState:
    """Initial iterate: ``G_0`` given, or the graph-regularized ridge solution
    ``(XXᵀ + μI − αM)⁻¹ Z`` (eq. (13)–(16) with λ = 0, U = 0); ``U_0`` spans the top
    left singular directions of ``G_0``, ``P_0 = U_0ᵀG_0``, ``F_0`` from eq. (16)."""
    d = data.images.x.shape[1]
    if g_init is None:
        c0 = _sym(data.gram + weights.mu * jnp.eye(d) - weights.alpha * data.m)
        g = jsl.cho_solve(jsl.cho_factor(c0, lower=True), data.z)
    else:
        g = jnp.asarray(g_init, jnp.float32)
    u = _top_subspace(g, subspace)
    params = SparseProjection(
        f=data.f_base + weights.alpha * data.w @ g, g=g, u=u, p=u.T @ g
    )
    objective = sfsls_objective(params, data.images, weights)
    return SFSLSState(params, objective, jnp.asarray(0))


def build_kernel(subspace: int) -> Callable[..., tuple[SFSLSState, SFSLSInfo]]:
    """One iteration of Algorithm 1 (``subspace`` = r is static: it fixes shapes).

    Returns ``step(rng_key, state, data, weights) -> (SFSLSState, SFSLSInfo)``; the key
    is unused (the algorithm is deterministic) and kept for the library's kernel shape.
    """

    def step(rng_key, state: SFSLSState, data: SFSLSData, weights: SFSLSWeights):
        del rng_key
        TRACE_COUNT["step"] += 1
        x = data.images.x
        eye = jnp.eye(x.shape[1], dtype=x.dtype)
        dvec = reweighting_diagonal(state.params.g, weights.p, weights.eps)
        # E = C − μI = XXᵀ + λD − αM ≻ 0 and C = E + μI (eq. (19))
        e = _sym(data.gram + weights.lam * jnp.diag(dvec) - weights.alpha * data.m)
        e_chol = jsl.cho_factor(e, lower=True)
        c_chol = jsl.cho_factor(e + weights.mu * eye, lower=True)
        v = jsl.cho_solve(c_chol, data.z)  # C⁻¹Z, so H = v vᵀ (eq. (22))
        # H u = η K u with K = I − μC⁻¹: K⁻¹ = C E⁻¹, so every eigenvector with
        # η > 0 is u = K⁻¹v β = E⁻¹Z β where (vᵀ E⁻¹ Z) β = η β (a c × c problem).
        kinv_v = jsl.cho_solve(e_chol, data.z)
        evals, betas = jnp.linalg.eigh(_sym(v.T @ kinv_v))
        top = betas[:, ::-1][:, :subspace]
        u, _ = jnp.linalg.qr(kinv_v @ top)
        # Woodbury (20): J⁻¹Z = C⁻¹Z + μ C⁻¹U (UᵀKU)⁻¹ UᵀC⁻¹Z, UᵀKU = I − μUᵀC⁻¹U
        c_inv_u = jsl.cho_solve(c_chol, u)
        small = _sym(jnp.eye(subspace, dtype=u.dtype) - weights.mu * u.T @ c_inv_u)
        g = v + weights.mu * c_inv_u @ jnp.linalg.solve(small, u.T @ v)
        f = data.f_base + weights.alpha * data.w @ g
        params = SparseProjection(f=f, g=g, u=u, p=u.T @ g)
        objective = sfsls_objective(params, data.images, weights)
        change = jnp.linalg.norm(g - state.params.g) / jnp.maximum(
            jnp.linalg.norm(g), 1e-30
        )
        new_state = SFSLSState(params, objective, state.iteration + 1)
        return new_state, SFSLSInfo(objective, evals[::-1][:subspace], change)

    return step


@functools.partial(
    jax.jit, static_argnames=("subspace", "max_iter", "cg_tol", "cg_maxiter")
)
def _fit(images, weights, tol, g_init, *, subspace, max_iter, cg_tol, cg_maxiter):
    data = prepare(images, weights, cg_tol=cg_tol, cg_maxiter=cg_maxiter)
    step = build_kernel(subspace)
    state, history = run_until_small_change(
        lambda st: step(None, st, data, weights),
        init(data, weights, subspace, g_init),
        tol,
        max_iterations=max_iter,
    )
    return state, history, data.cg_residual


def fit_sfsls(
    images: TrainingImages,
    weights: SFSLSWeights,
    *,
    subspace: int = 1,
    max_iter: int = 50,
    tol: float = 1e-4,
    cg_tol: float = 1e-5,
    cg_maxiter: int = 500,
    g_init: ArrayLike | None = None,
) -> tuple[SFSLSState, Array, Array]:
    """Run Algorithm 1 to convergence in one compiled program, its iterations
    through the runner's in-program loop
    (:func:`~jaxannot.inference.em.run_until_small_change`).

    Parameters
    ----------
    images : TrainingImages
        Features ``x`` [n, d], 0/1 concepts ``y`` [n, c], the ``labelled`` mask [n] and
        the symmetric k-NN ``graph`` of the ``n`` images (``num_nodes == n``), checked
        by :meth:`~jaxannot.methods.sfsls.sparse_projection.TrainingImages.validated`.
    weights : SFSLSWeights
        α, λ, μ, p and ε of objective (8), checked by
        :meth:`~jaxannot.methods.sfsls.sparse_projection.SFSLSWeights.validated`.
    subspace : int, the shared-subspace dimension ``r`` (``1 ≤ r ≤ min(d, c)``).
    max_iter, tol : stop after ``max_iter`` iterations or when the relative change of
        ``G``, ``‖G_t − G_{t−1}‖_F / ‖G_t‖_F``, is ``≤ tol`` (the objective is dominated
        by the graph terms when α is small, so its relative change is a poor rule).
    cg_tol, cg_maxiter : the one-off conjugate-gradient solves with ``R_u``.
    g_init : optional ``[d, c]`` start (default: graph-regularized ridge).

    Returns
    -------
    state : SFSLSState
        Final ``F, G, U, P``, objective and iteration count.
    history : [max_iter + 1] objective at iterations 0..t (NaN after stopping).
    cg_residual : largest relative residual of the CG solves.

    Examples
    --------
    >>> import numpy as np
    >>> from jaxannot.graph import Graph
    >>> x = np.random.default_rng(0).normal(size=(6, 3)).astype(np.float32)
    >>> y = np.eye(2, dtype=np.float32)[[0, 1, 0, 1, 0, 1]]
    >>> graph = Graph(np.array([0, 1]), np.array([1, 0]), np.ones(2, np.float32), 6)
    >>> lab = np.array([True, True, True, False, False, False])
    >>> images = TrainingImages(x, y, lab, graph)
    >>> weights = SFSLSWeights(alpha=1.0, lam=1.0, mu=1.0, p=0.5)
    >>> state, hist, _ = fit_sfsls(images, weights, max_iter=5)
    >>> bool(np.all(np.diff(hist[np.isfinite(hist)]) <= 1e-4 * abs(hist[0])))
    True
    """
    images = images.validated()
    d, c = images.x.shape[1], images.y.shape[1]
    if not 1 <= subspace <= min(d, c):
        raise ValueError(
            f"subspace must be in [1, min(features, concepts) = {min(d, c)}], "
            f"got {subspace}"
        )
    if max_iter < 1:
        raise ValueError(f"max_iter must be >= 1, got {max_iter}")
    weights = weights.validated()
    if g_init is not None:
        g_init = jnp.asarray(g_init, jnp.float32)
        if g_init.shape != (d, c):
            raise ValueError(f"g_init must be {(d, c)}, got {g_init.shape}")
    return _fit(
        images,
        weights,
        jnp.asarray(tol, jnp.float32),
        g_init,
        subspace=subspace,
        max_iter=max_iter,
        cg_tol=cg_tol,
        cg_maxiter=cg_maxiter,
    )
