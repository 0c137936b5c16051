"""``tools/defaults_cv.py``: record runs from cross-validations and from
``jaxannot tune --json`` outputs."""

import json

import pytest

from jaxannot.cli.app import main as cli


@pytest.fixture(scope="module")
def defaults_cv(benchmark_script):
    return benchmark_script("tools.defaults_cv")


def _tune(tmp_path, data_root, name, *grid_and_set):
    out = tmp_path / f"{name}.json"
    argv = ["tune", "knn", "--dataset", "scene", "--data-dir", str(data_root)]
    argv += ["--folds", "2", "-q"]
    assert cli([*argv, *grid_and_set, "--json", str(out)]) == 0
    return out


def test_one_fit_of_the_defaults_serves_each_one_key_record(
    defaults_cv, tmp_path, data_root
):
    k_default = defaults_cv.get_method("knn").hyper["k"]
    weight = defaults_cv.get_method("knn").hyper["weight"]
    other = "uniform" if weight != "uniform" else "heat"
    k_other = _tune(tmp_path, data_root, "k_other", "--grid", f"k={k_default + 3}")
    w_default = _tune(tmp_path, data_root, "w_default", "--grid", f"weight={weight}")
    w_other = _tune(tmp_path, data_root, "w_other", "--grid", f"weight={other}")

    run = defaults_cv.import_runs([k_other, w_default])  # w_default: k's default too
    assert run["grid"] == {"k": sorted([k_default, k_default + 3])}
    assert run["shared_from"] == [w_default.as_posix()]
    shared = json.loads(w_default.read_text())["results"][0]
    row = next(r for r in run["results"] if r["params"] == {"k": k_default})
    assert row["folds"] == shared["folds"] and row["mean"] == shared["mean"]
    assert run["default"]["params"] == {"k": k_default}

    # a setting that differs in another key than the record's is not the same fit
    with pytest.raises(SystemExit, match="not one setting of the same fit"):
        defaults_cv.import_runs([k_other, w_other])
    # the first output names the record's keys
    with pytest.raises(SystemExit, match="not one setting of the same fit"):
        defaults_cv.import_runs([w_default, k_other])


def test_one_setting_outputs_recorded_as_a_grid_over_another_key(
    defaults_cv, tmp_path, data_root
):
    heat = _tune(tmp_path, data_root, "heat", "--grid", "k=5", "--set", "weight=heat")
    flat = _tune(
        tmp_path, data_root, "flat", "--grid", "k=5", "--set", "weight=uniform"
    )
    run = defaults_cv.import_runs([heat, flat], as_keys=["weight"])
    assert run["grid"] == {"weight": ["heat", "uniform"]}
    assert run["fixed"]["k"] == 5
    assert [r["params"] for r in run["results"]] == [
        {"weight": "heat"},
        {"weight": "uniform"},
    ]
    other_k = _tune(tmp_path, data_root, "k6", "--grid", "k=6", "--set", "weight=heat")
    with pytest.raises(SystemExit, match="only in"):
        defaults_cv.import_runs([heat, other_k], as_keys=["weight"])
