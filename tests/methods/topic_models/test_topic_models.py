"""The topic-model annotators through the registry: both protocols, save/load,
better than word frequency on a synthetic corpus with a real blob-word association."""

import numpy as np
import pytest

import jax

from jaxannot import metrics
from jaxannot.annotators import get_method, load, save
from jaxannot.data import make_task
from jaxannot.data.synthetic import make_synthetic

FAST = {
    "mix-unigram": dict(topics=5, iterations=30),
    "lap-mix-unigram": dict(topics=5, iterations=10, warm_start=10, neighbors=5),
    "plsa-words": dict(topics=5, iterations=30, fold_in_iterations=30),
    "link-lda": dict(topics=5, iterations=30, fold_in_inner=30),
    "lap-link-lda": dict(topics=5, steps=200, fold_in_inner=30, neighbors=5),
}


#: Images of the transductive corpora; the inductive ones have a third more, so
#: that a quarter of them held out leaves 160 to fit: every fit of the file is of 160
#: images, one shape whose programs each method compiles once.
IMAGES = 160
INDUCTIVE_IMAGES = 213


@pytest.fixture(scope="module")
def corpus():
    return make_synthetic(seed=1, num_images=IMAGES, num_topics=5)


def _fit(name, task, **extra):
    m = get_method(name)
    hyper = {**m.hyper, **FAST[name], **extra}
    return m, m.fit(task.train, rng_key=jax.random.key(0), **hyper)


@pytest.fixture(scope="module")
def tasks(corpus):
    """The corpus under each protocol."""
    return {
        "transductive": make_task(
            corpus, None, protocol="transductive", labelled_fraction=0.25, seed=0
        ),
        "inductive": make_task(
            make_synthetic(seed=1, num_images=INDUCTIVE_IMAGES, num_topics=5),
            None,
            protocol="inductive",
            seed=0,
            test_fraction=0.25,
        ),
    }


@pytest.fixture(scope="module")
def fits(tasks):
    """``fits(name, protocol)``: the method's fit (``FAST``) of that task, made once
    for the tests that read it."""
    made = {}

    def fit(name, protocol):
        if (name, protocol) not in made:
            made[name, protocol] = _fit(name, tasks[protocol])
        return made[name, protocol]

    return fit


@pytest.mark.parametrize("name", sorted(FAST))
def test_transductive_beats_word_frequency(name, corpus, tasks, fits):
    task = tasks["transductive"]
    m, fitted = fits(name, "transductive")
    scores = np.asarray(m.score_fit_corpus(fitted))
    assert scores.shape == (corpus.num_images, corpus.num_words)
    rows = task.eval_rows
    acc = metrics.annotation_accuracy(scores[rows], task.truth_words)
    freq = np.asarray(task.train.words)[np.asarray(task.train.word_mask)].sum(0)
    base = metrics.annotation_accuracy(np.tile(freq, (rows.size, 1)), task.truth_words)
    assert acc > base + 0.1, (acc, base)


@pytest.mark.parametrize("name", sorted(FAST))
def test_inductive_fold_in_and_save_load(name, tasks, fits, tmp_path):
    task = tasks["inductive"]
    m, fitted = fits(name, "inductive")
    scores = np.asarray(m.score_words(fitted, task.test))
    assert scores.shape == (task.test.num_images, task.train.num_words)
    assert np.all(np.isfinite(scores))
    freq = np.asarray(task.train.words).sum(0)
    base = metrics.annotation_accuracy(
        np.tile(freq, (scores.shape[0], 1)), task.truth_words
    )
    assert metrics.annotation_accuracy(scores, task.truth_words) > base + 0.1
    save(tmp_path / "m.npz", fitted)
    again = np.asarray(m.score_words(load(tmp_path / "m.npz"), task.test))
    np.testing.assert_allclose(again, scores, rtol=1e-5, atol=1e-7)
    z = np.asarray(m.embed(fitted, task.test))
    assert z.shape == (task.test.num_images, 5)


def test_lap_mix_unigram_objective_and_lambda():
    # few, noisy tokens: uncertain posteriors that disagree between neighbours
    corpus = make_synthetic(
        seed=2, num_images=IMAGES, num_topics=5, tokens_per_image=3, leak=0.5
    )
    task = make_task(
        corpus, None, protocol="transductive", labelled_fraction=0.25, seed=0
    )
    m, small = _fit("lap-mix-unigram", task, lam=0.0)
    _, big = _fit("lap-mix-unigram", task, lam=50.0)
    from jaxannot.graph import knn_graph, laplacian_penalty

    g = knn_graph(np.asarray(corpus.views["blobs"], np.float32), 5)
    r_small = float(laplacian_penalty(g, small.params.phi))
    r_big = float(laplacian_penalty(g, big.params.phi))
    assert r_big < 0.5 * r_small  # the penalty pulls neighbours' posteriors together
    _, v2 = _fit("lap-mix-unigram", task, lam=5.0, algorithm="lapvar2")
    assert len(v2.info["objective"]) >= 2


def test_lap_mix_unigram_stops_at_its_tolerance(tasks, monkeypatch):
    from jaxannot.methods.topic_models import mixture_annotators

    task = tasks["transductive"]
    monkeypatch.setattr(mixture_annotators, "LAP_TOLERANCE", 0.0)
    _, every = _fit("lap-mix-unigram", task, iterations=12, warm_start=0)
    full = np.asarray(every.info["objective"], np.float64)
    assert len(full) == 12  # no tolerance: every iteration runs
    gains = np.diff(full) / np.abs(full[:-1])
    tol = 0.5 * float(gains.max())  # stops where a gain first falls below it
    monkeypatch.setattr(mixture_annotators, "LAP_TOLERANCE", tol)
    _, early = _fit("lap-mix-unigram", task, iterations=12, warm_start=0)
    obj = np.asarray(early.info["objective"], np.float64)
    stop = int(np.argmax(gains < tol)) + 2  # the iteration whose gain fell short
    assert len(obj) == stop < 12
    np.testing.assert_allclose(obj, full[:stop], rtol=1e-6)
    assert np.all(np.diff(obj) >= -1e-6 * np.abs(obj[:-1]))  # non-decreasing


