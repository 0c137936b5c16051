r"""Algorithm 1 of SFSLS: the reweighted :math:`\ell_{2,p}` solver, jit-compiled.

Minimizes the objective (8) of :mod:`jaxannot.models.sparse_projection` for any
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
from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl

from jaxannot.models.sparse_projection import (
    SparseProjection,
    laplacian_matvec,
    reweighting_diagonal,
    sfsls_objective,
)
from jaxannot.types import Array

__all__ = [
    "SFSLSHyper",
    "SFSLSData",
    "SFSLSState",
    "SFSLSInfo",
    "block_pcg",
    "prepare",
    "init",
    "build_kernel",
    "fit_sfsls",
    "make_hyper",
    "TRACE_COUNT",
]

#: Python-side trace counter of the SFSLS step (compile-once tests read it).
TRACE_COUNT = {"step": 0}


class SFSLSHyper(NamedTuple):
    """Scalar hyper-parameters, passed as traced arrays (no recompiles in sweeps).

    alpha, lam, mu : the paper's α (data term), λ (sparsity), μ (subspace).
    p : norm exponent in (0, 1]. eps : zero-row guard on ``‖g^i‖²``.
    tol : relative change of ``G``, ``‖G_t − G_{t−1}‖_F / ‖G_t‖_F``, that stops the
        iteration (the total objective is dominated by the graph terms when α is
        small, so its relative change is a poor stopping rule).
    """

    alpha: Array
    lam: Array
    mu: Array
    p: Array
    eps: Array
    tol: Array


class SFSLSData(NamedTuple):
    """Everything Algorithm 1 needs, computed once per fit by :func:`prepare`.

    ``x`` [n, d], ``y`` [n, c] (zero rows where unlabelled), ``labelled`` bool [n],
    ``graph`` (senders, receivers, weights), ``gram = XXᵀ`` [d, d],
    ``m = X_u R_u⁻¹ X_uᵀ`` [d, d], ``w = R_u⁻¹ X_uᵀ`` [n, d] (zero labelled rows),
    ``f_base`` [n, c] (``Y_l`` on labelled rows, ``−R_u⁻¹ L_ul Y_l`` elsewhere),
    ``z = X f_base`` [d, c], ``cg_residual`` (max relative CG residual).
    """

    x: Array
    y: Array
    labelled: Array
    graph: tuple[Array, Array, Array]
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
def block_pcg(matvec, b: Array, inv_diag: Array, *, tol: float, maxiter: int):
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
    """
    bnorm = jnp.linalg.norm(b, axis=0)
    bnorm = jnp.where(bnorm > 0, bnorm, 1.0)
    x0 = jnp.zeros_like(b)
    z0 = inv_diag[:, None] * b
    init_state = (x0, b, z0, jnp.sum(b * z0, axis=0), jnp.asarray(0))

    def rel(r):
        return jnp.max(jnp.linalg.norm(r, axis=0) / bnorm)

    def cond(state):
        _, r, _, _, it = state
        return (it < maxiter) & (rel(r) > tol)

    def body(state):
        x, r, p, rz, it = state
        ap = matvec(p)
        pap = jnp.sum(p * ap, axis=0)
        step = jnp.where(pap > 0, rz / jnp.where(pap > 0, pap, 1.0), 0.0)
        x = x + step * p
        r = r - step * ap
        z = inv_diag[:, None] * r
        rz_new = jnp.sum(r * z, axis=0)
        beta = jnp.where(rz > 0, rz_new / jnp.where(rz > 0, rz, 1.0), 0.0)
        return x, r, z + beta * p, rz_new, it + 1

    x, r, _, _, _ = jax.lax.while_loop(cond, body, init_state)
    return x, rel(r)


# ---------------------------------------------------------------- precompute
def prepare(x, y, labelled, graph, hyper: SFSLSHyper, *, cg_tol=1e-5, cg_maxiter=500):
    """Once-per-fit quantities of Algorithm 1 (steps 2–4 and the fixed parts of 6).

    Solves ``R_u [W, T] = [X_uᵀ, L_ul Y_l]`` by :func:`block_pcg`, where
    ``R_u = L_uu + (1 + α) I`` acts on the unlabelled rows (the labelled rows get the
    identity so the masked operator stays SPD and shapes stay fixed for every labelled
    fraction).
    """
    x = jnp.asarray(x, jnp.float32)
    y = jnp.where(labelled[:, None], jnp.asarray(y, jnp.float32), 0.0)
    senders, receivers, weights = graph
    n = x.shape[0]
    free = (~labelled).astype(x.dtype)[:, None]

    def op(v):
        lv = laplacian_matvec(senders, receivers, weights, free * v, n)
        return free * (lv + (1.0 + hyper.alpha) * v) + (1.0 - free) * v

    degree = jax.ops.segment_sum(weights, senders, num_segments=n)
    self_loops = jax.ops.segment_sum(
        jnp.where(senders == receivers, weights, 0.0), senders, num_segments=n
    )
    diag = jnp.where(labelled, 1.0, degree - self_loops + 1.0 + hyper.alpha)
    rhs = jnp.concatenate(
        [free * x, free * laplacian_matvec(senders, receivers, weights, y, n)], axis=1
    )
    sol, residual = block_pcg(op, rhs, 1.0 / diag, tol=cg_tol, maxiter=cg_maxiter)
    d = x.shape[1]
    w, t = sol[:, :d] * free, sol[:, d:] * free
    m = x.T @ w
    f_base = y - t
    return SFSLSData(
        x=x,
        y=y,
        labelled=labelled,
        graph=(senders, receivers, weights),
        gram=x.T @ x,
        m=0.5 * (m + m.T),
        w=w,
        f_base=f_base,
        z=x.T @ f_base,
        cg_residual=residual,
    )


