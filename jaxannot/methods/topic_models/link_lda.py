r"""Link-LDA: one topic proportion per image shared by its bags, per-token topics.

Generative process (Erosheva, Fienberg & Lafferty 2004; the comparison model of
seed 000)::

    beta^v_k   ~ Dirichlet(eta 1_{V_v})          for every view v and topic k
    theta_d    ~ Dirichlet(alpha 1_K)            for every image d
    z^v_{dl}   ~ Categorical(theta_d)            for every token l of view v
    x^v_{dl}   ~ Categorical(beta^v_{z^v_{dl}})

The per-token topics are marginalized per token in the declaration,
:math:`\log p(x^v_{dl}=w \mid \theta_d) = \log\sum_k \theta_{dk}\beta^v_{kw}`.

This module holds the declaration, the priors and the variational state shared by the
fits, and the counts as padded bags. The fits are batch variational Bayes
(:mod:`jaxannot.methods.topic_models.link_lda_vb`, with the fold-in of new images),
CVB0 (:mod:`jaxannot.methods.topic_models.link_lda_cvb0`) and SVI
(:mod:`jaxannot.methods.topic_models.link_lda_svi`).

References
----------
E. Erosheva, S. Fienberg, J. Lafferty. Mixed-membership models of scientific
publications. PNAS 101, 2004.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist

if TYPE_CHECKING:
    from jaxannot.types import Array, ArrayLike

__all__ = [
    "LDAPrior",
    "LinkLDAState",
    "link_lda",
    "token_log_likelihood",
    "to_padded",
    "topic_word",
    "padded_views",
    "check_counts",
]

_TINY = 1e-30


class LDAPrior(NamedTuple):
    r"""The symmetric Dirichlet hyper-priors of Link-LDA.

    .. math::
        \theta_d \sim \mathrm{Dir}(\alpha 1_K),\qquad
        \beta^v_k \sim \mathrm{Dir}(\eta 1_{V_v}).

    Attributes
    ----------
    alpha : float
        Concentration of every image's topic proportions, > 0. Below 1 it favours
        images made of few topics (the default 0.1); the per-image E-step is then not
        convex.
    eta : float
        Concentration of every topic's word distribution in every view, > 0. Small
        values (the default 0.01) favour topics with few words.
    """

    alpha: float = 0.1
    eta: float = 0.01

    def check(self) -> None:
        """Raise ``ValueError`` unless both concentrations are > 0."""
        if self.alpha <= 0 or self.eta <= 0:
            raise ValueError(f"alpha and eta must be > 0, got {self.alpha}, {self.eta}")


class LinkLDAState(NamedTuple):
    """Variational parameters.

    Attributes
    ----------
    gamma : Float[Array, "images topics"]
        :math:`q(\\theta_d) = \\mathrm{Dir}(\\gamma_d)`.
    lambdas : tuple of Float[Array, "topics vocab_v"]
        :math:`q(\\beta^v_k) = \\mathrm{Dir}(\\lambda^v_k)`.
    """

    gamma: jax.Array
    lambdas: tuple


def link_lda(
    counts_by_view: Sequence[jax.Array] | None = None,
    *,
    num_topics: int,
    vocab_sizes: Sequence[int],
    alpha: float = 0.1,
    eta: float = 0.01,
    num_images: int | None = None,
    lengths_by_view: Sequence[jax.Array] | None = None,
    max_length: int | None = None,
) -> None:
    """numpyro model of Link-LDA (see the module docstring).

    With ``counts_by_view`` the per-token topics are marginalized in a ``factor``
    site ``"tokens"``; without it the model samples count vectors ``"counts_v"``
    (``lengths_by_view`` tokens, at most ``max_length``).
    """
    with numpyro.plate("topic", num_topics):
        betas = [
            numpyro.sample(f"beta_{v}", dist.Dirichlet(jnp.full(size, eta)))
            for v, size in enumerate(vocab_sizes)
        ]
    if counts_by_view is not None:
        num_images = counts_by_view[0].shape[0]
    if num_images is None:
        raise ValueError("generation needs num_images and lengths_by_view")
    with numpyro.plate("image", num_images):
        theta = numpyro.sample("theta", dist.Dirichlet(jnp.full(num_topics, alpha)))
        if counts_by_view is not None:
            numpyro.factor("tokens", token_log_likelihood(theta, betas, counts_by_view))
            return
        if lengths_by_view is None:
            raise ValueError("generation needs lengths_by_view")
        for v, (beta, lengths) in enumerate(zip(betas, lengths_by_view, strict=False)):
            numpyro.sample(
                f"counts_{v}",
                dist.Multinomial(
                    total_count=lengths, probs=theta @ beta, total_count_max=max_length
                ),
            )


def token_log_likelihood(
    theta: Array, betas: Sequence[Array], counts_by_view: Sequence[Array]
) -> jax.Array:
    r""":math:`\sum_{v,w} n^v_{dw}\log\sum_k\theta_{dk}\beta^v_{kw}` per image."""
    out = 0.0
    for beta, c in zip(betas, counts_by_view, strict=False):
        p = theta @ beta
        out = out + jnp.where(c > 0, c * jnp.log(jnp.maximum(p, _TINY)), 0.0).sum(-1)
    return out


def to_padded(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dense counts [images, vocab] -> padded ``(ids, counts)`` [images, max_nnz].

    Padding slots have id 0 and count 0 (they contribute nothing). The E-step then
    costs O(images x max_nnz x K) instead of O(images x vocab x K).
    """
    counts = np.asarray(counts, np.float32)
    mask = counts > 0
    nnz = mask.sum(1)
    width = max(int(nnz.max(initial=0)), 1)
    # slot of each nonzero (row-major order) = its rank within its row
    rows, cols = np.nonzero(mask)
    slot = np.arange(rows.size) - np.repeat(np.cumsum(nnz) - nnz, nnz)
    ids = np.zeros((counts.shape[0], width), np.int32)
    vals = np.zeros((counts.shape[0], width), np.float32)
    ids[rows, slot] = cols
    vals[rows, slot] = counts[mask]
    return ids, vals


