r"""Local MAP values of the real-valued sites a model holds in its item plate.

For item :math:`i`, local site :math:`c` and real-valued item-level latent sites
:math:`u_i` (item difficulty's ``theta``; ``theta_decentered`` when the model
declares ``LocScaleReparam(0)`` on it: the decentred site is then the latent),

.. math::
    \hat u_{ik}(\theta) = \operatorname{argmax}_u \log p(x_i, c_i = k, u \mid \theta),
    \qquad a_{ik}(\theta) = \log p(x_i, c_i = k, \hat u_{ik} \mid \theta).

VEM then runs as with a lone local site on these :math:`a_{ik}`: variational EM with
point local factors :math:`q(u_i \mid c_i = k) = \delta(u - \hat u_{ik})`. Its
objective is the *profile* objective
:math:`\sum_i [\sum_k \phi_{ik} a_{ik} - \phi_{ik}\log\phi_{ik}] + \log p(\theta)`
(no Laplace term; it is not a bound on the marginal likelihood), which the E-step
maximizes in :math:`\phi` and the M-step raises in :math:`\theta`, so EM does not
decrease it up to the inner maximization's accuracy. The gradient in :math:`\theta`
is taken at :math:`\hat u` held fixed (the envelope theorem: exact at the maximum).

:math:`\hat u_{ik}` is found by :data:`NEWTON_STEPS` damped Newton steps from 0,
vmapped over the K values and the items of a chunk (one compiled ``fori_loop``):
each step solves with the absolute eigenvalues of the per-item Hessian (so a step
rises where the log density is not concave) and takes, per item, the largest of
the step sizes 1, 1/2, 1/4, 1/8 and 0 that does not lower the log density by more
than float32 round-off (1e-6 relative). No value is
kept between evaluations: each E-step and M-step evaluation starts from 0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
from jax import lax
from jax.scipy.special import logsumexp

from jaxannot.inference.vem.log_joint import per_image_log_density

if TYPE_CHECKING:
    from jaxannot.types import Array

__all__ = ["NEWTON_STEPS", "local_maps", "profile_log_joint"]

#: Damped Newton steps of each local maximization (from 0; quadratic convergence
#: near the maximum, so 16 reach float32 accuracy on the annotation models).
NEWTON_STEPS = 16

_STEP_SIZES = (1.0, 0.5, 0.25, 0.125, 0.0)
_SLACK = 1e-6  # relative: a few float32 ulps of the log density


def _layout(call: Any, values, idx):
    """Per real site: ``(name, value shape, item axis)`` for the chunk ``idx``."""
    s = call.setup.structure
    trace = call.trace(call.substitutions(values, idx, 0))
    out = []
    for name in s.enumerated.continuous:
        site = trace[name]
        shape = tuple(jnp.shape(site["value"]))
        axis = len(shape) - len(site["fn"].event_shape) + s.image_dim
        out.append((name, shape, axis))
    return tuple(out)


def _unflatten(layout, u):
    """The sites' values from the per-item vector ``u`` [chunk, D]."""
    out, start = {}, 0
    for name, shape, axis in layout:
        moved = (shape[axis],) + shape[:axis] + shape[axis + 1 :]
        size = 1
        for n in moved[1:]:
            size *= n
        out[name] = jnp.moveaxis(u[:, start : start + size].reshape(moved), 0, axis)
        start += size
    return out


def _dim(layout) -> int:
    total = 0
    for _, shape, axis in layout:
        size = 1
        for i, n in enumerate(shape):
            size *= 1 if i == axis else n
        total += size
    return total


def _hessians(f, u) -> jax.Array:
    """Per-item Hessians ``[chunk, D, D]`` of ``f`` ([chunk, D] -> [chunk],
    separable over items): D Hessian-vector products of the summed ``f``."""
    grad = jax.grad(lambda v: f(v).sum())
    basis = jnp.broadcast_to(jnp.eye(u.shape[1])[:, None, :], (u.shape[1],) + u.shape)
    h = jax.vmap(lambda v: jax.jvp(grad, (u,), (v,))[1])(basis)  # [D, chunk, D]
    h = jnp.moveaxis(h, 0, -1)
    return 0.5 * (h + jnp.swapaxes(h, 1, 2))


