r"""TagProp annotator: the numpyro TagProp model fitted by the generic :class:`MAP`.

``tagprop``
    Guillaumin, Mensink, Verbeek, Schmid, "TagProp: Discriminative metric learning in
    nearest neighbor models for image auto-annotation", ICCV 2009. The model and its
    priors are :func:`jaxannot.methods.baselines.tagprop.tagprop`; fitting is
    ``MAP(tagprop).run(...)`` (maximum of the log joint by Adam, no hand-written
    gradient) on the leave-one-out neighbourhoods of the training images. A new image
    is scored by :math:`p(y_{iw} = 1)` from its ``neighbors`` nearest training images.

Base distances (``distances``, comma-separated; each divided by its standard deviation
over the training neighbour pairs so that :math:`\theta` is scale-free), for
non-negative features :math:`x`:

``cosine``      :math:`1 - \cos(x_i, x_j)`
``sqeuclidean`` :math:`\|x_i - x_j\|^2` (the Hamming distance for binary features)
``jaccard``     :math:`1 - \sum_f \min(x_{if}, x_{jf}) / \sum_f \max(x_{if}, x_{jf})`
``idf``         :math:`-\sum_f \mathrm{idf}_f \min(x_{if}, x_{jf})`,
                :math:`\mathrm{idf}_f = \log(n / (1 + n_f))`, :math:`n_f` the training
                images with feature :math:`f` (shared rare features count most)

Neighbours are chosen by ``metric`` (``knn_search``: cosine or euclidean). Defaults
were chosen by 3-fold cross-validation on the Corel5k *training* split (word F1@5),
see ``docs/tagprop.md``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

import jax
import jax.numpy as jnp
import optax

from jaxannot.annotators.base import (
    Fitted,
    database_and_queries,
    register_words_method,
    show_progress,
)
from jaxannot.annotators.hyper_spec import (
    uses_defaults,
)
from jaxannot.data.corpus import Corpus
from jaxannot.graph import knn_search
from jaxannot.inference.map_estimate import MAP
from jaxannot.inference.support import check_finite_tree, check_support
from jaxannot.methods.baselines.params import TagPropLatent, TagPropParams
from jaxannot.methods.baselines.tagprop import (
    class_weights,
    neighbor_vote,
    neighbor_weights,
    tagprop,
    word_lists,
    word_probability_logits,
)
from jaxannot.runtime.programs import bounded_cache

__all__ = ["TAGPROP", "BASE_DISTANCES", "check_tagprop_support", "pair_distances"]

BASE_DISTANCES = ("cosine", "sqeuclidean", "jaccard", "idf")
_BLOCK = 256  # query images whose neighbour features are gathered at a time


def _distance_names(distances: str) -> tuple[str, ...]:
    """The base distances a ``distances`` setting names (checked by its spec)."""
    return tuple(n.strip() for n in distances.split(","))


def _one_distance(name: str, q, neighbors, idf):
    """Base distance ``name`` of queries ``q`` [b, d] to ``neighbors`` [b, K, d]."""
    if name == "cosine":
        norms = jnp.linalg.norm(q, axis=-1)[:, None] * jnp.linalg.norm(
            neighbors, axis=-1
        )
        dot = jnp.einsum("bd,bkd->bk", q, neighbors)
        return 1.0 - jnp.where(norms > 0, dot / jnp.where(norms > 0, norms, 1.0), 0.0)
    if name == "sqeuclidean":
        return jnp.sum((q[:, None, :] - neighbors) ** 2, axis=-1)
    overlap = jnp.minimum(q[:, None, :], neighbors)
    if name == "idf":
        return -(overlap @ idf)
    union = jnp.maximum(q[:, None, :], neighbors).sum(-1)
    return 1.0 - jnp.where(
        union > 0, overlap.sum(-1) / jnp.where(union > 0, union, 1), 0
    )


@functools.partial(jax.jit, static_argnames=("names",))
def _blocked_distances(query_blocks, index_blocks, database, idf, names):
    def block(args):
        q, idx = args
        neighbors = database[idx]
        return jnp.stack([_one_distance(n, q, neighbors, idf) for n in names], axis=-1)

    return jax.lax.map(block, (query_blocks, index_blocks))


def pair_distances(
    queries: dict[str, np.ndarray],
    database: dict[str, np.ndarray],
    indices: np.ndarray,
    names: Sequence[str],
    idf: np.ndarray | None,
) -> np.ndarray:
    r"""Base distances ``[q, K, D]`` between each query and its neighbours ``indices``.

    Parameters
    ----------
    queries : array [q, d]
    database : array [n, d]
    indices : int array [q, K]
        Rows of ``database``.
    names : tuple of str
        Base distances from :data:`BASE_DISTANCES`.
    idf : array [d]
        Inverse document frequencies of the features (used by ``"idf"``).
    """
    q, k = indices.shape
    num_blocks = -(-q // _BLOCK)
    pad = num_blocks * _BLOCK - q
    queries = jnp.pad(jnp.asarray(queries, jnp.float32), ((0, pad), (0, 0)))
    indices = jnp.pad(jnp.asarray(indices), ((0, pad), (0, 0)))
    out = _blocked_distances(
        queries.reshape(num_blocks, _BLOCK, -1),
        indices.reshape(num_blocks, _BLOCK, k),
        jnp.asarray(database, jnp.float32),
        jnp.asarray(idf, jnp.float32),
        tuple(names),
    )
    return out.reshape(num_blocks * _BLOCK, k, len(names))[:q]


def _training_words(corpus: Corpus) -> tuple[np.ndarray, np.ndarray]:
    mask, words = corpus.observed_words()
    rows = np.flatnonzero(mask)
    if rows.size < 2:
        raise ValueError("TagProp needs at least 2 training images with observed words")
    return rows, (words[rows] > 0).astype(np.float32)


@bounded_cache()
def _map(learning_rate: float) -> MAP:
    """One MAP fitter per learning rate, shared by every fit (compiled once per
    shape)."""
    return MAP(tagprop, optax.adam(learning_rate))


def _scaled_pair_distances(features, idx, names, idf):
    """The training neighbour pairs' base distances, each divided by its standard
    deviation over the pairs, and those deviations."""
    pair = pair_distances(features, features, idx, names, idf)
    scale = jnp.maximum(jnp.std(pair.reshape(-1, len(names)), axis=0), 1e-6)
    return pair / scale, scale


@uses_defaults("tagprop")
def _tagprop_fit(
    corpus: Corpus,
    *,
    rng_key,
    neighbors: int,
    variant: str,
    distances: str,
    boosting: bool,
    balance: str,
    metric: str,
    steps: int,
    learning_rate: float,
    view: str,
) -> Fitted:
    names = _distance_names(distances)
    rows, words = _training_words(corpus)
    features = corpus.features(view)[rows]
    if names != ("cosine",) and (features < 0).any() and variant == "distance":
        raise ValueError("the base distances need non-negative features")
    k = min(neighbors, len(rows) - 1)
    idx, _ = knn_search(features, features, k, metric=metric, exclude_self=True)
    idf = np.log(len(rows) / (1.0 + (features > 0).sum(axis=0))).astype(np.float32)
    word_ids, word_mask = word_lists(words)
    pair = scale = None
    if variant == "distance":
        pair, scale = _scaled_pair_distances(features, idx, names, idf)
    data = (idx, word_ids, word_mask, pair, words)
    data += (class_weights(words, balance),)
    result = _map(float(learning_rate)).run(
        rng_key,
        steps,
        *data,
        progress_bar=show_progress(),
        num_words=words.shape[1],
        variant=variant,
        boosting=boosting,
        init_params=_initial_values(words, variant, len(names), boosting),
    )
    params = TagPropParams(
        features=features,
        word_ids=word_ids,
        word_mask=word_mask,
        idf=idf,
        distance_scale=np.ones(len(names), np.float32) if scale is None else scale,
        latent=TagPropLatent(**{k: np.asarray(v) for k, v in result.params.items()}),
    )
    check_tagprop_support(params, steps)
    hyper = {"distances": ",".join(names), "balance": balance}  # normalized
    info = {
        "num_words": int(words.shape[1]),
        "neighbors_used": k,
        "final_loss": float(result.losses[-1]) if steps else None,
    }
    return Fitted("tagprop", params, hyper, info)


def check_tagprop_support(params: TagPropParams, iteration: int | str) -> None:
    """Raise :class:`~jaxannot.inference.support.SupportError` unless TagProp's
    fitted ``params`` lie in their support (its priors'): every floating array
    finite, the rank weights ``gamma`` on the simplex (Dirichlet), the distance
    weights ``theta`` and the word slopes ``alpha`` non-negative (half-normal) and
    every ``distance_scale`` positive (the distances are divided by it).

    Parameters
    ----------
    params : TagPropParams
        The fitted params.
    iteration : int or str
        The MAP optimizer's last step, for the message.
    """
    check_finite_tree("tagprop", params, iteration=iteration)
    latent = params.latent
    if latent.gamma is not None:
        check_support(
            "tagprop: gamma", latent.gamma, iteration=iteration, simplex_axis=-1
        )
    for site in ("theta", "alpha"):
        value = getattr(latent, site)
        if value is not None:
            check_support(f"tagprop: {site}", value, iteration=iteration)
    check_support(
        "tagprop: distance_scale",
        params.distance_scale,
        iteration=iteration,
        lower=float(np.finfo(np.float32).tiny),
    )


def _initial_values(words, variant: str, num_distances: int, boosting: bool) -> dict:
    """Start: θ = 1 (scaled distances) and β_w at the word's log-odds, α_w = 5.

    With α_w = 5 and β_w = logit(f_w) - 2.5, a word voted by half the neighbours gets
    about its training frequency f_w; the optimizer moves from there.
    """
    init = (
        {"theta": np.ones(num_distances, np.float32)} if variant == "distance" else {}
    )
    if boosting:
        freq = np.clip(words.mean(axis=0), 1e-4, 1 - 1e-4)
        init["alpha"] = np.full(words.shape[1], 5.0, np.float32)
        init["beta"] = (np.log(freq) - np.log1p(-freq) - 2.5).astype(np.float32)
    return init


def _tagprop_score(fitted: Fitted, corpus: Corpus) -> np.ndarray:
    hyper, params = fitted.hyper, fitted.params
    database, queries = database_and_queries(fitted, corpus)
    latent = params.latent
    k = min(int(hyper["neighbors"]), database.shape[0] - 1)
    idx, _ = knn_search(queries, database, k, metric=hyper["metric"])
    pair = None
    if hyper["variant"] == "distance":
        names = _distance_names(hyper["distances"])
        pair = pair_distances(queries, database, idx, names, params.idf)
        pair = pair / jnp.asarray(params.distance_scale)
    pi = neighbor_weights(hyper["variant"], idx, pair, latent.gamma, latent.theta)
    votes = neighbor_vote(
        pi,
        idx,
        jnp.asarray(params.word_ids),
        jnp.asarray(params.word_mask),
        int(fitted.info["num_words"]),
    )
    logits = word_probability_logits(votes, latent.alpha, latent.beta)
    return np.asarray(jax.nn.sigmoid(logits))


TAGPROP = register_words_method(
    "tagprop",
    _tagprop_fit,
    "TagProp: neighbour word transfer with learned weights (MAP, numpyro)",
    score_words=_tagprop_score,
    params=TagPropParams,
    estimator_name="TagProp",
    score_meaning="p(word present | image), the TagProp model's sigmoid",
    non_negative=lambda hyper: (
        hyper.get("variant") == "distance"
        and str(hyper.get("distances", "")).replace(" ", "") != "cosine"
    ),
)
