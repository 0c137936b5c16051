# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Seed 002 — concept detection with Approximate Laplacian Eigenmaps
#
# Mantziou, Papadopoulos & Kompatsiaris (IJMIR 2015), Tables 6–9 style: MiAP (11-point
# interpolated, %) and P@100 versus the number of labelled training images for
# ALE-SVM, IALE-SVM, ALE-SF, IALE-SF, the baseline linear SVM (BSVM) and exact
# Laplacian eigenmaps + SVM (GSF), on the real concept datasets of this project
# (scene; Corel5k with its most frequent words as concepts; mfeat and msrc with their
# classes as concepts). The unlabelled training images stay in the fit corpus, so the
# semi-supervised methods see them (as in the paper: e.g. 1K–15K labelled of MIRF's
# 25K). Then §4.2.5: the effect of adding unlabelled images with a fixed labelled set.
#
# Run: `python notebooks/seed002_ale.py` (full; table to stdout, JSON to
# notebooks/results/ale.json, figures to docs/figures/) or `--small` (seconds, used by
# the tests). As a notebook (`notebooks/seed002_ale.ipynb`, paired with this file by
# jupytext), the command-line arguments come from the environment variable
# `JAXANNOT_NOTEBOOK_ARGS` (e.g. `JAXANNOT_NOTEBOOK_ARGS=--small`); unset, the
# notebook runs the full mode.

# %%
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import sys
import time

import matplotlib

if "ipykernel" not in sys.modules:
    matplotlib.use("Agg")  # plain `python`: figures are written, never shown
import matplotlib.pyplot as plt
import numpy as np

import jax

from jaxannot.annotators import get_method, parse_hyper
from jaxannot.data import make_task
from jaxannot.data.datasets import load_dataset
from jaxannot.data.protocols import concatenate
from jaxannot.metrics import mean_interpolated_average_precision, precision_at_k

from _notebook import FIGURES, ROOT, script_argv

METHODS = ("ale-svm", "iale-svm", "ale-sf", "iale-sf", "bsvm", "gsf")
LABELS = {
    "ale-svm": "ALE-SVM",
    "iale-svm": "IALE-SVM",
    "ale-sf": "ALE-SF",
    "iale-sf": "IALE-SF",
    "bsvm": "BSVM",
    "gsf": "GSF",
}


# %%
def parse_args(argv=None):
    parser = argparse.ArgumentParser(description="Seed 002 ALE concept detection")
    parser.add_argument("--small", action="store_true", help="seconds-long smoke run")
    parser.add_argument("--data-dir", default=os.environ.get("JAXANNOT_DATA"))
    parser.add_argument("--datasets", default="scene,corel5k,mfeat,msrc")
    parser.add_argument(
        "--fractions",
        default="0.1,0.5,1.0",
        help="labelled fractions of the training images",
    )
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument(
        "--no-unlabelled", action="store_true", help="skip the §4.2.5 experiment"
    )
    parser.add_argument(
        "--corel-words",
        type=int,
        default=50,
        help="Corel5k concepts: the most frequent training words",
    )
    parser.add_argument("--gsf-max-images", type=int, default=2500)
    parser.add_argument(
        "--out", default=str(ROOT / "notebooks" / "results" / "ale.json")
    )
    return parser.parse_args(script_argv(argv))


def frequent_words(train, test, count):
    """Keep the ``count`` most frequent training words (ties by index)."""
    freq = np.asarray(train.words).sum(0)
    keep = np.sort(np.argsort(-freq, kind="stable")[:count])

    def restrict(c):
        return dataclasses.replace(
            c,
            words=np.asarray(c.words)[:, keep],
            word_names=tuple(np.asarray(c.word_names)[keep]),
        )

    return restrict(train), None if test is None else restrict(test)


def shrink(corpus, rows, seed):
    """A seeded random subset of ``rows`` images (small mode)."""
    if corpus.num_images <= rows:
        return corpus
    pick = np.sort(np.random.default_rng(seed).permutation(corpus.num_images)[:rows])
    return corpus.subset(pick)


