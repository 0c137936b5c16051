"""EMML (Algorithm 1 of Guo et al. 2016) against an enumerated QP, KKT (10),
monotonicity, Theorem 3.5 and compile-once."""

import importlib.util
import pathlib

import numpy as np
import pytest

import jax
import jax.numpy as jnp

from jaxannot.methods.emml import working_set as emml
from jaxannot.methods.emml.capped_simplex import project_capped_simplex
from jaxannot.methods.emml.exact import (
    fit_emml_exact,
    mixture_objective,
    mixture_state,
    projected_gradient,
    uncoupled_mixtures,
)
from jaxannot.methods.emml.structured_output import (
    StructuredData,
    kernel_matrix,
)
from jaxannot.methods.emml.working_set import (
    WorkingSetSettings,
    fit_emml,
    theorem_3_5_bound,
)
from jaxannot.solvers.qp import loss_augmented_argmax

# the brute-force reference lives next to this file (pytest runs in importlib mode)
_spec = importlib.util.spec_from_file_location(
    "_emml_reference", pathlib.Path(__file__).with_name("_emml_reference.py")
)
_ref = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_ref)
enumerate_dual, expand_mu = _ref.enumerate_dual, _ref.expand_mu
solve_dual_qp, tiny_problem = _ref.solve_dual_qp, _ref.tiny_problem

CASES = [("linear", 0.5, 0), ("rbf", 0.5, 1), ("rbf", 5.0, 2), ("linear", 20.0, 3)]


def _solve64(kernel_name, c, seed, tol=1e-9):
    x, y = tiny_problem(seed)
    with jax.enable_x64(True):
        k = kernel_matrix(jnp.asarray(x), jnp.asarray(x), kernel_name, 0.5)
        data = StructuredData(k, jnp.asarray(y))
        state, hist = fit_emml(data, c, tol, settings=WorkingSetSettings(capacity=24))
        state, hist = jax.tree.map(np.asarray, (state, hist))
    return np.asarray(k), y, state, hist


@pytest.fixture(scope="module")
def solved():
    return {case: _solve64(*case) for case in CASES}


