"""Objectives that never move the wrong way, for every method that declares one.

A method declares the objective traces its fit records in ``Fitted.info`` that its
algorithm keeps monotone (:attr:`jaxannot.annotators.Method.monotone`: EM and VB
bounds never decrease, Algorithm 1's losses and the EMML dual never increase). Each
declaration is checked here on a tiny corpus, at the defaults and at the other
settings that change the algorithm (``OTHER_SETTINGS``), every declaration read off
the registry (``CASES``); a solver whose method is monotone only at some settings is
checked at those (``link-lda`` by batch VB: its default CVB0 trace, a leave-one-out
predictive probability, is not a bound).
"""

import numpy as np
import pytest

import jax

from jaxannot.annotators import Fitted, Method, available_methods, parse_hyper
from jaxannot.data import make_task
from jaxannot.data.synthetic import make_synthetic

#: its programs run more than they compile (every method's fit on a corpus): LLVM -O1
pytestmark = pytest.mark.xla_optimized

#: Settings besides the defaults that change a declared method's algorithm, each
#: checked too (a declaration holds at every setting).
OTHER_SETTINGS = {
    "lap-mix-unigram": [
        {"lam": 50.0},  # LapVar1 + M-step, a strong penalty
        {"algorithm": "lapvar2"},
    ],
    "sfsls": [{"p": 0.1}, {"p": 0.5}],
    "emml": [
        {"solver": "working_set", "vreps": 20, "capacity": 32, "violators_per_vrep": 2}
    ],
}


def cases(methods: dict) -> list[tuple[str, dict]]:
    """(method, hyper-parameters) to fit: every method of ``methods`` that declares a
    monotone objective at its defaults, then at its :data:`OTHER_SETTINGS`."""
    return [
        (name, hyper)
        for name, method in sorted(methods.items())
        if method.monotone
        for hyper in [{}, *OTHER_SETTINGS.get(name, [])]
    ]


#: (method, hyper-parameters) fitted for each declared method; at least its defaults.
CASES = cases(available_methods())

#: Traces monotone at some settings only: (method, hyper, info key, direction).
SOLVER_CASES = [("link-lda", {"inference": "vb", "iterations": 60}, "objective", 1)]

#: Float32 round-off allowed per step, relative to the objective's size.
RTOL = 1e-5


@pytest.fixture(scope="module")
def corpus():
    corpus = make_synthetic(seed=0, num_images=120, num_classes=True)
    return make_task(corpus, None, protocol="inductive", seed=0).train


def _fit(name, hyper, corpus):
    method = available_methods()[name]
    fitted = method.fit(corpus, rng_key=jax.random.key(0), **parse_hyper(method, hyper))
    return method, fitted


def assert_monotone(trace, sign: int, what: str) -> None:
    """``sign * trace`` never decreases by more than ``RTOL`` of its size, and the
    trace has steps to check."""
    trace = np.asarray(trace, np.float64)
    assert trace.size >= 3, f"{what}: a trace of {trace.size} values checks nothing"
    steps = sign * np.diff(trace)
    slack = RTOL * np.maximum(np.abs(trace[1:]), np.abs(trace[:-1]))
    worst = int(np.argmin(steps + slack))
    assert np.all(steps >= -slack), (
        f"{what} moves the wrong way at step {worst}: {trace[worst]} -> "
        f"{trace[worst + 1]}"
    )


def test_every_declaration_is_checked():
    methods = available_methods()
    declared = {name for name, m in methods.items() if m.monotone}
    assert len(declared) >= 7, declared
    assert declared == {name for name, _ in CASES}
    assert set(OTHER_SETTINGS) <= declared, set(OTHER_SETTINGS) - declared
    for name in declared:
        assert set(methods[name].monotone.values()) <= {"increases", "decreases"}


def test_a_new_declaration_gets_its_case():
    def fit(corpus, *, rng_key):
        return Fitted("toy", {})

    toy = Method("toy", fit, monotone={"objective": "increases"})
    plain = Method("plain", fit)
    assert cases({"toy": toy, "plain": plain}) == [("toy", {})]
    assert cases({"sfsls": toy})[1:] == [("sfsls", h) for h in OTHER_SETTINGS["sfsls"]]


@pytest.mark.parametrize(("name", "hyper"), CASES, ids=lambda c: str(c))
def test_declared_objectives_are_monotone(name, hyper, corpus):
    method, fitted = _fit(name, hyper, corpus)
    for key, direction in method.monotone.items():
        sign = 1 if direction == "increases" else -1
        assert_monotone(fitted.info[key], sign, f"{name} {hyper} info[{key!r}]")


@pytest.mark.parametrize(("name", "hyper", "key", "sign"), SOLVER_CASES)
def test_solver_objectives_are_monotone(name, hyper, key, sign, corpus):
    _, fitted = _fit(name, hyper, corpus)
    assert_monotone(fitted.info[key], sign, f"{name} {hyper} info[{key!r}]")


def test_the_check_fails_on_a_wrong_step():
    assert_monotone([1.0, 2.0, 2.0, 3.0], 1, "rising")
    assert_monotone([3.0, 2.0, 2.0 + 1e-6, 1.0], -1, "falling, within round-off")
    with pytest.raises(AssertionError, match="step 1"):
        assert_monotone([1.0, 2.0, 1.9, 3.0], 1, "dips")
    with pytest.raises(AssertionError, match="checks nothing"):
        assert_monotone([1.0, 2.0], 1, "short")
