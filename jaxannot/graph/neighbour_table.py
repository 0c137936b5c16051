r"""A graph as an edge list with colour classes, for per-node updates on the graph.

:class:`NeighbourTable` stores a symmetric weighted graph (every undirected edge in both
directions) with greedy colour classes — independent sets that can be updated together
with the result of a sequential sweep — and gives :math:`m_i = \sum_j S_{ij}\phi_j`
and the Laplacian penalty :math:`R = \tfrac12\sum_{ij}S_{ij}\lVert\phi_i -
\phi_j\rVert^2` in O(E K). Built from any :class:`jaxannot.graph.Graph`; used by the
LapVar E-steps of :mod:`jaxannot.inference.lapvar`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

import jax
import jax.numpy as jnp

__all__ = [
    "NeighbourTable",
    "neighbour_table",
    "neighbour_sums",
    "laplacian_penalty",
    "pad_dummy_row",
]


class NeighbourTable(NamedTuple):
    """A symmetric weighted graph as an edge list, plus colour classes.

    Arrays indexed by node have one extra *dummy* row (index ``num_nodes``) used as
    padding of the colour classes, so gathers and scatters never need masks.

    Attributes
    ----------
    senders, receivers : Int[Array, "edges"]
        Every undirected edge in both directions (no self-loops).
    weights : Float[Array, "edges"]
        Edge weights :math:`S_{ij}`.
    degree : Float[Array, "nodes+1"]
        :math:`d_i = \\sum_j S_{ij}` (0 for the dummy row).
    classes : Int[Array, "colours class_size"]
        Independent sets covering every node once, padded with ``num_nodes``.
    """

    senders: jax.Array
    receivers: jax.Array
    weights: jax.Array
    degree: jax.Array
    classes: jax.Array


def _greedy_colouring(starts, receivers, n: int, rng: np.random.Generator):
    colour = np.full(n, -1, dtype=np.int64)
    for i in rng.permutation(n):
        nb = receivers[starts[i] : starts[i + 1]]
        used = set(colour[nb].tolist())
        c = 0
        while c in used:
            c += 1
        colour[i] = c
    return colour


def neighbour_table(
    graph: Any, *, schedule: str = "colouring", seed: int = 0
) -> NeighbourTable:
    """Build a :class:`NeighbourTable` from a graph's ``senders, receivers, weights``.

    Parameters
    ----------
    graph : jaxannot.graph.Graph or any object with ``senders``, ``receivers``,
        ``weights`` (every undirected edge stored in both directions) and ``num_nodes``.
    schedule : {"colouring", "sequential"}
        ``"colouring"``: greedy colour classes (independent sets, updated together);
        ``"sequential"``: one node per class (a plain random-order sweep).
    seed : int
        Seeds the greedy colouring's node order.
    """
    if schedule not in ("colouring", "sequential"):
        raise ValueError(
            f"unknown schedule {schedule!r}; valid: ['colouring', 'sequential']"
        )
    n = int(graph.num_nodes)
    senders = np.asarray(graph.senders, dtype=np.int64)
    receivers = np.asarray(graph.receivers, dtype=np.int64)
    weights = np.asarray(graph.weights, dtype=np.float32)
    keep = senders != receivers  # self-loops do not change R
    senders, receivers, weights = senders[keep], receivers[keep], weights[keep]
    if np.any(weights < 0):
        raise ValueError("graph weights must be non-negative")
    order = np.lexsort((receivers, senders))
    senders, receivers, weights = senders[order], receivers[order], weights[order]
    starts = np.searchsorted(senders, np.arange(n + 1))
    degree = np.zeros(n + 1, np.float32)
    np.add.at(degree, senders, weights)
    if schedule == "sequential":
        classes = np.arange(n, dtype=np.int32)[:, None]
    else:
        colour = _greedy_colouring(starts, receivers, n, np.random.default_rng(seed))
        num_colours = int(colour.max()) + 1 if n else 1
        size = int(np.bincount(colour, minlength=num_colours).max()) if n else 1
        classes = np.full((num_colours, size), n, dtype=np.int32)
        for c in range(num_colours):
            members = np.flatnonzero(colour == c)
            classes[c, : members.size] = members
    return NeighbourTable(
        jnp.asarray(senders, jnp.int32),
        jnp.asarray(receivers, jnp.int32),
        jnp.asarray(weights),
        jnp.asarray(degree),
        jnp.asarray(classes),
    )


def pad_dummy_row(x: jax.Array) -> jax.Array:
    """``x`` with one zero row appended (the dummy node of the colour classes)."""
    return jnp.concatenate([x, jnp.zeros((1,) + x.shape[1:], x.dtype)], axis=0)


def neighbour_sums(phi_padded: jax.Array, table: NeighbourTable) -> jax.Array:
    """:math:`m_i = \\sum_j S_{ij}\\phi_j` for every row, [nodes+1, K] (O(E K))."""
    contrib = table.weights[:, None] * phi_padded[table.receivers]
    return jax.ops.segment_sum(contrib, table.senders, phi_padded.shape[0])


def laplacian_penalty(phi: jax.Array, table: NeighbourTable) -> jax.Array:
    r""":math:`R = \tfrac12\sum_{ij}S_{ij}\lVert\phi_i-\phi_j\rVert^2
    = \sum_i d_i\lVert\phi_i\rVert^2 - \sum_i \phi_i^\top m_i`
    for ``phi`` [nodes, K]."""
    padded = pad_dummy_row(phi)
    m = neighbour_sums(padded, table)
    return (table.degree * (padded**2).sum(-1)).sum() - (padded * m).sum()
