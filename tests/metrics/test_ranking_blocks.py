"""The ranking metrics computed a block of images at a time are the whole ones."""

import numpy as np
import pytest

from jaxannot.metrics import multilabel


@pytest.mark.parametrize("entries", [7, 64, 1000])
def test_ranking_report_in_blocks_of_images_is_the_whole_report(monkeypatch, entries):
    rng = np.random.default_rng(0)
    scores = np.round(rng.random((300, 7)), 1)  # ties within images
    truth = rng.random((300, 7)) < 0.3
    whole = multilabel.ranking_report(scores, truth)
    monkeypatch.setattr(multilabel, "BLOCK_ENTRIES", entries)
    assert multilabel.ranking_report(scores, truth) == whole
