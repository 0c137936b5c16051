r"""The multimodal mixture of unigrams: one topic per image shared by all its bags.

Generative process (Nigam et al. 2000; the base model of seed 000's LapMixUnigram)::

    pi          ~ Dirichlet(a 1_K)
    beta^v_k    ~ Dirichlet(b 1_{V_v})            for every view v and topic k
    z_d         ~ Categorical(pi)                  for every image d
    x^v_{d,l}   ~ Categorical(beta^v_{z_d})        for every token l of view v

With counts :math:`n^v_{dw}` the discrete :math:`z_d` is marginalized by hand,

.. math::
    a_{dk} = \log\pi_k + \sum_v \sum_w n^v_{dw} \log\beta^v_{kw},\qquad
    \log p(X_d \mid \pi, \beta) = \operatorname{logsumexp}_k a_{dk},

and the posterior is :math:`q(z_d = k) = \phi_{dk} \propto \exp a_{dk}`. Annotation
uses :math:`p(w \mid d) = \sum_k \phi_{dk}\beta^{text}_{kw}` with :math:`\phi_d`
computed from the visual views alone.

Both declarations, :func:`mixture_of_unigrams` (count vectors) and
:func:`mixture_of_unigrams_tokens` (padded token ids, for corpora too large for a
dense count matrix), are fitted by :class:`~jaxannot.inference.VEM` with their
closed-form M-steps (``m_step=closed_form_m_step`` / ``closed_form_m_step_tokens``)
:math:`\pi_k \propto \sum_d\phi_{dk} + a - 1`,
:math:`\beta^v_{kw} \propto \sum_d \phi_{dk} n^v_{dw} + b - 1`; with the exact
E-step EM never decreases the log joint.

References
----------
K. Nigam, A. McCallum, S. Thrun, T. Mitchell. Text classification from labeled and
unlabeled documents using EM. Machine Learning 39, 2000.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from jax import lax
from jax.scipy.special import logsumexp
from numpyro.distributions.util import validate_sample

if TYPE_CHECKING:
    from jaxannot.types import Array

__all__ = [
    "BagOfWords",
    "TokenCategorical",
    "MixtureParams",
    "mixture_of_unigrams",
    "closed_form_m_step",
    "mixture_of_unigrams_tokens",
    "closed_form_m_step_tokens",
    "token_statistics",
    "STATISTICS_BLOCK",
    "predict_words",
]


class MixtureParams(NamedTuple):
    """Parameters of the mixture (stored as logs for stability).

    Attributes
    ----------
    log_pi : Float[Array, "topics"]
    log_betas : tuple of Float[Array, "topics vocab_v"], one per view
    """

    log_pi: jax.Array
    log_betas: tuple


class BagOfWords(dist.MultinomialProbs):
    r"""A bag of i.i.d. ``Categorical(p)`` tokens, observed as its count vector.

    It samples like ``Multinomial(N, p)``; its log density is the log probability of
    the image's token *sequence*, :math:`\sum_w n_w \log p_w` — the likelihood of
    the generative process "every token :math:`\sim \mathrm{Cat}(p)`". It differs
    from the multinomial log pmf by the coefficient
    :math:`\log(N!/\prod_w n_w!)`, which does not depend on :math:`p`, so it changes
    no posterior and no estimate, and it is not computed.

    When every image shares one probability vector (as when
    :class:`~jaxannot.inference.VEM` evaluates the model at one topic value for a
    chunk of images) the sum is a matrix-vector product, and ``vmap`` over the topic
    values makes it one matrix product. Probabilities are floored at 1e-30 inside
    the log (a zero count contributes 0 either way).
    """

    def log_prob(self, value: Array) -> Array:
        value = jnp.asarray(value, jnp.result_type(float))
        log_p = jnp.log(jnp.maximum(self.probs, 1e-30))
        if all(d == 1 for d in log_p.shape[:-1]):
            return value @ log_p.reshape(-1)
        return (value * log_p).sum(-1)


class TokenCategorical(dist.CategoricalProbs):
    r"""``Categorical(probs)`` whose log mass at one probability vector is a lookup.

    When every token shares one probability vector ``probs`` [V] (as when
    :class:`~jaxannot.inference.VEM` evaluates the model at one topic value for a
    chunk of images) :math:`\log p_{x}` is read from the vector of logs by the
    token ids, one element per token; ``vmap`` over the topic values makes it one
    gather of a row of :math:`\log\beta^\top` per token. numpyro's
    ``Categorical`` broadcasts the vector to every token first, which makes the
    same gather slower on CPU (issue 46). With a batch of probability vectors
    it is numpyro's ``Categorical``. Ids must lie in ``[0, V)``; an id outside
    is clipped.
    """

    @validate_sample
    def log_prob(self, value: Array) -> Array:
        if jnp.ndim(self.probs) > 1:
            return super().log_prob(value)
        return self.logits.at[value].get(mode="clip")


# ---------------------------------------------------------------- declaration
def mixture_of_unigrams(
    counts_by_view: Sequence[jax.Array] | None = None,
    *,
    num_topics: int,
    vocab_sizes: Sequence[int] | None = None,
    num_images: int | None = None,
    lengths_by_view: Sequence[jax.Array] | None = None,
    max_length: int | None = None,
    pi_concentration: float = 1.0,
    beta_concentration: float = 1.1,
    marginalize: bool = False,
) -> None:
    r"""numpyro model of the multimodal mixture of unigrams (see module docstring).

    With ``counts_by_view`` given, every image has an explicit topic site ``"z"``
    inside ``plate("image")`` and one observed ``Multinomial`` count vector per view
    (sites ``"counts_v"``), read through the plate with ``numpyro.subsample`` so
    :class:`~jaxannot.inference.VEM` can process the images in chunks; its
    closed-form M-step is :func:`closed_form_m_step` (``VEM(..., m_step=...)``).
    ``marginalize=True`` sums ``z`` out with ``logsumexp`` in a ``factor`` site
    (``"z_marginal"``, without the multinomial coefficients) for NUTS/HMC. Without
    counts the model is generative: it samples ``z`` and the counts with lengths
    ``lengths_by_view`` (``max_length`` bounds them, as numpyro's multinomial
    sampler needs a static maximum).

    Parameters
    ----------
    counts_by_view : sequence of Float[Array, "images vocab_v"] or None
    num_topics : int
    vocab_sizes : sequence of int (default: from the counts)
    num_images : int, only for generation
    lengths_by_view : sequence of Int[Array, "images"], only for generation
    max_length : int, only for generation
    pi_concentration, beta_concentration : float
        Symmetric Dirichlet priors on :math:`\pi` and every :math:`\beta^v_k`.
    marginalize : bool
        Sum the topic out (a ``factor``) instead of declaring the site ``"z"``.

    Examples
    --------
    >>> import numpyro
    >>> from numpyro.infer import Predictive
    >>> pred = Predictive(mixture_of_unigrams, num_samples=1)
    >>> out = pred(jax.random.key(0), num_topics=2, vocab_sizes=(3,), num_images=4,
    ...            lengths_by_view=(jnp.full(4, 5),), max_length=5)
    >>> out["counts_0"].shape
    (1, 4, 3)
    """
    if vocab_sizes is None:
        if counts_by_view is None:
            raise ValueError("give counts_by_view or vocab_sizes")
        vocab_sizes = tuple(c.shape[1] for c in counts_by_view)
    pi, betas = _prior(num_topics, vocab_sizes, pi_concentration, beta_concentration)
    if counts_by_view is None:
        if num_images is None or lengths_by_view is None:
            raise ValueError("generation needs num_images and lengths_by_view")
        counts_by_view = (None,) * len(vocab_sizes)
    else:
        num_images = counts_by_view[0].shape[0]
    with numpyro.plate("image", num_images):
        if marginalize:
            log_lik = sum(
                c @ jnp.log(b).T for c, b in zip(counts_by_view, betas, strict=True)
            )
            numpyro.factor("z_marginal", logsumexp(jnp.log(pi) + log_lik, axis=-1))
            return
        z = numpyro.sample("z", dist.Categorical(pi))
        for v, (beta, counts) in enumerate(zip(betas, counts_by_view, strict=True)):
            if counts is None:
                obs, length = None, lengths_by_view[v]
            else:
                obs = numpyro.subsample(counts, event_dim=1)
                length = obs.sum(-1)
            numpyro.sample(
                f"counts_{v}",
                BagOfWords(beta[z], length, total_count_max=max_length),
                obs=obs,
            )


_PI_FLOOR = 1e-30


def _prior(num_topics, vocab_sizes, pi_concentration, beta_concentration):
    """The shared sites of both declarations: ``pi ~ Dir(pi_concentration)`` and, per
    topic, ``beta_v ~ Dir(beta_concentration)`` for each view ``v``."""
    pi = numpyro.sample("pi", dist.Dirichlet(jnp.full(num_topics, pi_concentration)))
    betas = []
    with numpyro.plate("topic", num_topics):
        for v, size in enumerate(vocab_sizes):
            conc = jnp.full(size, beta_concentration)
            betas.append(numpyro.sample(f"beta_{v}", dist.Dirichlet(conc)))
    return pi, betas


def closed_form_m_step(
    phi: jax.Array,
    counts_by_view: Sequence[jax.Array],
    *,
    pi_concentration: float = 1.0,
    beta_concentration: float = 1.1,
    **_: Any,
) -> dict:
    r"""The MAP M-step of :func:`mixture_of_unigrams` given posteriors ``phi``.

    :math:`\pi_k \propto \sum_d\phi_{dk} + a - 1`,
    :math:`\beta^v_{kw} \propto \sum_d\phi_{dk}n^v_{dw} + b - 1`: the maximum of
    the expected complete log joint (pass it as
    ``VEM(mixture_of_unigrams, "z", m_step=closed_form_m_step)``).

    Returns
    -------
    dict
        ``{"pi": [K], "beta_v": [K, V_v]}`` (constrained values).
    """
    stats = [phi.T @ c for c in counts_by_view]
    return _map_values(phi.sum(0), stats, pi_concentration, beta_concentration)


def _map_values(topic_mass, stats_by_view, pi_concentration, beta_concentration):
    """``pi`` and ``beta_v`` from the expected topic counts ``topic_mass`` [K] and
    topic-word counts ``stats_by_view`` ([K, V_v] each) plus the prior counts."""
    pi = topic_mass + (pi_concentration - 1.0)
    # a topic that lost every image has pi_k = 0 when a = 1; keep it a hair above 0 so
    # the Dirichlet log density (log 0 * 0 in numpyro) stays finite
    out = {"pi": jnp.maximum(jnp.exp(jnp.log(pi) - jnp.log(pi.sum())), _PI_FLOOR)}
    for v, s in enumerate(stats_by_view):
        beta = s + (beta_concentration - 1.0)
        log_beta = jnp.log(beta) - jnp.log(beta.sum(-1, keepdims=True))
        out[f"beta_{v}"] = jnp.exp(log_beta)
    return out


# -------------------------------------------------------- padded token ids
def mixture_of_unigrams_tokens(
    tokens_by_view: Sequence[jax.Array],
    *,
    num_topics: int,
    vocab_sizes: Sequence[int],
    pi_concentration: float = 1.0,
    beta_concentration: float = 1.1,
) -> None:
    r"""The mixture of unigrams on padded token ids (for corpora too large for counts).

    The generative process of :func:`mixture_of_unigrams` with every token declared:
    inside ``plate("image")`` (dim -2) the topic ``"z"``, then per view ``v`` a
    ``plate("token_v")`` (dim -1) over the image's token slots and the observed
    ``Categorical(beta_v[z])`` site ``"tokens_v"`` (a :class:`TokenCategorical`,
    whose log mass is a lookup), masked where the id is ``-1``
    (padding). The ids are read through the image plate
    (``numpyro.subsample``), so :class:`~jaxannot.inference.VEM` streams the images
    in chunks; its closed-form M-step is :func:`closed_form_m_step_tokens`
    (``VEM(..., m_step=...)``). Memory is O(images x tokens) for the ids,
    never a dense images x vocabulary matrix. Its log joint equals that of
    :func:`mixture_of_unigrams` on the images' count vectors.

    Parameters
    ----------
    tokens_by_view : sequence of Int[Array, "images max_tokens_v"]
        Token ids in ``[0, vocab_sizes[v])``, ``-1`` for padding.
    num_topics : int
    vocab_sizes : sequence of int
        Vocabulary size of every view (static: not read from the ids).
    pi_concentration, beta_concentration : float
        As in :func:`mixture_of_unigrams`.
    """
    if len(vocab_sizes) != len(tokens_by_view):
        raise ValueError(
            f"vocab_sizes has {len(vocab_sizes)} entries for "
            f"{len(tokens_by_view)} views of tokens"
        )
    pi, betas = _prior(num_topics, vocab_sizes, pi_concentration, beta_concentration)
    with numpyro.plate("image", tokens_by_view[0].shape[0], dim=-2):
        z = numpyro.sample("z", dist.Categorical(pi))
        for v, (beta, tokens) in enumerate(zip(betas, tokens_by_view, strict=True)):
            ids = numpyro.subsample(tokens, event_dim=0)
            with numpyro.plate(f"token_{v}", ids.shape[-1], dim=-1):
                numpyro.sample(
                    f"tokens_{v}",
                    TokenCategorical(beta[z]).mask(ids >= 0),
                    obs=jnp.maximum(ids, 0),
                )


#: Images per block of :func:`token_statistics` (a block's work: block x tokens x
#: topics floats, 2 MB at 25 tokens and 20 topics: it stays in cache).
STATISTICS_BLOCK = 1024


def token_statistics(phi: jax.Array, tokens: jax.Array, vocab_size: int) -> jax.Array:
    r"""Expected topic-word counts :math:`\sum_d \phi_{dk} n_{dw}` from token ids.

    A ``fori_loop`` over blocks of :data:`STATISTICS_BLOCK` images, each a
    scatter-add of its tokens' posteriors into the rows of their words: the
    posteriors are read once and the work memory is one block's, whatever the
    number of images. Padding (and the rows of the last block already counted: it
    is shifted back to end at the last image) is sent to the row ``vocab_size``,
    past the end, and dropped by the scatter, so no token's weight is multiplied
    by a mask.

    Parameters
    ----------
    phi : Float[Array, "images topics"]
    tokens : Int[Array, "images max_tokens"]
        ``-1`` for padding.
    vocab_size : int

    Returns
    -------
    Float[Array, "topics vocab"]
    """
    n, topics = phi.shape
    size = min(STATISTICS_BLOCK, n)

    def block(i, stats):
        start = jnp.minimum(i * size, n - size)
        ids = lax.dynamic_slice_in_dim(tokens, start, size)
        fresh = start + jnp.arange(size) >= i * size
        rows = jnp.where((ids >= 0) & fresh[:, None], ids, vocab_size).reshape(-1)
        weights = lax.dynamic_slice_in_dim(phi, start, size)
        per_token = jnp.broadcast_to(weights[:, None, :], ids.shape + (topics,))
        return stats.at[rows].add(per_token.reshape(-1, topics), mode="drop")

    stats = jnp.zeros((vocab_size, topics), phi.dtype)
    return lax.fori_loop(0, -(-n // size), block, stats).T


def closed_form_m_step_tokens(
    phi: jax.Array,
    tokens_by_view: Sequence[jax.Array],
    *,
    vocab_sizes: Sequence[int],
    pi_concentration: float = 1.0,
    beta_concentration: float = 1.1,
    **_: Any,
) -> dict:
    """The MAP M-step of :func:`mixture_of_unigrams_tokens` (that of
    :func:`closed_form_m_step`, the counts gathered by :func:`token_statistics`)."""
    stats = [
        token_statistics(phi, tokens, size)
        for tokens, size in zip(tokens_by_view, vocab_sizes, strict=True)
    ]
    return _map_values(phi.sum(0), stats, pi_concentration, beta_concentration)


def predict_words(phi: jax.Array, log_beta_text: jax.Array) -> jax.Array:
    """Annotation scores ``p(w | d) = Σ_k φ_dk β^text_kw``, [images, words]."""
    return phi @ jnp.exp(log_beta_text)
