# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Seed 001 — harmoniums: DWH, TWH and the max-margin harmonium (MMH)
#
# Reproduces the comparisons of Chen, Zhu, Sun & Xing (TPAMI 2012) on the real data we
# have (their TRECVID / Flickr / hotel sets are not available):
#
# 1. classification accuracy against the number of topics for MMH, TWH, DWH+SVM and a
#    flat SVM on the concatenated views (wikipedia-xmodal, mfeat), averaged over seeds;
# 2. retrieval average precision (cosine similarity of E[h], relevant = same class)
#    and the discriminativeness score (pairwise symmetric KL of class-mean topic
#    distributions, §5.2) of each latent space at its best topic number;
# 3. annotation F1@N, N = 3…7, of DWH on Corel5k against the `empirical` baseline.
#
# `--small` runs the same code on tiny subsets in seconds (the CI smoke test).

# %%
from __future__ import annotations

import argparse
import json
import pathlib
import time

import numpy as np

import jax

from jaxannot import metrics
from jaxannot.annotators import get_method
from jaxannot.data import make_task
from jaxannot.data.datasets import load_dataset
from jaxannot.evaluation import evaluate

FULL = {
    "datasets": ["wikipedia", "mfeat"],
    "topics": [10, 20, 30],
    "seeds": [0, 1, 2],
    "latent": {},  # the registered defaults (steps=300, full batch)
    "mmh": {},  # registered defaults: c1=5, c2=10, 8 alternations x 30 steps
    "corel": {"topics": 60, "steps": 50, "batch_size": 500, "annotate_sweeps": 10},
    "rows": None,
}
SMALL = {
    "datasets": ["wikipedia", "mfeat"],
    "topics": [4],
    "seeds": [0],
    "latent": {"steps": 20, "batch_size": 0},
    "mmh": {
        "iterations": 2,
        "inner_steps": 5,
        "pretrain_steps": 5,
        "svm_epochs": 10,
        "final_svm_epochs": 20,
    },
    "corel": {"topics": 8, "steps": 20, "batch_size": 0, "annotate_sweeps": 3},
    "rows": (120, 40),
}
LATENT_METHODS = ("mmh", "twh", "dwh-svm")


# %%
def shrink(task, rows):
    """Tiny subsets for --small: random rows of train and of the scored test rows."""
    if rows is None:
        return task
    import dataclasses

    n_train, n_test = rows
    rng = np.random.default_rng(0)  # random rows: the files are sorted by class
    n = task.train.num_images
    train = task.train.subset(np.sort(rng.choice(n, min(n_train, n), replace=False)))
    pick = np.sort(rng.choice(len(task.eval_rows), n_test, replace=False))
    keep = np.asarray(task.eval_rows)[pick]
    test = task.test.subset(keep)
    return dataclasses.replace(
        task,
        train=train,
        test=test,
        eval_rows=np.arange(len(keep)),
        truth_words=None if task.truth_words is None else task.truth_words[pick],
        truth_labels=None if task.truth_labels is None else task.truth_labels[pick],
    )


def topic_distributions(h):
    """Seed 001 footnote 8: shift each row of E[h] to be non-negative, normalize."""
    h = np.asarray(h, np.float64)
    h = h - h.min(axis=1, keepdims=True) + 1e-9
    return h / h.sum(axis=1, keepdims=True)


def retrieval_ap(query, query_labels, database, database_labels):
    """Mean AP over queries, ranking the database by cosine similarity."""
    q = query / np.maximum(np.linalg.norm(query, axis=1, keepdims=True), 1e-12)
    d = database / np.maximum(np.linalg.norm(database, axis=1, keepdims=True), 1e-12)
    sims = q @ d.T
    aps = [
        metrics.average_precision(s, (database_labels == y).astype(float))
        for s, y in zip(sims, query_labels, strict=True)
        if np.any(database_labels == y)  # a class absent from the database has no AP
    ]
    return float(np.mean(aps))


