"""Harmonium methods, shared part: fitting, ``dwh``, and the outputs every harmonium
method shares (:func:`embed_harmonium`, :func:`score_classes`, :func:`predict_labels`);
the corpus-to-wings encoding is in :mod:`.views`. The supervised methods
(``dwh-svm``, ``twh``, ``mmh``, ``mmh-regression``, the flat ``svm``) are fitted in
:mod:`jaxannot.methods.harmoniums.classifier_annotators`.

How a corpus becomes a harmonium: every feature view is a visible wing — ``"real"``
views are Gaussian (standardized with the training mean and standard deviation, the
per-dimension :math:`\\sigma^2` starting at the data variance), ``"bag"`` and
``"binary"`` views are Bernoulli on presence (seed 001 §5.1 treats bag-of-words as
binary) or, with ``bag_model="softmax"``, replicated-softmax counts.

``dwh``
    Dual-wing harmonium (Xing et al. 2005) for annotation: the words are one more
    Bernoulli wing; trained by CD; ``score_words`` runs mean field with the feature
    views clamped and ranks :math:`E[x_i]` (seed 001 §4.4). ``embed`` = :math:`E[h]`.

References
----------
N. Chen, J. Zhu, F. Sun, E. P. Xing. Large-Margin Predictive Latent Subspace Learning
for Multiview Data Analysis. IEEE TPAMI 34(12), 2012.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial, wraps
from typing import TYPE_CHECKING, Any

import numpy as np

import jax
import jax.numpy as jnp

from jaxannot.annotators.base import Fitted, Method, get_method, register
from jaxannot.annotators.hyper_spec import method_defaults, uses_defaults
from jaxannot.inference.support import SupportError, check_finite_tree, check_support
from jaxannot.methods.harmoniums import harmonium as hm
from jaxannot.methods.harmoniums import mmh_steps
from jaxannot.methods.harmoniums.cd_training import init_harmonium, train_cd
from jaxannot.methods.harmoniums.params import DwhParams
from jaxannot.methods.harmoniums.views import encode, view_setup
from jaxannot.runtime.row_buckets import pad_to_bucket
from jaxannot.solvers import multiclass_svm as cs

if TYPE_CHECKING:
    from jaxannot.data.corpus import Corpus
    from jaxannot.methods.harmoniums.params import ViewScaling
    from jaxannot.types import Array, ArrayTree, PRNGKey

__all__ = [
    "check_fitted_support",
    "fit_dwh",
    "score_words_dwh",
    "embed_harmonium",
    "predict_labels",
    "score_classes",
    "harmonium_views",
    "fit_harmonium",
    "check_trained",
    "build_fitted",
    "view_scaling",
    "harmonium_of",
    "clamped_hidden",
    "infer_free_view",
]


#: The least positive float32: a scaling standard deviation must be at least this.
_TINY = float(np.finfo(np.float32).tiny)


# ----------------------------------------------------------------- corpus -> wings
def harmonium_views(
    train: Corpus,
    hyper: Mapping[str, Any],
    wing: tuple[str, str, Array] | None = None,
    first: bool = False,
) -> tuple[list[str], list[str], dict[str, ViewScaling], list, list]:
    """``(names, kinds, scaling, views, totals)``: the encoded feature views of
    ``train`` plus an optional extra ``wing = (name, kind, values)`` (total 1 per
    image), in front when ``first`` else at the back.

    Parameters
    ----------
    train : Corpus
        The training images.
    hyper : Mapping
        The method's hyper-parameters (``bag_model``).
    wing : tuple of (str, str, Array), optional
        An extra wing's name, kind and values ``[n, d]`` (the words, the labels).
    first : bool, optional
        Put ``wing`` before the feature views.

    Returns
    -------
    tuple
        The wings' names and kinds, the real views' scaling by name, and the
        encoded views and their per-image totals (device arrays).
    """
    names, kinds, scaling = view_setup(train, hyper["bag_model"])
    views, totals = encode(train, names, kinds, scaling)
    if wing is not None:
        ones = jax.device_put(np.ones(train.num_images, np.float32))
        extra = [[w] for w in wing] + [[ones]]
        lists = [names, kinds, views, totals]
        joined = [
            [*e, *x] if first else [*x, *e] for e, x in zip(extra, lists, strict=True)
        ]
        names, kinds, views, totals = joined
    return names, kinds, scaling, views, totals


def fit_harmonium(
    name: str,
    rng_key: PRNGKey,
    hyper: Mapping[str, Any],
    encoded: tuple,
    train: Callable | None = None,
    **info: Any,
) -> Fitted:
    """Initialize a harmonium on ``encoded`` (:func:`harmonium_views`' output), train
    it and pack it as method ``name``'s :class:`Fitted`.

    ``train(rng_key, params, kinds, images) -> (params, extra_params, info)`` trains
    the initialized harmonium on ``images = (views, totals)``; the default is CD
    (``hyper["steps"]`` steps), whose info is the last ten CD gaps ``cd_gap``. The
    keywords ``info`` come first in the fitted info, ``train``'s after them.

    Parameters
    ----------
    name : str
        The registered method.
    rng_key : PRNGKey
        Split into the initialization's and the training's keys.
    hyper : Mapping
        The method's hyper-parameters.
    encoded : tuple
        ``(names, kinds, scaling, views, totals)`` of :func:`harmonium_views`.
    train : Callable, optional
        The training (default: CD).
    **info : Any
        Entries of the fitted info.

    Returns
    -------
    Fitted
        The method's fitted model (:func:`build_fitted`).

    Raises
    ------
    FloatingPointError
        Training diverged (a :class:`~jaxannot.inference.support.SupportError`
        when a trained parameter is not finite).
    """
    names, kinds, scaling, views, totals = encoded
    k_init, k_fit = jax.random.split(rng_key)
    params = init_harmonium(k_init, kinds, views, hyper)
    images = (tuple(views), tuple(totals))
    try:
        if train is None:
            params, gaps = train_cd(k_fit, params, kinds, images, hyper)
            extra, trained = None, {"cd_gap": gaps[-10:].tolist()}
        else:
            params, extra, trained = train(k_fit, params, kinds, images)
    except FloatingPointError as err:
        raise FloatingPointError(_diverged(name, hyper, str(err))) from None
    check_trained(name, hyper, {"harmonium": params, **(extra or {})})
    return build_fitted(
        name, params, hyper, names, kinds, scaling, extra, **info, **trained
    )


def check_trained(name: str, hyper: Mapping[str, Any], tree: ArrayTree) -> None:
    """Raise :class:`~jaxannot.inference.support.SupportError` (a
    ``FloatingPointError``) naming the first trained parameter that is not finite:
    the step size sent training off to inf/NaN, and every score would be NaN.

    Parameters
    ----------
    name : str
        The method, for the message.
    hyper : Mapping
        Its hyper-parameters (the last iteration and the optimizer, for the
        message).
    tree : ArrayTree
        The trained parameters.

    Raises
    ------
    SupportError
        Some array of ``tree`` is not finite.
    """
    try:
        check_finite_tree(name, tree, iteration=_last_iteration(hyper))
    except SupportError as err:
        raise SupportError(_diverged(name, hyper, str(err))) from None


def _last_iteration(hyper) -> str:
    """The fit's last iteration, for a support error: its alternations (MMH) or CD
    steps."""
    for key in ("iterations", "steps"):
        if key in hyper:
            return f"{hyper[key]} ({key})"
    return "end of fit"


def check_fitted_support(name: str, params: ArrayTree, iteration: int | str) -> None:
    """Raise :class:`~jaxannot.inference.support.SupportError` unless a harmonium
    method's fitted ``params`` lie in their support: every floating array finite
    (weights, biases, log-variances, read-out) and every real view's scaling
    standard deviation positive (the views are divided by it).

    Parameters
    ----------
    name : str
        The method, for the message.
    params : NamedTuple
        Its fitted params (:mod:`jaxannot.methods.harmoniums.params`).
    iteration : int or str
        The fit's last iteration, for the message.
    """
    check_finite_tree(name, params, iteration=iteration)
    for view, scaling in (params.scaling or {}).items():
        check_support(
            f"{name}: scaling[{view!r}].std",
            scaling.std,
            iteration=iteration,
            lower=_TINY,
        )


def _diverged(name: str, hyper, reason: str) -> str:
    """The one-line message of a harmonium fit that diverged, with what to change."""
    return (
        f"{name}: training diverged ({reason}) with optimizer={hyper['optimizer']!r}, "
        f"learning_rate={hyper['learning_rate']}: try a smaller learning_rate"
        + ("" if hyper["optimizer"] == "adam" else " or optimizer='adam'")
    )


def build_fitted(
    name: str,
    params: hm.HarmoniumParams,
    hyper: Mapping[str, Any],
    names: Sequence[str],
    kinds: Sequence[str],
    scaling: Mapping[str, ViewScaling] | None,
    extra_params: Mapping[str, Any] | None = None,
    **info: Any,
) -> Fitted:
    """The fitted model of method ``name``: its declared params type holding the
    harmonium ``params``, the views' ``scaling`` and ``extra_params``.

    Parameters
    ----------
    name : str
        The registered method.
    params : HarmoniumParams
        The trained harmonium.
    hyper : Mapping
        The hyper-parameters it was fitted with.
    names : sequence of str
        The wings' view names.
    kinds : sequence of str
        The wings' kinds.
    scaling : Mapping or None
        The real views' scaling by name.
    extra_params : Mapping, optional
        Further fields of the params type (a read-out).
    **info : Any
        Entries of the fitted info, after the view names and kinds.

    Returns
    -------
    Fitted
        The fitted model.

    Raises
    ------
    SupportError
        A fitted array is off its support (:func:`check_fitted_support`).
    """
    out = get_method(name).params(
        harmonium=params, scaling=scaling or None, **(extra_params or {})
    )
    check_fitted_support(name, out, _last_iteration(hyper))
    return Fitted(
        method=name,
        params=out,
        hyper=dict(hyper),
        info={"view_names": list(names), "harmonium_kinds": list(kinds), **info},
    )


def view_scaling(fitted: Fitted) -> dict:
    """The fitted views' scaling by view name (empty when none is real-valued).

    Parameters
    ----------
    fitted : Fitted
        A harmonium method's fitted model.

    Returns
    -------
    dict
        View name -> its scaling.
    """
    return fitted.params.scaling or {}


def harmonium_of(fitted: Fitted) -> tuple[hm.HarmoniumParams, tuple, list]:
    """The harmonium of a fitted model, ready to compute with.

    Parameters
    ----------
    fitted : Fitted
        A harmonium method's fit, as :func:`view_scaling` takes it.

    Returns
    -------
    tuple of (HarmoniumParams, tuple, list)
        The parameters as JAX arrays, the wings' kinds and their view names.
    """
    params = jax.tree.map(jnp.asarray, fitted.params.harmonium)
    return params, tuple(fitted.info["harmonium_kinds"]), fitted.info["view_names"]


# ----------------------------------------------------------------- jitted kernels
def _bucketed(kernel):
    """``kernel`` (per-image, jitted) run on the images padded to their row bucket
    (:mod:`jaxannot.runtime.row_buckets`, copies of the last image): one program
    for every image count of a bucket; the padded rows of its output are dropped
    on the host (a slice, or ``jnp.asarray``, of a new shape would compile). It
    keeps the kernel's name and docstring."""

    @wraps(kernel)
    def run(params, kinds, views, *args, **kwargs):
        n = views[0].shape[0]
        padded = [pad_to_bucket(tuple(a))[0] for a in (views, *args[:1])]
        out = kernel(params, kinds, *padded, *args[1:], **kwargs)
        return jax.tree.map(lambda a: jax.device_put(np.asarray(a)[:n]), out)

    return run


@_bucketed
@partial(jax.jit, static_argnames=("kinds",))
def clamped_hidden(
    params: hm.HarmoniumParams, kinds: tuple, views: Sequence[Array]
) -> Array:
    """E_q0[h] of every image (all views clamped): the single linear pass.

    Parameters
    ----------
    params : HarmoniumParams
        The harmonium.
    kinds : tuple of str
        The wings' kinds (static).
    views : sequence of Array
        The encoded views, ``[n, d_v]`` each.

    Returns
    -------
    Array
        The hidden means ``[n, K]``.
    """
    return jax.vmap(lambda v: hm.hidden_mean(params, v))(tuple(views))


@_bucketed
@partial(jax.jit, static_argnames=("kinds", "free", "sweeps"))
def infer_free_view(
    params: hm.HarmoniumParams,
    kinds: tuple,
    views: Sequence[Array],
    totals: Sequence[Array],
    free: int,
    sweeps: int,
) -> tuple[Array, Array]:
    """Mean field with every view but ``free`` clamped; ``views[free]`` is ignored.

    Parameters
    ----------
    params, kinds, views
        As :func:`clamped_hidden` takes them.
    totals : sequence of Array
        Their per-image totals.
    free : int
        The view to infer (static).
    sweeps : int
        Mean-field sweeps (static).

    Returns
    -------
    tuple of (Array, Array)
        The free view's means ``[n, d_free]`` and the hidden means ``[n, K]``.
    """
    clamp = tuple(v != free for v in range(len(kinds)))

    def one(vs, ts):
        vs = list(vs)
        vs[free] = jnp.zeros_like(vs[free])  # no evidence for the free view
        state = hm.clamped_state(params, kinds, vs)
        state = hm.mean_field(params, kinds, state, ts, num_sweeps=sweeps, clamp=clamp)
        return state.means[free], state.hidden

    return jax.vmap(one)(tuple(views), tuple(totals))


# ----------------------------------------------------------------- dwh (annotation)
@uses_defaults("dwh")
def fit_dwh(corpus: Corpus, *, rng_key: PRNGKey, hyper: dict) -> Fitted:
    """DWH with the words as a Bernoulli wing next to the feature views."""
    if corpus.words is None:
        raise ValueError(
            f"method 'dwh' needs words to annotate; corpus {corpus.name!r} "
            "has none (for classification use 'dwh-svm')"
        )
    train = corpus.observed()
    words = jax.device_put((np.asarray(train.words) > 0).astype(np.float32))
    wing = ("__words__", "bernoulli", words)
    encoded = harmonium_views(train, hyper, wing, first=True)
    return fit_harmonium("dwh", rng_key, hyper, encoded)


def _dwh_infer(fitted, corpus):
    params, kinds, names = harmonium_of(fitted)
    views, totals = encode(corpus, names[1:], kinds[1:], view_scaling(fitted))
    n = corpus.num_images
    views = [jnp.zeros((n, params.weights[0].shape[0])), *views]
    totals = [jnp.ones(n), *totals]
    return infer_free_view(
        params,
        kinds,
        tuple(views),
        tuple(totals),
        0,
        int(fitted.hyper["annotate_sweeps"]),
    )


def score_words_dwh(fitted: Fitted, corpus: Corpus) -> jax.Array:
    """:math:`E_q[x_i]` of every word after mean field with the features clamped."""
    return _dwh_infer(fitted, corpus)[0]


def _embed_dwh(fitted, corpus):
    return _dwh_infer(fitted, corpus)[1]


# ----------------------------------------------------------------- shared outputs
def _twh_infer(fitted, corpus):
    params, kinds, names = harmonium_of(fitted)
    views, totals = encode(corpus, names[:-1], kinds[:-1], view_scaling(fitted))
    n, t = corpus.num_images, int(fitted.info["num_classes"])
    views = [*views, jnp.zeros((n, t))]
    totals = [*totals, jnp.ones(n)]
    return infer_free_view(
        params,
        kinds,
        tuple(views),
        tuple(totals),
        len(kinds) - 1,
        int(fitted.hyper["annotate_sweeps"]),
    )


def embed_harmonium(fitted: Fitted, corpus: Corpus) -> jax.Array:
    """:math:`E[h]` per image: the clamped linear pass over the feature wings for
    ``mmh`` / ``mmh-regression`` / ``dwh-svm`` (an ``mmh`` words wing is left out),
    mean field with the words / label wing free for ``dwh`` / ``twh``."""
    if fitted.method == "dwh":
        return _embed_dwh(fitted, corpus)
    if fitted.method == "twh":
        return _twh_infer(fitted, corpus)[1]
    if fitted.method == "svm":
        raise ValueError("the flat 'svm' has no latent space to embed into")
    params, kinds, names = harmonium_of(fitted)
    if fitted.info.get("words_wing", False):  # mmh's words wing (last) is not clamped
        kinds, names = kinds[:-1], names[:-1]
    views, _ = encode(corpus, names, kinds, view_scaling(fitted))
    return clamped_hidden(params, kinds, tuple(views))


def score_classes(fitted: Fitted, corpus: Corpus) -> jax.Array:
    """Class scores ``[images, classes]`` (higher = more likely)."""
    if fitted.method == "twh":
        return _twh_infer(fitted, corpus)[0]
    if fitted.method == "svm":
        names, kinds = fitted.info["view_names"], fitted.info["harmonium_kinds"]
        views, _ = encode(corpus, names, kinds, view_scaling(fitted))
        feats = mmh_steps.with_offset(jnp.concatenate(views, axis=1))
    else:
        feats = mmh_steps.with_offset(embed_harmonium(fitted, corpus))
    return cs.decision_function(jnp.asarray(fitted.params.predictor), feats)


def predict_labels(fitted: Fitted, corpus: Corpus) -> jax.Array:
    """Class predictions: ``argmax`` of :func:`score_classes`."""
    return jnp.argmax(score_classes(fitted, corpus), axis=1).astype(jnp.int32)


_SUMMARY = "seed 001 (Chen et al. TPAMI 2012)"
register(
    Method(
        name="dwh",
        fit=fit_dwh,
        params=DwhParams,
        score_words=score_words_dwh,
        embed=embed_harmonium,
        hyper=method_defaults("dwh"),
        needs=("words",),
        summary=f"dual-wing harmonium annotator (words + feature wings), {_SUMMARY}",
        estimator_name="DWH",
        score_meaning="E[word unit] after mean field, a Bernoulli mean",
    )
)
