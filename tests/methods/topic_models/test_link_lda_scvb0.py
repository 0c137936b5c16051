"""Link-LDA by SCVB0: a minibatch step against a float64 numpy reference (the
fixed point of each image's counts, the Robbins-Monro step of the topic-word
counts), images' counts summing to their lengths, recovery of a synthetic corpus
against batch CVB0, sparse input, continuing, compile-once and input checks."""

import importlib.util
import pathlib

import numpy as np
import pytest
import scipy.sparse as sp

import jax
import jax.numpy as jnp

from jaxannot.methods.topic_models import link_lda as ll
from jaxannot.methods.topic_models import link_lda_cvb0 as cv
from jaxannot.methods.topic_models import link_lda_scvb0 as sc
from jaxannot.methods.topic_models.link_lda_bags import sparse_bags
from jaxannot.methods.topic_models.link_lda_scvb0_start import initial_counts

PRIOR = ll.LDAPrior(alpha=0.1, eta=0.05)

# the shared corpus and held-out checks live next to this file (importlib mode)
_spec = importlib.util.spec_from_file_location(
    "_lda_corpus", pathlib.Path(__file__).with_name("_lda_corpus.py")
)
_lda = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_lda)
_corpus, _perplexity, _split = _lda.corpus, _lda.perplexity, _lda.split_tokens
_worst_topic_distance = _lda.worst_topic_distance


def _reference_pass(counts, n_kw, alpha, eta, num_inner, start=None):
    """One minibatch of every image, float64, image by image, each image's counts
    from ``start`` (n_dk + α; n_dk = 0 if None): ``num_inner`` updates with the
    entries' own counts in, one with each entry's own count out; the images' counts
    and the expected topic-word counts (the step's target)."""
    num_topics = n_kw[0].shape[0]
    phi = [(n + eta) / (n.sum(1) + n.shape[1] * eta)[:, None] for n in n_kw]
    hat = [np.zeros_like(n) for n in n_kw]
    gammas = []
    for d in range(counts[0].shape[0]):
        t = np.full(num_topics, alpha) if start is None else start[d].copy()
        for _ in range(num_inner):  # own counts left in
            own = [
                {w: f[:, w] * t / (f[:, w] @ t) for w in np.flatnonzero(c[d])}
                for c, f in zip(counts, phi, strict=True)
            ]
            t = alpha + sum(
                c[d, w] * g
                for c, o in zip(counts, own, strict=True)
                for w, g in o.items()
            )
        new_t = np.full(num_topics, alpha)
        for c, f, h, o in zip(counts, phi, hat, own, strict=True):
            for w, g in o.items():  # CVB0's update: the entry's own count out
                p = (t - min(c[d, w], 1.0) * g) * f[:, w]
                h[:, w] += c[d, w] * p / p.sum()
                new_t += c[d, w] * p / p.sum()
        gammas.append(new_t)
    return np.stack(gammas), hat


def _state(lambdas, images, alpha=0.1):
    gamma = jnp.full((images, lambdas[0].shape[0]), alpha, jnp.float32)
    lambdas = tuple(map(jnp.asarray, lambdas))
    return sc.SCVB0State(gamma, lambdas, jnp.int32(0), jnp.int32(0))


def test_two_full_batch_steps_match_numpy_reference():
    counts, _ = _corpus(images=9)
    rng = np.random.default_rng(3)
    n_kw = [rng.uniform(0.5, 3.0, (3, c.shape[1])) for c in counts]
    lambdas = [(n + PRIOR.eta).astype(np.float32) for n in n_kw]
    # one minibatch of all images, ρ_t = (1 + t)^-1: the first step replaces the
    # counts by the batch's, the second averages them with the next batch's
    kw = dict(batch_size=9, num_inner=7, tau=1.0, kappa=1.0, progress_bar=False)
    first, _ = sc.fit_scvb0(
        jax.random.key(0),
        counts,
        3,
        prior=PRIOR,
        num_passes=1,
        state=_state(lambdas, 9),
        **kw,
    )
    gamma, hat = _reference_pass(counts, n_kw, 0.1, PRIOR.eta, 7)
    np.testing.assert_allclose(np.asarray(first.gamma), gamma, rtol=2e-4)
    for got, want in zip(first.lambdas, hat, strict=True):
        np.testing.assert_allclose(
            np.asarray(got) - PRIOR.eta, want, rtol=2e-4, atol=1e-5
        )
    second, _ = sc.fit_scvb0(
        jax.random.key(0), counts, 3, prior=PRIOR, num_passes=1, state=first, **kw
    )
    # the second visit starts from each image's counts of the first (warm)
    n_kw2 = [np.asarray(lam, np.float64) - PRIOR.eta for lam in first.lambdas]
    start = np.asarray(first.gamma, np.float64)
    _, hat2 = _reference_pass(counts, n_kw2, 0.1, PRIOR.eta, 7, start)
    for got, a, b in zip(second.lambdas, n_kw2, hat2, strict=True):
        want = 0.5 * a + 0.5 * b
        np.testing.assert_allclose(
            np.asarray(got) - PRIOR.eta, want, rtol=5e-4, atol=1e-4
        )
    assert int(second.updates) == 2


