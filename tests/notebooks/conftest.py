"""The notebooks import what they share (``notebooks/_notebook.py``) as a sibling
module; tests that load a notebook script by path need its folder on ``sys.path``."""

import pathlib
import sys

import pytest

NOTEBOOKS = pathlib.Path(__file__).resolve().parents[2] / "notebooks"
if str(NOTEBOOKS) not in sys.path:
    sys.path.insert(0, str(NOTEBOOKS))


def _random_order_map(truth, draws=4000, seed=0):
    """MAP of a ranking that knows nothing: per word with a positive, the mean AP over
    ``draws`` uniformly random orders of the images (hand-written AP, checked on one
    order against sklearn), averaged over the words."""
    import numpy as np
    from sklearn.metrics import average_precision_score

    truth = np.asarray(truth) > 0
    rng = np.random.default_rng(seed)
    places = np.argsort(rng.random((draws, len(truth))), axis=1)  # image -> place
    aps = []
    for w in np.flatnonzero(truth.any(0)):
        ranks = np.sort(places[:, truth[:, w]], axis=1) + 1  # positives' ranks
        ap = np.mean(np.arange(1, ranks.shape[1] + 1) / ranks, axis=1)
        sklearn_ap = average_precision_score(truth[:, w], -places[0])
        assert abs(ap[0] - sklearn_ap) < 1e-12
        aps.append(ap.mean())
    return float(np.mean(aps))


@pytest.fixture
def random_order_map():
    return _random_order_map
