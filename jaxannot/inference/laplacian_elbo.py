r"""A Laplacian penalty on any numpyro ELBO, at named per-image local sites.

For a model with a per-image local latent site (e.g. ``z`` inside an ``"image"``
plate), seed 000's graph-regularized variational objective is

.. math::
    \mathcal{L}_\lambda = -\mathrm{ELBO}(\theta, \psi)
        + \lambda \sum_{ij} S_{ij}\, d(q_i, q_j),

where :math:`q_i` summarizes the posterior of image :math:`i` at the site. The sum runs
over ordered pairs (each undirected edge twice), as in
:func:`jaxannot.graph.laplacian_penalty`; ``d`` is the squared Euclidean distance or
the symmetric KL divergence of probability vectors.

Where :math:`q_i` comes from is the rule of
:func:`~jaxannot.inference.local_summary.local_summary`: the location of a site
sampled by the guide, the exact local posterior of a discrete site enumerated in the
model.

A discrete site sampled by the guide needs a score-function estimator: use a
``TraceGraph_ELBO`` (or ``TraceEnum_ELBO``) base; a base that cannot infer discrete
sites (``Trace_ELBO``) is refused. A site enumerated in the model needs a
``TraceEnum_ELBO`` base (another base would sample it from the prior: a different
objective); any other base is refused.

**Enumerated sites: per-image posteriors.** With :math:`a_{ik} = \log p(x_i, z_i =
k \mid \cdot)` from the enumeration, ``TraceEnum_ELBO`` computes
:math:`\sum_i \mathrm{lse}(a_i) = \max_\Phi \sum_i [\phi_i^\top a_i + H(\phi_i)]`.
A penalty on the exact posteriors :math:`\mathrm{softmax}(a_i)` could only move the
global parameters (on a mixture it drove every component to the same value). The
loss adds instead

.. math::
    \min_\Phi \Big\{\sum_i \mathrm{KL}\big(\phi_i \,\|\, \mathrm{softmax}(a_i)\big)
        + \lambda' R(\Phi)\Big\},\qquad R = \tfrac12\sum_{ij}S_{ij}
        \lVert\phi_i-\phi_j\rVert^2,

so that the total is :math:`-\max_\Phi Q(\Phi)` with :math:`Q` the objective of
:mod:`~jaxannot.inference.lapvar`: the images' posteriors :math:`\Phi^*` are smoothed
over the graph and the globals are fitted to them, as VEM with LapVar1 does.
:math:`\Phi^*` comes from ``sweeps`` LapVar1 sweeps from :math:`\mathrm{softmax}(a)`
and is held fixed in the gradient (at the minimum its own gradient vanishes);
:meth:`LaplacianELBO.local_posteriors` returns it. Such a site needs the full plate
(no ``subsample_size``) and ``distance="sq_euclidean"``.

**The scale of** :math:`\lambda`. With ``scale="none"`` (the default, kept for
existing fits) the loss adds :math:`\lambda\sum_{ij}S_{ij}d(q_i,q_j)`; with
``scale="mean_degree"`` it adds :math:`(\lambda/\bar d)\,\tfrac12\sum_{ij}
S_{ij}d(q_i,q_j)` (:math:`\bar d` the graph's mean degree,
:func:`jaxannot.graph.mean_degree`): the scale of :class:`~jaxannot.inference.LapVar1`,
so that a given :math:`\lambda` means the same on graphs of any size and density and
as in LapVar1 (:math:`\lambda' = \lambda/\bar d` above).

**Subsampled plates.** With ``numpyro.plate("image", N, subsample_size=B)`` the
summaries cover the ``B`` images of the batch, mapped to graph nodes by the plate's
subsample indices. The penalty is taken over the stored edges whose two endpoints
are both in the batch and multiplied by :math:`N(N-1) / (B(B-1))`: a uniform batch
without replacement contains a given ordered pair with probability
:math:`B(B-1)/(N(N-1))`, so the estimate is unbiased for the full penalty. Its variance
is high when batches hold few edges (sparse graph, small ``B``); no neighbour outside
the batch is needed, so amortized guides work unchanged. The summaries are computed
from an extra run of the guide with its own key, hence on a batch independent from the
one the base ELBO draws — still an unbiased estimate.

References
----------
Seed 000: graph-regularized variational inference (the penalty on the free energy).
M. Belkin, P. Niyogi, V. Sindhwani. Manifold regularization. JMLR 7, 2006.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
from numpyro.infer import TraceEnum_ELBO
from numpyro.infer.elbo import ELBO

from jaxannot.graph import (
    PENALTY_DISTANCES,
    Graph,
    as_graph,
    induced_subgraph,
    laplacian_penalty,
    mean_degree,
)
from jaxannot.graph.neighbour_table import neighbour_table
from jaxannot.inference import lapvar
from jaxannot.inference.laplacian_elbo_enum import (
    regularized_gap,
    regularized_posteriors,
    solve_posteriors,
)
from jaxannot.inference.local_summary import (
    LocalSummary,
    compiled_summary,
    local_summary,
)
from jaxannot.inference.penalized_elbo import (
    PenalizedELBO,
    base_loss_with_mutable_state,
)
from jaxannot.inference.svi_program import object_key
from jaxannot.inference.vem.fit_warnings import warn_collapsed

__all__ = [
    "DISTANCES",
    "LaplacianELBO",
    "PenalizedELBO",
    "base_loss_with_mutable_state",
    "penalty",
]

DISTANCES = PENALTY_DISTANCES


def penalty(
    graph: Graph,
    q: jax.Array,
    distance: str = "sq_euclidean",
    index: jax.Array | None = None,
) -> jax.Array:
    r""":math:`\sum_{ij} S_{ij} d(q_i, q_j)` over the stored (ordered) edges.

    Parameters
    ----------
    graph : Graph
        Edges over all ``N`` images.
    q : float array [N, dims], or [B, dims] with ``index``
        Summaries of all images, or of the batch ``index``.
    distance : {"sq_euclidean", "sym_kl"}
    index : int array [B], optional
        Graph nodes of the rows of ``q``; the sum then runs over the edges whose two
        endpoints are both in ``index`` (no rescaling).

    Returns
    -------
    jax.Array
        The scalar penalty.
    """
    if index is None:
        return laplacian_penalty(graph, q, distance)
    return laplacian_penalty(induced_subgraph(graph, index), q, distance)


def _site_weights(site, lam) -> dict[str, float]:
    if isinstance(site, Mapping):  # the weights are the dict's ("auto": the default)
        if lam is not None and lam != "auto":
            raise ValueError("give lam either per site (a dict site) or once, not both")
        weights = {str(k): float(v) for k, v in site.items()}
    else:
        if isinstance(lam, str):
            if lam != "auto" or not isinstance(site, str):
                raise ValueError(
                    "lam must be a number >= 0, or 'auto' with one site name, "
                    f"got {lam!r}"
                )
            lam = 0.0  # until choose_lam sets it
        if lam is None:
            raise ValueError("lam must be a number >= 0 or 'auto' (the default)")
        names = [site] if isinstance(site, str) else list(site)
        weights = {str(name): float(lam) for name in names}
    if not weights:
        raise ValueError("at least one site is required")
    negative = {k: v for k, v in weights.items() if not v >= 0 or v == float("inf")}
    if negative:
        raise ValueError(f"lam must be a finite number >= 0, got {negative}")
    return weights


def _unless_zero(lam, term: Callable[[], jax.Array]) -> jax.Array:
    """``term()`` where ``lam > 0``, else 0 without running it (``lax.cond``: a
    weight traced in a compiled fit, e.g. the held-out path's 0, skips the summary
    and the LapVar1 sweeps, which cost 20 times the ELBO's step on issue 43's weak
    Bernoulli mixture). Both branches are traced, so the checks of ``term`` run at
    every weight."""
    zero = jax.eval_shape(term)
    return jax.lax.cond(lam > 0, term, lambda: jax.numpy.zeros(zero.shape, zero.dtype))


def _enumerates(base: ELBO) -> bool:
    """Whether ``base`` (or an ELBO it wraps, through ``.base``) is a
    ``TraceEnum_ELBO``, the one base that sums out sites enumerated in the model."""
    while base is not None:
        if isinstance(base, TraceEnum_ELBO):
            return True
        base = getattr(base, "base", None)
    return False


class LaplacianELBO(PenalizedELBO):
    r"""A numpyro ELBO plus :math:`\sum_s \lambda_s\sum_{ij}S_{ij}d(q^s_i,q^s_j)`.

    Parameters
    ----------
    base : numpyro.infer.ELBO
        The ELBO to penalize: ``Trace_ELBO``, ``TraceMeanField_ELBO``,
        ``TraceGraph_ELBO`` (discrete guide sites), ``TraceEnum_ELBO`` (sites
        enumerated in the model), or another wrapper such as
        :class:`~jaxannot.inference.max_margin_elbo.MaxMarginELBO`.
    site : str, sequence of str, or dict str -> float
        The per-image local site(s); a dict gives each site its own
        :math:`\lambda_s` (``lam`` is then left at its default, or None).
    graph : jaxannot.graph.Graph or array [N, N]
        Edges over the images of the site's plate, or their adjacency matrix
        (:func:`~jaxannot.graph.as_graph`); ``graph.num_nodes`` must equal the
        plate's full size (a ``ValueError`` at the first loss evaluation otherwise).
    lam : float or "auto"
        Penalty weight :math:`\lambda \ge 0` of every site in ``site``.
        ``"auto"`` (the default; one site, enumerated in the model): chosen on the
        model's own held-out evidence by
        :func:`~jaxannot.inference.laplacian_elbo_fit.fit_laplacian` (which then
        fits at it, compiled once) or
        :func:`~jaxannot.inference.laplacian_elbo_lam.choose_lam` (which returns
        the loss at the chosen weight, for the user's own ``SVI``); the ``"auto"``
        loss itself refuses to be evaluated. A given ``lam > 0`` is checked by
        the same functions (a ``UserWarning`` when it lowers the held-out evidence
        below 0's).
    distance : {"sq_euclidean", "sym_kl"}
    scale : {"none", "mean_degree"}
        ``"mean_degree"``: :math:`\\lambda` on LapVar1's scale (module docstring),
        the same on graphs of any size and density. ``"none"``: :math:`\\lambda`
        multiplies :math:`\\sum_{ij}S_{ij}d(q_i,q_j)` of the raw graph.
    sweeps : int
        LapVar1 sweeps that compute the per-image posteriors of a site enumerated
        in the model, at every loss evaluation (unused otherwise). A site at weight
        0, even one traced in a compiled fit, skips its penalty, sweeps included.
    lam_path : sequence of float
        The weights ``"auto"`` tries, from 0, increasing (default
        :data:`~jaxannot.inference.lapvar.LAM_PATH`).

    Raises
    ------
    ValueError
        On a negative weight, an unknown distance or scale, a plate whose size is not
        ``graph.num_nodes``, a subsample of fewer than 2 images, a discrete guide
        site under a base without a score-function estimator, or a site enumerated
        in the model under a base other than ``TraceEnum_ELBO`` (or subsampled, or
        with ``distance="sym_kl"``).

    Examples
    --------
    >>> elbo = LaplacianELBO(Trace_ELBO(), "z", graph, lam=1.0)  # doctest: +SKIP
    >>> optimizer = optax_to_numpyro(optax.adam(1e-2))  # doctest: +SKIP
    >>> svi = SVI(model, guide, optimizer, elbo)  # doctest: +SKIP

    With ``z`` enumerated in the model, the weight chosen and the fit compiled
    once (:func:`~jaxannot.inference.laplacian_elbo_fit.fit_laplacian`):

    >>> loss = LaplacianELBO(TraceEnum_ELBO(), "z", graph, scale="mean_degree")
    ... # doctest: +SKIP
    >>> fit = fit_laplacian(loss, key, model, guide, optax.adam(0.1), 100, x, 4)
    ... # doctest: +SKIP
    """

    def __init__(
        self,
        base: ELBO,
        site: str | Sequence[str] | Mapping[str, float],
        graph: Graph,
        lam: float | str | None = "auto",
        distance: str = "sq_euclidean",
        *,
        scale: str = "none",
        sweeps: int = 20,
        lam_path: Sequence[float] = lapvar.LAM_PATH,
    ):
        if distance not in DISTANCES:
            raise ValueError(f"unknown distance {distance!r}; valid: {list(DISTANCES)}")
        if scale not in lapvar.SCALES:
            raise ValueError(
                f"scale must be one of {list(lapvar.SCALES)}, got {scale!r}"
            )
        if int(sweeps) < 1:
            raise ValueError(f"sweeps must be >= 1, got {sweeps}")
        graph = as_graph(graph)
        super().__init__(num_particles=base.num_particles)
        self.base, self.graph, self.distance = base, graph, distance
        # read now: numpyro's ELBOs change their attributes at their first use
        # (TraceEnum_ELBO's max_plate_nesting), which would change the key after it
        self.base_key = object_key(base)
        self.sweeps = int(sweeps)
        # the factor on sum_ij S_ij d(q_i, q_j) per unit of lam
        self.unit = 1.0 if scale == "none" else 0.5 / mean_degree(graph)
        self.lams = _site_weights(site, lam)
        self.lam = "auto" if lam == "auto" and isinstance(site, str) else None
        self.lam_path = lapvar._check_path(lam_path)
        self.can_infer_discrete = base.can_infer_discrete
        self._table = None

    def _check_chosen(self) -> None:
        """``ValueError`` while ``lam`` is ``"auto"`` (not chosen yet)."""
        if isinstance(self.lam, str):
            raise ValueError(
                "LaplacianELBO(lam='auto') is not a loss yet: fit it with "
                "fit_laplacian(loss, rng_key, model, guide, optimizer, num_steps, "
                "*args), or call choose_lam(...) for the loss at the chosen lam"
            )

    def with_lam(self, lam: float | jax.Array) -> LaplacianELBO:
        """A copy with every site at weight ``lam`` (a number >= 0, or a traced
        scalar inside a compiled fit); the graph's tables are shared.

        Parameters
        ----------
        lam : float or jax.Array
            The new weight of every site.

        Returns
        -------
        LaplacianELBO
            The copy.
        """
        new = copy.copy(self)
        new.lams = {site: lam for site in self.lams}
        new.lam = lam
        return new

    def _neighbour_table(self):
        if self._table is None:  # built once (concrete, even under a trace)
            with jax.ensure_compile_time_eval():
                self._table = neighbour_table(self.graph)
        return self._table

    def _enumerated_penalty(self, rng_key, summary: LocalSummary, site, lam):
        """The per-image term of an enumerated site (module docstring) and the
        posteriors that minimize it."""
        self._check_size(summary, site)
        self._check_enumerated(summary, site)
        table, lam_r = self._neighbour_table(), 2.0 * lam * self.unit
        a = summary.log_joint
        phi = jax.lax.stop_gradient(
            regularized_posteriors(
                rng_key, jax.lax.stop_gradient(a), table, lam_r, self.sweeps
            )
        )
        return regularized_gap(a, phi, table, lam_r), phi

    def _check_enumerated(self, summary: LocalSummary, site: str) -> None:
        """``ValueError`` unless an enumerated ``site``'s posteriors can be computed:
        a base that sums it out, the full plate, squared Euclidean distances."""
        if not _enumerates(self.base):
            raise ValueError(
                f"site {site!r} is enumerated in the model; {type(self.base).__name__} "
                "does not sum it out (it would sample it from the prior, another "
                "objective): use TraceEnum_ELBO as the base"
            )
        if summary.q.shape[0] != summary.size:
            raise ValueError(
                f"site {site!r} is enumerated in the model: its per-image posteriors "
                "need the full plate, not a subsample (drop subsample_size)"
            )
        if self.distance != "sq_euclidean":
            raise ValueError(
                f"site {site!r} is enumerated in the model: its per-image posteriors "
                f"need distance='sq_euclidean', got {self.distance!r}"
            )

    def _check_size(self, summary: LocalSummary, site: str) -> None:
        """``ValueError`` unless the graph has one node per image of the plate."""
        if summary.size != self.graph.num_nodes:
            raise ValueError(
                f"graph: expected num_nodes={summary.size} (one node per image of the "
                f"plate of site {site!r}), got {self.graph.num_nodes}: build the "
                "graph over the images of this fit"
            )

    def _site_penalty(self, summary: LocalSummary, site: str) -> jax.Array:
        self._check_size(summary, site)
        self._check_scorable(summary, site)
        batch = summary.q.shape[0]
        if batch == summary.size:
            return penalty(self.graph, summary.q, self.distance, summary.index)
        if batch < 2:
            raise ValueError(f"site {site!r}: subsample_size must be >= 2, got {batch}")
        scale = summary.size * (summary.size - 1) / (batch * (batch - 1))
        return scale * penalty(self.graph, summary.q, self.distance, summary.index)

    def penalty(
        self,
        rng_key: jax.Array,
        param_map: dict,
        model: Callable,
        guide: Callable,
        *args: Any,
        **kwargs: Any,
    ) -> jax.Array:
        r"""The weighted penalty :math:`\sum_s \lambda_s P_s` at the current values
        (for an enumerated site, its per-image term of the module docstring;
        :meth:`PenalizedELBO.penalty`)."""
        self._check_chosen()
        keys = jax.random.split(rng_key, len(self.lams))
        total = 0.0
        for key, (site, lam) in zip(keys, self.lams.items(), strict=True):

            def term(key=key, site=site, lam=lam):
                summary = local_summary(
                    key, param_map, model, guide, site, *args, **kwargs
                )
                if summary.log_joint is not None:
                    solve_key = jax.random.fold_in(key, 1)
                    return self._enumerated_penalty(solve_key, summary, site, lam)[0]
                return lam * self.unit * self._site_penalty(summary, site)

            total = total + _unless_zero(lam, term)
        return total

    def local_posteriors(
        self,
        rng_key: jax.Array,
        params: dict,
        model: Callable,
        guide: Callable,
        site: str,
        *args: Any,
        **kwargs: Any,
    ) -> jax.Array:
        """Each image's posterior at ``site`` under ``params`` (e.g. ``svi.run``'s),
        [N, dims]: for a site enumerated in the model the graph-smoothed
        :math:`\\Phi^*` of the module docstring, else the summary :math:`q_i`.

        Parameters
        ----------
        rng_key : PRNGKey
            The guide's (and the smoothing sweeps') key.
        params : dict
            SVI params.
        model, guide : callable
            The fitted model (None: the guide alone) and guide.
        site : str
            A penalized site.
        *args, **kwargs
            The data, as the model and the guide take it.

        Returns
        -------
        jax.Array [N, dims]
            The posteriors.

        Warns
        -----
        CollapsedFitWarning
            For an enumerated site, when every image has (almost) the same posterior
            (a penalty too strong for the data: lower ``lam``).
        """
        if site not in self.lams:
            raise KeyError(f"site {site!r} is not penalized; sites: {list(self.lams)}")
        summary = compiled_summary(rng_key, params, model, guide, site, *args, **kwargs)
        if summary.log_joint is None:
            return summary.q
        self._check_enumerated(summary, site)
        phi = solve_posteriors(
            jax.random.fold_in(rng_key, 1),
            summary.log_joint,
            self._neighbour_table(),
            2.0 * self.lams[site] * self.unit,
            self.sweeps,
        )
        warn_collapsed(phi, f"LaplacianELBO at site {site!r}")
        return phi
