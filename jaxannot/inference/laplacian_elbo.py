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

Where :math:`q_i` comes from (:func:`local_summary`):

- *a site sampled by the guide*: the probabilities of a ``Categorical``, the
  normalized concentration :math:`\alpha_i/\sum\alpha_i` of a ``Dirichlet``, the
  location of a ``Normal``-family distribution, the value of a ``Delta``; a
  ``TransformedDistribution`` (``LogNormal``, ``AutoNormal`` on a constrained site)
  maps its base's summary through its transforms, i.e. the location in constrained
  space (the median, for monotone transforms). ``AutoNormal`` and ``AutoDelta`` are
  covered by these rules; for ``AutoContinuous`` guides (``AutoDiagonalNormal``, ...),
  whose sites are Delta draws of the flat latent, :math:`q_i` is the site's part of the
  guide's ``median`` (the unpacked, constrained flat location).
- *a discrete site enumerated in the model* (``infer={"enumerate": "parallel"}``,
  absent from the guide, ``TraceEnum_ELBO``): :math:`q_i` is the exact local
  posterior given the guide's values of every other site,
  :math:`q_{ik} \propto \exp \sum_{s \ni i} \log p_s(\cdot \mid z_i = k)`, the sum over
  the model's sites inside the image plate, computed by conditioning the site to each
  of its :math:`K` values (``vmap`` over ``k``). The penalized objective gives each
  image its own posterior :math:`q_i` instead (below).

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

import inspect
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpyro.distributions as dist
from numpyro import handlers
from numpyro.infer import TraceEnum_ELBO
from numpyro.infer.autoguide import AutoContinuous
from numpyro.infer.elbo import ELBO

from jaxannot.graph import (
    PENALTY_DISTANCES,
    Graph,
    induced_subgraph,
    laplacian_penalty,
    mean_degree,
)
from jaxannot.graph.neighbour_table import neighbour_table
from jaxannot.inference import lapvar
from jaxannot.inference.vem.checks import warn_collapsed

__all__ = [
    "DISTANCES",
    "LaplacianELBO",
    "PenalizedELBO",
    "LocalSummary",
    "base_loss_with_mutable_state",
    "local_distribution",
    "local_summary",
    "penalty",
    "summarize",
]

DISTANCES = PENALTY_DISTANCES


class LocalSummary(NamedTuple):
    """Per-image summaries of one local site on the current batch.

    Attributes
    ----------
    q : float array [B, dims]
        Summary :math:`q_i` of each image of the batch (module docstring).
    index : int array [B]
        The images' positions in the full plate (graph nodes, label rows).
    size : int
        Full size ``N`` of the plate (``B`` when it is not subsampled).
    discrete : bool
        Whether the site is a discrete site sampled by the guide (needs a base ELBO
        with a score-function estimator).
    log_joint : float array [B, K] or None
        For a site enumerated in the model, :math:`a_{ik}` (module docstring), of
        which ``q`` is the softmax; None otherwise.
    """

    q: jax.Array
    index: jax.Array
    size: int
    discrete: bool
    log_joint: jax.Array | None = None


def _unwrap(fn):
    while isinstance(
        fn,
        (dist.Independent, dist.ExpandedDistribution, dist.MaskedDistribution),
    ):
        fn = fn.base_dist
    return fn


def summarize(fn) -> jax.Array:
    """The per-image summary :math:`q_i` of a guide distribution (module docstring)."""
    fn = _unwrap(fn)
    if isinstance(fn, dist.TransformedDistribution):
        value = summarize(fn.base_dist)
        for transform in fn.transforms:
            value = transform(value)
        return value
    if isinstance(fn, dist.CategoricalProbs):
        return fn.probs
    if isinstance(fn, dist.CategoricalLogits):
        return jax.nn.softmax(fn.logits, axis=-1)
    if isinstance(fn, dist.Dirichlet):
        c = fn.concentration
        return c / c.sum(-1, keepdims=True)
    if isinstance(fn, dist.Delta):
        return fn.v
    loc = getattr(fn, "loc", None)
    if loc is not None:
        return loc
    raise ValueError(
        f"cannot summarize a {type(fn).__name__} guide site; supported: Categorical "
        "(probs), Dirichlet (normalized concentration), distributions with a `loc` "
        "(Normal family), Delta (value), TransformedDistribution of these"
    )


