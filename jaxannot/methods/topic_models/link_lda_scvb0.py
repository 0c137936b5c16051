r"""Link-LDA by stochastic collapsed variational Bayes (SCVB0), for large corpora.

The model and the counts are :mod:`jaxannot.methods.topic_models.link_lda_cvb0`'s;
SCVB0 (Foulds, Boyles, DuBois, Smyth & Welling 2013) keeps no responsibility per
token. It keeps the topic-word counts :math:`N^v_{kw}` of every view (estimates of
the whole corpus's expected counts) and each image's topic counts :math:`n_{dk}`,
and visits the images in random minibatches :math:`M` of ``batch_size`` images, a
fresh order every pass. For a minibatch, with the topic-word factor of the current
counts

.. math::
    \hat\phi^v_{kw} = \frac{N^v_{kw} + \eta}{N^v_k + V_v\eta},

each image's counts are brought to the zeroth-order fixed point (``num_inner``
updates from the image's counts of its last visit, a warm start; uniform at the
first)

.. math::
    \tilde\gamma^v_{dnk} \propto (n_{dk} + \alpha)\,\hat\phi^v_{k w^v_{dn}},\qquad
    n_{dk} \leftarrow \sum_v\sum_n c^v_{dn}\tilde\gamma^v_{dnk}

(Foulds et al.'s "burn-in" of the document counts, all of an image's entries at
once, clumped: one responsibility per distinct word, weighted by its count),
then one update of CVB0's own, each entry's own expected count taken out of the
image's as in :mod:`~jaxannot.methods.topic_models.link_lda_cvb0` (:math:`s =
\min(c, 1)`),

.. math::
    \gamma^v_{dnk} \propto \big(n_{dk} - s^v_{dn}\tilde\gamma^v_{dnk} + \alpha\big)
        \,\hat\phi^v_{k w^v_{dn}},\qquad
    n_{dk} \leftarrow \sum_v\sum_n c^v_{dn}\gamma^v_{dnk}.

With the own count left in, a token votes for the topics it already leans to
(one token of a hundred-token image against :math:`\alpha = 0.1`): on the
benchmark's synthetic corpora the held-out perplexity after one pass was about
0.7 % worse at 100,000 documents and 1 % at 1,000,000 (issue 46). The updates
before the last leave the own count in: they cost two products per entry, the
last about three. Then the minibatch's expected topic-word counts, scaled to the
corpus by :math:`D/|M|`, move the estimate a step
:math:`\rho_t = (\tau + t)^{-\kappa}` (Robbins-Monro, :math:`\kappa\in(0.5, 1]`):

.. math::
    N^v_{kw} \leftarrow (1-\rho_t)\,N^v_{kw} + \rho_t\,\frac{D}{|M|}
        \sum_{d\in M}\sum_{n:\,w^v_{dn}=w} c^v_{dn}\gamma^v_{dnk}.

A pass costs ``num_inner`` products of every entry with its ``K`` factors, as one
sweep of :func:`~jaxannot.methods.topic_models.link_lda_cvb0.fit_cvb0` costs one,
but the topic-word counts move ``D / batch_size`` times per pass, so a few passes
reach what batch CVB0 reaches in tens of sweeps, and memory holds the bags and
``n_dk`` only (no ``[entries, K]`` responsibilities).

The topic-word counts start on ``K`` images far apart (farthest-first traversal
of a sample of at most 10,000 images in Hellinger distance; each topic half its
image's word frequencies, half the corpus's). The steps soon shrink (at 1M
images in minibatches of 1,024, :math:`\rho_t \approx 2\cdot 10^{-3}` by the end
of the first pass), so topics merged or left out early stay so. From CVB0's
start near the corpus's word frequencies, a synthetic corpus of 20 topics and 300k
images kept two true topics merged in one and another fitted topic nearly empty,
about 5 % on held-out perplexity, which more passes did not mend; started on
images far apart, every true topic had its own.

The result has CVB0's pair: ``gamma = n_dk + α`` (each image's counts at its last
visit) and ``lambdas = N^v_kw + η``, so
:func:`~jaxannot.methods.topic_models.link_lda_vb.fold_in` and
:func:`~jaxannot.methods.topic_models.link_lda.topic_word` take them unchanged.
The per-pass ``objective`` is the mean log predictive probability per token of the
minibatches' tokens under their fixed points, :math:`\sum c\log\sum_k\hat\theta_{dk}
\hat\phi^v_{kw} / \sum c` with :math:`\hat\theta_d \propto n_d + \alpha` (a
progress measure; SCVB0 maximizes no bound).

References
----------
J. Foulds, L. Boyles, C. DuBois, P. Smyth, M. Welling. Stochastic collapsed
variational Bayesian inference for latent Dirichlet allocation. KDD 2013.
A. Asuncion, M. Welling, P. Smyth, Y. W. Teh. On smoothing and inference for topic
models. UAI 2009.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

import jax
import jax.numpy as jnp

from jaxannot.inference.support import check_support
from jaxannot.methods.topic_models.link_lda import LDAPrior
from jaxannot.methods.topic_models.link_lda_bags import sparse_bags
from jaxannot.methods.topic_models.link_lda_scvb0_start import (
    best_start,
    initial_counts,
)
from jaxannot.runtime.programs import bounded_cache
from jaxannot.runtime.progress import check_count, run_steps

__all__ = [
    "AUTO_UPDATES",
    "SCVB0Info",
    "SCVB0State",
    "auto_passes",
    "build_scvb0_step",
    "fit_scvb0",
]

_TINY = 1e-30

#: Minibatch updates that ``num_passes="auto"`` aims at. On the benchmark's synthetic
#: corpora (issue 46; batch 1,024) the held-out perplexity kept falling over 8 passes
#: at 10,000 documents (10 updates a pass), was lowest after 4 of 6 passes at 30,000
#: (30 a pass) and after the first pass at 100,000 and 1,000,000 (98 and 977 a pass),
#: rising slightly with every pass after it.
AUTO_UPDATES = 100


class SCVB0State(NamedTuple):
    """The state of :func:`fit_scvb0`.

    Attributes
    ----------
    gamma : Float[Array, "images topics"]
        :math:`n_{dk} + \\alpha`, each image's counts at its last visit.
    lambdas : tuple of Float[Array, "topics vocab_v"]
        :math:`N^v_{kw} + \\eta` (as ``LinkLDAState.lambdas``).
    updates : Int[Array, ""]
        Minibatch updates so far (:math:`t` of the step size).
    start : Int[Array, ""]
        The start chosen among :func:`fit_scvb0`'s ``restarts`` (its orders).
    """

    gamma: jax.Array
    lambdas: tuple
    updates: jax.Array
    start: jax.Array


class SCVB0Info(NamedTuple):
    """One pass of :func:`fit_scvb0`: ``objective``, the mean log predictive
    probability per token of the pass's minibatches (see the module docstring)."""

    objective: jax.Array


