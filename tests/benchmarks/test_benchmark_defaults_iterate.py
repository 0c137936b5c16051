"""``tools/defaults_iterate.py``: which record runs are stale, the rules a
re-run's winner is read by, the grid past an edge winner, and a pass that moves a
default and then re-runs what the move made stale (a fake cross-validation)."""

import json

import pytest

TOML = """[m]
lr = { value = 0.01, origin = "cv", record = "d" }
topics = { value = 20, origin = "cv", record = "d" }
rule = { value = "a", origin = "cv", record = "d", requires = { mode = "x" } }
mode = { value = "y", origin = "cv", record = "d" }
view = { value = "", origin = "data" }
"""


@pytest.fixture(scope="module")
def it(benchmark_script):
    return benchmark_script("tools.defaults_iterate")


def _run(key, scores, defaults, higher=True, fixed=None, edge=None):
    """A record run over ``key``: ``scores`` maps each value to its fold scores."""
    results = [
        {"params": {key: v}, "folds": f, "mean": sum(f) / len(f)}
        for v, f in scores.items()
    ]
    best = max(results, key=lambda r: r["mean"] if higher else -r["mean"])
    return {
        "grid": {key: list(scores)},
        "results": results,
        "best": best,
        "higher_is_better": higher,
        "defaults_at_run": defaults,
        "fixed": fixed or {},
        "folds": 3,
        "metric": "map",
        "seed": 0,
        "edge": edge or {},
    }


DEFAULTS = {"lr": 0.01, "topics": 20, "rule": "a", "mode": "y", "view": ""}


def _write(tmp_path, runs):
    (tmp_path / "m_d.json").write_text(json.dumps({"method": "m", "runs": runs}))
    path = tmp_path / "hyper_defaults.toml"
    path.write_text(TOML)
    return path


def test_stale_runs_count_other_defaults_but_not_data_or_required_settings(
    it, tmp_path
):
    runs = [
        _run("lr", {0.01: [1, 1, 1]}, {**DEFAULTS, "topics": 40}),  # stale
        _run("topics", {20: [1, 1, 1]}, {**DEFAULTS, "view": "v2"}),  # data: fine
        _run("rule", {"a": [1, 1, 1]}, {**DEFAULTS, "mode": "x"}),  # required: fine
        _run("mode", {"y": [1, 1, 1]}, DEFAULTS, fixed={"rule": "b"}),  # stale
    ]
    path = _write(tmp_path, runs)
    table = it.read_table(path)
    stale = it.stale_runs(table, "m", tmp_path)
    assert sorted(r["grid"].popitem()[0] for _, _, r in stale) == ["lr", "mode"]


def test_one_standard_error_rules_keep_a_default_noise_would_move(it):
    # best 0.5 (folds 0.6, 0.4, 0.5: se 0.1 / sqrt(3) = 0.0577); 0.46 is within
    close = {10: [0.47, 0.45, 0.46], 20: [0.48, 0.47, 0.47], 40: [0.6, 0.4, 0.5]}
    run = _run("topics", close, {**DEFAULTS, "topics": 20})
    # a size: the smallest within one standard error
    assert it.choose_rule({"value": 20}, "topics", run) == "smallest_within_1se"
    assert it.read_default({"rule": "smallest_within_1se"}, "topics", run) == 10
    # any other setting: the default it was made at
    lr = _run("lr", {0.1: close[10], 0.01: close[20], 0.001: close[40]}, DEFAULTS)
    assert it.choose_rule({"value": 0.01}, "lr", lr) == "incumbent_within_1se"
    assert it.read_default({"rule": "incumbent_within_1se"}, "lr", lr) == 0.01
    # beaten by more than one standard error: the best, and no rule recorded
    far = _run("lr", {0.1: [0.9, 0.9, 0.91], 0.01: [0.5, 0.5, 0.5]}, DEFAULTS)
    assert it.choose_rule({"value": 0.01}, "lr", far) is None
    assert it.read_default({}, "lr", far) == 0.1


