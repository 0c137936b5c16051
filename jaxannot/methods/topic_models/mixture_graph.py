"""The graph pieces of ``lap-mix-unigram`` (:mod:`.mixture_annotators`).

The k-NN graph of the fit images' visual words and its heat width
(:func:`_fit_graph`), the check of the Laplacian E-step's settings
(:func:`_check_lap`), LapVar1's E-step on the graph (:func:`_lapvar1`) and the
batched Newton update that folds in new images linked to the graph
(:func:`_newton_batch`).
"""

from __future__ import annotations

import numpy as np

import jax

from jaxannot.inference import lapvar, lapvar_update


def _graph_features(views: tuple[np.ndarray, ...]) -> np.ndarray:
    return np.concatenate(views, axis=1)


def _fit_graph(feats: np.ndarray, neighbors: int, metric: str, weight: str):
    """The k-NN graph of the fit images' visual words (one search) and its heat
    width ``t``, the mean neighbour distance (1 when it is 0)."""
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
