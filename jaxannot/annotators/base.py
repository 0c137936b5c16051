"""The annotator protocol and the method registry (saving and loading fitted models:
:mod:`jaxannot.annotators.persistence`).

Every method of the library — the baselines included — is a :class:`Method`:

``fit(corpus, *, rng_key, **hyper) -> Fitted``
    Learn from a :class:`~jaxannot.data.Corpus` (its observed words / labels only);
    the hyper-parameters are keyword-only, with their defaults in the signature
    (a library fit is declared by
    :func:`~jaxannot.annotators.hyper_spec.uses_defaults`).
``score_words(fitted, corpus) -> Float[Array, "images words"]``
    Relevance of every vocabulary word to every image of ``corpus`` (higher = more
    relevant), computed from the feature views alone.
``score_fit_corpus(fitted) -> Float[Array, "images words"]`` (optional)
    Scores for the images of the corpus ``fit`` saw, using everything fit learned about
    them (transductive posteriors, graph smoothing). Used by the transductive protocol;
    when absent, ``score_words(fitted, train_corpus)`` is used.
``embed(fitted, corpus) -> Float[Array, "images dims"]`` (optional)
    The latent representation, where the method has one.
``predict_labels(fitted, corpus) -> Int[Array, "images"]`` (optional)
    Class predictions for classifiers (regressors return floats).

The library's methods are found by scanning :mod:`jaxannot.methods`
(:func:`jaxannot.annotators.discovery.method_modules`: name -> the module that
registers it, read off the modules' registration calls without importing them):
:func:`get_method` imports only the module of the method asked for,
:func:`available_methods` all of them. A method of your own is added with
:func:`register`.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import json
import logging
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

import jax

from jaxannot.annotators.discovery import METHODS_PACKAGE, method_modules
from jaxannot.annotators.hyper_spec import method_defaults
from jaxannot.annotators.hyper_tables import DEFAULTS
from jaxannot.runtime.programs import release_if_over_budget

if TYPE_CHECKING:
    from jaxannot.data.corpus import Corpus

__all__ = [
    "Fitted",
    "INPUT_KINDS",
    "Method",
    "QUERY_KINDS",
    "register",
    "register_words_method",
    "get_method",
    "available_methods",
    "show_progress",
    "database_and_queries",
]


@dataclasses.dataclass(frozen=True)
class Fitted:
    """What a method learned: its parameters plus JSON-able metadata.

    Parameters
    ----------
    method : str
        Registered name of the method that made it.
    params : NamedTuple
        The learned arrays (a pytree): an instance of the method's
        :attr:`Method.params` (a method of your own may use a nested dict of
        arrays).
    hyper : dict
        The hyper-parameters it was fitted with (JSON-able values).
    info : dict
        JSON-able diagnostics (objective trace, iterations, ...).
    """

    method: str
    params: Any
    hyper: dict = dataclasses.field(default_factory=dict)
    info: dict = dataclasses.field(default_factory=dict)


jax.tree_util.register_pytree_node(
    Fitted,
    lambda f: ((f.params,), (f.method, _freeze(f.hyper), _freeze(f.info))),
    lambda aux, ch: Fitted(aux[0], ch[0], dict(aux[1]), dict(aux[2])),
)


def _freeze(d: Mapping) -> tuple:
    return tuple((k, json.dumps(v, sort_keys=True)) for k, v in d.items())


#: How a method reads its feature views (:attr:`Method.input_kind`).
INPUT_KINDS = ("real", "bag")

#: The retrieval queries a method may answer (:attr:`Method.queries`).
QUERY_KINDS = ("word", "image", "multimodal")


@dataclasses.dataclass(frozen=True)
class Method:
    """A registered annotation / classification method.

    Parameters
    ----------
    name : str
        CLI name, e.g. ``"knn"``.
    fit, score_words, score_fit_corpus, embed, predict_labels : callables
        The protocol functions (see the module docstring); all but ``fit`` optional.
    hyper : dict
        Hyper-parameter defaults; their types decide how ``--set key=value`` parses.
    summary : str
        One line for ``jaxannot methods``.
    needs : tuple of str
        What a corpus must have: ``"words"`` and/or ``"labels"``.
    response : callable, optional
        Marks a regressor: ``response(fitted, corpus)`` is the true real value of each
        image that ``predict_labels`` predicts (NaN where unknown), or None when the
        response is the class label (the task's true labels); scored by the
        regression metrics instead of classification accuracy.
    params : type, optional
        The NamedTuple of ``fit``'s ``Fitted.params``, whose class attribute
        ``spec`` declares each field's dtype kinds and dimensions; a saved model is
        rebuilt as it and checked against the declaration when loaded
        (:mod:`jaxannot.annotators.persistence`). Every method of the library has
        one; without it a saved model loads as nested dicts, unchecked.
    monotone : dict of str to str, optional
        The objective traces ``fit`` records in ``Fitted.info`` that its algorithm
        never lets move the wrong way, at every setting: info key to
        ``"increases"`` (EM, VB: a bound that never decreases) or ``"decreases"``
        (a loss that never increases), up to float32 round-off
        (``tests/annotators/test_objectives.py`` checks every declaration).
    estimator_name : str, optional
        The class name of its scikit-learn estimator (:mod:`jaxannot.sklearn`);
        default: the CamelCase of ``name`` (``"lap-mix-unigram"`` ->
        ``"LapMixUnigram"``).
    input_kind : {"real", "bag"}
        How it reads its feature views by default: ``"real"`` features, or
        ``"bag"``, non-negative integer counts of visual words (the topic models;
        their estimators then default to ``view_kind="bag"`` and refuse
        fractional ``X``).
    score_meaning : str, optional
        What its ``score_words`` mean when they are probabilities in [0, 1] (its
        estimator then has ``predict_proba``); None for margins and other scores.
    class_scores : callable, optional
        ``class_scores(fitted, corpus) -> Float[Array, "images classes"]`` of a
        classifier (higher = more likely): its estimator's ``decision_function``.
    non_negative : bool or callable
        Whether it needs non-negative features whatever the view kind: a bool, or
        ``non_negative(hyper) -> bool`` of its hyper-parameters (e.g. a distance
        that takes square roots of the features).
    queries : tuple of str
        The retrieval queries a saved model answers besides ``annotate``
        (``jaxannot query``): ``"word"``, ``"image"``, ``"multimodal"`` (§4 of
        Guo et al. 2016); its ``params`` then hold the retrieval index's
        ``vrep_features``, ``vrep_word_scores`` and ``gamma``.
    """

    name: str
    fit: Callable[..., Fitted]
    score_words: Callable[[Fitted, Any], Any] | None = None
    score_fit_corpus: Callable[[Fitted], Any] | None = None
    embed: Callable[[Fitted, Any], Any] | None = None
    predict_labels: Callable[[Fitted, Any], Any] | None = None
    hyper: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    summary: str = ""
    needs: tuple[str, ...] = ()
    response: Callable[[Fitted, Any], Any] | None = None
    params: type | None = None
    monotone: Mapping[str, str] = dataclasses.field(default_factory=dict)
    estimator_name: str = ""
    input_kind: str = "real"
    score_meaning: str | None = None
    class_scores: Callable[[Fitted, Any], Any] | None = None
    non_negative: bool | Callable[[Mapping[str, Any]], bool] = False
    queries: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not getattr(self.fit, "_releases_programs", False):
            # a long session's compiled programs stay bounded: before each fit, free
            # them when over the budget (jaxannot.runtime.programs)
            object.__setattr__(self, "fit", _releasing(self.fit))
        if not self.estimator_name:
            parts = self.name.replace("_", "-").split("-")
            camel = "".join(part[:1].upper() + part[1:] for part in parts)
            object.__setattr__(self, "estimator_name", camel)
        if self.input_kind not in INPUT_KINDS:
            raise ValueError(
                f"method {self.name!r}: input_kind {self.input_kind!r} is not one of "
                f"{list(INPUT_KINDS)}"
            )
        unknown = [q for q in self.queries if q not in QUERY_KINDS]
        if unknown:
            raise ValueError(
                f"method {self.name!r}: unknown queries {unknown}; valid: "
                f"{list(QUERY_KINDS)}"
            )

    def needs_non_negative(self, hyper: Mapping[str, Any]) -> bool:
        """Whether features must be non-negative with hyper-parameters ``hyper``
        (:attr:`non_negative`, called when it is a function)."""
        rule = self.non_negative
        return bool(rule(hyper) if callable(rule) else rule)


def _releasing(fit: Callable[..., Fitted]) -> Callable[..., Fitted]:
    """``fit`` that first releases the compiled programs when over the budget
    (:func:`jaxannot.runtime.programs.release_if_over_budget`)."""

    @functools.wraps(fit)
    def fit_releasing(*args, **kwargs):
        release_if_over_budget()
        return fit(*args, **kwargs)

    fit_releasing._releases_programs = True
    return fit_releasing


def show_progress() -> bool:
    """Whether long loops show progress bars: when stderr is a terminal (so logs, CI
    output and captured runs stay free of bar redraws) and the ``"jaxannot"`` logger's
    level, when set, lets INFO through (``jaxannot --quiet`` sets it to WARNING)."""
    return sys.stderr.isatty() and logging.getLogger("jaxannot").level <= logging.INFO


def database_and_queries(
    fitted: Fitted, corpus: Corpus
) -> tuple[np.ndarray, np.ndarray]:
    """The training features a nearest-neighbour method stored (``params.features``)
    and the same view of ``corpus`` (``hyper["view"]``); ``ValueError`` when their
    dimensions differ."""
    database = np.asarray(fitted.params.features)
    queries = corpus.features(fitted.hyper["view"])
    if queries.shape[1] != database.shape[1]:
        raise ValueError(
            f"the corpus has {queries.shape[1]} feature dimensions, the fitted model "
            f"{database.shape[1]}"
        )
    return database, queries


_REGISTRY: dict[str, Method] = {}


def register(method: Method) -> Method:
    """Add ``method`` to the registry (its name must be new)."""
    if method.name in _REGISTRY and _REGISTRY[method.name] is not method:
        raise ValueError(f"a method named {method.name!r} is already registered")
    _REGISTRY[method.name] = method
    return method


def register_words_method(
    name: str, fit: Callable[..., Fitted], summary: str, **functions: Any
) -> Method:
    """Register an annotation method (one that ``needs`` words), with its defaults
    from the table (:func:`method_defaults`; none when it has no table).

    Parameters
    ----------
    name, fit, summary
        As in :class:`Method`.
    **functions
        Its other protocol functions (``score_words``, ``score_fit_corpus``,
        ``embed``).

    Returns
    -------
    Method
        The registered method.
    """
    return register(
        Method(
            name=name,
            fit=fit,
            hyper=method_defaults(name) if name in DEFAULTS else {},
            summary=summary,
            needs=("words",),
            **functions,
        )
    )


def _import_module_of(name: str) -> None:
    importlib.import_module(f"{METHODS_PACKAGE}.{method_modules()[name]}")


def available_methods() -> dict[str, Method]:
    """All methods (the library's and those registered since), by name (sorted)."""
    for name in method_modules():
        _import_module_of(name)
    return dict(sorted(_REGISTRY.items()))


def get_method(name: str) -> Method:
    """The method called ``name`` (importing only its module); ``KeyError`` lists the
    valid names."""
    library = method_modules()
    if name not in _REGISTRY and name in library:
        _import_module_of(name)
    if name not in _REGISTRY:
        valid = ", ".join(sorted(set(library) | set(_REGISTRY)))
        raise KeyError(f"unknown method {name!r}; valid methods: {valid}")
    return _REGISTRY[name]
