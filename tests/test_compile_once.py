"""Compile once across the registry: a second fit of every registered method on a
corpus of the same shapes, with another key, triggers no XLA backend compile (the
kernels are built once per setting and nothing closes over per-call arrays)."""

import pytest

from jaxannot.annotators import available_methods
from jaxannot.data import make_task
from jaxannot.data.synthetic import make_synthetic
from jaxannot.evaluation import evaluate

METHODS = sorted(available_methods())


@pytest.fixture(scope="module")
def task():
    corpus = make_synthetic(seed=0, num_images=120, num_classes=True)
    return make_task(corpus, None, protocol="inductive", seed=0, test_fraction=0.25)


@pytest.mark.parametrize("name", METHODS)
def test_a_second_fit_with_another_key_compiles_nothing(name, task, count_compiles):
    first = evaluate(name, task, seed=0)
    with count_compiles() as counter:
        second = evaluate(name, task, seed=1)
    assert counter.count == 0, f"{name}: {counter.count} backend compiles"
    assert second.metrics.keys() == first.metrics.keys()
