"""The registered methods sfsls, sfss and fsnm on a small planted corpus."""

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import jax

from jaxannot.annotators import get_method, load, parse_hyper, save
from jaxannot.annotators.feature_selection import ranked_features, selected_features
from jaxannot.data.corpus import Corpus
from jaxannot.data.protocols import make_task


@pytest.fixture(autouse=True, scope="module")
def _single_thread_blas():
    """OpenBLAS worker threads make LAPACK calls ~40x slower on the loaded 2-core CI
    machine; the d x d Cholesky factorizations run single-threaded here."""
    with threadpool_limits(1, user_api="blas"):
        yield


def _average_precision(s, y):
    order = np.argsort(-s, kind="stable")
    hits = y[order] > 0
    return np.sum(np.cumsum(hits)[hits] / (np.flatnonzero(hits) + 1)) / hits.sum()


def _map(scores, truth):
    cols = [j for j in range(truth.shape[1]) if truth[:, j].any()]
    return np.mean([_average_precision(scores[:, j], truth[:, j]) for j in cols])


@pytest.fixture(scope="module")
def task():
    """3 concepts driven by features 0-2 of 12; 40% of the training words observed."""
    rng = np.random.default_rng(0)
    n, d = 160, 12
    x = rng.normal(size=(n, d)).astype(np.float32)
    words = (x[:, :3] + 0.3 * rng.normal(size=(n, 3)) > 0.4).astype(np.float32)
    corpus = Corpus.from_arrays({"features": x}, words=words, name="planted")
    train, test = corpus.subset(np.arange(100)), corpus.subset(np.arange(100, n))
    return make_task(train, test, labelled_fraction=0.4, seed=0)


HYPER = {
    "sfsls": dict(alpha=1.0, lam=5.0, mu=1.0, subspace=2, neighbors=5),
    "sfss": dict(alpha=1.0, lam=5.0, mu=1.0, subspace=2, neighbors=5),
    "fsnm": dict(gamma=1.0, selected=0.25),
}


@pytest.mark.parametrize("name", ["sfsls", "sfss", "fsnm"])
def test_method_fits_ranks_scores_and_round_trips(name, task, tmp_path):
    method = get_method(name)
    hyper = parse_hyper(method, HYPER[name])
    fitted = method.fit(task.train, rng_key=jax.random.key(0), **hyper)
    scores = np.asarray(method.score_words(fitted, task.test))
    assert scores.shape == (task.test.num_images, 3) and np.all(np.isfinite(scores))
    # the planted informative features come first
    assert set(ranked_features(fitted)[:3]) == {0, 1, 2}
    np.testing.assert_array_equal(selected_features(fitted, 3), [0, 1, 2])
    # annotation quality well above chance (random scores give MAP ~ base rate ~0.3)
    assert _map(scores, task.truth_words) > 0.8
    objective = np.asarray(fitted.info["objective"])
    assert np.all(np.diff(objective) <= 2e-6 * np.abs(objective[:-1]))
    save(tmp_path / "m.npz", fitted)
    again = np.asarray(method.score_words(load(tmp_path / "m.npz"), task.test))
    np.testing.assert_allclose(again, scores, rtol=1e-5, atol=1e-6)


def test_sparser_p_gives_sparser_rows_and_unlabelled_images_change_the_fit(task):
    sfsls = get_method("sfsls")
    fits = {
        p: sfsls.fit(task.train, rng_key=None, p=p, **HYPER["sfsls"])
        for p in (0.25, 1.0)
    }
    norms = {p: np.linalg.norm(f.params["g"], axis=1) for p, f in fits.items()}
    small = {p: np.sum(v < 1e-3 * v.max()) for p, v in norms.items()}
    assert small[0.25] >= small[1.0] and small[0.25] >= 6
    supervised = sfsls.fit(
        task.train, rng_key=None, use_unlabelled=False, **HYPER["sfsls"]
    )
    assert not np.allclose(supervised.params["g"], fits[0.25].params["g"])
    emb = np.asarray(sfsls.embed(supervised, task.test))
    assert emb.shape == (task.test.num_images, 2)


def test_bad_input_is_rejected(task):
    with pytest.raises(ValueError, match="p = 1"):
        get_method("sfss").fit(task.train, rng_key=None, p=0.5)
    with pytest.raises(ValueError, match="neighbors"):
        get_method("sfsls").fit(task.train, rng_key=None, neighbors=0)
    with pytest.raises(ValueError, match="selected"):
        get_method("fsnm").fit(task.train, rng_key=None, selected=0.0)
    with pytest.raises(KeyError, match="valid"):
        parse_hyper(get_method("sfsls"), ["gamma=1"])
    no_words = Corpus.from_arrays({"f": np.ones((4, 2))})
    with pytest.raises(ValueError, match="no annotation words"):
        get_method("sfsls").fit(no_words, rng_key=None)
