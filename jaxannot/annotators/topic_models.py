r"""Topic-model annotators of seed 000: mixture of unigrams (plain and
graph-regularized), pLSA-Words and Link-LDA.

All four read the bag/binary feature views of a corpus as visual-word counts and its
``words`` as the text bag; images whose words are hidden contribute their visual words
only. Every method works under both protocols:

- inductive: ``score_words`` folds in new images from their visual words alone
  (``lap-mix-unigram`` also links each new image to its k nearest fit images and
  maximizes its regularized objective with theirs fixed);
- transductive (seed 000's): ``score_fit_corpus`` returns the posteriors the fit
  computed for its own images — for ``lap-mix-unigram`` the graph-regularized ones —
  and annotates with :math:`p(w\mid d) = \sum_k \phi_{dk}\beta^{text}_{kw}`.

``mix-unigram``
    :mod:`jaxannot.models.mixture_of_unigrams` fitted by MAP-EM.
``lap-mix-unigram``
    The same model with the Laplacian-regularized E-step of
    :mod:`jaxannot.inference.lapvar` (``algorithm=lapvar1|lapvar2``) on a k-NN graph of
    the visual view (``neighbors``, ``weight``, ``metric``); ``lam`` is :math:`\lambda`.
``plsa-words``
    :mod:`jaxannot.models.plsa_words` (Monay & Gatica-Perez 2004), two stages on the
    annotated images, fold-in of every other image.
``link-lda``
    :mod:`jaxannot.models.link_lda` by batch variational Bayes.
"""

from __future__ import annotations

import functools

import numpy as np

import jax
import jax.numpy as jnp

from jaxannot.annotators.base import Fitted, Method, register, show_progress
from jaxannot.data.corpus import Corpus
from jaxannot.inference import lapvar
from jaxannot.inference.vem import VEM, ExactEStep
from jaxannot.models import link_lda as ll
from jaxannot.models import mixture_of_unigrams as mu
from jaxannot.models import plsa_words as pw

__all__ = ["MIX_UNIGRAM", "LAP_MIX_UNIGRAM", "PLSA_WORDS", "LINK_LDA"]


# --------------------------------------------------------------------- helpers
def _visual_views(corpus: Corpus, views: str = "") -> list[str]:
    """The bag/binary views used as visual words (``views``: comma list or all)."""
    if views:
        names = [v.strip() for v in views.split(",") if v.strip()]
        for v in names:
            corpus.view(v)  # KeyError listing the valid views
    else:
        names = [
            k for k, kind in corpus.view_kinds.items() if kind in ("bag", "binary")
        ]
    bad = [v for v in names if corpus.view_kinds[v] not in ("bag", "binary")]
    if not names or bad:
        valid = [
            k for k, kind in corpus.view_kinds.items() if kind in ("bag", "binary")
        ]
        raise ValueError(
            f"topic models need bag or binary views of visual words; corpus "
            f"{corpus.name!r} has {dict(corpus.view_kinds)} (usable: {valid})"
        )
    return names


def _visual(corpus: Corpus, names) -> tuple[np.ndarray, ...]:
    return tuple(np.asarray(corpus.views[v], np.float32) for v in names)


def _text(corpus: Corpus) -> np.ndarray:
    if corpus.words is None:
        raise ValueError(f"corpus {corpus.name!r} has no annotation words to model")
    if not np.any(np.asarray(corpus.word_mask)):
        raise ValueError("no image of the fit corpus has observed words")
    return np.asarray(corpus.words, np.float32)


def _check_topics(topics: int) -> None:
    if int(topics) < 1:
        raise ValueError(f"topics must be >= 1, got {topics}")


def _views_param(fitted: Fitted) -> list[str]:
    return [v for v in fitted.hyper["visual_views"].split(",") if v]


# ------------------------------------------------------- mixture of unigrams
def _mix_data(corpus, views, text_weight):
    vis = _visual(corpus, views)
    return (jnp.asarray(_text(corpus) * text_weight),) + tuple(map(jnp.asarray, vis))


def _mix_params(params: mu.MixtureParams, phi, extra=None) -> dict:
    out = {
        "log_pi": params.log_pi,
        "log_beta_text": params.log_betas[0],
        "log_beta_visual": {str(i): b for i, b in enumerate(params.log_betas[1:])},
        "phi": phi,
    }
    out.update(extra or {})
    return out


