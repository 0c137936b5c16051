"""Query time vs database size: EMML's indexed queries vs MBRM (Table VIII, extended).

Synthetic databases of 1k, 10k, 100k and 1M images (Gaussian clusters in ``--dims``
dimensions, words drawn from each cluster's topic) share the same VReps and VRep word
scores (k-means VReps of a 2k-image training sample, scores from EMML fitted on it).
For each size we build the EMML index once (per-VRep neighbour lists; timed as
``index_seconds``), then time single-image queries after compilation:

- EMML annotation (§4.1), word query (§4.2), image retrieval (§4.3);
- MBRM annotation: Gaussian kernel density over every database image (its training
  set is the database).

Reports the median milliseconds per query and the ratio to the 1k database. Writes
benchmarks/results/query_time.json.

    python -m benchmarks.scale.query_time --sizes 1000 10000 100000 1000000
"""

from __future__ import annotations

import json
import os
import platform
import resource
import time

import numpy as np

import jax
import jax.numpy as jnp

from benchmarks.common.cli import script_parser
from benchmarks.common.device import device_record, use_device
from benchmarks.common.records import write_json
from jaxannot import retrieval
from jaxannot.methods.emml.mbrm import fit_mbrm, mbrm_word_probabilities
from jaxannot.methods.emml.structured_output import (
    default_gamma,
    kernel_matrix,
    kmeans_vreps,
)
from jaxannot.methods.emml.working_set import (
    StructuredData,
    WorkingSetSettings,
    fit_emml,
)


def make_images(rng, n, centres, topics, num_words):
    cluster = rng.integers(0, centres.shape[0], n)
    x = centres[cluster] + rng.normal(size=(n, centres.shape[1])).astype(np.float32)
    y = np.zeros((n, num_words), np.float32)
    pick = rng.integers(0, topics.shape[1], (n, 3))
    rows = np.repeat(np.arange(n), 3)
    y[rows, topics[cluster][np.arange(n)[:, None], pick].reshape(-1)] = 1.0
    return x.astype(np.float32), y


def time_queries(fn, queries, repeats):
    """Median milliseconds of single-query calls (the median resists the noise of a
    shared machine), after one compiling call."""
    jax.block_until_ready(fn(queries[0]))  # compile
    times = []
    for r in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(queries[r % len(queries)]))
        times.append(time.perf_counter() - t0)
    return 1000.0 * float(np.median(times))


def measure(index, mbrm, queries, batch, words, repeats, n):
    """Per-query milliseconds of each kind: the median latency of single-query calls,
    and the per-query time of a batched call (``len(batch)`` queries, vmapped), which
    removes the fixed dispatch overhead from the comparison."""
    word = words[0]
    mbrm_repeats = max(5, min(repeats, 2_000_000 // n))
    out = {
        "emml_annotate_ms": time_queries(
            lambda q: retrieval.annotate(index, q), queries, repeats
        ),
        "emml_word_query_ms": time_queries(
            lambda q: retrieval.word_query(index, word), queries, repeats
        ),
        "emml_image_retrieval_ms": time_queries(
            lambda q: retrieval.image_retrieval(index, q[0]), queries, repeats
        ),
        "mbrm_annotate_ms": time_queries(
            lambda q: mbrm_word_probabilities(mbrm, q), queries, mbrm_repeats
        ),
    }
    b = batch.shape[0]
    word_batch = jax.jit(jax.vmap(lambda w: retrieval.word_query(index, w)))
    image_batch = jax.jit(jax.vmap(lambda q: retrieval.image_retrieval(index, q)))
    batched = {
        "emml_annotate_batch_ms": lambda _: retrieval.annotate(index, batch),
        "emml_word_query_batch_ms": lambda _: word_batch(words),
        "emml_image_retrieval_batch_ms": lambda _: image_batch(batch),
        "mbrm_annotate_batch_ms": lambda _: mbrm_word_probabilities(mbrm, batch),
    }
    for key, fn in batched.items():
        reps = mbrm_repeats if key.startswith("mbrm") else max(5, repeats // 10)
        reps = min(reps, max(3, 200_000 // n)) if key.startswith("mbrm") else reps
        out[key] = time_queries(fn, [None], reps) / b
    return out


KINDS = [
    "emml_annotate",
    "emml_word_query",
    "emml_image_retrieval",
    "mbrm_annotate",
]
KINDS = KINDS + [k + "_batch" for k in KINDS]


def main(argv=None):
    p = script_parser(__doc__)
    p.add_argument(
        "--sizes", type=int, nargs="+", default=[1000, 10000, 100000, 1000000]
    )
    p.add_argument("--dims", type=int, default=32)
    p.add_argument("--words", type=int, default=32)
    p.add_argument("--vreps", type=int, default=100)
    p.add_argument("--repeats", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="benchmarks/results/query_time.json")
    a = p.parse_args(argv)
    use_device(a.device)
    rng = np.random.default_rng(a.seed)
    centres = (3.0 * rng.normal(size=(20, a.dims))).astype(np.float32)
    topics = np.stack([rng.choice(a.words, 5, replace=False) for _ in range(20)])

    # the VReps and their word scores, fixed for every database size
    xt, yt = make_images(rng, 2000, centres, topics, a.words)
    vreps = kmeans_vreps(jax.random.key(a.seed), xt, yt, a.vreps)
    gamma = default_gamma(xt)
    k = kernel_matrix(vreps.features, vreps.features, "rbf", gamma)
    data = StructuredData(k, vreps.words)
    state, _ = fit_emml(data, 10.0, 1e-3, settings=WorkingSetSettings(capacity=32))
    scores = np.asarray(state.scores)
    qx = make_images(rng, 64, centres, topics, a.words)[0]
    queries = [jnp.asarray(q[None]) for q in qx]
    batch = jnp.asarray(qx)
    words = jax.nn.one_hot(jnp.asarray(topics[:, 0].tolist() * 4)[: len(qx)], a.words)

    rows = []
    for n in a.sizes:
        x, y = make_images(
            np.random.default_rng(a.seed + n), n, centres, topics, a.words
        )
        t0 = time.perf_counter()
        index = retrieval.build_index(vreps.features, scores, x, gamma=gamma)
        jax.block_until_ready(index)
        index_seconds = time.perf_counter() - t0
        mbrm = fit_mbrm(x, y, bandwidth=2.0 * a.dims)
        row = {"images": n, "index_seconds": index_seconds}
        row.update(measure(index, mbrm, queries, batch, words, a.repeats, n))
        rows.append(row)
        print(json.dumps(row), flush=True)
        del x, y, index, mbrm
    base = rows[0]
    for row in rows:
        for kind in KINDS:
            row[kind + "_ratio"] = row[kind + "_ms"] / base[kind + "_ms"]
    result = {
        "config": vars(a),
        "emml_overflow": int(state.overflow),
        "rows": rows,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
        "jax": jax.__version__,
        "device": device_record(),
    }
    write_json(a.out, result, indent=2)
    print("| images | " + " | ".join(f"{k} ms (ratio)" for k in KINDS) + " |")
    print("|---" * (len(KINDS) + 1) + "|")
    for r in rows:
        cells = [f"{r[k + '_ms']:.3f} ({r[k + '_ratio']:.2f})" for k in KINDS]
        print(f"| {r['images']:,} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
