"""``tools/compare_runs.py``: two runs' figures compared row by row."""

import json

from tools import compare_runs


def _record(rows):
    return {"results": rows}


def test_rows_are_sorted_by_how_they_compare(tmp_path, capsys):
    before = _record(
        {
            "a": {"metrics": {"map": 0.123456, "f1": 0.5}},
            "b": {"metrics": {"map": 0.123456, "f1": 0.5}},
            "c": {"metrics": {"map": 0.1234, "f1": 0.5}},
            "d": {"error": ["failed"]},
            "e": {"metrics": {"map": 0.1}},
        }
    )
    after = _record(
        {
            "a": {"metrics": {"map": 0.123456, "f1": 0.5}},
            "b": {"metrics": {"map": 0.12345601, "f1": 0.5}},
            "c": {"metrics": {"map": 0.1236, "f1": 0.5}},
            "d": {"metrics": {"map": 0.2}},
        }
    )
    out = compare_runs.compare(before, after, decimals=4)
    assert out["identical"] == ["a"]
    assert out["same_to_decimals"] == ["b"]
    assert out["differ"] == {"c": {"map": [0.1234, 0.1236]}}
    assert out["missing"] == ["d", "e"]
    # through the command line, written to a file
    paths = []
    for name, record in (("before.json", before), ("after.json", after)):
        paths.append(tmp_path / name)
        paths[-1].write_text(json.dumps(record))
    target = tmp_path / "outcome.json"
    main_out = compare_runs.main([*map(str, paths), "--json", str(target)])
    assert json.loads(target.read_text()) == main_out
    assert main_out["decimals"] == 4 and main_out["before"] == "before.json"
    assert "1 rows identical, 1 the same to 4 decimals, 1 differ" in (
        capsys.readouterr().out
    )
