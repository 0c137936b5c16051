"""What :class:`~jaxannot.inference.vem.algorithm.VEM` checks, and the errors it raises.

- Inside the compiled EM step, :func:`fault_code` flags the first non-finite
  quantity of an iteration (the log joint, the posteriors, the objective or the
  M-step's global values); the step then stops the loop, and after the loop
  :func:`raise_fault` names the iteration and the step (a NaN log joint caused by
  NaN data names the data argument instead).
- :func:`checked_start` validates starting values (names, shapes, supports),
  :func:`check_state` a state to resume, :func:`check_inputs` the extra terms'
  label counts, all before anything is compiled; :func:`model_errors` turns a
  model's shape errors into one naming the arguments, the globals and the fix.
- :func:`warn_empty` warns (:class:`EmptyComponentWarning`) when a fit leaves a
  value of the local site with (almost) no image, and
  (:class:`CollapsedFitWarning`, through :func:`warn_collapsed`) when the local
  posteriors of all images are (almost) the same.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Mapping

import numpy as np

import jax
import jax.numpy as jnp
from numpyro.distributions import constraints

from jaxannot.inference.vem.declaration import (
    DeclarationError,
    _abstract_trace,
    _in_plate,
    _support,
    _trace,
)

__all__ = ["CollapsedFitWarning", "EmptyComponentWarning", "warn_collapsed"]

#: A component whose posteriors sum to less than this many images explains no
#: image: it is reported as empty (half an image: below any image's share).
EMPTY_MASS = 0.5

#: Posteriors whose mean total-variation distance from their average is below this
#: tell the images apart by less than 5 %: the components explain every image alike.
COLLAPSE_SPREAD = 0.05

#: Empty components a warning lists by index (the rest are counted), so that a
#: warning stays under 300 characters however many components are empty.
MAX_LISTED = 8

# fault codes, in the order the step meets them; 0 = no fault
_LOG_JOINT, _POSTERIORS, _OBJECTIVE, _GLOBALS = 1, 2, 3, 4
_WHAT = {
    _LOG_JOINT: (
        "E-step: the log joint a_ik = log p(x_i, z_i = k | theta) is NaN, or -inf "
        "for every k, for some image"
    ),
    _POSTERIORS: "E-step: the posteriors q(z_i) are not finite",
    _OBJECTIVE: "E-step: the objective (log prior included) is not finite",
    _GLOBALS: "M-step: the global values are not finite",
}


class EmptyComponentWarning(UserWarning):
    """A fit left a value of the local site with (almost) no image."""


class CollapsedFitWarning(EmptyComponentWarning):
    """A fit gave every image (almost) the same local posterior: its components are
    the same, or the posteriors uniform (e.g. a graph penalty too strong)."""


def no_fault():
    """The fault record of a healthy run: ``[code, iteration]`` = ``[0, -1]``."""
    return jnp.array([0, -1], jnp.int32)


def keeps_old_values(code) -> jax.Array:
    """Whether an iteration with fault ``code`` keeps the global values it started
    from (a fault in the E-step: the values it met are the ones to report), rather
    than the M-step's (non-finite: named by :func:`raise_fault`)."""
    return (code > 0) & (code != _GLOBALS)