def _objective(params, data: SFSLSData, hyper: SFSLSHyper):
    return sfsls_objective(
        params,
        data.x,
        data.y,
        data.labelled,
        data.graph,
        alpha=hyper.alpha,
        lam=hyper.lam,
        mu=hyper.mu,
        p=hyper.p,
        eps=hyper.eps,
    )


def _sym(a):
    return 0.5 * (a + a.T)


def _top_subspace(a: Array, subspace: int) -> Array:
    """Top-``subspace`` left singular vectors of ``a`` (``subspace ≤`` its columns)."""
    return jnp.linalg.svd(a, full_matrices=False)[0][:, :subspace]


def init(data: SFSLSData, hyper: SFSLSHyper, subspace: int, g_init=None) -> SFSLSState:
    """Initial iterate: ``G_0`` given, or the graph-regularized ridge solution
    ``(XXᵀ + μI − αM)⁻¹ Z`` (eq. (13)–(16) with λ = 0, U = 0); ``U_0`` spans the top
    left singular directions of ``G_0``, ``P_0 = U_0ᵀG_0``, ``F_0`` from eq. (16)."""
    d = data.x.shape[1]
    if g_init is None:
        c0 = _sym(data.gram + hyper.mu * jnp.eye(d) - hyper.alpha * data.m)
        g = jsl.cho_solve(jsl.cho_factor(c0, lower=True), data.z)
    else:
        g = jnp.asarray(g_init, jnp.float32)
    u = _top_subspace(g, subspace)
    params = SparseProjection(
        f=data.f_base + hyper.alpha * data.w @ g, g=g, u=u, p=u.T @ g
    )
    return SFSLSState(params, _objective(params, data, hyper), jnp.asarray(0))


def build_kernel(subspace: int):
    """One iteration of Algorithm 1 (``subspace`` = r is static: it fixes shapes).

    Returns ``step(rng_key, state, data, hyper) -> (SFSLSState, SFSLSInfo)``; the key is
    unused (the algorithm is deterministic) and kept for the library's kernel shape.
    """

    def step(rng_key, state: SFSLSState, data: SFSLSData, hyper: SFSLSHyper):
        del rng_key
        TRACE_COUNT["step"] += 1
        d = data.x.shape[1]
        eye = jnp.eye(d, dtype=data.x.dtype)
        dvec = reweighting_diagonal(state.params.g, hyper.p, hyper.eps)
        # E = C − μI = XXᵀ + λD − αM ≻ 0 and C = E + μI (eq. (19))
        e = _sym(data.gram + hyper.lam * jnp.diag(dvec) - hyper.alpha * data.m)
        e_chol = jsl.cho_factor(e, lower=True)
        c_chol = jsl.cho_factor(e + hyper.mu * eye, lower=True)
        v = jsl.cho_solve(c_chol, data.z)  # C⁻¹Z, so H = v vᵀ (eq. (22))
        # H u = η K u with K = I − μC⁻¹: K⁻¹ = C E⁻¹, so every eigenvector with
        # η > 0 is u = K⁻¹v β = E⁻¹Z β where (vᵀ E⁻¹ Z) β = η β (a c × c problem).
        kinv_v = jsl.cho_solve(e_chol, data.z)
        evals, betas = jnp.linalg.eigh(_sym(v.T @ kinv_v))
        top = betas[:, ::-1][:, :subspace]
        u, _ = jnp.linalg.qr(kinv_v @ top)
        # Woodbury (20): J⁻¹Z = C⁻¹Z + μ C⁻¹U (UᵀKU)⁻¹ UᵀC⁻¹Z, UᵀKU = I − μUᵀC⁻¹U
        c_inv_u = jsl.cho_solve(c_chol, u)
        small = _sym(jnp.eye(subspace, dtype=u.dtype) - hyper.mu * u.T @ c_inv_u)
        g = v + hyper.mu * c_inv_u @ jnp.linalg.solve(small, u.T @ v)
        f = data.f_base + hyper.alpha * data.w @ g
        params = SparseProjection(f=f, g=g, u=u, p=u.T @ g)
        objective = _objective(params, data, hyper)
        change = jnp.linalg.norm(g - state.params.g) / jnp.maximum(
            jnp.linalg.norm(g), 1e-30
        )
        new_state = SFSLSState(params, objective, state.iteration + 1)
        return new_state, SFSLSInfo(objective, evals[::-1][:subspace], change)

    return step


