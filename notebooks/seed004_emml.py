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
# # Seed 004 — EMML: structured max-margin annotation and multimodal retrieval
#
# Guo, Zhang, Xing & Faloutsos (ACM TKDD 2016), Section 5, on Corel5k (blob tokens,
# 374 words) and scene (colour moments, 6 concepts): EMML against MBRM (Feng et al.
# 2004) and the empirical word-frequency baseline for
#
# - **annotation** (§4.1): per-word precision / recall / F1 of the top-5 words, and
#   precision / recall of the top-n words for n = 2 … 50;
# - **word query** (§4.2): for every test word, the top-n test images;
# - **image retrieval** (§4.3): for test images, the top-n training images
#   (relevant = shares a ground-truth word);
# - paired t-test and Wilcoxon signed-rank test (scipy) of EMML vs MBRM over queries.
#
# Patent notice: the EMML method is the subject of US patent 8,463,053 B1 (related: US
# 8,923,630 and US 10,007,679).
#
# Run: `python notebooks/seed004_emml.py` (full; writes notebooks/results/emml.json and
# emml.md, prints markdown tables, writes the figures to docs/figures/) or `--small`
# (seconds; a subsample, used by the test). As a notebook
# (`notebooks/seed004_emml.ipynb`, paired with this file by jupytext), the
# command-line arguments come from the environment variable `JAXANNOT_NOTEBOOK_ARGS`
# (e.g. `JAXANNOT_NOTEBOOK_ARGS=--small`); unset, the notebook runs the full mode.

# %%
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import matplotlib

if "ipykernel" not in sys.modules:
    matplotlib.use("Agg")  # plain `python`: figures are written, never shown
import matplotlib.pyplot as plt
import numpy as np
from scipy import stats

import jax

from jaxannot import metrics, retrieval
from jaxannot.annotators import get_method, parse_hyper
from jaxannot.data.datasets import load_dataset
from jaxannot.methods.emml.mbrm import default_bandwidth

from _notebook import FIGURES, ROOT, script_argv

NS = (2, 3, 5, 10, 15, 20, 30, 40, 50)


# EMML runs at the library's defaults, each chosen by 3-fold cross-validation on
# Corel5k's training images (`jaxannot methods emml` prints them with their records):
# 3000 random training images as VReps (scene has 1211: all of them), an RBF kernel
# with gamma = 2 / median squared distance, C = 2, the exact dual solver.
EMML_HYPER: dict = {}
# MBRM's bandwidth is chosen per dataset on a validation split of the training set,
# from this grid of multiples of its default heuristic.
BANDWIDTH_GRID = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)


# %%
def _subsample(corpus, size, seed):
    if corpus.num_images <= size:
        return corpus
    rows = np.sort(np.random.default_rng(seed).permutation(corpus.num_images)[:size])
    return corpus.subset(rows)


