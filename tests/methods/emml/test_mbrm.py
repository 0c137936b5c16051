"""MBRM (Feng et al. 2004): log-domain relevance weights against a direct float64
computation, no underflow where the direct one underflows, and the bandwidth chosen by
cross-validation on the training images only."""

import numpy as np
import pytest

import jax

from jaxannot.annotators import get_method
from jaxannot.data.corpus import Corpus
from jaxannot.methods.emml.mbrm import (
    extend_past_edges,
    fit_mbrm,
    mbrm_word_probabilities,
    select_bandwidth,
)
from jaxannot.metrics import mean_average_precision


def _direct(train_regions, queries_regions, words, beta, mu):
    """P(w | I_q) straight from the paper, float64, no logs: P(I_q | J) =
    prod_r mean_{r' in J} exp(-|r - r'|^2 / 2 beta)."""
    y = (np.asarray(words) > 0).astype(np.float64)
    pv = (mu * y + y.sum(0)) / (mu + len(y))
    out, weights = [], []
    for q in queries_regions:
        w = np.array(
            [
                np.prod(
                    [
                        np.mean(
                            np.exp(-((r - np.asarray(j)) ** 2).sum(-1) / (2 * beta))
                        )
                        for r in q
                    ]
                )
                for j in train_regions
            ]
        )
        weights.append(w)
        with np.errstate(invalid="ignore"):
            out.append((w / w.sum()) @ pv)
    return np.array(out), np.array(weights)


def _blob_problem(seed, n, dims=12, blobs=4, words=6):
    rng = np.random.default_rng(seed)
    x = np.zeros((n, dims), np.float32)
    for i in range(n):
        x[i, rng.choice(dims, blobs, replace=False)] = 1.0
    y = (rng.random((n, words)) < 0.3).astype(np.float32)
    y[np.arange(n), x[:, :words].argmax(1)] = 1.0  # words follow the blobs a little
    return x, y


def _regions(bag):
    """Each counted blob of a bag as a one-hot region vector."""
    eye = np.eye(bag.shape[1])
    return [eye[np.repeat(np.arange(bag.shape[1]), row.astype(int))] for row in bag]


def test_log_domain_equals_the_direct_float64_computation():
    x, y = _blob_problem(0, 30)
    q, _ = _blob_problem(1, 5)
    for beta in (0.3, 1.0, 4.0):  # nothing underflows here
        want, _ = _direct(_regions(x), _regions(q), y, beta, mu=7.0)
        got = mbrm_word_probabilities(
            fit_mbrm(x, y, bandwidth=beta, smoothing=7.0, kernel="regions"), q
        )
        np.testing.assert_allclose(np.asarray(got), want, rtol=2e-5, atol=1e-7)
    # the gaussian kernel: one region per image, its real feature vector
    rng = np.random.default_rng(2)
    xr, qr = rng.normal(size=(30, 3)), rng.normal(size=(5, 3))
    want, _ = _direct([[r] for r in xr], [[r] for r in qr], y, 2.0, mu=7.0)
    got = mbrm_word_probabilities(fit_mbrm(xr, y, bandwidth=2.0, smoothing=7.0), qr)
    np.testing.assert_allclose(np.asarray(got), want, rtol=2e-5, atol=1e-7)


def test_no_underflow_where_the_direct_computation_underflows():
    x, y = _blob_problem(3, 40, dims=30, blobs=8)
    q, _ = _blob_problem(4, 6, dims=30, blobs=8)
    beta = 0.002  # exp(-1/beta) = e^-500 per unmatched blob
    direct, weights = _direct(_regions(x), _regions(q), y, beta, mu=7.0)
    assert np.all(weights == 0.0) and np.all(np.isnan(direct))  # underflowed
    got = np.asarray(
        mbrm_word_probabilities(fit_mbrm(x, y, bandwidth=beta, kernel="regions"), q)
    )
    assert np.all(np.isfinite(got))
    ranks = {tuple(np.argsort(-row, kind="stable")) for row in got}
    assert len(ranks) > 1  # not the word prior for every image
    prior = tuple(np.argsort(-y.sum(0), kind="stable"))
    assert ranks != {prior}


def _log_domain_float64(x, q, words, beta, mu):
    """P(w | I_q) in float64 logs: sum_b q_b log K(b, J), then a softmax over J."""
    n = np.asarray(x, np.float64)
    size = np.maximum(n.sum(1, keepdims=True), 1.0)
    with np.errstate(divide="ignore"):
        log_k = np.logaddexp(np.log(n), np.log(size - n) - 1.0 / beta) - np.log(size)
    lw = np.asarray(q, np.float64) @ log_k.T
    w = np.exp(lw - lw.max(1, keepdims=True))
    y = (np.asarray(words) > 0).astype(np.float64)
    pv = (mu * y + y.sum(0)) / (mu + len(y))
    return (w / w.sum(1, keepdims=True)) @ pv


@pytest.mark.parametrize("beta", [2.0**-14, 2.0**-8, 0.05])
def test_tiny_bandwidths_keep_float64_accuracy(beta):
    """Terms of size 1/beta (16,384 at 2^-14) in one float32 sum rounded the small
    logs away, so near-tied images swapped with the CPU's summation order (Corel5k's
    subsample figures moved by 10 % between an AMD and an Intel CPU); counting the
    missing blobs apart keeps float64's answer to float32 precision."""
    rng = np.random.default_rng(5)
    x = rng.poisson(0.6, size=(300, 50)).astype(np.float32)  # 0-3 of a blob, many 0
    q = rng.poisson(0.6, size=(40, 50)).astype(np.float32)
    y = (rng.random((300, 8)) < 0.3).astype(np.float32)
    want = _log_domain_float64(x, q, y, beta, mu=9.0 * 300)
    for block_size in (64, 8192):  # other summation orders, the same answer
        got = mbrm_word_probabilities(
            fit_mbrm(x, y, bandwidth=beta, kernel="regions"), q, block_size=block_size
        )
        np.testing.assert_allclose(np.asarray(got), want, rtol=5e-5, atol=1e-8)


