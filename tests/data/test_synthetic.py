"""Synthetic multimodal mixture-of-unigrams corpora."""

import numpy as np
import pytest
from scipy.special import logsumexp

from jaxannot.data.synthetic import make_synthetic


def test_shapes_counts_and_determinism():
    c, truth = make_synthetic(
        3, num_images=50, real_dims=4, num_classes=5, return_truth=True
    )
    assert c.views["blobs"].shape == (50, 60) and c.view_kinds["blobs"] == "bag"
    assert c.views["features"].shape == (50, 4) and c.view_kinds["features"] == "real"
    assert c.words.shape == (50, 40) and c.word_mask.all()
    np.testing.assert_array_equal(c.views["blobs"].sum(1), 12)
    np.testing.assert_array_equal(c.words.sum(1), 3)
    np.testing.assert_array_equal(c.labels, truth.topics)  # num_classes == num_topics
    np.testing.assert_allclose(truth.blob_topics.sum(1), 1.0)
    np.testing.assert_allclose(truth.word_topics.sum(1), 1.0)
    again = make_synthetic(3, num_images=50, real_dims=4, num_classes=5)
    np.testing.assert_array_equal(again.views["blobs"], c.views["blobs"])
    other = make_synthetic(4, num_images=50)
    assert not np.array_equal(other.views["blobs"], c.views["blobs"])
    assert make_synthetic(0, num_images=10).labels is None
    assert make_synthetic(0, num_images=10, num_classes=False).labels is None
    flagged, t = make_synthetic(3, num_images=50, num_classes=True, return_truth=True)
    np.testing.assert_array_equal(flagged.labels, t.topics)
    assert flagged.class_names == ("0", "1", "2", "3", "4")
    coarse = make_synthetic(3, num_images=50, num_classes=2, return_truth=True)
    np.testing.assert_array_equal(coarse[0].labels, coarse[1].topics % 2)


def test_empirical_distributions_match_truth():
    """Pooled token frequencies per true topic approach beta (Monte Carlo)."""
    c, truth = make_synthetic(
        0, num_images=3000, tokens_per_image=50, words_per_image=20, return_truth=True
    )
    for k in range(5):
        rows = truth.topics == k
        freq = c.views["blobs"][rows].sum(0) / c.views["blobs"][rows].sum()
        # ~600 images x 50 tokens = 30k draws: per-entry std <= sqrt(p/30k) < 0.006
        np.testing.assert_allclose(freq, truth.blob_topics[k], atol=0.02)
        wfreq = c.words[rows].sum(0) / c.words[rows].sum()
        np.testing.assert_allclose(wfreq, truth.word_topics[k], atol=0.02)
    share = np.bincount(truth.topics, minlength=5) / 3000
    np.testing.assert_allclose(share, 0.2, atol=0.03)  # uniform pi, std ~0.007


def test_topics_recoverable_from_blobs():
    """Posterior argmax of z under the true model recovers most topics (learnable)."""
    c, truth = make_synthetic(1, num_images=300, return_truth=True)
    log_post = c.views["blobs"] @ np.log(truth.blob_topics).T + np.log(
        truth.topic_weights
    )
    log_post -= logsumexp(log_post, axis=1, keepdims=True)
    accuracy = (log_post.argmax(1) == truth.topics).mean()
    assert accuracy > 0.95
    # topics own mostly disjoint blocks: the top word of each topic is distinct
    assert len(set(truth.word_topics.argmax(1))) == 5


def test_binary_words_and_bad_arguments():
    c = make_synthetic(
        0,
        num_images=20,
        words_per_image=10,
        word_vocab=5,
        num_topics=5,
        binary_words=True,
    )
    assert set(np.unique(c.words)) <= {0.0, 1.0}
    with pytest.raises(ValueError, match="num_images must be a positive integer"):
        make_synthetic(num_images=0)
    with pytest.raises(ValueError, match="must be >= num_topics"):
        make_synthetic(num_topics=10, word_vocab=5)
    with pytest.raises(ValueError, match="num_classes"):
        make_synthetic(num_classes=9)


def test_counts_are_the_per_image_draws(monkeypatch):
    """The chunked draws equal one ``rng.multinomial`` per image in image order (the
    corpus of a seed did not change), across chunk boundaries."""
    import jaxannot.data.synthetic as synthetic

    monkeypatch.setattr(synthetic, "_CHUNK", 7)
    c, truth = make_synthetic(5, num_images=30, tokens_per_image=9, return_truth=True)
    ref = np.random.default_rng(5)  # replays make_synthetic's draws, image by image
    synthetic.block_topics(ref, 5, 60, 0.1, 1.0)
    synthetic.block_topics(ref, 5, 40, 0.1, 1.0)
    z = ref.choice(5, size=30, p=np.full(5, 0.2)).astype(np.int32)
    np.testing.assert_array_equal(z, truth.topics)
    blobs = np.stack([ref.multinomial(9, truth.blob_topics[k]) for k in z])
    words = np.stack([ref.multinomial(3, truth.word_topics[k]) for k in z])
    np.testing.assert_array_equal(c.views["blobs"], blobs)
    np.testing.assert_array_equal(c.words, words)
    assert c.views["blobs"].dtype == np.float32
