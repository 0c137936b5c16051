"""What :class:`~jaxannot.inference.vem.algorithm.VEM` checks before it compiles.

:func:`checked_start` validates starting values (names, shapes, supports),
:func:`check_state` a state to resume, :func:`check_inputs` the extra terms' label
counts, :func:`check_key`, :func:`check_tolerance` and :func:`check_optimizer` the
run's arguments, all before anything is compiled; :func:`model_errors` turns a
model's shape errors into one naming the arguments, the globals and the fix. The
faults of a run are in :mod:`~jaxannot.inference.vem.faults`, the warnings of an
empty or collapsed fit in :mod:`~jaxannot.inference.vem.fit_warnings` (whose
warnings this module re-exports).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

import jax
import jax.numpy as jnp
from numpyro.distributions import constraints

from jaxannot.inference.vem.declaration import (
    DeclarationError,
    abstract_trace,
    site_support,
)
from jaxannot.inference.vem.declared import reused
from jaxannot.inference.vem.faults import argument_names
from jaxannot.inference.vem.fit_warnings import (
    CollapsedFitWarning,
    EmptyComponentWarning,
    warn_collapsed,
)

if TYPE_CHECKING:
    from jaxannot.inference.vem.declaration import Structure
    from jaxannot.inference.vem.log_joint import Setup
    from jaxannot.inference.vem.steps import Term, VEMState
    from jaxannot.types import ArrayLike

__all__ = ["CollapsedFitWarning", "EmptyComponentWarning", "warn_collapsed"]


def _supports(vem, setup, args_kw) -> dict:
    """Each global site's support (a sample site's) or constraint (a param's)."""
    names = setup.structure.globals_

    def supports():
        return abstract_trace(
            vem.model,
            vem.declared.small_substitutions(setup),
            *args_kw,
            lambda t: {k: site_support(t[k]) for k in names},
        )

    return reused(("supports", vem.declared, setup), *args_kw, supports)


def _on_support(support, value) -> bool:
    value = np.asarray(value, np.float64)
    if support is constraints.simplex:  # float32 rows drift past numpyro's 1e-6
        return bool(np.all(value >= 0) and np.allclose(value.sum(-1), 1.0, atol=1e-4))
    return bool(np.all(np.asarray(support.check(jnp.asarray(value)))))


def checked_start(
    vem: Any,
    setup: Setup,
    params: Mapping[str, ArrayLike],
    args_kw: tuple[tuple, dict],
    what: str = "init_params",
) -> dict:
    """``params``' global values as arrays, or a ValueError naming every unknown,
    missing, misshapen or off-support site and the valid choices.

    Parameters
    ----------
    vem : VEM
        The algorithm (its model's sites and supports).
    setup : Setup
        The static set-up of the call.
    params : Mapping
        Site -> value, as the user gave them.
    args_kw : tuple of (tuple, dict)
        The model's arguments, for the messages.
    what : str
        The argument's name, for the messages.

    Returns
    -------
    dict
        Site -> value as an array.
    """
    s = setup.structure
    if not isinstance(params, Mapping):
        raise TypeError(
            f"{what} must be a dict of the global sites {list(s.globals_)}, got "
            f"{type(params).__name__}"
        )
    unknown = sorted(set(params) - set(s.globals_) - {"terms"})
    if unknown:
        raise ValueError(
            f"{what} has unknown sites {unknown}; the model's global sites: "
            f"{list(s.globals_)}"
        )
    missing_globals(s, params, what)
    values = {k: jnp.asarray(params[k]) for k in s.globals_}
    wrong = [
        f"{k} has shape {tuple(np.shape(values[k]))}, the model's is {shape}"
        for k, shape in zip(s.globals_, s.global_shapes, strict=True)
        if tuple(np.shape(values[k])) != shape
    ]
    if wrong:
        raise ValueError(f"{what} has wrong shapes: {'; '.join(wrong)}")
    supports = _supports(vem, setup, args_kw)
    off = [
        f"{k} (support {supports[k]})"
        for k in s.globals_
        if not _on_support(supports[k], values[k])
    ]
    if off:
        raise ValueError(
            f"{what} has values off their sites' supports: {'; '.join(off)}. Give "
            "constrained values (e.g. a simplex row sums to 1, a scale is > 0)"
        )
    return values


def check_state(structure: Structure, state: VEMState) -> None:
    """A :class:`VEMState` of this model's shapes, or a clear ValueError.

    Parameters
    ----------
    structure : Structure
        The model's structure (images, values of the local site).
    state : VEMState
        The state to resume.
    """
    shape = (structure.num_images, structure.num_values)
    got = tuple(np.shape(getattr(state, "posteriors", None)))
    if got != shape:
        raise ValueError(
            f"init_state's posteriors have shape {got}, the fit's are {shape} "
            "(images, values of the local site): resume a state of the same data"
        )


@contextlib.contextmanager
def model_errors(plate: str, args: tuple, kwargs: dict) -> Iterator[None]:
    """Re-raise a shape or type error the model raises while VEM traces it with
    the arguments' and globals' shapes and the usual fixes.

    Parameters
    ----------
    plate : str
        The image plate's name.
    args : tuple
        The positional arguments of the call under the check.
    kwargs : dict
        Its keyword arguments.

    Returns
    -------
    Iterator[None]
        A context manager.
    """
    from jaxannot.runtime.checkpoint import CheckpointError

    try:
        yield
    except AssertionError as error:  # numpyro's plate: "size ... should be positive"
        if "plate" not in str(error):
            raise
        raise _empty_plate_error(error, args, kwargs) from error
    except (TypeError, ValueError, IndexError) as error:
        if isinstance(error, CheckpointError | DeclarationError) or getattr(
            error, "_vem", False
        ):
            raise
        traced = _integer_scalars(args, kwargs)
        if isinstance(error, TypeError) and traced:
            new = TypeError(
                f"{', '.join(traced)}: expected a Python int, got a 0-d integer array, "
                f"which VEM traces like data, but the model needs a static value here "
                f"(a shape or a plate size): pass int(value), e.g. num_topics=4 "
                f"rather than jnp.array(4) (the model raised {type(error).__name__}: "
                f"{str(error).splitlines()[0][:100]})"
            )
            new._vem = True
            raise new from error
        leaves = jax.tree_util.tree_leaves((args, kwargs))
        shapes = [
            f"{name} {list(np.shape(x))}"
            for name, x in zip(argument_names(args, kwargs), leaves, strict=True)
            if isinstance(x, jax.Array | np.ndarray)
        ]
        message = (
            f"the model raised {type(error).__name__} while VEM evaluated it: "
            f"{error}\nIts array arguments: {', '.join(shapes)}. Check that the "
            "data's shapes match the global values' (e.g. the feature count the "
            f"model was fitted with), that every per-image site is inside plate "
            f"{plate!r} and that a mask has the plate's shape ([N], or [N, 1] "
            "under a plate at dim=-2)"
        )
        new = (
            type(error)(message)
            if type(error) in (TypeError, ValueError, IndexError)
            else ValueError(message)
        )
        new._vem = True
        raise new from error


def _integer_scalars(args, kwargs) -> list[str]:
    """The names of the 0-d integer arrays among the arguments (traced, so they
    cannot set a shape)."""
    leaves = jax.tree_util.tree_leaves((args, kwargs))
    return [
        name
        for name, x in zip(argument_names(args, kwargs), leaves, strict=True)
        if isinstance(x, jax.Array | np.ndarray)
        and np.ndim(x) == 0
        and jnp.issubdtype(x.dtype, jnp.integer)
    ]


def _empty_plate_error(error: AssertionError, args, kwargs) -> ValueError:
    """A ValueError for numpyro's bare assertion on a plate of size 0, naming the
    arguments that may have given it: arrays with no rows, counts below 1."""
    leaves = jax.tree_util.tree_leaves((args, kwargs))
    suspects = []
    for name, x in zip(argument_names(args, kwargs), leaves, strict=True):
        if isinstance(x, jax.Array | np.ndarray) and np.ndim(x) >= 1:
            if np.shape(x)[0] == 0:
                suspects.append(f"{name} has shape {list(np.shape(x))}")
        elif isinstance(x, int | np.integer) and not isinstance(x, bool) and x < 1:
            suspects.append(f"{name} = {x}")
    which = "; ".join(suspects) if suspects else "no argument is empty or below 1"
    new = ValueError(
        f"a plate of the model has size < 1 (numpyro: {error}): {which}. Expected "
        "every plate size >= 1: pass at least one image and counts >= 1 (e.g. "
        "num_topics >= 1)"
    )
    new._vem = True
    return new


def check_key(rng_key: object, name: str = "rng_key") -> None:
    """``TypeError`` unless ``rng_key`` is one PRNG key: a typed key
    (``jax.random.key``) or a raw uint32 key (``jax.random.PRNGKey``).

    Parameters
    ----------
    rng_key : object
        The value to check.
    name : str
        The argument's name, for the message.
    """
    if isinstance(rng_key, jax.Array | np.ndarray):
        dtype = rng_key.dtype
        if jnp.issubdtype(dtype, jax.dtypes.prng_key) and rng_key.ndim == 0:
            return
        if dtype == np.uint32 and rng_key.ndim == 1:
            return
        got = f"an array of dtype {dtype} and shape {list(rng_key.shape)}"
    else:
        got = f"{type(rng_key).__name__} {rng_key!r}"
    seed = rng_key if isinstance(rng_key, int) and not isinstance(rng_key, bool) else 0
    raise TypeError(
        f"{name}: expected one PRNG key, got {got}: pass jax.random.key({seed})"
    )


def check_tolerance(tolerance: object) -> float:
    """``tolerance`` as a float if it is a finite number >= 0, else a clear error.

    Parameters
    ----------
    tolerance : object
        The value to check.

    Returns
    -------
    float
        The tolerance.
    """
    if isinstance(tolerance, bool) or not isinstance(
        tolerance, int | float | np.integer | np.floating
    ):
        raise TypeError(
            f"tolerance: expected a number >= 0 (a relative improvement), got "
            f"{type(tolerance).__name__} {tolerance!r}: pass e.g. tolerance=1e-6"
        )
    if not (np.isfinite(tolerance) and tolerance >= 0):
        raise ValueError(
            f"tolerance: expected a finite number >= 0 (the relative improvement "
            f"below which a fit stops; 0 runs every step), got {tolerance}: pass "
            "tolerance=0 or a small positive value such as 1e-6"
        )
    return float(tolerance)


def check_optimizer(optimizer: object) -> None:
    """``TypeError`` unless ``optimizer`` is an optax transformation (``init`` and
    ``update``).

    Parameters
    ----------
    optimizer : object
        The value to check.
    """
    if callable(getattr(optimizer, "init", None)) and callable(
        getattr(optimizer, "update", None)
    ):
        return
    raise TypeError(
        f"optimizer: expected an optax.GradientTransformation, got "
        f"{type(optimizer).__name__} {optimizer!r}: pass e.g. optax.adam(0.05), "
        "or None for the default"
    )


def check_inputs(
    structure: Structure,
    plate: str,
    values: Mapping[str, ArrayLike] | None,
    terms: Sequence[Term],
) -> None:
    """Clear errors for a run that cannot start (see :meth:`VEM.run`): terms with
    labels for another number of images.

    Parameters
    ----------
    structure : Structure
        The model's structure.
    plate : str
        The image plate's name, for the message.
    values : Mapping or None
        The start's global values (not read).
    terms : sequence of Term
        The extra terms.
    """
    del values
    for i, term in enumerate(terms):
        labels = getattr(term, "labels", None)
        if labels is not None and np.shape(labels)[0] != structure.num_images:
            raise ValueError(
                f"terms[{i}] ({type(term).__name__}) has {np.shape(labels)[0]} "
                f"labels but plate {plate!r} has {structure.num_images} images: "
                "give one label per image (-1 or NaN for unlabelled ones)"
            )


def missing_globals(
    structure: Structure, params: Mapping[str, ArrayLike], what: str
) -> None:
    """A ValueError naming the global sites ``params`` lacks.

    Parameters
    ----------
    structure : Structure
        The model's structure (its global sites).
    params : Mapping
        Site -> value.
    what : str
        The argument's name, for the message.
    """
    missing = sorted(set(structure.globals_) - set(params))
    if missing:
        raise ValueError(
            f"{what} lacks the global sites {missing} (has {sorted(params)}; the "
            f"model's global sites: {list(structure.globals_)})"
        )
