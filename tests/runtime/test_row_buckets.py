"""Row buckets (issue 42): the harmonium training programs take rows padded to a
bucket with a mask; a padded fit is the unpadded maths, and fits whose row counts
share a bucket run one compiled program."""

import numpy as np
import pytest

import jax
import jax.numpy as jnp

from jaxannot.inference import contrastive_divergence as cd
from jaxannot.methods.harmoniums import harmonium as hm
from jaxannot.methods.harmoniums import mmh_steps
from jaxannot.runtime import row_buckets as rb
from jaxannot.solvers import multiclass_svm as cs

KINDS = ("bernoulli", "gaussian")


def test_bucket_rows_and_masked_permutation():
    assert [rb.bucket_rows(n) for n in (1, 60, 120, 128, 129)] == [128] * 4 + [256]
    assert rb.bucket_rows(60, None) == 60
    for n in (1, 7, 60, 128):
        for seed in range(2):
            key = jax.random.key(seed)
            order = np.asarray(rb.masked_permutation(key, rb.row_mask(n, 128)))
            # the real rows in the order of the unpadded permutation, then padding
            np.testing.assert_array_equal(
                order[:n], np.asarray(jax.random.permutation(key, n))
            )
            assert sorted(order[n:]) == list(range(n, 128))


def _images(rng, n):
    x = (rng.random((n, 5)) < 0.4).astype(np.float32)
    z = rng.normal(size=(n, 2)).astype(np.float32)
    return (jnp.asarray(x), jnp.asarray(z)), (jnp.ones(n), jnp.ones(n))


@pytest.fixture(scope="module")
def cd_setup():
    rng = np.random.default_rng(0)
    images = _images(rng, 60)
    params = hm.initialize(jax.random.key(0), KINDS, (5, 2), 3, views=images[0])
    opt = cd.make_optimizer("adam", 0.05)
    phase = hm.cd_phase_statistics(KINDS, num_sweeps=2)
    elp = lambda p, q: hm.expected_log_potential(p, KINDS, q)
    # minibatches of 100: all 60 real rows (in the unpadded permutation's order)
    # and, padded, 40 rows of weight 0, so both the masked order and the masked
    # mean are exercised
    step = cd.build_kernel(opt, phase, elp, batch_size=100)
    return rng, images, cd.init(params, opt), step


