"""FSNM (jaxannot) vs skfeature's RFS — one algorithm, one objective, one dtype.

skfeature's ``RFS.rfs`` implements Nie et al.'s FSNM with dense ``(n + d)``-sized
matrices every iteration; ``jaxannot.methods.sfsls.fsnm`` runs the same iterates (same
``D = I`` start, same reweighting, same objective ``‖XW − Y‖₂,₁ + γ‖W‖₂,₁``) in the
``d × d`` form. The target is the objective RFS reaches at its last iterate (its own
stopping rule); every other row is timed, wall and CPU (process) seconds, for the
iterations it needs to reach that value:

- ``rfs_skfeature``: float64 numpy, ``(n + d)`` form, in a subprocess with
  ``verbose=True`` (each iterate's wall and CPU time stamped from its objective prints;
  stopped after ``--rfs-limit`` seconds, then reported as not converged);
- ``numpy_dxd_float64``: the same iterates in the ``d × d`` form in float64 numpy /
  scipy (Cholesky) — the change of algebra alone, no JAX;
- ``jaxannot_float64``: ``fsnm.init`` + ``fsnm.build_kernel`` in one jitted loop,
  float64 (``jax_enable_x64``) — RFS's dtype; compiled first, compile time apart;
- ``jaxannot_float32``: the same in float32, the library's ``fit_fsnm`` dtype.

So ``rfs / numpy_dxd`` is what the ``d × d`` form buys and ``numpy_dxd / jaxannot`` what
the compiled implementation adds, at the same dtype.

Usage::

    python -m benchmarks.peers.fsnm_vs_skfeature_rfs --n 1500 --d 100 --classes 6
"""

from __future__ import annotations

import os

# Same thread settings for every row (numpy's LAPACK, jaxannot's Cholesky calls):
# single-threaded OpenBLAS, which is much faster on a shared, loaded machine.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import json
import pathlib
import platform
import subprocess
import sys
import tempfile
import textwrap
import time

import numpy as np
import scipy.linalg as sl

import jax
import jax.numpy as jnp

from benchmarks.common.cli import script_parser
from benchmarks.common.device import device_record, use_device
from benchmarks.common.records import write_json
from jaxannot.methods.sfsls import fsnm

RFS_CHILD = textwrap.dedent(
    """
    import sys, time, numpy as np
    from skfeature.function.sparse_learning_based import RFS

    class Stamped:  # each printed line gets the CPU seconds of this process
        def __init__(self, out):
            self.out = out
        def write(self, text):
            for line in text.splitlines():
                if line:
                    self.out.write(f"{time.process_time()} {line}\\n")
            self.out.flush()
        def flush(self):
            self.out.flush()

    data = np.load(sys.argv[1], allow_pickle=False)
    sys.stdout = Stamped(sys.__stdout__)
    print("start")
    RFS.rfs(data["x"], data["labels"], mode="raw", gamma=float(sys.argv[2]),
            verbose=True)
    print("done")
    """
)


def make_data(n, d, classes, seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, n)
    x = rng.normal(size=(n, d))
    x[:, :classes] += 2.0 * np.eye(classes)[labels]
    return x, labels


def run_rfs(x, labels, gamma, limit, workdir):
    path = pathlib.Path(workdir) / "rfs_input.npz"
    np.savez(path, x=x.astype(np.float64), labels=labels)
    proc = subprocess.Popen(
        [sys.executable, "-c", RFS_CHILD, str(path), str(gamma)],
        stdout=subprocess.PIPE,
        text=True,
    )
    walls, cpus, objectives, start, converged = [], [], [], None, False
    deadline = time.perf_counter() + limit
    for line in proc.stdout:
        now = time.perf_counter()
        cpu, _, text = line.partition(" ")
        if text.startswith("start"):
            start = (now, float(cpu))
        elif text.startswith("obj at iter"):
            walls.append(now - start[0])
            cpus.append(float(cpu) - start[1])
            objectives.append(float(text.rsplit(":", 1)[1]))
        elif text.startswith("done"):
            converged = True
            break
        if now > deadline:
            proc.kill()
            break
    proc.wait()
    path.unlink()
    return {
        "iterates": len(objectives),
        "seconds": walls[-1] if walls else None,
        "cpu_seconds": cpus[-1] if cpus else None,
        "seconds_to_each_iterate": walls,
        "cpu_seconds_to_each_iterate": cpus,
        "objectives": objectives,
        "converged": converged,
        "limit_seconds": limit,
        "settings": {
            "call": 'RFS.rfs(x, labels, mode="raw", gamma=gamma, verbose=True)',
            "dtype": "float64",
            "labels": "±1 one-vs-rest (construct_label_matrix_pan)",
            "stop": "|Δobj| < 1e-3 or 1000 iterations (skfeature's, not settable)",
        },
    }


def _l21(a):
    return float(np.sqrt((a * a).sum(1)).sum())


def numpy_dxd(x, y, gamma, steps, eps):
    """``steps`` FSNM iterates after the ``D = I`` start, d × d form, float64 numpy."""

    def solve(a, b):
        xb = x * (b / gamma**2)[:, None]
        lhs = np.diag(a) + x.T @ xb
        return sl.cho_solve(sl.cho_factor(lhs, lower=True), xb.T @ y)

    w = solve(np.ones(x.shape[1]), np.ones(x.shape[0]))
    trace = [_l21(x @ w - y) + gamma * _l21(w)]
    for _ in range(steps):
        e = (y - x @ w) / gamma
        a = 0.5 / np.maximum(np.sqrt((w * w).sum(1)), eps)
        b = 0.5 / np.maximum(np.sqrt((e * e).sum(1)), eps)
        w = solve(a, b)
        trace.append(_l21(x @ w - y) + gamma * _l21(w))
    return w, trace