def _fixed_point(phi, cnts, start, alpha, num_inner):
    """``num_inner`` zeroth-order updates of ``t = n_dk + α`` [M, K] given the
    gathered factors ``phi`` (per view [M, N, K]), then one with each entry's own
    expected count taken out (see the module docstring); returns ``t``, per view the
    responsibilities ``γ`` [M, N, K] of that last update and the normalizers
    ``Σ_k φ t`` [M, N] of the final ``t``."""

    def norms(t):
        return tuple(jnp.maximum(jnp.einsum("mnk,mk->mn", f, t), _TINY) for f in phi)

    def update(_, t):
        spread = sum(
            jnp.einsum("mnk,mn->mk", f, c / z)
            for f, c, z in zip(phi, cnts, norms(t), strict=True)
        )
        return alpha + t * spread

    def counts(gamma):
        return alpha + sum(
            jnp.einsum("mnk,mn->mk", g, c) for g, c in zip(gamma, cnts, strict=True)
        )

    t = jax.lax.fori_loop(0, num_inner - 1, update, start)
    own = tuple(
        f * t[:, None, :] / z[..., None] for f, z in zip(phi, norms(t), strict=True)
    )
    t = counts(own)  # the num_inner-th update, its responsibilities kept
    gamma = []
    for f, c, g in zip(phi, cnts, own, strict=True):
        # the entry's own expected count is in t; >= α up to round-off
        doc = jnp.maximum(t[:, None, :] - jnp.minimum(c, 1.0)[..., None] * g, alpha)
        p = doc * f
        gamma.append(p / jnp.maximum(p.sum(-1, keepdims=True), _TINY))
    t = counts(gamma)
    return t, tuple(gamma), norms(t)


