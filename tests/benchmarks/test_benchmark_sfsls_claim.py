"""``benchmarks/claims/sfsls_claim.py``: the selector's ridge against scikit-learn and
``fsnm``, a selector at equal fraction, and a whole (tiny) table and diagnosis run."""

import numpy as np
import pytest
from sklearn.linear_model import Ridge

import jax

from jaxannot.annotators import get_method
from jaxannot.data.corpus import Corpus
from jaxannot.data.preprocessing import standardize
from jaxannot.metrics import mean_average_precision


@pytest.fixture(scope="module")
def bench(benchmark_script):
    return benchmark_script("benchmarks.claims.sfsls_claim")


def _pool(n=300, d=8, c=3, seed=0):
    """Concepts driven by the first three features; the rest is noise."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)).astype(np.float32)
    w = np.zeros((d, c))
    w[:3] = rng.normal(size=(3, c))
    y = (x @ w + 0.3 * rng.normal(size=(n, c)) > 0.3).astype(np.float32)
    return Corpus.from_arrays({"a": x[:, :5], "b": x[:, 5:]}, words=y, name="toy")


def test_ridge_on_selected_is_sklearns_ridge(bench):
    rng = np.random.default_rng(1)
    x = rng.normal(2.0, 3.0, size=(40, 7)).astype(np.float32)
    y = (rng.random((40, 3)) > 0.6).astype(np.float32)
    keep = np.array([5, 0, 3])
    model = bench.ridge_on_selected(x, y, keep, 0.7)
    z, _, _ = standardize(x, eps=1e-8)
    ref = Ridge(alpha=0.7 * 40).fit(z[:, [0, 3, 5]], y)
    x_new = rng.normal(2.0, 3.0, size=(9, 7)).astype(np.float32)
    z_new = (x_new - x.mean(0)) / x.std(0)
    np.testing.assert_allclose(
        bench.ridge_scores(model, x_new), ref.predict(z_new[:, [0, 3, 5]]), atol=1e-4
    )


@pytest.mark.parametrize("fraction", [0.25, 0.5, 1.0])
def test_fsnm_selector_equals_fsnm_with_selected(bench, fraction):
    """The selector path of ``evaluate`` on FSNM's ranking is ``fsnm(selected=f)``."""
    corpus = _pool().with_hidden(np.arange(300) % 3 > 0)  # a third labelled
    images, rows = _pool(seed=5), np.arange(0, 300, 2)
    truth = np.asarray(images.words)[rows]
    res = bench.evaluate("fsnm", {}, corpus, (images, rows, truth), [(fraction, 3.0)])
    m = get_method("fsnm")
    fitted = m.fit(
        corpus,
        rng_key=jax.random.key(0),
        gamma=bench.FSNM_GAMMA,
        selected=fraction,
        ridge=3.0,
    )
    scores = np.asarray(m.score_words(fitted, images))[rows]
    assert res["sel"][f"{fraction}/3.0"] == pytest.approx(
        mean_average_precision(scores, truth), abs=1e-6
    )
    assert res["direct"] is None


def test_sfsls_selector_ridges_sfsls_top_features(bench):
    """SFSLS as a selector: its top-f features by ‖gⁱ‖, then the ridge on the
    labelled images; its own scores are the ``direct`` MAP."""
    corpus = _pool().with_hidden(np.arange(300) % 4 > 0)
    images, rows = _pool(seed=7), np.arange(100)
    truth = np.asarray(images.words)[rows]
    hyper = dict(alpha=0.1, mu=10.0, p=0.5, lam=1.0, subspace=1, iterations=10)
    res = bench.evaluate("sfsls", hyper, corpus, (images, rows, truth), [(0.25, 1.0)])
    m = get_method("sfsls")
    fitted = m.fit(corpus, rng_key=jax.random.key(0), **hyper)
    direct = np.asarray(m.score_words(fitted, images))[rows]
    assert res["direct"] == pytest.approx(mean_average_precision(direct, truth))
    top = np.argsort(-np.linalg.norm(np.asarray(fitted.params.g), axis=1))[:2]
    labelled = np.asarray(corpus.word_mask)
    x, y = corpus.features()[labelled], np.asarray(corpus.words)[labelled]
    z, mean, std = standardize(x, eps=1e-8)
    ref = Ridge(alpha=1.0 * labelled.sum()).fit(z[:, np.sort(top)], y)
    z_eval = (images.features()[rows] - mean) / std
    expect = mean_average_precision(ref.predict(z_eval[:, np.sort(top)]), truth)
    assert res["sel"]["0.25/1.0"] == pytest.approx(expect, abs=1e-5)


