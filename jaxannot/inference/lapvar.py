r"""Laplacian-regularized variational inference for discrete latent variables.

Seed 000 adds a graph penalty to the variational free energy of per-object discrete
variables :math:`z_i` with :math:`q(z_i = k) = \phi_{ik}`:

.. math::
    Q(\Phi) = \sum_i \Big[\sum_k \phi_{ik} a_{ik} - \sum_k \phi_{ik}\log\phi_{ik}\Big]
              - \lambda R(\Phi),\qquad
    R = \tfrac12 \sum_{ij} S_{ij}\,\lVert\phi_i - \phi_j\rVert^2,

where :math:`a_{ik}` collects everything the model says about :math:`z_i`
(for the mixture of unigrams :math:`a_{ik} = \log\pi_k + \sum_w n_{iw}\log\beta_{kw}`).
With :math:`d_i = \sum_j S_{ij}` and :math:`m_i = \sum_j S_{ij}\phi_j`, the part of
:math:`Q` that depends on :math:`\phi_i` is

.. math::
    f_i(\phi_i) = \phi_i^\top a_i - \phi_i^\top\log\phi_i
                  - \lambda\,(d_i\lVert\phi_i\rVert^2 - 2\phi_i^\top m_i),

strictly concave on the simplex, with gradient
:math:`g = a_i - \log\phi_i - 1 - 2\lambda(d_i\phi_i - m_i)` and diagonal Hessian
:math:`h = -1/\phi_i - 2\lambda d_i`.

LapVar1
    Each variable in turn is set to the maximizer of :math:`f_i` over the simplex
    (neighbours fixed), so :math:`Q` never decreases. The stationarity conditions in
    log coordinates, with a Lagrange multiplier :math:`\nu` for
    :math:`\sum_k\phi_{ik} = 1`, read :math:`\log\phi_{ik} + c_i\phi_{ik} = r_{ik} -
    \nu` with :math:`r_i = a_i + 2\lambda m_i` and :math:`c_i = 2\lambda d_i`: each
    component is a Lambert W, :math:`\phi_{ik} = W(c_i e^{r_{ik}-\nu}) / c_i`, and
    :math:`\nu` is the root of :math:`\sum_k\phi_{ik}(\nu) = 1`, a convex decreasing
    function of :math:`\nu` bracketed in :math:`[\mathrm{lse}(r_i) - c_i,
    \mathrm{lse}(r_i)]`. Newton's method on :math:`\nu` from the bracket's end where
    the sum exceeds 1 moves monotonically to the root (a handful of O(K) steps to
    float32 precision), so a component at :math:`10^{-26}` reaches its optimal value
    in one update, however far that is
    (:func:`~jaxannot.inference.lapvar_update.newton_update`). The new
    :math:`\phi_i` replaces the old one unless it reads lower in :math:`f_i` by
    more than float32 round-off. Each
    variable is updated once per sweep in random order; non-adjacent variables are
    updated together (a greedy graph colouring; the colour classes are visited in a
    fresh random order every sweep), which leaves every update — and the fixed
    points — exactly as in a sequential sweep.
LapVar2
    All :math:`\phi_i` by plain VI (:math:`\phi_i \propto e^{a_i}`), then smoothing
    :math:`\phi_i \leftarrow (1-\gamma)\phi_i + \gamma\, m_i/d_i` (the Newton step of
    :math:`R` alone), keeping the iterate with the best :math:`Q`. Each E-step
    restarts from plain VI, so it is no ascent step in :math:`\Phi`: VEM (which
    keeps the best major iteration and stops at the first that fails to improve)
    stops when the smoothed restart reads lower than the last E-step — after 2 or 3
    iterations once :math:`\lambda` is large (smoothing then leaves VI far behind).
    Taking the last E-step's :math:`\Phi` as a candidate too makes :math:`Q`
    monotone but freezes the fit on it (ARI 0.38 instead of 0.75 at
    :math:`\lambda = 2` on the toy of ``benchmarks/claims/graph_regularization.py``), so
    the seed's rule is kept; LapVar2 helps at small :math:`\lambda` only (docs).

**The scale of** :math:`\lambda`. :class:`LapVar1` and :class:`LapVar2` divide the
weights by the graph's mean degree :math:`\bar d = \frac1n\sum_{ij}S_{ij}`
(:func:`jaxannot.graph.mean_degree`; ``scale="none"`` keeps them), so that the
penalty is :math:`(\lambda/\bar d)\,R`: a node of average degree pays
:math:`\lambda\lVert\phi_i - m_i/d_i\rVert^2` (plus the spread of its neighbours)
whatever the graph's size, number of neighbours or weight kernel. What a given
:math:`\lambda` does still depends on how sharp the local evidence :math:`a_i` is
(many words per image take a larger :math:`\lambda` to move). A large
:math:`\lambda` makes every :math:`\phi_i` equal — :math:`R = 0` — and EM then makes
every component the same: VEM warns (``CollapsedFitWarning``) when that happens.

Both are E-step transforms of :class:`~jaxannot.inference.VEM`
(:class:`LapVar1`, :class:`LapVar2`), which alternates them with a model's M-step.

References
----------
Seed 000: "Graph-regularized variational inference for image annotation" (LapVar1,
LapVar2, LapMixUnigram). Q. Mei, D. Cai, D. Zhang, C. Zhai. Topic modeling with network
regularization. WWW 2008.
"""

