r"""Multi-view exponential-family harmoniums (DWH, TWH and the MMH likelihood model).

A harmonium is an undirected two-layer model: visible views :math:`x^{(v)}` and real
Gaussian hidden units :math:`h \in \mathbb{R}^K`, coupled bilinearly,

.. math::

    \log \tilde p(x, h) = \sum_v \big[ b_v^\top \phi_v(x^{(v)})
        + \phi_v(x^{(v)})^\top W_v h \big]
        - \sum_{v\,\text{gauss}} \sum_j \frac{(x^{(v)}_j)^2}{2 \sigma_{vj}^2}
        + \lambda^\top h - \tfrac12 \|h\|^2 .

Its conditionals factorize (seed 001 §3.1, Welling et al. 2004):

- Bernoulli view (tags, binary words, bag presence):
  :math:`p(x_i = 1 \mid h) = \mathrm{Logistic}(\alpha_i + W_i h)`;
- Gaussian view (real features, per-dimension variance):
  :math:`p(z_j \mid h) = \mathcal N(\sigma_j^2(\beta_j + U_j h), \sigma_j^2)`;
- softmax view (token counts with total :math:`N`, replicated softmax of Salakhutdinov
  & Hinton 2009; with :math:`N = 1` the softmax label wing of TWH, eq. 3):
  :math:`x \mid h \sim \mathrm{Multinomial}(N, \mathrm{softmax}(b + W h))`;
- hidden units: :math:`p(h_k \mid x) = \mathcal N(\lambda_k + \sum_v
  x^{(v)\top} W_{v,\cdot k}, 1)`.

The dual-wing harmonium (DWH, Xing et al. 2005) is the two-view case with one
Bernoulli and one Gaussian view. Parameters are a :class:`HarmoniumParams` NamedTuple;
the view kinds are static configuration passed next to them.

Mean field (seed 001 eq. 7) alternates :math:`q(x^{(v)}) = p(x^{(v)} \mid E_q[h])`
and :math:`q(h) = p(h \mid E_q[x])`; clamped views keep their observed values. For a
single image every function here works on one image (vectors); callers ``vmap``.

References
----------
N. Chen, J. Zhu, F. Sun, E. P. Xing. Large-Margin Predictive Latent Subspace Learning
for Multiview Data Analysis. IEEE TPAMI 34(12), 2012 (seed 001).
E. P. Xing, R. Yan, A. G. Hauptmann. Mining Associated Text and Images with Dual-Wing
Harmoniums. UAI 2005.
M. Welling, M. Rosen-Zvi, G. E. Hinton. Exponential Family Harmoniums with an
Application to Information Retrieval. NIPS 2004.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
from jaxtyping import Float

import jax
import jax.numpy as jnp
import numpyro.distributions as dist

from jaxannot.types import Array, PRNGKey

if TYPE_CHECKING:
    from jaxannot.types import ArrayTree

__all__ = [
    "VISIBLE_KINDS",
    "HarmoniumParams",
    "MeanFieldState",
    "initialize",
    "check_kinds",
    "hidden_mean",
    "visible_natural",
    "visible_mean",
    "visible_second_moment",
    "conditional_hidden",
    "conditional_visible",
    "unnormalized_log_joint",
    "expected_log_potential",
    "clamped_state",
    "mean_field",
    "cd_phase_statistics",
]

VISIBLE_KINDS = ("bernoulli", "gaussian", "softmax")


class HarmoniumParams(NamedTuple):
    """Parameters of a multi-view harmonium (one entry per view in each tuple).

    Attributes
    ----------
    visible_bias : tuple of [D_v] arrays
        :math:`\\alpha` (Bernoulli), :math:`\\beta` (Gaussian) or softmax biases.
    weights : tuple of [D_v, K] arrays
        Coupling :math:`W_v` between view ``v`` and the hidden units.
    log_variance : tuple of [D_v] arrays
        :math:`\\log \\sigma^2_{vj}` of Gaussian views (ignored for the other kinds).
    hidden_bias : [K] array
        :math:`\\lambda`, the hidden offsets.
    """

    visible_bias: tuple[Float[Array, " _"], ...]
    weights: tuple[Float[Array, "_ k"], ...]
    log_variance: tuple[Float[Array, " _"], ...]
    hidden_bias: Float[Array, " k"]


class MeanFieldState(NamedTuple):
    """Factorized mean-field marginals of one image.

    Attributes
    ----------
    means : tuple of [D_v] arrays
        :math:`E_q[x^{(v)}]` per view.
    second_moments : tuple of [D_v] arrays
        :math:`E_q[(x^{(v)})^2]` per view (used by Gaussian views).
    hidden : [K] array
        :math:`E_q[h]` (``q(h)`` is :math:`\\mathcal N(E_q[h], I)`).
    """

    means: tuple
    second_moments: tuple
    hidden: Array


def check_kinds(kinds: Sequence[str]) -> tuple[str, ...]:
    """Validate view kinds; ``ValueError`` names a bad one and lists the valid ones."""
    kinds = tuple(kinds)
    if not kinds:
        raise ValueError("a harmonium needs at least one visible view")
    for k in kinds:
        if k not in VISIBLE_KINDS:
            raise ValueError(
                f"unknown view kind {k!r}; valid kinds: {list(VISIBLE_KINDS)}"
            )
    return kinds


def _normal_weights(rng_key, rows: int, cols: int, scale: float) -> jax.Array:
    """``scale * jax.random.normal(rng_key, (rows, cols))``, drawn as the first
    ``rows * cols`` numbers of a draw of the next power-of-two length.

    jax's (partitionable) threefry draws are prefix-stable and laid out row-major,
    so the numbers are the same, and one compiled draw serves every view size and
    topic count of that length (the slice and the scaling run on the host, where a
    new shape compiles nothing).

    Parameters
    ----------
    rng_key : PRNGKey
        The view's key.
    rows, cols : int
        The weights' shape ``[D_v, K]``.
    scale : float
        Their standard deviation.

    Returns
    -------
    jax.Array
        ``[rows, cols]`` float32 weights.
    """
    size = rows * cols
    flat = jax.random.normal(rng_key, (1 << max(size - 1, 1).bit_length(),))
    return jax.device_put(
        np.float32(scale) * np.asarray(flat)[:size].reshape(rows, cols)
    )


def initialize(
    rng_key: PRNGKey,
    kinds: Sequence[str],
    dims: Sequence[int],
    num_hidden: int,
    *,
    weight_scale: float = 0.01,
    views: Sequence[np.ndarray] | None = None,
) -> HarmoniumParams:
    """Initial parameters: small random weights, biases matched to the data margins.

    Parameters
    ----------
    rng_key : PRNGKey
        Key for the weights.
    kinds : sequence of str
        Kind of each view, in :data:`VISIBLE_KINDS`.
    dims : sequence of int
        Dimension of each view.
    num_hidden : int
        Number of hidden units (topics) ``K``.
    weight_scale : float
        Standard deviation of the initial weights (0.01, the usual RBM choice: small
        enough that the hidden units start near-linear and mean field is stable).
    views : sequence of [images, D_v] arrays, optional
        Training data; when given, biases are set so that ``h = 0`` reproduces each
        view's marginal means (logit of frequencies, log frequencies, and
        :math:`\\beta = \\bar z / \\sigma^2` with :math:`\\sigma^2` the data variance).

    Returns
    -------
    HarmoniumParams
    """
    kinds = check_kinds(kinds)
    if len(dims) != len(kinds):
        raise ValueError(f"{len(dims)} dims for {len(kinds)} view kinds")
    if num_hidden < 1:
        raise ValueError(f"num_hidden must be >= 1, got {num_hidden}")
    keys = jax.random.split(rng_key, len(kinds))
    weights = tuple(
        _normal_weights(k, d, num_hidden, weight_scale)
        for k, d in zip(keys, dims, strict=False)
    )
    biases, log_vars = [], []
    for v, (kind, d) in enumerate(zip(kinds, dims, strict=False)):
        bias = np.zeros(d, np.float32)
        log_var = np.zeros(d, np.float32)
        if views is not None:
            x = np.asarray(views[v], np.float64)
            if kind == "bernoulli":
                p = np.clip(x.mean(0), 1e-3, 1 - 1e-3)  # keep logits finite
                bias = np.log(p / (1 - p))
            elif kind == "gaussian":
                var = np.maximum(x.var(0), 1e-4)  # constant dims: unit-ish scale
                log_var = np.log(var)
                bias = x.mean(0) / var
            else:
                freq = x.sum(0) + 1.0  # add-one smoothing
                bias = np.log(freq / freq.sum())
        biases.append(jnp.asarray(bias, jnp.float32))
        log_vars.append(jnp.asarray(log_var, jnp.float32))
    return HarmoniumParams(
        visible_bias=tuple(biases),
        weights=weights,
        log_variance=tuple(log_vars),
        hidden_bias=jnp.zeros(num_hidden, jnp.float32),
    )


# ------------------------------------------------------------------ conditionals
def hidden_mean(params: HarmoniumParams, means: Sequence[Array]) -> Array:
    r""":math:`E[h \mid x] = \lambda + \sum_v x^{(v)\top} W_v`, one image, ``[K]``."""
    out = params.hidden_bias
    for m, w in zip(means, params.weights, strict=False):
        out = out + m @ w
    return out


def visible_natural(params: HarmoniumParams, view: int, hidden: Array) -> Array:
    """Natural parameter :math:`b_v + W_v h` of view ``view`` given ``hidden``."""
    return params.visible_bias[view] + params.weights[view] @ hidden


def visible_mean(
    params: HarmoniumParams, kind: str, view: int, hidden: Array, total: Array
) -> Array:
    """:math:`E[x^{(v)} \\mid h]`: logistic, :math:`\\sigma^2\\eta` or ``N softmax``."""
    eta = visible_natural(params, view, hidden)
    if kind == "bernoulli":
        return jax.nn.sigmoid(eta)
    if kind == "gaussian":
        return jnp.exp(params.log_variance[view]) * eta
    return total * jax.nn.softmax(eta)


def visible_second_moment(
    params: HarmoniumParams, kind: str, view: int, mean: Array
) -> Array:
    """:math:`E[(x^{(v)})^2 \\mid h]` from the conditional mean (Gaussian: m²+σ²)."""
    if kind == "gaussian":
        return mean**2 + jnp.exp(params.log_variance[view])
    return mean  # only Gaussian views use it; for 0/1 units E[x^2] = E[x]


def conditional_hidden(
    params: HarmoniumParams, views: Sequence[Array]
) -> dist.Distribution:
    """:math:`p(h \\mid x) = \\mathcal N(\\lambda + \\sum_v x^{(v)\\top} W_v, I)`."""
    loc = hidden_mean(params, views)
    return dist.Normal(loc, jnp.ones_like(loc)).to_event(1)


def conditional_visible(
    params: HarmoniumParams,
    kinds: Sequence[str],
    hidden: Array,
    totals: Sequence[Array] | None = None,
) -> tuple[dist.Distribution, ...]:
    """The view conditionals :math:`p(x^{(v)} \\mid h)` as numpyro distributions.

    ``totals[v]`` is the token count of a softmax view (ignored for other kinds).
    """
    out = []
    for v, kind in enumerate(kinds):
        eta = visible_natural(params, v, hidden)
        if kind == "bernoulli":
            out.append(dist.Bernoulli(logits=eta).to_event(1))
        elif kind == "gaussian":
            var = jnp.exp(params.log_variance[v])
            out.append(dist.Normal(var * eta, jnp.sqrt(var)).to_event(1))
        else:
            total = 1 if totals is None else totals[v]
            out.append(dist.Multinomial(total_count=total, logits=eta))
    return tuple(out)


def unnormalized_log_joint(
    params: HarmoniumParams, kinds: Sequence[str], views: Sequence[Array], hidden: Array
) -> Array:
    """:math:`\\log \\tilde p(x, h)` (no base measures of softmax views), one image."""
    out = params.hidden_bias @ hidden - 0.5 * hidden @ hidden
    for v, kind in enumerate(kinds):
        x = views[v]
        out = out + params.visible_bias[v] @ x + x @ (params.weights[v] @ hidden)
        if kind == "gaussian":
            out = out - 0.5 * jnp.sum(x**2 * jnp.exp(-params.log_variance[v]))
    return out


def expected_log_potential(
    params: HarmoniumParams, kinds: Sequence[str], state: MeanFieldState
) -> Array:
    r""":math:`E_q[\log \tilde p(x, h)]` up to terms free of parameters, one image.

    Under a factorized ``q`` the bilinear term's expectation is
    :math:`E[x]^\top W E[h]` and the Gaussian quadratic uses :math:`E[z^2]`; the
    :math:`-\tfrac12 E\|h\|^2` term has no parameter and is dropped. Its gradient with
    ``state`` held fixed is :math:`E_q[\phi]`, the expected sufficient statistics.
    """
    out = params.hidden_bias @ state.hidden
    for v, kind in enumerate(kinds):
        m = state.means[v]
        out = out + params.visible_bias[v] @ m + m @ (params.weights[v] @ state.hidden)
        if kind == "gaussian":
            out = out - 0.5 * jnp.sum(
                state.second_moments[v] * jnp.exp(-params.log_variance[v])
            )
    return out


# ------------------------------------------------------------------ mean field
def clamped_state(
    params: HarmoniumParams, kinds: Sequence[str], views: Sequence[Array]
) -> MeanFieldState:
    """``q0`` of one image: every view clamped, :math:`q_0(h) = p(h \\mid x)`."""
    views = tuple(jnp.asarray(x, jnp.float32) for x in views)
    return MeanFieldState(
        means=views,
        second_moments=tuple(x**2 for x in views),
        hidden=hidden_mean(params, views),
    )


def mean_field(
    params: HarmoniumParams,
    kinds: Sequence[str],
    state: MeanFieldState,
    totals: Sequence[Array],
    *,
    num_sweeps: int,
    clamp: Sequence[bool] | None = None,
) -> MeanFieldState:
    """Run ``num_sweeps`` mean-field sweeps (seed 001 eq. 7) from ``state``, one image.

    A sweep sets every free view to :math:`q(x^{(v)}) = p(x^{(v)} \\mid E_q[h])`,
    then :math:`q(h) = p(h \\mid E_q[x])`. Views with ``clamp[v]`` keep their values.

    Parameters
    ----------
    params, kinds : the model.
    state : MeanFieldState
        Starting marginals (``q0`` for contrastive divergence).
    totals : sequence of scalars
        Token counts of softmax views (any value for other kinds).
    num_sweeps : int
        Number of sweeps (static).
    clamp : sequence of bool, optional
        Views held at their values (default: none, giving ``q1`` of CD).
    """
    clamp = (False,) * len(kinds) if clamp is None else tuple(clamp)

    def sweep(_, s: MeanFieldState) -> MeanFieldState:
        means, seconds = list(s.means), list(s.second_moments)
        for v, kind in enumerate(kinds):
            if clamp[v]:
                continue
            means[v] = visible_mean(params, kind, v, s.hidden, totals[v])
            seconds[v] = visible_second_moment(params, kind, v, means[v])
        return MeanFieldState(tuple(means), tuple(seconds), hidden_mean(params, means))

    return jax.lax.fori_loop(0, num_sweeps, sweep, state)


def cd_phase_statistics(
    kinds: Sequence[str], num_sweeps: int = 5
) -> Callable[[HarmoniumParams, ArrayTree], tuple[ArrayTree, ArrayTree]]:
    """Build ``phase_statistics(params, image) -> (q0, q1)`` for contrastive divergence.

    ``image`` is a tuple ``(views, totals)`` for one image; ``q0`` clamps every view,
    ``q1`` runs ``num_sweeps`` free mean-field sweeps from ``q0`` (5 in seed 001).
    """
    kinds = check_kinds(kinds)

    def phase_statistics(params: HarmoniumParams, image):
        views, totals = image
        q0 = clamped_state(params, kinds, views)
        q1 = mean_field(params, kinds, q0, totals, num_sweeps=num_sweeps)
        return q0, q1

    return phase_statistics
