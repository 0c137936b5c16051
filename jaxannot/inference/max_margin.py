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
out); :class:`MaxMarginELBO` wraps any numpyro ELBO for SVI, including a
:class:`~jaxannot.inference.laplacian_elbo.LaplacianELBO`.

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

import jax
import jax.numpy as jnp
import numpyro
from numpyro import handlers
from numpyro.infer.elbo import ELBO

from jaxannot.inference.laplacian_elbo import (
    LocalSummary,
    PenalizedELBO,
    local_summary,
)
from jaxannot.solvers import linear_svm, multiclass_svm, svr
from jaxannot.solvers.margin_losses import (
    crammer_singer_loss,
    epsilon_insensitive_loss,
    hinge_loss,
    label_targets,
)
from jaxannot.types import Array, ArrayTree, PRNGKey

__all__ = [
    "LOSSES",
    "SOLVERS",
    "MaxMargin",
    "MaxMarginELBO",
    "crammer_singer_loss",
    "epsilon_insensitive_loss",
    "hinge_loss",
]

LOSSES = ("hinge", "crammer_singer", "epsilon_insensitive")
SOLVERS = ("optax", "dual")

#: Dual solves stop once the relative duality gap (liblinear's projected-gradient
#: spread for the binary hinge) is below ``tol``, or after ``max_epochs`` epochs. A
#: relative gap of 1e-4 puts the objective within 1e-4 (relative) of its minimum;
#: warm-started from the previous M-step's duals, a solve takes few epochs.
DUAL_STOP = multiclass_svm.DualStop(max_epochs=1000, tol=1e-4)
#: Crammer–Singer epochs visit only the examples whose optimality violation exceeds
#: this fraction of the largest (``multiclass_svm.build_kernel``'s ``shrink``): on
#: the benchmark's 2000 images a sixth of the visits of full epochs.
SHRINK = 0.01
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
        labels,
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

    def tree_flatten(self):
        """Children: labels, targets, mask, ``c``, ``epsilon``; static: the rest."""
        children = (self.labels, self._targets, self._mask, self.c, self.epsilon)
        return children, (self.loss, self.solver, self.num_outputs)

    @classmethod
    def tree_unflatten(cls, static, children):
        """Rebuild from :meth:`tree_flatten` (no validation: the values may be
        tracers)."""
        term = object.__new__(cls)
        term.labels, term._targets, term._mask, term.c, term.epsilon = children
        term.loss, term.solver, term.num_outputs = static
        return term

    def init(self, rng_key: PRNGKey, dim: int) -> dict[str, Array]:
        """Weights ``[num_outputs, dim]`` ~ N(0, ``INIT_SCALE``²) and a zero bias;
        with ``solver="dual"`` also zero duals ``[N, num_outputs]`` ("duals", the
        warm start of :meth:`dual_update`)."""
        weights = INIT_SCALE * jax.random.normal(rng_key, (self.num_outputs, dim))
        params = {"weights": weights, "bias": jnp.zeros(self.num_outputs)}
        if self.solver == "dual":
            params["duals"] = jnp.zeros((self.labels.shape[0], self.num_outputs))
        return params

    def regularizer(self, params: ArrayTree) -> Array:
        r""":math:`\tfrac12(\|W\|^2 + \|b\|^2)`, counted once per objective."""
        return 0.5 * (jnp.sum(params["weights"] ** 2) + jnp.sum(params["bias"] ** 2))

    def decision_function(self, params: ArrayTree, features: Array) -> Array:
        """Scores :math:`W f + b`: ``[B, T]`` for crammer_singer, else ``[B]``."""
        scores = features @ params["weights"].T + params["bias"]
        return scores if self.loss == "crammer_singer" else scores[:, 0]

    def predict(self, params: ArrayTree, features: Array) -> Array:
        """Class ids (crammer_singer), ±1 (hinge) or real values (regression)."""
        scores = self.decision_function(params, features)
        if self.loss == "crammer_singer":
            return jnp.argmax(scores, axis=-1)
        if self.loss == "hinge":
            return jnp.where(scores >= 0, 1.0, -1.0)
        return scores

    def losses(self, params: ArrayTree, features: Array, index: Array) -> Array:
        """Per-image loss ``[B]`` of the images ``index``, 0 where unlabelled."""
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
        """
        return self.c * jnp.sum(self.losses(params, features, index))

    def objective(self, params: ArrayTree, features_all: Array) -> Array:
        """:meth:`regularizer` + :meth:`penalty` over all ``N`` images."""
        index = jnp.arange(features_all.shape[0])
        return self.regularizer(params) + self.penalty(params, features_all, index)

    def solve_dual(
        self,
        rng_key: PRNGKey,
        features_all: Array,
        *,
        stop: multiclass_svm.DualStop = DUAL_STOP,
        init_state=None,
    ):
        """Minimize :meth:`objective` in the weights by the loss's dual solver.

        The features get a unit column (the bias is its weight) and the unlabelled
        images weigh nothing: cost 0 for Crammer–Singer, a zero row (target 0) for the
        ε-SVR, masked rows for the binary hinge — no gather, so the shapes do not
        depend on which images are labelled and the labels stay traced data.

        Parameters
        ----------
        rng_key : PRNGKey
            The visiting orders' key.
        features_all : float array [N, dim]
            Features of every image of the fit.
        stop : multiclass_svm.DualStop
            Epoch budget (static) and relative duality gap (the binary hinge:
            projected-gradient spread) to stop at.
        init_state : optional
            Warm start: the solver's state of an earlier call (``CSState``,
            ``SVRState`` or ``linear_svm.SVMState`` on the ``[N, dim + 1]``
            features).

        Returns
        -------
        (state, info)
            The solver's final state (``state.weights``: ``[T, dim + 1]`` for
            Crammer–Singer, ``[dim + 1]`` for the ε-SVR; ``state.w`` ``[1, dim +
            1]`` for the binary hinge) and its per-epoch info.
        """
        x = jnp.concatenate(
            [features_all, jnp.ones((features_all.shape[0], 1), features_all.dtype)],
            axis=1,
        )
        mask = self._mask.astype(x.dtype)
        if self.loss == "crammer_singer":
            return multiclass_svm.fit_multiclass_svm(
                rng_key,
                x,
                self._targets,
                self.num_outputs,
                self.c * mask,
                stop=stop,
                init_state=init_state,
                shrink=SHRINK,
            )
        if self.loss == "epsilon_insensitive":
            return svr.fit_svr(
                rng_key,
                x * mask[:, None],
                self._targets.astype(x.dtype) * mask,
                1.0,
                self.c,
                self.epsilon,
                stop=stop,
                init_state=init_state,
            )
        y = self._targets.astype(x.dtype)
        return _binary_hinge(rng_key, x, y, mask, self.c, stop, init_state)

    def dual_update(self, features_all: Array, params: ArrayTree) -> dict[str, Array]:
        """Minimizer of :meth:`objective` in the weights, by a dual solver.

        Parameters
        ----------
        features_all : float array [N, dim]
            Features of every image of the fit (unlabelled rows are ignored).
        params : dict
            The current weights (they fix the output dtype) and, when they have
            ``"duals"`` (:meth:`init` with ``solver="dual"``), the duals of the
            previous solve: the solve starts from them (warm start; the weights are
            rebuilt from them on the new features) instead of from zero.

        Returns
        -------
        dict
            ``{"weights", "bias"}`` (plus the new ``"duals"`` when ``params`` has
            them) from Crammer–Singer's, the binary L1-loss SVM's or the ε-SVR's
            dual coordinate descent, stopped by ``DUAL_STOP`` (a relative duality gap
            of ``1e-4`` or 1000 epochs; the visiting order uses a fixed key, which
            changes the path, not the optimum).
        """
        if not isinstance(self.c, jax.core.Tracer) and self.c == 0:
            return jax.tree.map(jnp.zeros_like, params)  # the solvers need C > 0
        warm = None
        if "duals" in params:
            warm = self.warm_state(features_all, params["duals"])
        state, _ = self.solve_dual(jax.random.key(0), features_all, init_state=warm)
        if self.loss == "crammer_singer":
            augmented, duals = state.weights, state.alpha
        elif self.loss == "epsilon_insensitive":
            augmented, duals = state.weights[None], state.beta[:, None]
        else:
            augmented, duals = state.w, state.alpha
        dtype = params["weights"].dtype
        augmented = augmented.astype(dtype)
        out = {"weights": augmented[:, :-1], "bias": augmented[:, -1]}
        if "duals" in params:
            out["duals"] = duals.astype(params["duals"].dtype)
        return out

    def warm_state(self, features_all: Array, duals: Array):
        """The dual solver's state from earlier duals ``[N, num_outputs]`` on new
        features: the duals, clipped into the box of this term's costs (an EM
        iteration does not change it; a changed :math:`C` may), and the weights they
        define on ``features_all`` (Crammer–Singer :math:`W = \\alpha^\\top x`, binary
        hinge :math:`w = \\sum_i \\alpha_i y_i x_i`, ε-SVR :math:`w = \\sum_i \\beta_i
        x_i`, with the unit column of the bias)."""
        x = jnp.concatenate(
            [features_all, jnp.ones((features_all.shape[0], 1), features_all.dtype)],
            axis=1,
        )
        mask = self._mask.astype(x.dtype)
        cost = self.c * mask
        duals = jnp.asarray(duals, x.dtype)
        if self.loss == "crammer_singer":
            caps = cost[:, None] * jax.nn.one_hot(
                self._targets, self.num_outputs, dtype=x.dtype
            )
            slack = 1e-5 * (1.0 + self.c)  # rounding of the sums; an infeasible
            feasible = (jnp.abs(jnp.sum(duals, axis=1)) <= slack) & jnp.all(
                duals <= caps + slack, axis=1
            )  # row (another C, another label) restarts from 0
            alpha = jnp.where(feasible[:, None], jnp.minimum(duals, caps), 0.0)
            return multiclass_svm.CSState(alpha, alpha.T @ x)
        if self.loss == "epsilon_insensitive":
            beta = jnp.clip(duals[:, 0], -cost, cost)
            return svr.SVRState(beta, beta @ (x * mask[:, None]))
        alpha = jnp.clip(duals, 0.0, cost[:, None])
        y = self._targets.astype(x.dtype)
        return linear_svm.SVMState(alpha, ((alpha[:, 0] * y) @ x)[None])


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


def _binary_hinge(rng_key, x, y, mask, c, stop, init_state):
    """The L1-loss SVM by :mod:`linear_svm`'s dual epochs on the rows where ``mask``
    is 1, until the projected-gradient spread is ``<= stop.tol`` or
    ``stop.max_epochs`` epochs; returns ``(SVMState, violation per epoch)``."""
    step = linear_svm.build_kernel(c=c, loss="hinge")
    start = init_state
    if start is None:
        start = linear_svm.SVMState(
            jnp.zeros((x.shape[0], 1), x.dtype), jnp.zeros((1, x.shape[1]), x.dtype)
        )
    nan = jnp.full((stop.max_epochs,), jnp.nan, x.dtype)

    def cond(carry):
        epoch, _, violation, _ = carry
        return (epoch < stop.max_epochs) & (violation > stop.tol)

    def body(carry):
        epoch, state, _, trace = carry
        key = jax.random.fold_in(rng_key, epoch)
        state, info = step(key, state, (x, y[:, None], mask))
        return (
            epoch + 1,
            state,
            info.violation[0],
            trace.at[epoch].set(info.violation[0]),
        )

    carry = (0, start, jnp.array(jnp.inf, x.dtype), nan)
    _, state, _, trace = jax.lax.while_loop(cond, body, carry)
    return state, trace


class MaxMarginELBO(PenalizedELBO):
    r"""A numpyro ELBO plus a max-margin term on the posterior means at ``site``.

    The loss is

    .. math::
        -\mathrm{ELBO} + \tfrac12\|(W, b)\|^2
        + \frac{N}{B}\, C \sum_{b \in \text{batch}} \ell(W f_b + b, y_{i_b}),

    with :math:`f_b` the guide's posterior location at ``site`` for image
    :math:`i_b` of the batch (the summary :math:`q_i` of
    :mod:`~jaxannot.inference.laplacian_elbo`: probabilities of a discrete site —
    guide-sampled or enumerated in the model — or the location of a continuous one),
    and :math:`N/B` the subsampling scale numpyro also applies to the plate's ELBO
    terms, so the estimate is unbiased for the full sum.

    **Weights.** :math:`[W, b]` is one numpyro param ``"{site}_maxmargin_weights"``
    of shape ``[T, dim + 1]``, declared by the guide that :meth:`guide` returns;
    SVI's optax optimizer then trains them jointly with the model and guide
    parameters.

    **Prediction.** :meth:`predict` runs the guide on data and applies the predictor to
    the summaries ("fold in" = the posterior the guide gives those images):

    - an amortized guide (an encoder of the data): pass the new images' data; one
      guide run folds them in;
    - autoguides with free per-image parameters (``AutoNormal``, ``AutoDelta``,
      ...): :meth:`fold_in` fits the new images' local posteriors with the globals
      fixed at the guide's median and returns the guide and params to pass to
      :meth:`predict`; :meth:`predict` refuses (``ValueError``) data whose number of
      images differs from the rows the guide gives (its training images'). For a
      hand-written guide with per-image params, fit the new images' local
      parameters with the globals fixed, then call :meth:`predict`;
    - a site enumerated in the model: pass ``model=``; the exact local posterior
      given the guide's globals is used.

    Parameters
    ----------
    base : numpyro.infer.ELBO
        The ELBO to regularize; may be a
        :class:`~jaxannot.inference.laplacian_elbo.LaplacianELBO` (they compose).
    site : str
        The per-image local site whose posterior location is the feature.
    labels, c, loss, epsilon, num_classes
        As in :class:`MaxMargin` (``labels`` has the plate's full size ``N``).

    Examples
    --------
    >>> elbo = MaxMarginELBO(Trace_ELBO(), "h", labels, loss="hinge")  # doctest: +SKIP
    >>> trained_guide = elbo.guide(guide)  # doctest: +SKIP
    >>> optimizer = optax_to_numpyro(optax.adam(1e-2))  # doctest: +SKIP
    >>> svi = SVI(model, trained_guide, optimizer, elbo)  # doctest: +SKIP
    >>> result = svi.run(rng_key, 2000, x)  # doctest: +SKIP
    >>> elbo.predict(result.params, trained_guide, x)  # doctest: +SKIP
    """

    def __init__(
        self,
        base: ELBO,
        site: str,
        labels,
        c: float = 1.0,
        loss: str = "crammer_singer",
        epsilon: float = 0.1,
        *,
        num_classes: int | None = None,
    ):
        super().__init__(num_particles=base.num_particles)
        self.base, self.site = base, site
        self.max_margin = MaxMargin(
            labels, c, loss, epsilon, solver="optax", num_classes=num_classes
        )
        self.can_infer_discrete = base.can_infer_discrete
        self.param_name = f"{site}_maxmargin_weights"

    def guide(self, guide, dim: int | None = None):
        """``guide`` plus the predictor's param ``"{site}_maxmargin_weights"``.

        The param is ``[T, dim + 1]``: :math:`W` and, in its last column, :math:`b`.
        Its initial value is built once, when SVI first runs the guide, from the
        dimension of the site's summary.

        Parameters
        ----------
        guide : callable
            A guide function or autoguide; its return value is kept.
        dim : int, optional
            Feature dimension; needed only when ``site`` is enumerated in the model
            (absent from the guide): its number of values ``K``.
        """

        def initial_value(rng_key, *args, **kwargs):
            size = dim
            if size is None:
                with handlers.block():
                    summary = local_summary(
                        rng_key, {}, None, guide, self.site, *args, **kwargs
                    )
                size = summary.q.shape[1]
            params = self.max_margin.init(rng_key, size)
            return jnp.concatenate([params["weights"], params["bias"][:, None]], 1)

        def guide_with_predictor(*args, **kwargs):
            out = guide(*args, **kwargs)
            numpyro.param(
                self.param_name, lambda key: initial_value(key, *args, **kwargs)
            )
            return out

        guide_with_predictor.__wrapped__ = guide  # local_summary sees autoguides
        return guide_with_predictor

    def params(self, param_map: dict) -> dict[str, Array]:
        """The predictor's ``{"weights", "bias"}`` from SVI's params."""
        if self.param_name not in param_map:
            raise KeyError(
                f"param {self.param_name!r} not found: train with the guide returned "
                "by MaxMarginELBO.guide(guide)"
            )
        augmented = param_map[self.param_name]
        return {"weights": augmented[:, :-1], "bias": augmented[:, -1]}

    def features(self, rng_key, param_map, model, guide, *args, **kwargs):
        """:class:`LocalSummary` of ``site``: features ``q`` [B, dim] and ``index``."""
        summary = local_summary(
            rng_key, param_map, model, guide, self.site, *args, **kwargs
        )
        if summary.size != self.max_margin.labels.shape[0]:
            raise ValueError(
                f"site {self.site!r}: its plate has {summary.size} images but labels "
                f"has {self.max_margin.labels.shape[0]}"
            )
        return summary

    def penalty(self, rng_key, param_map, model, guide, *args, **kwargs) -> Array:
        """Regularizer plus the rescaled batch loss at the current values."""
        summary: LocalSummary = self.features(
            rng_key, param_map, model, guide, *args, **kwargs
        )
        if summary.discrete and not self.can_infer_discrete:
            raise ValueError(
                f"site {self.site!r} is discrete in the guide; "
                f"{type(self.base).__name__} has no score-function term, use "
                "TraceGraph_ELBO or enumerate it"
            )
        params = self.params(param_map)
        scale = summary.size / summary.q.shape[0]
        loss = self.max_margin.penalty(params, summary.q, summary.index)
        return self.max_margin.regularizer(params) + scale * loss

    def decision_function(self, params: dict, guide, *args, model=None, **kwargs):
        """Scores of the images the guide folds in (class docstring)."""
        summary = local_summary(
            jax.random.key(0), params, model, guide, self.site, *args, **kwargs
        )
        return self.max_margin.decision_function(self.params(params), summary.q)

    def predict(self, params: dict, guide, *args, model=None, **kwargs) -> Array:
        """Class ids / ±1 / real values for the images the guide folds in.

        The guide runs with a fixed key: the summaries are deterministic functions of
        ``params`` (the key would only draw a plate subsample; pass full plates).
        When the model (``model=``, or the autoguide's own) puts ``M`` images in the
        site's plate on these arguments but the guide gives another number of rows
        — a guide with per-image parameters fitted on the training images — this is
        a ``ValueError``: fold the new images in first with :meth:`fold_in`.
        """
        summary = local_summary(
            jax.random.key(0), params, model, guide, self.site, *args, **kwargs
        )
        self._check_rows(summary.q.shape[0], model, guide, args, kwargs)
        return self.max_margin.predict(self.params(params), summary.q)

    def _check_rows(self, rows: int, model, guide, args, kwargs) -> None:
        """``ValueError`` when the data's plate at ``site`` has other than ``rows``
        images (nothing is checked without a model to run)."""
        model = (
            model if model is not None else getattr(_autoguide(guide), "model", None)
        )
        if model is None:
            return
        trace = handlers.trace(handlers.seed(model, jax.random.key(0))).get_trace(
            *args, **kwargs
        )
        if self.site not in trace:
            return
        frames = trace[self.site]["cond_indep_stack"]
        size = min(frames, key=lambda f: f.dim).size if frames else rows
        if size != rows:
            raise ValueError(
                f"predict: the data has {size} images in the plate of site "
                f"{self.site!r}, but the guide gives {rows} images' posteriors (its "
                "per-image parameters are the training images'); fold the new images "
                "in first: guide, params = elbo.fold_in(rng_key, params, guide, "
                "*new_data), then elbo.predict(params, guide, *new_data)"
            )

    def fold_in(
        self,
        rng_key: PRNGKey,
        params: dict,
        guide,
        *args,
        num_steps: int = 1000,
        learning_rate: float = 0.01,
        **kwargs,
    ):
        r"""Fit new images' local posteriors with the trained globals held fixed.

        For an autoguide with per-image parameters (``AutoDelta``, ``AutoNormal``,
        ...), the model is conditioned on the guide's median of every global site
        (``guide.median(params)``: the sites outside the image plate of ``site``)
        and a fresh autoguide of the same class is fitted to the new data by SVI on
        the base ELBO (no max-margin term: the new images have no labels):
        ``num_steps`` Adam steps at ``learning_rate``. The predictor's weights
        (param ``param_name``) are carried over unchanged.

        Parameters
        ----------
        rng_key : PRNGKey
        params : dict
            Trained SVI params (with ``param_name``).
        guide : callable
            The guide :meth:`guide` returned for the training fit (wrapping an
            autoguide).
        *args, **kwargs
            The new images' data, as the model takes it.
        num_steps, learning_rate
            The local fit's Adam steps and step size.

        Returns
        -------
        (guide, params)
            The new images' guide and params, to pass to :meth:`predict` with the
            same data.
        """
        auto = _autoguide(guide)
        if auto is None or not hasattr(auto, "median"):
            raise TypeError(
                f"fold_in: guide wraps {type(guide).__name__}, expected a numpyro "
                "autoguide (AutoDelta, AutoNormal, ...); for an amortized guide call "
                "predict on the new data directly"
            )
        from numpyro.infer import SVI
        from numpyro.optim import Adam

        medians = auto.median(params)
        local = _plate_sites(auto.prototype_trace, self.site)
        fixed = {k: v for k, v in medians.items() if k not in local}
        conditioned = handlers.condition(auto.model, data=fixed)
        new_guide = type(auto)(conditioned)
        svi = SVI(conditioned, new_guide, Adam(learning_rate), self.base)
        result = svi.run(rng_key, num_steps, *args, progress_bar=False, **kwargs)
        return new_guide, {**result.params, self.param_name: params[self.param_name]}


def _autoguide(guide):
    """The autoguide inside ``guide`` (unwrapping :meth:`MaxMarginELBO.guide`), or
    None."""
    from numpyro.infer.autoguide import AutoGuide

    inner = getattr(guide, "__wrapped__", guide)
    return inner if isinstance(inner, AutoGuide) else None


def _plate_sites(trace: dict, site: str) -> set[str]:
    """The sample sites of ``trace`` in the same image plate as ``site``."""
    frames = trace[site]["cond_indep_stack"]
    plate = min(frames, key=lambda f: f.dim).name
    return {
        name
        for name, node in trace.items()
        if node["type"] == "sample"
        and any(f.name == plate for f in node["cond_indep_stack"])
    }
