"""VEM against numpyro's NUTS on the six annotation models of Paun et al. (2018).

The models of numpyro's ``examples/annotation.py`` (multinomial, Dawid–Skene, MACE,
hierarchical Dawid–Skene, item difficulty, logistic random effects), written here
as that example writes them (sizes from the data, ``LocScaleReparam`` on the
Normal sites, the discrete sites marked for parallel enumeration), on the data of
``tests/inference/test_vem_data_values.py`` (45 items, 7 annotations by 5
annotators, 4 classes). For each model:

- VEM: ``VEM(model, "c", plate="item").run(key, --iterations, ...)`` with defaults,
  seconds and backend compiles of the first (cold) fit and of a second fit (warm:
  the same call again);
- NUTS as the example runs it: ``MCMC(NUTS(model), num_warmup, num_samples)`` (the
  discrete sites summed out by numpyro's enumeration), then
  ``Predictive(model, samples, infer_discrete=True)`` for each draw's item classes;
  seconds and compiles of both;
- the items whose VEM class (posterior argmax) is NUTS's posterior mode, under the
  relabelling of the classes that agrees most (the priors are symmetric in the
  classes, so either fit may name them otherwise), and the true class's share;
- Dawid–Skene: the largest absolute difference between VEM's confusion matrices
  and NUTS's posterior means (relabelled alike).

The record is written after each model (atomically), so a run cut short keeps the
models it finished. Writes ``benchmarks/results/vem_vs_nuts.json``.

    python -m benchmarks.peers.vem_vs_nuts
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
from benchmarks.common.records import RESULTS

RESULTS = RESULTS
POSITIONS = np.array([0, 0, 0, 1, 2, 3, 4])
ENUM = {"enumerate": "parallel"}


def _numpyro():
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    from numpyro import handlers
    from numpyro.infer.reparam import LocScaleReparam
    from numpyro.ops.indexing import Vindex

    return jnp, numpyro, dist, handlers, LocScaleReparam, Vindex


def multinomial(annotations):
    jnp, numpyro, dist, *_ = _numpyro()
    num_classes = int(np.max(annotations)) + 1
    num_items, num_positions = annotations.shape
    with numpyro.plate("class", num_classes):
        zeta = numpyro.sample("zeta", dist.Dirichlet(jnp.ones(num_classes)))
    pi = numpyro.sample("pi", dist.Dirichlet(jnp.ones(num_classes)))
    with numpyro.plate("item", num_items, dim=-2):
        c = numpyro.sample("c", dist.Categorical(pi), infer=ENUM)
        with numpyro.plate("position", num_positions):
            numpyro.sample("y", dist.Categorical(zeta[c]), obs=annotations)


def dawid_skene(positions, annotations):
    jnp, numpyro, dist, _, _, Vindex = _numpyro()
    num_annotators = int(np.max(positions)) + 1
    num_classes = int(np.max(annotations)) + 1
    num_items, num_positions = annotations.shape
    with numpyro.plate("annotator", num_annotators, dim=-2):
        with numpyro.plate("class", num_classes):
            beta = numpyro.sample("beta", dist.Dirichlet(jnp.ones(num_classes)))
    pi = numpyro.sample("pi", dist.Dirichlet(jnp.ones(num_classes)))
    with numpyro.plate("item", num_items, dim=-2):
        c = numpyro.sample("c", dist.Categorical(pi), infer=ENUM)
        with numpyro.plate("position", num_positions):
            probs = Vindex(beta)[positions, c, :]
            numpyro.sample("y", dist.Categorical(probs), obs=annotations)


def mace(positions, annotations):
    jnp, numpyro, dist, _, _, Vindex = _numpyro()
    import jax

    num_annotators = int(np.max(positions)) + 1
    num_classes = int(np.max(annotations)) + 1
    num_items, num_positions = annotations.shape
    with numpyro.plate("annotator", num_annotators):
        epsilon = numpyro.sample("epsilon", dist.Dirichlet(jnp.full(num_classes, 10.0)))
        theta = numpyro.sample("theta", dist.Beta(0.5, 0.5))
    with numpyro.plate("item", num_items, dim=-2):
        c = numpyro.sample("c", dist.DiscreteUniform(0, num_classes - 1), infer=ENUM)
        with numpyro.plate("position", num_positions):
            s = numpyro.sample("s", dist.Bernoulli(1 - theta[positions]), infer=ENUM)
            probs = jnp.where(
                s[..., None] == 0,
                jax.nn.one_hot(c, num_classes),
                Vindex(epsilon)[positions],
            )
            numpyro.sample("y", dist.Categorical(probs), obs=annotations)


def _padded(x):
    jnp = _numpyro()[0]
    return jnp.pad(x, [(0, 0)] * (jnp.ndim(x) - 1) + [(0, 1)])


def _beta(num_annotators, num_classes):
    """The annotator-by-class logits of the hierarchical models, decentred."""
    _, numpyro, dist, handlers, LocScaleReparam, _ = _numpyro()
    with numpyro.plate("class", num_classes):
        zeta = numpyro.sample(
            "zeta", dist.Normal(0, 1).expand([num_classes - 1]).to_event(1)
        )
        omega = numpyro.sample(
            "Omega", dist.HalfNormal(1).expand([num_classes - 1]).to_event(1)
        )
    with numpyro.plate("annotator", num_annotators, dim=-2):
        with numpyro.plate("class", num_classes):
            with handlers.reparam(config={"beta": LocScaleReparam(0)}):
                beta = numpyro.sample("beta", dist.Normal(zeta, omega).to_event(1))
    return _padded(beta)


def hierarchical_dawid_skene(positions, annotations):
    jnp, numpyro, dist, _, _, Vindex = _numpyro()
    num_annotators = int(np.max(positions)) + 1
    num_classes = int(np.max(annotations)) + 1
    num_items, num_positions = annotations.shape
    beta = _beta(num_annotators, num_classes)
    pi = numpyro.sample("pi", dist.Dirichlet(jnp.ones(num_classes)))
    with numpyro.plate("item", num_items, dim=-2):
        c = numpyro.sample("c", dist.Categorical(pi), infer=ENUM)
        with numpyro.plate("position", num_positions):
            logits = Vindex(beta)[positions, c, :]
            numpyro.sample("y", dist.Categorical(logits=logits), obs=annotations)


def item_difficulty(annotations):
    jnp, numpyro, dist, handlers, LocScaleReparam, _ = _numpyro()
    num_classes = int(np.max(annotations)) + 1
    num_items, num_positions = annotations.shape
    with numpyro.plate("class", num_classes):
        eta = numpyro.sample(
            "eta", dist.Normal(0, 1).expand([num_classes - 1]).to_event(1)
        )
        chi = numpyro.sample(
            "Chi", dist.HalfNormal(1).expand([num_classes - 1]).to_event(1)
        )
    pi = numpyro.sample("pi", dist.Dirichlet(jnp.ones(num_classes)))
    with numpyro.plate("item", num_items, dim=-2):
        c = numpyro.sample("c", dist.Categorical(pi), infer=ENUM)
        with handlers.reparam(config={"theta": LocScaleReparam(0)}):
            theta = numpyro.sample("theta", dist.Normal(eta[c], chi[c]).to_event(1))
        with numpyro.plate("position", num_positions):
            numpyro.sample(
                "y", dist.Categorical(logits=_padded(theta)), obs=annotations
            )


def logistic_random_effects(positions, annotations):
    jnp, numpyro, dist, handlers, LocScaleReparam, Vindex = _numpyro()
    num_annotators = int(np.max(positions)) + 1
    num_classes = int(np.max(annotations)) + 1
    num_items, num_positions = annotations.shape
    with numpyro.plate("class", num_classes):
        chi = numpyro.sample(
            "Chi", dist.HalfNormal(1).expand([num_classes - 1]).to_event(1)
        )
    beta = _beta(num_annotators, num_classes)
    pi = numpyro.sample("pi", dist.Dirichlet(jnp.ones(num_classes)))
    with numpyro.plate("item", num_items, dim=-2):
        c = numpyro.sample("c", dist.Categorical(pi), infer=ENUM)
        with handlers.reparam(config={"theta": LocScaleReparam(0)}):
            theta = numpyro.sample("theta", dist.Normal(0, chi[c]).to_event(1))
        with numpyro.plate("position", num_positions):
            logits = Vindex(beta)[positions, c, :] - _padded(theta)
            numpyro.sample("y", dist.Categorical(logits=logits), obs=annotations)


MODELS = {
    "dawid_skene": (dawid_skene, True),  # (model, takes positions)
    "multinomial": (multinomial, False),
    "mace": (mace, True),
    "hierarchical_dawid_skene": (hierarchical_dawid_skene, True),
    "item_difficulty": (item_difficulty, False),
    "logistic_random_effects": (logistic_random_effects, True),
}


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


def _best_relabelling(a, b, k=4):
    """The permutation ``p`` maximizing the share of ``a == p[b]``, and that share."""
    return max(
        ((np.asarray(p), float(np.mean(a == np.asarray(p)[b])))
         for p in itertools.permutations(range(k))),
        key=lambda t: t[1],
    )  # fmt: skip


def _compare(name, fit, samples, classes, truth):
    """The agreement figures of one model."""
    k = 4
    vem_class = np.asarray(fit.posteriors).argmax(1)
    counts = np.stack([np.bincount(c, minlength=k) for c in classes.T])  # [items, k]
    nuts_mode = counts.argmax(1)
    perm, agree = _best_relabelling(nuts_mode, vem_class)
    out = {
        "class_agreement_with_nuts_mode": agree,
        "class_agreement_unrelabelled": float(np.mean(nuts_mode == vem_class)),
        "vem_true_class_share": _best_relabelling(truth, vem_class)[1],
        "nuts_true_class_share": _best_relabelling(truth, nuts_mode)[1],
        "nuts_mode_share_mean": float((counts.max(1) / counts.sum(1)).mean()),
    }
    if name == "dawid_skene":
        # VEM class j is NUTS class perm[j]: VEM's rows (true classes) reordered;
        # the columns are the observed labels, named by the data in both fits
        vem_beta = np.asarray(fit.params["beta"], np.float64)
        nuts_beta = np.asarray(samples["beta"], np.float64).mean(0)
        mapped = vem_beta[:, np.argsort(perm)]
        out["confusion_max_abs_difference"] = float(np.abs(mapped - nuts_beta).max())
        out["confusion_mean_abs_difference"] = float(np.abs(mapped - nuts_beta).mean())
    return out


def main(argv=None) -> int:
    parser = script_parser(__doc__)
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--num-warmup", type=int, default=1000)
    parser.add_argument("--num-samples", type=int, default=1000)
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    parser.add_argument("--out", default=str(RESULTS / "vem_vs_nuts.json"))
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep the other models' entries of the record at --out",
    )
    args = parser.parse_args(argv)
    use_device(args.device)
    import warnings

    import jax
    from numpyro.infer import MCMC, NUTS, Predictive

    from jaxannot.cli.files import write_json
    from jaxannot.inference import VEM

    compiles = [0]
    jax.monitoring.register_event_duration_secs_listener(
        lambda name, *a, **k: compiles.__setitem__(
            0, compiles[0] + (name == "/jax/core/compile/backend_compile_duration")
        )
    )

    def timed(fn):
        before, t0 = compiles[0], time.perf_counter()
        out = fn()
        jax.block_until_ready(out)
        return out, time.perf_counter() - t0, compiles[0] - before

    y, truth = annotations()
    given = sys.argv[1:] if argv is None else argv
    record = {
        "command": " ".join(["python -m benchmarks.peers.vem_vs_nuts", *given]),
        "iterations": args.iterations,
        "num_warmup": args.num_warmup,
        "num_samples": args.num_samples,
        "models": {},
        "device": device_record(),
    }
    if args.keep and os.path.exists(args.out):  # models run before: kept
        with open(args.out) as fh:
            kept = json.load(fh)
        record["models"] = kept["models"]
        record["command"] = kept["command"] + "; then " + record["command"]
    for name in args.models:
        model, positions = MODELS[name]
        data = (POSITIONS, y) if positions else (y,)
        vem = VEM(model, "c", plate="item")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fits = [  # cold (compiles), then warm (a second fit: none)
                timed(
                    lambda vem=vem, data=data: vem.run(
                        jax.random.key(0), args.iterations, *data, progress_bar=False
                    )
                )
                for _ in range(2)
            ]
        (fit, vem_s, vem_c), (_, warm_s, warm_c) = fits
        objective = -np.asarray(fit.losses, np.float64)
        entry = {
            "vem_seconds": vem_s,
            "vem_compiles": vem_c,
            "vem_warm_seconds": warm_s,
            "vem_warm_compiles": warm_c,
            "vem_final_objective": objective[-1],
            "vem_largest_fall": float(max(0.0, -np.diff(objective).min())),
            "vem_warnings": sorted({type(w.message).__name__ for w in caught}),
        }
        mcmc = MCMC(
            NUTS(model),
            num_warmup=args.num_warmup,
            num_samples=args.num_samples,
            progress_bar=False,
        )
        try:
            _, nuts_s, nuts_c = timed(
                lambda mcmc=mcmc, data=data: mcmc.run(jax.random.key(0), *data)
            )
        except Exception as error:  # noqa: BLE001 (numpyro cannot run it: recorded)
            entry["nuts_error"] = f"{type(error).__name__}: {error}"
            vem_class = np.asarray(fit.posteriors).argmax(1)
            entry["vem_true_class_share"] = _best_relabelling(truth, vem_class)[1]
            record["models"][name] = entry
            write_json(args.out, record)
            print(name, entry, flush=True)
            continue
        samples = mcmc.get_samples()
        predictive = Predictive(model, samples, infer_discrete=True)
        discrete, disc_s, disc_c = timed(
            lambda predictive=predictive, data=data: predictive(
                jax.random.key(1), *data
            )
        )
        classes = np.asarray(discrete["c"]).reshape(args.num_samples, -1)
        entry.update(
            {
                "nuts_seconds": nuts_s,
                "nuts_compiles": nuts_c,
                "infer_discrete_seconds": disc_s,
                "infer_discrete_compiles": disc_c,
                "nuts_divergences": int(
                    np.asarray(mcmc.get_extra_fields().get("diverging", 0)).sum()
                ),
            }
        )
        entry["vem_share_of_nuts_time"] = vem_s / (nuts_s + disc_s)
        entry["vem_warm_share_of_nuts_time"] = warm_s / (nuts_s + disc_s)
        entry.update(_compare(name, fit, samples, classes, truth))
        record["models"][name] = entry
        record["loadavg"] = os.getloadavg()
        write_json(args.out, record)
        print(name, {k: v for k, v in entry.items()}, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
