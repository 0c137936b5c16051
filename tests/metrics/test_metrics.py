"""Metrics vs sklearn, brute-force loops and hand-worked cases (per-image word rankings
break ties by index; AP averages over tie orders; iAP reads tie-group ends)."""

import itertools

import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import numpy as np
import pytest
import scipy.stats
import sklearn.metrics as skm
from hypothesis import given, settings

from jaxannot import metrics as M

# all metrics are float64 numpy: exact up to summation order
TOL = 1e-12


@pytest.fixture
def problem(rng):
    scores = rng.normal(size=(30, 12))  # continuous: no ties (sklearn comparisons)
    truth = (rng.random((30, 12)) < 0.25).astype(np.int32)
    truth[3] = 0  # an image without words: skipped by per-image metrics
    truth[:, 7] = 0  # a word without images: skipped by per-word metrics
    return scores, truth


# ------------------------------------------------------ Accuracy / Complete Length
def test_accuracy_and_complete_length_hand_worked_with_ties():
    scores = np.array(
        [
            [0.5, 0.5, 0.9, 0.1],  # ranking 2, 0, 1, 3 (tie 0/1 -> word 0 first)
            [1.0, 1.0, 1.0, 1.0],  # all tied: ranking 0, 1, 2, 3
            [0.0, 0.2, 0.1, 0.3],  # no true word: skipped
        ]
    )
    truth = np.array([[0, 1, 1, 0], [0, 0, 0, 1], [0, 0, 0, 0]])
    # image 0: r=2, top-2 = {2, 0}, correct = {2} -> 1/2; worst true rank: word 1 -> 3
    # image 1: r=1, top-1 = {0}, correct = 0 -> 0; word 3 at rank 4
    assert M.annotation_accuracy(scores, truth) == pytest.approx(0.25, abs=TOL)
    assert M.complete_length(scores, truth) == pytest.approx(3.5, abs=TOL)
    # breaking the tie the other way changes both: ties really go to the lower index
    swapped = scores[:, [1, 0, 2, 3]]
    truth_swapped = truth[:, [1, 0, 2, 3]]
    # image 0 now has both true words in its top 2 (accuracy 1, length 2); image 1 same
    assert M.annotation_accuracy(swapped, truth_swapped) == pytest.approx(0.5)
    assert M.complete_length(swapped, truth_swapped) == pytest.approx(3.0)


def test_accuracy_and_complete_length_vs_brute_force(problem):
    scores, truth = problem
    scores = np.round(scores, 1)  # create ties
    accs, lengths = [], []
    for s, t in zip(scores, truth, strict=True):
        ranking = sorted(range(len(s)), key=lambda w: (-s[w], w))
        true = set(np.flatnonzero(t))
        if not true:
            continue
        accs.append(len(true & set(ranking[: len(true)])) / len(true))
        lengths.append(max(ranking.index(w) + 1 for w in true))
    assert M.annotation_accuracy(scores, truth) == pytest.approx(np.mean(accs), abs=TOL)
    assert M.complete_length(scores, truth) == pytest.approx(np.mean(lengths), abs=TOL)


def test_perfect_and_worst_rankings(problem):
    _, truth = problem
    keep = truth.sum(1) > 0
    assert M.annotation_accuracy(truth.astype(float), truth) == 1.0
    assert M.complete_length(truth.astype(float), truth) == pytest.approx(
        truth.sum(1)[keep].mean()
    )
    assert M.annotation_accuracy(-truth.astype(float), truth) == 0.0


# --------------------------------------------------------------- per-image P/R/F1@N
@pytest.mark.parametrize("n", [1, 3, 5])
def test_image_prf_matches_sklearn_samples_average(problem, n):
    scores, truth = problem
    keep = truth.sum(1) > 0
    pred = np.zeros_like(truth)
    np.put_along_axis(pred, np.argsort(-scores, axis=1)[:, :n], 1, axis=1)
    p, r, f1 = M.image_prf_at_n(scores, truth, n)
    kw = dict(average="samples", zero_division=0)
    assert p == pytest.approx(skm.precision_score(truth[keep], pred[keep], **kw))
    assert r == pytest.approx(skm.recall_score(truth[keep], pred[keep], **kw))
    assert f1 == pytest.approx(skm.f1_score(truth[keep], pred[keep], **kw))


