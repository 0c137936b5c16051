"""LapMixUnigram on the modelling core (declaration + VEM + LapVar1) vs the hand path.

Both fit the same Corel5k transductive task (25% of the images annotated, seed 000's
protocol) with the same graph (10-NN, heat weights), K topics, 20 plain EM warm-start
iterations and 50 LapVar1 iterations:

- ``core``: :func:`jaxannot.models.mixture_of_unigrams.mixture_of_unigrams` (explicit
  topic site) fitted by :class:`jaxannot.inference.VEM` — the generic E-step evaluates
  the declaration at every topic value, the registered closed-form M-step, the
  :class:`jaxannot.inference.LapVar1` E-step transform;
- ``hand``: the hand-derived fast path the core replaced
  (:func:`jaxannot.models.mixture_em.fit_em` and
  :func:`jaxannot.inference.lapvar.fit_regularized_em` with the model's
  ``linear_terms``/``m_step`` callbacks).

Each is run ``--repeats`` times, alternating, on the same inputs, with its compiled
programs built once (module-level VEM objects and callbacks, as the registered method
keeps them); the first run of each includes JAX compilation, reported in its own field
(first minus median of the rest). Both include building the LapVar1 neighbour table.
Accuracy and complete length are measured on the unannotated images from each fit's
posteriors.

    python benchmarks/lap_mix_unigram_core.py --data-dir DATA --json OUT.json
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
from _device import add_device_argument, device_record, use_device

import jax
import jax.numpy as jnp

from jaxannot import metrics
from jaxannot.data import make_task
from jaxannot.data.datasets import load_dataset
from jaxannot.graph import knn_graph
from jaxannot.inference import lapvar
from jaxannot.inference.vem import VEM
from jaxannot.models import mixture_em as mem
from jaxannot.models import mixture_of_unigrams as mu

# built once, as the registered method does: later fits reuse the compiled programs
PLAIN = VEM(mu.mixture_of_unigrams, "z")
LAPLACIAN = VEM(mu.mixture_of_unigrams, "z")


def core_fit(key, data, graph, topics, warm, iterations):
    kwargs = dict(num_topics=topics)
    warm_key, run_key = jax.random.split(key)
    init = PLAIN.run(warm_key, warm, data, progress_bar=False, **kwargs).params
    init.pop("terms")
    LAPLACIAN.estep = lapvar.LapVar1(graph, 1.0)
    res = LAPLACIAN.run(
        run_key, iterations, data, init_params=init, progress_bar=False, **kwargs
    )
    return np.asarray(res.posteriors), np.asarray(res.params["beta_0"])


def _linear_terms(params, data):
    return mu.linear_terms(params, data[0])


def _m_step(phi, data):
    return mu.m_step(phi, data[0], data[1], data[2])


def _log_prior(params, data):
    return mu.log_prior(params, data[1], data[2])


def hand_fit(key, data, graph, topics, warm, iterations):
    warm_key, run_key = jax.random.split(key)
    prior = mem.MixturePrior()
    params, _ = mem.fit_em(warm_key, data, topics, prior=prior, num_iterations=warm)
    a = jnp.float32(prior.pi_concentration)
    b = jnp.float32(prior.beta_concentration)
    state, _, _ = lapvar.fit_regularized_em(
        run_key,
        params,
        (data, a, b),
        lapvar.neighbour_table(graph),
        jnp.float32(1.0),
        jnp.float32(0.5),
        jnp.float32(1e-6),
        linear_terms=_linear_terms,
        m_step=_m_step,
        log_prior=_log_prior,
        num_iterations=iterations,
    )
    return np.asarray(state.phi), np.exp(np.asarray(state.params.log_betas[0]))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", default=os.environ.get("JAXANNOT_DATA"))
    p.add_argument("--topics", type=int, default=50)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--json", default=None)
    add_device_argument(p)
    args = p.parse_args(argv)
    use_device(args.device)

    train, test = load_dataset("corel5k", data_dir=args.data_dir)
    task = make_task(train, test, protocol="transductive", seed=args.seed)
    corpus = task.train
    text = np.asarray(corpus.words, np.float32) * np.asarray(corpus.word_mask)[:, None]
    visual = np.asarray(corpus.views[next(iter(corpus.views))], np.float32)
    data = (jnp.asarray(text), jnp.asarray(visual))
    graph = knn_graph(visual, 10, weight="heat")
    rows = np.asarray(task.eval_rows)
    fits = {"core": core_fit, "hand": hand_fit}
    seconds = {name: [] for name in fits}
    results = {}
    for r in range(args.repeats):
        for name, fit in fits.items():
            key = jax.random.key(args.seed)
            start = time.perf_counter()
            phi, beta_text = fit(key, data, graph, args.topics, 20, 50)
            seconds[name].append(time.perf_counter() - start)
            scores = phi[rows] @ beta_text
            results[name] = {
                "accuracy": float(
                    metrics.annotation_accuracy(scores, task.truth_words)
                ),
                "complete_length": float(
                    metrics.complete_length(scores, task.truth_words)
                ),
            }
            print(f"{name} run {r}: {seconds[name][-1]:.2f} s {results[name]}")
    out = {"dataset": "corel5k", "protocol": "transductive 25%", "topics": args.topics}
    for name in fits:
        warm = float(np.median(seconds[name][1:]))
        out[name] = {
            "seconds": warm,
            "compile_seconds": seconds[name][0] - warm,
            "all_seconds": seconds[name],
            **results[name],
        }
    out["core_over_hand"] = out["core"]["seconds"] / out["hand"]["seconds"]
    out["device"] = device_record()
    print(json.dumps(out, indent=1))
    if args.json:
        with open(args.json + ".tmp", "w") as f:
            json.dump(out, f, indent=1)
        os.replace(args.json + ".tmp", args.json)


if __name__ == "__main__":
    main()
