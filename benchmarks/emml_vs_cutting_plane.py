"""EMML (Algorithm 1) vs the n-slack cutting-plane baseline on a Corel5k-sized dual.

Both solve the same structured max-margin dual (9) of Guo et al. (2016) — VReps are
k-means centroids of Corel5k's blob features with their members' majority words (374
words), RBF kernel — with the same block-SMO inner solver and the same KKT tolerance.
EMML runs as one jit to convergence; the cutting plane runs pass by pass (one jitted
pass per call) so the time at which its dual objective first comes within
``--rel`` (1e-4) of EMML's final objective can be read off. Compile time is excluded
(each solver is run once before timing). Writes benchmarks/results/<name>.json.

    python benchmarks/emml_vs_cutting_plane.py --vreps 60 --budget 240
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import time

import numpy as np

import jax
import jax.numpy as jnp

from jaxannot.inference import cutting_plane
from jaxannot.inference.emml import StructuredData, fit_emml
from jaxannot.models.structured_output import default_gamma, kernel_matrix, kmeans_vreps


def corel_vreps(num_vreps: int, data_dir: str | None, seed: int):
    from jaxannot.data.datasets import load_dataset

    train, _ = load_dataset("corel5k", data_dir=data_dir)
    x = train.view(train.primary_view)
    vreps = kmeans_vreps(jax.random.key(seed), x, train.words, num_vreps)
    return vreps, default_gamma(x), "corel5k"


def synthetic_vreps(num_vreps: int, seed: int, num_words: int = 374, dims: int = 499):
    rng = np.random.default_rng(seed)
    centres = rng.random((40, dims)) < 0.02
    cluster = rng.integers(0, 40, num_vreps)
    x = (centres[cluster] ^ (rng.random((num_vreps, dims)) < 0.005)).astype(np.float32)
    topics = [rng.choice(num_words, 6, replace=False) for _ in range(40)]
    y = np.zeros((num_vreps, num_words), np.float32)
    for i in range(num_vreps):
        y[i, rng.choice(topics[cluster[i]], rng.integers(2, 5), replace=False)] = 1.0
    from jaxannot.models.structured_output import VReps

    return VReps(jnp.asarray(x), jnp.asarray(y)), default_gamma(x), "synthetic"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--vreps", type=int, default=60)
    p.add_argument("--c", type=float, default=10.0)
    p.add_argument("--tolerance", type=float, default=1e-3)
    p.add_argument("--rel", type=float, default=1e-4)
    p.add_argument("--gamma-scale", type=float, default=8.0)
    p.add_argument("--capacity", type=int, default=256)
    p.add_argument("--violators-per-vrep", type=int, default=8)
    p.add_argument("--budget", type=float, default=240.0, help="cutting-plane seconds")
    p.add_argument("--synthetic", action="store_true")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="benchmarks/results/emml_vs_cutting_plane.json")
    a = p.parse_args(argv)

    if a.synthetic:
        vreps, gamma, source = synthetic_vreps(a.vreps, a.seed)
    else:
        vreps, gamma, source = corel_vreps(a.vreps, a.data_dir, a.seed)
    gamma *= a.gamma_scale
    k = kernel_matrix(vreps.features, vreps.features, "rbf", gamma)
    data = StructuredData(k, vreps.words)

    def run_emml():
        state, hist = fit_emml(
            data,
            a.c,
            a.tolerance,
            capacity=a.capacity,
            max_iterations=500,
            max_sweeps=4,
            violators_per_vrep=a.violators_per_vrep,
        )
        state.objective.block_until_ready()
        return state, hist

    run_emml()  # compile
    t0 = time.perf_counter()
    em, em_hist = run_emml()
    emml_seconds = time.perf_counter() - t0
    target = float(em.objective)

    step = jax.jit(cutting_plane.build_kernel(a.c, a.tolerance))
    key = jax.random.key(0)
    warm = cutting_plane.init(data, a.capacity)
    jax.block_until_ready(step(key, warm, data))  # compile
    state = cutting_plane.init(data, a.capacity)
    trace = []
    reached = None
    t0 = time.perf_counter()
    while True:
        state, info = step(key, state, data)
        obj = float(info.objective)
        elapsed = time.perf_counter() - t0
        added = int(info.num_added)
        trace.append({"seconds": elapsed, "objective": obj, "added": added})
        if reached is None and obj <= target + a.rel * abs(target):
            reached = elapsed
        if int(info.num_added) == 0 or elapsed > a.budget:
            break
    cp_seconds = time.perf_counter() - t0
    converged = trace[-1]["added"] == 0
    result = {
        "problem": {
            "source": source,
            "vreps": int(k.shape[0]),
            "words": int(vreps.words.shape[1]),
            "mean_words_per_vrep": float(np.asarray(vreps.words).sum(1).mean()),
            "kernel": "rbf",
            "gamma": gamma,
            "c": a.c,
            "tolerance": a.tolerance,
            "capacity": a.capacity,
        },
        "emml": {
            "seconds": emml_seconds,
            "objective": target,
            "iterations": int(em.iteration),
            "active_constraints": int(np.asarray(em.working_set.active).sum()),
            "constraints_added": int(em.total_added),
            "overflow": int(em.overflow),
        },
        "cutting_plane": {
            "seconds_total": cp_seconds,
            "seconds_to_emml_objective": reached,
            "converged": converged,
            "final_objective": trace[-1]["objective"],
            "passes": len(trace),
            "constraints": int(np.asarray(state.working_set.active).sum()),
            "resolves": int(state.resolves),
            "overflow": int(state.overflow),
            "trace": trace,
        },
        "relative_target": a.rel,
        "speedup_to_same_objective": (reached / emml_seconds) if reached else None,
        "speedup_lower_bound": None if reached else cp_seconds / emml_seconds,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
        "jax": jax.__version__,
    }
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as fh:
        json.dump(result, fh, indent=2)
    summary = {k: result[k] for k in ("emml", "speedup_to_same_objective")}
    summary["cutting_plane"] = {
        k: v for k, v in result["cutting_plane"].items() if k != "trace"
    }
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
