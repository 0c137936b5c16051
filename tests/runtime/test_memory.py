"""``jaxannot.runtime.memory``: refusing a square array that cannot fit."""

import pytest

from jaxannot.runtime import memory


def test_device_memory_is_positive():
    assert memory.device_memory_bytes() > 0


@pytest.mark.parametrize("count", [1, 7, 30, 1000])
def test_the_largest_count_that_fits_is_accepted_and_one_more_refused(
    count, monkeypatch
):
    per_pair = 16
    # half of this is exactly count² pairs, plus change that buys no larger square
    monkeypatch.setattr(
        memory, "device_memory_bytes", lambda: 2 * per_pair * count**2 + 30
    )
    memory.check_square_fits(count, per_pair, "vreps")
    with pytest.raises(ValueError) as err:
        memory.check_square_fits(count + 1, per_pair, "vreps", " VReps")
    assert f"vreps = {count + 1} needs" in str(err.value)
    assert str(err.value).endswith(f"use at most {count} VReps")
