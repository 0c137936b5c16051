"""What :class:`~jaxannot.inference.vem.algorithm.VEM` reads from a numpyro declaration.

A trace of the model gives its global latent sites, the plate of images, its
discrete per-image site and the other discrete sites enumerated with it
(:func:`inspect_model`, :mod:`~jaxannot.inference.vem.enumeration`; clear errors for
declarations VEM cannot fit). The set-up traces run on shapes only
(:func:`abstract_trace`: the model is traced under ``jax.eval_shape`` and only
static facts leave it), so setting up a fit costs the same on ten images as on a
million. A model that needs some of its data's values
(``int(np.max(annotations)) + 1``, Python control flow on its data) gets those arrays
by value (:func:`read_by_value`, :class:`_Concrete`: static leaves keyed on their
content); a value no data can give is a :class:`DeclarationError` naming the line.
The log joint a trace gives and a call's leaves are in
:mod:`~jaxannot.inference.vem.log_joint`.
"""

from __future__ import annotations

import dataclasses
import os
import traceback
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from numpyro import handlers
from numpyro.infer import init_to_uniform

from jaxannot.inference.vem.enumeration import (
    ENUMERABLE,
    DeclarationError,
    Enumerated,
    base_distribution,
    enumerated_sites,
    num_values_of,
    site_in_plate,
)
from jaxannot.runtime.static_key import array_key

__all__ = [
    "Structure",
    "abstract_trace",
    "inspect_model",
    "is_array_leaf",
    "read_by_value",
    "site_support",
    "trace_model",
    "unwrap_leaf",
]


# ----------------------------------------------------------- model inspection
@dataclasses.dataclass(frozen=True)
class Structure:
    """What a trace of the model tells VEM (all static).

    Parameters
    ----------
    globals_ : tuple of str
        The latent sites outside the plate.
    num_images : int
        The plate's size.
    num_values : int
        The local site's number of values.
    image_dim : int
        The plate's dim.
    global_shapes : tuple of tuple of int
        The shapes of ``globals_``, in order.
    enumerated : Enumerated
        The other discrete (and real-valued) sites in the plate.
    """

    globals_: tuple[str, ...]
    num_images: int
    num_values: int
    image_dim: int
    global_shapes: tuple[tuple[int, ...], ...] = ()
    enumerated: Enumerated = Enumerated()

    def local_value(self, size: int, value: int = 0) -> np.ndarray:
        """``value`` as the local site's value on ``size`` images: the image axis
        at the plate's dim (``[size, 1]`` for a plate at dim -2).

        Parameters
        ----------
        size : int
            The images.
        value : int
            The local site's value.

        Returns
        -------
        numpy.ndarray
            The value, int32.
        """
        shape = (size,) + (1,) * (-self.image_dim - 1)
        return np.full(shape, value, np.int32)  # NumPy: no compile where eager


def trace_model(
    model: Callable,
    substitutions: dict,
    args: tuple,
    kwargs: dict,
    seed: int = 0,
) -> dict:
    """A trace of the model with ``substitutions``; latent sites whose distribution
    cannot be sampled (an improper prior such as ``ImproperUniform``) and that are
    not substituted get numpyro's ``init_to_uniform`` value.

    Parameters
    ----------
    model : callable
        The numpyro model.
    substitutions : dict
        Site -> value given to the trace (NumPy values made JAX arrays).
    args : tuple
        The model's positional arguments.
    kwargs : dict
        Its keyword arguments.
    seed : int
        The seed of the sites left to sample.

    Returns
    -------
    dict
        The trace, site name -> site.
    """

    def unsampleable(msg):
        if msg["name"] in substitutions or msg["type"] != "sample":
            return None
        if type(base_distribution(msg["fn"])).sample is dist.Distribution.sample:
            return init_to_uniform(msg)
        return None

    seeded = handlers.substitute(
        handlers.seed(model, jax.random.key(seed)), substitute_fn=unsampleable
    )
    # NumPy values (plate indices, the local site's) made JAX arrays here, where
    # they are mostly traced: numpyro wants them so, and eagerly it compiles
    substitutions = {
        k: jnp.asarray(v) if isinstance(v, np.ndarray) else v
        for k, v in substitutions.items()
    }
    return handlers.trace(handlers.substitute(seeded, data=substitutions)).get_trace(
        *args, **kwargs
    )


# What a model needing concrete values raises when traced on shapes only.
_NEEDS_VALUES = (
    jax.errors.ConcretizationTypeError,
    jax.errors.TracerArrayConversionError,
    jax.errors.TracerBoolConversionError,
    jax.errors.TracerIntegerConversionError,
)


def _shape_of(x):
    return jax.ShapeDtypeStruct(np.shape(x), jax.dtypes.canonicalize_dtype(x.dtype))


