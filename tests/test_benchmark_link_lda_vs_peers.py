"""``benchmarks/link_lda_vs_peers.py``: tomotopy's counts read back, one estimator for
both systems, and time to target read off each curve."""

import pathlib
import sys

import numpy as np
import pytest

BENCHMARKS = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import link_lda_vs_peers

        yield link_lda_vs_peers
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_tomotopy_counts_read_back_match_the_corpus(bench):
    tp = pytest.importorskip("tomotopy")
    rng = np.random.default_rng(0)
    counts = rng.poisson(0.4, size=(30, 12)).astype(np.float32)
    counts[:, 11] = 0  # a word no document uses: n_kw = 0 there
    eta = 0.05
    mdl = tp.LDAModel(tw=tp.TermWeight.ONE, k=3, alpha=0.1, eta=eta, seed=1)
    for row in counts:
        if row.sum() > 0:
            mdl.add_doc(bench._tokens(row))
    mdl.train(5, workers=1)
    lam = bench.tomotopy_lambda(mdl, 12, eta)
    n_kw = lam - eta
    # every token is in exactly one topic: Σ_k n_kw = the word's corpus count
    np.testing.assert_allclose(n_kw.sum(0), counts.sum(0), atol=1e-6)
    np.testing.assert_allclose(n_kw.sum(1), mdl.get_count_by_topics(), atol=1e-6)
    assert np.all(n_kw[:, 11] == 0)
    # integer counts, as a Gibbs sample has
    np.testing.assert_allclose(n_kw, np.round(n_kw), atol=1e-6)


def test_shared_perplexity_is_the_fold_in_of_the_given_counts(bench):
    rng = np.random.default_rng(1)
    obs = rng.poisson(1.0, size=(6, 8)).astype(np.float32)
    held = rng.poisson(1.0, size=(6, 8)).astype(np.float32)
    lam = rng.gamma(2.0, 1.0, size=(3, 8))
    value = bench.shared_perplexity(lam, obs, held, 0.1)
    # a uniform model's perplexity is the vocabulary size, whatever θ̂ is
    flat = bench.shared_perplexity(np.ones((3, 8)), obs, held, 0.1)
    assert flat == pytest.approx(8.0, rel=1e-5)
    assert np.isfinite(value) and value != pytest.approx(flat)


def test_time_to_target_reads_each_mean_curve(bench):
    curves = [  # two seeds, three checkpoints: (iterations, wall, cpu, perplexity)
        [(10, 1.0, 0.5, 420.0), (20, 2.0, 1.0, 401.0), (30, 3.0, 1.5, 398.0)],
        [(10, 1.2, 0.7, 410.0), (20, 2.2, 1.2, 397.0), (30, 3.2, 1.7, 396.0)],
    ]
    summary = bench.summarize(curves)
    assert [row["iterations"] for row in summary] == [10, 20, 30]
    assert summary[1]["perplexity_mean"] == pytest.approx(399.0)
    assert summary[1]["cpu_seconds_mean"] == pytest.approx(1.1)
    assert summary[1]["perplexity_sd"] == pytest.approx(np.std([401, 397], ddof=1))
    assert bench.time_to(summary, 399.0)["iterations"] == 20
    assert bench.time_to(summary, 398.9)["iterations"] == 30
    assert bench.time_to(summary, 390.0) is None
