r"""Topic restarts and NUTS chains as arviz InferenceData, aligned before R-hat.

Why the topics are aligned first (label switching), how (:func:`align_topics`) and
the references: see :mod:`jaxannot.diagnostics`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.optimize
import scipy.spatial.distance

import jax

if TYPE_CHECKING:
    import arviz as az
    import pandas as pd
    import xarray as xr

    from jaxannot.annotators.base import Fitted
    from jaxannot.data.corpus import Corpus
    from jaxannot.types import Array, ArrayLike, PRNGKey

__all__ = [
    "match_topics",
    "align_topics",
    "restarts_to_inference_data",
    "nuts_draws",
    "guide_draws",
    "objective_traces",
    "topic_posteriors",
    "summary",
    "topic_word_matrix",
    "diagnose_restarts",
    "permute_topics",
]


def match_topics(reference: np.ndarray, other: np.ndarray) -> np.ndarray:
    """Permutation ``p`` with ``other[p]`` closest to ``reference`` (Hungarian, L1).

    Parameters
    ----------
    reference, other : [topics, ...] arrays (e.g. topic-word distributions)

    Returns
    -------
    int array [topics]
    """
    ref = np.asarray(reference, np.float64).reshape(reference.shape[0], -1)
    oth = np.asarray(other, np.float64).reshape(other.shape[0], -1)
    if ref.shape != oth.shape:
        raise ValueError(f"shapes differ: {ref.shape} vs {oth.shape}")
    cost = scipy.spatial.distance.cdist(ref, oth, "cityblock")  # [topics, topics]
    rows, cols = scipy.optimize.linear_sum_assignment(cost)
    perm = np.empty(ref.shape[0], np.int64)
    perm[rows] = cols
    return perm


def align_topics(
    samples: Mapping[str, np.ndarray],
    topic_axes: Mapping[str, int],
    reference_site: str,
) -> tuple[dict, np.ndarray]:
    """Permute the topics of every chain to match chain 0.

    Parameters
    ----------
    samples : mapping site -> array [chains, draws, ...]
    topic_axes : mapping site -> axis of the topic index *within one draw*
        (e.g. ``{"beta_0": 0, "pi": 0, "theta": 1}``); other sites are left as is.
    reference_site : str
        The site whose chain means are matched (a topic-indexed site).

    Returns
    -------
    aligned : dict site -> array [chains, draws, ...]
    permutations : int array [chains, topics]
    """
    if reference_site not in topic_axes:
        raise KeyError(
            f"reference site {reference_site!r} must be one of the topic-indexed "
            f"sites {list(topic_axes)}"
        )
    ref = np.asarray(samples[reference_site])
    axis = topic_axes[reference_site]
    means = np.moveaxis(ref.mean(axis=1), axis + 1, 1)  # [chains, topics, ...]
    perms = np.stack([match_topics(means[0], means[c]) for c in range(ref.shape[0])])
    return permute_topics(samples, topic_axes, perms), perms


def permute_topics(
    samples: Mapping[str, Any],
    topic_axes: Mapping[str, int],
    perms: Sequence[np.ndarray],
) -> dict:
    """Take ``perms[c]`` along every topic axis of chain ``c`` (sites [chains,
    draws, ...]; ``topic_axes`` counts within one draw); other sites as they are.

    Parameters
    ----------
    samples : Mapping
        Site -> array ``[chains, draws, ...]``.
    topic_axes : Mapping
        Site -> its topic axis within one draw, for the sites that have one.
    perms : sequence of numpy.ndarray
        One permutation of the topics per chain.

    Returns
    -------
    dict
        Site -> numpy array, topics permuted chain by chain.
    """
    out = {}
    for name, value in samples.items():
        value = np.asarray(value)
        if name not in topic_axes:
            out[name] = value
            continue
        axis = topic_axes[name] + 1  # within one chain: (draw, ...)
        out[name] = np.stack(
            [np.take(value[c], perms[c], axis=axis) for c in range(value.shape[0])]
        )
    return out


def restarts_to_inference_data(
    restarts: Sequence[Mapping[str, np.ndarray]],
    topic_axes: Mapping[str, int] | None = None,
    reference_site: str | None = None,
    sample_stats: Mapping[str, np.ndarray] | None = None,
) -> az.InferenceData:
    """Stack per-restart draws (each site [draws, ...]) as chains, topics aligned.

    Returns
    -------
    arviz.InferenceData
        ``posterior`` with dims (chain, draw, ...); the permutations applied are in
        ``idata.attrs["topic_permutations"]`` (per chain).
    """
    import arviz as az

    names = list(restarts[0])
    stacked = {n: np.stack([np.asarray(r[n]) for r in restarts]) for n in names}
    perms = None
    if topic_axes:
        stacked, perms = align_topics(
            stacked, topic_axes, reference_site or next(iter(topic_axes))
        )
    idata = az.from_dict(posterior=stacked, sample_stats=dict(sample_stats or {}))
    if perms is not None:
        idata.posterior.attrs["topic_permutations"] = perms.tolist()
    return idata


def nuts_draws(
    rng_key: PRNGKey,
    model: Callable,
    *args: Any,
    num_warmup: int = 200,
    num_samples: int = 200,
    num_chains: int = 2,
    **kwargs: Any,
) -> dict[str, np.ndarray]:
    """NUTS draws of a numpyro model as a dict site -> [chains, draws, ...].

    Small corpora only: NUTS is the ground truth, not the fast path. The chains run
    in parallel, one a device, where there are as many devices (numpyro's default:
    one compiled program for all of them, where sequential chains compile theirs
    each and set up op by op, some 250 compiles for a 15-image mixture), else
    sequentially; the draws of a key depend on which. Deterministic and factor
    sites are dropped.
    """
    from numpyro.infer import MCMC, NUTS

    parallel = jax.local_device_count() >= num_chains
    mcmc = MCMC(
        NUTS(model),
        num_warmup=num_warmup,
        num_samples=num_samples,
        num_chains=num_chains,
        chain_method="parallel" if parallel else "sequential",
        progress_bar=False,
    )
    mcmc.run(rng_key, *args, **kwargs)
    return {k: np.asarray(v) for k, v in mcmc.get_samples(group_by_chain=True).items()}


def guide_draws(
    rng_key: PRNGKey,
    guide: Callable,
    params: dict[str, Array],
    *args: Any,
    num_draws: int = 200,
    num_chains: int = 1,
    **kwargs: Any,
) -> dict[str, np.ndarray]:
    """Draws from a fitted SVI guide as a dict site -> [chains, draws, ...]."""
    from numpyro.infer import Predictive

    pred = Predictive(guide, params=params, num_samples=num_draws * num_chains)
    out = pred(rng_key, *args, **kwargs)
    return {
        k: np.asarray(v).reshape((num_chains, num_draws) + v.shape[1:])
        for k, v in out.items()
    }


def objective_traces(
    traces: Sequence[Sequence[float]], name: str = "objective"
) -> az.InferenceData:
    """Per-restart objective traces as ``sample_stats`` (chain = restart,
    draw = iteration); ragged traces are NaN-padded."""
    import arviz as az

    length = max(len(t) for t in traces)
    arr = np.full((len(traces), length), np.nan)
    for i, t in enumerate(traces):
        arr[i, : len(t)] = np.asarray(t, np.float64)
    return az.from_dict(sample_stats={name: arr})


def topic_posteriors(
    phi: ArrayLike, image_names: Sequence[str] | None = None
) -> xr.DataArray:
    """Per-image topic posteriors as an ``xarray.DataArray`` (image, topic)."""
    import xarray as xr

    phi = np.asarray(jax.device_get(phi))
    if phi.ndim != 2:
        raise ValueError(f"phi must be [images, topics], got {phi.shape}")
    coords = {
        "image": list(image_names)
        if image_names is not None
        else np.arange(phi.shape[0]),
        "topic": np.arange(phi.shape[1]),
    }
    return xr.DataArray(
        phi, dims=("image", "topic"), coords=coords, name="topic_posterior"
    )


def summary(
    idata: az.InferenceData, var_names: Sequence[str] | None = None
) -> pd.DataFrame:
    """arviz summary (means, sd, R-hat, bulk/tail ESS) of the posterior group."""
    import arviz as az

    return az.summary(idata, var_names=var_names)


# names of the topic-word matrices the registered topic models store
_TOPIC_WORD_KEYS = (
    ("log_beta_text", "log"),
    ("beta_text", "prob"),
    ("lambda_text", "dirichlet"),
)


def topic_word_matrix(fitted: Fitted) -> np.ndarray:
    """The text topic-word distributions [topics, words] of a fitted topic model."""
    for key, kind in _TOPIC_WORD_KEYS:
        m = getattr(fitted.params, key, None)
        if m is not None:
            m = np.asarray(m, np.float64)
            if kind == "log":
                return np.exp(m)
            return m / m.sum(1, keepdims=True)
    raise ValueError(
        f"method {fitted.method!r} has no topic-word matrix (expected one of "
        f"{[k for k, _ in _TOPIC_WORD_KEYS]} in its params)"
    )


def diagnose_restarts(
    method: str,
    corpus: Corpus,
    *,
    restarts: int = 3,
    hyper: Mapping[str, Any] | None = None,
    seed: int = 0,
) -> dict:
    """Fit a topic model from several random starts and compare them.

    Topics are aligned to restart 0 by Hungarian matching before they are compared
    (label switching); reported: every restart's final objective and its trace (as
    arviz ``sample_stats`` dims (chain = restart, draw = iteration)), and the mean L1
    distance between each restart's aligned topics and restart 0's — small values mean
    the restarts found the same topics.

    Returns
    -------
    dict with ``final_objective`` [restarts], ``aligned_topic_l1`` [restarts],
    ``unaligned_topic_l1`` [restarts], ``permutations``, ``traces``
    (arviz.InferenceData).
    """
    from jaxannot.annotators import get_method, parse_hyper
    from jaxannot.annotators.hyper_values import fit_parsed

    if restarts < 2:
        raise ValueError(f"restarts must be >= 2 to compare, got {restarts}")
    m = get_method(method)
    params = parse_hyper(m, hyper or {})
    fits = [
        fit_parsed(m, corpus, rng_key=jax.random.key(seed + r), hyper=params)
        for r in range(restarts)
    ]
    mats = [topic_word_matrix(f) for f in fits]
    perms = [match_topics(mats[0], x) for x in mats]
    traces = [
        f.info.get("objective") or f.info.get("objective_text") or [] for f in fits
    ]
    return dict(
        method=method,
        restarts=restarts,
        final_objective=[float(t[-1]) if len(t) else float("nan") for t in traces],
        aligned_topic_l1=[
            float(np.abs(x[p] - mats[0]).sum(1).mean())
            for x, p in zip(mats, perms, strict=True)
        ],
        unaligned_topic_l1=[float(np.abs(x - mats[0]).sum(1).mean()) for x in mats],
        permutations=[p.tolist() for p in perms],
        traces=objective_traces(traces),
    )
