r"""MAP-EM for the multimodal mixture of unigrams, derived by hand (the fast path).

The E-step is :math:`\phi_{dk} \propto \exp a_{dk}` (:func:`~jaxannot.models.
mixture_of_unigrams.linear_terms`, one image, vmapped), the M-step
:math:`\pi_k \propto \sum_d\phi_{dk} + a - 1`,
:math:`\beta^v_{kw} \propto \sum_d \phi_{dk} n^v_{dw} + b - 1`
(:func:`~jaxannot.models.mixture_of_unigrams.m_step`). EM never decreases the log joint
(:func:`~jaxannot.models.mixture_of_unigrams.log_joint`). :func:`fit_em` runs it on
dense count matrices; :func:`fit_em_tokens` on padded token ids in chunks (a million
images in bounded memory). The library's annotators fit the same model through the
generic :class:`~jaxannot.inference.VEM`; this module is its reference and the fastest
path for very large corpora.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

import jax
import jax.numpy as jnp
from jax.scipy.special import logsumexp

from jaxannot.inference import sharding
from jaxannot.inference.em import run_em, run_em_until_converged
from jaxannot.models.mixture_of_unigrams import (
    MixtureParams,
    check_priors,
    init_params,
    linear_terms,
    log_prior,
    m_step,
)
from jaxannot.types import ArrayLike

__all__ = [
    "MixturePrior",
    "MixtureEMState",
    "MixtureEMInfo",
    "build_em_kernel",
    "fit_em",
    "image_log_joint_tokens",
    "fit_em_tokens",
]


class MixturePrior(NamedTuple):
    r"""The symmetric Dirichlet hyper-priors of the mixture of unigrams.

    .. math::
        \pi \sim \mathrm{Dir}(a 1_K),\qquad
        \beta^v_k \sim \mathrm{Dir}(b 1_{V_v}).

    The MAP M-step sets :math:`\pi_k \propto \sum_d \phi_{dk} + a - 1` and
    :math:`\beta^v_{kw} \propto \sum_d \phi_{dk} n^v_{dw} + b - 1`, so a finite MAP
    needs :math:`a \ge 1` and :math:`b > 1`.

    Attributes
    ----------
    pi_concentration : float
        :math:`a`, the concentration of the topic weights, >= 1; 1 (the default) is
        a flat prior, larger values pull the weights towards uniform.
    beta_concentration : float
        :math:`b`, the concentration of every topic's word distribution in every
        view, > 1 (keeps :math:`\log\beta` finite); :math:`b - 1` is an additive
        smoothing count (the default 1.1: 0.1 per word).
    """

    pi_concentration: float = 1.0
    beta_concentration: float = 1.1

    def check(self) -> None:
        """Raise ``ValueError`` unless the MAP is finite (a >= 1, b > 1)."""
        check_priors(self.pi_concentration, self.beta_concentration)


class MixtureEMState(NamedTuple):
    params: MixtureParams


class MixtureEMInfo(NamedTuple):
    """``objective``: the log joint at the parameters entering the step."""

    objective: jax.Array


@functools.cache
def build_em_kernel():
    """The MAP-EM step ``step(rng_key, state, data) -> (state, info)``.

    ``data = (counts_by_view, pi_concentration, beta_concentration)``. Cached, so
    every fit reuses one function object and the driver compiles once per shape.
    """

    def step(rng_key, state: MixtureEMState, data):
        del rng_key
        counts, a_conc, b_conc = data
        a = linear_terms(state.params, counts)
        objective = logsumexp(a, axis=-1).sum() + log_prior(
            state.params, a_conc, b_conc
        )
        phi = jax.nn.softmax(a, axis=-1)
        return (
            MixtureEMState(m_step(phi, counts, a_conc, b_conc)),
            MixtureEMInfo(objective),
        )

    return step


def _check(counts_by_view, num_topics, prior: MixturePrior):
    if num_topics < 1:
        raise ValueError(f"num_topics must be >= 1, got {num_topics}")
    prior.check()
    counts = tuple(jnp.asarray(c, dtype=jnp.float32) for c in counts_by_view)
    if not counts:
        raise ValueError("need at least one view of counts")
    return counts


def fit_em(
    rng_key: jax.Array,
    counts_by_view: Sequence,
    num_topics: int,
    *,
    prior: MixturePrior = MixturePrior(),  # noqa: B008 (immutable)
    num_iterations: int = 100,
    tolerance: float = 0.0,
) -> tuple[MixtureParams, np.ndarray]:
    """Fit the mixture by MAP-EM (jit-compiled once per shape).

    Parameters
    ----------
    rng_key : PRNGKey
    counts_by_view : sequence of [images, vocab_v] count matrices
    num_topics : int
    prior : MixturePrior
        The Dirichlet concentrations a (on π) and b (on every β^v_k).
    num_iterations : int
        Iterations (the maximum when ``tolerance > 0``).
    tolerance : float
        Relative objective change to stop at (0: run all iterations).

    Returns
    -------
    params : MixtureParams
    objective : np.ndarray
        Log joint per iteration (non-decreasing).
    """
    counts = _check(counts_by_view, num_topics, prior)
    init_key, run_key = jax.random.split(rng_key)
    a_conc = jnp.float32(prior.pi_concentration)
    b_conc = jnp.float32(prior.beta_concentration)
    params = init_params(init_key, counts, num_topics, a_conc, b_conc)
    data = (counts, a_conc, b_conc)
    if tolerance > 0:
        state, trace = run_em_until_converged(
            run_key,
            MixtureEMState(params),
            data,
            jnp.float32(tolerance),
            step=build_em_kernel(),
            max_iterations=num_iterations,
        )
        objective = np.asarray(trace.objective)[: int(trace.num_iterations)]
    else:
        state, info = run_em(
            run_key,
            MixtureEMState(params),
            data,
            step=build_em_kernel(),
            num_iterations=num_iterations,
        )
        objective = np.asarray(info.objective)
    return state.params, objective


# ------------------------------------------------- padded token ids (large corpora)
def image_log_joint_tokens(log_pi, log_beta, tokens) -> jax.Array:
    """:math:`a_k` of one image from padded token ids (``-1`` = padding), one view.

    Parameters
    ----------
    log_pi : Float[Array, "topics"]
    log_beta : Float[Array, "topics vocab"]
    tokens : Int[Array, "max_tokens"]
    """
    valid = tokens >= 0
    gathered = log_beta[:, jnp.where(valid, tokens, 0)]  # [K, L]
    return log_pi + jnp.where(valid[None, :], gathered, 0.0).sum(-1)


def _chunk_stats(log_pi, log_beta, tokens, row_mask):
    """E-step of one chunk: log-likelihood and sufficient statistics."""
    a = jax.vmap(image_log_joint_tokens, in_axes=(None, None, 0))(
        log_pi, log_beta, tokens
    )
    ll = jnp.where(row_mask, logsumexp(a, axis=-1), 0.0).sum()
    phi = jnp.where(row_mask[:, None], jax.nn.softmax(a, axis=-1), 0.0)
    valid = tokens >= 0
    flat_ids = jnp.where(valid, tokens, 0).reshape(-1)
    flat_phi = (phi[:, None, :] * valid[:, :, None]).reshape(-1, phi.shape[1])
    beta_stats = jax.ops.segment_sum(flat_phi, flat_ids, log_beta.shape[1])  # [V, K]
    return ll, phi.sum(0), beta_stats.T


@functools.partial(jax.jit, static_argnames=("num_iterations",))
def _fit_tokens(log_pi, log_beta, chunks, row_masks, a_conc, b_conc, num_iterations):
    def iteration(carry, _):
        log_pi, log_beta = carry

        def over_chunks(acc, xs):
            tokens, mask = xs
            ll, pi_s, beta_s = _chunk_stats(log_pi, log_beta, tokens, mask)
            return (acc[0] + ll, acc[1] + pi_s, acc[2] + beta_s), None

        zero = (jnp.float32(0.0), jnp.zeros_like(log_pi), jnp.zeros_like(log_beta))
        (ll, pi_s, beta_s), _ = jax.lax.scan(over_chunks, zero, (chunks, row_masks))
        params = MixtureParams(log_pi, (log_beta,))
        objective = ll + log_prior(params, a_conc, b_conc)
        pi = pi_s + (a_conc - 1.0)
        beta = beta_s + (b_conc - 1.0)
        new = (
            jnp.log(pi) - jnp.log(pi.sum()),
            jnp.log(beta) - jnp.log(beta.sum(-1, keepdims=True)),
        )
        return new, objective

    (log_pi, log_beta), objective = jax.lax.scan(
        iteration, (log_pi, log_beta), None, length=num_iterations
    )
    return log_pi, log_beta, objective


def fit_em_tokens(
    rng_key: jax.Array,
    tokens: ArrayLike,
    vocab_size: int,
    num_topics: int,
    *,
    prior: MixturePrior = MixturePrior(),  # noqa: B008 (immutable)
    chunk_size: int = 8192,
    num_iterations: int = 10,
    devices: Sequence[jax.Device] | None = None,
) -> tuple[MixtureParams, np.ndarray]:
    """MAP-EM for one bag view given as padded token ids, streamed in chunks.

    Memory is O(images x max_tokens) for the ids plus O(chunk_size x max_tokens x K)
    for one chunk's E-step — never a dense images x vocab matrix — so a million
    images fit on a laptop. The E-step of every chunk is vmapped over its images;
    statistics are accumulated with ``segment_sum`` in a ``lax.scan`` over chunks.

    Parameters
    ----------
    rng_key : PRNGKey
    tokens : Int[Array, "images max_tokens"]
        Token ids, ``-1`` for padding.
    vocab_size, num_topics : int
    prior : MixturePrior
        As in :func:`fit_em`.
    chunk_size : int
        Images per E-step chunk.
    num_iterations : int
    devices : sequence of jax.Device, optional
        Split every chunk's images over these devices (data parallel; e.g.
        ``jax.devices()``): the chunk is rounded up to a multiple of the device
        count, padded rows masked out, the parameters replicated and the chunk's
        statistics reduced across devices. Default: the default device.

    Returns
    -------
    params : MixtureParams (one view)
    objective : np.ndarray
        Log joint per iteration (non-decreasing).
    """
    _check((np.zeros((1, 1)),), num_topics, prior)
    tokens = np.asarray(tokens, np.int32)
    if tokens.ndim != 2:
        raise ValueError(f"tokens must be [images, max_tokens], got {tokens.shape}")
    if tokens.max(initial=-1) >= vocab_size:
        raise ValueError(f"token id {tokens.max()} >= vocab_size {vocab_size}")
    n, length = tokens.shape
    mesh = None if devices is None or len(devices) < 2 else sharding.image_mesh(devices)
    if mesh is not None:
        chunk_size = sharding.pad_images(min(chunk_size, n), mesh.size)
    num_chunks = -(-n // chunk_size)
    pad = num_chunks * chunk_size - n
    chunks = np.concatenate([tokens, np.full((pad, length), -1, np.int32)])
    masks = np.arange(num_chunks * chunk_size) < n
    chunks = chunks.reshape(num_chunks, chunk_size, length)
    masks = masks.reshape(num_chunks, chunk_size)
    if mesh is None:
        chunks, masks = jnp.asarray(chunks), jnp.asarray(masks)
    else:  # the images of every chunk (axis 1) split over the devices
        split = jax.sharding.NamedSharding(
            mesh, jax.sharding.PartitionSpec(None, "images")
        )
        chunks, masks = jax.device_put((chunks, masks), split)
    # random start: β rows near uniform (exp of small Gaussian noise), π uniform
    noise = 0.5 * jax.random.normal(rng_key, (num_topics, vocab_size))
    log_beta = noise - logsumexp(noise, axis=-1, keepdims=True)
    log_pi = jnp.full(num_topics, -jnp.log(num_topics))
    log_pi, log_beta, objective = _fit_tokens(
        log_pi,
        log_beta,
        chunks,
        masks,
        jnp.float32(prior.pi_concentration),
        jnp.float32(prior.beta_concentration),
        num_iterations,
    )
    return MixtureParams(log_pi, (log_beta,)), np.asarray(objective)
