"""The ``emml`` and ``mbrm`` methods through the registry: fit, score, save/load, and
agreement with their building blocks."""

import numpy as np
import pytest

import jax
import jax.numpy as jnp

from jaxannot.annotators import get_method, load, parse_hyper, save
from jaxannot.data.corpus import Corpus
from jaxannot.inference.support import SupportError
from jaxannot.methods.emml import dual_solves
from jaxannot.methods.emml.structured_output import kernel_matrix


def _corpus(seed, n=80):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(4, 5)) * 4.0
    cluster = rng.integers(0, 4, n)
    x = (centres[cluster] + rng.normal(size=(n, 5))).astype(np.float32)
    words = np.zeros((n, 8), np.float32)
    words[np.arange(n), cluster] = 1.0  # one word per cluster
    words[np.arange(n), 4 + rng.integers(0, 4, n)] = 1.0  # a noise word
    return Corpus.from_arrays(
        {"features": x}, words=words, view_kinds={"features": "real"}
    )


@pytest.fixture(scope="module")
def corpora():
    return _corpus(0), _corpus(0, 120)


def _cluster_hits(scores, corpus):
    truth = np.asarray(corpus.words)[:, :4].argmax(1)
    return np.mean(np.asarray(scores)[:, :4].argmax(1) == truth)


@pytest.mark.parametrize("name", ["emml", "mbrm"])
def test_method_fits_scores_and_round_trips(name, corpora, tmp_path):
    train, test = corpora
    method = get_method(name)
    hyper = parse_hyper(
        method,
        ["vreps=20", "capacity=32", "violators_per_vrep=2"] if name == "emml" else [],
    )
    fitted = method.fit(train, rng_key=jax.random.key(0), **hyper)
    scores = np.asarray(method.score_words(fitted, test))
    assert scores.shape == (test.num_images, test.num_words)
    assert np.all(np.isfinite(scores))
    # the cluster word is learnable from the features; the noise words are not
    assert _cluster_hits(scores, test) > 0.9
    save(tmp_path / "m.npz", fitted)
    again = np.asarray(method.score_words(load(tmp_path / "m.npz"), test))
    np.testing.assert_allclose(again, scores, rtol=1e-5, atol=1e-6)
    if name == "emml":
        info = fitted.info
        assert info["converged"] is True and info["solver"] == "exact"
        assert info["max_violation"] <= hyper["tolerance"]


def test_emml_scores_are_eq_1_and_the_merge(corpora):
    train, test = corpora
    method = get_method("emml")
    hyper = parse_hyper(method, {"vreps": 20, "capacity": 32, "violators_per_vrep": 2})
    fitted = method.fit(train, rng_key=jax.random.key(1), **hyper)
    p = fitted.params
    x = np.asarray(test.views["features"])
    rows = np.asarray(kernel_matrix(x, p.vrep_features, "rbf", float(p.gamma)))
    np.testing.assert_allclose(
        np.asarray(method.score_words(fitted, test)),
        rows @ p.coefficients,
        rtol=1e-4,
        atol=1e-5,
    )
    merged = fitted.__class__(
        fitted.method, fitted.params, {**fitted.hyper, "top_vreps": 3}, fitted.info
    )
    top = np.argsort(-rows, 1)[:, :3]
    want = np.stack(
        [rows[i, top[i]] @ p.vrep_word_scores[top[i]] for i in range(len(x))]
    )
    np.testing.assert_allclose(
        np.asarray(method.score_words(merged, test)), want, rtol=1e-4, atol=1e-5
    )
    # the VReps' word scores are F = K B of the solver
    k = np.asarray(
        kernel_matrix(p.vrep_features, p.vrep_features, "rbf", float(p.gamma))
    )
    np.testing.assert_allclose(
        k @ p.coefficients, p.vrep_word_scores, rtol=1e-3, atol=1e-3
    )


def test_mbrm_matches_the_relevance_model_formula(corpora):
    train, test = corpora
    method = get_method("mbrm")
    fitted = method.fit(train, rng_key=jax.random.key(0), bandwidth=3.0, smoothing=2.0)
    x, xq = (
        np.asarray(train.views["features"], np.float64),
        np.asarray(test.views["features"], np.float64)[:5],
    )
    y = np.asarray(train.words) > 0
    pv = (2.0 * y + y.sum(0)) / (2.0 + len(x))
    d2 = ((xq[:, None] - x[None]) ** 2).sum(-1)
    w = np.exp(-(d2 - d2.min(1, keepdims=True)) / 6.0)
    want = (w / w.sum(1, keepdims=True)) @ pv
    got = np.asarray(method.score_words(fitted, test))[:5]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