def _choose_bandwidth(train, seed, grid=BANDWIDTH_GRID):
    """MBRM bandwidth with the best per-word F1@5 on 500 held-out training images."""
    rows = np.random.default_rng(seed).permutation(train.num_images)
    held = min(500, train.num_images // 5)
    val, fit = train.subset(np.sort(rows[:held])), train.subset(np.sort(rows[held:]))
    x = np.asarray(fit.view(fit.primary_view), np.float32)
    base = default_bandwidth(x)
    method = get_method("mbrm")
    truth = np.asarray(val.words) > 0
    best = None
    for mult in grid:
        fitted = method.fit(fit, rng_key=jax.random.key(0), bandwidth=base * mult)
        s = np.asarray(method.score_words(fitted, val))
        f1 = float(metrics.word_prf_at_n(s, truth, min(5, truth.shape[1]))["f1"])
        if best is None or f1 > best[1]:
            best = (base * mult, f1)
    return best


def _per_query_pr(ranked: np.ndarray, relevant: np.ndarray, n: int):
    """Precision and recall of the first ``n`` ranked ids of each query."""
    top = ranked[:, :n]
    valid = top >= 0
    hits = np.take_along_axis(relevant, np.maximum(top, 0), axis=1) & valid
    p = hits.sum(1) / n
    r = hits.sum(1) / np.maximum(relevant.sum(1), 1)
    return p, r


def _curve(ranked, relevant, ns):
    out = {}
    for n in ns:
        if n > ranked.shape[1]:
            break
        p, r = _per_query_pr(ranked, relevant, n)
        out[n] = (float(p.mean()), float(r.mean()))
    return out


def _paired(a: np.ndarray, b: np.ndarray) -> dict:
    """Paired t-test and Wilcoxon signed-rank test of per-query values a vs b."""
    diff = a - b
    res = {"mean_a": float(a.mean()), "mean_b": float(b.mean()), "queries": len(a)}
    if np.allclose(diff, 0):
        res.update(t=0.0, t_p=1.0, wilcoxon_p=1.0)
        return res
    t = stats.ttest_rel(a, b)
    w = stats.wilcoxon(a, b, zero_method="wilcox")
    res.update(t=float(t.statistic), t_p=float(t.pvalue), wilcoxon_p=float(w.pvalue))
    return res


# %%
def run(name, data_dir, small, seed=0):
    train, test = load_dataset(name, data_dir=data_dir)
    if small:
        train, test = _subsample(train, 250, seed), _subsample(test, 60, seed)
    truth = np.asarray(test.words) > 0
    num_words = truth.shape[1]
    ns = tuple(n for n in NS if n <= num_words) if name != "scene" else (2, 3, 5)
    key = jax.random.key(seed)
    hyper = dict(EMML_HYPER)
    if small:
        hyper.update(vreps=40, violators_per_vrep=2)
    grid = BANDWIDTH_GRID[2:5] if small else BANDWIDTH_GRID
    bandwidth, val_f1 = _choose_bandwidth(train, seed, grid)
    fitted, scores, seconds = {}, {}, {}
    runs = (("emml", hyper), ("mbrm", {"bandwidth": bandwidth}), ("empirical", {}))
    for method_name, h in runs:
        method = get_method(method_name)
        t0 = time.perf_counter()
        fitted[method_name] = method.fit(train, rng_key=key, **parse_hyper(method, h))
        scores[method_name] = np.asarray(method.score_words(fitted[method_name], test))
        seconds[method_name] = time.perf_counter() - t0
    result = {"dataset": name, "train": train.num_images, "test": test.num_images}
    result["fit_and_score_seconds"] = seconds
    result["emml_hyper"] = parse_hyper(get_method("emml"), hyper)
    result["mbrm_bandwidth"] = {"chosen": bandwidth, "validation_word_f1@5": val_f1}
    result["emml_solver"] = {
        k: v for k, v in fitted["emml"].info.items() if k != "objective_trace"
    }

    # annotation (§4.1)
    top5 = min(5, num_words)
    ann = {}
    for m, s in scores.items():
        wp = metrics.word_prf_at_n(s, truth, top5)
        ranked = np.argsort(-s, axis=1, kind="stable")
        ann[m] = {
            "word_precision@5": float(wp["precision"]),
            "word_recall@5": float(wp["recall"]),
            "word_f1@5": float(wp["f1"]),
            "n_plus@5": int(wp["n_plus"]),
            "curve": _curve(ranked, truth, ns),
        }
    result["annotation"] = ann

    # word query (§4.2): test words with a positive, rank the test images
    p = fitted["emml"].params
    kernel = fitted["emml"].hyper["kernel"]  # the indexes keep it for their queries
    x_test = np.asarray(test.view(test.primary_view), np.float32)
    index = retrieval.build_index(
        p.vrep_features,
        p.vrep_word_scores,
        x_test,
        kernel=kernel,
        gamma=float(p.gamma),
        neighbours=min(100, test.num_images),
    )
    words = np.flatnonzero(truth.sum(0) > 0)
    top_images = min(max(ns), test.num_images)
    options = retrieval.QueryOptions(top_vreps=10, top_words=3, top_images=top_images)
    emml_ranked = np.stack(
        [
            np.asarray(
                retrieval.word_query(
                    index, jax.nn.one_hot(j, num_words), options=options
                )[0]
            )
            for j in words
        ]
    )
    mbrm_ranked = np.argsort(-scores["mbrm"][:, words].T, axis=1)[:, :top_images]
    relevant = truth[:, words].T
    result["word_query"] = {
        "emml": _curve(emml_ranked, relevant, ns),
        "mbrm": _curve(mbrm_ranked, relevant, ns),
    }
    pe, _ = _per_query_pr(emml_ranked, relevant, min(5, top_images))
    pm, _ = _per_query_pr(mbrm_ranked, relevant, min(5, top_images))
    result["word_query_tests_p@5"] = _paired(pe, pm)

    # image retrieval (§4.3): test images query the training images
    x_train = np.asarray(train.view(train.primary_view), np.float32)
    train_truth = np.asarray(train.words) > 0
    db = retrieval.build_index(
        p.vrep_features,
        p.vrep_word_scores,
        x_train,
        database_words=train_truth,
        kernel=kernel,
        gamma=float(p.gamma),
        neighbours=min(200, train.num_images),
    )
    queries = x_test[: min(200, test.num_images)]
    rel = (truth[: len(queries)].astype(np.int32) @ train_truth.T.astype(np.int32)) > 0
    emml_img = np.stack(
        [
            np.asarray(retrieval.image_retrieval(db, q, options=options)[0])
            for q in queries
        ]
    )
    mp = fitted["mbrm"].params
    beta = float(mp.bandwidth)
    d2 = (
        (queries**2).sum(1)[:, None]
        + (x_train**2).sum(1)[None]
        - 2.0 * queries @ x_train.T
    )
    mbrm_img = np.argsort(d2 / (2 * beta), axis=1, kind="stable")[:, :top_images]
    result["image_retrieval"] = {
        "emml": _curve(emml_img, rel, ns),
        "mbrm": _curve(mbrm_img, rel, ns),
    }
    pe, _ = _per_query_pr(emml_img, rel, min(5, top_images))
    pm, _ = _per_query_pr(mbrm_img, rel, min(5, top_images))
    result["image_retrieval_tests_p@5"] = _paired(pe, pm)

    # paired tests on per-image annotation F1@5
    f1 = {}
    for m in ("emml", "mbrm"):
        top = np.argsort(-scores[m], axis=1, kind="stable")[:, :top5]
        hits = np.take_along_axis(truth, top, axis=1).sum(1)
        prec, rec = hits / top5, hits / np.maximum(truth.sum(1), 1)
        f1[m] = np.where(
            prec + rec > 0, 2 * prec * rec / np.maximum(prec + rec, 1e-12), 0
        )
    result["annotation_tests_image_f1@5"] = _paired(f1["emml"], f1["mbrm"])
    return result


# %%
def markdown(results) -> str:
    lines = []
    for r in results:
        lines.append(f"### {r['dataset']} ({r['train']} train / {r['test']} test)\n")
        lines.append("| method | word P@5 | word R@5 | word F1@5 | N+ | fit+score s |")
        lines.append("|---|---|---|---|---|---|")
        for m, a in r["annotation"].items():
            lines.append(
                f"| {m} | {a['word_precision@5']:.4f} | {a['word_recall@5']:.4f} | "
                f"{a['word_f1@5']:.4f} | {a['n_plus@5']} | "
                f"{r['fit_and_score_seconds'][m]:.1f} |"
            )
        lines.append("")
        for task in ("annotation", "word_query", "image_retrieval"):
            block = r[task]
            methods = list(block)
            curves = {
                m: (block[m]["curve"] if task == "annotation" else block[m])
                for m in methods
            }
            ns = list(next(iter(curves.values())))
            lines.append(f"{task}: precision / recall of the top n")
            lines.append("| n | " + " | ".join(methods) + " |")
            lines.append("|---" * (len(methods) + 1) + "|")
            for n in ns:
                cells = [
                    f"{curves[m][n][0]:.3f} / {curves[m][n][1]:.3f}" for m in methods
                ]
                lines.append(f"| {n} | " + " | ".join(cells) + " |")
            lines.append("")
        for key in (
            "annotation_tests_image_f1@5",
            "word_query_tests_p@5",
            "image_retrieval_tests_p@5",
        ):
            t = r[key]
            lines.append(
                f"- {key}: EMML {t['mean_a']:.4f} vs MBRM {t['mean_b']:.4f} over "
                f"{t['queries']} queries; paired t p = {t['t_p']:.2g}, Wilcoxon p = "
                f"{t['wilcoxon_p']:.2g}"
            )
        lines.append("")
    return "\n".join(lines)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description="Seed 004: EMML vs MBRM")
    ap.add_argument("--small", action="store_true", help="subsample; seconds")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--datasets", nargs="+", default=["corel5k", "scene"])
    ap.add_argument("--out", default=None)
    return ap.parse_args(script_argv(argv))