def test_every_image_counts_its_tokens_with_a_partial_last_batch():
    counts, _ = _corpus(images=10)
    state, objective = sc.fit_scvb0(
        jax.random.key(1),
        counts,
        3,
        prior=PRIOR,
        num_passes=3,
        batch_size=4,
        progress_bar=False,
    )
    lengths = sum(c.sum(1) for c in counts)
    np.testing.assert_allclose(
        np.asarray(state.gamma).sum(1), lengths + 3 * 0.1, rtol=1e-5
    )
    assert int(state.updates) == 9  # 3 batches a pass, the last with 2 images
    assert objective.shape == (3,) and np.all(np.isfinite(objective))
    assert objective[-1] > objective[0]


def test_recovers_topics_and_matches_batch_cvb0_heldout_perplexity():
    (counts,), (beta,) = _corpus(images=660, sizes=(30,), topics=4, length=40)
    train, test = counts[:600], counts[600:]
    obs, held = _split(test)
    state, _ = sc.fit_scvb0(
        jax.random.key(0),
        (train,),
        4,
        prior=PRIOR,
        num_passes=6,
        batch_size=32,
        progress_bar=False,
    )
    batch, _ = cv.fit_cvb0(
        jax.random.key(0), (train,), 4, num_iterations=60, num_blocks=4, prior=PRIOR
    )
    assert _worst_topic_distance(beta, state.lambdas) < 0.15
    ours = _perplexity(state.lambdas, obs, held, 0.1)
    theirs = _perplexity(batch.lambdas, obs, held, 0.1)
    # a small corpus (19 minibatches a pass): SCVB0's optimum 0.4-2 % above batch
    # CVB0's over 8 seeds (1 % on seed 0); a wrong update misses by 10 % and more
    assert ours <= theirs * 1.03


def test_restarts_go_on_with_the_start_that_predicts_best():
    counts, _ = _corpus(images=30)
    kw = dict(prior=PRIOR, batch_size=8, progress_bar=False, select_after=1)
    one, first = sc.fit_scvb0(
        jax.random.key(4), counts, 3, num_passes=1, restarts=1, **kw
    )
    three, best = sc.fit_scvb0(
        jax.random.key(4), counts, 3, num_passes=1, restarts=3, **kw
    )
    assert int(one.start) == 0 and int(three.start) in (0, 1, 2)
    assert best[0] >= first[0]  # start 0 is one of the three
    if int(three.start) == 0:
        np.testing.assert_array_equal(
            np.asarray(one.lambdas[0]), np.asarray(three.lambdas[0])
        )
    # the chosen start goes on: its passes after the choice are one longer fit's
    longer, trace = sc.fit_scvb0(
        jax.random.key(4), counts, 3, num_passes=3, restarts=3, **kw
    )
    assert int(longer.start) == int(three.start) and trace.shape == (3,)
    assert trace[0] == best[0]
    with pytest.raises(ValueError, match="select_after"):
        sc.fit_scvb0(jax.random.key(4), counts, 3, num_passes=1, select_after=2)


SMALL = dict(prior=PRIOR, num_passes=2, batch_size=8, progress_bar=False)


def test_sparse_counts_fit_as_the_dense_ones():
    counts, _ = _corpus(images=20)
    dense, _ = sc.fit_scvb0(jax.random.key(2), counts, 3, **SMALL)
    sparse, _ = sc.fit_scvb0(
        jax.random.key(2), tuple(sp.csr_matrix(c) for c in counts), 3, **SMALL
    )
    for a, b in zip(
        dense.lambdas + (dense.gamma,), sparse.lambdas + (sparse.gamma,), strict=True
    ):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_continuing_equals_one_longer_fit():
    counts, _ = _corpus(images=20)
    one, _ = sc.fit_scvb0(jax.random.key(0), counts, 3, **dict(SMALL, num_passes=4))
    half, _ = sc.fit_scvb0(jax.random.key(0), counts, 3, **SMALL)
    two, _ = sc.fit_scvb0(jax.random.key(0), counts, 3, state=half, **SMALL)
    for a, b in zip(one.lambdas, two.lambdas, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5)
    assert int(two.updates) == int(one.updates) == 12


def test_second_fit_does_not_recompile(count_compiles):
    counts, _ = _corpus(images=12)
    state, _ = sc.fit_scvb0(jax.random.key(0), counts, 3, **SMALL)
    sc.fit_scvb0(jax.random.key(0), counts, 3, state=state, **SMALL)
    with count_compiles() as c:
        again, _ = sc.fit_scvb0(jax.random.key(1), counts, 3, **SMALL)
        sc.fit_scvb0(jax.random.key(1), counts, 3, state=again, **SMALL)
        jax.block_until_ready(again)
    assert c.count == 0


