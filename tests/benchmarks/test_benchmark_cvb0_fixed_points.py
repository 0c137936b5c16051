"""``benchmarks/peers/cvb0_fixed_points.py``: the spread, the objective's ranking and
the simulated restarts read off per-seed curves, and a tiny run end to end."""

import json

import numpy as np
import pytest


@pytest.fixture(scope="module")
def bench(benchmark_script):
    return benchmark_script("benchmarks.peers.cvb0_fixed_points")


#: three seeds, two checkpoints of (sweeps, objective, perplexity): at 10 sweeps the
#: objective ranks the seeds against their last perplexity, at 20 it ranks them right
CURVES = [
    [(10, -5.0, 420.0), (20, -1.0, 390.0)],
    [(10, -2.0, 430.0), (20, -3.0, 410.0)],
    [(10, -4.0, 425.0), (20, -2.0, 400.0)],
]


def test_the_objective_ranks_the_seeds_only_where_it_does(bench):
    corr = [p["corr"] for p in bench.predicts(CURVES)]
    assert corr[0] > 0.9  # the highest objective ends worst
    assert corr[1] == pytest.approx(-1.0)


def test_simulated_restarts_take_the_highest_objective_at_the_choice(bench):
    rows = {(r["starts"], r["choice_at"]): r for r in bench.restarts(CURVES, 395.0)}
    assert set(rows) == {(2, 10), (2, 20), (3, 10), (3, 20)}  # no 4 of 3 seeds
    # pairs (0, 1), (0, 2), (1, 2): at 10 sweeps seeds 1, 2, 1 are taken
    assert rows[2, 10]["chosen_last_mean"] == pytest.approx((410 + 400 + 410) / 3)
    assert rows[2, 20]["chosen_last_mean"] == pytest.approx((390 + 390 + 400) / 3)
    assert rows[3, 20]["chosen_reach_target"] == 1.0
    assert rows[3, 10]["chosen_reach_target"] == 0.0
    spread = bench.spread(CURVES, 395.0)
    assert spread["first_at_or_below_target"] == [20, None, None]
    assert spread["mean"] == pytest.approx(400.0)


def test_bad_options_are_refused(bench):
    with pytest.raises(SystemExit):
        bench.parse_args(["--sweeps", "25", "--step", "10"])
    with pytest.raises(SystemExit):
        bench.parse_args(["--seeds", "0"])


def test_a_tiny_run_records_the_curves(bench, tmp_path, monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "")
    out = tmp_path / "o.json"
    bench.main(
        ["--corpus", "synthetic", "--docs", "30", "--test-docs", "8", "--vocab", "20"]
        + ["--length", "15", "--topics", "3", "--blocks", "2", "--sweeps", "4"]
        + ["--step", "2", "--seeds", "2", "--target", "1e9", "--json", str(out)]
    )
    record = json.loads(out.read_text())
    assert [[row[0] for row in c] for c in record["curves"]] == [[2, 4], [2, 4]]
    assert np.isfinite([row[1:] for c in record["curves"] for row in c]).all()
    assert record["spread"]["first_at_or_below_target"] == [2, 2]
    assert [r["starts"] for r in record["restarts"]] == [2, 2]
