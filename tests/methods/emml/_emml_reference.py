"""Brute-force reference for the structured max-margin dual (test-only helper).

Enumerates perm(y_i) on tiny problems, builds D and S of the dual (9) of Guo et al.
(2016) explicitly and solves it with cvxpy (CLARABEL, tight tolerances).
"""

import itertools

import cvxpy as cp
import numpy as np

__all__ = ["enumerate_dual", "solve_dual_qp", "tiny_problem", "expand_mu"]


def tiny_problem(seed: int, num_vreps: int = 6, num_words: int = 6, dims: int = 3):
    """Random features and word sets with 1 to 3 words each."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(num_vreps, dims))
    y = np.zeros((num_vreps, num_words))
    for i in range(num_vreps):
        y[i, rng.choice(num_words, size=rng.integers(1, 4), replace=False)] = 1.0
    return x, y


def enumerate_dual(kernel: np.ndarray, y: np.ndarray):
    """All constraints (i, ybar != y_i): owners, deltas d = y_i - ybar, D and S."""
    owners, deltas = [], []
    for i in range(len(y)):
        r = int(y[i].sum())
        for comb in itertools.combinations(range(y.shape[1]), r):
            ybar = np.zeros(y.shape[1])
            ybar[list(comb)] = 1.0
            if np.array_equal(ybar, y[i]):
                continue
            owners.append(i)
            deltas.append(y[i] - ybar)
    owners = np.array(owners)
    d = np.stack(deltas)
    big_d = np.asarray(kernel, np.float64)[owners][:, owners] * (d @ d.T)
    s = np.abs(d).sum(1)
    return owners, d, big_d, s


def solve_dual_qp(owners, big_d, s, c):
    """min 1/2 mu'D mu - mu'S  s.t. sum_{ybar} mu_{i,ybar} <= C, mu >= 0 (cvxpy)."""
    ev, v = np.linalg.eigh(big_d)
    factor = v * np.sqrt(np.clip(ev, 0.0, None))
    mu = cp.Variable(len(s))
    cons = [mu >= 0] + [cp.sum(mu[owners == i]) <= c for i in np.unique(owners)]
    prob = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(factor.T @ mu) - s @ mu), cons)
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    return float(prob.value), np.asarray(mu.value)


def expand_mu(owners, d, working_set):
    """Map a solver's working-set multipliers onto the enumerated constraint list."""
    mu = np.zeros(len(owners))
    deltas = np.asarray(working_set.deltas)
    active = np.asarray(working_set.active)
    values = np.asarray(working_set.mu)
    for i, p in zip(*np.nonzero(active), strict=True):
        match = np.flatnonzero((owners == i) & np.all(d == deltas[i, p], axis=1))
        assert match.size == 1, "working-set constraint not found in the enumeration"
        mu[match[0]] += values[i, p]
    return mu
