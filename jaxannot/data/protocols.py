"""Evaluation protocols: which images a method learns from and which it is scored on.

``inductive``
    The dataset's own train/test split. ``fit`` sees the training images; the words of
    a seeded random ``labelled_fraction`` of them are observed and the rest stay in the
    corpus as unlabelled images (for semi-supervised methods). Scores are computed for
    the test images, whose words are hidden.
``transductive``
    Seed 000's protocol: all images of the dataset (train and test together). The words
    of a seeded random ``labelled_fraction`` of them (0.25 in the paper) are observed,
    the rest are predicted and scored. ``fit`` sees every image, so a graph may span
    them all; the evaluation rows are the hidden ones.

Datasets without a split (mfeat, msrc, 3sources, bbcsport) get a seeded stratified-free
random split of ``test_fraction`` under ``inductive``.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from jaxannot.data.corpus import Corpus

__all__ = [
    "Task",
    "PROTOCOLS",
    "make_task",
    "concatenate",
    "kfold_rows",
    "random_subset",
]

PROTOCOLS = ("inductive", "transductive")


@dataclasses.dataclass(frozen=True)
class Task:
    """A corpus to fit on, a corpus to score, and the hidden ground truth.

    Attributes
    ----------
    train : Corpus
        What ``fit`` sees (hidden words zeroed, hidden labels ``-1``).
    test : Corpus
        What ``score_words`` / ``predict_labels`` see. Under ``transductive`` it is
        ``train`` itself.
    eval_rows : int array
        Rows of ``test`` that are scored.
    truth_words : array [len(eval_rows), words] or None
        Ground-truth words of the scored rows.
    truth_labels : int array [len(eval_rows)] or None
        Ground-truth class labels of the scored rows.
    protocol : str
    labelled_fraction : float
    seed : int
    """

    train: Corpus
    test: Corpus
    eval_rows: np.ndarray
    truth_words: np.ndarray | None
    truth_labels: np.ndarray | None
    protocol: str
    labelled_fraction: float
    seed: int

    @property
    def transductive(self) -> bool:
        return self.protocol == "transductive"


def concatenate(a: Corpus, b: Corpus) -> Corpus:
    """Stack the images of two corpora with the same views and vocabularies."""
    if a.view_names != b.view_names:
        raise ValueError(f"views differ: {a.view_names} vs {b.view_names}")

    def cat(x, y):
        return None if x is None else np.concatenate([np.asarray(x), np.asarray(y)])

    return dataclasses.replace(
        a,
        views={k: cat(a.views[k], b.views[k]) for k in a.views},
        words=cat(a.words, b.words),
        word_mask=cat(a.word_mask, b.word_mask),
        labels=cat(a.labels, b.labels),
    )


def random_subset(n: int, fraction: float, rng: np.random.Generator) -> np.ndarray:
    """A random subset of ``n`` items as a mask: ``round(fraction * n)`` of them (at
    least 1 when ``fraction > 0``), drawn without replacement.

    Parameters
    ----------
    n : int
        The items.
    fraction : float
        The share drawn, in ``[0, 1]``.
    rng : numpy.random.Generator
        The generator.

    Returns
    -------
    numpy.ndarray [n]
        Boolean, True for the drawn items.
    """
    count = int(round(fraction * n))
    if fraction > 0:
        count = max(count, 1)
    mask = np.zeros(n, dtype=bool)
    mask[rng.permutation(n)[:count]] = True
    return mask


def make_task(
    train: Corpus,
    test: Corpus | None,
    *,
    protocol: str = "inductive",
    labelled_fraction: float | None = None,
    seed: int = 0,
    test_fraction: float = 0.3,
) -> Task:
    """Build the :class:`Task` of a protocol from a dataset's train and test corpora.

    Parameters
    ----------
    train, test : Corpus
        The dataset's split (``test=None`` for datasets without one).
    protocol : {"inductive", "transductive"}
    labelled_fraction : float in (0, 1]
        Fraction of fit images whose words/labels are observed. Default 1 under
        ``inductive`` and 0.25 (seed 000) under ``transductive``.
    seed : int
        Fixes every random draw.
    test_fraction : float
        Held-out fraction when the dataset has no split (inductive only).
    """
    if protocol not in PROTOCOLS:
        raise ValueError(
            f"unknown protocol {protocol!r}; valid protocols: {list(PROTOCOLS)}"
        )
    if labelled_fraction is None:
        labelled_fraction = 0.25 if protocol == "transductive" else 1.0
    if not 0.0 < labelled_fraction <= 1.0:
        raise ValueError(
            f"labelled fraction must be in (0, 1], got {labelled_fraction}"
        )
    rng = np.random.default_rng(seed)

    if protocol == "transductive":
        full = train if test is None else concatenate(train, test)
        if labelled_fraction >= 1.0:
            raise ValueError("the transductive protocol needs a labelled fraction < 1")
        observed = random_subset(full.num_images, labelled_fraction, rng)
        corpus = full.with_hidden(~observed)
        rows = np.flatnonzero(~observed)
        return Task(
            train=corpus,
            test=corpus,
            eval_rows=rows,
            truth_words=None if full.words is None else np.asarray(full.words)[rows],
            truth_labels=None if full.labels is None else np.asarray(full.labels)[rows],
            protocol=protocol,
            labelled_fraction=labelled_fraction,
            seed=seed,
        )

    if test is None:
        is_test = random_subset(train.num_images, test_fraction, rng)
        train, test = train.subset(~is_test), train.subset(is_test)
    for part, corpus in (("training", train), ("test", test)):
        if corpus.num_images == 0:
            raise ValueError(
                f"dataset {corpus.name}: its {part} split has no images; nothing to "
                f"{'fit on' if part == 'training' else 'score'} (give a dataset "
                "with images in both splits)"
            )
    observed = random_subset(train.num_images, labelled_fraction, rng)
    fit_corpus = train.with_hidden(~observed) if labelled_fraction < 1.0 else train
    rows = np.arange(test.num_images)
    return Task(
        train=fit_corpus,
        test=test.with_hidden(np.ones(test.num_images, dtype=bool)),
        eval_rows=rows,
        truth_words=None if test.words is None else np.asarray(test.words),
        truth_labels=None if test.labels is None else np.asarray(test.labels),
        protocol=protocol,
        labelled_fraction=labelled_fraction,
        seed=seed,
    )


def kfold_rows(n: int, folds: int, seed: int = 0) -> list[np.ndarray]:
    """Held-out rows of each fold (sorted), a partition of ``range(n)``.

    The same folds as ``sklearn.model_selection.KFold(folds, shuffle=True,
    random_state=seed)``: a ``RandomState(seed)`` permutation cut into ``folds``
    chunks, the first ``n % folds`` of them one row larger.
    """
    if not isinstance(folds, int | np.integer) or folds < 2:
        raise ValueError(f"--folds must be an integer >= 2, got {folds}")
    if folds > n:
        raise ValueError(f"--folds {folds} is more than the {n} training images")
    order = np.random.RandomState(seed).permutation(n)
    return [np.sort(chunk) for chunk in np.array_split(order, folds)]
