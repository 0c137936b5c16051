"""The graph toys of the LapVar and LaplacianELBO benchmarks and tests
(``benchmarks.claims.graph_regularization``, :mod:`benchmarks.common.weak_bernoulli`,
``tests/inference``): a mixture of unigrams whose k-NN-like graph carries the cluster
signal.

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


class WeakBernoulli(NamedTuple):
    x: np.ndarray  # float32 [n, features], 0/1
    graph: Graph
    truth: np.ndarray  # int [n]
    same_cluster_edges: float


def weak_bernoulli(
    n: int = 600,
    *,
    clusters: int = 4,
    features: int = 30,
    contrast: float = 0.12,
    view_separation: float = 1.0,
    view_dim: int = 5,
    neighbors: int = 10,
    random_graph: bool = False,
    seed: int = 0,
) -> WeakBernoulli:
    """A weak Bernoulli mixture whose k-NN graph, from a second view, carries the
    classes (issue 43's fourth model).

    Each item draws its class uniformly, then ``features`` Bernoulli features with
    probabilities :math:`0.5 \\pm` ``contrast`` (a random sign per class and feature):
    plain EM recovers the classes only in part. A second view, Gaussian in
    ``view_dim`` dimensions around a class mean at ``view_separation`` per
    coordinate, gives the ``neighbors``-NN graph (binary weights);
    ``random_graph=True`` replaces it by a random graph of the same mean degree
    (noise: it carries nothing).
    """
    from jaxannot.graph import knn_graph

    rng = np.random.default_rng(seed)
    z = rng.integers(clusters, size=n)
    signs = rng.choice([-1.0, 1.0], size=(clusters, features))
    rho = 0.5 + contrast * signs
    x = (rng.random((n, features)) < rho[z]).astype(np.float32)
    means = rng.normal(0.0, view_separation, (clusters, view_dim))
    view = (means[z] + rng.normal(size=(n, view_dim))).astype(np.float32)
    graph = knn_graph(view, neighbors, weight="binary")
    if random_graph:
        pairs = set()
        while len(pairs) < int(np.asarray(graph.senders).size):
            i, j = (int(v) for v in rng.integers(n, size=2))
            if i != j:
                pairs |= {(i, j), (j, i)}
        edges = np.array(sorted(pairs), np.int32)
        graph = Graph(edges[:, 0], edges[:, 1], np.ones(len(edges), np.float32), n)
    s, r = np.asarray(graph.senders), np.asarray(graph.receivers)
    same = float(np.mean(z[s] == z[r]))
    return WeakBernoulli(x, graph, z, same)


def bernoulli_mixture(x, num_classes: int):
    """The numpyro declaration of the weak Bernoulli mixture (Beta(2, 2) priors)."""
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    n, d = x.shape
    pi = numpyro.sample("pi", dist.Dirichlet(jnp.ones(num_classes)))
    with numpyro.plate("class", num_classes):
        rho = numpyro.sample("rho", dist.Beta(2.0, 2.0).expand([d]).to_event(1))
    with numpyro.plate("image", n) as idx:
        z = numpyro.sample("z", dist.Categorical(pi))
        numpyro.sample("x", dist.Bernoulli(rho[z]).to_event(1), obs=x[idx])


def bernoulli_m_step(phi, x, num_classes: int):
    """The closed-form MAP M-step of :func:`bernoulli_mixture`."""

    mass = phi.sum(0)
    return {
        "pi": mass / mass.sum(),
        "rho": (phi.T @ x + 1.0) / (mass[:, None] + 2.0),
    }
