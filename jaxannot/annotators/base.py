"""The annotator protocol, the method registry, and saving/loading fitted models.

Every method of the library — the baselines included — is a :class:`Method`:

``fit(corpus, *, rng_key, **hyper) -> Fitted``
    Learn from a :class:`~jaxannot.data.Corpus` (its observed words / labels only).
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

The library's methods are listed in :data:`METHOD_MODULES` (name -> the module of
:mod:`jaxannot.methods` that defines and registers it): :func:`get_method` imports
only the module of the method asked for, :func:`available_methods` all of them. A
method of your own is added with :func:`register`.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import logging
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

import jax

from jaxannot.annotators.hyper_spec import method_defaults
from jaxannot.annotators.hyper_tables import DEFAULTS
from jaxannot.annotators.hyper_values import check_hyper
from jaxannot.data.archive import read_archive, write_archive
from jaxannot.data.errors import DataFormatError

__all__ = [
    "Fitted",
    "INPUT_KINDS",
    "Method",
    "QUERY_KINDS",
    "register",
    "register_words_method",
    "get_method",
    "available_methods",
    "save",
    "load",
    "load_scorer",
    "check_params",
    "show_progress",
    "database_and_queries",
]


@dataclasses.dataclass(frozen=True)
class Fitted:
    """What a method learned: a nested dict of arrays plus JSON-able metadata.

    Parameters
    ----------
    method : str
        Registered name of the method that made it.
    params : dict
        Nested ``dict[str, array | dict]`` of learned arrays (a pytree).
    hyper : dict
        The hyper-parameters it was fitted with (JSON-able values).
    info : dict
        JSON-able diagnostics (objective trace, iterations, ...).
    """

    method: str
    params: dict
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
    params : dict of str to str, optional
        The arrays a fitted model holds, checked when a saved model is loaded
        (:func:`check_params`): ``/``-joined key path (ending in ``?`` when the
        array may be absent) to ``"KIND[DIMS]"``, ``KIND`` the numpy dtype kinds
        allowed (``f`` float, ``i`` signed, ``u`` unsigned, ``b`` bool) and
        ``DIMS`` comma-separated dimension names (equal names must have equal
        sizes), e.g. ``{"features": "f[n,d]", "width?": "f[]"}``.
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
    params: Mapping[str, str] | None = None
    estimator_name: str = ""
    input_kind: str = "real"
    score_meaning: str | None = None
    class_scores: Callable[[Fitted, Any], Any] | None = None
    non_negative: bool | Callable[[Mapping[str, Any]], bool] = False
    queries: tuple[str, ...] = ()

    def __post_init__(self) -> None:
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


def show_progress() -> bool:
    """Whether long loops show progress bars: when stderr is a terminal (so logs, CI
    output and captured runs stay free of bar redraws) and the ``"jaxannot"`` logger's
    level, when set, lets INFO through (``jaxannot --quiet`` sets it to WARNING)."""
    return sys.stderr.isatty() and logging.getLogger("jaxannot").level <= logging.INFO


def database_and_queries(fitted: Fitted, corpus) -> tuple[np.ndarray, np.ndarray]:
    """The training features a nearest-neighbour method stored (``params["features"]``)
    and the same view of ``corpus`` (``hyper["view"]``); ``ValueError`` when their
    dimensions differ."""
    database = np.asarray(fitted.params["features"])
    queries = corpus.features(fitted.hyper["view"])
    if queries.shape[1] != database.shape[1]:
        raise ValueError(
            f"the corpus has {queries.shape[1]} feature dimensions, the fitted model "
            f"{database.shape[1]}"
        )
    return database, queries


_REGISTRY: dict[str, Method] = {}

#: Every method of the library and the module of :mod:`jaxannot.methods` that
#: registers it (tests check the table against what the modules register).
METHOD_MODULES: dict[str, str] = {
    # baselines
    "empirical": "baselines.annotators",
    "knn": "baselines.annotators",
    "tagprop": "baselines.tagprop_annotator",
    # topic models (seed 000)
    "mix-unigram": "topic_models.mixture_annotators",
    "lap-mix-unigram": "topic_models.mixture_annotators",
    "plsa-words": "topic_models.plsa_words_annotator",
    "link-lda": "topic_models.link_lda_annotators",
    "lap-link-lda": "topic_models.link_lda_annotators",
    # harmoniums (seed 001)
    "dwh": "harmoniums.dwh_annotators",
    "dwh-svm": "harmoniums.classifier_annotators",
    "twh": "harmoniums.classifier_annotators",
    "mmh": "harmoniums.classifier_annotators",
    "mmh-regression": "harmoniums.classifier_annotators",
    "svm": "harmoniums.classifier_annotators",
    # approximate Laplacian eigenmaps (seed 002)
    "ale-sf": "ale.annotators",
    "ale-svm": "ale.annotators",
    "iale-sf": "ale.annotators",
    "iale-svm": "ale.annotators",
    "bsvm": "ale.annotators",
    "gsf": "ale.annotators",
    # sparse feature selection (seed 003)
    "sfsls": "sfsls.annotators",
    "sfss": "sfsls.annotators",
    "fsnm": "sfsls.annotators",
    # structured max-margin annotation (seed 004)
    "emml": "emml.annotators",
    "mbrm": "emml.annotators",
}


def register(method: Method) -> Method:
    """Add ``method`` to the registry (its name must be new)."""
    if method.name in _REGISTRY and _REGISTRY[method.name] is not method:
        raise ValueError(f"a method named {method.name!r} is already registered")
    _REGISTRY[method.name] = method
    return method


def register_words_method(name: str, fit, summary: str, **functions):
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
    importlib.import_module(f"jaxannot.methods.{METHOD_MODULES[name]}")


def available_methods() -> dict[str, Method]:
    """All methods (the library's and those registered since), by name (sorted)."""
    for name in METHOD_MODULES:
        _import_module_of(name)
    return dict(sorted(_REGISTRY.items()))


def get_method(name: str) -> Method:
    """The method called ``name`` (importing only its module); ``KeyError`` lists the
    valid names."""
    if name not in _REGISTRY and name in METHOD_MODULES:
        _import_module_of(name)
    if name not in _REGISTRY:
        valid = ", ".join(sorted(set(METHOD_MODULES) | set(_REGISTRY)))
        raise KeyError(f"unknown method {name!r}; valid methods: {valid}")
    return _REGISTRY[name]


# ----------------------------------------------------------------- save / load
_FORMAT_VERSION = 1


def _flatten_params(params: Mapping, prefix: str = "") -> dict[str, np.ndarray]:
    out = {}
    for key, value in params.items():
        if "/" in key:
            raise ValueError(f"parameter names may not contain '/': {key!r}")
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flatten_params(value, path + "/"))
        else:
            out[path] = np.asarray(value)
    return out


