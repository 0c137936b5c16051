"""The default start's posteriors of a :class:`~jaxannot.inference.vem.algorithm.VEM`
fit without a closed-form M-step, read from the observed data of each item.

- The model observes, inside the item plate, a ``Categorical`` site with as many
  categories as the local site has values (annotations of the item's class, as in
  Dawid–Skene, MACE and the multinomial annotation model): each item's majority
  vote over those observations (ties split evenly), the start of Dawid & Skene's
  own EM.
- Otherwise: k-means on the items' observed values (a ``Categorical`` observation
  as its counts per category, every column standardized): the best (smallest sum
  of squared distances) of :data:`KMEANS_STARTS` runs of k-means++ seeding
  (Arthur & Vassilvitskii 2007) and :data:`LLOYD_STEPS` Lloyd iterations, run
  together (``vmap``), each item assigned to its nearest centre.

Either is mixed with Dirichlet(1) rows at weight :data:`NOISE`, so that every value
keeps some mass and each key gives another start (``restarts``). A model with no
observed site in the plate starts from the Dirichlet(1) rows alone.

References
----------
A. P. Dawid, A. M. Skene. Maximum likelihood estimation of observer error-rates
using the EM algorithm. Applied Statistics 28, 1979.
D. Arthur, S. Vassilvitskii. k-means++: the advantages of careful seeding. SODA 2007.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

import jax
import jax.numpy as jnp
import numpyro.distributions as dist
from jax import lax
from numpyro import handlers

from jaxannot.inference.vem.declaration import trace_model
from jaxannot.inference.vem.enumeration import (
    base_distribution,
    first_value_of,
    site_in_plate,
)

if TYPE_CHECKING:
    from jaxannot.inference.vem.layout import Whole
    from jaxannot.types import Array

__all__ = ["num_uniforms", "start_posteriors"]

#: Weight of the Dirichlet(1) rows mixed into the data-driven posteriors.
NOISE = 0.1
#: Lloyd iterations after the k-means++ seeding.
LLOYD_STEPS = 10
#: Runs of k-means (seeding and Lloyd iterations) whose best is kept.
KMEANS_STARTS = 8


def num_uniforms(num_images: int, num_values: int) -> int:
    """The uniform draws :func:`start_posteriors` reads: the Dirichlet(1) rows'
    ``num_images * num_values`` and one per k-means++ centre of each run.

    Parameters
    ----------
    num_images, num_values : int
        The posteriors' shape.

    Returns
    -------
    int
        The number of draws.
    """
    return num_images * num_values + KMEANS_STARTS * num_values


def start_posteriors(
    vem: Any, whole: Whole, uniforms: Array, values: dict[str, Array], dynamic: tuple
) -> jax.Array:
    """The default start's posteriors ``[images, K]`` (module docstring), with the
    global sites at ``values`` in the model's trace.

    Every random choice reads ``uniforms`` (one draw of the start, made by the
    caller): each draw of a random-number generator is a program of its own inlined
    in the compiled start, slow to compile on CPU.

    Parameters
    ----------
    vem : VEM
        The algorithm.
    whole : Whole
        The one-device layout.
    uniforms : jax.Array [num_uniforms(images, K)]
        Uniform draws on [0, 1) of the noise and of k-means.
    values : dict
        Site -> global value.
    dynamic : tuple
        The model's array arguments.

    Returns
    -------
    jax.Array [images, K]
        The posteriors.
    """
    s = whole.setup.structure
    n, k = s.num_images, s.num_values
    e = -jnp.log1p(-uniforms[: n * k].reshape(n, k))  # Exponential(1) draws
    noise = e / e.sum(-1, keepdims=True)  # Dirichlet(1) rows
    votes, features = _observed(vem, whole, values, dynamic)
    if votes:
        counts = sum(votes)
        top = (counts >= counts.max(-1, keepdims=True)).astype(noise.dtype)
        guess = top / top.sum(-1, keepdims=True)
    elif features:
        seeds = uniforms[n * k :].reshape(KMEANS_STARTS, k)
        guess = _kmeans(seeds, _standardized(features), k)
    else:
        return noise
    return (1.0 - NOISE) * guess + NOISE * noise


def _num_categories(fn) -> int | None:
    base = base_distribution(fn)
    if isinstance(base, dist.CategoricalProbs):
        return base.probs.shape[-1]
    if isinstance(base, dist.CategoricalLogits):
        return base.logits.shape[-1]
    return None


def _observed(vem, whole, values, dynamic):
    """The plate's observations per item: ``(votes, features)``, lists of
    ``[images, K]`` category counts of the Categorical sites with K categories and
    of ``[images, F]`` columns of the others."""
    dm, s = vem.declared, whole.setup.structure
    n = s.num_images
    subs = dict(values)
    subs[dm.plate] = np.arange(n, dtype=np.int32)
    subs[dm.local_site] = s.local_value(n)

    def first_value(msg):  # other sites in the plate: any value (not read)
        if msg["type"] != "sample" or msg["is_observed"] or msg["name"] in subs:
            return None
        shape = tuple(msg["kwargs"].get("sample_shape") or ()) + msg["fn"].shape()
        return first_value_of(msg["fn"], shape)

    args, kwargs = whole.join(dynamic)
    model = handlers.substitute(dm.model, substitute_fn=first_value)
    trace = trace_model(model, subs, args, kwargs)
    votes, features = [], []
    for site in trace.values():
        if not (site["type"] == "sample" and site["is_observed"]):
            continue
        if not site_in_plate(site, dm.plate):
            continue
        value = jnp.asarray(site["value"])
        event = len(site["fn"].event_shape)
        batch = value.shape[: value.ndim - event]
        axis = len(batch) + s.image_dim
        if axis < 0 or batch[axis] != n:
            continue
        weight = jnp.ones(batch)
        if site.get("mask") is not None:
            weight = jnp.broadcast_to(site["mask"], batch).astype(weight.dtype)
        k = _num_categories(site["fn"])
        if k is not None:
            hot = jax.nn.one_hot(value, k) * weight[..., None]
            hot = jnp.moveaxis(hot, axis, 0).reshape(n, -1, k).sum(1)
            (votes if k == s.num_values else features).append(hot)
        else:
            w = weight.reshape(batch + (1,) * event)
            x = jnp.moveaxis(value * w, axis, 0).reshape(n, -1)
            features.append(x.astype(jnp.float32))
    return votes, features


def _standardized(features) -> jax.Array:
    x = jnp.concatenate(features, axis=1)
    sd = x.std(0)
    return (x - x.mean(0)) / jnp.where(sd > 0, sd, 1.0)


def _kmeans(seeds, x, k: int) -> jax.Array:
    """One-hot nearest centres ``[images, k]`` of the best (smallest sum of squared
    distances) of :data:`KMEANS_STARTS` runs of k-means++ seeding and
    :data:`LLOYD_STEPS` Lloyd iterations on the rows of ``x``; ``seeds``
    ``[KMEANS_STARTS, k]``, uniform on [0, 1), choose each run's centres (by the
    inverse of the cumulative distribution)."""
    n = x.shape[0]
    norms = (x * x).sum(-1)

    def distances(centres):  # squared, [images, k]
        d = norms[:, None] - 2.0 * x @ centres.T + (centres * centres).sum(-1)
        return jnp.maximum(d, 0.0)

    def one_run(u):
        first = x[jnp.minimum((u[0] * n).astype(jnp.int32), n - 1)]
        centres = jnp.zeros((k, x.shape[1]), x.dtype).at[0].set(first)

        def seed(i, carry):  # the next centre drawn with probability ~ distance**2
            centres, nearest = carry
            cumulative = jnp.cumsum(nearest)
            j = jnp.minimum((cumulative <= u[i] * cumulative[-1]).sum(), n - 1)
            d = ((x - x[j]) ** 2).sum(-1)
            return centres.at[i].set(x[j]), jnp.minimum(nearest, d)

        nearest = ((x - first) ** 2).sum(-1)
        centres, _ = lax.fori_loop(1, k, seed, (centres, nearest))

        def lloyd(_, centres):
            hot = jax.nn.one_hot(distances(centres).argmin(-1), k, dtype=x.dtype)
            counts = hot.sum(0)[:, None]
            means = hot.T @ x / jnp.maximum(counts, 1.0)
            return jnp.where(counts > 0, means, centres)

        centres = lax.fori_loop(0, LLOYD_STEPS, lloyd, centres)
        return centres, distances(centres).min(-1).sum()

    centres, inertia = jax.vmap(one_run)(seeds)
    best = centres[inertia.argmin()]
    return jax.nn.one_hot(distances(best).argmin(-1), k, dtype=x.dtype)
