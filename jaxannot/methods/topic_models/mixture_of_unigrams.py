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
from jax import custom_batching, lax
from jax.scipy.special import logsumexp
from numpyro.distributions import constraints
from numpyro.distributions.util import validate_sample

from jaxannot.inference.vem.summed import SummedMStep

if TYPE_CHECKING:
    from jaxannot.types import Array

__all__ = [
    "BagOfWords",
    "TokenBag",
    "bag_log_mass",
    "UNROLLED_SLOTS",
    "MixtureParams",
    "mixture_of_unigrams",
    "closed_form_m_step",
    "mixture_of_unigrams_tokens",
    "closed_form_m_step_tokens",
    "token_sums",
    "map_from_sums",
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


class TokenBag(dist.Distribution):
    r"""A bag of ``length`` i.i.d. ``Categorical(probs)`` tokens observed as padded
    token ids: the value is ``[..., length]`` ids in ``[0, V)``, ``-1`` for an
    empty slot (padding).

    Its log mass is :math:`\sum_l \log p_{x_l}` over the filled slots (the token
    sequence's likelihood, as :class:`BagOfWords` on the counts); a padded slot
    adds 0, so the padding needs no mask. When every image shares one probability
    vector (as when :class:`~jaxannot.inference.VEM` evaluates the model at one
    topic value for a chunk of images) it is a lookup per slot; ``vmap`` over the
    topic values makes it one gather of a row of :math:`\log\beta^\top` (all the
    topics' log masses of the word) per slot, the slots summed in the same loop
    (:func:`bag_log_mass`): no [images, slots, topics] array is formed, which
    made the token-plate declaration's E-step 5x slower on CPU (issue 46).
    Probabilities are floored at 1e-30 inside the log. Sampling fills every slot.

    Parameters
    ----------
    probs : Float[Array, "... V"]
    length : int
        Slots per bag (the padded length).
    """

    arg_constraints = {"probs": constraints.simplex}
    pytree_data_fields = ("probs",)
    pytree_aux_fields = ("length",)

    def __init__(self, probs: Array, length: int, *, validate_args: bool | None = None):
        self.probs = jnp.asarray(probs)
        self.length = int(length)
        super().__init__(
            batch_shape=self.probs.shape[:-1],
            event_shape=(self.length,),
            validate_args=validate_args,
        )

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self) -> constraints.Constraint:
        interval = constraints.integer_interval(-1, self.probs.shape[-1] - 1)
        return constraints.independent(interval, 1)

    def sample(self, key: jax.Array, sample_shape: tuple = ()) -> Array:
        shape = sample_shape + self.batch_shape + self.event_shape
        logits = jnp.log(jnp.maximum(self.probs, 1e-30))[..., None, :]
        return jax.random.categorical(key, logits, shape=shape)

    @validate_sample
    def log_prob(self, value: Array) -> Array:
        log_p = jnp.log(jnp.maximum(self.probs, 1e-30))
        if log_p.ndim == 1:
            return bag_log_mass(log_p, value)
        filled = value >= 0
        ids = jnp.where(filled, value, 0)[..., None]
        log_p = jnp.broadcast_to(log_p[..., None, :], ids.shape[:-1] + log_p.shape[-1:])
        per_slot = jnp.take_along_axis(log_p, ids, -1)[..., 0]
        return jnp.where(filled, per_slot, 0.0).sum(-1)


#: Slots up to which :func:`bag_log_mass` sums one gather per slot in one loop;
#: longer bags gather all slots, then sum (a program that grows with the length).
UNROLLED_SLOTS = 64


def _slot_sum(table: Array, ids: Array) -> Array:
    """``table[ids[..., l]]`` summed over the slots ``l``; ``table`` [V + 1, ...]
    has a row of zeros last, where padding (``-1``) is sent."""
    rows = jnp.where(ids >= 0, ids, table.shape[0] - 1)
    if ids.shape[-1] > UNROLLED_SLOTS:
        return table.at[rows].get(mode="clip").sum(-1 - (table.ndim - 1))
    total = table.at[rows[..., 0]].get(mode="clip")
    for slot in range(1, ids.shape[-1]):
        total = total + table.at[rows[..., slot]].get(mode="clip")
    return total