class _Concrete:
    """An array argument the model reads by value (a size, an index, control flow).

    It is a static leaf of the call: the model gets it as a NumPy array in every
    trace (as numpyro's MCMC gives a model its NumPy arguments, so that
    ``int(np.max(x))`` is a number, not a tracer), the compiled code holds its
    values as constants, and compiled programs are keyed on its content
    (:func:`~jaxannot.runtime.static_key.array_key`, computed once), so a fit on
    equal values reuses them."""

    __slots__ = ("value", "key")

    def __init__(self, value):
        self.value = np.asarray(value)
        self.key: Hashable = array_key(self.value)

    def __eq__(self, other) -> bool:
        return isinstance(other, _Concrete) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"_Concrete({self.key[:3]})"


def unwrap_leaf(x: object) -> object:
    """A call's leaf as the model gets it: the array of a :class:`_Concrete`.

    Parameters
    ----------
    x : object
        A leaf of ``(args, kwargs)``.

    Returns
    -------
    object
        ``x.value`` for a :class:`_Concrete`, ``x`` otherwise.
    """
    return x.value if isinstance(x, _Concrete) else x


def is_array_leaf(x: object) -> bool:
    """Whether a call's leaf is an array (a JAX or NumPy one), traced in a fit.

    Parameters
    ----------
    x : object
        A leaf of ``(args, kwargs)``, as :func:`unwrap_leaf` takes it.

    Returns
    -------
    bool
        True for an array; False for a Python number, a string, a
        :class:`_Concrete`, ...
    """
    return isinstance(x, jax.Array | np.ndarray)


def abstract_trace(
    model: Callable,
    substitutions: dict,
    args: tuple,
    kwargs: dict,
    read: Callable,
    eager: bool = True,
) -> Any:
    """``read(trace)`` of a trace of the model on the *shapes* of its array arguments.

    The model runs under ``jax.eval_shape``: nothing of the data's size is computed,
    whatever the number of images. ``read`` must return static values (names, sizes,
    types), never arrays of the trace. Leaves marked :class:`_Concrete` are given as
    they are. A model that needs concrete values falls back to an eager trace
    (``eager=False``: the JAX error is raised instead).

    Parameters
    ----------
    model : callable
        The numpyro model.
    substitutions : dict
        Site -> value given to the trace.
    args : tuple
        The model's positional arguments.
    kwargs : dict
        Its keyword arguments.
    read : callable
        Trace -> static values.
    eager : bool
        Whether to trace on the values when the shapes are not enough.

    Returns
    -------
    object
        What ``read`` returns.
    """
    leaves, treedef = jax.tree_util.tree_flatten((args, kwargs))
    is_array = [is_array_leaf(x) for x in leaves]
    shapes = [_shape_of(x) for x, a in zip(leaves, is_array, strict=True) if a]
    out = []

    def run(arrays):
        it = iter(arrays)
        full = [
            next(it) if a else unwrap_leaf(x)
            for x, a in zip(leaves, is_array, strict=True)
        ]
        a, kw = jax.tree_util.tree_unflatten(treedef, full)
        out.append(read(trace_model(model, substitutions, a, kw)))

    try:
        jax.eval_shape(run, shapes)
    except _NEEDS_VALUES:
        if not eager:
            raise
        a, kw = jax.tree_util.tree_unflatten(treedef, [unwrap_leaf(x) for x in leaves])
        return read(trace_model(model, substitutions, a, kw))
    return out[0]


def _mark(args, kwargs, marked):
    """``(args, kwargs)`` with the array leaves at the indices ``marked`` wrapped
    as :class:`_Concrete`."""
    leaves, treedef = jax.tree_util.tree_flatten((args, kwargs))
    leaves = [_Concrete(x) if i in marked else x for i, x in enumerate(leaves)]
    return jax.tree_util.tree_unflatten(treedef, leaves)


def read_by_value(
    model: Callable, local_site: str, plate: str, args: tuple, kwargs: dict
) -> tuple[Structure, tuple, dict]:
    """``(structure, args, kwargs)``: the model's :class:`Structure` and its
    arguments with the array leaves it needs by value marked :class:`_Concrete`.

    The model is traced on its arrays' shapes; if it needs some values (its sizes
    read as ``int(np.max(annotations)) + 1``, indices, Python control flow on the
    data), every array is given by value, then each in turn is traced again on its
    shape and stays so where the model still runs (a minimal set of constants in
    the compiled code, found in argument order). If the model still needs a value with
    every array given, it reads one of a latent site, of the local site or of the
    plate's indices, which no data can give: a :class:`DeclarationError` names the
    line and the fix.

    Parameters
    ----------
    model : callable
        The numpyro model.
    local_site : str
        Its local site.
    plate : str
        Its item plate.
    args : tuple
        The positional arguments the model is traced on.
    kwargs : dict
        Its keyword arguments.

    Returns
    -------
    tuple of (Structure, tuple, dict)
        The structure and the marked ``args`` and ``kwargs``.
    """
    try:
        return (
            inspect_model(model, local_site, plate, args, kwargs, eager=False),
            args,
            kwargs,
        )
    except _NEEDS_VALUES:
        pass
    leaves = jax.tree_util.tree_leaves((args, kwargs))
    marked = {i for i, x in enumerate(leaves) if is_array_leaf(x)}
    try:
        structure = inspect_model(
            model, local_site, plate, *_mark(args, kwargs, marked), eager=False
        )
    except _NEEDS_VALUES as error:
        raise _untraceable(error, local_site, plate) from error
    for i in sorted(marked):
        fewer = marked - {i}
        try:
            s = inspect_model(
                model, local_site, plate, *_mark(args, kwargs, fewer), eager=False
            )
        except _NEEDS_VALUES:
            continue
        marked, structure = fewer, s
    return (structure, *_mark(args, kwargs, marked))


