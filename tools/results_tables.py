"""The generated tables of the docs: the results tables of README.md and
docs/results.md, rendered from their records, and the method and script tables of
docs/architecture.md and docs/benchmarks.md, rendered from the code.

Every table between a pair of markers ``<!-- table:NAME -->`` and
``<!-- /table:NAME -->`` in those files is generated here, from
``benchmarks/results/*.json``, the method registry or the scripts of ``benchmarks/``,
so no figure or name in them is typed by hand and none can go stale:
``tests/docs/test_results_tables.py`` fails when a table differs from what its sources
give.

- ``field_DATASET``: the registered methods at their defaults
  (``defaults_vs_empirical_DATASET.json``) beside the multi-label peers with settings
  chosen by CV on the training images (``multilabel_peers_DATASET.json``), on the same
  Mulan split, every metric family of the field; bold marks the best measured figure
  of each column (ours or a peer; none where most rows share it). Published figures
  (other features or splits) are listed under the table, marked as such, never bolded.
  Every registered method without a row is named under the table with the reason it
  cannot run there (:func:`absent_methods`: its record's error, or what the method
  is: a classifier needs class labels, a regressor scores no words).
- ``defaults``: every method at its defaults, Corel5k word F1@5 and MAP, scene MAP.
- ``baselines_corel5k``: the baselines and neighbour methods on Corel5k.

No table carries fit seconds: the records behind them were run on a shared machine
under varying load; the speed comparisons are the benchmarks' own records.
- ``emml_mbrm``: EMML against MBRM tuned by each metric (``emml_vs_mbrm.json``).
- ``tomotopy``: Link-LDA by CVB0 against tomotopy's Gibbs sampler, the ratio of the
  times to tomotopy's perplexity (``link_lda_vs_peers_CORPUS[_allcores].json``).
- ``time_to_target``: each system's mean time to tomotopy's perplexity against the
  corpus size, every Link-LDA record (:func:`time_to_target_points`); ``--figure``
  draws the same points, log-log, into ``docs/figures/link_lda_time_to_target.png``.
- ``methods``: every registered method, the module that registers it and what it
  declares (:func:`methods_table`, docs/architecture.md).
- ``scripts``: every script of ``benchmarks/<purpose>/`` and ``tools/``, the first
  paragraph of its docstring and the pages that name it (:func:`scripts_table`,
  docs/benchmarks.md).

    python -m tools.results_tables            # rewrite the tables in place
    python -m tools.results_tables --check    # exit 1 when a table is stale
    python -m tools.results_tables --figure   # also redraw the time-to-target plot
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DOCS = ROOT / "docs"
DOCUMENTS = (
    ROOT / "README.md",
    DOCS / "results.md",
    DOCS / "architecture.md",
    DOCS / "benchmarks.md",
)
DATASETS = ("corel5k", "scene", "yeast", "emotions", "enron")

#: (key, header, digits, higher is better); N+@5 is a count.
COLUMNS = (
    ("word_f1@5", "word F1@5", 4, True),
    ("n_plus@5", "N+@5", 0, True),
    ("map", "MAP", 4, True),
    ("lrap", "LRAP", 3, True),
    ("ranking_loss", "rank loss", 3, False),
    ("one_error", "one-error", 3, False),
    ("micro_f1", "micro-F1", 3, True),
    ("macro_f1", "macro-F1", 3, True),
    ("example_f1", "example-F1", 3, True),
    ("hamming_loss", "Hamming", 4, False),
)

PEER_NAMES = {
    "br_logreg": "peer: binary relevance, logistic regression",
    "br_linear_svm": "peer: binary relevance, linear SVM",
    "classifier_chain": "peer: classifier chain, logistic regression",
    "ml_knn": "peer: ML-kNN",
    "random_forest": "peer: random forest (multi-output trees)",
}

#: Figures published on these datasets with other features or another split: shown
#: under a table with their source, never compared in bold.
PUBLISHED = {
    "corel5k": [
        "Jeon, Lavrenko & Manmatha 2003, on Duygulu et al.'s blob tokens (Corel5k, "
        "the 260 test words): translation model P 0.06 / R 0.04 / N+ 49; CMRM "
        "P 0.10 / R 0.09 / N+ 66; Lavrenko et al.'s CRM on continuous features of "
        "the same regions P 0.16 / R 0.19 / N+ 107.",
        "Bogatinovski et al. 2022 (26 multi-label methods, Mulan's Corel5k features, "
        "another split): micro-F1 0.257 and label-ranking AP 0.282 at best (random "
        "forests of predictive clustering trees / of decision trees with binary "
        "relevance).",
    ],
    "scene": [
        "Bogatinovski et al. 2022 (Mulan's scene features, another split): micro-F1 "
        "0.792, example-F1 0.806, label-ranking AP 0.889 at best (calibrated label "
        "ranking).",
    ],
}


def _load(name: str) -> dict | None:
    path = RESULTS / name
    return json.loads(path.read_text()) if path.exists() else None


def _cell(value, digits: int) -> str:
    if value is None:
        return "–"
    return f"{value:.0f}" if digits == 0 else f"{value:.{digits}f}"


def field_rows(dataset: str) -> list[tuple[str, dict]]:
    """(name, metrics) of our methods and the peers on ``dataset``."""
    rows = []
    ours = _load(f"defaults_vs_empirical_{dataset}.json")
    if ours:
        for name, result in sorted(ours["results"].items()):
            metrics = result.get("metrics") if isinstance(result, dict) else None
            if metrics:
                rows.append((name, metrics))
    peers = _load(f"multilabel_peers_{dataset}.json")
    if peers:
        for key, learner in peers["learners"].items():
            rows.append((PEER_NAMES.get(key, key), learner["metrics"]))
    return rows


def absent_methods(dataset: str) -> list[tuple[str, str]]:
    """(name, reason) of every registered method without a row of ``dataset``'s
    field table, the reason read off its record or its declaration."""
    from jaxannot.annotators import available_methods

    record = _load(f"defaults_vs_empirical_{dataset}.json") or {"results": {}}
    have = {name for name, _ in field_rows(dataset)}
    absent = []
    for name, method in sorted(available_methods().items()):
        if name in have:
            continue
        result = record["results"].get(name)
        errors = result.get("error") if isinstance(result, dict) else None
        if "labels" in method.needs:
            reason = f"classification only: needs class labels, {dataset} has words"
        elif method.score_words is None and method.response is not None:
            reason = "regression only: predicts a numeric target, scores no words"
        elif errors:
            text = errors[0] if isinstance(errors, list) else str(errors)
            reason = "the run fails: " + text.removeprefix("jaxannot: error: ")
        else:
            reason = "no record"
        absent.append((name, reason))
    return absent


def _absent_note(dataset: str) -> str:
    by_reason: dict[str, list[str]] = {}
    for name, reason in absent_methods(dataset):
        by_reason.setdefault(reason, []).append(name)
    parts = [f"{', '.join(names)} ({reason})" for reason, names in by_reason.items()]
    return "- Registered, no row here: " + "; ".join(parts) + "." if parts else ""


def _best(rows, key: str, higher: bool):
    values = [m[key] for _, m in rows if m.get(key) is not None]
    if not values:
        return None
    return max(values) if higher else min(values)


def field_table(dataset: str) -> str:
    """The markdown table of ``dataset``: our methods and the peers, bold leaders."""
    rows = field_rows(dataset)
    if not rows:
        raise SystemExit(f"no records for {dataset}")
    header = "| method | " + " | ".join(c[1] for c in COLUMNS) + " |"
    lines = [header, "|---" * (len(COLUMNS) + 1) + "|"]
    best = {key: _best(rows, key, higher) for key, _, _, higher in COLUMNS}
    leaders = {
        key: {i for i, (_, m) in enumerate(rows)
              if m.get(key) is not None and _cell(m[key], d) == _cell(best[key], d)}
        for key, _, d, _ in COLUMNS
    }  # fmt: skip
    for i, (name, metrics) in enumerate(rows):
        cells = []
        for key, _, digits, _ in COLUMNS:
            text = _cell(metrics.get(key), digits)
            # a figure most rows share (N+@5 over 6 labels) leads nothing
            lead = i in leaders[key] and 2 * len(leaders[key]) < len(rows)
            cells.append(f"**{text}**" if lead else text)
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    notes = [f"- Published, not comparable: {p}" for p in PUBLISHED.get(dataset, [])]
    absent = _absent_note(dataset)
    notes += [absent] if absent else []
    return "\n".join(lines + ([""] + notes if notes else []))


def defaults_table() -> str:
    """Every method at its defaults: Corel5k word F1@5 and MAP, scene MAP."""
    corel = _load("defaults_vs_empirical_corel5k.json")["results"]
    scene = _load("defaults_vs_empirical_scene.json")["results"]
    lines = [
        "| method | Corel5k word F1@5 | Corel5k MAP | scene MAP |",
        "|---|---|---|---|",
    ]
    for name in sorted(set(corel) | set(scene)):
        c = (corel.get(name) or {}).get("metrics") or {}
        s = (scene.get(name) or {}).get("metrics") or {}
        if not c and not s:
            continue
        lines.append(
            f"| {name} | {_cell(c.get('word_f1@5'), 4)} | {_cell(c.get('map'), 4)} "
            f"| {_cell(s.get('map'), 4)} |"
        )
    return "\n".join(lines)


#: The records of :func:`tomotopy_table`, in its order.
TOMOTOPY_RECORDS = (
    "link_lda_vs_peers_corel5k.json",
    "link_lda_vs_peers_corel5k_allcores.json",
    "link_lda_vs_peers_corel5k_scvb0.json",
    "link_lda_vs_peers_synthetic.json",
    "link_lda_vs_peers_synthetic_allcores.json",
    "link_lda_vs_peers_synthetic_10k.json",
    "link_lda_vs_peers_synthetic_10k_allcores.json",
    "link_lda_vs_peers_synthetic_10k_scvb0.json",
    "link_lda_vs_peers_synthetic_10k_scvb0_allcores.json",
    "link_lda_vs_peers_synthetic_100k_scvb0.json",
    "link_lda_vs_peers_synthetic_100k_scvb0_allcores.json",
    "link_lda_vs_peers_synthetic_1m_scvb0.json",
    "link_lda_vs_peers_synthetic_1m_scvb0_allcores.json",
)


def tomotopy_table() -> str:
    """Link-LDA against tomotopy: the time-to-target ratio with its bootstrap
    interval, per record of :data:`TOMOTOPY_RECORDS`."""
    lines = [
        "| corpus | documents | jaxannot's fit | threads "
        "| target (× tomotopy's perplexity) | seeds both reached "
        "| tomotopy / jaxannot CPU time, 95 % interval | wall |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in TOMOTOPY_RECORDS:
        record = _load(name)
        if record is None:
            continue
        corpus = record["corpus"]
        for target in record["time_to_target"]:
            cpu, wall = target["ratio_cpu_seconds"], target["ratio_seconds"]
            seeds = f"{len(target['seeds_in_ratio'])} of {len(record['seeds'])}"
            if not cpu or cpu["ratio_of_means"] is None:
                ratio, walls = "–", "–"
            else:
                low, high = cpu["interval"]
                ratio = f"{cpu['ratio_of_means']:.2f} [{low:.2f}, {high:.2f}]"
                walls = f"{wall['ratio_of_means']:.2f}"
            lines.append(
                f"| {corpus['name']} | {corpus['train_docs']:,} "
                f"| `{record['jaxannot']['method']}` | {record['threads']['setting']} "
                f"| {target['factor']:.2f} ({target['target_perplexity']:.1f}) "
                f"| {seeds} | {ratio} | {walls} |"
            )
    return "\n".join(lines)


#: The Link-LDA records of the time-to-target table and figure, by panel: the panel's
#: name, the clock it reads (one thread: CPU seconds, the steadier measure on a shared
#: machine; all cores or a GPU: wall seconds) and its records, smallest corpus first.
TIME_TO_TARGET = (
    (
        "one thread",
        "cpu_seconds",
        (
            "link_lda_vs_peers_corel5k.json",
            "link_lda_vs_peers_synthetic.json",
            "link_lda_vs_peers_synthetic_10k.json",
            "link_lda_vs_peers_synthetic_100k_scvb0.json",
            "link_lda_vs_peers_synthetic_1m_scvb0.json",
        ),
    ),
    (
        "all cores or a GPU",
        "seconds",
        (
            "link_lda_vs_peers_corel5k_allcores.json",
            "link_lda_vs_peers_synthetic_allcores.json",
            "link_lda_vs_peers_synthetic_100k_scvb0_allcores.json",
            "link_lda_vs_peers_synthetic_1m_scvb0_allcores.json",
            "link_lda_vs_peers_synthetic_100k_gpu.json",
        ),
    ),
)
FIGURE = DOCS / "figures" / "link_lda_time_to_target.png"


def time_to_target_points(factor: float = 1.0) -> list[dict]:
    """Each system's mean time to ``factor`` × tomotopy's perplexity, per record.

    Parameters
    ----------
    factor : float
        The target's factor (the records hold 0.99, 1.00 and 1.01).

    Returns
    -------
    list of dict
        One entry per record of :data:`TIME_TO_TARGET` and system (``jaxannot``,
        ``tomotopy``): ``panel``, ``clock``, ``record``, ``corpus``, ``docs``,
        ``tokens``, ``system``, ``where`` (device or workers), ``sweeps`` (of the
        reference), ``reached`` and ``seeds`` (how many seeds reached the target),
        and ``mean``, the mean of the clock over the seeds that reached it (None when
        none did).
    """
    points = []
    for panel, clock, names in TIME_TO_TARGET:
        for name in names:
            record = _load(name)
            if record is None:
                continue
            (target,) = [
                t for t in record["time_to_target"] if abs(t["factor"] - factor) < 1e-9
            ]
            sweeps = re.search(r"after (\d+) sweeps", record["reference_note"])
            workers = record["threads"]["tomotopy_workers"]
            for system in ("jaxannot", "tomotopy"):
                times = [s[system][clock] for s in target["per_seed"] if s[system]]
                if system == "jaxannot":
                    where = record["device"]["device_kind"]
                    where = "CPU" if where == "cpu" else where
                    where = f"{where}, {record['jaxannot']['method']}"
                else:
                    where = f"{workers} worker{'s' if workers > 1 else ''}"
                points.append(
                    {
                        "panel": panel,
                        "clock": clock,
                        "record": name,
                        "corpus": record["corpus"]["name"],
                        "docs": record["corpus"]["train_docs"],
                        "tokens": record["corpus"]["train_tokens"],
                        "system": system,
                        "where": where,
                        "sweeps": int(sweeps.group(1)) if sweeps else None,
                        "reached": len(times),
                        "seeds": len(record["seeds"]),
                        "mean": sum(times) / len(times) if times else None,
                    }
                )
    return points


def time_to_target_table() -> str:
    """The points of :func:`time_to_target_points` at f = 1.00, a row each."""
    lines = [
        "| clock | corpus | training documents | tokens | target: tomotopy after "
        "| system | where | seeds that reached the target | mean seconds to it |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for p in time_to_target_points():
        clock = "CPU s, one thread" if p["clock"] == "cpu_seconds" else "wall s"
        lines.append(
            f"| {clock} | {p['corpus']} | {p['docs']:,} | {p['tokens']:,.0f} "
            f"| {p['sweeps']} sweeps | {p['system']} | {p['where']} "
            f"| {p['reached']} of {p['seeds']} | {_cell(p['mean'], 2)} |"
        )
    return "\n".join(lines)


def time_to_target_figure(path: Path = FIGURE) -> list[dict]:
    """Draw :func:`time_to_target_points` at f = 1.00, log-log, one panel per clock.

    Parameters
    ----------
    path : Path
        The PNG to write (atomically: a temporary file renamed over it).

    Returns
    -------
    list of dict
        The points drawn (those with a mean).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    drawn = [p for p in time_to_target_points() if p["mean"] is not None]
    fig, axes = plt.subplots(1, len(TIME_TO_TARGET), figsize=(10, 4), sharey=True)
    for ax, (panel, clock, _) in zip(axes, TIME_TO_TARGET, strict=True):
        for system, marker, color in (("jaxannot", "o", "C0"), ("tomotopy", "s", "C1")):
            pts = [p for p in drawn if p["panel"] == panel and p["system"] == system]
            # one line per device (jaxannot) or worker count (tomotopy)
            series: dict[str, list[dict]] = {}
            for p in sorted(pts, key=lambda p: p["tokens"]):
                series.setdefault(p["where"].split(",")[0], []).append(p)
            for i, (where, line) in enumerate(series.items()):
                xs, ys = [p["tokens"] for p in line], [p["mean"] for p in line]
                style = "-" if i == 0 else "--"
                label = f"{system} ({where})"
                ax.plot(xs, ys, style, marker=marker, color=color, label=label)
            for p in pts:
                label = f"{p['corpus']}, {p['where']}"
                ax.annotate(label, (p["tokens"], p["mean"]), fontsize=7,
                            xytext=(4, 4), textcoords="offset points")  # fmt: skip
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("training tokens")
        ax.set_title(f"{panel} ({'CPU' if clock == 'cpu_seconds' else 'wall'} seconds)")
        ax.legend()
    axes[0].set_ylabel("mean seconds to tomotopy's perplexity")
    fig.tight_layout()
    tmp = path.with_name(path.name + ".tmp")
    fig.savefig(tmp, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)
    tmp.replace(path)
    return drawn


