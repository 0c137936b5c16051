r"""pLSA-Words: two-stage probabilistic latent semantic analysis for annotation.

The pLSA model (Hofmann 1999) with several bags per image: every image has topic
proportions :math:`\theta_d = P(z \mid d)`, every token of view :math:`v` draws its
topic from :math:`\theta_d` and its word from :math:`\beta^v_z = P(\cdot \mid z)`::

    x^v_{dl} ~ Categorical(sum_k theta_{dk} beta^v_k)

pLSA-Words (Monay & Gatica-Perez 2004) fits it in two stages so that the topics are
defined by the text:

1. pLSA on the *text* words of the annotated images: :math:`\theta_d`,
   :math:`\beta^{text}`;
2. :math:`\beta^{vis}` from their *visual* words with :math:`\theta_d` fixed;

and annotates an image by *folding in* its visual words (EM on :math:`\theta_{new}`
with :math:`\beta^{vis}` fixed), then :math:`P(w \mid d) = \sum_z P(w\mid z)
\theta_{dz}`.

Every stage is EM with closed-form updates (one image's :math:`\theta` update,
vmapped): :math:`P(z\mid d,w) \propto \theta_{dz}\beta_{zw}`,
:math:`\theta_{dz}\propto\sum_w n_{dw}P(z\mid d,w)`,
:math:`\beta_{zw} \propto \sum_d n_{dw}P(z\mid d,w) + s`. The objective
:math:`\sum n\log(\theta\beta) + s\sum\log\beta` (a symmetric Dirichlet(1+s) MAP
smoothing, ``s`` small, keeps fold-in finite for words unseen in a topic) never
decreases.

References
----------
T. Hofmann. Probabilistic latent semantic analysis. UAI 1999.
F. Monay, D. Gatica-Perez. PLSA-based image auto-annotation: constraining the latent
space. ACM Multimedia 2004.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist

from jaxannot.inference.em import run_em
from jaxannot.inference.support import check_support
from jaxannot.methods.topic_models.link_lda import token_log_likelihood
from jaxannot.runtime.programs import bounded_cache

if TYPE_CHECKING:
    from jaxannot.types import Array, ArrayLike, PRNGKey

__all__ = [
    "PLSAState",
    "PLSAInfo",
    "plsa",
    "log_likelihood",
    "build_em_kernel",
    "fit_stage",
    "fit_plsa_words",
    "fold_in",
]

_TINY = 1e-30


class PLSAState(NamedTuple):
    """``theta`` [images, topics] = P(z|d); ``betas``: per-view [topics, vocab]."""

    theta: jax.Array
    betas: tuple


class PLSAInfo(NamedTuple):
    """``objective``: smoothed log-likelihood at the state entering the step."""

    objective: jax.Array


def plsa(counts_by_view: Sequence[jax.Array], *, num_topics: int) -> None:
    """numpyro model of multi-view pLSA with per-token topics marginalized.

    ``theta_d`` and every ``beta^v_k`` carry flat Dirichlet(1) priors, so the MAP
    point is pLSA's maximum-likelihood estimate (site ``"tokens"`` holds
    :math:`\\sum n \\log \\theta\\beta`).
    """
    with numpyro.plate("topic", num_topics):
        betas = [
            numpyro.sample(f"beta_{v}", dist.Dirichlet(jnp.ones(c.shape[1])))
            for v, c in enumerate(counts_by_view)
        ]
    with numpyro.plate("image", counts_by_view[0].shape[0]):
        theta = numpyro.sample("theta", dist.Dirichlet(jnp.ones(num_topics)))
        numpyro.factor("tokens", token_log_likelihood(theta, betas, counts_by_view))


def log_likelihood(
    theta: Array, betas: Sequence[Array], counts_by_view: Sequence[Array]
) -> jax.Array:
    """:math:`\\sum_{d,v,w} n^v_{dw}\\log\\sum_z\\theta_{dz}\\beta^v_{zw}`."""
    return token_log_likelihood(theta, betas, counts_by_view).sum()


def _image_theta(theta_d, counts_d, betas):
    """New θ of one image from its views (unchanged if it has no tokens)."""
    acc = jnp.zeros_like(theta_d)
    for beta, c in zip(betas, counts_d, strict=False):
        p = jnp.maximum(theta_d @ beta, _TINY)
        acc = acc + theta_d * (beta @ (c / p))
    total = acc.sum()
    return jnp.where(total > 0, acc / jnp.maximum(total, _TINY), theta_d)


@bounded_cache()
def build_em_kernel(
    update_theta: bool, update_betas: tuple[bool, ...]
) -> Callable[..., tuple[PLSAState, PLSAInfo]]:
    """EM step for pLSA with the given blocks free; ``data = (counts, smoothing)``.

    Every view's counts enter the θ update and the likelihood; pass zero counts to
    leave a view out (stage 1 of pLSA-Words ignores the visual words this way).
    """

    def step(rng_key, state: PLSAState, data):
        del rng_key
        counts, smoothing = data
        theta, betas = state.theta, state.betas
        objective = log_likelihood(theta, betas, counts) + smoothing * sum(
            jnp.log(b).sum() for b, on in zip(betas, update_betas, strict=False) if on
        )
        new_betas = []
        for beta, c, on in zip(betas, counts, update_betas, strict=False):
            if on:
                ratio = c / jnp.maximum(theta @ beta, _TINY)
                stats = beta * (theta.T @ ratio) + smoothing
                new_betas.append(stats / stats.sum(-1, keepdims=True))
            else:
                new_betas.append(beta)
        if update_theta:
            theta = jax.vmap(_image_theta, in_axes=(0, 0, None))(
                theta, tuple(counts), betas
            )
        return PLSAState(theta, tuple(new_betas)), PLSAInfo(objective)

    return step


def fit_stage(
    rng_key: PRNGKey,
    state: PLSAState,
    counts_by_view: Sequence[Array],
    *,
    update_theta: bool,
    update_betas: tuple[bool, ...],
    num_iterations: int,
    smoothing: float,
) -> tuple[PLSAState, np.ndarray]:
    """Run one EM stage (compiled once per shape and block pattern)."""
    counts = tuple(jnp.asarray(c, jnp.float32) for c in counts_by_view)
    state, info = run_em(
        rng_key,
        state,
        (counts, jnp.float32(smoothing)),
        step=build_em_kernel(bool(update_theta), tuple(bool(u) for u in update_betas)),
        num_iterations=num_iterations,
    )
    return state, np.asarray(info.objective)


def _random_simplex(key, shape):
    e = jax.random.exponential(key, shape)  # normalized Exp(1) = Dirichlet(1)
    return e / e.sum(-1, keepdims=True)


def fit_plsa_words(
    rng_key: jax.Array,
    text_counts: ArrayLike,
    visual_counts: ArrayLike,
    num_topics: int,
    *,
    num_iterations: int = 100,
    smoothing: float = 0.01,
) -> tuple[PLSAState, dict]:
    """Two-stage pLSA-Words on annotated images.

    Parameters
    ----------
    rng_key : PRNGKey
    text_counts : [images, words]
    visual_counts : [images, visual words]
    num_topics : int
    num_iterations : int
        EM iterations of each stage.
    smoothing : float
        Dirichlet MAP pseudo-count on the topic-word distributions.

    Returns
    -------
    state : PLSAState
        ``theta`` of the training images; ``betas = (text, visual)``.
    objectives : dict
        ``"text"`` and ``"visual"`` objective traces (each non-decreasing).

    Raises
    ------
    SupportError
        If θ or a β left the simplex (:func:`jaxannot.inference.support.check_support`).
    """
    if num_topics < 1:
        raise ValueError(f"num_topics must be >= 1, got {num_topics}")
    if smoothing < 0:
        raise ValueError(f"smoothing must be >= 0, got {smoothing}")
    text = jnp.asarray(text_counts, jnp.float32)
    vis = jnp.asarray(visual_counts, jnp.float32)
    k1, k2, k3, k4 = jax.random.split(rng_key, 4)
    # float32, not weak-typed (see fold_in)
    state = PLSAState(
        _random_simplex(k1, (text.shape[0], num_topics)),
        (
            _random_simplex(k2, (num_topics, text.shape[1])),
            jnp.full((num_topics, vis.shape[1]), 1.0 / vis.shape[1], jnp.float32),
        ),
    )
    state, obj_text = fit_stage(
        k3,
        state,
        (text, jnp.zeros_like(vis)),
        update_theta=True,
        update_betas=(True, False),
        num_iterations=num_iterations,
        smoothing=smoothing,
    )
    # stage 2: θ fixed, visual β from the visual words (text β fixed too)
    state, obj_vis = fit_stage(
        k4,
        state,
        (text, vis),
        update_theta=False,
        update_betas=(False, True),
        num_iterations=num_iterations,
        smoothing=smoothing,
    )
    for site, value in (
        ("theta", state.theta),
        ("beta_text", state.betas[0]),
        ("beta_visual", state.betas[1]),
    ):
        check_support(
            f"plsa-words: {site}",
            value,
            iteration=f"{num_iterations} of stage 2",
            simplex_axis=-1,
        )
    return state, {"text": obj_text, "visual": obj_vis}


def fold_in(
    beta_visual: ArrayLike, visual_counts: ArrayLike, *, num_iterations: int = 50
) -> tuple[jax.Array, np.ndarray]:
    """θ of new images from their visual words with ``beta_visual`` fixed.

    Returns ``theta`` [images, topics] and the fold-in objective trace.
    """
    vis = jnp.asarray(visual_counts, jnp.float32)
    k = beta_visual.shape[0]
    # float32, not weak-typed (as run_em's loop returns it): a carry whose type
    # changes between the loop's slices compiles the loop again
    theta = jnp.full((vis.shape[0], k), 1.0 / k, jnp.float32)
    state = PLSAState(theta, (jnp.asarray(beta_visual),))
    state, obj = fit_stage(
        jax.random.key(0),
        state,
        (vis,),
        update_theta=True,
        update_betas=(False,),
        num_iterations=num_iterations,
        smoothing=0.0,
    )
    return state.theta, obj