@pytest.mark.parametrize("case", CASES)
def test_dual_objective_matches_enumerated_qp(case, solved):
    # float64, solver tolerance 1e-9: the QP (CLARABEL, 1e-11 gaps) and EMML optima
    # differ only by solver tolerances, far below the 1e-4 relative asked for.
    k, y, state, _ = solved[case]
    owners, d, big_d, s = enumerate_dual(k, y)
    reference, _ = solve_dual_qp(owners, big_d, s, case[1])
    assert int(state.overflow) == 0
    np.testing.assert_allclose(float(state.objective), reference, rtol=1e-4)
    # the working-set multipliers evaluate to the same objective on the full dual
    mu = expand_mu(owners, d, state.working_set)
    full = 0.5 * mu @ big_d @ mu - s @ mu
    np.testing.assert_allclose(full, float(state.objective), rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("case", CASES)
def test_kkt_conditions_hold_on_the_full_dual(case, solved):
    k, y, state, _ = solved[case]
    c = case[1]
    owners, d, big_d, s = enumerate_dual(k, y)
    mu = expand_mu(owners, d, state.working_set)
    grad = big_d @ mu - s  # dL/dmu = D mu - S + A'gamma - pi = 0
    tol = 1e-6  # a few times the solver's 1e-9 KKT tolerance, accumulated over blocks
    assert np.all(mu >= 0)
    for i in np.unique(owners):
        sel = owners == i
        mu_i, g_i = mu[sel], grad[sel]
        slack = c - mu_i.sum()
        assert slack >= -1e-9  # A mu <= C
        positive = mu_i > 1e-9
        if slack > 1e-7:
            gamma = 0.0  # gamma' (C - A mu) = 0
        else:
            gamma = max(0.0, -float(np.mean(g_i[positive])))
        pi = g_i + gamma
        assert gamma >= 0
        assert np.all(pi >= -tol)  # pi >= 0
        assert np.all(np.abs(pi[positive]) <= tol)  # pi' mu = 0
        assert gamma * max(slack, 0.0) <= tol


@pytest.mark.parametrize("case", CASES)
def test_dual_objective_never_increases(case, solved):
    _, _, state, hist = solved[case]
    objective = hist.objective[: int(state.iteration)]
    assert objective[0] == 0.0 and objective[-1] < 0
    assert np.all(np.diff(objective) <= 1e-12)
    assert int(hist.num_added[int(state.iteration) - 1]) == 0  # stopped: no violator


@pytest.mark.parametrize(
    "kernel_name, c, seed, epsilon",
    [
        ("rbf", 0.5, 1, 2.0),
        ("rbf", 0.5, 1, 4.0),
        ("rbf", 0.5, 1, 5.0),
        ("linear", 0.5, 0, 5.0),
    ],
)
def test_constraint_count_within_theorem_3_5(kernel_name, c, seed, epsilon):
    # Theorem 3.5 at an epsilon where the bound 2nRC\Delta/eps^2 is informative: it
    # is below the number of constraints the dual has, so a solver that added
    # constraints carelessly (or never stopped) would exceed it. The solver's KKT
    # tolerance is epsilon: only violations >= epsilon enter the working set.
    x, y = tiny_problem(seed)
    with jax.enable_x64(True):
        k = kernel_matrix(jnp.asarray(x), jnp.asarray(x), kernel_name, 0.5)
        data = StructuredData(k, jnp.asarray(y))
        state, _ = fit_emml(data, c, epsilon, settings=WorkingSetSettings(capacity=24))
        bound = theorem_3_5_bound(data, c, epsilon)
    owners, *_ = enumerate_dual(np.asarray(k), y)
    assert bound < len(owners)  # not vacuous
    assert int(state.overflow) == 0
    assert 0 < int(state.total_added) <= bound


def test_fit_compiles_once_and_float32_agrees_with_the_qp():
    # float32 with tolerance 1e-4: gradients carry ~1e-6 relative rounding, so the
    # objective agrees with the float64 QP to well under 1e-3 relative.
    traces = 0

    def counted(data, c, tol):
        nonlocal traces
        traces += 1
        settings = WorkingSetSettings(capacity=8, max_iterations=30)
        return fit_emml.__wrapped__(data, c, tol, settings=settings)

    fit = jax.jit(counted)
    for seed, c in [(6, 1.0), (7, 3.0), (8, 0.2)]:
        x, y = tiny_problem(seed)
        x32 = jnp.asarray(x, jnp.float32)
        k = kernel_matrix(x32, x32, "rbf", 0.5)
        state, _ = fit(StructuredData(k, jnp.asarray(y, jnp.float32)), c, 1e-4)
        assert state.objective.dtype == jnp.float32
        assert int(state.iteration) > 1 and int(state.overflow) == 0
        owners, _, big_d, s = enumerate_dual(np.asarray(k), y)
        reference, _ = solve_dual_qp(owners, big_d, s, c)
        np.testing.assert_allclose(float(state.objective), reference, rtol=1e-3)
    assert traces == 1

    # the pure kernel: build_kernel's step run by hand reproduces the fit's trajectory
    data = StructuredData(k, jnp.asarray(y, jnp.float32))
    _, hist = fit(data, c, 1e-4)
    step = jax.jit(emml.build_kernel(c, 1e-4))
    manual = emml.init(data, 8)
    objectives = []
    for _ in range(30):
        manual, info = step(jax.random.key(0), manual, data)
        objectives.append(float(info.objective))
        if int(info.num_added) == 0 and float(info.subproblem_gap) <= 1e-4:
            break
    assert int(state.iteration) == len(objectives)
    np.testing.assert_allclose(hist.objective[: len(objectives)], objectives, rtol=1e-5)


def _rbf_problem(seed):
    """The tiny problem of ``seed`` with its float32 RBF kernel (γ = 0.5)."""
    x, y = tiny_problem(seed)
    x32 = jnp.asarray(x, jnp.float32)
    k = kernel_matrix(x32, x32, "rbf", 0.5)
    return StructuredData(k, jnp.asarray(y, jnp.float32))


def test_a_second_fit_of_the_same_shapes_compiles_nothing(count_compiles):
    """The outer iterations, the subproblem's sweeps and the SMO steps run through
    the runner's in-program loop: another problem, C and tolerance of the same
    shapes reuse the program."""
    settings = WorkingSetSettings(capacity=8, max_iterations=30)
    problems = [_rbf_problem(seed) for seed in (6, 7)]
    fit_emml(problems[0], 1.0, 1e-4, settings=settings)
    with count_compiles() as again:
        state, hist = fit_emml(problems[1], 3.0, 1e-3, settings=settings)
    assert again.count == 0
    ran = int(state.iteration)
    sweeps = np.asarray(hist.sweeps)
    assert 1 < ran < 30 and np.all(sweeps[:ran] >= 1) and np.all(sweeps[ran:] == -1)
    assert float(hist.subproblem_gap[ran - 1]) <= 1e-3


@pytest.mark.parametrize("case", CASES)
def test_state_is_what_its_working_set_says(case, solved):
    """Shapes (jaxtyping) and the values every field derives from mu_B, recomputed
    here from the slots: B = sum_p mu_p d_p, F = K B, gram = <d_p, d_q>, Hamming
    losses, deltas y_i - ybar with ybar in perm(y_i), the history's last entry."""
    from jaxtyping import Bool, Float, Int

    k, y, state, hist = solved[case]
    n, w = y.shape
    ws = state.working_set
    assert isinstance(ws.deltas, Float[np.ndarray, f"{n} 24 {w}"])
    assert isinstance(ws.active, Bool[np.ndarray, f"{n} 24"])
    assert isinstance(ws.gram, Float[np.ndarray, f"{n} 24 24"])
    assert isinstance(state.coefficients, Float[np.ndarray, f"{n} {w}"])
    assert isinstance(state.scores, Float[np.ndarray, f"{n} {w}"])
    assert isinstance(hist.objective, Float[np.ndarray, "200"])
    assert isinstance(hist.num_active, Int[np.ndarray, "200"])
    active = ws.active
    assert active.any() and int(state.total_added) >= active.sum()
    d = np.where(active[..., None], ws.deltas, 0.0)
    mu = ws.mu
    assert np.all(mu[~active] == 0) and np.all(mu >= 0)
    assert np.all(mu.sum(axis=1) <= case[1] + 1e-9)  # sum_ybar mu_i,ybar <= C
    coefficients = np.einsum("ip,ipw->iw", mu, d)
    np.testing.assert_allclose(state.coefficients, coefficients, atol=1e-12)
    np.testing.assert_allclose(state.scores, k @ coefficients, atol=1e-10)
    gram = np.einsum("ipw,iqw->ipq", d, d)
    both = active[:, :, None] & active[:, None, :]
    np.testing.assert_allclose(ws.gram[both], gram[both], atol=1e-12)
    # ybar = y_i - d has y_i's word count, is 0/1, differs from y_i; loss = Hamming
    ybar = y[:, None, :] - ws.deltas
    on = active
    assert np.all(np.isin(ybar[on], (0.0, 1.0)))
    np.testing.assert_array_equal(ybar[on].sum(-1), np.broadcast_to(
        y.sum(-1)[:, None], active.shape)[on])  # fmt: skip
    hamming = np.abs(ws.deltas).sum(-1)
    assert np.all(hamming[on] > 0)
    np.testing.assert_allclose(ws.losses[on], hamming[on])
    last = int(state.iteration) - 1
    assert hist.objective[last] == pytest.approx(float(state.objective), rel=1e-12)
    assert int(hist.num_active[last]) <= int(active.sum())


# --- the exact (mixture) solver ---------------------------------------------------


@pytest.mark.parametrize("case", CASES)
def test_exact_solver_matches_the_enumerated_qp(case):
    kernel_name, c, seed = case
    x, y = tiny_problem(seed)
    with jax.enable_x64(True):
        k = kernel_matrix(jnp.asarray(x), jnp.asarray(x), kernel_name, 0.5)
        state, trace = fit_emml_exact(StructuredData(k, jnp.asarray(y)), c, 1e-9)
        state, trace = jax.tree.map(np.asarray, (state, trace))
    owners, d, big_d, s = enumerate_dual(np.asarray(k), y)
    reference, mu = solve_dual_qp(owners, big_d, s, c)
    assert bool(state.converged) and float(state.max_violation) <= 1e-9
    np.testing.assert_allclose(float(state.objective), reference, rtol=1e-8)
    assert 0 <= float(state.duality_gap) <= 1e-6
    # the mixtures of the QP's multipliers (slack on ybar = y_i) give the same B
    ybar = y[owners] - d
    u_ref = c * y.astype(float)
    for i in range(len(y)):
        sel = owners == i
        u_ref[i] += mu[sel] @ (ybar[sel] - y[i])
    np.testing.assert_allclose(state.coefficients, c * y - u_ref, atol=1e-5)
    ran = int(state.gradient_steps) + int(state.sweeps)
    assert int(state.gradient_steps) > 0 and int(state.sweeps) > 0  # both phases
    assert np.all(np.isfinite(trace[:ran])) and np.all(np.isnan(trace[ran:]))
    # exact block steps never increase the dual, nor the gradient steps the
    # non-monotone rule's reference value
    assert np.all(np.diff(trace[:ran]) <= 1e-12)


def test_capped_simplex_projection_is_the_euclidean_projection():
    cp = pytest.importorskip("cvxpy")
    rng = np.random.default_rng(0)
    project = jax.jit(project_capped_simplex)  # one program for the four pairs
    for total, cap in [(1.0, 1.0), (4.0, 1.0), (7.5, 2.5), (0.3, 0.1)]:
        v = rng.normal(size=40) * 2.0
        v[:5] = v[0]  # ties
        with jax.enable_x64(True):
            got = np.asarray(project(jnp.asarray(v), total, cap))
        u = cp.Variable(40)
        cp.Problem(
            cp.Minimize(cp.sum_squares(u - v)), [u >= 0, u <= cap, cp.sum(u) == total]
        ).solve(solver="CLARABEL", tol_gap_abs=1e-12, tol_gap_rel=1e-12)
        np.testing.assert_allclose(got, u.value, atol=1e-6)
        assert got.min() >= 0 and got.max() <= cap
        np.testing.assert_allclose(got.sum(), total, rtol=1e-12)


def _realistic_words(num_words=374, sizes=(1, 4, 5, 2, 3), seed=0):
    rng = np.random.default_rng(seed)
    y = np.zeros((len(sizes), num_words))
    for i, r in enumerate(sizes):
        y[i, rng.choice(num_words, size=r, replace=False)] = 1.0
    return y


@pytest.mark.parametrize("c", [1.0, 0.01])
def test_independent_vreps_match_the_closed_form_at_corel5k_size(c):
    # K diagonal: the dual splits into one problem per VRep,
    #   min_u 1/2 k_ii ||C y_i - u||^2 - 2 u'(1 - y_i),  0 <= u <= C, sum u = r C.
    # By symmetry every true word keeps C - s and every one of the W - r wrong words
    # gets s r / (W - r); minimizing 1/2 k r s^2 W / (W - r) - 2 r s over s gives
    # s* = min(2 (W - r) / (k W), C, C (W - r) / r). The optimum spreads mass over
    # all W - r wrong words: 373 outputs for r = 1, beyond any per-VRep working set.
    y = _realistic_words()
    n, w = y.shape
    diag = np.array([1.0, 0.5, 2.0, 1.5, 0.25])
    with jax.enable_x64(True):
        data = StructuredData(jnp.asarray(np.diag(diag)), jnp.asarray(y))
        state, _ = fit_emml_exact(data, c, 1e-9)
        state = jax.tree.map(np.asarray, state)
        r = y.sum(1)
        s_star = np.minimum(np.minimum(2 * (w - r) / (diag * w), c), c * (w - r) / r)
        u_star = np.where(y > 0, c - s_star[:, None], (s_star * r / (w - r))[:, None])
        closed = float(mixture_objective(data, jnp.asarray(u_star), c))
    assert bool(state.converged)
    np.testing.assert_allclose(state.mixtures, u_star, atol=1e-8)
    np.testing.assert_allclose(float(state.objective), closed, rtol=1e-10)
    per_vrep = 0.5 * diag * r * s_star**2 * w / (w - r) - 2 * r * s_star
    np.testing.assert_allclose(closed, per_vrep.sum(), rtol=1e-10)
    # every wrong word of every VRep carries mass at the optimum
    assert np.all((state.mixtures > 0) | (y > 0))


@jax.jit
def _uncoupled_point(data, c, diagonal):
    """:func:`mixture_state` (tolerance 1e-6) of :func:`uncoupled_mixtures`: one
    compiled program, not one per primitive of two eager calls."""
    return mixture_state(data, uncoupled_mixtures(data.words, c, diagonal), c, 1e-6)


@pytest.mark.parametrize("c", [1.0, 0.01])
def test_uncoupled_mixtures_are_the_exact_optimum_of_a_diagonal_kernel(c):
    # the library's no-solve point equals what the exact solver converges to
    y = _realistic_words()
    diag = np.array([1.0, 0.5, 2.0, 1.5, 0.25])
    with jax.enable_x64(True):
        data = StructuredData(jnp.asarray(np.diag(diag)), jnp.asarray(y))
        solved, _ = fit_emml_exact(data, c, 1e-9)
        point = _uncoupled_point(data, c, jnp.asarray(diag))
        u = point.mixtures
    np.testing.assert_allclose(np.asarray(u), np.asarray(solved.mixtures), atol=1e-8)
    assert bool(point.converged) and int(point.sweeps) == 0
    assert float(point.duality_gap) <= 1e-6
    np.testing.assert_allclose(float(point.objective), float(solved.objective))
    if c == 1.0:  # an RBF kernel's unit diagonal: s* = C, B = Y - r/(W - r) (1 - Y)
        with jax.enable_x64(True):
            ones = jnp.ones(len(y))
            u = jax.jit(uncoupled_mixtures)(jnp.asarray(y), c, ones)
        r = y.sum(1, keepdims=True)
        expected = y - r / (y.shape[1] - r) * (1 - y)
        np.testing.assert_allclose(c * y - np.asarray(u), expected, atol=1e-12)


def test_uncoupled_mixtures_are_feasible_but_not_optimal_under_a_coupled_kernel():
    # the shape of the cvxpy test below: the two share one compiled exact fit
    y = _realistic_words(num_words=320, sizes=(1, 4, 3, 2), seed=2)
    x = np.random.default_rng(2).normal(size=(4, 3))
    with jax.enable_x64(True):
        k = kernel_matrix(jnp.asarray(x), jnp.asarray(x), "rbf", 0.3)
        data = StructuredData(k, jnp.asarray(y))
        point = _uncoupled_point(data, 1.0, jnp.diag(k))
        solved, _ = fit_emml_exact(data, 1.0, 1e-9)
    u = np.asarray(point.mixtures)
    assert np.all(u >= -1e-12) and np.all(u <= 1.0 + 1e-12)
    np.testing.assert_allclose(u.sum(1), y.sum(1))
    assert not bool(point.converged)
    gap = float(point.objective) - float(solved.objective)
    assert 0 < gap <= float(point.duality_gap) + 1e-9  # the gap bounds the excess


def test_coupled_vreps_match_cvxpy_at_corel5k_size():
    cp = pytest.importorskip("cvxpy")
    y = _realistic_words(num_words=320, sizes=(1, 4, 3, 2), seed=1)
    n, w = y.shape
    rng = np.random.default_rng(1)
    x = rng.normal(size=(n, 3))
    c = 1.0
    with jax.enable_x64(True):
        k = np.asarray(kernel_matrix(jnp.asarray(x), jnp.asarray(x), "rbf", 0.3))
        state, _ = fit_emml_exact(
            StructuredData(jnp.asarray(k), jnp.asarray(y)), c, 1e-9
        )
        state = jax.tree.map(np.asarray, state)
    # the same dual, written over mixtures, by a generic conic solver
    u = cp.Variable((n, w))
    b = c * y - u
    ev, v = np.linalg.eigh(k)
    half = (v * np.sqrt(np.clip(ev, 0.0, None))).T  # K = half' half
    objective = 0.5 * cp.sum_squares(half @ b) - 2 * cp.sum(cp.multiply(u, 1 - y))
    cons = [u >= 0, u <= c, cp.sum(u, axis=1) == c * y.sum(1)]
    prob = cp.Problem(cp.Minimize(objective), cons)
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10)
    assert bool(state.converged)
    np.testing.assert_allclose(float(state.objective), prob.value, rtol=1e-7)
    np.testing.assert_allclose(state.coefficients, c * y - u.value, atol=1e-5)


