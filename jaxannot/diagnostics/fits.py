"""Any fit as arviz InferenceData: VEM restarts (aligned on their local posteriors)
or SVI restarts (guide draws), with the loss traces in ``sample_stats``."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

import jax

from jaxannot.diagnostics.restarts import match_topics, permute_topics
from jaxannot.diagnostics.svi import nan_padded, svi_to_inference_data

if TYPE_CHECKING:
    import arviz as az

__all__ = ["to_inference_data"]


def to_inference_data(
    result: Iterable,
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
) -> az.InferenceData:
    """A fit as ``arviz.InferenceData``: VEM restarts or SVI restarts.

    **VEM** (a :class:`~jaxannot.inference.VEMResult` or a sequence of them: restarts
    of one model on one corpus). Every restart is one chain. A VEM fit is a point
    estimate: without draws a chain has one draw (its values); restarts from
    :meth:`VEM.run_restarts(..., num_draws=M) <jaxannot.inference.VEM.run_restarts>`
    carry ``M`` draws of the global posterior their local posteriors imply (a
    Laplace approximation at the fit, :meth:`~jaxannot.inference.VEM.laplace_draws`),
    which become the chain's draws, each with its own fold-in posteriors.

    What R-hat and ESS then say about EM: every chain is centred on its restart's
    optimum and spread by that optimum's posterior uncertainty, so R-hat near 1
    means the restarts found the same optimum up to that uncertainty (after the
    topic alignment below), and R-hat well above 1 that they stopped at different
    local optima (compare their final losses). The draws are independent within a
    chain, so ESS is about the number of draws when the chains agree and falls as
    they disagree; it counts Laplace draws, not EM iterations, and says nothing
    about EM's convergence (the loss traces do). The restarts' topics (the values
    of the discrete local
    site) are aligned to restart 0's by the Hungarian algorithm on the per-image
    posteriors: the permutation ``p`` of restart ``r`` minimizes
    :math:`\\sum_{ik} |\\phi^0_{ik} - \\phi^r_{i p_k}|` (equivalently maximizes the
    overlap :math:`\\sum_{ik} \\min(\\phi^0_{ik}, \\phi^r_{i p_k})`); it is taken along
    every topic axis of the global sites and of the posteriors. With the topics
    aligned, the chains of a site agree when the restarts found the same solution.

    **SVI** (numpyro's ``SVIRunResult`` or a sequence of them: restarts of one SVI,
    e.g. from :func:`~jaxannot.diagnostics.svi_restarts`). Every restart is one
    chain of ``num_draws`` independent draws of its fitted guide
    (:func:`~jaxannot.diagnostics.guide_draws`; the restarts draw with keys split
    from ``rng_key``, a single fit with ``rng_key`` itself), at its ``params``:
    ``svi_restarts``' tail averages by default, ``svi.run``'s last iterate, which
    jitters at a constant step size (:mod:`jaxannot.diagnostics.svi`). One fit alone
    is one chain, whose R-hat is NaN. What R-hat and ESS say about SVI restarts: R-hat
    compares the restarts' optima with the guides' spread (near 1: one optimum;
    well above 1: different optima), not MCMC mixing; ESS counts independent guide
    draws, not how well anything mixed (:mod:`jaxannot.diagnostics.svi`). With
    ``topic_axes`` the restarts' topics are aligned to restart 0's before R-hat
    (label switching): the permutation matches the chains' mean values of the
    first site named (:func:`~jaxannot.diagnostics.align_topics`, Hungarian on the
    L1 distance).

    Parameters
    ----------
    result : VEMResult or SVIRunResult, or a sequence of one of them
    topic_axes : mapping site -> axis, optional
        SVI: the topic axis of each topic-indexed site within one draw, the first
        site's chain means being matched; default: no alignment.
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
        SVI: draws of each restart's guide (an integer >= 1).
    plate : str or None
        SVI: keep the model's latent sites outside this plate (the global sites);
        None keeps every latent site of the model, per-image ones included.

    Returns
    -------
    arviz.InferenceData
        ``posterior``: the global sites, dims (chain, draw, ...), a topic axis named
        ``"topic"`` (VEM), other axes ``f"{site}_dim_{i}"``; VEM adds the local
        posteriors. ``posterior.attrs["topic_permutations"]`` (VEM, and SVI with
        ``topic_axes``): per chain, the permutation applied to that restart
        (restart 0's is the identity).
        ``sample_stats``: ``loss`` dims (chain, draw, step) (the loss trace: VEM's
        negative objective, NaN-padded and NaN after early stopping; SVI's negative
        ELBO) and ``final_loss`` (chain, draw) (VEM: the last finite loss; SVI: the
        last loss, NaN where the fit diverged); their draw dim has size 1. VEM's
        ``params["terms"]`` (extra objective terms) are left out.

    Raises
    ------
    ValueError
        No restarts, restarts of different models or shapes, a topic axis whose
        length is not K (VEM) or differs between sites (SVI), or an SVI result
        without ``guide`` or ``rng_key``.
    TypeError
        Not a fit, or ``num_draws`` not an integer.

    Examples
    --------
    Four VEM restarts of a mixture of unigrams as four chains (the model takes a
    list of views, each a count matrix [images, words]):

    >>> import numpy as np
    >>> import arviz as az
    >>> import jax
    >>> from jaxannot.diagnostics import to_inference_data
    >>> from jaxannot.inference import VEM
    >>> from jaxannot.methods.topic_models.mixture_of_unigrams import (
    ...     closed_form_m_step, mixture_of_unigrams)
    >>> counts = [np.random.default_rng(0).poisson(2.0, (40, 8)).astype(np.float32)]
    >>> vem = VEM(mixture_of_unigrams, "z", m_step=closed_form_m_step,
    ...           warn_empty=False)
    >>> fits = [vem.run(k, 5, counts, num_topics=3, progress_bar=False)
    ...         for k in jax.random.split(jax.random.key(0), 4)]
    >>> idata = to_inference_data(fits)
    >>> idata.posterior["beta_0"].dims
    ('chain', 'draw', 'topic', 'beta_0_dim_1')
    >>> az.summary(idata, var_names=["pi"]).shape[0]  # one row per topic
    3

    An SVI fit with an autoguide (its model is ``guide.model``):

    >>> guide = AutoNormal(model)  # doctest: +SKIP
    >>> res = SVI(model, guide, optim, Trace_ELBO()).run(key, 1000, x)  # doctest: +SKIP
    >>> idata = to_inference_data(
    ...     res, guide=guide, model_args=(x,), rng_key=jax.random.key(1)
    ... )  # doctest: +SKIP
    >>> idata.sample_stats["loss"].dims  # doctest: +SKIP
    ('chain', 'draw', 'step')

    Four SVI restarts as four chains (finite R-hat):

    >>> fits = svi_restarts(svi, jax.random.key(0), 4, 1000, x)  # doctest: +SKIP
    >>> idata = to_inference_data(
    ...     fits, guide=guide, model_args=(x,), rng_key=jax.random.key(1)
    ... )  # doctest: +SKIP
    """
    from numpyro.infer.svi import SVIRunResult

    from jaxannot.inference.vem.algorithm import VEMResult

    if isinstance(result, SVIRunResult):
        result = [result]
    if _all_of(result, SVIRunResult):
        return svi_to_inference_data(
            list(result),
            topic_axes,
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
            f"expected a VEMResult or an SVIRunResult, or a sequence of one of "
            f"them, got {type(result).__name__}"
        )
    svi_only = dict(
        guide=guide, model=model, rng_key=rng_key, model_kwargs=model_kwargs
    )
    given = [k for k, v in svi_only.items() if v is not None]
    given += ["model_args"] if len(model_args) else []
    if given:
        raise ValueError(f"{given} apply to SVI results, not to VEM restarts")
    return _vem_to_inference_data(list(result), topic_axes, local_site)


def _all_of(results, kind) -> bool:
    """``results`` is a non-empty sequence of ``kind`` only."""
    return (
        isinstance(results, Sequence)
        and len(results) > 0
        and all(isinstance(r, kind) for r in results)
    )


def _vem_to_inference_data(results, topic_axes, local_site):
    import arviz as az

    names, values, phis = _vem_draws(results)
    num_images, k = phis[0].shape[1:]
    shapes = {n: values[0][n].shape[1:] for n in names}  # of one draw
    topic_axes = _checked_topic_axes(topic_axes, names, shapes, k)
    points = [np.asarray(jax.device_get(res.posteriors)) for res in results]
    perms = np.stack([match_topics(points[0].T, phi.T) for phi in points])

    posterior = {n: np.stack([v[n] for v in values]) for n in names}
    dims = {
        n: [
            "topic" if i == topic_axes.get(n) else f"{n}_dim_{i}"
            for i in range(len(shapes[n]))
        ]
        for n in names
    }
    if local_site is not None:
        probs = f"{local_site}_probs"
        if probs in posterior:
            raise ValueError(f"a global site is named {probs!r}; pass local_site")
        posterior[probs] = np.stack(phis)
        dims[probs] = ["image", "topic"]
        topic_axes[probs] = 1
    posterior = permute_topics(posterior, topic_axes, perms)

    trace = nan_padded([res.losses for res in results])
    final = np.full((len(results), 1), np.nan)
    for r, lo in enumerate(trace[:, 0]):
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


def _vem_draws(results):
    """``(names, values, phis)`` of VEM restarts: the global sites' names, each
    restart's draws ``{site: [draws, ...]}`` (its point estimate as one draw when it
    has none) and draw posteriors ``[draws, images, K]``; ValueError unless every
    restart is a VEMResult of one model on one corpus, all with draws or none."""
    from jaxannot.inference.vem.algorithm import VEMResult

    if not results:
        raise ValueError("no VEM restarts to convert (an empty sequence)")
    bad = [type(r).__name__ for r in results if not isinstance(r, VEMResult)]
    if bad:
        raise ValueError(f"every restart must be a VEMResult; got {bad}")
    names = [k for k in results[0].params if k != "terms"]
    with_draws = [res.draws is not None for res in results]
    if any(with_draws) and not all(with_draws):
        raise ValueError(
            f"restarts {[r for r, d in enumerate(with_draws) if not d]} have no "
            "draws but others do: give every restart draws (VEM.run_restarts("
            "..., num_draws=M)) or none"
        )
    values, phis = [], []
    for r, res in enumerate(results):
        own = [k for k in res.params if k != "terms"]
        if sorted(own) != sorted(names):
            raise ValueError(
                f"restart {r} has the global sites {sorted(own)} but restart 0 has "
                f"{sorted(names)}: restarts must be fits of one model"
            )
        if res.draws is None:  # one draw: the point estimate
            draws = {k: res.params[k][None] for k in names}
            draw_phis = res.posteriors[None]
        else:
            draws, draw_phis = res.draws, res.draw_posteriors
        values.append({k: np.asarray(jax.device_get(draws[k])) for k in names})
        phis.append(np.asarray(jax.device_get(draw_phis)))
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
    return names, values, phis


def _checked_topic_axes(topic_axes, names, shapes, k: int) -> dict:
    """``{site: axis}`` of the global sites' topic axes (default: every site whose
    first axis has ``k`` entries), made non-negative; ValueError naming a site that
    is not global or whose axis does not have the ``k`` topics."""
    if topic_axes is None:
        topic_axes = {n: 0 for n in names if shapes[n] and shapes[n][0] == k}
    topic_axes = dict(topic_axes)
    for n, axis in topic_axes.items():
        if n not in shapes:
            raise ValueError(f"topic_axes names {n!r}, not a global site: {names}")
        shape = shapes[n]
        if not -len(shape) <= axis < len(shape) or shape[axis] != k:
            raise ValueError(
                f"topic axis {axis} of site {n!r} (shape {shape}) does not have the "
                f"{k} topics of the local posteriors"
            )
        topic_axes[n] = axis % len(shape)
    return topic_axes