@bounded_cache()
def build_scvb0_step(
    batch_size: int, num_inner: int, tau: float, kappa: float
) -> Callable[..., tuple[tuple, SCVB0Info]]:
    """One pass of SCVB0 over the images as a random kernel for
    :func:`~jaxannot.runtime.progress.run_steps`.

    ``step(t, (n_kw, n_dk, updates), data) -> (carry, SCVB0Info)`` with
    ``data = (rng_key, ids, cnts, alpha, eta, num_images)``: the pass's order drawn
    from ``rng_key`` folded with ``updates`` (so that a continued fit draws what one
    longer fit would), per view the padded bags
    ``[D', N_v]`` (``D'`` a multiple of ``batch_size``; rows past ``num_images``
    empty), the topic-word counts ``n_kw`` per view ``[V_v, K]`` (word-major, so
    that a gather reads one contiguous row per entry). Cached per configuration
    (the compiled run is keyed by the step).

    Parameters
    ----------
    batch_size : int
        Images per minibatch.
    num_inner : int
        Fixed-point updates of each image's counts per visit.
    tau, kappa : float
        The step size :math:`\\rho_t = (\\tau + t)^{-\\kappa}`.

    Returns
    -------
    callable
        The step.
    """

    def step(t, carry, data):
        del t
        n_kw, n_dk, updates = carry
        rng_key, ids, cnts, alpha, eta, num_images = data
        rows = n_dk.shape[0]
        # the real images in a random order, the empty rows (past num_images) last
        keys = jax.random.uniform(jax.random.fold_in(rng_key, updates), (rows,))
        order = jnp.argsort(jnp.where(jnp.arange(rows) < num_images, keys, 2.0))
        order = order.reshape(-1, batch_size)
        scale = jnp.asarray(num_images, jnp.float32)

        def minibatch(state, idx):
            n_kw, n_dk, t_step = state
            b_ids = tuple(i[idx] for i in ids)
            b_cnts = tuple(c[idx] for c in cnts)
            phi = tuple(
                (kw[i] + eta) / (kw.sum(0) + kw.shape[0] * eta)
                for kw, i in zip(n_kw, b_ids, strict=True)
            )
            t, gamma, norms = _fixed_point(
                phi, b_cnts, n_dk[idx] + alpha, alpha, num_inner
            )
            real = (idx < num_images).astype(jnp.float32)
            rho = (tau + t_step.astype(jnp.float32)) ** (-kappa)
            weight = scale / jnp.maximum(real.sum(), 1.0)
            new_kw = tuple(
                (1.0 - rho) * kw
                + rho
                * weight
                * jax.ops.segment_sum(
                    (c[..., None] * g).reshape(-1, t.shape[-1]),
                    i.reshape(-1),
                    kw.shape[0],
                )
                for kw, g, c, i in zip(n_kw, gamma, b_cnts, b_ids, strict=True)
            )
            log_t = jnp.log(t.sum(-1, keepdims=True))
            log_p = sum(
                (c * (jnp.log(z) - log_t)).sum()
                for c, z in zip(b_cnts, norms, strict=True)
            )
            # empty rows (past num_images) keep their zero counts
            n_dk = n_dk.at[idx].set((t - alpha) * real[:, None])
            return (new_kw, n_dk, t_step + 1), log_p

        (n_kw, n_dk, updates), log_p = jax.lax.scan(
            minibatch, (n_kw, n_dk, updates), order
        )
        tokens = sum(c.sum() for c in cnts)
        return (n_kw, n_dk, updates), SCVB0Info(log_p.sum() / jnp.maximum(tokens, 1.0))

    return step


