r"""``LaplacianELBO``'s weight chosen, or checked, on the model's own held-out evidence.

:func:`choose_lam` does for an SVI fit what ``VEM.run`` does for
:class:`~jaxannot.inference.LapVar1` (:mod:`jaxannot.inference.vem.heldout`, whose
rule it shares step for step): the images are split into ``FOLDS`` folds; for each,
the observed sites inside the image plate are masked for the fold's images and the
masked model is fitted by SVI along ``loss.lam_path`` (``num_steps`` steps of the
given optimizer each, the first from the guide's own start, each next one
warm-started from the previous one's parameters); every held-out image is scored by
the held-out log-likelihood of its observations under its observed neighbours'
graph-smoothed posteriors (:meth:`LaplacianELBO.local_posteriors
<jaxannot.inference.LaplacianELBO.local_posteriors>` of the masked fit) against its
prior alone; 0 is kept unless the neighbours beat the prior by ``GATE`` standard
errors at 0, else the smallest weight within one standard error of the best. A
given ``lam > 0`` is checked at 0 and ``lam`` on the folds of
:func:`~jaxannot.inference.vem.heldout.check_masks`, with the warnings of
:func:`~jaxannot.inference.vem.heldout.check_lam`.

The weight and the fold's mask are arguments of one compiled SVI loop (``lax.scan``
over ``SVI.update``) whose static part compares by value
(:class:`~jaxannot.inference.svi_program.SVIProgram`), so all
``FOLDS * len(lam_path)`` fits share one compile, and so do later calls on the same
model, guide, optimizer, graph and shapes.
The site must be enumerated in the model (the score needs its exact local log
joint); the loss the user's loop then runs is the returned one, a plain
:class:`~jaxannot.inference.LaplacianELBO` at the chosen weight.

References
----------
Seed 000: graph-regularized variational inference (the penalty and its weight).
T. Hastie, R. Tibshirani, J. Friedman. The Elements of Statistical Learning, 2nd ed.,
2009, section 7.10 (cross-validation and the one-standard-error rule).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

import jax
import jax.numpy as jnp
from numpyro.infer import SVI

from jaxannot.inference.laplacian_elbo import LaplacianELBO
from jaxannot.inference.laplacian_elbo_enum import regularized_posteriors
from jaxannot.inference.local_summary import compiled_summary, local_summary
from jaxannot.inference.svi_program import SVIProgram
from jaxannot.inference.vem.heldout import (
    FOLDS,
    LamPath,
    check_masks,
    choose,
    heldout_folds,
    mask_observations,
    neighbour_scores,
    warn_against,
)
from jaxannot.runtime.static_key import value_key

__all__ = ["choose_lam"]


def _site(loss: LaplacianELBO) -> str:
    """The one site of ``loss`` (``ValueError`` for several)."""
    if not isinstance(loss, LaplacianELBO):
        raise TypeError(f"loss must be a LaplacianELBO, got {type(loss).__name__}")
    if len(loss.lams) != 1:
        raise ValueError(
            f"choose_lam takes a LaplacianELBO of one site, got {list(loss.lams)}: "
            "give each site its own fixed lam"
        )
    return next(iter(loss.lams))


def _masked_guide(guide: Callable) -> Callable:
    """``guide`` accepting (and ignoring) the masked model's ``heldout_keep``."""

    def masked(*args, heldout_keep, **kwargs):
        del heldout_keep
        return guide(*args, **kwargs)

    return masked