from __future__ import annotations

import copy
import functools
import math
import numbers
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
from jax import lax

from jaxannot.graph.laplacian import Graph, as_graph, mean_degree
from jaxannot.graph.neighbour_table import (
    NeighbourTable,
    laplacian_penalty,
    neighbour_sums,
    neighbour_table,
    pad_dummy_row,
)
from jaxannot.inference.lapvar_update import newton_update

if TYPE_CHECKING:
    from jaxannot.types import Array, PRNGKey

__all__ = [
    "LapVar1",
    "LapVar2",
    "NeighbourTable",
    "neighbour_table",
    "neighbour_sums",
    "laplacian_penalty",
    "regularized_objective",
    "lapvar1_sweep",
    "lapvar2_estep",
    "ALGORITHMS",
    "LAM_PATH",
    "SCALES",
]

ALGORITHMS = ("lapvar1", "lapvar2")
#: How :class:`LapVar1` and :class:`LapVar2` scale the graph's weights.
SCALES = ("mean_degree", "none")

# Floor on probabilities inside log (float32 smallest normal is ~1.2e-38).
_TINY = 1e-30


def _entropy_terms(phi: jax.Array, a: jax.Array) -> jax.Array:
    return (phi * a).sum() - jax.scipy.special.xlogy(phi, phi).sum()


@jax.jit
def regularized_objective(
    phi: jax.Array, a: jax.Array, table: NeighbourTable, lam: float | Array
) -> jax.Array:
    """:math:`Q(\\Phi)` of the module docstring for ``phi``, ``a`` [nodes, K].

    Parameters
    ----------
    phi : jax.Array [nodes, K]
        Posteriors.
    a : jax.Array [nodes, K]
        Log joints.
    table : NeighbourTable
        The graph.
    lam : float or jax.Array
        The weight of the Laplacian penalty.

    Returns
    -------
    jax.Array
        The scalar :math:`Q`.
    """
    return _entropy_terms(phi, a) - lam * laplacian_penalty(phi, table)


@functools.partial(jax.jit, static_argnames=("num_newton_steps",))
def lapvar1_sweep(
    rng_key: jax.Array,
    phi: jax.Array,
    a: jax.Array,
    table: NeighbourTable,
    lam: float | Array,
    num_newton_steps: int = 10,
) -> jax.Array:
    """One LapVar1 sweep: every variable updated once, colour classes in random order.

    Parameters
    ----------
    rng_key : PRNGKey
    phi, a : Float[Array, "nodes topics"]
    table : NeighbourTable
    lam : float
    num_newton_steps : int (static)

    Returns
    -------
    Float[Array, "nodes topics"]
    """
    blocks = table.blocks
    if blocks is None:
        raise ValueError("a LapVar1 sweep needs a table built with blocks=True")
    phi_p, a_p = pad_dummy_row(phi), pad_dummy_row(a)
    order = jax.random.permutation(rng_key, blocks.first.shape[0])
    # the classes in random order, each block after block (its nodes are independent)
    counts = blocks.count[order]
    ends = jnp.cumsum(counts)
    size = blocks.members.shape[1]
    update = jax.vmap(
        functools.partial(newton_update, num_steps=num_newton_steps),
        in_axes=(0, 0, 0, 0, None),
    )

    def body(t, phi_p):
        pos = jnp.searchsorted(ends, t, side="right")
        b = blocks.first[order[pos]] + t - (ends[pos] - counts[pos])
        members = blocks.members[b]
        contrib = blocks.weights[b][:, None] * phi_p[blocks.receivers[b]]
        m = jax.ops.segment_sum(
            contrib, blocks.slots[b], size + 1, indices_are_sorted=True
        )[:size]
        new = update(phi_p[members], a_p[members], m, table.degree[members], lam)
        return phi_p.at[members].set(new)

    # the real blocks only: the padding blocks after them hold the dummy node alone
    phi_p = lax.fori_loop(0, ends[-1], body, phi_p)
    return phi_p[:-1]


