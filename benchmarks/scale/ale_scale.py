"""Streaming IALE concept detectors on a synthetic 1.5M x 512 corpus (seed 002 §4.2.4).

The corpus is generated chunk by chunk from a seed and never held in memory: each pass
of the fit (PCA covariance, clipping sample, histograms, then the smooth-function
statistics ``Uᵀ Λ U``, ``Uᵀ Λ y`` of eq. 7) regenerates the chunks. New images are
predicted in batches. Side by side, on a subsample where it finishes, scikit-learn's
``LinearSVC`` (liblinear, C by 3-fold cross-validation on the subsample's training
rows, ``choose_c``; at the paper's ``eps = 0.1`` with the dual and the primal solver,
and at scikit-learn's defaults — see ``linearsvc_settings``) and our own dual-CD linear
SVM (BSVM, the same C) on the same raw features are timed and scored against IALE-SF
trained on the same subsample. The search's CPU seconds are reported on their own.

Synthetic concepts: every image belongs to one of ``clusters`` Gaussian clusters in a
``latent``-dimensional space, mapped linearly to ``dims`` features plus isotropic
noise; concept ``k`` is a fixed random union of clusters (so concepts overlap and are
not linearly separable in general).

Run:  python -m benchmarks.scale.ale_scale   (the full 1.5M run, ~5 min on 2 cores)
      OPENBLAS_NUM_THREADS=1 python -m benchmarks.scale.ale_scale \
          --skip-full --subsample 40000          (the subsample comparison only)
      python -m benchmarks.scale.ale_scale --n 200000 --subsample 20000   (quick)
"""

from __future__ import annotations

import json
import os
import pathlib
import time

import numpy as np

import jax
import jax.numpy as jnp

from benchmarks.common.ale_corpus import (
    ConceptGenerator,
    choose_c,
    fit_linearsvc,
    linearsvc_settings,
    measure,
    peak_rss_mb,
)
from benchmarks.common.cli import script_parser
from benchmarks.common.device import device_record, use_device
from benchmarks.common.records import RESULTS, write_json
from jaxannot.methods.ale import smooth_function
from jaxannot.methods.ale.eigenfunctions import ale_embed, fit_ale
from jaxannot.solvers import linear_svm


def fit_iale_sf_streaming(gen, stream, n, chunk, args):
    """Fit IALE + smooth function with bounded memory; returns (model, alpha, secs)."""
    start, cpu = time.perf_counter(), time.process_time()
    model = fit_ale(
        gen.source(stream, n, chunk),
        n_components=args.pca,
        num_bins=args.bins,
        num_eigenfunctions=args.eigenvectors,
        chunk_size=chunk,
        standardize=False,
    )
    c = model.eigenfunctions.table.shape[0]
    stats = smooth_function.init_statistics(c, gen.membership.shape[1])
    for x, y in gen.source(stream, n, chunk, labels=True)():
        u = ale_embed(model, x, batch_size=chunk)
        weight = jnp.full(len(x), args.lam, jnp.float32)
        stats = smooth_function.accumulate(
            stats, jnp.asarray(u), jnp.asarray(2.0 * y - 1.0), weight
        )
    # U has unit mean-square columns: eq. (7) with n Σ (as the iale-sf method)
    sigma = np.asarray(model.eigenfunctions.eigenvalues) * model.pca.count
    alpha = smooth_function.solve_smooth_function(stats, sigma)
    fit_cpu_seconds[0] = time.process_time() - cpu
    return model, alpha, time.perf_counter() - start


#: CPU seconds (all threads) of the last streaming fit, next to its wall time.
fit_cpu_seconds = [0.0]


def predict_iale_sf(model, alpha, x, batch):
    start = time.perf_counter()
    scores = np.concatenate(
        [
            np.asarray(
                smooth_function.smooth_scores(
                    ale_embed(model, x[i : i + batch], batch_size=batch), alpha
                )
            )
            for i in range(0, len(x), batch)
        ]
    )
    return scores, time.perf_counter() - start


