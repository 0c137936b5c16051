r"""Posterior diagnostics with arviz: draws as InferenceData, restarts as chains.

Topic models are identifiable only up to a permutation of the topics (label
switching): two restarts, or two NUTS chains, that find the same topics in a different
order make raw R-hat meaningless. :func:`align_topics` matches every chain's topics to
a reference chain's by the Hungarian algorithm on the L1 distance between mean
topic-word distributions (``scipy.optimize.linear_sum_assignment``), and permutes every
topic-indexed site accordingly, *before* :func:`summary` computes R-hat and ESS.

- :func:`nuts_draws` runs numpyro's NUTS on a model declaration (small corpora);
- :func:`guide_draws` samples a fitted SVI guide;
- :func:`restarts_to_inference_data` stacks per-restart draws as chains, aligned;
- :func:`objective_traces` puts per-restart objective traces in ``sample_stats``;
- :func:`topic_posteriors` labels per-image topic posteriors (image, topic);
- :func:`diagnose_restarts` fits a registered topic model from several starts and
  compares their aligned topics (``jaxannot diagnose METHOD --dataset ...``);
- :func:`to_inference_data` turns any fit into InferenceData: VEM restarts (one draw
  per chain, aligned on their local posteriors) or an SVI result (guide draws), with
  the loss traces in ``sample_stats``.

All InferenceData posteriors have dims ``("chain", "draw", ...)``.

References
----------
A. Vehtari, A. Gelman, D. Simpson, B. Carpenter, P.-C. Bürkner. Rank-normalization,
folding, and localization: an improved R-hat. Bayesian Analysis, 2021.
M. Stephens. Dealing with label switching in mixture models. JRSS-B 62, 2000.
H. W. Kuhn. The Hungarian method for the assignment problem. 1955.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import scipy.optimize
import scipy.spatial.distance

import jax

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
    "to_inference_data",
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
    return _permute_topics(samples, topic_axes, perms), perms


def _permute_topics(samples, topic_axes, perms) -> dict:
    """Take ``perms[c]`` along every topic axis of chain ``c`` (sites [chains,
    draws, ...]; ``topic_axes`` counts within one draw); other sites as they are."""
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
):
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
    rng_key,
    model,
    *args,
    num_warmup: int = 200,
    num_samples: int = 200,
    num_chains: int = 2,
    **kwargs,
):
    """NUTS draws of a numpyro model as a dict site -> [chains, draws, ...].

    Chains run sequentially (small corpora only: NUTS is the ground truth, not the
    fast path). Deterministic and factor sites are dropped.
    """
    from numpyro.infer import MCMC, NUTS

    mcmc = MCMC(
        NUTS(model),
        num_warmup=num_warmup,
        num_samples=num_samples,
        num_chains=num_chains,
        chain_method="sequential",
        progress_bar=False,
    )
    mcmc.run(rng_key, *args, **kwargs)
    return {k: np.asarray(v) for k, v in mcmc.get_samples(group_by_chain=True).items()}


def guide_draws(
    rng_key, guide, params, *args, num_draws: int = 200, num_chains: int = 1, **kwargs
):
    """Draws from a fitted SVI guide as a dict site -> [chains, draws, ...]."""
    from numpyro.infer import Predictive

    pred = Predictive(guide, params=params, num_samples=num_draws * num_chains)
    out = pred(rng_key, *args, **kwargs)
    return {
        k: np.asarray(v).reshape((num_chains, num_draws) + v.shape[1:])
        for k, v in out.items()
    }


def objective_traces(traces: Sequence[Sequence[float]], name: str = "objective"):
    """Per-restart objective traces as ``sample_stats`` (chain = restart,
    draw = iteration); ragged traces are NaN-padded."""
    import arviz as az

    length = max(len(t) for t in traces)
    arr = np.full((len(traces), length), np.nan)
    for i, t in enumerate(traces):
        arr[i, : len(t)] = np.asarray(t, np.float64)
    return az.from_dict(sample_stats={name: arr})


def topic_posteriors(phi, image_names: Sequence[str] | None = None):
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


def summary(idata, var_names=None):
    """arviz summary (means, sd, R-hat, bulk/tail ESS) of the posterior group."""
    import arviz as az

    return az.summary(idata, var_names=var_names)


# names of the topic-word matrices the registered topic models store
_TOPIC_WORD_KEYS = (
    ("log_beta_text", "log"),
    ("beta_text", "prob"),
    ("lambda_text", "dirichlet"),
)


def topic_word_matrix(fitted) -> np.ndarray:
    """The text topic-word distributions [topics, words] of a fitted topic model."""
    for key, kind in _TOPIC_WORD_KEYS:
        if key in fitted.params:
            m = np.asarray(fitted.params[key], np.float64)
            if kind == "log":
                return np.exp(m)
            return m / m.sum(1, keepdims=True)
    raise ValueError(
        f"method {fitted.method!r} has no topic-word matrix (expected one of "
        f"{[k for k, _ in _TOPIC_WORD_KEYS]} in its params)"
    )


def diagnose_restarts(
    method: str, corpus, *, restarts: int = 3, hyper=None, seed: int = 0
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

    if restarts < 2:
        raise ValueError(f"restarts must be >= 2 to compare, got {restarts}")
    m = get_method(method)
    params = parse_hyper(m, hyper or {})
    fits = [
        m.fit(corpus, rng_key=jax.random.key(seed + r), **params)
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


# ------------------------------------------------------------ any fit -> arviz
def to_inference_data(
    result,
    *,
    topic_axes: Mapping[str, int] | None = None,
    local_site: str | None = "z",
    guide: Callable | None = None,
    model: Callable | None = None,
    model_args: Sequence = (),
    model_kwargs: Mapping | None = None,
    rng_key: jax.Array | None = None,
    num_draws: int = 200,
    plate: str | None = "image",
):
    """A fit as ``arviz.InferenceData``: VEM restarts or an SVI result.

    **VEM** (a :class:`~jaxannot.inference.VEMResult` or a sequence of them: restarts
    of one model on one corpus). A VEM fit is a point estimate, so every restart is
    one chain of one draw. The restarts' topics (the values of the discrete local
    site) are aligned to restart 0's by the Hungarian algorithm on the per-image
    posteriors: the permutation ``p`` of restart ``r`` minimizes
    :math:`\\sum_{ik} |\\phi^0_{ik} - \\phi^r_{i p_k}|` (equivalently maximizes the
    overlap :math:`\\sum_{ik} \\min(\\phi^0_{ik}, \\phi^r_{i p_k})`); it is taken along
    every topic axis of the global sites and of the posteriors. With the topics
    aligned, the chains of a site agree when the restarts found the same solution.

    **SVI** (numpyro's ``SVIRunResult``): ``num_draws`` draws of the fitted guide
    (:func:`guide_draws`) as one chain.

    Parameters
    ----------
    result : VEMResult, sequence of VEMResult, or SVIRunResult
    topic_axes : mapping site -> axis, optional
        VEM: the topic axis of each topic-indexed global site, within one value
        (e.g. ``{"pi": 0, "beta_0": 0}``); sites not named are not permuted. Default:
        axis 0 of every site whose leading dimension equals the number of topics
        ``K`` (pass the mapping where another site's leading size happens to be K).
    local_site : str or None
        VEM: the local site's name; its posteriors become the posterior variable
        ``f"{local_site}_probs"`` [chain, draw, image, topic]. None leaves them out
        (``az.summary`` lists every one of their images x K entries).
    guide : callable
        SVI: the guide that was fitted (required).
    model : callable, optional
        SVI: the model, to choose which guide sites to keep (default:
        ``guide.model`` for numpyro's autoguides). Without one, every site the guide
        samples is kept.
    model_args, model_kwargs
        SVI: the arguments the guide (and the model) take.
    rng_key : PRNGKey
        SVI: key of the guide draws (required).
    num_draws : int
        SVI: draws of the guide.
    plate : str or None
        SVI: keep the model's latent sites outside this plate (the global sites);
        None keeps every latent site of the model, per-image ones included.

    Returns
    -------
    arviz.InferenceData
        ``posterior``: the global sites, dims (chain, draw, ...), a topic axis named
        ``"topic"`` (VEM), other axes ``f"{site}_dim_{i}"``; VEM adds the local
        posteriors and ``posterior.attrs["topic_permutations"]`` (per chain, the
        permutation applied to that restart; restart 0's is the identity).
        ``sample_stats``: ``loss`` dims (chain, draw, step) (the loss trace: VEM's
        negative objective, NaN-padded and NaN after early stopping; SVI's negative
        ELBO) and ``final_loss`` (chain, draw) (VEM: the last finite loss); their
        draw dim has size 1. VEM's ``params["terms"]`` (extra objective terms) are
        left out.

    Raises
    ------
    ValueError
        No restarts, restarts of different models or shapes, a topic axis whose
        length is not K, or an SVI result without ``guide`` or ``rng_key``.

    Examples
    --------
    >>> vem = VEM(mixture_of_unigrams, "z")  # doctest: +SKIP
    >>> fits = [vem.run(k, 50, (counts,), num_topics=10, progress_bar=False)
    ...         for k in jax.random.split(jax.random.key(0), 4)]  # doctest: +SKIP
    >>> idata = to_inference_data(fits)  # doctest: +SKIP
    >>> idata.posterior["beta_0"].dims  # doctest: +SKIP
    ('chain', 'draw', 'topic', 'beta_0_dim_1')
    >>> az.summary(idata, var_names=["pi"])  # doctest: +SKIP

    An SVI fit with an autoguide (its model is ``guide.model``):

    >>> guide = AutoNormal(model)  # doctest: +SKIP
    >>> res = SVI(model, guide, optim, Trace_ELBO()).run(key, 1000, x)  # doctest: +SKIP
    >>> idata = to_inference_data(
    ...     res, guide=guide, model_args=(x,), rng_key=jax.random.key(1)
    ... )  # doctest: +SKIP
    >>> idata.sample_stats["loss"].dims  # doctest: +SKIP
    ('chain', 'draw', 'step')
    """
    from numpyro.infer.svi import SVIRunResult

    from jaxannot.inference.vem import VEMResult

    if isinstance(result, SVIRunResult):
        if topic_axes is not None:
            raise ValueError("topic_axes applies to VEM restarts, not to SVI results")
        return _svi_to_inference_data(
            result,
            guide,
            model,
            tuple(model_args),
            dict(model_kwargs or {}),
            rng_key,
            num_draws,
            plate,
        )
    if isinstance(result, VEMResult):
        result = [result]
    elif not isinstance(result, Sequence):
        raise TypeError(
            f"expected a VEMResult, a sequence of them or an SVIRunResult, got "
            f"{type(result).__name__}"
        )
    svi_only = dict(
        guide=guide, model=model, rng_key=rng_key, model_kwargs=model_kwargs
    )
    given = [k for k, v in svi_only.items() if v is not None]
    given += ["model_args"] if len(model_args) else []
    if given:
        raise ValueError(f"{given} apply to SVI results, not to VEM restarts")
    return _vem_to_inference_data(list(result), topic_axes, local_site)


def _vem_to_inference_data(results, topic_axes, local_site):
    import arviz as az

    from jaxannot.inference.vem import VEMResult

    if not results:
        raise ValueError("no VEM restarts to convert (an empty sequence)")
    bad = [type(r).__name__ for r in results if not isinstance(r, VEMResult)]
    if bad:
        raise ValueError(f"every restart must be a VEMResult; got {bad}")
    names = [k for k in results[0].params if k != "terms"]
    values, phis = [], []
    for r, res in enumerate(results):
        own = [k for k in res.params if k != "terms"]
        if sorted(own) != sorted(names):
            raise ValueError(
                f"restart {r} has the global sites {sorted(own)} but restart 0 has "
                f"{sorted(names)}: restarts must be fits of one model"
            )
        values.append({k: np.asarray(jax.device_get(res.params[k])) for k in names})
        phis.append(np.asarray(jax.device_get(res.posteriors)))
        mismatched = [
            f"{k} {values[r][k].shape} vs {values[0][k].shape}"
            for k in names
            if values[r][k].shape != values[0][k].shape
        ]
        if phis[r].shape != phis[0].shape:
            mismatched.append(f"posteriors {phis[r].shape} vs {phis[0].shape}")
        if mismatched:
            raise ValueError(
                f"restart {r} differs in shape from restart 0 ({'; '.join(mismatched)})"
                f": restarts must be fits of one model on one corpus"
            )
    num_images, k = phis[0].shape
    if topic_axes is None:
        topic_axes = {
            n: 0 for n in names if values[0][n].ndim and values[0][n].shape[0] == k
        }
    topic_axes = dict(topic_axes)
    for n, axis in topic_axes.items():
        if n not in values[0]:
            raise ValueError(f"topic_axes names {n!r}, not a global site: {names}")
        shape = values[0][n].shape
        if not -len(shape) <= axis < len(shape) or shape[axis] != k:
            raise ValueError(
                f"topic axis {axis} of site {n!r} (shape {shape}) does not have the "
                f"{k} topics of the local posteriors"
            )
        topic_axes[n] = axis % len(shape)
    perms = np.stack([match_topics(phis[0].T, phi.T) for phi in phis])

    posterior = {n: np.stack([v[n] for v in values])[:, None] for n in names}
    dims = {
        n: [
            "topic" if i == topic_axes.get(n) else f"{n}_dim_{i}"
            for i in range(values[0][n].ndim)
        ]
        for n in names
    }
    if local_site is not None:
        probs = f"{local_site}_probs"
        if probs in posterior:
            raise ValueError(f"a global site is named {probs!r}; pass local_site")
        posterior[probs] = np.stack(phis)[:, None]
        dims[probs] = ["image", "topic"]
        topic_axes[probs] = 1
    posterior = _permute_topics(posterior, topic_axes, perms)

    losses = [np.asarray(res.losses, np.float64).reshape(-1) for res in results]
    trace = np.full((len(results), 1, max(len(lo) for lo in losses)), np.nan)
    final = np.full((len(results), 1), np.nan)
    for r, lo in enumerate(losses):
        trace[r, 0, : len(lo)] = lo
        finite = lo[np.isfinite(lo)]
        final[r, 0] = finite[-1] if finite.size else np.nan
    with warnings.catch_warnings():  # one draw per chain is what a VEM fit is
        warnings.filterwarnings("ignore", "More chains", UserWarning)
        idata = az.from_dict(
            posterior=posterior,
            sample_stats={"loss": trace, "final_loss": final},
            coords={"topic": np.arange(k), "image": np.arange(num_images)},
            dims={**dims, "loss": ["step"]},
        )
    idata.posterior.attrs["topic_permutations"] = perms.tolist()
    return idata


def _global_sites(model, plate, args, kwargs) -> set[str]:
    """The model's latent sample sites outside ``plate`` (all of them if None)."""
    from numpyro import handlers

    trace = handlers.trace(handlers.seed(model, jax.random.key(0))).get_trace(
        *args, **kwargs
    )
    return {
        name
        for name, site in trace.items()
        if site["type"] == "sample"
        and not site["is_observed"]
        and not any(f.name == plate for f in site.get("cond_indep_stack", ()))
    }


def _svi_to_inference_data(
    result, guide, model, args, kwargs, rng_key, num_draws, plate
):
    import arviz as az

    if guide is None:
        raise ValueError("an SVI result needs the guide it fitted: pass guide=")
    if rng_key is None:
        raise ValueError("guide draws need a key: pass rng_key=")
    draws = guide_draws(
        rng_key, guide, result.params, *args, num_draws=num_draws, **kwargs
    )
    model = model if model is not None else getattr(guide, "model", None)
    if model is not None:
        keep = _global_sites(model, plate, args, kwargs)
        draws = {n: v for n, v in draws.items() if n in keep}
    if not draws:
        raise ValueError(
            f"the guide draws no latent site of the model outside plate {plate!r}; "
            f"pass plate=None to keep the per-image sites"
        )
    losses = np.asarray(result.losses, np.float64).reshape(1, 1, -1)
    return az.from_dict(
        posterior=draws,
        sample_stats={"loss": losses, "final_loss": losses[:, :, -1]},
        dims={"loss": ["step"]},
    )