def padded_views(
    counts_by_view: Sequence[np.ndarray],
) -> tuple[tuple[jax.Array, ...], tuple[jax.Array, ...]]:
    """The views as padded bags, each width padded to a power of two (more empty
    slots) so that corpora of the same size share the compiled fit.

    Parameters
    ----------
    counts_by_view : sequence of numpy.ndarray
        Each view's counts ``[images, vocab]``.

    Returns
    -------
    tuple of (tuple of jax.Array, tuple of jax.Array)
        Per view, the word ids and the counts of each image's bag
        (:func:`to_padded`), ``[images, width]``, the empty slots id 0, count 0.
    """
    pairs = []
    for ids, cnts in map(to_padded, counts_by_view):
        pad = ((0, 0), (0, (1 << (ids.shape[1] - 1).bit_length()) - ids.shape[1]))
        pairs.append((np.pad(ids, pad), np.pad(cnts, pad)))
    return (
        tuple(jnp.asarray(p[0]) for p in pairs),
        tuple(jnp.asarray(p[1]) for p in pairs),
    )


def check_counts(counts_by_view: Sequence[ArrayLike]) -> list[np.ndarray]:
    """The views as arrays; ``ValueError`` naming the view for a bad one.

    Parameters
    ----------
    counts_by_view : sequence of array-like
        Each view's counts ``[images, vocab]``.

    Returns
    -------
    list of numpy.ndarray
        The views as numpy arrays.

    Raises
    ------
    ValueError
        No view, a view not 2-D, not finite or with a negative count, or views
        with different image counts.
    """
    arrays = [np.asarray(c) for c in counts_by_view]
    if not arrays:
        raise ValueError("counts_by_view must hold at least one view")
    for v, a in enumerate(arrays):
        if a.ndim != 2:
            raise ValueError(f"view {v}: counts must be [images, vocab], got {a.shape}")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"view {v}: counts contain NaN or infinite values")
        if np.any(a < 0):
            raise ValueError(f"view {v}: counts must be >= 0")
    if len({a.shape[0] for a in arrays}) > 1:
        shapes = [a.shape for a in arrays]
        raise ValueError(f"every view needs the same number of images, got {shapes}")
    return arrays


def topic_word(lam: jax.Array) -> jax.Array:
    """Posterior-mean topic-word distributions ``λ / Σλ``."""
    return lam / lam.sum(-1, keepdims=True)