def make_hyper(alpha=1.0, lam=1.0, mu=1.0, p=0.5, eps=1e-8, tol=1e-4) -> SFSLSHyper:
    """Validated :class:`SFSLSHyper` (float32 scalars)."""
    if not 0.0 < p <= 1.0:
        raise ValueError(f"p must be in (0, 1], got {p}")
    for name, value in (("alpha", alpha), ("lam", lam), ("mu", mu), ("eps", eps)):
        if not value > 0:
            raise ValueError(f"{name} must be > 0, got {value}")
    return SFSLSHyper(
        *(jnp.asarray(v, jnp.float32) for v in (alpha, lam, mu, p, eps, tol))
    )


@functools.partial(
    jax.jit, static_argnames=("subspace", "max_iter", "cg_tol", "cg_maxiter")
)
def _fit(
    x, y, labelled, graph, hyper, g_init, *, subspace, max_iter, cg_tol, cg_maxiter
):
    data = prepare(x, y, labelled, graph, hyper, cg_tol=cg_tol, cg_maxiter=cg_maxiter)
    state = init(data, hyper, subspace, g_init)
    step = build_kernel(subspace)
    history = jnp.full((max_iter + 1,), jnp.nan, jnp.float32).at[0].set(state.objective)

    def cond(carry):
        st, _, change = carry
        return (st.iteration < max_iter) & (change > hyper.tol)

    def body(carry):
        st, hist, _ = carry
        st, info = step(None, st, data, hyper)
        hist = hist.at[st.iteration].set(info.objective)
        return st, hist, info.relative_change

    state, history, _ = jax.lax.while_loop(
        cond, body, (state, history, jnp.asarray(jnp.inf, jnp.float32))
    )
    return state, history, data.cg_residual


def fit_sfsls(
    x,
    y,
    labelled,
    graph,
    *,
    alpha: float = 1.0,
    lam: float = 1.0,
    mu: float = 1.0,
    p: float = 0.5,
    subspace: int = 1,
    max_iter: int = 50,
    tol: float = 1e-4,
    eps: float = 1e-8,
    cg_tol: float = 1e-5,
    cg_maxiter: int = 500,
    g_init=None,
):
    """Run Algorithm 1 to convergence (one compiled ``lax.while_loop``).

    Parameters
    ----------
    x : [n, d] features; y : [n, c] 0/1 concepts; labelled : bool [n]
    graph : (senders, receivers, weights) or an object with those attributes
        Symmetric k-NN graph of the ``n`` training images.
    alpha, lam, mu, p, eps : see :mod:`jaxannot.models.sparse_projection`.
    subspace : int, the shared-subspace dimension ``r`` (``1 ≤ r ≤ min(d, c)``).
    max_iter, tol : stop after ``max_iter`` iterations or when the relative change of
        ``G`` is ``≤ tol``.
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
    >>> x = np.random.default_rng(0).normal(size=(6, 3)).astype(np.float32)
    >>> y = np.eye(2, dtype=np.float32)[[0, 1, 0, 1, 0, 1]]
    >>> graph = (np.array([0, 1]), np.array([1, 0]), np.ones(2, np.float32))
    >>> lab = np.array([True, True, True, False, False, False])
    >>> state, hist, _ = fit_sfsls(x, y, lab, graph, max_iter=5)
    >>> bool(np.all(np.diff(hist[np.isfinite(hist)]) <= 1e-4 * abs(hist[0])))
    True
    """
    x = jnp.asarray(x, jnp.float32)
    n, d = x.shape
    y = jnp.asarray(y, jnp.float32)
    if y.ndim != 2 or y.shape[0] != n:
        raise ValueError(f"y must be [images={n}, concepts], got {y.shape}")
    if not 1 <= subspace <= min(d, y.shape[1]):
        raise ValueError(
            f"subspace must be in [1, min(features, concepts) = {min(d, y.shape[1])}], "
            f"got {subspace}"
        )
    labelled = jnp.asarray(labelled, bool)
    if labelled.shape != (n,):
        raise ValueError(f"labelled must be [images={n}], got {labelled.shape}")
    if max_iter < 1:
        raise ValueError(f"max_iter must be >= 1, got {max_iter}")
    if not isinstance(graph, tuple):
        graph = (graph.senders, graph.receivers, graph.weights)
    graph = (
        jnp.asarray(graph[0], jnp.int32),
        jnp.asarray(graph[1], jnp.int32),
        jnp.asarray(graph[2], jnp.float32),
    )
    hyper = make_hyper(alpha, lam, mu, p, eps, tol)
    if g_init is not None:
        g_init = jnp.asarray(g_init, jnp.float32)
        if g_init.shape != (d, y.shape[1]):
            raise ValueError(f"g_init must be {(d, y.shape[1])}, got {g_init.shape}")
    return _fit(
        x,
        y,
        labelled,
        graph,
        hyper,
        g_init,
        subspace=subspace,
        max_iter=max_iter,
        cg_tol=cg_tol,
        cg_maxiter=cg_maxiter,
    )
