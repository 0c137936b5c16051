r"""Exact k-nearest-neighbour search (blocked) and symmetric k-NN graphs.

The search compares a block of queries with the whole database at a time, so its memory
is O(``block_size`` x n) and never (queries x n) once the queries exceed one block. The
neighbours of each query come from ``jax.lax.top_k`` on the negated distances; among
equal distances the lower database index comes first (``top_k`` is stable).

Distances
---------
- ``"euclidean"``: :math:`\|a - b\| = \sqrt{\max(0, \|a\|^2 + \|b\|^2 - 2 a^\top b)}`
  (the expansion is clipped at 0 before the square root, so rounding never gives a
  negative squared distance).
- ``"cosine"``: :math:`1 - a^\top b / (\|a\| \|b\|)`; a zero row has cosine similarity
  0 with everything (distance 1).

Graph weights (:func:`knn_graph`, :func:`edge_weights`)
-------------------------------------------------------
- ``"binary"``: :math:`S_{ij} = 1` for every edge;
- ``"heat"``: :math:`S_{ij} = \exp(-d_{ij}^2 / 2 t^2)` with :math:`d_{ij}` the chosen
  distance (Euclidean by default) and, when ``t`` is not given, ``t`` = the mean of
  all k-NN distances (the ``n x k`` distances returned by :func:`knn_search`);
- ``"cosine"``: :math:`S_{ij} = \max(0, \cos(x_i, x_j))` (clipped so the Laplacian
  stays positive semi-definite).

Exact or approximate (``method``)
---------------------------------
``method="exact"`` is the blocked search above; ``method="approx"`` builds a faiss HNSW
index (:mod:`jaxannot.graph.approx_knn`; optional dependency, ``pip install
"jaxannot[scale]"``) whose memory is O(n (d + M)) and whose time grows about as
n log n instead of n^2; ``method="auto"`` (the default) is exact below
``APPROX_MIN_POINTS`` = 50,000 database points and approximate at or above (when the
queries x points also reach 50,000^2): the benchmark of docs/graphs.md measured the
index at recall@10 >= 0.95 and 2.2x faster than the exact graph at 100,000 points,
slower at 16,000; without faiss it logs
a warning and stays exact. The approximate lists follow the same conventions (sorted by
distance then index, ``exclude_self``), with only the neighbour *sets* approximate.

Symmetrization is the union of the directed k-NN relations with the larger weight:
:math:`S = \max(S_{\to}, S_{\to}^\top)` where :math:`S_{\to}` holds the edges from each
image to its k nearest other images. Every undirected edge is stored in both directions,
once each; there are no self loops.

References
----------
Belkin, M., Niyogi, P. "Laplacian Eigenmaps for Dimensionality Reduction and Data
Representation", Neural Computation 15(6), 2003 (heat-kernel k-NN graphs).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import numpy as np

import jax
import jax.numpy as jnp

from jaxannot.graph import approx_knn
from jaxannot.graph.laplacian import Graph

if TYPE_CHECKING:
    from jaxannot.types import Array, ArrayLike

__all__ = [
    "KNN_METHODS",
    "KNN_METRICS",
    "KNN_WEIGHTS",
    "knn_search",
    "knn_graph",
    "neighbour_graph",
]

KNN_METRICS = ("euclidean", "cosine")
KNN_METHODS = ("exact", "approx", "auto")
KNN_WEIGHTS = ("heat", "binary", "cosine")


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(
            f"unknown {name} {value!r}; valid choices: {', '.join(choices)}"
        )


def _block_distances(queries, database, metric: str):
    """Distances between a block of queries [b, d] and the database [n, d] -> [b, n]."""
    cross = queries @ database.T
    if metric == "euclidean":
        qq = jnp.sum(queries * queries, axis=1)[:, None]
        dd = jnp.sum(database * database, axis=1)[None, :]
        return jnp.sqrt(jnp.maximum(qq + dd - 2.0 * cross, 0.0))
    qn = jnp.linalg.norm(queries, axis=1)[:, None]
    dn = jnp.linalg.norm(database, axis=1)[None, :]
    denom = qn * dn
    cos = jnp.where(denom > 0, cross / jnp.where(denom > 0, denom, 1.0), 0.0)
    return 1.0 - cos


@functools.partial(jax.jit, static_argnames=("k", "metric", "exclude_self"))
def _search_blocks(query_blocks, database, k: int, metric: str, exclude_self: bool):
    """k-NN of every block; query_blocks [num_blocks, block, d] -> [num_blocks *
    block, k] each."""
    block = query_blocks.shape[1]
    n = database.shape[0]

    def one_block(args):
        start, queries = args
        dist = _block_distances(queries, database, metric)
        if exclude_self:
            rows = start + jnp.arange(block)[:, None]
            dist = jnp.where(rows == jnp.arange(n)[None, :], jnp.inf, dist)
        neg, idx = jax.lax.top_k(-dist, k)
        return idx.astype(jnp.int32), -neg

    starts = jnp.arange(query_blocks.shape[0], dtype=jnp.int32) * block
    idx, dist = jax.lax.map(one_block, (starts, query_blocks))
    return idx.reshape(-1, k), dist.reshape(-1, k)


def knn_search(
    queries: ArrayLike,
    database: ArrayLike,
    k: int,
    *,
    metric: str = "euclidean",
    block_size: int = 1024,
    exclude_self: bool = False,
    method: str = "auto",
) -> tuple[Array, Array]:
    r"""k nearest neighbours of each query in a database: exact in blocks, or HNSW.

    Parameters
    ----------
    queries : array [q, d]
        Query points.
    database : array [n, d]
        Points searched.
    k : int
        Number of neighbours, ``1 <= k <= n`` (``n - 1`` with ``exclude_self``).
    metric : {"euclidean", "cosine"}
        Distance (see the module docstring).
    block_size : int
        Queries compared with the database at a time; memory is O(block_size x n).
    exclude_self : bool
        For the neighbours of a set among itself (``queries is database``, same rows):
        query ``i`` never returns database row ``i``. Requires ``q == n``.
    method : {"auto", "exact", "approx"}
        ``"exact"``: blocked brute force; ``"approx"``: faiss HNSW index
        (:func:`jaxannot.graph.approx_knn.approx_knn_search`, needs ``pip install
        "jaxannot[scale]"``); ``"auto"``: approximate when the database has at least
        ``approx_knn.APPROX_MIN_POINTS`` (50,000) rows and ``q * n`` is at least its
        square, exact otherwise (and when faiss is missing, with a logged warning).

    Returns
    -------
    indices : int32 array [q, k]
        Database rows by increasing distance; equal distances by increasing index.
    distances : float32 array [q, k]
        The matching distances.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[0.0], [1.0], [3.0]], np.float32)
    >>> idx, d = knn_search(x, x, 1, exclude_self=True)
    >>> idx[:, 0].tolist(), d[:, 0].tolist()
    ([1, 0, 1], [1.0, 1.0, 2.0])
    """
    _check_choice("metric", metric, KNN_METRICS)
    _check_choice("method", method, KNN_METHODS)
    # checked and padded on the host: op by op on the device each step compiled a
    # small program per new shape (some ten per search)
    queries = np.asarray(queries, np.float32)
    database = np.asarray(database, np.float32)
    if queries.ndim != 2 or database.ndim != 2:
        raise ValueError(
            f"queries and database must be 2-D [points, dims], got shapes "
            f"{queries.shape} and {database.shape}"
        )
    if queries.shape[1] != database.shape[1]:
        raise ValueError(
            f"queries have {queries.shape[1]} dims but the database has "
            f"{database.shape[1]}"
        )
    q, n = queries.shape[0], database.shape[0]
    if exclude_self and q != n:
        raise ValueError(
            f"exclude_self needs the queries to be the database rows (q == n), got "
            f"q={q}, n={n}"
        )
    limit = n - 1 if exclude_self else n
    if not 1 <= k <= limit:
        raise ValueError(f"k must be in [1, {limit}] for {n} database points, got {k}")
    if int(block_size) < 1:
        raise ValueError(f"block_size must be positive, got {block_size}")
    if not (np.isfinite(queries).all() and np.isfinite(database).all()):
        raise ValueError("queries and database must be finite (found NaN or inf)")
    if method == "approx" or (method == "auto" and approx_knn.use_approx(q, n)):
        idx, dist = approx_knn.approx_knn_search(
            queries, database, k, metric=metric, exclude_self=exclude_self
        )
        return jnp.asarray(idx, jnp.int32), jnp.asarray(dist, jnp.float32)
    block = min(int(block_size), q)
    num_blocks = -(-q // block)
    padded = np.pad(queries, ((0, num_blocks * block - q), (0, 0)))
    idx, dist = _search_blocks(
        padded.reshape(num_blocks, block, -1), database, k, metric, exclude_self
    )
    return (idx, dist) if num_blocks * block == q else (idx[:q], dist[:q])


def _symmetrize_max(senders, receivers, weights, num_nodes: int) -> Graph:
    """Union of directed edges, both directions, max weight per pair, no self loops."""
    s = np.concatenate([senders, receivers]).astype(np.int64)
    r = np.concatenate([receivers, senders]).astype(np.int64)
    w = np.concatenate([weights, weights]).astype(np.float32)
    keep = s != r
    s, r, w = s[keep], r[keep], w[keep]
    key = s * num_nodes + r
    order = np.argsort(key, kind="stable")
    key, w = key[order], w[order]
    first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if key.size else key
    w = np.maximum.reduceat(w, first) if key.size else w
    key = key[first] if key.size else key
    return Graph(
        # cast on the host and device_put: a device cast or jnp.asarray's copy
        # would compile once per edge count
        senders=jax.device_put((key // num_nodes).astype(np.int32)),
        receivers=jax.device_put((key % num_nodes).astype(np.int32)),
        weights=jax.device_put(w.astype(np.float32)),
        num_nodes=int(num_nodes),
    )


def knn_graph(
    x: ArrayLike,
    k: int,
    *,
    weight: str = "heat",
    t: float | None = None,
    metric: str = "euclidean",
    block_size: int = 1024,
    method: str = "auto",
) -> Graph:
    r"""Symmetric weighted k-NN graph of the rows of ``x``.

    Each row is linked to its ``k`` nearest other rows (:func:`knn_search` with
    ``exclude_self=True``); the directed relation is symmetrized by union with the
    larger weight, :math:`S = \max(S_{\to}, S_{\to}^\top)`, so a node has at least
    ``k`` neighbours.

    Parameters
    ----------
    x : array [n, d]
        One feature view (rows = images).
    k : int
        Neighbours per node, ``1 <= k <= n - 1``.
    weight : {"heat", "binary", "cosine"}
        ``"heat"``: :math:`\exp(-d_{ij}^2 / 2t^2)`; ``"binary"``: 1;
        ``"cosine"``: :math:`\max(0, \cos(x_i, x_j))`.
    t : float, optional
        Heat-kernel width; default = mean k-NN distance (mean of the ``n x k`` distances
        to the k nearest neighbours; 1 if that mean is 0).
    metric : {"euclidean", "cosine"}
        Distance used to choose the neighbours (and :math:`d_{ij}` of the heat kernel).
    block_size : int
        Query block of the search.
    method : {"auto", "exact", "approx"}
        Neighbour search (:func:`knn_search`): ``"auto"`` is exact below 50,000 rows
        and the faiss HNSW index at or above; memory O(n k) for the graph either way.

    Returns
    -------
    Graph
        Edges in both directions, sorted by (sender, receiver), no duplicates, no self
        loops.

    Examples
    --------
    >>> import numpy as np
    >>> g = knn_graph(np.array([[0.0], [1.0], [3.0]]), 1, weight="binary")
    >>> to_pairs = list(zip(g.senders.tolist(), g.receivers.tolist()))
    >>> to_pairs
    [(0, 1), (1, 0), (1, 2), (2, 1)]
    """
    _check_choice("weight", weight, KNN_WEIGHTS)
    _check_choice("metric", metric, KNN_METRICS)
    _check_choice("method", method, KNN_METHODS)
    if t is not None and not (np.isfinite(t) and t > 0):
        raise ValueError(f"heat-kernel width t must be positive and finite, got {t}")
    x = jnp.asarray(x, jnp.float32)
    if x.ndim != 2:
        raise ValueError(f"x must be 2-D [points, dims], got shape {x.shape}")
    idx, dist = knn_search(
        x,
        x,
        k,
        metric=metric,
        block_size=block_size,
        exclude_self=True,
        method=method,
    )
    return neighbour_graph(x, idx, dist, weight=weight, t=t)


def neighbour_graph(
    x: ArrayLike,
    idx: ArrayLike,
    dist: ArrayLike,
    *,
    weight: str = "heat",
    t: float | None = None,
) -> Graph:
    r"""The symmetric graph of :func:`knn_graph` from a search already made.

    For a caller that needs the neighbours themselves too (e.g. a heat width set
    from their distances): one search, then the graph.

    Parameters
    ----------
    x : array [n, d]
        The rows searched (used by ``weight="cosine"``).
    idx, dist : arrays [n, k]
        :func:`knn_search` of ``x`` against itself with ``exclude_self=True``.
    weight, t
        As in :func:`knn_graph`.

    Returns
    -------
    Graph
    """
    idx = np.asarray(idx)
    n, k = idx.shape
    if weight == "heat" and t is None:
        t = float(np.mean(np.asarray(dist, np.float64))) or 1.0
    w = edge_weights(x, x, idx, dist, weight=weight, t=t)
    return _symmetrize_max(np.repeat(np.arange(n), k), idx.reshape(-1), w.ravel(), n)


def edge_weights(
    queries: ArrayLike,
    database: ArrayLike,
    idx: ArrayLike,
    dist: ArrayLike,
    *,
    weight: str = "heat",
    t: float = 1.0,
) -> np.ndarray:
    r"""Weights of the directed edges from each query to its neighbours in a database.

    The weights of the module docstring: ``"binary"`` 1; ``"heat"``
    :math:`\exp(-d^2 / 2 t^2)`; ``"cosine"`` :math:`\max(0, \cos(q_i, x_j))` (0 for a
    zero row), whatever metric chose the neighbours. Used by :func:`neighbour_graph`
    and by methods that link new images to the graph of their fit images.

    Parameters
    ----------
    queries : array [q, d]
    database : array [n, d]
    idx, dist : arrays [q, k]
        Neighbours of each query in ``database`` and their distances
        (:func:`knn_search`).
    weight : {"heat", "binary", "cosine"}
    t : float
        Heat-kernel width (``"heat"`` only).

    Returns
    -------
    float64 ndarray [q, k]
    """
    _check_choice("weight", weight, KNN_WEIGHTS)
    idx, dist = np.asarray(idx), np.asarray(dist, np.float64)
    if weight == "binary":
        return np.ones(idx.shape, np.float64)
    if weight == "heat":
        return np.exp(-(dist**2) / (2.0 * t * t))
    q = np.asarray(queries, np.float64)
    x = np.asarray(database, np.float64)
    dots = np.einsum("qd,qkd->qk", q, x[idx])
    denom = np.linalg.norm(q, axis=1)[:, None] * np.linalg.norm(x, axis=1)[idx]
    cos = np.where(denom > 0, dots / np.where(denom > 0, denom, 1.0), 0.0)
    return np.maximum(cos, 0.0)