def main(argv=None):
    args = parse_args(argv)
    results = [run(d, args.data_dir, args.small) for d in args.datasets]
    text = markdown(results)
    print(text)
    out = args.out or (
        None if args.small else str(ROOT / "notebooks" / "results" / "emml.json")
    )
    if out:
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        with open(out, "w") as fh:
            json.dump(results, fh, indent=2, default=str)
        with open(os.path.splitext(out)[0] + ".md", "w") as fh:
            fh.write(text + "\n")
    return results


# %% [markdown]
# ## Figures
#
# Precision and recall of the top N (the paper's Figures 3–8: annotation, word query,
# image retrieval) per dataset, and query time versus database size (the paper's
# Figure 9) from the benchmark `benchmarks/scale/query_time.py`
# (`benchmarks/results/query_time.json`: one query, synthetic database of 32-d
# features, 100 VReps). In full mode each figure is also written to `docs/figures/`.


# %%
TASKS = {
    "annotation": "annotation (§4.1)",
    "word_query": "word query (§4.2)",
    "image_retrieval": "image retrieval (§4.3)",
}


def save(fig, name, small):
    if not small:
        FIGURES.mkdir(parents=True, exist_ok=True)
        fig.savefig(FIGURES / name, dpi=100, bbox_inches="tight")