def test_topn_curves_agree_with_image_prf(problem):
    scores, truth = problem
    ns = range(2, 11)
    p, r = M.topn_precision_recall(scores, truth, ns)
    assert p.shape == r.shape == (len(ns),)
    for i, n in enumerate(ns):
        pn, rn, _ = M.image_prf_at_n(scores, truth, n)
        assert p[i] == pytest.approx(pn, abs=TOL) and r[i] == pytest.approx(rn, abs=TOL)
    assert np.all(np.diff(r) >= 0)  # recall never decreases with n


# ----------------------------------------------------------- per-word P/R/F1@N, N+
@pytest.mark.parametrize("n", [2, 5])
def test_word_prf_matches_sklearn_per_label(problem, n):
    scores, truth = problem
    pred = np.zeros_like(truth)
    np.put_along_axis(pred, np.argsort(-scores, axis=1)[:, :n], 1, axis=1)
    words = truth.sum(0) > 0
    p_w = skm.precision_score(truth, pred, average=None, zero_division=0)
    r_w = skm.recall_score(truth, pred, average=None, zero_division=0)
    got = M.word_prf_at_n(scores, truth, n)
    p, r = p_w[words].mean(), r_w[words].mean()
    assert got["precision"] == pytest.approx(p, abs=TOL)
    assert got["recall"] == pytest.approx(r, abs=TOL)
    assert got["f1"] == pytest.approx(2 * p * r / (p + r), abs=TOL)
    assert got["n_plus"] == int(np.sum(r_w > 0))


def test_word_prf_hand_worked():
    scores = np.array([[3.0, 2, 1], [3, 2, 1], [1, 2, 3]])
    truth = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1]])
    # top-1: word 0, word 0, word 2. word 0: P=1/2 R=1; word 1: P=0 (never predicted)
    # R=0; word 2: P=1 R=1.
    got = M.word_prf_at_n(scores, truth, 1)
    assert got["precision"] == pytest.approx(0.5)
    assert got["recall"] == pytest.approx(2 / 3)
    assert got["n_plus"] == 2


# ------------------------------------------------------------------- AP, MAP, iAP
def test_average_precision_matches_sklearn(problem):
    scores, truth = problem
    aps = []
    for w in range(truth.shape[1]):
        if truth[:, w].any():
            ref = skm.average_precision_score(truth[:, w], scores[:, w])
            assert M.average_precision(scores[:, w], truth[:, w]) == pytest.approx(
                ref, abs=TOL
            )
            aps.append(ref)
    assert M.mean_average_precision(scores, truth) == pytest.approx(np.mean(aps))


def _ap_of_order(y, orders):
    """AP of the ranking ``orders`` (item indices, best first), or of each row of a
    2-D array of rankings."""
    rel = np.asarray(y)[np.asarray(orders)]
    prec = np.cumsum(rel, -1) / np.arange(1, rel.shape[-1] + 1)
    return np.sum(prec * rel, -1) / rel.sum(-1)


def _iap_of_order(y, orders, origin=False):
    """11-point interpolated AP of the ranking ``orders``, or of each row of a 2-D
    array of rankings."""
    rel = np.asarray(y)[np.asarray(orders)]
    prec = np.cumsum(rel, -1) / np.arange(1, rel.shape[-1] + 1)
    rec = np.cumsum(rel, -1) / rel.sum(-1, keepdims=True)
    if origin:
        ones = np.ones(rel.shape[:-1] + (1,))
        prec, rec = (
            np.concatenate([ones, prec], -1),
            np.concatenate([0 * ones, rec], -1),
        )
    # at each of the 11 recall levels: the highest precision at a recall >= it (0
    # where none is)
    levels = np.arange(11)[:, None] / 10
    reached = np.where(rec[..., None, :] >= levels - 1e-12, prec[..., None, :], 0.0)
    return reached.max(-1).sum(-1) / 11


def _brute_iap(s, y, origin=False):
    return _iap_of_order(y, np.argsort(-np.asarray(s), kind="stable"), origin)


