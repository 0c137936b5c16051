import json

import numpy as np
import pytest

from jaxannot import metrics, tuning
from jaxannot.annotators import Method
from jaxannot.annotators.base import Fitted
from jaxannot.cli.app import main
from jaxannot.data import Corpus, make_task
from jaxannot.data.synthetic import make_synthetic
from jaxannot.evaluation import check_columns, evaluate, format_table, metric_names


def _task(num_words: int):
    rng = np.random.default_rng(0)
    corpus = Corpus.from_arrays(
        {"x": rng.normal(size=(20, 3)).astype(np.float32)},
        words=(rng.random((20, num_words)) < 0.5).astype(np.float32),
    )
    return make_task(corpus, None, protocol="inductive", seed=0)


def _never_fitted(corpus, *, rng_key):
    raise AssertionError("fitted although the dataset is refused")


PROBE = Method("probe", _never_fitted, score_words=lambda fitted, corpus: None)


def test_fewer_words_than_the_metrics_rank_is_refused_before_the_fit():
    with pytest.raises(ValueError, match=r"has 4 word\(s\) .* need at least 5"):
        evaluate(PROBE, _task(4))
    with pytest.raises(AssertionError, match="fitted although"):  # 4 are enough
        evaluate(PROBE, _task(4), n=4)
    with pytest.raises(AssertionError, match="fitted although"):
        evaluate(PROBE, _task(5))


# ------------------------------------------------------------ multi-label metrics
def _fixed_scores(seed):
    """A method scoring every image of a corpus with the same seeded random draw."""

    def score(fitted, corpus):
        rng = np.random.default_rng(seed)
        return rng.integers(0, 4, size=(corpus.num_images, corpus.num_words))

    return Method("fixed", lambda corpus, *, rng_key: Fitted("fixed", {}, {}, {}),
                  score_words=score)  # fmt: skip


def _words_task(protocol="inductive"):
    rng = np.random.default_rng(1)
    words = (rng.random((40, 8)) < 0.3).astype(np.float32)
    words[:6, :4] = 1  # cardinality of the first images differs from the rest
    corpus = Corpus.from_arrays({"x": rng.normal(size=(40, 3))}, words=words)
    return make_task(corpus, None, protocol=protocol, seed=0)


@pytest.mark.parametrize("protocol", ["inductive", "transductive"])
def test_evaluate_reports_the_multilabel_metrics_with_the_top_k_of_the_training_words(
    protocol,
):
    task = _words_task(protocol)
    result = evaluate(_fixed_scores(3), task)
    observed = np.asarray(task.train.words)[np.asarray(task.train.word_mask)]
    cardinality = (observed > 0).sum(1).mean()
    k = int(np.floor(cardinality + 0.5))
    assert result.bipartition == {
        "rule": "top-k", "k": k, "train_label_cardinality": pytest.approx(cardinality)
    }  # fmt: skip
    if protocol == "transductive":  # hidden rows (zeros) are not counted
        all_rows = (np.asarray(task.train.words) > 0).sum(1).mean()
        assert int(np.floor(all_rows + 0.5)) != k
    scores = _fixed_scores(3).score_words(None, task.test)[np.asarray(task.eval_rows)]
    expected = metrics.multilabel_report(scores, task.truth_words, k)
    assert {m: result.metrics[m] for m in metrics.MULTILABEL_METRICS} == expected
    assert result.as_json()["bipartition"]["k"] == k
    assert "map" in result.metrics  # the annotation metrics are still there


def test_table_columns_are_chosen_and_checked():
    row = {"method": "m", "fit_seconds": 1.0,
           "metrics": {"map": 0.5, "lrap": 0.25, "coverage": 3.5}}  # fmt: skip
    header = format_table([row], ["lrap", "coverage", "micro_f1"]).splitlines()
    assert header[0].split() == ["method", "lrap", "coverage", "micro_f1", "fit", "s"]
    assert header[2].split() == ["m", "0.2500", "3.50", "-", "1.00"]
    assert "lrap" not in format_table([row]).splitlines()[0]  # default columns
    assert check_columns("lrap, micro_f1") == ["lrap", "micro_f1"]
    assert set(metrics.MULTILABEL_METRICS) <= set(metric_names())
    with pytest.raises(ValueError, match=r"unknown metric\(s\) \['lrp'\].*valid.*lrap"):
        check_columns("lrap,lrp")
    with pytest.raises(ValueError, match="none given"):
        check_columns(",")


def test_cli_metrics_option_sets_the_columns_and_refuses_unknown_ones(
    data_root, tmp_path, capsys
):
    out = tmp_path / "r.json"
    argv = ["evaluate", "empirical", "--dataset", "emotions", "--data-dir",
            str(data_root), "--json", str(out)]  # fmt: skip
    assert main([*argv, "--metrics", "lrap,example_f1,hamming_loss"]) == 0
    header = capsys.readouterr().out.splitlines()[0].split()
    assert header == ["method", "lrap", "example_f1", "hamming_loss", "fit", "s"]
    written = json.loads(out.read_text())
    assert set(metrics.MULTILABEL_METRICS) <= set(written["metrics"])
    assert written["bipartition"]["k"] == 2  # emotions: 1.81 words per image
    assert main(["evaluate", "empirical", "--dataset", "nope", "--metrics", "f2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("jaxannot: error: unknown metric")


def test_tune_accepts_the_multilabel_metrics_and_minimises_the_losses():
    corpus = make_synthetic(seed=0, num_images=120, num_classes=True)
    valid = tuning.available_metrics("knn", corpus)
    assert set(metrics.MULTILABEL_METRICS) <= set(valid)
    assert tuning.resolve_metric("knn", corpus, "example_f1") == "example_f1"
    lower = {"ranking_loss", "coverage", "one_error", "hamming_loss"}
    assert lower <= tuning.LOWER_IS_BETTER
    assert not lower & {"lrap", "micro_f1", "macro_f1", "example_f1"}
    result = tuning.cross_validate(
        "knn", corpus, {"k": [1, 4, 60]}, folds=3, metric="coverage"
    )
    means = [r.mean for r in result.results]
    assert len(set(means)) == 3
    assert not result.higher_is_better and result.best_index == int(np.argmin(means))
