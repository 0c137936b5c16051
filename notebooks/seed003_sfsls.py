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
# # Seed 003 — SFSLS: sparse feature selection with the l2,p norm (Shi & Ruan 2015)
#
# Reproduces the protocol of §3 of the paper on the datasets we have (the paper used
# NUS-WIDE and MSRA-MM 2.0, which are not available here): a random training set of
# up to 3000 images (at most 60% of the dataset), the rest for testing; a labelled
# fraction of 5/10/25/50/100% of the training images; 5 random runs; MAP ± std.
#
# * Table 1 — MAP (labelled fraction × method) for SFSLS (p = ½), SFSS (p = 1) and FSNM.
# * Table 2 — the p sweep {0.1, 0.25, 0.5, 0.75, 1} at 10% labelled.
# * Fig. 1 — with vs without the unlabelled training images (SFSS and SFSLS).
#
# **Hyper-parameters by cross-validation on the labelled training images.** In every
# run, each method's setting is chosen from a grid (``GRID``) by k-fold
# cross-validation (``--folds``, default 3) of the run's *labelled training* images at
# 10% labelled: each fold's labelled images have their words hidden (they stay in the
# k-NN graph as unlabelled training images), the model is fitted on the rest and
# scored (MAP) on that fold. The run's test images take no part in the choice; the
# setting chosen in a run is used for every labelled fraction of that run. Table 2
# chooses λ per p the same way (r as chosen for p = ½), and the labelled-only
# variants of Fig. 1 choose their own λ.
#
# ``python notebooks/seed003_sfsls.py --small`` runs in seconds (used by the tests);
# the full run (about 2.5 hours of one CPU core for the four datasets) writes markdown
# tables to stdout, JSON to ``notebooks/results/sfsls.json`` and the figures to
# ``docs/figures/``. A long run can go one dataset per process::
#
#     python notebooks/seed003_sfsls.py --datasets scene \
#         --out notebooks/results/sfsls_scene.json
#
# and ``--reuse-dir notebooks/results`` then reads each dataset's tables from its
# ``sfsls_NAME.json`` there instead of measuring them again, only when that file holds
# every run with exactly this configuration (else the dataset is measured).
#
# As a notebook (``notebooks/seed003_sfsls.ipynb``, paired with this file by jupytext),
# the command-line arguments come from the environment variable
# ``JAXANNOT_NOTEBOOK_ARGS`` (e.g. ``JAXANNOT_NOTEBOOK_ARGS=--small``); unset, the
# notebook runs the full mode.

# %%
from __future__ import annotations

import os

# Single-threaded OpenBLAS: LAPACK calls (the d × d Cholesky factorizations) run ~40×
# faster on a loaded 2-core machine without OpenBLAS's spinning worker threads.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import collections
import itertools
import json
import pathlib
import sys
import time

import matplotlib

if "ipykernel" not in sys.modules:
    matplotlib.use("Agg")  # plain `python`: figures are written, never shown
import matplotlib.pyplot as plt
import numpy as np

import jax

from jaxannot.annotators import get_method
from jaxannot.data.corpus import Corpus
from jaxannot.data.datasets import load_dataset
from jaxannot.data.protocols import concatenate, make_task
from jaxannot.metrics import mean_average_precision

from _notebook import FIGURES, ROOT, script_argv

FRACTIONS = (0.05, 0.1, 0.25, 0.5, 1.0)
P_SWEEP = (0.1, 0.25, 0.5, 0.75, 1.0)
METHODS = ("sfsls", "sfss", "fsnm")
COREL_CONCEPTS = 50  # Corel5k: the most frequent words are the concepts
TUNE_FRACTION = 0.1  # the labelled fraction the settings are cross-validated at