def _tie_orders(s):
    """Every ranking of the items by decreasing ``s`` (all orders of the ties), one
    per row."""
    s = np.asarray(s)
    groups = [np.flatnonzero(s == v).tolist() for v in np.unique(s)[::-1]]
    within = [itertools.permutations(g) for g in groups]  # each tie's orders
    return np.array([list(itertools.chain(*p)) for p in itertools.product(*within)])


@settings(max_examples=60, deadline=None)
@given(
    s=hnp.arrays(np.int8, st.integers(1, 7), elements=st.integers(0, 2)),
    data=st.data(),
)
def test_ap_is_the_mean_over_tie_orders_and_iap_the_worst(s, data):
    y = data.draw(hnp.arrays(np.bool_, s.shape))
    y[data.draw(st.integers(0, len(s) - 1))] = True  # at least one positive
    orders = _tie_orders(s)
    aps = _ap_of_order(y, orders)
    assert M.average_precision(s, y) == pytest.approx(np.mean(aps), abs=TOL)
    for origin in (False, True):
        iaps = _iap_of_order(y, orders, origin)
        got = M.interpolated_average_precision(s, y, origin=origin)
        assert got == pytest.approx(min(iaps), abs=TOL)
    # the column versions agree with the vector ones
    assert M.mean_average_precision(s[:, None], y[:, None]) == pytest.approx(
        np.mean(aps), abs=TOL
    )


def test_ap_with_ties_hand_worked_and_vs_sklearn():
    # one tie of a positive and a negative: orders +- (AP 1) and -+ (AP 1/2)
    assert M.average_precision([1.0, 1.0], [1, 0]) == pytest.approx(0.75, abs=TOL)
    # sklearn makes the tie one threshold: both credited precision 1/2
    assert skm.average_precision_score([1, 0], [1.0, 1.0]) == pytest.approx(0.5)
    # 4 tied, 2 positives; positives at places {1,2}: AP 1, {1,3}: 5/6, {1,4}: 3/4,
    # {2,3}: 7/12, {2,4}: 1/2, {3,4}: 5/12 -> mean 49/72 whatever the row order
    for y in ([0, 1, 0, 1], [1, 1, 0, 0], [0, 0, 1, 1]):
        assert M.average_precision([1.0, 1, 1, 1], y) == pytest.approx(49 / 72)
    # reversing the rows (the old index tie-break) does not change the result
    s, y = np.array([3.0, 2, 2, 2, 1, 1]), np.array([0, 1, 0, 0, 1, 1])
    assert M.average_precision(s, y) == pytest.approx(
        M.average_precision(s[::-1], y[::-1]), abs=TOL
    )


def test_iap_with_ties_reads_sklearn_precision_recall_curve(problem):
    scores, truth = problem
    scores = np.round(scores, 0)  # a few levels: large tie groups
    for w in range(truth.shape[1]):
        if not truth[:, w].any():
            continue
        prec, rec, _ = skm.precision_recall_curve(truth[:, w], scores[:, w])
        prec, rec = prec[:-1], rec[:-1]  # drop sklearn's appended (1, 0) point
        levels = np.linspace(0, 1, 11)
        ref = np.mean([max(prec[rec >= lv - 1e-12], default=0.0) for lv in levels])
        got = M.interpolated_average_precision(scores[:, w], truth[:, w])
        assert got == pytest.approx(ref, abs=TOL)


def test_interpolated_ap_hand_worked_and_brute(problem):
    # ranking: +, -, +, -  -> (P,R) = (1,.5), (.5,.5), (2/3,1), (.5,1)
    # levels 0..0.5 -> 1; 0.6..1 -> 2/3  => (6 * 1 + 5 * 2/3) / 11
    iap = M.interpolated_average_precision([4.0, 3, 2, 1], [1, 0, 1, 0])
    assert iap == pytest.approx((6 + 5 * 2 / 3) / 11, abs=TOL)
    scores, truth = problem  # continuous: no ties
    iaps = [
        _brute_iap(scores[:, w], truth[:, w])
        for w in range(truth.shape[1])
        if truth[:, w].any()
    ]
    assert M.mean_interpolated_average_precision(scores, truth) == pytest.approx(
        np.mean(iaps), abs=TOL
    )
    # VLFeat vl_pr convention: the rank-0 point (recall 0, precision 1)
    iaps = [
        _brute_iap(scores[:, w], truth[:, w], origin=True)
        for w in range(truth.shape[1])
        if truth[:, w].any()
    ]
    got = M.mean_interpolated_average_precision(scores, truth, origin=True)
    assert got == pytest.approx(np.mean(iaps), abs=TOL)
    # -, +: plain level 0 is max precision 1/2; with the origin it is 1
    assert M.interpolated_average_precision([2.0, 1.0], [0, 1]) == pytest.approx(0.5)
    assert M.interpolated_average_precision(
        [2.0, 1.0], [0, 1], origin=True
    ) == pytest.approx((1 + 10 * 0.5) / 11)