def _mix_unpack(fitted: Fitted) -> mu.MixtureParams:
    p = fitted.params
    vis = p["log_beta_visual"]
    return mu.MixtureParams(
        jnp.asarray(p["log_pi"]),
        tuple(jnp.asarray(vis[str(i)]) for i in range(len(vis))),
    )


def _mix_visual_phi(fitted: Fitted, corpus: Corpus) -> jax.Array:
    """Plain-VI posterior of each image from its visual words alone."""
    return mu.posterior(
        _mix_unpack(fitted),
        tuple(map(jnp.asarray, _visual(corpus, _views_param(fitted)))),
    )


@functools.cache
def _vem(algorithm: str = "exact") -> VEM:
    """One VEM per E-step kind, shared by every fit (compiled once per shape)."""
    del algorithm  # the E-step is assigned per fit; the cache key keeps them apart
    return VEM(mu.mixture_of_unigrams, local_site="z")


def _mix_kwargs(topics, pi_concentration, beta_concentration) -> dict:
    return dict(
        num_topics=int(topics),
        pi_concentration=float(pi_concentration),
        beta_concentration=float(beta_concentration),
    )


def _to_mixture_params(values: dict, num_views: int) -> mu.MixtureParams:
    return mu.MixtureParams(
        jnp.log(values["pi"]),
        tuple(jnp.log(values[f"beta_{v}"]) for v in range(num_views)),
    )


def _run_mixture(rng_key, data, kwargs, iterations, estep=None, init=None):
    """The mixture declaration fitted by VEM (closed-form M-step, registered);
    LapVar2 stops when its objective improves by less than 1e-6 (relative)."""
    vem = _vem("exact" if estep is None else estep.static_key[0])
    vem.estep = estep if estep is not None else ExactEStep()
    result = vem.run(
        rng_key,
        int(iterations),
        data,
        init_params=init,
        progress_bar=show_progress(),
        tolerance=1e-6 if vem.estep.keep_best else 0.0,
        **kwargs,
    )
    return result, _to_mixture_params(result.params, len(data))


def _mix_fit(
    corpus: Corpus,
    *,
    rng_key,
    topics=50,
    iterations=100,
    pi_concentration=1.0,
    beta_concentration=1.1,
    text_weight=1.0,
    views="",
) -> Fitted:
    _check_topics(topics)
    mu.check_priors(pi_concentration, beta_concentration)
    names = _visual_views(corpus, views)
    data = _mix_data(corpus, names, text_weight)
    kwargs = _mix_kwargs(topics, pi_concentration, beta_concentration)
    result, params = _run_mixture(rng_key, data, kwargs, iterations)
    phi = mu.posterior(params, data)
    hyper = dict(
        topics=topics,
        iterations=iterations,
        pi_concentration=pi_concentration,
        beta_concentration=beta_concentration,
        text_weight=text_weight,
        views=views,
        visual_views=",".join(names),
    )
    return Fitted(
        "mix-unigram",
        _mix_params(params, phi),
        hyper,
        {"objective": [float(-x) for x in result.losses]},
    )


def _mix_score(fitted: Fitted, corpus: Corpus) -> np.ndarray:
    phi = _mix_visual_phi(fitted, corpus)
    return np.asarray(
        mu.predict_words(phi, jnp.asarray(fitted.params["log_beta_text"]))
    )


def _mix_score_fit(fitted: Fitted) -> np.ndarray:
    return np.asarray(
        mu.predict_words(
            jnp.asarray(fitted.params["phi"]),
            jnp.asarray(fitted.params["log_beta_text"]),
        )
    )


def _mix_embed(fitted: Fitted, corpus: Corpus) -> np.ndarray:
    return np.asarray(_mix_visual_phi(fitted, corpus))


MIX_UNIGRAM = register(
    Method(
        name="mix-unigram",
        fit=_mix_fit,
        score_words=_mix_score,
        score_fit_corpus=_mix_score_fit,
        embed=_mix_embed,
        hyper=dict(
            topics=50,
            iterations=100,
            pi_concentration=1.0,
            beta_concentration=1.1,
            text_weight=1.0,
            views="",
        ),
        summary="multimodal mixture of unigrams, MAP-EM (Nigam et al. 2000)",
        needs=("words",),
    )
)


