r"""Closed-form M-step updates of the conjugate global sites of a VEM fit.

A global site :math:`\theta` with a Dirichlet prior whose expected complete log
joint (:func:`~jaxannot.inference.vem.layout.Whole.expected`, prior included) is,
as a function of :math:`\theta`, :math:`E(\theta) = \sum_j w_j \log\theta_j` +
terms free of :math:`\theta` (Dirichlet–Categorical: :math:`w = c + \alpha - 1`,
with :math:`c` the posteriors' expected counts) has

.. math::
    \theta \odot \nabla_\theta E(\theta) = w

at every :math:`\theta`: the expected counts are read off one gradient at the
current value, and the MAP row is :math:`\theta^* \propto w`. A Beta site with
:math:`E(p) = A\log p + B\log(1-p)` (Beta–Bernoulli) has :math:`E' = A/p -
B/(1-p)` and :math:`E'' = -A/p^2 - B/(1-p)^2`; both come from one
forward-over-reverse pass, and :math:`p^* = A/(A+B)`.

Where other discrete sites are summed out of the log joint (MACE's spamming
indicator), :math:`\theta \odot \nabla_\theta E` is the expected counts under their
posterior at the current value, so the Dirichlet update is an EM step on them
(Jensen's bound is tight there). The candidates are the sites whose prior is a
``Dirichlet`` or ``Beta`` (:func:`conjugate_sites`); that their objective has the
form above is not assumed: the proposal of every candidate together is kept only
where it does not lower :math:`E` (beyond float32 round-off, :data:`ROUND_OFF`),
otherwise the generic gradient M-step runs on every site. So each M-step raises
:math:`E` and EM's objective cannot fall (a generalized EM).

A site with a Normal prior (a location) gets, after them and with them at their
proposal, Newton steps (:mod:`~jaxannot.inference.vem.newton`): the maximizer where
:math:`E` is quadratic in it (a Normal likelihood). Its proposal is part of the
candidates' one: kept, or not, with theirs, by the same test.

No MAP exists where a weight is not positive (a prior with :math:`\alpha < 1`, whose
density is unbounded at the boundary, and fewer expected counts than
:math:`1-\alpha`): such entries get the weight :data:`FLOOR` times the row's
positive weights instead of 0, so every value stays inside its support (a Beta
value also within :data:`EDGE` of its ends); a row with no positive weight keeps
its value.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpyro.distributions as dist

from jaxannot.inference.vem.enumeration import base_distribution
from jaxannot.inference.vem.model_call import trace_without_draws
from jaxannot.inference.vem.newton import MAX_COORDINATES, newton_update

if TYPE_CHECKING:
    from jaxannot.inference.vem.declared import DeclaredModel
    from jaxannot.inference.vem.layout import Shards, Whole
    from jaxannot.types import Array

__all__ = ["all_kept", "conjugate_sites", "conjugate_update"]

#: Relative weight given to entries whose weight is not positive (see above).
FLOOR = 1e-10
#: A Beta value's distance from 0 and 1 at least (float32 keeps ``1 - EDGE``).
EDGE = 1e-6
#: A proposal may lower the expected complete log joint by this much (relative)
#: and still be kept: float32's round-off on its sum.
ROUND_OFF = 1e-6


def conjugate_sites(vem: Any, layout: Whole | Shards, dynamic: tuple) -> dict[str, str]:
    """``{site: "dirichlet" | "beta" | "normal"}``: the global ``sample`` sites
    whose prior is a Dirichlet, a Beta or a Normal (under ``expand``, ``to_event``
    or ``mask``; the Normal ones only while they have at most
    :data:`~jaxannot.inference.vem.newton.MAX_COORDINATES` coordinates together);
    empty when ``vem.conjugate`` is False. Read from a trace of the model, at trace
    time, its latent sites at any value (no random draw traced into the compiled
    program).

    Parameters
    ----------
    vem : VEM
        The algorithm (``vem.conjugate``, its model).
    layout : Whole or Shards
        The fit's layout.
    dynamic : tuple
        The model's array arguments.

    Returns
    -------
    dict
        Site -> ``"dirichlet"``, ``"beta"`` or ``"normal"``.
    """
    if not vem.conjugate:
        return {}
    dm = vem.declared
    args, kwargs = layout.join(dynamic)
    subs = dm.small_substitutions(layout.setup)

    trace = trace_without_draws(dm.model, subs, args, kwargs)
    kinds = {}
    for name in layout.setup.structure.globals_:
        site = trace[name]
        if site["type"] != "sample":
            continue
        base = base_distribution(site["fn"])
        if isinstance(base, dist.Dirichlet):
            kinds[name] = "dirichlet"
        elif isinstance(base, dist.Beta):
            kinds[name] = "beta"
        elif isinstance(base, dist.Normal):
            kinds[name] = "normal"
    normal = [k for k, v in kinds.items() if v == "normal"]
    if sum(jnp.size(trace[k]["value"]) for k in normal) > MAX_COORDINATES:
        kinds = {k: v for k, v in kinds.items() if v != "normal"}
    return kinds


def _simplex(theta, grad):
    """The MAP rows :math:`\\propto \\theta \\odot \\nabla E` (floored)."""
    w = theta * grad
    positive = jnp.maximum(w, 0.0).sum(-1, keepdims=True)
    w = jnp.maximum(w, FLOOR * positive)
    return jnp.where(positive > 0, w / w.sum(-1, keepdims=True), theta)


def _interval(p, d1, d2):
    """:math:`A/(A+B)` from :math:`E'` and :math:`E''` at ``p`` (floored)."""
    b_over = -(1.0 - p) * (p * d2 + d1)  # B / (1 - p)
    a, b = p * (b_over + d1), (1.0 - p) * b_over
    positive = jnp.maximum(a, 0.0) + jnp.maximum(b, 0.0)
    a, b = jnp.maximum(a, FLOOR * positive), jnp.maximum(b, FLOOR * positive)
    new = jnp.where(positive > 0, a / (a + b), p)
    return jnp.clip(new, EDGE, 1.0 - EDGE)


def conjugate_update(
    dm: DeclaredModel,
    layout: Whole | Shards,
    values: dict[str, Array],
    phi: Array,
    dynamic: tuple,
    kinds: dict[str, str],
) -> tuple[dict[str, Array], dict[str, Array]]:
    """The closed-form values of the ``kinds`` sites given the posteriors ``phi``
    (the others at ``values``) and whether to keep them: ``(proposal, kept)``. The
    Normal sites' Newton proposal is found from the Dirichlet and Beta sites'
    proposal; the whole proposal is kept where its expected complete log joint is
    finite and not below the current one's (up to :data:`ROUND_OFF`), or not at
    all: one evaluation of that objective, not one per kind of site (each is a
    pass over every item in the compiled program, and the update is compiled in
    the start and in the EM step, issue 43).

    Parameters
    ----------
    dm : DeclaredModel
        The model.
    layout : Whole or Shards
        The fit's layout.
    values : dict
        Site -> current global value.
    phi : jax.Array [images, K]
        Posteriors.
    dynamic : tuple
        The model's array arguments.
    kinds : dict
        Site -> ``"dirichlet"``, ``"beta"`` or ``"normal"``
        (:func:`conjugate_sites`).

    Returns
    -------
    tuple of (dict, dict)
        The proposal (site -> value) and whether it is kept (site -> a scalar
        bool, the same for every site).
    """

    def expected(base, sub):
        return layout.expected(dm, {**base, **sub}, phi, dynamic)

    proposal, value = {}, None
    closed = {k: v for k, v in kinds.items() if v != "normal"}
    if closed:
        proposal, value = _closed_form(partial(expected, values), values, closed)
    normal = [k for k, v in kinds.items() if v == "normal"]
    if normal:  # from the Dirichlet and Beta sites' proposal
        current = {k: values[k] for k in normal}
        proposal.update(
            newton_update(partial(expected, {**values, **proposal}), current)
        )
    value = expected(values, {}) if value is None else value
    ok = _no_lower(value, expected(values, proposal))
    return proposal, dict.fromkeys(kinds, ok)


def all_kept(kept: dict[str, Array]) -> Array:
    """Whether every proposal of :func:`conjugate_update` is kept (a scalar bool).

    Parameters
    ----------
    kept : dict
        Site -> whether its proposal is kept.

    Returns
    -------
    jax.Array
        A scalar bool.
    """
    return jnp.all(jnp.stack(list(kept.values())))


def _no_lower(value, new):
    """Whether ``new`` is finite and not below ``value`` (up to
    :data:`ROUND_OFF`)."""
    return jnp.isfinite(new) & (new >= value - ROUND_OFF * jnp.abs(value))


def _closed_form(expected, values, kinds):
    """The Dirichlet and Beta sites' MAP given the posteriors (module docstring)
    and :math:`E` at ``values``: ``(proposal, value)``."""
    current = {k: values[k] for k in kinds}
    if "beta" in kinds.values():
        tangent = {
            k: jnp.ones_like(v) if kinds[k] == "beta" else jnp.zeros_like(v)
            for k, v in current.items()
        }
        (value, grad), (_, curvature) = jax.jvp(
            jax.value_and_grad(expected), (current,), (tangent,)
        )
    else:
        value, grad = jax.value_and_grad(expected)(current)
    proposal = {
        k: _simplex(v, grad[k])
        if kinds[k] == "dirichlet"
        else _interval(v, grad[k], curvature[k])
        for k, v in current.items()
    }
    return proposal, value