def measure(scores, truth):
    truth = np.asarray(truth) > 0
    has = truth.any(0)
    # P@100 (seed 002 Table 10); test sets under 200 images use P@(n/2) (msrc: 31)
    top = min(100, len(truth) // 2)
    p100 = [precision_at_k(scores[:, k], truth[:, k], top) for k in np.flatnonzero(has)]
    return {
        "miap": 100.0 * mean_interpolated_average_precision(scores, truth),
        "p_at_100": float(np.mean(p100)),
    }


def run_method(name, task, hyper, seed):
    method = get_method(name)
    hyper = parse_hyper(method, {k: v for k, v in hyper.items() if k in method.hyper})
    start = time.perf_counter()
    fitted = method.fit(task.train, rng_key=jax.random.key(seed), **hyper)
    fit_seconds = time.perf_counter() - start
    scores = np.asarray(method.score_words(fitted, task.test))[task.eval_rows]
    return {
        **measure(scores, task.truth_words),
        "fit_seconds": fit_seconds,
        "total_seconds": time.perf_counter() - start,
    }


# %%
def load(name, args):
    train, test = load_dataset(name, data_dir=args.data_dir)
    if name == "corel5k":
        train, test = frequent_words(train, test, args.corel_words)
    if args.small:
        train = shrink(train, 150, 0)
        test = None if test is None else shrink(test, 80, 1)
    return train, test


def sweep(name, args, hyper):
    train, test = load(name, args)
    rows = []
    fractions = [float(f) for f in args.fractions.split(",")]
    for fraction in fractions:
        for seed in range(args.seeds):
            task = make_task(
                train, test, protocol="inductive", labelled_fraction=fraction, seed=seed
            )
            n_fit = task.train.num_images + task.test.num_images
            for method in METHODS:
                if method == "gsf" and n_fit > args.gsf_max_images:
                    continue
                result = run_method(method, task, hyper, seed)
                rows.append(
                    {
                        "dataset": name,
                        "method": method,
                        "fraction": fraction,
                        "labelled": int(np.asarray(task.train.word_mask).sum()),
                        "seed": seed,
                        **result,
                    }
                )
                print(
                    f"  {name} {method} frac={fraction} seed={seed} "
                    f"miap={result['miap']:.2f} ({result['total_seconds']:.1f}s)",
                    file=sys.stderr,
                    flush=True,
                )
    return rows


# %% [markdown]
# ## §4.2.5 — adding unlabelled images
# A fixed seeded labelled set; growing pools of unlabelled training images enter the
# fit corpus (their words hidden). Only the density of the eigenfunctions changes.


# %%
def unlabelled_effect(name, args, hyper, labelled_count, pools):
    train, test = load(name, args)
    order = np.random.default_rng(0).permutation(train.num_images)
    labelled = train.subset(order[:labelled_count])
    pool = train.subset(order[labelled_count:])
    rows = []
    for extra in pools:
        extra = min(extra, pool.num_images)
        fit_corpus = labelled
        if extra > 0:
            hidden = pool.subset(np.arange(extra))
            hidden = hidden.with_hidden(np.ones(extra, bool))
            fit_corpus = concatenate(labelled, hidden)
        task = make_task(fit_corpus, test, protocol="inductive", seed=0)
        for method in ("iale-sf",) if args.small else ("iale-sf", "iale-svm"):
            result = run_method(method, task, hyper, 0)
            rows.append(
                {
                    "dataset": name,
                    "method": method,
                    "unlabelled": extra,
                    "labelled": labelled_count,
                    **result,
                }
            )
    return rows


# %%
def table(rows, key="miap"):
    lines = []
    for name in dict.fromkeys(r["dataset"] for r in rows):
        sub = [r for r in rows if r["dataset"] == name]
        fractions = sorted({r["fraction"] for r in sub})
        labelled = {
            f: int(np.mean([r["labelled"] for r in sub if r["fraction"] == f]))
            for f in fractions
        }
        lines.append(
            f"\n**{name}** — {key} vs labelled training images (mean over seeds)\n"
        )
        lines.append(
            "| method | " + " | ".join(str(labelled[f]) for f in fractions) + " |"
        )
        lines.append("|---|" + "---|" * len(fractions))
        for method in METHODS:
            cells = []
            for f in fractions:
                vals = [
                    r[key] for r in sub if r["method"] == method and r["fraction"] == f
                ]
                cells.append(f"{np.mean(vals):.2f}" if vals else "—")
            if any(c != "—" for c in cells):
                lines.append(f"| {LABELS[method]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def effect_table(effect):
    pools = [r["unlabelled"] for r in effect if r["method"] == "iale-sf"]
    text = [
        "\n**scene** — §4.2.5: MiAP with a fixed labelled set "
        f"({effect[0]['labelled']} images) and added unlabelled images\n",
        "| method | " + " | ".join(str(p) for p in pools) + " |",
        "|---|" + "---|" * len(pools),
    ]
    for method in dict.fromkeys(r["method"] for r in effect):
        cells = [f"{r['miap']:.2f}" for r in effect if r["method"] == method]
        text.append(f"| {LABELS[method]} | " + " | ".join(cells) + " |")
    return "\n".join(text)


def small_mode(args):
    """The settings of ``--small`` (and the hyper-parameters of every fit)."""
    hyper = {}
    if args.small:
        args.fractions, args.seeds = "1.0", 1
        args.datasets = "scene"
        hyper = {"eigenvectors": 40, "pca": 10, "max_epochs": 100}
    return hyper


def main(argv=None):
    args = parse_args(argv)
    hyper = small_mode(args)
    out = pathlib.Path(args.out)
    # full runs may go one dataset at a time: merge into the existing JSON
    saved = {"sweep": [], "unlabelled": []}
    if not args.small and out.exists():
        saved = json.loads(out.read_text())
    names = [n for n in args.datasets.split(",") if n]
    rows = [r for r in saved["sweep"] if r["dataset"] not in names]
    for name in names:
        rows += sweep(name, args, hyper)
    effect = saved["unlabelled"]
    if not args.no_unlabelled:
        effect = unlabelled_effect(
            "scene",
            args,
            hyper,
            labelled_count=50 if args.small else 300,
            pools=(0, 100) if args.small else (0, 200, 450, 911),
        )
    text = [table(rows, "miap"), table(rows, "p_at_100")]
    if effect:
        text.append(effect_table(effect))
    print("\n".join(text))
    if not args.small:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(
            json.dumps({"sweep": rows, "unlabelled": effect, "hyper": hyper}, indent=1)
        )
    return rows, effect


# %% [markdown]
# ## Figures
#
# MiAP versus the number of labelled training images (the paper's Figures 4–7, one
# panel per dataset), and the effect of adding unlabelled images (§4.2.5). In full mode
# each figure is also written to `docs/figures/`.


# %%
def save(fig, name, args):
    if not args.small:
        FIGURES.mkdir(parents=True, exist_ok=True)
        fig.savefig(FIGURES / name, dpi=100, bbox_inches="tight")


def plot_miap(rows):
    names = list(dict.fromkeys(r["dataset"] for r in rows))
    fig, axes = plt.subplots(
        1, len(names), figsize=(4.2 * len(names), 3.6), squeeze=False
    )
    for ax, name in zip(axes[0], names, strict=True):
        sub = [r for r in rows if r["dataset"] == name]
        for method in METHODS:
            mine = [r for r in sub if r["method"] == method]
            if not mine:
                continue
            xs = sorted({r["labelled"] for r in mine})
            ys = [np.mean([r["miap"] for r in mine if r["labelled"] == x]) for x in xs]
            ax.plot(xs, ys, marker="o", label=LABELS[method])
        ax.set_title(name)
        ax.set_xscale("log")
        # ticks at the measured sizes only (log-axis minor labels overlap)
        ticks = sorted({r["labelled"] for r in sub})
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.minorticks_off()
        ax.set_xlabel("labelled training images")
        ax.set_ylabel("MiAP (%)")
        ax.grid(alpha=0.3)
    axes[0, -1].legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_unlabelled(effect):
    fig, ax = plt.subplots(figsize=(4.2, 3.4))
    for method in dict.fromkeys(r["method"] for r in effect):
        mine = [r for r in effect if r["method"] == method]
        ax.plot(
            [r["unlabelled"] for r in mine],
            [r["miap"] for r in mine],
            marker="o",
            label=LABELS[method],
        )
    ax.set_xlabel(f"unlabelled images added to {effect[0]['labelled']} labelled")
    ax.set_ylabel("MiAP (%)")
    ax.set_title(f"{effect[0]['dataset']}: §4.2.5")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


# %% [markdown]
# ## The learned eigenfunctions
#
# IALE fitted on every scene training image: the first eigenfunctions g_i (smallest
# eigenvalues σ_i of eq. 4) over the bin centres of their principal dimension a_i, with
# the histogram density p of that dimension (grey) — as in the paper's Figure 2 (after
# Fergus et al. 2009): the smoothest eigenfunctions vary along the widest dimensions,
# and each changes sign where the density is low.


# %%
def eigenfunctions(args, hyper, count=8):
    """The fitted ALE eigenfunctions of scene: dims, tables, eigenvalues, centres."""
    train, _ = load("scene", args)
    method = get_method("iale-sf")
    h = parse_hyper(method, {k: v for k, v in hyper.items() if k in method.hyper})
    fitted = method.fit(train, rng_key=jax.random.key(0), **h)
    eig = fitted.params.ale.eigenfunctions
    order = np.argsort(np.asarray(eig.eigenvalues), kind="stable")[:count]
    table = np.asarray(eig.table)[order]
    bins = table.shape[1]
    lo = np.asarray(eig.lo)[order]
    width = np.asarray(eig.width)[order]
    centres = lo[:, None] + (np.arange(bins)[None] + 0.5) * width[:, None]
    return {
        "dims": np.asarray(eig.dims)[order],
        "eigenvalues": np.asarray(eig.eigenvalues)[order],
        "table": table,
        "centres": centres,
        "pca": fitted.params.ale.pca,
        "x": np.asarray(train.features(), np.float64),
    }


def plot_eigenfunctions(eig):
    count = len(eig["dims"])
    cols = min(4, count)
    rows = -(-count // cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(3.2 * cols, 2.6 * rows), squeeze=False
    )
    pca = eig["pca"]
    proj = (eig["x"] - pca.mean) @ pca.components
    for i, ax in enumerate(axes.flat):
        if i >= count:
            ax.axis("off")
            continue
        dim, centres = int(eig["dims"][i]), eig["centres"][i]
        density = ax.twinx()
        step = centres[1] - centres[0]
        edges = np.append(centres - step / 2, centres[-1] + step / 2)
        density.hist(proj[:, dim], bins=edges, color="0.85", density=True)
        density.set_yticks([])
        ax.set_zorder(density.get_zorder() + 1)
        ax.patch.set_visible(False)
        ax.plot(centres, eig["table"][i], color="C3")
        ax.axhline(0, color="0.5", lw=0.5)
        ax.set_title(f"dim {dim}, σ = {eig['eigenvalues'][i]:.3g}", fontsize=9)
    fig.suptitle("scene: IALE eigenfunctions g(s) over principal dimensions")
    fig.tight_layout()
    return fig


# %% [markdown]
# ## Run


# %%
if __name__ == "__main__":
    rows, effect = main()

# %%
if __name__ == "__main__":
    args = parse_args()
    hyper = small_mode(args)
    fig = plot_miap(rows)
    save(fig, "ale_miap_vs_labelled.png", args)
    if effect:
        fig = plot_unlabelled(effect)
        save(fig, "ale_unlabelled.png", args)

# %%
if __name__ == "__main__":
    eig = eigenfunctions(args, hyper)
    print(
        "eigenfunctions: dims",
        eig["dims"].tolist(),
        "eigenvalues",
        [float(f"{v:.4g}") for v in eig["eigenvalues"]],
    )
    fig = plot_eigenfunctions(eig)
    save(fig, "ale_eigenfunctions.png", args)