def jax_loop(dtype, steps, eps):
    """A jitted ``init`` + ``steps`` kernel steps in ``dtype``; returns the trace."""
    step = fsnm.build_kernel()

    @jax.jit
    def run(x, y, gamma):
        start = fsnm.init(x, y, gamma)

        def body(state, _):
            new, info = step(None, state, x, y, gamma, jnp.asarray(eps, dtype))
            return new, info.objective

        _, trace = jax.lax.scan(body, start, None, length=steps)
        return jnp.concatenate([start.objective[None], trace])

    return run


def timed(f, repeats):
    """Median (wall, cpu) seconds of ``f()`` over ``repeats`` calls, and its result."""
    walls, cpus = [], []
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        out = jax.block_until_ready(f())
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return float(np.median(walls)), float(np.median(cpus)), out


def first_at(trace, target, slack):
    """Iterations after the start to the first trace value <= target (or None)."""
    hits = np.flatnonzero(np.asarray(trace, np.float64) <= target * (1 + slack))
    return int(max(hits[0], 1)) if hits.size else None


def main(argv=None):
    ap = script_parser(__doc__)
    ap.add_argument("--n", type=int, default=1500)
    ap.add_argument("--d", type=int, default=100)
    ap.add_argument("--classes", type=int, default=6)
    ap.add_argument("--gamma", type=float, default=1.0)
    ap.add_argument("--rfs-limit", type=float, default=400.0)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="benchmarks/results/fsnm_vs_skfeature_rfs.json")
    args = ap.parse_args(argv)
    use_device(args.device)
    jax.config.update("jax_enable_x64", True)  # float64 rows; float32 asked explicitly

    x, labels = make_data(args.n, args.d, args.classes, args.seed)
    y = np.where(np.eye(args.classes)[labels] > 0, 1.0, -1.0)
    with tempfile.TemporaryDirectory() as workdir:
        rfs = run_rfs(x, labels, args.gamma, args.rfs_limit, workdir)
    results = {
        "config": vars(args),
        "platform": platform.platform(),
        "machine": "2 CPU cores shared with other jobs: wall times noisy, CPU "
        "(process) seconds steadier; RFS runs first, in a subprocess",
        "rfs_skfeature": rfs,
    }
    if not rfs["objectives"]:
        raise SystemExit("RFS printed no objective before --rfs-limit")
    target = rfs["objectives"][-1]
    results["target_objective (RFS's last)"] = target
    # float64: the same iterates as RFS up to round-off; float32: one ulp of slack
    budget = len(rfs["objectives"]) + 5
    _, trace = numpy_dxd(x, y, args.gamma, budget, 1e-16)
    steps = first_at(trace, target, 1e-12)
    wall, cpu, _ = timed(
        lambda: numpy_dxd(x, y, args.gamma, steps, 1e-16), args.repeats
    )
    results["numpy_dxd_float64"] = {
        "objective_trace (start, then each iteration)": trace,
        "iterations_to_target": steps,
        "seconds": wall,
        "cpu_seconds": cpu,
    }
    for dtype, slack, eps, name in (  # eps: skfeature's floor; float32 needs more
        (jnp.float64, 1e-12, 1e-16, "jaxannot_float64"),
        (jnp.float32, 1e-7, 1e-8, "jaxannot_float32"),
    ):
        xj, yj = jnp.asarray(x, dtype), jnp.asarray(y, dtype)
        gamma = jnp.asarray(args.gamma, dtype)
        trace = np.asarray(jax_loop(dtype, budget, eps)(xj, yj, gamma), np.float64)
        n_steps = first_at(trace, target, slack)
        run = jax_loop(dtype, n_steps, eps)
        w0, c0 = time.perf_counter(), time.process_time()
        jax.block_until_ready(run(xj, yj, gamma))
        first = (time.perf_counter() - w0, time.process_time() - c0)
        wall, cpu, out = timed(lambda r=run, a=(xj, yj, gamma): r(*a), args.repeats)
        results[name] = {
            "objective_trace (start, then each iteration)": trace.tolist(),
            "iterations_to_target": n_steps,
            "objective_reached": float(out[-1]),
            "seconds": wall,
            "cpu_seconds": cpu,
            "compile_seconds": first[0] - wall,
            "one_off_seconds (compile included)": first[0],
            "settings": {"gamma": args.gamma, "eps": eps, "dtype": str(dtype.dtype)},
        }
    ratios = {}
    for name in ("numpy_dxd_float64", "jaxannot_float64", "jaxannot_float32"):
        for unit in ("seconds", "cpu_seconds"):
            ratios[f"rfs / {name} ({unit})"] = rfs[unit] / results[name][unit]
    for unit in ("seconds", "cpu_seconds"):
        ratios[f"numpy_dxd_float64 / jaxannot_float64 ({unit})"] = (
            results["numpy_dxd_float64"][unit] / results["jaxannot_float64"][unit]
        )
    ratios["rfs / jaxannot_float64 one-off (seconds, compile included)"] = (
        rfs["seconds"]
        / results["jaxannot_float64"]["one_off_seconds (compile included)"]
    )
    results["ratios (time to the target)"] = ratios
    results["device"] = device_record()
    results["load_average_end"] = list(os.getloadavg())
    write_json(args.out, results)
    print(json.dumps(ratios, indent=1))


if __name__ == "__main__":
    main()