def test_bad_input_raises():
    counts, _ = _corpus(images=12)
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="num_topics"):
        sc.fit_scvb0(key, counts, 0)
    with pytest.raises(ValueError, match="kappa"):
        sc.fit_scvb0(key, counts, 3, kappa=0.5)
    with pytest.raises(ValueError, match="tau"):
        sc.fit_scvb0(key, counts, 3, tau=-1.0)
    with pytest.raises(ValueError, match="batch_size"):
        sc.fit_scvb0(key, counts, 3, batch_size=0)
    with pytest.raises(ValueError, match="alpha and eta"):
        sc.fit_scvb0(key, counts, 3, prior=ll.LDAPrior(eta=0.0))
    neg = sp.csr_matrix(counts[0])
    neg.data[0] = -1.0
    with pytest.raises(ValueError, match="view 0: counts must be >= 0"):
        sc.fit_scvb0(key, (neg, counts[1]), 3)
    with pytest.raises(ValueError, match="view 1: counts must be"):
        sc.fit_scvb0(key, (counts[0], counts[1][0]), 3)
    with pytest.raises(ValueError, match="same number of images"):
        sc.fit_scvb0(key, (counts[0], counts[1][:4]), 3)
    state, _ = sc.fit_scvb0(key, counts, 3, **SMALL)
    with pytest.raises(ValueError, match="state does not match"):
        sc.fit_scvb0(key, counts, 4, state=state)


def _cover(beta, n_kw):
    """How many true topics are the nearest (total variation) to a started topic."""
    start = np.asarray(n_kw, np.float64).T
    start = start / start.sum(1, keepdims=True)
    tv = 0.5 * np.abs(beta[:, None, :] - start[None, :, :]).sum(-1)
    return len(set(tv.argmin(0).tolist()))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_start_lands_on_every_true_topic_and_keeps_word_totals(seed):
    # near-pure images of 8 topics: images far apart lie on distinct topics (a
    # random split of the word totals starts every topic near the corpus's mean,
    # nearest to 3-5 of the 8 on these corpora)
    counts, betas = _corpus(
        seed=seed, images=400, sizes=(40, 25), topics=8, length=30, conc=0.05
    )
    ids, cnts, vocab = sparse_bags(counts)
    n_kw = initial_counts(jax.random.key(seed), ids, cnts, vocab, 8)
    for c, beta, n in zip(counts, betas, n_kw, strict=True):
        assert n.shape == (c.shape[1], 8) and np.all(np.asarray(n) >= 0)
        np.testing.assert_allclose(np.asarray(n).sum(1), c.sum(0), rtol=1e-5)
        assert _cover(beta, n) == 8


def test_images_without_tokens_keep_zero_counts():
    empty = np.zeros((5, 4), np.float32)
    state, _ = sc.fit_scvb0(jax.random.key(0), (empty,), 3, **SMALL)
    np.testing.assert_allclose(np.asarray(state.lambdas[0]), PRIOR.eta, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(state.gamma), PRIOR.alpha, rtol=1e-6)


def test_auto_passes_aim_at_the_updates_and_run_them():
    # about AUTO_UPDATES minibatch updates, at least one pass
    assert sc.auto_passes(1_000_000, 1024) == 1
    assert sc.auto_passes(100_000, 1024) == 1
    assert sc.auto_passes(30_000, 1024) == 3
    assert sc.auto_passes(10_000, 1024) == 10
    assert sc.auto_passes(5, 1024) == sc.AUTO_UPDATES
    counts, _ = _corpus(images=40)
    kw = dict(prior=PRIOR, batch_size=8, restarts=1, progress_bar=False)
    auto, trace = sc.fit_scvb0(jax.random.key(0), counts, 3, **kw)
    # 5 minibatches a pass: 20 passes, one objective each, the same fit as asked
    assert trace.shape == (sc.auto_passes(40, 8),) == (20,)
    given, _ = sc.fit_scvb0(jax.random.key(0), counts, 3, num_passes=20, **kw)
    np.testing.assert_array_equal(auto.lambdas[0], given.lambdas[0])
    assert int(auto.updates) == 20 * 5
    with pytest.raises(TypeError, match="num_passes"):
        sc.fit_scvb0(jax.random.key(0), counts, 3, num_passes="many", **kw)


def test_last_update_takes_each_entrys_own_count_out():
    # one image, one word seen once: with its own count out the image's counts
    # are the prior's, so the word goes to the topics in proportion to (α) φ;
    # with it left in, to those it already leans to
    phi = (jnp.asarray([[[0.6, 0.3, 0.1]]], jnp.float32),)
    cnts = (jnp.asarray([[1.0]], jnp.float32),)
    start = jnp.asarray([[0.1, 0.1, 0.1]], jnp.float32)
    t, gamma, _ = sc._fixed_point(phi, cnts, start, 0.1, 5)
    np.testing.assert_allclose(np.asarray(gamma[0][0, 0]), [0.6, 0.3, 0.1], rtol=1e-5)
    np.testing.assert_allclose(np.asarray(t[0]), [0.7, 0.4, 0.2], rtol=1e-5)
