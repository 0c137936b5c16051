"""A mixture of unigrams whose k-NN-like graph carries the cluster signal (test-only
helper, also loaded by ``benchmarks/graph_regularization.py``).

Each item draws its cluster uniformly, then ``words`` words from its cluster's
word distribution (Dirichlet(``concentration``) over ``vocabulary`` words), so plain
EM recovers the clusters only in part; each item picks ``neighbors`` neighbours, from
its own cluster with probability ``same`` and uniformly otherwise, and the graph is
their symmetric union with unit weights (about 73 % of its edges join one cluster at
the defaults).
"""

from typing import NamedTuple

import numpy as np

from jaxannot.graph import Graph

__all__ = ["GraphToy", "graph_toy"]


class GraphToy(NamedTuple):
    counts: np.ndarray  # float32 [n, vocabulary]
    graph: Graph
    truth: np.ndarray  # int [n]
    same_cluster_edges: float


def graph_toy(
    n: int = 300,
    *,
    clusters: int = 4,
    vocabulary: int = 50,
    words: int = 6,
    concentration: float = 1.0,
    neighbors: int = 10,
    same: float = 0.65,
    seed: int = 0,
) -> GraphToy:
    """Draw the toy (module docstring)."""
    rng = np.random.default_rng(seed)
    z = rng.integers(clusters, size=n)
    beta = rng.dirichlet(np.full(vocabulary, concentration), size=clusters)
    counts = np.stack([rng.multinomial(words, beta[c]) for c in z]).astype(np.float32)
    members = [np.flatnonzero(z == c) for c in range(clusters)]
    pairs = set()
    for i in range(n):
        for _ in range(neighbors):
            pool = members[z[i]] if rng.random() < same else np.arange(n)
            j = int(rng.choice(pool))
            if j != i:
                pairs |= {(i, j), (j, i)}
    edges = np.array(sorted(pairs), np.int32)
    graph = Graph(edges[:, 0], edges[:, 1], np.ones(len(edges), np.float32), int(n))
    same_frac = float(np.mean(z[edges[:, 0]] == z[edges[:, 1]]))
    return GraphToy(counts, graph, z, same_frac)
