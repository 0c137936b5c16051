"""SFSLS's claim at 10 % labelled: selectors at equal fraction (seed 003, issue 33).

Shi & Ruan (2015) report SFSLS ≥ SFSS ≥ FSNM, where FSNM (Nie et al. 2010) is a
*selector*: its l2,1 ranking keeps some features and "a least-squares regression model"
is then fitted on them (§3). The paper gives no number of kept features. This script
runs, on the protocol of ``notebooks/seed003_sfsls.py`` (its pools, splits and folds:
a random training set of min(3000, 60 %) images, 10 % of them labelled, MAP on the rest,
seeds 0–4), the columns

* ``sfsls`` — SFSLS with the paper's p = ½ (α = 0.1, μ = 10 as the notebook);
* ``sfss`` — SFSS (p = 1), the same grid;
* ``fsnm_selector`` — FSNM's ranking, the top fraction ``f < 1`` kept, ridge least
  squares on them (``fsnm`` with ``selected = f``), ``f`` and the ridge by CV;
* ``ridge_all`` — the same regression on every feature (``fsnm`` with
  ``selected = 1``, FSNM's default, which makes the ranking irrelevant);
* ``sfsls_selector`` — SFSLS's ranking (``‖gⁱ‖``) as a selector at the *same* fraction
  as ``fsnm_selector`` chose in that run, followed by the same ridge regression: the
  paper's comparison of selectors at equal fraction;

and, with ``--mu``, ``sfsls_mu``: SFSLS with μ (the weight of ``‖G − UP‖²``, a ridge
on ``G`` outside the shared subspace) chosen by CV from the given values too.

Every setting is chosen by 3-fold cross-validation on the run's *labelled training
images* (each fold's words hidden; its images stay in the graph as unlabelled), as the
notebook does; the test images are scored once per column with the chosen setting.

``--equal-fractions F1,F2`` tests both rankings as selectors at each fixed kept
fraction, their settings taken from the CV grids stored by a table run (``--table``).
``--diagnose`` records the cross-validated MAP (training images only, no test fit) of
what the table's grids leave out: p = ¼ and ¾ over λ × μ, r = c − 1, and the labelled
images alone; its ``--md`` reads them beside the table run's CV grids (p = ½ and 1, μ,
r ∈ {1, 3}, every kept fraction of both rankings). ``--merge`` joins the JSONs of
separate processes.

    OPENBLAS_NUM_THREADS=1 JAXANNOT_DATA=DATA nice \\
        python -m benchmarks.claims.sfsls_claim \\
        --out benchmarks/results/sfsls_claim.json --md benchmarks/results/sfsls_claim.md
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import itertools
import json
import pathlib
import shlex
import sys
import time

import numpy as np

import jax

from benchmarks.common.cli import script_parser
from benchmarks.common.device import use_device
from benchmarks.common.records import write_json
from benchmarks.common.sfsls_pool import load_pool, split
from jaxannot.annotators import get_method
from jaxannot.data.atomic import atomic_write
from jaxannot.data.preprocessing import standardize
from jaxannot.data.protocols import make_task
from jaxannot.metrics import mean_average_precision

FRACTION = 0.1  # labelled fraction of the training images
FOLDS = 3
TRAIN_SIZE = 3000
#: Kept fractions of a selector (``f < 1``); 1 is ``ridge_all``.
SELECTED = (0.1, 0.25, 0.5, 0.75)
#: Ridge of the least squares after selection, × the number of labelled images.
RIDGE = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0)
LAM = (0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 1000.0)
SUBSPACE = (1, 3)
BASE = dict(alpha=0.1, mu=10.0)  # the notebook's fixed α, μ
FSNM_GAMMA = 100.0  # FSNM's default γ (chosen by CV at selected = 0.6)
#: The diagnosis' factorial grid.
DIAG_P = (0.25, 0.75)  # p = ½ and 1 are in the table's grids
DIAG_MU = (10.0, 1000.0)


# ------------------------------------------------------------ ridge after selection
def ridge_on_selected(x, y, keep, ridge):
    """FSNM's second stage: least squares with a ridge on the ``keep`` features.

    With ``z`` the columns of ``x`` [n, d] standardized over its rows, ``z_S`` the
    ``keep`` columns and ``Ȳ`` the column means of ``y`` [n, c],
    ``g = (z_Sᵀz_S + ridge·n·I)⁻¹ z_Sᵀ(Y − Ȳ)`` and the offset makes the mean score
    ``Ȳ`` (as ``fsnm`` with ``selected`` < 1 does). Returns ``(mean, std, keep, g,
    offset)`` for :func:`ridge_scores`.
    """
    keep = np.sort(np.asarray(keep))
    z, mean, std = standardize(np.asarray(x, np.float32), eps=1e-8)
    zs = np.asarray(z[:, keep], np.float64)
    y = np.asarray(y, np.float64)
    gram = zs.T @ zs + ridge * zs.shape[0] * np.eye(keep.size)
    g = np.linalg.solve(gram, zs.T @ (y - y.mean(axis=0)))
    offset = y.mean(axis=0) - zs.mean(axis=0) @ g
    return mean, std, keep, g, offset


def ridge_scores(model, x):
    """Scores ``z_S g + offset`` of the images ``x`` under :func:`ridge_on_selected`."""
    mean, std, keep, g, offset = model
    z = (np.asarray(x, np.float32) - mean) / std
    return np.asarray(z[:, keep], np.float64) @ g + offset


def top_fraction(ranking, fraction):
    """The first ``round(fraction · d)`` features of ``ranking`` (at least one)."""
    ranking = np.asarray(ranking)
    return ranking[: max(1, int(round(fraction * ranking.size)))]


# --------------------------------------------------------------------- one fit
def evaluate(method, hyper, corpus, target, selector=(), seed=0):
    """MAPs of one fit on ``corpus`` scored on ``target = (images, rows, truth)``.

    ``images`` is a corpus, ``rows`` the rows of it scored and ``truth`` their 0/1
    concepts. Returns ``{"direct": MAP of the model's own scores (None for fsnm),
    "sel": {"f/ridge": MAP of the ridge on the model's top-f features}}`` for
    ``(f, ridge)`` in ``selector`` (fitted on the corpus' labelled images).
    """
    images, rows, truth = target
    m = get_method(method)
    if method == "fsnm":
        hyper = {"gamma": FSNM_GAMMA, "selected": 1.0, **hyper}
    fitted = m.fit(corpus, rng_key=jax.random.key(seed), **hyper)
    out = {"direct": None, "sel": {}}
    if method != "fsnm":
        scores = np.asarray(m.score_words(fitted, images))[rows]
        out["direct"] = float(mean_average_precision(scores, truth))
    mask, words = corpus.observed_words()
    x = corpus.features()[mask]
    y = (words[mask] > 0).astype(np.float32)
    x_eval = images.features()[rows]
    ranking = np.asarray(fitted.params.ranking)
    for f, ridge in selector:
        model = ridge_on_selected(x, y, top_fraction(ranking, f), ridge)
        scores = ridge_scores(model, x_eval)
        out["sel"][f"{f}/{ridge}"] = float(mean_average_precision(scores, truth))
    return out


# ------------------------------------------------------------------- one run
class Run:
    """A seed's split, its fit corpus at 10 % labelled and its CV folds (the
    notebook's :func:`~seed003_sfsls.cv_once` folds)."""

    def __init__(self, pool, seed, train_size=TRAIN_SIZE, folds=FOLDS):
        self.seed = seed
        train, test = split(pool, train_size, seed)
        task = make_task(train, test, labelled_fraction=FRACTION, seed=seed)
        self.fit_corpus = task.train
        self.test_target = (task.test, np.asarray(task.eval_rows), task.truth_words)
        truth = np.asarray(train.words)
        labelled = np.flatnonzero(np.asarray(self.fit_corpus.word_mask))
        order = np.random.RandomState(seed).permutation(labelled)
        self.folds = []
        for rows in np.array_split(order, folds):
            rows = np.sort(rows)
            hidden = np.zeros(train.num_images, dtype=bool)
            hidden[rows] = True
            target = (train, rows, truth[rows])
            self.folds.append((self.fit_corpus.with_hidden(hidden), target))

    def cv(self, method, hyper, selector=()):
        """Fold means of :func:`evaluate` over the CV folds."""
        per_fold = [
            evaluate(method, hyper, c, t, selector, self.seed) for c, t in self.folds
        ]
        direct = [r["direct"] for r in per_fold]
        sel = {
            k: float(np.mean([r["sel"][k] for r in per_fold]))
            for k in per_fold[0]["sel"]
        }
        return {
            "direct": None if direct[0] is None else float(np.mean(direct)),
            "sel": sel,
        }

    def test(self, method, hyper, selector=()):
        """:func:`evaluate` fitted on the run's training images, scored on its test."""
        return evaluate(
            method, hyper, self.fit_corpus, self.test_target, selector, self.seed
        )


def _settings(grid):
    return [dict(zip(grid, v, strict=True)) for v in itertools.product(*grid.values())]


def _best(scored):
    """The entry with the highest ``cv_map`` (the first among equals)."""
    return max(scored, key=lambda r: r["cv_map"])


def _entry(method, hyper, cv_map, selector=None):
    return {"method": method, "hyper": hyper, "selector": selector, "cv_map": cv_map}


def _grid_settings(method, mus):
    """The notebook's fixed α, μ with λ × r, then (``mus``) λ × the other μ at r = 1."""
    p = {"sfsls": {"p": 0.5}, "sfss": {}}[method]
    out = [dict(BASE, **p, **h) for h in _settings(dict(lam=LAM, subspace=SUBSPACE))]
    for mu, lam in itertools.product(mus, LAM):
        out.append(dict(BASE, **p, mu=mu, lam=lam, subspace=1))
    return out


def table_run(run, mus=()):
    """One run: every setting's CV MAP, the columns' choices and their test MAP."""
    sel_all = [(f, r) for f in (*SELECTED, 1.0) for r in RIDGE]
    sel = [(f, r) for f in SELECTED for r in RIDGE]
    fsnm = run.cv("fsnm", {}, sel_all)["sel"]
    cv = {"fsnm": fsnm}
    for method in ("sfsls", "sfss"):
        cv[method] = []
        for h in _grid_settings(method, mus):
            on_ranking = sel if method == "sfsls" and h["mu"] == BASE["mu"] else ()
            cv[method].append(dict(hyper=h, **run.cv(method, h, on_ranking)))
    chosen = {}
    for method in ("sfsls", "sfss"):
        rows = [_entry(method, r["hyper"], r["direct"]) for r in cv[method]]
        chosen[method] = _best([e for e in rows if e["hyper"]["mu"] == BASE["mu"]])
        if mus:
            chosen[f"{method}_mu"] = _best(rows)
    rows = [_entry("fsnm", {}, fsnm[f"{f}/{r}"], (f, r)) for f, r in sel_all]
    chosen["fsnm_selector"] = _best([e for e in rows if e["selector"][0] < 1])
    chosen["ridge_all"] = _best([e for e in rows if e["selector"][0] == 1])
    f_star = chosen["fsnm_selector"]["selector"][0]
    chosen["sfsls_selector"] = _best(
        [
            _entry("sfsls", r["hyper"], r["sel"][f"{f_star}/{ridge}"], (f_star, ridge))
            for r in cv["sfsls"]
            if r["sel"]
            for ridge in RIDGE
        ]
    )
    return cv, chosen, {name: _test_one(run, c) for name, c in chosen.items()}


def _test_one(run, chosen):
    """Test MAP of a chosen setting (a model's own scores, or a selector's)."""
    if not chosen["selector"]:
        return run.test(chosen["method"], chosen["hyper"])["direct"]
    f, ridge = chosen["selector"]
    return run.test(chosen["method"], chosen["hyper"], [(f, ridge)])["sel"][
        f"{f}/{ridge}"
    ]


def equal_fraction_run(run, table_entry, fractions):
    """Both rankings as selectors at each fixed kept fraction ``f``: FSNM's (ridge by
    CV) and SFSLS's (p = ½, μ = 10; λ, r and the ridge by CV), from the CV grids of
    the run's table entry; each chosen setting refitted and tested."""
    cv, out = table_entry["cv"], {}
    for f in fractions:
        fsnm = [_entry("fsnm", {}, cv["fsnm"][f"{f}/{r}"], (f, r)) for r in RIDGE]
        sfsls = [
            _entry("sfsls", r["hyper"], r["sel"][f"{f}/{ridge}"], (f, ridge))
            for r in cv["sfsls"]
            if r["sel"]
            for ridge in RIDGE
        ]
        for name, rows in (("fsnm", fsnm), ("sfsls", sfsls)):
            c = _best(rows)
            out[f"{name}/{f:g}"] = dict(c, test=_test_one(run, c))
    return out


def equal_fraction_markdown(results):
    """Test MAP mean ± sd of both selectors at each fraction, by dataset."""
    datasets = list(dict.fromkeys(r["dataset"] for r in results["runs"]))
    keys = list(results["runs"][0]["equal_fraction"])
    fractions = list(dict.fromkeys(k.split("/")[1] for k in keys))
    lines = ["| kept fraction | " + " | ".join(datasets) + " |"]
    lines.append("|---" * (len(datasets) + 1) + "|")
    for f in fractions:
        cells = []
        for ds in datasets:
            runs = [r["equal_fraction"] for r in results["runs"] if r["dataset"] == ds]
            v = {
                m: np.array([r[f"{m}/{f}"]["test"] for r in runs])
                for m in ("fsnm", "sfsls")
            }
            wins = int(np.sum(v["sfsls"] > v["fsnm"]))
            cells.append(
                f"{v['fsnm'].mean():.3f} ± {v['fsnm'].std():.3f} / "
                f"{v['sfsls'].mean():.3f} ± {v['sfsls'].std():.3f} ({wins}/{len(runs)})"
            )
        lines.append(f"| {float(f):.0%} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------- diagnosis
def diagnose_run(run):
    """CV MAPs (training images only) of what the table's grids leave out: p = ¼ and
    ¾, the labelled images alone (``use_unlabelled=False``) and r = c − 1, each over
    λ at μ ∈ :data:`DIAG_MU` (r = 1) or at the notebook's μ."""
    out = {"p": [], "labelled_only": [], "subspace": []}

    def add(key, h):
        out[key].append({"hyper": h, "cv_map": run.cv("sfsls", h)["direct"]})

    for p, mu, lam in itertools.product(DIAG_P, DIAG_MU, LAM):
        add("p", dict(BASE, p=p, mu=mu, lam=lam, subspace=1))
    for mu, lam in itertools.product(DIAG_MU, LAM):
        add(
            "labelled_only",
            dict(BASE, p=0.5, mu=mu, lam=lam, subspace=1, use_unlabelled=False),
        )
    for lam in LAM:
        add("subspace", dict(BASE, p=0.5, lam=lam, subspace=0))
    return out


# ------------------------------------------------------------------- reports
COLUMNS = {
    "sfsls": "SFSLS (p = ½)",
    "sfss": "SFSS",
    "fsnm_selector": "FSNM-selector (f by CV)",
    "ridge_all": "ridge, all features (FSNM selected = 1)",
    "sfsls_selector": "SFSLS-selector at FSNM's f",
    "sfsls_mu": "SFSLS (p = ½), μ by CV",
    "sfss_mu": "SFSS, μ by CV",
}


def markdown(results):
    """Mean ± sd of the test MAP per dataset and column, and the settings chosen."""
    names = [c for c in COLUMNS if any(c in r["test"] for r in results["runs"])]
    lines = ["| dataset | " + " | ".join(COLUMNS[c] for c in names) + " |"]
    lines.append("|---" * (len(names) + 1) + "|")
    datasets = list(dict.fromkeys(r["dataset"] for r in results["runs"]))
    for ds in datasets:
        runs = [r for r in results["runs"] if r["dataset"] == ds]
        cells = []
        for c in names:
            v = np.array([r["test"][c] for r in runs])
            cells.append(f"{v.mean():.3f} ± {v.std():.3f}")
        lines.append(f"| {ds} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Chosen by CV in runs "
        + ", ".join(
            str(r["seed"]) for r in results["runs"] if r["dataset"] == datasets[0]
        )
        + ":",
        "",
    ]
    for ds in datasets:
        runs = [r for r in results["runs"] if r["dataset"] == ds]
        lines.append(
            f"* {ds}: "
            + "; ".join(
                f"{c} " + " | ".join(_short(r["chosen"][c]) for r in runs)
                for c in names
            )
        )
    return "\n".join(lines) + "\n"


def _short(chosen):
    """``λ r μ`` of a model, ``f ridge`` of a selector."""
    h, sel = chosen["hyper"], chosen["selector"]
    parts = (
        [
            f"λ{h['lam']:g} r{h['subspace']}"
            + ("" if h["mu"] == BASE["mu"] else f" μ{h['mu']:g}")
        ]
        if "lam" in h
        else []
    )
    if sel:
        parts.append(f"f{sel[0]:g} ridge{sel[1]:g}")
    return " ".join(parts)


def _best_of(pairs):
    """``(best CV MAP, its hyper)`` over ``(hyper, cv_map)`` pairs."""
    return max(((v, h) for h, v in pairs), key=lambda t: t[0])


def _model_pairs(cv, method, **want):
    """``(hyper, CV MAP)`` of a table run's ``method`` settings matching ``want``."""
    return [
        (r["hyper"], r["direct"])
        for r in cv[method]
        if all(r["hyper"].get(k, v) == v for k, v in want.items())
    ]


def diagnosis_rows(table_run, diag_run):
    """Every diagnosis row of one (dataset, seed): label -> ``(hyper, CV MAP)`` pairs
    whose best is reported (λ, and for selectors the ridge, chosen by the CV)."""
    cv, diag = table_run["cv"], diag_run["cv"]
    rows = {}
    for mu in DIAG_MU:
        for p in (0.25, 0.5, 0.75, 1.0):
            if p == 0.5:
                pairs = _model_pairs(cv, "sfsls", mu=mu, subspace=1)
            elif p == 1.0:
                pairs = _model_pairs(cv, "sfss", mu=mu, subspace=1)
            else:
                pairs = [
                    (r["hyper"], r["cv_map"])
                    for r in diag["p"]
                    if r["hyper"]["p"] == p and r["hyper"]["mu"] == mu
                ]
            rows[f"p = {p:g}, μ = {mu:g}, r = 1"] = pairs
    for mu in table_run["mu"]:
        rows[f"p = 0.5, μ = {mu:g}, r = 1"] = _model_pairs(cv, "sfsls", mu=mu)
        rows[f"p = 1, μ = {mu:g}, r = 1"] = _model_pairs(cv, "sfss", mu=mu)
    rows["p = 0.5, μ = 10, r = 3"] = _model_pairs(cv, "sfsls", mu=10.0, subspace=3)
    rows["p = 0.5, μ = 10, r = c − 1"] = [
        (r["hyper"], r["cv_map"]) for r in diag["subspace"]
    ]
    for mu in DIAG_MU:
        rows[f"p = 0.5, μ = {mu:g}, r = 1, labelled images only"] = [
            (r["hyper"], r["cv_map"])
            for r in diag["labelled_only"]
            if r["hyper"]["mu"] == mu
        ]
    for f in (*SELECTED, 1.0):
        rows[f"FSNM ranking, f = {f:g}, ridge"] = [
            ({"ridge": r}, cv["fsnm"][f"{f}/{r}"]) for r in RIDGE
        ]
    for f in SELECTED:
        rows[f"SFSLS (p = ½, μ = 10) ranking, f = {f:g}, ridge"] = [
            (dict(r["hyper"], ridge=ridge), r["sel"][f"{f}/{ridge}"])
            for r in cv["sfsls"]
            if r["sel"]
            for ridge in RIDGE
        ]
    return rows


def diagnosis_markdown(table, diag):
    """CV MAP (mean over the diagnosed seeds of each row's best setting) by dataset,
    with the λ (or ridge) chosen in each seed."""
    datasets = list(dict.fromkeys(r["dataset"] for r in diag["runs"]))
    per = {}
    for d in diag["runs"]:
        t = _table_entry(table, d["dataset"], d["seed"])
        for label, pairs in diagnosis_rows(t, d).items():
            if not pairs:  # a grid without that setting
                continue
            per.setdefault(label, {}).setdefault(d["dataset"], []).append(
                _best_of(pairs)
            )
    lines = ["| CV MAP (best λ / ridge per seed) | " + " | ".join(datasets) + " |"]
    lines.append("|---" * (len(datasets) + 1) + "|")
    for label, by_ds in per.items():
        cells = []
        for ds in datasets:
            best = by_ds.get(ds)
            if best is None:  # not in that dataset's grids
                cells.append("—")
                continue
            chosen = ",".join(_chosen_value(h) for _, h in best)
            cells.append(f"{np.mean([v for v, _ in best]):.4f} ({chosen})")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _chosen_value(h):
    out = [f"λ{h['lam']:g}"] if "lam" in h else []
    if "ridge" in h:
        out.append(f"ridge{h['ridge']:g}")
    return " ".join(out)


def main(argv=None):
    ap = script_parser(__doc__)
    ap.add_argument("--datasets", default="scene,yeast,mfeat,corel5k")
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--train-size", type=int, default=TRAIN_SIZE)
    ap.add_argument("--diagnose", action="store_true", help="the diagnosis grids")
    ap.add_argument(
        "--equal-fractions",
        default=None,
        help="F1,F2: both rankings as selectors at these kept fractions, settings "
        "from the CV grids of --table, tested",
    )
    ap.add_argument(
        "--table",
        default="benchmarks/results/sfsls_claim.json",
        help="the table run whose CV grids the diagnosis' markdown (--md) adds",
    )
    ap.add_argument(
        "--merge",
        nargs="+",
        default=None,
        help="concatenate the runs of these JSONs (runs of one protocol, e.g. one "
        "process per dataset and seed) into --out and --md instead of running",
    )
    ap.add_argument(
        "--mu", default="100,1000,10000", help="the other μ of the *_mu columns"
    )
    ap.add_argument("--out", default="benchmarks/results/sfsls_claim.json")
    ap.add_argument("--md", default=None)
    args = ap.parse_args(argv)
    use_device(args.device)
    seeds = [int(s) for s in args.seeds.split(",")]
    mus = tuple(float(v) for v in args.mu.split(",") if v)
    results = {
        "command": "python -m benchmarks.claims.sfsls_claim "
        + shlex.join(argv if argv is not None else sys.argv[1:]),
        "protocol": dict(
            labelled_fraction=FRACTION,
            folds=FOLDS,
            train_size=args.train_size,
            selected=SELECTED,
            ridge=RIDGE,
            lam=LAM,
            subspace=SUBSPACE,
            base=BASE,
            fsnm_gamma=FSNM_GAMMA,
            mu=mus,
            **(dict(diag_p=DIAG_P, diag_mu=DIAG_MU) if args.diagnose else {}),
        ),
        "runs": [],
    }
    if args.merge:
        return merge(args)
    if args.equal_fractions:
        table = json.loads(pathlib.Path(args.table).read_text())
    for ds in args.datasets.split(","):
        pool = load_pool(ds, args.data_dir)
        for seed in seeds:
            start, cpu = time.perf_counter(), time.process_time()
            run = Run(pool, seed, args.train_size)
            entry = {"dataset": ds, "seed": seed, "mu": list(mus)}
            if args.equal_fractions:
                fractions = [float(v) for v in args.equal_fractions.split(",")]
                entry["equal_fraction"] = equal_fraction_run(
                    run, _table_entry(table, ds, seed), fractions
                )
            elif args.diagnose:
                entry["cv"] = diagnose_run(run)
            else:
                entry["cv"], entry["chosen"], entry["test"] = table_run(run, mus)
            entry["seconds"] = time.perf_counter() - start
            entry["cpu_seconds"] = time.process_time() - cpu
            results["runs"].append(entry)
            print(
                json.dumps(
                    {k: entry.get(k) for k in ("dataset", "seed", "test", "seconds")}
                ),
                flush=True,
            )
            write(results, args)
    if not args.diagnose:
        print(report(results, args))
    return results


def merge(args):
    """One JSON of the runs of ``args.merge`` (their commands listed), and its
    markdown."""
    parts = [json.loads(pathlib.Path(p).read_text()) for p in args.merge]
    other = [{k: v for k, v in p["protocol"].items() if k != "mu"} for p in parts]
    protocols = {json.dumps(p, sort_keys=True) for p in other}
    if len(protocols) != 1:
        raise ValueError(f"--merge: the files differ in protocol: {protocols}")
    results = {
        "command": [p["command"] for p in parts],
        "protocol": dict(other[0], mu="per run (its 'mu')"),
        "runs": [r for p in parts for r in p["runs"]],
    }
    write(results, args)
    return results


def _table_entry(table, dataset, seed):
    return next(
        r for r in table["runs"] if (r["dataset"], r["seed"]) == (dataset, seed)
    )


def report(results, args):
    """The markdown of the table run, the equal-fraction run, or the diagnosis with
    its table run."""
    if getattr(args, "equal_fractions", None):
        return equal_fraction_markdown(results)
    if not args.diagnose:
        return markdown(results)
    table = json.loads(pathlib.Path(args.table).read_text())
    return diagnosis_markdown(table, results)


def write(results, args):
    """The JSON (``--out``) and, with ``--md``, the markdown (atomically)."""
    if args.out is not None:
        write_json(args.out, results)
    if args.md is not None:
        path = pathlib.Path(args.md)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = report(results, args)
        atomic_write(path, lambda f: f.write(text.encode()))


if __name__ == "__main__":
    main()
