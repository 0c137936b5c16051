"""What the Link-LDA peer benchmarks share: their corpora, the one held-out estimator
of both systems, and the thread setting (``benchmarks.peers.link_lda_vs_peers``,
``benchmarks.peers.cvb0_fixed_points``)."""

from __future__ import annotations

import argparse
import os

import numpy as np

import jax.numpy as jnp

from benchmarks.common.lda_corpus import (
    completion_perplexity,
    lda_corpus,
    lda_corpus_sparse,
)
from jaxannot.methods.topic_models import link_lda_vb as llvb

FOLD_IN_ITERATIONS = 100
SINGLE_THREAD_XLA = (
    "--xla_cpu_multi_thread_eigen=false",
    "intra_op_parallelism_threads=1",
)
#: Above this many cells (documents x vocabulary) the synthetic training counts are
#: drawn as a sparse matrix (:func:`~benchmarks.common.lda_corpus.lda_corpus_sparse`).
DENSE_LIMIT = 400_000_000


def shared_perplexity(lam, obs, held: np.ndarray, alpha) -> float:
    """Held-out perplexity of topic-word pseudo-counts, one estimator for every system.

    Parameters
    ----------
    lam : array [K, V]
        Topic-word pseudo-counts ``n_kw + η``.
    obs, held : np.ndarray [documents, V]
        The first and second halves of the test documents' tokens.
    alpha : float
        α of the fold-in.

    Returns
    -------
    float
        ``exp(-Σ n log(θ̂ β̂) / N)`` over ``held``, ``θ̂`` folded in on ``obs``
        (:data:`FOLD_IN_ITERATIONS` VB updates from γ = 1), ``β̂ = λ / Σλ``.
    """
    lam = jnp.asarray(lam, jnp.float32)
    gamma = llvb.fold_in((lam,), (obs,), alpha, num_inner=FOLD_IN_ITERATIONS)
    return completion_perplexity(np.asarray(gamma), np.asarray(lam, np.float64), held)


def checked_perplexity(value, system: str, seed: int, iterations: int) -> float:
    """A perplexity, refused when it is not a finite number (a broken fit).

    Parameters
    ----------
    value : float
        The perplexity.
    system, seed, iterations
        Named in the error.

    Returns
    -------
    float
        ``value``.

    Raises
    ------
    ValueError
        ``value`` is NaN or infinite: never a figure to report.
    """
    if not np.isfinite(value):
        raise ValueError(
            f"{system}, seed {seed}, {iterations} iterations: held-out perplexity "
            f"{value}; refusing to report it (the fit left its support)"
        )
    return float(value)


def threads_setting(threads: str) -> dict:
    """``--threads`` → tomotopy's ``workers`` and the XLA note.

    Parameters
    ----------
    threads : {"1", "all"}
        ``"1"`` makes XLA's CPU client single-threaded (``XLA_FLAGS``, read when the
        backend starts: call this before it does).

    Returns
    -------
    dict
        ``setting``, ``tomotopy_workers`` and the ``jaxannot`` note.
    """
    if threads == "all":
        return dict(
            setting="all",
            tomotopy_workers=os.cpu_count(),
            jaxannot="XLA default threads",
        )
    flags = os.environ.get("XLA_FLAGS", "").split()
    os.environ["XLA_FLAGS"] = " ".join(
        flags + [f for f in SINGLE_THREAD_XLA if f not in flags]
    )
    return dict(setting="1", tomotopy_workers=1, jaxannot="XLA CPU single-threaded")


def draw_corpus(args: argparse.Namespace, rng: np.random.Generator) -> tuple:
    """The training and test counts of ``args.corpus``.

    Parameters
    ----------
    args : argparse.Namespace
        ``corpus`` ("corel5k": its blobs and words side by side, from
        ``args.data_dir``; "synthetic": :func:`~benchmarks.common.lda_corpus.
        lda_corpus` of ``docs + test_docs`` documents, drawn sparse above
        :data:`DENSE_LIMIT` cells), ``docs``, ``test_docs``, ``vocab``,
        ``true_topics``, ``length``.
    rng : numpy.random.Generator
        Draws the synthetic corpus.

    Returns
    -------
    tuple
        ``(train, test)``: float32 counts (train dense or CSR, test dense).
    """
    if args.corpus == "corel5k":
        from jaxannot.data.datasets import load_dataset

        tr, te = load_dataset("corel5k", args.data_dir)

        def bag(c):
            return np.concatenate(
                [np.asarray(c.views["blobs"]), np.asarray(c.words)], axis=1
            ).astype(np.float32)

        return bag(tr), bag(te)
    if args.docs * args.vocab > DENSE_LIMIT:  # too large to hold densely
        train, test = lda_corpus_sparse(
            rng, args.docs, args.test_docs, args.vocab, args.true_topics, args.length
        )
        return train, test
    counts = lda_corpus(
        rng, args.docs + args.test_docs, args.vocab, args.true_topics, args.length
    )
    return counts[: args.docs], counts[args.docs :]
