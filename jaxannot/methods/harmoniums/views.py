"""How the harmonium methods read a corpus: each view's kind of wing and the scaling
of the real-valued ones (seed 001)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

import jax

from jaxannot.methods.harmoniums.params import ViewScaling

if TYPE_CHECKING:
    from jaxannot.data.corpus import Corpus
    from jaxannot.types import Array

__all__ = ["encode", "labels_of", "view_setup"]


def view_setup(
    corpus: Corpus, bag_model: str
) -> tuple[list[str], list[str], dict[str, ViewScaling]]:
    """The corpus's view names, each one's wing kind (``"gaussian"`` for a real view,
    ``"softmax"`` or ``"bernoulli"`` for a bag) and the real views' scaling."""
    if bag_model not in ("bernoulli", "softmax"):
        raise ValueError(f"unknown bag_model {bag_model!r}; valid: bernoulli, softmax")
    names = list(corpus.view_names)
    kinds, scaling = [], {}
    for name in names:
        x = np.asarray(corpus.views[name], np.float32)
        if corpus.view_kinds[name] == "real":
            kinds.append("gaussian")
            std = x.std(0)
            scaling[name] = ViewScaling(
                mean=x.mean(0).astype(np.float32),
                std=np.where(std > 1e-6, std, 1.0).astype(np.float32),
            )
        elif corpus.view_kinds[name] == "bag" and bag_model == "softmax":
            kinds.append("softmax")
        else:
            kinds.append("bernoulli")
    return names, kinds, scaling


def encode(
    corpus: Corpus,
    names: Sequence[str],
    kinds: Sequence[str],
    scaling: Mapping[str, ViewScaling],
) -> tuple[list[Array], list[Array]]:
    """The views ``names`` of ``corpus`` as wings of ``kinds`` (real views scaled,
    bags binary unless softmax) and each image's totals per wing."""
    views, totals = [], []
    n = corpus.num_images
    for name, kind in zip(names, kinds, strict=False):
        if name not in corpus.views:
            raise KeyError(
                f"the model was fitted on view {name!r}; corpus views: "
                f"{list(corpus.views)}"
            )
        x = np.asarray(corpus.views[name], np.float32)
        if kind == "gaussian":
            s = scaling[name]
            x = (x - np.asarray(s.mean)) / np.asarray(s.std)
            totals.append(np.ones(n, np.float32))
        elif kind == "softmax":
            totals.append(x.sum(1))
        else:
            x = (x > 0).astype(np.float32)
            totals.append(np.ones(n, np.float32))
        views.append(jax.device_put(x))  # jnp.asarray would compile per shape
    return views, [jax.device_put(t) for t in totals]


def labels_of(corpus: Corpus, method: str) -> tuple[np.ndarray, int]:
    """The class labels of ``corpus`` and their number; ``ValueError`` naming
    ``method`` when it has none."""
    if corpus.labels is None or not np.any(np.asarray(corpus.labels) >= 0):
        raise ValueError(
            f"method {method!r} needs class labels, but corpus {corpus.name!r} has "
            "none; use 'dwh' for annotation of a corpus with words only"
        )
    labels = np.asarray(corpus.labels)
    num_classes = corpus.num_classes or int(labels.max()) + 1
    return labels, num_classes
