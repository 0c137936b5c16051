"""The support check a fit runs on its parameters before it returns them."""

import numpy as np
import pytest

from jaxannot.inference.support import SupportError, check_support, first_failing


def test_in_support_passes():
    check_support("site", np.array([[0.2, 0.8], [0.5, 0.5]]), iteration=4)
    check_support("site", np.array([0.05, 3.0]), iteration=1, lower=0.05)
    check_support("site", np.array([-1.0]), iteration=1, lower=None)


@pytest.mark.parametrize(
    ("value", "kwargs", "match"),
    [
        (np.array([0.1, np.nan]), {}, "site left its support at iteration 7: .*NaN"),
        (np.array([0.1, np.inf]), {}, "NaN or infinite"),
        (np.array([0.06, 0.027]), {"lower": 0.05}, "minimum 0.027 is below 0.05"),
        (np.array([[0.5, 0.6]]), {"simplex_axis": -1}, "0.1 away from 1"),
    ],
)
def test_out_of_support_raises_naming_site_and_iteration(value, kwargs, match):
    with pytest.raises(SupportError, match=match):
        check_support("site", value, iteration=7, **kwargs)
    assert issubclass(SupportError, FloatingPointError)


def test_first_failing_finds_the_first_bad_entry():
    assert first_failing([0.0, 1.0, 2.0]) is None
    assert first_failing([0.0, -1e-9, -2.0]) == 1
    assert first_failing([0.0, np.nan, 1.0]) == 1
    assert first_failing([0.2, 0.04], lower=0.05) == 1
