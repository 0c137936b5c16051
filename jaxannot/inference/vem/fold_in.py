"""What a :class:`~jaxannot.inference.vem.algorithm.VEM` fit says about images.

Functions of a VEM and the model's arguments, which VEM's methods delegate to
(they read only its public attributes ``declared``, ``plate``
and ``terms``, and its public methods):

- :func:`under`: a ``compute`` of (new) images under fitted global values, checked
  first: :func:`local_values`, their local log joint or exact posteriors (fold-in),
  or :func:`marginals`, every enumerated discrete site's posteriors;
- :func:`predict`: the extra terms' predictions from the fold-in posteriors;
- :func:`with_laplace_draws`: draws of the global posterior a fit's posteriors imply
  (:mod:`~jaxannot.inference.vem.global_sites`).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

import jax
import jax.numpy as jnp

from jaxannot.inference.vem import joint_enumeration
from jaxannot.inference.vem.checks import checked_start, missing_globals, model_errors
from jaxannot.inference.vem.global_sites import MAX_LAPLACE_DIM, laplace_draws
from jaxannot.inference.vem.layout import Whole, fold_in_all, log_joint_all
from jaxannot.inference.vem.local_map import local_maps
from jaxannot.inference.vem.model_call import ModelCall
from jaxannot.inference.vem.steps import VEMResult

if TYPE_CHECKING:
    from jaxannot.inference.vem.declared import DeclaredModel
    from jaxannot.inference.vem.log_joint import Setup
    from jaxannot.types import Array

__all__ = [
    "local_values",
    "marginals",
    "predict",
    "under",
    "with_laplace_draws",
]

T = TypeVar("T")


def with_laplace_draws(
    vem: Any,
    rng_key: jax.Array,
    result: VEMResult,
    num_draws: int,
    args: tuple,
    kwargs: dict,
) -> VEMResult:
    """:meth:`VEM.laplace_draws <jaxannot.inference.vem.algorithm.VEM.laplace_draws>`:
    ``result`` with ``num_draws`` draws of the global posterior its posteriors
    imply, and each draw's fold-in posteriors.

    Parameters
    ----------
    vem : VEM
        The algorithm that fitted ``result`` (its ``declared``).
    rng_key, result, num_draws
        As :meth:`VEM.laplace_draws
        <jaxannot.inference.vem.algorithm.VEM.laplace_draws>` takes them.
    args, kwargs : tuple, dict
        The model's positional and keyword arguments.

    Returns
    -------
    VEMResult
        ``result`` with ``draws`` and ``draw_posteriors``.

    Warns
    -----
    UserWarning
        ``result.params`` is not a maximum of the expected complete log joint.
    """
    setup, dynamic = vem.declared.setup(args, kwargs)
    s = setup.structure
    missing_globals(s, result.params, "result.params")
    if int(num_draws) < 1:
        raise ValueError(f"num_draws must be >= 1, got {num_draws}")
    dim = sum(int(np.prod(shape)) for shape in s.global_shapes)
    if dim > MAX_LAPLACE_DIM:
        raise ValueError(
            f"the global sites have {dim} coordinates; Laplace draws need a dense "
            f"Hessian, at most {MAX_LAPLACE_DIM} coordinates"
        )
    values = {k: jnp.asarray(result.params[k]) for k in s.globals_}
    layout = Whole(setup)
    draws, smallest = laplace_draws(
        vem.declared,
        layout,
        int(num_draws),
        rng_key,
        values,
        result.posteriors,
        dynamic,
    )
    if float(smallest) <= 0:
        warnings.warn(
            "the fit's global values are not a maximum of the expected complete "
            f"log joint (Hessian eigenvalue {float(smallest):.3g}); draws along "
            "such directions use unit precision: fit longer (num_steps, m_steps)",
            UserWarning,
            stacklevel=3,  # the caller of VEM.laplace_draws
        )
    phis = fold_in_all(vem.declared, layout, draws, dynamic)
    return result._replace(draws=draws, draw_posteriors=phis)


def under(
    vem: Any,
    params: dict,
    args: tuple,
    kwargs: dict,
    compute: Callable[[DeclaredModel, Setup, dict, tuple], T],
) -> T:
    """``compute(declared, setup, values, dynamic)`` for the images of ``args``
    and ``kwargs`` under the global values ``params``, checked as
    ``init_params`` is, with the model's shape and type errors explained
    (:func:`~jaxannot.inference.vem.checks.model_errors`).

    Parameters
    ----------
    vem : VEM
        The algorithm (its ``declared`` and ``plate``).
    params : dict
        Site -> global value.
    args : tuple
        The model's positional arguments.
    kwargs : dict
        Its keyword arguments.
    compute : callable
        What is computed from the declaration, the set-up, the checked values
        and the array arguments.

    Returns
    -------
    object
        ``compute``'s answer.
    """
    with model_errors(vem.plate, args, kwargs):
        setup, dynamic = vem.declared.setup(args, kwargs)
    values = checked_start(vem, setup, params, (args, kwargs), what="params")
    with model_errors(vem.plate, args, kwargs):
        return compute(vem.declared, setup, values, dynamic)


def predict(
    vem: Any, result: VEMResult, args: tuple, kwargs: dict, term: int = 0
) -> Array:
    """:meth:`VEM.predict <jaxannot.inference.vem.algorithm.VEM.predict>`: extra
    term ``term``'s predictions for the images of ``args``, from their fold-in
    posteriors.

    Parameters
    ----------
    vem : VEM
        The algorithm (its ``terms`` and ``posteriors_for``).
    result, term
        As :meth:`VEM.predict <jaxannot.inference.vem.algorithm.VEM.predict>`
        takes them.
    args, kwargs : tuple, dict
        The images' positional and keyword arguments.

    Returns
    -------
    jax.Array [N]
        The predictions.
    """
    if not vem.terms:
        raise ValueError("this VEM has no extra terms to predict with")
    if not 0 <= int(term) < len(vem.terms):
        raise ValueError(f"term must be in [0, {len(vem.terms)}), got {term}")
    phi = vem.posteriors_for(result.params, *args, **kwargs)
    return vem.terms[term].predict(result.params["terms"][term], phi)


def local_values(
    dm: DeclaredModel,
    setup: Setup,
    values: dict,
    dynamic: tuple,
    posteriors: bool = False,
) -> Array:
    """:func:`under`'s ``compute`` for the local log joints (or, with
    ``posteriors``, the exact posteriors) of the images, [N, K]: those of
    :func:`~jaxannot.inference.vem.layout.log_joint_all` on one device.

    Parameters
    ----------
    dm, setup, values, dynamic
        As :func:`under` hands them to ``compute``.
    posteriors : bool
        The posteriors instead of the log joints.

    Returns
    -------
    jax.Array [N, K]
        The log joints or the posteriors.
    """
    return log_joint_all(dm, Whole(setup), values, dynamic, posteriors)


@functools.partial(jax.jit, static_argnums=(0, 1))
def marginals(dm: DeclaredModel, setup: Setup, values: dict, dynamic: tuple) -> dict:
    """:func:`under`'s ``compute`` for :meth:`VEM.marginals
    <jaxannot.inference.vem.algorithm.VEM.marginals>`: the local MAPs of a model
    with real-valued local sites, else the enumerated sites' marginals.

    Parameters
    ----------
    dm, setup, values, dynamic
        As :func:`under` hands them to ``compute``.

    Returns
    -------
    dict
        With real-valued local sites, the local site's posteriors [N, K] and each
        real-valued site's MAP per value of the local site [N, K, ...]
        (:func:`~jaxannot.inference.vem.local_map.local_maps`); else each enumerated
        site's posterior marginals [N, K]
        (:func:`~jaxannot.inference.vem.joint_enumeration.marginals`).
    """
    call = ModelCall.join(dm, setup, dynamic)
    if setup.structure.enumerated.continuous:
        return local_maps(call, values)
    return joint_enumeration.marginals(call, values)