# The grids, fixed before any run (the same for every dataset and run).
GRID = {
    "sfsls": dict(lam=(1.0, 3.0, 10.0), subspace=(1, 3)),
    "sfss": dict(lam=(3.0, 10.0, 30.0), subspace=(1, 3)),
    "fsnm": dict(selected=(0.3, 0.6, 1.0), ridge=(1.0, 10.0, 100.0)),
}
#: Held fixed: at a good λ, α and μ move the CV MAP by < 0.002 (docs/sfsls.md); FSNM's
#: γ only changes which features are kept.
FIXED = {
    "sfsls": dict(alpha=0.1, mu=10.0),
    "sfss": dict(alpha=0.1, mu=10.0),
    "fsnm": dict(gamma=1.0),
}
#: λ grid of the p sweep (Table 2), per p.
P_LAM = (1.0, 3.0, 10.0)
#: Grid of the labelled-only variants (Fig. 1).
LABELLED_ONLY_GRID = dict(lam=(1.0, 3.0, 10.0, 30.0))
SMALL_GRID = {
    "sfsls": dict(lam=(1.0, 3.0)),
    "sfss": dict(lam=(3.0, 10.0)),
    "fsnm": dict(ridge=(1.0, 10.0)),
}
SMALL_P_LAM = (1.0, 3.0)
SMALL_LABELLED_ONLY_GRID = dict(lam=(1.0, 10.0))
LABELS = {"sfsls": "SFSLS (p = ½)", "sfss": "SFSS (p = 1)", "fsnm": "FSNM"}
_CACHE: dict = {}


# %%
def load_pool(name: str, data_dir=None) -> Corpus:
    """All images of a dataset in one corpus, concepts as 0/1 words."""
    train, test = load_dataset(name, data_dir=data_dir)
    pool = train if test is None else concatenate(train, test)
    if name.startswith("corel"):
        words = np.asarray(pool.words) > 0
        top = np.sort(np.argsort(-words.sum(0), kind="stable")[:COREL_CONCEPTS])
        pool = Corpus.from_arrays(
            {k: np.asarray(v) for k, v in pool.views.items()},
            view_kinds=dict(pool.view_kinds),
            words=words[:, top].astype(np.float32),
            word_names=tuple(pool.word_names[i] for i in top),
            name=pool.name,
        )
    return pool


def split(pool: Corpus, train_size: int, seed: int) -> tuple[Corpus, Corpus]:
    n = pool.num_images
    n_train = min(train_size, int(0.6 * n))
    perm = np.random.default_rng(seed).permutation(n)
    return pool.subset(np.sort(perm[:n_train])), pool.subset(np.sort(perm[n_train:]))


def _fit(method, corpus, hyper, seed, iterations):
    m = get_method(method)
    hyper = dict(hyper)
    if iterations is not None and "iterations" in m.hyper:
        hyper["iterations"] = iterations
    return m, m.fit(corpus, rng_key=jax.random.key(seed), **hyper)


def _key(*parts):
    return json.dumps(parts, sort_keys=True, default=str)


def run_once(pool, method, hyper, fraction, seed, train_size, iterations=None):
    """Test MAP of one fit on one random split (memoized: tables share runs)."""
    key = _key("test", pool.name, method, hyper, fraction, seed, train_size, iterations)
    if key not in _CACHE:
        train, test = split(pool, train_size, seed)
        task = make_task(train, test, labelled_fraction=fraction, seed=seed)
        m, fitted = _fit(method, task.train, hyper, seed, iterations)
        scores = np.asarray(m.score_words(fitted, task.test))[task.eval_rows]
        _CACHE[key] = float(mean_average_precision(scores, task.truth_words))
    return _CACHE[key]


def cv_once(pool, method, hyper, seed, train_size, folds, iterations=None):
    """Cross-validated MAP on the labelled training images of run ``seed``.

    The labelled images of the run's training set at :data:`TUNE_FRACTION` are cut
    into ``folds`` parts (``RandomState(seed)`` shuffle); for each part, its words are
    hidden, the model is fitted on the training set (that part's images stay in it,
    unlabelled) and the part's images are scored. The test images are not used.
    """
    key = _key("cv", pool.name, method, hyper, seed, train_size, folds, iterations)
    if key not in _CACHE:
        train, test = split(pool, train_size, seed)
        # the run's fit corpus at TUNE_FRACTION (the same labelled subset); only its
        # training images are used
        fit_corpus = make_task(
            train, test, labelled_fraction=TUNE_FRACTION, seed=seed
        ).train
        truth = np.asarray(train.words)
        labelled = np.flatnonzero(np.asarray(fit_corpus.word_mask))
        order = np.random.RandomState(seed).permutation(labelled)
        maps = []
        for rows in np.array_split(order, folds):
            rows = np.sort(rows)
            hidden = np.zeros(train.num_images, dtype=bool)
            hidden[rows] = True
            m, fitted = _fit(
                method, fit_corpus.with_hidden(hidden), hyper, seed, iterations
            )
            scores = np.asarray(m.score_words(fitted, train.subset(rows)))
            maps.append(float(mean_average_precision(scores, truth[rows])))
        _CACHE[key] = float(np.mean(maps))
    return _CACHE[key]