@pytest.mark.parametrize("block", [3, 64])
def test_blocked_score_updates_follow_the_one_vrep_at_a_time_iterates(block):
    # 11 VReps: block 3 leaves a padded last block (the path a block of 7, padded
    # second, takes too: each block size is two more compiles), 64 is one block
    rng = np.random.default_rng(4)
    y = (rng.random((11, 9)) < 0.3).astype(float)
    y[np.arange(11), rng.integers(0, 9, 11)] = 1.0
    x = rng.normal(size=(11, 3))
    with jax.enable_x64(True):
        k = kernel_matrix(jnp.asarray(x), jnp.asarray(x), "rbf", 0.3)
        data = StructuredData(k, jnp.asarray(y))
        runs = [
            jax.tree.map(
                np.asarray,
                fit_emml_exact(
                    data, 1.0, 1e-12, max_sweeps=s, block=b, handoff=np.inf
                ),  # sweeps only
            )
            for b in (1, block)
            for s in (1, 5)
        ]
    (one_1, trace_1), (one_5, _), (blk_1, trace_b), (blk_5, _) = runs
    assert int(one_5.sweeps) == int(blk_5.sweeps) == 5  # neither has converged
    np.testing.assert_allclose(blk_1.mixtures, one_1.mixtures, atol=1e-12)
    np.testing.assert_allclose(blk_5.mixtures, one_5.mixtures, atol=1e-10)
    np.testing.assert_allclose(trace_b, trace_1, rtol=1e-12)
    np.testing.assert_allclose(blk_5.scores, one_5.scores, atol=1e-10)