def test_precision_at_k(problem):
    scores, truth = problem
    s, y = np.round(scores[:, 0], 1), truth[:, 0]
    for k in (1, 5, 30):
        order = sorted(range(len(s)), key=lambda i: (-s[i], i))
        assert M.precision_at_k(s, y, k) == pytest.approx(y[order[:k]].mean())


def test_rank_metrics_invariant_to_monotone_transform(problem):
    scores, truth = problem
    a = M.annotation_report(scores, truth, n=3)
    b = M.annotation_report(np.exp(2 * scores) + 5, truth, n=3)
    assert a == pytest.approx(b)


# ------------------------------------------------- classification, regression, KL
def test_classification_and_r2_vs_sklearn(rng):
    y = rng.integers(0, 4, 50)
    pred = np.where(rng.random(50) < 0.6, y, rng.integers(0, 4, 50))
    acc = skm.accuracy_score(y, pred)
    assert M.classification_accuracy(pred, y) == pytest.approx(acc)
    assert M.error_rate(pred, y) == pytest.approx(1 - acc)
    yr = rng.normal(size=40)
    pr = yr + 0.5 * rng.normal(size=40)
    assert M.r2_score(pr, yr) == pytest.approx(skm.r2_score(yr, pr), abs=TOL)
    rmse = np.sqrt(skm.mean_squared_error(yr, pr))
    assert M.root_mean_squared_error(pr, yr) == pytest.approx(rmse, abs=TOL)
    report = M.regression_report(pr, yr)
    assert report == {
        "rmse": M.root_mean_squared_error(pr, yr),
        "r2": M.r2_score(pr, yr),
    }
    constant = M.regression_report([1.0, 2.0], [3.0, 3.0])  # R^2 undefined
    assert constant["rmse"] == pytest.approx(np.sqrt(2.5)) and np.isnan(constant["r2"])
    with pytest.raises(ValueError, match="finite"):
        M.root_mean_squared_error([1.0, np.nan], [1.0, 2.0])


def test_pairwise_symmetric_kl_vs_brute(rng):
    x = rng.random((20, 4)) * 3  # unnormalised rows: the metric normalises them
    labels = np.repeat([0, 1, 2, -1], 5)
    p = x / x.sum(1, keepdims=True)
    means = [p[labels == c].mean(0) for c in range(3)]
    ref = np.mean(
        [
            0.5
            * (
                scipy.stats.entropy(means[a], means[b])
                + scipy.stats.entropy(means[b], means[a])
            )
            for a, b in itertools.combinations(range(3), 2)
        ]
    )
    assert M.pairwise_symmetric_kl(x, labels) == pytest.approx(ref, rel=1e-10)
    same = np.tile(p[:1], (20, 1))
    assert M.pairwise_symmetric_kl(same, labels) == pytest.approx(0.0, abs=1e-12)


# ----------------------------------------------------------------- report, errors
def test_annotation_report_keys(problem):
    scores, truth = problem
    rep = M.annotation_report(scores, truth)
    assert list(rep) == [
        "accuracy", "complete_length", "f1@5", "precision@5", "recall@5",
        "word_precision@5", "word_recall@5", "word_f1@5", "n_plus@5", "map", "miap",
    ]  # fmt: skip
    assert rep["accuracy"] == M.annotation_accuracy(scores, truth)
    assert "f1@3" in M.annotation_report(scores, truth, n=3)


