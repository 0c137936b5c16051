r"""The per-image posteriors of a site enumerated in the model, under
:class:`~jaxannot.inference.LaplacianELBO`'s penalty (its module docstring): the
maximizer :math:`\Phi^*` of LapVar1's objective :math:`Q` by LapVar1 sweeps, and the
gap :math:`\sum_i \mathrm{lse}(a_i) - Q(\Phi)` the loss adds.

:func:`solve_posteriors` is :func:`regularized_posteriors` compiled once per shape
and number of sweeps, for calls outside a compiled loss (its weight is dynamic).
"""

from __future__ import annotations

import jax

from jaxannot.graph.neighbour_table import NeighbourTable
from jaxannot.inference import lapvar

__all__ = ["regularized_gap", "regularized_posteriors", "solve_posteriors"]


def regularized_gap(
    a: jax.Array, phi: jax.Array, table: NeighbourTable, lam_r: float | jax.Array
) -> jax.Array:
    r""":math:`\sum_i \mathrm{KL}(\phi_i\,\|\,\mathrm{softmax}(a_i)) + \lambda' R(\Phi)`
    (module docstring) for log joints ``a`` and posteriors ``phi`` [N, K]: the loss
    an enumerated site adds to ``TraceEnum_ELBO``'s, :math:`\sum_i
    \mathrm{lse}(a_i) - Q(\Phi)`.

    Parameters
    ----------
    a : jax.Array [N, K]
        Log joints of the enumerated site's values.
    phi : jax.Array [N, K]
        Posteriors.
    table : NeighbourTable
        The graph.
    lam_r : float or jax.Array
        The weight :math:`\lambda'` of :math:`R`.

    Returns
    -------
    jax.Array
        The scalar gap.
    """
    lse = jax.nn.logsumexp(a, axis=-1).sum()
    return lse - lapvar.regularized_objective(phi, a, table, lam_r)


def regularized_posteriors(
    rng_key: jax.Array,
    a: jax.Array,
    table: NeighbourTable,
    lam_r: float | jax.Array,
    sweeps: int,
) -> jax.Array:
    """The maximizer of :math:`Q` by ``sweeps`` LapVar1 sweeps from softmax(a), in a
    ``lax.scan`` (one compiled sweep, not ``sweeps`` unrolled copies).

    Parameters
    ----------
    rng_key : PRNGKey
        Orders of the sweeps.
    a : jax.Array [N, K]
        Log joints.
    table : NeighbourTable
        The graph.
    lam_r : float or jax.Array
        The weight of :math:`R`.
    sweeps : int
        LapVar1 sweeps.

    Returns
    -------
    jax.Array [N, K]
        The posteriors after the sweeps.
    """

    def sweep(phi, key):
        return lapvar.lapvar1_sweep(key, phi, a, table, lam_r), None

    keys = jax.random.split(rng_key, sweeps)
    phi, _ = jax.lax.scan(sweep, jax.nn.softmax(a, axis=-1), keys)
    return phi


#: :func:`regularized_posteriors` compiled once, for calls outside a compiled loss
solve_posteriors = jax.jit(regularized_posteriors, static_argnames=("sweeps",))