def choose_lam(
    loss: LaplacianELBO,
    rng_key: jax.Array,
    model: Callable,
    guide: Callable,
    optimizer: Any,
    num_steps: int,
    *args: Any,
    plate: str = "image",
    **kwargs: Any,
) -> tuple[LaplacianELBO, LamPath | None]:
    """The loss at the weight the held-out evidence supports (module docstring).

    Parameters
    ----------
    loss : LaplacianELBO
        Of one site enumerated in the model, at ``lam="auto"`` (choose) or a fixed
        weight (check it: a ``UserWarning`` when it lowers the held-out evidence
        below 0's, or when the graph's neighbours predict worse than the prior).
    rng_key : PRNGKey
    model, guide : callable
        As for ``numpyro.infer.SVI``; ``model`` declares ``plate``.
    optimizer : numpyro optimizer
        E.g. ``optax_to_numpyro(optax.adam(0.1))``; each masked fit runs
        ``num_steps`` steps of it (those of the fit to come serve).
    num_steps : int
    *args, **kwargs
        The model's and guide's arguments.
    plate : str
        The image plate's name.

    Returns
    -------
    loss : LaplacianELBO
        ``loss`` at the chosen weight (``loss`` itself when a fixed one is checked).
    path : LamPath or None
        The weights tried, their mean held-out log-likelihood (nats an image) and
        the choice; None for a fixed weight of 0 (nothing to check).

    Examples
    --------
    >>> loss = LaplacianELBO(TraceEnum_ELBO(), "z", graph, "auto",
    ...                      scale="mean_degree")  # doctest: +SKIP
    >>> optimizer = optax_to_numpyro(optax.adam(0.1))  # doctest: +SKIP
    >>> loss, path = choose_lam(loss, key, model, guide, optimizer, 150, x, 4)
    ... # doctest: +SKIP
    >>> SVI(model, guide, optimizer, loss).run(key, 150, x, 4)  # doctest: +SKIP
    """
    site = _site(loss)
    auto = isinstance(loss.lam, str)
    lam = None if auto else float(loss.lams[site])
    if not auto and lam == 0.0:
        return loss, None
    if int(num_steps) < 1:
        raise ValueError(f"num_steps must be >= 1, got {num_steps}")
    n = int(loss.graph.num_nodes)
    fold_key = jax.random.fold_in(rng_key, 43)
    if auto:
        lams, masks = loss.lam_path, heldout_folds(fold_key, n, FOLDS)
    else:
        lams, masks = (0.0, lam), check_masks(fold_key, n)
    base = loss.with_lam(0.0)
    base._neighbour_table()  # built once, shared by the copies the fits make
    svi = SVI(mask_observations(model, plate), _masked_guide(guide), optimizer, base)
    # one set-up (op by op, as numpyro's) serves the check below and the masked
    # fits' start
    state0 = svi.init(rng_key, *args, heldout_keep=jnp.asarray(masks[0]), **kwargs)
    params = svi.get_params(state0)
    if (
        compiled_summary(rng_key, params, model, guide, site, *args, **kwargs).log_joint
        is None
    ):
        raise ValueError(
            f"choose_lam needs site {site!r} enumerated in the model "
            "(infer={'enumerate': 'parallel'}, TraceEnum_ELBO): give a fixed lam"
        )
    extra = ("choose_lam", site, value_key(model), value_key(guide))
    program = SVIProgram(svi, args, kwargs, extra)
    program.site, program.model, program.guide = site, model, guide
    dynamic = program.dynamic(args, kwargs)
    scores, alone = _path(
        program, int(num_steps), state0, dynamic, lams, masks, rng_key
    )
    held = scores.shape[1]
    if auto:
        path = choose(lams, scores, alone, held)
        return loss.with_lam(path.chosen), path
    name = f"LaplacianELBO(lam={lam:g})"
    return loss, warn_against(name, lam, scores, alone, held, stacklevel=3)


def _path(program, num_steps, state0, dynamic, lams, masks, rng_key) -> tuple:
    """The held-out scores :math:`s` and :math:`t` [len(lams), held-out images] of
    SVI fits of the masked model of ``program`` along ``lams`` on each fold of
    ``masks``, each fold's first from ``state0``."""
    graph = program.svi.loss.graph
    uparams = program.svi.optim.get_params(state0.optim_state)
    scores, alone = [], []
    for keep in masks:
        start, fold_s, fold_t = uparams, [], []
        for lam in lams:
            start, a, b, phi = _masked_fit(
                program,
                num_steps,
                state0,
                start,
                jnp.float32(lam),
                jnp.asarray(keep),
                dynamic,
                rng_key,
            )
            s, t = neighbour_scores(a, b, phi, graph, keep)
            fold_s.append(s)
            fold_t.append(t)
        scores.append(np.stack(fold_s))
        alone.append(np.stack(fold_t))
    return np.concatenate(scores, axis=1), np.concatenate(alone, axis=1)


@functools.partial(jax.jit, static_argnums=(0, 1))
def _masked_fit(program, num_steps, state0, uparams, lam, keep, dynamic, rng_key):
    """A masked fit from ``uparams`` (unconstrained) at ``lam``, compiled once per
    ``program`` (:class:`~jaxannot.inference.svi_program.SVIProgram`): its end and
    the log joints and posteriors the scores need."""
    args, kwargs = program.join(dynamic)
    site = program.site
    svi = program.svi_at({site: lam})
    state = state0._replace(optim_state=svi.optim.init(uparams))

    def body(state, _):
        state, _ = svi.update(state, *args, heldout_keep=keep, **kwargs)
        return state, None

    state, _ = jax.lax.scan(body, state, None, length=num_steps)
    params = svi.get_params(state)
    a = local_summary(
        rng_key, params, program.model, program.guide, site, *args, **kwargs
    )
    b = local_summary(
        rng_key, params, svi.model, svi.guide, site, *args, heldout_keep=keep, **kwargs
    ).log_joint
    loss = svi.loss
    lam_r = 2.0 * lam * loss.unit
    phi = regularized_posteriors(
        rng_key, b, loss._neighbour_table(), lam_r, loss.sweeps
    )
    return svi.optim.get_params(state.optim_state), a.log_joint, b, phi
