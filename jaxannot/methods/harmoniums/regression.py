"""``mmh-regression``'s data and read-outs: the response and the inputs of a corpus,
and the real predictions of a fitted model (seed 001 §4.2)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

import jax
import jax.numpy as jnp

from jaxannot.annotators.base import Fitted
from jaxannot.methods.harmoniums import mmh_steps
from jaxannot.methods.harmoniums.dwh_annotators import embed_harmonium
from jaxannot.methods.harmoniums.views import labels_of

if TYPE_CHECKING:
    from jaxannot.data.corpus import Corpus

__all__ = ["predict_regression", "regression_data", "regression_response"]


def _drop_view(corpus, name: str):
    keep = [k for k in corpus.views if k != name]
    return dataclasses.replace(
        corpus,
        views={k: corpus.views[k] for k in keep},
        view_kinds={k: corpus.view_kinds[k] for k in keep},
        feature_names={k: v for k, v in corpus.feature_names.items() if k != name},
    )


def regression_data(
    corpus: Corpus, hyper: Mapping[str, Any]
) -> tuple[Corpus, np.ndarray]:
    """(input corpus, raw targets) of ``mmh-regression``; ``ValueError`` without one."""
    name = hyper["target_view"]
    if not name:
        labels, _ = labels_of(corpus, "mmh-regression")
        corpus = corpus.subset(labels >= 0)
        return corpus, np.asarray(corpus.labels, np.float32)
    if name not in corpus.views or corpus.view_kinds[name] != "real":
        raise ValueError(
            f"target_view {name!r} is not a real view of {corpus.name!r}; real "
            f"views: {[v for v in corpus.views if corpus.view_kinds[v] == 'real']}"
        )
    target = np.asarray(corpus.views[name], np.float32)[:, hyper["target_column"]]
    if len(corpus.views) == 1:
        raise ValueError(
            f"target_view {name!r} is the only view: nothing to regress on"
        )
    return _drop_view(corpus, name), target


def predict_regression(fitted: Fitted, corpus: Corpus) -> jax.Array:
    """Real predictions ``[images]``: :math:`\\bar y + s_y V^\\top [E_{q_0}[h], 1]`."""
    name = fitted.hyper["target_view"]
    if name and name in corpus.views:
        corpus = _drop_view(corpus, name)
    feats = mmh_steps.with_offset(embed_harmonium(fitted, corpus))
    value = feats @ jnp.asarray(fitted.params.predictor)
    return fitted.info["target_mean"] + fitted.info["target_std"] * value


def regression_response(fitted: Fitted, corpus: Corpus) -> np.ndarray | None:
    """The true response ``[images]`` that :func:`predict_regression` predicts:
    column ``target_column`` of view ``target_view``, or None when the response is
    the class label read as a number (the task's true labels are then the truth)."""
    name = fitted.hyper["target_view"]
    if not name:
        return None
    if name not in corpus.views:
        raise KeyError(
            f"the model regresses view {name!r}; corpus views: {list(corpus.views)}"
        )
    return np.asarray(corpus.views[name], np.float64)[:, fitted.hyper["target_column"]]