def _bag_log_mass(log_p: Array, ids: Array) -> Array:
    return _slot_sum(jnp.concatenate([log_p, jnp.zeros(1, log_p.dtype)]), ids)


@custom_batching.custom_vmap
def _bag_log_mass_rows(log_p: Array, ids: Array) -> Array:
    return _bag_log_mass(log_p, ids)


@_bag_log_mass_rows.def_vmap
def _bag_log_mass_rule(axis_size, in_batched, log_p, ids):
    """Batched over the probability vectors alone (the topics): one row gather of
    the transposed table per slot, the topics last, then moved first."""
    p_batched, ids_batched = in_batched
    if p_batched and not ids_batched:
        zeros = jnp.zeros((1, axis_size), log_p.dtype)
        table = jnp.concatenate([log_p.T, zeros])  # [V + 1, topics]
        return jnp.moveaxis(_slot_sum(table, ids), -1, 0), True
    axes = (0 if p_batched else None, 0 if ids_batched else None)
    return jax.vmap(_bag_log_mass, in_axes=axes)(log_p, ids), True


@jax.custom_jvp
def bag_log_mass(log_p: Array, ids: Array) -> Array:
    r""":math:`\sum_l \log p_{x_l}` over the filled slots of padded ids.

    Under ``vmap`` over ``log_p`` alone (the topics of a mixture) it gathers rows
    of the transposed table (a custom batching rule); its derivative in ``log_p``
    is the plain lookup's.

    Parameters
    ----------
    log_p : Float[Array, "V"]
    ids : Int[Array, "... slots"]
        Ids in ``[0, V)``, ``-1`` for padding (an id past ``V`` counts 0 here;
        :class:`TokenBag`'s support check refuses it).

    Returns
    -------
    Float[Array, "..."]
    """
    return _bag_log_mass_rows(log_p, ids)


@bag_log_mass.defjvp
def _bag_log_mass_jvp(primals, tangents):
    log_p, ids = primals
    return bag_log_mass(log_p, ids), _bag_log_mass(tangents[0], ids)


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
    inside ``plate("image")`` the topic ``"z"``, then per view ``v`` the observed
    site ``"tokens_v"``, the image's padded ids as one :class:`TokenBag` of
    ``Categorical(beta_v[z])`` tokens (``-1``, padding, counts 0). The ids are read
    through the image plate (``numpyro.subsample``), so
    :class:`~jaxannot.inference.VEM` streams the images in chunks; its closed-form
    M-step is :func:`closed_form_m_step_tokens` (``VEM(..., m_step=...)``). Memory
    is O(images x tokens) for the ids, never a dense images x vocabulary matrix.
    Its log joint equals that of :func:`mixture_of_unigrams` on the images' count
    vectors.

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
    with numpyro.plate("image", tokens_by_view[0].shape[0]):
        z = numpyro.sample("z", dist.Categorical(pi))
        for v, (beta, tokens) in enumerate(zip(betas, tokens_by_view, strict=True)):
            ids = numpyro.subsample(tokens, event_dim=1)
            numpyro.sample(f"tokens_{v}", TokenBag(beta[z], ids.shape[-1]), obs=ids)


#: Images per block of :func:`token_statistics` (a block's work memory: its ids
#: and posteriors, 0.5 MB at 25 tokens and 20 topics).
STATISTICS_BLOCK = 4096