def plot_pr_vs_n(result):
    fig, axes = plt.subplots(2, 3, figsize=(12, 6.4), sharex=True)
    for col, (task, title) in enumerate(TASKS.items()):
        block = result[task]
        for m, entry in block.items():
            curve = entry["curve"] if task == "annotation" else entry
            ns = sorted(int(n) for n in curve)
            for row in (0, 1):
                axes[row, col].plot(
                    ns, [curve[n][row] for n in ns], marker="o", label=m.upper()
                )
        axes[0, col].set_title(title)
        axes[1, col].set_xlabel("N (top results)")
    for row, label in enumerate(("precision", "recall")):
        axes[row, 0].set_ylabel(label)
        for ax in axes[row]:
            ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=8)
    fig.suptitle(f"{result['dataset']}: precision / recall of the top N")
    fig.tight_layout()
    return fig


def query_times():
    path = ROOT / "benchmarks" / "results" / "query_time.json"
    return json.loads(path.read_text()) if path.exists() else None


def plot_query_time(bench):
    rows = bench["rows"]
    sizes = [r["images"] for r in rows]
    fig, ax = plt.subplots(figsize=(5.6, 4))
    series = {
        "emml_annotate_ms": "EMML annotation",
        "emml_word_query_ms": "EMML word query",
        "emml_image_retrieval_ms": "EMML image retrieval",
        "mbrm_annotate_ms": "MBRM annotation",
    }
    for key, label in series.items():
        ax.plot(sizes, [r[key] for r in rows], marker="o", label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("database size (images)")
    ax.set_ylabel("query time (ms)")
    cfg = bench["config"]
    ax.set_title(f"one query; {cfg['dims']}-d features, {cfg['vreps']} VReps")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


# %% [markdown]
# ## Run


# %%
if __name__ == "__main__":
    results = main()

# %%
if __name__ == "__main__":
    small = parse_args().small
    for r in results:
        ann = r["annotation"]
        print(
            f"{r['dataset']}: word F1@5",
            {m: round(a["word_f1@5"], 4) for m, a in ann.items()},
        )
        fig = plot_pr_vs_n(r)
        save(fig, f"emml_pr_vs_n_{r['dataset']}.png", small)

# %%
if __name__ == "__main__":
    bench = query_times()
    if bench is not None:
        for r in bench["rows"]:
            print(
                f"{r['images']:>8d} images: EMML annotation "
                f"{r['emml_annotate_ms']:.3f} ms, MBRM {r['mbrm_annotate_ms']:.3f} ms"
            )
        fig = plot_query_time(bench)
        save(fig, "emml_query_time.png", small)
