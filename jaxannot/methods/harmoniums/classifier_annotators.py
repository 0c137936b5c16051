"""Supervised harmonium methods: ``dwh-svm``, ``twh``, ``mmh``, ``mmh-regression``, and
the flat ``svm`` baseline (seed 001). The shared outputs are in
:mod:`jaxannot.methods.harmoniums.dwh_annotators`, the corpus-to-wings encoding in
:mod:`.views`, ``mmh-regression``'s data and read-outs in :mod:`.regression`.

``dwh-svm``
    Two-stage baseline: a DWH on the feature views, then a Crammer–Singer SVM on
    :math:`E_{q_0}[h]`.
``twh``
    Tri-wing (supervised) harmonium: a softmax label wing (seed 001 eq. 3) trained by
    CD; prediction runs mean field with the label wing free (§4.4's iterative test).
``mmh``
    Max-margin harmonium (§4.1): CD + hinge loss alternating with the SVM (the V-step
    solves P1, ``svm_step="p1"``); prediction is the single linear pass
    :math:`\\arg\\max_y V_y^\\top [E_{q_0}[h], 1]` with :math:`E_{q_0}[h] = \\lambda +
    \\sum_v W_v^\\top x_v` over the feature views. When the corpus has annotation words
    other than the one-hot classes (``words_wing="auto"``), the words are one more
    Bernoulli wing of the likelihood — seed 001's Flickr set-up, tags :math:`\\mathbf
    x` next to the features :math:`\\mathbf z` — and ``score_words`` annotates as §4.4
    says: run the mean-field updates (7) with the features clamped and the words free
    and rank :math:`E_q[x_i]`. The hinge's :math:`E_{q_0}[h]` uses the feature views
    only, the views a test image has.
``mmh-regression``
    MMH for a real response (§4.2, P2): the V-step is the ε-insensitive SVR dual (eq.
    12), the Θ-step adds eq. (11)'s Lagrangian term. The response is the class label
    read as a number (an ordinal rating, as the paper's hotel-review ratings) or, with
    ``target_view=NAME``, column ``target_column`` of a real view that is then left out
    of the inputs. ``predict_labels`` returns the real predictions (floats).
``svm``
    Crammer–Singer SVM on the concatenated, standardized views.

All but ``mmh-regression`` (with ``target_view``) need class labels and raise
``ValueError`` on a corpus without them.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

import jax
import jax.numpy as jnp

from jaxannot.annotators.base import Fitted, Method, register
from jaxannot.annotators.hyper_spec import method_defaults, uses_defaults
from jaxannot.methods.harmoniums import max_margin_harmonium as mmh_inf
from jaxannot.methods.harmoniums import mmh_steps
from jaxannot.methods.harmoniums.cd_training import (
    init_and_train,
)
from jaxannot.methods.harmoniums.dwh_annotators import (
    build_fitted,
    check_fitted_support,
    check_trained,
    clamped_hidden,
    embed_harmonium,
    fit_harmonium,
    harmonium_of,
    harmonium_views,
    infer_free_view,
    predict_labels,
    score_classes,
    view_scaling,
)
from jaxannot.methods.harmoniums.mmh_training import mmh_alternation
from jaxannot.methods.harmoniums.params import (
    ClassifierParams,
    DwhParams,
    RegressorParams,
    SvmParams,
)
from jaxannot.methods.harmoniums.regression import (
    predict_regression,
    regression_data,
    regression_response,
)
from jaxannot.methods.harmoniums.views import encode, labels_of, view_setup
from jaxannot.runtime.row_buckets import bucket_rows, pad_rows, pad_to_bucket, row_mask
from jaxannot.solvers import multiclass_svm as cs

if TYPE_CHECKING:
    from jaxannot.data.corpus import Corpus
    from jaxannot.types import PRNGKey

__all__ = [
    "fit_dwh_svm",
    "fit_twh",
    "fit_mmh",
    "fit_mmh_regression",
    "fit_svm",
    "score_words_mmh",
    "predict_regression",
]


def _labels_svm(rng_key, feats, train, num_classes: int, hyper) -> cs.CSState:
    """The Crammer–Singer SVM of ``train``'s labels on ``feats`` ``[n, F+1]`` (offset
    last; rows past ``train``'s images are padding and zero) at :math:`C = C_2 / C_1`
    within ``hyper["svm_epochs"]`` epochs; the rows padded to their bucket
    (:mod:`jaxannot.runtime.row_buckets`), so that one program fits every row count
    of a bucket. Only the state's weights are meaningful."""
    n = train.num_images
    size = bucket_rows(feats.shape[0])
    feats = pad_rows(feats, size)
    y = pad_rows(np.asarray(train.labels, np.int32), size)
    state, _ = cs.fit_multiclass_svm(
        rng_key,
        feats,
        y,
        num_classes,
        hyper["c2"] / hyper["c1"],
        stop=dataclasses.replace(cs.DEFAULT_STOP, max_epochs=hyper["svm_epochs"]),
        mask=row_mask(n, size),
    )
    return state