def fault_code(a, phi, objective, values) -> jax.Array:
    """The first non-finite quantity of one EM iteration (0: none).

    ``a`` may hold ``-inf`` (a value impossible for an image), never NaN nor
    ``-inf`` for every value (an image impossible under the model: numpyro gives
    ``-inf`` to an observation outside the support, NaN included); the
    posteriors, the objective and the new global values must be finite.
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


def record_fault(fault, code, t):
    """Keep the first fault of the run."""
    return jnp.where((fault[0] == 0) & (code > 0), jnp.stack([code, t]), fault)


def _argument_names(args, kwargs) -> list[str]:
    """A readable name for every leaf of ``(args, kwargs)``, in flatten order."""
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
    names = _argument_names(args, kwargs)
    bad = []
    for name, x in zip(names, leaves, strict=True):
        if isinstance(x, jax.Array | np.ndarray) and jnp.issubdtype(
            jnp.result_type(x), jnp.inexact
        ):
            count = int(jnp.isnan(jnp.asarray(x)).sum())
            if count:
                bad.append(f"{name} ({count} NaN of {np.size(x)})")
    return bad


def raise_fault(fault, values, args, kwargs, objective=None, vem=None) -> None:
    """Raise the error a non-zero ``fault`` record stands for (else nothing).

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
    makes possible, and the observed sites whose density is not finite there."""
    s = vem.declared.setup(args, kwargs)[0].structure
    n, bad_by_k = s.num_images, []
    for k in range(s.num_values):
        subs = dict(values)
        subs.update({vem.plate: jnp.arange(n), vem.local_site: s.local_value(n, k)})
        trace = _trace(vem.model, subs, args, kwargs)
        bad = {}
        for name, site in trace.items():
            if site["type"] != "sample" or not _in_plate(site, vem.plate):
                continue
            lp = jnp.asarray(site["fn"].log_prob(site["value"]))
            lp = jnp.broadcast_to(
                lp, jnp.broadcast_shapes(lp.shape, site["fn"].batch_shape)
            )
            lp = jnp.moveaxis(lp, lp.ndim + s.image_dim, 0).reshape(n, -1)
            bad[name] = np.asarray(~jnp.all(jnp.isfinite(lp), axis=1))
        bad_by_k.append(bad)
    images = np.flatnonzero(
        np.all([np.any(list(b.values()), axis=0) for b in bad_by_k], axis=0)
    )
    if not images.size:
        return ""
    sites = sorted({k for b in bad_by_k for k, v in b.items() if v[images].any()})
    more = f" and {images.size - shown} more" if images.size > shown else ""
    return (
        f" (image{'s' if images.size > 1 else ''} {images[:shown].tolist()}{more} "
        f"of plate {vem.plate!r}: sites {sites})"
    )


def _supports(vem, setup, args_kw) -> dict:
    """Each global site's support (a sample site's) or constraint (a param's)."""
    names = setup.structure.globals_
    return _abstract_trace(
        vem.model,
        vem.declared.small_substitutions(setup),
        *args_kw,
        lambda t: {k: _support(t[k]) for k in names},
    )


def _on_support(support, value) -> bool:
    value = np.asarray(value, np.float64)
    if support is constraints.simplex:  # float32 rows drift past numpyro's 1e-6
        return bool(np.all(value >= 0) and np.allclose(value.sum(-1), 1.0, atol=1e-4))
    return bool(np.all(np.asarray(support.check(jnp.asarray(value)))))


def checked_start(vem, setup, params, args_kw, what: str = "init_params") -> dict:
    """``params``' global values as arrays, or a ValueError naming every unknown,
    missing, misshapen or off-support site and the valid choices."""
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


def check_state(structure, state) -> None:
    """A :class:`VEMState` of this model's shapes, or a clear ValueError."""
    shape = (structure.num_images, structure.num_values)
    got = tuple(np.shape(getattr(state, "posteriors", None)))
    if got != shape:
        raise ValueError(
            f"init_state's posteriors have shape {got}, the fit's are {shape} "
            "(images, values of the local site): resume a state of the same data"
        )


@contextlib.contextmanager
def model_errors(plate, args, kwargs):
    """Re-raise a shape or type error the model raises while VEM traces it with
    the arguments' and globals' shapes and the usual fixes."""
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
            for name, x in zip(_argument_names(args, kwargs), leaves, strict=True)
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
        for name, x in zip(_argument_names(args, kwargs), leaves, strict=True)
        if isinstance(x, jax.Array | np.ndarray)
        and np.ndim(x) == 0
        and jnp.issubdtype(x.dtype, jnp.integer)
    ]


def _empty_plate_error(error: AssertionError, args, kwargs) -> ValueError:
    """A ValueError for numpyro's bare assertion on a plate of size 0, naming the
    arguments that may have given it: arrays with no rows, counts below 1."""
    leaves = jax.tree_util.tree_leaves((args, kwargs))
    suspects = []
    for name, x in zip(_argument_names(args, kwargs), leaves, strict=True):
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


