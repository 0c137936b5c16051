"""``ensemble``: a weighted fusion of registered methods, its setting chosen by
cross-validation on the training images.

Fitting, on the images whose words are observed:

1. Out-of-fold scores: the images are cut into ``folds`` folds
   (:func:`~jaxannot.data.protocols.kfold_rows`, seed 0); every base is fitted on
   the other folds and scores the held-out one. Only the corpus given to ``fit``
   takes part: ``jaxannot evaluate`` gives it the training images, so no test image
   enters a fold.
2. Every setting of :func:`~.fusion.candidates` (weights on a simplex grid of
   ``step``, the ``reweight`` and ``head`` rules, each frequency exponent β) is
   scored on those out-of-fold scores by :func:`~.fusion.choose` over the ranking
   metrics among ``targets`` (``map``, ``lrap``; all of ``targets`` when it names
   neither); the best is kept.
3. The per-word annotation rule (:mod:`.words`): each word's threshold on the
   chosen fusion's distribution, and how many of each image's first words they
   choose (``per_word``, tried when ``targets`` names ``word_f1@5`` or
   ``n_plus@5``), scored by :func:`~.words.choose_per_word` over all of ``targets``
   (cross-fitted thresholds); the best is kept, with the thresholds fitted on every
   image.
4. Every base is fitted on all those images (with the ensemble's key: the same fit as
   the base alone) and stored with the chosen weights and the thresholds.

A base that cannot fit the corpus (it needs non-negative features and a view has
negative values) is left out, named in ``Fitted.info["skipped"]``.

``Fitted.info`` holds the chosen setting (``chosen``), every candidate and its
cross-validation score (``candidates``), the per-word rule's table
(``per_word``: the trade-off of the per-word and per-image metrics on the training
folds), the best base's out-of-fold metrics (``base_best``), each base's
hyper-parameters and info, and the cost: ``cv_seconds`` (the fold fits and the
search) and ``bases_seconds`` (the final fits).
"""

from __future__ import annotations

import time

import numpy as np

import jax

from jaxannot.annotators.base import Fitted, get_method, register_words_method
from jaxannot.annotators.hyper_spec import uses_defaults
from jaxannot.annotators.hyper_values import Hyper, fit_parsed, parse_hyper
from jaxannot.data.corpus import Corpus
from jaxannot.data.protocols import kfold_rows
from jaxannot.methods.ensemble import words
from jaxannot.methods.ensemble.fusion import as_distribution, choose, measure
from jaxannot.methods.ensemble.fusion import fused_scores as _fused
from jaxannot.methods.ensemble.params import EnsembleParams
from jaxannot.runtime.programs import keep_programs

__all__ = ["ENSEMBLE", "parse_bases"]


def parse_bases(bases: str) -> dict[str, tuple[str, Hyper]]:
    """The base specifications of ``bases`` (comma-separated ``name`` or
    ``name:key=value:...``), each as its method's name and its parsed values.

    Raises
    ------
    ValueError
        An empty list, a repeated base, ``ensemble`` itself, or a method that does
        not score words; ``KeyError`` for an unknown method.
    """
    specs = [s.strip() for s in bases.split(",") if s.strip()]
    if not specs or len(set(specs)) != len(specs):
        raise ValueError(
            f"bases must list distinct methods, comma-separated, got {bases!r}"
        )
    out = {}
    for spec in specs:
        name, *pairs = spec.split(":")
        method = get_method(name)
        if name == "ensemble" or not method.score_words or "words" not in method.needs:
            raise ValueError(
                f"bases: {name!r} is not a word-scoring method; name others"
            )
        out[spec] = (name, parse_hyper(method, pairs))
    return out


def _applicable(bases, corpus: Corpus) -> tuple[dict, list[str]]:
    """The bases that can fit ``corpus`` and the specs of those that cannot (a base
    that needs non-negative features, given a view with negative values)."""
    kept, skipped = {}, []
    for spec, (name, hyper) in bases.items():
        needs = get_method(name).needs_non_negative(hyper)
        if needs and (corpus.features(hyper.get("view", "")) < 0).any():
            skipped.append(spec)
        else:
            kept[spec] = (name, hyper)
    if not kept:
        raise ValueError(f"bases: none of {list(bases)} fits this corpus; name others")
    return kept, skipped


def _fit_base(spec: str, base: tuple[str, Hyper], corpus: Corpus, rng_key) -> Fitted:
    """The base ``spec`` (its method's name and values ``base``) fitted on
    ``corpus``: the same fit as the base alone."""
    name, hyper = base
    return fit_parsed(get_method(name), corpus, rng_key=rng_key, hyper=hyper)


def _fit_bases(bases, corpus: Corpus, rng_key) -> dict[str, Fitted]:
    return {
        spec: _fit_base(spec, base, corpus, rng_key) for spec, base in bases.items()
    }


def _parts_and_raws(fitted: dict[str, Fitted], corpus: Corpus):
    """Each base's distributions and raw scores on ``corpus``."""
    parts, raws = [], []
    for base in fitted.values():
        method = get_method(base.method)
        raw = np.asarray(method.score_words(base, corpus), np.float64)
        raws.append(raw)
        parts.append(as_distribution(raw, method.score_meaning is not None))
    return parts, raws


