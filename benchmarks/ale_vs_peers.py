"""ALE / IALE training time and MiAP vs linear SVMs and exact spectral embeddings.

On the synthetic concept corpus of ``ale_scale.py`` (``dims`` features, 10 concepts),
for growing numbers of training images: our registered methods (``iale-sf``,
``iale-svm``, ``ale-sf``, ``bsvm`` and, for small n, ``gsf``) against scikit-learn's
``LinearSVC`` (liblinear, C = 5, one-vs-rest) on the raw features and scikit-learn's
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
from ale_scale import ConceptGenerator, measure, peak_rss_mb  # noqa: E402

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
    args = parser.parse_args(argv)
    from sklearn.manifold import SpectralEmbedding
    from sklearn.svm import LinearSVC

    gen = ConceptGenerator(dims=args.dims)
    x_test, y_test = gen.materialize(stream=2, n=args.test, chunk=args.test)
    test = corpus(x_test)
    hyper = {"pca": 64, "max_epochs": 100}
    # compile once on a tiny problem so the timings below are steady-state
    x_w, y_w = gen.materialize(stream=9, n=300, chunk=300)
    for name in ("iale-sf", "iale-svm", "bsvm"):
        ours(name, corpus(x_w, y_w), corpus(x_w), y_w, hyper)

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
            start = time.perf_counter()
            models = [
                LinearSVC(C=5.0, max_iter=1000).fit(x, y[:, k]) for k in range(10)
            ]
            secs = time.perf_counter() - start
            scores = np.stack([m.decision_function(x_test) for m in models], 1)
            row["linearsvc"] = {"fit_seconds": secs, **measure(scores, y_test)}
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
        "rows": rows,
        "peak_rss_mb": peak_rss_mb(),
    }
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
