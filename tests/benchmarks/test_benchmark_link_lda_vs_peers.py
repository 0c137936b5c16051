"""``benchmarks/peers/link_lda_vs_peers.py``: tomotopy's counts read back, one
estimator for both systems, and time to target read off each curve."""

import os
import warnings

import numpy as np
import pytest


@pytest.fixture(scope="module")
def bench(benchmark_script):
    return benchmark_script("benchmarks.peers.link_lda_vs_peers")


def _tomotopy():
    """tomotopy (in the ``test`` extra): imported outright under CI=true, so a CI
    without it fails instead of skipping the read-back check.

    Loading its compiled module warns (DeprecationWarning: "builtin type _VocabDict
    has no __module__ attribute", from importlib); under the suite's
    ``filterwarnings = error`` tomotopy's loader takes that for a missing module, so
    that one warning is ignored while it loads.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", "builtin type _VocabDict has no __module__", DeprecationWarning
        )
        if os.environ.get("CI", "").lower() == "true":
            import tomotopy

            return tomotopy
        return pytest.importorskip("tomotopy")


def test_tomotopy_counts_read_back_match_the_corpus(bench):
    tp = _tomotopy()
    rng = np.random.default_rng(0)
    counts = rng.poisson(0.4, size=(30, 12)).astype(np.float32)
    counts[:, 11] = 0  # a word no document uses: n_kw = 0 there
    eta = 0.05
    mdl = tp.LDAModel(tw=tp.TermWeight.ONE, k=3, alpha=0.1, eta=eta, seed=1)
    for tokens in bench._documents(counts):
        if tokens:
            mdl.add_doc(tokens)
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


def test_time_to_target_is_the_first_checkpoint_at_or_below_on_one_seed(bench):
    curve = [(10, 1.0, 0.5, 420.0), (20, 2.0, 1.0, 399.0), (30, 3.0, 1.5, 401.0)]
    hit = bench.time_to_target(curve, 400.0)
    assert hit == dict(iterations=20, seconds=2.0, cpu_seconds=1.0)
    assert bench.time_to_target(curve, 399.0)["iterations"] == 20  # at counts
    # the later, higher checkpoint does not undo the hit; none at all gives None
    assert bench.time_to_target(curve, 398.9) is None


def test_bootstrap_ratio_of_two_seeds_spans_their_own_ratios(bench):
    # two seeds: a resample is (0,0), (1,1) (1/4 each) or mixed (1/2), so the
    # replicates take only a0/b0, a1/b1 and (a0+a1)/(b0+b1); each end value holds
    # 1/4 of them, far more than 2.5 %: the 95 % interval is exactly the two ends
    a, b = [3.0, 1.0], [1.0, 2.0]
    out = bench.bootstrap_ratio(a, b, resamples=2000, seed=0)
    assert out["ratio_of_means"] == pytest.approx(4.0 / 3.0)
    assert out["interval"] == pytest.approx([0.5, 3.0])
    assert out["excludes_one"] is False
    assert out["resamples"] == 2000 and out["level"] == 0.95


def test_bootstrap_ratio_matches_a_loop_over_resamples(bench):
    rng = np.random.default_rng(3)
    a, b = rng.gamma(5.0, 1.0, 7), rng.gamma(3.0, 1.0, 7)
    out = bench.bootstrap_ratio(a, b, resamples=500, level=0.9, seed=11)
    draws = np.random.default_rng(11).integers(0, 7, size=(500, 7))
    reps = sorted(sum(a[i] for i in d) / sum(b[i] for i in d) for d in draws)
    # numpy's default quantile: linear between order statistics at (n - 1) q
    pos = 499 * 0.05
    low = reps[int(pos)] + (pos - int(pos)) * (reps[int(pos) + 1] - reps[int(pos)])
    pos = 499 * 0.95
    high = reps[int(pos)] + (pos - int(pos)) * (reps[int(pos) + 1] - reps[int(pos)])
    assert out["interval"] == pytest.approx([low, high], rel=1e-12)
    assert out["ratio_of_means"] == pytest.approx(a.sum() / b.sum())


def test_bootstrap_ratio_of_a_constant_ratio_is_a_point_excluding_one(bench):
    out = bench.bootstrap_ratio([2.0, 4.0, 6.0], [1.0, 2.0, 3.0], resamples=100)
    assert out["interval"] == pytest.approx([2.0, 2.0])
    assert out["excludes_one"] is True


def test_bootstrap_ratio_rejects_unpaired_figures(bench):
    with pytest.raises(ValueError, match="same length"):
        bench.bootstrap_ratio([1.0, 2.0], [1.0], resamples=10)


def test_target_record_keeps_the_seeds_that_never_reach_the_target(bench):
    def curve(*perplexities):  # checkpoints 10, 20, 30 at 1, 2, 3 s (CPU: half)
        return [(10 * j, j, j / 2, p) for j, p in enumerate(perplexities, start=1)]

    theirs = [curve(410, 400, 395), curve(420, 405, 402), curve(399, 398, 397)]
    ours = [curve(401, 399, 390), curve(400, 399, 398), curve(405, 404, 403)]
    rec = bench.target_record([7, 8, 9], ours, theirs, 1.0, 400.0, resamples=50)
    assert rec["target_perplexity"] == 400.0
    assert [r["seed"] for r in rec["per_seed"]] == [7, 8, 9]
    assert rec["per_seed"][0]["tomotopy"]["seconds"] == 2.0
    assert rec["per_seed"][0]["jaxannot"]["seconds"] == 2.0
    assert rec["per_seed"][1]["tomotopy"] is None  # 402 > 400: recorded as such
    assert rec["per_seed"][2]["jaxannot"] is None
    assert rec["not_reached"] == dict(tomotopy=[8], jaxannot=[9])
    assert rec["seeds_in_ratio"] == [7]
    assert rec["ratio_seconds"] is None and "2/3" in rec["note"]
    lower = bench.target_record([7, 8, 9], ours, theirs, 1.01, 400.0, resamples=50)
    assert lower["seeds_in_ratio"] == [7, 8, 9]
    # target 404 on seeds 7, 8, 9: tomotopy 2, 3, 1 s; jaxannot 1, 1, 2 s (404 at
    # counts); CPU seconds the halves of those
    assert [r["tomotopy"]["seconds"] for r in lower["per_seed"]] == [2, 3, 1]
    assert [r["jaxannot"]["seconds"] for r in lower["per_seed"]] == [1, 1, 2]
    assert lower["ratio_cpu_seconds"]["ratio_of_means"] == pytest.approx(6 / 4)
    assert lower["ratio_seconds"]["ratio_of_means"] == pytest.approx(6 / 4)


def test_threads_option_sets_both_systems_alike(bench, monkeypatch):
    from benchmarks.common import lda_peers

    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=x")
    one = bench.threads_setting("1")
    bench.threads_setting("1")  # a child process sets it again: no duplicates
    flags = bench.os.environ["XLA_FLAGS"].split()
    assert one["tomotopy_workers"] == 1
    assert flags == ["--xla_dump_to=x", *lda_peers.SINGLE_THREAD_XLA]
    monkeypatch.setenv("XLA_FLAGS", "")
    every = bench.threads_setting("all")
    assert every["tomotopy_workers"] == bench.os.cpu_count()
    assert bench.os.environ["XLA_FLAGS"] == ""
    args = bench.parse_args(["--gibbs", "20", "--gibbs-step", "5"])
    assert args.seeds >= 10 and args.resamples >= 2000
    assert args.tomotopy_checkpoints == [5, 10, 15, 20, 25, 30, 35, 40]


@pytest.mark.slow
def test_a_tiny_run_records_targets_threads_and_a_warm_cache(
    bench, tmp_path, monkeypatch
):
    pytest.importorskip("tomotopy")
    monkeypatch.setenv("XLA_FLAGS", "")  # --threads 1 sets it; restored after
    out = bench.main(
        ["--corpus", "synthetic", "--docs", "40", "--test-docs", "10"]
        + ["--vocab", "30", "--length", "20", "--topics", "3", "--seeds", "2"]
        + ["--checkpoints", "2,4", "--gibbs", "4", "--gibbs-step", "2"]
        + ["--cvb0-blocks", "2", "--resamples", "20", "--json", str(tmp_path / "o")]
    )
    assert [t["factor"] for t in out["time_to_target"]] == [0.99, 1.0, 1.01]
    assert out["tomotopy"]["curve"][-1]["iterations"] == 8  # --gibbs-max = 2 x 4
    assert out["threads"]["setting"] == "1" and out["threads"]["tomotopy_workers"] == 1
    cache = out["one_off"]["persistent_cache"]
    assert cache["cold_process"]["compiled"] > 0
    assert cache["warm_process"]["compiled"] == 0
    assert cache["warm_process"]["cache_hits"] == cache["cold_process"]["programs"]


def test_a_nan_perplexity_is_refused(bench):
    assert bench.checked_perplexity(np.float64(575.0), "tomotopy", 0, 200) == 575.0
    for bad in (np.nan, np.inf):
        with pytest.raises(ValueError, match="jaxannot, seed 0, 80 iterations"):
            bench.checked_perplexity(bad, "jaxannot", 0, 80)


def test_no_persistent_cache_flag(bench):
    assert bench.parse_args([]).persistent_cache is True
    assert bench.parse_args(["--no-persistent-cache"]).persistent_cache is False


def test_a_tiny_scvb0_run_on_a_corpus_drawn_sparse(bench, tmp_path, monkeypatch):
    pytest.importorskip("tomotopy")
    from benchmarks.common import lda_peers

    monkeypatch.setenv("XLA_FLAGS", "")
    monkeypatch.setattr(lda_peers, "DENSE_LIMIT", 100)  # 40 x 30 cells: drawn sparse
    out = bench.main(
        ["--corpus", "synthetic", "--docs", "40", "--test-docs", "10"]
        + ["--vocab", "30", "--length", "20", "--topics", "3", "--seeds", "2"]
        + ["--checkpoints", "1,2", "--gibbs", "4", "--gibbs-step", "2"]
        + ["--method", "scvb0", "--scvb0-batch", "8", "--no-persistent-cache"]
        + ["--resamples", "20", "--json", str(tmp_path / "o")]
    )
    assert out["jaxannot"]["method"] == "fit_scvb0"
    assert out["jaxannot"]["batch_size"] == 8 and "blocks" not in out["jaxannot"]
    assert out["corpus"]["stored"] == "sparse (CSR)"
    assert out["corpus"]["train_docs"] == 40
    assert [p[0] for p in out["per_seed"]["jaxannot"][0]] == [1, 2]  # passes


def test_tomotopy_reads_the_same_tokens_from_dense_and_sparse_counts(bench):
    import scipy.sparse as sp

    counts = np.random.default_rng(2).poisson(0.7, size=(9, 6)).astype(np.float32)
    dense = list(bench._documents(counts))
    assert dense == list(bench._documents(sp.csr_matrix(counts)))
    for row, tokens in zip(counts, dense, strict=True):
        assert len(tokens) == row.sum()
        assert sorted(set(tokens)) == sorted(str(w) for w in np.flatnonzero(row))


def test_the_sparse_corpus_has_its_shape_and_lengths(bench):
    from benchmarks.common.lda_corpus import lda_corpus_sparse

    rng = np.random.default_rng(0)
    train, test = lda_corpus_sparse(rng, 50, 5, 40, 4, 30)
    assert train.shape == (50, 40) and test.shape == (5, 40)
    lengths = np.concatenate([np.asarray(train.sum(1)).ravel(), test.sum(1)])
    assert lengths.min() >= 10  # as lda_corpus: Poisson lengths, at least 10
    assert abs(lengths.mean() - 30) < 5