def _image_frame(site: dict, name: str):
    """The outermost plate frame of a trace site (the image axis)."""
    frames = site["cond_indep_stack"]
    if not frames:
        raise ValueError(f"site {name!r} is not inside a plate; it must be per-image")
    return min(frames, key=lambda f: f.dim)


def _rows(value: jax.Array, batch_ndim: int, frame) -> jax.Array:
    """``value`` [batch..., event...] as [B, dims] with the frame's axis first."""
    value = jnp.moveaxis(jnp.asarray(value), batch_ndim + frame.dim, 0)
    return value.reshape(value.shape[0], -1)


def _plate_index(trace: dict, frame) -> tuple[jax.Array, int]:
    """Subsample indices and full size of the frame's plate (from its trace site)."""
    plate = trace.get(frame.name)
    if plate is None or plate["type"] != "plate":
        return jnp.arange(frame.size), frame.size
    return plate["value"], plate["args"][0]


def _guide_summary(guide, param_map, trace, site: str) -> LocalSummary:
    node = trace[site]
    fn = node["fn"]
    guide = inspect.unwrap(guide)  # e.g. MaxMarginELBO.guide(AutoDiagonalNormal(...))
    if isinstance(guide, AutoContinuous):
        proto = guide.prototype_trace[site]
        frame = _image_frame(proto, site)
        params = {k: v["value"] for k, v in trace.items() if v["type"] == "param"}
        value = guide.median({**params, **param_map})[site]
        batch_ndim = jnp.ndim(value) - proto["fn"].event_dim
        index, size = jnp.arange(frame.size), frame.size
    else:
        frame = _image_frame(node, site)
        value = summarize(fn)
        # a Categorical's summary carries its K axis after the (empty) event shape
        batch_ndim = len(fn.batch_shape)
        index, size = _plate_index(trace, frame)
    discrete = bool(_unwrap(fn).has_enumerate_support)
    return LocalSummary(_rows(value, batch_ndim, frame), index, size, discrete)


def _per_image_log_prob(node: dict, frame) -> jax.Array:
    """One model site's log-probability summed over all axes but the image axis."""
    lp = node["fn"].log_prob(node["value"])
    if node.get("mask") is not None:
        lp = jnp.where(node["mask"], lp, 0.0)
    lp = jnp.moveaxis(lp, lp.ndim + frame.dim, 0)
    return jnp.broadcast_to(lp.reshape(lp.shape[0], -1).sum(1), (frame.size,))


def _enumerated_posterior(
    rng_key, param_map, model, guide_trace, site: str, args, kwargs
) -> LocalSummary:
    """Exact local posterior of a model-enumerated site given the guide's values."""
    conditioned = handlers.substitute(
        handlers.replay(handlers.seed(model, rng_key), guide_trace), data=param_map
    )
    proto = handlers.trace(conditioned).get_trace(*args, **kwargs)
    node = proto.get(site)
    if node is None or node["type"] != "sample":
        guide_sites = [k for k, v in guide_trace.items() if v["type"] == "sample"]
        raise KeyError(
            f"neither the guide nor the model has a sample site {site!r}; "
            f"guide sample sites: {guide_sites}"
        )
    if node["infer"].get("enumerate") != "parallel":
        raise ValueError(
            f"site {site!r} is absent from the guide but not enumerated in the model; "
            "declare it with infer={'enumerate': 'parallel'} or sample it in the guide"
        )
    frame = _image_frame(node, site)
    support = node["fn"].enumerate_support(expand=False)
    shape = jnp.shape(node["value"])

    def image_log_joint(value):
        tr = handlers.trace(
            handlers.condition(conditioned, data={site: value})
        ).get_trace(*args, **kwargs)
        in_plate = [
            s
            for s in tr.values()
            if s["type"] == "sample"
            and any(f.name == frame.name for f in s["cond_indep_stack"])
        ]
        return sum(_per_image_log_prob(s, frame) for s in in_plate)

    values = jnp.broadcast_to(support, (support.shape[0],) + shape)
    log_joint = jax.vmap(image_log_joint)(values).T  # [B, K]
    index, size = _plate_index(proto, frame)
    q = jax.nn.softmax(log_joint, axis=-1)
    return LocalSummary(q, index, size, False, log_joint)


