"""The pools and splits of seed 003's protocol, as ``notebooks/seed003_sfsls.py``
draws them (``benchmarks.claims.sfsls_claim``; a test checks that the two agree)."""

from __future__ import annotations

import numpy as np

from jaxannot.data.corpus import Corpus
from jaxannot.data.datasets import load_dataset
from jaxannot.data.protocols import concatenate

#: Corel5k: the most frequent words are the concepts
COREL_CONCEPTS = 50


def load_pool(name: str, data_dir: str | None = None) -> Corpus:
    """All images of a dataset in one corpus, concepts as 0/1 words.

    Parameters
    ----------
    name : str
        A dataset of :func:`jaxannot.data.datasets.load_dataset`.
    data_dir : str, optional
        Its data root.

    Returns
    -------
    Corpus
        Training and test images together; Corel5k's :data:`COREL_CONCEPTS` most
        frequent words only.
    """
    train, test = load_dataset(name, data_dir=data_dir)
    pool = train if test is None else concatenate(train, test)
    if name.startswith("corel"):
        words = np.asarray(pool.words) > 0
        top = np.sort(np.argsort(-words.sum(0), kind="stable")[:COREL_CONCEPTS])
        pool = Corpus.from_arrays(
            {k: np.asarray(v) for k, v in pool.views.items()},
            view_kinds=dict(pool.view_kinds),
            words=words[:, top].astype(np.float32),
            word_names=tuple(pool.word_names[i] for i in top),
            name=pool.name,
        )
    return pool


def split(pool: Corpus, train_size: int, seed: int) -> tuple[Corpus, Corpus]:
    """A random train/test split of ``pool``: ``min(train_size, 60 %)`` training
    images drawn by ``numpy.random.default_rng(seed)``, each part in pool order.

    Parameters
    ----------
    pool : Corpus
        From :func:`load_pool`.
    train_size : int
        The most training images.
    seed : int
        The split's seed.

    Returns
    -------
    tuple of Corpus
        ``(train, test)``.
    """
    n = pool.num_images
    n_train = min(train_size, int(0.6 * n))
    perm = np.random.default_rng(seed).permutation(n)
    return pool.subset(np.sort(perm[:n_train])), pool.subset(np.sort(perm[n_train:]))
