"""scikit-learn's own estimator checks (``parametrize_with_checks``) over every
concrete estimator of :mod:`jaxannot.sklearn`, at the smallest settings each method
allows (the checks fit dozens of data shapes: one XLA compile each).

Every check runs for every estimator, in one test file per method family
(``test_checks_<family>.py``, each naming its ``FAMILY``): the files spread over the
suite's workers. :func:`pytest_generate_tests` gives a family file's
``test_sklearn_checks(estimator, check)`` every check of the family's estimators. An
expected failure names its reason (``EXPECTED_FAILURES``) and is a strict xfail: a
check that starts passing fails the run until its entry goes.
"""

import re

import pytest

import jax

pytest.importorskip("sklearn")

from sklearn.utils.estimator_checks import estimator_checks_generator

import jaxannot.sklearn as js
from jaxannot.runtime import programs

#: The smallest settings each estimator allows (defaults are sized for corel5k).
SMALL = {
    "ALESF": dict(eigenvectors=5, pca=4, batch_size=50),
    "ALESVM": dict(eigenvectors=5, pca=4, bins=3, batch_size=50, max_epochs=20),
    "BSVM": dict(max_epochs=20),
    "DWH": dict(topics=3, steps=3, sweeps=1, annotate_sweeps=2),
    "DWHSVM": dict(topics=16, steps=3, sweeps=1, annotate_sweeps=2, svm_epochs=10),
    "EMML": dict(vreps=20, max_iterations=5, exact_sweeps=20, capacity=4),
    "Empirical": {},
    "Ensemble": dict(bases="knn:k=3,empirical", folds=2, step=0.5),
    "FSNM": dict(iterations=5),
    "GSF": dict(eigenvectors=5, k=3, max_epochs=20),
    "IALESF": dict(eigenvectors=5, pca=4, batch_size=50),
    "IALESVM": dict(eigenvectors=5, pca=4, bins=3, batch_size=50, max_epochs=20),
    "Knn": dict(k=3),
    "LapLinkLDA": dict(topics=2, steps=5, neighbors=3, fold_in_inner=3, bins=2),
    "LapMixUnigram": dict(topics=2, iterations=2, warm_start_iterations=1, neighbors=3),
    "LinkLDA": dict(topics=2, iterations=2, inner=1, blocks=2, fold_in_inner=3, bins=2),
    "MBRM": dict(folds=2),
    "MixUnigram": dict(topics=2, iterations=2, bins=2),
    "MMH": dict(
        topics=3,
        iterations=1,
        inner_steps=1,
        pretrain_steps=1,
        svm_epochs=5,
        final_svm_epochs=5,
        annotate_sweeps=2,
        sweeps=1,
    ),
    "MmhRegression": dict(  # its 640 hidden units: fewer underfit the checks' R^2
        iterations=1,
        inner_steps=1,
        svm_epochs=5,
        final_svm_epochs=5,
        annotate_sweeps=2,
        sweeps=1,
    ),
    "PLSAWords": dict(topics=2, iterations=3, fold_in_iterations=3, bins=2),
    "SFSLS": dict(iterations=3, neighbors=3),
    "SFSS": dict(iterations=3, neighbors=3),
    "SVM": dict(svm_epochs=20),
    "TagProp": dict(neighbors=5, steps=5),
    "TWH": dict(topics=64, steps=3, sweeps=1, annotate_sweeps=2),
}

_TRANSDUCTIVE = (
    "transductive by design: the eigenfunctions are computed from the images "
    "scored together, so a row's scores depend on the batch (docs/ale.md)"
)


#: check name -> why, per estimator class name.
EXPECTED_FAILURES = {
    "ALESF": {"check_methods_subset_invariance": _TRANSDUCTIVE},
    "ALESVM": {"check_methods_subset_invariance": _TRANSDUCTIVE},
    "GSF": {
        "check_methods_subset_invariance": _TRANSDUCTIVE,
        "check_methods_sample_order_invariance": _TRANSDUCTIVE,
    },
}

#: scikit-learn's check data (random blobs, a few rows) has no topic structure: a
#: mixture fitted to it may collapse or leave a component empty, and saying so
#: (``EmptyComponentWarning`` and its ``CollapsedFitWarning``) is the right answer, not
#: a failure of the check.
STRUCTURELESS = pytest.mark.filterwarnings(
    "ignore::jaxannot.inference.vem.fit_warnings.EmptyComponentWarning"
)


