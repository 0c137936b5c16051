import numpy as np
import pytest

import jax

from jaxannot.data import Corpus


def _corpus(n=6):
    rng = np.random.default_rng(0)
    return Corpus.from_arrays(
        {
            "blobs": rng.poisson(1.0, (n, 4)).astype(np.float32),
            "rgb": rng.normal(size=(n, 3)),
        },
        view_kinds={"blobs": "bag", "rgb": "real"},
        words=(rng.random((n, 5)) < 0.4).astype(np.float32),
        labels=np.arange(n) % 2,
        name="toy",
    )


def test_properties_and_selection():
    c = _corpus()
    assert (c.num_images, c.num_words, c.num_classes) == (6, 5, 2)
    assert c.primary_view == "blobs"
    assert c.concatenated_views().shape == (6, 7)
    sub = c.subset(np.array([0, 2]))
    assert sub.num_images == 2 and sub.labels.tolist() == [0, 0]
    hidden = c.with_hidden(np.array([True, False, True, False, False, False]))
    assert hidden.word_mask.tolist() == [False, True, False, True, True, True]
    assert np.all(hidden.words[[0, 2]] == 0) and hidden.labels[0] == -1
    assert hidden.observed().num_images == 4


def test_is_a_pytree_usable_under_jit():
    c = _corpus()
    total = jax.jit(lambda corpus: corpus.views["blobs"].sum() + corpus.words.sum())(c)
    assert np.isclose(float(total), c.views["blobs"].sum() + c.words.sum())
    mapped = jax.tree_util.tree_map(lambda x: x * 0, c)
    assert isinstance(mapped, Corpus) and mapped.word_names == c.word_names


@pytest.mark.parametrize(
    "views, kinds, match",
    [
        ({"a": np.array([[1.0, np.nan]])}, {}, "NaN/inf value at image 0, dim 1"),
        ({"a": np.array([[1.0, np.inf]])}, {}, "NaN/inf"),
        ({"a": np.zeros((2, 0))}, {}, "empty vocabulary"),
        ({"a": np.zeros(3)}, {}, "must be 2-D"),
        ({"a": -np.ones((2, 2))}, {"a": "bag"}, "negative"),
        ({"a": np.ones((2, 2))}, {"a": "histogram"}, "valid kinds"),
        ({"a": np.ones((2, 2)), "b": np.ones((3, 2))}, {}, "has 3 images"),
    ],
)
def test_bad_input_is_named(views, kinds, match):
    with pytest.raises(ValueError, match=match):
        Corpus.from_arrays(views, view_kinds=kinds)


def test_bad_words_and_unknown_view():
    with pytest.raises(ValueError, match="words"):
        Corpus.from_arrays({"a": np.ones((2, 2))}, words=np.ones((3, 2)))
    with pytest.raises(KeyError, match="valid views"):
        _corpus().view("nope")
