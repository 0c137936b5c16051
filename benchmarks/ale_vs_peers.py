"""ALE / IALE training time and MiAP vs linear SVMs and exact spectral embeddings.

On the synthetic concept corpus of ``ale_scale.py`` (``dims`` features, 10 concepts),
for growing numbers of training images: our registered methods (``iale-sf``,
``iale-svm``, ``ale-sf``, ``bsvm`` and, for small n, ``gsf``) against scikit-learn's
``LinearSVC`` (liblinear, C = 5, one-vs-rest; at the paper's ``eps = 0.1`` with the
dual and the primal solver and at scikit-learn's defaults, each row recording its
settings — ``ale_scale.linearsvc_settings``) on the raw features and scikit-learn's
``SpectralEmbedding`` (exact Laplacian eigenmaps of a k-NN graph, the representation
step GSF and ALE approximate; timing only). Each peer runs only up to the size given by
its ``--max-*`` flag, where it still finishes in reasonable time on 2 cores.

Run:  python benchmarks/ale_vs_peers.py  →  benchmarks/results/ale_vs_peers.json
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

import numpy as np

import jax

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from _device import add_device_argument, device_record, use_device  # noqa: E402
from ale_scale import (  # noqa: E402
    ConceptGenerator,
    fit_linearsvc,
    linearsvc_settings,
    measure,
    peak_rss_mb,
)

from jaxannot.annotators import get_method, parse_hyper  # noqa: E402
from jaxannot.data.corpus import Corpus  # noqa: E402


def corpus(x, y=None):
    words = np.zeros((len(x), 10), np.float32) if y is None else y
    mask = np.ones(len(x), bool) if y is not None else np.zeros(len(x), bool)
    return Corpus.from_arrays(
        {"features": x}, words=words, word_mask=mask, view_kinds={"features": "real"}
    )


def ours(name, train, test, truth, hyper):
    method = get_method(name)
    hyper = parse_hyper(method, {k: v for k, v in hyper.items() if k in method.hyper})
    start = time.perf_counter()
    fitted = method.fit(train, rng_key=jax.random.key(0), **hyper)
    fit_seconds = time.perf_counter() - start
    scores = np.asarray(method.score_words(fitted, test))
    total = time.perf_counter() - start
    return {
        "fit_seconds": fit_seconds,
        "fit_and_score_seconds": total,
        **measure(scores, truth),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="2000,5000,10000,20000")
    parser.add_argument("--dims", type=int, default=128)
    parser.add_argument("--test", type=int, default=5000)
    parser.add_argument("--max-linearsvc", type=int, default=20000)
    parser.add_argument("--max-spectral", type=int, default=10000)
    parser.add_argument("--max-gsf", type=int, default=3000)
    parser.add_argument(
        "--out",
        default=str(pathlib.Path(__file__).parent / "results" / "ale_vs_peers.json"),
    )
    add_device_argument(parser)
    args = parser.parse_args(argv)
    use_device(args.device)
    from sklearn.manifold import SpectralEmbedding

    gen = ConceptGenerator(dims=args.dims)
    x_test, y_test = gen.materialize(stream=2, n=args.test, chunk=args.test)
    test = corpus(x_test)
    hyper = {"pca": 64, "max_epochs": 100}
    # compile once on a tiny problem so the timings below are steady-state
    x_w, y_w = gen.materialize(stream=9, n=300, chunk=300)
    start = time.perf_counter()
    for name in ("iale-sf", "iale-svm", "bsvm"):
        ours(name, corpus(x_w, y_w), corpus(x_w), y_w, hyper)
    warmup_seconds = time.perf_counter() - start

    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        x, y = gen.materialize(stream=1, n=n, chunk=n)
        train = corpus(x, y)
        row = {"n": n}
        for name in ("iale-sf", "iale-svm", "ale-sf", "bsvm"):
            row[name] = ours(name, train, test, y_test, hyper)
        if n + args.test <= args.max_gsf:
            row["gsf"] = ours("gsf", train, test, y_test, {"max_images": args.max_gsf})
        if n <= args.max_linearsvc:
            for key, settings in linearsvc_settings(5.0, *x.shape).items():
                row[key] = fit_linearsvc(x, y, x_test, y_test, settings)
                row[key]["speedup_of_iale_sf"] = (
                    row[key]["fit_seconds"] / row["iale-sf"]["fit_seconds"]
                )
        if n <= args.max_spectral:
            start = time.perf_counter()
            SpectralEmbedding(
                n_components=100,
                affinity="nearest_neighbors",
                n_neighbors=10,
                random_state=0,
            ).fit_transform(x)
            row["spectral_embedding"] = {"fit_seconds": time.perf_counter() - start}
        rows.append(row)
        print(json.dumps(row), flush=True)
    result = {
        "args": {**vars(args), "out": pathlib.Path(args.out).name},
        "compile_warmup_seconds (ours, iale-sf + iale-svm + bsvm on 300 images)": (
            warmup_seconds
        ),
        "rows": rows,
        "peak_rss_mb": peak_rss_mb(),
        "device": device_record(),
    }
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
