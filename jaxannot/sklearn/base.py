"""What :mod:`jaxannot.sklearn` is built from: the abstract bases, the estimators
that take a method by name, and the tables.

:mod:`jaxannot.sklearn` itself exports the concrete estimators only (one class per
registered method, ``Knn``, ``TagProp``, ...), so that tools which discover
estimators by walking a module's names (``dir()``, ``__all__``, sklearn's
``all_estimators``-style helpers) find only classes that can be built and fitted as
they are. Here:

- :class:`AnnotatorEstimator`, :class:`ClassifierEstimator`: the bases of the
  generated classes (annotators: methods with ``score_words``; classifiers: methods
  with ``predict_labels``);
- :class:`Annotator` (``Annotator(method="knn", k=5)``) and :class:`Classifier`:
  any method by name, so ``GridSearchCV`` can search over methods too;
- :data:`ESTIMATORS` (method name -> its class), :data:`RENAMED` (hyper-parameters
  whose sklearn names differ), :func:`sklearn_hyper`, :func:`default_view_kind`,
  :func:`is_classifier_method`.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self

from jaxannot.annotators.base import Method, available_methods, get_method
from jaxannot.sklearn._classifier import ClassifierEstimator
from jaxannot.sklearn._estimators import AnnotatorEstimator
from jaxannot.sklearn._regressor import TARGET_HYPER, RegressorEstimator
from jaxannot.sklearn._shared import RENAMED, default_view_kind, sklearn_hyper

if TYPE_CHECKING:
    import numpy as np
    import scipy.sparse

    from jaxannot.types import ArrayLike

#: The module the generated estimator classes belong to (and are pickled by).
PACKAGE = "jaxannot.sklearn"


def is_classifier_method(method: Method) -> bool:
    """Whether ``method`` becomes a classifier (it has ``predict_labels``) rather than
    an annotator.

    Parameters
    ----------
    method : Method
        A registered method.

    Returns
    -------
    bool
        True when it has ``predict_labels``.
    """
    return method.predict_labels is not None


def is_regressor_method(method: Method) -> bool:
    """Whether ``method`` becomes a regressor: it predicts a real ``response``
    (``mmh-regression``), and its estimator takes ``y`` as that response.

    Parameters
    ----------
    method : Method
        As :func:`is_classifier_method` takes it.

    Returns
    -------
    bool
        True when it has a ``response``.
    """
    return method.response is not None


def _common_params(method: Method) -> list[tuple[str, object]]:
    params = [("view_kind", default_view_kind(method.name)), ("random_state", None)]
    if not is_classifier_method(method):
        params.append(("n_words", 5))
    return params


# ------------------------------------------------------- generic by-name classes
class _ByName:
    """Parameters of an estimator that takes its method by name: ``method``, the
    common ones, and the named method's hyper-parameters (its defaults where not
    given)."""

    def __init__(
        self, method="knn", *, view_kind=None, random_state=None, **hyper
    ):  # sklearn: parameters stored unchanged, checked at fit
        self.method = method
        self.view_kind = view_kind
        self.random_state = random_state
        for key, value in hyper.items():
            setattr(self, key, value)

    def _method_name(self) -> str:
        return self.method

    def _common(self) -> dict:
        return {
            "method": self.method,
            "view_kind": self.view_kind,
            "random_state": self.random_state,
        }

    def get_params(self, deep=True):
        """Parameters: ``method``, ``view_kind``, ``random_state`` (``n_words``) and
        the hyper-parameters of the named method.

        Parameters
        ----------
        deep : bool
            Unused (no sub-estimators).

        Returns
        -------
        dict
        """
        params = self._common()
        try:
            hyper = sklearn_hyper(get_method(self.method))
        except (KeyError, TypeError):
            return params
        params.update({k: getattr(self, k, v) for k, v in hyper.items()})
        return params

    def set_params(self, **params):
        """Set parameters; ``method`` first, so the new method's hyper-parameters can
        be set in the same call.

        Returns
        -------
        self
        """
        if "method" in params:
            self.method = params.pop("method")
        valid = self.get_params(deep=False)
        for key, value in params.items():
            if key not in valid:
                raise ValueError(
                    f"Invalid parameter {key!r} for estimator {type(self).__name__} "
                    f"(method {self.method!r}). Valid parameters are: "
                    f"{sorted(valid)!r}."
                )
            setattr(self, key, value)
        return self

    def __repr__(self, N_CHAR_MAX=700):
        # the method, then only what differs from its defaults (sklearn's repr would
        # list every hyper-parameter: they are not in the __init__ signature)
        params = self.get_params(deep=False)
        try:
            defaults = sklearn_hyper(get_method(self.method))
        except (KeyError, TypeError):
            defaults = {}
        defaults.update(view_kind=None, random_state=None, n_words=5)
        shown = [f"{self.method!r}"] + [
            f"{k}={v!r}"
            for k, v in params.items()
            if k != "method" and (k not in defaults or repr(v) != repr(defaults[k]))
        ]
        text = f"{type(self).__name__}({', '.join(shown)})"
        return text if len(text) <= N_CHAR_MAX else text[: N_CHAR_MAX - 4] + "...)"

    def _hyper(self) -> dict:
        method = self._registered()
        valid = self.get_params(deep=False)
        # another method's hyper-parameters (left by a grid over methods) are
        # ignored; a name no method knows is a mistake
        known = {k for m in available_methods().values() for k in sklearn_hyper(m)}
        stray = [k for k in vars(self) if not k.endswith("_") and not k.startswith("_")]
        stray = [k for k in stray if k not in valid and k not in known]
        if stray:
            raise ValueError(
                f"{stray} are not hyper-parameters of method {method.name!r}; "
                f"valid: {', '.join(sklearn_hyper(method)) or '(none)'}"
            )
        return super()._hyper()

    def fit(
        self,
        X: ArrayLike | Mapping[str, ArrayLike],
        y: ArrayLike | scipy.sparse.spmatrix,
    ) -> Self:
        """Fit the named method, first checked to be of this estimator's kind; see
        :meth:`AnnotatorEstimator.fit` and :meth:`ClassifierEstimator.fit`.

        Parameters
        ----------
        X : array-like of shape (n_images, n_features) or dict of such arrays
            The images' features (one view, or one array per view).
        y : array-like or sparse matrix
            :class:`Annotator`: the words of each image, shape (n_images, n_words),
            0/1 (or non-negative counts); :class:`Classifier`: the class labels,
            shape (n_images,).

        Returns
        -------
        self
            The fitted estimator.
        """
        self._check_kind()
        return super().fit(X, y)

    def _check_kind(self) -> None:
        want_classifier = isinstance(self, ClassifierEstimator)
        method = self._registered()
        if is_regressor_method(method):
            raise ValueError(
                f"method {method.name!r} is a regressor (y is its real response): "
                f"use jaxannot.sklearn.{method.estimator_name}"
            )
        if is_classifier_method(method) != want_classifier:
            right = "Classifier" if is_classifier_method(method) else "Annotator"
            raise ValueError(
                f"method {method.name!r} is "
                f"{'a classifier' if is_classifier_method(method) else 'an annotator'}"
                f": use jaxannot.sklearn.base.{right}(method={method.name!r}) or "
                f"jaxannot.sklearn.{method.estimator_name}"
            )


class Annotator(_ByName, AnnotatorEstimator):
    """Any annotation method by name: ``Annotator(method="knn", k=5)``.

    Parameters
    ----------
    method : str
        A registered method with ``score_words`` (``jaxannot methods`` lists them).
    n_words : int, default=5
        Words per image marked by ``predict``.
    view_kind : str or dict or None, default=None
        ``"real"``, ``"bag"`` or ``"binary"`` (a dict per view for dict ``X``);
        None: ``"bag"`` for the topic models, ``"real"`` otherwise.
    random_state : int, RandomState or None, default=None
        Seed of the fit's JAX key.
    **hyper
        The method's hyper-parameters (its defaults where not given).
    """

    def __init__(
        self,
        method: str = "knn",
        *,
        n_words: int = 5,
        view_kind: str | dict[str, str] | None = None,
        random_state: int | np.random.RandomState | None = None,
        **hyper: Any,
    ):
        super().__init__(
            method=method, view_kind=view_kind, random_state=random_state, **hyper
        )
        self.n_words = n_words

    def _common(self) -> dict:
        return {**super()._common(), "n_words": self.n_words}


class Classifier(_ByName, ClassifierEstimator):
    """Any classification method by name: ``Classifier(method="svm", c1=1.0)``.

    Parameters
    ----------
    method : str
        A registered method with ``predict_labels`` (``mmh``, ``twh``, ``dwh-svm``,
        ``svm``).
    view_kind, random_state, **hyper
        As :class:`Annotator` takes them.
    """

    def __init__(
        self,
        method: str = "svm",
        *,
        view_kind: str | dict[str, str] | None = None,
        random_state: int | np.random.RandomState | None = None,
        **hyper: Any,
    ):
        super().__init__(
            method=method, view_kind=view_kind, random_state=random_state, **hyper
        )


# ------------------------------------------------------ one class per method
def _docstring(method: Method, params: list[tuple[str, object]]) -> str:
    if is_regressor_method(method):
        kind = "regressor"
    else:
        kind = "classifier" if is_classifier_method(method) else "annotator"
    lines = [
        f"The ``{method.name}`` {kind} as a scikit-learn estimator.",
        "",
        f"{method.summary}." if method.summary else "",
        "",
        "Parameters",
        "----------",
    ]
    for key, default in params:
        if key == "view_kind":
            text = "how X is read: 'real', 'bag' or 'binary' (dict per view)"
        elif key == "random_state":
            text = "seed of the fit's JAX key (int, RandomState or None)"
        elif key == "n_words":
            text = "words per image marked by predict"
        else:
            text = f"hyper-parameter of ``{method.name}``"
        lines += [
            f"{key} : {type(default).__name__}, default={default!r}",
            f"    {text}",
        ]
    return "\n".join(lines)


def _make_estimator_class(method: Method) -> type:
    """A class for ``method`` whose ``__init__`` takes its hyper-parameters and the
    common parameters as keyword arguments (an explicit signature, for sklearn)."""
    common = _common_params(method)
    hyper = sklearn_hyper(method)
    if is_regressor_method(method):  # y is the response: the estimator names it
        hyper = {k: v for k, v in hyper.items() if k not in TARGET_HYPER}
    clash = [k for k, _ in common if k in hyper]
    if clash:
        raise RuntimeError(
            f"method {method.name!r} has hyper-parameters {clash} that clash with the "
            "sklearn estimators' own parameters"
        )
    params = [*hyper.items(), *common]
    defaults = dict(params)
    name = method.estimator_name

    def __init__(self, **kwargs):
        unknown = [k for k in kwargs if k not in defaults]
        if unknown:
            raise TypeError(
                f"{name}() got an unexpected keyword argument {unknown[0]!r}; "
                f"valid: {', '.join(defaults)}"
            )
        for key, default in defaults.items():
            setattr(self, key, kwargs.get(key, default))

    __init__.__signature__ = inspect.Signature(
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        + [
            inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, default=v)
            for k, v in params
        ]
    )
    __init__.__qualname__ = f"{name}.__init__"
    __init__.__module__ = PACKAGE
    if is_regressor_method(method):
        base = RegressorEstimator
    elif is_classifier_method(method):
        base = ClassifierEstimator
    else:
        base = AnnotatorEstimator
    namespace = {
        "__init__": __init__,
        "__module__": PACKAGE,
        "__qualname__": name,
        "__doc__": _docstring(method, params),
        "_method": method.name,
    }
    return type(name, (base,), namespace)


#: registered method name -> its estimator class
ESTIMATORS: dict[str, type] = {}
for _method in available_methods().values():
    if _method.score_words is None and _method.predict_labels is None:
        continue
    _cls = _make_estimator_class(_method)
    ESTIMATORS[_method.name] = _cls
del _method, _cls

__all__ = [
    "Annotator",
    "AnnotatorEstimator",
    "Classifier",
    "ClassifierEstimator",
    "ESTIMATORS",
    "PACKAGE",
    "RENAMED",
    "RegressorEstimator",
    "default_view_kind",
    "is_classifier_method",
    "is_regressor_method",
    "sklearn_hyper",
]