# ----------------------------------------------- Laplacian mixture of unigrams
def _graph_features(views: tuple[np.ndarray, ...]) -> np.ndarray:
    return np.concatenate(views, axis=1)


def _lap_fit(
    corpus: Corpus,
    *,
    rng_key,
    topics=50,
    lam=1.0,
    neighbors=10,
    weight="heat",
    metric="euclidean",
    algorithm="lapvar1",
    iterations=50,
    warm_start=20,
    sweeps=1,
    newton_steps=5,
    gamma=0.5,
    smoothing_steps=10,
    schedule="colouring",
    pi_concentration=1.0,
    beta_concentration=1.1,
    text_weight=1.0,
    views="",
) -> Fitted:
    from jaxannot.graph import knn_graph, knn_search

    _check_topics(topics)
    if algorithm not in lapvar.ALGORITHMS:
        raise ValueError(
            f"unknown algorithm {algorithm!r}; valid: {list(lapvar.ALGORITHMS)}"
        )
    if lam < 0:
        raise ValueError(f"lam must be >= 0, got {lam}")
    mu.check_priors(pi_concentration, beta_concentration)
    names = _visual_views(corpus, views)
    data = _mix_data(corpus, names, text_weight)
    feats = _graph_features(_visual(corpus, names))
    k = min(int(neighbors), corpus.num_images - 1)
    _, dist = knn_search(feats, feats, k, metric=metric, exclude_self=True)
    t = float(np.mean(np.asarray(dist))) or 1.0
    graph = knn_graph(feats, k, weight=weight, t=t, metric=metric)
    kwargs = _mix_kwargs(topics, pi_concentration, beta_concentration)
    if algorithm == "lapvar1":
        # the colour classes of a graph are fixed (colouring seed 0), so a refit with
        # another key reuses the compiled fit; sweeps visit them in a random order
        estep = lapvar.LapVar1(
            graph,
            lam,
            sweeps=int(sweeps),
            newton_steps=int(newton_steps),
            schedule=schedule,
        )
    else:
        estep = lapvar.LapVar2(graph, lam, gamma=gamma, smoothing=int(smoothing_steps))
    warm_key, run_key = jax.random.split(rng_key)
    init = None
    if int(warm_start) > 0:  # plain EM first: the regularized EM refines its optimum
        warm, _ = _run_mixture(warm_key, data, kwargs, warm_start)
        init = {k: v for k, v in warm.params.items() if k != "terms"}
    result, params = _run_mixture(run_key, data, kwargs, iterations, estep, init)
    objective = -result.losses[~np.isnan(result.losses)]
    hyper = dict(
        topics=topics,
        lam=lam,
        neighbors=neighbors,
        weight=weight,
        metric=metric,
        algorithm=algorithm,
        iterations=iterations,
        warm_start=warm_start,
        sweeps=sweeps,
        newton_steps=newton_steps,
        gamma=gamma,
        smoothing_steps=smoothing_steps,
        schedule=schedule,
        pi_concentration=pi_concentration,
        beta_concentration=beta_concentration,
        text_weight=text_weight,
        views=views,
        visual_views=",".join(names),
    )
    extra = {"graph_features": feats, "heat_width": np.float32(t)}
    return Fitted(
        "lap-mix-unigram",
        _mix_params(params, result.posteriors, extra),
        hyper,
        {"objective": [float(x) for x in objective]},
    )