def test_bad_inputs(problem):
    scores, truth = problem
    with pytest.raises(ValueError, match="shapes differ"):
        M.annotation_accuracy(scores, truth[:, :5])
    bad = scores.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN or inf"):
        M.complete_length(bad, truth)
    with pytest.raises(ValueError, match="2-D"):
        M.annotation_report(scores[0], truth[0])
    with pytest.raises(ValueError, match="no image has a true word"):
        M.annotation_accuracy(scores, np.zeros_like(truth))
    with pytest.raises(ValueError, match="n must be"):
        M.image_prf_at_n(scores, truth, 13)
    with pytest.raises(ValueError, match="positive"):
        M.average_precision([1.0, 2.0], [0, 0])
    with pytest.raises(ValueError, match="constant"):
        M.r2_score([1.0, 2.0], [3.0, 3.0])
    with pytest.raises(ValueError, match="non-negative"):
        M.pairwise_symmetric_kl(-np.ones((4, 2)), [0, 0, 1, 1])
    with pytest.raises(ValueError, match="two classes"):
        M.pairwise_symmetric_kl(np.ones((4, 2)), [0, 0, 0, 0])


# ---------------------------------------------------------------------- real data
def _read_corel_words(path):
    """Test-local ARFF read of the 374 word columns (attributes 499..872)."""
    import arff  # liac-arff
    import scipy.sparse

    with open(path) as f:
        d = arff.load(f, return_type=arff.COO)
    data, rows, cols = d["data"]
    m = scipy.sparse.coo_matrix(
        (np.asarray(data, np.float64), (rows, cols)),
        shape=(max(rows) + 1, len(d["attributes"])),
    )
    return m.tocsr()[:, 499:].toarray()


def test_corel5k_empirical_baseline(data_root):
    root = data_root / "corel5k"
    train = _read_corel_words(root / "Corel5k-train-sparse.arff")
    test = _read_corel_words(root / "Corel5k-test-sparse.arff")
    assert train.shape == (4500, 374) and test.shape == (500, 374)
    scores = np.tile(train.sum(0), (len(test), 1))  # training word frequencies
    # seed 000 / issue 2: Accuracy 0.1912 and Complete Length 121.55 (ties by index)
    assert round(M.annotation_accuracy(scores, test), 4) == 0.1912
    assert round(M.complete_length(scores, test), 2) == 121.55


@settings(max_examples=40, deadline=None)
@given(
    scores=hnp.arrays(np.int8, (6, 5), elements=st.integers(0, 2)),  # many ties
    truth=hnp.arrays(np.bool_, (6, 5)),
    n=st.integers(1, 5),
)
def test_topn_metrics_with_ties_vs_brute_force(scores, truth, n):
    truth[0, 0] = True  # at least one image and one word with truth
    top = []
    for s in scores:
        top.append(sorted(range(5), key=lambda w: (-s[w], w))[:n])
    pred = np.zeros_like(truth)
    for i, words in enumerate(top):
        pred[i, words] = True
    rows = truth.sum(1) > 0
    c = (pred & truth).sum(1)
    p_i, r_i = c / n, c / np.maximum(truth.sum(1), 1)
    f_i = np.where(c > 0, 2 * p_i * r_i / np.maximum(p_i + r_i, 1e-300), 0)
    got = M.image_prf_at_n(scores, truth, n)
    np.testing.assert_allclose(got, [p_i[rows].mean(), r_i[rows].mean(),
                                     f_i[rows].mean()], atol=TOL)  # fmt: skip
    cols = truth.sum(0) > 0
    cw = (pred & truth).sum(0)
    p_w = np.where(pred.sum(0) > 0, cw / np.maximum(pred.sum(0), 1), 0.0)
    r_w = cw / np.maximum(truth.sum(0), 1)
    words = M.word_prf_at_n(scores, truth, n)
    assert words["precision"] == pytest.approx(p_w[cols].mean(), abs=TOL)
    assert words["recall"] == pytest.approx(r_w[cols].mean(), abs=TOL)
    assert words["n_plus"] == int((r_w > 0).sum())
    rep = M.annotation_report(scores, truth, n=n)
    assert rep[f"precision@{n}"] == got[0] and rep[f"n_plus@{n}"] == words["n_plus"]
    assert 0.0 <= rep["accuracy"] <= 1.0
    assert rep["complete_length"] >= truth.sum(1)[rows].mean() - TOL


