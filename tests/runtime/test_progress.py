"""progress: counts are integers >= a minimum, never truncated; the step runner and
the infos it records."""

from typing import NamedTuple

import numpy as np
import pytest

import jax
import jax.numpy as jnp

from jaxannot.runtime.progress import (
    Keyed,
    check_count,
    compile_in_background,
    compile_lowered,
    run_step,
    run_steps,
    run_until_stopped,
)


@pytest.mark.parametrize("value", [3, np.int64(3), np.array(3), jnp.asarray(3)])
def test_integers_pass_as_int(value):
    count = check_count("num_steps", value)
    assert count == 3 and type(count) is int


@pytest.mark.parametrize(
    "value", [10.7, 10.0, np.float32(10.0), True, np.True_, "10", None, [10]]
)
def test_non_integers_are_a_type_error_naming_the_argument(value):
    with pytest.raises(TypeError) as err:
        check_count("num_draws", value)
    message = str(err.value)
    assert message.startswith("num_draws must be an integer >= 1, got ")
    assert f"({type(value).__name__}): pass an int" in message


def test_below_the_minimum_is_a_value_error():
    assert check_count("restarts", 2, minimum=2) == 2
    with pytest.raises(ValueError, match="restarts must be an integer >= 2, got 1"):
        check_count("restarts", 1, minimum=2)
    assert check_count("num_steps", 0, minimum=0) == 0


def _add_one(t, carry):
    return carry + 1, carry


def test_run_steps_refuses_zero_steps_with_or_without_a_bar():
    for progress_bar in (False, True):
        with pytest.raises(ValueError, match="num_steps must be an integer >= 1"):
            run_steps(_add_one, jnp.float32(0), 0, progress_bar=progress_bar)
    carry, losses = run_steps(_add_one, jnp.float32(0), 3, progress_bar=True)
    assert float(carry) == 3 and losses.tolist() == [0, 1, 2]


@pytest.mark.parametrize("num_steps", [1, 63, 64, 65, 150])
def test_runs_longer_than_the_buffer_record_every_step(num_steps):
    for progress_bar in (False, True):
        carry, losses = run_steps(
            _add_one, jnp.float32(0), num_steps, progress_bar=progress_bar
        )
        assert float(carry) == num_steps
        np.testing.assert_array_equal(losses, np.arange(num_steps))


def test_another_number_of_steps_compiles_nothing(count_compiles):
    def step(t, carry):
        return carry * 0.5 + t, carry

    run_steps(step, jnp.float32(1), 10, progress_bar=False)
    with count_compiles() as counter:
        run_steps(step, jnp.float32(1), 37, progress_bar=False)
        run_steps(step, jnp.float32(1), 200, progress_bar=True)
    assert counter.count == 0


def test_run_step_is_a_step_of_the_run_and_compiles_nothing_after_it(count_compiles):
    def step(t, carry):
        return carry * 0.75 + jnp.sin(carry) + t, carry

    ran, losses = run_steps(step, jnp.float32(0.3), 5, progress_bar=False)
    with count_compiles() as counter:
        carry, stepped = jnp.float32(0.3), []
        for t in range(5):
            carry, loss = run_step(step, carry, t)
            stepped.append(loss)
    assert counter.count == 0
    np.testing.assert_array_equal(np.asarray(carry), np.asarray(ran))
    np.testing.assert_array_equal(np.array(stepped), losses)


@pytest.mark.parametrize("fast_compile", [False, True])
def test_the_loop_compiled_in_background_is_the_one_run_steps_runs(
    fast_compile, count_compiles
):
    """Compiled on a thread from the carry's shapes, the loop is the one
    ``run_steps`` then runs on a carry of those shapes: nothing compiles there."""

    def step(t, carry, data):
        return carry * data + jnp.cos(carry) + t, carry

    shapes = jax.ShapeDtypeStruct((3,), jnp.float32)
    data, start = jnp.float32(0.25), jnp.zeros(3)
    with count_compiles() as counter:
        compile_in_background(step, shapes, data, fast_compile).join()
    assert counter.count == 1
    with count_compiles() as counter:
        carry, losses = run_steps(step, start, 7, data=data, fast_compile=fast_compile)
    assert counter.count == 0
    expected = np.zeros(3, np.float32)
    for t in range(7):
        assert np.array_equal(losses[t], expected)
        expected = np.asarray(step(t, expected, data)[0])
    np.testing.assert_allclose(np.asarray(carry), expected, rtol=1e-6)


class _Info(NamedTuple):
    loss: jax.Array
    sign: jax.Array
    pair: jax.Array


def _info_step(t, carry):
    info = _Info(carry, jnp.where(t % 3 == 0, 1, -1), jnp.stack([t, 2 * t]))
    return carry * 0.5 + t, info


@pytest.mark.parametrize("num_steps", [5, 70])
def test_every_leaf_of_an_info_tree_is_recorded_per_step(num_steps):
    carry = jnp.float32(1)
    for progress_bar in (False, True):
        ran, infos = run_steps(_info_step, carry, num_steps, progress_bar=progress_bar)
        assert type(infos) is _Info
        assert infos.sign.dtype == np.int32 and infos.pair.shape == (num_steps, 2)
        t = np.arange(num_steps)
        np.testing.assert_array_equal(infos.sign, np.where(t % 3 == 0, 1, -1))
        np.testing.assert_array_equal(infos.pair, np.stack([t, 2 * t], 1))
        stepped = carry
        for i in range(num_steps):
            stepped, info = run_step(_info_step, stepped, i)
            assert float(info.loss) == float(infos.loss[i]) and info.pair.shape == (2,)
        assert float(stepped) == float(ran)


