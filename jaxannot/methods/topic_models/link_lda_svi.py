r"""Link-LDA fitted by stochastic variational inference, optionally graph-regularized.

The model is :func:`jaxannot.methods.topic_models.link_lda.link_lda` written on padded
bags
(:func:`link_lda_bags`: the same sites, the per-token topics marginalized by hand,
:math:`\log p(x^v_{dl}=w\mid\theta_d,\beta)=\log\sum_k\theta_{dk}\beta^v_{kw}`,
gathered at each image's token ids instead of a dense images x vocabulary product).
The mean-field guide (:func:`link_lda_guide`) is

.. math::
    q(\beta^v_k) = \delta(\hat\beta^v_k), \qquad
    q(\theta_d) = \mathrm{SB}_\#\, N(\mu_d, \mathrm{diag}\,\sigma_d^2),

a point mass (MAP) for the topic-word distributions and a logistic-normal
posterior for each image's topic proportions (SB: numpyro's stick-breaking map from
:math:`\mathbb{R}^{K-1}` onto the simplex, the transform ``AutoNormal`` uses for a
simplex site). numpyro's ``SVI`` minimizes, with optax's Adam on the unconstrained
values,

.. math::
    \mathcal{L}_\lambda = -\mathrm{ELBO}(\hat\beta, \mu, \sigma)
        + \lambda_{\mathrm{graph}} \sum_{ij} S_{ij}
          \| \mathrm{SB}(\mu_i) - \mathrm{SB}(\mu_j) \|^2

through :class:`jaxannot.inference.LaplacianELBO` on the site ``theta`` (a
transformed Normal's summary is its location mapped through the transform, the
median of :math:`q(\theta_d)`). The base is ``Trace_ELBO``; its token term and
:math:`\log q(\theta_d)-\log p(\theta_d)` are estimated from one reparameterized draw
of every :math:`\theta_d` per step, and the point mass contributes
:math:`\log p(\hat\beta)` (a mode needs :math:`\eta \ge 1`).
:math:`\lambda_{\mathrm{graph}} = 0` is plain SVI of Link-LDA (the penalty is
multiplied by zero).

Why not Dirichlet guides: the reparameterized Dirichlet draws of numpyro (implicit
gradients of Gamma draws) cost 1.3 s per value-and-gradient for 4500 images x 50
topics on two loaded CPU cores, more than a whole logistic-normal step.

The fit is one jit-compiled loop (:func:`jaxannot.runtime.progress.run_steps`);
the step is built once per static setting (:func:`build_step`) and takes the data
and the graph in its carry, so a second fit of the same shapes compiles nothing.

References
----------
M. Titsias, M. Lázaro-Gredilla. Doubly stochastic variational Bayes for non-conjugate
inference. ICML 2014 (reparameterized one-draw ELBO gradients).
J. Aitchison, S. M. Shen. Logistic-normal distributions. Biometrika 67, 1980.
Seed 000: graph-regularized variational inference (the Laplacian penalty).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
import optax
from numpyro.distributions.transforms import biject_to
from numpyro.infer import SVI, Trace_ELBO
from numpyro.infer.util import transform_fn
from numpyro.optim import optax_to_numpyro

from jaxannot.graph import Graph
from jaxannot.inference.laplacian_elbo import LaplacianELBO
from jaxannot.methods.topic_models.link_lda_bags import link_lda_bags
from jaxannot.methods.topic_models.link_lda_vb import image_estep
from jaxannot.methods.topic_models.simplex_transforms import theta_transform
from jaxannot.runtime.programs import bounded_cache
from jaxannot.runtime.progress import run_steps

if TYPE_CHECKING:
    from jaxannot.types import Array, ArrayTree

__all__ = [
    "SVISettings",
    "SVIFit",
    "link_lda_guide",
    "build_step",
    "fit_svi",
    "fold_in",
]

#: Initial scale of q(theta_d) in the unconstrained space (AutoNormal's init_scale).
_INIT_SCALE = 0.1
#: Consecutive non-finite gradients skipped before one is applied.
_MAX_SKIPPED = 10


class SVISettings(NamedTuple):
    """The static settings of one SVI fit (hashable: one compiled step each).

    Attributes
    ----------
    num_topics : int
    vocab_sizes : tuple of int
        Vocabulary of every view (the text bag first in the annotators).
    alpha, eta : float
        Symmetric Dirichlet priors on :math:`\\theta_d` and on every
        :math:`\\beta^v_k` (``eta >= 1``: the MAP point of :math:`\\beta` needs a
        mode).
    lam : float
        Laplacian penalty weight :math:`\\lambda_{\\mathrm{graph}} \\ge 0`.
    learning_rate : float
        Adam's step size on the log-concentrations.
    """

    num_topics: int
    vocab_sizes: tuple
    alpha: float
    eta: float
    lam: float
    learning_rate: float

    def check(self) -> None:
        """``ValueError`` naming the first bad setting."""
        if self.num_topics < 1:
            raise ValueError(f"num_topics must be >= 1, got {self.num_topics}")
        if self.alpha <= 0:
            raise ValueError(f"alpha must be > 0, got {self.alpha}")
        if self.eta < 1:
            raise ValueError(
                f"eta must be >= 1 (a MAP point needs a mode), got {self.eta}"
            )
        if self.lam < 0:
            raise ValueError(f"lam must be >= 0, got {self.lam}")
        if self.learning_rate <= 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate}")


class SVIFit(NamedTuple):
    """Outcome of :func:`fit_svi`.

    Attributes
    ----------
    theta : Float[Array, "images topics"]
        The median :math:`\\mathrm{SB}(\\mu_d)` of every :math:`q(\\theta_d)` (the
        penalized summary).
    betas : tuple of Float[Array, "topics vocab_v"]
        The MAP topic-word distributions :math:`\\hat\\beta^v`.
    losses : np.ndarray [num_steps]
        :math:`\\mathcal{L}_\\lambda` (one-sample estimate) at each step.
    """

    theta: jax.Array
    betas: tuple
    losses: np.ndarray


def link_lda_guide(
    ids_by_view: Sequence[jax.Array],
    counts_by_view: Sequence[jax.Array],
    *,
    num_topics: int,
    vocab_sizes: Sequence[int],
    alpha: float,
    eta: float,
) -> None:
    r"""Mean-field guide: a point mass (MAP) at :math:`\beta^v` (params ``beta_map_v``
    on the simplex) and a logistic-normal :math:`q(\theta_d)`, the stick-breaking map
    of :math:`N(\mu_d, \mathrm{diag}\,\sigma_d^2)` on :math:`\mathbb{R}^{K-1}` (params
    ``theta_loc``, ``theta_scale``)."""
    del counts_by_view, alpha, eta
    with numpyro.plate("topic", num_topics):
        for v, size in enumerate(vocab_sizes):
            beta = numpyro.param(
                f"beta_map_{v}",
                jnp.full((num_topics, size), 1.0 / size),
                constraint=dist.constraints.simplex,
            )
            numpyro.sample(f"beta_{v}", dist.Delta(beta, event_dim=1))
    num_images = ids_by_view[0].shape[0]
    with numpyro.plate("image", num_images):
        loc = numpyro.param("theta_loc", jnp.zeros((num_images, num_topics - 1)))
        scale = numpyro.param(
            "theta_scale",
            jnp.full((num_images, num_topics - 1), _INIT_SCALE),
            constraint=dist.constraints.positive,
        )
        numpyro.sample(
            "theta",
            dist.TransformedDistribution(
                dist.Normal(loc, scale).to_event(1), theta_transform()
            ),
        )


def _model_kwargs(settings: SVISettings) -> dict:
    return dict(
        num_topics=settings.num_topics,
        vocab_sizes=settings.vocab_sizes,
        alpha=settings.alpha,
        eta=settings.eta,
    )


def make_svi(settings: SVISettings, graph: Graph) -> SVI:
    """numpyro's SVI with the Laplacian-penalized mean-field ELBO on ``graph``.

    Built inside the traced step, so the graph's arrays stay arguments of the
    compiled loop. ``SVI.init`` records how to constrain the params; a fresh
    ``SVI`` gets the same map here (every param of the guide is positive).
    """
    elbo = LaplacianELBO(Trace_ELBO(), "theta", graph, lam=settings.lam)
    # a step whose gradient is not finite is skipped; ten in a row let it through
    # (a diverged fit)
    optimizer = optax_to_numpyro(
        optax.apply_if_finite(optax.adam(settings.learning_rate), _MAX_SKIPPED)
    )
    svi = SVI(link_lda_bags, link_lda_guide, optimizer, elbo)
    constraints = dist.constraints
    transforms = {
        "theta_loc": biject_to(constraints.real),
        "theta_scale": biject_to(constraints.positive),
        **{
            f"beta_map_{v}": biject_to(constraints.simplex)
            for v in range(len(settings.vocab_sizes))
        },
    }
    svi.constrain_fn = functools.partial(transform_fn, transforms)
    return svi


@bounded_cache()
def build_step(
    settings: SVISettings,
) -> Callable[[Array, ArrayTree], tuple[ArrayTree, Array]]:
    """``step(t, carry) -> (carry, loss)`` for :func:`run_steps`: one SVI update;
    ``carry = (svi_state, ids_by_view, counts_by_view, graph)``. Cached per
    ``settings`` so every fit of the same shapes reuses one compiled loop."""
    kwargs = _model_kwargs(settings)

    def step(t, carry):
        del t  # the SVI state carries its own key
        state, ids, counts, graph = carry
        with numpyro.validation_enabled(False):  # see make_svi
            state, loss = make_svi(settings, graph).update(state, ids, counts, **kwargs)
        return (state, ids, counts, graph), loss

    return step


@functools.partial(jax.jit, static_argnames=("settings",))
def _init(rng_key, ids, counts, graph, betas, settings: SVISettings):
    init = {f"beta_map_{v}": beta for v, beta in enumerate(betas)}
    with numpyro.validation_enabled(False):  # see make_svi
        return make_svi(settings, graph).init(
            rng_key, ids, counts, init_params=init, **_model_kwargs(settings)
        )


def fit_svi(
    rng_key: jax.Array,
    ids_by_view: Sequence[jax.Array],
    counts_by_view: Sequence[jax.Array],
    graph: Graph,
    settings: SVISettings,
    *,
    num_steps: int,
    progress_bar: bool = False,
) -> SVIFit:
    """Fit Link-LDA on padded bags by SVI with the Laplacian penalty on ``graph``.

    Parameters
    ----------
    rng_key : PRNGKey
    ids_by_view, counts_by_view : sequences of [images, slots] arrays
        Padded bags (:func:`jaxannot.methods.topic_models.link_lda.to_padded`); padding
        has
        count 0.
    graph : Graph
        Edges over the images (``graph.num_nodes`` = images); its weights do not
        matter when ``settings.lam == 0``.
    settings : SVISettings
    num_steps : int
        SVI (Adam) steps, each on every image.
    progress_bar : bool

    Returns
    -------
    SVIFit

    Raises
    ------
    FloatingPointError
        The fit diverged (its parameters are not finite, from too large a
        ``learning_rate``); the message names the first step whose loss is not
        finite. (Draws of θ that underflow in float32, with a small ``alpha``, no
        longer do: :class:`~.simplex_transforms.LogSpaceStickBreaking`,
        :class:`~.simplex_transforms.SimplexFloor`.)

    Notes
    -----
    Start: :math:`\\hat\\beta^v_k \\propto e^{0.1\\epsilon}`,
    :math:`\\epsilon\\sim N(0,1)` (near uniform with a 10 % spread that breaks the
    topics' symmetry, as :func:`jaxannot.methods.topic_models.link_lda_vb.init_state`
    starts
    :math:`\\lambda`); :math:`\\mu_d = 0` (uniform median),
    :math:`\\sigma_d = 0.1` (``AutoNormal``'s ``init_scale``).
    """
    settings.check()
    ids = tuple(jnp.asarray(i, jnp.int32) for i in ids_by_view)
    counts = tuple(jnp.asarray(c, jnp.float32) for c in counts_by_view)
    if len(ids) != len(settings.vocab_sizes):
        raise ValueError(
            f"{len(ids)} views of token ids for "
            f"{len(settings.vocab_sizes)} vocabularies"
        )
    if graph.num_nodes != ids[0].shape[0]:
        raise ValueError(
            f"the graph has {graph.num_nodes} nodes for {ids[0].shape[0]} images"
        )
    init_key, beta_key = jax.random.split(rng_key)
    keys = jax.random.split(beta_key, len(ids))
    betas = tuple(
        jax.nn.softmax(0.1 * jax.random.normal(k, (settings.num_topics, size)), -1)
        for k, size in zip(keys, settings.vocab_sizes, strict=True)
    )
    state = _init(init_key, ids, counts, graph, betas, settings)
    (state, *_), losses = run_steps(
        build_step(settings),
        (state, ids, counts, graph),
        num_steps,
        progress_bar=progress_bar,
        desc="lap-link-lda SVI",
    )
    params = make_svi(settings, graph).get_params(state)
    betas = tuple(params[f"beta_map_{v}"] for v in range(len(ids)))
    theta = theta_transform()(params["theta_loc"])
    if not all(bool(jnp.isfinite(x).all()) for x in (theta, *betas)):
        finite = np.isfinite(np.asarray(losses))
        where = (
            f"the loss is not finite from step {int(np.argmin(finite)) + 1} of "
            f"{num_steps}"
            if not finite.all()
            else "the fitted parameters are not finite"
        )
        raise FloatingPointError(
            f"Link-LDA SVI diverged ({where}) with alpha={settings.alpha}, "
            f"learning_rate={settings.learning_rate}: the parameters left float32's "
            "range; try a smaller learning_rate"
        )
    return SVIFit(theta, betas, losses)


@functools.partial(jax.jit, static_argnames=("num_inner",))
def fold_in(
    betas: Sequence[Array],
    counts_by_view: Sequence[Array],
    alpha: float | Array,
    num_inner: int,
) -> jax.Array:
    r"""Posterior concentrations :math:`\gamma_d` of :math:`q(\theta_d)` of new images
    given the fitted :math:`\hat\beta` (Link-LDA's VB fold-in with the point
    :math:`\hat\beta` for :math:`e^{E\log\beta}`; an unobserved view is all zeros).

    Per image (:func:`jaxannot.methods.topic_models.link_lda_vb.image_estep`,
    vmapped) from :math:`\gamma_d = 1`, so an image's posterior does not depend on
    the others.
    Returns Float[Array, "images topics"].
    """
    num_images = counts_by_view[0].shape[0]
    start = jnp.ones((num_images, betas[0].shape[0]), jnp.float32)

    def one(gamma, counts):
        return image_estep(gamma, counts, betas, alpha, num_inner)[0]

    return jax.vmap(one)(start, tuple(counts_by_view))
