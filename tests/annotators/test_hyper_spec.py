"""Every hyper-parameter of every registered method has a typed spec, its default
satisfies it, and ``parse_hyper`` refuses values outside it with the valid range."""

import re

import numpy as np
import pytest

from jaxannot.annotators import available_methods, get_method, parse_hyper
from jaxannot.annotators.hyper_spec import SHARED, SPECIFIC, HyperSpec, spec_for
from jaxannot.annotators.hyper_tables import load_tables

METHODS = available_methods()
PAIRS = [(name, key) for name, m in METHODS.items() for key in m.hyper]


def test_every_hyper_parameter_has_a_spec():
    missing = [f"{name}.{key}" for name, key in PAIRS if spec_for(name, key) is None]
    assert not missing, f"hyper-parameters without a HyperSpec: {missing}"


def test_every_default_satisfies_its_spec():
    bad = []
    for name, key in PAIRS:
        spec = spec_for(name, key)
        default = METHODS[name].hyper[key]
        if spec is not None and spec.problem(default) is not None:
            bad.append(f"{name}.{key}={default!r} ({spec.valid()})")
    assert not bad, f"defaults outside their own spec: {bad}"
    for name, m in METHODS.items():
        assert parse_hyper(m, {}) == dict(m.hyper), name


def test_no_spec_describes_a_hyper_parameter_that_does_not_exist():
    stale = [
        f"{name}.{key}"
        for name, key in SPECIFIC
        if name not in METHODS or key not in METHODS[name].hyper
    ]
    assert not stale, f"specs of (method, name) pairs no method has: {stale}"
    used = {key for _, key in PAIRS}
    assert set(SHARED) <= used, set(SHARED) - used


def test_specs_are_typed_one_liners_matching_their_defaults():
    for name, key in PAIRS:
        spec = spec_for(name, key)
        default = METHODS[name].hyper[key]
        assert spec.help and "\n" not in spec.help and len(spec.help) < 200
        # the default's type decides how --set parses, so the two must agree
        assert type(default) is spec.type, (name, key, type(default), spec.type)


def _invalid_value(spec: HyperSpec):
    """A value just outside the spec: out of its range or choices, else of a wrong
    type (a mapping's values reach the check as they are)."""
    if spec.choices is not None:
        return "not-a-choice"
    if spec.type in (bool, str):
        return 1
    if spec.low is not None:
        step = 1 if spec.type is int else 1e-3
        return spec.type(spec.low) if not spec.low_inclusive else spec.low - step
    if spec.high is not None:
        step = 1 if spec.type is int else 1e-3
        return spec.type(spec.high) if not spec.high_inclusive else spec.high + step
    return "not-a-number"


@pytest.mark.parametrize(("name", "key"), PAIRS, ids=[f"{n}.{k}" for n, k in PAIRS])
def test_a_value_outside_the_spec_is_refused_with_the_valid_range(name, key):
    spec = spec_for(name, key)
    value = _invalid_value(spec)
    with pytest.raises(ValueError) as err:
        parse_hyper(METHODS[name], {key: value})
    message = str(err.value)
    assert f"method {name!r}" in message
    assert f"{key}={value!r}" in message
    assert spec.valid() in message


def test_knn_k_zero_names_method_key_value_and_range():
    with pytest.raises(ValueError, match=r"'knn'.*k=0.*valid: int in \[1, 1000000\]"):
        parse_hyper(get_method("knn"), ["k=0"])


@pytest.mark.parametrize(
    ("method", "assignment", "needle"),
    [
        ("sfsls", "p=0", r"p=0\.0 .*float in \(0, 1\]"),
        ("sfsls", "p=1.5", r"float in \(0, 1\]"),
        ("iale-svm", "clip=0.5", r"clip=0\.5 .*float in \[0, 0\.5\)"),
        ("iale-svm", "bins=2", r"int in \[3, 1000000\]"),
        ("mix-unigram", "bins=1", r"int in \[2, 1000000\]"),
        ("mix-unigram", f"topics={10**12}", r"int in \[1, 1000000\]"),
        ("twh", f"steps={10**12}", r"steps=1000000000000 .*int in \[0, 1000000\]"),
        ("lap-mix-unigram", "gamma=0", r"float in \(0, 1\]"),
        ("link-lda", "alpha=0", r"float > 0"),
        ("mix-unigram", "beta_concentration=1", r"float > 1"),
        ("mbrm", "folds=1", r"int in \[2, 1000000\]"),
        ("fsnm", "selected=-0.1", r"float in \(0, 1\]"),
        ("emml", "gamma=-1", r"float >= 0"),
        ("mmh", "c1=0", r"float > 0"),
        ("bsvm", "c=nan", r"not finite"),
    ],
)
def test_out_of_range_values_are_refused(method, assignment, needle):
    with pytest.raises(ValueError, match=needle):
        parse_hyper(get_method(method), [assignment])


