"""Guards on the cross-validations the defaults come from (issue 42).

Each guard returns a list of problems (empty: it holds) and is called by
``tests/annotators/test_defaults.py`` on the committed records and on doctored
copies of them, so that each is shown to fail.

- :func:`run_problems`: a record run (``benchmarks/results/defaults_cv/*.json``)
  cross-validated the training split it names. The split is recomputed through the
  library's own loaders (dataset, split seed: :func:`~jaxannot.tuning.training_images`)
  and compared with what the run stores: ``n_images``; the rows of a dataset without
  a split (``train_rows``, none of them a test image of that seed); the fingerprint of
  the images (``train_fingerprint``); each fold's labelled fit images
  (``n_labelled``). Runs recorded before these fields were written
  (``defaults_cv.py`` writes them since issue 42) are checked on ``n_images`` alone.
- :func:`protocol_problems`: a run that decides a default was made at the labelled
  fraction of its method's protocol (:data:`LABELLED_FRACTION`), the same for every
  key of the method.
- :func:`decided_value` / :func:`nested_problems`: a default decided on a dataset
  without a split (3sources) is decided inside each evaluation seed's training part:
  the record holds one run over the key per seed of :data:`EVAL_SEEDS`, each read by
  the key's rule, and the registered default is the value most seeds choose (a tie:
  the default the runs were made at). No seed's test images enter the runs that seed
  is evaluated with.
- :func:`evaluation_problems`: a seeded evaluation on a dataset without a split
  (``benchmarks/results/mmh_claim.json``) holds every key decided on that dataset at
  the value the cross-validation inside *its own* seed's training part chose
  (:func:`seed_choice`), not the registered default.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np

from benchmarks.common.records import RESULTS
from jaxannot.annotators.hyper_spec import DEFAULTS
from jaxannot.data.datasets import load_dataset
from jaxannot.tuning.folds import (
    corpus_fingerprint,
    labelled_counts,
    training_images,
    training_rows,
)
from jaxannot.tuning.selection import incumbent_within_one_se, smallest_within_one_se

RECORDS = RESULTS / "defaults_cv"

#: The datasets without a split (``load_dataset`` returns no test corpus; checked
#: against the loaders by the tests): ``jaxannot evaluate --seed S`` draws a random
#: 70/30 split of them with the seed.
NO_SPLIT = frozenset({"mfeat", "msrc", "3sources", "bbcsport"})

#: The seeds at which the methods whose defaults are decided on a dataset without a
#: split are evaluated on it, so that a default decided there has one
#: cross-validation inside each of their training parts: 3sources' bag model (mmh,
#: twh, dwh-svm) in ``benchmarks/claims/mmh_claim.py``, seeds 0-4; mmh-regression on
#: mfeat
#: at seed 0 only (docs/harmoniums.md). Another dataset: seed 0.
EVAL_SEEDS = {"3sources": (0, 1, 2, 3, 4), "mfeat": (0,)}


def eval_seeds(dataset: str) -> tuple[int, ...]:
    """The seeds a default decided on ``dataset`` (without a split) is CV'd at."""
    return EVAL_SEEDS.get(dataset, (0,))


#: The labelled fraction a method is evaluated at, and so the one its defaults are
#: decided at (``None``: every training image labelled). The semi-supervised
#: feature selectors are evaluated with 10 % of the training images labelled
#: (docs/sfsls.md).
LABELLED_FRACTION = {"sfsls": 0.1, "sfss": 0.1, "fsnm": 0.1}


def load_record(method: str, dataset: str, root: Path = RECORDS) -> dict:
    """The record ``METHOD_DATASET.json``."""
    return json.loads((root / f"{method}_{dataset}.json").read_text())


