"""Approximate k-NN indexes for large k-NN graphs: faiss HNSW vs pynndescent vs exact.

For each dataset we build the k-NN graph of all ``n`` points (each point's ``k``
nearest *other* points, what :func:`jaxannot.graph.knn_graph` needs) and measure

- ``seconds`` (wall) and ``cpu_seconds`` (process CPU time; the runs are
  single-threaded, so this is the figure that resists a loaded machine): index build
  + the k-NN lists of all ``n`` points (faiss: build, then search all points for
  ``k + 1`` and drop the point itself; pynndescent: the ``neighbor_graph`` of the
  index, no query phase; exact: ``knn_search`` of jaxannot, blocked, JAX on CPU);
- ``recall_at_k``: mean fraction of the exact ``k`` nearest other points found, on a
  random sample of ``--sample`` points (exact neighbours by brute force in float64);
  ``recall_at_k_ties`` counts a returned neighbour as correct when its distance is at
  most the exact k-th distance (the sets differ only by tie-breaking on binary / count
  features);
- ``peak_rss_mb``: peak resident memory of the worker process (each run is a fresh
  subprocess) and ``rss_increase_mb`` over the data-loaded baseline.

Libraries at their documented recommended settings, then the documented knobs:
faiss ``IndexHNSWFlat(d, M=32)`` (efConstruction 40, efSearch 16 by default; we
sweep efSearch 16, 32, 64) and pynndescent ``NNDescent`` (n_neighbors 30 by default;
we also try ``n_neighbors = k + 1``). Every run is single-threaded (faiss OpenMP,
numba, XLA) so figures compare algorithms on a shared machine; pynndescent's numba
functions are compiled in a warm-up run on a small array before the timed run (its
CPU time is ``numba_warmup_cpu_seconds``; it is paid again in every new process).

Datasets: synthetic Gaussian mixture (``--n`` points, ``--dims`` dims, 100
components, anisotropic: a decaying spectrum under a random rotation per component),
Corel5k blob features (4,500 + 500 images, 499 dims) and Delicious features
(12,920 + 3,185, 500 binary dims) from ``$JAXANNOT_DATA``.

    OPENBLAS_NUM_THREADS=1 python -m benchmarks.scale.knn_index \\
        --n 100000 --dims 64 --k 10

Writes benchmarks/results/knn_index.json.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

from benchmarks.common.cli import script_parser
from benchmarks.common.device import child_env
from benchmarks.common.records import RESULTS, root_env, script_command, write_json

OUT = os.path.join(RESULTS, "knn_index.json")

SINGLE_THREAD_ENV = {
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "NUMBA_NUM_THREADS": "1",
    "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
    "JAX_PLATFORMS": "cpu",
}


# ---------------------------------------------------------------------- data
def gaussian_mixture(n: int, dims: int, seed: int, components: int = 100):
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=3.0, size=(components, dims))
    spectrum = 1.0 / np.sqrt(np.arange(1, dims + 1))
    label = rng.integers(0, components, n)
    x = np.empty((n, dims), np.float32)
    for c in range(components):
        rows = np.flatnonzero(label == c)
        rot, _ = np.linalg.qr(rng.normal(size=(dims, dims)))
        z = rng.normal(size=(rows.size, dims)) * spectrum
        x[rows] = centres[c] + z @ rot.T
    return x


def real_features(name: str):
    from jaxannot.data.datasets import load_dataset

    train, test = load_dataset(name)
    view = train.primary_view
    parts = [np.asarray(train.views[view], np.float32)]
    if test is not None:
        parts.append(np.asarray(test.views[view], np.float32))
    return np.concatenate(parts)


def exact_neighbours(x, sample, k: int):
    """Exact k nearest other points of x[sample] (float64), and their distances."""
    x64 = x.astype(np.float64)
    sq = np.einsum("ij,ij->i", x64, x64)
    idx = np.empty((sample.size, k), np.int64)
    dist = np.empty((sample.size, k))
    for start in range(0, sample.size, 250):
        rows = sample[start : start + 250]
        d2 = sq[rows, None] + sq[None, :] - 2.0 * x64[rows] @ x64.T
        d2[np.arange(rows.size), rows] = np.inf
        part = np.argpartition(d2, k, axis=1)[:, :k]
        pd = np.take_along_axis(d2, part, axis=1)
        order = np.argsort(pd, axis=1, kind="stable")
        idx[start : start + rows.size] = np.take_along_axis(part, order, axis=1)
        dist[start : start + rows.size] = np.sqrt(
            np.maximum(np.take_along_axis(pd, order, axis=1), 0.0)
        )
    return idx, dist


def recall(x, sample, approx_idx, exact_idx, exact_dist):
    k = exact_idx.shape[1]
    hits = [len(set(a) & set(e)) for a, e in zip(approx_idx, exact_idx, strict=True)]
    xs = x[sample].astype(np.float64)
    d = np.linalg.norm(x[approx_idx].astype(np.float64) - xs[:, None, :], axis=2)
    bound = exact_dist[:, -1:] * (1 + 1e-6) + 1e-9
    ok = (d <= bound) & (approx_idx != sample[:, None])
    return float(np.mean(hits) / k), float(ok.sum(axis=1).clip(max=k).mean() / k)


# -------------------------------------------------------------------- worker
def _drop_self(idx, k: int):
    """k neighbours per row of a (k + 1)-list, without the row itself."""
    n = idx.shape[0]
    is_self = idx == np.arange(n)[:, None]
    # keep the first k entries that are not the row itself
    keep = np.argsort(is_self, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(idx, keep, axis=1)


def run_faiss(x, k, m, ef_construction, ef_search, seed):
    import faiss

    faiss.omp_set_num_threads(1)
    index = faiss.IndexHNSWFlat(x.shape[1], m)
    index.hnsw.efConstruction = ef_construction
    index.add(x)
    index.hnsw.efSearch = ef_search
    _, idx = index.search(x, k + 1)
    return _drop_self(idx, k)


def run_pynndescent(x, k, n_neighbors, seed):
    import pynndescent

    warm = np.random.default_rng(0).normal(size=(500, x.shape[1])).astype(np.float32)
    c0 = time.process_time()
    pynndescent.NNDescent(warm, n_neighbors=min(n_neighbors, 30), n_jobs=1)
    warmup = time.process_time() - c0
    c0 = time.process_time()
    t0 = time.perf_counter()
    index = pynndescent.NNDescent(
        x, n_neighbors=n_neighbors, random_state=seed, n_jobs=1, compressed=True
    )
    idx, _ = index.neighbor_graph
    cpu = time.process_time() - c0
    return _drop_self(idx[:, : k + 1], k), time.perf_counter() - t0, cpu, warmup


def run_exact(x, k):
    import jax

    from jaxannot.graph.knn import knn_search

    idx, _ = knn_search(x[:2048], x, k)  # compile the block function
    jax.block_until_ready(idx)
    c0, t0 = time.process_time(), time.perf_counter()
    idx, _ = knn_search(x, x, k, exclude_self=True, method="exact")
    idx = np.asarray(jax.block_until_ready(idx))
    return idx, time.perf_counter() - t0, time.process_time() - c0


def _reset_peak_rss() -> None:
    """Reset the peak RSS (Linux: VmHWM) so the parent's memory is not counted."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def _peak_rss_mb() -> float:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def worker(spec_path: str) -> None:
    _reset_peak_rss()
    with open(spec_path) as f:
        spec = json.load(f)
    data = np.load(spec["data"])
    x, sample = np.ascontiguousarray(data["x"]), data["sample"]
    k = spec["k"]
    base = _peak_rss_mb()
    c0, t0 = time.process_time(), time.perf_counter()
    extra = {}
    if spec["library"] == "faiss":
        idx = run_faiss(x, k, spec["M"], spec["efConstruction"], spec["efSearch"], 0)
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    elif spec["library"] == "pynndescent":
        idx, seconds, cpu, warmup = run_pynndescent(x, k, spec["n_neighbors"], 0)
        extra["numba_warmup_cpu_seconds"] = warmup
    else:
        idx, seconds, cpu = run_exact(x, k)
    peak = _peak_rss_mb()
    np.save(spec["out"], np.asarray(idx)[sample])
    res = {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "peak_rss_mb": peak,
        "base_rss_mb": base,
        **extra,
    }
    print(json.dumps(res))


