"""The rule by which a fit compiles cheaply (:mod:`jaxannot.runtime.compile_options`)
and the options XLA is given for it."""

import numpy as np
import pytest

import jax
import jax.numpy as jnp

from jaxannot.runtime import compile_options as co


def test_flags_already_given_are_left_to_xla_flags():
    both = "--xla_cpu_use_fusion_emitters=false --xla_backend_optimization_level=0"
    assert co.fast_options(both) == {}
    level = co.fast_options("--xla_backend_optimization_level=0")
    assert level == {"xla_cpu_use_fusion_emitters": False}
    assert co.fast_options("--xla_force_host_platform_device_count=2") == {
        "xla_cpu_use_fusion_emitters": False,
        "xla_backend_optimization_level": 1,
    }


def test_auto_compiles_fast_on_small_cpu_fits_only():
    small = [np.zeros((100, 30)), jax.ShapeDtypeStruct((100, 4), jnp.float32)]
    large = [np.zeros((co.FAST_SIZE + 1,))]
    assert co.use_fast("auto", small, "cpu")
    assert not co.use_fast("auto", large, "cpu")
    assert co.use_fast("fast", large, "cpu")
    assert not co.use_fast("optimized", small, "cpu")
    for mode in co.COMPILE_MODES:  # other backends keep XLA's defaults
        assert not co.use_fast(mode, small, "gpu")
    # a scalar counts as one element: the limit is inclusive
    assert co.use_fast("auto", [np.zeros(co.FAST_SIZE - 1), 1.0], "cpu")
    assert not co.use_fast("auto", [np.zeros(co.FAST_SIZE), 1.0], "cpu")


@pytest.mark.parametrize("mode", ["Fast", "", None, 1])
def test_an_unknown_mode_is_refused(mode):
    with pytest.raises(ValueError, match="compile must be one of"):
        co.check_compile(mode)


def test_variants_compute_the_same():
    def f(x):
        return jnp.cumsum(jnp.sin(x) * 2.0) @ x

    optimized, fast = co.jit_variants(f)
    assert (optimized is fast) == (not co.FAST_OPTIONS)
    x = jnp.linspace(0.0, 1.0, 50)
    np.testing.assert_allclose(fast(x), optimized(x), rtol=1e-6)
