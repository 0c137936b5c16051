r"""Max-margin posterior regularization: a hinge term on the posterior means.

A linear predictor :math:`s(f) = W f + b` of per-image features :math:`f_i` — the
posterior mean of a local site, :math:`E_q[h_i]` for a continuous site, :math:`q(z_i)`
for a discrete one — is trained with a margin loss *jointly* with the latent model,
RegBayes / MedLDA style (Zhu et al. 2009, 2011):

.. math::
    \min_{q, \theta, W, b} \; -\mathrm{ELBO}(q, \theta)
        + \tfrac12 \big(\|W\|^2 + \|b\|^2\big) + C \sum_{i \text{ labelled}}
        \ell\big(s(f_i), y_i\big),

with one of the losses (``LOSSES``)

- ``"hinge"``: :math:`\ell = \max(0, 1 - y_i s(f_i))`, :math:`y_i \in \{-1, +1\}`;
- ``"crammer_singer"``: :math:`\ell = \max_y [\Delta(y, y_i) + w_y^\top f_i + b_y
  - w_{y_i}^\top f_i - b_{y_i}]`, :math:`\Delta` the 0/1 loss — the hinge term of
  seed 001's MMH (problem P1, eq. 6);
- ``"epsilon_insensitive"``: :math:`\ell = \max(0, |y_i - s(f_i)| - \epsilon)` — the
  SVR of seed 001 (problem P2, eq. 12).

The bias is regularized like the weights: it is the weight of a constant feature
(seed 001 footnote 3, liblinear), so the dual solvers of
:mod:`~jaxannot.solvers.multiclass_svm`, :mod:`~jaxannot.solvers.svr` and
:mod:`~jaxannot.solvers.linear_svm` minimize exactly this objective at fixed
features. Seed 001's :math:`C_1, C_2` correspond to :math:`C = C_2 / C_1` after
dividing by :math:`C_1`.

Unlabelled images (label -1 for classification, NaN for regression) contribute no
loss term: semi-supervised fits use their likelihood only.

:class:`MaxMargin` is the term for a variational-EM driver (plain arrays in, scalars
out), its exact dual M-step in :mod:`~jaxannot.inference.max_margin_dual`;
:class:`~jaxannot.inference.max_margin_elbo.MaxMarginELBO` wraps any numpyro ELBO for
SVI, including a :class:`~jaxannot.inference.laplacian_elbo.LaplacianELBO`.

References
----------
N. Chen, J. Zhu, F. Sun, E. P. Xing. Large-Margin Predictive Latent Subspace Learning
for Multiview Data Analysis. IEEE TPAMI 34(12), 2012 (seed 001).
J. Zhu, A. Ahmed, E. P. Xing. MedLDA: Maximum Margin Supervised Topic Models for
Regression and Classification. ICML 2009.
J. Zhu, N. Chen, E. P. Xing. Infinite Latent SVM for Classification and Multi-task
Learning. NIPS 2011 (regularized Bayesian inference, RegBayes).
K. Crammer, Y. Singer. On the Algorithmic Implementation of Multiclass Kernel-Based
Vector Machines. JMLR 2, 2001.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp

from jaxannot.inference import max_margin_dual
from jaxannot.runtime.static_key import array_key, value_key
from jaxannot.solvers.margin_losses import (
    crammer_singer_loss,
    epsilon_insensitive_loss,
    hinge_loss,
    label_targets,
)
from jaxannot.types import Array, ArrayTree, PRNGKey

if TYPE_CHECKING:
    from jaxannot.types import ArrayLike

__all__ = [
    "LOSSES",
    "SOLVERS",
    "MaxMargin",
    "crammer_singer_loss",
    "epsilon_insensitive_loss",
    "hinge_loss",
]

LOSSES = ("hinge", "crammer_singer", "epsilon_insensitive")
SOLVERS = ("optax", "dual")

#: Standard deviation of the initial weights: small enough to start near the
#: all-zero SVM, non-zero so that the classes' scores are not tied.
INIT_SCALE = 1e-2


@jax.tree_util.register_pytree_node_class
class MaxMargin:
    r"""The max-margin term :math:`\tfrac12\|(W, b)\|^2 + C\sum_i \ell(s(f_i), y_i)`.

    An object whose methods are pure JAX functions of their array arguments (jit
    them, or call them inside a jitted driver). It is a pytree: the labels, their
    coding, :math:`C` and :math:`\epsilon` are its data, the loss, the solver and
    the number of outputs its static structure. Passed *into* a jitted function as
    an argument, the labels are traced data: a fit on other labels (another
    cross-validation fold) or at another :math:`C` reuses the compiled code, as the
    max-margin harmonium's alternation does
    (:mod:`~jaxannot.methods.harmoniums.max_margin_harmonium`).

    Parameters
    ----------
    labels : array [N]
        One label per image of the fit (``N`` = the image plate's size): class ids
        ``0..T-1`` for ``"crammer_singer"``; ``{-1, +1}`` or ``{0, 1}`` for
        ``"hinge"`` (``{0, 1}`` coding is recognised by the presence of a 0); real
        targets for ``"epsilon_insensitive"``. Unlabelled: -1 for ``crammer_singer``
        and ``{0, 1}``-coded hinge labels, NaN for every loss.
    c : float
        Cost :math:`C \ge 0` of the loss.
    loss : {"hinge", "crammer_singer", "epsilon_insensitive"}
    epsilon : float
        Insensitivity :math:`\epsilon \ge 0` of ``"epsilon_insensitive"``.
    solver : {"optax", "dual"}
        ``"optax"``: the driver updates the weights with its optimizer, jointly with
        the model's globals (gradient of :meth:`regularizer` + :meth:`penalty`).
        ``"dual"``: the driver calls :meth:`dual_update` after each M-step, which
        re-solves the weights exactly on all images' features.
    num_classes : int, optional
        Number of classes ``T`` of ``"crammer_singer"``. Default: largest label + 1,
        and then every id ``0..T-1`` must label some image (``ValueError``
        otherwise: a gap would silently add a class no image has).

    Attributes
    ----------
    labels : jax.Array [N]
        The labels as given.
    num_outputs : int
        ``T`` for ``"crammer_singer"``, else 1.

    Examples
    --------
    >>> mm = MaxMargin(jnp.array([0, 2, 1, -1]), c=1.0)
    >>> params = mm.init(jax.random.key(0), dim=3)
    >>> feats = jnp.eye(4, 3)
    >>> float(mm.regularizer(params) + mm.penalty(params, feats, jnp.arange(4))) > 0
    True
    """

    def __init__(
        self,
        labels: ArrayLike,
        c: float = 1.0,
        loss: str = "crammer_singer",
        epsilon: float = 0.1,
        solver: str = "optax",
        *,
        num_classes: int | None = None,
    ):
        if loss not in LOSSES:
            raise ValueError(f"unknown loss {loss!r}; valid losses: {list(LOSSES)}")
        if solver not in SOLVERS:
            raise ValueError(f"unknown solver {solver!r}; valid: {list(SOLVERS)}")
        if not c >= 0:
            raise ValueError(f"c must be >= 0, got {c}")
        if not epsilon >= 0:
            raise ValueError(f"epsilon must be >= 0, got {epsilon}")
        targets, mask = label_targets(labels, loss)
        self.labels = jnp.asarray(labels)
        self.c, self.loss, self.epsilon, self.solver = float(c), loss, epsilon, solver
        self.num_outputs = 1
        if loss == "crammer_singer":
            self.num_outputs = _num_classes(targets[mask], num_classes)
        self._targets = jnp.asarray(targets)
        self._mask = jnp.asarray(mask, jnp.float32)

    def tree_flatten(self) -> tuple[tuple, tuple]:
        """Children: labels, targets, mask, ``c``, ``epsilon``; static: the rest.

        Returns
        -------
        tuple of (tuple, tuple)
            ``(children, static)``.
        """
        children = (self.labels, self._targets, self._mask, self.c, self.epsilon)
        return children, (self.loss, self.solver, self.num_outputs)

    @classmethod
    def tree_unflatten(cls, static: tuple, children: tuple) -> MaxMargin:
        """Rebuild from :meth:`tree_flatten` (no validation: the values may be
        tracers).

        Parameters
        ----------
        static : tuple
            ``(loss, solver, num_outputs)``.
        children : tuple
            ``(labels, targets, mask, c, epsilon)``.

        Returns
        -------
        MaxMargin
            The term.
        """
        term = object.__new__(cls)
        term.labels, term._targets, term._mask, term.c, term.epsilon = children
        term.loss, term.solver, term.num_outputs = static
        return term

    def _value(self) -> tuple:
        """What the term computes with: the labels' content, ``c``, ``epsilon``,
        the loss, the solver and the number of outputs (identity for tracers)."""
        return (
            array_key(self.labels),
            value_key(self.c),
            value_key(self.epsilon),
            self.loss,
            self.solver,
            self.num_outputs,
        )

    def __eq__(self, other) -> bool:
        """Equal labels (content, dtype and shape), ``c``, ``epsilon``, loss,
        solver and outputs: a term built anew for each fit is the same static
        configuration of a :class:`~jaxannot.inference.VEM` and shares its
        compiled programs."""
        if other is self:
            return True
        return type(other) is type(self) and self._value() == other._value()

    def __hash__(self) -> int:
        return hash(self._value())

    def init(self, rng_key: PRNGKey, dim: int) -> dict[str, Array]:
        """Weights ``[num_outputs, dim]`` ~ N(0, ``INIT_SCALE``²) and a zero bias;
        with ``solver="dual"`` also zero duals ``[N, num_outputs]`` ("duals", the
        warm start of :meth:`dual_update`).

        Parameters
        ----------
        rng_key : PRNGKey
            The weights' key.
        dim : int
            Feature dimension.

        Returns
        -------
        dict
            ``{"weights": [T, dim], "bias": [T]}`` (and ``"duals": [N, T]``).
        """
        weights = INIT_SCALE * jax.random.normal(rng_key, (self.num_outputs, dim))
        params = {"weights": weights, "bias": jnp.zeros(self.num_outputs)}
        if self.solver == "dual":
            params["duals"] = jnp.zeros((self.labels.shape[0], self.num_outputs))
        return params

    def regularizer(self, params: ArrayTree) -> Array:
        r""":math:`\tfrac12(\|W\|^2 + \|b\|^2)`, counted once per objective.

        Parameters
        ----------
        params : dict
            ``{"weights", "bias"}``.

        Returns
        -------
        jax.Array
            The scalar regularizer.
        """
        return 0.5 * (jnp.sum(params["weights"] ** 2) + jnp.sum(params["bias"] ** 2))

    def decision_function(self, params: ArrayTree, features: Array) -> Array:
        """Scores :math:`W f + b`: ``[B, T]`` for crammer_singer, else ``[B]``.

        Parameters
        ----------
        params : dict
            ``{"weights": [T, dim], "bias": [T]}``.
        features : jax.Array [B, dim]
            Features of the images.

        Returns
        -------
        jax.Array
            Scores [B, T] or [B].
        """
        scores = features @ params["weights"].T + params["bias"]
        return scores if self.loss == "crammer_singer" else scores[:, 0]

    def predict(self, params: ArrayTree, features: Array) -> Array:
        """Class ids (crammer_singer), ±1 (hinge) or real values (regression).

        Parameters
        ----------
        params, features
            As :meth:`decision_function` takes them.

        Returns
        -------
        jax.Array [B]
            The predictions, one per image.
        """
        scores = self.decision_function(params, features)
        if self.loss == "crammer_singer":
            return jnp.argmax(scores, axis=-1)
        if self.loss == "hinge":
            return jnp.where(scores >= 0, 1.0, -1.0)
        return scores

    def losses(self, params: ArrayTree, features: Array, index: Array) -> Array:
        """Per-image loss ``[B]`` of the images ``index``, 0 where unlabelled.

        Parameters
        ----------
        params, features
            As :meth:`decision_function` takes them (``features`` of a batch).
        index : jax.Array [B]
            Rows of ``labels`` of the batch's images.

        Returns
        -------
        jax.Array [B]
            The losses.
        """
        scores = self.decision_function(params, features)
        targets = self._targets[index]
        if self.loss == "hinge":
            per_image = hinge_loss(scores, targets)
        elif self.loss == "crammer_singer":
            per_image = crammer_singer_loss(scores, targets)
        else:
            per_image = epsilon_insensitive_loss(scores, targets, self.epsilon)
        return self._mask[index] * per_image

    def penalty(self, params: ArrayTree, features: Array, index: Array) -> Array:
        r""":math:`C \sum_b \ell(s(f_b), y_{\mathrm{index}_b})` over labelled images.

        Parameters
        ----------
        params : dict
            ``{"weights": [T, dim], "bias": [T]}``.
        features : float array [B, dim]
            Posterior means of the batch; differentiable (an E-step may take the
            gradient with respect to them).
        index : int array [B]
            Rows of ``labels`` the batch's images correspond to.

        Returns
        -------
        jax.Array
            The scalar penalty.
        """
        return self.c * jnp.sum(self.losses(params, features, index))

    def objective(self, params: ArrayTree, features_all: Array) -> Array:
        """:meth:`regularizer` + :meth:`penalty` over all ``N`` images.

        Parameters
        ----------
        params : dict
            As :meth:`decision_function` takes it.
        features_all : jax.Array [N, dim]
            Features of every image.

        Returns
        -------
        jax.Array
            The scalar objective.
        """
        index = jnp.arange(features_all.shape[0])
        return self.regularizer(params) + self.penalty(params, features_all, index)

    # The dual solvers of :mod:`~jaxannot.inference.max_margin_dual`, as methods
    # (their ``term`` is ``self``): minimize :meth:`objective` in the weights, the
    # minimizer as new parameters, and the solver's state from earlier duals.
    solve_dual = max_margin_dual.solve_dual
    dual_update = max_margin_dual.dual_update
    warm_state = max_margin_dual.warm_state


def _num_classes(known, num_classes: int | None) -> int:
    """The number of classes ``T`` of the labelled images' ids ``known``.

    Without ``num_classes`` the ids must be exactly ``0..max`` (a missing id would
    silently add a class no image has); with it, every id must be below it."""
    largest = int(known.max())
    if num_classes is None:
        missing = sorted(set(range(largest + 1)) - set(known.astype(int).tolist()))
        if missing:
            raise ValueError(
                f"labels: expected class ids 0..{largest} all present (or "
                f"num_classes given), but no labelled image has the ids {missing}; "
                f"pass num_classes={largest + 1} if these classes exist, or renumber "
                "the labels to 0..T-1"
            )
        return largest + 1
    if not largest < num_classes:
        raise ValueError(
            f"num_classes={num_classes} but a label is {largest}: labels must be in "
            f"0..num_classes-1; pass num_classes={largest + 1} or fix the labels"
        )
    return int(num_classes)