# -------------------------------------------------------------- multi-label metrics
def _ranking_vs_sklearn(scores, truth):
    assert M.label_ranking_average_precision(scores, truth) == pytest.approx(
        skm.label_ranking_average_precision_score(truth, scores), abs=TOL
    )
    assert M.ranking_loss(scores, truth) == pytest.approx(
        skm.label_ranking_loss(truth, scores), abs=TOL
    )
    assert M.coverage(scores, truth) == pytest.approx(
        skm.coverage_error(truth, scores), abs=TOL
    )
    top = np.argmax(scores, axis=1)  # one-error by hand (argmax: lowest index)
    by_hand = np.mean([t.any() and not t[j] for t, j in zip(truth, top, strict=True)])
    assert M.one_error(scores, truth) == pytest.approx(by_hand, abs=TOL)
    rep = M.ranking_report(scores, truth)
    assert list(rep) == list(M.RANKING_METRICS)
    assert rep["lrap"] == M.label_ranking_average_precision(scores, truth)


def test_ranking_metrics_equal_sklearn_on_random_scores(problem):
    scores, truth = problem
    truth[5] = 1  # every word true: LRAP 1 and ranking loss 0 for that image
    _ranking_vs_sklearn(scores, truth)


@settings(max_examples=60, deadline=None)
@given(
    scores=hnp.arrays(np.float64, (7, 5), elements=st.sampled_from([0.0, 0.5, 1.0])),
    truth=hnp.arrays(np.bool_, (7, 5)),
)
def test_ranking_metrics_equal_sklearn_with_ties(scores, truth):
    truth[0, 0] = True  # sklearn needs an image with a true word
    _ranking_vs_sklearn(scores, truth.astype(np.int32))


def test_ranking_metrics_hand_worked_ties_and_images_without_words():
    scores = np.array([[0.5, 0.5, 0.1], [0.2, 0.2, 0.2], [0.9, 0.1, 0.3]])
    truth = np.array([[0, 1, 0], [0, 0, 1], [0, 0, 0]])
    # image 0: word 1 tied with word 0 -> counted ranked 2nd: precision 1/2, a
    # (true, false) pair tied = wrong (1 of 2 pairs), coverage 2; argmax word 0
    # (lower index of the tie): an error
    # image 1: all tied -> 1/3, both pairs wrong, coverage 3; argmax word 0: error
    # image 2: no true word -> LRAP 1, loss 0, coverage 0, no one-error
    assert M.label_ranking_average_precision(scores, truth) == pytest.approx(
        (0.5 + 1 / 3 + 1) / 3
    )
    assert M.ranking_loss(scores, truth) == pytest.approx((0.5 + 1.0 + 0) / 3)
    assert M.coverage(scores, truth) == pytest.approx((2 + 3 + 0) / 3)
    assert M.one_error(scores, truth) == pytest.approx(2 / 3)


def test_coverage_is_sklearns_one_based_count_and_mulans_plus_labelled_share(rng):
    scores = rng.integers(0, 4, size=(25, 6)).astype(float)  # ties
    truth = (rng.random((25, 6)) < 0.3).astype(int)
    truth[:3] = 0
    truth[3, 2] = 1
    # Mulan / Zhang & Zhou (0-based): max over true words of (#words scored >= it)
    # - 1, per image with a true word; 0 for an image without one
    zero_based = [
        max(np.sum(s >= s[j]) for j in np.flatnonzero(t)) - 1 if t.any() else 0
        for s, t in zip(scores, truth, strict=True)
    ]
    labelled = np.mean(truth.any(axis=1))
    assert M.coverage(scores, truth) == pytest.approx(np.mean(zero_based) + labelled)
    assert M.coverage(scores, truth) == pytest.approx(skm.coverage_error(truth, scores))