def _unflatten_params(flat: Mapping[str, np.ndarray]) -> dict:
    """The nested dict of ``/``-joined key paths; ``ValueError`` when a path has an
    empty part or lies inside another array (``a`` and ``a/b``: ``a`` comes first
    in sorted order)."""
    out: dict = {}
    for path in sorted(flat):
        node = out
        *parents, leaf = path.split("/")
        if not all(parents) or not leaf:
            raise ValueError(f"parameter name {path!r} has an empty part")
        for p in parents:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ValueError(f"parameter {path!r} is inside the array {p!r}")
        node[leaf] = flat[path]
    return out


def save(path: str | os.PathLike, fitted: Fitted) -> None:
    """Save ``fitted`` to ``path`` (an ``.npz`` archive with a JSON header), atomically.

    The arrays go into the archive by their ``/``-joined key paths; the method name,
    hyper-parameters and info go into the JSON header. The file is written to a
    temporary name in the same folder, synced to disk and renamed, so a crash never
    leaves a half-written model; it ends with a checksum that :func:`load` checks
    (:mod:`jaxannot.data.archive`).
    """
    flat = _flatten_params(fitted.params)
    meta = {
        "format": "jaxannot.fitted",
        "version": _FORMAT_VERSION,
        "method": fitted.method,
        "hyper": fitted.hyper,
        "info": fitted.info,
        "keys": sorted(flat),
    }
    write_archive(path, flat, meta=meta)


def load(path: str | os.PathLike) -> Fitted:
    """Load a model written by :func:`save` (never unpickles anything).

    Raises
    ------
    FileNotFoundError
        No file at ``path``.
    DataFormatError
        The file is damaged (truncated, altered: its checksum does not match) or is
        not a jaxannot model: the one-line message names the file and the problem.
    """
    remedy = "save the model again (jaxannot evaluate ... --save)"
    archive = read_archive(path, "jaxannot model", remedy=remedy)
    meta = archive.meta

    def fail(problem: str) -> DataFormatError:
        return DataFormatError(path, f"{problem}; {remedy}")

    if meta is None:
        raise fail("not a jaxannot model (no JSON header)")
    if meta.get("format") != "jaxannot.fitted":
        raise fail("not a jaxannot model (its header has another format)")
    version = meta.get("version")
    if type(version) is not int or not 1 <= version <= _FORMAT_VERSION:
        raise DataFormatError(
            path,
            f"model file format version {version!r}; this jaxannot reads versions 1 "
            f"to {_FORMAT_VERSION} (save it again with this version)",
        )
    method = meta.get("method")
    if not isinstance(method, str) or not method:
        raise fail("its header names no method")
    for field in ("hyper", "info"):
        if not isinstance(meta.get(field, {}), dict):
            raise fail(f"its header's {field!r} is not a JSON object")
    keys = meta.get("keys", sorted(archive.arrays))
    if not isinstance(keys, list) or sorted(keys) != sorted(archive.arrays):
        raise fail("its header lists other parameters than the archive holds")
    for key, value in sorted(archive.arrays.items()):
        if value.dtype.kind == "f" and not np.isfinite(value).all():
            raise fail(f"its parameter {key!r} holds NaN or infinite values")
    try:
        params = _unflatten_params(archive.arrays)
    except ValueError as err:
        raise fail(str(err)) from None
    return Fitted(
        method=method,
        params=params,
        hyper=meta.get("hyper", {}),
        info=meta.get("info", {}),
    )


