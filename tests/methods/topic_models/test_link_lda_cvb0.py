"""Link-LDA by CVB0: the update against a numpy reference, count totals, recovery of
a small synthetic corpus against batch VB, compile-once, input checks, the support
kept with counts in the tens of thousands and checked before a fit returns."""

import importlib.util
import pathlib

import numpy as np
import pytest

import jax
import jax.numpy as jnp

from jaxannot.inference.support import SupportError
from jaxannot.methods.topic_models import link_lda as ll
from jaxannot.methods.topic_models import link_lda_cvb0 as cv
from jaxannot.methods.topic_models import link_lda_vb as llvb

# the shared corpus and held-out checks live next to this file (importlib mode)
_spec = importlib.util.spec_from_file_location(
    "_lda_corpus", pathlib.Path(__file__).with_name("_lda_corpus.py")
)
_lda = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_lda)
_corpus, _perplexity, _split = _lda.corpus, _lda.perplexity, _lda.split_tokens
_worst_topic_distance = _lda.worst_topic_distance


def _reference_update(resp, ids, cnts, alpha, eta, vocab_sizes):
    """One synchronous CVB0 update, entry by entry, float64 (the paper's rule: the
    counts without the current token's own expected count)."""
    resp = [np.asarray(r, np.float64) for r in resp]
    ids = [np.asarray(i) for i in ids]
    cnts = [np.asarray(c, np.float64) for c in cnts]
    num_images, num_topics = resp[0].shape[0], resp[0].shape[2]
    n_dk = np.zeros((num_images, num_topics))
    n_kw = [np.zeros((num_topics, v)) for v in vocab_sizes]
    for v in range(len(resp)):
        for d in range(num_images):
            for n in range(ids[v].shape[1]):
                c, w = cnts[v][d, n], ids[v][d, n]
                n_dk[d] += c * resp[v][d, n]
                n_kw[v][:, w] += c * resp[v][d, n]
    new = [np.zeros_like(r) for r in resp]
    for v in range(len(resp)):
        n_k = n_kw[v].sum(1)
        for d in range(num_images):
            for n in range(ids[v].shape[1]):
                c, w = cnts[v][d, n], ids[v][d, n]
                own = min(c, 1.0) * resp[v][d, n]
                p = (
                    (n_dk[d] - own + alpha)
                    * (n_kw[v][:, w] - own + eta)
                    / (n_k - own + vocab_sizes[v] * eta)
                )
                new[v][d, n] = p / p.sum()
    return new


def test_one_update_matches_numpy_reference():
    counts, _ = _corpus(images=8, length=6)
    counts[0][0, 3] = 2.5  # a fractional count > 1 and one < 1
    counts[1][1, 2] = 0.5
    ids, cnts = ll.padded_views(counts)
    sizes = tuple(c.shape[1] for c in counts)
    resp = cv._init_resp(jax.random.key(3), ids, 3)

    @jax.jit  # one compiled program, not one per primitive of eager calls
    def update(resp):
        n_dk, n_kw = cv.cvb0_counts(resp, ids, cnts, sizes)
        return cv.cvb0_update(
            resp, ids, cnts, n_dk, n_kw, jnp.float32(0.3), jnp.float32(0.05)
        )

    new, _ = update(resp)
    ref = _reference_update(resp, ids, cnts, 0.3, 0.05, sizes)
    for a, b, c in zip(new, ref, cnts, strict=True):
        live = np.asarray(c) > 0  # padding slots weigh nothing
        np.testing.assert_allclose(np.asarray(a)[live], b[live], rtol=2e-5, atol=1e-6)
    # fit_cvb0 with one synchronous iteration from the same start does the same
    prior = ll.LDAPrior(alpha=0.3, eta=0.05)
    state, _ = cv.fit_cvb0(jax.random.key(3), counts, 3, num_iterations=1, prior=prior)
    for a, b, c in zip(state.resp, ref, cnts, strict=True):
        live = np.asarray(c) > 0
        np.testing.assert_allclose(np.asarray(a)[live], b[live], rtol=2e-5, atol=1e-6)


def test_one_blocked_sweep_matches_numpy_reference_block_by_block():
    # B = 3 blocks of 3 images (8 images: the last block is padded): each block is
    # the synchronous update of its images from the counts of every responsibility
    # so far (the earlier blocks' new ones), float64 and recounted from scratch
    counts, _ = _corpus(images=8, length=6)
    counts[0][4, 3] = 2.5
    ids, cnts = ll.padded_views(counts)
    sizes = tuple(c.shape[1] for c in counts)
    resp = [np.asarray(r, np.float64) for r in cv._init_resp(jax.random.key(3), ids, 3)]
    start = [r.copy() for r in resp]
    for lo in (0, 3, 6):
        new = _reference_update(resp, ids, cnts, 0.3, 0.05, sizes)
        for r, n in zip(resp, new, strict=True):
            r[lo : lo + 3] = n[lo : lo + 3]
    prior = ll.LDAPrior(alpha=0.3, eta=0.05)
    state, _ = cv.fit_cvb0(
        jax.random.key(3), counts, 3, num_iterations=1, num_blocks=3, prior=prior
    )
    for a, b, c, r0 in zip(state.resp, resp, cnts, start, strict=True):
        live = np.asarray(c) > 0
        np.testing.assert_allclose(np.asarray(a)[live], b[live], rtol=2e-5, atol=1e-6)
        assert np.abs(b - r0)[live].max() > 1e-2  # the sweep moved them


