import numpy as np
import pytest
import scipy.optimize
import scipy.stats

import jax
import optax
from numpyro.infer.util import log_density

from jaxannot.inference.map_estimate import MAP
from jaxannot.methods.baselines.tagprop import (
    EPSILON,
    PRIOR_SCALE,
    class_weights,
    tagprop,
    word_lists,
)


def _problem(n=12, k=4, w=3, d=2, seed=0):
    """Clustered images: near neighbours share words, so the weights matter."""
    rng = np.random.default_rng(seed)
    cluster = rng.integers(0, w, size=n)
    words = (rng.random((n, w)) < 0.15).astype(np.float32)
    words[np.arange(n), cluster] = 1.0
    neighbors = np.stack(
        [rng.permutation(np.delete(np.arange(n), i))[:k] for i in range(n)]
    )
    same = cluster[neighbors] == cluster[:, None]
    distances = rng.random((n, k, d)).astype(np.float32) + 1.5 * ~same[:, :, None]
    return neighbors.astype(np.int32), distances.astype(np.float32), words


def _numpy_log_joint(params, neighbors, distances, words, variant, boosting, weights):
    """Independent float64 TagProp log-likelihood (paper eq. 1-5) + log priors."""
    n, w = words.shape
    if variant == "rank":
        pi = np.broadcast_to(params["gamma"], neighbors.shape)
        log_prior = scipy.stats.dirichlet.logpdf(params["gamma"], np.ones(len(pi[0])))
    else:
        a = -distances @ params["theta"]
        pi = np.exp(a - a.max(1, keepdims=True))
        pi /= pi.sum(1, keepdims=True)
        log_prior = scipy.stats.halfnorm.logpdf(
            params["theta"], scale=PRIOR_SCALE
        ).sum()
    x = np.zeros((n, w))
    for i in range(n):
        for kk, j in enumerate(neighbors[i]):
            x[i] += pi[i, kk] * np.where(words[j] > 0, 1 - EPSILON, EPSILON)
    if boosting:
        p = 1 / (1 + np.exp(-(params["alpha"] * x + params["beta"])))
        log_prior += scipy.stats.halfnorm.logpdf(
            params["alpha"], scale=PRIOR_SCALE
        ).sum()
        log_prior += scipy.stats.norm.logpdf(params["beta"], scale=PRIOR_SCALE).sum()
    else:
        p = x
    terms = words * np.log(p) + (1 - words) * np.log1p(-p)
    return log_prior + np.sum(terms * (1.0 if weights is None else weights))


def _data(neighbors, distances, words, balance=False):
    ids, mask = word_lists(words)
    weights = class_weights(words, "global") if balance else None
    return (neighbors, ids, mask, distances, words, weights)


@pytest.mark.parametrize(
    ("variant", "boosting", "balance"),
    [("distance", True, False), ("distance", False, True), ("rank", True, True)],
)
def test_log_density_matches_an_independent_numpy_computation(
    variant, boosting, balance
):
    neighbors, distances, words = _problem()
    params = {"theta": np.array([0.7, 1.3])} if variant == "distance" else {}
    if variant == "rank":
        params["gamma"] = np.array([0.4, 0.3, 0.2, 0.1])
    if boosting:
        params["alpha"] = np.array([2.0, 5.0, 0.5])
        params["beta"] = np.array([-1.0, 0.3, -2.0])
    data = _data(neighbors, distances, words, balance)
    got, _ = log_density(
        tagprop,
        data,
        {"num_words": 3, "variant": variant, "boosting": boosting},
        params,
    )
    expected = _numpy_log_joint(
        params, neighbors, distances, words, variant, boosting, data[-1]
    )
    assert float(got) == pytest.approx(expected, rel=1e-5)


def test_class_weights_balance_positives_and_negatives():
    words = (np.random.default_rng(0).random((50, 4)) < [0.5, 0.2, 0.06, 0.02]).astype(
        np.float32
    )
    assert class_weights(words, "none") is None
    glob, word = class_weights(words, "global"), class_weights(words, "word")
    pos = words > 0
    # global: all positives weigh as much as all negatives, one factor for every word
    assert glob[pos].sum() == pytest.approx(glob[~pos].sum(), rel=1e-5)
    assert np.unique(glob[pos]).size == 1
    # word: the same within every word column, so rare words get larger weights
    np.testing.assert_allclose((word * pos).sum(0), (word * ~pos).sum(0), rtol=1e-5)
    np.testing.assert_allclose(word.mean(0), 1.0, rtol=1e-5)
    assert word[pos[:, 3], 3].min() > word[pos[:, 0], 0].max()
    with pytest.raises(ValueError, match="valid: \\['none', 'global', 'word'\\]"):
        class_weights(words, "per-image")


def test_word_lists_round_trip():
    words = np.array([[1, 0, 1], [0, 0, 0], [0, 1, 0]], np.float32)
    ids, mask = word_lists(words)
    dense = np.zeros_like(words)
    np.add.at(dense, (np.repeat(np.arange(3), ids.shape[1]), ids.ravel()), mask.ravel())
    np.testing.assert_array_equal(dense, words)


def test_map_fit_improves_the_training_log_likelihood():
    neighbors, distances, words = _problem(seed=1)
    data = _data(neighbors, distances, words)
    kwargs = {"num_words": 3, "variant": "distance", "boosting": True}
    init = {"theta": np.array([0.1, 0.1]), "alpha": np.ones(3), "beta": np.zeros(3)}
    result = MAP(tagprop, optax.adam(0.05)).run(
        jax.random.key(0), 300, *data, **kwargs, init_params=init, progress_bar=False
    )
    before = _numpy_log_joint(init, neighbors, distances, words, "distance", True, None)
    after = _numpy_log_joint(
        {k: np.asarray(v, np.float64) for k, v in result.params.items()},
        neighbors,
        distances,
        words,
        "distance",
        True,
        None,
    )
    assert after > before + 1.0
    assert result.losses[-1] < result.losses[0]


def test_gradient_optimum_matches_scipy_minimize():
    """Distance variant without boosting, one base distance: an interior θ > 0."""
    neighbors, distances, words = _problem(n=16, d=1, seed=2)
    data = _data(neighbors, distances, words)

    def objective(theta):
        return -_numpy_log_joint(
            {"theta": theta}, neighbors, distances, words, "distance", False, None
        )

    reference = scipy.optimize.minimize(
        objective,
        np.ones(1),
        method="L-BFGS-B",
        bounds=[(0, None)],
        options={"ftol": 1e-14, "gtol": 1e-10},
    )
    assert reference.success and np.all(reference.x > 0.1)
    result = MAP(tagprop, optax.adam(0.02)).run(
        jax.random.key(0),
        2000,
        *data,
        num_words=3,
        variant="distance",
        boosting=False,
        init_params={"theta": np.ones(1)},
        progress_bar=False,
    )
    np.testing.assert_allclose(result.params["theta"], reference.x, rtol=2e-3)


def test_unknown_variant_lists_the_choices():
    neighbors, distances, words = _problem()
    with pytest.raises(ValueError, match="valid: \\['distance', 'rank'\\]"):
        log_density(
            tagprop,
            _data(neighbors, distances, words),
            {"num_words": 3, "variant": "metric"},
            {"theta": np.ones(2)},
        )
