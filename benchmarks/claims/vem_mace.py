"""MACE, written as numpyro's annotation example writes it, fitted by VEM.

MACE (Hovy et al. 2013) has two discrete sites per item: the class ``c`` and a
spamming indicator ``s`` per annotation, enumerated jointly (issue 48, point 2).
Data: 45 items with 7 annotations by 5 annotators (annotator 0 three times), 4
classes, drawn from a Dawid–Skene model with diagonal-heavy confusions (the data of
``tests/inference/test_vem_data_values.py``). Two fits of ``--iterations`` EM
iterations: ``VEM(mace, "c", plate="item")`` with defaults, and with
``optax.lbfgs()`` from ``theta = 0.8``; for each, the first (cold) fit's seconds and
backend compiles, a second fit's seconds, the objective per iteration, the largest
fall of the objective between iterations, the fitted ``theta`` and the share of
items whose most probable class is the true one (up to a relabelling).

Writes ``benchmarks/results/vem_mace.json``.

    python -m benchmarks.claims.vem_mace
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import time

import numpy as np

from benchmarks.common.cli import script_parser
from benchmarks.common.device import device_record, use_device
from benchmarks.common.records import RESULTS, write_json

RESULTS = RESULTS
POSITIONS = np.array([0, 0, 0, 1, 2, 3, 4])


def mace(positions, annotations):
    """MACE: copy the class ``c`` unless spamming (``s = 1``), then draw from
    ``epsilon`` of the annotator; sizes read from the data."""
    import jax
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    num_annotators = int(np.max(positions)) + 1
    num_classes = int(np.max(annotations)) + 1
    num_items, num_positions = annotations.shape
    with numpyro.plate("annotator", num_annotators):
        epsilon = numpyro.sample("epsilon", dist.Dirichlet(jnp.full(num_classes, 10.0)))
        theta = numpyro.sample("theta", dist.Beta(0.5, 0.5))
    with numpyro.plate("item", num_items, dim=-2):
        c = numpyro.sample("c", dist.DiscreteUniform(0, num_classes - 1))
        with numpyro.plate("position", num_positions):
            s = numpyro.sample("s", dist.Bernoulli(1 - theta[positions]))
            probs = jnp.where(
                s[..., None] == 0, jax.nn.one_hot(c, num_classes), epsilon[positions]
            )
            numpyro.sample("y", dist.Categorical(probs), obs=annotations)


def annotations(seed=0, num_items=45, num_classes=4):
    """The test's Dawid–Skene draw: ``(annotations [items, 7], truth [items])``."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, num_classes, num_items)
    confusion = rng.dirichlet(np.ones(num_classes), (POSITIONS.max() + 1, num_classes))
    confusion = 0.35 * confusion + 0.65 * np.eye(num_classes)
    y = np.stack(
        [
            [rng.choice(num_classes, p=confusion[a, truth[i]]) for a in POSITIONS]
            for i in range(num_items)
        ]
    )
    y[0, 0] = num_classes - 1
    return y.astype(np.int32), truth


def main(argv=None) -> int:
    parser = script_parser(__doc__)
    parser.add_argument("--iterations", type=int, default=60)
    parser.add_argument("--out", default=str(RESULTS / "vem_mace.json"))
    args = parser.parse_args(argv)
    use_device(args.device)
    import warnings

    import jax
    import jax.numpy as jnp
    import optax

    from jaxannot.inference import VEM

    compiles = [0]
    jax.monitoring.register_event_duration_secs_listener(
        lambda name, *a, **k: compiles.__setitem__(
            0, compiles[0] + (name == "/jax/core/compile/backend_compile_duration")
        )
    )
    y, truth = annotations()
    y = jnp.asarray(y)
    start = {"epsilon": jnp.full((5, 4), 0.25), "theta": jnp.full(5, 0.8)}
    fits = {
        "defaults": (VEM(mace, "c", plate="item"), {}),
        "lbfgs_from_theta_0.8": (
            VEM(mace, "c", plate="item", optimizer=optax.lbfgs()),
            {"init_params": start},
        ),
    }
    record = {"command": "python -m benchmarks.claims.vem_mace " + " ".join(argv or [])}
    for name, (vem, extra) in fits.items():
        times = []
        for _ in range(2):  # cold, then warm
            before, t0 = compiles[0], time.perf_counter()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                fit = vem.run(
                    jax.random.key(0), args.iterations, POSITIONS, y,
                    progress_bar=False, **extra,
                )  # fmt: skip
                jax.block_until_ready(fit.posteriors)
            times.append((time.perf_counter() - t0, compiles[0] - before))
        objective = -np.asarray(fit.losses, np.float64)
        pred = np.asarray(fit.posteriors).argmax(1)
        agree = max(
            float(np.mean(pred == np.asarray(p)[truth]))
            for p in itertools.permutations(range(4))
        )
        record[name] = {
            "cold_seconds": times[0][0],
            "cold_compiles": times[0][1],
            "warm_seconds": times[1][0],
            "warm_compiles": times[1][1],
            "final_objective": objective[-1],
            "largest_fall": float(max(0.0, -np.diff(objective).min())),
            "theta": np.asarray(fit.params["theta"], np.float64).tolist(),
            "class_agreement": agree,
            "warnings": sorted({type(w.message).__name__ for w in caught}),
            "objective": objective.tolist(),
        }
    record.update(device=device_record(), loadavg=os.getloadavg())
    write_json(args.out, record)
    print(json.dumps({k: v for k, v in record.items() if not isinstance(v, dict)}))
    for name in fits:
        print(name, {k: v for k, v in record[name].items() if k != "objective"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
