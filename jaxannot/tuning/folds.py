"""The folds of a cross-validation on the training images, as evaluation tasks
(the fold rules: :mod:`jaxannot.tuning`)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence

import numpy as np

from jaxannot.data.corpus import Corpus
from jaxannot.data.protocols import (
    PROTOCOLS,
    Task,
    concatenate,
    kfold_rows,
    make_task,
    random_subset,
)

__all__ = [
    "corpus_fingerprint",
    "fold_tasks",
    "labelled_counts",
    "training_images",
    "training_rows",
    "unlabelled_images",
]


def training_images(train: Corpus, test: Corpus | None, *, seed: int = 0) -> Corpus:
    """The images ``jaxannot evaluate --seed seed`` fits on, all words observed.

    ``train`` itself for a dataset with a split; for one without (``test=None``) the
    seeded random 70% that :func:`~jaxannot.data.make_task` keeps for training, so the
    images it holds out for testing never enter a fold. ``test`` is not used otherwise.
    """
    if test is not None:
        return train
    return make_task(train, None, protocol="inductive", seed=seed).train


def training_rows(
    train: Corpus, test: Corpus | None, *, seed: int = 0
) -> np.ndarray | None:
    """The rows of the dataset that :func:`training_images` keeps, sorted.

    ``None`` for a dataset with a split (its training images are ``train``, every
    one); for one without, the rows of the seeded 70% that
    :func:`~jaxannot.data.make_task` draws first from ``default_rng(seed)`` (the
    other 30% are the test images of ``jaxannot evaluate --seed seed``).
    """
    if test is not None:
        return None
    is_test = random_subset(train.num_images, 0.3, np.random.default_rng(seed))
    return np.flatnonzero(~is_test)


def corpus_fingerprint(corpus: Corpus) -> str:
    """SHA-256 of a corpus's images in order: every view (by name), the words, the
    word mask and the labels, each with its dtype and shape. Two corpora share it
    exactly when they hold the same images with the same observed annotations."""
    digest = hashlib.sha256()
    parts = [(f"view:{k}", corpus.views[k]) for k in sorted(corpus.views)]
    parts += [("words", corpus.words), ("word_mask", corpus.word_mask)]
    parts += [("labels", corpus.labels)]
    for name, array in parts:
        digest.update(name.encode())
        if array is None:
            digest.update(b"none")
            continue
        a = np.ascontiguousarray(np.asarray(array))
        digest.update(f"{a.dtype.str}{a.shape}".encode())
        digest.update(a.tobytes())
    return digest.hexdigest()


def labelled_counts(
    corpus: Corpus,
    folds: int,
    *,
    labelled_fraction: float | None = None,
    seed: int = 0,
) -> list[int]:
    """How many images of each fold's fit part have observed words (or labels, for
    a corpus without words) in :func:`cross_validate`'s inductive folds."""
    held_out = kfold_rows(corpus.num_images, folds, seed)
    counts = []
    for task in fold_tasks(
        corpus, held_out, labelled_fraction=labelled_fraction, seed=seed
    ):
        fit = task.train
        if fit.words is not None:
            counts.append(int(np.sum(np.asarray(fit.word_mask))))
        else:
            counts.append(int(np.sum(np.asarray(fit.labels) >= 0)))
    return counts


def unlabelled_images(train: Corpus, test: Corpus | None, *, seed: int = 0) -> Corpus:
    """The images :func:`training_images` keeps out, words and labels hidden.

    ``test`` for a dataset with a split, the seeded random 30% that
    :func:`~jaxannot.data.make_task` holds out for one without. A transductive
    cross-validation fits on them (as the transductive protocol fits on every image)
    and never reads their words.
    """
    if test is None:
        test = make_task(train, None, protocol="inductive", seed=seed).test
    return test.with_hidden(np.ones(test.num_images, dtype=bool))


