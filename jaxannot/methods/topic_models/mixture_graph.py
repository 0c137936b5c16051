"""The graph pieces of ``lap-mix-unigram`` (:mod:`.mixture_annotators`).

The k-NN graph of the fit images' visual words and its heat width
(:func:`fit_graph`, ``lap-link-lda``'s graph too), LapVar1's E-step on the graph
(:func:`lapvar1_estep`) and the batched Newton update that folds in new images
linked to the graph (:func:`newton_batch`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

import jax

from jaxannot.inference import lapvar, lapvar_update

if TYPE_CHECKING:
    from jaxannot.graph import Graph
    from jaxannot.types import Array

__all__ = ["fit_graph", "joined_features", "lapvar1_estep", "newton_batch"]


def joined_features(views: tuple[np.ndarray, ...]) -> np.ndarray:
    """The images' visual words, the views side by side (what the graph is built on).

    Parameters
    ----------
    views : tuple of numpy.ndarray
        The visual views ``[images, dims_v]``.

    Returns
    -------
    numpy.ndarray
        ``[images, sum of dims_v]``; a single view itself, not a copy (at 1M images
        of 60 visual words a copy is 240 MB more, kept by the fitted model).
    """
    return views[0] if len(views) == 1 else np.concatenate(views, axis=1)


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


def lapvar1_estep(
    graph: Graph, lam: float, sweeps: int, newton_steps: int, schedule: str
) -> lapvar.LapVar1:
    """LapVar1's E-step on ``graph``. The colour classes of a graph are fixed
    (colouring seed 0), so a refit with another key reuses the compiled fit; sweeps
    visit them in a random order.

    Parameters
    ----------
    graph : Graph
        The fit images' graph.
    lam : float
        The Laplacian penalty's weight.
    sweeps : int
        Sweeps over the images per E-step.
    newton_steps : int
        Newton steps per image update.
    schedule : str
        ``"colouring"`` or ``"sequential"``.

    Returns
    -------
    LapVar1
        The E-step (no held-out check of ``lam``: it is a hyper-parameter here).
    """
    return lapvar.LapVar1(
        graph,
        lam,
        sweeps=int(sweeps),
        newton_steps=int(newton_steps),
        schedule=schedule,
        heldout_check=False,  # lap-mix-unigram's lam is its own hyper-parameter
    )


@jax.jit
def newton_batch(phi0: Array, a: Array, m: Array, d: Array, lam: Array) -> Array:
    """:func:`~jaxannot.inference.lapvar_update.newton_update` of every image at once.

    Parameters
    ----------
    phi0 : Array
        The images' start posteriors ``[n, K]``.
    a : Array
        Their log joints ``[n, K]``.
    m : Array
        Their neighbour sums ``[n, K]``.
    d : Array
        Their degrees ``[n]``.
    lam : Array
        The Laplacian penalty's weight (a scalar).

    Returns
    -------
    Array
        The updated posteriors ``[n, K]``.
    """
    return jax.vmap(lapvar_update.newton_update, in_axes=(0, 0, 0, 0, None))(
        phi0, a, m, d, lam
    )