# %%
def classification(dataset, cfg, data_dir):
    train, test = load_dataset(dataset, data_dir=data_dir)
    acc = {m: {k: [] for k in cfg["topics"]} for m in LATENT_METHODS}
    acc["svm"] = []
    fitted_at = {}
    for seed in cfg["seeds"]:
        task = shrink(
            make_task(train, test, protocol="inductive", seed=seed), cfg["rows"]
        )
        ev = evaluate("svm", task, seed=seed)
        acc["svm"].append(ev.metrics["classification_accuracy"])
        for k in cfg["topics"]:
            for m in LATENT_METHODS:
                hyper = {"topics": k}
                if m == "mmh":
                    hyper.update(cfg["mmh"])
                else:
                    hyper.update(cfg["latent"])
                t0 = time.perf_counter()
                ev = evaluate(m, task, hyper=hyper, seed=seed)
                acc[m][k].append(ev.metrics["classification_accuracy"])
                print(
                    f"  {dataset} seed={seed} K={k} {m}: "
                    f"{ev.metrics['classification_accuracy']:.4f} "
                    f"({time.perf_counter() - t0:.0f}s)",
                    flush=True,
                )
                if seed == cfg["seeds"][0]:
                    fitted_at[(m, k)] = (ev.fitted, task)
    mean = {
        m: {k: float(np.mean(v)) for k, v in acc[m].items()} for m in LATENT_METHODS
    }
    best = {m: max(mean[m], key=mean[m].get) for m in LATENT_METHODS}
    latent = {}
    for m in LATENT_METHODS:
        fitted, task = fitted_at[(m, best[m])]
        method = get_method(m)
        h_test = np.asarray(method.embed(fitted, task.test))[task.eval_rows]
        h_train = np.asarray(method.embed(fitted, task.train))
        latent[m] = {
            "topics": best[m],
            "retrieval_ap": retrieval_ap(
                h_test, task.truth_labels, h_train, np.asarray(task.train.labels)
            ),
            "pairwise_kl": metrics.pairwise_symmetric_kl(
                topic_distributions(h_test), task.truth_labels
            ),
        }
    return {
        "accuracy_mean": mean,
        "accuracy_runs": {
            m: {str(k): v for k, v in acc[m].items()} for m in LATENT_METHODS
        },
        "svm_mean": float(np.mean(acc["svm"])),
        "svm_runs": acc["svm"],
        "best_topics": best,
        "latent": latent,
    }


def annotation(cfg, data_dir):
    train, test = load_dataset("corel5k", data_dir=data_dir)
    task = shrink(make_task(train, test, protocol="inductive", seed=0), cfg["rows"])
    out = {}
    for m, hyper in (("dwh", cfg["corel"]), ("empirical", {})):
        method = get_method(m)
        fitted = method.fit(
            task.train, rng_key=jax.random.key(0), **{**method.hyper, **hyper}
        )
        scores = np.asarray(method.score_words(fitted, task.test))[task.eval_rows]
        out[m] = {
            f"f1@{n}": metrics.image_prf_at_n(scores, task.truth_words, n)[2]
            for n in range(3, 8)
        }
        out[m]["map"] = metrics.mean_average_precision(scores, task.truth_words)
    return out


# %%
def markdown(results, cfg):
    lines = []
    for ds, r in results["classification"].items():
        lines.append(f"\n**{ds}** — test accuracy, mean of seeds {cfg['seeds']}\n")
        lines.append("| topics | " + " | ".join(LATENT_METHODS) + " | svm |")
        lines.append("|---" * (len(LATENT_METHODS) + 2) + "|")
        for k in cfg["topics"]:
            row = [f"{r['accuracy_mean'][m][k]:.4f}" for m in LATENT_METHODS]
            lines.append(f"| {k} | " + " | ".join(row) + f" | {r['svm_mean']:.4f} |")
        lines.append(
            "\n| method | best topics | accuracy | retrieval AP | pairwise KL |"
        )
        lines.append("|---|---|---|---|---|")
        for m in LATENT_METHODS:
            lat = r["latent"][m]
            lines.append(
                f"| {m} | {lat['topics']} | {r['accuracy_mean'][m][lat['topics']]:.4f} "
                f"| {lat['retrieval_ap']:.4f} | {lat['pairwise_kl']:.4f} |"
            )
    a = results["annotation"]
    if not a:
        return "\n".join(lines)
    lines.append("\n**corel5k** — annotation (inductive split)\n")
    lines.append(
        "| method | " + " | ".join(f"F1@{n}" for n in range(3, 8)) + " | MAP |"
    )
    lines.append("|---" * 7 + "|")
    for m, v in a.items():
        cells = " | ".join(f"{v[f'f1@{n}']:.4f}" for n in range(3, 8))
        lines.append(f"| {m} | {cells} | {v['map']:.4f} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--small", action="store_true", help="tiny subsets (seconds)")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--datasets", nargs="*", default=None)
    parser.add_argument("--topics", nargs="*", type=int, default=None)
    parser.add_argument("--seeds", nargs="*", type=int, default=None)
    parser.add_argument("--skip-corel", action="store_true")
    parser.add_argument(
        "--out",
        default=None,
        help="JSON path (default notebooks/results/harmoniums.json in full mode)",
    )
    args = parser.parse_args(argv)
    cfg = dict(SMALL if args.small else FULL)
    for key in ("datasets", "topics", "seeds"):
        if getattr(args, key):
            cfg[key] = getattr(args, key)
    t0 = time.perf_counter()
    results = {"config": {k: v for k, v in cfg.items()}, "classification": {}}
    for ds in cfg["datasets"]:
        results["classification"][ds] = classification(ds, cfg, args.data_dir)
    results["annotation"] = {} if args.skip_corel else annotation(cfg, args.data_dir)
    results["seconds"] = time.perf_counter() - t0
    print(markdown(results, cfg))
    out = args.out or (None if args.small else "notebooks/results/harmoniums.json")
    if out:
        path = pathlib.Path(out)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(results, indent=1, default=str))
    return results


if __name__ == "__main__":
    main()
