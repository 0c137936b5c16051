"""A small Link-LDA corpus and the held-out checks the CVB0 and SCVB0 tests share:
documents drawn from known topics, half of each test document's tokens observed and
the other half scored, and the largest distance from a true topic to its nearest
fitted one."""

import numpy as np

from jaxannot.methods.topic_models import link_lda as ll
from jaxannot.methods.topic_models import link_lda_vb as llvb


def corpus(seed=0, images=40, sizes=(12, 7), topics=3, length=15, conc=0.2):
    """Count matrices (one per view, ``images x size``) and their true topics."""
    rng = np.random.default_rng(seed)
    theta = rng.dirichlet(np.full(topics, conc), images)
    out, betas = [], []
    for size in sizes:
        beta = rng.dirichlet(np.full(size, conc), topics)
        betas.append(beta)
        out.append(
            np.stack([rng.multinomial(length, t @ beta) for t in theta]).astype(
                np.float32
            )
        )
    return tuple(out), betas


def split_tokens(test, seed=1):
    """Each test document's tokens split in two: (observed, held out)."""
    rng = np.random.default_rng(seed)
    obs = np.stack([rng.binomial(row.astype(int), 0.5) for row in test])
    return obs, test - obs


def perplexity(lambdas, obs, held, alpha):
    """Held-out perplexity of the first view's ``held`` tokens given ``obs``."""
    gamma = np.asarray(llvb.fold_in(lambdas, (obs,), alpha, num_inner=50))
    theta = gamma / gamma.sum(1, keepdims=True)
    beta = np.asarray(ll.topic_word(lambdas[0]))
    p = np.maximum(theta @ beta, 1e-30)
    return float(np.exp(-(held * np.log(p)).sum() / held.sum()))


def worst_topic_distance(beta, lambdas):
    """max over true topics of the total variation to the nearest fitted topic."""
    fitted = np.asarray(ll.topic_word(lambdas[0]))
    tv = 0.5 * np.abs(beta[:, None, :] - fitted[None, :, :]).sum(-1)
    return float(tv.min(1).max())