def fold_tasks(
    corpus: Corpus,
    held_out: Sequence[np.ndarray],
    *,
    protocol: str = "inductive",
    labelled_fraction: float | None = None,
    seed: int = 0,
    unlabelled: Corpus | None = None,
) -> Iterator[Task]:
    """Yield the :class:`~jaxannot.data.Task` of each fold (:mod:`jaxannot.tuning`).

    Parameters
    ----------
    corpus : Corpus
        The training images (:func:`training_images`).
    held_out : sequence of int arrays
        Held-out rows of each fold (:func:`~jaxannot.data.protocols.kfold_rows`).
    protocol : {"inductive", "transductive"}
    labelled_fraction : float in (0, 1], optional
        Inductive: fraction of the other folds' images whose words are observed
        (default 1). Transductive: fraction of all images (``corpus`` and
        ``unlabelled``) whose words are observed, below 1 (default 0.25).
    seed : int
        Seeds the labelled subset.
    unlabelled : Corpus, optional
        Transductive only: the dataset's other images (:func:`unlabelled_images`),
        fitted on with their words hidden, never scored.

    Raises
    ------
    ValueError
        An unknown protocol; ``unlabelled`` under ``inductive``; a transductive
        labelled fraction of 1 or one that needs more labelled images than the
        training images outside a fold.
    """
    if protocol not in PROTOCOLS:
        raise ValueError(
            f"unknown protocol {protocol!r}; valid protocols: {list(PROTOCOLS)}"
        )
    if protocol == "transductive":
        yield from _transductive_fold_tasks(
            corpus, held_out, labelled_fraction, seed, unlabelled
        )
        return
    if unlabelled is not None:
        raise ValueError(
            "unlabelled images only take part in the transductive protocol"
        )
    if labelled_fraction is None:
        labelled_fraction = 1.0
    for rows in held_out:
        is_held = np.zeros(corpus.num_images, dtype=bool)
        is_held[rows] = True
        yield make_task(
            corpus.subset(~is_held),
            corpus.subset(is_held),
            protocol="inductive",
            labelled_fraction=labelled_fraction,
            seed=seed,
        )


def _transductive_fold_tasks(corpus, held_out, labelled_fraction, seed, unlabelled):
    if labelled_fraction is None:
        labelled_fraction = 0.25
    if not 0.0 < labelled_fraction < 1.0:
        raise ValueError(
            "the transductive protocol needs a labelled fraction in (0, 1), got "
            f"{labelled_fraction}"
        )
    n_train = corpus.num_images
    n_all = n_train + (0 if unlabelled is None else unlabelled.num_images)
    count = max(1, int(round(labelled_fraction * n_all)))
    largest = max(len(rows) for rows in held_out)  # checked before any fit
    if count > n_train - largest:
        raise ValueError(
            f"labelled fraction {labelled_fraction} of the {n_all} images needs "
            f"{count} labelled training images outside each fold, and a fold leaves "
            f"only {n_train - largest}; lower --labelled-fraction or raise --folds"
        )
    for f, rows in enumerate(held_out):
        candidates = np.setdiff1d(np.arange(n_train), rows)
        rng = np.random.default_rng((seed, f))
        observed = np.zeros(n_train, dtype=bool)
        observed[rng.choice(candidates, size=count, replace=False)] = True
        full = corpus.with_hidden(~observed)
        if unlabelled is not None:
            hidden = np.ones(unlabelled.num_images, dtype=bool)
            full = concatenate(full, unlabelled.with_hidden(hidden))
        eval_rows = np.flatnonzero(~observed)
        words, labels = corpus.words, corpus.labels
        yield Task(
            train=full,
            test=full,
            eval_rows=eval_rows,
            truth_words=None if words is None else np.asarray(words)[eval_rows],
            truth_labels=None if labels is None else np.asarray(labels)[eval_rows],
            protocol="transductive",
            labelled_fraction=labelled_fraction,
            seed=seed,
        )
