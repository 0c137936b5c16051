r"""Max-margin posterior regularization for SVI: a numpyro ELBO plus a hinge term.

The SVI form of :mod:`~jaxannot.inference.max_margin` (RegBayes / MedLDA style, Zhu
et al. 2009, 2011): the loss is

.. math::
    -\mathrm{ELBO} + \tfrac12\|(W, b)\|^2
    + \frac{N}{B}\, C \sum_{b \in \text{batch}} \ell(W f_b + b, y_{i_b}),

with :math:`f_b` the guide's posterior location at a per-image site and the losses
:math:`\ell` of :class:`~jaxannot.inference.max_margin.MaxMargin`.
:class:`MaxMarginELBO` wraps any numpyro ELBO, including a
:class:`~jaxannot.inference.laplacian_elbo.LaplacianELBO`.

References
----------
J. Zhu, A. Ahmed, E. P. Xing. MedLDA: Maximum Margin Supervised Topic Models for
Regression and Classification. ICML 2009.
J. Zhu, N. Chen, E. P. Xing. Infinite Latent SVM for Classification and Multi-task
Learning. NIPS 2011 (regularized Bayesian inference, RegBayes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpyro
from numpyro import handlers
from numpyro.infer.elbo import ELBO

from jaxannot.inference.local_summary import LocalSummary, local_summary
from jaxannot.inference.max_margin import MaxMargin
from jaxannot.inference.penalized_elbo import PenalizedELBO
from jaxannot.types import Array, PRNGKey

if TYPE_CHECKING:
    from jaxannot.types import ArrayLike

__all__ = ["MaxMarginELBO"]


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
        labels: ArrayLike,
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

    def guide(self, guide: Callable, dim: int | None = None) -> Callable:
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

        Returns
        -------
        callable
            The guide with the predictor's param.
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
        """The predictor's ``{"weights", "bias"}`` from SVI's params.

        Parameters
        ----------
        param_map : dict
            SVI's params.

        Returns
        -------
        dict
            ``{"weights": [T, dim], "bias": [T]}``.
        """
        if self.param_name not in param_map:
            raise KeyError(
                f"param {self.param_name!r} not found: train with the guide returned "
                "by MaxMarginELBO.guide(guide)"
            )
        augmented = param_map[self.param_name]
        return {"weights": augmented[:, :-1], "bias": augmented[:, -1]}

    def features(
        self,
        rng_key: PRNGKey,
        param_map: dict[str, Array],
        model: Callable | None,
        guide: Callable,
        *args: Any,
        **kwargs: Any,
    ) -> LocalSummary:
        """:class:`LocalSummary` of ``site``: features ``q`` [B, dim] and ``index``.

        Parameters
        ----------
        rng_key, param_map, model, guide, *args, **kwargs
            As :meth:`PenalizedELBO.penalty` takes them.

        Returns
        -------
        LocalSummary
            The site's summaries.
        """
        summary = local_summary(
            rng_key, param_map, model, guide, self.site, *args, **kwargs
        )
        if summary.size != self.max_margin.labels.shape[0]:
            raise ValueError(
                f"site {self.site!r}: its plate has {summary.size} images but labels "
                f"has {self.max_margin.labels.shape[0]}"
            )
        return summary

    def penalty(
        self,
        rng_key: PRNGKey,
        param_map: dict[str, Array],
        model: Callable | None,
        guide: Callable,
        *args: Any,
        **kwargs: Any,
    ) -> Array:
        """Regularizer plus the rescaled batch loss at the current values
        (:meth:`PenalizedELBO.penalty`)."""
        summary: LocalSummary = self.features(
            rng_key, param_map, model, guide, *args, **kwargs
        )
        self._check_scorable(summary, self.site)
        params = self.params(param_map)
        scale = summary.size / summary.q.shape[0]
        loss = self.max_margin.penalty(params, summary.q, summary.index)
        return self.max_margin.regularizer(params) + scale * loss

    def decision_function(
        self,
        params: dict,
        guide: Callable,
        *args: Any,
        model: Callable | None = None,
        **kwargs: Any,
    ) -> Array:
        """Scores of the images the guide folds in (class docstring).

        Parameters
        ----------
        params : dict
            SVI params.
        guide : callable
            The guide :meth:`guide` returned.
        *args, **kwargs
            The images' data, as the model takes it.
        model : callable, optional
            Only for a site enumerated in the model rather than in the guide.

        Returns
        -------
        jax.Array
            Scores [B, T] or [B].
        """
        summary = self._folded_in(params, model, guide, args, kwargs)
        return self.max_margin.decision_function(self.params(params), summary.q)

    def predict(
        self,
        params: dict,
        guide: Callable,
        *args: Any,
        model: Callable | None = None,
        **kwargs: Any,
    ) -> Array:
        """Class ids / ±1 / real values for the images the guide folds in.

        The guide runs with a fixed key: the summaries are deterministic functions of
        ``params`` (the key would only draw a plate subsample; pass full plates).
        When the model (``model=``, or the autoguide's own) puts ``M`` images in the
        site's plate on these arguments but the guide gives another number of rows
        — a guide with per-image parameters fitted on the training images — this is
        a ``ValueError``: fold the new images in first with :meth:`fold_in`.

        Parameters
        ----------
        params, guide, *args, model, **kwargs
            As :meth:`decision_function` takes them.

        Returns
        -------
        jax.Array [B]
            The predictions.
        """
        summary = self._folded_in(params, model, guide, args, kwargs)
        self._check_rows(summary.q.shape[0], model, guide, args, kwargs)
        return self.max_margin.predict(self.params(params), summary.q)

    def _folded_in(self, params, model, guide, args, kwargs) -> LocalSummary:
        """The summaries at ``site`` of the images the guide folds in, under a fixed
        key (:meth:`predict`)."""
        return local_summary(
            jax.random.key(0), params, model, guide, self.site, *args, **kwargs
        )

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
        guide: Callable,
        *args: Any,
        num_steps: int = 1000,
        learning_rate: float = 0.01,
        **kwargs: Any,
    ) -> tuple[Callable, dict[str, Array]]:
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