def test_emml_reports_convergence_for_both_solvers(corpora, caplog):
    import json

    train, test = corpora
    method = get_method("emml")
    key = jax.random.key(0)
    ws = method.fit(
        train, rng_key=key, vreps=20, solver="working_set", violators_per_vrep=2
    )
    assert ws.info["solver"] == "working_set" and ws.info["overflow"] == 0
    assert ws.info["converged"] is True
    exact = method.fit(train, rng_key=key, vreps=20)
    # both solve the same dual: the same optimum (float32, tolerance 1e-3)
    np.testing.assert_allclose(
        exact.info["dual_objective"], ws.info["dual_objective"], rtol=1e-3
    )
    # a fit stopped early says so, in info and on the "jaxannot" logger
    with caplog.at_level("WARNING", logger="jaxannot"):
        short = method.fit(train, rng_key=key, vreps=20, exact_sweeps=1, tolerance=1e-7)
    assert short.info["converged"] is False
    assert any("before convergence" in r.getMessage() for r in caplog.records)
    # evaluate's JSON carries the fitted model's info
    from jaxannot.data.protocols import Task
    from jaxannot.evaluation import evaluate

    task = Task(
        train=train,
        test=test,
        eval_rows=np.arange(test.num_images),
        truth_words=np.asarray(test.words),
        truth_labels=None,
        protocol="inductive",
        labelled_fraction=1.0,
        seed=0,
    )
    payload = evaluate("emml", task, hyper=["vreps=20"]).as_json()
    assert payload["info"]["converged"] is True
    assert json.loads(json.dumps(payload))["info"]["solver"] == "exact"


def test_emml_without_a_solve_reports_how_far_it_is_from_the_optimum(corpora, caplog):
    train, _ = corpora
    method = get_method("emml")
    key = jax.random.key(0)
    hyper = {"vreps": 20, "gamma_scale": 1.0, "c": 1.0}  # the closed form below
    with caplog.at_level("WARNING", logger="jaxannot"):
        none = method.fit(train, rng_key=key, solver="none", **hyper)
    assert not caplog.records  # no solve, no convergence warning
    exact = method.fit(train, rng_key=key, solver="exact", **hyper)
    y = np.asarray(none.params.vrep_words)
    r = y.sum(1, keepdims=True)
    expected = y - r / (y.shape[1] - r) * (1 - y)  # RBF: unit diagonal, C = 1
    np.testing.assert_allclose(none.params.coefficients, expected, atol=1e-6)
    assert none.info["sweeps"] == 0 and none.info["solver"] == "none"
    # the coupled kernel makes the no-solve point suboptimal; the gap bounds it
    excess = none.info["dual_objective"] - exact.info["dual_objective"]
    assert 0 < excess <= none.info["duality_gap"] + 1e-3
    assert none.info["kkt_holds"] is False and exact.info["converged"] is True
    assert none.info["converged"] is None  # no solver ran: nothing to converge


def test_a_vrep_count_whose_kernel_cannot_fit_is_refused(corpora, monkeypatch):
    # XLA's CPU client hangs on a failed allocation: the fit refuses first, naming
    # the largest count that fits (16 B per VRep pair against half the memory); 20,
    # the count of the other fits here, whose compiled programs it reuses
    from jaxannot.runtime import memory

    train, _ = corpora
    monkeypatch.setattr(memory, "device_memory_bytes", lambda: 2 * 16 * 20 * 20)
    with pytest.raises(ValueError, match="use at most 20 VReps"):
        get_method("emml").fit(train, rng_key=jax.random.key(0), vreps=21)
    fitted = get_method("emml").fit(train, rng_key=jax.random.key(0), vreps=20)
    assert fitted.params.vrep_words.shape[0] == 20


