"""The colour blocks of a large graph are cut at an edge budget: smaller tables, the
same LapVar1 sweep."""

import importlib
from typing import NamedTuple

import numpy as np
import pytest

import jax
import jax.numpy as jnp

from jaxannot.graph import knn_graph
from jaxannot.inference import lapvar

#: the module (jaxannot.graph exports its function of the same name)
nt = importlib.import_module("jaxannot.graph.neighbour_table")


class _Graph(NamedTuple):
    senders: np.ndarray
    receivers: np.ndarray
    weights: np.ndarray
    num_nodes: int


def _hub_graph(n: int, seed: int) -> _Graph:
    """Each node linked to 4 random nodes and to one of the 64 first (hubs, as the
    lowest index of a group of equal rows is in a k-NN graph), both directions."""
    rng = np.random.default_rng(seed)
    s = np.repeat(np.arange(n), 5)
    r = np.concatenate([rng.integers(0, n, (n, 4)), rng.integers(0, 64, (n, 1))], 1)
    s, r = np.concatenate([s, r.ravel()]), np.concatenate([r.ravel(), s])
    key = np.unique(s[s != r] * n + r[s != r])
    w = rng.uniform(0.2, 1.0, key.size).astype(np.float32)
    s, r = key // n, key % n
    w = np.maximum(w, w[np.searchsorted(key, r * n + s)])  # symmetric weights
    return _Graph(s, r, w, n)


@pytest.fixture(scope="module")
def tables():
    g = _hub_graph(1 << 16, 0)
    capped = nt.neighbour_table(g)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(nt, "EDGE_CAP_FROM", 1 << 30)
        uncapped = nt.neighbour_table(g)
    return g, capped, uncapped


def test_blocks_of_a_large_graph_keep_to_the_edge_budget(tables):
    g, capped, uncapped = tables
    b = capped.blocks
    n, size = g.num_nodes, b.members.shape[1]
    cap = nt._edge_cap(n, g.senders.size, size)
    members = np.asarray(b.members)[: int(b.count.sum())]
    real = members < n
    np.testing.assert_array_equal(np.sort(members[real]), np.arange(n))
    edges = (np.asarray(b.weights)[: members.shape[0]] > 0).sum(1)
    assert np.all((edges <= cap) | (real.sum(1) == 1))
    colour = np.full(n + 1, -1)
    for c, row in enumerate(np.asarray(capped.classes)):
        colour[row] = c
    assert all(len(set(colour[m[m < n]])) == 1 for m in members)  # one class each
    # the hubs' blocks padded every other block of the uncapped table (here 0.56)
    assert b.receivers.size < 0.6 * uncapped.blocks.receivers.size


def test_a_sweep_on_cut_blocks_is_the_sweep_on_whole_ones(tables):
    g, capped, uncapped = tables
    rng = np.random.default_rng(1)
    a = jnp.asarray(rng.normal(size=(g.num_nodes, 5)).astype(np.float32))
    phi = jax.nn.softmax(a, -1)
    key, lam = jax.random.key(2), jnp.float32(0.3)
    one = lapvar.lapvar1_sweep(key, phi, a, capped, lam)
    other = lapvar.lapvar1_sweep(key, phi, a, uncapped, lam)
    np.testing.assert_array_equal(np.asarray(one), np.asarray(other))
    np.testing.assert_allclose(
        float(lapvar.laplacian_penalty(one, capped)),
        float(lapvar.laplacian_penalty(one, uncapped)),
        rtol=1e-5,
    )


def test_small_graph_blocks_fit_its_largest_class():
    """Blocks no wider than the largest colour class's bucket (not 256 on the 10-NN
    graph of 600 points), and the same sweep, bit for bit, as in blocks of
    256."""
    points = np.random.default_rng(3).normal(size=(600, 2)).astype(np.float32)
    g = knn_graph(points, 10, weight="binary")
    table = nt.neighbour_table(g)
    largest = int((np.asarray(table.classes) < g.num_nodes).sum(1).max())
    assert table.blocks.members.shape[1] == nt.bucket(largest) < 256
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(nt, "_block_size", lambda n, largest: 256)
        wide = nt.neighbour_table(g)
    assert wide.blocks.members.shape[1] == 256
    a = jnp.asarray(np.random.default_rng(4).normal(size=(600, 4)).astype(np.float32))
    key, lam = jax.random.key(5), jnp.float32(0.3)
    sweeps = [lapvar.lapvar1_sweep(key, jax.nn.softmax(a, -1), a, t, lam)
              for t in (table, wide)]  # fmt: skip
    np.testing.assert_array_equal(np.asarray(sweeps[0]), np.asarray(sweeps[1]))
