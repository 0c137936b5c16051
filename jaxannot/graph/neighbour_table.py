r"""A graph as an edge list with colour classes, for per-node updates on the graph.

:class:`NeighbourTable` stores a symmetric weighted graph (every undirected edge in both
directions) with greedy colour classes — independent sets that can be updated together
with the result of a sequential sweep — and gives :math:`m_i = \sum_j S_{ij}\phi_j`
and the Laplacian penalty :math:`R = \tfrac12\sum_{ij}S_{ij}\lVert\phi_i -
\phi_j\rVert^2` in O(E K). Built from any :class:`jaxannot.graph.Graph`; used by the
LapVar E-steps of :mod:`jaxannot.inference.lapvar`.

For a sweep over the colour classes the table also lays every class out in *blocks*
of at most ``block_size`` nodes (:class:`ColourBlocks`), each with the edges leaving its
nodes, so that updating one block reads O(block edges x K) instead of the whole graph:
a sweep costs O((N + E) K) whatever the number of colours. The nodes of a block are
members of one independent set, so updating a class block after block gives the same
result as updating it at once.

Every data-dependent size — the edge count, the number of colours, the largest class,
the blocks and the edges per block — is padded to a :func:`bucket`: the next power of
two up to a threshold (:data:`FINE_FROM` for lengths, 16 for the number of blocks),
above it the next multiple of a sixteenth of that power of two (padding edges have
weight 0 and the dummy node as ends; padding classes are empty; padding blocks hold
only the dummy node), and the block size is a function of the node count and the
largest class's bucket, so tables of two graphs with as many nodes have the same
shapes unless a count crosses a bucket's end: a fit on another fold of the same size
reuses the compiled sweep. Above
the threshold a bucket pads by at most an eighth (eight shapes per octave) where a
power of two pads by up to double: on the 10-NN graph of 1M images the block tables
of a sweep are three ``[blocks, block edges]`` arrays, and a power of two on both
axes made them four times the real edges.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

import jax
import jax.numpy as jnp

__all__ = [
    "bucket",
    "ColourBlocks",
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
        Every undirected edge in both directions (no self-loops), then padding
        edges from the dummy node to itself with weight 0.
    weights : Float[Array, "edges"]
        Edge weights :math:`S_{ij}`.
    degree : Float[Array, "nodes+1"]
        :math:`d_i = \\sum_j S_{ij}` (0 for the dummy row).
    classes : Int[Array, "colours class_size"]
        Independent sets covering every node once, padded with ``num_nodes`` (and
        padding rows of it).
    blocks : ColourBlocks or None
        The classes in blocks with their edges (what a sweep reads); None when the
        table was built without them.
    """

    senders: jax.Array
    receivers: jax.Array
    weights: jax.Array
    degree: jax.Array
    classes: jax.Array
    blocks: ColourBlocks | None = None


class ColourBlocks(NamedTuple):
    """The colour classes cut into blocks of at most ``block_size`` nodes.

    The blocks of class ``c`` are ``first[c], ..., first[c] + count[c] - 1``; the
    blocks after ``count.sum()`` are padding (dummy nodes only, no edges), as are the
    classes with ``count`` 0. Every block lists the edges whose sender is one of its
    nodes: ``receivers``, ``weights``, and ``slots`` (the sender's column in
    ``members``); edges are padded with weight 0, receiver 0 and slot ``block_size``.

    Attributes
    ----------
    members : Int[Array, "blocks block_size"]
        Nodes of each block, padded with ``num_nodes`` (the dummy row).
    first, count : Int[Array, "colours"]
    receivers, slots : Int[Array, "blocks block_edges"]
    weights : Float[Array, "blocks block_edges"]
    """

    members: jax.Array
    first: jax.Array
    count: jax.Array
    receivers: jax.Array
    slots: jax.Array
    weights: jax.Array


#: Blocks of this many nodes or more (graphs of 65,536 nodes or more) are also cut
#: at an edge budget (:func:`_edge_cap`); smaller tables are as they were.
EDGE_CAP_FROM = 1024

#: Lengths up to this are padded to a power of two (small graphs: few shapes, little
#: memory); longer ones to a multiple of a sixteenth of it (:func:`bucket`).
FINE_FROM = 1 << 16