def test_bad_hyper_parameters_are_rejected(corpora):
    train, _ = corpora
    method = get_method("emml")
    with pytest.raises(ValueError, match="vrep_method='spectral' is invalid"):
        method.fit(train, rng_key=jax.random.key(0), vreps=5, vrep_method="spectral")
    with pytest.raises(ValueError, match="solver='smo' is invalid"):
        method.fit(train, rng_key=jax.random.key(0), vreps=5, solver="smo")
    with pytest.raises(ValueError, match="kernel='poly' is invalid"):
        method.fit(train, rng_key=jax.random.key(0), vreps=5, kernel="poly")
    with pytest.raises(KeyError, match="unknown view 'pixels'"):
        method.fit(train, rng_key=jax.random.key(0), vreps=5, view="pixels")
    with pytest.raises(KeyError, match="valid"):
        parse_hyper(method, ["nonsense=1"])
    bare = Corpus.from_arrays(
        {"features": np.ones((4, 2), np.float32)}, view_kinds={"features": "real"}
    )
    with pytest.raises(ValueError, match="no words"):
        method.fit(bare, rng_key=jax.random.key(0))


def test_cli_query_on_a_saved_model(data_root, tmp_path, capsys):
    import json

    from jaxannot.cli.app import main
    from jaxannot.data.datasets import load_dataset

    train, _ = load_dataset("scene", data_dir=str(data_root))
    small = train.subset(np.arange(150))
    method = get_method("emml")
    hyper = parse_hyper(method, {"vreps": 20, "capacity": 16, "violators_per_vrep": 2})
    path = tmp_path / "scene_emml.npz"
    save(path, method.fit(small, rng_key=jax.random.key(0), **hyper))
    base = [str(path)]
    opts = ["--dataset", "scene", "--data-dir", str(data_root), "--top", "3"]
    names = list(train.word_names)

    assert main(["query", *base, "annotate", *opts, "--row", "0", "--row", "5"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [x["row"] for x in lines] == [0, 5]
    assert all(len(x["words"]) == 3 and set(x["words"]) <= set(names) for x in lines)

    assert main(["query", *base, "word", *opts, "--word", names[0]]) == 0
    hits = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert 1 <= len(hits) <= 3 and all(0 <= h["image"] < train.num_images for h in hits)
    scores = [h["score"] for h in hits]
    assert scores == sorted(scores, reverse=True)

    for kind, extra in (
        ("image", ["--row", "2"]),
        ("multimodal", ["--row", "2", "--word", names[1]]),
    ):
        assert main(["query", *base, kind, *opts, *extra]) == 0
        assert capsys.readouterr().out.strip()

    assert main(["query", *base, "word", *opts, "--word", "no-such-word"]) == 2
    assert "unknown word 'no-such-word'" in capsys.readouterr().err

    # a hand-made emml model without its VRep features: one error line naming the file
    import dataclasses

    fitted = load(path)
    params = fitted.params._asdict()
    del params["vrep_features"]
    broken = tmp_path / "no_vreps.npz"
    save(broken, dataclasses.replace(fitted, params=params))
    assert main(["query", str(broken), "word", *opts, "--word", names[0]]) == 2
    err = capsys.readouterr().err
    errors = [x for x in err.splitlines() if x.startswith("jaxannot: error:")]
    assert len(errors) == 1 and "Traceback" not in err
    assert "no_vreps.npz" in errors[0] and "no parameter 'vrep_features'" in errors[0]


@pytest.mark.parametrize(
    ("fault", "match"),
    [
        ("wrong_word_up", r"emml: coefficients \(signed .* minimum -0.5 is below"),
        ("mass_added", r"emml: coefficients left .* row sums to 0.25 times"),
        ("nan_scores", r"emml: .vrep_word_scores left its support"),
    ],
)
def test_a_dual_off_its_support_is_an_error_naming_it(
    fault, match, corpora, monkeypatch
):
    """A solver whose answer leaves the dual's support (planted: a wrong word's
    coefficient set to C / 2 (a wrong word's must be <= 0), or raised by C / 2 so that
    its row no longer sums to 0, or NaN scores) is refused at the end of the fit;
    the fits above pass the same check (both solvers and the closed form)."""
    real = dual_solves.fit_emml_exact

    def faulty(data, c, *args, **kwargs):
        state, trace = real(data, c, *args, **kwargs)
        if fault == "nan_scores":
            return state._replace(scores=state.scores.at[0, 0].set(jnp.nan)), trace
        wrong = int(np.flatnonzero(np.asarray(data.words[0]) <= 0)[0])
        coef = state.coefficients.at[0, wrong]
        coef = coef.set(0.5 * c) if fault == "wrong_word_up" else coef.add(0.5 * c)
        return state._replace(coefficients=coef), trace

    monkeypatch.setattr(dual_solves, "fit_emml_exact", faulty)
    with pytest.raises(SupportError, match=match):
        get_method("emml").fit(corpora[0], rng_key=jax.random.key(0), vreps=20, c=1.0)
