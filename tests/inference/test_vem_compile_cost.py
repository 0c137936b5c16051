"""What a first VEM fit traces and compiles (issue 43, point 2): the model's
Python runs once per distinct density in the compiled programs, not once per
evaluation, and an E-step that draws nothing compiles no key split into the
step."""

import numpy as np

import jax

from benchmarks.common.toys import bernoulli_covariate_model
from jaxannot.inference import VEM
from jaxannot.inference.vem.fit import step_for


def _data():
    rng = np.random.default_rng(0)
    z = rng.integers(0, 3, 40)
    x = (rng.uniform(size=(40, 5)) < rng.uniform(size=(3, 5))[z]).astype(np.float32)
    y = (3.0 * z + rng.normal(size=40)).astype(np.float32)
    return x, y


class _Calls:
    """A call counter, keyed by identity (the model's compiled code is keyed by
    the values its closure holds: a list's count would change that key)."""

    n = 0


def _counted_model():
    """Issue 43's first model (binary features and a Gaussian covariate per item),
    a new function object (nothing compiled for it yet), and its call counter."""
    calls = _Calls()
    return bernoulli_covariate_model(calls), calls


def test_a_first_fit_runs_the_model_once_per_density():
    """13 runs of the model's Python: 2 to set up the fit, 5 in the start (its
    transforms, uniform point, observations, conjugate sites and the densities
    under L-BFGS), 6 in the EM step (its transforms and conjugate sites, twice
    the local log joint: under ``lax.map`` and under the chunked sum, and once
    the prior). Every other evaluation (the M-step's gradients, the conjugate
    update's derivatives, the E-step's prior) reuses a traced density: 21 runs
    before (issue 43). A second fit of the same shapes runs it no more."""
    model, calls = _counted_model()
    x, y = _data()
    vem = VEM(model, "z", plate="item")
    first = vem.run(jax.random.key(0), 5, x, y, k=3, progress_bar=False)
    assert np.all(np.isfinite(first.losses))
    assert calls.n <= 13, f"the model ran {calls.n} times in a first fit"
    before = calls.n
    VEM(model, "z", plate="item").run(
        jax.random.key(1), 5, x, y, k=3, progress_bar=False
    )
    assert calls.n - before <= 2, "a second fit traced the model again"


def test_the_step_of_an_exact_e_step_splits_no_key():
    """The exact E-step reads no key: its compiled step has no threefry (a key
    split is a program of its own, about 10 of the step's kernels), the state's
    key stays the loop's, and the fit is the same whether it ran in one call or
    was resumed (the E-step draws nothing from the key)."""
    model, _ = _counted_model()
    x, y = _data()
    vem = VEM(model, "z", plate="item")
    setup, _, layout, placed = vem.prepare_call((x, y), {"k": 3})
    state = vem.init(jax.random.key(0), x, y, k=3)
    step = step_for(vem, layout, 0.0)
    one_step = jax.jit(lambda state, data: step(state.iteration, state, data))
    text = one_step.lower(state, (placed, vem.estep.arrays)).as_text()
    assert "threefry" not in text
    after, _ = vem.update(state, x, y, k=3)
    assert np.array_equal(
        jax.random.key_data(after.rng_key), jax.random.key_data(state.rng_key)
    )
    whole = vem.run(jax.random.key(0), 6, x, y, k=3, progress_bar=False)
    half = vem.run(jax.random.key(0), 3, x, y, k=3, progress_bar=False)
    rest = vem.run(
        jax.random.key(0), 3, x, y, k=3, progress_bar=False, init_state=half.state
    )
    np.testing.assert_array_equal(whole.posteriors, rest.posteriors)