@pytest.fixture
def small_grids(bench, monkeypatch):
    monkeypatch.setattr(bench, "LAM", (1.0, 10.0))
    monkeypatch.setattr(bench, "SUBSPACE", (1,))
    monkeypatch.setattr(bench, "RIDGE", (1.0, 10.0))
    monkeypatch.setattr(bench, "SELECTED", (0.25, 0.5))
    monkeypatch.setattr(bench, "DIAG_MU", (10.0,))
    monkeypatch.setattr(bench, "BASE", dict(alpha=0.1, mu=10.0, iterations=5))


def test_table_run_columns_and_their_choices(bench, small_grids):
    run = bench.Run(_pool(), seed=0, train_size=200)
    # the folds hide only labelled training images, each once
    hidden = np.concatenate([t[1] for _, t in run.folds])
    labelled = np.flatnonzero(np.asarray(run.fit_corpus.word_mask))
    np.testing.assert_array_equal(np.sort(hidden), labelled)
    for corpus, (_, rows, _) in run.folds:
        assert not np.asarray(corpus.word_mask)[rows].any()
    cv, chosen, test = bench.table_run(run, mus=(1000.0,))
    assert set(test) == set(bench.COLUMNS)
    assert chosen["fsnm_selector"]["selector"][0] < 1
    assert chosen["ridge_all"]["selector"][0] == 1
    assert (
        chosen["sfsls_selector"]["selector"][0]
        == (chosen["fsnm_selector"]["selector"][0])
    )
    assert (
        chosen["sfsls"]["hyper"]["mu"] == 10.0 and chosen["sfsls"]["hyper"]["p"] == 0.5
    )
    # each column's choice is its grid's CV best
    best = max(r["direct"] for r in cv["sfss"] if r["hyper"]["mu"] == 10.0)
    assert chosen["sfss"]["cv_map"] == best
    assert chosen["sfsls_mu"]["cv_map"] == max(r["direct"] for r in cv["sfsls"])
    # the ridge-on-all column is fsnm with every feature, refitted on the run
    f, ridge = chosen["ridge_all"]["selector"]
    ref = run.test("fsnm", {}, [(f, ridge)])["sel"][f"{f}/{ridge}"]
    assert test["ridge_all"] == ref
    results = {
        "protocol": {"mu": [1000.0]},
        "runs": [
            {"dataset": "toy", "seed": 0, "mu": [1000.0], "cv": cv}
            | {"chosen": chosen, "test": test}
        ],
    }
    table = bench.markdown(results)
    assert "| toy | " in table and "SFSLS-selector at FSNM's f" in table
    # both rankings at a fixed fraction: each its CV best, refitted and tested
    eq = bench.equal_fraction_run(run, {"cv": cv}, [0.25])
    assert eq["fsnm/0.25"]["cv_map"] == max(
        cv["fsnm"][f"0.25/{r}"] for r in (1.0, 10.0)
    )
    assert eq["sfsls/0.25"]["selector"][0] == 0.25
    c = eq["sfsls/0.25"]
    expect = run.test("sfsls", c["hyper"], [tuple(c["selector"])])["sel"]
    assert c["test"] == expect[f"0.25/{c['selector'][1]}"]
    eq_md = bench.equal_fraction_markdown(
        {"runs": [{"dataset": "toy", "seed": 0, "equal_fraction": eq}]}
    )
    assert "| 25% | " in eq_md
    diag = {"runs": [{"dataset": "toy", "seed": 0, "cv": bench.diagnose_run(run)}]}
    text = bench.diagnosis_markdown(results, diag)
    assert "| p = 0.25, μ = 10, r = 1 | " in text
    assert "labelled images only" in text and "FSNM ranking, f = 1, ridge" in text
