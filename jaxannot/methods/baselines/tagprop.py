r"""TagProp: weighted nearest-neighbour tag prediction, declared as a numpyro model.

Guillaumin, Mensink, Verbeek and Schmid (2009). The probability that image :math:`i`
carries word :math:`w` is a weighted vote of its :math:`K` nearest training images
:math:`j \in N_K(i)` (image :math:`i` itself excluded: leave-one-out on the training
set), passed through a per-word sigmoid ("word-specific boosting"):

.. math::
    x_{iw} = \sum_{j \in N_K(i)} \pi_{ij}\, p(y_{jw} = 1), \qquad
    p(y_{jw} = 1) = \begin{cases} 1 - \epsilon & w \in \text{words}(j) \\
                                  \epsilon & \text{otherwise} \end{cases}

    p(y_{iw} = 1) = \sigma(\alpha_w x_{iw} + \beta_w) \quad (\alpha_w \ge 0),

with :math:`\epsilon = 10^{-5}` as in the paper (without boosting,
:math:`p(y_{iw} = 1) = x_{iw}`). The neighbour weights are either

- *rank based*: :math:`\pi_{ij} = \gamma_k` when :math:`j` is the :math:`k`-th
  neighbour of :math:`i`, :math:`\gamma` on the simplex; or
- *distance based*: :math:`\pi_{ij} = \exp(-\theta^\top d_{ij}) /
  \sum_{j'} \exp(-\theta^\top d_{ij'})` over the :math:`K` neighbours, with
  :math:`\theta \ge 0` weighting one or several base distances :math:`d_{ij}`.

Every :math:`y_{iw}` of the training set is observed (Bernoulli), so the log joint is
the paper's log-likelihood :math:`\sum_{iw} \log p(y_{iw})` plus the log priors below;
optionally each term is weighted by :math:`c_{iw}` (the paper's balancing of
positive and negative labels: :math:`c_{iw} \propto 1/n_+` for positives,
:math:`1/n_-` for negatives; here scaled so that the weights average 1), with the
counts over all words (the paper) or per word (:func:`class_weights`).

Priors (weak: their scale 100 is far above the values fitted on Corel5k, so the MAP is
close to the paper's maximum likelihood while keeping the mode finite):
:math:`\theta_d \sim \mathrm{HalfNormal}(100)`, :math:`\gamma \sim \mathrm{Dir}(1)`
(flat on the simplex), :math:`\alpha_w \sim \mathrm{HalfNormal}(100)`,
:math:`\beta_w \sim \mathcal N(0, 100^2)`.

Neighbour indices, base distances and the neighbours' word lists are computed outside
the model and handed to it as data; :func:`word_lists` makes the compact word lists
(a few words per image) that keep the vote :math:`O(n K M)` instead of
:math:`O(n K W)` memory.

References
----------
M. Guillaumin, T. Mensink, J. Verbeek, C. Schmid. "TagProp: Discriminative metric
learning in nearest neighbor models for image auto-annotation." ICCV 2009.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from numpyro import handlers

if TYPE_CHECKING:
    from jaxannot.types import Array

__all__ = [
    "EPSILON",
    "PRIOR_SCALE",
    "VARIANTS",
    "tagprop",
    "word_lists",
    "neighbor_vote",
    "neighbor_weights",
    "word_probability_logits",
    "class_weights",
    "BALANCE",
]

#: Probability of a word an image does not carry (the paper's ε = 1e-5).
EPSILON = 1e-5
#: Scale of the weak priors (see the module docstring).
PRIOR_SCALE = 100.0
VARIANTS = ("distance", "rank")


def word_lists(words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Padded word ids ``[n, M]`` and their mask of a binary ``[n, W]`` word matrix.

    ``M`` is the largest number of words of an image (at least 1); padding ids are 0
    with mask 0.
    """
    present = np.asarray(words) > 0
    width = max(1, int(present.sum(axis=1).max(initial=0)))
    order = np.argsort(~present, axis=1, kind="stable")[:, :width]
    mask = np.take_along_axis(present, order, axis=1)
    return np.where(mask, order, 0).astype(np.int32), mask.astype(np.float32)


def neighbor_weights(
    variant: str,
    neighbors: Array,
    distances: Array | None,
    gamma: Array | None = None,
    theta: Array | None = None,
) -> Array:
    r"""The weights :math:`\pi_{ij}` ``[n, K]`` of the rank or distance variant."""
    if variant == "rank":
        return jnp.broadcast_to(gamma, neighbors.shape)
    return jax.nn.softmax(-(distances @ theta), axis=1)