@pytest.mark.parametrize("blocks", [1, 3])
def test_expected_counts_keep_totals(blocks):
    counts, _ = _corpus(images=25)
    alpha, eta = 0.1, 0.02
    state, objective = cv.fit_cvb0(
        jax.random.key(0),
        counts,
        4,
        num_iterations=7,
        num_blocks=blocks,
        prior=ll.LDAPrior(alpha, eta),
    )
    lengths = sum(c.sum(1) for c in counts)
    np.testing.assert_allclose(
        np.asarray(state.gamma - alpha).sum(1), lengths, rtol=1e-5
    )
    for lam, c in zip(state.lambdas, counts, strict=True):
        assert lam.shape == (4, c.shape[1])
        np.testing.assert_allclose(float((lam - eta).sum()), c.sum(), rtol=1e-5)
        # n_kw summed over topics is each word's count in the corpus
        np.testing.assert_allclose(
            np.asarray(lam - eta).sum(0), c.sum(0), rtol=1e-4, atol=1e-3
        )
    for r in state.resp:
        np.testing.assert_allclose(np.asarray(r).sum(-1), 1.0, rtol=1e-5)
    assert objective.shape == (7,) and np.all(np.isfinite(objective))


def test_recovers_topics_and_matches_vb_heldout_perplexity():
    (counts,), (beta,) = _corpus(images=260, sizes=(30,), topics=4, length=40)
    train, test = counts[:200], counts[200:]
    obs, held = _split(test)
    prior = ll.LDAPrior(eta=0.05)
    state, objective = cv.fit_cvb0(
        jax.random.key(0), (train,), 4, num_iterations=60, num_blocks=4, prior=prior
    )
    vb, _ = llvb.fit_vb(jax.random.key(0), (train,), 4, num_iterations=60, prior=prior)
    # every true topic has a fitted topic within a small total-variation distance
    assert _worst_topic_distance(beta, state.lambdas) < 0.15
    ours = _perplexity(state.lambdas, obs, held, 0.1)
    theirs = _perplexity(vb.lambdas, obs, held, 0.1)
    assert ours <= theirs * 1.01
    assert objective[-1] > objective[0]  # the leave-one-out fit improved


#: the small fits' settings: one compiled sweep for the tests below on 12 images
SMALL = dict(num_iterations=3, num_blocks=2, prior=ll.LDAPrior(eta=0.05))


def test_second_call_does_not_recompile(count_compiles):
    counts, _ = _corpus(images=12)
    kw = SMALL
    state, _ = cv.fit_cvb0(jax.random.key(0), counts, 3, **kw)
    cv.fit_cvb0(jax.random.key(0), counts, 3, state=state, **kw)
    size = cv._run._cache_size()
    with count_compiles() as c:
        again, _ = cv.fit_cvb0(jax.random.key(1), counts, 3, **kw)
        cv.fit_cvb0(jax.random.key(1), counts, 3, state=again, **kw)
        jax.block_until_ready(again)
    assert c.count == 0
    assert cv._run._cache_size() == size


def test_continuing_equals_one_longer_fit():
    counts, _ = _corpus(images=12)
    longer = dict(SMALL, num_iterations=6)
    one, _ = cv.fit_cvb0(jax.random.key(0), counts, 3, **longer)
    half, _ = cv.fit_cvb0(jax.random.key(0), counts, 3, **SMALL)
    two, _ = cv.fit_cvb0(jax.random.key(5), counts, 3, state=half, **SMALL)
    for a, b in zip(one.lambdas, two.lambdas, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4)


def test_restarts_go_on_with_the_start_that_predicts_best():
    counts, _ = _corpus(images=12)
    key = jax.random.key(2)
    kw = dict(SMALL, num_iterations=2)
    keys = [key] + [jax.random.fold_in(key, r) for r in (1, 2)]
    singles = [cv.fit_cvb0(k, counts, 3, **kw)[1] for k in keys]
    assert len({float(trace[-1]) for trace in singles}) == 3  # the choice matters
    best = int(np.argmax([trace[-1] for trace in singles]))
    _, chosen = cv.fit_cvb0(key, counts, 3, restarts=3, select_after=2, **kw)
    np.testing.assert_array_equal(chosen, singles[best])
    # the chosen start goes on: its iterations after the choice are one longer fit's
    longer = dict(SMALL, num_iterations=5)
    multi, trace = cv.fit_cvb0(key, counts, 3, restarts=3, select_after=2, **longer)
    one, single = cv.fit_cvb0(keys[best], counts, 3, **longer)
    assert trace.shape == (5,)
    np.testing.assert_array_equal(trace[:2], singles[best])
    np.testing.assert_allclose(trace, single, rtol=1e-4)
    np.testing.assert_allclose(
        np.asarray(multi.lambdas[0]), np.asarray(one.lambdas[0]), rtol=1e-4
    )
    with pytest.raises(ValueError, match="restarts"):
        cv.fit_cvb0(key, counts, 3, restarts=0)
    with pytest.raises(TypeError, match="restarts"):
        cv.fit_cvb0(key, counts, 3, restarts=2.5)


