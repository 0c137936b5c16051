"""Every concrete estimator of :mod:`jaxannot.sklearn` goes through scikit-learn's
estimator checks: one ``test_checks_<family>.py`` per method family, parametrized by
tests/sklearn/conftest.py."""

import pathlib

import pytest

pytest.importorskip("sklearn")

import jaxannot.sklearn as js

HERE = pathlib.Path(__file__).parent


def test_every_concrete_estimator_is_checked(
    small_settings, expected_failures, family_of
):
    assert set(small_settings) == set(js.__all__)
    assert set(expected_failures) <= set(small_settings)
    for name, reasons in expected_failures.items():
        assert all(len(why) > 20 for why in reasons.values()), name
    families = {family_of(name) for name in small_settings}
    files = {p.stem.removeprefix("test_checks_") for p in HERE.glob("test_checks_*.py")}
    assert families == files
    for family in families:
        text = (HERE / f"test_checks_{family}.py").read_text()
        assert f'FAMILY = "{family}"' in text, family