def _base_out_of_fold(
    spec: str, base: tuple[str, Hyper], corpus: Corpus, folds: int, rng_key
) -> tuple[np.ndarray, np.ndarray]:
    """One base's out-of-fold distributions and raw scores on ``corpus``: fold
    ``f``'s held-out images scored by the base fitted on the other folds with the
    key ``fold_in(rng_key, f + 1)`` (whatever the other bases)."""
    n, w = corpus.num_images, corpus.num_words
    part, raw = np.zeros((n, w)), np.zeros((n, w))
    for fold, rows in enumerate(kfold_rows(n, folds, seed=0)):
        held = np.zeros(n, dtype=bool)
        held[rows] = True
        key = None if rng_key is None else jax.random.fold_in(rng_key, fold + 1)
        fitted = _fit_base(spec, base, corpus.subset(~held), key)
        (part[rows],), (raw[rows],) = _parts_and_raws(
            {spec: fitted}, corpus.subset(held)
        )
    return part, raw


def _out_of_fold(bases, corpus: Corpus, folds: int, rng_key):
    """Every base's out-of-fold distributions and raw scores on ``corpus``."""
    got = [
        _base_out_of_fold(spec, base, corpus, folds, rng_key)
        for spec, base in bases.items()
    ]
    return [part for part, _ in got], [raw for _, raw in got]


@uses_defaults("ensemble")
def _fit(
    corpus: Corpus, *, rng_key=None, bases: str, folds: int, step: float, targets: str
) -> Fitted:
    # one fit: its bases' fits release no compiled program inside it
    # (jaxannot.runtime.programs), or every fold would compile them again
    with keep_programs():
        return _fit_kept(corpus, rng_key, bases, folds, step, targets)


def _fit_kept(
    corpus: Corpus, rng_key, bases: str, folds: int, step: float, targets: str
) -> Fitted:
    parsed, skipped = _applicable(parse_bases(bases), corpus)
    chosen_targets = [t.strip() for t in targets.split(",")]  # checked by its spec
    if abs(round(1 / step) * step - 1) > 1e-9:  # its spec: in (0, 1]
        raise ValueError(f"step must divide 1 (0.5, 0.25, 0.2, ...), got {step}")
    labelled = corpus.observed()
    truth = (np.asarray(labelled.words) > 0).astype(np.float64)
    prior = truth.mean(0) + 1.0 / truth.shape[0]
    ranking_targets = [t for t in chosen_targets if t in ("map", "lrap")]
    start = time.perf_counter()
    parts, raws = _out_of_fold(parsed, labelled, folds, rng_key)
    settings, best, base_best = choose(
        parts, raws, truth, prior, ranking_targets or chosen_targets, step
    )
    chosen = settings[best]
    others = [t for t in chosen_targets if t not in base_best]
    for m in others:
        base_best[m] = max(max(measure(r, truth, others)[m] for r in raws), 1e-12)
    mixture = _mixture(parts, chosen["weights"])
    table, kept = words.choose_per_word(
        _fused(parts, chosen["weights"], prior, chosen["rule"], chosen["beta"]),
        words.cross_fitted_ratios(mixture, truth, folds),
        lambda scores, targets: measure(scores, truth, targets),
        chosen_targets,
        base_best,
    )
    cv_seconds = time.perf_counter() - start
    fitted = _fit_bases(parsed, labelled, rng_key)
    params = EnsembleParams(
        np.asarray(chosen["weights"], np.float32),
        prior.astype(np.float32),
        words.thresholds(mixture, truth).astype(np.float32),
        {spec: base.params for spec, base in fitted.items()},
    )
    info = {
        "skipped": skipped,
        "chosen": {**chosen, "per_word": table[kept]["per_word"]},
        "candidates": settings,
        "per_word": table,
        "base_best": base_best,
        "base_hyper": {spec: base.hyper for spec, base in fitted.items()},
        "base_info": {spec: base.info for spec, base in fitted.items()},
        "cv_seconds": cv_seconds,
        "bases_seconds": time.perf_counter() - start - cv_seconds,
    }
    hyper = {"bases": bases, "folds": folds, "step": step, "targets": targets}
    return Fitted("ensemble", params, hyper, info)


def _score(fitted: Fitted, corpus: Corpus) -> np.ndarray:
    params, info = fitted.params, fitted.info
    weights = [float(x) for x in np.asarray(params.weights)]
    bases = {
        spec: Fitted(
            spec.partition(":")[0],
            params.bases[spec],
            info["base_hyper"][spec],
            info["base_info"][spec],
        )
        for spec in parse_bases(fitted.hyper["bases"])
        if spec in params.bases
    }
    # every base scores, a zero weight too: which programs run does not depend on
    # the weights a corpus chose
    parts, _ = _parts_and_raws(bases, corpus)
    chosen = info["chosen"]
    ranking = _fused(
        parts,
        weights,
        np.asarray(params.prior, np.float64),
        chosen["rule"],
        float(chosen["beta"]),
    )
    ratios = _mixture(parts, weights) / np.asarray(params.thresholds, np.float64)
    return words.with_head(ranking, ratios, int(chosen["per_word"]))


def _mixture(parts, weights) -> np.ndarray:
    """The fused distribution :math:`F = \\sum_b \\omega_b P_b`."""
    return sum(w * p for w, p in zip(weights, parts, strict=True))


ENSEMBLE = register_words_method(
    "ensemble",
    _fit,
    "weighted fusion of registered methods, weights and rule chosen by CV",
    score_words=_score,
    params=EnsembleParams,
)