def _wide_rbf_problem(n=40, w=30, seed=5):
    # a wide RBF kernel: its top eigenvalue is ~15 times the diagonal, as Corel5k's
    # is ~450 times at 3000 VReps
    rng = np.random.default_rng(seed)
    y = (rng.random((n, w)) < 0.1).astype(float)
    y[np.arange(n), rng.integers(0, w, n)] = 1.0
    x = rng.normal(size=(n, 4))
    k = kernel_matrix(jnp.asarray(x), jnp.asarray(x), "rbf", 0.2)
    return StructuredData(k, jnp.asarray(y))


def _kkt_violation(k, y, u, c):
    # independent of the solver: max over VReps of max_{u_w < C} a_w - min_{u_w > 0} a_w
    a = k @ (c * y - u) + 2.0 * (1.0 - y)
    up = np.where(u < c, a, -np.inf).max(1)
    down = np.where(u > 0, a, np.inf).min(1)
    return float(np.maximum(up - down, 0.0).max())


def test_gradient_then_sweeps_reach_the_sweeps_only_optimum():
    with jax.enable_x64(True):
        data = _wide_rbf_problem()
        c = 2.0
        new, trace = fit_emml_exact(data, c, 1e-8, max_sweeps=20000)
        old, _ = fit_emml_exact(data, c, 1e-8, max_sweeps=20000, handoff=np.inf)
        new, old, trace = jax.tree.map(np.asarray, (new, old, trace))
    k, y = np.asarray(data.kernel), np.asarray(data.words)
    assert int(new.gradient_steps) > 0 and int(old.gradient_steps) == 0
    assert bool(new.converged) and bool(old.converged)
    assert _kkt_violation(k, y, new.mixtures, c) <= 1e-8
    np.testing.assert_allclose(float(new.objective), float(old.objective), rtol=1e-10)
    np.testing.assert_allclose(new.scores, old.scores, atol=1e-6)
    assert 0 <= float(new.duality_gap) <= 1e-5
    ran = int(new.gradient_steps) + int(new.sweeps)
    assert np.all(np.diff(trace[:ran]) <= 1e-10)