class Splits:
    """The training splits of the named datasets, loaded once each."""

    def __init__(self, data_dir=None):
        self.data_dir = data_dir
        self._data: dict = {}
        self._split: dict = {}
        self._labelled: dict = {}

    def dataset(self, name: str):
        if name not in self._data:
            self._data[name] = load_dataset(name, data_dir=self.data_dir)
        return self._data[name]

    def training(self, name: str, seed: int):
        """``(corpus, rows, test_rows)``: the training images of ``seed``'s split,
        their rows in the dataset and the test rows (both ``None`` with a split)."""
        if (name, seed) not in self._split:
            train, test = self.dataset(name)
            corpus = training_images(train, test, seed=seed)
            rows = training_rows(train, test, seed=seed)
            test_rows = (
                None
                if rows is None
                else np.setdiff1d(np.arange(train.num_images), rows)
            )
            self._split[name, seed] = (corpus, rows, test_rows)
        return self._split[name, seed]

    def labelled(self, name: str, seed: int, folds: int, fraction) -> list[int]:
        """Each fold's labelled fit images of a run on ``seed``'s training split."""
        key = (name, seed, folds, fraction)
        if key not in self._labelled:
            corpus = self.training(name, seed)[0]
            self._labelled[key] = labelled_counts(
                corpus, folds, labelled_fraction=fraction, seed=seed
            )
        return self._labelled[key]


def run_problems(run: dict, splits: Splits) -> list[str]:
    """What in ``run`` contradicts the training split it names (none: it holds)."""
    out = []
    dataset, seed = run["dataset"], run.get("split_seed", run["seed"])
    where = f"{run['method']} {dataset} seed {seed} {sorted(run['grid'])}"
    if run.get("split") != "train":
        out.append(f"{where}: split {run.get('split')!r}, not the training split")
    if run.get("protocol") != "inductive":
        out.append(f"{where}: protocol {run.get('protocol')!r}, not inductive")
    if seed != run["seed"]:
        out.append(f"{where}: split seed {seed} is not the run's seed {run['seed']}")
    corpus, rows, test_rows = splits.training(dataset, seed)
    if run["n_images"] != corpus.num_images:
        out.append(
            f"{where}: n_images {run['n_images']}, but the training split has "
            f"{corpus.num_images}"
        )
    if "train_rows" in run:
        stored = run["train_rows"]
        if rows is None:
            if stored is not None:
                out.append(f"{where}: train_rows given for a dataset with a split")
        elif stored is None:
            out.append(f"{where}: no train_rows for a dataset without a split")
        else:
            stored = np.asarray(stored, dtype=int)
            leaked = np.intersect1d(stored, test_rows)
            if leaked.size:
                out.append(
                    f"{where}: test images of seed {seed} in the CV: rows "
                    f"{leaked.tolist()[:10]}"
                )
            if not np.array_equal(np.sort(stored), rows):
                out.append(f"{where}: train_rows are not seed {seed}'s training rows")
    if "train_fingerprint" in run and run["train_fingerprint"] != corpus_fingerprint(
        corpus
    ):
        out.append(f"{where}: the fingerprint is not that of the training images")
    if "n_labelled" in run:
        want = splits.labelled(dataset, seed, run["folds"], run["labelled_fraction"])
        if run["n_labelled"] != want:
            out.append(
                f"{where}: n_labelled {run['n_labelled']}, but labelled fraction "
                f"{run['labelled_fraction']} of the training split labels {want}"
            )
    return out


def protocol_problems(method: str, key: str, run: dict) -> list[str]:
    """A deciding run made at another labelled fraction than ``method``'s
    protocol (:data:`LABELLED_FRACTION`)."""
    want = LABELLED_FRACTION.get(method)
    if run["labelled_fraction"] != want:
        return [
            f"{method}.{key}: decided at labelled fraction "
            f"{run['labelled_fraction']}, its protocol is {want}"
        ]
    return []


def read_off(rule: str, key: str, run: dict):
    """The value ``run`` gives ``key`` under ``rule`` (``hyper_defaults.toml``)."""
    if rule == "smallest_within_1se":
        return smallest_within_one_se(run["results"], key, run["higher_is_better"])
    if rule == "incumbent_within_1se":
        return incumbent_within_one_se(
            run["results"],
            sorted(run["grid"]),
            run["higher_is_better"],
            run["defaults_at_run"],
        )[key]
    return run["best"]["params"][key]


def runs_by_seed(record: dict, key: str) -> dict:
    """``seed -> run``: the last run over ``key`` of each seed."""
    return {r["seed"]: r for r in record["runs"] if key in r["grid"]}


def seed_choice(record: dict, key: str, rule: str, seed: int):
    """The value the cross-validation inside ``seed``'s training part gives ``key``
    (``KeyError``: the record has no run over ``key`` at that seed)."""
    return read_off(rule, key, runs_by_seed(record, key)[seed])