@functools.partial(jax.jit, static_argnames=("num_smoothing",))
def lapvar2_estep(
    a: jax.Array,
    table: NeighbourTable,
    lam: float | Array,
    gamma: float | Array,
    num_smoothing: int = 10,
) -> tuple[jax.Array, jax.Array]:
    """LapVar2's E-step: plain VI, then smoothing; the iterate with the best Q.

    Parameters
    ----------
    a, table, lam
        As :func:`regularized_objective` takes them.
    gamma : float or jax.Array
        The smoothing step's mixing weight.
    num_smoothing : int
        Smoothing steps (static).

    Returns
    -------
    phi : Float[Array, "nodes topics"]
    q : Float[Array, ""]
        Its regularized objective.
    """
    phi0 = jax.nn.softmax(a, axis=-1)
    degree = table.degree[:-1, None]

    def smooth(carry, _):
        phi, best_phi, best_q = carry
        m = neighbour_sums(pad_dummy_row(phi), table)[:-1]
        target = jnp.where(degree > 0, m / jnp.maximum(degree, _TINY), phi)
        phi = (1.0 - gamma) * phi + gamma * target
        q = regularized_objective(phi, a, table, lam)
        better = q > best_q
        return (phi, jnp.where(better, phi, best_phi), jnp.where(better, q, best_q)), q

    q0 = regularized_objective(phi0, a, table, lam)
    (_, best_phi, best_q), _ = lax.scan(
        smooth, (phi0, phi0, q0), None, length=num_smoothing
    )
    return best_phi, best_q


#: The weights ``lam="auto"`` tries (mean-degree scale), warm-started in this order
#: (LapVar1; LapVar2 fits each from the default start: ``vem.heldout``, step 2).
LAM_PATH = (0.0, 0.1, 0.2, 0.3, 0.5, 1.0)


def _check_lam(lam) -> float | str:
    """``lam`` as a float >= 0, or ``"auto"``."""
    if isinstance(lam, str):
        if lam != "auto":
            raise ValueError(f"lam must be 'auto' or a number >= 0, got {lam!r}")
        return lam
    if isinstance(lam, bool) or not isinstance(lam, numbers.Real):
        raise TypeError(f"lam must be 'auto' or a number >= 0, got {lam!r}")
    if not math.isfinite(lam) or lam < 0:
        raise ValueError(f"lam must be a finite number >= 0 or 'auto', got {lam}")
    return float(lam)


def _check_path(lam_path) -> tuple:
    path = tuple(float(x) for x in lam_path)
    if len(path) < 2 or path[0] != 0.0 or any(not math.isfinite(x) for x in path):
        raise ValueError(
            f"lam_path must start at 0 and hold at least 2 finite weights, got {path}"
        )
    if any(b <= a for a, b in zip(path, path[1:], strict=False)):
        raise ValueError(f"lam_path must increase, got {path}")
    return path


def _unit(graph: Any, scale: str) -> float:
    """The factor from ``lam`` to the raw graph's weight: 1 / mean degree
    (``scale="mean_degree"``) or 1."""
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {list(SCALES)}, got {scale!r}")
    return 1.0 / (mean_degree(graph) if scale == "mean_degree" else 1.0)


class _Weighted:
    """What LapVar1 and LapVar2 share: the weight ``lam`` (a number or ``"auto"``),
    its path, the held-out check, and copies at another weight."""

    lam: float | str
    lam_path: tuple
    heldout_check: bool
    _unit: float

    def _set_graph(
        self,
        graph: Any,
        lam: float | str,
        scale: str,
        lam_path: Sequence[float],
        heldout_check: bool,
    ) -> Graph:
        """Keep the graph (:func:`~jaxannot.graph.as_graph`), its size, its ``scale``
        and the weight ``lam``; the graph, for the subclass's tables."""
        graph = as_graph(graph)
        self.graph = graph
        self._unit = _unit(graph, scale)
        self._set_lam(lam, lam_path, heldout_check)
        self.num_nodes = int(graph.num_nodes)
        return graph

    def _set_lam(self, lam, lam_path, heldout_check) -> float:
        self.lam = _check_lam(lam)
        self.lam_path = _check_path(lam_path)
        self.heldout_check = bool(heldout_check)
        value = 0.0 if self.lam == "auto" else self.lam
        self.effective_lam = value * self._unit
        return self.effective_lam

    def with_lam(self, lam: float):
        """A copy at the fixed weight ``lam`` (same graph tables; no check)."""
        new = copy.copy(self)
        new.lam, new.heldout_check = _check_lam(float(lam)), False
        new.effective_lam = new.lam * self._unit
        new.arrays = (
            self.arrays[0],
            jnp.float32(new.effective_lam),
            *self.arrays[2:],
        )
        return new


