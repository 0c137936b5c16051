"""The cutting-plane baseline (Tsochantaridis et al. 2004) reaches the enumerated QP
optimum and EMML's objective with the same inner solver."""

import importlib.util
import pathlib

import numpy as np
import pytest

import jax
import jax.numpy as jnp

from jaxannot.methods.emml.cutting_plane import CuttingPlaneSettings, fit_cutting_plane
from jaxannot.methods.emml.structured_output import StructuredData, kernel_matrix
from jaxannot.methods.emml.working_set import (
    WorkingSetSettings,
    fit_emml,
)

# the brute-force reference lives next to this file (pytest runs in importlib mode)
_spec = importlib.util.spec_from_file_location(
    "_emml_reference", pathlib.Path(__file__).with_name("_emml_reference.py")
)
_ref = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_ref)
enumerate_dual, expand_mu = _ref.enumerate_dual, _ref.expand_mu
solve_dual_qp, tiny_problem = _ref.solve_dual_qp, _ref.tiny_problem


@pytest.mark.parametrize("kernel_name,c,seed", [("rbf", 1.0, 10), ("linear", 5.0, 11)])
def test_cutting_plane_matches_qp_and_emml(kernel_name, c, seed):
    # float64, epsilon 1e-9: both solvers stop at the same KKT accuracy, so all three
    # objectives agree far below the 1e-4 relative the benchmark uses.
    x, y = tiny_problem(seed)
    with jax.enable_x64(True):
        k = kernel_matrix(jnp.asarray(x), jnp.asarray(x), kernel_name, 0.5)
        data = StructuredData(k, jnp.asarray(y))
        cp_state, cp_hist = fit_cutting_plane(
            data, c, 1e-9, settings=CuttingPlaneSettings(capacity=24)
        )
        em_state, _ = fit_emml(data, c, 1e-9, settings=WorkingSetSettings(capacity=24))
    owners, d, big_d, s = enumerate_dual(np.asarray(k), y)
    reference, _ = solve_dual_qp(owners, big_d, s, c)
    assert int(cp_state.overflow) == 0
    np.testing.assert_allclose(float(cp_state.objective), reference, rtol=1e-4)
    np.testing.assert_allclose(
        float(cp_state.objective), float(em_state.objective), rtol=1e-6
    )
    mu = expand_mu(owners, d, cp_state.working_set)
    np.testing.assert_allclose(0.5 * mu @ big_d @ mu - s @ mu, reference, rtol=1e-4)
    # passes never increase the dual objective; the last pass adds nothing
    passes = int(cp_state.iteration)
    objective = np.asarray(cp_hist.objective)[:passes]
    assert np.all(np.diff(objective) <= 1e-12)
    assert int(cp_hist.num_added[passes - 1]) == 0
    # the cutting plane re-solves once per added constraint and never removes any
    assert int(cp_state.resolves) == int(cp_state.total_added)
    assert int(np.asarray(cp_state.working_set.active).sum()) == int(
        cp_state.total_added
    )


# (3, 4): several candidates per VRep and a block of 4 of the 6 VReps per re-solve
# in one compile (the two options were separate cases, one compile each); (4, 100):
# one re-solve per pass, whose count the last assertion pins down exactly
@pytest.mark.parametrize("candidates,batch", [(3, 4), (4, 100)])
def test_batched_cutting_plane_reaches_the_qp_optimum(candidates, batch):
    # several candidates per VRep and several VReps per re-solve change only which
    # constraints enter when: the optimum of the dual is the same
    x, y = tiny_problem(10)
    with jax.enable_x64(True):
        k = kernel_matrix(jnp.asarray(x), jnp.asarray(x), "rbf", 0.5)
        data = StructuredData(k, jnp.asarray(y))
        settings = CuttingPlaneSettings(capacity=40, candidates=candidates, batch=batch)
        state, hist = fit_cutting_plane(data, 1.0, 1e-9, settings=settings)
    owners, _, big_d, s = enumerate_dual(np.asarray(k), y)
    reference, _ = solve_dual_qp(owners, big_d, s, 1.0)
    assert int(state.overflow) == 0
    np.testing.assert_allclose(float(state.objective), reference, rtol=1e-4)
    passes = int(state.iteration)
    assert int(hist.num_added[passes - 1]) == 0
    n = y.shape[0]
    # one re-solve per block that gained constraints: at most ceil(n / batch) a pass
    assert int(state.resolves) <= passes * -(-n // batch)
    if batch >= n:
        assert int(state.resolves) == passes - 1  # the last pass adds nothing
    assert int(np.asarray(state.working_set.active).sum()) == int(state.total_added)


def test_cutting_plane_options_are_checked():
    from jaxannot.methods.emml.cutting_plane import build_kernel

    with pytest.raises(ValueError, match="candidates and batch"):
        build_kernel(1.0, 1e-3, CuttingPlaneSettings(batch=0))