def test_projected_gradient_alone_reaches_the_optimum():
    @jax.jit  # one compiled program, not one per primitive of eager calls
    def gradient_alone(data):
        u, steps, trace = projected_gradient(data, 1.0, 1e-8, 5000)
        return u, steps, trace, mixture_state(data, u, 1.0, 1e-8)

    with jax.enable_x64(True):
        data = _wide_rbf_problem(seed=6)
        u, steps, trace, state = gradient_alone(data)
        swept, _ = fit_emml_exact(data, 1.0, 1e-8, max_sweeps=20000, handoff=np.inf)
        u, steps, trace = np.asarray(u), int(steps), np.asarray(trace)
    k, y = np.asarray(data.kernel), np.asarray(data.words)
    assert 0 < steps < 5000 and bool(state.converged)
    assert _kkt_violation(k, y, u, 1.0) <= 1e-8
    assert np.all(u >= 0) and np.all(u <= 1.0)
    np.testing.assert_allclose(u.sum(1), y.sum(1), rtol=1e-12)
    np.testing.assert_allclose(
        float(state.objective), float(swept.objective), rtol=1e-10
    )
    assert np.all(np.diff(trace[:steps]) <= 1e-12) and np.all(np.isnan(trace[steps:]))


@pytest.mark.parametrize("sweeps", [0, 2])
def test_converged_is_reported_honestly_when_the_budget_runs_out(sweeps):
    # a budget that ends inside the gradient phase (3 steps) or 2 sweeps after it
    with jax.enable_x64(True):
        data = _wide_rbf_problem(seed=7)
        # the sweeps-only tests' budget: one compiled fit shared with them
        full, _ = fit_emml_exact(data, 2.0, 1e-8, max_sweeps=20000)
        cap = int(full.gradient_steps) + sweeps if sweeps else 3
        state, trace = fit_emml_exact(data, 2.0, 1e-8, max_sweeps=cap)
        state, trace = jax.tree.map(np.asarray, (state, trace))
    k, y = np.asarray(data.kernel), np.asarray(data.words)
    violation = _kkt_violation(k, y, state.mixtures, 2.0)
    assert bool(full.converged)
    assert (int(state.gradient_steps), int(state.sweeps)) == (cap - sweeps, sweeps)
    assert not bool(state.converged) and violation > 1e-8
    np.testing.assert_allclose(float(state.max_violation), violation, rtol=1e-9)
    assert np.all(np.isfinite(trace))