class LapVar1(_Weighted):
    """LapVar1 as an E-step transform of :class:`~jaxannot.inference.VEM`.

    Each E-step runs ``sweeps`` LapVar1 sweeps (:func:`lapvar1_sweep`) from the
    previous posteriors on the current linear terms :math:`a`; the objective is
    :math:`Q(\\Phi)` (:func:`regularized_objective`), which never decreases.

    Parameters
    ----------
    graph : jaxannot.graph.Graph or array [N, N]
        Symmetric weighted graph over the images of the fit (its ``num_nodes`` is
        the image plate's size), or its adjacency matrix (dense or
        ``scipy.sparse``; :func:`~jaxannot.graph.as_graph`, diagonal dropped).
    lam : float or "auto"
        Penalty weight :math:`\\lambda \\ge 0` on the graph scaled to mean degree 1
        (module docstring); 0 is plain VI. ``"auto"`` (the default): chosen by
        :meth:`VEM.run <jaxannot.inference.VEM.run>` for each fit on the model's own
        held-out evidence along ``lam_path``
        (:mod:`~jaxannot.inference.vem.heldout`; the result's ``lam`` and
        ``lam_path``): 0 unless the graph's neighbours predict held-out images'
        observations better than their prior, at the cost of ``FOLDS *
        len(lam_path)`` more fits (30 at the defaults), each stopped at
        convergence (``heldout.TOLERANCE``). No weight
        transfers between models: on a 600-image mixture of unigrams whose 10-NN
        graph joins the true cluster 73 % of the time, 1 raises the ARI from 0.67
        (plain VEM) to 0.84; on issue 43's weak Bernoulli mixture it lowers it
        (``benchmarks/claims/graph_regularization.py``, ``docs/modelling.md``).
    lam_path : sequence of float
        The weights ``"auto"`` tries, from 0, increasing (default
        :data:`LAM_PATH`).
    heldout_check : bool
        With a given ``lam > 0``, :meth:`VEM.run <jaxannot.inference.VEM.run>`
        also fits the masked model at 0 and ``lam`` (two more fits) and
        warns (``UserWarning``) when the neighbours predict held-out images worse than
        their prior or ``lam`` lowers the
        held-out evidence below 0's by more than a standard error
        (:func:`~jaxannot.inference.vem.heldout.check_lam`).
    sweeps, newton_steps : int
        Sweeps per E-step; Newton steps on each variable's multiplier
        (:func:`~jaxannot.inference.lapvar_update.newton_update`).
    schedule : {"colouring", "sequential"}
        Colour classes updated together, or one node at a time.
    seed : int
        Seeds the greedy colouring.
    scale : {"mean_degree", "none"}
        Divide the weights by the graph's mean degree (the default), or use them
        as they are (:math:`\\lambda` then multiplies :math:`R` of the raw graph).

    Attributes
    ----------
    effective_lam : float
        The weight of the raw graph's :math:`R`: ``lam / mean_degree(graph)``
        (``lam`` with ``scale="none"``); 0 while ``lam`` is ``"auto"``.
    """

    keep_best = False

    def __init__(
        self,
        graph: Any,
        lam: float | str = "auto",
        *,
        sweeps: int = 1,
        newton_steps: int = 10,
        schedule: str = "colouring",
        seed: int = 0,
        scale: str = "mean_degree",
        lam_path: Sequence[float] = LAM_PATH,
        heldout_check: bool = True,
    ):
        if int(sweeps) < 1 or int(newton_steps) < 1:
            raise ValueError("sweeps and newton_steps must be >= 1")
        graph = self._set_graph(graph, lam, scale, lam_path, heldout_check)
        self.sweeps, self.newton_steps = int(sweeps), int(newton_steps)
        table = neighbour_table(graph, schedule=schedule, seed=seed)
        self.arrays = (table, jnp.float32(self.effective_lam))
        self.static_key = ("lapvar1", self.sweeps, self.newton_steps)

    def apply(
        self,
        arrays: tuple[NeighbourTable, Array],
        rng_key: PRNGKey,
        phi: Array,
        a: Array,
    ) -> tuple[Array, Array]:
        r"""``self.sweeps`` LapVar1 sweeps from ``phi``, and :math:`Q` at the result.

        Parameters
        ----------
        arrays : tuple of (NeighbourTable, jax.Array)
            The table and the weight :math:`\lambda`.
        rng_key : PRNGKey
            Orders of the sweeps.
        phi : jax.Array [nodes, K]
            Previous posteriors, the sweeps' start.
        a : jax.Array [nodes, K]
            Log joints.

        Returns
        -------
        tuple of (jax.Array, jax.Array)
            The new posteriors [nodes, K] and their objective.
        """
        table, lam = arrays
        keys = jax.random.split(rng_key, self.sweeps)
        phi = lax.fori_loop(
            0,
            self.sweeps,
            lambda s, p: lapvar1_sweep(keys[s], p, a, table, lam, self.newton_steps),
            phi,
        )
        return phi, regularized_objective(phi, a, table, lam)

    def objective(
        self, arrays: tuple[NeighbourTable, Array], phi: Array, a: Array
    ) -> Array:
        r""":math:`Q` at posteriors ``phi``.

        Parameters
        ----------
        arrays : tuple of (NeighbourTable, jax.Array)
            The table and the weight :math:`\lambda`.
        phi, a : jax.Array [nodes, K]
            Posteriors and log joints.

        Returns
        -------
        jax.Array
            The scalar :math:`Q` (:func:`regularized_objective`).
        """
        table, lam = arrays
        return regularized_objective(phi, a, table, lam)


