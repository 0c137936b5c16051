"""VEM's default start and conjugate M-step on issue 43's Bernoulli mixture.

The model of ``first_fit.py``'s ``bernoulli_covariate_toy`` (2000 items, K = 4
components of D = 30 Bernoulli features and a Gaussian covariate) and data drawn as
it draws them from each of ``--data-seeds`` (its own is seed 0), fitted by
``VEM(model, "z", plate="item")`` for ``--iterations`` EM iterations from keys 0 to
``--seeds - 1``, one fit per key:

- ``default``: this version's defaults (the data-driven start of
  :mod:`jaxannot.inference.vem.start`, the conjugate sites' closed-form M-step);
- ``gradient``: the same start with ``conjugate=False`` (optax steps for every site);
- ``random_start``: the defaults from the previous start's random posteriors
  (Dirichlet(1) rows, then the same L-BFGS start M-step): the old start, for
  comparison.

For each data seed and each: the final objective per key, the adjusted Rand index of
the fitted classes against the drawn ones, the number of keys within 1 nat of the
best objective any fit found on that data, and the seconds of each fit (the first
one cold).

Writes ``benchmarks/results/vem_default_start.json``.

    python -m benchmarks.claims.vem_default_start
"""

from __future__ import annotations

import os
import sys
import time
from unittest import mock

import numpy as np

from benchmarks.common.cli import script_parser
from benchmarks.common.device import device_record, use_device
from benchmarks.common.records import RESULTS, write_json
from benchmarks.common.toys import bernoulli_covariate_toy

RESULTS = RESULTS


def draw(seed: int):
    """``(x, y, z)`` drawn as ``bernoulli_covariate_toy`` draws its data (seed 0)."""
    rng = np.random.default_rng(seed)
    probs, means = rng.uniform(0.1, 0.9, (4, 30)), rng.normal(0.0, 3.0, 4)
    z = rng.integers(0, 4, 2000)
    x = (rng.uniform(size=(2000, 30)) < probs[z]).astype(np.float32)
    y = (means[z] + rng.normal(size=2000)).astype(np.float32)
    return x, y, z


def _fits(vem, seeds, iterations, x, y, z):
    """Final objectives, ARIs and seconds of one fit per key."""
    from sklearn.metrics import adjusted_rand_score

    import jax

    out = {"objective": [], "ari": [], "seconds": []}
    for seed in range(seeds):
        t0 = time.perf_counter()
        fit = vem.run(jax.random.key(seed), iterations, x, y, k=4, progress_bar=False)
        labels = np.asarray(fit.posteriors).argmax(1)
        out["seconds"].append(time.perf_counter() - t0)
        out["objective"].append(-float(fit.losses[-1]))
        out["ari"].append(float(adjusted_rand_score(z, labels)))
    return out


def main(argv=None) -> int:
    parser = script_parser(__doc__)
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--data-seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    parser.add_argument("--out", default=str(RESULTS / "vem_default_start.json"))
    args = parser.parse_args(argv)
    use_device(args.device)
    import jax.numpy as jnp

    from jaxannot.inference import VEM
    from jaxannot.inference.vem import initial

    model, _ = bernoulli_covariate_toy()
    record = {
        "command": "python -m benchmarks.claims.vem_default_start "
        + " ".join(argv or [])
    }

    def old_start(vem, whole, uniforms, values, dynamic):
        s = whole.setup.structure
        e = -jnp.log1p(-uniforms[: s.num_images * s.num_values])
        e = e.reshape(s.num_images, s.num_values)  # Exponential(1) draws
        return e / e.sum(-1, keepdims=True)

    runs = {
        "default": (VEM(model, "z", plate="item"), None),
        "gradient": (VEM(model, "z", plate="item", conjugate=False), None),
        # chunk_size=1000: two chunks as the default's 1024, another compile key,
        # so that the patched start is compiled
        "random_start": (VEM(model, "z", plate="item", chunk_size=1000), old_start),
    }
    for data_seed in args.data_seeds:
        x, y, z = draw(data_seed)
        row = record[f"data_seed_{data_seed}"] = {}
        for name, (vem, patch) in runs.items():
            if patch is None:
                row[name] = _fits(vem, args.seeds, args.iterations, x, y, z)
            else:
                with mock.patch.object(initial, "start_posteriors", patch):
                    row[name] = _fits(vem, args.seeds, args.iterations, x, y, z)
        best = max(max(r["objective"]) for r in row.values())
        row["best_objective"] = best
        print("data seed", data_seed, "best", round(best, 1))
        for name in runs:
            r = row[name]
            r["within_1_nat_of_best"] = sum(o > best - 1.0 for o in r["objective"])
            print(" ", name, r["within_1_nat_of_best"], np.round(r["objective"], 1))
            print("    ari", np.round(r["ari"], 3), "s", np.round(r["seconds"], 1))
    record.update(device=device_record(), loadavg=os.getloadavg())
    write_json(args.out, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