def decided_value(record: dict, key: str, rule: str):
    """``(value, choices)``: the default ``record`` decides for ``key``. With a
    split, the last run over the key read by ``rule`` (``choices`` empty); without
    (:data:`NO_SPLIT`), ``choices`` maps each seed of :func:`eval_seeds` with a run
    to its value and the
    default is the value most seeds choose (a tie: the default the runs were made
    at, else the first tied value in the grid's order)."""
    runs = [r for r in record["runs"] if key in r["grid"]]
    if record["dataset"] not in NO_SPLIT:
        return read_off(rule, key, runs[-1]), {}
    by_seed = runs_by_seed(record, key)
    seeds = eval_seeds(record["dataset"])
    choices = {s: read_off(rule, key, by_seed[s]) for s in seeds if s in by_seed}
    if not choices:
        return None, choices
    counts = Counter(choices.values())
    top = max(counts.values())
    tied = [v for v in counts if counts[v] == top]
    last = by_seed[max(choices)]
    incumbent = last["defaults_at_run"][key]
    if incumbent in tied:
        return incumbent, choices
    return min(tied, key=last["grid"][key].index), choices


def nested_problems(name: str, key: str, default, record: dict) -> list[str]:
    """A default decided on a dataset without a split that is not decided inside
    every evaluation seed's training part, or not the majority of their choices."""
    if record["dataset"] not in NO_SPLIT:
        return []
    by_seed = runs_by_seed(record, key)
    seeds = eval_seeds(record["dataset"])
    out = []
    missing = [s for s in seeds if s not in by_seed]
    if missing:
        out.append(
            f"{name}.{key}: {record['dataset']} has no split and the record has no "
            f"cross-validation over {key} inside the training part of seeds {missing}"
        )
    held = {
        json.dumps(
            {
                k: v
                for k, v in by_seed[s]["defaults_at_run"].items()
                if k not in by_seed[s]["grid"]
            },
            sort_keys=True,
        )
        for s in seeds
        if s in by_seed
    }
    if len(held) > 1:
        out.append(
            f"{name}.{key}: the seeds' runs were made at different other defaults"
        )
    value, choices = decided_value(record, key, default.rule)
    if value != default.value:
        out.append(
            f"{name}.{key}: default {default.value!r}, the seeds chose {choices} "
            f"(majority {value!r})"
        )
    return out


def nested_keys(method: str, dataset: str) -> dict:
    """``key -> Default``: the defaults of ``method`` decided on ``dataset`` (its own
    record, or the record of the method named by ``record_method``) when
    ``dataset`` has no split (:data:`NO_SPLIT`)."""
    if method not in DEFAULTS or dataset not in NO_SPLIT:
        return {}
    return {
        k: d
        for k, d in DEFAULTS[method].items()
        if d.origin == "cv" and d.record == dataset
    }


def evaluation_problems(runs: list[dict], root: Path = RECORDS) -> list[str]:
    """Seeded evaluations (``mmh_claim.json``'s runs: ``method``, ``dataset``,
    ``seed``, ``label``, ``settings``) that hold a key decided on their dataset
    without a split at another value than the cross-validation inside their own
    seed's training part chose. A variant that sets the key itself is exempt."""
    out = []
    for run in runs:
        keys = nested_keys(run["method"], run["dataset"])
        spec = run["label"].split(" cv[")[0]
        given = {
            item.split("=")[0] for item in spec.partition(":")[2].split(",") if item
        }
        given |= set(run.get("cv_chosen") or {})
        for key, default in keys.items():
            if key in given:
                continue
            owner = default.record_method or run["method"]
            record = load_record(owner, run["dataset"], root)
            where = f"{run['label']} {run['dataset']} seed {run['seed']}: {key}"
            try:
                want = seed_choice(record, key, default.rule, run["seed"])
            except KeyError:
                out.append(
                    f"{where} has no cross-validation inside seed {run['seed']}'s "
                    "training part"
                )
                continue
            if run["settings"].get(key) != want:
                out.append(
                    f"{where} = {run['settings'].get(key)!r}, but the CV inside "
                    f"seed {run['seed']}'s training part chose {want!r}"
                )
    return out
