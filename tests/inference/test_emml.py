"""EMML (Algorithm 1 of Guo et al. 2016) against an enumerated QP, KKT (10),
monotonicity, Theorem 3.5 and compile-once."""

import importlib.util
import pathlib

import numpy as np
import pytest

import jax
import jax.numpy as jnp

from jaxannot.inference import emml
from jaxannot.inference.emml import StructuredData, fit_emml, theorem_3_5_bound
from jaxannot.models.structured_output import kernel_matrix

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
        state, hist = fit_emml(StructuredData(k, jnp.asarray(y)), c, tol, capacity=24)
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


@pytest.mark.parametrize("case", CASES)
def test_constraint_count_within_theorem_3_5(case, solved):
    k, y, state, hist = solved[case]
    with jax.enable_x64(True):
        bound = theorem_3_5_bound(
            StructuredData(jnp.asarray(k), jnp.asarray(y)), case[1], 1e-9
        )
    num_active = int(np.asarray(state.working_set.active).sum())
    assert 0 < num_active <= int(state.total_added) <= bound
    # far fewer constraints than the enumerated dual has
    owners, *_ = enumerate_dual(k, y)
    assert num_active < len(owners)


def test_fit_compiles_once_and_float32_agrees_with_the_qp():
    # float32 with tolerance 1e-4: gradients carry ~1e-6 relative rounding, so the
    # objective agrees with the float64 QP to well under 1e-3 relative.
    traces = 0

    def counted(data, c, tol):
        nonlocal traces
        traces += 1
        return fit_emml.__wrapped__(data, c, tol, capacity=8, max_iterations=30)

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


def test_state_and_history_shapes(solved):
    from jaxtyping import Bool, Float, Int

    _, y, state, hist = solved[CASES[0]]
    n, w = y.shape
    ws = state.working_set
    assert isinstance(ws.deltas, Float[np.ndarray, f"{n} 24 {w}"])
    assert isinstance(ws.active, Bool[np.ndarray, f"{n} 24"])
    assert isinstance(ws.gram, Float[np.ndarray, f"{n} 24 24"])
    assert isinstance(state.coefficients, Float[np.ndarray, f"{n} {w}"])
    assert isinstance(state.scores, Float[np.ndarray, f"{n} {w}"])
    assert isinstance(hist.objective, Float[np.ndarray, "200"])
    assert isinstance(hist.num_active, Int[np.ndarray, "200"])