def test_a_second_exact_fit_of_the_same_shapes_compiles_nothing(count_compiles):
    """The gradient steps and the sweeps run through the runner's in-program loop:
    another problem, C, tolerance and handoff of the same shapes reuse the program;
    the budget still bounds both phases."""
    problems = [_rbf_problem(seed) for seed in (6, 7)]
    fit_emml_exact(problems[0], 1.0, 1e-4, max_sweeps=12, handoff=1.0)
    with count_compiles() as again:
        state, trace = fit_emml_exact(
            problems[1], 3.0, 1e-6, max_sweeps=12, handoff=0.5
        )
    assert again.count == 0
    ran = int(state.gradient_steps) + int(state.sweeps)
    assert int(state.gradient_steps) > 0 and int(state.sweeps) > 0 and ran <= 12
    trace = np.asarray(trace)
    assert np.all(np.isfinite(trace[:ran])) and np.all(np.isnan(trace[ran:]))
    assert bool(state.converged) == (float(state.max_violation) <= 1e-6)


def test_an_exact_fit_compiles_once_however_its_floats_are_passed(count_compiles):
    """C, the tolerance and the handoff positional, by keyword, left at their
    defaults or as NumPy / JAX scalars: one program (jit keys on how arguments are
    passed; the public function passes them all to it as arrays)."""
    problem = _rbf_problem(6)
    fit_emml_exact(problem, 1.0, 1e-4, max_sweeps=12, handoff=1.0)
    with count_compiles() as again:
        fit_emml_exact(problem, c=2.0, max_sweeps=12)
        fit_emml_exact(
            problem, jnp.float32(1.0), np.float64(1e-3), max_sweeps=12, handoff=np.inf
        )
    assert again.count == 0


