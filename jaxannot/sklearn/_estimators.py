"""The estimator base classes behind :mod:`jaxannot.sklearn`.

:class:`AnnotatorEstimator` wraps a method with ``score_words`` (multi-label
annotation: ``y`` is an ``[images, words]`` matrix); the classifiers' base is in
:mod:`jaxannot.sklearn._classifier`. Both turn ``X`` (an
array or a dict of named views) into a :class:`~jaxannot.data.Corpus`, call the
registered method's protocol functions and keep what it learned in ``fitted_``
(what they share is in :mod:`jaxannot.sklearn._shared`).
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping

import numpy as np
from sklearn.base import BaseEstimator, MultiOutputMixin
from sklearn.utils.metaestimators import available_if

from jaxannot import metrics
from jaxannot.sklearn._shared import SharedBase
from jaxannot.types import ArrayLike

__all__ = ["AnnotatorEstimator"]


# ================================================================ annotators
class AnnotatorEstimator(SharedBase, MultiOutputMixin, BaseEstimator):
    """Base of the multi-label annotation estimators (methods with ``score_words``).

    ``fit(X, y)`` learns from features ``X`` and an ``[images, words]`` matrix ``y``
    (0/1 or counts); ``decision_function(X)`` scores every word for every image
    (higher = more relevant); ``predict(X)`` marks the ``n_words`` best words of
    each image. See :mod:`jaxannot.sklearn` for the parameters.
    """

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = False
        tags.input_tags.positive_only = self._needs_non_negative()
        # the topic models read X as counts: the checks then feed them integers
        tags.input_tags.categorical = self._reads_counts()
        return tags

    def fit(self, X, y):
        """Fit the method on features ``X`` and word matrix ``y``.

        Parameters
        ----------
        X : array-like of shape (n_images, n_features) or dict of such arrays
            Image features; a dict gives named views (all with ``n_images`` rows).
        y : array-like or sparse matrix of shape (n_images, n_words)
            The words of each image: 0/1 (or non-negative counts). A
            ``pandas.DataFrame`` names the words (``classes_``).

        Returns
        -------
        self
        """
        names = getattr(y, "columns", None)
        views, Y = self._views(X, fit=True, y=y, multi_output=True)
        if hasattr(Y, "toarray"):
            Y = Y.toarray()
        Y = np.asarray(Y)
        if Y.dtype == object:
            try:
                Y = Y.astype(np.float64)
            except (TypeError, ValueError):
                raise ValueError(
                    "Unknown label type: y must be a numeric 0/1 (or count) matrix"
                ) from None
        if Y.ndim != 2:
            raise ValueError(
                f"{type(self).__name__} expects y as a 2-D (n_images, n_words) "
                f"matrix, got shape {Y.shape}; turn labels or tag lists into one with "
                "sklearn.preprocessing.MultiLabelBinarizer or LabelBinarizer"
            )
        if Y.dtype.kind not in "biuf":
            raise ValueError(
                f"Unknown label type: y must be numeric 0/1 or counts, got {Y.dtype}"
            )
        if np.any(Y < 0):
            raise ValueError("y must be non-negative (0/1 word indicators or counts)")
        self.classes_ = (
            np.asarray(names, dtype=object)
            if names is not None
            else np.arange(Y.shape[1])
        )
        self.n_outputs_ = int(Y.shape[1])
        word_names = tuple(str(c) for c in self.classes_)
        return self._fit_views(views, words=Y, word_names=word_names)

    def decision_function(self, X: ArrayLike | Mapping[str, ArrayLike]) -> np.ndarray:
        """Word scores of the images ``X``, higher = more relevant.

        Parameters
        ----------
        X : array-like of shape (n_images, n_features) or dict of such arrays
            The images to score, as :meth:`fit` took their features.

        Returns
        -------
        ndarray of shape (n_images, n_words)
            The method's :attr:`~jaxannot.annotators.Method.score_words`.
        """
        return self._apply("score_words", X)

    @available_if(lambda self: self._has_protocol("score_meaning"))
    def predict_proba(self, X: ArrayLike | Mapping[str, ArrayLike]) -> np.ndarray:
        """The word scores of methods whose scores are probabilities in [0, 1]
        (the method's :attr:`~jaxannot.annotators.Method.score_meaning` says what
        they mean).

        Parameters
        ----------
        X
            As :meth:`decision_function` takes it.

        Returns
        -------
        ndarray of shape (n_images, n_words)
            The same array as :meth:`decision_function`.
        """
        return self.decision_function(X)

    def predict(self, X: ArrayLike | Mapping[str, ArrayLike]) -> np.ndarray:
        """The ``n_words`` best-scored words of each image (ties go to the lower word
        index, as in :mod:`jaxannot.metrics`).

        Parameters
        ----------
        X
            As :meth:`decision_function` takes it.

        Returns
        -------
        ndarray of int64, shape (n_images, n_words)
            1 for each image's annotated words, 0 elsewhere.
        """
        n = self.n_words
        if not isinstance(n, numbers.Integral) or isinstance(n, bool) or n < 1:
            raise ValueError(f"n_words must be a positive integer, got {n!r}")
        scores = self.decision_function(X)
        top = np.argsort(-scores, axis=1, kind="stable")[
            :, : min(int(n), scores.shape[1])
        ]
        out = np.zeros(scores.shape, dtype=np.int64)
        np.put_along_axis(out, top, 1, axis=1)
        return out

    def score(self, X, y):
        """Mean average precision of the word scores (images ranked per word,
        :func:`jaxannot.metrics.mean_average_precision`).

        Parameters
        ----------
        X : array-like of shape (n_images, n_features) or dict of such arrays
        y : array-like of shape (n_images, n_words)
            The true words.

        Returns
        -------
        float
        """
        scores = self.decision_function(X)
        y = y.toarray() if hasattr(y, "toarray") else np.asarray(y)
        return metrics.mean_average_precision(scores, y)
