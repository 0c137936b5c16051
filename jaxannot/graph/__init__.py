"""k-NN graphs over images and their Laplacian operators (edge lists, never n x n).

See :mod:`jaxannot.graph.knn` (search, graph construction, weights, symmetrization) and
:mod:`jaxannot.graph.laplacian` (the :class:`Graph` pytree, degree, ``S f``, ``L f``,
normalized Laplacian, the penalty ``sum_ij S_ij d(q_i, q_j)``) and
:mod:`jaxannot.graph.neighbour_table` (edge lists with colour classes for per-node
updates).
"""

from jaxannot.graph.knn import (
    KNN_METRICS,
    KNN_WEIGHTS,
    edge_weights,
    knn_graph,
    knn_search,
    neighbour_graph,
)
from jaxannot.graph.laplacian import (
    PENALTY_DISTANCES,
    SYM_KL_EPS,
    Graph,
    adjacency_matvec,
    as_graph,
    degree,
    from_scipy,
    induced_subgraph,
    laplacian_diagonal,
    laplacian_matvec,
    laplacian_penalty,
    mean_degree,
    normalized_laplacian_matvec,
    pad_edges,
    to_scipy,
)
from jaxannot.graph.neighbour_table import NeighbourTable, neighbour_table

__all__ = [
    "Graph",
    "NeighbourTable",
    "neighbour_table",
    "KNN_METRICS",
    "KNN_WEIGHTS",
    "PENALTY_DISTANCES",
    "SYM_KL_EPS",
    "adjacency_matvec",
    "degree",
    "edge_weights",
    "as_graph",
    "from_scipy",
    "induced_subgraph",
    "laplacian_diagonal",
    "knn_graph",
    "knn_search",
    "neighbour_graph",
    "laplacian_matvec",
    "laplacian_penalty",
    "mean_degree",
    "normalized_laplacian_matvec",
    "pad_edges",
    "to_scipy",
]