def local_summary(
    rng_key, param_map: dict, model, guide, site: str, *args, **kwargs
) -> LocalSummary:
    """Summaries :math:`q_i` of ``site`` on the current batch (module docstring).

    Parameters
    ----------
    rng_key : PRNGKey
        Seeds the guide (and model) runs; the summaries themselves are deterministic
        functions of the parameters, the key only draws the plate's subsample.
    param_map : dict
        Constrained parameter values (as handed to ``ELBO.loss``).
    model : callable or None
        Needed only when ``site`` is enumerated in the model rather than in the guide.
    guide : callable
        A guide function or a numpyro autoguide.
    site : str
        Name of the per-image local site.
    *args, **kwargs
        Arguments of the model and guide.

    Returns
    -------
    LocalSummary
    """
    guide_key, model_key = jax.random.split(rng_key)
    trace = handlers.trace(
        handlers.substitute(handlers.seed(guide, guide_key), data=param_map)
    ).get_trace(*args, **kwargs)
    if site in trace and trace[site]["type"] == "sample":
        return _guide_summary(guide, param_map, trace, site)
    if model is None:
        sample_sites = [k for k, v in trace.items() if v["type"] == "sample"]
        raise KeyError(f"guide has no site {site!r}; its sample sites: {sample_sites}")
    return _enumerated_posterior(model_key, param_map, model, trace, site, args, kwargs)


def local_distribution(
    rng_key, guide, param_map: dict, site: str, *args, **kwargs
) -> jax.Array:
    """Run ``guide`` with ``param_map`` and return :math:`q_i` at ``site`` as
    [images, dims] (a scalar site gives dims = 1)."""
    return local_summary(rng_key, param_map, None, guide, site, *args, **kwargs).q


