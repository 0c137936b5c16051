r"""The :class:`Graph` pytree and its Laplacian operators, all edge-list based.

A graph over ``n`` nodes (images) is a symmetric weighted adjacency :math:`S` stored as
an edge list: edge ``e`` goes from ``senders[e]`` to ``receivers[e]`` with weight
``weights[e]`` and every undirected edge appears once in each direction. Operators are
``jax.ops.segment_sum`` over the edges, O(E) time and memory; no n x n matrix is built.

- degree :math:`d_i = \sum_j S_{ij}`;
- :math:`S f`, :math:`L f = (D - S) f`;
- normalized :math:`\mathcal{L} f = f - D^{-1/2} S D^{-1/2} f`, with isolated nodes
  (:math:`d_i = 0`) given a zero row, as
  ``scipy.sparse.csgraph.laplacian(normed=True)``;
- the penalty :math:`P(q) = \sum_{i,j} S_{ij}\, d(q_i, q_j)` over *ordered* pairs.

For the squared Euclidean distance, :math:`P = 2 \operatorname{tr}(Q^\top L Q)` and
DESIGN's :math:`R = \tfrac12 \sum_{ij} S_{ij} \|\phi_i - \phi_j\|^2 = P / 2`, whose
gradient is :math:`\partial R / \partial \phi_i = 2 (d_i \phi_i - \sum_j S_{ij}\phi_j)
= 2 (L\Phi)_i`; hence :math:`\partial P / \partial \phi_i = 4 (L\Phi)_i`.

References
----------
Belkin, M., Niyogi, P., Sindhwani, V. "Manifold Regularization", JMLR 7, 2006.
Chung, F. "Spectral Graph Theory", AMS, 1997 (normalized Laplacian).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse

import jax
import jax.numpy as jnp

if TYPE_CHECKING:
    from jaxannot.types import ArrayLike

__all__ = [
    "Graph",
    "PENALTY_DISTANCES",
    "SYM_KL_EPS",
    "degree",
    "laplacian_diagonal",
    "induced_subgraph",
    "pad_edges",
    "adjacency_matvec",
    "laplacian_matvec",
    "normalized_laplacian_matvec",
    "laplacian_penalty",
    "to_scipy",
    "from_scipy",
    "as_graph",
]

PENALTY_DISTANCES = ("sq_euclidean", "sym_kl")

#: Floor applied to probabilities before taking logs in the symmetric KL penalty, so a
#: zero entry gives a large finite term instead of inf/NaN (1e-10 is well above the
#: float32 subnormal range, and far below any probability a model produces on purpose).
SYM_KL_EPS = 1e-10


@dataclasses.dataclass(frozen=True)
class Graph:
    """Symmetric weighted graph as an edge list (a pytree; ``num_nodes`` is static).

    Parameters
    ----------
    senders, receivers : int32 array [E]
        Edge endpoints; every undirected edge is stored in both directions.
    weights : float32 array [E]
        Edge weights :math:`S_{ij} \\ge 0`.
    num_nodes : int
        Number of nodes ``n`` (static metadata).
    """

    senders: jax.Array
    receivers: jax.Array
    weights: jax.Array
    num_nodes: int

    @property
    def num_edges(self) -> int:
        """Number of stored (directed) edges, twice the undirected edges."""
        return int(self.senders.shape[0])


jax.tree_util.register_dataclass(
    Graph,
    data_fields=["senders", "receivers", "weights"],
    meta_fields=["num_nodes"],
)


def pad_edges(g: Graph, num_edges: int) -> Graph:
    """``g`` with its edge arrays padded to ``num_edges`` by zero-weight self-loops on
    node 0 (int32 endpoints, float32 weights).

    A symmetrized k-NN graph has between ``n k`` and ``2 n k`` directed edges, a number
    that changes with the data; padding to a fixed length keeps one compiled solver
    per shape. Zero weights add nothing to :math:`L f`, :math:`S f` or the degrees.

    Parameters
    ----------
    g : Graph
        The graph to pad.
    num_edges : int
        Edge count to pad to (no padding when ``g`` has as many or more).

    Returns
    -------
    Graph
        The same graph with ``max(num_edges, E)`` edges.
    """
    senders, receivers = np.asarray(g.senders), np.asarray(g.receivers)
    pad = max(int(num_edges), senders.size) - senders.size
    zeros = np.zeros(pad, np.int32)
    return Graph(
        np.concatenate([senders.astype(np.int32), zeros]),
        np.concatenate([receivers.astype(np.int32), zeros]),
        np.concatenate([np.asarray(g.weights, np.float32), np.zeros(pad, np.float32)]),
        g.num_nodes,
    )


def degree(g: Graph) -> jax.Array:
    r"""Node degrees :math:`d_i = \sum_j S_{ij}`, float [n].

    Parameters
    ----------
    g : Graph
        The graph.

    Returns
    -------
    jax.Array
        Degrees, float [n].
    """
    return jax.ops.segment_sum(g.weights, g.senders, num_segments=g.num_nodes)


def mean_degree(g: Graph) -> float:
    r"""Mean degree :math:`\bar d = \frac1n \sum_{ij} S_{ij}` (total edge weight per
    node, each undirected edge counted from both ends), a Python float.

    The scale of a graph penalty: :math:`\lambda R` with :math:`R` summed over the
    edges grows with the graph's size and density, :math:`(\lambda/\bar d) R` does
    not (it is the penalty of the graph with its weights divided by :math:`\bar d`,
    whose mean degree is 1). A graph without edges gives 1.0 (no penalty to scale).
    Accepts any object with ``weights`` and ``num_nodes`` (padding edges weigh 0).

    Parameters
    ----------
    g : Graph
        The graph (or any object with ``weights`` and ``num_nodes``).

    Returns
    -------
    float
        The mean degree (1.0 for a graph without edges).
    """
    total = float(np.asarray(g.weights, np.float64).sum())
    return total / int(g.num_nodes) if total > 0 else 1.0


def laplacian_diagonal(g: Graph) -> jax.Array:
    r"""Diagonal of :math:`L = D - S`: :math:`d_i - S_{ii}` (a self-loop adds to the
    degree and to :math:`S_{ii}` alike, so it cancels), float [n].

    Parameters
    ----------
    g : Graph
        The graph, self-loops allowed.

    Returns
    -------
    jax.Array
        Diagonal of :math:`L`, float [n].
    """
    loops = jnp.where(g.senders == g.receivers, g.weights, 0.0)
    return degree(g) - jax.ops.segment_sum(loops, g.senders, num_segments=g.num_nodes)


def induced_subgraph(g: Graph, index: ArrayLike) -> Graph:
    """The graph among the nodes ``index`` (node ``index[b]`` becomes node ``b``).

    Works under ``jit`` with a traced ``index``: every edge keeps its slot (the shapes
    do not depend on the values); an edge with an endpoint outside ``index`` gets
    weight 0 and endpoints clamped into range, so it adds nothing to :math:`L f`,
    :math:`S f`, the degrees or :func:`laplacian_penalty`.

    Parameters
    ----------
    g : Graph
    index : int array [B]
        Distinct nodes of ``g``.

    Returns
    -------
    Graph
        ``num_nodes = B``, as many (stored) edges as ``g``.
    """
    index = jnp.asarray(index)
    batch = index.shape[0]
    position = jnp.full(g.num_nodes, -1).at[index].set(jnp.arange(batch))
    senders, receivers = position[g.senders], position[g.receivers]
    inside = (senders >= 0) & (receivers >= 0)
    return Graph(
        senders=jnp.maximum(senders, 0),
        receivers=jnp.maximum(receivers, 0),
        weights=jnp.where(inside, g.weights, 0.0),
        num_nodes=batch,
    )


def _edge_weights(g: Graph, f: jax.Array) -> jax.Array:
    return g.weights.reshape((-1,) + (1,) * (f.ndim - 1))


def adjacency_matvec(g: Graph, f: ArrayLike) -> jax.Array:
    r"""Adjacency product :math:`(S f)_i = \sum_j S_{ij} f_j`, ``f`` [n] or [n, m].

    Parameters
    ----------
    g : Graph
        The graph.
    f : array_like [n] or [n, m]
        Node values.

    Returns
    -------
    jax.Array
        :math:`S f`, the shape of ``f``.
    """
    f = jnp.asarray(f)
    msgs = _edge_weights(g, f) * f[g.receivers]
    return jax.ops.segment_sum(msgs, g.senders, num_segments=g.num_nodes)


def laplacian_matvec(g: Graph, f: ArrayLike) -> jax.Array:
    r"""Unnormalized Laplacian product :math:`L f = (D - S) f`, ``f`` [n] or [n, m].

    Parameters
    ----------
    g, f
        As :func:`adjacency_matvec` takes them.

    Returns
    -------
    jax.Array
        :math:`L f`, shaped as ``f``.
    """
    f = jnp.asarray(f)
    d = degree(g).reshape((-1,) + (1,) * (f.ndim - 1))
    return d * f - adjacency_matvec(g, f)


def normalized_laplacian_matvec(g: Graph, f: ArrayLike) -> jax.Array:
    r"""Symmetric normalized Laplacian :math:`f - D^{-1/2} S D^{-1/2} f`.

    Isolated nodes (zero degree) get a zero row and column, as in
    ``scipy.sparse.csgraph.laplacian(S, normed=True)``.

    Parameters
    ----------
    g : Graph
        The graph; its isolated nodes get a zero row and column.
    f : array_like [n] or [n, m]
        Node values.

    Returns
    -------
    jax.Array
        The normalized Laplacian times ``f``, the shape of ``f``.
    """
    f = jnp.asarray(f)
    d = degree(g)
    isolated = d <= 0
    inv_sqrt = jnp.where(isolated, 0.0, 1.0 / jnp.sqrt(jnp.where(isolated, 1.0, d)))
    shape = (-1,) + (1,) * (f.ndim - 1)
    inv_sqrt, keep = inv_sqrt.reshape(shape), (~isolated).reshape(shape)
    return jnp.where(keep, f, 0.0) - inv_sqrt * adjacency_matvec(g, inv_sqrt * f)


def laplacian_penalty(
    g: Graph, q: ArrayLike, distance: str = "sq_euclidean"
) -> jax.Array:
    r"""Graph penalty :math:`P = \sum_{i,j} S_{ij}\, d(q_i, q_j)` over ordered pairs.

    Parameters
    ----------
    g : Graph
        Symmetric graph (each undirected edge counted twice, once per direction).
    q : float array [n, K]
        One row per node, e.g. topic distributions :math:`\phi_i`.
    distance : {"sq_euclidean", "sym_kl"}
        ``"sq_euclidean"``: :math:`\|q_i - q_j\|^2`.
        ``"sym_kl"``: :math:`KL(q_i\|q_j) + KL(q_j\|q_i) = \sum_k (q_{ik} - q_{jk})
        (\log q_{ik} - \log q_{jk})`, with the logs taken of
        :math:`\max(q, \epsilon)`, :math:`\epsilon` = ``SYM_KL_EPS`` = 1e-10.

    Returns
    -------
    float scalar
        The penalty; differentiable in ``q``. For squared Euclidean,
        :math:`\partial P / \partial q_i = 4 (L Q)_i`; DESIGN's (seed 000)
        :math:`R = \tfrac12 \sum_{ij} S_{ij}\|\phi_i - \phi_j\|^2` is ``P / 2`` with
        :math:`\partial R/\partial \phi_i = 2 (d_i \phi_i - \sum_j S_{ij} \phi_j)`.

    References
    ----------
    Seed 000: graph-regularized variational inference for image annotation
    (Laplacian penalty on the variational free energy).
    """
    if distance not in PENALTY_DISTANCES:
        raise ValueError(
            f"unknown distance {distance!r}; valid choices: "
            f"{', '.join(PENALTY_DISTANCES)}"
        )
    q = jnp.asarray(q)
    if q.ndim != 2 or q.shape[0] != g.num_nodes:
        raise ValueError(f"q must be [num_nodes={g.num_nodes}, K], got shape {q.shape}")
    qs, qr = q[g.senders], q[g.receivers]
    if distance == "sq_euclidean":
        per_edge = jnp.sum((qs - qr) ** 2, axis=1)
    else:
        logs = jnp.log(jnp.maximum(q, SYM_KL_EPS))
        per_edge = jnp.sum((qs - qr) * (logs[g.senders] - logs[g.receivers]), axis=1)
    return jnp.sum(g.weights * per_edge)


def to_scipy(g: Graph) -> scipy.sparse.csr_matrix:
    """The adjacency :math:`S` as a ``scipy.sparse.csr_matrix`` [n, n] (float32).

    Parameters
    ----------
    g : Graph
        The graph to convert.

    Returns
    -------
    scipy.sparse.csr_matrix
        Adjacency [n, n], float32.
    """
    return scipy.sparse.csr_matrix(
        (
            np.asarray(g.weights, np.float32),
            (np.asarray(g.senders), np.asarray(g.receivers)),
        ),
        shape=(g.num_nodes, g.num_nodes),
    )


def from_scipy(matrix: ArrayLike | scipy.sparse.spmatrix) -> Graph:
    """Graph from a symmetric sparse (or dense) adjacency; the diagonal is dropped.

    Parameters
    ----------
    matrix : scipy.sparse matrix or array_like [n, n]
        Symmetric adjacency with finite non-negative weights.

    Returns
    -------
    Graph
        Its off-diagonal edges, sorted by sender then receiver.

    Raises
    ------
    ValueError
        If the matrix is not square, not symmetric, or has negative/non-finite weights.
    """
    m = scipy.sparse.coo_matrix(matrix)
    if m.shape[0] != m.shape[1]:
        raise ValueError(f"adjacency must be square, got shape {m.shape}")
    m.sum_duplicates()
    off = (m.row != m.col) & (m.data != 0)
    m = scipy.sparse.csr_matrix((m.data[off], (m.row[off], m.col[off])), shape=m.shape)
    if m.nnz and abs(m - m.T).max() > 0:
        raise ValueError("adjacency must be symmetric (S == S.T)")
    coo = m.tocoo()
    if not np.all(np.isfinite(coo.data)) or np.any(coo.data < 0):
        raise ValueError("adjacency weights must be finite and non-negative")
    order = np.lexsort((coo.col, coo.row))
    return Graph(
        senders=jnp.asarray(coo.row[order], jnp.int32),
        receivers=jnp.asarray(coo.col[order], jnp.int32),
        weights=jnp.asarray(coo.data[order], jnp.float32),
        num_nodes=int(m.shape[0]),
    )


def as_graph(
    graph: Graph | ArrayLike | scipy.sparse.spmatrix, name: str = "graph"
) -> Graph:
    """``graph`` as a :class:`Graph`: a Graph as it is, a square adjacency matrix
    (dense NumPy / JAX array or ``scipy.sparse``) through :func:`from_scipy`.

    Parameters
    ----------
    graph : Graph, an object with its fields, array [n, n] or scipy.sparse matrix
    name : str
        The argument's name, for the message.

    Returns
    -------
    Graph

    Raises
    ------
    TypeError
        Anything else (the message names the argument and the constructors).
    ValueError
        A matrix that is not square, not symmetric, or has negative or non-finite
        weights (:func:`from_scipy`).
    """
    if isinstance(graph, Graph) or all(
        hasattr(graph, field)
        for field in ("senders", "receivers", "weights", "num_nodes")
    ):
        return graph  # a Graph, or an object with its four fields (duck-typed)
    if scipy.sparse.issparse(graph) or (
        isinstance(graph, np.ndarray | jax.Array) and np.ndim(graph) == 2
    ):
        try:
            return from_scipy(
                np.asarray(graph) if not scipy.sparse.issparse(graph) else graph
            )
        except ValueError as error:
            raise ValueError(f"{name}: {error}") from error
    shape = f" of shape {list(np.shape(graph))}" if hasattr(graph, "shape") else ""
    raise TypeError(
        f"{name}: expected a jaxannot.graph.Graph or a square adjacency matrix "
        f"[n, n], got {type(graph).__name__}{shape}: build one with "
        "jaxannot.graph.knn_graph(features, k) or from_scipy(adjacency)"
    )