@pytest.mark.parametrize("ties", [False, True])
def test_bipartition_metrics_equal_sklearn(rng, ties):
    scores = rng.integers(0, 3, (40, 7)) if ties else rng.normal(size=(40, 7))
    truth = (rng.random((40, 7)) < 0.3).astype(int)
    truth[0] = 0  # an image without words: recall 0 (zero_division=0)
    truth[:, 3] = 0  # a word without images
    for pred in (
        M.top_k_bipartition(scores, 2),
        M.threshold_bipartition(scores, 1.0),  # some images get no word
    ):
        pred = pred.astype(int)
        for ours, theirs in (("micro", "micro"), ("macro", "macro"),
                             ("example", "samples")):  # fmt: skip
            ref = skm.precision_recall_fscore_support(
                truth, pred, average=theirs, zero_division=0
            )[:3]
            np.testing.assert_allclose(M.prf(pred, truth, ours), ref, atol=TOL)
        assert M.hamming_loss(pred, truth) == pytest.approx(
            skm.hamming_loss(truth, pred)
        )
        rep = M.bipartition_report(pred, truth)
        assert list(rep) == list(M.BIPARTITION_METRICS)
        assert rep["example_f1"] == pytest.approx(
            skm.f1_score(truth, pred, average="samples", zero_division=0)
        )


def test_top_k_bipartition_breaks_ties_by_word_index_and_k_is_the_rounded_cardinality():
    pred = M.top_k_bipartition([[0.5, 0.9, 0.5, 0.5]], 2)
    np.testing.assert_array_equal(pred, [[True, True, False, False]])
    assert M.bipartition_k([[1, 1, 0], [1, 0, 0]]) == 2  # 1.5 rounds half up
    assert M.bipartition_k([[1, 1, 0], [0, 0, 0], [1, 0, 0]]) == 1  # 1.0
    assert M.bipartition_k([[0, 0], [0, 0]]) == 1  # at least 1
    assert M.bipartition_k([[1, 1, 1], [1, 1, 0]]) == 3  # 2.5 -> 3
    rep = M.multilabel_report([[0.1, 0.9, 0.5]], [[0, 1, 1]], k=2)
    assert list(rep) == list(M.MULTILABEL_METRICS)
    assert rep["micro_f1"] == 1.0 and rep["hamming_loss"] == 0.0
    assert rep["lrap"] == 1.0 and rep["coverage"] == 2.0


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: M.top_k_bipartition(np.zeros((2, 3)), 0), r"k must be .* \[1, 3\]"),
        (lambda: M.top_k_bipartition(np.zeros((2, 3)), 1.5), "k must be an integer"),
        (lambda: M.threshold_bipartition(np.zeros((2, 3)), np.nan), "finite"),
        (lambda: M.prf(np.zeros((2, 3)), np.zeros((2, 3)), "samples"), "average"),
        (lambda: M.coverage(np.zeros((2, 3)), np.zeros((2, 2))), "shapes differ"),
        (lambda: M.bipartition_k(np.zeros((0, 3))), "non-empty"),
    ],
)
def test_multilabel_metrics_refuse_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_the_metrics_package_keeps_its_public_names():
    import jaxannot.metrics.annotation as annotation
    import jaxannot.metrics.multilabel as multilabel
    import jaxannot.metrics.per_image as per_image
    import jaxannot.metrics.per_word as per_word

    modules = (annotation, multilabel, per_image, per_word)
    for name in M.__all__:
        (home,) = [m for m in modules if name in m.__all__]
        assert getattr(M, name) is getattr(home, name)
    assert set().union(*(m.__all__ for m in modules)) == set(M.__all__)


def test_map_and_miap_by_blocks_of_words_are_identical(monkeypatch):
    from jaxannot.metrics import per_word

    rng = np.random.default_rng(0)
    scores = rng.integers(0, 4, size=(30, 7)).astype(np.float32)  # many ties
    truth = rng.random((30, 7)) < 0.3
    truth[:, 3] = False  # a word without a positive image is skipped
    whole = (
        M.mean_average_precision(scores, truth),
        M.mean_interpolated_average_precision(scores, truth),
        M.mean_interpolated_average_precision(scores, truth, origin=True),
    )
    monkeypatch.setattr(per_word, "BLOCK_ENTRIES", 90)  # blocks of 3, 3 and 1 words
    blocked = (
        M.mean_average_precision(scores, truth),
        M.mean_interpolated_average_precision(scores, truth),
        M.mean_interpolated_average_precision(scores, truth, origin=True),
    )
    assert blocked == whole
