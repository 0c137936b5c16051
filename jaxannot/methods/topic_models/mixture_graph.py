"""The graph pieces of ``lap-mix-unigram`` (:mod:`.mixture_annotators`).

The k-NN graph of the fit images' visual words and its heat width
(:func:`fit_graph`, ``lap-link-lda``'s graph too), the check of the Laplacian
E-step's settings (:func:`_check_lap`), LapVar1's E-step on the graph
(:func:`_lapvar1`) and the batched Newton update that folds in new images linked to
the graph (:func:`_newton_batch`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

import jax

from jaxannot.inference import lapvar, lapvar_update

if TYPE_CHECKING:
    from jaxannot.graph import Graph

__all__ = ["fit_graph"]


def _graph_features(views: tuple[np.ndarray, ...]) -> np.ndarray:
    return np.concatenate(views, axis=1)


def fit_graph(
    feats: np.ndarray, neighbors: int, metric: str, weight: str
) -> tuple[Graph, float]:
    """The k-NN graph of the fit images' visual words (one search) and its heat
    width ``t``, the mean neighbour distance (1 when it is 0).

    Parameters
    ----------
    feats : np.ndarray [images, dims]
        The fit images' visual words, the views side by side.
    neighbors : int
        Neighbours per image (at most ``images - 1`` are taken).
    metric : str
        The search's distance (:func:`~jaxannot.graph.knn_search`).
    weight : str
        The edges' weight (:func:`~jaxannot.graph.neighbour_graph`).

    Returns
    -------
    tuple of (Graph, float)
        The symmetric graph and ``t``.
    """
    from jaxannot.graph import knn_search, neighbour_graph

    k = min(int(neighbors), feats.shape[0] - 1)
    idx, dist = knn_search(feats, feats, k, metric=metric, exclude_self=True)
    t = float(np.mean(np.asarray(dist))) or 1.0
    return neighbour_graph(feats, idx, dist, weight=weight, t=t), t


def _check_lap(algorithm: str, lam: float) -> None:
    if algorithm not in lapvar.ALGORITHMS:
        raise ValueError(
            f"unknown algorithm {algorithm!r}; valid: {list(lapvar.ALGORITHMS)}"
        )
    if lam < 0:
        raise ValueError(f"lam must be >= 0, got {lam}")


def _lapvar1(graph, lam, sweeps, newton_steps, schedule) -> lapvar.LapVar1:
    """LapVar1's E-step on ``graph``. The colour classes of a graph are fixed
    (colouring seed 0), so a refit with another key reuses the compiled fit; sweeps
    visit them in a random order."""
    return lapvar.LapVar1(
        graph,
        lam,
        sweeps=int(sweeps),
        newton_steps=int(newton_steps),
        schedule=schedule,
        heldout_check=False,  # lap-mix-unigram's lam is its own hyper-parameter
    )


@jax.jit
def _newton_batch(phi0, a, m, d, lam):
    return jax.vmap(lapvar_update.newton_update, in_axes=(0, 0, 0, 0, None))(
        phi0, a, m, d, lam
    )
