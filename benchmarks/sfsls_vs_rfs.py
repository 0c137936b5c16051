"""Seconds per iteration and to convergence: SFSLS / FSNM (jaxannot) vs skfeature RFS.

skfeature's ``RFS.rfs`` implements Nie et al.'s FSNM with dense ``(n + d)``-sized
inverses every iteration; ``jaxannot.inference.fsnm`` runs the same iterates in the
``d × d`` form and ``jaxannot.inference.reweighted_l2p`` runs SFSLS's Algorithm 1
(O(d³ + n d c + nnz c) per iteration after one CG pre-solve).

RFS cannot be told to stop early, so it runs in a subprocess with ``verbose=True``; its
per-iteration time is measured from the timestamps of its objective prints, and it is
stopped after ``--rfs-limit`` seconds (reported as not converged then).

Usage::

    python benchmarks/sfsls_vs_rfs.py --n 3000 --d 100 --classes 6
"""

from __future__ import annotations

import os

# Same thread settings for both sides (RFS's numpy LAPACK, jaxannot's Cholesky calls):
# single-threaded OpenBLAS, which is much faster on a shared, loaded machine.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import json
import pathlib
import platform
import resource
import subprocess
import sys
import tempfile
import textwrap
import time

import numpy as np

import jax
import jax.numpy as jnp

from jaxannot.graph import knn_graph
from jaxannot.inference import fsnm
from jaxannot.inference import reweighted_l2p as rl

RFS_CHILD = textwrap.dedent(
    """
    import sys, time, numpy as np
    from skfeature.function.sparse_learning_based import RFS
    data = np.load(sys.argv[1], allow_pickle=False)
    print("start", time.perf_counter(), flush=True)
    gamma = float(sys.argv[2])
    RFS.rfs(data["x"], data["labels"], mode="raw", gamma=gamma, verbose=True)
    print("done", time.perf_counter(), flush=True)
    """
)


def make_data(n, d, classes, seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, n)
    x = rng.normal(size=(n, d)).astype(np.float32)
    x[:, :classes] += 2.0 * np.eye(classes, dtype=np.float32)[labels]
    return x, labels


def run_rfs(x, labels, gamma, limit, workdir):
    path = pathlib.Path(workdir) / "rfs_input.npz"
    np.savez(path, x=x.astype(np.float64), labels=labels)
    proc = subprocess.Popen(
        [sys.executable, "-c", RFS_CHILD, str(path), str(gamma)],
        stdout=subprocess.PIPE,
        text=True,
    )
    stamps, start, converged = [], None, False
    deadline = time.perf_counter() + limit
    for line in proc.stdout:
        now = time.perf_counter()
        if line.startswith("start"):
            start = now
        elif line.startswith("obj at iter"):
            stamps.append(now)
        elif line.startswith("done"):
            converged = True
            break
        if now > deadline:
            proc.kill()
            break
    proc.wait()
    path.unlink()
    per_iter = float(np.median(np.diff([start, *stamps]))) if stamps else None
    return {
        "iterations": len(stamps),
        "seconds_per_iteration": per_iter,
        "seconds_total": (stamps[-1] - start) if stamps else None,
        "converged": converged,
        "limit_seconds": limit,
    }


def _timed(f, *args, repeats=3):
    """Median wall seconds of ``f(*args)`` after one warm-up (compile) call."""
    jax.block_until_ready(f(*args))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = jax.block_until_ready(f(*args))
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), out


def loop_seconds(step, state, args, iterations):
    """Seconds per iteration of a kernel run ``iterations`` times in a jitted loop."""
    loop = jax.jit(
        lambda st: jax.lax.fori_loop(
            0, iterations, lambda i, s: step(None, s, *args)[0], st
        )
    )
    seconds, _ = _timed(loop, state)
    return seconds / iterations


def converge_seconds(fit):
    seconds, out = _timed(fit, repeats=1)
    return seconds, int(out[0].iteration)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--d", type=int, default=100)
    ap.add_argument("--classes", type=int, default=6)
    ap.add_argument("--gamma", type=float, default=1.0)
    ap.add_argument("--neighbors", type=int, default=10)
    ap.add_argument("--labelled", type=float, default=0.1)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--rfs-limit", type=float, default=300.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="benchmarks/results/sfsls_vs_rfs.json")
    args = ap.parse_args(argv)

    x, labels = make_data(args.n, args.d, args.classes, args.seed)
    y_pm = np.where(np.eye(args.classes)[labels] > 0, 1.0, -1.0).astype(np.float32)
    y01 = (y_pm > 0).astype(np.float32)
    labelled = np.random.default_rng(args.seed).random(args.n) < args.labelled

    results = {
        "config": vars(args),
        "platform": platform.platform(),
        "device": str(jax.devices()[0]),
    }
    xj, ypm = jnp.asarray(x), jnp.asarray(y_pm)
    gamma = jnp.asarray(args.gamma, jnp.float32)
    eps = jnp.asarray(1e-8, jnp.float32)
    state = fsnm.init(xj, ypm, gamma)
    per = loop_seconds(
        fsnm.build_kernel(), state, (xj, ypm, gamma, eps), args.iterations
    )
    total, iters = converge_seconds(
        lambda: fsnm.fit_fsnm(x, y_pm, gamma=args.gamma, max_iter=500, tol=1e-6)
    )
    results["fsnm_jaxannot"] = {
        "seconds_per_iteration": per,
        "seconds_to_convergence": total,
        "iterations": iters,
    }

    t0 = time.perf_counter()
    graph = knn_graph(x, args.neighbors, weight="heat")
    graph_seconds = time.perf_counter() - t0
    edges = (graph.senders, graph.receivers, graph.weights)
    y_obs = jnp.asarray(np.where(labelled[:, None], y01, 0))
    hyper = rl.make_hyper(alpha=0.1, lam=1.0, mu=10.0, p=0.5)
    prep = jax.jit(rl.prepare)
    prepare_seconds, data = _timed(prep, xj, y_obs, jnp.asarray(labelled), edges, hyper)
    state = jax.jit(rl.init, static_argnums=2)(data, hyper, 1)
    per = loop_seconds(rl.build_kernel(1), state, (data, hyper), args.iterations)
    total, iters = converge_seconds(
        lambda: rl.fit_sfsls(
            x,
            y_obs,
            labelled,
            edges,
            alpha=0.1,
            lam=1.0,
            mu=10.0,
            p=0.5,
            subspace=1,
            max_iter=500,
            tol=1e-4,
        )
    )
    results["sfsls_jaxannot"] = {
        "seconds_per_iteration": per,
        "seconds_to_convergence": total,
        "iterations": iters,
        "prepare_seconds (CG, once per fit)": prepare_seconds,
        "graph_seconds": graph_seconds,
    }
    results["jaxannot_peak_rss_mb"] = (
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    )

    with tempfile.TemporaryDirectory() as workdir:
        results["rfs_skfeature"] = run_rfs(
            x, labels, args.gamma, args.rfs_limit, workdir
        )
    results["rfs_peak_rss_mb"] = (
        resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    )
    rfs = results["rfs_skfeature"]["seconds_per_iteration"]
    if rfs:
        for key in ("fsnm_jaxannot", "sfsls_jaxannot"):
            results[key]["speedup_per_iteration_vs_rfs"] = (
                rfs / results[key]["seconds_per_iteration"]
            )
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1))
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
