r"""SVI fits as arviz InferenceData: restarts as chains, guide draws as draws.

One SVI fit is one chain, and R-hat needs several. :func:`svi_restarts` runs one SVI
from several keys (the key seeds the guide's random start, e.g. the autoguides'
``init_to_uniform``, and the ELBO's Monte Carlo draws);
:func:`~jaxannot.diagnostics.to_inference_data` turns the fits into one chain each,
whose draws are independent draws of that restart's fitted guide.

Which params a restart reports: at a constant step size (Adam's usual use) SVI does not
settle at its optimum but jitters around it (an Adam step moves a parameter by up to
about the step size whatever the gradient's scale, and the ELBO's Monte Carlo noise
keeps it moving). Where the guide is narrower than that jitter, the last iterates of
restarts at one optimum differ by more than the guides' spread and R-hat reads them as
different optima: three restarts of a normal mean whose posterior sd is 0.05, under Adam
0.1, give R-hat > 1.15 (1.34 in the run we looked at;
``tests/diagnostics/test_diagnostics.py``). :func:`svi_restarts` therefore reports, by
default, the mean of each restart's iterates over the last half of its steps
(Polyak-Ruppert averaging, in the optimizer's unconstrained coordinates, inside the
compiled loop): the same restarts then give R-hat < 1.05 (1.00), while restarts at
distinct optima still disagree (iterates around one optimum average to that optimum).
The average is sound once the loss has levelled off before the averaged tail begins; a
fit still descending there is averaged with where it was (``tail_average`` sets the
fraction, 0 keeps the last iterate; a decaying step size, e.g.
``optax.exponential_decay``, settles the last iterate too). Results of ``svi.run``
itself hold the last iterate.

What R-hat and ESS then mean: within a chain the draws are independent draws of one
guide, so the within-chain spread is that guide's posterior spread and the
between-chain spread is how far apart the restarts' optima are. R-hat (the
rank-normalized split R-hat of Vehtari et al. 2021) near 1 means the restarts found
the same optimum, up to the guide's uncertainty; well above 1 that they stopped at
different optima (a multimodal ELBO, too few steps, or topics in another order:
pass ``topic_axes`` to align them first). It is not a measure of MCMC mixing.
ESS counts the guide draws: about ``restarts * num_draws`` when the restarts agree,
fewer as they disagree; it says nothing about SVI's convergence (the loss traces,
``sample_stats["loss"]``, do).

References
----------
A. Vehtari, A. Gelman, D. Simpson, B. Carpenter, P.-C. Bürkner. Rank-normalization,
folding, and localization: an improved R-hat. Bayesian Analysis, 2021.

B. T. Polyak, A. B. Juditsky. Acceleration of stochastic approximation by averaging.
SIAM Journal on Control and Optimization, 1992.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

import jax
import jax.numpy as jnp
from numpyro.infer.svi import SVIRunResult

from jaxannot.diagnostics.restarts import align_topics, guide_draws
from jaxannot.inference.svi_program import SVIProgram
from jaxannot.runtime.progress import check_count
from jaxannot.runtime.static_key import value_key

if TYPE_CHECKING:
    import arviz as az

    from numpyro.infer import SVI

    from jaxannot.types import ArrayLike, PRNGKey

__all__ = ["svi_restarts"]


def svi_restarts(
    svi: SVI,
    rng_key: PRNGKey,
    num_restarts: int,
    num_steps: int,
    *args: Any,
    tail_average: float = 0.5,
    **kwargs: Any,
) -> list:
    """Run SVI from ``num_restarts`` keys split from ``rng_key``; each restart's
    params are the average of its last iterates (module docstring).

    Each restart starts afresh from its key. numpyro's autoguides fix their start
    on their first ``init`` (the prototype trace and its initial locations), so
    ``svi.run`` from another key alone would begin every restart at the same
    point; here an autoguide (or each guide of an ``AutoGuideList``) forgets its
    prototype before every restart and draws a new start with its
    ``init_loc_fn`` from that restart's key (``svi.guide`` is left with the last
    restart's prototype, which changes none of its draws). The starts differ when
    ``init_loc_fn`` is random (the autoguides' default ``init_to_uniform``); with a
    deterministic one (``init_to_median``, ``init_to_value``) or a hand-written
    guide whose parameters start at fixed values, every restart begins at the same
    point and R-hat compares one optimum with itself.

    Each restart runs the steps of ``svi.run`` (``svi.update`` in one compiled
    ``lax.scan``, the same losses), and its ``params`` are the mean of the
    iterates of its last ``tail_average * num_steps`` steps (at least the last),
    taken in the optimizer's unconstrained coordinates and then constrained:
    Polyak-Ruppert averaging, which removes the jitter of a constant step size
    around the optimum that the last iterate keeps.

    Parameters
    ----------
    svi : numpyro.infer.SVI
    rng_key : jax.Array
        Split into one key per restart (``jax.random.split``).
    num_restarts : int
        At least 2 (R-hat compares chains).
    num_steps : int
        Steps of every restart, at least 1.
    *args
        The model's and guide's arguments.
    tail_average : float
        The fraction of the last steps whose iterates are averaged, in [0, 1];
        0 keeps the last iterate (``svi.run``'s params). The default, the last
        half, suits a fit whose loss has levelled off by mid-run (check the loss
        traces); a fit still moving in its last half is averaged with where it
        was, so give it more steps or a smaller fraction.
    **kwargs
        ``stable_update``, ``forward_mode_differentiation``, ``init_params`` as for
        ``svi.run``, and the model's keyword arguments; ``progress_bar`` may only
        be False.

    Returns
    -------
    list of numpyro.infer.svi.SVIRunResult
        One per restart (``params`` the average, ``state`` the last iterate's,
        ``losses`` every step's), for
        :func:`~jaxannot.diagnostics.to_inference_data`.

    Examples
    --------
    >>> fits = svi_restarts(svi, jax.random.key(0), 4, 1000, x)  # doctest: +SKIP
    >>> idata = to_inference_data(
    ...     fits, guide=guide, model_args=(x,), rng_key=jax.random.key(1)
    ... )  # doctest: +SKIP
    >>> az.summary(idata)["r_hat"]  # doctest: +SKIP
    """
    num_restarts = check_count("num_restarts", num_restarts, minimum=2)
    num_steps = check_count("num_steps", num_steps)
    if not 0.0 <= float(tail_average) <= 1.0:
        raise ValueError(
            f"tail_average must be a fraction of the steps in [0, 1], got "
            f"{tail_average}: pass e.g. 0.5 (the last half) or 0 (the last iterate)"
        )
    if kwargs.pop("progress_bar", False):
        raise ValueError(
            "svi_restarts runs every restart in one compiled loop: pass "
            "progress_bar=False (or call svi.run yourself)"
        )
    tail = max(1, round(float(tail_average) * num_steps))
    stable = bool(kwargs.pop("stable_update", False))
    forward = bool(kwargs.pop("forward_mode_differentiation", False))
    init_params = kwargs.pop("init_params", None)
    fits = []
    for key in jax.random.split(rng_key, num_restarts):
        _forget_start(svi.guide)
        state = svi.init(key, *args, init_params=init_params, **kwargs)
        extra = ("svi_restarts", value_key(svi.static_kwargs))
        program = SVIProgram(svi, args, kwargs, extra)
        state, mean, losses = _averaged_steps(
            program,
            (num_steps, stable, forward),
            state,
            program.dynamic(args, kwargs),
            jnp.int32(num_steps - tail),
        )
        fits.append(SVIRunResult(svi.constrain_fn(mean), state, losses))
    return fits


@functools.partial(jax.jit, static_argnums=(0, 1))
def _averaged_steps(
    program: SVIProgram, steps: tuple, state, dynamic: list, first: jax.Array
) -> tuple:
    """SVI steps from ``state`` in one ``lax.scan``, compiled once per ``program``
    and ``steps`` (shared by the restarts and by every ``tail_average``).

    Parameters
    ----------
    program : SVIProgram
    steps : tuple
        ``(num_steps, stable_update, forward_mode_differentiation)``.
    state : numpyro.infer.svi.SVIState
    dynamic : list
        ``program.dynamic(args, kwargs)``.
    first : int32 scalar
        The first step whose iterate is averaged (0-based, < ``num_steps``).

    Returns
    -------
    state : SVIState
        After the last step.
    mean : dict
        The mean of the unconstrained params of the iterates from step ``first`` on.
    losses : float array [num_steps]
    """
    args, kwargs = program.join(dynamic)
    svi, (num_steps, stable, forward) = program.svi, steps
    step = svi.stable_update if stable else svi.update

    def body(carry, i):
        state, total = carry
        state, loss = step(state, *args, forward_mode_differentiation=forward, **kwargs)
        params = svi.optim.get_params(state.optim_state)
        total = jax.tree.map(
            lambda t, p: t + jnp.where(i >= first, p, 0), total, params
        )
        return (state, total), loss

    zeros = jax.tree.map(jnp.zeros_like, svi.optim.get_params(state.optim_state))
    (state, total), losses = jax.lax.scan(body, (state, zeros), jnp.arange(num_steps))
    tail = num_steps - first
    return state, jax.tree.map(lambda t: t / tail.astype(t.dtype), total), losses


def _forget_start(guide) -> None:
    """Make a numpyro autoguide (and every guide of an ``AutoGuideList``) draw its
    start again at its next ``init``: its prototype trace is set up anew."""
    from numpyro.infer.autoguide import AutoGuide

    for part in [guide, *getattr(guide, "_guides", ())]:
        if isinstance(part, AutoGuide):
            part.prototype_trace = None


def _global_sites(model, plate, args, kwargs) -> set[str]:
    """The model's latent sample sites outside ``plate`` (all of them if None).

    The model is traced abstractly (``jax.eval_shape``): only the sites' names and
    plates are read, and an eager run compiles each of its operations (the
    modelling notebook's scene mixture: 44 programs, about 3 CPU seconds)."""
    from numpyro import handlers

    names: set[str] = set()

    def collect(rng_key):
        trace = handlers.trace(handlers.seed(model, rng_key)).get_trace(*args, **kwargs)
        names.update(
            name
            for name, site in trace.items()
            if site["type"] == "sample"
            and not site["is_observed"]
            and not any(f.name == plate for f in site.get("cond_indep_stack", ()))
        )

    jax.eval_shape(collect, jax.random.key(0))
    return names


def _draw_keys(rng_key, num_fits: int):
    """One key per fit; a single fit draws with ``rng_key`` itself."""
    return [rng_key] if num_fits == 1 else list(jax.random.split(rng_key, num_fits))


def nan_padded(traces: Sequence[ArrayLike]) -> np.ndarray:
    """Loss traces of several fits as [fit, 1, longest trace], NaN after each end."""
    traces = [np.asarray(t, np.float64).reshape(-1) for t in traces]
    out = np.full((len(traces), 1, max(len(t) for t in traces)), np.nan)
    for r, t in enumerate(traces):
        out[r, 0, : len(t)] = t
    return out


def _aligned(draws: dict, topic_axes) -> tuple[dict, list | None]:
    """Draws [chains, draws, ...] with every chain's topics matched to chain 0's."""
    if not topic_axes:
        return draws, None
    topic_axes, first, size = dict(topic_axes), next(iter(topic_axes)), None
    for name, axis in topic_axes.items():
        if name not in draws:
            raise ValueError(
                f"topic_axes names {name!r}, not a kept site: {list(draws)}"
            )
        shape = draws[name].shape[2:]  # of one draw
        if not -len(shape) <= axis < len(shape):
            raise ValueError(
                f"topic axis {axis} of site {name!r} is out of range for its shape "
                f"{shape} per draw"
            )
        size = shape[axis] if size is None else size
        if shape[axis] != size:
            raise ValueError(
                f"topic axis {axis} of site {name!r} (shape {shape} per draw) has "
                f"{shape[axis]} topics, site {first!r} has {size}"
            )
        topic_axes[name] = axis % len(shape)
    aligned, perms = align_topics(draws, topic_axes, first)
    return aligned, perms.tolist()


def svi_to_inference_data(
    results: Sequence[SVIRunResult],
    topic_axes: Mapping[str, int] | None,
    guide: Callable | None,
    model: Callable | None,
    args: tuple,
    kwargs: dict,
    rng_key: PRNGKey | None,
    num_draws: int,
    plate: str | None,
) -> az.InferenceData:
    """SVI fits (one chain each) as InferenceData; see ``to_inference_data``."""
    import arviz as az

    if guide is None:
        raise ValueError("an SVI result needs the guide it fitted: pass guide=")
    if rng_key is None:
        raise ValueError("guide draws need a key: pass rng_key=")
    num_draws = check_count("num_draws", num_draws)
    chains = [
        guide_draws(key, guide, res.params, *args, num_draws=num_draws, **kwargs)
        for key, res in zip(_draw_keys(rng_key, len(results)), results, strict=True)
    ]
    model = model if model is not None else getattr(guide, "model", None)
    names = list(chains[0])
    if model is not None:
        kept = _global_sites(model, plate, args, kwargs)
        names = [n for n in names if n in kept]
    draws = {n: np.concatenate([c[n] for c in chains]) for n in names}
    if not draws:
        raise ValueError(
            f"the guide draws no latent site of the model outside plate {plate!r}; "
            f"pass plate=None to keep the per-image sites"
        )
    draws, perms = _aligned(draws, topic_axes)
    loss = nan_padded([res.losses for res in results])
    last = [np.asarray(res.losses).reshape(-1)[-1] for res in results]
    final = np.asarray(last, np.float64)[:, None]  # NaN where a fit diverged
    with warnings.catch_warnings():  # sample_stats: one draw (the fit) per chain
        warnings.filterwarnings("ignore", "More chains", UserWarning)
        idata = az.from_dict(
            posterior=draws,
            sample_stats={"loss": loss, "final_loss": final},
            dims={"loss": ["step"]},
        )
    if perms is not None:
        idata.posterior.attrs["topic_permutations"] = perms
    return idata
