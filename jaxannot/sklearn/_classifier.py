"""The base of the classifier estimators of :mod:`jaxannot.sklearn` (methods with
``predict_labels``)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets

from jaxannot.sklearn._shared import SharedBase
from jaxannot.types import ArrayLike

__all__ = ["ClassifierEstimator"]


class ClassifierEstimator(SharedBase, ClassifierMixin, BaseEstimator):
    """Base of the classifiers (methods with ``predict_labels``).

    ``fit(X, y)`` learns from features ``X`` and a vector of class labels ``y`` (any
    labels: ``classes_`` holds them sorted); ``predict`` returns labels of
    ``classes_``. See :mod:`jaxannot.sklearn` for the parameters.
    """

    def fit(self, X, y):
        """Fit the classifier.

        Parameters
        ----------
        X : array-like of shape (n_images, n_features) or dict of such arrays
        y : array-like of shape (n_images,)
            Class labels.

        Returns
        -------
        self
        """
        views, y = self._views(X, fit=True, y=y)
        y = np.asarray(y)
        check_classification_targets(y)
        self.classes_, encoded = np.unique(y, return_inverse=True)
        if len(self.classes_) < 2:
            raise ValueError(
                f"{type(self).__name__} needs samples of at least 2 classes; got "
                f"one class: {self.classes_[0]!r}"
            )
        return self._fit_views(
            views,
            labels=encoded.astype(np.int32),
            class_names=tuple(str(c) for c in self.classes_),
        )

    def predict(self, X: ArrayLike | Mapping[str, ArrayLike]) -> np.ndarray:
        """Class labels of the images ``X``.

        Parameters
        ----------
        X : array-like of shape (n_images, n_features) or dict of such arrays
            Image features, as :meth:`fit` took them.

        Returns
        -------
        ndarray of shape (n_images,)
            Labels of ``classes_``.
        """
        labels = self._apply("predict_labels", X)  # checks it is fitted first
        return self.classes_[labels]

    @available_if(lambda self: self._has_protocol("class_scores"))
    def decision_function(self, X: ArrayLike | Mapping[str, ArrayLike]) -> np.ndarray:
        """Class scores of the images ``X`` (higher = more likely; the method's
        :attr:`~jaxannot.annotators.Method.class_scores`).

        Parameters
        ----------
        X
            As :meth:`predict` takes it.

        Returns
        -------
        ndarray of shape (n_images, n_classes), or (n_images,) for two classes
            The scores; for two classes the score difference ``classes_[1]`` minus
            ``classes_[0]``, as sklearn's classifiers return.
        """
        scores = self._apply("class_scores", X)
        return scores[:, 1] - scores[:, 0] if scores.shape[1] == 2 else scores
