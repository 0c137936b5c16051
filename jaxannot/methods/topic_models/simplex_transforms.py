r"""The map of Link-LDA's SVI guide from :math:`\mathbb{R}^{K-1}` onto the topic
simplex (:mod:`.link_lda_svi`): stick-breaking with its log-Jacobian in log space, then
a floor that keeps every :math:`\log\theta_{dk}` finite in float32.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpyro.distributions as dist
from numpyro.distributions.transforms import (
    ComposeTransform,
    StickBreakingTransform,
    Transform,
)

if TYPE_CHECKING:
    from jaxannot.types import Array

__all__ = ["THETA_FLOOR", "LogSpaceStickBreaking", "SimplexFloor", "theta_transform"]

#: Floor of the guide's draws of theta (:class:`SimplexFloor`): ``log`` of it is
#: finite in float32 (float32's smallest normal number is 1.2e-38).
THETA_FLOOR = 1e-30


class SimplexFloor(Transform):
    r"""The affine bijection :math:`\theta \mapsto (\theta + \epsilon) / (1 +
    K\epsilon)` of the simplex onto its points with every coordinate at least
    :math:`\epsilon / (1 + K\epsilon)`.

    Why: with a small Dirichlet :math:`\alpha` the stick-breaking draws of an
    unused topic's :math:`\theta_{dk}` fall below float32's smallest number and
    round to an exact 0. With :class:`LogSpaceStickBreaking` the guide's
    log-Jacobian, computed from the unconstrained draw, stays finite, but the
    model's :math:`(\alpha - 1)\log\theta_{dk}` would be :math:`+\infty` at an
    exact 0 (their sum :math:`\alpha\log\theta_{dk}` is finite in exact
    arithmetic), and the one-draw ELBO NaN. The floor keeps every
    :math:`\log\theta_{dk} \ge \log\epsilon`; it moves only
    coordinates below :math:`\epsilon` by a relative amount
    (:math:`K\epsilon \approx 5\cdot 10^{-29}`) float32 cannot represent.
    Its log-Jacobian on the simplex's :math:`K - 1` free coordinates is
    :math:`-(K - 1)\log(1 + K\epsilon)`.
    """

    domain = dist.constraints.simplex
    codomain = dist.constraints.simplex

    def __init__(self, floor: float = THETA_FLOOR):
        self.floor = floor

    def __call__(self, x):
        return (x + self.floor) / (1.0 + x.shape[-1] * self.floor)

    def _inverse(self, y):
        return y * (1.0 + y.shape[-1] * self.floor) - self.floor

    def log_abs_det_jacobian(
        self, x: Array, y: Array, intermediates: Any = None
    ) -> Array:
        k = x.shape[-1]
        return jnp.full(x.shape[:-1], -(k - 1) * jnp.log1p(k * self.floor))

    def tree_flatten(self) -> tuple[tuple, tuple]:
        return (), (("floor",), {"floor": self.floor})


class LogSpaceStickBreaking(StickBreakingTransform):
    r"""numpyro's stick-breaking map with its log-Jacobian computed in log space.

    With :math:`\tilde x_k = x_k - \log(K - k)`, :math:`z_k = \sigma(\tilde x_k)`
    and :math:`y_k = z_k \prod_{j<k}(1 - z_j)`,

    .. math::
        \log|\det J| = \sum_{k<K} \big(\log y_k + \log(1 - z_k)\big), \quad
        \log y_k = \log z_k + \sum_{j<k}\log(1 - z_j),

    with :math:`\log z = -\mathrm{softplus}(-\tilde x)` and :math:`\log(1 - z) =
    -\mathrm{softplus}(\tilde x)`. numpyro takes :math:`\log y_k` of the output
    :math:`y`, which is :math:`-\infty` once a draw's :math:`y_k` underflows to 0
    in float32 (a few sticks of :math:`\tilde x \approx 17` suffice): the guide's
    :math:`\log q(\theta_d)` is then :math:`+\infty` and the ELBO NaN. This is what
    made Link-LDA's SVI diverge at α = 0.03 on Corel5k's training images (50 topics,
    from step 85).
    """

    def log_abs_det_jacobian(
        self, x: Array, y: Array, intermediates: Any = None
    ) -> Array:
        x = x - jnp.log(x.shape[-1] - jnp.arange(x.shape[-1]))
        log_z = -jax.nn.softplus(-x)
        log_rest = -jax.nn.softplus(x)  # log(1 - z)
        log_y = log_z + jnp.cumsum(log_rest, axis=-1) - log_rest
        return jnp.sum(log_y + log_rest, axis=-1)


def theta_transform() -> Transform:
    """The guide's map from :math:`\\mathbb{R}^{K-1}` onto the simplex:
    stick-breaking (:class:`LogSpaceStickBreaking`), then :class:`SimplexFloor`."""
    return ComposeTransform([LogSpaceStickBreaking(), SimplexFloor()])
