"""How long a modeller waits for a first fit: compiles and seconds, first and second
process.

The toy is the one a new user writes first: a Gaussian mixture declared in numpyro
(2000 images, 2-D features, K = 6 components, the generic optax M-step, no closed
form), fitted by :class:`jaxannot.inference.VEM` for 100 EM iterations. Each
measurement runs in a fresh Python process (``--child``), so import and compile costs
are those a user sees (``seconds`` of wall clock, ``cpu_seconds`` of the process's
CPU time, which a loaded machine inflates less):

- ``no_cache``: the persistent compilation cache off: the first fit's XLA compiles
  (counted by JAX's monitoring events), its wall seconds, a second fit of the same
  shapes in the same process (compiles: 0 expected) and a fit with another
  ``num_steps`` (compiles: 0 expected: it is not a compiled shape);
- ``cache_first`` / ``cache_second``: the same with
  :func:`jaxannot.runtime.compilation_cache.enable_compilation_cache` on an empty
  temporary folder, then again on the filled folder (the second process loads the
  programs instead of compiling them: ``cache_hits``);
- ``cli``: ``jaxannot evaluate mix-unigram --dataset corel5k`` wall seconds in a
  first process (empty cache folder) and a second one (``--dataset`` needs the data
  root, ``JAXANNOT_DATA``; skipped with ``--no-cli``);
- ``bernoulli_covariate``: ``no_cache`` for issue 43's first model, a Bernoulli
  mixture with a per-item Gaussian covariate (2000 items, D = 30 binary features,
  K = 4, plate ``"item"``, the data as NumPy arrays), in ``--processes`` fresh
  processes one after another: ``no_cache`` is the run of median wall seconds,
  ``no_cache_runs`` every run's first fit (a cold start's wall time varies by a
  second or more between processes on a quiet 2-core machine).

Writes ``benchmarks/results/first_fit[_SUFFIX].json`` with the device record.

    python -m benchmarks.scale.first_fit          # CPU, about a minute on 2 cores
    python -m benchmarks.scale.first_fit --device gpu --suffix gpu
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

from benchmarks.common.cli import script_parser
from benchmarks.common.device import (
    child_device_record,
    child_env,
)
from benchmarks.common.records import (
    RESULTS,
    ROOT,
    root_env,
    script_command,
    write_json,
)
from benchmarks.common.toys import bernoulli_covariate_toy, gaussian_toy


def _child(cache: str | None, steps: int, toy: str) -> dict:
    """One process's figures (run with ``--child``)."""
    start = time.perf_counter()

    import jax
    from jax._src import monitoring

    from jaxannot.inference import VEM
    from jaxannot.runtime.compilation_cache import enable_compilation_cache

    if cache:
        enable_compilation_cache(cache)
    counts = {"compiles": 0, "cache_hits": 0}

    def on_duration(event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            counts["compiles"] += 1

    def on_event(event, **kwargs):
        if event == "/jax/compilation_cache/cache_hits":
            counts["cache_hits"] += 1

    monitoring.register_event_duration_secs_listener(on_duration)
    monitoring.register_event_listener(on_event)

    if toy == "gaussian":
        model, args = gaussian_toy()
        args, kwargs, plate = (args,), {"k": 6}, "image"
    else:
        model, args = bernoulli_covariate_toy()
        kwargs, plate = {"k": 4}, "item"
    imported = time.perf_counter()

    def fit(key, n):
        t, cpu = time.perf_counter(), time.process_time()
        before = dict(counts)
        result = VEM(model, "z", plate=plate).run(
            jax.random.key(key), n, *args, progress_bar=False, **kwargs
        )
        jax.block_until_ready(result.posteriors)
        return {
            "seconds": time.perf_counter() - t,
            "cpu_seconds": time.process_time() - cpu,
            "compiles": counts["compiles"] - before["compiles"],
            "cache_hits": counts["cache_hits"] - before["cache_hits"],
            "final_loss": float(result.losses[-1]),
        }

    first = fit(0, steps)
    return {
        "import_seconds": imported - start,
        "first_fit": first,
        "second_fit_same_shapes": fit(1, steps),
        "fit_other_num_steps": fit(2, steps // 2 + 7),
        "device": str(jax.devices()[0]),
    }


def _run_child(
    device: str, cache: str | None, steps: int, toy: str = "gaussian"
) -> dict:
    cmd = script_command(__spec__.name, "--child", "--steps", str(steps), "--toy", toy)
    if cache:
        cmd += ["--cache", cache]
    out = subprocess.run(
        cmd,
        env=child_env(device, root_env()),
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _cli_seconds(device: str, cache: str) -> float:
    env = child_env(device, dict(os.environ, JAXANNOT_CACHE_DIR=cache))
    env.pop("JAXANNOT_NO_COMPILATION_CACHE", None)
    cmd = [sys.executable, "-m", "jaxannot.cli", "-q", "evaluate", "mix-unigram"]
    cmd += ["--dataset", "corel5k"]
    start = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, check=True)
    return time.perf_counter() - start


def main(argv=None) -> int:
    parser = script_parser(__doc__)
    parser.add_argument("--steps", type=int, default=100, help="EM iterations")
    parser.add_argument("--suffix", default="", help="results file suffix")
    parser.add_argument("--no-cli", action="store_true", help="skip the CLI timing")
    parser.add_argument("--out", default=None, help="JSON path (default: results/)")
    parser.add_argument(
        "--processes", type=int, default=3, help="cold processes of issue 43's model"
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--cache", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--toy", default="gaussian", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(args.cache, args.steps, args.toy)))
        return 0
    record = {
        "toy": "Gaussian mixture, 2000 images x 2 features, K = 6, default M-step "
        "(closed form and Newton steps where the sites qualify, else m_steps = 5 of "
        "adam 0.05), default start",
        "steps": args.steps,
        "no_cache": _run_child(args.device, None, args.steps),
    }
    with tempfile.TemporaryDirectory() as cache:
        record["cache_first"] = _run_child(args.device, cache, args.steps)
        record["cache_second"] = _run_child(args.device, cache, args.steps)
    if not args.no_cli:
        with tempfile.TemporaryDirectory() as cache:
            record["cli"] = {
                "command": "jaxannot -q evaluate mix-unigram --dataset corel5k",
                "first_process_seconds": _cli_seconds(args.device, cache),
                "second_process_seconds": _cli_seconds(args.device, cache),
            }
    record["bernoulli_covariate"] = {
        "toy": "Bernoulli mixture with a per-item Gaussian covariate, 2000 items x "
        "30 binary features, K = 4, default M-step, default start (issue 43)",
    }
    runs = [
        _run_child(args.device, None, args.steps, "bernoulli_covariate")
        for _ in range(args.processes)
    ]
    runs_by_seconds = sorted(runs, key=lambda run: run["first_fit"]["seconds"])
    record["bernoulli_covariate"]["no_cache"] = runs_by_seconds[len(runs) // 2]
    record["bernoulli_covariate"]["no_cache_runs"] = [run["first_fit"] for run in runs]
    record["device"] = child_device_record(args.device)
    record["loadavg"] = os.getloadavg()
    name = f"first_fit{'_' + args.suffix if args.suffix else ''}.json"
    out = pathlib.Path(args.out) if args.out else RESULTS / name
    write_json(out, record, indent=2)
    print(json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