def token_statistics(phi: jax.Array, tokens: jax.Array, vocab_size: int) -> jax.Array:
    r"""Expected topic-word counts :math:`\sum_d \phi_{dk} n_{dw}` from token ids.

    A ``fori_loop`` over blocks of :data:`STATISTICS_BLOCK` images, each a
    scatter-add of the block's posteriors into the rows of the words of each
    token slot in turn (a loop: unrolled, the scatters compile 1.3 s longer on 2
    CPU cores for no measurable gain): the posteriors are read once and never
    copied per token (one scatter of a [block x tokens, topics] copy was 1.5x
    slower on CPU), and the work memory is one block's, whatever the number of
    images. Padding, an id past the vocabulary, and
    the rows of the last block already counted (it is shifted back to end at the
    last image) are sent to an extra row ``vocab_size``, sliced off at the end, so
    no token's weight is multiplied by a mask and every index is in bounds: the
    scatter skips its bounds checks (``mode="promise_in_bounds"``, twice as fast
    on CPU as dropping the indices past the end).

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
        counted = (ids >= 0) & (ids < vocab_size) & fresh[:, None]
        rows = jnp.where(counted, ids, vocab_size)
        weights = lax.dynamic_slice_in_dim(phi, start, size)

        def slot(j, stats):
            at = lax.dynamic_index_in_dim(rows, j, 1, keepdims=False)
            return stats.at[at].add(weights, mode="promise_in_bounds")

        return lax.fori_loop(0, ids.shape[1], slot, stats)

    stats = jnp.zeros((vocab_size + 1, topics), phi.dtype)
    return lax.fori_loop(0, -(-n // size), block, stats)[:vocab_size].T


def token_sums(
    phi: jax.Array,
    tokens_by_view: Sequence[jax.Array],
    *,
    vocab_sizes: Sequence[int],
    **_: Any,
) -> tuple[jax.Array, tuple[jax.Array, ...]]:
    r"""The sums over images the M-step of :func:`mixture_of_unigrams_tokens`
    reads: the expected topic counts :math:`\sum_d \phi_{dk}` and, per view, the
    topic-word counts :math:`\sum_d \phi_{dk} n^v_{dw}` (:func:`token_statistics`).

    Parameters
    ----------
    phi : Float[Array, "images topics"]
    tokens_by_view : sequence of Int[Array, "images max_tokens_v"]
    vocab_sizes : sequence of int

    Returns
    -------
    tuple of (Float[Array, "topics"], tuple of Float[Array, "topics vocab_v"])
    """
    stats = tuple(
        token_statistics(phi, tokens, size)
        for tokens, size in zip(tokens_by_view, vocab_sizes, strict=True)
    )
    return phi.sum(0), stats


def map_from_sums(
    sums: tuple[jax.Array, Sequence[jax.Array]],
    *,
    pi_concentration: float = 1.0,
    beta_concentration: float = 1.1,
    **_: Any,
) -> dict:
    """The MAP values of :func:`closed_form_m_step` from :func:`token_sums`.

    Parameters
    ----------
    sums : tuple
        :func:`token_sums`'s answer.
    pi_concentration, beta_concentration : float
        The priors' concentrations.

    Returns
    -------
    dict
        ``{"pi": [K], "beta_v": [K, V_v]}`` (constrained values).
    """
    mass, stats = sums
    return _map_values(mass, stats, pi_concentration, beta_concentration)


#: The MAP M-step of :func:`mixture_of_unigrams_tokens` (that of
#: :func:`closed_form_m_step`, the counts gathered by :func:`token_statistics`):
#: ``closed_form_m_step_tokens(phi, tokens_by_view, vocab_sizes=...)``. A
#: :class:`~jaxannot.inference.vem.summed.SummedMStep`, so a fit split over
#: devices sums each device's images there.
closed_form_m_step_tokens = SummedMStep(token_sums, map_from_sums)


def predict_words(phi: jax.Array, log_beta_text: jax.Array) -> jax.Array:
    """Annotation scores ``p(w | d) = Σ_k φ_dk β^text_kw``, [images, words]."""
    return phi @ jnp.exp(log_beta_text)
