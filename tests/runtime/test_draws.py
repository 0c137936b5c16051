"""The one-pass draws are ``jax.random``'s, bit for bit, and split over devices."""

import numpy as np
import pytest

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxannot.inference.vem.global_sites import random_posteriors
from jaxannot.runtime import draws

SHAPES = [(0,), (1,), (7,), (31, 3), (4, 5, 6)]
KEYS = [jax.random.key(0), jax.random.key(2**31 + 5), jax.random.PRNGKey(7)]


def _same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    bits = f"u{a.itemsize}"  # every bit, NaN or not
    np.testing.assert_array_equal(a.view(bits), b.view(bits))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("key", KEYS)
def test_draws_are_jax_random_bit_for_bit(shape, key):
    _same(draws.uniform(key, shape), jax.random.uniform(key, shape))
    _same(draws.exponential(key, shape), jax.random.exponential(key, shape))
    jitted = jax.jit(draws.exponential, static_argnums=1)
    _same(jitted(key, shape), jax.random.exponential(key, shape))
    assert np.all(np.asarray(draws.uniform(key, shape)) < 1.0)


def test_other_keys_types_and_settings_are_jax_randoms_own():
    shape = (5, 4)
    rbg = jax.random.key(3, impl="rbg")
    _same(draws.exponential(rbg, shape), jax.random.exponential(rbg, shape))
    key = jax.random.key(3)
    half = draws.uniform(key, shape, jnp.float16)
    assert half.dtype == jnp.float16
    _same(half, jax.random.uniform(key, shape, jnp.float16))
    with jax.threefry_partitionable(False):  # another hash of the counters
        original = jax.random.exponential(key, shape)
        _same(draws.exponential(key, shape), original)
    assert not np.array_equal(original, jax.random.exponential(key, shape))


def test_random_posteriors_are_normalized_jax_random_exponentials():
    key = jax.random.key(11)
    e = jax.random.exponential(key, (9, 4))
    _same(random_posteriors(key, 9, 4), e / e.sum(-1, keepdims=True))


@pytest.mark.skipif(jax.device_count() < 2, reason="needs two devices")
def test_split_over_two_devices_in_one_pass():
    """Each device draws its half of the rows, the same values as one device,
    in one fused loop (``jax.random``'s is a loop over the whole array)."""
    mesh = Mesh(np.array(jax.devices()[:2]), ("images",))
    split = NamedSharding(mesh, P("images"))
    fn = jax.jit(lambda k: draws.exponential(k, (64, 5)), out_shardings=split)
    key = jax.random.key(4)
    out = fn(key)
    assert {s.data.shape for s in out.addressable_shards} == {(32, 5)}
    assert len({s.device for s in out.addressable_shards}) == 2
    _same(out, jax.random.exponential(key, (64, 5)))
    program = fn.lower(key).compile().as_text()
    assert "u32[32,5]" in program and "u32[64,5]" not in program
    assert " while(" not in program