def check_params(spec: Mapping[str, str], flat: Mapping[str, np.ndarray]) -> None:
    """Check the arrays ``flat`` (by ``/``-joined key path) against ``spec`` (as
    :attr:`Method.params` describes it); ``ValueError`` names the first array that
    is missing, unexpected, or of another kind, rank or size."""
    required = {k.rstrip("?") for k in spec if not k.endswith("?")}
    declared = {k.rstrip("?"): v for k, v in spec.items()}
    for problem, keys in (
        ("no parameter", required - set(flat)),
        ("unexpected parameter", set(flat) - set(declared)),
    ):
        if keys:
            raise ValueError(f"{problem} {', '.join(map(repr, sorted(keys)))}")
    sizes: dict[str, tuple[int, str]] = {}
    for key in sorted(flat):
        kinds, _, dims = declared[key].partition("[")
        names = [d for d in dims.rstrip("]").split(",") if d]
        value = flat[key]
        if value.dtype.kind not in kinds:
            raise ValueError(f"{key!r} holds {value.dtype} values, not kind {kinds!r}")
        if value.ndim != len(names):
            raise ValueError(f"{key!r} has shape {value.shape}, not [{dims}")
        for name, size in zip(names, value.shape, strict=True):
            seen, where = sizes.setdefault(name, (size, key))
            if seen != size:
                raise ValueError(
                    f"{key!r} has shape {value.shape}: its {name} is {size}, "
                    f"{where!r} gives {seen}"
                )


def load_scorer(path: str | os.PathLike) -> tuple[Fitted, Method]:
    """A saved model and its registered method, ready for ``score_words``.

    :func:`load`, then :func:`get_method`, then the model's hyper-parameters are
    checked: every one the method has must be there with a valid value. The
    method's scoring is wrapped so that parameters that do not fit the method (a
    missing or misshapen array) raise a ``DataFormatError`` naming the file rather
    than an error from deep inside the method.

    Returns
    -------
    fitted : Fitted
    method : Method
        The registered method, its ``score_words`` wrapped as above.

    Raises
    ------
    FileNotFoundError
        No file at ``path``.
    DataFormatError
        What :func:`load` raises, a method that is not registered (the message
        lists the valid names), a missing or invalid hyper-parameter.
    """
    fitted = load(path)
    try:
        method = get_method(fitted.method)
    except KeyError as err:
        raise DataFormatError(path, f"saved by an {err.args[0]}") from None
    remedy = "save the model again (jaxannot evaluate ... --save)"
    if method.params is not None:
        try:
            check_params(method.params, _flatten_params(fitted.params))
        except ValueError as err:
            raise DataFormatError(
                path,
                f"its parameters do not fit method {method.name!r}: {err}; {remedy}",
            ) from None
    for key in method.hyper:
        if key not in fitted.hyper:
            raise DataFormatError(
                path, f"lacks the {method.name} hyper-parameter {key!r}; {remedy}"
            )
        try:
            check_hyper(method.name, key, fitted.hyper[key])
        except ValueError as err:
            raise DataFormatError(path, f"{err}; {remedy}") from None
    if method.score_words is None:
        return fitted, method
    score_words = method.score_words

    def checked_score_words(fitted: Fitted, corpus):
        try:
            return score_words(fitted, corpus)
        except (KeyError, IndexError, TypeError) as err:
            what = f"no parameter {err}" if isinstance(err, KeyError) else str(err)
            raise DataFormatError(
                path,
                f"its parameters do not fit method {method.name!r} "
                f"({' '.join(what.split())[:160]}); {remedy}",
            ) from None

    return fitted, dataclasses.replace(method, score_words=checked_score_words)
