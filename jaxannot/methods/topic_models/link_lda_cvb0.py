r"""Link-LDA by collapsed variational Bayes, zeroth order (CVB0).

The model is :mod:`jaxannot.methods.topic_models.link_lda`'s (several views with their
own
vocabularies sharing one topic proportion :math:`\theta_d` per image; one view is
LDA). CVB0 (Asuncion, Welling, Smyth & Teh 2009, the zeroth-order version of Teh,
Newman & Welling's collapsed VB 2007) integrates :math:`\theta` and :math:`\beta` out
and keeps one distribution over topics per token. All tokens of one word in one
image's view share it, so there is one responsibility
:math:`\gamma^v_{dn}\in\Delta_K` per entry of the padded bags
(:func:`jaxannot.methods.topic_models.link_lda.to_padded`: word :math:`w =
\mathrm{ids}^v_{dn}`,
count :math:`c = \mathrm{counts}^v_{dn}`). The expected counts are

.. math::
    n_{dk} = \sum_v\sum_n c^v_{dn}\gamma^v_{dnk},\qquad
    n^v_{kw} = \sum_{d,n:\,\mathrm{ids}^v_{dn}=w} c^v_{dn}\gamma^v_{dnk},\qquad
    n^v_k = \sum_w n^v_{kw},

and one update replaces every responsibility by

.. math::
    \gamma^v_{dnk} \propto \big(n_{dk} - s\gamma^v_{dnk} + \alpha\big)\,
      \frac{n^v_{kw} - s\gamma^v_{dnk} + \eta}{n^v_k - s\gamma^v_{dnk} + V_v\eta},
    \qquad s = \min(c^v_{dn}, 1),

i.e. the counts with the current token's own expected count taken out (``s = 1``
for integer counts; padding slots have ``c = 0`` and weigh nothing). Two schedules:

- ``num_blocks=1`` (default, "parallel"/synchronous): every responsibility is
  updated from the same counts, which are then recomputed;
- ``num_blocks=B > 1``: the images are cut into ``B`` contiguous blocks updated one
  after the other, the topic-word counts refreshed after each block (a block-wise
  version of Asuncion et al.'s sequential schedule; the topic-word counts are
  carried from block to block and rebuilt from the responsibilities at the start of
  every sweep, so that float32 round-off cannot accumulate over sweeps).

The topic-word factor is clipped at η (the carried counts minus the entry's own are
>= 0 in exact arithmetic); the document factor is recounted from the block's own
responsibilities, so it can lack only the float32 round-off of one document's length
(~1e-5 of it), which α absorbs. The responsibilities therefore stay >= 0 and the
returned counts, rebuilt from them, keep ``λ >= η`` and ``γ >= α``;
:func:`fit_cvb0` checks them (:func:`jaxannot.inference.support.check_support`)
before it returns and raises :class:`~jaxannot.inference.support.SupportError`,
naming the iteration, if they do not.

The whole fit is one jit-compiled ``lax.scan`` over the iterations. The returned
:class:`CVB0State` carries ``gamma = n_dk + α`` and ``lambdas = n^v_kw + η``, the
same quantities as :class:`~jaxannot.methods.topic_models.link_lda.LinkLDAState`, so
:func:`~jaxannot.methods.topic_models.link_lda_vb.fold_in` and
:func:`~jaxannot.methods.topic_models.link_lda.topic_word` take ``state.lambdas``
unchanged.

The per-iteration ``objective`` is the leave-one-out log predictive probability of
the training tokens under the counts entering the iteration,
:math:`\sum c\,\log\big(\sum_k \tilde p_k / (n_d - s + K\alpha)\big)` with
:math:`\tilde p_k` the unnormalized update above (free: the normalizer of the
update). CVB0 maximizes no bound, so it is a progress measure, not a monotone
objective.

References
----------
A. Asuncion, M. Welling, P. Smyth, Y. W. Teh. On smoothing and inference for topic
models. UAI 2009.
Y. W. Teh, D. Newman, M. Welling. A collapsed variational Bayesian inference
algorithm for latent Dirichlet allocation. NIPS 2007.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

import jax
import jax.numpy as jnp
from jax import lax

from jaxannot.inference.support import SupportError, check_support, first_failing
from jaxannot.methods.topic_models.link_lda import LDAPrior, check_counts, padded_views
from jaxannot.runtime.progress import check_count

if TYPE_CHECKING:
    from jaxannot.types import Array

__all__ = ["CVB0State", "cvb0_counts", "cvb0_update", "fit_cvb0"]

_TINY = 1e-30


class CVB0State(NamedTuple):
    """Result of :func:`fit_cvb0`.

    Attributes
    ----------
    gamma : Float[Array, "images topics"]
        :math:`n_{dk} + \\alpha` (as ``LinkLDAState.gamma``).
    lambdas : tuple of Float[Array, "topics vocab_v"]
        :math:`n^v_{kw} + \\eta` (as ``LinkLDAState.lambdas``).
    resp : tuple of Float[Array, "images max_nnz_v topics"]
        The responsibilities :math:`\\gamma^v_{dn}` per padded entry; pass the state
        back to :func:`fit_cvb0` to continue.
    """

    gamma: jax.Array
    lambdas: tuple
    resp: tuple


def cvb0_counts(
    resp: Sequence[Array],
    ids: Sequence[Array],
    cnts: Sequence[Array],
    vocab_sizes: Sequence[int],
) -> tuple[Array, tuple[Array, ...]]:
    """Expected counts ``(n_dk [D, K], (n^v_kw [K, V_v], ...))`` of responsibilities."""
    n_dk = sum(jnp.einsum("dnk,dn->dk", r, c) for r, c in zip(resp, cnts, strict=True))
    n_kw = tuple(
        jax.ops.segment_sum(
            (r * c[..., None]).reshape(-1, r.shape[-1]), i.reshape(-1), v
        ).T
        for r, i, c, v in zip(resp, ids, cnts, vocab_sizes, strict=True)
    )
    return n_dk, n_kw


def cvb0_update(
    resp: Sequence[Array],
    ids: Sequence[Array],
    cnts: Sequence[Array],
    n_dk: Array,
    n_kw: Sequence[Array],
    alpha: float | Array,
    eta: float | Array,
) -> tuple[tuple[Array, ...], Array]:
    """One CVB0 update of the responsibilities of some images (see module docstring).

    ``resp``, ``ids``, ``cnts`` and ``n_dk`` are those images' rows; ``n_kw`` the
    topic-word counts of every view over the whole corpus. Returns the new
    responsibilities and the images' leave-one-out log predictive (summed over
    their tokens).
    """
    out, loo = [], 0.0
    num_topics = n_dk.shape[-1]
    n_d = n_dk.sum(-1)
    for r, i, c, nkw in zip(resp, ids, cnts, n_kw, strict=True):
        # this token's own expected count; the counts minus it are >= 0 up to
        # round-off, which α, η > 0 absorb (clipping costs ~20 % of the update)
        s = jnp.minimum(c, 1.0)
        own = s[..., None] * r
        doc = n_dk[:, None, :] - own + alpha
        word = nkw.T[i] - own + eta  # [D, N, K] gathered
        topic = nkw.sum(1) - own + nkw.shape[1] * eta
        p = doc * word / topic
        norm = jnp.maximum(p.sum(-1), _TINY)
        out.append(p / norm[..., None])
        denom = n_d[:, None] - s + num_topics * alpha
        loo = loo + jnp.where(c > 0, c * jnp.log(norm / denom), 0.0).sum()
    return tuple(out), loo


def _log_denominators(cnts, num_topics: int, alpha):
    """``Σ c log(n_d − s + Kα)``: the leave-one-out normalizers of the objective,
    fixed (``n_d`` is a length)."""
    n_d = sum(c.sum(1) for c in cnts)
    return sum(
        jnp.where(
            c > 0,
            c * jnp.log(n_d[:, None] - jnp.minimum(c, 1.0) + num_topics * alpha),
            0.0,
        ).sum()
        for c in cnts
    )


def _view_update(rv, iv, cv, kw, nk, n_dk, alpha, eta) -> tuple:
    """One view's update of a block in :func:`_run`: the block's responsibilities
    ``rv`` [K, S N] (word ids ``iv``, counts ``cv`` [S N]) at the carried counts
    ``kw`` [V, K], ``nk`` [K] and the block's image counts ``n_dk`` [K, S]; the new
    responsibilities, the counts after them and the entries' sum of ``c log`` of
    their normalizers."""
    num_topics, size = n_dk.shape
    own = jnp.minimum(cv, 1.0) * rv
    doc = (n_dk[:, :, None] - own.reshape(num_topics, size, -1)).reshape(num_topics, -1)
    # the carried counts minus this entry's own are >= 0 in exact arithmetic; the
    # clip keeps every factor >= η under float32 round-off, so that no
    # responsibility can turn negative
    word = jnp.maximum(kw[iv].T - own, 0.0) + eta  # [K, S N] gathered
    topic = nk[:, None] - own + kw.shape[0] * eta
    p = (doc + alpha) * word / topic
    norm = jnp.maximum(p.sum(0), _TINY)
    rn = p * (1.0 / norm)
    delta = (rn - rv) * cv
    return rn, kw.at[iv].add(delta.T), nk + delta.sum(1), (cv * jnp.log(norm)).sum()


def _unblocked(b_resp, ids, size) -> tuple:
    """:func:`_run`'s block-major responsibilities ``[B, K, S N_v]`` back to
    ``[D, N_v, K]`` per view, the padding images dropped."""
    num_blocks, num_topics = b_resp[0].shape[:2]
    return tuple(
        jnp.moveaxis(r.reshape(num_blocks, num_topics, size, -1), 1, -1).reshape(
            (-1, i.shape[1], num_topics)
        )[: i.shape[0]]
        for r, i in zip(b_resp, ids, strict=True)
    )


@functools.partial(
    jax.jit, static_argnames=("vocab_sizes", "num_iterations", "num_blocks")
)
def _run(resp, ids, cnts, alpha, eta, *, vocab_sizes, num_iterations, num_blocks):
    """The update of the module docstring on blocks of images, topic-major.

    Inside, the responsibilities of view ``v`` are kept as ``[B, K, S N_v]`` (``B``
    blocks of ``S`` images with their ``N_v`` padded entries flattened, topics
    leading, so that the sums over topics are vector adds over contiguous rows) and
    the topic-word counts as ``[V_v, K]`` (gathered and scatter-added by word, one
    contiguous row of K per entry), carried from block to block and rebuilt from
    the responsibilities at the start of every sweep (with the clip of the
    topic-word factor and :func:`fit_cvb0`'s checks, +11 % CPU seconds per
    iteration at 100,000 images, ``docs/topic_models.md``). The topic totals
    ``n^v_k`` are carried too (each block adds its change, the sum over its
    entries), and recomputed as the column sums once per sweep: a sum over the
    whole vocabulary per block would cost more than the block's own entries when
    blocks are small (``V_v K`` against ``S N_v K``). Also returns, per iteration,
    the least topic-word count entering it (NaN if one is).
    """
    num_images = ids[0].shape[0]
    size = -(-num_images // num_blocks)
    pad = size * num_blocks - num_images

    def blocks(x):  # [D, ...] -> [B, S, ...], zero images appended
        x = jnp.pad(x, [(0, pad)] + [(0, 0)] * (x.ndim - 1))
        return x.reshape((num_blocks, size) + x.shape[1:])

    b_ids = tuple(blocks(i).reshape(num_blocks, -1) for i in ids)
    b_cnts = tuple(blocks(c).reshape(num_blocks, -1) for c in cnts)
    num_topics = resp[0].shape[-1]

    def block(carry, xs):
        n_kw, n_k = carry
        r, i, c = xs  # per view: [K, S N], [S N], [S N]
        n_dk = sum(
            (a * b).reshape(num_topics, size, -1).sum(-1)
            for a, b in zip(r, c, strict=True)
        )  # [K, S]
        new, kw_out, k_out, loo = [], [], [], 0.0
        for rv, iv, cv, kw, nk in zip(r, i, c, n_kw, n_k, strict=True):
            rn, kw, nk, view_loo = _view_update(rv, iv, cv, kw, nk, n_dk, alpha, eta)
            new.append(rn)
            kw_out.append(kw)
            k_out.append(nk)
            loo = loo + view_loo  # minus log_denominators below
        return (tuple(kw_out), tuple(k_out)), (tuple(new), loo)

    def sweep_counts(b_resp):  # per view [V_v, K], rebuilt from the responsibilities
        return tuple(
            jax.ops.segment_sum(
                jnp.swapaxes(r * c[:, None, :], 1, 2).reshape(-1, num_topics),
                i.reshape(-1),
                v,
            )
            for r, i, c, v in zip(b_resp, b_ids, b_cnts, vocab_sizes, strict=True)
        )

    def iteration(b_resp, _):
        # rebuilt every sweep, carried only from block to block within it: carried
        # over sweeps, the float32 round-off of the block updates (counts in the
        # tens of thousands changed by responsibilities < 1) accumulates until
        # counts that should be ~0 are negative (issue 50)
        n_kw = sweep_counts(b_resp)
        n_k = tuple(kw.sum(0) for kw in n_kw)
        lowest = jnp.min(jnp.stack([kw.min() for kw in n_kw]))
        _, (b_resp, loo) = lax.scan(block, (n_kw, n_k), (b_resp, b_ids, b_cnts))
        return b_resp, (loo.sum() - log_denominators, lowest)

    log_denominators = _log_denominators(cnts, num_topics, alpha)
    b_resp = tuple(  # [B, K, S N]
        jnp.moveaxis(blocks(r), -1, 1).reshape(num_blocks, num_topics, -1) for r in resp
    )
    b_resp, (objective, lowest) = lax.scan(
        iteration, b_resp, None, length=num_iterations
    )
    resp = _unblocked(b_resp, ids, size)
    n_dk, n_kw = cvb0_counts(resp, ids, cnts, vocab_sizes)
    return resp, n_dk + alpha, tuple(n + eta for n in n_kw), objective, lowest


@functools.partial(jax.jit, static_argnames=("num_topics",))
def _init_resp(rng_key, ids, num_topics):
    """Random start: ``u / Σ_k u_k`` per entry, ``u ~ U(0.001, 1)`` per topic."""
    keys = jax.random.split(rng_key, len(ids))
    out = []
    for k, i in zip(keys, ids, strict=True):
        u = jax.random.uniform(k, i.shape + (num_topics,), minval=1e-3, maxval=1.0)
        out.append(u / u.sum(-1, keepdims=True))
    return tuple(out)


def fit_cvb0(
    rng_key: jax.Array,
    counts_by_view: Sequence,
    num_topics: int,
    *,
    prior: LDAPrior = LDAPrior(),  # noqa: B008 (immutable)
    num_iterations: int = 100,
    num_blocks: int = 1,
    restarts: int = 1,
    select_after: int = 10,
    state: CVB0State | None = None,
) -> tuple[CVB0State, np.ndarray]:
    """Fit Link-LDA by CVB0 (one compiled ``lax.scan``; see the module docstring).

    CVB0 settles into one of several fixed points of different quality, depending on
    its random start. With ``restarts > 1``, that many starts (start 0 from
    ``rng_key``, start ``r`` from ``jax.random.fold_in(rng_key, r)``) each run
    ``min(select_after, num_iterations)`` iterations, and the one whose last
    iteration has the highest ``objective`` (the training tokens' leave-one-out log
    predictive) goes on for the rest of ``num_iterations``: the choice reads the
    training tokens only. It is only as good as the objective's ranking after
    ``select_after`` iterations: the objective ranks the fixed points once the
    starts have settled into them, not while they still move, so ``select_after``
    should reach that point (``benchmarks/peers/cvb0_fixed_points.py`` measures
    where it is on a corpus).

    Parameters
    ----------
    rng_key : PRNGKey
        Seeds the random start of the responsibilities.
    counts_by_view : sequence of [images, vocab_v] count matrices (dense, >= 0,
        finite, the same images in every view; converted to padded bags).
    num_topics : int
    prior : LDAPrior
        The Dirichlet concentrations α (on θ) and η (on every β^v_k), as in
        :func:`~jaxannot.methods.topic_models.link_lda_vb.fit_vb`.
    num_iterations : int
        Updates of every responsibility.
    num_blocks : int
        1: synchronous updates; B > 1: B blocks of images updated in turn, the
        topic-word counts refreshed after each.
    restarts : int
        Random starts (1: one start, no choice); each costs ``select_after``
        iterations.
    select_after : int
        Iterations of every start before the choice (capped at ``num_iterations``).
    state : CVB0State, optional
        Continue from this state (an earlier result on the same counts); no
        restarts.

    Returns
    -------
    state : CVB0State
        ``state.lambdas`` = n_kw + η for ``fold_in`` / ``topic_word``.
    objective : np.ndarray
        Leave-one-out log predictive of the training tokens per iteration (the
        chosen start's).

    Raises
    ------
    TypeError
        A count (``num_iterations``, ``num_blocks``, ``restarts``, ``select_after``)
        that is not an integer.
    ValueError
        ``num_topics`` or a count below 1, a prior out of its range, or bad counts.
    SupportError
        If the counts left their support (``λ < η``, ``γ < α``, non-finite, or
        responsibilities off the simplex), naming the iteration; the clip of the
        update makes this a guard against a broken build, not an expected outcome.
    """
    if num_topics < 1:
        raise ValueError(f"num_topics must be >= 1, got {num_topics}")
    prior.check()
    num_iterations = check_count("num_iterations", num_iterations)
    num_blocks = check_count("num_blocks", num_blocks)
    restarts = check_count("restarts", restarts)
    select_after = check_count("select_after", select_after)
    arrays = check_counts(counts_by_view)
    ids, cnts = padded_views(arrays)
    alpha, eta = jnp.float32(prior.alpha), jnp.float32(prior.eta)

    def sweeps(resp, count):
        return _run(
            resp,
            ids,
            cnts,
            alpha,
            eta,
            vocab_sizes=tuple(a.shape[1] for a in arrays),
            num_iterations=count,
            num_blocks=min(num_blocks, arrays[0].shape[0]),
        )

    if state is None:
        first = min(select_after, num_iterations) if restarts > 1 else num_iterations
        best = None
        for start in range(restarts):
            key = rng_key if start == 0 else jax.random.fold_in(rng_key, start)
            run = sweeps(_init_resp(key, ids, num_topics), first)
            if best is None or float(run[3][-1]) > float(best[3][-1]):
                best = run
        resp, gamma, lambdas, objective, lowest = best
    else:
        resp = tuple(state.resp)
        if [r.shape for r in resp] != [i.shape + (num_topics,) for i in ids]:
            raise ValueError("state does not match these counts and num_topics")
        first, objective, lowest = 0, jnp.zeros(0), jnp.zeros(0)
    if num_iterations > first:  # the chosen start goes on
        resp, gamma, lambdas, more, least = sweeps(resp, num_iterations - first)
        objective = jnp.concatenate([objective, more])
        lowest = jnp.concatenate([lowest, least])
    _check_fit(gamma, lambdas, resp, lowest, alpha, eta, num_iterations)
    return CVB0State(gamma, lambdas, resp), np.asarray(objective)


def _check_fit(gamma, lambdas, resp, lowest, alpha, eta, num_iterations) -> None:
    """:func:`fit_cvb0`'s counts and responsibilities checked against their support
    (``SupportError``), ``lowest`` the least topic-word count entering each
    iteration."""
    # lowest[i]: the least topic-word count entering iteration i, i.e. left by
    # iteration i (1-based) for i >= 1; the returned counts are checked in full
    bad = first_failing(np.asarray(lowest)[1:])
    if bad is not None:
        raise SupportError(
            "link-lda cvb0: the topic-word counts left their support at iteration "
            f"{bad + 1} of {num_iterations} (least count {float(lowest[bad + 1]):.6g})"
        )
    check_support("link-lda cvb0: gamma", gamma, iteration=num_iterations, lower=alpha)
    for v, lam in enumerate(lambdas):
        check_support(
            f"link-lda cvb0: lambdas[{v}]", lam, iteration=num_iterations, lower=eta
        )
    for v, r in enumerate(resp):
        check_support(
            f"link-lda cvb0: resp[{v}]", r, iteration=num_iterations, simplex_axis=-1
        )
