"""``benchmarks/claims/mmh_claim.py``: the variant specs, the run store and the
table."""

import numpy as np
import pytest


@pytest.fixture(scope="module")
def claim(benchmark_script):
    return benchmark_script("benchmarks.claims.mmh_claim")


def test_variant_specs(claim):
    assert claim.parse_variant("svm") == ("svm", {})
    assert claim.parse_variant("mmh:c1=0.01, topics=40") == (
        "mmh",
        {"c1": "0.01", "topics": "40"},
    )
    for bad in ("mmh:c1", "mmh:=3", ":c1=2"):
        with pytest.raises(ValueError, match="variant"):
            claim.parse_variant(bad)
    assert claim.cv_label("mmh", ["c2=1,5"]) == "mmh cv[c2=1,5]"
    assert claim.cv_label("mmh", []) == "mmh"


def _run(dataset, seed, label, accuracy):
    return {"dataset": dataset, "seed": seed, "label": label, "accuracy": accuracy}


def test_a_rerun_replaces_the_run_of_the_same_key(claim):
    report = {"runs": []}
    claim.add_run(report, _run("msrc", 0, "mmh", 0.5))
    claim.add_run(report, _run("msrc", 1, "mmh", 0.6))
    claim.add_run(report, _run("msrc", 0, "mmh", 0.7))
    assert sorted((r["seed"], r["accuracy"]) for r in report["runs"]) == [
        (0, 0.7),
        (1, 0.6),
    ]


def test_table_is_mean_and_sample_sd_with_the_best_in_bold(claim):
    runs = [_run("msrc", s, "mmh", a) for s, a in enumerate([0.8, 0.9, 1.0])]
    runs += [_run("msrc", s, "svm", a) for s, a in enumerate([0.9, 0.95, 1.0])]
    runs += [_run("bbc", 0, "mmh", 0.4)]
    text = claim.table(runs).splitlines()
    assert text[0] == "| dataset | mmh | svm |"
    sd = np.std([0.8, 0.9, 1.0], ddof=1)  # 0.1
    assert text[2] == f"| msrc (n=3) | 0.900 ± {sd:.3f} | **0.950 ± 0.050** |"
    assert text[3] == "| bbc (n=1) | **0.400 ± 0.000** | — |"


def test_a_default_decided_on_a_dataset_without_a_split_is_taken_per_seed(claim):
    """3sources' bag model: each seed takes what the CV inside its own training
    part chose (no seed is evaluated on images its choice was made on)."""
    from jaxannot.annotators.hyper_spec import DEFAULTS

    record = claim.load_record("twh", "3sources")
    rule = DEFAULTS["twh"]["bag_model"].rule
    for seed in range(5):
        want = claim.seed_choice(record, "bag_model", rule, seed)
        assert claim.seed_defaults("twh", "3sources", seed) == {"bag_model": want}
    assert claim.seed_defaults("twh", "3sources", 0, {"bag_model"}) == {}
    assert claim.seed_defaults("twh", "wikipedia", 3) == {}  # its own split
    assert claim.seed_defaults("svm", "3sources", 3) == {}  # nothing decided there
    with pytest.raises(SystemExit, match="no run over bag_model at seed 9"):
        claim.seed_defaults("twh", "3sources", 9)
