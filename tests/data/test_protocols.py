import numpy as np
import pytest

from jaxannot.data import Corpus, make_task


def _corpus(n, seed=0):
    rng = np.random.default_rng(seed)
    return Corpus.from_arrays(
        {"x": rng.normal(size=(n, 3))},
        words=(rng.random((n, 4)) < 0.5).astype(np.float32),
        labels=rng.integers(0, 3, n),
    )


def test_transductive_hides_the_scored_images():
    train, test = _corpus(30), _corpus(10, seed=1)
    task = make_task(train, test, protocol="transductive", seed=3)
    assert task.train is task.test and task.train.num_images == 40
    observed = task.train.word_mask
    assert observed.sum() == 10  # 25% of 40 by default (seed 000)
    np.testing.assert_array_equal(np.flatnonzero(~observed), task.eval_rows)
    assert np.all(task.train.words[task.eval_rows] == 0)
    assert np.all(task.train.labels[task.eval_rows] == -1)
    full = np.concatenate([train.words, test.words])
    np.testing.assert_array_equal(task.truth_words, full[task.eval_rows])
    again = make_task(train, test, protocol="transductive", seed=3)
    np.testing.assert_array_equal(again.eval_rows, task.eval_rows)


def test_inductive_labelled_fraction_keeps_unlabelled_images():
    train, test = _corpus(20), _corpus(8, seed=1)
    task = make_task(train, test, protocol="inductive", labelled_fraction=0.25, seed=0)
    assert task.train.num_images == 20 and task.train.word_mask.sum() == 5
    assert not task.test.word_mask.any() and np.all(task.test.words == 0)
    np.testing.assert_array_equal(task.truth_words, test.words)
    np.testing.assert_array_equal(task.truth_labels, test.labels)


def test_no_split_is_split_with_a_seed():
    task = make_task(_corpus(50), None, seed=0, test_fraction=0.2)
    assert task.train.num_images == 40 and task.test.num_images == 10


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"protocol": "semi"}, "valid protocols"),
        ({"labelled_fraction": 0.0}, r"\(0, 1\]"),
        ({"protocol": "transductive", "labelled_fraction": 1.0}, "< 1"),
    ],
)
def test_bad_protocol_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_task(_corpus(10), _corpus(5), **kwargs)