@pytest.mark.parametrize(
    ("method", "assignment", "choices"),
    [
        ("knn", "metric=manhattan", "one of cosine, euclidean"),
        ("bsvm", "loss=log", "one of squared_hinge, hinge"),
        ("mmh", "svm_step=p2", "one of p1, standardized"),
        ("mmh", "words_wing=maybe", "one of auto, yes, no"),
        ("emml", "solver=", "one of exact, working_set, none"),
        (
            "tagprop",
            "distances=cosine,manhattan",
            "a comma-separated list of cosine, sqeuclidean, jaccard, idf",
        ),
    ],
)
def test_a_string_outside_its_choices_is_refused_listing_them(
    method, assignment, choices
):
    with pytest.raises(ValueError) as err:
        parse_hyper(get_method(method), [assignment])
    message = str(err.value)
    key, value = assignment.split("=", 1)
    assert f"method {method!r}: hyper-parameter {key}={value!r}" in message
    assert message.endswith(f"valid: {choices}")


def test_valid_values_pass_and_keep_their_parsed_types():
    assert parse_hyper(get_method("sfsls"), ["p=1"])["p"] == 1.0  # inclusive bound
    assert parse_hyper(get_method("emml"), ["gamma=0"])["gamma"] == 0.0  # 0 = auto
    hyper = parse_hyper(get_method("lap-mix-unigram"), ["warm_start=0", "lam=0"])
    assert (hyper["warm_start"], hyper["lam"]) == (0, 0.0)
    dist = "idf, cosine"
    assert (
        parse_hyper(get_method("tagprop"), [f"distances={dist}"])["distances"] == dist
    )
    # mappings (tuning grids, scikit-learn parameters): ints and numpy floats for floats
    assert parse_hyper(get_method("bsvm"), {"c": 2})["c"] == 2
    assert parse_hyper(get_method("bsvm"), {"c": np.float32(0.5)})["c"] == 0.5
    assert parse_hyper(get_method("knn"), {"k": np.int64(3)})["k"] == 3


def test_wrong_types_in_a_mapping_are_refused():
    with pytest.raises(ValueError, match=r"balance=True is invalid \(not a str\)"):
        parse_hyper(get_method("tagprop"), {"balance": True})
    with pytest.raises(ValueError, match=r"k=2\.5 is invalid \(not an int\)"):
        parse_hyper(get_method("knn"), {"k": 2.5})
    with pytest.raises(ValueError, match=r"k=True is invalid \(not an int\)"):
        parse_hyper(get_method("knn"), {"k": True})
    with pytest.raises(ValueError, match=r"not a bool"):
        parse_hyper(get_method("sfsls"), {"use_unlabelled": 1})


def test_method_specific_specs_override_the_shared_ones():
    assert spec_for("mix-unigram", "bins").low == 2  # shared: quantile bins
    assert spec_for("ale-sf", "bins").low == 3  # ALE's histogram bins B
    assert "primary view" in spec_for("emml", "view").help
    assert "'all'" in spec_for("knn", "view").help
    assert spec_for("link-lda", "alpha") != spec_for("sfsls", "alpha")
    assert spec_for("no-such-method", "no-such-key") is None


def test_hyper_spec_refuses_malformed_specs():
    with pytest.raises(ValueError, match="one non-empty line"):
        HyperSpec("two\nlines", int)
    with pytest.raises(ValueError, match="choices"):
        HyperSpec("an int with choices", int, choices=("a",))
    with pytest.raises(ValueError, match="range"):
        HyperSpec("a str with a range", str, low=0)
    assert re.fullmatch(r"float in \(0, 1\]", spec_for("sfsls", "p").valid())


def test_an_unregistered_method_is_checked_only_by_the_shared_names():
    from jaxannot.annotators import Method

    m = Method("custom", fit=lambda c, **k: None, hyper={"bins": 8, "lam": 1.0})
    assert parse_hyper(m, ["lam=-5"])["lam"] == -5.0  # no spec: not checked
    with pytest.raises(ValueError, match=r"int in \[2, 1000000\]"):
        parse_hyper(m, ["bins=1"])