def test_a_joint_run_keeps_todays_combination_within_one_standard_error(it):
    results = [
        {"params": {"lr": lr, "mode": m}, "folds": f, "mean": sum(f) / 3}
        for lr, m, f in (
            (0.1, "x", [0.6, 0.4, 0.5]),  # the best, se 0.1 / sqrt(3) = 0.0577
            (0.01, "y", [0.47, 0.45, 0.46]),  # today's, 0.46: within
            (0.1, "y", [0.3, 0.3, 0.3]),
        )
    ]
    run = {
        "grid": {"lr": [0.01, 0.1], "mode": ["x", "y"]},
        "results": results,
        "best": results[0],
        "higher_is_better": True,
        "defaults_at_run": DEFAULTS,
    }
    for key in ("lr", "mode"):
        entry = {"value": DEFAULTS[key]}
        assert it.choose_rule(entry, key, run) == "incumbent_within_1se"
    assert it.read_default({"rule": "incumbent_within_1se"}, "lr", run) == 0.01
    assert it.read_default({"rule": "incumbent_within_1se"}, "mode", run) == "y"
    # today's combination far behind: the best, no rule
    results[1] = {**results[1], "folds": [0.2] * 3, "mean": 0.2}
    assert it.choose_rule({"value": 0.01}, "lr", run) is None


def test_the_grid_goes_one_step_past_an_edge_winner_inside_the_spec(it):
    run = _run("lr", {0.01: [1, 1, 1], 0.02: [0, 0, 0]}, DEFAULTS, edge={"lr": "low"})
    assert it.extend("twh", "lr", run) == [0.005, 0.01, 0.02]
    run = _run("topics", {20: [1] * 3, 40: [2] * 3}, DEFAULTS, edge={"topics": "high"})
    assert it.extend("twh", "topics", run) == [20, 40, 80]
    # weight decay 0 at the low end: nothing below it is valid
    run = _run(
        "weight_decay",
        {0.0: [1] * 3, 0.01: [0] * 3},
        DEFAULTS,
        edge={"weight_decay": "low"},
    )
    assert it.extend("twh", "weight_decay", run) is None


def test_a_pass_moves_a_default_and_reruns_what_it_made_stale(it, tmp_path):
    # the topics run was made at lr 0.1; today's lr is 0.01: stale
    runs = [
        _run("lr", {0.01: [0.5] * 3, 0.1: [0.4] * 3}, DEFAULTS),
        _run("topics", {20: [0.5] * 3, 40: [0.4] * 3}, {**DEFAULTS, "lr": 0.1}),
        _run("rule", {"a": [0.5] * 3, "b": [0.4] * 3}, {**DEFAULTS, "mode": "x"}),
        _run("mode", {"y": [0.5] * 3, "x": [0.4] * 3}, DEFAULTS),
    ]
    path = _write(tmp_path, runs)
    calls = []

    def rerun(owner, dataset, run, table):
        # a cross-validation at today's defaults in which 40 topics win clearly
        key = next(iter(run["grid"]))
        today = {k: e["value"] for k, e in table["m"].items()}
        calls.append((key, today[key]))
        scores = {20: [0.5] * 3, 40: [0.9] * 3} if key == "topics" else None
        record = json.loads((tmp_path / "m_d.json").read_text())
        keep = [r for r in record["runs"] if list(r["grid"]) != [key]]
        scores = scores or {
            v: [0.5 - 0.1 * i] * 3 for i, v in enumerate(run["grid"][key])
        }
        # defaults_cv.py holds what the key requires (--set), as the script asks
        held = dict(table["m"][key].get("requires", {}))
        new = _run(key, scores, today, fixed=held)
        record["runs"] = keep + [new]
        (tmp_path / "m_d.json").write_text(json.dumps(record))
        return True

    left = it.iterate("m", rerun, passes=3, path=path, records=tmp_path)
    assert left == []
    assert calls[0] == ("topics", 20)
    assert it.read_table(path)["m"]["topics"]["value"] == 40
    # the move made the other runs stale: they ran again at 40 topics
    assert {k for k, _ in calls[1:]} == {"lr", "rule", "mode"}
    text = path.read_text()
    assert 'topics = { value = 40, origin = "cv", record = "d" }' in text


