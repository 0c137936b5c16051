"""Iterate the coordinate search of the cross-validated defaults to a fixed point.

Every ``cv`` default is read off the last run over it in its record
(``benchmarks/results/defaults_cv/METHOD_DATASET.json``). That run is *stale* when it
was made while another default of the method had a value it no longer has. For each
method given, this script re-runs every stale run — its grid, folds, metric and seed,
at today's defaults, with any setting the key ``requires`` (``hyper_defaults.toml``)
held — through ``tools/defaults_cv.py`` (so the record keeps each run's
command), reads the default off the new run by its rule and writes a move to
``hyper_defaults.toml``:

- a run whose best beats the default it was made at by less than one standard
  error of the best setting's score (Hastie et al., ESL sec. 7.10) does not move it
  on noise: a size whose cost grows with it (:data:`COST`), alone in its run, takes
  the smallest value within that error (``rule = "smallest_within_1se"``), any other
  setting keeps the default the run was made at (``rule = "incumbent_within_1se"``;
  a joint run over several keys keeps today's combination, the rule written to each);
- a numeric winner at an end of its grid is followed one step past it (the grid's
  ratio at that end; never past the spec's range), as ``defaults_cv.py`` asks.

A run on a dataset without a split (3sources) is re-run at every evaluation seed,
each inside that seed's training part, and its keys take the value most seeds choose
(``defaults_guard.py``, issue 42).

A move makes the method's other runs stale, so passes repeat until none is (at most
``--passes``). The runs take what each cross-validation takes; ``--dry-run`` lists
them. Notes in ``hyper_defaults.toml`` are not rewritten: say what moved by hand.

    OPENBLAS_NUM_THREADS=1 nice python -m tools.defaults_iterate twh mmh \\
        --data-dir DATA
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path

from benchmarks.common.cli import script_parser
from benchmarks.common.device import child_env
from benchmarks.common.records import RESULTS, ROOT, script_command
from jaxannot.annotators.hyper_spec import spec_for
from jaxannot.tuning.selection import incumbent_within_one_se, smallest_within_one_se
from tools.defaults_guard import NO_SPLIT, decided_value, eval_seeds

TOML = ROOT / "jaxannot" / "annotators" / "hyper_defaults.toml"
RECORDS = RESULTS / "defaults_cv"

#: Sizes whose fit cost grows with the value. A graph's neighbour count is not one:
#: its small end is not a simpler model but a graph that falls apart (one neighbour
#: leaves most images in pairs), so a tie there keeps the incumbent.
COST = frozenset(
    {
        "topics",
        "iterations",
        "steps",
        "sweeps",
        "inner_steps",
        "pretrain_steps",
        "vreps",
        "eigenvectors",
        "bins",
        "annotate_sweeps",
        "subspace",
        "pca",
        "top_vreps",
    }
)


def _same(a, b) -> bool:
    if isinstance(a, (bool, str)) or isinstance(b, (bool, str)):
        return a == b
    return abs(float(a) - float(b)) <= 1e-12 * max(1.0, abs(float(b)))


def read_table(path: Path = TOML) -> dict:
    """``method -> {name -> entry}`` of ``hyper_defaults.toml``, read afresh."""
    return tomllib.loads(path.read_text())


def deciding_run(table: dict, method: str, key: str, records: Path = RECORDS):
    """``(owner, dataset, run)``: the record run that ``method.key`` is read off."""
    entry = table[method][key]
    owner = entry.get("record_method") or method
    record = json.loads((records / f"{owner}_{entry['record']}.json").read_text())
    return owner, entry["record"], [r for r in record["runs"] if key in r["grid"]][-1]


def stale_settings(table: dict, owner: str, key: str, run: dict) -> dict:
    """The settings ``run`` held away from today's defaults of ``owner`` (grid keys
    and ``data`` settings aside; a required setting at its required value)."""
    want = {k: e["value"] for k, e in table[owner].items()}
    want.update(table[owner][key].get("requires", {}))
    held = {**run["defaults_at_run"], **run["fixed"]}
    return {
        k: v
        for k, v in held.items()
        if k in want
        and k not in run["grid"]
        and table[owner][k]["origin"] != "data"
        and not _same(v, want[k])
    }


def stale_runs(table: dict, method: str, records: Path = RECORDS) -> list:
    """``[(owner, dataset, run)]``: the distinct stale deciding runs of ``method``'s
    ``cv`` defaults, in record order."""
    found = {}
    for key, entry in table[method].items():
        if entry["origin"] != "cv":
            continue
        owner, dataset, run = deciding_run(table, method, key, records)
        if stale_settings(table, owner, key, run):
            found.setdefault((owner, dataset, tuple(sorted(run["grid"]))), run)
    return [(o, d, r) for (o, d, _), r in found.items()]


def read_default(entry: dict, key: str, run: dict):
    """The value ``run`` gives ``key`` under the entry's rule."""
    rule = entry.get("rule", "best")
    if rule == "smallest_within_1se":
        return smallest_within_one_se(run["results"], key, run["higher_is_better"])
    if rule == "incumbent_within_1se":
        keys = sorted(run["grid"])
        kept = incumbent_within_one_se(
            run["results"], keys, run["higher_is_better"], run["defaults_at_run"]
        )
        return kept[key]
    return run["best"]["params"][key]


