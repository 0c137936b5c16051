"""The figures typed in README.md and docs/*.md agree with their JSON records
(``tools/prose_figures.py``): a figure marked ``<!-- fig: FILE:PATH -->`` is
checked at the decimals it shows."""

import json
import pathlib
import shutil

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

#: the fewest markers each page may carry: coverage cannot shrink unnoticed (raise a
#: floor when you mark more figures; lower one only with the figures' removal)
FLOORS = {
    "README.md": 31,
    "docs/ale.md": 379,
    "docs/benchmarks.md": 4,
    "docs/cli.md": 6,
    "docs/emml.md": 314,
    "docs/graphs.md": 44,
    "docs/harmoniums.md": 442,
    "docs/modelling.md": 150,
    "docs/numpyro_to_vem.md": 83,
    "docs/results.md": 392,
    "docs/sfsls.md": 355,
    "docs/tagprop.md": 81,
    "docs/topic_models.md": 251,
}


@pytest.fixture(scope="module")
def prose(benchmark_script):
    return benchmark_script("tools.prose_figures")


def test_every_marked_figure_agrees_with_its_record(prose):
    problems = prose.check_all()
    assert not problems, "\n".join(problems)


def test_no_page_loses_its_markers(prose):
    counts = prose.counts()
    for name, floor in FLOORS.items():
        assert counts[name] >= floor, f"{name}: {counts[name]} markers < {floor}"


def _copy_record(tmp_path, name):
    results = tmp_path / "results"
    results.mkdir()
    shutil.copy(ROOT / "benchmarks" / "results" / name, results / name)
    return results


def test_a_changed_record_under_a_sentence_is_found(prose, tmp_path):
    """The planted fault: the record behind a README figure is doctored."""
    text = (ROOT / "README.md").read_text()
    figure = next(  # a plain reference: no expression, filter or wildcard
        f
        for f in prose.figures(text, "README.md")
        if not any(ch in f.expr for ch in '{=*"')
    )
    name, _, path = figure.expr.partition(":")
    results = _copy_record(tmp_path, name)
    line = f"the figure {figure.shown}<!-- fig: {figure.expr} --> in a sentence"
    assert prose.check(line, "planted.md", results) == []
    record = json.loads((results / name).read_text())
    node, steps = record, [key for key, _ in prose.split_path(path)]
    for step in steps[:-1]:
        node = node[int(step)] if isinstance(node, list) else node[step]
    last = int(steps[-1]) if isinstance(node, list) else steps[-1]
    node[last] = node[last] * 1.1 + 1  # a figure that moved
    (results / name).write_text(json.dumps(record))
    prose._read.cache_clear()
    problems = prose.check(line, "planted.md", results)
    assert len(problems) == 1 and f"{figure.shown} but {figure.expr}" in problems[0]
    prose._read.cache_clear()


def test_a_changed_figure_in_the_prose_is_found(prose):
    """The planted fault the other way: the typed figure is edited."""
    text = (ROOT / "README.md").read_text()
    assert prose.check(text, "README.md") == []
    match = prose.MARKER.search(text)
    start = text.rfind("\n", 0, match.start()) + 1
    number = prose.NUMBER.search(text[start : match.start()])
    at = start + number.end("number") - 1  # the figure's last digit
    doctored = text[:at] + str((int(text[at]) + 5) % 10) + text[at + 1 :]
    problems = prose.check(doctored, "README.md")
    assert len(problems) == 1 and problems[0].startswith("README.md:")


def _assert_checks(prose, results, ok=(), bad=()):
    """Every line of ``ok`` agrees with ``results``; each of ``bad`` is one problem."""
    for line in ok:
        assert prose.check(line, "t.md", results) == [], line
    for line in bad:
        assert len(prose.check(line, "t.md", results)) == 1, line