def test_corel5k_subset_beats_word_frequency(data_root):
    from jaxannot.data.datasets import load_dataset

    train, test = load_dataset("corel5k", data_dir=str(data_root))
    train, test = train.subset(np.arange(1500)), test.subset(np.arange(300))
    method = get_method("mbrm")
    fitted = method.fit(train, rng_key=jax.random.key(0))
    assert fitted.info["kernel"] == "regions"
    assert fitted.info["bandwidth_used"] in fitted.info["bandwidth_grid"]
    scores = np.asarray(method.score_words(fitted, test))
    freq = np.argsort(-np.asarray(train.words).sum(0), kind="stable")[:5]
    top5 = np.argsort(-scores, axis=1, kind="stable")[:, :5]
    assert np.mean([set(t) == set(freq) for t in top5]) < 0.5
    empirical = get_method("empirical")
    base = np.asarray(
        empirical.score_words(empirical.fit(train, rng_key=jax.random.key(0)), test)
    )
    truth = np.asarray(test.words)
    assert mean_average_precision(scores, truth) > mean_average_precision(base, truth)


def _with_test_rows(train, test_x, kind):
    x = np.concatenate([train.views["features"], test_x]).astype(np.float32)
    words = np.concatenate([train.words, np.zeros((len(test_x), train.num_words))])
    hidden = np.arange(len(x)) >= train.num_images
    corpus = Corpus.from_arrays(
        {"features": x}, words=words.astype(np.float32), view_kinds={"features": kind}
    )
    return corpus.with_hidden(hidden)


@pytest.mark.parametrize("kind", ["bag", "real"])
def test_bandwidth_choice_never_sees_held_out_rows(kind):
    x, y = _blob_problem(5, 60)
    train = Corpus.from_arrays({"features": x}, words=y, view_kinds={"features": kind})
    method = get_method("mbrm")
    alone = method.fit(train, rng_key=jax.random.key(0))
    chosen = {alone.info["bandwidth_used"]}
    rng = np.random.default_rng(6)
    for _ in range(2):
        test_x = (rng.random((25, x.shape[1])) < 0.3).astype(np.float32)
        corpus = _with_test_rows(train, test_x, kind)
        fitted = method.fit(corpus, rng_key=jax.random.key(0))
        chosen.add(fitted.info["bandwidth_used"])
        assert fitted.info["train_images"] == 60
    assert len(chosen) == 1
    kernel = "regions" if kind == "bag" else "gaussian"
    b, info = select_bandwidth(x, y, kernel=kernel, metric="word_f1@5")
    assert (
        np.float32(b) == alone.info["bandwidth_used"]
        and len(info["bandwidth_grid"]) == 12 + info["grid_extended"]
    )


@pytest.mark.parametrize(("peak", "added"), [(2.0**-14, 5), (2.0**5, 5), (0.5, 0)])
def test_a_grid_is_extended_past_an_edge_winner(peak, added):
    def score(b):
        return -((np.log2(b) - np.log2(peak)) ** 2)

    calls = []
    grid, means = extend_past_edges(
        lambda b: calls.append(b) or score(b), [2.0**k for k in range(-10, 2)]
    )
    # 4 values reach the peak, one more shows it is not at the end any more
    assert len(grid) == 12 + added and len(calls) == len(grid)  # each scored once
    assert grid[int(np.argmax(means))] == peak  # found, not stuck at the old end
    assert grid == sorted(grid)
    capped, _ = extend_past_edges(lambda b: -b, [1.0, 2.0], max_steps=3)
    assert capped == [0.125, 0.25, 0.5, 1.0, 2.0]


def test_bad_settings_are_rejected():
    x, y = _blob_problem(7, 10)
    with pytest.raises(ValueError, match="unknown kernel"):
        fit_mbrm(x, y, bandwidth=1.0, kernel="laplace")
    with pytest.raises(ValueError, match="unknown metric"):
        select_bandwidth(x, y, metric="accuracy")


def test_streamed_probabilities_over_many_blocks_stay_in_the_unit_interval():
    # issue 50's audit: MBRM's streamed sums only add non-negative weights (rescaled
    # by the running maximum), nothing is subtracted: over 20,000 training images
    # in blocks of 512 the probabilities match a float64 softmax and lie in [0, 1]
    rng = np.random.default_rng(0)
    x = rng.normal(size=(20000, 2)).astype(np.float32)
    y = (rng.random((20000, 5)) < 0.3).astype(np.float32)
    q = rng.normal(size=(4, 2)).astype(np.float32)
    params = fit_mbrm(x, y, bandwidth=0.5)
    got = np.asarray(mbrm_word_probabilities(params, q, block_size=512))
    lw = -((q[:, None, :] - x[None].astype(np.float64)) ** 2).sum(-1) / (2 * 0.5)
    w = np.exp(lw - lw.max(1, keepdims=True))
    want = (w / w.sum(1, keepdims=True)) @ np.asarray(params.word_probabilities)
    np.testing.assert_allclose(got, want, rtol=1e-4)
    assert got.min() >= 0.0 and got.max() <= 1.0