def bucket(size: int, fine_from: int = FINE_FROM) -> int:
    """The padded length of a data-dependent axis, so that similar graphs share
    array shapes.

    With :math:`p` the smallest power of two :math:`\\ge \\max(size, 1)`: :math:`p`
    when :math:`p \\le` ``fine_from``, else :math:`\\lceil size / s\\rceil s` with
    :math:`s = p / 16`, which pads by less than :math:`s / (p / 2) = 1/8` of
    ``size`` (eight lengths per power of two).

    Parameters
    ----------
    size : int
        A data-dependent length.
    fine_from : int
        The largest power of two used as it is.

    Returns
    -------
    int
        The padded length, ``>= max(size, 1)``.
    """
    power = 1 << max(0, int(size) - 1).bit_length()
    if power <= fine_from:
        return power
    step = power // 16
    return -(-int(size) // step) * step


def _block_size(n: int, largest: int) -> int:
    """Nodes per block, from the node count and the largest colour class's size
    ``largest``: 256 (the whole graph below 256 nodes), or n / 64 for large graphs,
    which bounds the sweep's loop at about 64 blocks plus one per colour; never more
    than ``largest``'s bucket (on a small graph of many colours a block of 256
    was mostly padding: the 10-NN graph of 600 images has classes of at most 97
    nodes, and its sweep took twice as long in blocks of 256 as in blocks of 128).
    A bucket (a power of two below :data:`FINE_FROM`)."""
    return min(bucket(max(n, 1)), max(256, bucket(-(-n // 64))), bucket(largest))


def _edge_cap(n: int, num_edges: int, size: int) -> int | None:
    """The most edges a block of a large graph takes: ``size`` nodes of the mean
    degree (rounded up); None (no cap) below :data:`EDGE_CAP_FROM` nodes a block."""
    if size < EDGE_CAP_FROM:
        return None
    return size * max(1, -(-num_edges // max(n, 1)))


def _cut_class(start: int, stop: int, cum: np.ndarray, size: int, cap: int):
    """The ends of the blocks of the class at positions ``start:stop`` (in colour
    order): each as long as it can be with at most ``size`` nodes and ``cap`` edges
    (at least one node); ``cum[i]`` is the edges of the nodes before position ``i``."""
    ends = []
    while start < stop:
        end = int(np.searchsorted(cum, cum[start] + cap, side="right")) - 1
        start = min(max(end, start + 1), start + size, stop)
        ends.append(start)
    return ends


def _block_slots(colour, sizes, senders, n: int, size: int):
    """Every node's block and slot, and the blocks of each class: each class in
    increasing node order, cut every ``size`` nodes, and on a large graph
    (:func:`_edge_cap`) also before a block passes the cap on its edges — the
    k-NN graph's hubs, the lowest index of a group of equal rows, made the first
    block of a class hold three times the edges of the others, and every block is
    padded to the fullest."""
    by_colour = np.argsort(colour, kind="stable")  # each class in increasing order
    cap = _edge_cap(n, senders.size, size)
    if cap is None:
        count = -(-sizes // size)
        rank = np.arange(n) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        first = np.concatenate([[0], np.cumsum(count)[:-1]])
        block, slot = np.empty(n, np.int64), np.empty(n, np.int64)
        block[by_colour] = first[colour[by_colour]] + rank // size
        slot[by_colour] = rank % size
        return block, slot, count
    degree = np.bincount(senders, minlength=n)[by_colour]
    cum = np.concatenate([[0], np.cumsum(degree)])
    stops = np.cumsum(sizes)
    cuts = [
        _cut_class(int(a), int(b), cum, size, cap)
        for a, b in zip(stops - sizes, stops, strict=True)
    ]
    count = np.array([len(c) for c in cuts], np.int64)
    ends = np.array([e for c in cuts for e in c], np.int64)
    starts = np.concatenate([[0], ends[:-1]])
    block, slot = np.empty(n, np.int64), np.empty(n, np.int64)
    block[by_colour] = np.repeat(np.arange(ends.size), ends - starts)
    slot[by_colour] = np.arange(n) - np.repeat(starts, ends - starts)
    return block, slot, count


def _colour_blocks(colour, senders, receivers, weights, n: int, size) -> ColourBlocks:
    num_colours = int(colour.max()) + 1 if n else 1
    sizes = np.bincount(colour, minlength=bucket(num_colours))  # padding: empty
    block, slot, count = _block_slots(colour, sizes, senders, n, size)
    first = np.concatenate([[0], np.cumsum(count)[:-1]])
    num_blocks = bucket(int(count.sum()), 16)  # the blocks after count.sum() pad
    members = np.full((num_blocks, size), n, np.int32)
    members[block, slot] = np.arange(n)
    # every edge under its sender's block, in sender (= slot) order within the block
    edge_block = block[senders]
    order = np.argsort(edge_block * (size + 1) + slot[senders], kind="stable")
    edge_block = edge_block[order]
    per_block = np.bincount(edge_block, minlength=num_blocks)
    width = bucket(int(per_block.max()) if per_block.size else 1)
    column = np.arange(order.size) - np.repeat(
        np.cumsum(per_block) - per_block, per_block
    )
    recv = np.zeros((num_blocks, width), np.int32)
    slots = np.full((num_blocks, width), size, np.int32)
    w = np.zeros((num_blocks, width), np.float32)
    recv[edge_block, column] = receivers[order]
    slots[edge_block, column] = slot[senders[order]]
    w[edge_block, column] = weights[order]
    # device_put: on the CPU it shares the host tables where jnp.asarray copied them
    return ColourBlocks(
        jax.device_put(members),
        jax.device_put(first.astype(np.int32)),
        jax.device_put(count.astype(np.int32)),
        jax.device_put(recv),
        jax.device_put(slots),
        jax.device_put(w),
    )


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
    graph: Any, *, schedule: str = "colouring", seed: int = 0, blocks: bool = True
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
    blocks : bool
        Also build the :class:`ColourBlocks` a sweep over the classes reads
        (:func:`jaxannot.inference.lapvar.lapvar1_sweep`); without them the table
        serves :func:`neighbour_sums` and :func:`laplacian_penalty` only.

    Returns
    -------
    NeighbourTable
        The graph's edges without self-loops, degrees and (with ``blocks``) colour
        classes.
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
        colour = np.arange(n, dtype=np.int64)
        classes = np.arange(n, dtype=np.int32)[:, None]
    else:
        colour = _greedy_colouring(starts, receivers, n, np.random.default_rng(seed))
        num_colours = int(colour.max()) + 1 if n else 1
        size = int(np.bincount(colour, minlength=num_colours).max()) if n else 1
        classes = np.full((bucket(num_colours), bucket(size)), n, dtype=np.int32)
        for c in range(num_colours):
            members = np.flatnonzero(colour == c)
            classes[c, : members.size] = members
    # classes of one node, or blocks of at most the largest class's bucket
    size = 1 if schedule == "sequential" else _block_size(n, max(size, 1))
    colour_blocks = (
        _colour_blocks(colour, senders, receivers, weights, n, size) if blocks else None
    )
    pad = bucket(senders.size) - senders.size  # weight-0 edges of the dummy node
    return NeighbourTable(
        jnp.asarray(np.pad(senders, (0, pad), constant_values=n).astype(np.int32)),
        jnp.asarray(np.pad(receivers, (0, pad), constant_values=n).astype(np.int32)),
        jnp.asarray(np.pad(weights, (0, pad))),
        jnp.asarray(degree),
        jnp.asarray(classes),
        colour_blocks,
    )


def pad_dummy_row(x: jax.Array) -> jax.Array:
    """``x`` with one zero row appended (the dummy node of the colour classes).

    Parameters
    ----------
    x : jax.Array [nodes, ...]
        Rows per node.

    Returns
    -------
    jax.Array [nodes + 1, ...]
        ``x`` with a zero last row.
    """
    return jnp.concatenate([x, jnp.zeros((1,) + x.shape[1:], x.dtype)], axis=0)


def neighbour_sums(phi_padded: jax.Array, table: NeighbourTable) -> jax.Array:
    """:math:`m_i = \\sum_j S_{ij}\\phi_j` for every row, [nodes+1, K] (O(E K)).

    Parameters
    ----------
    phi_padded : jax.Array [nodes + 1, K]
        Values per node, dummy row last (:func:`pad_dummy_row`).
    table : NeighbourTable
        The graph.

    Returns
    -------
    jax.Array [nodes + 1, K]
        The weighted sums of the neighbours' rows.
    """
    contrib = table.weights[:, None] * phi_padded[table.receivers]
    return jax.ops.segment_sum(contrib, table.senders, phi_padded.shape[0])


def laplacian_penalty(phi: jax.Array, table: NeighbourTable) -> jax.Array:
    r""":math:`R = \tfrac12\sum_{ij}S_{ij}\lVert\phi_i-\phi_j\rVert^2
    = \sum_i d_i\lVert\phi_i\rVert^2 - \sum_i \phi_i^\top m_i`
    for ``phi`` [nodes, K].

    Parameters
    ----------
    phi : jax.Array [nodes, K]
        Values per node.
    table : NeighbourTable
        The graph.

    Returns
    -------
    jax.Array
        The scalar penalty :math:`R`; with the table's blocks of several nodes
        summed block after block (memory O(block edges x K) instead of O(E K)).
    """
    padded = pad_dummy_row(phi)
    squares = (table.degree * (padded**2).sum(-1)).sum()
    if table.blocks is None or table.blocks.members.shape[1] == 1:  # one node each
        return squares - (padded * neighbour_sums(padded, table)).sum()
    return squares - _blocked_cross(padded, table.blocks)


def _blocked_cross(phi_padded: jax.Array, blocks: ColourBlocks) -> jax.Array:
    r""":math:`\sum_i \phi_i^\top m_i` block after block (the real blocks only):
    O(block edges x K) memory where :func:`neighbour_sums` forms all E x K at once."""
    size = blocks.members.shape[1]

    def body(b, total):
        contrib = blocks.weights[b][:, None] * phi_padded[blocks.receivers[b]]
        m = jax.ops.segment_sum(
            contrib, blocks.slots[b], size + 1, indices_are_sorted=True
        )[:size]
        return total + (phi_padded[blocks.members[b]] * m).sum()

    zero = jnp.zeros((), phi_padded.dtype)
    return jax.lax.fori_loop(0, blocks.count.sum(), body, zero)