def check_key(rng_key, name: str = "rng_key") -> None:
    """``TypeError`` unless ``rng_key`` is one PRNG key: a typed key
    (``jax.random.key``) or a raw uint32 key (``jax.random.PRNGKey``)."""
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


def check_tolerance(tolerance) -> float:
    """``tolerance`` as a float if it is a finite number >= 0, else a clear error."""
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


def check_optimizer(optimizer) -> None:
    """``TypeError`` unless ``optimizer`` is an optax transformation (``init`` and
    ``update``)."""
    if callable(getattr(optimizer, "init", None)) and callable(
        getattr(optimizer, "update", None)
    ):
        return
    raise TypeError(
        f"optimizer: expected an optax.GradientTransformation, got "
        f"{type(optimizer).__name__} {optimizer!r}: pass e.g. optax.adam(0.05), "
        "or None for the default"
    )


def check_inputs(structure, plate, values, terms) -> None:
    """Clear errors for a run that cannot start (see :meth:`VEM.run`): terms with
    labels for another number of images."""
    del values
    for i, term in enumerate(terms):
        labels = getattr(term, "labels", None)
        if labels is not None and np.shape(labels)[0] != structure.num_images:
            raise ValueError(
                f"terms[{i}] ({type(term).__name__}) has {np.shape(labels)[0]} "
                f"labels but plate {plate!r} has {structure.num_images} images: "
                "give one label per image (-1 or NaN for unlabelled ones)"
            )


def missing_globals(structure, params, what: str) -> None:
    """A ValueError naming the global sites ``params`` lacks."""
    missing = sorted(set(structure.globals_) - set(params))
    if missing:
        raise ValueError(
            f"{what} lacks the global sites {missing} (has {sorted(params)}; the "
            f"model's global sites: {list(structure.globals_)})"
        )


def posterior_spread(posteriors) -> float:
    r"""Mean total-variation distance of the images' posteriors from their average,
    :math:`\frac1N\sum_i \tfrac12\lVert\phi_i - \bar\phi\rVert_1` (0: every image
    alike; at most :math:`1 - 1/K`)."""
    phi = np.asarray(jax.device_get(posteriors), np.float64)
    return float(0.5 * np.abs(phi - phi.mean(0)).sum(1).mean())


def warn_collapsed(posteriors, label: str = "the fit", stacklevel: int = 3) -> bool:
    """Warn (:class:`CollapsedFitWarning`) when the posteriors [N, K] of N >= 2
    images over K >= 2 values have a spread (:func:`posterior_spread`) below
    ``COLLAPSE_SPREAD``; returns whether it warned."""
    n, k = np.shape(posteriors)
    if n < 2 or k < 2:
        return False
    spread = posterior_spread(posteriors)
    if spread >= COLLAPSE_SPREAD:
        return False
    warnings.warn(
        f"{label} collapsed: the images' posteriors differ from their mean by "
        f"{spread:.2g} (total variation, below {COLLAPSE_SPREAD}): every image is "
        "explained alike. With a graph penalty lower lam; else try restarts=..., "
        "fewer components or init_params=...",
        CollapsedFitWarning,
        stacklevel=stacklevel,
    )
    return True


def warn_empty(posteriors, label: str = "the fit") -> None:
    """Warn when some value of the local site has posterior mass < ``EMPTY_MASS``,
    or, instead (one warning a fit; it is an :class:`EmptyComponentWarning` too),
    when the posteriors of all images are alike (:func:`warn_collapsed`)."""
    if warn_collapsed(posteriors, label, stacklevel=4):
        return
    mass = np.asarray(jax.device_get(posteriors)).sum(0)
    empty = np.flatnonzero(mass < EMPTY_MASS)
    if empty.size:
        shown = ", ".join(str(k) for k in empty[:MAX_LISTED])
        more = (
            f", ... ({empty.size - MAX_LISTED} more)" if empty.size > MAX_LISTED else ""
        )
        warnings.warn(
            f"{label} left {empty.size} of {mass.size} components with less than "
            f"{EMPTY_MASS} images of posterior mass: [{shown}{more}]. Try "
            "restarts=..., fewer components, or another start (init_params=...)",
            EmptyComponentWarning,
            stacklevel=3,
        )