# files whose frames are not the modeller's line
_LIBRARIES = tuple(os.path.dirname(m.__file__) + os.sep for m in (jax, np, numpyro)) + (
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    + os.sep,  # jaxannot
    os.path.dirname(os.__file__) + os.sep,
)


def _modeller_line(error: BaseException) -> str:
    """``path:line: source`` of the last frame of ``error``'s traceback outside
    jax, numpy, numpyro, jaxannot and the standard library ("" if none)."""
    frames = [
        f
        for f in traceback.extract_tb(error.__traceback__)
        if not os.path.abspath(f.filename).startswith(_LIBRARIES)
    ]
    if not frames:
        return ""
    f = frames[-1]
    return f"{f.filename}:{f.lineno}: {(f.line or '').strip()}"


def _untraceable(error: BaseException, local_site, plate) -> DeclarationError:
    """The error of a model that needs a value VEM traces whatever the data."""
    line = _modeller_line(error)
    where = f" at {line}" if line else ""
    first = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return DeclarationError(
        f"the model needs the concrete value of a traced quantity{where} "
        f"({type(error).__name__}: {first}). VEM gives the model its data arrays "
        "by value where it reads them (sizes, indices), but the values of the "
        f"global sites, of the local site {local_site!r} and plate {plate!r}'s "
        "indices are traced: write this with jax.numpy (jnp.where, lax.cond, "
        "jnp.max) instead of Python if / int() / float() / numpy on them, or pass "
        "a size as a Python int keyword"
    )


def site_support(site: dict) -> dist.constraints.Constraint:
    """A global site's support: its distribution's, or a ``param``'s constraint.

    Parameters
    ----------
    site : dict
        A sample or param site of a numpyro trace.

    Returns
    -------
    numpyro.distributions.constraints.Constraint
        The support (``real`` for a param declared without a constraint).
    """
    if site["type"] == "param":
        return site["kwargs"].get("constraint", dist.constraints.real)
    return site["fn"].support


def inspect_model(
    model: Callable,
    local_site: str,
    plate: str,
    args: tuple,
    kwargs: dict,
    eager: bool = True,
) -> Structure:
    """The model's :class:`Structure`, from a trace on shapes only.

    Parameters
    ----------
    model, local_site, plate, args, kwargs
        As :func:`read_by_value` takes them.
    eager : bool
        Whether to trace on the values when the shapes are not enough (see
        :func:`abstract_trace`).

    Returns
    -------
    Structure
        Its global sites, plate and enumerated sites.
    """
    return abstract_trace(
        model, {}, args, kwargs, lambda t: _read_structure(t, local_site, plate), eager
    )


def _read_structure(trace, local_site, plate) -> Structure:
    if plate not in trace or trace[plate]["type"] != "plate":
        plates = [k for k, v in trace.items() if v["type"] == "plate"]
        raise DeclarationError(
            f"the model has no plate {plate!r}; its plates: {plates}"
        )
    if local_site not in trace:
        latent = [k for k, v in trace.items() if v["type"] == "sample"]
        raise DeclarationError(
            f"the model has no site {local_site!r}; its sample sites: {latent}"
        )
    site = trace[local_site]
    if not site_in_plate(site, plate) or site["is_observed"]:
        raise DeclarationError(
            f"site {local_site!r} must be a latent site inside plate {plate!r}"
        )
    num_values = num_values_of(site)
    if num_values is None:
        raise DeclarationError(
            f"site {local_site!r} must be Categorical or another distribution VEM "
            f"enumerates ({ENUMERABLE}), "
            f"got {type(base_distribution(site['fn'])).__name__}"
        )
    enumerated = enumerated_sites(trace, plate, local_site, num_values)
    params_in_plate = [
        k for k, v in trace.items() if v["type"] == "param" and site_in_plate(v, plate)
    ]
    if params_in_plate:
        raise DeclarationError(
            f"numpyro.param sites {params_in_plate} are inside plate {plate!r}: VEM "
            "fits global params only; declare them outside the plate"
        )
    globals_ = tuple(
        k
        for k, v in trace.items()
        if (v["type"] == "sample" and not v["is_observed"] or v["type"] == "param")
        and not site_in_plate(v, plate)
    )
    frame = next(f for f in site["cond_indep_stack"] if f.name == plate)
    shapes = tuple(
        tuple(int(d) for d in jnp.shape(trace[k]["value"])) for k in globals_
    )
    return Structure(
        globals_, int(frame.size), num_values, frame.dim, shapes, enumerated
    )
