"""The cost of a ``LaplacianELBO`` fit against LapVar1's (issue 43, point 3).

Issue 43's weak Bernoulli mixture (``benchmarks/common/weak_bernoulli.py``'s settings:
600 items, contrast 0.15, view separation 0.8, one seed) at one fixed weight, each
fit twice in one process (the second with new, equal loss and optimizer objects):

- VEM with ``LapVar1(graph, lam, heldout_check=False)``, 60 EM iterations;
- ``fit_laplacian(LaplacianELBO(TraceEnum_ELBO(), "z", graph, lam,
  scale="mean_degree", sweeps=2), ...)``, Adam 0.1, 100 steps, then
  ``local_posteriors`` (as the weak-Bernoulli case times it).

Each fit's wall seconds, backend compiles and ARI, and the ratio of the second
fits' seconds::

    python -m benchmarks.scale.laplacian_elbo_cost --device cpu --json \\
        benchmarks/results/laplacian_elbo_cost.json
"""

from __future__ import annotations

import json
import pathlib
import sys
import time
import warnings

import numpy as np

from benchmarks.common.cli import script_parser
from benchmarks.common.device import device_record, use_device
from benchmarks.common.records import write_json


def main(argv=None) -> dict:
    parser = script_parser(__doc__)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lam", type=float, default=0.3)
    parser.add_argument("--json", type=pathlib.Path)
    args = parser.parse_args(argv)
    use_device(args.device)

    from sklearn.metrics import adjusted_rand_score

    import jax
    import jax.numpy as jnp
    import optax
    from numpyro.infer import TraceEnum_ELBO

    from benchmarks.common import weak_bernoulli as case
    from jaxannot.inference import VEM, LaplacianELBO, LapVar1, fit_laplacian

    compiles = [0]

    def count(name, *_args, **_kwargs):
        if name == "/jax/core/compile/backend_compile_duration":
            compiles[0] += 1

    jax.monitoring.register_event_duration_secs_listener(count)
    from benchmarks.common import graph_toy as toys

    toy = toys.weak_bernoulli(600, seed=args.seed, contrast=0.15, view_separation=0.8)
    x, key = jnp.asarray(toy.x), jax.random.key(args.seed)

    def timed(fit):
        before, start = compiles[0], time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            phi = np.asarray(fit())
        ari = float(adjusted_rand_score(toy.truth, phi.argmax(1)))
        return {
            "seconds": time.perf_counter() - start,
            "compiles": compiles[0] - before,
            "ari": ari,
        }

    def lapvar1():
        estep = LapVar1(toy.graph, args.lam, heldout_check=False)
        vem = VEM(
            toys.bernoulli_mixture, "z", estep=estep, m_step=toys.bernoulli_m_step
        )
        return vem.run(key, 60, x, num_classes=4, progress_bar=False).posteriors

    guide = case.start_guide(toys, key, x)

    def elbo():
        loss = LaplacianELBO(
            TraceEnum_ELBO(), "z", toy.graph, args.lam, scale="mean_degree", sweeps=2
        )
        fit = fit_laplacian(
            loss, key, case._model, guide, optax.adam(0.1), 100, x, 4,
            heldout_check=False,
        )  # fmt: skip
        return loss.local_posteriors(key, fit.params, case._model, guide, "z", x, 4)

    rows = {
        "LapVar1": [timed(lapvar1), timed(lapvar1)],
        "LaplacianELBO": [timed(elbo), timed(elbo)],
    }
    result = {
        "command": "python -m benchmarks.scale.laplacian_elbo_cost "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "device": device_record(),
        "settings": {"seed": args.seed, "lam": args.lam, "n": 600},
        "fits": rows,
        "second_fit_seconds_ratio": rows["LaplacianELBO"][1]["seconds"]
        / rows["LapVar1"][1]["seconds"],
    }
    if args.json:
        write_json(args.json, result, indent=2)
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
