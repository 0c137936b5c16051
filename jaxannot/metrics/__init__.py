"""Every evaluation metric, defined once (numpy in, floats out).

- :mod:`jaxannot.metrics.per_image`: the per-image annotation metrics of the five
  papers (Accuracy, Complete Length, P/R/F1@N, top-N precision/recall).
- :mod:`jaxannot.metrics.per_word`: the per-word ones (P/R/F1@N per word and N+,
  AP / MAP, iAP / MiAP, P@k).
- :mod:`jaxannot.metrics.annotation`: classification and regression metrics, the
  pairwise KL of seed 001, and the reports that gather the paper metrics.
- :mod:`jaxannot.metrics.ranking`: the input checks and rankings they share.
- :mod:`jaxannot.metrics.multilabel`: the multi-label learning metrics as
  scikit-learn defines them (label-ranking AP, ranking loss, coverage, one-error;
  micro, macro and example precision/recall/F1 and Hamming loss of a bipartition).

Each module states its conventions for tied scores and for images without a true
word.
"""

from jaxannot.metrics.annotation import (
    KL_EPS,
    annotation_report,
    classification_accuracy,
    error_rate,
    pairwise_symmetric_kl,
    r2_score,
    regression_report,
    root_mean_squared_error,
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
from jaxannot.metrics.per_image import (
    annotation_accuracy,
    complete_length,
    image_prf_at_n,
    topn_precision_recall,
)
from jaxannot.metrics.per_word import (
    average_precision,
    interpolated_average_precision,
    mean_average_precision,
    mean_interpolated_average_precision,
    precision_at_k,
    word_prf_at_n,
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