def test_the_bar_shows_the_info_s_loss(capsys):
    run_steps(_info_step, jnp.float32(1), 3, progress_bar=True, delay=0.0)
    assert "loss=1.25" in capsys.readouterr().err  # the last step's: 1, 0.5, 1.25


def _vector_info_step(t, carry):
    return carry + 1.0, jnp.stack([carry, 2.0 * carry])


@pytest.mark.parametrize("progress_bar", [False, True])
def test_an_info_of_one_vector_is_recorded_and_not_shown(progress_bar, capsys):
    """An info that is one array of several numbers has no loss to show: the bar
    shows none (it used to call ``float`` on the array, a TypeError, bar or not)."""
    carry, infos = run_steps(
        _vector_info_step, jnp.float32(0), 3, progress_bar=progress_bar, delay=0.0
    )
    np.testing.assert_array_equal(infos, [[0, 0], [1, 2], [2, 4]])
    assert float(carry) == 3.0 and "loss=" not in capsys.readouterr().err


def _key_bits(rng_key, state, scale):
    """A kernel whose info is bits of the key it was handed."""
    bits = jax.random.bits(rng_key, (2,))
    return state + scale * bits[1].astype(jnp.float32), bits[0]


@pytest.mark.parametrize("num_steps", [1, 5, 64, 130])
def test_keyed_kernel_takes_the_split_keys(num_steps, count_compiles):
    """Step ``t`` of a :class:`Keyed` kernel draws with the ``t``-th key of
    ``split(rng_key, num_steps)`` (a scan over the split keys, bit for bit), and a
    run of another length compiles nothing."""
    key = jax.random.key(4)
    data = (key, (jnp.float32(1e-9),))
    run_steps(Keyed(_key_bits), jnp.float32(0), 3, data=data, progress_bar=False)
    with count_compiles() as counter:
        state, bits = run_steps(
            Keyed(_key_bits), jnp.float32(0), num_steps, data=data, progress_bar=False
        )
    assert counter.count == 0

    def body(s, k):
        return _key_bits(k, s, jnp.float32(1e-9))

    want_state, want_bits = jax.jit(
        lambda k: jax.lax.scan(body, jnp.float32(0), jax.random.split(k, num_steps))
    )(key)
    np.testing.assert_array_equal(bits, want_bits)
    np.testing.assert_array_equal(state, want_state)


def _count_to_three(t, carry):
    """Counts its steps until 3, then stays (a stopped fit)."""
    moved = jnp.where(carry < 3, carry + 1, carry)
    return moved, jnp.where(carry < 3, t.astype(jnp.float32), jnp.nan)


@pytest.mark.parametrize("progress_bar", [False, True])
def test_done_ends_the_run_after_its_slice(progress_bar):
    """``done`` is read after each slice: the slices after it are not run, and
    their infos stay NaN."""
    seen = []

    def done(carry):
        seen.append(float(carry))
        return bool(carry >= 3)

    carry, trace = run_steps(
        _count_to_three,
        jnp.float32(0),
        200,
        progress_bar=progress_bar,
        delay=1e9,
        done=done,
    )
    assert float(carry) == 3.0
    np.testing.assert_array_equal(trace[:3], [0, 1, 2])
    assert np.isnan(trace[3:]).all()
    assert len(seen) == 1  # one slice: 64 steps, or 4 with a bar (200 / 50)


class _Counting(NamedTuple):
    count: jax.Array
    stopped: jax.Array


def _count_until_three(t, carry):
    """``_count_to_three`` with its stop in a ``stopped`` flag (idle after it)."""
    count, info = _count_to_three(t, carry.count)
    return _Counting(count, count >= 3), info


@pytest.mark.parametrize("budget", [None, 2, 100])
def test_run_until_stopped_is_run_steps_with_done_inside_jit(budget):
    """The in-program loop gives run_steps(done=)'s carry and infos, traced inside
    ``jax.jit``, stops at the flag or the budget, and a new budget compiles
    nothing."""
    start = _Counting(jnp.float32(0), jnp.array(False))
    loop = jax.jit(lambda c, b: run_until_stopped(_count_until_three, c, 10, budget=b))
    carry, trace, steps = loop(start, budget)
    if budget == 2:
        want_carry, want_trace = run_steps(
            _count_until_three, start, 2, progress_bar=False
        )
        want_trace = np.r_[want_trace, np.full(8, np.nan, np.float32)]
    else:
        want_carry, want_trace = run_steps(
            _count_until_three,
            start,
            10,
            progress_bar=False,
            done=lambda c: bool(c.stopped),
        )
    assert int(steps) == min(3, budget or 10)
    assert float(carry.count) == float(want_carry.count) == int(steps)
    np.testing.assert_array_equal(np.asarray(trace), want_trace)
    size = loop._cache_size()
    if budget is not None:
        loop(start, budget + 1)
        assert loop._cache_size() == size


def test_a_program_compiled_on_a_thread_is_the_one_its_call_runs(count_compiles):
    """Lowered here and compiled on a thread, the program is the one a call of the
    jitted function on those shapes runs: nothing compiles there."""

    @jax.jit
    def program(x):
        return jnp.sin(x) * 3.0 + x.sum()

    x = jnp.arange(5.0)
    with count_compiles() as counter:
        compile_lowered(program.lower(x)).join()
    assert counter.count == 1
    with count_compiles() as counter:
        out = program(x)
    assert counter.count == 0
    np.testing.assert_allclose(np.asarray(out), np.sin(np.arange(5.0)) * 3 + 10, 1e-6)


def test_a_compile_that_fails_on_the_thread_raises_at_the_call():
    """The thread swallows the failure; the call compiles again and raises."""

    class Failing:
        def compile(self):
            raise RuntimeError("no compile")

    compile_lowered(Failing()).join()  # nothing raised here