def neighbor_vote(
    weights: Array, neighbors: Array, word_ids: Array, word_mask: Array, num_words: int
) -> Array:
    r"""Votes :math:`x_{iw} = \epsilon + (1-2\epsilon) \sum_k \pi_{ik} y_{j_k w}`.

    Uses :math:`\sum_k \pi_{ik} = 1`; the sum is a scatter-add over the neighbours'
    word lists (``word_ids``/``word_mask`` from :func:`word_lists`).
    """
    n = neighbors.shape[0]
    values = weights[:, :, None] * word_mask[neighbors]  # [n, K, M]
    rows = jnp.broadcast_to(jnp.arange(n)[:, None, None], values.shape)
    votes = jnp.zeros((n, num_words), values.dtype)
    votes = votes.at[rows, word_ids[neighbors]].add(values)
    return EPSILON + (1.0 - 2.0 * EPSILON) * votes


def word_probability_logits(
    votes: Array, alpha: Array | None = None, beta: Array | None = None
) -> Array:
    r"""Logits of :math:`p(y_{iw}=1)`: :math:`\alpha_w x_{iw} + \beta_w`, or
    :math:`\mathrm{logit}(x_{iw})` without boosting."""
    if alpha is None:
        return jnp.log(votes) - jnp.log1p(-votes)
    return alpha * votes + beta


#: Balancing of positive and negative labels: none, the paper's (global counts) or
#: per word.
BALANCE = ("none", "global", "word")


def class_weights(words: np.ndarray, balance: str = "global") -> np.ndarray | None:
    r"""Weights :math:`c_{iw}` of the log-likelihood terms (``None`` for ``"none"``).

    ``"global"`` (the paper's): :math:`c_{iw} = N / 2n_+` for positives and
    :math:`N / 2n_-` for negatives, :math:`n_\pm` counted over all words and images
    (``N = n_+ + n_-``). ``"word"``: the same per word, :math:`c_{iw} = n / 2n_{+w}`
    and :math:`n / 2n_{-w}` with :math:`n_{\pm w}` the images with / without word
    :math:`w` (``n`` images), so that every word's positives and negatives weigh the
    same and the per-word sigmoid is not pulled towards "absent" for rare words.
    Both average 1 over the terms (of each word for ``"word"``).
    """
    if balance not in BALANCE:
        raise ValueError(f"unknown balance {balance!r}; valid: {list(BALANCE)}")
    if balance == "none":
        return None
    positive = np.asarray(words) > 0
    axis = None if balance == "global" else 0
    total = positive.size if balance == "global" else positive.shape[0]
    n_pos = np.maximum(positive.sum(axis=axis), 1)
    n_neg = np.maximum(total - positive.sum(axis=axis), 1)
    weights = np.where(positive, total / (2 * n_pos), total / (2 * n_neg))
    return weights.astype(np.float32)


def tagprop(
    neighbors: Array,
    word_ids: Array,
    word_mask: Array,
    distances: Array | None = None,
    words: Array | None = None,
    weights: Array | None = None,
    *,
    num_words: int,
    variant: str = "distance",
    boosting: bool = True,
) -> None:
    r"""TagProp (Guillaumin et al., ICCV 2009) as a numpyro model.

    Parameters
    ----------
    neighbors : int array [n, K]
        Rows (into the training images) of the K nearest neighbours of each image,
        nearest first; a training image is never its own neighbour.
    word_ids, word_mask : arrays [n_train, M]
        The training images' words (:func:`word_lists`).
    distances : array [n, K, D], optional
        Base distances to the neighbours (distance variant only).
    words : array [n, W], optional
        Observed binary words of the ``n`` images (``None``: nothing observed).
    weights : array [n, W], optional
        Per-term weights of the log-likelihood (:func:`class_weights`).
    num_words : int
        Vocabulary size ``W``.
    variant : {"distance", "rank"}
    boosting : bool
        Per-word sigmoid :math:`\sigma(\alpha_w x_{iw} + \beta_w)`.
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; valid: {list(VARIANTS)}")
    num_images, num_neighbors = neighbors.shape
    gamma = theta = alpha = beta = None
    if variant == "rank":
        gamma = numpyro.sample("gamma", dist.Dirichlet(jnp.ones(num_neighbors)))
    else:
        theta = numpyro.sample(
            "theta",
            dist.HalfNormal(PRIOR_SCALE).expand([distances.shape[-1]]).to_event(1),
        )
    if boosting:
        with numpyro.plate("word", num_words):
            alpha = numpyro.sample("alpha", dist.HalfNormal(PRIOR_SCALE))
            beta = numpyro.sample("beta", dist.Normal(0.0, PRIOR_SCALE))
    pi = neighbor_weights(variant, neighbors, distances, gamma, theta)
    votes = neighbor_vote(pi, neighbors, word_ids, word_mask, num_words)
    logits = word_probability_logits(votes, alpha, beta)
    scale = 1.0 if weights is None else weights
    with (
        numpyro.plate("image", num_images, dim=-2),
        numpyro.plate("words", num_words, dim=-1),
        handlers.scale(scale=scale),
    ):
        numpyro.sample("y", dist.Bernoulli(logits=logits), obs=words)