# ------------------------------------------------------------ the TOML spec tables
def test_spec_table_round_trips_ranges_and_choices():
    shared, specific = load_tables(
        """
[shared.bins]
help = "bins"
type = "int"
ge = 2
lt = 100

[[method_group]]
methods = ["a", "b"]

[method_group.params.gamma]
help = "rate"
type = "float"
gt = 0.0
le = 1.0

[method_group.params.kind]
help = "which"
type = "str"
choices = ["x", "y"]
comma_list = true
"""
    )
    assert shared["bins"] == HyperSpec(
        "bins", int, low=2, high=100, high_inclusive=False
    )
    assert shared["bins"].valid() == "int in [2, 100)"
    gamma = specific["a", "gamma"]
    assert specific["b", "gamma"] is gamma
    assert gamma.valid() == "float in (0, 1]"
    assert gamma.problem(0.0) == "out of range" and gamma.problem(1.0) is None
    assert specific["a", "kind"].problem("x,y") is None
    assert specific["a", "kind"].problem("x,z") == "'z' is not a valid choice"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[shared.k]\nhelp = "k"\ntype = "complex"', r"\[shared\.k\].*needs `help`"),
        ('[shared.k]\nhelp = "k"\ntype = "int"\nstep = 2', r"got \['help', 'step'"),
        ('[shared.k]\nhelp = "k"\ntype = "int"\nge = 1\ngt = 0', "two lower"),
        (
            '[shared.k]\nhelp = "k"\ntype = "int"\nge = 1',
            r"an int needs an upper bound",
        ),
        (
            '[shared.k]\nhelp = "k"\ntype = "int"\nle = 1e12',
            r"at most 2147483647.*got 1000000000000",
        ),
        ('[shared.k]\nhelp = "k"\ntype = "str"\nge = 1', "only int and float"),
        (
            '[[method_group]]\nmethods = ["m", "m"]\n'
            '[method_group.params.k]\nhelp = "k"\ntype = "int"\nle = 9',
            r"\('m', 'k'\) is described twice",
        ),
    ],
)
def test_malformed_spec_table_names_the_file_and_entry(text, message):
    with pytest.raises(ValueError, match=message) as err:
        load_tables(text)
    assert "hyper_specs.toml" in str(err.value)


def test_every_int_has_an_upper_bound_that_jax_can_hold():
    """A count of 10^12 (topics, iterations, steps) went into jax and failed with
    an OverflowError traceback; every int spec now has a bound below 2^31."""
    for name, key in PAIRS:
        spec = spec_for(name, key)
        if spec.type is int:
            assert spec.high is not None and spec.high < 2**31, (name, key)
            assert METHODS[name].hyper[key] <= spec.high, (name, key)


# ------------------------------------ specs declared beside their defaults (issue 45)
def test_a_defaults_entry_carries_its_spec():
    from jaxannot.annotators.hyper_tables import load_declarations

    defaults, specs = load_declarations(
        '[m]\nk = { value = 3, origin = "solver", help = "k", type = "int", '
        "ge = 1, le = 9 }\n"
        'view = { value = "", origin = "data" }\n'
    )
    assert defaults["m"]["k"].value == 3 and defaults["m"]["k"].origin == "solver"
    assert specs == {("m", "k"): HyperSpec("k", int, low=1, high=9)}
    assert list(defaults["m"]) == ["k", "view"]  # view: a shared name, no spec here


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ('[m]\nk = { value = 3, origin = "solver", help = "k" }\n', "needs `help`"),
        (
            '[m]\nk = { value = 3, origin = "solver", help = "k", type = "int" }\n',
            "upper bound",
        ),
        (
            '[m]\nk = { value = 3, origin = "solver", help = "k", type = "int", '
            "ge = 1, gt = 0, le = 9 }\n",
            "two lower",
        ),
    ],
)
def test_a_malformed_inline_spec_names_the_file_and_entry(text, match):
    from jaxannot.annotators.hyper_tables import load_declarations

    with pytest.raises(ValueError, match=match) as err:
        load_declarations(text)
    assert "hyper_defaults.toml: [m] k" in str(err.value)


def test_a_pair_is_described_once():
    from jaxannot.annotators.hyper_tables import merged_specs

    spec = HyperSpec("k", int, low=1, high=9)
    assert merged_specs({("a", "k"): spec}, {("b", "k"): spec}) == {
        ("a", "k"): spec,
        ("b", "k"): spec,
    }
    with pytest.raises(ValueError, match=r"both describe \[\('a', 'k'\)\]"):
        merged_specs({("a", "k"): spec}, {("a", "k"): spec})


def test_a_method_group_is_shared_by_several_methods():
    # a spec of one method alone lives in that method's defaults entry
    import tomllib
    from importlib import resources

    text = (
        resources.files("jaxannot.annotators")
        .joinpath("hyper_specs.toml")
        .read_text("utf-8")
    )
    groups = tomllib.loads(text)["method_group"]
    assert groups and all(len(g["methods"]) >= 2 for g in groups), [
        g["methods"] for g in groups if len(g["methods"]) < 2
    ]
