"""ALE eigenfunctions: per-dimension solve vs scipy, analytic cosines, IALE == ALE."""

import numpy as np
import pytest
import scipy.linalg

import jax.numpy as jnp

from jaxannot.methods.ale.eigenfunctions import ale_embed, fit_ale, fit_pca
from jaxannot.methods.ale.eigenproblem import (
    EIGH_COPIES,
    density_eigenproblem,
    histograms,
    solve_and_select_eigenfunctions,
    solve_eigenfunctions,
)


def test_per_dimension_solve_matches_scipy(rng):
    dims, bins = 3, 12
    counts = rng.integers(0, 50, size=(dims, bins)).astype(np.float32)
    counts[1, 4] = 0.0  # an empty bin is guarded by the density floor
    centres = np.cumsum(rng.uniform(0.5, 1.0, size=(dims, bins)), axis=1)
    t = 1.5
    values, functions = solve_eigenfunctions(
        jnp.asarray(counts), jnp.asarray(centres, jnp.float32), t
    )
    for k in range(dims):
        a, b, p = density_eigenproblem(
            jnp.asarray(counts[k]), jnp.asarray(centres[k]), t
        )
        a, b, p = (np.asarray(v, np.float64) for v in (a, b, p))
        ref_vals, ref_vecs = scipy.linalg.eigh(a, np.diag(b))
        # float32 vs float64; eigenvalues are O(1), tolerance 1e-4
        np.testing.assert_allclose(np.asarray(values[k]), ref_vals, atol=1e-4)
        # ours are scaled to unit second moment under p; compare directions up to sign
        g = np.asarray(functions[k], np.float64)
        ref = ref_vecs / np.sqrt((p[:, None] * ref_vecs**2).sum(0))
        for j in range(1, 5):  # well-separated low eigenvalues
            sign = np.sign(g[:, j] @ (p * ref[:, j]))
            np.testing.assert_allclose(g[:, j], sign * ref[:, j], atol=5e-3)
        # the trivial eigenfunction is constant with eigenvalue 0
        assert abs(values[k, 0]) < 1e-5
        np.testing.assert_allclose(g[:, 0], 1.0, atol=1e-3)


def test_uniform_density_gives_neumann_cosines():
    """Uniform density on an interval: the normalized Laplacian's limit is the Neumann
    Laplacian, with eigenfunctions cos(kπ(x − lo)/(hi − lo)) and eigenvalues ∝ k²."""
    bins, t = 200, 0.005
    counts = jnp.full((1, bins), 100.0)
    centres = (np.arange(bins) + 0.5) / bins
    values, functions = solve_eigenfunctions(counts, jnp.asarray(centres[None]), t)
    values, g = np.asarray(values[0]), np.asarray(functions[0])
    for k in range(1, 6):
        ref = np.sqrt(2.0) * np.cos(k * np.pi * centres)  # unit second moment
        sign = np.sign(g[:, k] @ ref)
        # the kernel's boundary layer costs O(t k) at the ends: 0.035 at k = 5
        np.testing.assert_allclose(sign * g[:, k], ref, atol=0.04)
    ratios = values[1:6] / values[1]
    np.testing.assert_allclose(ratios, np.arange(1, 6) ** 2, rtol=0.01)


def test_sampled_uniform_data_recovers_cosines(rng):
    x = rng.uniform(0.0, 1.0, size=(20000, 1)).astype(np.float32)
    model = fit_ale(
        x,
        n_components=1,
        num_bins=40,
        num_eigenfunctions=4,
        bandwidth=0.1,
        clip=0.0,
        standardize=False,
    )
    eig = model.eigenfunctions
    lo, width = float(eig.lo[0]), float(eig.width[0])
    centres = lo + (np.arange(40) + 0.5) * width
    for k in range(4):
        ref = np.cos((k + 1) * np.pi * (centres - lo) / (40 * width))
        corr = np.corrcoef(np.asarray(eig.table[k]), ref)[0, 1]
        assert abs(corr) > 0.99  # histogram noise of 500 samples per bin
    # U columns have unit mean square (the density normalization)
    u = ale_embed(model, x)
    np.testing.assert_allclose((u**2).mean(0), 1.0, atol=0.05)


def test_selection_prefers_wide_dimensions(rng):
    # dimension 0 spans 10x the range of dimension 1: its low frequencies come first
    x = rng.uniform(size=(5000, 2)) * np.array([10.0, 1.0])
    model = fit_ale(
        x.astype(np.float32),
        n_components=2,
        num_bins=30,
        num_eigenfunctions=6,
        bandwidth=0.1,
        clip=0.0,
        standardize=False,
    )
    dims = np.asarray(model.eigenfunctions.dims)
    assert np.all(dims[:3] == 0)
    assert np.all(np.diff(np.asarray(model.eigenfunctions.eigenvalues)) >= 0)


def test_iale_on_training_images_reproduces_ale(rng):
    x = rng.normal(size=(600, 12)).astype(np.float32) @ rng.normal(size=(12, 12))
    x = x.astype(np.float32)
    model = fit_ale(x, n_components=6, num_bins=20, num_eigenfunctions=30)
    u_all = ale_embed(model, x, batch_size=600)
    u_batches = ale_embed(model, x, batch_size=128)  # new images arrive in batches
    np.testing.assert_allclose(u_batches, u_all, atol=1e-5)
    # and directly against eq. (8) with numpy's interpolation at the bin centres
    eig = model.eigenfunctions
    s = (x - model.pca.mean) @ model.pca.components
    for i in range(0, 30, 7):
        d = int(eig.dims[i])
        centres = float(eig.lo[i]) + (np.arange(20) + 0.5) * float(eig.width[i])
        ref = np.interp(s[:, d], centres, np.asarray(eig.table[i]))
        np.testing.assert_allclose(u_all[:, i], ref, atol=1e-4)


