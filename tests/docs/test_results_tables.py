"""The results tables of README.md and docs/results.md equal what their JSON records
give (``tools/results_tables.py``): no figure in them is typed by hand."""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tables(benchmark_script):
    return benchmark_script("tools.results_tables")


def test_every_marked_table_is_what_its_records_give(tables):
    for path in tables.DOCUMENTS:
        text = path.read_text()
        assert tables.MARKER.search(text), f"{path.name}: no generated table"
        assert tables.render(text) == text, (
            f"{path.name} is stale: python -m tools.results_tables"
        )


def test_docs_results_has_a_field_table_per_dataset_with_peers(tables):
    text = (ROOT / "docs" / "results.md").read_text()
    for dataset in tables.DATASETS:
        assert f"<!-- table:field_{dataset} -->" in text, dataset
        names = [name for name, _ in tables.field_rows(dataset)]
        assert any(n.startswith("peer:") for n in names), dataset
        assert any(not n.startswith("peer:") for n in names), dataset


def test_bold_marks_the_best_of_each_column_and_its_direction(tables, monkeypatch):
    rows = [
        ("a", {"lrap": 0.5, "ranking_loss": 0.2}),
        ("peer: b", {"lrap": 0.7, "ranking_loss": 0.1}),
        ("c", {"lrap": 0.6, "ranking_loss": 0.3}),
        ("d", {"lrap": 0.6}),
    ]
    monkeypatch.setattr(tables, "field_rows", lambda dataset: rows)
    monkeypatch.setattr(tables, "PUBLISHED", {})
    monkeypatch.setattr(tables, "absent_methods", lambda dataset: [])
    lines = tables.field_table("toy").splitlines()
    keys = [c[0] for c in tables.COLUMNS]
    lrap, loss = keys.index("lrap") + 1, keys.index("ranking_loss") + 1
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    assert [row[lrap] for row in cells] == ["0.500", "**0.700**", "0.600", "0.600"]
    assert [row[loss] for row in cells] == ["0.200", "**0.100**", "0.300", "–"]


def test_an_edited_figure_is_found(tables, tmp_path, monkeypatch):
    text = (ROOT / "docs" / "results.md").read_text()
    match = tables.MARKER.search(text)
    body = match.group("body")
    digit = next(i for i, ch in enumerate(body) if ch.isdigit())
    edited = body[:digit] + str((int(body[digit]) + 1) % 10) + body[digit + 1 :]
    doctored = text[: match.start("body")] + edited + text[match.end("body") :]
    assert tables.render(doctored) != doctored


def test_every_registered_method_has_a_row_or_a_reason(tables):
    from jaxannot.annotators import available_methods

    registered = set(available_methods())
    for dataset in tables.DATASETS:
        rows = {name for name, _ in tables.field_rows(dataset)}
        absent = dict(tables.absent_methods(dataset))
        assert rows & registered | set(absent) == registered, dataset
        assert not rows & set(absent), dataset
        # every absence has its reason, none is a missing record
        assert all(r and r != "no record" for r in absent.values()), absent
        table = tables.field_table(dataset)
        for name in absent:
            assert name in table.split("Registered, no row here:")[1], (dataset, name)


def _first_cells(text: str) -> list[str]:
    """The first cell of each row of the markdown table that ``text`` starts with."""
    rows = [line for line in text.splitlines() if line.startswith("|")][2:]
    return [row.strip("|").split("|")[0].strip() for row in rows]


def test_the_method_table_has_a_row_per_registered_method(tables):
    from jaxannot.annotators import available_methods

    names = [cell.strip("`") for cell in _first_cells(tables.methods_table())]
    assert names == sorted(available_methods())


def test_the_composition_table_names_every_registered_method_once():
    from jaxannot.annotators import available_methods

    text = (ROOT / "docs" / "architecture.md").read_text()
    start = text.index("| method | model declaration | inference | readout |")
    cells = _first_cells(text[start:].split("\n\n")[0])
    named = [name for cell in cells for name in re.findall(r"`([^`]+)`", cell)]
    assert sorted(named) == sorted(available_methods())


def test_the_script_table_lists_every_benchmark_script(tables):
    scripts = sorted(
        str(p.relative_to(ROOT))
        for p in [*(ROOT / "benchmarks").glob("*/*.py"), *(ROOT / "tools").glob("*.py")]
        if "__main__" in p.read_text() and p.parent.name != "common"
    )
    assert len(scripts) > 30
    table = tables.scripts_table()
    assert [cell.strip("`") for cell in _first_cells(table)] == scripts
    summaries = [row.split("|")[2].strip() for row in table.splitlines()[2:]]
    assert all(s and s != "—" for s in summaries)  # every script says what it does
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    assert "<!-- table:scripts -->\n" + table + "\n<!-- /table:scripts -->" in text


def test_a_script_is_linked_to_the_pages_that_name_it(tables):
    rows = {
        row.split("|")[1].strip().strip("`"): row.split("|")[3]
        for row in tables.scripts_table().splitlines()[2:]
    }
    assert "[ale](ale.md)" in rows["benchmarks/peers/ale_vs_peers.py"]
    # ale_scale.py names scale.py in its own name only
    scale_pages = rows["benchmarks/scale/scale.py"]
    assert "[ale](ale.md)" not in scale_pages, scale_pages


def test_the_time_to_target_figure_draws_the_table_points(tables, tmp_path):
    # every record's point with a mean is drawn, the others (no seed reached) are not
    points = tables.time_to_target_points()
    assert {p["record"] for p in points} == {
        name for _, _, names in tables.TIME_TO_TARGET for name in names
    }
    drawn = tables.time_to_target_figure(tmp_path / "f.png")
    assert drawn == [p for p in points if p["mean"] is not None]
    assert (tmp_path / "f.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # a point's mean is the mean of its seeds' clock where the target was reached
    one = points[0]
    record = tables._load(one["record"])
    (target,) = [t for t in record["time_to_target"] if t["factor"] == 1.0]
    times = [s["jaxannot"][one["clock"]] for s in target["per_seed"] if s["jaxannot"]]
    assert one["system"] == "jaxannot" and one["reached"] == len(times)
    assert one["mean"] == sum(times) / len(times)
