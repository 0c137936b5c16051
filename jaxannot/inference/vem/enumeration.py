"""Which discrete sites :class:`~jaxannot.inference.vem.algorithm.VEM` enumerates.

Besides its local site (``c`` of ``VEM(model, "c", plate="item")``), a model may hold
more discrete latent sites inside the item plate, as numpyro's enumerated models do
(MACE's spamming indicator ``s`` per item and position):

- *item-level* sites, in the item plate only: enumerated jointly with the local
  site (the product of their supports);
- *nested* sites, in the item plate and further plates (all in the same ones, e.g.
  ``plate("position")``): given the item-level values, each element of those plates
  is independent of the others (the plates' meaning), so their values are summed
  element by element, never as a product over the elements.

:func:`enumerated_sites` reads them from a trace (:class:`Enumerated`, static) and
refuses what VEM cannot enumerate exactly, with a :class:`DeclarationError` naming
the sites and the fix. The sums are in
:mod:`~jaxannot.inference.vem.joint_enumeration`.

A real-valued latent site in the item plate only (item difficulty's ``theta``, or
``theta_decentered`` under ``LocScaleReparam``) is not enumerated: it gets a local
MAP per item and value of the local site (:mod:`~jaxannot.inference.vem.local_map`),
on its own, beside the local site alone.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpyro.distributions as dist
from numpyro.distributions import constraints

__all__ = [
    "MAX_ENUMERATED",
    "DeclarationError",
    "Enumerated",
    "base_distribution",
    "enumerated_sites",
    "first_value_of",
    "num_values_of",
    "site_in_plate",
]

#: The most joint values (local site x item-level sites x nested sites, each a model
#: evaluation per chunk of items) VEM enumerates when a model has several discrete
#: sites in its item plate. A lone local site is not bounded (its K values).
MAX_ENUMERATED = 1024


#: The distributions of the sites VEM enumerates, as its errors name them.
ENUMERABLE = "Categorical, Bernoulli, DiscreteUniform(0, int)"


class DeclarationError(ValueError):
    """A declaration VEM cannot fit, or cannot fit as asked (named and explained)."""


def site_in_plate(site: dict, plate: str) -> bool:
    """Whether a trace's site lies inside ``plate`` (one of its conditional
    independence frames is that plate).

    Parameters
    ----------
    site : dict
        A site of a numpyro trace.
    plate : str
        The plate's name.

    Returns
    -------
    bool
        True when the site is in the plate.
    """
    return any(f.name == plate for f in site.get("cond_indep_stack", ()))


def base_distribution(fn: dist.Distribution) -> dist.Distribution:
    """The distribution under numpyro's wrappers (``Independent``, ``expand``,
    ``mask``), whose type says how VEM enumerates, starts or updates a site.

    Parameters
    ----------
    fn : numpyro.distributions.Distribution
        A site's distribution.

    Returns
    -------
    numpyro.distributions.Distribution
        The innermost one, ``fn`` itself when it is not wrapped.
    """
    while isinstance(
        fn, dist.Independent | dist.ExpandedDistribution | dist.MaskedDistribution
    ):
        fn = fn.base_dist
    return fn


@dataclasses.dataclass(frozen=True)
class Enumerated:
    """The discrete sites enumerated beside the local site (all static).

    Parameters
    ----------
    item_sites : tuple of (str, int)
        The item-level sites and their numbers of values.
    nested_sites : tuple of (str, int)
        The nested sites and their numbers of values.
    nested_plates : tuple of (str, int, int)
        The plates the nested sites share besides the item plate (name, dim,
        size), by dim.
    continuous : tuple of str
        The real-valued item-level sites (a local MAP each).
    """

    item_sites: tuple[tuple[str, int], ...] = ()  # (name, number of values)
    nested_sites: tuple[tuple[str, int], ...] = ()
    nested_plates: tuple[tuple[str, int, int], ...] = ()  # (name, dim, size) by dim
    continuous: tuple[str, ...] = ()  # real-valued item-level sites: a local MAP

    def __bool__(self) -> bool:
        return bool(self.item_sites or self.nested_sites or self.continuous)

    @property
    def item_values(self) -> int:
        """Joint values of the item-level sites besides the local site."""
        return math.prod(n for _, n in self.item_sites)

    @property
    def nested_values(self) -> int:
        """Joint values of the nested sites at one element of their plates."""
        return math.prod(n for _, n in self.nested_sites)

    @property
    def elements(self) -> int:
        """Elements of the nested plates per item."""
        return math.prod(n for _, _, n in self.nested_plates)


def num_values_of(site: dict) -> int | None:
    """The support size of an enumerable site.

    Parameters
    ----------
    site : dict
        A sample site of a numpyro trace.

    Returns
    -------
    int or None
        ``K`` for a Categorical of ``K`` values, 2 for a Bernoulli, ``high + 1`` for
        a ``DiscreteUniform(0, high)``; None where VEM cannot enumerate the site.
    """
    fn = base_distribution(site["fn"])
    if isinstance(fn, dist.CategoricalProbs | dist.CategoricalLogits):
        return int(fn.probs.shape[-1])
    if isinstance(fn, dist.BernoulliProbs | dist.BernoulliLogits):
        return 2
    if isinstance(fn, dist.DiscreteUniform):
        try:  # its bounds as numbers (Python ints, as numpyro users write them)
            low, high = int(fn.low), int(fn.high)
        except (TypeError, jax.errors.ConcretizationTypeError):
            return None
        return high + 1 if low == 0 else None
    return None


def first_value_of(fn: dist.Distribution, shape: tuple[int, ...]) -> jax.Array:
    """A value of ``shape`` for a site VEM does not read there: the first of an
    enumerable support, 0 for a real-valued site.

    Parameters
    ----------
    fn : numpyro.distributions.Distribution
        The site's distribution.
    shape : tuple of int
        The value's shape.

    Returns
    -------
    jax.Array
        The value, broadcast to ``shape``.
    """
    if fn.has_enumerate_support:
        return jnp.broadcast_to(fn.enumerate_support(expand=False)[0], shape)
    return jnp.zeros(shape)


def _is_real(fn) -> bool:
    """Whether a distribution's support is the reals (per event element)."""
    support = fn.support
    while isinstance(support, constraints.independent):
        support = support.base_constraint
    return support is constraints.real


