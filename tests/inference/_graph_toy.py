"""The graph toys of these tests, written once in :mod:`benchmarks.common.graph_toy`
(the benchmarks measure the same toys)."""

from benchmarks.common.graph_toy import (
    GraphToy,
    WeakBernoulli,
    bernoulli_m_step,
    bernoulli_mixture,
    graph_toy,
    weak_bernoulli,
)

__all__ = [
    "GraphToy",
    "WeakBernoulli",
    "bernoulli_m_step",
    "bernoulli_mixture",
    "graph_toy",
    "weak_bernoulli",
]