@uses_defaults("dwh-svm")
def fit_dwh_svm(corpus: Corpus, *, rng_key: PRNGKey, hyper: dict) -> Fitted:
    """Two stages: DWH on the feature views by CD, then the SVM on E_q0[h]."""
    labels, num_classes = labels_of(corpus, "dwh-svm")
    train = corpus.subset(labels >= 0)
    names, kinds, scaling, views, totals = harmonium_views(train, hyper)
    k_init, k_fit, k_svm = jax.random.split(rng_key, 3)
    params, gaps = init_and_train(k_init, k_fit, kinds, views, totals, hyper)
    check_trained("dwh-svm", hyper, {"harmonium": params})
    # the rows padded to their bucket: one program per bucket, not per row count
    padded, mask = pad_to_bucket(tuple(views))
    hidden = clamped_hidden(params, tuple(kinds), padded)
    # a two-stage baseline: the SVM sees standardized E_q0[h], folded back into V
    center, std = mmh_steps.masked_moments(hidden, mask)
    scale = std + 1e-6
    feats = mmh_steps.with_offset((hidden - center) / scale) * mask[:, None]
    svm = _labels_svm(k_svm, feats, train, num_classes, hyper)
    svm = svm._replace(weights=mmh_steps.to_raw(svm.weights, center, scale))
    return build_fitted(
        "dwh-svm",
        params,
        hyper,
        names,
        kinds,
        scaling,
        {"predictor": svm.weights},
        num_classes=num_classes,
        cd_gap=gaps[-10:].tolist(),
    )


def _use_words_wing(train, labels, num_classes, setting: str) -> bool:
    if setting == "no" or train.words is None:
        return False
    if setting == "yes":
        return True
    onehot = np.eye(num_classes, dtype=bool)[labels]
    same = train.words.shape[1] == num_classes and np.array_equal(
        np.asarray(train.words) > 0, onehot
    )
    return not same  # words = the one-hot classes add nothing to the hinge's labels


@uses_defaults("mmh")
def fit_mmh(corpus: Corpus, *, rng_key: PRNGKey, hyper: dict) -> Fitted:
    """Max-margin harmonium (seed 001 §4.1) on the feature views (+ a words wing)."""
    labels, num_classes = labels_of(corpus, "mmh")
    train = corpus.subset(labels >= 0)
    labels = np.asarray(train.labels)
    words_wing = _use_words_wing(train, labels, num_classes, hyper["words_wing"])
    wing = None
    if words_wing:  # last, so that the hinge's E_q0[h] (skip_last) leaves it out
        words = jax.device_put((np.asarray(train.words) > 0).astype(np.float32))
        wing = ("__words__", "bernoulli", words)
    solve = partial(
        mmh_inf.fit_mmh_classifier,
        labels=jnp.asarray(labels, jnp.int32),
        num_classes=num_classes,
    )
    return fit_harmonium(
        "mmh",
        rng_key,
        hyper,
        harmonium_views(train, hyper, wing),
        mmh_alternation(solve, hyper, "svm", skip_last=words_wing),
        num_classes=num_classes,
        words_wing=words_wing,
    )


def score_words_mmh(fitted: Fitted, corpus: Corpus) -> jax.Array:
    """Annotation by an MMH (seed 001 §4.4): :math:`E_q[x_i]` of every word after the
    mean-field updates (7) with the feature views clamped and the words wing free.

    A model fitted without a words wing (its corpus's words were the one-hot classes)
    scores each word-class by its SVM score :math:`V_y^\\top [E_{q_0}[h], 1]`.
    """
    if not fitted.info.get("words_wing", False):
        return score_classes(fitted, corpus)
    params, kinds, names = harmonium_of(fitted)
    views, totals = encode(corpus, names[:-1], kinds[:-1], view_scaling(fitted))
    n = corpus.num_images
    views = [*views, jnp.zeros((n, params.weights[-1].shape[0]))]
    totals = [*totals, jnp.ones(n)]
    free = len(kinds) - 1
    sweeps = int(fitted.hyper["annotate_sweeps"])
    return infer_free_view(params, kinds, tuple(views), tuple(totals), free, sweeps)[0]


