r"""The posterior summary :math:`q_i` of a per-image site, from a guide or a model.

The penalties of :mod:`~jaxannot.inference.laplacian_elbo` and
:mod:`~jaxannot.inference.max_margin_elbo` act on a summary :math:`q_i` of each
image's posterior at a named site inside the image plate.

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

Outside a traced program, :func:`local_summary` runs the guide and the model op by
op, every primitive a program of its own (66 compiles for one summary of issue 43's
600-image weak Bernoulli mixture); :func:`compiled_summary` runs it as one program,
compiled once per model, guide, site and static arguments, compared by value
(:class:`~jaxannot.inference.svi_program.ArgsProgram`).

References
----------
Seed 000: graph-regularized variational inference (the penalty on the free energy).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import jax
import jax.numpy as jnp
import numpyro.distributions as dist
from numpyro import handlers
from numpyro.infer.autoguide import AutoContinuous, AutoGuide
from numpyro.primitives import _PYRO_STACK

from jaxannot.inference.svi_program import ArgsProgram
from jaxannot.runtime.static_key import value_key

if TYPE_CHECKING:
    from numpyro.distributions import Distribution

    from jaxannot.types import PRNGKey

__all__ = [
    "LocalSummary",
    "compiled_summary",
    "local_distribution",
    "local_summary",
    "summarize",
]


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


def summarize(fn: Distribution) -> jax.Array:
    """The per-image summary :math:`q_i` of a guide distribution (module docstring).

    Parameters
    ----------
    fn : numpyro.distributions.Distribution
        The guide's distribution at the site.

    Returns
    -------
    jax.Array
        The summary of each image (e.g. a categorical's probabilities).
    """
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
    rng_key: PRNGKey,
    param_map: dict,
    model: Callable | None,
    guide: Callable,
    site: str,
    *args: Any,
    **kwargs: Any,
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


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class _Static:
    """The static fields of a :class:`LocalSummary`, out of a compiled program."""

    size: int
    discrete: bool


@functools.partial(jax.jit, static_argnums=0)
def _summary_program(program, rng_key, param_map, dynamic):
    """:func:`local_summary` of ``program``'s model, guide and site, compiled once
    per ``program`` (:func:`compiled_summary`)."""
    args, kwargs = program.join(dynamic)
    s = local_summary(
        rng_key, param_map, program.model, program.guide, program.site, *args, **kwargs
    )
    return (s.q, s.index, s.log_joint), _Static(s.size, s.discrete)


def _compilable(guide, *trees) -> bool:
    """Whether :func:`local_summary` can run as a program of its own here: no
    numpyro handler active (it would see the program's tracers), concrete values
    (else the caller's trace runs it), an autoguide already set up (its setup keeps
    its values)."""
    if _PYRO_STACK:
        return False
    if any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(trees)):
        return False
    guide = inspect.unwrap(guide)
    return not (isinstance(guide, AutoGuide) and guide.prototype_trace is None)


def compiled_summary(
    rng_key: PRNGKey,
    param_map: dict,
    model: Callable | None,
    guide: Callable,
    site: str,
    *args: Any,
    **kwargs: Any,
) -> LocalSummary:
    """:func:`local_summary` as one compiled program (module docstring): the model,
    the guide (a function by its code and closure, an autoguide by identity), the
    site and the arguments' non-array values are its static part, the key, the
    parameters and the array arguments its dynamic part. Inside a trace, under a
    numpyro handler or with an autoguide not yet set up, it is
    :func:`local_summary` itself.

    Parameters
    ----------
    rng_key, param_map, model, guide, site, *args, **kwargs
        As :func:`local_summary` takes them.

    Returns
    -------
    LocalSummary
    """
    if not _compilable(guide, rng_key, param_map, args, kwargs):
        return local_summary(rng_key, param_map, model, guide, site, *args, **kwargs)
    program = ArgsProgram(args, kwargs, (value_key(model), value_key(guide), site))
    program.model, program.guide, program.site = model, guide, site
    (q, index, log_joint), static = _summary_program(
        program, rng_key, param_map, program.dynamic(args, kwargs)
    )
    return LocalSummary(q, index, static.size, static.discrete, log_joint)


def local_distribution(
    rng_key: PRNGKey,
    guide: Callable,
    param_map: dict,
    site: str,
    *args: Any,
    **kwargs: Any,
) -> jax.Array:
    """Run ``guide`` with ``param_map`` and return :math:`q_i` at ``site`` as
    [images, dims] (a scalar site gives dims = 1).

    Parameters
    ----------
    rng_key : PRNGKey
        The guide's key.
    guide : callable
        The guide.
    param_map : dict
        Its params.
    site : str
        The local site.
    *args, **kwargs
        The data, as the guide takes it.

    Returns
    -------
    jax.Array [images, dims]
        The summaries.
    """
    return local_summary(rng_key, param_map, None, guide, site, *args, **kwargs).q
