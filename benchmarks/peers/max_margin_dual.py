"""``MaxMargin(solver="dual")`` against LIBLINEAR's Crammer--Singer solver.

The problem is the one a variational-EM mixture with a Crammer--Singer max-margin
term hands its dual solver at each M-step: ``--images`` posterior vectors over
``--components`` components (soft, ``softmax(2 onehot(z) + noise)``), each
component tied to one of ``--classes`` classes and ``--flip`` of the labels
redrawn at random, cost ``--c``. The features of the next EM iteration are the
same posteriors moved a little (``--move``: multiplicative log-normal noise,
renormalized). Three solves are timed on the moved features:

- ``cold``: ``MaxMargin.dual_update`` from zero duals;
- ``warm``: ``MaxMargin.dual_update`` from the duals of the solve on the previous
  features (what the VEM's M-step does);
- ``liblinear``: scikit-learn's ``LinearSVC(multi_class="crammer_singer")``, which
  regularizes the intercept like the weights (``intercept_scaling=1``): the same
  primal objective. It cannot warm start.

The stopping rules differ and are recorded: ours stops at a relative duality gap
(``DUAL_STOP.tol``: the objective is then within that fraction of the optimum);
LIBLINEAR stops when every example's KKT violation is below ``tol`` (its ``eps``).
Both are given 1e-4. Both objectives are evaluated in float64 by
``MaxMargin.objective``; a LIBLINEAR run at ``tol=1e-8`` gives the reference
optimum. Compile time (``lower().compile()``) is its own field; solve times are
medians of ``--repeats`` steady-state runs; the machine's 1-minute load average at
the end is recorded. Our solver runs in float32, as in a VEM fit. Writes
benchmarks/results/max_margin_dual.json.

    OPENBLAS_NUM_THREADS=1 python -m benchmarks.peers.max_margin_dual
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
import warnings

import numpy as np

import jax
import jax.numpy as jnp

from benchmarks.common.cli import script_parser
from benchmarks.common.device import device_record, use_device
from benchmarks.common.records import RESULTS, write_json
from jaxannot.inference.max_margin import MaxMargin
from jaxannot.inference.max_margin_dual import DUAL_STOP


def problem(images, components, classes, flip, move, seed=0):
    """Soft posteriors, labels and the next iteration's moved posteriors."""
    rng = np.random.default_rng(seed)
    z = rng.integers(components, size=images)
    tie = rng.integers(classes, size=components)
    labels = np.where(
        rng.random(images) < flip, rng.integers(classes, size=images), tie[z]
    )
    logits = 2.0 * np.eye(components)[z] + rng.normal(size=(images, components))
    q = np.exp(logits - logits.max(1, keepdims=True))
    q /= q.sum(1, keepdims=True)
    moved = q * np.exp(move * rng.normal(size=q.shape))
    return q, moved / moved.sum(1, keepdims=True), labels


def timed(fn, repeats):
    """Median wall time of ``repeats`` calls and the last result."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def objective(term, params, features):
    """``term.objective`` in float64."""
    with jax.enable_x64(True):
        p = {
            k: jnp.asarray(np.asarray(params[k]), jnp.float64)
            for k in ("weights", "bias")
        }
        return float(term.objective(p, jnp.asarray(features, jnp.float64)))


def liblinear(features, labels, c, tol, repeats):
    from sklearn.svm import LinearSVC

    svc = LinearSVC(C=c, multi_class="crammer_singer", tol=tol, max_iter=1_000_000)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a ConvergenceWarning is a failed run
            svc.fit(features, labels)
        times.append(time.perf_counter() - start)
    params = {"weights": svc.coef_, "bias": svc.intercept_}
    return statistics.median(times), params, int(svc.n_iter_)


def main(argv=None):
    ap = script_parser(__doc__)
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--components", type=int, default=10)
    ap.add_argument("--classes", type=int, default=6)
    ap.add_argument("--flip", type=float, default=0.2)
    ap.add_argument("--move", type=float, default=0.05)
    ap.add_argument("--c", type=float, default=1.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(RESULTS, "max_margin_dual.json"))
    args = ap.parse_args(argv)
    use_device(args.device)
    q, moved, labels = problem(
        args.images, args.components, args.classes, args.flip, args.move
    )
    term = MaxMargin(labels, c=args.c, solver="dual", num_classes=args.classes)
    params = term.init(jax.random.key(0), args.components)
    previous, current = jnp.asarray(q, jnp.float32), jnp.asarray(moved, jnp.float32)
    update = jax.jit(lambda t, f, p: t.dual_update(f, p))
    start = time.perf_counter()
    compiled = update.lower(term, current, params).compile()
    compile_s = time.perf_counter() - start
    cold_s, cold = timed(lambda: compiled(term, current, params), args.repeats)
    last = compiled(term, previous, params)  # the previous M-step's solve
    warm_s, warm = timed(lambda: compiled(term, current, last), args.repeats)
    epochs = jax.jit(lambda t, f, s: t.solve_dual(jax.random.key(0), f, init_state=s))
    count = {}
    for name, start_state in (
        ("cold", None),
        ("warm", term.warm_state(current, last["duals"])),
    ):
        _, info = epochs(term, current, start_state)
        count[name] = int(np.isfinite(np.asarray(info.gap)).sum())
    lib_s, lib, lib_iter = liblinear(moved, labels, args.c, 1e-4, args.repeats)
    _, ref, ref_iter = liblinear(moved, labels, args.c, 1e-8, 1)
    best = objective(term, ref, moved)
    objectives = {
        "cold": objective(term, cold, moved),
        "warm": objective(term, warm, moved),
        "liblinear": objective(term, lib, moved),
    }
    result = {
        "problem": {
            "images": args.images,
            "features": args.components,
            "classes": args.classes,
            "label_flip": args.flip,
            "move_between_iterations": args.move,
            "c": args.c,
            "dtype_ours": "float32",
        },
        "stopping": {
            "ours": f"relative duality gap <= {DUAL_STOP.tol} or "
            f"{DUAL_STOP.max_epochs} epochs (objective within tol of the optimum)",
            "liblinear": "largest KKT violation (max_m G - min_free G) <= tol=1e-4, "
            "max_iter=1e6 (its eps); not the same rule as ours",
            "tol_ours": DUAL_STOP.tol,
            "tol_liblinear": 1e-4,
        },
        "compile_s": compile_s,
        "solve_s": {"cold": cold_s, "warm": warm_s, "liblinear": lib_s},
        "ratio_to_liblinear": {"cold": cold_s / lib_s, "warm": warm_s / lib_s},
        "epochs": {**count, "liblinear_iterations": lib_iter},
        "objective": {**objectives, "reference_liblinear_tol_1e-8": best},
        "relative_difference": {
            "cold_vs_liblinear": (objectives["cold"] - objectives["liblinear"])
            / abs(objectives["liblinear"]),
            "warm_vs_liblinear": (objectives["warm"] - objectives["liblinear"])
            / abs(objectives["liblinear"]),
            "cold_vs_reference": (objectives["cold"] - best) / abs(best),
            "warm_vs_reference": (objectives["warm"] - best) / abs(best),
            "liblinear_vs_reference": (objectives["liblinear"] - best) / abs(best),
        },
        "reference_liblinear_iterations": ref_iter,
        "repeats": args.repeats,
        "command": "python -m benchmarks.peers.max_margin_dual "
        + " ".join(sys.argv[1:]),
    }
    result["load_average_1m"] = os.getloadavg()[0]  # a shared machine: context
    result["device"] = device_record()
    write_json(args.out, result, indent=2)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