def test_bad_hyper_parameters(tasks):
    task = tasks["transductive"]
    with pytest.raises(ValueError, match="lapvar1"):
        _fit("lap-mix-unigram", task, algorithm="bogus")
    with pytest.raises(ValueError, match="topics"):
        _fit("link-lda", task, topics=0)
    with pytest.raises(KeyError, match="blobs"):
        _fit("plsa-words", task, views="nope")
    with pytest.raises(
        ValueError, match=r"lam=-1.0 is invalid \(out of range\); valid: float >= 0"
    ):
        _fit("lap-link-lda", task, lam=-1.0)


def test_lap_link_lda_scores_each_image_alone(tasks, fits):
    task = tasks["inductive"]
    m, fitted = fits("lap-link-lda", "inductive")
    full = np.asarray(m.score_words(fitted, task.test))
    rows = np.arange(3, 9)
    part = np.asarray(m.score_words(fitted, task.test.subset(rows)))
    np.testing.assert_allclose(part, full[rows], rtol=1e-5, atol=1e-7)


def test_link_lda_fits_by_cvb0_by_default_and_vb_on_request(tasks, fits):
    from jaxannot.methods.topic_models import link_lda as ll
    from jaxannot.methods.topic_models import link_lda_cvb0 as cvb0
    from jaxannot.methods.topic_models import link_lda_vb as llvb
    from jaxannot.methods.topic_models import visual_words as vw

    task = tasks["transductive"]
    m, fitted = fits("link-lda", "transductive")
    assert m.hyper["inference"] == "cvb0"
    names, edges, _ = vw.fit_views(task.train, 5, "", 8)
    data = (vw.text(task.train),) + vw.visual(task.train, names, edges)
    prior = ll.LDAPrior(alpha=m.hyper["alpha"], eta=m.hyper["eta"])
    state, _ = cvb0.fit_cvb0(
        jax.random.key(0),
        data,
        5,
        prior=prior,
        num_iterations=FAST["link-lda"]["iterations"],
        num_blocks=m.hyper["blocks"],
    )
    np.testing.assert_allclose(fitted.params.lambda_text, state.lambdas[0])
    _, by_vb = _fit("link-lda", task, inference="vb")
    vb_state, _ = llvb.fit_vb(
        jax.random.key(0),
        data,
        5,
        num_iterations=FAST["link-lda"]["iterations"],
        num_inner=m.hyper["inner"],
        prior=prior,
    )
    np.testing.assert_allclose(by_vb.params.lambda_text, vb_state.lambdas[0])
    with pytest.raises(ValueError, match="cvb0, vb"):
        _fit("link-lda", task, inference="gibbs")


def test_link_lda_fits_by_scvb0_from_stochastic_above_images(tasks):
    from jaxannot.methods.topic_models import link_lda as ll
    from jaxannot.methods.topic_models import link_lda_scvb0 as scvb0
    from jaxannot.methods.topic_models import visual_words as vw

    task = tasks["transductive"]
    m, fitted = _fit("link-lda", task, stochastic_above=1, passes=2, batch=16)
    names, edges, _ = vw.fit_views(task.train, 5, "", 8)
    data = (vw.text(task.train),) + vw.visual(task.train, names, edges)
    state, _ = scvb0.fit_scvb0(
        jax.random.key(0),
        data,
        5,
        prior=ll.LDAPrior(alpha=m.hyper["alpha"], eta=m.hyper["eta"]),
        num_passes=2,
        batch_size=16,
        progress_bar=False,
    )
    np.testing.assert_allclose(fitted.params.lambda_text, state.lambdas[0])
    # below the size, batch CVB0 (the default's own test above)
    assert task.train.num_images < m.hyper["stochastic_above"]


@pytest.mark.parametrize("name", ["mix-unigram", "lap-mix-unigram"])
def test_mixture_fold_in_is_the_declarations_posterior(name):
    # New images' posteriors come from the declaration (VEM.posteriors_for /
    # local_log_joint); they equal φ = softmax(log π + Σ_v n^v log β^v) over the
    # visual views written out here (LapMixUnigram with λ = 0: no graph pull).
    from jaxannot.methods.topic_models import visual_words as vw

    corpus = make_synthetic(
        seed=2,
        num_images=INDUCTIVE_IMAGES,
        num_topics=5,
        tokens_per_image=3,
        leak=0.5,
    )
    task = make_task(corpus, None, protocol="inductive", seed=0, test_fraction=0.25)
    extra = {"lam": 0.0} if name == "lap-mix-unigram" else {}
    m, fitted = _fit(name, task, **extra)
    p = fitted.params
    vis = vw.fitted_visual(fitted, task.test)
    a = np.asarray(p.log_pi, np.float64) + sum(
        np.asarray(x, np.float64) @ np.asarray(p.log_beta_visual[i]).T
        for i, x in enumerate(vis)
    )
    phi = np.exp(a - a.max(1, keepdims=True))
    phi /= phi.sum(1, keepdims=True)
    assert phi.max(1).min() < 0.9  # posteriors not saturated: the check bites
    np.testing.assert_allclose(m.embed(fitted, task.test), phi, atol=2e-5)
    words = phi @ np.exp(np.asarray(p.log_beta_text, np.float64))
    np.testing.assert_allclose(m.score_words(fitted, task.test), words, atol=2e-5)