def mean_std(values):
    return float(np.mean(values)), float(np.std(values))


# %%
def choose(pool, method, grid, fixed, seed, args):
    """The setting of ``grid`` (plus ``fixed``) with the best cross-validated MAP."""
    scored = []
    for values in itertools.product(*grid.values()):
        hyper = dict(fixed, **dict(zip(grid, values, strict=True)))
        score = cv_once(
            pool, method, hyper, seed, args.train_size, args.folds, args.iterations
        )
        scored.append((score, hyper))
    score, hyper = max(scored, key=lambda r: r[0])  # the first among equals
    return {"hyper": hyper, "cv_map": score, "grid_size": len(scored)}


def tune_run(pool, seed, args):
    """Every setting the run ``seed`` needs, each chosen by cross-validation."""
    out = {}
    for method in METHODS:
        out[method] = choose(pool, method, args.grid[method], FIXED[method], seed, args)
    base = {k: v for k, v in out["sfsls"]["hyper"].items() if k != "lam"}
    for p in args.p_sweep:
        out[f"sfsls/p={p}"] = choose(
            pool, "sfsls", {"lam": args.p_lam}, dict(base, p=p), seed, args
        )
    for method in ("sfss", "sfsls"):
        fixed = {k: v for k, v in out[method]["hyper"].items() if k != "lam"}
        fixed["use_unlabelled"] = False
        out[f"{method}/labelled-only"] = choose(
            pool, method, args.labelled_only_grid, fixed, seed, args
        )
    return out


def experiments(pool, name, args, checkpoint=None):
    """Every run in turn: choose its settings by CV, then fit and test them.

    ``checkpoint(out)`` is called after each run with the tables over the runs done so
    far (``out["runs_done"]``), so an interrupted run keeps what it measured.
    """
    cv = {}
    out = {}
    for s in range(args.runs):
        start = time.perf_counter()
        cv[str(s)] = tune_run(pool, s, args)
        print(
            f"  {name} run {s}: chosen by CV in {time.perf_counter() - start:.0f} s: "
            + "; ".join(
                f"{m} {c['hyper']} ({c['cv_map']:.3f})"
                for m, c in cv[str(s)].items()
                if m in METHODS
            ),
            file=sys.stderr,
            flush=True,
        )
        out = tables(pool, cv, range(s + 1), args)
        if checkpoint is not None:
            checkpoint(out)
    return out


def tables(pool, cv, runs, args):
    """Table 1, Table 2 and Fig. 1 over ``runs`` with the settings in ``cv``."""
    out = {"table1": {}, "table2": {}, "fig1": {}, "cv": dict(cv)}
    out["runs_done"] = len(runs)

    def test_maps(entry, fraction):
        method = entry.split("/")[0]
        return [
            run_once(
                pool,
                method,
                cv[str(s)][entry]["hyper"],
                fraction,
                s,
                args.train_size,
                args.iterations,
            )
            for s in runs
        ]

    for fraction in args.fractions:
        for method in METHODS:
            maps = test_maps(method, fraction)
            out["table1"][f"{fraction}/{method}"] = mean_std(maps)
    for p in args.p_sweep:
        out["table2"][str(p)] = mean_std(test_maps(f"sfsls/p={p}", TUNE_FRACTION))
    # SFSLS with p chosen by CV too (from the sweep's cross-validated MAPs)
    best_p = [
        max(args.p_sweep, key=lambda p: cv[str(s)][f"sfsls/p={p}"]["cv_map"])
        for s in runs
    ]
    maps = [
        run_once(
            pool,
            "sfsls",
            cv[str(s)][f"sfsls/p={p}"]["hyper"],
            TUNE_FRACTION,
            s,
            args.train_size,
            args.iterations,
        )
        for s, p in zip(runs, best_p, strict=True)
    ]
    out["table2"]["cv"] = mean_std(maps)
    out["table2"]["cv_p"] = [float(p) for p in best_p]
    for fraction in args.fractions:
        if fraction >= 1.0:
            continue  # no unlabelled images to drop
        for method in ("sfss", "sfsls"):
            out["fig1"][f"{fraction}/{method}/labelled-only"] = mean_std(
                test_maps(f"{method}/labelled-only", fraction)
            )
            out["fig1"][f"{fraction}/{method}/all"] = out["table1"][
                f"{fraction}/{method}"
            ]
    return out


