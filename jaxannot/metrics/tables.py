"""The metric columns of the result tables and the text tables themselves.

:data:`TABLE_METRICS` orders the CLI's columns, :func:`metric_names` lists every
metric :func:`jaxannot.evaluation.evaluate` can report and :func:`check_columns`
checks a choice of columns against them; :func:`format_metric`,
:func:`align_columns` and :func:`format_table` print the rows.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from jaxannot.metrics.annotation import annotation_report
from jaxannot.metrics.multilabel import MULTILABEL_METRICS

__all__ = [
    "TABLE_METRICS",
    "align_columns",
    "check_columns",
    "format_metric",
    "format_table",
    "metric_names",
]

#: The metrics of the CLI's result tables, in their column order.
TABLE_METRICS = (
    "accuracy",
    "complete_length",
    "f1@5",
    "word_f1@5",
    "n_plus@5",
    "map",
    "classification_accuracy",
    "rmse",
    "r2",
)


def metric_names(n: int = 5) -> tuple[str, ...]:
    """Every metric :func:`~jaxannot.evaluation.evaluate` can report (with @``n``
    metrics), table order first: the annotation metrics, the multi-label ones,
    classification accuracy, ``rmse`` and ``r2``."""
    truth = np.eye(n + 1, dtype=np.float32)
    names = [
        *annotation_report(truth, truth, n=n),
        *MULTILABEL_METRICS,
        "classification_accuracy",
        "rmse",
        "r2",
    ]
    return tuple(dict.fromkeys([*TABLE_METRICS, *names]))


def check_columns(columns: str | Sequence[str], n: int = 5) -> list[str]:
    """``columns`` (a list, or one comma-separated string) checked against
    :func:`metric_names`; ``ValueError`` naming the unknown ones and the valid names."""
    if isinstance(columns, str):
        columns = [c.strip() for c in columns.split(",") if c.strip()]
    columns = list(columns)
    valid = metric_names(n)
    unknown = [c for c in columns if c not in valid]
    if unknown or not columns:
        raise ValueError(
            f"unknown metric(s) {unknown or '(none given)'} for the table's columns "
            f"(--metrics); valid metrics: {', '.join(valid)}"
        )
    return columns


def format_metric(column: str, value: float | None) -> str:
    """``value`` of the metric ``column`` as a table cell (``-`` when None)."""
    if value is None:
        return "-"
    if column in ("complete_length", "coverage") or column.startswith("n_plus"):
        return f"{value:.2f}"
    return f"{value:.4f}"


def align_columns(lines: list[list[str]], left: int = 1) -> str:
    """Columns padded to their widths (the first ``left`` left-aligned), a rule under
    the header row ``lines[0]``."""
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    out = []
    for j, line in enumerate(lines):
        out.append(
            "  ".join(
                c.ljust(w) if i < left else c.rjust(w)
                for i, (c, w) in enumerate(zip(line, widths, strict=True))
            )
        )
        if j == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in out)


def format_table(rows: list[dict], columns: list[str] | None = None) -> str:
    """One line per :meth:`~jaxannot.evaluation.Evaluation.as_json` row: the method,
    the metric ``columns`` (default: the :data:`TABLE_METRICS` any row reports; ``-``
    where a row lacks one), the fit seconds."""
    if columns is None:
        columns = [c for c in TABLE_METRICS if any(c in r["metrics"] for r in rows)]
    lines = [["method", *columns, "fit s"]]
    for row in rows:
        cells = [format_metric(c, row["metrics"].get(c)) for c in columns]
        lines.append([row["method"], *cells, f"{row['fit_seconds']:.2f}"])
    return align_columns(lines)