def test_streaming_pca_matches_numpy(rng):
    x = (rng.normal(size=(1000, 6)) @ rng.normal(size=(6, 6)) + 3.0).astype(np.float32)
    pca = fit_pca(x, 3, standardize=False, chunk_size=128)
    ref_vals, ref_vecs = np.linalg.eigh(np.cov(x.T.astype(np.float64)))
    np.testing.assert_allclose(pca.variances, ref_vals[::-1][:3], rtol=1e-4)
    for j in range(3):
        assert abs(abs(pca.components[:, j] @ ref_vecs[:, -1 - j]) - 1.0) < 1e-4
    np.testing.assert_allclose(pca.mean, x.mean(0), rtol=1e-5)


def test_histogram_counts_in_range(rng):
    s = rng.uniform(-1, 2, size=(500, 2)).astype(np.float32)
    counts = histograms(s, np.array([0.0, 0.0]), np.array([1.0, 1.0]), 10)
    for k in range(2):
        ref, _ = np.histogram(s[:, k], bins=10, range=(0.0, 1.0))
        np.testing.assert_allclose(counts[k], ref)


def test_bad_input():
    with pytest.raises(ValueError, match="num_bins"):
        fit_ale(np.zeros((10, 2), np.float32), num_bins=2)
    with pytest.raises(ValueError, match="2-D"):
        fit_ale(np.zeros(10, np.float32))


def test_chunked_passes_compile_once(rng):
    """Chunks are padded to chunk_size, so a multi-chunk fit compiles each pass once."""
    from jaxannot.methods.ale import eigenfunctions as ef
    from jaxannot.methods.ale.eigenproblem import chunk_histogram

    x = rng.normal(size=(1050, 7)).astype(np.float32)  # 11 chunks, the last partial
    passes = (ef._chunk_moments, ef._project, chunk_histogram, ef._embed_batch)
    before = [f._cache_size() for f in passes]
    model = fit_ale(
        x, n_components=3, num_bins=10, num_eigenfunctions=5, chunk_size=100
    )
    ale_embed(model, x, batch_size=100)
    after = [f._cache_size() for f in passes]
    assert all(a - b <= 1 for a, b in zip(after, before, strict=True))


@pytest.mark.parametrize("per_chunk", [1, 3, 7])
def test_chunked_selection_equals_one_solve_over_every_dimension(rng, per_chunk):
    """Solving a few dimensions at a time and keeping the best c_D candidates gives
    the selection of one solve over all dimensions: the c_D smallest non-trivial
    eigenvalues, ties by dimension then order (3 of 7 dimensions repeat another,
    so their eigenvalues tie exactly)."""
    dims, bins, count = 7, 12, 15
    counts = rng.integers(0, 50, size=(dims, bins)).astype(np.float32)
    centres = np.cumsum(rng.uniform(0.5, 1.0, size=(dims, bins)), axis=1)
    counts[4], centres[4] = counts[1], centres[1]
    counts[6], centres[6] = counts[1], centres[1]
    centres = centres.astype(np.float32)
    lo, width = rng.normal(size=dims), rng.uniform(0.1, 1.0, size=dims)
    t = 1.5
    values, functions = solve_eigenfunctions(
        jnp.asarray(counts), jnp.asarray(centres), t
    )
    nontrivial = np.asarray(values)[:, 1:].ravel()
    order = np.argsort(nontrivial, kind="stable")[:count]
    ref_dims, ref_eig = np.divmod(order, bins - 1)
    ref_table = np.asarray(functions)[ref_dims, :, ref_eig + 1]

    budget = per_chunk * EIGH_COPIES * 4 * bins * bins
    eig = solve_and_select_eigenfunctions(
        counts, centres, t, lo, width, count, max_bytes=budget
    )
    np.testing.assert_array_equal(np.asarray(eig.dims), ref_dims)
    np.testing.assert_array_equal(np.asarray(eig.eigenvalues), nontrivial[order])
    np.testing.assert_allclose(np.asarray(eig.table), ref_table, atol=1e-6)
    np.testing.assert_allclose(np.asarray(eig.lo), lo[ref_dims].astype(np.float32))
    np.testing.assert_allclose(
        np.asarray(eig.width), width[ref_dims].astype(np.float32)
    )
    assert len(set(np.asarray(eig.dims)) & {1, 4, 6}) > 1  # the ties were exercised


def test_more_eigenfunctions_than_exist_keeps_them_all(rng):
    dims, bins = 3, 6
    counts = rng.integers(1, 50, size=(dims, bins)).astype(np.float32)
    centres = np.tile(np.arange(bins, dtype=np.float32), (dims, 1))
    eig = solve_and_select_eigenfunctions(
        counts, centres, 1.0, np.zeros(dims), np.ones(dims), 1000, max_bytes=1
    )
    assert eig.table.shape == (dims * (bins - 1), bins)
    assert np.all(np.diff(np.asarray(eig.eigenvalues)) >= 0)