def test_more_starts_never_choose_a_worse_objective():
    # start r is the same key whatever the number of starts, so R + 1 starts hold the
    # R starts' choices and the chosen objective can only rise
    counts, _ = _corpus(images=12)
    kw = dict(SMALL, num_iterations=2)
    chosen = [
        float(cv.fit_cvb0(jax.random.key(3), counts, 3, restarts=r, **kw)[1][-1])
        for r in range(1, 6)
    ]
    assert all(b >= a for a, b in zip(chosen, chosen[1:], strict=False))
    assert chosen[-1] > chosen[0]  # some later start is better than the first


@pytest.mark.parametrize("fit", [cv.fit_cvb0, llvb.fit_vb], ids=["cvb0", "vb"])
def test_bad_counts_are_refused_by_both_fits(fit):
    counts, _ = _corpus(images=6)
    key = jax.random.key(0)
    neg = (counts[0].copy(), counts[1])
    neg[0][0, 0] = -1.0
    with pytest.raises(ValueError, match="view 0: counts must be >= 0"):
        fit(key, neg, 3)
    nan = (counts[0].copy(), counts[1])
    nan[0][1, 1] = np.nan
    with pytest.raises(ValueError, match="view 0: counts contain NaN"):
        fit(key, nan, 3)
    with pytest.raises(ValueError, match="same number of images"):
        fit(key, (counts[0], counts[1][:4]), 3)
    with pytest.raises(ValueError, match="at least one view"):
        fit(key, (), 3)


def test_bad_input_raises():
    counts, _ = _corpus(images=12)
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="num_topics"):
        cv.fit_cvb0(key, counts, 0)
    with pytest.raises(ValueError, match="alpha and eta"):
        cv.fit_cvb0(key, counts, 3, prior=ll.LDAPrior(eta=0.0))
    state, _ = cv.fit_cvb0(key, counts, 3, **SMALL)
    with pytest.raises(ValueError, match="state does not match"):
        cv.fit_cvb0(key, counts, 4, state=state)


def test_large_counts_keep_the_support():
    # issue 50: counts in the tens of thousands (here few words, long bags) changed
    # block by block by responsibilities < 1 lose their float32 round-off; carried
    # from sweep to sweep (before the fix) the drift made topic-word counts that
    # should be ~0 negative (min λ -0.46 here), the responsibilities too
    rng = np.random.default_rng(0)
    beta = rng.dirichlet(np.full(12, 0.05), 6)
    theta = rng.dirichlet(np.full(6, 0.1), 600)
    counts = np.stack([rng.multinomial(3000, t @ beta) for t in theta])
    counts = counts.astype(np.float32)
    alpha, eta = 0.1, 0.05
    state, objective = cv.fit_cvb0(
        jax.random.key(0),
        (counts,),
        6,
        num_iterations=30,
        num_blocks=32,
        prior=ll.LDAPrior(alpha, eta),
    )
    assert float(state.lambdas[0].min()) >= eta
    assert float(state.gamma.min()) >= alpha
    assert float(state.resp[0].min()) >= 0.0
    assert np.all(np.isfinite(objective))
    np.testing.assert_allclose(
        np.asarray(state.lambdas[0] - eta).sum(0), counts.sum(0), rtol=1e-4
    )


def test_a_fit_that_leaves_the_support_raises_naming_the_iteration(monkeypatch):
    counts, _ = _corpus(images=12)
    real = cv._run

    def drifted(*args, **kwargs):  # as if iteration 2 of 3 had left the support
        resp, gamma, lambdas, objective, lowest = real(*args, **kwargs)
        return resp, gamma, lambdas, objective, lowest.at[2].set(-0.5)

    monkeypatch.setattr(cv, "_run", drifted)
    with pytest.raises(SupportError, match="left their support at iteration 2 of 3"):
        cv.fit_cvb0(jax.random.key(0), counts, 3, **SMALL)

    def nan_gamma(*args, **kwargs):
        resp, gamma, lambdas, objective, lowest = real(*args, **kwargs)
        return resp, gamma.at[0, 0].set(jnp.nan), lambdas, objective, lowest

    monkeypatch.setattr(cv, "_run", nan_gamma)
    with pytest.raises(SupportError, match="gamma left its support at iteration 3"):
        cv.fit_cvb0(jax.random.key(0), counts, 3, **SMALL)