def _lap_phi_new(fitted: Fitted, corpus: Corpus) -> jax.Array:
    """Regularized posteriors of new images linked to their k nearest fit images."""
    from jaxannot.graph import knn_search

    h, p = fitted.hyper, fitted.params
    names = _views_param(fitted)
    params = _mix_unpack(fitted)
    vis = tuple(map(jnp.asarray, _visual(corpus, names)))
    a = mu.linear_terms(params, vis)
    train = np.asarray(p["graph_features"])
    k = min(int(h["neighbors"]), train.shape[0])
    idx, dist = knn_search(
        _graph_features(_visual(corpus, names)), train, k, metric=h["metric"]
    )
    t = float(p["heat_width"])
    dist = np.asarray(dist, np.float64)
    if h["weight"] == "heat":
        w = np.exp(-(dist**2) / (2 * t * t))
    elif h["weight"] == "binary":
        w = np.ones_like(dist)
    else:
        q = _graph_features(_visual(corpus, names))
        qn = q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)
        tn = train / np.maximum(np.linalg.norm(train, axis=1, keepdims=True), 1e-12)
        w = np.maximum(0.0, np.einsum("qd,qkd->qk", qn, tn[np.asarray(idx)]))
    w = jnp.asarray(w, jnp.float32)
    phi_train = jnp.asarray(p["phi"])
    m = jnp.einsum("qk,qkt->qt", w, phi_train[jnp.asarray(idx)])
    d = w.sum(1)
    return _newton_batch(jax.nn.softmax(a, -1), a, m, d, jnp.float32(h["lam"]))


@jax.jit
def _newton_batch(phi0, a, m, d, lam):
    return jax.vmap(lapvar.newton_update, in_axes=(0, 0, 0, 0, None, None))(
        phi0, a, m, d, lam, 30
    )


def _lap_score(fitted: Fitted, corpus: Corpus) -> np.ndarray:
    phi = _lap_phi_new(fitted, corpus)
    return np.asarray(
        mu.predict_words(phi, jnp.asarray(fitted.params["log_beta_text"]))
    )


def _lap_embed(fitted: Fitted, corpus: Corpus) -> np.ndarray:
    return np.asarray(_lap_phi_new(fitted, corpus))


LAP_MIX_UNIGRAM = register(
    Method(
        name="lap-mix-unigram",
        fit=_lap_fit,
        score_words=_lap_score,
        score_fit_corpus=_mix_score_fit,
        embed=_lap_embed,
        hyper=dict(
            topics=50,
            lam=1.0,
            neighbors=10,
            weight="heat",
            metric="euclidean",
            algorithm="lapvar1",
            iterations=50,
            warm_start=20,
            sweeps=1,
            newton_steps=5,
            gamma=0.5,
            smoothing_steps=10,
            schedule="colouring",
            pi_concentration=1.0,
            beta_concentration=1.1,
            text_weight=1.0,
            views="",
        ),
        summary="LapMixUnigram: mixture of unigrams + Laplacian-regularized VI "
        "(LapVar1/LapVar2, seed 000)",
        needs=("words",),
    )
)


# ------------------------------------------------------------------ pLSA-Words
def _plsa_fit(
    corpus: Corpus,
    *,
    rng_key,
    topics=50,
    iterations=100,
    fold_in_iterations=50,
    smoothing=0.01,
    views="",
) -> Fitted:
    _check_topics(topics)
    names = _visual_views(corpus, views)
    text = _text(corpus)
    vis = _graph_features(_visual(corpus, names))
    mask = np.asarray(corpus.word_mask, bool)
    state, objectives = pw.fit_plsa_words(
        rng_key,
        text[mask],
        vis[mask],
        int(topics),
        num_iterations=int(iterations),
        smoothing=smoothing,
    )
    theta, _ = pw.fold_in(state.betas[1], vis, num_iterations=int(fold_in_iterations))
    theta = np.asarray(theta).copy()
    theta[mask] = np.asarray(state.theta)  # annotated images keep their text topics
    hyper = dict(
        topics=topics,
        iterations=iterations,
        fold_in_iterations=fold_in_iterations,
        smoothing=smoothing,
        views=views,
        visual_views=",".join(names),
    )
    return Fitted(
        "plsa-words",
        {"beta_text": state.betas[0], "beta_visual": state.betas[1], "theta": theta},
        hyper,
        {
            "objective_text": [float(x) for x in objectives["text"]],
            "objective_visual": [float(x) for x in objectives["visual"]],
        },
    )


def _plsa_theta(fitted: Fitted, corpus: Corpus) -> jax.Array:
    vis = _graph_features(_visual(corpus, _views_param(fitted)))
    theta, _ = pw.fold_in(
        jnp.asarray(fitted.params["beta_visual"]),
        vis,
        num_iterations=int(fitted.hyper["fold_in_iterations"]),
    )
    return theta


