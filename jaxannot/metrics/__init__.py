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

from jaxannot.metrics import annotation, multilabel, per_image, per_word
from jaxannot.metrics.annotation import *  # noqa: F403 (its __all__, below)
from jaxannot.metrics.multilabel import *  # noqa: F403
from jaxannot.metrics.per_image import *  # noqa: F403
from jaxannot.metrics.per_word import *  # noqa: F403

__all__ = [
    *per_image.__all__,
    *per_word.__all__,
    *annotation.__all__,
    *multilabel.__all__,
]