def test_the_shown_decimals_decide(prose, tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    (results / "r.json").write_text(json.dumps({"a": {"x.y": [11.65, 0.4286]}}))
    ok = [
        'a 11.65×<!-- fig: r.json:a."x.y".0 -->',
        'a 11.7×<!-- fig: r.json:a."x.y".0 -->',  # a tie rounds either way
        'a 11.6×<!-- fig: r.json:a."x.y".0 -->',
        '43 %<!-- fig: 100 * {r.json:a."x.y".-1} -->',
        '**0.429**<!-- fig: r.json:a."x.y".1 -->',
        '27.2<!-- fig: {r.json:a."x.y".0} / {r.json:a."x.y".1} -->',
        '2<!-- fig: len({r.json:a."x.y"}) -->',
    ]
    bad = [
        'a 11.8×<!-- fig: r.json:a."x.y".0 -->',
        'a 11.64×<!-- fig: r.json:a."x.y".0 -->',
        'a 0.42<!-- fig: r.json:a."x.y".1 -->',
        'a 0.4285<!-- fig: r.json:a."x.y".1 -->',
    ]
    _assert_checks(prose, results, ok, bad)


def test_wildcards_filters_and_statistics(prose, tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    runs = [
        {"dataset": "a", "seed": 0, "test": 0.5, "rows": [{"k": 1, "v": 2.0}]},
        {"dataset": "a", "seed": 1, "test": 0.7, "rows": [{"k": 1, "v": 3.0}]},
        {"dataset": "b", "seed": 0, "test": 0.1, "rows": [{"k": 2, "v": 9.0}]},
    ]
    (results / "r.json").write_text(json.dumps({"runs": runs}))
    ok = [
        "0.6<!-- fig: mean({r.json:runs.dataset=a.test}) -->",
        "0.141<!-- fig: sd({r.json:runs.dataset=a.test}) -->",
        "0.100<!-- fig: psd({r.json:runs.dataset=a.test}) -->",
        "3<!-- fig: len({r.json:runs.*.seed}) -->",
        "3.0<!-- fig: max({r.json:runs.dataset=a.rows.k=1.v}) -->",
        "9<!-- fig: max({r.json:runs.*.rows.k=2.v}) -->",
        "0.1<!-- fig: min({r.json:runs.dataset=a.test}, {r.json:runs.seed=0.test}) -->",
        "9<!-- fig: max({r.json:runs.dataset=a.test}, 9, {r.json:runs.*.seed}) -->",
        "1.4<!-- fig: sum({r.json:runs.dataset=b.test}, {r.json:runs.*.test}) -->",
        "0.1<!-- fig: r.json:runs.dataset=b.test -->",  # one element: that element
        "0.8<!-- fig: {r.json:runs.dataset=b.test} + {r.json:runs.seed=1.test} -->",
        "1<!-- fig: len({r.json:runs.dataset=b.test}) -->",
    ]
    _assert_checks(prose, results, ok)
    assert (
        "no element with dataset=c"
        in prose.check(
            "1<!-- fig: max({r.json:runs.dataset=c.test}) -->", "t.md", results
        )[0]
    )


@pytest.mark.parametrize(
    "marker, message",
    [
        ("1.0<!-- fig: nowhere.json:a -->", "no record nowhere.json"),
        ("1.0<!-- fig: r.json:b -->", "no key 'b'"),
        ('1.0<!-- fig: r.json:a."x.y".5 -->', "no index 5"),
        ("1.0<!-- fig: r.json:a -->", "not a number"),
        ("1.0<!-- fig: ../r.json:a -->", "not FILE.json:PATH"),
        ("1.0<!-- fig: notebooks/results/../../README.json:a -->", "not under"),
        ("1.0<!-- fig: __import__('os') -->", "not FILE.json:PATH"),
        ('1.0<!-- fig: {r.json:a."x.y".0}.real -->', "not in the grammar"),
        ('no figure here<!-- fig: r.json:a."x.y".0 -->', "no figure"),
    ],
)
def test_an_unknown_file_key_or_form_is_an_error(prose, tmp_path, marker, message):
    results = tmp_path / "results"
    results.mkdir()
    (results / "r.json").write_text(json.dumps({"a": {"x.y": [1.0]}}))
    problems = prose.check(marker, "t.md", results)
    assert len(problems) == 1 and message in problems[0], problems


def test_powers_of_ten_as_the_docs_write_them(prose, tmp_path):
    """A p-value written ``2.5e-4``, ``2.5 × 10⁻⁴`` or ``2.5·10⁻⁴`` is checked at the
    decimals of its mantissa."""
    results = tmp_path / "results"
    results.mkdir()
    (results / "r.json").write_text(json.dumps({"p": 4.15e-05, "q": 2.492e-4}))
    ok = [
        "p = 4.2e-5<!-- fig: r.json:p -->",
        "p = 4.1e-5<!-- fig: r.json:p -->",  # a tie rounds either way
        "p = 4.15e-05<!-- fig: r.json:p -->",
        "p = 4.2 × 10⁻⁵<!-- fig: r.json:p -->",
        "p = 4.2·10⁻⁵<!-- fig: r.json:p -->",
        "p = 2.5e-4<!-- fig: r.json:q -->",
        "p = 2.49E-4<!-- fig: r.json:q -->",
        "p = 0.00025<!-- fig: r.json:q -->",
        "25<!-- fig: 1e5 * {r.json:q} -->",
    ]
    bad = [
        "p = 4.3e-5<!-- fig: r.json:p -->",
        "p = 4.2e-6<!-- fig: r.json:p -->",
        "p = 4.2 × 10⁻⁴<!-- fig: r.json:p -->",
        "p = 2.4e-4<!-- fig: r.json:q -->",
        "p = 2.48e-4<!-- fig: r.json:q -->",
    ]
    _assert_checks(prose, results, ok, bad)
    (figure,) = prose.figures("p = 1.2 × 10⁻⁵<!-- fig: r.json:p -->")
    assert figure.shown == "1.2 × 10⁻⁵" and figure.decimals == 1
    assert figure.number == pytest.approx(1.2e-5)


def test_a_filter_reaches_into_nested_objects(prose, tmp_path):
    """A mean over seeds of each seed's best: ``"hyper.mu"=10`` filters on a nested
    key (a number matches the same number; a value with a dot is quoted), and the
    per-seed maxima are written seed by seed."""
    results = tmp_path / "results"
    results.mkdir()
    cv = [
        {"hyper": {"mu": 10.0, "p": 0.5}, "cv_map": 0.70},
        {"hyper": {"mu": 10.0, "p": 0.5}, "cv_map": 0.73},
        {"hyper": {"mu": 1000.0, "p": 0.5}, "cv_map": 0.99},
    ]
    runs = [
        {"seed": 0, "cv": cv},
        {"seed": 1, "cv": [dict(c, cv_map=c["cv_map"] + 0.02) for c in cv]},
    ]
    (results / "r.json").write_text(json.dumps({"runs": runs}))
    one = 'max({{r.json:runs.seed={s}.cv."hyper.mu"=10."hyper.p"="0.5".cv_map}})'
    ok = [
        f"0.740<!-- fig: mean({one.format(s=0)}, {one.format(s=1)}) -->",
        '0.99<!-- fig: max({r.json:runs.seed=0.cv."hyper.mu"="1000.0".cv_map}) -->',
    ]
    _assert_checks(prose, results, ok)
    assert (
        "no element with hyper.mu=5"
        in prose.check(
            '1<!-- fig: max({r.json:runs.*.cv."hyper.mu"=5.cv_map}) -->',
            "t.md",
            results,
        )[0]
    )