def choose_rule(entry: dict, key: str, run: dict) -> str | None:
    """The rule to record when ``run``'s best beats the default it was made at by
    less than one standard error (None: the entry's rule stands). For a joint run
    (several keys) the rule is the combination's: every key gets the same one."""
    keys = sorted(run["grid"])
    best = run["best"]["params"]
    incumbent = {k: run["defaults_at_run"][k] for k in keys}
    if entry.get("rule", "best") != "best" or all(
        _same(best[k], incumbent[k]) for k in keys
    ):
        return None
    if len(keys) == 1 and key in COST and not isinstance(best[key], (bool, str)):
        cheap = smallest_within_one_se(run["results"], key, run["higher_is_better"])
        return None if _same(cheap, best[key]) else "smallest_within_1se"
    try:
        kept = incumbent_within_one_se(
            run["results"], keys, run["higher_is_better"], incumbent
        )
    except ValueError:  # today's combination is not in the grid
        return None
    return (
        "incumbent_within_1se"
        if all(_same(kept[k], incumbent[k]) for k in keys)
        else None
    )


def extend(method: str, key: str, run: dict) -> list | None:
    """A grid one step past ``run``'s winner at an end of a numeric grid (the ratio
    of the two values at that end, or their difference across zero), or None."""
    edge = (run.get("edge") or {}).get(key)
    values = sorted(
        v
        for v in run["grid"][key]
        if isinstance(v, (int, float)) and not isinstance(v, bool)
    )
    if not edge or len(values) < 2:
        return None
    win = run["best"]["params"][key]
    near = values[1] if edge == "low" else values[-2]
    new = win * win / near if win > 0 and near > 0 else 2 * win - near
    if isinstance(win, int):
        new = int(round(new))
        if new == win:
            new = win - 1 if edge == "low" else win + 1
    else:
        new = float(f"{new:.3g}")
    spec = spec_for(method, key)
    if spec is not None and spec.problem(new) is not None:
        return None
    return sorted({new, win, near})


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value) if isinstance(value, str) else repr(value)


def write_default(method: str, key: str, value=None, rule=None, path: Path = TOML):
    """Set ``value`` and/or ``rule`` of one entry of ``hyper_defaults.toml`` in place
    (the rest of the line, its note included, kept); written atomically."""
    lines = path.read_text().split("\n")
    section = None
    for i, line in enumerate(lines):
        head = re.match(r"^\[(.+)\]\s*$", line)
        if head:
            section = head.group(1)
        elif section == method and line.startswith(f"{key} = {{"):
            if value is not None:
                text = _toml_value(value)
                line = re.sub(
                    r'value = ("[^"]*"|[^,]+),', f"value = {text},", line, count=1
                )
            if rule is not None:
                # after the record, whether more keys follow it or not
                line = re.sub(r',? rule = "[^"]*"', "", line)
                line = re.sub(
                    r'(record = "[^"]*")', rf'\1, rule = "{rule}"', line, count=1
                )
            lines[i] = line
            break
    else:
        raise KeyError(f"{path.name} has no [{method}] {key}")
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n".join(lines))
    os.replace(tmp, path)


def run_defaults_cv(owner: str, dataset: str, run: dict, table: dict, data_dir) -> bool:
    """Re-run ``run``'s grid at today's defaults through ``tools.defaults_cv``
    (a child process started from the repository root, as this one was)."""
    cmd = script_command("tools.defaults_cv", owner, "--dataset", dataset)
    for key, values in sorted(run["grid"].items()):
        shown = (str(v).lower() if isinstance(v, bool) else str(v) for v in values)
        cmd += ["--grid", f"{key}={','.join(shown)}"]
        for k, v in table[owner][key].get("requires", {}).items():
            cmd += ["--set", f"{k}={v}"]
    for k, v in run["fixed"].items():
        if table[owner].get(k, {}).get("origin") == "data":
            cmd += ["--set", f"{k}={v}"]
    cmd += ["--folds", str(run["folds"]), "--metric", run["metric"]]
    cmd += ["--seed", str(run["seed"])]
    if run.get("labelled_fraction") is not None:  # the run's protocol, kept
        cmd += ["--labelled-fraction", str(run["labelled_fraction"])]
    if data_dir:
        cmd += ["--data-dir", str(data_dir)]
    print("running:", " ".join(cmd[1:]), file=sys.stderr, flush=True)
    return subprocess.run(cmd).returncode == 0