# ---------------------------------------------------------------------- main
def configs(args):
    out = [
        {"library": "faiss", "M": 32, "efConstruction": 40, "efSearch": 16},
        {"library": "faiss", "M": 32, "efConstruction": 40, "efSearch": 32},
        {"library": "faiss", "M": 32, "efConstruction": 40, "efSearch": 64},
        {"library": "pynndescent", "n_neighbors": 30},
        {"library": "pynndescent", "n_neighbors": args.k + 1},
    ]
    return out


def cheapest_faiss(results, target=0.95):
    """Smallest efSearch whose tie-aware recall reaches target on every dataset."""
    efs = sorted(
        {
            r["efSearch"]
            for d in results
            for r in d["runs"]
            if r["library"] == "faiss" and "error" not in r
        }
    )
    for ef in efs:
        rows = [
            r
            for d in results
            for r in d["runs"]
            if r["library"] == "faiss" and r.get("efSearch") == ef
        ]
        if rows and all(r.get("recall_at_k_ties", 0) >= target for r in rows):
            cfg = {k: rows[0][k] for k in ("library", "M", "efConstruction")}
            return {**cfg, "efSearch": ef}
    return None


def versions():
    names = ["faiss-cpu", "pynndescent", "numba", "numpy", "jax"]
    out = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def bench_dataset(name, x, args, tmp, runs=None):
    rng = np.random.default_rng(args.seed)
    sample = np.sort(rng.choice(x.shape[0], min(args.sample, x.shape[0]), False))
    t0 = time.perf_counter()
    exact_idx, exact_dist = exact_neighbours(x, sample, args.k)
    print(
        f"[{name}] n={x.shape[0]} d={x.shape[1]} ground truth "
        f"{time.perf_counter() - t0:.1f}s",
        flush=True,
    )
    data_path = os.path.join(tmp, f"{name}.npz")
    np.savez(data_path, x=x, sample=sample)
    runs = list(configs(args)) if runs is None else runs
    if x.shape[0] <= args.exact_max_n:
        runs.append({"library": "exact-jax"})
    rows = []
    env = {**os.environ, **SINGLE_THREAD_ENV}
    for cfg in runs:
        spec = {
            **cfg,
            "data": data_path,
            "k": args.k,
            "out": os.path.join(tmp, "idx.npy"),
        }
        spec_path = os.path.join(tmp, "spec.json")
        with open(spec_path, "w") as f:
            json.dump(spec, f)
        proc = subprocess.run(
            script_command(__spec__.name, "--worker", spec_path),
            env=root_env(env),
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            rows.append({**cfg, "error": proc.stderr.strip().splitlines()[-1:]})
            print(f"[{name}] {cfg} failed:\n{proc.stderr[-2000:]}", flush=True)
            continue
        res = json.loads(proc.stdout.strip().splitlines()[-1])
        idx = np.load(spec["out"])
        r_ids, r_ties = recall(x, sample, idx, exact_idx, exact_dist)
        row = {
            **cfg,
            "seconds": round(res["seconds"], 2),
            "cpu_seconds": round(res["cpu_seconds"], 2),
            "recall_at_k": round(r_ids, 4),
            "recall_at_k_ties": round(r_ties, 4),
            "peak_rss_mb": round(res["peak_rss_mb"], 1),
            "rss_increase_mb": round(res["peak_rss_mb"] - res["base_rss_mb"], 1),
        }
        if "numba_warmup_cpu_seconds" in res:
            row["numba_warmup_cpu_seconds"] = round(res["numba_warmup_cpu_seconds"], 2)
        rows.append(row)
        print(f"[{name}] {row}", flush=True)
    return {
        "name": name,
        "n": int(x.shape[0]),
        "dims": int(x.shape[1]),
        "sample": int(sample.size),
        "runs": rows,
    }


def main(argv=None):
    p = script_parser(
        __doc__,
        "the exact search (jaxannot, JAX) runs on it; faiss and pynndescent "
        "run on the CPU",
    )
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--dims", type=int, default=64)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--sample", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--datasets", nargs="+", default=["synthetic", "corel5k", "delicious"]
    )
    p.add_argument(
        "--sweep-sizes",
        nargs="*",
        type=int,
        default=[10_000, 20_000, 40_000],
        help="synthetic sizes where the chosen faiss setting is timed "
        "against the exact graph (for the exact/approx threshold)",
    )
    p.add_argument(
        "--exact-max-n",
        type=int,
        default=40_000,
        help="also time the exact JAX graph up to this n",
    )
    p.add_argument("--out", default=OUT)
    args = p.parse_args(argv)
    os.environ.update(child_env(args.device))  # the worker processes
    if args.worker:
        return worker(args.worker)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.datasets:
            if name == "synthetic":
                x = gaussian_mixture(args.n, args.dims, args.seed)
            else:
                x = real_features(name)
            results.append(bench_dataset(name, x, args, tmp))
        chosen = cheapest_faiss(results)
        sweep = []
        for n in args.sweep_sizes if chosen else []:
            x = gaussian_mixture(n, args.dims, args.seed)
            sweep.append(bench_dataset(f"synthetic-{n}", x, args, tmp, [chosen]))
    record = {
        "command": "python -m benchmarks.scale.knn_index "
        + " ".join(a for a in (argv if argv is not None else sys.argv[1:])),
        "machine": {
            "platform": platform.platform(),
            "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
            "threads_per_run": 1,
        },
        "versions": versions(),
        "k": args.k,
        "datasets": results,
        "faiss_setting_for_all_datasets": chosen,
        "size_sweep": sweep,
    }
    write_json(args.out, record, indent=2)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
