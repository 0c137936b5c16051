"""Every evaluation metric, defined once (numpy in, floats out).

- :mod:`jaxannot.metrics.annotation`: the metrics of the five papers (Accuracy,
  Complete Length, the @N metrics, MAP, MiAP, P@k, classification and regression).
- :mod:`jaxannot.metrics.multilabel`: the multi-label learning metrics as
  scikit-learn defines them (label-ranking AP, ranking loss, coverage, one-error;
  micro, macro and example precision/recall/F1 and Hamming loss of a bipartition).

Each module states its conventions for tied scores and for images without a true
word.
"""

from jaxannot.metrics.annotation import (
    KL_EPS,
    annotation_accuracy,
    annotation_report,
    average_precision,
    classification_accuracy,
    complete_length,
    error_rate,
    image_prf_at_n,
    interpolated_average_precision,
    mean_average_precision,
    mean_interpolated_average_precision,
    pairwise_symmetric_kl,
    precision_at_k,
    r2_score,
    regression_report,
    root_mean_squared_error,
    topn_precision_recall,
    word_prf_at_n,
)
from jaxannot.metrics.multilabel import (
    BIPARTITION_METRICS,
    MULTILABEL_METRICS,
    RANKING_METRICS,
    bipartition_k,
    bipartition_report,
    coverage,
    hamming_loss,
    label_ranking_average_precision,
    multilabel_report,
    one_error,
    prf,
    ranking_loss,
    ranking_report,
    threshold_bipartition,
    top_k_bipartition,
)

__all__ = [
    "annotation_accuracy",
    "complete_length",
    "image_prf_at_n",
    "word_prf_at_n",
    "average_precision",
    "mean_average_precision",
    "interpolated_average_precision",
    "mean_interpolated_average_precision",
    "precision_at_k",
    "topn_precision_recall",
    "classification_accuracy",
    "error_rate",
    "r2_score",
    "root_mean_squared_error",
    "pairwise_symmetric_kl",
    "annotation_report",
    "regression_report",
    "KL_EPS",
    "label_ranking_average_precision",
    "ranking_loss",
    "coverage",
    "one_error",
    "ranking_report",
    "bipartition_k",
    "top_k_bipartition",
    "threshold_bipartition",
    "prf",
    "hamming_loss",
    "bipartition_report",
    "multilabel_report",
    "RANKING_METRICS",
    "BIPARTITION_METRICS",
    "MULTILABEL_METRICS",
]