def emml_mbrm_table() -> str:
    """EMML at its defaults (tuned by MAP) against MBRM tuned by word F1@5 and by MAP
    (``emml_vs_mbrm.json``)."""
    record = _load("emml_vs_mbrm.json")
    keys = (("word_f1@5", 4), ("n_plus@5", 0), ("map", 4), ("f1@5", 4),
            ("lrap", 3), ("example_f1", 3))  # fmt: skip
    lines = [
        "| dataset | method | word F1@5 | N+@5 | MAP | F1@5 (per image) | LRAP "
        "| example-F1 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for dataset, rows in record["results"].items():
        for label, result in rows.items():
            metrics = result.get("metrics", {})
            cells = " | ".join(_cell(metrics.get(k), d) for k, d in keys)
            lines.append(f"| {dataset} | {label} | {cells} |")
    return "\n".join(lines)


def baselines_table() -> str:
    """The baselines and neighbour methods on Corel5k, the seed papers' metrics."""
    corel = _load("defaults_vs_empirical_corel5k.json")["results"]
    keys = (("accuracy", 4), ("complete_length", 2), ("f1@5", 4), ("word_f1@5", 4),
            ("n_plus@5", 0), ("map", 4))  # fmt: skip
    lines = [
        "| method | accuracy | complete length | F1@5 | word F1@5 | N+@5 | MAP |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in ("empirical", "knn", "tagprop", "emml", "mbrm"):
        metrics = corel[name]["metrics"]
        cells = " | ".join(_cell(metrics.get(k), d) for k, d in keys)
        lines.append(f"| {name} | {cells} |")
    return "\n".join(lines)


def _code(text: str) -> str:
    """``text`` as a markdown table cell: reST literals as code, pipes escaped."""
    return text.replace("``", "`").replace("|", "\\|")


def methods_table() -> str:
    """Every registered method of the library: the module of ``jaxannot/`` that
    registers it, its summary, what a corpus must have, how it reads its views, the
    NamedTuple of its fitted parameters and its monotone objectives."""
    from jaxannot.annotators import get_method
    from jaxannot.annotators.discovery import METHODS_PACKAGE, method_modules

    lines = [
        "| method | registered in | summary | needs | views read as "
        "| fitted parameters | monotone objectives |",
        "|---|---|---|---|---|---|---|",
    ]
    top = METHODS_PACKAGE.partition(".")[2]
    for name, module in method_modules().items():
        method = get_method(name)
        path = f"{top}/{module.replace('.', '/')}"
        monotone = ", ".join(f"`{key}` {way}" for key, way in method.monotone.items())
        lines.append(
            f"| `{name}` | `{path}` | {_code(method.summary)} "
            f"| {', '.join(method.needs) or '—'} | {method.input_kind} "
            f"| `{method.params.__name__}` | {monotone or '—'} |"
        )
    return "\n".join(lines)


def _is_script(path: Path) -> bool:
    """Whether ``path`` runs as ``__main__`` (``if __name__ == "__main__":``)."""
    for node in ast.parse(path.read_text()).body:
        test = node.test if isinstance(node, ast.If) else None
        if (
            isinstance(test, ast.Compare)
            and isinstance(test.left, ast.Name)
            and test.left.id == "__name__"
        ):
            return True
    return False


def benchmark_scripts() -> list[Path]:
    """The scripts of ``benchmarks/<purpose>/`` and ``tools/`` (not the shared
    modules of ``benchmarks/common`` and ``tools``), by path."""
    files = [*(ROOT / "benchmarks").glob("*/*.py"), *(ROOT / "tools").glob("*.py")]
    return sorted(p for p in files if p.parent.name != "common" and _is_script(p))


def _page_texts() -> dict[Path, str]:
    """README.md and the pages of docs/, each without its generated tables."""
    pages = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
    return {page: MARKER.sub("", page.read_text()) for page in pages}


def _citing_pages(script: Path, texts: dict[Path, str]) -> list[Path]:
    """The pages of ``texts`` (:func:`_page_texts`) that name ``script``: its file
    (``scale.py``, ``benchmarks/scale/scale.py``) or its module
    (``python -m benchmarks.scale.scale``)."""
    module = ".".join(script.relative_to(ROOT).with_suffix("").parts)
    pattern = re.compile(
        rf"(?<![\w.]){re.escape(script.name)}|(?<![\w.]){re.escape(module)}(?!\w)"
    )
    # the pattern starts with a look-behind, which re tries at every position of a
    # page: only pages that hold the name at all are searched
    return [
        page
        for page, text in texts.items()
        if (script.name in text or module in text) and pattern.search(text)
    ]


def scripts_table() -> str:
    """Every script of ``benchmarks/<purpose>/`` and ``tools/``: what it does (its
    docstring's first paragraph) and the pages that name it (linked from
    ``docs/``)."""
    lines = ["| script | what it does | pages |", "|---|---|---|"]
    texts = _page_texts()
    for script in benchmark_scripts():
        docstring = ast.get_docstring(ast.parse(script.read_text())) or ""
        summary = " ".join(docstring.split("\n\n")[0].split())
        links = [
            f"[{page.stem}]({'../' if page.parent == ROOT else ''}{page.name})"
            for page in _citing_pages(script, texts)
        ]
        lines.append(
            f"| `{script.relative_to(ROOT)}` | {_code(summary) or '—'} "
            f"| {', '.join(links) or '—'} |"
        )
    return "\n".join(lines)


def table(name: str) -> str:
    """The table called ``name`` in a document's markers."""
    if name == "methods":
        return methods_table()
    if name == "scripts":
        return scripts_table()
    if name == "baselines_corel5k":
        return baselines_table()
    if name == "emml_mbrm":
        return emml_mbrm_table()
    if name == "defaults":
        return defaults_table()
    if name == "tomotopy":
        return tomotopy_table()
    if name == "time_to_target":
        return time_to_target_table()
    if name.startswith("field_") and name[len("field_") :] in DATASETS:
        return field_table(name[len("field_") :])
    raise KeyError(f"unknown table {name!r}")


MARKER = re.compile(
    r"(<!-- table:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /table:(?P=name) -->)",
    re.DOTALL,
)


def render(text: str) -> str:
    """``text`` with every marked table regenerated."""
    return MARKER.sub(lambda m: m.group(1) + table(m.group("name")) + "\n" + m.group(4),
                      text)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report stale tables")
    parser.add_argument("--figure", action="store_true",
                        help=f"also redraw {FIGURE.relative_to(ROOT)}")  # fmt: skip
    args = parser.parse_args(argv)
    if args.figure and not args.check:
        time_to_target_figure()
    stale = []
    for path in DOCUMENTS:
        text = path.read_text()
        new = render(text)
        if new != text:
            stale.append(path.relative_to(ROOT))
            if not args.check:
                path.write_text(new)
    for path in stale:
        print(f"{'stale' if args.check else 'rewrote'}: {path}", file=sys.stderr)
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
