"""A ``LaplacianELBO`` fit that compiles once: :func:`fit_laplacian`.

``SVI(model, guide, optimizer, loss).run(...)`` compiles its loop at every call
(numpyro jits a fresh closure), one fit of issue 43's 600-image weak Bernoulli
mixture 12 to 33 s where its 100 steps take about one. :func:`fit_laplacian` runs
the same steps through the library's runner
(:func:`~jaxannot.inference.svi_program.run_steps`, one compiled loop) whose
static part compares by value and whose weights are dynamic: a second fit of the
same model, guide, optimizer, graph and shapes, at any weight and for any number
of steps, compiles nothing. With
``lam="auto"`` (the loss's default) it first chooses the weight with
:func:`~jaxannot.inference.laplacian_elbo_lam.choose_lam` (its 30 masked fits
share one compiled loop too); a given weight > 0 is checked there as well unless
``heldout_check=False``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

import jax
import jax.numpy as jnp
import optax
from numpyro.infer import SVI
from numpyro.infer.svi import SVIState
from numpyro.optim import optax_to_numpyro

from jaxannot.inference.laplacian_elbo import LaplacianELBO
from jaxannot.inference.laplacian_elbo_lam import choose_lam
from jaxannot.inference.local_summary import compiled_summary
from jaxannot.inference.svi_program import SVIProgram, run_steps
from jaxannot.inference.vem.heldout import LamPath

__all__ = ["LaplacianFit", "fit_laplacian"]


class LaplacianFit(NamedTuple):
    """What :func:`fit_laplacian` returns.

    Attributes
    ----------
    params : dict
        The fitted parameters, constrained (as ``SVI.get_params``).
    state : SVIState
        The SVI state after the last step (``SVI.update`` goes on from it).
    losses : np.ndarray [num_steps]
        The loss before each step (float32).
    loss : LaplacianELBO
        The loss at the weight used (its ``lams``).
    path : LamPath or None
        The weights tried and their held-out evidence (``"auto"``, or a checked
        fixed weight); None when nothing was checked.
    """

    params: dict
    state: SVIState
    losses: np.ndarray
    loss: LaplacianELBO
    path: LamPath | None


def fit_laplacian(
    loss: LaplacianELBO,
    rng_key: jax.Array,
    model: Callable,
    guide: Callable,
    optimizer: Any,
    num_steps: int,
    *args: Any,
    init_params: dict | None = None,
    heldout_check: bool = True,
    plate: str = "image",
    **kwargs: Any,
) -> LaplacianFit:
    """``num_steps`` SVI steps on ``loss``, compiled once per configuration.

    Parameters
    ----------
    loss : LaplacianELBO
        At ``"auto"`` (its default: the weight is chosen first, one site enumerated
        in the model) or at fixed weights.
    rng_key : PRNGKey
    model, guide : callable
        As for ``numpyro.infer.SVI``. A guide *object* (an autoguide) is compared
        by identity: pass the same one to share the compiled loop between fits.
    optimizer : numpyro optimizer or optax.GradientTransformation
        Equal optimizers (e.g. two ``optax.adam(0.1)``) share the compiled loop.
    num_steps : int
    *args, **kwargs
        The model's and guide's arguments; arrays are dynamic, other values part
        of the compiled loop's key.
    init_params : dict, optional
        Constrained starting values of the guide's parameters (``SVI.init``'s).
    heldout_check : bool
        Check a given weight > 0 on held-out evidence (a ``UserWarning`` when it
        lowers it below 0's; two masked fits). Only a loss of one site enumerated
        in the model can be checked: other losses are fitted unchecked.
    plate : str
        The image plate's name (for the held-out folds).

    Returns
    -------
    LaplacianFit

    Examples
    --------
    >>> loss = LaplacianELBO(TraceEnum_ELBO(), "z", graph, scale="mean_degree")
    ... # doctest: +SKIP
    >>> fit = fit_laplacian(loss, key, model, guide, optax.adam(0.1), 100, x, 4)
    ... # doctest: +SKIP
    >>> fit.loss.lams, fit.path.chosen  # doctest: +SKIP
    """
    if not isinstance(loss, LaplacianELBO):
        raise TypeError(f"loss must be a LaplacianELBO, got {type(loss).__name__}")
    if int(num_steps) < 1:
        raise ValueError(f"num_steps must be >= 1, got {num_steps}")
    if isinstance(optimizer, optax.GradientTransformation):
        optimizer = optax_to_numpyro(optimizer)
    svi = SVI(model, guide, optimizer, loss.with_lam(0.0))
    state = svi.init(rng_key, *args, init_params=init_params, **kwargs)
    path = None
    if isinstance(loss.lam, str) or (
        heldout_check
        and _checkable(loss, svi.get_params(state), model, guide, args, kwargs)
    ):
        loss, path = choose_lam(
            loss,
            rng_key,
            model,
            guide,
            optimizer,
            num_steps,
            *args,
            plate=plate,
            **kwargs,
        )
    svi.loss = loss
    program = SVIProgram(svi, args, kwargs)
    lams = {site: jnp.float32(lam) for site, lam in loss.lams.items()}
    state, losses = run_steps(
        program, int(num_steps), state, lams, program.dynamic(args, kwargs)
    )
    return LaplacianFit(svi.get_params(state), state, losses, loss, path)


def _checkable(loss, params, model, guide, args, kwargs) -> bool:
    """Whether a fixed weight can be checked on held-out evidence: one site,
    weight > 0, enumerated in the model."""
    if len(loss.lams) != 1 or float(next(iter(loss.lams.values()))) == 0.0:
        return False
    site = next(iter(loss.lams))
    key = jax.random.key(0)  # the summary of an enumerated site is deterministic
    summary = compiled_summary(key, params, model, guide, site, *args, **kwargs)
    return summary.log_joint is not None
