"""The LDA corpora and the completion perplexity of the Link-LDA benchmarks
(``benchmarks.peers.link_lda_vs_sklearn``, ``benchmarks.peers.link_lda_vs_peers``)."""

from __future__ import annotations

import numpy as np


def lda_corpus(rng, docs, vocab, topics, mean_length):
    beta = rng.dirichlet(np.full(vocab, 0.05), topics)
    theta = rng.dirichlet(np.full(topics, 0.1), docs)
    lengths = np.maximum(rng.poisson(mean_length, docs), 10)
    counts = np.zeros((docs, vocab), np.float32)
    for d in range(docs):
        counts[d] = rng.multinomial(lengths[d], theta[d] @ beta)
    return counts


def split_halves(rng, counts):
    a = np.zeros_like(counts)
    for d in range(counts.shape[0]):
        a[d] = rng.binomial(counts[d].astype(np.int64), 0.5)
    return a, counts - a


def completion_perplexity(theta, beta, held):
    theta = theta / theta.sum(1, keepdims=True)
    beta = beta / beta.sum(1, keepdims=True)
    p = np.maximum(theta @ beta, 1e-30)
    return float(np.exp(-(held * np.log(p)).sum() / held.sum()))


def lda_corpus_sparse(rng, docs, test_docs, vocab, topics, mean_length):
    """:func:`lda_corpus`'s model drawn topic by topic into a sparse matrix, for
    corpora too large to hold densely (another random stream than
    :func:`lda_corpus`): the training counts as CSR [docs, vocab], the
    ``test_docs`` after them dense."""
    import scipy.sparse as sp

    beta = rng.dirichlet(np.full(vocab, 0.05), topics)
    total = docs + test_docs
    theta = rng.dirichlet(np.full(topics, 0.1), total)
    lengths = np.maximum(rng.poisson(mean_length, total), 10)
    per_topic = rng.multinomial(lengths, theta)  # [documents, topics] token counts
    counts = sp.csr_matrix((total, vocab), dtype=np.float32)
    for k in range(topics):
        rows = np.repeat(np.arange(total), per_topic[:, k])
        words = rng.choice(vocab, rows.size, p=beta[k])
        ones = np.ones(rows.size, np.float32)
        counts = counts + sp.csr_matrix((ones, (rows, words)), shape=(total, vocab))
    return counts[:docs], counts[docs:].toarray()