def _maximize(f, u):
    """Damped Newton ascent of ``f`` ([chunk, D] -> [chunk], separable over items)
    from ``u``: the maximizing ``u`` after :data:`NEWTON_STEPS` steps."""
    grad = jax.grad(lambda v: f(v).sum())
    sizes = jnp.asarray(_STEP_SIZES)

    def step(_, u):
        w, vecs = jnp.linalg.eigh(-_hessians(f, u))
        w = jnp.maximum(jnp.abs(w), 1e-6)
        delta = jnp.einsum("iab,ib,icb,ic->ia", vecs, 1.0 / w, vecs, grad(u))
        cands = u[None] + sizes[:, None, None] * delta[None]  # [sizes, chunk, D]
        vals = jax.vmap(f)(cands)
        # the largest step not below the current value (up to float32 round-off,
        # which near the maximum hides the rise); the last size, 0, always passes
        slack = _SLACK * (1.0 + jnp.abs(vals[-1]))
        ok = jnp.isfinite(vals) & (vals >= vals[-1] - slack)
        best = jnp.argmax(ok, axis=0)
        return jnp.take_along_axis(cands, best[None, :, None], axis=0)[0]

    return lax.fori_loop(0, NEWTON_STEPS, step, u)


def _laplace(f, u_hat, values):
    r"""Laplace's :math:`f(\hat u) + \tfrac D2\log 2\pi - \tfrac12\log|-H|`
    per item, [chunk], whose gradient in ``values`` counts :math:`\hat u`'s
    dependence on them (implicit function theorem: with :math:`L` the log-det
    term, :math:`\nabla_\theta L(\hat u(\theta), \theta)` gains
    :math:`w^\top \partial_\theta \nabla_u f` with :math:`w = (-H)^{-1}
    \nabla_u L`, added as a term of value 0)."""

    def log_det(u, vals):
        chol = jnp.linalg.cholesky(-_hessians(lambda v: f(v, vals), u))
        return -jnp.log(jnp.diagonal(chol, axis1=1, axis2=2)).sum(-1)  # -1/2 log|-H|

    fixed = lax.stop_gradient(values)
    grad_l = jax.grad(lambda u: log_det(u, fixed).sum())(u_hat)
    minus_h = -_hessians(lambda v: f(v, fixed), u_hat)
    w = lax.stop_gradient(jnp.linalg.solve(minus_h, grad_l[..., None])[..., 0])
    slope = jax.grad(lambda u: f(u, values).sum())(u_hat)  # ~0 at the maximum
    zero = (w * slope).sum(-1) - lax.stop_gradient((w * slope).sum(-1))
    half = 0.5 * u_hat.shape[1] * jnp.log(2 * jnp.pi)
    return f(u_hat, values) + half + log_det(u_hat, values) + zero


def _profile_chunk(call: Any, values, idx):
    """``(a [chunk, K], u_hat [K, chunk, D], layout)`` for the items ``idx``."""
    dm, s = call.declared, call.setup.structure
    layout = _layout(call, values, idx)
    rescale = idx.shape[0] / s.num_images
    fixed = jax.lax.stop_gradient(values)

    def at(k):
        def f(u, vals):
            subs = call.substitutions(vals, idx, k)
            subs.update(_unflatten(layout, u))
            trace = call.trace(subs)
            return per_image_log_density(
                trace, dm.plate, s.image_dim, rescale, idx.shape[0]
            )

        start = jnp.zeros((idx.shape[0], _dim(layout)))
        u_hat = lax.stop_gradient(_maximize(lambda u: f(u, fixed), start))
        return _laplace(f, u_hat, values), u_hat

    a, u_hat = jax.vmap(at)(jnp.arange(s.num_values))
    return a.T, u_hat, layout


def profile_log_joint(call: Any, values: dict[str, Array], idx: Array) -> jax.Array:
    """:math:`a_{ik}` at the local MAP of the real-valued sites, [chunk, K].

    Parameters
    ----------
    call, values, idx
        As :func:`~jaxannot.inference.vem.joint_enumeration.collapsed_log_joint`
        takes them.

    Returns
    -------
    jax.Array [chunk, K]
        The log joints at the local MAP.
    """
    return _profile_chunk(call, values, idx)[0]


def local_maps(call: Any, values: dict[str, Array]) -> dict:
    """The local site's posteriors and each real-valued site's local MAP per
    value of the local site, for every item: ``{c: [N, K], u: [N, K, *shape]}``
    (a site's shape per item: its value's without the item axis).

    Parameters
    ----------
    call, values
        As :func:`profile_log_joint` takes them.

    Returns
    -------
    dict
        Site -> values, as above.
    """

    def chunk(idx):
        a, u_hat, layout = _profile_chunk(call, values, idx)
        out = {
            call.declared.local_site: jnp.exp(a - logsumexp(a, axis=1, keepdims=True))
        }
        per_class = jax.vmap(lambda u: _unflatten(layout, u))(u_hat)  # [K, ...]
        for name, _, axis in layout:  # the item axis first, then K
            out[name] = jnp.moveaxis(per_class[name], axis + 1, 0)
        return out

    chunks, _ = call.declared.chunk_indices(call.setup)
    out = lax.map(chunk, chunks)
    n = call.setup.structure.num_images
    return {k: v.reshape((-1,) + v.shape[2:])[:n] for k, v in out.items()}
