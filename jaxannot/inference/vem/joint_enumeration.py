r"""Exact sums over the discrete sites a model holds beside VEM's local site.

For item :math:`i`, local site :math:`c`, other item-level discrete sites :math:`d`
(jointly, :math:`E` values) and nested discrete sites :math:`s_{ij}` at the elements
:math:`j` of their plates (jointly, :math:`S` values per element),

.. math::
    \log w_{ike}(\theta) = \log p(c_i = k, d_i = e, x_i^{\mathrm{item}} \mid \theta)
        + \sum_j \operatorname{logsumexp}_{v}
          \log p(s_{ij} = v, x_{ij} \mid c_i = k, d_i = e, \theta),
    \qquad a_{ik} = \operatorname{logsumexp}_e \log w_{ike},

so the nested sites cost :math:`S` values per element, not :math:`S^J` per item.
:math:`a_{ik} = \log p(x_i, c_i = k \mid \theta)` is exact, and VEM's E-step,
objective and M-step use it as they use a lone local site's log joint (EM on
:math:`c` with the other sites summed out). The model is evaluated once per joint
value :math:`(k, e, v)` (a ``vmap``; each value a scalar broadcast over its plates),
and each site's log densities are split into the item-level part and the nested
part per element (:func:`_split_terms`). :func:`marginals` gives every enumerated
site's exact posterior marginals.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
from jax import lax
from jax.scipy.special import logsumexp

from jaxannot.inference.vem.enumeration import site_in_plate
from jaxannot.inference.vem.log_joint import site_log_prob

if TYPE_CHECKING:
    from jaxannot.types import Array

__all__ = ["collapsed_log_joint", "marginals"]


def _split_terms(trace, plate, image_dim, nested_plates, rescale, size):
    """The in-plate sites' log densities: ``(item [size], nested [size, P])``.

    A site in every nested plate goes to the nested part, summed over its other
    axes but the item and the nested plates' (flattened to P elements); any other
    site in the item plate goes to the item part."""
    names = {name for name, _, _ in nested_plates}
    elements = math.prod(n for _, _, n in nested_plates)
    item, nested = jnp.zeros(size), jnp.zeros((size, elements))
    for site in trace.values():
        if site["type"] != "sample" or not site_in_plate(site, plate):
            continue
        lp = site_log_prob(site, rescale)
        own = {f.name for f in site["cond_indep_stack"]}
        axis = lp.ndim + image_dim
        if names and names <= own:
            keep = [axis] + [lp.ndim + dim for _, dim, _ in nested_plates]
            order = keep + [a for a in range(lp.ndim) if a not in keep]
            nested = nested + lp.transpose(order).reshape(size, elements, -1).sum(-1)
        else:
            item = item + jnp.moveaxis(lp, axis, 0).reshape(size, -1).sum(-1)
    return item, nested


def _digits(flat, sizes):
    """The mixed-radix digits of ``flat`` in ``sizes`` (first most significant)."""
    out = []
    for n in reversed(sizes):
        out.append(flat % n)
        flat = flat // n
    return out[::-1]


def _terms(call: Any, values, idx):
    """``(log_w [K, E, chunk], nested [K, E, S, chunk, P])`` of the items ``idx``
    (the module docstring's :math:`\\log w` and per-element nested terms)."""
    dm, s = call.declared, call.setup.structure
    e = s.enumerated
    sites = [k for k, _ in e.item_sites + e.nested_sites]
    sizes = (s.num_values, *(n for _, n in e.item_sites + e.nested_sites))
    rescale = idx.shape[0] / s.num_images

    def at(flat):
        local, *others = _digits(flat, sizes)
        subs = call.substitutions(values, idx, local)
        for name, v in zip(sites, others, strict=True):
            subs[name] = v  # a scalar: broadcast over the site's plates
        trace = call.trace(subs)
        return _split_terms(
            trace, dm.plate, s.image_dim, e.nested_plates, rescale, idx.shape[0]
        )

    item, nested = jax.vmap(at)(jnp.arange(math.prod(sizes)))
    shape = (s.num_values, e.item_values, e.nested_values, idx.shape[0])
    item = item.reshape(shape)[:, :, 0]  # the item part does not vary with s
    nested = nested.reshape(shape + (e.elements,))
    return item + logsumexp(nested, axis=2).sum(-1), nested


def collapsed_log_joint(call: Any, values: dict[str, Array], idx: Array) -> jax.Array:
    """:math:`a_{ik}` with the other enumerated sites summed out, [chunk, K].

    Parameters
    ----------
    call : ModelCall
        The model and its arguments.
    values, idx
        As :meth:`ModelCall.log_joint_chunk` takes them.

    Returns
    -------
    jax.Array [chunk, K]
        The log joints, the other enumerated sites summed out.
    """
    log_w, _ = _terms(call, values, idx)
    return logsumexp(log_w, axis=1).T


def _marginals_chunk(call: Any, values, idx) -> dict:
    dm, s = call.declared, call.setup.structure
    e = s.enumerated
    log_w, nested = _terms(call, values, idx)
    joint = jnp.exp(log_w - logsumexp(log_w, axis=(0, 1)))  # [K, E, chunk]
    item_sizes = tuple(n for _, n in e.item_sites)
    joint_sites = joint.reshape((s.num_values, *item_sizes, -1))
    out = {dm.local_site: joint.sum(1).T}
    for j, (name, _) in enumerate(e.item_sites):
        rest = tuple(a for a in range(len(item_sizes) + 1) if a != j + 1)
        out[name] = joint_sites.sum(rest).T
    if e.item_sites:
        key = ",".join((dm.local_site, *(k for k, _ in e.item_sites)))
        out[key] = jnp.moveaxis(joint_sites, -1, 0)  # [chunk, K, *item sizes]
    if not e.nested_sites:
        return out
    cond = jax.nn.softmax(nested, axis=2)  # p(s_ij = v | c, d, x), [K, E, S, chunk, P]
    post = jnp.einsum("kec,kescp->scp", joint, cond)
    nested_sizes = tuple(n for _, n in e.nested_sites)
    plates = tuple(n for _, _, n in e.nested_plates)
    post = post.reshape(nested_sizes + (idx.shape[0],) + plates)
    for j, (name, _) in enumerate(e.nested_sites):
        rest = tuple(a for a in range(len(nested_sizes)) if a != j)
        out[name] = jnp.moveaxis(post.sum(rest), 0, -1)  # [chunk, *plates, values]
    return out


def marginals(call: Any, values: dict[str, Array]) -> dict:
    """Each enumerated site's exact posterior marginals under the global
    ``values``, for every item (chunked with ``lax.map``).

    Parameters
    ----------
    call : ModelCall
        The model and its arguments.
    values : dict
        Site -> global value.

    Returns
    -------
    dict
        Site -> marginals [N, values of the site].
    """
    chunks, _ = call.declared.chunk_indices(call.setup)
    out = lax.map(lambda idx: _marginals_chunk(call, values, idx), chunks)
    n = call.setup.structure.num_images
    return {k: v.reshape((-1,) + v.shape[2:])[:n] for k, v in out.items()}
