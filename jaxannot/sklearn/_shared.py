"""What the estimators of :mod:`jaxannot.sklearn` share.

:class:`SharedBase` (the base of
:class:`~jaxannot.sklearn._estimators.AnnotatorEstimator` and
:class:`~jaxannot.sklearn._classifier.ClassifierEstimator`) turns the estimator's
parameters into the method's hyper-parameters, ``X`` into the views of a
:class:`~jaxannot.data.Corpus`, the ``random_state`` into a key, and runs the fit;
:data:`RENAMED`, :func:`sklearn_hyper` and :func:`default_view_kind` map a method's
hyper-parameters and input kind to the estimator's.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping

import numpy as np
from scipy import sparse
from sklearn.utils import check_random_state
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import (
    check_array,
    check_consistent_length,
    check_is_fitted,
    check_non_negative,
    column_or_1d,
    validate_data,
)

import jax

from jaxannot.annotators.base import Method, get_method
from jaxannot.annotators.hyper_values import fit_parsed, parse_hyper
from jaxannot.data.corpus import VIEW_KINDS, Corpus
from jaxannot.types import ArrayLike

__all__ = ["RENAMED", "default_view_kind", "sklearn_hyper", "SharedBase"]

_SINGLE_VIEW = "features"  # the view name an array X becomes

#: Hyper-parameters whose names mean something else to sklearn, and their estimator
#: names: sklearn's ``warm_start`` means "reuse the previous fit" (its checks set it
#: to False), lap-mix-unigram's is a number of plain EM iterations.
RENAMED = {"warm_start": "warm_start_iterations"}


def sklearn_hyper(method: Method) -> dict:
    """The method's hyper-parameter defaults under their estimator names.

    Parameters
    ----------
    method : Method
        A registered method (its ``hyper``).

    Returns
    -------
    dict
        Estimator parameter name (:data:`RENAMED` where the method's name is taken)
        -> default value.
    """
    return {RENAMED.get(k, k): v for k, v in method.hyper.items()}


def default_view_kind(method: str) -> str:
    """How an estimator of the method named ``method`` reads ``X`` unless told.

    Parameters
    ----------
    method : str
        A registered method's name.

    Returns
    -------
    str
        Its :attr:`~jaxannot.annotators.Method.input_kind`: ``"bag"`` (non-negative
        counts) for the topic models, ``"real"`` otherwise.
    """
    return get_method(method).input_kind


def _plain(value):
    """Numpy scalars as Python ones (fitted hyper-parameters must be JSON-able)."""
    return value.item() if isinstance(value, np.generic) else value


class SharedBase:
    """What annotators and classifiers share: parameters -> hyper-parameters, ``X`` ->
    views, the random key, the fit itself. Not an estimator by itself."""

    #: registered method name, set on the generated classes
    _method: str = ""

    # ------------------------------------------------------------- the method
    def _method_name(self) -> str:
        return self._method

    def _registered(self) -> Method:
        return get_method(self._method_name())

    def _described(self) -> Method | None:
        """The registered method, or None for a name no method has (then the
        estimator reads ``X`` as real features until ``fit`` names the error)."""
        try:
            return self._registered()
        except (KeyError, TypeError):
            return None

    def _has_protocol(self, name: str) -> bool:
        return getattr(self._described(), name, None) is not None

    def _given_hyper(self) -> dict:
        """The method's hyper-parameters the estimator's parameters set."""
        method = self._registered()
        params = self.get_params(deep=False)
        return {
            k: _plain(params[RENAMED.get(k, k)])
            for k in method.hyper
            if RENAMED.get(k, k) in params
        }

    def _hyper(self) -> dict:
        return parse_hyper(self._registered(), self._given_hyper())

    def _view_kind_param(self):
        kind = getattr(self, "view_kind", None)
        if kind is None:
            method = self._described()
            return "real" if method is None else method.input_kind
        return kind

    def _kinds(self, names) -> dict[str, str]:
        kind = self._view_kind_param()
        if isinstance(kind, Mapping):
            missing = [n for n in names if n not in kind]
            if missing:
                raise ValueError(
                    f"view_kind has no entry for the views {missing}; give a kind "
                    f"for every view of X ({list(names)})"
                )
            kinds = {n: kind[n] for n in names}
        else:
            kinds = dict.fromkeys(names, kind)
        for name, k in kinds.items():
            if k not in VIEW_KINDS:
                raise ValueError(
                    f"view_kind {k!r} for view {name!r} is not one of "
                    f"{list(VIEW_KINDS)}"
                )
        return kinds

    def _reads_counts(self) -> bool:
        """Whether the method reads ``X`` as visual-word counts (its ``input_kind``
        is ``"bag"``)."""
        return getattr(self._described(), "input_kind", "real") == "bag"

    def _needs_non_negative(self) -> bool:
        """Whether ``X`` must be non-negative: bag/binary views, or what the method
        declares for its current hyper-parameters (:meth:`~jaxannot.annotators.
        Method.needs_non_negative`, e.g. TagProp's base distances other than cosine,
        MBRM's ``regions`` kernel)."""
        kind = self._view_kind_param()
        kinds = kind.values() if isinstance(kind, Mapping) else [kind]
        if any(k in ("bag", "binary") for k in kinds):
            return True
        method, params = self._described(), self.get_params(deep=False)
        if method is None:
            return False
        hyper = {k: params.get(RENAMED.get(k, k), v) for k, v in method.hyper.items()}
        return method.needs_non_negative(hyper)

    def _random_key(self):
        state = self.random_state
        if isinstance(state, numbers.Integral) and not isinstance(state, bool):
            seed = int(state)
        else:
            seed = int(check_random_state(state).randint(np.iinfo(np.int32).max))
        return jax.random.key(seed)

    # ---------------------------------------------------------------- X, views
    def _views(
        self,
        X,
        *,
        fit: bool,
        y=None,
        multi_output: bool = False,
        y_numeric: bool = False,
    ):
        """``X`` (array or dict of views) -> ``(views, y)``; checks and sets
        ``n_features_in_`` (and ``view_names_`` / ``view_dims_``) like sklearn
        (``y_numeric``: ``y`` is a real response, as sklearn's regressors read it)."""
        if isinstance(X, Mapping) and not sparse.issparse(X):  # (dok is a dict)
            views, y = self._dict_views(
                X, fit=fit, y=y, multi_output=multi_output, y_numeric=y_numeric
            )
        else:
            kwargs = dict(dtype=(np.float64, np.float32), reset=fit)
            if fit:
                kwargs["ensure_min_samples"] = 2
            if fit:
                X, y = validate_data(
                    self,
                    X,
                    y,
                    multi_output=multi_output,
                    y_numeric=y_numeric,
                    **kwargs,
                )
            else:
                X = validate_data(self, X, **kwargs)
            views = {_SINGLE_VIEW: X}
            if fit:
                self.view_names_ = (_SINGLE_VIEW,)
                self.view_dims_ = (X.shape[1],)
            elif self.view_names_ != (_SINGLE_VIEW,):
                raise ValueError(
                    f"{type(self).__name__} was fitted on a dict of views "
                    f"{list(self.view_names_)}; pass a dict with the same views"
                )
        if self._needs_non_negative():
            for v in views.values():
                check_non_negative(v, f"{type(self).__name__} (view_kind / method)")
        if self._reads_counts():
            for name, v in views.items():
                if not np.array_equal(v, np.round(v)):
                    raise ValueError(
                        f"{type(self).__name__} reads X as visual-word counts and "
                        f"needs non-negative integers; view {name!r} has fractional "
                        "values. Quantize real features first, e.g. with "
                        "sklearn.preprocessing.KBinsDiscretizer(encode='onehot-dense')"
                    )
        return views, y

    def _dict_views(self, X, *, fit, y, multi_output, y_numeric=False):
        if not X:
            raise ValueError("X is an empty dict; give at least one named view")
        views = {
            str(name): check_array(
                v,
                dtype=(np.float64, np.float32),
                ensure_min_samples=2 if fit else 1,
                input_name=f"X[{name!r}]",
            )
            for name, v in X.items()
        }
        check_consistent_length(*views.values())
        names, dims = tuple(views), tuple(v.shape[1] for v in views.values())
        if fit:
            if y is None:
                raise ValueError(
                    f"This {type(self).__name__} estimator requires y to be passed, "
                    "but the target y is None."
                )
            y = check_array(
                y,
                accept_sparse="csr",
                ensure_2d=False,
                dtype="numeric" if y_numeric else None,
                input_name="y",
            )
            if not multi_output:
                y = column_or_1d(y, warn=True)
            check_consistent_length(next(iter(views.values())), y)
            self.view_names_, self.view_dims_ = names, dims
            self.n_features_in_ = int(sum(dims))
        else:
            check_is_fitted(self)
            if names != self.view_names_ or dims != self.view_dims_:
                raise ValueError(
                    f"X has the views {dict(zip(names, dims, strict=True))}, but "
                    f"{type(self).__name__} was fitted on "
                    f"{dict(zip(self.view_names_, self.view_dims_, strict=True))}"
                )
        return views, y

    def _apply(self, protocol: str, X) -> np.ndarray:
        """The method's ``protocol`` function (``score_words``, ``embed``, ...) on
        ``fitted_`` and the query images ``X`` (checks the estimator is fitted)."""
        check_is_fitted(self)
        views, _ = self._views(X, fit=False)
        corpus = self._corpus(views)
        return np.asarray(getattr(self._registered(), protocol)(self.fitted_, corpus))

    def _corpus(self, views, **fields) -> Corpus:
        return Corpus.from_arrays(
            views, view_kinds=self._kinds(list(views)), name="sklearn", **fields
        )

    def _fit_views(self, views, **fields):
        """Fit the method on ``views`` and the targets ``fields`` (words or labels, as
        :meth:`~jaxannot.data.Corpus.from_arrays` takes them) into ``fitted_``; returns
        ``self``."""
        corpus = self._corpus(views, **fields)
        method = self._registered()
        self.fitted_ = fit_parsed(
            method, corpus, rng_key=self._random_key(), hyper=self._hyper()
        )
        return self

    @available_if(lambda self: self._has_protocol("embed"))
    def embed(self, X: ArrayLike | Mapping[str, ArrayLike]) -> np.ndarray:
        """The method's latent representation of each image (topic proportions,
        hidden units, ...), where it has one.

        Parameters
        ----------
        X : array-like of shape (n_images, n_features) or dict of such arrays
            Image features, as ``fit`` took them.

        Returns
        -------
        ndarray of shape (n_images, n_dims)
            The method's :attr:`~jaxannot.annotators.Method.embed`.
        """
        return self._apply("embed", X)