def confirm(owner, dataset, run, rerun: Callable, path: Path = TOML, records=RECORDS):
    """Re-run ``run`` (``rerun(owner, dataset, run, table) -> ok``), follow a
    one-key edge winner outward, write what moved; True when a default moved. On a
    dataset without a split: :func:`confirm_per_seed`."""
    if dataset in NO_SPLIT:
        return confirm_per_seed(owner, dataset, run, rerun, path, records)
    moved = False
    for _ in range(4):
        if not rerun(owner, dataset, run, read_table(path)):
            return moved
        keys = sorted(run["grid"])
        record = json.loads((records / f"{owner}_{dataset}.json").read_text())
        new = [r for r in record["runs"] if sorted(r["grid"]) == keys][-1]
        table = read_table(path)
        for key in keys:
            entry = table[owner][key]
            rule = choose_rule(entry, key, new)
            if rule:
                write_default(owner, key, rule=rule, path=path)
                entry = {**entry, "rule": rule}
            value = read_default(entry, key, new)
            if not _same(value, entry["value"]):
                write_default(owner, key, value=value, path=path)
                moved = True
            print(f"{owner}.{key}: {entry['value']} -> {value}", file=sys.stderr)
        # a size read by the one-standard-error rule stays inside its grid; a kept
        # incumbent is not the edge winner
        size_rule = entry.get("rule") == "smallest_within_1se"
        follow = len(keys) == 1 and not size_rule
        follow = follow and _same(value, new["best"]["params"][keys[0]])
        grid = extend(owner, keys[0], new) if follow else None
        if grid is None:
            return moved
        run = {**new, "grid": {keys[0]: grid}}
    return moved


def confirm_per_seed(owner, dataset, run, rerun: Callable, path=TOML, records=RECORDS):
    """A run on a dataset without a split (issue 42): re-run at every evaluation
    seed (``defaults_guard.eval_seeds``), each inside that seed's training part, and
    write the value most seeds choose under each key's rule
    (``defaults_guard.decided_value``); no rule is changed and no edge followed.
    True when a default moved."""
    for seed in eval_seeds(dataset):
        if not rerun(owner, dataset, {**run, "seed": seed}, read_table(path)):
            return False
    record = json.loads((records / f"{owner}_{dataset}.json").read_text())
    table, moved = read_table(path), False
    for key in sorted(run["grid"]):
        entry = table[owner][key]
        value, choices = decided_value(record, key, entry.get("rule", "best"))
        if not _same(value, entry["value"]):
            write_default(owner, key, value=value, path=path)
            moved = True
        print(f"{owner}.{key}: {entry['value']} -> {value} {choices}", file=sys.stderr)
    return moved


def iterate(method: str, rerun: Callable, passes: int = 4, path=TOML, records=RECORDS):
    """Passes over ``method``'s stale runs until none is left; the runs left."""
    for _ in range(passes):
        todo = stale_runs(read_table(path), method, records)
        if not todo:
            return []
        for owner, dataset, run in todo:
            confirm(owner, dataset, run, rerun, path, records)
    return stale_runs(read_table(path), method, records)


def main(argv: list[str] | None = None) -> int:
    p = script_parser(__doc__)
    p.add_argument("methods", nargs="+")
    p.add_argument("--passes", type=int, default=4)
    p.add_argument("--data-dir", default=None)
    p.add_argument("--dry-run", action="store_true", help="list the stale runs")
    args = p.parse_args(argv)
    os.environ.update(child_env(args.device))  # the re-runs
    table = read_table()
    unknown = [m for m in args.methods if m not in table]
    if unknown:
        p.error(f"unknown methods {unknown}; valid: {', '.join(table)}")
    left = {}
    for method in args.methods:
        if args.dry_run:
            runs = stale_runs(table, method)
        else:

            def rerun(owner, dataset, run, table):
                return run_defaults_cv(owner, dataset, run, table, args.data_dir)

            runs = iterate(method, rerun, args.passes)
        left[method] = [(d, sorted(r["grid"])) for _, d, r in runs]
    for method, runs in left.items():
        print(f"{method}: {len(runs)} stale run(s) {runs}")
    return 0 if args.dry_run or not any(left.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
