r"""Mean-field contrastive divergence for undirected latent-variable models.

The negative log-likelihood of a log-linear model :math:`p(y) \propto \exp\{\Theta^\top
\phi(y)\}` is replaced by the contrastive-divergence approximation (seed 001 §4.1.2;
Welling & Hinton 2001)

.. math::

    \mathcal L^v(q_0, q_1) = \mathrm{KL}(q_0 \| p) - \mathrm{KL}(q_1 \| p),

where :math:`q_0` clamps the observed views and :math:`q_1` is reached by a few
mean-field sweeps from :math:`q_0`. The partition functions cancel, and with
:math:`q_0, q_1` held fixed its gradient is

.. math::

    \partial \Theta = \Delta E[\phi] = E_{q_1}[\phi] - E_{q_0}[\phi].

This module never sees a model: it is handed two functions,

``phase_statistics(params, image) -> (q0, q1)``
    the two variational states of one image (``vmap``-ped over the batch here);
``expected_log_potential(params, q) -> scalar``
    :math:`E_q[\log \tilde p]` up to parameter-free terms, so that its gradient with
    ``q`` fixed is :math:`E_q[\phi]`.

The surrogate loss :math:`\frac1D \sum_d (E_{q_1^d}[\log\tilde p] - E_{q_0^d}[\log
\tilde p])` with ``stop_gradient`` on the states has exactly the CD gradient, so optax
can minimize it; an optional ``extra_loss(params, data)`` (the hinge term of MMH, a
weight decay) is added to it with its true gradient.

References
----------
M. Welling, G. E. Hinton. A New Learning Algorithm for Mean Field Boltzmann Machines.
ICANN 2001. G. E. Hinton. Training Products of Experts by Minimizing Contrastive
Divergence. Neural Computation 14(8), 2002. Seed 001 (Chen et al., TPAMI 2012).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

import jax
import jax.numpy as jnp
import optax

from jaxannot.runtime.progress import Keyed, check_count, run_steps
from jaxannot.runtime.row_buckets import masked_permutation
from jaxannot.types import Array, ArrayTree, PRNGKey

__all__ = [
    "CDState",
    "CDInfo",
    "make_optimizer",
    "cd_loss",
    "cd_gradient",
    "init",
    "build_kernel",
    "fit_cd",
]


class CDState(NamedTuple):
    """Parameters and optimizer state of a contrastive-divergence fit."""

    params: ArrayTree
    opt_state: optax.OptState


class CDInfo(NamedTuple):
    """Diagnostics of one CD step.

    Attributes
    ----------
    cd_gap : scalar
        Mean :math:`E_{q_1}[\\log\\tilde p] - E_{q_0}[\\log\\tilde p]` (the surrogate's
        value; it goes to 0 as the model's reconstructions match the data).
    extra_loss : scalar
        Value of ``extra_loss`` (0 when none).
    grad_norm : scalar
        Global norm of the gradient.
    """

    cd_gap: Array
    extra_loss: Array
    grad_norm: Array


def make_optimizer(
    name: str = "adam", learning_rate: float = 0.01
) -> optax.GradientTransformation:
    """An optax optimizer by name: ``"adam"``, ``"sgd"`` or ``"lbfgs"``.

    ``"lbfgs"`` is :func:`optax.lbfgs` with a fixed step ``learning_rate`` and no line
    search: a CD gradient is not the gradient of a fixed function (the states ``q0,
    q1`` move with the parameters), so a value-based line search has nothing
    consistent to search on.

    Parameters
    ----------
    name : {"adam", "sgd", "lbfgs"}
        The optimizer.
    learning_rate : float
        Its step size.

    Returns
    -------
    optax.GradientTransformation
        The optimizer.
    """
    if name == "adam":
        return optax.adam(learning_rate)
    if name == "sgd":
        return optax.sgd(learning_rate, momentum=0.9)
    if name == "lbfgs":
        return optax.lbfgs(learning_rate=learning_rate, linesearch=None)
    raise ValueError(f"unknown optimizer {name!r}; valid optimizers: adam, sgd, lbfgs")


def cd_loss(
    params: ArrayTree,
    images: Any,
    phase_statistics: Callable,
    expected_log_potential: Callable,
    mask: Array | None = None,
) -> Array:
    """The CD surrogate: mean over images of :math:`E_{q_1}[\\log\\tilde p] -
    E_{q_0}[\\log\\tilde p]` with the states held fixed (``stop_gradient``).

    With a row ``mask`` :math:`m_d \\in \\{0, 1\\}` (images padded to a row bucket,
    :mod:`jaxannot.runtime.row_buckets`) the mean is over the real images only,
    :math:`\\sum_d m_d (E_{q_1^d} - E_{q_0^d}) / \\sum_d m_d`.

    Parameters
    ----------
    params : pytree
        The model's parameters.
    images : pytree
        The images, leading image axis.
    phase_statistics : callable
        ``phase_statistics(params, image) -> (q0, q1)``, the two phases' states.
    expected_log_potential : callable
        ``expected_log_potential(params, q)``: :math:`E_q[\\log\\tilde p]` of one image.
    mask : [D] array, optional
        1 on the real images, 0 on padded ones (None: every image is real).

    Returns
    -------
    jax.Array
        The scalar surrogate, whose gradient in ``params`` is the CD gradient.
    """
    q0, q1 = jax.vmap(phase_statistics, in_axes=(None, 0))(params, images)
    q0, q1 = jax.lax.stop_gradient((q0, q1))
    elp = jax.vmap(expected_log_potential, in_axes=(None, 0))
    gaps = elp(params, q1) - elp(params, q0)
    if mask is None:
        return jnp.mean(gaps)
    return jnp.sum(mask * gaps) / jnp.sum(mask)


def cd_gradient(
    params: ArrayTree,
    images: Any,
    phase_statistics: Callable,
    expected_log_potential: Callable,
) -> tuple[Array, ArrayTree]:
    """``(cd_gap, ΔE[φ])``: the CD gradient averaged over the images.

    Parameters
    ----------
    params, images, phase_statistics, expected_log_potential
        As in :func:`cd_loss`.

    Returns
    -------
    tuple of (jax.Array, pytree)
        The CD gap (a scalar) and its gradient in ``params``.
    """
    return jax.value_and_grad(cd_loss)(
        params, images, phase_statistics, expected_log_potential
    )


def init(params: ArrayTree, optimizer: optax.GradientTransformation) -> CDState:
    """Initial :class:`CDState`.

    Parameters
    ----------
    params : pytree
        The starting parameters.
    optimizer : optax.GradientTransformation
        The optimizer whose state starts here.

    Returns
    -------
    CDState
        ``params`` and the optimizer's initial state.
    """
    return CDState(params, optimizer.init(params))


def build_kernel(
    optimizer: optax.GradientTransformation,
    phase_statistics: Callable,
    expected_log_potential: Callable,
    extra_loss: Callable | None = None,
    batch_size: int | None = None,
) -> Callable:
    """Build ``step(rng_key, state, data, mask=None) -> (CDState, CDInfo)``.

    ``data`` is ``(images, extra)``: ``images`` is the batch pytree handed to
    ``phase_statistics`` (leading image axis), ``extra`` whatever ``extra_loss(params,
    data)`` needs (class labels and the SVM weights for MMH). With ``batch_size`` the
    CD term of each step uses a random minibatch of that many images drawn with
    ``rng_key`` (``extra_loss`` still sees all of ``data``). :func:`fit_cd` runs it
    in the library's compiled step loop.

    ``mask`` (``[D]``, 1 on the real images, a prefix; 0 on the rows that pad them to
    a row bucket, :mod:`jaxannot.runtime.row_buckets`): the CD term is the mean over
    the real images (:func:`cd_loss`), a minibatch is drawn over them only (the
    first ``min(batch_size, D)`` rows of
    :func:`~jaxannot.runtime.row_buckets.masked_permutation`, padded rows weighing
    0), and the extra term is called as ``extra_loss(params, data, mask)``.

    Parameters
    ----------
    optimizer : optax.GradientTransformation
        Applies the gradient.
    phase_statistics, expected_log_potential : callable
        As in :func:`cd_loss`.
    extra_loss : callable, optional
        ``extra_loss(params, data)`` added to the CD surrogate.
    batch_size : int, optional
        Images per CD minibatch (None: all of them).

    Returns
    -------
    callable
        ``step(rng_key, state, data) -> (CDState, CDInfo)``.
    """

    def loss(params, data, rng_key, mask):
        images, _ = data
        weights = mask
        if batch_size:
            n = jax.tree.leaves(images)[0].shape[0]
            if mask is None:
                rows = jax.random.permutation(rng_key, n)[: min(batch_size, n)]
            else:  # the real rows first, in the order of permutation(key, real)
                rows = masked_permutation(rng_key, mask)[: min(batch_size, n)]
                weights = mask[rows]
            images = jax.tree.map(lambda a: a[rows], images)
        gap = cd_loss(params, images, phase_statistics, expected_log_potential, weights)
        if extra_loss is None:
            extra = jnp.zeros(())
        elif mask is None:
            extra = extra_loss(params, data)
        else:
            extra = extra_loss(params, data, mask)
        return gap + extra, (gap, extra)

    def step(
        rng_key: PRNGKey, state: CDState, data, mask: Array | None = None
    ) -> tuple[CDState, CDInfo]:
        (_, (gap, extra)), grads = jax.value_and_grad(loss, has_aux=True)(
            state.params, data, rng_key, mask
        )
        updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        info = CDInfo(gap, extra, optax.tree.norm(grads))
        return CDState(params, opt_state), info

    return step


def fit_cd(
    rng_key: PRNGKey,
    state: CDState,
    data: ArrayTree,
    step: Callable,
    num_steps: int,
    mask: Array | None = None,
) -> tuple[CDState, CDInfo]:
    """Run ``num_steps`` CD steps through the library's runner.

    The steps run in :func:`~jaxannot.runtime.progress.run_steps`'s compiled loop
    (checkpointed inside a :func:`~jaxannot.runtime.checkpoint.checkpointing`
    block), step ``t`` with the ``t``-th key of ``jax.random.split(rng_key,
    num_steps)`` (:class:`~jaxannot.runtime.progress.Keyed`). ``step`` comes from
    :func:`build_kernel` and is a static argument of the loop: a caller that fits
    again with the same step function (build it once per configuration and keep
    it) and the same shapes compiles nothing, whatever ``num_steps``.

    Parameters
    ----------
    rng_key : PRNGKey
        Step ``t`` draws with its ``t``-th split.
    state : CDState
        The start.
    data : pytree
        ``(images, extra)``, as ``step`` takes it.
    step : callable
        From :func:`build_kernel` (static).
    num_steps : int
        Steps to run (0: none, the start and empty traces).
    mask : [D] array, optional
        The real images of ``data`` padded to a row bucket (``step``'s ``mask``):
        fits whose real image counts share a bucket run one compiled program.

    Returns
    -------
    tuple of (CDState, CDInfo)
        The final state and the per-step :class:`CDInfo`, each leaf a NumPy array
        ``[num_steps]``.
    """
    args = (data,) if mask is None else (data, mask)
    if check_count("num_steps", num_steps, minimum=0) == 0:
        _, shapes = jax.eval_shape(step, rng_key, state, *args)
        empty = jax.tree.map(lambda s: np.zeros((0, *s.shape), s.dtype), shapes)
        return state, empty
    return run_steps(
        Keyed(step),
        state,
        num_steps,
        progress_bar=False,
        desc="CD",
        data=(rng_key, args),
    )
