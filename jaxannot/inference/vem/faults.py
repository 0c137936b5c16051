"""The faults of a VEM run: flagged inside the compiled EM step, raised after it.

:func:`fault_code` flags the first non-finite quantity of an iteration (the log
joint, the posteriors, the objective or the M-step's global values), reported in the
iteration's :class:`~jaxannot.inference.vem.steps.VEMInfo` (the fit stops there);
:func:`keeps_old_values` says which values the step keeps, and :func:`raise_fault`
names the iteration and the step after the loop, from the recorded infos (a NaN
log joint caused by NaN data names the data argument; an impossible image, its index
and sites).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

import jax
import jax.numpy as jnp

from jaxannot.inference.vem.declaration import trace_model
from jaxannot.inference.vem.enumeration import site_in_plate
from jaxannot.inference.vem.model_call import ModelCall

if TYPE_CHECKING:
    from jaxannot.types import Array, ArrayLike, ArrayTree

__all__ = [
    "DEFERRED",
    "argument_names",
    "fault_code",
    "first_fault",
    "keeps_old_values",
    "raise_fault",
]

# fault codes, in the order the step meets them; 0 = no fault
_LOG_JOINT, _POSTERIORS, _OBJECTIVE, _GLOBALS = 1, 2, 3, 4
#: Not a fault: the conjugate-only step met a closed form it did not keep, and
#: :func:`~jaxannot.inference.vem.run.run_one` redoes the fit with the full step
#: (:func:`~jaxannot.inference.vem.fit.step_for`); never raised.
DEFERRED = 5
_WHAT = {
    _LOG_JOINT: (
        "E-step: the log joint a_ik = log p(x_i, z_i = k | theta) is NaN, or -inf "
        "for every k, for some image"
    ),
    _POSTERIORS: "E-step: the posteriors q(z_i) are not finite",
    _OBJECTIVE: "E-step: the objective (log prior included) is not finite",
    _GLOBALS: "M-step: the global values are not finite",
}


def keeps_old_values(code: Array) -> jax.Array:
    """Whether an iteration with fault ``code`` keeps the global values it started
    from (a fault in the E-step: the values it met are the ones to report), rather
    than the M-step's (non-finite: named by :func:`raise_fault`).

    Parameters
    ----------
    code : jax.Array
        A fault code (0: none).

    Returns
    -------
    jax.Array
        Scalar bool.
    """
    return (code > 0) & (code != _GLOBALS)


def fault_code(a: Array, phi: Array, objective: Array, values: ArrayTree) -> jax.Array:
    """The first non-finite quantity of one EM iteration (0: none).

    ``a`` may hold ``-inf`` (a value impossible for an image), never NaN nor
    ``-inf`` for every value (an image impossible under the model: numpyro gives
    ``-inf`` to an observation outside the support, NaN included); the
    posteriors, the objective and the new global values must be finite.

    Parameters
    ----------
    a : jax.Array [images, K]
        Log joints.
    phi : jax.Array [images, K]
        Posteriors.
    objective : jax.Array
        The iteration's objective.
    values : pytree
        The new global values.

    Returns
    -------
    jax.Array
        The int32 fault code.
    """
    finite_values = jnp.all(
        jnp.stack([jnp.all(jnp.isfinite(v)) for v in jax.tree.leaves(values)])
    )
    checks = [
        (jnp.any(jnp.isnan(a)) | jnp.any(jnp.all(a == -jnp.inf, axis=-1)), _LOG_JOINT),
        (~jnp.all(jnp.isfinite(phi)), _POSTERIORS),
        (~jnp.isfinite(objective), _OBJECTIVE),
        (~finite_values, _GLOBALS),
    ]
    code = jnp.int32(0)
    for bad, c in reversed(checks):  # the earliest check wins
        code = jnp.where(bad, jnp.int32(c), code)
    return code


def first_fault(codes: ArrayLike, first_iteration: int) -> tuple[int, int, int]:
    """The first fault of a run from its iterations' fault codes.

    Parameters
    ----------
    codes : array_like [steps]
        Each iteration's fault code (``VEMInfo.fault`` as the runner records it).
    first_iteration : int
        The EM iteration of the first entry (a resumed fit goes on counting).

    Returns
    -------
    tuple of int
        ``(code, iteration, index)``: the fault code (0: none), its EM iteration
        and its entry in ``codes`` (``(0, -1, -1)`` without a fault).
    """
    codes = np.asarray(codes)
    (where,) = np.nonzero(codes)
    if not where.size:
        return 0, -1, -1
    at = int(where[0])
    return int(codes[at]), first_iteration + at, at


def argument_names(args: tuple, kwargs: dict) -> list[str]:
    """A readable name for every leaf of ``(args, kwargs)``, in flatten order, for
    the errors that name a data argument.

    Parameters
    ----------
    args : tuple
        The positional arguments to name.
    kwargs : dict
        Its keyword arguments.

    Returns
    -------
    list of str
        ``"positional argument 0"``, ``"argument 'counts'"``, with the path inside
        a nested argument (``"argument 'data'['x']"``).
    """
    named, _ = jax.tree_util.tree_flatten_with_path((args, kwargs))
    names = []
    for path, _ in named:
        where, *rest = path
        head = rest[0]
        if where.idx == 0:
            name = f"positional argument {head.idx}"
        else:
            name = f"argument {head.key!r}"
        names.append(name + jax.tree_util.keystr(tuple(rest[1:])))
    return names


def _nan_arguments(args, kwargs) -> list[str]:
    leaves = jax.tree_util.tree_leaves((args, kwargs))
    names = argument_names(args, kwargs)
    bad = []
    for name, x in zip(names, leaves, strict=True):
        if isinstance(x, jax.Array | np.ndarray) and jnp.issubdtype(
            jnp.result_type(x), jnp.inexact
        ):
            count = int(np.isnan(np.asarray(x)).sum())  # on the host: no compile
            if count:
                bad.append(f"{name} ({count} NaN of {np.size(x)})")
    return bad


def raise_fault(
    fault: ArrayLike,
    values: Mapping[str, ArrayLike],
    args: tuple,
    kwargs: dict,
    objective: float | None = None,
    vem: Any = None,
) -> None:
    """Raise the error a non-zero ``fault`` record stands for (else nothing).

    Parameters
    ----------
    fault : array_like
        The record, ``[code, iteration]``.
    values : Mapping
        Site -> global value, named in the message.
    args : tuple
        The model's positional arguments (NaN ones are named).
    kwargs : dict
        Its keyword arguments.
    objective : float, optional
        The objective reached, for the message.
    vem : VEM, optional
        The algorithm, for the message.

    Raises
    ------
    ValueError
        The log joint is NaN and some data argument holds NaN: it is named.
    FloatingPointError
        Any other non-finite quantity: the EM iteration and the step are named.
    """
    code, t = (int(x) for x in np.asarray(fault))
    if code == 0:
        return
    if code == _LOG_JOINT:
        nan_args = _nan_arguments(args, kwargs)
        if nan_args:
            raise ValueError(
                f"the data hold NaN: {', '.join(nan_args)}; the log joint of some "
                f"image is NaN or -inf at EM iteration {t}. Remove or impute them "
                "(a NaN under a mask still breaks the log density unless the model "
                "replaces it first, e.g. jnp.where(mask, x, 0))"
            )
    detail = ""
    if code == _GLOBALS:
        bad = sorted(k for k, v in values.items() if not bool(jnp.all(jnp.isfinite(v))))
        detail = f" (sites {bad}): try a smaller learning rate or more M-step steps"
    elif code == _OBJECTIVE and objective is not None:
        detail = f" ({objective}): an image impossible under every value of z?"
    elif code == _LOG_JOINT:
        where = "" if vem is None else _impossible(vem, values, args, kwargs)
        detail = (
            " although the data hold no NaN: an observation outside its "
            "distribution's support, or a density evaluated outside its domain at "
            f"the current global values{where}"
        )
    raise FloatingPointError(f"VEM stopped at EM iteration {t}, {_WHAT[code]}{detail}")


def _impossible(vem, values, args, kwargs, shown: int = 5) -> str:
    """``" (images [...]: sites [...])"``: the images no value of the local site
    makes possible, and the observed sites whose density is not finite there (not
    named when other enumerated sites are summed out of the log joint)."""
    setup, dynamic = vem.declared.setup(args, kwargs)
    s = setup.structure
    if s.enumerated:
        # compiled as one program (run eagerly, each of the model's operations
        # compiled on its own: some 90 programs on a small model)
        log_joint = jax.jit(
            lambda v, d: ModelCall.join(vem.declared, setup, d).log_joint(v)
        )
        a = log_joint(dict(values), dynamic)
        images = np.flatnonzero(~np.any(np.isfinite(np.asarray(a)), axis=1))
        where = ""
    else:
        images, where = _impossible_by_site(vem, setup, dynamic, values)
    if not images.size:
        return ""
    more = f" and {images.size - shown} more" if images.size > shown else ""
    return (
        f" (image{'s' if images.size > 1 else ''} {images[:shown].tolist()}{more} "
        f"of plate {vem.plate!r}{where})"
    )


def _impossible_by_site(vem, setup, dynamic, values):
    """The impossible images and ``": sites [...]"``, site by site for each value
    of the lone local site (one compiled program: run eagerly, each of the model's
    operations compiled on its own)."""
    found = jax.jit(lambda v, d: _bad_by_site(vem, setup, v, d))
    bad_by_k = [
        {name: np.asarray(bad) for name, bad in b.items()}
        for b in found(dict(values), dynamic)
    ]
    images = np.flatnonzero(
        np.all([np.any(list(b.values()), axis=0) for b in bad_by_k], axis=0)
    )
    sites = sorted({k for b in bad_by_k for k, v in b.items() if v[images].any()})
    return images, f": sites {sites}"


def _bad_by_site(vem, setup, values, dynamic) -> list[dict[str, Array]]:
    """For each value of the local site: sample site in the image plate ->
    whether its density is not finite at each image ([N] bool), the model called
    on the arguments ``dynamic`` and ``setup`` stand for."""
    s = setup.structure
    n, bad_by_k = s.num_images, []
    args, kwargs = setup.join(dynamic)
    for k in range(s.num_values):
        subs = dict(values)
        subs.update({vem.plate: jnp.arange(n), vem.local_site: s.local_value(n, k)})
        trace = trace_model(vem.model, subs, args, kwargs)
        bad = {}
        for name, site in trace.items():
            if site["type"] != "sample" or not site_in_plate(site, vem.plate):
                continue
            lp = jnp.asarray(site["fn"].log_prob(site["value"]))
            lp = jnp.broadcast_to(
                lp, jnp.broadcast_shapes(lp.shape, site["fn"].batch_shape)
            )
            lp = jnp.moveaxis(lp, lp.ndim + s.image_dim, 0).reshape(n, -1)
            bad[name] = ~jnp.all(jnp.isfinite(lp), axis=1)
        bad_by_k.append(bad)
    return bad_by_k