def family_of(name: str) -> str:
    """The method family (``jaxannot.methods.<family>``) of the estimator ``name``."""
    method = getattr(js, name)()._registered()
    return method.fit.__module__.split(".")[2]


def estimator(name: str):
    """The estimator ``name`` at its ``SMALL`` settings."""
    return getattr(js, name)(**SMALL[name])


def _check_id(est, check) -> str:
    func = getattr(check, "func", check)
    keywords = ",".join(f"{k}={v}" for k, v in getattr(check, "keywords", {}).items())
    name = f"{func.__name__}({keywords})" if keywords else func.__name__
    return re.sub(r"\s", "", f"{est!r}-{name}")


def _checks(names):
    for name in names:
        for est in [estimator(name)] + (
            [js.Knn(k=3, weight="uniform")] if name == "Knn" else []
        ):
            expected = EXPECTED_FAILURES.get(name, {})
            for item in estimator_checks_generator(
                est, expected_failed_checks=expected, mark="xfail", xfail_strict=True
            ):
                marked = hasattr(item, "marks")  # a pytest.param: an expected failure
                values, marks = (item.values, item.marks) if marked else (item, ())
                yield pytest.param(
                    *values,
                    marks=(*marks, STRUCTURELESS),
                    id=_check_id(est, values[1]),
                )


def pytest_generate_tests(metafunc):
    """Parametrize a family file's ``(estimator, check)`` with its family's checks."""
    family = getattr(metafunc.module, "FAMILY", None)
    if family is None or "check" not in metafunc.fixturenames:
        return
    names = [n for n in SMALL if family_of(n) == family]
    metafunc.parametrize("estimator, check", list(_checks(names)))


#: The program budget (``jaxannot.runtime.programs``) while a family file runs. The
#: checks fit a few hundred programs a file (one per data shape and program:
#: ``test_checks_ale.py`` 389); past the default budget (256) a fit released them
#: all and the next checks compiled them again (ale's file: 1,145 compiles, 5
#: releases, against 389 and none). The release after every file
#: (``tests/conftest.py``) still frees them: 1,024 programs hold at most some
#: 21,500 memory mappings, a third of Linux's default limit.
CHECK_BUDGET = 1024


#: The least compile time (seconds) of a program the family files store in the run's
#: compilation cache (``tests/conftest.py`` stores every program): none. Their
#: programs are compiled for the checks' own data shapes, which no other file fits,
#: and each file keeps its programs until it ends (:data:`CHECK_BUDGET`), so what
#: they stored was read by no one, and storing it (serializing every program, some
#: 600-800 a file) cost 3-5 % of their time: pytest's seconds for each file alone,
#: storing every program against none, the two runs side by side on two cores
#: (twice each): ``test_checks_topic_models.py`` 71.6 / 68.5 and 66.8 / 63.7,
#: ``test_checks_harmoniums.py`` 50.9 / 49.3 and 50.5 / 48.2, ``test_checks_ale.py``
#: 17.4 / 17.0. They still read the cache.
NO_CACHE_WRITES = float("inf")


@pytest.fixture(autouse=True, scope="module")
def _check_budget(request):
    """:data:`CHECK_BUDGET` and :data:`NO_CACHE_WRITES` for the module when it is a
    family file."""
    if getattr(request.module, "FAMILY", None) is None:
        yield
        return
    option = "jax_persistent_cache_min_compile_time_secs"
    previous = programs.set_program_budget(CHECK_BUDGET)
    least = getattr(jax.config, option)
    jax.config.update(option, NO_CACHE_WRITES)
    yield
    jax.config.update(option, least)
    programs.set_program_budget(previous)


@pytest.fixture(scope="session")
def small_settings() -> dict:
    """``SMALL``: the settings each estimator is checked at."""
    return SMALL


@pytest.fixture(scope="session")
def expected_failures() -> dict:
    """``EXPECTED_FAILURES``: the checks each estimator is expected to fail, and why."""
    return EXPECTED_FAILURES


@pytest.fixture(scope="session", name="family_of")
def family_of_fixture():
    """:func:`family_of`."""
    return family_of