@uses_defaults("mmh-regression")
def fit_mmh_regression(corpus: Corpus, *, rng_key: PRNGKey, hyper: dict) -> Fitted:
    """Max-margin harmonium regression (seed 001 §4.2, P2) on the feature views.

    The response is standardized with the training mean and standard deviation
    before the ε-insensitive V-step (so ``epsilon`` is in standard deviations of the
    response) and mapped back by :func:`predict_regression`.
    """
    train, target = regression_data(corpus, hyper)
    mean, std = float(target.mean()), float(target.std() + 1e-12)
    solve = partial(
        mmh_inf.fit_mmh_regressor,
        targets=jnp.asarray((target - mean) / std),
        epsilon=hyper["epsilon"],
    )
    return fit_harmonium(
        "mmh-regression",
        rng_key,
        hyper,
        harmonium_views(train, hyper),
        mmh_alternation(solve, hyper, "svr"),
        target_mean=mean,
        target_std=std,
    )


@uses_defaults("twh")
def fit_twh(corpus: Corpus, *, rng_key: PRNGKey, hyper: dict) -> Fitted:
    """Tri-wing harmonium: feature wings plus a softmax label wing, trained by CD."""
    labels, num_classes = labels_of(corpus, "twh")
    train = corpus.subset(labels >= 0)
    onehot = jax.device_put(
        np.eye(num_classes, dtype=np.float32)[np.asarray(train.labels)]
    )
    wing = ("__labels__", "softmax", onehot)
    encoded = harmonium_views(train, hyper, wing)
    return fit_harmonium("twh", rng_key, hyper, encoded, num_classes=num_classes)


@uses_defaults("svm")
def fit_svm(corpus: Corpus, *, rng_key: PRNGKey, hyper: dict) -> Fitted:
    """Crammer–Singer SVM on the concatenated standardized views (plus an offset)."""
    labels, num_classes = labels_of(corpus, "svm")
    train = corpus.subset(labels >= 0)
    names, kinds, scaling = view_setup(train, "bernoulli")
    views, _ = encode(train, names, kinds, scaling)
    # on the host: eager jnp ops would compile per row count
    ones = np.ones((train.num_images, 1), np.float32)
    feats = np.concatenate([*map(np.asarray, views), ones], axis=1)
    state = _labels_svm(rng_key, feats, train, num_classes, hyper)
    params = SvmParams(state.weights, scaling or None)
    check_fitted_support("svm", params, f"{hyper['svm_epochs']} (svm_epochs)")
    return Fitted(
        "svm",
        params,
        dict(hyper),
        {"view_names": names, "harmonium_kinds": kinds, "num_classes": num_classes},
    )


_SUMMARY = "seed 001 (Chen et al. TPAMI 2012)"


def _classifier(
    name, fit, summary, needs=("labels",), params=ClassifierParams, **readouts
):
    """Register a seed-001 classifier whose fitted parameters are a ``params``:
    latent-space ``embed`` and class ``predict_labels`` unless ``readouts`` says
    otherwise."""
    readouts = {"embed": embed_harmonium, "predict_labels": predict_labels, **readouts}
    register(
        Method(
            name=name,
            fit=fit,
            params=params,
            hyper=method_defaults(name),
            needs=needs,
            summary=summary,
            **readouts,
        )
    )


_classifier(
    "dwh-svm",
    fit_dwh_svm,
    f"DWH latent space + Crammer-Singer SVM, {_SUMMARY}",
    estimator_name="DWHSVM",
    class_scores=score_classes,
)
_classifier(
    "twh",
    fit_twh,
    f"tri-wing harmonium with a softmax label wing (MLE by CD), {_SUMMARY}",
    params=DwhParams,
    estimator_name="TWH",
    class_scores=score_classes,
)
_classifier(
    "mmh",
    fit_mmh,
    f"max-margin harmonium (CD + hinge loss, alternating SVM), {_SUMMARY}",
    score_words=score_words_mmh,
    estimator_name="MMH",
    class_scores=score_classes,
)
_classifier(
    "mmh-regression",
    fit_mmh_regression,
    f"max-margin harmonium regression (CD + epsilon-SVR), {_SUMMARY}",
    params=RegressorParams,
    needs=(),
    predict_labels=predict_regression,
    response=regression_response,
)
_classifier(
    "svm",
    fit_svm,
    "Crammer-Singer linear SVM on the concatenated standardized views",
    params=SvmParams,
    embed=None,
    estimator_name="SVM",
    class_scores=score_classes,
)
