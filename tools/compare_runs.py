"""Compare the figures of two runs of ``tools/defaults_vs_empirical.py``: which rows
are the same to the last bit, which to ``--decimals`` decimals, which differ.

A refactor is checked this way: the same command on the code before and after it, on
one machine, and the two records compared (every metric of every row both have; a
row that failed in either is listed apart). Figures made on another CPU can move in
their last decimals (float32 sums in another order: ``tests/benchmarks/
test_results.py``), so compare runs of one machine.

    python -m tools.compare_runs BEFORE.json AFTER.json --decimals 4 \\
        --json benchmarks/results/refactor_check/NAME.json
"""

from __future__ import annotations

import json
import pathlib

from benchmarks.common.cli import script_parser
from benchmarks.common.records import write_json


def compare(before: dict, after: dict, decimals: int = 4) -> dict:
    """The rows of two records, sorted by how their metrics compare.

    Parameters
    ----------
    before, after : dict
        Records of ``tools/defaults_vs_empirical.py`` (``results -> method ->
        {"metrics": {name: value}}``).
    decimals : int
        Decimals of the rounded comparison.

    Returns
    -------
    dict
        ``identical`` (every metric the same float), ``same_to_decimals`` (the same
        rounded, not every bit), ``differ`` (method -> {metric: [before, after]}),
        ``missing`` (rows without metrics in either, or in one record only).
    """
    out: dict = {"identical": [], "same_to_decimals": [], "differ": {}, "missing": []}
    a, b = before["results"], after["results"]
    for method in sorted(set(a) | set(b)):
        m_a = a.get(method, {}).get("metrics")
        m_b = b.get(method, {}).get("metrics")
        if m_a is None or m_b is None:
            out["missing"].append(method)
            continue
        names = sorted(set(m_a) & set(m_b))
        moved = {
            n: [m_a[n], m_b[n]]
            for n in names
            if round(m_a[n], decimals) != round(m_b[n], decimals)
        }
        if moved:
            out["differ"][method] = moved
        elif all(m_a[n] == m_b[n] for n in names) and set(m_a) == set(m_b):
            out["identical"].append(method)
        else:
            out["same_to_decimals"].append(method)
    return out


def main(argv: list[str] | None = None) -> dict:
    """Compare two records (module docstring) and print the outcome.

    Parameters
    ----------
    argv : list of str, optional
        Command-line arguments (``sys.argv[1:]`` when None).

    Returns
    -------
    dict
        :func:`compare`'s outcome, with the two files and the decimals.
    """
    parser = script_parser(__doc__, device=False)
    parser.add_argument("before", type=pathlib.Path)
    parser.add_argument("after", type=pathlib.Path)
    parser.add_argument("--decimals", type=int, default=4)
    parser.add_argument("--json", type=pathlib.Path, help="write the outcome here")
    args = parser.parse_args(argv)
    records = [json.loads(p.read_text()) for p in (args.before, args.after)]
    outcome = {
        "before": args.before.name,
        "after": args.after.name,
        "decimals": args.decimals,
        **compare(*records, decimals=args.decimals),
    }
    if args.json:
        write_json(args.json, outcome, indent=1)
    print(
        f"{len(outcome['identical'])} rows identical, "
        f"{len(outcome['same_to_decimals'])} the same to {args.decimals} decimals, "
        f"{len(outcome['differ'])} differ, {len(outcome['missing'])} without figures"
    )
    for method, moved in outcome["differ"].items():
        print(f"  {method}: {moved}")
    return outcome


if __name__ == "__main__":
    main()
