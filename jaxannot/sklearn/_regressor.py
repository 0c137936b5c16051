"""The base of the regressor estimators of :mod:`jaxannot.sklearn` (methods with a
``response``: ``mmh-regression``)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin

from jaxannot.sklearn._shared import SharedBase
from jaxannot.types import ArrayLike

__all__ = ["RegressorEstimator", "TARGET_VIEW", "TARGET_HYPER"]

#: The real view ``y`` becomes in the fitted corpus (the method's ``target_view``).
TARGET_VIEW = "_sklearn_target"

#: The method's hyper-parameters that name its response: the estimator sets them
#: (``y`` is the response), so they are not estimator parameters.
TARGET_HYPER = ("target_view", "target_column")


class RegressorEstimator(SharedBase, RegressorMixin, BaseEstimator):
    """Base of the regressors (methods with a real ``response``).

    ``fit(X, y)`` learns from features ``X`` and a real response ``y``: ``y`` is
    handed to the method as column 0 of a real view of its own (the method's
    ``target_view``), so the method's fit and read-outs are those of ``jaxannot fit``
    with ``--set target_view=...``; ``predict`` returns real values and ``score`` is
    sklearn's :math:`R^2`. See :mod:`jaxannot.sklearn` for the parameters.
    """

    def _given_hyper(self) -> dict:
        given = super()._given_hyper()
        return {**given, "target_view": TARGET_VIEW, "target_column": 0}

    def _kinds(self, names) -> dict[str, str]:
        inputs = [n for n in names if n != TARGET_VIEW]
        kinds = super()._kinds(inputs)
        if len(inputs) < len(names):
            kinds[TARGET_VIEW] = "real"
        return kinds

    def fit(self, X, y):
        """Fit the regressor.

        Parameters
        ----------
        X : array-like of shape (n_images, n_features) or dict of such arrays
            Image features; a dict gives named views (all with ``n_images`` rows;
            none named ``_sklearn_target``, the name ``y`` takes).
        y : array-like of shape (n_images,)
            The real response, finite.

        Returns
        -------
        self
        """
        if isinstance(X, Mapping) and TARGET_VIEW in X:
            raise ValueError(
                f"X has a view named {TARGET_VIEW!r}, the name the response y takes; "
                "rename that view"
            )
        views, y = self._views(X, fit=True, y=y, y_numeric=True)
        y = np.asarray(y, np.float64)  # checked finite with X (sklearn's message)
        return self._fit_views({**views, TARGET_VIEW: y[:, None]})

    def predict(self, X: ArrayLike | Mapping[str, ArrayLike]) -> np.ndarray:
        """The predicted response of the images ``X``.

        Parameters
        ----------
        X : array-like of shape (n_images, n_features) or dict of such arrays
            Features of the images whose response is predicted, as :meth:`fit`
            took them.

        Returns
        -------
        ndarray of shape (n_images,)
            Real predictions.
        """
        return self._apply("predict_labels", X).astype(np.float64)
