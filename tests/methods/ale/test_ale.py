"""The registered ALE / IALE / BSVM / GSF methods through the method registry."""

import numpy as np
import pytest
from sklearn.metrics import average_precision_score

import jax

from jaxannot.annotators import get_method, load, parse_hyper, save
from jaxannot.data.corpus import Corpus
from jaxannot.inference.support import SupportError
from jaxannot.methods.ale import annotators as ale_annotators

SMALL = {"eigenvectors": 40, "bins": 20, "pca": 6, "bandwidth": 0.1, "max_epochs": 200}
SMALL_SF = {k: v for k, v in SMALL.items() if k != "max_epochs"}  # no SVM


def _blobs(rng, n, centres):
    """Gaussian blobs in 2-D embedded in 8-D; concept k = blob k, concept 3 = 0 or 2."""
    labels = rng.integers(0, len(centres), size=n)
    z = centres[labels] + 0.35 * rng.normal(size=(n, 2))
    x = np.concatenate([z, 0.1 * rng.normal(size=(n, 6))], 1) @ rng.normal(size=(8, 8))
    y = np.zeros((n, 4), np.float32)
    y[np.arange(n), labels] = 1.0
    y[:, 3] = (labels == 0) | (labels == 2)
    return x.astype(np.float32), y


@pytest.fixture(scope="module")
def corpora():
    rng = np.random.default_rng(0)
    centres = np.array([[0.0, 0.0], [3.0, 0.0], [6.0, 0.0]])
    proj_rng = np.random.default_rng(1)
    x, y = _blobs(rng, 400, centres)
    basis = proj_rng.normal(size=(8, 8))
    x = (x @ basis).astype(np.float32)
    mask = np.arange(400) < 150  # 150 labelled, 250 unlabelled
    train = Corpus.from_arrays(
        {"features": x[:300]},
        words=y[:300],
        word_mask=mask[:300],
        view_kinds={"features": "real"},
    )
    test = Corpus.from_arrays(
        {"features": x[300:]},
        words=np.zeros_like(y[300:]),
        word_mask=np.zeros(100, bool),
        view_kinds={"features": "real"},
    )
    return train, test, y[300:], y[:300], mask[:300]


def _map(scores, truth):
    return np.mean(
        [average_precision_score(truth[:, k], scores[:, k]) for k in range(4)]
    )


@pytest.mark.parametrize("name", ["iale-sf", "iale-svm", "ale-sf", "ale-svm", "bsvm"])
def test_methods_detect_concepts_and_round_trip(corpora, tmp_path, name):
    train, test, truth, _, _ = corpora
    method = get_method(name)
    hyper = parse_hyper(method, {k: v for k, v in SMALL.items() if k in method.hyper})
    fitted = method.fit(train, rng_key=jax.random.key(0), **hyper)
    scores = np.asarray(method.score_words(fitted, test))
    assert scores.shape == (100, 4) and np.all(np.isfinite(scores))
    # the blobs lie on a line: the middle blob (concept 1) and "blob 0 or 2"
    # (concept 3) are not linearly separable, so the linear baseline is only
    # required on the outer blobs; the eigenfunctions separate all four
    if name == "bsvm":
        assert (
            min(average_precision_score(truth[:, k], scores[:, k]) for k in (0, 2))
            > 0.9
        )
    else:
        assert _map(scores, truth) > 0.9
    path = tmp_path / "model.npz"
    save(path, fitted)
    again = load(path)
    np.testing.assert_allclose(
        np.asarray(method.score_words(again, test)), scores, rtol=1e-5, atol=1e-5
    )
    fit_scores = np.asarray(method.score_fit_corpus(fitted))
    assert fit_scores.shape == (300, 4)


def test_iale_batches_and_training_images(corpora):
    train, _, _, _, _ = corpora
    method = get_method("iale-sf")
    fitted = method.fit(train, rng_key=jax.random.key(0), **SMALL_SF, batch_size=64)
    # IALE applied to the training images reproduces the fit-time U / scores
    np.testing.assert_allclose(
        np.asarray(method.score_words(fitted, train)),
        np.asarray(method.score_fit_corpus(fitted)),
        rtol=1e-5,
        atol=1e-5,
    )
    assert method.embed(fitted, train).shape == (300, 40)


def test_smooth_function_uses_unlabelled_images(corpora):
    """The unlabelled images enter the eigenfunctions (the density), not the labels:
    same labelled count, different detectors."""
    train, test, truth, _, mask = corpora
    method = get_method("iale-sf")
    with_unlabelled = method.fit(train, rng_key=jax.random.key(0), **SMALL_SF)
    labelled_only = method.fit(
        train.subset(mask), rng_key=jax.random.key(0), **SMALL_SF
    )
    a = np.asarray(method.score_words(with_unlabelled, test))
    b = np.asarray(method.score_words(labelled_only, test))
    assert not np.allclose(a, b)
    assert with_unlabelled.info["num_labelled"] == labelled_only.info["num_labelled"]


def test_bad_input(corpora):
    train, _, _, _, _ = corpora
    with pytest.raises(KeyError, match="valid"):
        parse_hyper(get_method("ale-sf"), {"nope": 1})
    with pytest.raises(ValueError, match="max_images"):
        get_method("gsf").fit(train, rng_key=jax.random.key(0), max_images=10)
    no_labels = Corpus.from_arrays(
        {"f": np.ones((5, 2), np.float32)}, view_kinds={"f": "real"}
    )
    with pytest.raises(ValueError, match="words or labels"):
        get_method("bsvm").fit(no_labels, rng_key=jax.random.key(0))