def _sorted_sites(trace: dict, plate: str, local_site: str) -> tuple:
    """The latent sample sites of ``trace`` in ``plate`` other than ``local_site``,
    sorted: discrete ones in the item plate alone ``[(name, values)]``, discrete
    ones nested in further plates (and their frames ``{name: ((plate, dim,
    size), ...)}``), those of no enumerable kind ``{name: distribution}`` and the
    real-valued ones in the item plate alone."""
    item, nested, frames, other, real = [], [], {}, {}, []
    for name, site in trace.items():
        if site["type"] != "sample" or site["is_observed"] or name == local_site:
            continue
        if not site_in_plate(site, plate):
            continue
        size = num_values_of(site)
        own = sorted(
            ((f.name, f.dim, f.size) for f in site["cond_indep_stack"]),
            key=lambda f: f[1],
        )
        own = tuple(f for f in own if f[0] != plate)
        if size is None and _is_real(site["fn"]) and not own:
            real.append(name)
            continue
        if size is None:
            other[name] = type(base_distribution(site["fn"])).__name__
            continue
        (nested if own else item).append((name, size))
        if own:
            frames[name] = own
    return item, nested, frames, other, real


def enumerated_sites(
    trace: dict, plate: str, local_site: str, num_values: int
) -> Enumerated:
    """The latent sites of ``trace`` inside ``plate`` besides ``local_site``,
    classified.

    Parameters
    ----------
    trace : dict
        A numpyro trace of the model.
    plate : str
        The item plate, whose sites are classified.
    local_site : str
        The local site.
    num_values : int
        The local site's number of values.

    Returns
    -------
    Enumerated
        The item-level, nested and real-valued sites.

    Raises
    ------
    DeclarationError
        For sites VEM cannot enumerate exactly, or more than
        :data:`MAX_ENUMERATED` joint values.
    """
    item, nested, frames, other, real = _sorted_sites(trace, plate, local_site)
    if other:
        raise DeclarationError(
            f"VEM enumerates discrete sites ({ENUMERABLE}) in plate "
            f"{plate!r} beside its local site {local_site!r}; the model also has "
            f"{list(other)} ({', '.join(other.values())}): observe them or move "
            "them out of the plate (a real-valued site in the item plate only gets "
            "a local MAP)"
        )
    if real and (item or nested):
        raise DeclarationError(
            f"VEM finds a local MAP of the real-valued sites {real} in plate "
            f"{plate!r} beside its local site {local_site!r} alone; the model also "
            f"has the discrete sites {[k for k, _ in item + nested]}: observe them, "
            "or move them out of the plate"
        )
    if real:
        return Enumerated(continuous=tuple(real))
    if len(set(frames.values())) > 1:
        where = "; ".join(f"{k!r} in {[f[0] for f in v]}" for k, v in frames.items())
        raise DeclarationError(
            f"VEM sums out the discrete sites nested in plate {plate!r} when they "
            f"share their plates; here {where}: put them in the same plates, or "
            "observe some of them"
        )
    found = Enumerated(tuple(item), tuple(nested), next(iter(frames.values()), ()))
    total = num_values * found.item_values * found.nested_values
    if found and total > MAX_ENUMERATED:
        sizes = " x ".join(
            f"{n} ({k!r})" for k, n in [(local_site, num_values), *item, *nested]
        )
        raise DeclarationError(
            f"VEM would enumerate {sizes} = {total} joint values of the discrete "
            f"sites in plate {plate!r}, above MAX_ENUMERATED = {MAX_ENUMERATED} "
            "(each is a model evaluation per chunk of items): observe some of them, "
            "move them out of the plate, or merge them into fewer values"
        )
    return found