def main(argv=None):
    parser = script_parser(__doc__)
    parser.add_argument("--n", type=int, default=1_500_000)
    parser.add_argument("--dims", type=int, default=512)
    parser.add_argument("--concepts", type=int, default=10)
    parser.add_argument("--chunk", type=int, default=50_000)
    parser.add_argument("--test", type=int, default=50_000)
    parser.add_argument("--subsample", type=int, default=20_000)
    parser.add_argument("--pca", type=int, default=64)
    parser.add_argument("--bins", type=int, default=50)
    parser.add_argument("--eigenvectors", type=int, default=500)
    parser.add_argument("--lam", type=float, default=100.0)
    parser.add_argument(
        "--c",
        default="cv",
        help="LinearSVC's and BSVM's C: a number, or 'cv' (default) for 3-fold "
        "cross-validation on the subsample (choose_c)",
    )
    parser.add_argument("--bsvm-epochs", type=int, default=100)
    parser.add_argument("--skip-full", action="store_true")
    parser.add_argument("--skip-subsample", action="store_true")
    parser.add_argument(
        "--out",
        default=str(RESULTS / "ale_scale.json"),
    )
    args = parser.parse_args(argv)
    use_device(args.device)

    gen = ConceptGenerator(dims=args.dims, concepts=args.concepts)
    x_test, y_test = gen.materialize(stream=2, n=args.test, chunk=args.chunk)
    result = {"device": device_record(), "cpu_count": os.cpu_count()}

    # ---- the full streaming run (data regenerated per pass, never materialized)
    if not args.skip_full:
        model, alpha, secs = fit_iale_sf_streaming(gen, 1, args.n, args.chunk, args)
        scores, pred_secs = predict_iale_sf(model, alpha, x_test, 1000)
        result["full"] = {
            "args": {**vars(args), "out": pathlib.Path(args.out).name},
            "n": args.n,
            "fit_seconds": secs,
            "fit_cpu_seconds": fit_cpu_seconds[0],
            "predict_seconds": pred_secs,
            "predict_images": args.test,
            "peak_rss_mb": peak_rss_mb(),
            "data_mb_if_materialized": args.n * args.dims * 4 / 2**20,
            **measure(scores, y_test),
        }
        print("full IALE-SF", result["full"], flush=True)

    # ---- subsample: IALE-SF vs LinearSVC vs our BSVM on the same features
    if args.skip_subsample:
        return _finish(result, args)
    x_sub, y_sub = gen.materialize(stream=3, n=args.subsample, chunk=args.chunk)
    sub_chunk = min(args.chunk, args.subsample)
    # first fit includes JAX compilation; the second is the warm (steady-state) time
    _, _, cold = fit_iale_sf_streaming(gen, 3, args.subsample, sub_chunk, args)
    model, alpha, secs = fit_iale_sf_streaming(gen, 3, args.subsample, sub_chunk, args)
    scores, _ = predict_iale_sf(model, alpha, x_test, 1000)
    sub = {
        "args": {**vars(args), "out": pathlib.Path(args.out).name},
        "n": args.subsample,
        "iale_sf": {
            "fit_seconds": secs,
            "fit_seconds_with_compile": cold,
            "fit_cpu_seconds": fit_cpu_seconds[0],
            **measure(scores, y_test),
        },
    }
    print("subsample IALE-SF", sub["iale_sf"], flush=True)

    if args.c == "cv":
        sub["c_by_cv"] = choose_c(x_sub, y_sub)
        c = sub["c_by_cv"]["c"]
        print("subsample C by 3-fold CV:", c, flush=True)
    else:
        c = float(args.c)
    for key, settings in linearsvc_settings(c, *x_sub.shape).items():
        sub[key] = fit_linearsvc(x_sub, y_sub, x_test, y_test, settings)
        print("subsample", key, sub[key], flush=True)

    start = time.perf_counter()
    coef, intercept, info = linear_svm.fit_linear_svm(
        x_sub,
        y_sub,
        rng_key=jax.random.key(0),
        c=c,
        tol=0.1,
        max_epochs=args.bsvm_epochs,
    )
    coef.block_until_ready()
    secs = time.perf_counter() - start
    scores = np.asarray(linear_svm.decision_function(x_test, coef, intercept))
    sub["bsvm_ours"] = {
        "fit_seconds": secs,
        "epochs": info["epochs"],
        **measure(scores, y_test),
    }
    print("subsample BSVM (ours)", sub["bsvm_ours"], flush=True)
    sub["iale_sf"]["compile_seconds"] = cold - sub["iale_sf"]["fit_seconds"]
    for key in linearsvc_settings(c, *x_sub.shape):
        peer = sub[key]["fit_seconds"]
        if sub[key]["converged"]:  # no speed ratio against an unconverged peer
            sub[key]["speedup_of_iale_sf"] = peer / sub["iale_sf"]["fit_seconds"]
            sub[key]["speedup_of_iale_sf_with_compile"] = peer / cold
        sub[key]["miap_gap_of_iale_sf"] = sub["iale_sf"]["miap"] - sub[key]["miap"]
    sub["peak_rss_mb"] = peak_rss_mb()
    result["subsample"] = sub
    return _finish(result, args)


def _finish(result, args):
    """Merge into the JSON (the full and subsample parts may run separately)."""
    out = pathlib.Path(args.out)
    merged = json.loads(out.read_text()) if out.exists() else {}
    merged.update(result)
    write_json(out, merged, indent=2)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