def _chosen(res, entry):
    """``key=value (count)`` of the values chosen over the runs."""
    counts = collections.defaultdict(collections.Counter)
    for per_run in res["cv"].values():
        for k, v in per_run[entry]["hyper"].items():
            counts[k][v] += 1
    return "; ".join(
        f"{k} " + ", ".join(f"{v} ×{n}" for v, n in sorted(c.items(), key=str))
        for k, c in counts.items()
        if len(c) > 1 or k in ("alpha", "lam", "subspace", "gamma", "selected", "ridge")
    )


def markdown(name, res, args):
    runs = res.get("runs_done", args.runs)
    lines = [f"### {name}: MAP ± std over {runs} runs (Table 1)", ""]
    lines.append("| labelled | " + " | ".join(m.upper() for m in METHODS) + " |")
    lines.append("|---" * (len(METHODS) + 1) + "|")
    for fraction in args.fractions:
        cells = []
        for m in METHODS:
            mu, sd = res["table1"][f"{fraction}/{m}"]
            cells.append(f"{mu:.3f} ± {sd:.3f}")
        lines.append(f"| {fraction:.0%} | " + " | ".join(cells) + " |")
    lines += ["", f"Chosen by {args.folds}-fold CV at 10% labelled, over the runs:", ""]
    for m in METHODS:
        cv = np.mean([per_run[m]["cv_map"] for per_run in res["cv"].values()])
        lines.append(f"* {m} (CV MAP {cv:.3f}): {_chosen(res, m)}")
    lines += ["", f"{name}: SFSLS MAP for p at 10% labelled, λ by CV per p (Table 2)"]
    lines.append("")
    lines.append("| p | " + " | ".join(str(p) for p in args.p_sweep) + " | p by CV |")
    lines.append("|---" * (len(args.p_sweep) + 2) + "|")
    lines.append(
        "| MAP | "
        + " | ".join(f"{res['table2'][str(p)][0]:.3f}" for p in args.p_sweep)
        + f" | {res['table2']['cv'][0]:.3f} |"
    )
    lines.append("")
    lines.append(
        "p chosen by CV in the runs: "
        + ", ".join(str(p) for p in res["table2"]["cv_p"])
    )
    lines += ["", f"{name}: with vs without unlabelled images (Fig. 1)", ""]
    lines.append(
        "| labelled | SFSS labelled-only | SFSS all | SFSLS labelled-only | SFSLS all |"
    )
    lines.append("|---|---|---|---|---|")
    for fraction in args.fractions:
        if fraction >= 1.0:
            continue
        cells = [
            f"{res['fig1'][f'{fraction}/{m}/{u}'][0]:.3f}"
            for m in ("sfss", "sfsls")
            for u in ("labelled-only", "all")
        ]
        lines.append(f"| {fraction:.0%} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# %%
def parse_args(argv=None):
    ap = argparse.ArgumentParser(description="Seed 003 SFSLS feature selection")
    ap.add_argument("--small", action="store_true", help="seconds-long smoke run")
    ap.add_argument("--datasets", default="scene,yeast,corel5k,mfeat")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--folds", type=int, default=3)
    ap.add_argument("--train-size", type=int, default=3000)
    ap.add_argument("--iterations", type=int, default=None)
    ap.add_argument("--out", default=str(ROOT / "notebooks" / "results" / "sfsls.json"))
    ap.add_argument("--md", default=None, help="also write the tables here")
    ap.add_argument(
        "--reuse-dir",
        default=None,
        help="read a dataset's tables from DIR/sfsls_NAME.json (DIR relative to the "
        "repository root) when it holds every run of this configuration",
    )
    ap.add_argument("--fractions", default=",".join(map(str, FRACTIONS)))
    ap.add_argument("--p-sweep", default=",".join(map(str, P_SWEEP)))
    args = ap.parse_args(script_argv(argv))
    args.fractions = tuple(float(v) for v in args.fractions.split(","))
    args.p_sweep = tuple(float(v) for v in args.p_sweep.split(","))
    args.grid, args.p_lam = GRID, P_LAM
    args.labelled_only_grid = LABELLED_ONLY_GRID
    if args.small:
        args.datasets, args.runs, args.train_size = "scene", 1, 300
        args.fractions, args.p_sweep, args.iterations = (0.1,), (0.5, 1.0), 5
        args.grid, args.p_lam = SMALL_GRID, SMALL_P_LAM
        args.labelled_only_grid = SMALL_LABELLED_ONLY_GRID
    return args


def configuration(args) -> dict:
    """Every setting that decides the tables (as JSON stores it)."""
    config = {
        k: v
        for k, v in vars(args).items()
        if k not in ("data_dir", "out", "md", "reuse_dir", "grid", "labelled_only_grid")
    }
    config["grid"] = {m: dict(g, **FIXED[m]) for m, g in args.grid.items()}
    config["labelled_only_grid"] = args.labelled_only_grid
    config["tune_fraction"] = TUNE_FRACTION
    return json.loads(json.dumps(config))


def reused(name, config, args):
    """The dataset's entry of ``DIR/sfsls_NAME.json`` if it was measured with this
    configuration (the dataset list aside) and holds every run; else ``None``."""
    if args.reuse_dir is None:
        return None
    path = ROOT / args.reuse_dir / f"sfsls_{name}.json"  # relative to the repo
    if not path.exists():
        print(f"{name}: no {path.name} to reuse; measuring", flush=True)
        return None
    saved = json.loads(path.read_text())
    same = {k: v for k, v in saved.get("config", {}).items() if k != "datasets"}
    want = {k: v for k, v in config.items() if k != "datasets"}
    entry = saved.get(name)
    if same != want or entry is None or entry.get("runs_done") != args.runs:
        print(f"{name}: {path.name} is not this configuration; measuring", flush=True)
        return None
    print(
        f"{name}: {args.runs} runs read from {path.name} "
        f"(measured in {entry['seconds'] / 60:.0f} min)",
        flush=True,
    )
    return entry


def main(argv=None):
    args = parse_args(argv)
    config = configuration(args)
    results = {"config": config}
    texts = []
    for name in args.datasets.split(","):
        entry = reused(name, config, args)
        if entry is None:
            start = time.perf_counter()
            pool = load_pool(name, args.data_dir)
            entry = {
                "n_images": pool.num_images,
                "n_concepts": pool.num_words,
                "n_features": int(pool.concatenated_views().shape[1]),
            }

            def checkpoint(res, name=name, entry=entry, start=start):
                entry.update(res)
                entry["seconds"] = time.perf_counter() - start
                results[name] = entry
                write(results, [*texts, markdown(name, entry, args)], args)

            experiments(pool, name, args, checkpoint)
        results[name] = entry
        texts.append(markdown(name, entry, args))
        print(texts[-1], flush=True)
    write(results, texts, args)
    return results, args


def write(results, texts, args):
    """The JSON (``--out``) and, with ``--md``, the markdown tables (atomically)."""
    for path, text in ((args.out, json.dumps(results, indent=1)), (args.md, None)):
        if path is None:
            continue
        path = pathlib.Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text("\n".join(texts) if text is None else text)
        tmp.replace(path)


# %% [markdown]
# ## Figures
#
# MAP against the fraction of labelled training images (Table 1 as the paper's
# figure, one panel per dataset, mean ± std over the runs), SFSLS's MAP against p at
# 10% labelled (Table 2), and SFSS/SFSLS with and without the unlabelled training
# images (Fig. 1). In full mode each figure is also written to `docs/figures/`.


# %%
def save(fig, name, args):
    if not args.small:
        FIGURES.mkdir(parents=True, exist_ok=True)
        fig.savefig(FIGURES / name, dpi=100, bbox_inches="tight")


def _panels(names, width=3.6, height=3.2):
    fig, axes = plt.subplots(
        1, len(names), figsize=(width * len(names), height), squeeze=False
    )
    return fig, axes[0]


def _datasets(results):
    return [k for k in results if k != "config"]


def _fraction_axis(ax, fractions, title):
    """A MAP panel over labelled fractions: log axis, ticks at the fractions run."""
    ax.set_xscale("log")
    ax.set_xticks([f * 100 for f in fractions], [f"{f:.0%}" for f in fractions])
    ax.minorticks_off()
    ax.set_title(title)
    ax.set_xlabel("labelled training images")
    ax.set_ylabel("MAP")
    ax.grid(alpha=0.3)


def plot_map_vs_fraction(results):
    names = _datasets(results)
    fractions = results["config"]["fractions"]
    fig, axes = _panels(names)
    for ax, name in zip(axes, names, strict=True):
        table = results[name]["table1"]
        for method in METHODS:
            mean, std = np.array([table[f"{f}/{method}"] for f in fractions]).T
            ax.errorbar(
                np.array(fractions) * 100,
                mean,
                yerr=std,
                marker="o",
                capsize=3,
                label=LABELS[method],
            )
        _fraction_axis(ax, fractions, f"{name} ({results[name]['runs_done']} runs)")
    axes[-1].legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_p_sweep(results):
    names = _datasets(results)
    ps = results["config"]["p_sweep"]
    fig, axes = _panels(names, height=3.0)
    for i, (ax, name) in enumerate(zip(axes, names, strict=True)):
        table = results[name]["table2"]
        mean, std = np.array([table[str(p)] for p in ps]).T
        ax.errorbar(ps, mean, yerr=std, marker="o", capsize=3, color=f"C{i}")
        ax.axhline(table["cv"][0], color="0.5", ls="--", lw=1, label="p by CV")
        ax.set_title(name)
        ax.set_xlabel("p of the l2,p norm")
        ax.set_ylabel(f"SFSLS MAP at {TUNE_FRACTION:.0%} labelled")
        ax.grid(alpha=0.3)
    axes[-1].legend(fontsize=8)
    fig.suptitle("the p sweep (λ by CV per p)")
    fig.tight_layout()
    return fig


def plot_unlabelled(results):
    names = _datasets(results)
    fractions = [f for f in results["config"]["fractions"] if f < 1.0]
    fig, axes = _panels(names)
    for ax, name in zip(axes, names, strict=True):
        fig1 = results[name]["fig1"]
        for i, method in enumerate(("sfss", "sfsls")):
            for use, style in (("all", "-"), ("labelled-only", "--")):
                mean = [fig1[f"{f}/{method}/{use}"][0] for f in fractions]
                ax.plot(
                    np.array(fractions) * 100,
                    mean,
                    style,
                    marker="o",
                    color=f"C{i}",
                    label=f"{method.upper()} {use}",
                )
        _fraction_axis(ax, fractions, name)
    axes[-1].legend(fontsize=7)
    fig.tight_layout()
    return fig


# %% [markdown]
# ## Run


# %%
if __name__ == "__main__":
    results, args = main()

# %%
if __name__ == "__main__":
    fig = plot_map_vs_fraction(results)
    save(fig, "sfsls_map_vs_labelled.png", args)

# %%
if __name__ == "__main__":
    fig = plot_p_sweep(results)
    save(fig, "sfsls_p_sweep.png", args)

# %%
if __name__ == "__main__":
    fig = plot_unlabelled(results)
    save(fig, "sfsls_unlabelled.png", args)