def test_gsf_matches_exact_eigenmaps_and_detects(corpora):
    """GSF's eigenmaps are the exact normalized-Laplacian eigenvectors (checked against
    scipy's dense solver on the graph's own adjacency) and detect the blobs."""
    import scipy.linalg

    from jaxannot.graph import knn_graph, to_scipy
    from jaxannot.methods.ale.annotators import laplacian_eigenmaps

    train, test, truth, _, _ = corpora
    z = np.random.default_rng(3).normal(size=(80, 3)).astype(np.float32)  # connected
    u = laplacian_eigenmaps(z, 5, 6)
    w = to_scipy(knn_graph(z, 6, weight="heat")).toarray().astype(np.float64)
    d = w.sum(1)
    vals, vecs = scipy.linalg.eigh(np.diag(d) - w, np.diag(d))
    checked = 0
    for j in range(5):
        ref = vecs[:, j + 1] / np.sqrt((vecs[:, j + 1] ** 2).mean())
        gap = min(vals[j + 2] - vals[j + 1], vals[j + 1] - vals[j])
        if gap > 1e-3:  # a simple eigenvalue: the eigenvector is defined up to sign
            assert abs(abs(u[:, j] @ ref) / len(ref) - 1.0) < 1e-3
            checked += 1
    assert checked >= 3
    method = get_method("gsf")
    fitted = method.fit(train, rng_key=jax.random.key(0), eigenvectors=20, k=8)
    scores = np.asarray(method.score_words(fitted, test))
    assert _map(scores, truth) > 0.9
    assert np.asarray(method.score_fit_corpus(fitted)).shape == (300, 4)


def test_scene_acceptance_ale_sf_vs_bsvm(data_root):
    """Issue 6 acceptance on real scene data with the defaults: ALE-SF MiAP within 2
    points of BSVM or above. Fitted on scene's whole training split (the claim needs
    it: on 900 or fewer training images BSVM wins by up to 7 points), scored on a
    seeded 400 of its 1196 test images. Measured with the cross-validated defaults
    (defaults_cv/ale-sf_scene.json, bsvm_scene.json): 78.8 vs 77.6 here (other
    400-image draws 79.4 vs 77.4, 78.3 vs 74.7; all 1196: 77.9 vs 75.2); with the
    earlier λ = 100, bandwidth 0.25, PCA 100, clip 0.005, C = 5: 67.8 vs 59.7."""
    from jaxannot.data import make_task
    from jaxannot.data.datasets import load_dataset
    from jaxannot.metrics import mean_interpolated_average_precision

    train, test = load_dataset("scene", data_dir=data_root)
    rows = np.random.default_rng(0).permutation(test.num_images)[:400]
    test = test.subset(np.sort(rows))
    task = make_task(train, test, protocol="inductive", seed=0)
    miap = {}
    for name in ("ale-sf", "bsvm"):
        method = get_method(name)
        fitted = method.fit(task.train, rng_key=jax.random.key(0), **method.hyper)
        scores = np.asarray(method.score_words(fitted, task.test))[task.eval_rows]
        miap[name] = 100 * mean_interpolated_average_precision(scores, task.truth_words)
    assert miap["ale-sf"] >= miap["bsvm"] - 2.0, miap
    assert miap["bsvm"] > 50.0, miap  # and BSVM itself is no straw man


def test_a_detector_off_its_support_is_an_error_naming_it(corpora, monkeypatch):
    """A linear SVM that ends with a NaN weight (planted) is refused at the end of the
    fit, naming the array, instead of scoring every image NaN."""
    train = corpora[0]
    real = ale_annotators.train_detector

    def nan_detector(*args, **kwargs):
        detector, info = real(*args, **kwargs)
        return detector._replace(coef=np.full_like(detector.coef, np.nan)), info

    monkeypatch.setattr(ale_annotators, "train_detector", nan_detector)
    for name in ("iale-svm", "bsvm"):
        method = get_method(name)
        hyper = {k: v for k, v in SMALL.items() if k in method.hyper}
        with pytest.raises(SupportError, match=rf"{name}: .detector.coef left its"):
            method.fit(train, rng_key=jax.random.key(0), **hyper)


def test_widths_variances_and_scales_have_their_support(corpora):
    """The check the fits run passes a fitted model and refuses a non-positive
    kernel width, a negative PCA variance and a zero feature scale."""
    train = corpora[0]
    fitted = get_method("iale-sf").fit(train, rng_key=jax.random.key(0), **SMALL_SF)
    params = fitted.params
    ale_annotators.check_fitted_support("iale-sf", params)
    ale = params.ale
    bad_width = params._replace(ale=ale._replace(kernel_width=np.float32(0.0)))
    with pytest.raises(SupportError, match="ale.kernel_width left its support"):
        ale_annotators.check_fitted_support("iale-sf", bad_width)
    variances = np.asarray(ale.pca.variances).copy()
    variances[-1] = -1e-3
    bad_pca = params._replace(
        ale=ale._replace(pca=ale.pca._replace(variances=variances))
    )
    with pytest.raises(SupportError, match="ale.pca.variances left its support"):
        ale_annotators.check_fitted_support("iale-sf", bad_pca)
    gsf = get_method("gsf").fit(train, rng_key=jax.random.key(0))
    ale_annotators.check_fitted_support("gsf", gsf.params)
    zero = gsf.params._replace(scale=np.zeros_like(gsf.params.scale))
    with pytest.raises(SupportError, match="gsf: scale left its support"):
        ale_annotators.check_fitted_support("gsf", zero)