def test_padded_cd_fit_is_the_unpadded_fit(cd_setup):
    """Masked mean, minibatches over the real rows: the same iterates, up to float
    reduction order (a planted unmasked mean or a minibatch over all rows moves
    them by far more)."""
    _, images, state, step = cd_setup
    key = jax.random.key(3)
    plain, plain_info = cd.fit_cd(key, state, (images, None), step=step, num_steps=15)
    padded, mask = rb.pad_to_bucket(images)
    assert mask.shape == (128,) and float(mask.sum()) == 60
    fitted, info = cd.fit_cd(
        key, state, (padded, None), step=step, num_steps=15, mask=mask
    )
    # the gap is a difference of float32 sums over the batch, summed here in another
    # order: measured at most 2.6e-5 apart (an unmasked mean moves it by far more)
    np.testing.assert_allclose(info.cd_gap, plain_info.cd_gap, rtol=1e-4, atol=1e-4)
    for a, b in zip(jax.tree.leaves(fitted), jax.tree.leaves(plain), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_one_cd_program_per_bucket(cd_setup, count_compiles):
    rng, images, state, step = cd_setup
    key = jax.random.key(4)
    padded, mask = rb.pad_to_bucket(images)
    cd.fit_cd(key, state, (padded, None), step=step, num_steps=15, mask=mask)
    other, other_mask = rb.pad_to_bucket(_images(rng, 100))  # 100 rows: same bucket
    with count_compiles() as counter:
        _, info = cd.fit_cd(
            key, state, (other, None), step=step, num_steps=15, mask=other_mask
        )
    assert counter.count == 0
    assert np.isfinite(np.asarray(info.cd_gap)).all()


def _svm_data(rng, n):
    y = np.arange(n) % 3
    x = rng.normal(size=(n, 4)) + 1.5 * np.eye(3, 4)[y]
    return jnp.asarray(np.c_[x, np.ones(n)], jnp.float32), jnp.asarray(y, jnp.int32)


def test_padded_svm_fit_is_the_unpadded_fit(count_compiles):
    rng = np.random.default_rng(1)
    stop = cs.DualStop(max_epochs=30, tol=1e-4)
    x, y = _svm_data(rng, 60)
    key = jax.random.key(5)
    plain, plain_info = cs.fit_multiclass_svm(key, x, y, 3, 2.0, stop=stop)
    (xp, yp), mask = rb.pad_to_bucket((x, y), edge=False)
    state, info = cs.fit_multiclass_svm(key, xp, yp, 3, 2.0, stop=stop, mask=mask)
    # the same visiting orders and duals: the epochs' objectives agree to rounding
    np.testing.assert_allclose(state.alpha[:60], plain.alpha, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(state.alpha[60:], 0.0)
    np.testing.assert_allclose(state.weights, plain.weights, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(info.primal, plain_info.primal, rtol=1e-5)
    (xo, yo), other_mask = rb.pad_to_bucket(_svm_data(rng, 100), edge=False)
    with count_compiles() as counter:  # 100 rows: the same bucket, no new program
        cs.fit_multiclass_svm(key, xo, yo, 3, 2.0, stop=stop, mask=other_mask)
    assert counter.count == 0


def test_masked_moments_are_the_real_rows_moments():
    rng = np.random.default_rng(2)
    values = jnp.asarray(rng.normal(size=(60, 3)), jnp.float32)
    padded, mask = rb.pad_to_bucket(values)
    mean, std = mmh_steps.masked_moments(padded, mask)
    np.testing.assert_allclose(mean, values.mean(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(std, values.std(0), rtol=1e-5)


def test_initial_weights_are_the_normal_draw_of_their_shape():
    """harmonium.initialize draws from a power-of-two length (one program for many
    view sizes): the numbers of the draw of the weights' own shape, bit for bit."""
    key = jax.random.key(6)
    for rows, cols in ((76, 3), (5, 4)):
        want = 0.01 * jax.random.normal(key, (rows, cols), jnp.float32)
        got = hm._normal_weights(key, rows, cols, 0.01)
        np.testing.assert_array_equal(got, want)


def test_a_fit_on_another_row_count_of_the_bucket_compiles_nothing(count_compiles):
    """A CV's folds and its final fit: 60 then 100 training images (one bucket). The
    second ``mmh`` fit compiles no program at all (CD, the SVM V-steps, the MMH
    alternation, the host-side encoding)."""
    name = "mmh"
    from jaxannot.annotators import get_method
    from jaxannot.data import Corpus

    rng = np.random.default_rng(3)
    y = rng.integers(0, 3, 100)
    real = rng.normal(0, 1, (3, 5))[y] + rng.normal(0, 1, (100, 5))
    bag = rng.poisson(3 * rng.random((3, 12))[y])
    corpus = Corpus.from_arrays(
        {"real": real.astype(np.float32), "bag": bag.astype(np.float32)},
        view_kinds={"real": "real", "bag": "bag"},
        labels=y,
    )
    method = get_method(name)
    small = {"topics": 3, "steps": 5, "iterations": 1, "inner_steps": 3}
    small.update(pretrain_steps=3, svm_epochs=10, final_svm_epochs=10)
    hyper = {**method.hyper, **{k: v for k, v in small.items() if k in method.hyper}}
    method.fit(corpus.subset(np.arange(60)), rng_key=jax.random.key(0), **hyper)
    with count_compiles() as counter:
        fitted = method.fit(corpus, rng_key=jax.random.key(0), **hyper)
    assert counter.count == 0
    assert np.isfinite(np.asarray(fitted.params.predictor)).all()