def penalty(
    graph: Graph, q: jax.Array, distance: str = "sq_euclidean", index=None
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
    """
    if index is None:
        return laplacian_penalty(graph, q, distance)
    return laplacian_penalty(induced_subgraph(graph, index), q, distance)


def _site_weights(site, lam) -> dict[str, float]:
    if isinstance(site, Mapping):
        if lam is not None:
            raise ValueError("give lam either per site (a dict site) or once, not both")
        weights = {str(k): float(v) for k, v in site.items()}
    else:
        if lam is None:
            raise ValueError("lam is required unless site is a dict name -> lam")
        names = [site] if isinstance(site, str) else list(site)
        weights = {str(name): float(lam) for name in names}
    if not weights:
        raise ValueError("at least one site is required")
    negative = {k: v for k, v in weights.items() if not v >= 0 or v == float("inf")}
    if negative:
        raise ValueError(f"lam must be a finite number >= 0, got {negative}")
    return weights


def base_loss_with_mutable_state(
    base: ELBO, rng_key, param_map, model, guide, *args, **kwargs
) -> dict:
    """``base``'s loss and mutable state (None for bases without mutable state).

    Wrappers use this so that ``TraceGraph_ELBO`` and ``TraceEnum_ELBO``, which only
    implement ``loss``, can be wrapped as well as the ELBOs with mutable state.
    """
    if type(base).loss_with_mutable_state is ELBO.loss_with_mutable_state:
        loss = base.loss(rng_key, param_map, model, guide, *args, **kwargs)
        return {"loss": loss, "mutable_state": None}
    return base.loss_with_mutable_state(
        rng_key, param_map, model, guide, *args, **kwargs
    )


def _enumerates(base: ELBO) -> bool:
    """Whether ``base`` (or an ELBO it wraps, through ``.base``) is a
    ``TraceEnum_ELBO``, the one base that sums out sites enumerated in the model."""
    while base is not None:
        if isinstance(base, TraceEnum_ELBO):
            return True
        base = getattr(base, "base", None)
    return False


def regularized_gap(a: jax.Array, phi: jax.Array, table, lam_r) -> jax.Array:
    r""":math:`\sum_i \mathrm{KL}(\phi_i\,\|\,\mathrm{softmax}(a_i)) + \lambda' R(\Phi)`
    (module docstring) for log joints ``a`` and posteriors ``phi`` [N, K]: the loss
    an enumerated site adds to ``TraceEnum_ELBO``'s, :math:`\sum_i
    \mathrm{lse}(a_i) - Q(\Phi)`."""
    lse = jax.nn.logsumexp(a, axis=-1).sum()
    return lse - lapvar.regularized_objective(phi, a, table, lam_r)


def regularized_posteriors(rng_key, a: jax.Array, table, lam_r, sweeps: int):
    """The maximizer of :math:`Q` by ``sweeps`` LapVar1 sweeps from softmax(a)."""
    keys = jax.random.split(rng_key, sweeps)
    phi = jax.nn.softmax(a, axis=-1)
    for key in keys:
        phi = lapvar.lapvar1_sweep(key, phi, a, table, lam_r)
    return phi


class PenalizedELBO(ELBO):
    """A numpyro ELBO ``self.base`` plus ``self.penalty(rng_key, param_map, model,
    guide, *args, **kwargs)``; subclasses define the penalty (the base's mutable state,
    if any, is kept).
    """

    def loss_with_mutable_state(
        self, rng_key, param_map, model, guide, *args, **kwargs
    ):
        base_key, pen_key = jax.random.split(rng_key)
        out = base_loss_with_mutable_state(
            self.base, base_key, param_map, model, guide, *args, **kwargs
        )
        pen = self.penalty(pen_key, param_map, model, guide, *args, **kwargs)
        return {"loss": out["loss"] + pen, "mutable_state": out["mutable_state"]}

    def loss(self, rng_key, param_map, model, guide, *args, **kwargs):
        return self.loss_with_mutable_state(
            rng_key, param_map, model, guide, *args, **kwargs
        )["loss"]


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
        :math:`\lambda_s` (then ``lam`` must be None).
    graph : jaxannot.graph.Graph
        Edges over the images of the site's plate; ``graph.num_nodes`` must equal the
        plate's full size.
    lam : float, optional
        Penalty weight :math:`\lambda \ge 0` of every site in ``site``.
    distance : {"sq_euclidean", "sym_kl"}
    scale : {"none", "mean_degree"}
        ``"mean_degree"``: :math:`\\lambda` on LapVar1's scale (module docstring),
        the same on graphs of any size and density. ``"none"``: :math:`\\lambda`
        multiplies :math:`\\sum_{ij}S_{ij}d(q_i,q_j)` of the raw graph.
    sweeps : int
        LapVar1 sweeps that compute the per-image posteriors of a site enumerated
        in the model, at every loss evaluation (unused otherwise).

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
    """

    def __init__(
        self,
        base: ELBO,
        site: str | Sequence[str] | Mapping[str, float],
        graph: Graph,
        lam: float | None = None,
        distance: str = "sq_euclidean",
        *,
        scale: str = "none",
        sweeps: int = 20,
    ):
        if distance not in DISTANCES:
            raise ValueError(f"unknown distance {distance!r}; valid: {list(DISTANCES)}")
        if scale not in lapvar.SCALES:
            raise ValueError(
                f"scale must be one of {list(lapvar.SCALES)}, got {scale!r}"
            )
        if int(sweeps) < 1:
            raise ValueError(f"sweeps must be >= 1, got {sweeps}")
        super().__init__(num_particles=base.num_particles)
        self.base, self.graph, self.distance = base, graph, distance
        self.sweeps = int(sweeps)
        # the factor on sum_ij S_ij d(q_i, q_j) per unit of lam
        self.unit = 1.0 if scale == "none" else 0.5 / mean_degree(graph)
        self.lams = _site_weights(site, lam)
        self.can_infer_discrete = base.can_infer_discrete
        self._table = None

    def _neighbour_table(self):
        if self._table is None:  # built once (concrete, even under a trace)
            with jax.ensure_compile_time_eval():
                self._table = neighbour_table(self.graph)
        return self._table

    def _enumerated_penalty(self, rng_key, summary: LocalSummary, site, lam):
        """The per-image term of an enumerated site (module docstring) and the
        posteriors that minimize it."""
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
        table, lam_r = self._neighbour_table(), 2.0 * lam * self.unit
        a = summary.log_joint
        phi = jax.lax.stop_gradient(
            regularized_posteriors(
                rng_key, jax.lax.stop_gradient(a), table, lam_r, self.sweeps
            )
        )
        return regularized_gap(a, phi, table, lam_r), phi

    def _site_penalty(self, summary: LocalSummary, site: str) -> jax.Array:
        if summary.size != self.graph.num_nodes:
            raise ValueError(
                f"site {site!r}: its plate has {summary.size} images but the graph "
                f"has num_nodes={self.graph.num_nodes}"
            )
        if summary.discrete and not self.can_infer_discrete:
            raise ValueError(
                f"site {site!r} is discrete in the guide; {type(self.base).__name__} "
                "has no score-function term, use TraceGraph_ELBO or enumerate it"
            )
        batch = summary.q.shape[0]
        if batch == summary.size:
            return penalty(self.graph, summary.q, self.distance, summary.index)
        if batch < 2:
            raise ValueError(f"site {site!r}: subsample_size must be >= 2, got {batch}")
        scale = summary.size * (summary.size - 1) / (batch * (batch - 1))
        return scale * penalty(self.graph, summary.q, self.distance, summary.index)

    def penalty(self, rng_key, param_map, model, guide, *args, **kwargs) -> jax.Array:
        r"""The weighted penalty :math:`\sum_s \lambda_s P_s` at the current values
        (for an enumerated site, its per-image term of the module docstring)."""
        keys = jax.random.split(rng_key, len(self.lams))
        total = 0.0
        for key, (site, lam) in zip(keys, self.lams.items(), strict=True):
            summary = local_summary(key, param_map, model, guide, site, *args, **kwargs)
            if summary.log_joint is not None:
                solve_key = jax.random.fold_in(key, 1)
                term, _ = self._enumerated_penalty(solve_key, summary, site, lam)
            else:
                term = lam * self.unit * self._site_penalty(summary, site)
            total = total + term
        return total

    def local_posteriors(
        self, rng_key, params: dict, model, guide, site: str, *args, **kwargs
    ) -> jax.Array:
        """Each image's posterior at ``site`` under ``params`` (e.g. ``svi.run``'s),
        [N, dims]: for a site enumerated in the model the graph-smoothed
        :math:`\\Phi^*` of the module docstring, else the summary :math:`q_i`.

        Warns
        -----
        CollapsedFitWarning
            For an enumerated site, when every image has (almost) the same posterior
            (a penalty too strong for the data: lower ``lam``).
        """
        if site not in self.lams:
            raise KeyError(f"site {site!r} is not penalized; sites: {list(self.lams)}")
        summary = local_summary(rng_key, params, model, guide, site, *args, **kwargs)
        if summary.log_joint is None:
            return summary.q
        solve_key = jax.random.fold_in(rng_key, 1)
        _, phi = self._enumerated_penalty(solve_key, summary, site, self.lams[site])
        warn_collapsed(phi, f"LaplacianELBO at site {site!r}")
        return phi