def auto_passes(num_images: int, batch_size: int) -> int:
    """The passes of ``num_passes="auto"``: about :data:`AUTO_UPDATES` minibatch
    updates, at least one pass.

    Parameters
    ----------
    num_images : int
        Images in the corpus.
    batch_size : int
        Images per minibatch (at most ``num_images``).

    Returns
    -------
    int
        ``max(1, round(AUTO_UPDATES / minibatches))``, the minibatches of a pass
        :math:`\\lceil D / |M| \\rceil`.
    """
    minibatches = -(-num_images // max(1, min(batch_size, num_images)))
    return max(1, round(AUTO_UPDATES / minibatches))


def fit_scvb0(
    rng_key: jax.Array,
    counts_by_view: Sequence,
    num_topics: int,
    *,
    prior: LDAPrior = LDAPrior(),  # noqa: B008 (immutable)
    num_passes: int | str = "auto",
    batch_size: int = 1024,
    num_inner: int = 10,
    tau: float = 1.0,
    kappa: float = 0.9,
    restarts: int = 4,
    select_after: int = 1,
    state: SCVB0State | None = None,
    progress_bar: bool = True,
) -> tuple[SCVB0State, np.ndarray]:
    """Fit Link-LDA by SCVB0 (see the module docstring), one compiled pass per step.

    SCVB0 settles early into one of several optima, as the samplers do: ``restarts``
    independent starts (their own starting images and orders) each run
    ``select_after`` passes, and the one whose last pass predicts its tokens best
    (``objective``, the mean log predictive probability per token) goes on for the
    rest of ``num_passes``.

    Parameters
    ----------
    rng_key : PRNGKey
        Seeds the starts of the topic-word counts and the order of every pass.
    counts_by_view : sequence of [images, vocab_v] counts
        Dense arrays or ``scipy.sparse`` matrices (>= 0, finite, the same images in
        every view); only the non-zeros are kept (:func:`~.link_lda_bags.sparse_bags`).
    num_topics : int
    prior : LDAPrior
        The Dirichlet concentrations α (on θ) and η (on every β^v_k).
    num_passes : int or "auto"
        Passes over the images of the chosen start (its first ``select_after``
        included); ``"auto"``: :func:`auto_passes` (about :data:`AUTO_UPDATES`
        minibatch updates, at least one pass).
    batch_size : int
        Images per minibatch (at most the corpus: a smaller corpus is one batch).
    num_inner : int
        Fixed-point updates of an image's counts per visit.
    tau, kappa : float
        The step size :math:`(\\tau + t)^{-\\kappa}`, ``tau >= 0`` and
        ``0.5 < kappa <= 1`` (Robbins-Monro).
    restarts : int
        Independent starts (1: one start, no choice); each costs ``select_after``
        passes.
    select_after : int
        Passes of every start before the choice (at most ``num_passes``).
    state : SCVB0State, optional
        Continue from this state (an earlier result on the same counts and
        ``rng_key``: the passes are those one longer fit would run); no restarts.
    progress_bar : bool
        A tqdm bar over the passes of each run (shown after two seconds).

    Returns
    -------
    state : SCVB0State
    objective : np.ndarray
        The chosen start's mean log predictive probability per token, per pass.

    Raises
    ------
    ValueError
        A bad count, size or step-size setting, or a ``state`` of other counts.
    SupportError
        If the returned counts leave their support (``λ < η``, ``γ < α``).
    """
    num_topics = check_count("num_topics", num_topics)
    num_passes, batch_size, num_inner, select_after = _checked_steps(
        num_passes, batch_size, num_inner, select_after, tau, kappa
    )
    prior.check()
    ids, cnts, vocab_sizes = sparse_bags(counts_by_view)
    num_images = ids[0].shape[0]
    num_passes, batch_size, restarts = _schedule(
        num_images, num_passes, batch_size, restarts, select_after
    )
    rows = -(-num_images // batch_size) * batch_size
    ids = tuple(jnp.pad(i, ((0, rows - num_images), (0, 0))) for i in ids)
    cnts = tuple(jnp.pad(c, ((0, rows - num_images), (0, 0))) for c in cnts)
    alpha, eta = jnp.float32(prior.alpha), jnp.float32(prior.eta)
    init_key, run_key = jax.random.split(rng_key)
    step = build_scvb0_step(batch_size, num_inner, float(tau), float(kappa))

    def run(carry, start, passes, desc):
        data = (jax.random.fold_in(run_key, start), ids, cnts, alpha, eta)
        return run_steps(
            step,
            carry,
            passes,
            progress_bar=progress_bar,
            desc=desc,
            data=(*data, jnp.int32(num_images)),
        )

    traces = []
    if state is None:

        def counts_of(start):
            key = jax.random.fold_in(init_key, start)
            return initial_counts(key, ids, cnts, vocab_sizes, num_topics)

        chosen, carry, info = best_start(
            run, counts_of, restarts, (rows, num_topics), select_after
        )
        traces.append(info.objective)
        remaining = num_passes - select_after
    else:
        shape = (num_images, rows, num_topics)
        carry = _resumed_carry(state, vocab_sizes, shape, alpha, eta)
        chosen, remaining = int(state.start), num_passes
    if remaining:
        carry, info = run(carry, chosen, remaining, "scvb0 passes")
        traces.append(info.objective)
    state = _final_state(carry, num_images, alpha, eta, num_passes, chosen)
    return state, np.concatenate([np.asarray(t) for t in traces])


def _checked_steps(
    num_passes: int | str,
    batch_size: int,
    num_inner: int,
    select_after: int,
    tau: float,
    kappa: float,
) -> tuple[int | str, int, int, int]:
    """:func:`fit_scvb0`'s counts checked (``ValueError``), and its step size's
    ``tau >= 0`` and ``0.5 < kappa <= 1``."""
    if num_passes != "auto":
        num_passes = check_count("num_passes", num_passes)
    batch_size = check_count("batch_size", batch_size)
    num_inner = check_count("num_inner", num_inner)
    select_after = check_count("select_after", select_after)
    if not (tau >= 0.0 and 0.5 < kappa <= 1.0):
        raise ValueError(f"need tau >= 0 and 0.5 < kappa <= 1, got {tau}, {kappa}")
    return num_passes, batch_size, num_inner, select_after


def _schedule(
    num_images: int,
    num_passes: int | str,
    batch_size: int,
    restarts: int,
    select_after: int,
) -> tuple[int, int, int]:
    """:func:`fit_scvb0`'s passes (``"auto"`` resolved), batch (clamped to the
    corpus) and restarts, checked against each other."""
    batch_size = min(batch_size, num_images)
    if num_passes == "auto":
        num_passes = auto_passes(num_images, batch_size)
    restarts = check_count("restarts", restarts)
    if select_after > num_passes:
        raise ValueError(
            f"select_after ({select_after}) must be at most num_passes ({num_passes})"
        )
    return num_passes, batch_size, restarts


def _resumed_carry(
    state: SCVB0State,
    vocab_sizes: Sequence[int],
    shape: tuple[int, int, int],
    alpha: jax.Array,
    eta: jax.Array,
) -> tuple:
    """The loop's carry of an earlier :class:`SCVB0State` (``ValueError`` for one
    of other counts or ``num_topics``); ``shape``: the counts' images, those
    padded to whole batches, and the topics."""
    num_images, rows, num_topics = shape
    shapes = [lam.shape for lam in state.lambdas]
    if state.gamma.shape != (num_images, num_topics) or shapes != [
        (num_topics, v) for v in vocab_sizes
    ]:
        raise ValueError("state does not match these counts and num_topics")
    return (
        tuple(lam.T - eta for lam in state.lambdas),
        jnp.pad(state.gamma - alpha, ((0, rows - num_images), (0, 0))),
        state.updates,
    )


def _final_state(
    carry: tuple,
    num_images: int,
    alpha: jax.Array,
    eta: jax.Array,
    num_passes: int,
    chosen: int,
) -> SCVB0State:
    """The :class:`SCVB0State` of the loop's last carry, its counts checked
    against their support."""
    n_kw, n_dk, updates = carry
    gamma = n_dk[:num_images] + alpha
    lambdas = tuple(kw.T + eta for kw in n_kw)
    check_support("link-lda scvb0: gamma", gamma, iteration=num_passes, lower=alpha)
    for v, lam in enumerate(lambdas):
        check_support(
            f"link-lda scvb0: lambdas[{v}]", lam, iteration=num_passes, lower=eta
        )
    return SCVB0State(gamma, lambdas, updates, jnp.int32(chosen))