class LapVar2(LapVar1):
    """LapVar2 as an E-step transform of :class:`~jaxannot.inference.VEM`.

    Each E-step is plain VI followed by ``smoothing`` steps
    :math:`\\phi_i \\leftarrow (1-\\gamma)\\phi_i + \\gamma m_i/d_i`, keeping the
    iterate with the best :math:`Q` (:func:`lapvar2_estep`; why it may stop
    early: module docstring). VEM keeps the best major iteration and stops as
    soon as :math:`Q` + log prior fails to improve (seed 000: "if the maximized Q
    is larger than in the last major iteration, continue").

    Parameters
    ----------
    graph, lam, scale, lam_path, heldout_check : as :class:`LapVar1`
    gamma : float
        Smoothing rate in (0, 1].
    smoothing : int
        Smoothing steps per E-step.
    """

    keep_best = True

    def __init__(
        self,
        graph: Any,
        lam: float | str = "auto",
        *,
        gamma: float = 0.5,
        smoothing: int = 10,
        scale: str = "mean_degree",
        lam_path: Sequence[float] = LAM_PATH,
        heldout_check: bool = True,
    ):
        if not 0 < gamma <= 1 or int(smoothing) < 1:
            raise ValueError("gamma must be in (0, 1] and smoothing >= 1")
        graph = self._set_graph(graph, lam, scale, lam_path, heldout_check)
        self.smoothing = int(smoothing)
        table = neighbour_table(graph, schedule="sequential", blocks=False)
        self.arrays = (table, jnp.float32(self.effective_lam), jnp.float32(gamma))
        self.static_key = ("lapvar2", self.smoothing)

    def apply(
        self,
        arrays: tuple[NeighbourTable, Array, Array],
        rng_key: PRNGKey,
        phi: Array,
        a: Array,
    ) -> tuple[Array, Array]:
        r""":func:`lapvar2_estep` from the log joints (``phi`` is not used).

        Parameters
        ----------
        arrays : tuple of (NeighbourTable, jax.Array, jax.Array)
            The table, :math:`\lambda` and the smoothing weight.
        rng_key, phi
            Not used (LapVar2 starts from the log joints).
        a : jax.Array [nodes, K]
            Log joints.

        Returns
        -------
        tuple of (jax.Array, jax.Array)
            The best iterate's posteriors [nodes, K] and its objective.
        """
        del rng_key, phi
        table, lam, gamma = arrays
        return lapvar2_estep(a, table, lam, gamma, self.smoothing)

    def objective(
        self, arrays: tuple[NeighbourTable, Array, Array], phi: Array, a: Array
    ) -> Array:
        r""":math:`Q` at posteriors ``phi``.

        Parameters
        ----------
        arrays : tuple of (NeighbourTable, jax.Array, jax.Array)
            The table, :math:`\lambda` and the smoothing weight (not read here).
        phi, a
            As :meth:`LapVar1.objective` takes them.

        Returns
        -------
        jax.Array
            The scalar :math:`Q`, as :meth:`LapVar1.objective` gives it.
        """
        return regularized_objective(phi, a, arrays[0], arrays[1])
