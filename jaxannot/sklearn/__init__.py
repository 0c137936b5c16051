"""scikit-learn estimators for every jaxannot method (needs ``scikit-learn``).

Install with ``pip install 'jaxannot[sklearn]'``. Every registered method becomes an
estimator class, generated from the registry (:func:`jaxannot.annotators.
available_methods`):

- methods with ``score_words`` are multi-label **annotators** (``Knn``,
  ``Empirical``, ``TagProp``, ``LapMixUnigram``, ...): ``fit(X, Y)`` with ``Y`` an
  ``(n_images, n_words)`` 0/1 matrix, ``decision_function(X)`` the word scores,
  ``predict(X)`` the ``n_words`` best words per image as a 0/1 matrix,
  ``predict_proba(X)`` where the scores are probabilities;
- methods with ``predict_labels`` are **classifiers** (``MMH``, ``TWH``, ``DWHSVM``,
  ``SVM``): ``fit(X, y)`` with class labels, ``predict(X)`` labels of ``classes_``.
- methods with a real ``response`` are **regressors** (``MmhRegression``):
  ``fit(X, y)`` with a real ``y``, ``predict(X)`` real values, ``score`` R².

Constructor parameters are the method's hyper-parameters with its defaults
(:attr:`jaxannot.annotators.Method.hyper`; lap-mix-unigram's ``warm_start`` is
``warm_start_iterations``, :data:`~jaxannot.sklearn.base.RENAMED`, as sklearn gives
``warm_start`` another meaning), plus

``view_kind``
    How ``X`` is read: ``"real"`` features, ``"bag"`` (non-negative counts: the topic
    models' default) or ``"binary"``; a dict ``{view: kind}`` when ``X`` is a dict of
    named views.
``random_state``
    ``None``, an int (the JAX seed, as ``jaxannot evaluate --seed``) or a
    ``numpy.random.RandomState``.
``n_words`` (annotators)
    How many words ``predict`` marks per image (default 5).

:data:`__all__` lists these concrete estimators only. The bases
(:class:`~jaxannot.sklearn.base.AnnotatorEstimator`,
:class:`~jaxannot.sklearn.base.ClassifierEstimator`,
:class:`~jaxannot.sklearn.base.RegressorEstimator`), the by-name estimators
(:class:`~jaxannot.sklearn.base.Annotator`: ``Annotator(method="knn", k=5)``, and
:class:`~jaxannot.sklearn.base.Classifier`, so ``GridSearchCV`` can search over
methods too) and the tables (:data:`~jaxannot.sklearn.base.ESTIMATORS`,
:data:`~jaxannot.sklearn.base.RENAMED`) are in :mod:`jaxannot.sklearn.base`.
:func:`scorer` turns the library's annotation
metrics into sklearn scorers. See ``docs/sklearn.md``.
"""

from __future__ import annotations

try:
    import sklearn
except ImportError as err:  # pragma: no cover - depends on the environment
    raise ImportError(
        "jaxannot.sklearn needs scikit-learn (>= 1.6): pip install 'jaxannot[sklearn]'"
    ) from err


def _version(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split(".")[:2]:
        digits = "".join(c for c in piece if c.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


if _version(sklearn.__version__) < (1, 6):  # pragma: no cover
    raise ImportError(
        f"jaxannot.sklearn needs scikit-learn >= 1.6 (found {sklearn.__version__}): "
        "pip install -U 'jaxannot[sklearn]'"
    )

from jaxannot.sklearn._scorers import scorer as scorer  # noqa: E402
from jaxannot.sklearn._scorers import scorer_names as scorer_names  # noqa: E402
from jaxannot.sklearn.base import ESTIMATORS as _ESTIMATORS  # noqa: E402

# the generated classes live here (their ``__module__``: pickles find them here)
globals().update({_cls.__name__: _cls for _cls in _ESTIMATORS.values()})

#: The concrete estimators, one per registered method with ``score_words`` or
#: ``predict_labels`` (``scorer`` and ``scorer_names`` are functions, not listed).
__all__ = sorted(_cls.__name__ for _cls in _ESTIMATORS.values())
