"""The weak-Bernoulli case of ``graph_regularization.py`` (issue 43, point 3).

Issue 43's weak Bernoulli mixture (:mod:`benchmarks.common.graph_toy`
``weak_bernoulli``: 600 items, 4 classes, 30 features at 0.5 +- 0.15, a 10-NN graph
from a second view at the separation given), seeds given, fitted by

- plain VEM (closed-form M-step, ``iterations`` EM iterations),
- VEM with LapVar1 and LapVar2 at ``lam="auto"`` and at each fixed lam (no
  held-out check: the fit alone),
- SVI of the same model with ``z`` enumerated (``AutoDelta`` on the globals started
  at the VEM's default start, Adam ``lr``, ``steps`` steps):
  ``LaplacianELBO(TraceEnum_ELBO(), "z", graph, lam, scale="mean_degree",
  sweeps=sweeps)`` at each fixed lam, and at ``"auto"`` through ``choose_lam``
  (its time and the fit's recorded apart).

Each row: the ARI of the argmax posteriors (``local_posteriors`` for SVI), the
weight used, the wall time of the fit (VEM: the first fit of a kind in the process
includes its compile, later seeds reuse it; SVI through ``fit_laplacian``, whose
compiled loop is shared by the fits of one seed's graph and guide at every
weight: the first fit of a seed includes its compile) and, for ``LaplacianELBO``,
the backend compiles of the row (``choose_lam`` and the fit).
"""

from __future__ import annotations

import time
import warnings
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import jax
    from numpyro.infer.autoguide import AutoDelta


def _model(x, num_classes):
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    n, d = x.shape
    pi = numpyro.sample("pi", dist.Dirichlet(jnp.ones(num_classes)))
    with numpyro.plate("class", num_classes):
        rho = numpyro.sample("rho", dist.Beta(2.0, 2.0).expand([d]).to_event(1))
    with numpyro.plate("image", n) as idx:
        z = numpyro.sample("z", dist.Categorical(pi), infer={"enumerate": "parallel"})
        numpyro.sample("x", dist.Bernoulli(rho[z]).to_event(1), obs=x[idx])


def start_guide(toys, key: jax.Array, x: jax.Array) -> AutoDelta:
    """The SVI fits' guide: point masses on the globals, started where VEM's own
    start puts them (so that SVI and VEM begin at the same globals).

    Parameters
    ----------
    toys : module
        The toy module, :mod:`benchmarks.common.graph_toy`.
    key : jax.Array
        The start's random key.
    x : jax.Array
        [n, d] binary observations.

    Returns
    -------
    AutoDelta
        The guide over every site but ``z`` of :func:`_model`.
    """
    from numpyro import handlers
    from numpyro.infer.autoguide import AutoDelta
    from numpyro.infer.initialization import init_to_value

    from jaxannot.inference import VEM

    init = VEM(toys.bernoulli_mixture, "z", m_step=toys.bernoulli_m_step)
    values = {
        k: v for k, v in init.init(key, x, num_classes=4).params.items() if k != "terms"
    }
    return AutoDelta(
        handlers.block(_model, hide=["z"]), init_loc_fn=init_to_value(values=values)
    )


