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

The hand-derived MAP-EM fit is :mod:`jaxannot.models.mixture_em`: the E-step is the
softmax above (one image, vmapped), the M-step
:math:`\pi_k \propto \sum_d\phi_{dk} + a - 1`,
:math:`\beta^v_{kw} \propto \sum_d \phi_{dk} n^v_{dw} + b - 1`. It maximizes the log
joint :func:`log_joint`, which equals numpyro's ``log_density`` of the declaration
:func:`mixture_of_unigrams` at the same parameters; EM never decreases it.

References
----------
K. Nigam, A. McCallum, S. Thrun, T. Mitchell. Text classification from labeled and
unlabeled documents using EM. Machine Learning 39, 2000.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from jax.scipy.special import gammaln, logsumexp

from jaxannot.inference.vem import register_closed_form

__all__ = [
    "BagOfWords",
    "MixtureParams",
    "mixture_of_unigrams",
    "closed_form_m_step",
    "check_priors",
    "image_log_joint",
    "linear_terms",
    "log_prior",
    "log_joint",
    "posterior",
    "m_step",
    "init_params",
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

    def log_prob(self, value):
        value = jnp.asarray(value, jnp.result_type(float))
        log_p = jnp.log(jnp.maximum(self.probs, 1e-30))
        if all(d == 1 for d in log_p.shape[:-1]):
            return value @ log_p.reshape(-1)
        return (value * log_p).sum(-1)


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
    closed-form M-step is registered (:func:`closed_form_m_step`).
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
    pi = numpyro.sample("pi", dist.Dirichlet(jnp.full(num_topics, pi_concentration)))
    betas = []
    with numpyro.plate("topic", num_topics):
        for v, size in enumerate(vocab_sizes):
            conc = jnp.full(size, beta_concentration)
            betas.append(numpyro.sample(f"beta_{v}", dist.Dirichlet(conc)))
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


def closed_form_m_step(
    phi: jax.Array,
    counts_by_view: Sequence[jax.Array],
    *,
    pi_concentration: float = 1.0,
    beta_concentration: float = 1.1,
    **_,
) -> dict:
    r"""The MAP M-step of :func:`mixture_of_unigrams` given posteriors ``phi``.

    :math:`\pi_k \propto \sum_d\phi_{dk} + a - 1`,
    :math:`\beta^v_{kw} \propto \sum_d\phi_{dk}n^v_{dw} + b - 1`: the maximum of
    the expected complete log joint (registered with
    :func:`jaxannot.inference.vem.register_closed_form`).

    Returns
    -------
    dict
        ``{"pi": [K], "beta_v": [K, V_v]}`` (constrained values).
    """
    params = m_step(phi, counts_by_view, pi_concentration, beta_concentration)
    # a topic that lost every image has pi_k = 0 when a = 1; keep it a hair above 0 so
    # the Dirichlet log density (log 0 * 0 in numpyro) stays finite
    out = {"pi": jnp.maximum(jnp.exp(params.log_pi), _PI_FLOOR)}
    out.update({f"beta_{v}": jnp.exp(b) for v, b in enumerate(params.log_betas)})
    return out


register_closed_form(mixture_of_unigrams, closed_form_m_step)


# ------------------------------------------------------------------ fast path
def image_log_joint(params: MixtureParams, counts: tuple) -> jax.Array:
    r"""Per-topic log joint :math:`a_k` of one image: ``log_pi + Σ_v log β^v @ n^v``.

    Parameters
    ----------
    params : MixtureParams
    counts : tuple of Float[Array, "vocab_v"]
        One image's counts per view.

    Returns
    -------
    Float[Array, "topics"]
    """
    out = params.log_pi
    for log_beta, c in zip(params.log_betas, counts, strict=False):
        out = out + log_beta @ c
    return out


def linear_terms(params: MixtureParams, counts_by_view: tuple) -> jax.Array:
    """:func:`image_log_joint` vmapped over images: ``a`` of shape [images, topics]."""
    return jax.vmap(image_log_joint, in_axes=(None, 0))(params, tuple(counts_by_view))


def _dirichlet_log_prob(log_x: jax.Array, concentration) -> jax.Array:
    """Symmetric Dirichlet log density at ``exp(log_x)`` (last axis), summed."""
    size = log_x.shape[-1]
    conc = jnp.asarray(concentration, dtype=log_x.dtype)
    norm = gammaln(size * conc) - size * gammaln(conc)
    # (a - 1) log x with 0 * log 0 = 0 when a == 1
    body = jnp.where(conc == 1.0, 0.0, (conc - 1.0) * log_x).sum(-1)
    return (body + norm).sum()


def log_prior(params: MixtureParams, pi_concentration, beta_concentration) -> jax.Array:
    """Log density of the Dirichlet priors at ``params``."""
    out = _dirichlet_log_prob(params.log_pi, pi_concentration)
    for log_beta in params.log_betas:
        out = out + _dirichlet_log_prob(log_beta, beta_concentration)
    return out


def log_joint(
    params: MixtureParams,
    counts_by_view: tuple,
    pi_concentration=1.0,
    beta_concentration=1.1,
) -> jax.Array:
    """``log p(X, π, β)`` with z marginalized: what MAP-EM maximizes."""
    a = linear_terms(params, counts_by_view)
    return logsumexp(a, axis=-1).sum() + log_prior(
        params, pi_concentration, beta_concentration
    )


def posterior(params: MixtureParams, counts_by_view: tuple) -> jax.Array:
    """``φ = q(z)`` per image, [images, topics] (softmax of the linear terms)."""
    return jax.nn.softmax(linear_terms(params, counts_by_view), axis=-1)


def m_step(
    phi: jax.Array, counts_by_view: tuple, pi_concentration, beta_concentration
) -> MixtureParams:
    """MAP M-step given responsibilities ``phi`` [images, topics]."""
    pi = phi.sum(0) + (pi_concentration - 1.0)
    log_pi = jnp.log(pi) - jnp.log(pi.sum())
    log_betas = []
    for c in counts_by_view:
        stats = phi.T @ c + (beta_concentration - 1.0)
        log_betas.append(jnp.log(stats) - jnp.log(stats.sum(-1, keepdims=True)))
    return MixtureParams(log_pi, tuple(log_betas))


def init_params(
    rng_key: jax.Array,
    counts_by_view: tuple,
    num_topics: int,
    pi_concentration=1.0,
    beta_concentration=1.1,
) -> MixtureParams:
    """Random soft assignments (Dirichlet(1) per image) followed by an M-step.

    Dirichlet(1) draws are normalized Exponential(1) draws (cheaper to compile than
    ``jax.random.dirichlet``'s gamma sampler).
    """
    num_images = counts_by_view[0].shape[0]
    e = jax.random.exponential(rng_key, (num_images, num_topics))
    phi = e / e.sum(-1, keepdims=True)
    return m_step(phi, counts_by_view, pi_concentration, beta_concentration)


def check_priors(pi_concentration, beta_concentration) -> None:
    """Raise ``ValueError`` unless the priors give a finite MAP (a >= 1, b > 1)."""
    if pi_concentration < 1.0:
        raise ValueError(f"pi_concentration must be >= 1 (MAP), got {pi_concentration}")
    if beta_concentration <= 1.0:
        raise ValueError(
            f"beta_concentration must be > 1 (keeps log β finite), got "
            f"{beta_concentration}"
        )


def predict_words(phi: jax.Array, log_beta_text: jax.Array) -> jax.Array:
    """Annotation scores ``p(w | d) = Σ_k φ_dk β^text_kw``, [images, words]."""
    return phi @ jnp.exp(log_beta_text)
