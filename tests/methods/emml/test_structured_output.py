"""Joint feature map, joint kernel, Hamming loss, loss-augmented argmax and VReps."""

import itertools

import numpy as np
import pytest

import jax
import jax.numpy as jnp

from jaxannot.methods.emml.structured_output import (
    hamming_loss,
    joint_feature_map,
    joint_kernel,
    kernel_matrix,
    kmeans_vreps,
    random_vreps,
    word_scores,
)
from jaxannot.solvers.qp import loss_augmented_argmax


def _perm(y):
    r = int(y.sum())
    for comb in itertools.combinations(range(len(y)), r):
        yb = np.zeros(len(y))
        yb[list(comb)] = 1.0
        yield yb


def test_joint_kernel_is_the_inner_product_of_joint_feature_maps(rng):
    # linear kernel: phi(x) = x, so K((x_i, ybar), (x_j, ytilde)) must equal
    # <Phi_i(y_i) - Phi_i(ybar), Phi_j(y_j) - Phi_j(ytilde)> exactly (float64 algebra).
    x = rng.normal(size=(2, 4))
    y = np.array([[1, 0, 1, 0, 0], [0, 1, 0, 0, 1.0]])
    ybar = np.array([0, 1, 1, 0, 0.0])
    ytil = np.array([1, 0, 0, 0, 1.0])
    k01 = float(x[0] @ x[1])
    lhs = joint_kernel(k01, y[0], ybar, y[1], ytil)
    phi_0 = joint_feature_map(x[0], y[0]) - joint_feature_map(x[0], ybar)
    phi_1 = joint_feature_map(x[1], y[1]) - joint_feature_map(x[1], ytil)
    np.testing.assert_allclose(float(lhs), float(phi_0 @ phi_1), rtol=1e-6)
    # eq. (2): Phi(x, ybar) = sum_j ybar_j Phi(x, e_j)
    parts = sum(ybar[j] * joint_feature_map(x[0], np.eye(5)[j]) for j in range(5))
    np.testing.assert_allclose(joint_feature_map(x[0], ybar), parts, rtol=1e-6)


def test_hamming_loss_counts_twice_the_swaps():
    y = np.array([1, 1, 0, 0, 0.0])
    for yb in _perm(y):
        swaps = int(((yb == 1) & (y == 0)).sum())
        assert float(hamming_loss(yb, y)) == 2 * swaps


@pytest.mark.parametrize("seed", range(5))
def test_loss_augmented_argmax_matches_enumeration(seed):
    rng = np.random.default_rng(seed)
    w = 7
    y = np.zeros(w)
    y[rng.choice(w, size=rng.integers(1, 5), replace=False)] = 1.0
    f = rng.normal(size=w) * 2.0
    best = max(_perm(y), key=lambda yb: f @ yb + np.abs(yb - y).sum())
    got = np.asarray(loss_augmented_argmax(jnp.asarray(f), jnp.asarray(y)))
    assert got.sum() == y.sum()
    np.testing.assert_allclose(
        f @ got + np.abs(got - y).sum(), f @ best + np.abs(best - y).sum(), rtol=1e-6
    )


def test_kernels_and_word_scores(rng):
    a, b = rng.normal(size=(3, 2)), rng.normal(size=(4, 2))
    np.testing.assert_allclose(kernel_matrix(a, b, "linear"), a @ b.T, rtol=1e-6)
    d2 = ((a[:, None] - b[None]) ** 2).sum(-1)
    np.testing.assert_allclose(
        kernel_matrix(a, b, "rbf", 0.3), np.exp(-0.3 * d2), rtol=1e-5
    )
    coef = rng.normal(size=(4, 5))
    rows = np.asarray(kernel_matrix(a, b, "rbf", 0.3))
    np.testing.assert_allclose(word_scores(rows, coef), rows @ coef, rtol=1e-5)
    with pytest.raises(ValueError, match="unknown kernel 'poly'; valid: linear, rbf"):
        kernel_matrix(a, b, "poly")


def test_vreps(rng):
    x = np.concatenate([rng.normal(size=(20, 2)), rng.normal(size=(20, 2)) + 8.0])
    y = np.zeros((40, 4), np.float32)
    y[:20, 0] = 1.0
    y[20:, 1] = 1.0
    y[::5, 2] = 1.0  # a minority word
    y[7] = 0.0  # an unannotated image is never a VRep
    rv = random_vreps(jax.random.key(0), x, y, 10)
    assert rv.features.shape == (10, 2) and np.all(np.asarray(rv.words).sum(1) > 0)
    km = kmeans_vreps(jax.random.key(1), x, y, 2, word_rule="majority")
    words = sorted(tuple(np.asarray(w).astype(int)) for w in km.words)
    assert words == [(0, 1, 0, 0), (1, 0, 0, 0)]  # the two clusters, majority words
    union = kmeans_vreps(jax.random.key(1), x, y, 2, word_rule="union")
    assert np.all(np.asarray(union.words) >= np.asarray(km.words))
    assert np.asarray(union.words)[:, 2].sum() == 2  # the minority word survives union
    with pytest.raises(ValueError, match="word_rule"):
        kmeans_vreps(jax.random.key(1), x, y, 2, word_rule="mode")
    with pytest.raises(ValueError, match="no image has any word"):
        random_vreps(jax.random.key(0), x, np.zeros_like(y), 3)
