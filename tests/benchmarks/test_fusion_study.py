"""The fusion study's pieces (``benchmarks/claims/fusion_study.py``) and its records:
the simplex grid, the score rules, and a chosen setting that is the best of its own
out-of-fold table."""

import json
import pathlib

import numpy as np
import pytest

from jaxannot.methods.ensemble.fusion import as_distribution

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def study(benchmark_script):
    return benchmark_script("benchmarks.claims.fusion_study")


def test_the_simplex_grid_is_every_weight_vector_of_its_step(study):
    got = sorted(study.simplex(3, 0.5))
    assert got == sorted(
        [(0, 0, 1), (0, 0.5, 0.5), (0, 1, 0), (0.5, 0, 0.5), (0.5, 0.5, 0), (1, 0, 0)]
    )
    assert len(list(study.simplex(5, 0.25))) == 70  # C(8, 4)


def test_distributions_sum_to_one_and_keep_each_row_order(study):
    rng = np.random.default_rng(0)
    margins = rng.normal(size=(6, 9))
    for probabilities, scores in ((True, np.abs(margins)), (False, margins)):
        p = as_distribution(scores, probabilities)
        np.testing.assert_allclose(p.sum(1), 1.0)
        np.testing.assert_array_equal(
            np.argsort(-p, 1, kind="stable"), np.argsort(-scores, 1, kind="stable")
        )
    zero = as_distribution(np.zeros((2, 4)), True)
    np.testing.assert_allclose(zero, 0.25)  # no mass: uniform


def test_reweight_divides_by_the_prior_and_head_puts_its_top_five_first(study):
    rng = np.random.default_rng(1)
    parts = [rng.dirichlet(np.ones(12), 8) for _ in range(2)]
    prior = rng.uniform(0.01, 0.5, 12)
    f = 0.25 * parts[0] + 0.75 * parts[1]
    plain = study.fused_scores(parts, (0.25, 0.75), prior, "reweight", 0.0)
    np.testing.assert_allclose(plain, f)
    boosted = f / prior**0.5
    np.testing.assert_allclose(
        study.fused_scores(parts, (0.25, 0.75), prior, "reweight", 0.5), boosted
    )
    head = study.fused_scores(parts, (0.25, 0.75), prior, "head", 0.5)
    order = np.argsort(-head, 1, kind="stable")
    np.testing.assert_array_equal(
        order[:, :5], np.argsort(-boosted, 1, kind="stable")[:, :5]
    )
    for row in range(8):  # the tail follows F
        tail = order[row, 5:]
        assert np.all(np.diff(f[row, tail]) <= 0)


@pytest.mark.parametrize("dataset", ["corel5k", "scene"])
def test_each_record_chose_the_best_of_its_out_of_fold_table(dataset):
    path = ROOT / "benchmarks" / "results" / f"fusion_study_{dataset}.json"
    record = json.loads(path.read_text())
    cv = record["cv"]
    for row in cv["settings"]:
        ratios = [row["metrics"][m] / cv["base_best"][m] for m in record["targets"]]
        assert row["worst_ratio"] == pytest.approx(min(ratios))
    best = max(row["worst_ratio"] for row in cv["settings"])
    assert cv["chosen"]["worst_ratio"] == best
    assert set(record["test"]["bases"]) == set(record["bases"])