def _plsa_score(fitted: Fitted, corpus: Corpus) -> np.ndarray:
    return np.asarray(
        _plsa_theta(fitted, corpus) @ jnp.asarray(fitted.params["beta_text"])
    )


def _plsa_score_fit(fitted: Fitted) -> np.ndarray:
    return np.asarray(fitted.params["theta"]) @ np.asarray(fitted.params["beta_text"])


PLSA_WORDS = register(
    Method(
        name="plsa-words",
        fit=_plsa_fit,
        score_words=_plsa_score,
        score_fit_corpus=_plsa_score_fit,
        embed=lambda f, c: np.asarray(_plsa_theta(f, c)),
        hyper=dict(
            topics=50, iterations=100, fold_in_iterations=50, smoothing=0.01, views=""
        ),
        summary="pLSA-Words: text-defined pLSA topics, visual fold-in "
        "(Monay & Gatica-Perez 2004)",
        needs=("words",),
    )
)


# -------------------------------------------------------------------- Link-LDA
def _lda_fit(
    corpus: Corpus,
    *,
    rng_key,
    topics=50,
    iterations=100,
    inner=5,
    fold_in_inner=50,
    alpha=0.1,
    eta=0.01,
    views="",
) -> Fitted:
    _check_topics(topics)
    names = _visual_views(corpus, views)
    data = (_text(corpus),) + _visual(corpus, names)
    state, objective = ll.fit_vb(
        rng_key,
        data,
        int(topics),
        num_iterations=int(iterations),
        num_inner=int(inner),
        alpha=alpha,
        eta=eta,
    )
    # refresh the fit images' posteriors under the final λ (warm start)
    gamma = ll.fold_in(
        state.lambdas,
        data,
        jnp.float32(alpha),
        num_inner=int(fold_in_inner),
        gamma0=state.gamma,
    )
    hyper = dict(
        topics=topics,
        iterations=iterations,
        inner=inner,
        fold_in_inner=fold_in_inner,
        alpha=alpha,
        eta=eta,
        views=views,
        visual_views=",".join(names),
    )
    params = {
        "lambda_text": state.lambdas[0],
        "lambda_visual": {str(i): lam for i, lam in enumerate(state.lambdas[1:])},
        "gamma": gamma,
    }
    return Fitted(
        "link-lda", params, hyper, {"objective": [float(x) for x in objective]}
    )


def _lda_gamma(fitted: Fitted, corpus: Corpus) -> jax.Array:
    p = fitted.params
    vis = _visual(corpus, _views_param(fitted))
    lambdas = (jnp.asarray(p["lambda_text"]),) + tuple(
        jnp.asarray(p["lambda_visual"][str(i)]) for i in range(len(vis))
    )
    text = np.zeros((corpus.num_images, lambdas[0].shape[1]), np.float32)
    return ll.fold_in(
        lambdas,
        (text,) + vis,
        jnp.float32(fitted.hyper["alpha"]),
        num_inner=int(fitted.hyper["fold_in_inner"]),
    )


def _lda_words(gamma, lambda_text) -> np.ndarray:
    theta = gamma / gamma.sum(-1, keepdims=True)
    return np.asarray(theta @ ll.topic_word(jnp.asarray(lambda_text)))


def _lda_score(fitted: Fitted, corpus: Corpus) -> np.ndarray:
    return _lda_words(_lda_gamma(fitted, corpus), fitted.params["lambda_text"])


def _lda_score_fit(fitted: Fitted) -> np.ndarray:
    return _lda_words(jnp.asarray(fitted.params["gamma"]), fitted.params["lambda_text"])


def _lda_embed(fitted: Fitted, corpus: Corpus) -> np.ndarray:
    g = _lda_gamma(fitted, corpus)
    return np.asarray(g / g.sum(-1, keepdims=True))


LINK_LDA = register(
    Method(
        name="link-lda",
        fit=_lda_fit,
        score_words=_lda_score,
        score_fit_corpus=_lda_score_fit,
        embed=_lda_embed,
        hyper=dict(
            topics=50,
            iterations=100,
            inner=5,
            fold_in_inner=50,
            alpha=0.1,
            eta=0.01,
            views="",
        ),
        summary="Link-LDA: per-image topic proportions shared by the views, "
        "variational Bayes (Erosheva et al. 2004)",
        needs=("words",),
    )
)