def weak_bernoulli_rows(seeds, lams, iterations, steps, lr, sweeps, separation) -> list:
    """The rows of the module docstring, seed by seed."""
    from sklearn.metrics import adjusted_rand_score

    import jax
    import jax.numpy as jnp
    import numpyro
    import optax
    from numpyro.infer import TraceEnum_ELBO

    from benchmarks.common import graph_toy as toys
    from jaxannot.inference import VEM, LaplacianELBO, LapVar1, LapVar2, fit_laplacian
    from jaxannot.inference.laplacian_elbo_lam import choose_lam

    rows = []
    compiles = [0]  # backend compiles so far (JAX's monitoring events)

    def count(name, *_args, **_kwargs):
        if name == "/jax/core/compile/backend_compile_duration":
            compiles[0] += 1

    jax.monitoring.register_event_duration_secs_listener(count)
    for seed in seeds:
        toy = toys.weak_bernoulli(
            600, seed=seed, contrast=0.15, view_separation=separation
        )
        x, key = jnp.asarray(toy.x), jax.random.key(seed)

        def ari(phi, toy=toy):
            return float(adjusted_rand_score(toy.truth, np.asarray(phi).argmax(1)))

        def vem_fit(estep, x=x, key=key):
            vem = VEM(
                toys.bernoulli_mixture, "z", estep=estep, m_step=toys.bernoulli_m_step
            )
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                res = vem.run(key, iterations, x, num_classes=4, progress_bar=False)
            return res, time.perf_counter() - start

        res, seconds = vem_fit(None)
        rows.append(_row(seed, "plain VEM", 0.0, 0.0, ari(res.posteriors), seconds))
        for name, cls in (("LapVar1", LapVar1), ("LapVar2", LapVar2)):
            res, seconds = vem_fit(cls(toy.graph, "auto"))
            rows.append(_row(seed, name, "auto", res.lam, ari(res.posteriors), seconds))
            for lam in lams:
                res, seconds = vem_fit(cls(toy.graph, lam, heldout_check=False))
                rows.append(_row(seed, name, lam, lam, ari(res.posteriors), seconds))
        guide = start_guide(toys, key, x)
        optimizer = numpyro.optim.optax_to_numpyro(optax.adam(lr))

        def svi_fit(loss, guide=guide, optimizer=optimizer, x=x, key=key):
            start = time.perf_counter()
            fit = fit_laplacian(
                loss, key, _model, guide, optimizer, steps, x, 4, heldout_check=False
            )
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                phi = loss.local_posteriors(key, fit.params, _model, guide, "z", x, 4)
            return ari(phi), time.perf_counter() - start

        for lam in ("auto", *lams):
            loss = LaplacianELBO(
                TraceEnum_ELBO(),
                "z",
                toy.graph,
                lam,
                scale="mean_degree",
                sweeps=sweeps,
            )
            choose_s, before = 0.0, compiles[0]
            if lam == "auto":
                start = time.perf_counter()
                loss, _ = choose_lam(loss, key, _model, guide, optimizer, steps, x, 4)
                choose_s = time.perf_counter() - start
            score, seconds = svi_fit(loss)
            row = _row(
                seed, "LaplacianELBO", lam, float(loss.lams["z"]), score, seconds
            )
            rows.append(
                dict(row, choose_seconds=choose_s, compiles=compiles[0] - before)
            )
    return rows


def _row(seed, fit, given, lam, ari, seconds) -> dict:
    return {
        "seed": int(seed),
        "fit": fit,
        "lam_given": given,
        "lam": float(lam),
        "ari": ari,
        "seconds": seconds,
    }


def summary(rows, lams) -> dict:
    """Per fixed lam: the largest |ARI(LaplacianELBO) - ARI(LapVar1)| over the seeds
    and the ratio of their median times (at ``"auto"``: ``choose_lam`` and the fit
    against LapVar1's fit with its own choice); per fit and weight: the mean ARI."""

    def pick(fit, lam):
        return {r["seed"]: r for r in rows if r["fit"] == fit and r["lam_given"] == lam}

    out = {"max_ari_gap_to_lapvar1": {}, "median_seconds_ratio_to_lapvar1": {}}
    for lam in lams:
        elbo, lap = pick("LaplacianELBO", lam), pick("LapVar1", lam)
        gap = max(abs(elbo[s]["ari"] - lap[s]["ari"]) for s in elbo)
        ratio = np.median([r["seconds"] for r in elbo.values()]) / np.median(
            [r["seconds"] for r in lap.values()]
        )
        out["max_ari_gap_to_lapvar1"][f"{lam:g}"] = float(gap)
        out["median_seconds_ratio_to_lapvar1"][f"{lam:g}"] = float(ratio)
    elbo, lap = pick("LaplacianELBO", "auto"), pick("LapVar1", "auto")
    total = [r["seconds"] + r["choose_seconds"] for r in elbo.values()]
    out["median_seconds_ratio_to_lapvar1"]["auto"] = float(
        np.median(total) / np.median([r["seconds"] for r in lap.values()])
    )
    means = {}
    for r in rows:
        given = r["lam_given"]
        key = f"{r['fit']} {given if isinstance(given, str) else format(given, 'g')}"
        means.setdefault(key, []).append(r["ari"])
    out["mean_ari"] = {k: float(np.mean(v)) for k, v in means.items()}
    plain, auto = pick("plain VEM", 0.0), pick("LapVar1", "auto")
    gains = [auto[s]["ari"] - plain[s]["ari"] for s in sorted(plain)]
    out["lapvar1_auto_gain_over_plain"] = {
        "per_seed": [float(g) for g in gains],
        "mean": float(np.mean(gains)),
        "min": float(np.min(gains)),
    }
    return out