def test_block_size_must_be_positive():
    data = StructuredData(jnp.eye(2), jnp.array([[1.0, 0.0], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="block must be >= 1"):
        fit_emml_exact(data, 1.0, block=0)


def test_working_set_solver_overflows_where_the_exact_one_converges():
    # the reported failure: 32 slots per VRep cannot hold an optimum that needs
    # ceil((W - r) / r) outputs; the fit says so instead of claiming convergence
    # the closed-form test's words (a unit kernel): its compiled exact fit is reused
    y = _realistic_words()
    with jax.enable_x64(True):
        data = StructuredData(jnp.eye(len(y)), jnp.asarray(y))
        settings = WorkingSetSettings(capacity=8, violators_per_vrep=4)
        state, _ = fit_emml(data, 1.0, 1e-3, settings=settings)
        exact, _ = fit_emml_exact(data, 1.0, 1e-3)
    assert int(state.overflow) > 0
    assert bool(exact.converged)
    assert float(exact.objective) < float(state.objective)


def test_ties_among_wrong_words_are_broken_at_random():
    argmax = jax.jit(loss_augmented_argmax)  # one program with a key, one without
    y = jnp.zeros(50).at[7].set(1.0)
    f = jnp.zeros(50)  # every wrong word ties
    assert int(jnp.argmax(argmax(f, y))) == 0  # by index without key
    picks = {int(jnp.argmax(argmax(f, y, jax.random.key(s)))) for s in range(20)}
    assert len(picks) > 5 and 7 not in picks
    # a strictly better word still wins whatever the key
    best = argmax(f.at[30].set(0.1), y, jax.random.key(3))
    assert int(jnp.argmax(best)) == 30