def test_a_size_read_by_the_one_se_rule_is_not_followed_past_its_grid(it, tmp_path):
    # topics 40 wins at the high end by less than one standard error over 20: the
    # rule takes 20, and no run past 40 follows
    runs = [_run("topics", {20: [0.5] * 3, 40: [0.5] * 3}, {**DEFAULTS, "lr": 0.1})]
    path = _write(tmp_path, runs)
    calls = []

    def rerun(owner, dataset, run, table):
        calls.append(sorted(run["grid"]["topics"]))
        scores = {20: [0.50, 0.50, 0.50], 40: [0.60, 0.40, 0.52]}
        new = _run("topics", scores, {**DEFAULTS}, edge={"topics": "high"})
        record = {"method": "m", "runs": [new]}
        (tmp_path / "m_d.json").write_text(json.dumps(record))
        return True

    it.confirm("m", "d", runs[0], rerun, path=path, records=tmp_path)
    assert calls == [[20, 40]]
    entry = it.read_table(path)["m"]["topics"]
    assert entry["value"] == 20 and entry["rule"] == "smallest_within_1se"


def test_a_rerun_keeps_the_runs_protocol_and_the_required_settings(it, monkeypatch):
    """A re-run is the same cross-validation at today's defaults: a run made with
    10 % of the images labelled is re-run so (run with every image labelled, the
    semi-supervised settings tie and a re-run would decide them on another task)."""
    calls = []

    def fake_run(cmd):
        calls.append(cmd)
        return type("Done", (), {"returncode": 0})()

    monkeypatch.setattr(it.subprocess, "run", fake_run)
    table = {"m": {"rule": {"requires": {"mode": "x"}}, "view": {"origin": "data"}}}
    run = {
        **_run("rule", {"a": [1] * 3, "b": [0] * 3}, DEFAULTS, fixed={"view": "v"}),
        "labelled_fraction": 0.1,
    }
    assert it.run_defaults_cv("m", "d", run, table, None)
    cmd = calls[0][1:]
    for part in (
        ["--labelled-fraction", "0.1"],
        ["--set", "mode=x"],
        ["--set", "view=v"],
        ["--grid", "rule=a,b"],
    ):
        assert any(cmd[i : i + 2] == part for i in range(len(cmd))), part
    run["labelled_fraction"] = None
    it.run_defaults_cv("m", "d", run, table, None)
    assert "--labelled-fraction" not in calls[1]


def test_a_run_on_a_dataset_without_a_split_is_rerun_inside_every_seed(it, tmp_path):
    # 3sources has no split: one cross-validation per evaluation seed, each inside
    # that seed's training part; the default is what most seeds choose
    (tmp_path / "hyper_defaults.toml").write_text(
        '[m]\nbag = { value = "a", origin = "cv", record = "3sources" }\n'
    )
    path = tmp_path / "hyper_defaults.toml"
    record = tmp_path / "m_3sources.json"
    record.write_text(json.dumps({"method": "m", "dataset": "3sources", "runs": []}))
    seeds = []

    def rerun(owner, dataset, run, table):
        seeds.append(run["seed"])
        wins = "b" if run["seed"] in (1, 2, 4) else "a"
        scores = {v: [0.9 if v == wins else 0.5] * 3 for v in ("a", "b")}
        new = {**_run("bag", scores, {"bag": "a"}), "seed": run["seed"]}
        data = json.loads(record.read_text())
        data["runs"].append(new)
        record.write_text(json.dumps(data))
        return True

    start = {**_run("bag", {"a": [1] * 3, "b": [0] * 3}, {"bag": "a"})}
    assert it.confirm("m", "3sources", start, rerun, path=path, records=tmp_path)
    assert seeds == [0, 1, 2, 3, 4]
    assert it.read_table(path)["m"]["bag"]["value"] == "b"  # 3 seeds of 5
